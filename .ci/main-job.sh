#!/usr/bin/env bash
# The README's main job as a person runs it: `waverun demo` in a fresh directory, then the very
# commands it prints (watch the run, list the pending gates, approve one, the events, the audit)
# until the rollout ends.
#
# First life: the README's command exactly (default address and data dir, fleet time at 2000×),
# long enough to see the run start upgrading clusters; then Ctrl-C, which must stop it cleanly.
# Second life: `waverun demo` again in the same directory continues the same run; it is given
# `--time-scale 50000` so that CI does not wait the three minutes the rollout takes at the
# default pace. The gate is approved with the printed command; the run must end Completed.
# Every wait is bounded. Usage: .ci/main-job.sh [path/to/waverun] (default target/release/waverun).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-target/release/waverun}"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
WORK="$(mktemp -d)"
DEMO=""
cleanup() {
  if [ -n "$DEMO" ]; then kill "$DEMO" 2>/dev/null || true; wait "$DEMO" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
fail() { echo "main job: $*" >&2; for f in "$WORK"/life*.log; do echo "--- $f" >&2; tail -n 40 "$f" >&2; done; exit 1; }

# The README's command listens on 127.0.0.1:7700; on a machine where that port is taken, a free one.
LISTEN=()
if ! python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 7700))' 2>/dev/null; then
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  LISTEN=(--listen "127.0.0.1:$PORT")
  echo "main job: port 7700 is taken here; the demo listens on $PORT"
fi

# start LOG [ARGS...]: starts the demo, waits (at most 60 s) until it has printed its instructions.
start() {
  local log="$1"; shift
  "$BIN" demo "${LISTEN[@]}" "$@" >"$log" 2>"$log.err" &
  DEMO=$!
  for _ in $(seq 240); do
    grep -q "Ctrl-C stops" "$log" 2>/dev/null && return 0
    kill -0 "$DEMO" 2>/dev/null || fail "the demo exited before it was ready"
    sleep 0.25
  done
  fail "the demo printed no instructions within 60 s"
}
stop() {
  kill -INT "$DEMO"
  local rc=0
  wait "$DEMO" || rc=$?
  DEMO=""
  [ "$rc" = 0 ] || fail "the demo exited with $rc after Ctrl-C"
}
# The printed commands, in the order the demo prints them.
cmd() { grep '^  curl' "$1" | sed -n "${2}p"; }

# --- first life: the README's command
start life1.log
cat life1.log
eval "$(grep -o 'export WAVERUN_TOKEN=[0-9a-zA-Z_-]*' life1.log)"
[ -n "${WAVERUN_TOKEN:-}" ] || fail "no token printed"
WATCH="$(cmd life1.log 1)"; GATES="$(cmd life1.log 2)"; APPROVE="$(cmd life1.log 3)"
EVENTS="$(cmd life1.log 4)"; AUDIT="$(cmd life1.log 5)"
[ -n "$AUDIT" ] || fail "the demo printed fewer than five commands"
grep -q "started now" life1.log || fail "the first life did not start the run"
state="$(eval "$WATCH" | jq -r .state)"
case "$state" in Running|Pending) ;; *) fail "the run is $state right after the demo started" ;; esac
started=""
for _ in $(seq 120); do
  started="$(eval "$EVENTS" | grep -c MemberStarted || true)"
  [ "$started" -gt 0 ] && break
  sleep 0.5
done
[ "$started" -gt 0 ] || fail "no cluster started upgrading within 60 s"
echo "main job: first life: the run is $state, $started cluster(s) started; Ctrl-C"
stop
grep -q "stopping" life1.log || fail "Ctrl-C did not stop the demo cleanly"

# --- second life: the same directory continues, at a faster clock
start life2.log --time-scale 50000
grep -q "continuing" life2.log || fail "the second life did not continue the run"
approved=""
state=""
for _ in $(seq 480); do
  state="$(eval "$WATCH" | jq -r .state)"
  case "$state" in Running|Pending|Stopping) ;; *) break ;; esac
  if [ -z "$approved" ]; then
    gate="$(eval "$GATES" | jq -r .name | head -n 1)"
    if [ -n "$gate" ]; then
      answer="$(eval "${APPROVE//GATE/$gate}")"
      [ "$answer" = '"Completed"' ] || fail "approving gate $gate answered $answer"
      approved="$gate"
      echo "main job: approved gate $gate (production sign-off)"
    fi
  fi
  sleep 0.25
done
[ -n "$approved" ] || fail "the approval gate never became pending"
[ "$state" = Completed ] || fail "the run ended $state, not Completed (or did not end within 2 minutes)"
eval "$WATCH" | jq -c '{state, stages: [.stages[] | {(.name): .state}] | add}'
eval "$AUDIT" | jq -e --arg g "$approved" 'map(select(.action == "gates.approve" and (.target | endswith($g)) and .outcome == "ok")) | length == 1' >/dev/null \
  || fail "the audit log does not show the approval of gate $approved"
echo "main job: the run Completed after the approval, which the audit log records"
stop
