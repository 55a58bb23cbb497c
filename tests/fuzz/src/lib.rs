//! # waverun-fuzz: a fuzz harness on the stable toolchain
//!
//! No cargo-fuzz and no coverage instrumentation: a small mutational fuzzer of its own
//! (deterministic PRNG, byte-level and structure-aware mutations, a committed corpus replayed
//! first, inputs that reach new *behaviour* — error kinds, event kinds, states the targets
//! report with [`runner::feature`] — kept as new seeds), over four targets ([`targets`]):
//! the label-selector parser, scenario / strategy / run documents, the plugin's ABI envelopes
//! and the engine's input stream. Panics are caught and deduplicated by location; slow inputs
//! count as failures. See `tests/fuzz/README.md`.

pub mod mutate;
pub mod node;
pub mod rng;
pub mod runner;
pub mod targets;

#[cfg(test)]
mod tests;
