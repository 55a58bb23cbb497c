//! The core's layout, kept as issue 8 left it: no import circle between its files (a module
//! that `use`s another, directly or through others, is never used back), and no file of the
//! engine's rooms (`core/src/engine/`) over 800 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn core_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src")
}

/// Every `.rs` file under `dir`, as (module path, file): `engine::gates`, `engine` for
/// `engine/mod.rs`, `` for `lib.rs`.
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            let mut next = prefix.to_vec();
            next.push(name);
            modules(&p, &next, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let mut path = prefix.to_vec();
            if !matches!(stem, "mod" | "lib") {
                path.push(stem.to_string());
            }
            out.insert(path.join("::"), p);
        }
    }
}

/// The `use` paths of a file (braces expanded one level), outside `#[cfg(test)] mod tests`.
fn use_paths(text: &str) -> Vec<String> {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut paths = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let l = line.trim_start();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        let l = match l.strip_prefix("pub(") {
            Some(r) => r.split_once(") ").map_or(l, |(_, rest)| rest),
            None => l,
        };
        let Some(mut stmt) = l.strip_prefix("use ").map(str::to_string) else {
            continue;
        };
        while !stmt.contains(';') {
            match lines.next() {
                Some(more) => stmt.push_str(more),
                None => break,
            }
        }
        let stmt: String = stmt
            .split(';')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        match stmt.find("::{") {
            Some(b) if stmt.ends_with('}') => {
                let (head, items) = (&stmt[..b], &stmt[b + 3..stmt.len() - 1]);
                let mut depth = 0;
                let mut item = String::new();
                for c in items.chars().chain(std::iter::once(',')) {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            let first = item.split("::{").next().unwrap_or("");
                            let first = first.split(" as ").next().unwrap_or("");
                            if !first.is_empty() {
                                paths.push(format!("{head}::{first}"));
                            }
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    item.push(c);
                }
            }
            _ => paths.push(stmt),
        }
    }
    paths
}

/// The module a `use` path from module `from` lands in (the longest module prefix).
fn target(from: &str, path: &str, mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut parts: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    match parts.first() {
        Some(&"crate") => {
            base.clear();
            parts.remove(0);
        }
        Some(&"super") => {
            while parts.first() == Some(&"super") {
                base.pop();
                parts.remove(0);
            }
        }
        Some(&"self") => {
            parts.remove(0);
        }
        Some(first) => {
            // A child module named directly (`use tree::Run` in `engine/mod.rs`).
            let mut child = base.clone();
            child.push(first);
            if !mods.contains_key(&child.join("::")) {
                return None;
            }
        }
        None => return None,
    }
    let mut best = None;
    for k in 0..=parts.len() {
        let mut m = base.clone();
        m.extend_from_slice(&parts[..k]);
        let m = m.join("::");
        if mods.contains_key(&m) {
            best = Some(m);
        }
    }
    best
}

#[test]
fn the_core_has_no_import_circle_between_its_files() {
    let mut mods = BTreeMap::new();
    modules(&core_src(), &[], &mut mods);
    assert!(mods.len() > 20, "only {} modules found", mods.len());
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, file) in &mods {
        let text = std::fs::read_to_string(file).unwrap();
        let to: BTreeSet<String> = use_paths(&text)
            .iter()
            .filter_map(|p| target(m, p, &mods))
            .filter(|t| t != m)
            .collect();
        edges.insert(m.clone(), to);
    }
    // Depth-first search for a back edge; report the circle it closes.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
        circles: &mut Vec<String>,
    ) {
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for t in &edges[m] {
            match state.get(t.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|s| s == t).unwrap();
                    let mut circle = stack[from..].to_vec();
                    circle.push(t.clone());
                    circles.push(circle.join(" -> "));
                }
                Some(_) => {}
                None => visit(t, edges, state, stack, circles),
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
    }
    let (mut state, mut circles) = (BTreeMap::new(), Vec::new());
    for m in mods.keys() {
        if !state.contains_key(m) {
            visit(m, &edges, &mut state, &mut Vec::new(), &mut circles);
        }
    }
    assert!(
        circles.is_empty(),
        "import circles between core/src files: {circles:#?}"
    );
    // The check sees the imports it must: the hall imports the run tree, rooms import the hall.
    assert!(
        edges["engine"].contains("engine::tree"),
        "{:?}",
        edges["engine"]
    );
    assert!(edges["engine::progress"].contains("engine"));
}

#[test]
fn no_room_of_the_engine_is_over_800_lines() {
    let dir = core_src().join("engine");
    let mut long = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let lines = std::fs::read_to_string(&p).unwrap().lines().count();
        if lines > 800 {
            long.push(format!("{}: {lines} lines", p.display()));
        }
    }
    assert!(long.is_empty(), "split these rooms: {long:?}");
}
