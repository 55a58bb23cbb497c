//! The `extern "C"` layer (ABI sections 2-4): imports from `waverun_host_v2`, exports, buffers.
//! Everything else is [`Guest`]; this file only moves bytes.
#![allow(unsafe_code)]

use crate::{Guest, GuestLogLevel, HostImports, StorageKind, ABI_VERSION};
use std::alloc::{alloc, dealloc, Layout};
use std::cell::RefCell;

#[link(wasm_import_module = "waverun_host_v2")]
extern "C" {
    #[link_name = "clock_now_ms"]
    fn host_clock_now_ms() -> i64;
    #[link_name = "cluster_submit"]
    fn host_cluster_submit(ptr: *const u8, len: usize) -> i32;
    #[link_name = "cluster_query"]
    fn host_cluster_query(ptr: *const u8, len: usize) -> i32;
    #[link_name = "check_submit"]
    fn host_check_submit(ptr: *const u8, len: usize) -> i32;
    #[link_name = "journal_append"]
    fn host_journal_append(ptr: *const u8, len: usize) -> i32;
    #[link_name = "snapshot_write"]
    fn host_snapshot_write(ptr: *const u8, len: usize) -> i32;
    #[link_name = "storage_read"]
    fn host_storage_read(kind: i32, ptr: *mut u8, cap: usize) -> i32;
    #[link_name = "log"]
    fn host_log(level: i32, ptr: *const u8, len: usize);
}

/// The imports as a [`HostImports`].
struct WasmImports;

impl HostImports for WasmImports {
    fn clock_now_ms(&mut self) -> i64 {
        unsafe { host_clock_now_ms() }
    }
    fn cluster_submit(&mut self, operation: &str) -> i32 {
        unsafe { host_cluster_submit(operation.as_ptr(), operation.len()) }
    }
    fn cluster_query(&mut self, query: &str) -> i32 {
        unsafe { host_cluster_query(query.as_ptr(), query.len()) }
    }
    fn check_submit(&mut self, request: &str) -> i32 {
        unsafe { host_check_submit(request.as_ptr(), request.len()) }
    }
    fn journal_append(&mut self, record: &str) -> i32 {
        unsafe { host_journal_append(record.as_ptr(), record.len()) }
    }
    fn snapshot_write(&mut self, snapshot: &str) -> i32 {
        unsafe { host_snapshot_write(snapshot.as_ptr(), snapshot.len()) }
    }
    fn storage_read(&mut self, kind: StorageKind) -> Result<Option<Vec<u8>>, i32> {
        let mut buf: Vec<u8> = vec![0; 64 * 1024];
        loop {
            let n = unsafe { host_storage_read(kind as i32, buf.as_mut_ptr(), buf.len()) };
            match n {
                -1 => return Ok(None),
                n if n < 0 => return Err(n),
                n if (n as usize) <= buf.len() => {
                    buf.truncate(n as usize);
                    return Ok(Some(buf));
                }
                n => buf.resize(n as usize, 0),
            }
        }
    }
    fn log(&mut self, level: GuestLogLevel, message: &str) {
        unsafe { host_log(level as i32, message.as_ptr(), message.len()) }
    }
}

thread_local! {
    static PLUGIN: RefCell<Guest<WasmImports>> = RefCell::new(Guest::new(WasmImports));
}

fn with_plugin<T>(f: impl FnOnce(&mut Guest<WasmImports>) -> T) -> T {
    // Calls are not reentrant (ABI section 8): a nested call would panic here, i.e. trap.
    PLUGIN.with(|p| f(&mut p.borrow_mut()))
}

fn layout(len: usize) -> Layout {
    Layout::from_size_align(len, 1).expect("buffer layout")
}

/// Hands `text` to the host: `(ptr << 32) | len` of a guest buffer it frees with `waverun_free`
/// (a boxed `[u8]` has the layout `waverun_alloc` uses: size `len`, alignment 1).
fn give(text: String) -> i64 {
    let bytes = Box::into_raw(text.into_bytes().into_boxed_slice());
    let (ptr, len) = (bytes as *mut u8 as usize as u64, bytes.len() as u64);
    ((ptr << 32) | len) as i64
}

/// Takes ownership of an argument buffer from `waverun_alloc(len)`.
unsafe fn take(ptr: i32, len: i32) -> Vec<u8> {
    if len <= 0 || ptr == 0 {
        return Vec::new();
    }
    Vec::from_raw_parts(ptr as u32 as usize as *mut u8, len as usize, len as usize)
}

/// `waverun_abi_version() -> i32`.
#[no_mangle]
pub extern "C" fn waverun_abi_version() -> i32 {
    ABI_VERSION
}

/// `waverun_alloc(len) -> ptr`: never 0 for `len > 0`.
#[no_mangle]
pub extern "C" fn waverun_alloc(len: i32) -> i32 {
    if len <= 0 {
        // A non-null, never-dereferenced address; `waverun_free(_, 0)` ignores it.
        return if len == 0 { 1 } else { 0 };
    }
    let p = unsafe { alloc(layout(len as usize)) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout(len as usize));
    }
    p as usize as i32
}

/// `waverun_free(ptr, len)`.
///
/// # Safety
/// `ptr` and `len` come from `waverun_alloc(len)` or from a result.
#[no_mangle]
pub unsafe extern "C" fn waverun_free(ptr: i32, len: i32) {
    if len > 0 && ptr != 0 {
        dealloc(ptr as u32 as usize as *mut u8, layout(len as usize));
    }
}

/// `waverun_init() -> i64`.
#[no_mangle]
pub extern "C" fn waverun_init() -> i64 {
    give(with_plugin(|p| p.init()))
}

/// `waverun_request(ptr, len) -> i64`.
///
/// # Safety
/// `ptr..ptr+len` is a buffer from `waverun_alloc(len)`; this call takes ownership of it.
#[no_mangle]
pub unsafe extern "C" fn waverun_request(ptr: i32, len: i32) -> i64 {
    let arg = take(ptr, len);
    give(with_plugin(|p| p.request(&arg)))
}

/// `waverun_deliver(ptr, len) -> i64`.
///
/// # Safety
/// As [`waverun_request`].
#[no_mangle]
pub unsafe extern "C" fn waverun_deliver(ptr: i32, len: i32) -> i64 {
    let arg = take(ptr, len);
    give(with_plugin(|p| p.deliver(&arg)))
}

/// `waverun_wake() -> i64`.
#[no_mangle]
pub extern "C" fn waverun_wake() -> i64 {
    give(with_plugin(|p| p.wake()))
}

/// `waverun_status(ptr, len) -> i64`.
///
/// # Safety
/// As [`waverun_request`].
#[no_mangle]
pub unsafe extern "C" fn waverun_status(ptr: i32, len: i32) -> i64 {
    let arg = take(ptr, len);
    give(with_plugin(|p| p.status(&arg)))
}

/// `waverun_next_wakeup() -> i64`: milliseconds since the epoch, or `-1`.
#[no_mangle]
pub extern "C" fn waverun_next_wakeup() -> i64 {
    with_plugin(|p| p.next_wakeup())
}
