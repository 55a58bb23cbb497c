#!/usr/bin/env bash
# The daemon's API against its own OpenAPI document: starts `waverun demo` (a live rollout on the
# simulated provider, with runs, gates and members to read) on a free loopback port and runs
# schemathesis (pinned, from PyPI) over every operation with an admin token. It fails on any 5xx,
# any status code or content type the document does not list, and any response that violates
# its schema. Usage: tests/api-schema.sh [path/to/waverun] (default target/debug/waverun).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-target/debug/waverun}"
VERSION=4.32.5
ENV=target/schemathesis
# Through its Python (not the venv's script, whose #! line names where the venv was made).
ST="$ENV/bin/python -m schemathesis.cli"
pinned() { "$ENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('schemathesis') != '$VERSION')" 2>/dev/null; }
if ! pinned; then
  python3 -m venv "$ENV"
  "$ENV/bin/python" -m pip install -q "schemathesis==$VERSION"
fi
DATA="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
TOKEN="schemathesis-$RANDOM$RANDOM"
WAVERUN_TOKEN="$TOKEN" "$BIN" demo --listen "127.0.0.1:$PORT" --data-dir "$DATA/demo" >"$DATA/demo.log" 2>&1 &
DEMO=$!
cleanup() { kill "$DEMO" 2>/dev/null || true; wait "$DEMO" 2>/dev/null || true; rm -rf "$DATA"; }
trap cleanup EXIT
for _ in $(seq 240); do
  grep -q "curl" "$DATA/demo.log" 2>/dev/null && break
  kill -0 "$DEMO" 2>/dev/null || { cat "$DATA/demo.log"; exit 1; }
  sleep 0.5
done
grep -q "curl" "$DATA/demo.log" || { echo "the demo did not start:"; cat "$DATA/demo.log"; exit 1; }
$ST run "http://127.0.0.1:$PORT/openapi.json" \
  --header "Authorization: Bearer $TOKEN" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples 25 --seed 1 --request-timeout 20 --no-color
