//! How the CLI prints what the daemon answers: `-o table` for people (the default on a
//! terminal), `-o json` and `-o yaml` for programs (the default when stdout is not a terminal),
//! flattened like `az fleet` output — the resource's `properties` at the top level beside `id`,
//! `name`, `type`, `systemData` and `eTag` — so `jq '.status.stages[].groups[].status.state'`
//! works as it does on Azure's. As in `az`, `--query` (JMESPath) picks from that document
//! first, and `-o` also takes `jsonc`/`yamlc` (coloured), `tsv` (tab-separated values, for
//! shell scripts: `--query id -o tsv`) and `none`.

use super::client::CliError;
use serde_json::{Map, Value};
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

/// `-o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Columns and trees for people.
    Table,
    /// JSON, flattened like `az fleet`.
    Json,
    /// JSON, coloured.
    Jsonc,
    /// YAML, the same document.
    Yaml,
    /// YAML, coloured.
    Yamlc,
    /// Tab-separated values: one line per item, an object's scalar fields in order.
    Tsv,
    /// Nothing (the exit code says how it went).
    None,
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

/// The `--query` of this invocation (a CLI process runs one command), compiled once.
static QUERY: OnceLock<jmespath::Expression<'static>> = OnceLock::new();

/// Compiles `--query` for every document this process prints; a bad expression is a usage
/// error naming it.
pub fn set_query(query: &str) -> Result<(), CliError> {
    let expr = jmespath::compile(query).map_err(|e| {
        CliError::Usage(format!(
            "--query: {query:?} is not a JMESPath expression: {e}"
        ))
    })?;
    let _ = QUERY.set(expr);
    Ok(())
}

/// Checks that `query` is a JMESPath expression (`flag` names it in the error).
pub fn check_query(query: &str, flag: &str) -> Result<(), CliError> {
    jmespath::compile(query).map(|_| ()).map_err(|e| {
        CliError::Usage(format!(
            "{flag}: {query:?} is not a JMESPath expression: {e}"
        ))
    })
}

/// Whether `query` on `doc` is true as JMESPath says (not null, false, empty or "").
pub fn truthy(query: &str, doc: &Value) -> Result<bool, CliError> {
    let expr = jmespath::compile(query)
        .map_err(|e| CliError::Usage(format!("{query:?} is not a JMESPath expression: {e}")))?;
    let data = jmespath::Variable::from_serializable(doc)
        .map_err(|e| CliError::Other(format!("{query:?}: {e}")))?;
    let found = expr
        .search(data)
        .map_err(|e| CliError::Usage(format!("{query:?}: {e}")))?;
    Ok(found.is_truthy())
}

/// `doc` after `--query` (itself without one).
pub fn queried(doc: &Value) -> Result<Value, CliError> {
    let Some(expr) = QUERY.get() else {
        return Ok(doc.clone());
    };
    let data = jmespath::Variable::from_serializable(doc)
        .map_err(|e| CliError::Other(format!("--query: {e}")))?;
    let found = expr
        .search(data)
        .map_err(|e| CliError::Usage(format!("--query: {e}")))?;
    serde_json::to_value(&*found).map_err(|e| CliError::Other(format!("--query: {e}")))
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

/// Prints `doc` (already flattened), after `--query`, as `format` says; `table` makes the
/// table of the whole document (a queried one is shown as generic columns).
pub fn print(
    out: &mut dyn Write,
    format: Output,
    doc: &Value,
    table: impl FnOnce(&Value) -> String,
) -> Result<(), CliError> {
    let queried_doc;
    let doc = if QUERY.get().is_some() {
        queried_doc = queried(doc)?;
        &queried_doc
    } else {
        doc
    };
    match format {
        Output::Json | Output::Jsonc => {
            let text = serde_json::to_string_pretty(doc).map_err(std::io::Error::from)?;
            let text = if format == Output::Jsonc {
                colour_json(&text)
            } else {
                text
            };
            writeln!(out, "{text}")?;
        }
        Output::Yaml | Output::Yamlc => {
            let text = serde_saphyr::to_string(doc).map_err(|e| CliError::Other(e.to_string()))?;
            let text = if format == Output::Yamlc {
                colour_yaml(&text)
            } else {
                text
            };
            out.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                writeln!(out)?;
            }
        }
        Output::Table if QUERY.get().is_some() => out.write_all(generic_table(doc).as_bytes())?,
        Output::Table => out.write_all(table(doc).as_bytes())?,
        Output::Tsv => out.write_all(tsv(doc).as_bytes())?,
        Output::None => {}
    }
    Ok(())
}

/// `az`'s tsv: a list is one line per item; an object is its scalar fields' values in order
/// (nested objects and lists left out); a scalar is itself; booleans as `True`/`False`, null as
/// an empty field.
pub fn tsv(doc: &Value) -> String {
    fn cell(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Bool(true) => Some("True".into()),
            Value::Bool(false) => Some("False".into()),
            Value::Null => Some(String::new()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
    fn line(v: &Value) -> String {
        match v {
            Value::Object(m) => m.values().filter_map(cell).collect::<Vec<_>>().join("\t"),
            Value::Array(items) => items.iter().filter_map(cell).collect::<Vec<_>>().join("\t"),
            other => cell(other).unwrap_or_default(),
        }
    }
    match doc {
        Value::Array(items) => items.iter().map(|i| line(i) + "\n").collect(),
        Value::Null => String::new(),
        other => line(other) + "\n",
    }
}

/// A queried document as columns: a list of objects by their scalar fields, an object as its
/// fields, a list of scalars one per line.
fn generic_table(doc: &Value) -> String {
    match doc {
        Value::Array(items) if items.iter().all(Value::is_object) && !items.is_empty() => {
            let header: Vec<String> = items[0]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(_, v)| !v.is_object() && !v.is_array())
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|i| header.iter().map(|h| text(i, &format!("/{h}"))).collect())
                .collect();
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            columns(&header, &rows)
        }
        Value::Object(_) => fields(doc),
        other => tsv(other),
    }
}

/// JSON with ANSI colours: keys, strings, and other scalars each their own.
fn colour_json(text: &str) -> String {
    const KEY: &str = "\x1b[94m";
    const STRING: &str = "\x1b[32m";
    const SCALAR: &str = "\x1b[33m";
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(text.len() * 2);
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            let token: String = chars[start..=i.min(chars.len() - 1)].iter().collect();
            let is_key = chars[i + 1..].iter().find(|c| !c.is_whitespace()) == Some(&':');
            out.push_str(if is_key { KEY } else { STRING });
            out.push_str(&token);
            out.push_str(RESET);
            i += 1;
        } else if c == '-' || c.is_ascii_alphanumeric() {
            let start = i;
            while i < chars.len()
                && (chars[i] == '-'
                    || chars[i] == '.'
                    || chars[i] == '+'
                    || chars[i].is_ascii_alphanumeric())
            {
                i += 1;
            }
            out.push_str(SCALAR);
            out.extend(&chars[start..i]);
            out.push_str(RESET);
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// YAML with ANSI colours on its keys.
fn colour_yaml(text: &str) -> String {
    text.lines()
        .map(|l| {
            let body = l.trim_start_matches([' ', '-']);
            let indent = &l[..l.len() - body.len()];
            match body.split_once(':') {
                Some((k, rest)) if !k.is_empty() && !k.contains(' ') || k.starts_with('"') => {
                    format!("{indent}\x1b[94m{k}\x1b[0m:{rest}\n")
                }
                _ => format!("{l}\n"),
            }
        })
        .collect()
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
