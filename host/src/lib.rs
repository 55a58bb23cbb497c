//! The waverun host: the `waverun` binary's command line ([`cli`]), the daemon's HTTP API
//! ([`api`]), the engine of a fleet ([`daemon`]), the runtime that runs the engine as a
//! WebAssembly plugin in wasmtime ([`runtime`]), the daemon's store ([`store`]), the cluster
//! providers ([`providers`]), one measurement of a health check ([`health`]), and [`serve`],
//! which puts a daemon together. Reading documents (YAML or JSON, strictly) is here at the top.
//!
//! Rooms and the way their imports point: `cli` and `api` → `daemon` (the engine thread and
//! its loop) → `runtime` (wasmtime, the ABI imports); `store` (SQLite) and `providers`
//! (simulated, exec) sit beside the runtime, and `daemon` adapts them to its traits (the
//! plugin's journal and cluster calls, `daemon/step.rs`). `runtime` imports none of them;
//! `serve` is the one place that knows every room. `health` sits beside the providers (it
//! runs commands under the exec provider's process rules; not yet wired into `daemon`).
//! [`outbound`] (a client's TLS roots, a URL's origin) serves `cli`, `providers` and `health`.
//! [`webhooks`] is events out: subscriptions, CloudEvents, signatures, the delivery lanes, one
//! attempt over the network, and the driver thread; `serve` does not start the driver yet.
#![warn(missing_docs)]

pub mod api;
pub mod cli;
pub mod clock;
pub mod daemon;
pub mod health;
pub mod outbound;
pub mod portal;
pub mod providers;
pub mod runtime;
pub mod serve;
pub mod store;
pub mod webhooks;

use serde::de::DeserializeOwned;
use std::io::Read;
use std::path::Path;
use waverun_core::document::{self, Format, MAX_DOCUMENT_BYTES};
use waverun_core::sim::Scenario;

pub use waverun_core::document::Document;

/// Parses YAML or JSON text into `T` under the document rules of
/// [`waverun_core::document`]; the error names the field path (`members[3].nodePools[0]...`).
pub fn parse_text<T: DeserializeOwned>(text: &str, json: bool) -> Result<T, String> {
    let format = if json { Format::Json } else { Format::Yaml };
    document::from_str(text, format).map_err(|e| e.to_string())
}

/// Whether a path names a JSON file (the extension decides).
pub fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

fn format_of(path: &Path) -> Format {
    if is_json(path) {
        Format::Json
    } else {
        Format::Yaml
    }
}

/// Reads a document file: only a regular file of at most [`MAX_DOCUMENT_BYTES`], checked
/// before reading (so `/dev/zero` or a FIFO is refused rather than read forever), in UTF-8.
pub fn read_document(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{shown}: not a regular file; give the path of a YAML or JSON file"
        ));
    }
    let limit = MAX_DOCUMENT_BYTES;
    if meta.len() > limit {
        return Err(format!(
            "{shown}: {} bytes; documents are at most {} MiB",
            meta.len(),
            limit >> 20
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow between the check and the read: never read more than the limit.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{shown}: more than {} MiB; documents are at most {} MiB",
            limit >> 20,
            limit >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{shown}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Real (system) time now, RFC 3339 with milliseconds: systemData and the audit log.
pub fn now_rfc3339() -> String {
    let ms = clock::Clock::now_ms(&clock::SystemClock);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Reads a YAML or JSON file (by extension) into `T` under the document rules (unknown keys
/// refused with their path, and the rest of [`waverun_core::document`]).
pub fn load_file<T: DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = read_document(path)?;
    document::from_str(&text, format_of(path)).map_err(|e| e.to_string())
}

/// Reads a scenario file.
pub fn load_scenario(path: &Path) -> Result<Scenario, String> {
    let text = read_document(path)?;
    Scenario::from_text(&text, format_of(path)).map_err(|e| e.to_string())
}

/// Reads a scenario or a strategy (bare, wrapped, or an Azure resource; see
/// [`waverun_core::document::document`]).
pub fn load_document(path: &Path) -> Result<Document, String> {
    let text = read_document(path)?;
    document::document(&text, format_of(path)).map_err(|e| e.to_string())
}
