#!/usr/bin/env bash
# The test command (README): builds the Wasm artifacts from source and runs every test — Rust
# (`cargo test --workspace`), the browser package in Node and headless Chromium, and the plugin
# under hosts nobody here wrote (Node's WebAssembly API, the wasmtime Python package).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# The pinned toolchain (rust-toolchain.toml) with its components and target: rustup does not
# install it by itself where RUSTUP_AUTO_INSTALL=0.
rustup toolchain install >/dev/null 2>&1 || rustup toolchain install
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || rustup target add wasm32-unknown-unknown

echo "== wasm artifacts [${SECONDS}s]"
cargo build --release --target wasm32-unknown-unknown -p waverun-core-probe -p waverun-plugin

# The native build, once: every test, bin and example of the workspace in one profile (dev) and
# one feature set, so wasmtime is compiled once. `cargo build -p waverun` would resolve features
# for the host alone (without the other members, e.g. bindings/web's wasm-bindgen, and without
# the dev-dependencies, e.g. wat and proptest, which all enable features of crates under
# wasmtime) and compile wasmtime a second time. The Wasm hosts' tests below use this build's target/debug/waverun and
# target/debug/examples/scenario_json, and `cargo test --workspace` finds it fresh. Its messages
# name every test executable (tests/suites.py: suites run on their own below use them as built
# here; `cargo test --test NAME` would resolve features again and recompile the workspace).
echo "== native build (cargo test --workspace --no-run) [${SECONDS}s]"
mkdir -p target
cargo test --workspace --no-run --message-format=json-render-diagnostics > target/test-build.jsonl
python3 tests/suites.py index target/test-build.jsonl target/test-executables.tsv

# [browser package] (bindings/web): the wasm-bindgen package (build.sh: pinned wasm-bindgen-cli,
# wasm-opt from npm binaryen), then its tests under Node and headless Chromium; the differential
# tests compare it with the native CLI (target/debug/waverun, built above).
echo "== browser package (bindings/web) [${SECONDS}s]"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver) >/dev/null
  else
    echo "chromium is missing (apt-get install -y chromium chromium-driver): the browser test will fail"
  fi
fi
(cd bindings/web && npm ci --no-audit --no-fund)
bindings/web/build.sh
node --test bindings/web/test/

# [portal] (web/): the ES modules the daemon embeds and serves as they are, type-checked with
# `tsc --checkJs --strict` (typescript from npm, pinned: a check, never a build step), then the
# portal in headless Chromium against a real daemon (target/debug/waverun serve, built above)
# with the simulated provider; screenshots of every page go to target/portal-screenshots/.
echo "== portal (web): type check and browser tests [${SECONDS}s]"
(cd web && npm ci --no-audit --no-fund)
(cd web && npx tsc -p .)
node --test web/test/

# [health checks] host/tests/health_checks.rs queries a real Prometheus (Debian's package,
# started by the test on loopback); the test fails, saying so, when it is missing.
if [ ! -x /usr/bin/prometheus ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus) >/dev/null
  else
    echo "prometheus is missing (apt-get install -y prometheus): the health-check test will fail"
  fi
fi

# [PostgreSQL] host/tests/store_postgres.rs runs the store on a real PostgreSQL (Debian's package;
# each test file starts its own server with initdb in a temporary directory, on loopback, and
# stops it); the tests fail, saying so, when it is missing.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql) >/dev/null
  else
    echo "PostgreSQL is missing (apt-get install -y postgresql): the PostgreSQL store tests will fail"
  fi
fi

# [webhooks] host/tests/webhooks_*.rs check what the daemon sends with implementations nobody
# here wrote: PyPI's standardwebhooks (signatures) and cloudevents (bodies), in a venv made
# again only when the pins change (it keeps a copy of the requirements it was made from).
WH_VENV=target/webhook-receivers
if ! cmp -s tests/webhooks/requirements.txt "$WH_VENV/requirements.txt"; then
  echo "== webhook receivers' Python (tests/webhooks/requirements.txt) [${SECONDS}s]"
  rm -rf "$WH_VENV"
  python3 -m venv "$WH_VENV"
  "$WH_VENV/bin/python" -m pip install -q --disable-pip-version-check -r tests/webhooks/requirements.txt
  cp tests/webhooks/requirements.txt "$WH_VENV/requirements.txt"
fi

# [suites that wait on real time] these four spend minutes waiting for a fake ARM's operations,
# webhook retries and leader leases (a few seconds of CPU each): they run side by side after
# the others, each from its own executable, instead of one after another inside `cargo test`.
WALL_CLOCK_SUITES=(serve_aks serve_aks_crash serve_webhooks serve_ha)
# (Through a variable: `set -e` stops at a failed command substitution, not at a failed
# process substitution.)
LEAVE_OUT_ARGS=$(python3 tests/suites.py skips target/test-executables.tsv "${WALL_CLOCK_SUITES[@]}")
mapfile -t LEAVE_OUT <<< "$LEAVE_OUT_ARGS"

