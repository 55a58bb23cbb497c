//! The waverun host: reading files for the CLI (and, later, the daemon), and the runtime that
//! runs the engine as a WebAssembly plugin in wasmtime ([`runtime`]).
#![warn(missing_docs)]

pub mod runtime;

use serde::de::DeserializeOwned;
use std::path::Path;
use waverun_core::sim::Scenario;
use waverun_core::UpdateStrategy;

/// Parses YAML or JSON text into `T`; errors name the field path (`members[3].nodePools[0]...`).
pub fn parse_text<T: DeserializeOwned>(text: &str, json: bool) -> Result<T, String> {
    let value: serde_json::Value = if json {
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}

/// Whether a path names a JSON file (the extension decides).
pub fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a scenario file.
pub fn load_scenario(path: &Path) -> Result<Scenario, String> {
    let text = read(path)?;
    parse_text(&text, is_json(path))
}

/// What a file given to `waverun validate` holds.
pub enum Document {
    /// A scenario.
    Scenario(Box<Scenario>),
    /// An update strategy.
    Strategy(UpdateStrategy),
}

/// Reads a scenario or a strategy. A strategy may be bare (`{stages: [...]}`), wrapped
/// (`{strategy: {...}}`) or an Azure resource (`{properties: {strategy: {...}}}`).
pub fn load_document(path: &Path) -> Result<Document, String> {
    let text = read(path)?;
    let json = is_json(path);
    let value: serde_json::Value = parse_text(&text, json)?;
    let obj = value
        .as_object()
        .ok_or("the file must hold a mapping (a scenario or a strategy)")?;
    if obj.contains_key("members") || obj.contains_key("run") {
        return parse_text(&text, json).map(|s| Document::Scenario(Box::new(s)));
    }
    let inner = if obj.contains_key("stages") {
        value.clone()
    } else if let Some(s) = obj.get("strategy") {
        s.clone()
    } else if let Some(s) = obj.get("properties").and_then(|p| p.get("strategy")) {
        s.clone()
    } else {
        return Err(
            "neither a scenario (no `members` / `run`) nor a strategy (no `stages`)".into(),
        );
    };
    serde_path_to_error::deserialize(inner)
        .map(Document::Strategy)
        .map_err(|e| format!("{}: {}", e.path(), e.inner()))
}
