#!/usr/bin/env bash
# The test command (README): builds the Wasm artifacts from source and runs every test — Rust
# (`cargo test --workspace`), the browser package in Node and headless Chromium, and the plugin
# under hosts nobody here wrote (Node's WebAssembly API, the wasmtime Python package).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || rustup target add wasm32-unknown-unknown

echo "== wasm artifacts"
cargo build --release --target wasm32-unknown-unknown -p waverun-core-probe -p waverun-plugin

# [browser package] (bindings/web): wasm-bindgen CLI, package generation — added by its issue.

echo "== rust tests"
cargo test --workspace

# [js and python hosts] — added by their issue.
