//! `selector`: any string through `LabelSelector::parse`, and the label key / value rules.
//!
//! Checks, beyond "no panic": the parsed selector keeps its text; every key and value it holds
//! passes `validate_label_key` / `validate_label_value`; the canonical text of its requirements
//! (`Display`) parses back to the same requirements; its serde form round-trips; and
//! `LabelIndex::matching` agrees with `LabelSelector::matches` over label maps built from the
//! selector's own keys and values.

use crate::rng::Rng;
use crate::runner::feature;
use std::collections::BTreeMap;
use waverun_core::selector::{
    validate_label_key, validate_label_value, LabelIndex, LabelSelector, Requirement,
    MAX_SELECTOR_LEN,
};

/// Tokens of the selector syntax.
pub const DICT: &[&str] = &[
    "in",
    "notin",
    " in (",
    " notin (",
    "(",
    ")",
    "!",
    "=",
    "==",
    "!=",
    ",",
    " ",
    "env",
    "tier",
    "dev",
    "prod",
    "example.com/",
    "a.b-c.d/",
    "kubernetes.io/",
    "a/b/c",
    "-",
    "_",
    ".",
    "<",
    ">",
    "~",
    "&",
    "|",
    ";",
    "()",
    "(,)",
    "(a,)",
    "\u{a0}",
    "\u{3000}",
    "\u{0}",
];

fn label_maps(sel: &LabelSelector) -> Vec<BTreeMap<String, String>> {
    let mut maps: Vec<BTreeMap<String, String>> = vec![
        BTreeMap::new(),
        BTreeMap::from([("env".to_string(), "dev".to_string())]),
        BTreeMap::from([
            ("env".to_string(), "prod".to_string()),
            ("tier".to_string(), String::new()),
        ]),
    ];
    let mut all = BTreeMap::new();
    for r in sel.requirements() {
        let key = r.key().to_string();
        let values: Vec<String> = match r {
            Requirement::Equals { value, .. } | Requirement::NotEquals { value, .. } => {
                vec![value.clone()]
            }
            Requirement::In { values, .. } | Requirement::NotIn { values, .. } => values.clone(),
            Requirement::Exists { .. } | Requirement::NotExists { .. } => vec!["x".to_string()],
        };
        for v in &values {
            maps.push(BTreeMap::from([(key.clone(), v.clone())]));
            all.insert(key.clone(), v.clone());
        }
        maps.push(BTreeMap::from([(key.clone(), format!("{}z", values[0]))]));
    }
    maps.push(all.clone());
    // Every requirement's first value at once, and that map without each key in turn.
    for k in all.keys() {
        let mut m = all.clone();
        m.remove(k);
        maps.push(m);
    }
    maps
}

