//! Shared helpers for the cross-crate tests.

pub mod bench_scenario;
