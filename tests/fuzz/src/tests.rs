//! Tests of the harness itself.

use crate::mutate::mutate_bytes;
use crate::node::Node;
use crate::rng::Rng;
use crate::runner::{execute, minimize, Config, Fuzzer, Outcome, Shape, Target};
use std::time::Duration;

fn mutations(seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut data = b"env in (dev,prod),tier!=db".to_vec();
    let other: &[u8] = b"{\"a\": [1, 2, 3]}";
    (0..200)
        .map(|_| {
            mutate_bytes(&mut rng, &mut data, &[other], &["in", "notin"]);
            data.clone()
        })
        .collect()
}

#[test]
fn the_mutator_is_deterministic_for_a_seed() {
    assert_eq!(mutations(7), mutations(7));
    assert_ne!(mutations(7), mutations(8));
}

fn marker_target(input: &[u8]) {
    if input.windows(5).any(|w| w == b"BOOM!") {
        panic!("marker reached");
    }
    if input == b"slow" {
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn marker_gen(_: &mut Rng) -> Vec<u8> {
    b"BOOM".to_vec()
}

const MARKER: Target = Target {
    name: "marker",
    run: marker_target,
    dict: &["!"],
    shape: Shape::Bytes,
    generate: marker_gen,
    line: marker_gen,
    about: "test",
};

#[test]
fn a_panic_is_caught_and_reported_with_its_location() {
    let out = execute(&MARKER, b"xxBOOM!xx", Duration::from_secs(5), None);
    let Outcome::Panic(p) = out else {
        panic!("expected a panic, got {out:?}");
    };
    assert_eq!(p.message, "marker reached");
    assert!(p.location.contains("tests.rs"), "{}", p.location);
    assert!(matches!(
        execute(&MARKER, b"fine", Duration::from_secs(5), None),
        Outcome::Ok(_)
    ));
    // A slow input is a failure too.
    let slow = execute(&MARKER, b"slow", Duration::from_millis(100), None);
    assert!(matches!(slow, Outcome::Slow(_)), "{slow:?}");
}

#[test]
fn the_fuzz_loop_finds_the_marker_and_writes_it_out() {
    let dir = std::env::temp_dir().join(format!("waverun-fuzz-test-{}", std::process::id()));
    let cfg = Config {
        budget: Duration::from_secs(60),
        runs: Some(20_000),
        seed: 1,
        corpus_dir: dir.join("corpus"),
        crash_dir: dir.join("crashes"),
        limit: Duration::from_secs(5),
        replay_only: false,
        export: None,
        verbose: false,
    };
    let report = Fuzzer::new(&MARKER, cfg).run();
    assert_eq!(report.crashes.len(), 1, "{:?}", report.crashes);
    let c = &report.crashes[0];
    assert_eq!(c.message, "marker reached");
    let saved = std::fs::read(&c.path).expect("the crash file exists");
    assert!(saved.windows(5).any(|w| w == b"BOOM!"));
    // Minimisation keeps the failure and drops everything else.
    let mut padded = b"0123456789".repeat(20);
    padded.splice(100..100, b"BOOM!".iter().copied());
    let (min, key) = minimize(&MARKER, &padded, Duration::from_secs(5), 10_000).expect("fails");
    assert_eq!(min, b"BOOM!");
    assert!(key.contains("tests.rs"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trees_write_json_and_yaml_that_read_back() {
    let text = br#"{"a": [1, "x y", {"b": null, "c": true}], "d": {}, "e": "2026-12-07T00:00:00Z", "f": "null"}"#;
    let (tree, json) = Node::parse(text).expect("parses");
    assert!(json);
    for out in [tree.to_json(false), tree.to_json(true), tree.to_yaml()] {
        let (back, _) =
            Node::parse(out.as_bytes()).unwrap_or_else(|| panic!("does not parse:\n{out}"));
        assert_eq!(back, tree, "{out}");
    }
    let mut t = tree.clone();
    assert!(t.remove_nth(1));
    assert_eq!(t.count(), tree.count() - tree.nth(1).unwrap().count());
}

#[test]
fn the_engine_generator_builds_commands_that_parse() {
    // Every generated command and observation must deserialise: a harness whose JSON does not
    // match the types would silently test nothing.
    let mut rng = Rng::new(3);
    for _ in 0..300 {
        let input = (crate::targets::engine::generate)(&mut rng);
        // Known engine panics are not this test's business.
        let _ = crate::runner::quietly(|| crate::targets::engine::run(&input));
    }
    let bad = crate::targets::engine::unparsed_examples();
    let mut kinds: Vec<&String> = bad.iter().collect();
    kinds.sort();
    kinds.dedup();
    assert!(
        bad.is_empty(),
        "{} generated inputs do not parse: {kinds:?}",
        bad.len()
    );
}

#[test]
fn the_document_seeds_are_valid_documents() {
    // Seeds named scenario-*, example-*, strategy-*, run-* must parse and validate, so that
    // mutation starts from documents that reach the simulator.
    use waverun_core::sim::Scenario;
    use waverun_core::{validate, UpdateRunSpec, UpdateStrategy};
    use waverun_host::parse_text;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut checked = 0;
    for (name, data) in crate::runner::corpus_files(&dir, "documents") {
        let text = String::from_utf8(data).expect("UTF-8");
        let json = name.ends_with(".json");
        let result = if name.starts_with("scenario-") || name.starts_with("example-") {
            parse_text::<Scenario>(&text, json).and_then(|s| s.validate().map_err(|e| e.message))
        } else if name.starts_with("strategy-") {
            let v: serde_json::Value = parse_text(&text, json).expect("parses");
            let inner = v
                .get("strategy")
                .or_else(|| v.get("properties").and_then(|p| p.get("strategy")))
                .cloned()
                .unwrap_or(v);
            serde_json::from_value::<UpdateStrategy>(inner)
                .map_err(|e| e.to_string())
                .and_then(|s| validate::strategy(&s).map_err(|e| e.message))
        } else if name.starts_with("run-") {
            parse_text::<UpdateRunSpec>(&text, json)
                .and_then(|r| validate::run_spec(&r).map_err(|e| e.message))
        } else {
            continue;
        };
        result.unwrap_or_else(|e| panic!("{name}: {e}"));
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} document seeds");
}

#[test]
fn harness_failures_are_deduplicated_without_their_values() {
    use crate::runner::PanicRecord;
    let rec = |m: &str| PanicRecord {
        message: m.to_string(),
        location: "tests/fuzz/src/targets/selector.rs:1:1".to_string(),
        frame: None,
    };
    let a = rec(
        r#"the canonical text "env in ()" of a term of "env in (,)" does not parse: term 1 ("env in ()"): missing value"#,
    );
    let b = rec(
        r#"the canonical text "k notin ()" of a term of "tier == dev,a notin (, ), x=y" does not parse: term 12 ("k notin ()"): missing value"#,
    );
    assert_eq!(a.key(), b.key());
    assert_ne!(a.key(), rec("serde round trip").key());
}

#[test]
fn normalize_drops_quoted_values() {
    use crate::runner::normalize;
    let e = waverun_core::selector::validate_label_key("\"X\\\"a").unwrap_err();
    assert_eq!(
        normalize(&e, 200),
        "invalid label key .. are allowed",
        "{e}"
    );
    assert_eq!(normalize("term 12 of 3 failed", 200), "term # of # failed");
    assert_eq!(
        normalize("unknown field `a`b`, expected `x`", 200),
        "unknown field .."
    );
}
