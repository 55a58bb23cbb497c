#!/usr/bin/env bash
# The README's main job as a person runs it: `waverun demo` in a fresh directory, then, in
# "another terminal", the very lines it prints: the CLI's set-up (token, alias), `updaterun
# watch`, `gate list`, `gate approve`, `updaterun wait`, and the curl lines.
#
# First life: the README's command exactly (default address and data dir, fleet time at 2000×),
# long enough for `watch` to show clusters upgrading; then Ctrl-C, which must stop it cleanly.
# Second life: `waverun demo` again in the same directory continues the same run; it is given
# `--time-scale 50000` so that CI does not wait the three minutes the rollout takes at the
# default pace. The printed `wait` runs while the gate is approved with the printed commands;
# it must exit 0 (Completed), `watch` must end with the run, and the audit log must show the
# approval. Every wait is bounded.
# Usage: .ci/main-job.sh [path/to/waverun] (default target/release/waverun).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-target/release/waverun}"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
WORK="$(mktemp -d)"
PIDS=()
# A background `eval "$CMD" &` is a subshell whose child is the waverun process: end both.
end() { pkill -P "$1" 2>/dev/null || true; kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
cleanup() {
  for p in "${PIDS[@]}"; do end "$p"; done
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
fail() {
  echo "main job: $*" >&2
  for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done
  exit 1
}
# The printed lines say `waverun ...`, with an alias when the binary is not on PATH; in this
# script that is a function.
waverun() { "$BIN" "$@"; }

# The README's command listens on 127.0.0.1:7700; on a machine where that port is taken, a free one.
LISTEN=()
if ! python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 7700))' 2>/dev/null; then
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  LISTEN=(--listen "127.0.0.1:$PORT")
  echo "main job: port 7700 is taken here; the demo listens on $PORT"
fi

DEMO=""
# start LOG [ARGS...]: starts the demo, waits (at most 60 s) until it has printed its instructions.
start() {
  local log="$1"; shift
  "$BIN" demo "${LISTEN[@]}" "$@" >"$log" 2>"${log%.log}.err" &
  DEMO=$!
  PIDS+=("$DEMO")
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
  [ "$rc" = 0 ] || fail "the demo exited with $rc after Ctrl-C"
}
# The line printed after the one that starts with $2 (the command under its heading).
after() { grep -A1 "^$2" "$1" | sed -n 2p | sed 's/^  //'; }

# --- first life: the README's command
start life1.log
cat life1.log
eval "$(grep '^  export WAVERUN_TOKEN=' life1.log)"
[ -n "${WAVERUN_TOKEN:-}" ] || fail "no token printed"
WATCH="$(after life1.log 'Watch the run live')"
GATES="$(after life1.log "The run's gates waiting")"
APPROVE="$(after life1.log 'Approve one')"
WAIT="$(after life1.log 'Wait for the end')"
AUDIT="$(grep '^  curl' life1.log | grep /audit | sed 's/^  //')"
for c in "$WATCH" "$GATES" "$APPROVE" "$WAIT" "$AUDIT"; do [ -n "$c" ] || fail "an instruction is missing"; done
grep -q "started now" life1.log || fail "the first life did not start the run"
# watch, without a terminal, prints one line per event: the clusters start upgrading.
eval "$WATCH" >watch1.log 2>&1 &
W1=$!
PIDS+=("$W1")
for _ in $(seq 240); do
  grep -q MemberStarted watch1.log && break
  sleep 0.25
done
grep -q MemberStarted watch1.log || fail "watch showed no cluster starting within 60 s"
echo "main job: first life: watch shows $(grep -c MemberStarted watch1.log) cluster(s) upgrading; Ctrl-C"
stop
grep -q "stopping" life1.log || fail "Ctrl-C did not stop the demo cleanly"
end "$W1"
# The requests of the set-up and of watch are logged to the data directory's log, not over the
# banner in the terminal.
grep -q 'request method=' waverun-demo/waverun.log || fail "the demo's log (waverun-demo/waverun.log) has no request lines"
if grep -q 'request method=' life1.err; then fail "request log lines were printed to the terminal"; fi

# --- second life: the same directory continues, at a faster clock
start life2.log --time-scale 50000
grep -q "continuing" life2.log || fail "the second life did not continue the run"
eval "$WATCH" >watch2.log 2>&1 &
W2=$!
PIDS+=("$W2")
eval "$WAIT" >wait.log 2>&1 &
WAITER=$!
PIDS+=("$WAITER")
approved=""
for _ in $(seq 480); do
  kill -0 "$WAITER" 2>/dev/null || break
  if [ -z "$approved" ]; then
    gate="$(eval "$GATES -o json" | jq -r '.[0].name // empty')"
    if [ -n "$gate" ]; then
      state="$(eval "${APPROVE//GATE/$gate} -o json" | jq -r .state)"
      [ "$state" = Completed ] || fail "approving gate $gate left it $state"
      approved="$gate"
      echo "main job: approved gate $gate (production sign-off)"
    fi
  fi
  sleep 0.25
done
[ -n "$approved" ] || fail "the approval gate never became pending"
rc=0
wait "$WAITER" || rc=$?
[ "$rc" = 0 ] || fail "\`$WAIT\` exited $rc: $(cat wait.log)"
echo "main job: $(cat wait.log)"
for _ in $(seq 40); do kill -0 "$W2" 2>/dev/null || break; sleep 0.25; done
kill -0 "$W2" 2>/dev/null && fail "watch did not end with the run"
tail -n 1 watch2.log | grep -q RunCompleted || fail "watch's last line is not the run's completion"
eval "$AUDIT" | jq -e --arg g "$approved" 'map(select(.action == "gates.approve" and (.target | endswith($g)) and .outcome == "ok")) | length == 1' >/dev/null \
  || fail "the audit log does not show the approval of gate $approved"
echo "main job: watch followed $(grep -c . watch2.log) events to the run's end; the audit log records the approval"
stop
