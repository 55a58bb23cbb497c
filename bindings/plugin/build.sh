#!/usr/bin/env bash
# Builds the plugin as it is published for other control planes: the `wasm` profile (LTO, one
# codegen unit, opt-level 3) then binaryen's `wasm-opt -O3`, and the core probe the same way
# (the bench compares the two). Outputs, in the target directory:
#   wasm32-unknown-unknown/wasm/waverun_plugin.opt.wasm
#   wasm32-unknown-unknown/wasm/waverun_core_probe.opt.wasm
# wasm-opt is the npm package binaryen@132 of bindings/web (package-lock.json; `npm ci` there
# when missing). It runs only when its input is newer than its output (about 40 s a module).
# Measured (host/benches/wasm_hosts.rs, 10,000 members, interleaved rounds): the release build
# 1.77-1.79x native, `wasm` profile 1.77x, `wasm` profile + wasm-opt -O3 1.49-1.57x
# (1.42-1.52x once a request's envelope was read in one pass).
# Idempotent; run from anywhere. Needs cargo, rustup and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
target_dir=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
rustup target list --installed | grep -qx wasm32-unknown-unknown ||
  rustup target add wasm32-unknown-unknown
echo "== cargo build (wasm32-unknown-unknown, profile wasm): waverun-plugin, waverun-core-probe"
cargo build --locked --profile wasm --target wasm32-unknown-unknown \
  -p waverun-plugin -p waverun-core-probe
web="$root/bindings/web"
if [ ! -x "$web/node_modules/.bin/wasm-opt" ]; then
  (cd "$web" && npm ci --no-audit --no-fund)
fi
out="$target_dir/wasm32-unknown-unknown/wasm"
for m in waverun_plugin waverun_core_probe; do
  if [ "$out/$m.opt.wasm" -nt "$out/$m.wasm" ]; then
    echo "== $m.opt.wasm is newer than $m.wasm: kept"
    continue
  fi
  echo "== wasm-opt -O3: $m.wasm ($(wc -c <"$out/$m.wasm") bytes)"
  "$web/node_modules/.bin/wasm-opt" -O3 --detect-features "$out/$m.wasm" -o "$out/$m.opt.wasm.tmp"
  mv "$out/$m.opt.wasm.tmp" "$out/$m.opt.wasm"
  echo "   -> $out/$m.opt.wasm ($(wc -c <"$out/$m.opt.wasm") bytes)"
done
