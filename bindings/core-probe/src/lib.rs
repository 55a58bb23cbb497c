//! The pure core as a plain WebAssembly module with **no imports**: it exports a memory
//! allocator and `probe_simulate`, which runs a scenario (JSON) through the engine and the
//! simulated fleet and returns the JSON report. CI builds it for `wasm32-unknown-unknown` and
//! checks that its import section is empty, which proves the core needs nothing from a host.
//!
//! Calling convention: the caller allocates `len` bytes with `probe_alloc`, writes the
//! scenario there, calls `probe_simulate(ptr, len)` and gets back `(out_ptr << 32) | out_len`;
//! it reads the report and frees both buffers with `probe_free`.

use waverun_core::sim::{simulate_owned, Scenario};
// Byte comparisons a word at a time on wasm32 (bindings/wasm-mem): linked for its `memcmp`.
use waverun_wasm_mem as _;

/// Allocates `len` bytes in the module's memory.
#[no_mangle]
pub extern "C" fn probe_alloc(len: u32) -> *mut u8 {
    let mut buf = Vec::<u8>::with_capacity(len as usize);
    let ptr = buf.as_mut_ptr();
    std::mem::forget(buf);
    ptr
}

/// Frees a buffer from [`probe_alloc`] or [`probe_simulate`].
///
/// # Safety
/// `ptr` and `len` must come from `probe_alloc(len)` or a `probe_simulate` result.
#[no_mangle]
pub unsafe extern "C" fn probe_free(ptr: *mut u8, len: u32) {
    drop(Vec::from_raw_parts(ptr, 0, len as usize));
}

/// Simulates the scenario at `ptr..ptr+len` (JSON) and returns `(report_ptr << 32) | report_len`.
/// An invalid scenario yields `{"error": ...}`.
///
/// # Safety
/// `ptr..ptr+len` must be initialised memory from [`probe_alloc`].
#[no_mangle]
pub unsafe extern "C" fn probe_simulate(ptr: *const u8, len: u32) -> u64 {
    let input = std::slice::from_raw_parts(ptr, len as usize);
    let out = simulate_json(input);
    let mut bytes = out.into_bytes().into_boxed_slice();
    let (p, l) = (bytes.as_mut_ptr(), bytes.len());
    std::mem::forget(bytes);
    ((p as u64) << 32) | l as u64
}

/// The same function natively: scenario JSON in, report JSON out.
pub fn simulate_json(input: &[u8]) -> String {
    let result = std::str::from_utf8(input)
        .map_err(|e| e.to_string())
        .and_then(|s| Scenario::from_json(s).map_err(|e| e.to_string()))
        .and_then(|s| simulate_owned(s).map_err(|e| e.to_string()));
    match result {
        Ok(report) => serde_json::to_string(&report).expect("report serialises"),
        Err(e) => serde_json::json!({ "error": e }).to_string(),
    }
}
