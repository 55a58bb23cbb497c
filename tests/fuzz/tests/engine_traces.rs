//! What the engine shows its hosts, recorded: for 400 generated input streams (seeds 0..400 of
//! the engine target's generator) and every file of `corpus/engine/`, the digest of each input
//! with its result, every output, every next wakeup, and every run's status and plan
//! (`targets::engine::trace_digest`), compared with `golden/engine-traces.txt`.
//!
//! The engine's inside may be rebuilt; what it shows must not change. A change that means to
//! change behaviour records the new digests with
//! `WAVERUN_BLESS=1 cargo test -p waverun-fuzz --test engine_traces`.

use std::path::Path;
use waverun_fuzz::rng::Rng;
use waverun_fuzz::runner::corpus_files;
use waverun_fuzz::targets::engine::{generate, trace_digest, trace_text};

const SEEDS: u64 = 400;

fn traces() -> String {
    let mut out = String::new();
    for seed in 0..SEEDS {
        let input = generate(&mut Rng::new(seed));
        out.push_str(&format!("seed {seed}: {}\n", trace_digest(&input)));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut files = corpus_files(&root, "engine");
    files.sort();
    for (name, data) in files {
        out.push_str(&format!("corpus/engine/{name}: {}\n", trace_digest(&data)));
    }
    out
}

/// With `WAVERUN_TRACE_DIR=DIR`, writes every stream's whole trace to `DIR/<name>.txt`, to diff
/// the traces of two builds line by line.
fn write_texts(dir: &std::ffi::OsStr) {
    let dir = Path::new(dir);
    std::fs::create_dir_all(dir).unwrap();
    for seed in 0..SEEDS {
        let input = generate(&mut Rng::new(seed));
        std::fs::write(dir.join(format!("seed-{seed}.txt")), trace_text(&input)).unwrap();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, data) in corpus_files(&root, "engine") {
        std::fs::write(dir.join(format!("{name}.txt")), trace_text(&data)).unwrap();
    }
}

#[test]
fn the_engine_shows_its_hosts_what_was_recorded() {
    if let Some(dir) = std::env::var_os("WAVERUN_TRACE_DIR") {
        write_texts(&dir);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/engine-traces.txt");
    let actual = traces();
    if std::env::var_os("WAVERUN_BLESS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let differ: Vec<String> = actual
        .lines()
        .zip(expected.lines())
        .filter(|(a, e)| a != e)
        .map(|(a, e)| format!("got {a:?}, recorded {e:?}"))
        .collect();
    assert!(
        differ.is_empty() && actual.lines().count() == expected.lines().count(),
        "{} of {} traces differ from golden/engine-traces.txt (see one with \
         `waverun-fuzz --explain FILE --target engine`):\n{}",
        differ.len(),
        expected.lines().count(),
        differ.join("\n")
    );
}
