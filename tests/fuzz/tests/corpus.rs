//! The committed corpus as a regression suite: every file of `tests/fuzz/corpus/<target>/`
//! through its target, without mutation (what `waverun-fuzz --replay-only` does), in the normal
//! test build (debug assertions and overflow checks on). A failure lists each distinct panic
//! with the files that reach it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use waverun_fuzz::runner::{corpus_files, execute, Outcome};
use waverun_fuzz::targets::TARGETS;

#[test]
fn the_corpus_replays_without_a_failure() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut files = Vec::new();
    for t in TARGETS {
        for (name, data) in corpus_files(&root, t.name) {
            files.push((t, format!("{}/{name}", t.name), data));
        }
    }
    assert!(
        files.len() >= 20,
        "the corpus is missing: {} files under {}",
        files.len(),
        root.display()
    );
    let total: usize = files.iter().map(|(_, _, d)| d.len()).sum();
    assert!(
        total < 1 << 20,
        "the corpus is {total} bytes; keep it under 1 MiB"
    );
    for (_, name, data) in &files {
        assert!(
            data.len() < 20 * 1024,
            "{name} is {} bytes; keep corpus files under 20 KB",
            data.len()
        );
    }

    // A generous limit: this is the unoptimised test build.
    let limit = Duration::from_secs(60);
    let mut failures: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for (t, name, data) in &files {
        let out = execute(t, data, limit, None);
        let Some(key) = out.key(t.name) else {
            continue;
        };
        let message = match &out {
            Outcome::Panic(p) => p.message.lines().next().unwrap_or("").to_string(),
            Outcome::Slow(d) => format!("took {:.1} s", d.as_secs_f64()),
            Outcome::Ok(_) => unreachable!(),
        };
        failures
            .entry(format!("[{}] {key}", t.name))
            .or_insert_with(|| (message, Vec::new()))
            .1
            .push(name.clone());
    }
    if !failures.is_empty() {
        let mut report = format!(
            "{} distinct failure(s) replaying the corpus:\n",
            failures.len()
        );
        for (key, (message, names)) in &failures {
            report.push_str(&format!(
                "\n{key}\n  {message}\n  inputs: {}\n",
                names.join(", ")
            ));
        }
        panic!("{report}");
    }
}
