//! Byte-for-byte what the `waverun` binary prints for every scenario in the repository, compared
//! with the outputs recorded in `tests/golden/`. The engine's inside may be rebuilt (issue 8: the
//! settle loop, typed events); what users see must not move by one byte unless a change means it.
//!
//! Each scenario file gets one golden file holding four outputs: `simulate -o json`, `simulate`
//! (text), `plan -o json` and `plan` (text). A change that is meant to change behaviour records
//! the new outputs with `WAVERUN_BLESS=1 cargo test -p waverun --test golden` and shows them in its
//! diff.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Every scenario file in the repository, as paths relative to the workspace root.
fn scenario_files() -> Vec<String> {
    let root = root();
    let mut files = Vec::new();
    let dirs = [
        ("host/examples", ""),
        ("tests/scenarios", ""),
        ("tests/scenarios/regressions", ""),
        ("tests/scenarios/health", ""),
        ("tests/scenarios/profiles", ""),
        ("tests/js/scenarios", ""),
        ("tests/fuzz/corpus/documents", "scenario-"),
        ("tests/fuzz/corpus/documents", "example-"),
    ];
    for (dir, prefix) in dirs {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| {
                e.expect("a directory entry")
                    .file_name()
                    .into_string()
                    .unwrap()
            })
            .filter(|n| n.starts_with(prefix))
            .filter(|n| n.ends_with(".yaml") || n.ends_with(".json"))
            // The daemon's config example, not a scenario.
            .filter(|n| !(dir == "host/examples" && n == "waverun.yaml"))
            .collect();
        names.sort();
        files.extend(names.into_iter().map(|n| format!("{dir}/{n}")));
    }
    files
}

/// What the binary prints for `args`, or its error (exit code and stderr) as text.
fn waverun(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .expect("waverun runs");
    let mut text = String::from_utf8(o.stdout).expect("UTF-8 output");
    if !o.status.success() {
        text.push_str(&format!(
            "exit {:?}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    text
}

/// The four outputs of one scenario file, with a header line before each.
fn outputs(file: &str) -> String {
    let mut all = String::new();
    for args in [
        &["simulate", "-o", "json"][..],
        &["simulate"][..],
        &["plan", "-o", "json"][..],
        &["plan"][..],
    ] {
        let mut full: Vec<&str> = args.to_vec();
        full.push(file);
        all.push_str(&format!("===== waverun {}\n", full.join(" ")));
        all.push_str(&waverun(&full));
    }
    all
}

fn golden_path(file: &str) -> PathBuf {
    root()
        .join("tests/golden")
        .join(format!("{}.out", file.replace('/', "__")))
}

#[test]
fn every_scenario_prints_the_recorded_outputs_byte_for_byte() {
    let bless = std::env::var_os("WAVERUN_BLESS").is_some();
    let files = scenario_files();
    assert!(
        files.len() >= 30,
        "only {} scenario files found",
        files.len()
    );
    let mut differ = Vec::new();
    for file in &files {
        let actual = outputs(file);
        let path = golden_path(file);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (record it with WAVERUN_BLESS=1 cargo test -p waverun --test golden)",
                path.display()
            )
        });
        if actual != expected {
            let line = actual
                .lines()
                .zip(expected.lines())
                .position(|(a, e)| a != e)
                .unwrap_or_else(|| actual.lines().count().min(expected.lines().count()));
            let show = |t: &str| t.lines().nth(line).unwrap_or("<end>").to_string();
            differ.push(format!(
                "{file}: line {}: expected {:?}, got {:?}",
                line + 1,
                show(&expected),
                show(&actual)
            ));
        }
    }
    // No golden without its scenario: a renamed file must take its golden with it.
    let mut stale = Vec::new();
    for e in std::fs::read_dir(root().join("tests/golden")).unwrap() {
        let p = e.unwrap().path();
        // `cli/` holds the CLI's tables (host/tests/cli_golden.rs).
        if p.is_dir() {
            continue;
        }
        if !files.iter().any(|f| golden_path(f) == p) {
            stale.push(p.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "golden files without a scenario: {stale:?}"
    );
    assert!(
        differ.is_empty(),
        "{} of {} scenarios print something else than recorded in tests/golden/:\n{}",
        differ.len(),
        files.len(),
        differ.join("\n")
    );
}
