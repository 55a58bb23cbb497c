//! The fuzz targets.

pub mod abi;
pub mod documents;
pub mod engine;
pub mod selector;

use crate::runner::{Shape, Target};

fn no_line(_: &mut crate::rng::Rng) -> Vec<u8> {
    Vec::new()
}

/// Every target, in the order they run.
pub const TARGETS: &[Target] = &[
    Target {
        name: "selector",
        run: selector::run,
        dict: selector::DICT,
        shape: Shape::Bytes,
        generate: selector::generate,
        line: no_line,
        about: "LabelSelector::parse, validate_label_key/value; canonical text and serde round trips; LabelIndex vs matches",
    },
    Target {
        name: "documents",
        run: documents::run,
        dict: documents::DICT,
        shape: Shape::Document,
        generate: documents::generate,
        line: no_line,
        about: "YAML/JSON into Scenario, UpdateStrategy, UpdateRunSpec; round trips; validate; bounded simulation",
    },
    Target {
        name: "abi",
        run: abi::run,
        dict: abi::DICT,
        shape: Shape::Lines,
        generate: abi::generate,
        line: abi::line,
        about: "the plugin natively: init, request/deliver/status/wake envelopes, crash and replay; replies are envelopes",
    },
    Target {
        name: "engine",
        run: engine::run,
        dict: engine::DICT,
        shape: Shape::Bytes,
        generate: engine::generate,
        line: no_line,
        about: "byte-driven commands, observations and time for one Engine; invariants after every input",
    },
];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