echo "== rust tests (but ${WALL_CLOCK_SUITES[*]}) [${SECONDS}s]"
cargo test --workspace -- "${LEAVE_OUT[@]}"

echo "== rust tests that wait on real time, side by side: ${WALL_CLOCK_SUITES[*]} [${SECONDS}s]"
python3 tests/suites.py run target/test-executables.tsv target/wall-clock-suites "${WALL_CLOCK_SUITES[@]}"

# [the daemon suite on PostgreSQL] the same tests of the daemon — API, bad input, crashes, the
# CLI, the end-to-end run, profiles, the portal — again with every daemon's state on
# a private PostgreSQL server (tests/postgres-server.sh: initdb into a temporary directory,
# loopback, a free port; stopped at the end), each daemon in a database of its own
# (WAVERUN_TEST_POSTGRES, read by host/tests/runtime_support), so the two stores cannot drift.
echo "== the daemon suite again, on PostgreSQL [${SECONDS}s]"
PG_SUITE_DIR=$(mktemp -d)
trap 'tests/postgres-server.sh stop "$PG_SUITE_DIR"' EXIT
WAVERUN_TEST_POSTGRES=$(tests/postgres-server.sh start "$PG_SUITE_DIR")
export WAVERUN_TEST_POSTGRES
for suite in serve_api serve_bad_input serve_crash cli_client serve_e2e serve_profiles; do
  python3 tests/suites.py run target/test-executables.tsv target/postgres-suites "$suite"
done
node --test web/test/portal.test.mjs
unset WAVERUN_TEST_POSTGRES

# [js and python hosts] — the plugin (bindings/plugin, bindings/ABI.md) under hosts nobody here
# wrote: Node's own WebAssembly API and the wasmtime package from PyPI. Each runs every scenario
# through the plugin (also with crashes and snapshots) and compares the report with
# `waverun simulate -o json`, byte for byte.
echo "== plugin imports [${SECONDS}s]"
python3 .ci/wasm-imports.py target/wasm32-unknown-unknown/release/waverun_plugin.wasm \
  --expect bindings/plugin/imports.txt

echo "== plugin in Node (WebAssembly API) [${SECONDS}s]"
node --test tests/js/

echo "== plugin in Python (wasmtime 50.0.1) [${SECONDS}s]"
PY_HOSTS=target/py-hosts
PY="$PY_HOSTS/bin/python"
wasmtime_pinned() { "$1" -c 'import importlib.metadata as m, sys; sys.exit(m.version("wasmtime") != "50.0.1")' 2>/dev/null; }
if ! wasmtime_pinned "$PY"; then
  if python3 -m venv "$PY_HOSTS" 2>/dev/null && "$PY" -m pip --version >/dev/null 2>&1; then
    "$PY" -m pip install -q "wasmtime==50.0.1"
  else
    PY=python3 # no venv module here: install for the user instead
    wasmtime_pinned "$PY" || "$PY" -m pip install -q --user "wasmtime==50.0.1"
  fi
fi
PYTHONDONTWRITEBYTECODE=1 "$PY" -m unittest discover -s tests/python -v

echo "== the fake Azure for the aks provider (tests/aks: ARM, Entra, IMDS; stdlib Python) [${SECONDS}s]"
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/aks -v

# [Azure's SDK] azure-mgmt-containerservicefleet (PyPI, every dependency pinned in
# tests/azure/requirements.txt) drives target/debug/waverun serve (built above) through its
# Azure Resource Manager paths, over HTTPS with a test CA. The venv is made again only when the
# pins change (it keeps a copy of the requirements it was made from).
echo "== Azure's SDK for Python against the daemon's ARM paths (tests/azure) [${SECONDS}s]"
AZ_VENV=target/azure-sdk
# The test makes its CA and certificate with the openssl command.
if ! command -v openssl >/dev/null && [ "$(id -u)" = 0 ]; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl) >/dev/null
fi
if ! cmp -s tests/azure/requirements.txt "$AZ_VENV/requirements.txt"; then
  rm -rf "$AZ_VENV"
  python3 -m venv "$AZ_VENV"
  "$AZ_VENV/bin/python" -m pip install -q --disable-pip-version-check -r tests/azure/requirements.txt
  cp tests/azure/requirements.txt "$AZ_VENV/requirements.txt"
fi
PYTHONDONTWRITEBYTECODE=1 "$AZ_VENV/bin/python" -m unittest discover -s tests/azure -v

# [daemon API] — schemathesis (PyPI, pinned) against /openapi.json of a live `waverun demo`: no 5xx,
# no undocumented status or content type, no response outside its schema.
echo "== the daemon's API against its OpenAPI document (schemathesis) [${SECONDS}s]"
tests/api-schema.sh target/debug/waverun
