#!/usr/bin/env python3
"""The workspace's test executables, as tests/run.sh runs them.

`cargo test --workspace --test NAME` selects fewer targets than `cargo test --workspace`, so cargo
resolves the features of the workspace's crates again (the dev-dependencies of the other packages'
tests no longer count) and recompiles them. tests/run.sh therefore builds every test once
(`cargo test --workspace --no-run --message-format=json-render-diagnostics`, whose messages are
saved to a file) and runs a chosen suite's executable itself, in its package's directory, as
cargo would.

    suites.py index MESSAGES INDEX      the test executables of a build: "name<TAB>exe<TAB>dir"
    suites.py skips INDEX NAME...       --skip arguments that leave the suites NAME out of a run
                                        of every test, checked to name no test of another suite
    suites.py run INDEX LOGDIR NAME...  runs the suites NAME side by side, each with its log;
                                        prints the logs and exits 1 if any failed
"""

import json
import os
import subprocess
import sys
import time


def index(messages, out):
    rows = []
    with open(messages) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            m = json.loads(line)
            if m.get("reason") != "compiler-artifact" or not m.get("executable"):
                continue
            if not m.get("profile", {}).get("test"):
                continue
            target = m["target"]
            name = target["name"] if target["kind"] == ["test"] else target["name"] + " (unit)"
            rows.append((name, m["executable"], os.path.dirname(m["manifest_path"])))
    with open(out, "w") as f:
        for r in sorted(rows):
            f.write("\t".join(r) + "\n")


def read_index(path):
    with open(path) as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]


def suite(rows, name):
    found = [r for r in rows if r[0] == name]
    if len(found) != 1:
        sys.exit(f"suites.py: {len(found)} test executables named {name!r} in the index")
    return found[0]


def tests_of(exe, cwd):
    out = subprocess.run(
        [exe, "--list", "--format", "terse"], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout
    return [line.rsplit(": ", 1)[0] for line in out.splitlines() if line.endswith(": test")]


def skips(path, names):
    rows = read_index(path)
    chosen = {n: suite(rows, n) for n in names}
    left_out = {}
    for n, (_, exe, cwd) in chosen.items():
        for t in tests_of(exe, cwd):
            left_out[t] = n
    # `--exact --skip NAME` skips a test of that exact name in every executable: none of the
    # others may have one.
    for name, exe, cwd in rows:
        if name in chosen:
            continue
        for t in tests_of(exe, cwd):
            if t in left_out:
                sys.exit(f"suites.py: test {t!r} is in both {name} and {left_out[t]}: rename one")
    args = ["--exact"]
    for t in sorted(left_out):
        args += ["--skip", t]
    print("\n".join(args))


def run(path, logdir, names):
    rows = read_index(path)
    os.makedirs(logdir, exist_ok=True)
    started = time.monotonic()
    procs = []
    for n in names:
        _, exe, cwd = suite(rows, n)
        log = open(os.path.join(logdir, n + ".log"), "w")
        env = dict(os.environ, CARGO_MANIFEST_DIR=cwd)
        procs.append((n, subprocess.Popen([exe], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    failed = []
    for n, p, log in procs:
        rc = p.wait()
        log.close()
        with open(log.name) as f:
            sys.stdout.write(f"---- {n} (exit {rc}) ----\n" + f.read())
        if rc != 0:
            failed.append(n)
    took = f"{time.monotonic() - started:.0f} s"
    print(f"---- {names[0]} in {took}" if len(names) == 1 else f"---- {len(names)} suites side by side in {took}")
    if failed:
        sys.exit(f"suites.py: failed: {', '.join(failed)}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "index":
        index(*args)
    elif cmd == "skips":
        skips(args[0], args[1:])
    elif cmd == "run":
        run(args[0], args[1], args[2:])
    else:
        sys.exit(__doc__)