/// Runs one input.
pub fn run(input: &[u8]) {
    let s = String::from_utf8_lossy(input);
    let s = s.as_ref();
    for text in std::iter::once(s).chain(s.split(['=', ',', '(', ')', ' ', '!']).take(32)) {
        let k = validate_label_key(text);
        let v = validate_label_value(text);
        feature("key", k.as_ref().err().map_or("ok", String::as_str));
        feature("value", v.as_ref().err().map_or("ok", String::as_str));
        if v.is_ok() && !text.is_empty() {
            assert!(
                k.is_ok(),
                "the value {text:?} is valid but the same text is not a valid key: {k:?}"
            );
        }
    }
    let sel = match LabelSelector::parse(s) {
        Err(e) => {
            feature("parse-error", &e);
            assert!(!e.is_empty(), "an empty error message for {s:?}");
            return;
        }
        Ok(sel) => sel,
    };
    assert_eq!(sel.as_str(), s, "the selector keeps its text");
    assert!(
        !sel.requirements().is_empty(),
        "{s:?} parsed to no requirement"
    );
    for r in sel.requirements() {
        feature(
            "requirement",
            &format!("{r:?}").chars().take(12).collect::<String>(),
        );
        validate_label_key(r.key())
            .unwrap_or_else(|e| panic!("the parser accepted the key of {r}: {e}"));
        let values: &[String] = match r {
            Requirement::Equals { value, .. } | Requirement::NotEquals { value, .. } => {
                std::slice::from_ref(value)
            }
            Requirement::In { values, .. } | Requirement::NotIn { values, .. } => {
                assert!(!values.is_empty(), "{r:?}: an empty value list");
                values
            }
            _ => &[],
        };
        for v in values {
            validate_label_value(v)
                .unwrap_or_else(|e| panic!("the parser accepted the value {v:?} of {r}: {e}"));
        }
        // Each requirement's canonical text parses back to it alone.
        let text = r.to_string();
        if text.chars().count() <= MAX_SELECTOR_LEN {
            let back = LabelSelector::parse(&text).unwrap_or_else(|e| {
                panic!("the canonical text {text:?} of a term of {s:?} does not parse: {e}")
            });
            assert_eq!(
                back.requirements(),
                std::slice::from_ref(r),
                "canonical text {text:?}"
            );
        }
    }
    let canonical: Vec<String> = sel.requirements().iter().map(|r| r.to_string()).collect();
    let canonical = canonical.join(",");
    if canonical.chars().count() <= MAX_SELECTOR_LEN {
        let back = LabelSelector::parse(&canonical).unwrap_or_else(|e| {
            panic!("the canonical text {canonical:?} of {s:?} does not parse: {e}")
        });
        assert_eq!(
            back.requirements(),
            sel.requirements(),
            "canonical text {canonical:?}"
        );
    }
    // serde: a string, parsed again on the way in.
    let json = serde_json::to_string(&sel).expect("a selector serialises");
    let back: LabelSelector = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("the serde form {json} does not read back: {e}"));
    assert_eq!(back, sel, "serde round trip");
    // The index agrees with direct matching.
    let maps = label_maps(&sel);
    let direct: Vec<u32> = (0..maps.len() as u32)
        .filter(|&i| sel.matches(&maps[i as usize]))
        .collect();
    // The index reads the members' compact labels; direct matching read the maps.
    let labels: Vec<waverun_core::Labels> = maps.iter().cloned().map(Into::into).collect();
    let index = LabelIndex::new(labels.iter());
    assert_eq!(index.len(), maps.len());
    let indexed = index.matching(&sel);
    assert_eq!(
        indexed, direct,
        "LabelIndex::matching vs matches for {s:?} over {maps:?}"
    );
    feature(
        "matches",
        &format!("{}/{}", direct.len().min(3), maps.len().min(3)),
    );
}

/// A selector from the grammar's pieces.
pub fn generate(rng: &mut Rng) -> Vec<u8> {
    const KEYS: &[&str] = &[
        "env",
        "tier",
        "example.com/team",
        "a",
        "A_b.c-d",
        "x/y",
        "-bad",
        "k",
    ];
    const VALUES: &[&str] = &["dev", "prod", "", "v1", "a.b_c-d", "-x", "x y", "Z9"];
    let terms = rng.range(1, 4);
    let mut s = String::new();
    for t in 0..terms {
        if t > 0 {
            s.push_str(rng.pick(&[",", ", ", " , ", ",,"]));
        }
        let k = rng.pick(KEYS);
        let list = |rng: &mut Rng| {
            let n = rng.range(0, 3);
            (0..n)
                .map(|_| rng.pick(VALUES))
                .collect::<Vec<_>>()
                .join(rng.pick(&[",", ", "]))
        };
        match rng.below(7) {
            0 => s.push_str(&format!("{k}={}", rng.pick(VALUES))),
            1 => s.push_str(&format!("{k} == {}", rng.pick(VALUES))),
            2 => s.push_str(&format!("{k}!={}", rng.pick(VALUES))),
            3 => s.push_str(&format!("{k} in ({})", list(rng))),
            4 => s.push_str(&format!("{k} notin ({})", list(rng))),
            5 => s.push_str(k),
            _ => s.push_str(&format!("!{k}")),
        }
    }
    s.into_bytes()
}
