//! How the CLI prints what the daemon answers: `-o table` for people (the default on a
//! terminal), `-o json` and `-o yaml` for programs (the default when stdout is not a terminal),
//! flattened like `az fleet` output — the resource's `properties` at the top level beside `id`,
//! `name`, `type`, `systemData` and `eTag` — so `jq '.status.stages[].groups[].status.state'`
//! works as it does on Azure's.

use super::client::CliError;
use serde_json::{Map, Value};
use std::io::{IsTerminal, Write};

/// `-o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Columns and trees for people.
    Table,
    /// JSON, flattened like `az fleet`.
    Json,
    /// YAML, the same document.
    Yaml,
}

impl Output {
    /// What `-o` means when it was not given: a table on a terminal, JSON otherwise.
    pub fn or_default(given: Option<Output>) -> Output {
        given.unwrap_or(if std::io::stdout().is_terminal() {
            Output::Table
        } else {
            Output::Json
        })
    }
}

/// A resource as `az fleet` prints it: `properties`' fields at the top level.
pub fn flatten(resource: &Value) -> Value {
    let Some(obj) = resource.as_object() else {
        return resource.clone();
    };
    let mut out = Map::new();
    for (k, v) in obj {
        if k == "properties" {
            if let Some(p) = v.as_object() {
                for (pk, pv) in p {
                    out.insert(pk.clone(), pv.clone());
                }
            }
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// A list answer's items (`{value: [...]}`), flattened.
pub fn flatten_list(list: &Value) -> Vec<Value> {
    list.get("value")
        .and_then(Value::as_array)
        .map(|items| items.iter().map(flatten).collect())
        .unwrap_or_default()
}

/// Prints `doc` (already flattened) as JSON or YAML, or `table` of it.
pub fn print(
    out: &mut dyn Write,
    format: Output,
    doc: &Value,
    table: impl FnOnce(&Value) -> String,
) -> Result<(), CliError> {
    match format {
        Output::Json => {
            serde_json::to_writer_pretty(&mut *out, doc).map_err(std::io::Error::from)?;
            writeln!(out)?;
        }
        Output::Yaml => {
            let text = serde_saphyr::to_string(doc).map_err(|e| CliError::Other(e.to_string()))?;
            out.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                writeln!(out)?;
            }
        }
        Output::Table => out.write_all(table(doc).as_bytes())?,
    }
    Ok(())
}

/// Columns: a header and rows, each column as wide as its widest cell; empty cells print `-`.
pub fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            let n = if c.is_empty() { 1 } else { c.chars().count() };
            if i < widths.len() {
                widths[i] = widths[i].max(n);
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let c = if c.is_empty() { "-" } else { c };
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// The string at a JSON pointer (`/status/state`), or "".
pub fn text(v: &Value, pointer: &str) -> String {
    match v.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// `k=v k2=v2` of a labels object, sorted.
pub fn labels(v: Option<&Value>) -> String {
    let Some(Value::Object(m)) = v else {
        return String::new();
    };
    m.iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A key/value listing of a flattened resource's scalar fields, nested objects as `a.b`.
pub fn fields(doc: &Value) -> String {
    let mut rows = Vec::new();
    walk("", doc, &mut rows);
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

fn walk(prefix: &str, v: &Value, rows: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                walk(&p, v, rows);
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                .collect();
            rows.push((prefix.to_string(), parts.join(", ")));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(&format!("{prefix}[{i}]"), item, rows);
            }
        }
        Value::String(s) => rows.push((prefix.to_string(), s.clone())),
        Value::Null => {}
        other => rows.push((prefix.to_string(), other.to_string())),
    }
}
