#!/usr/bin/env bash
# A private PostgreSQL server for the test suite (Debian's package): `start DIR` runs initdb into
# DIR, starts the server on 127.0.0.1 at a free port (and a socket in DIR), trust authentication
# for the `waverun` role, and prints the connection string of its `postgres` database;
# `stop DIR` stops it at once and removes DIR. As root, the server runs as the `postgres` user.
set -euo pipefail
cmd="${1:?usage: postgres-server.sh start|stop DIR}"
dir="${2:?usage: postgres-server.sh start|stop DIR}"

bindir() {
  if command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"
    return
  fi
  local newest
  newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$newest" ] || { echo "PostgreSQL is not installed: apt-get install -y postgresql" >&2; exit 1; }
  echo "$newest"
}
as_server() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
BIN=$(bindir)

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    as_server "$BIN/initdb" -D "$dir/data" -U waverun --auth=trust -E UTF8 --no-instructions >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_server "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -h 127.0.0.1 -k $dir -c max_connections=400 -c shared_buffers=64MB" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "host=127.0.0.1 port=$port user=waverun dbname=postgres connect_timeout=10"
    ;;
  stop)
    if [ -d "$dir/data" ]; then
      as_server "$BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: postgres-server.sh start|stop DIR" >&2
    exit 2
    ;;
esac
