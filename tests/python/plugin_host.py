"""A waverun plugin host in Python on the `wasmtime` package (PyPI, pinned 50.0.1).

It implements every import of bindings/ABI.md (module `waverun_host_v2`) with a virtual clock, an
in-memory journal and snapshot, a simulated fleet that behaves exactly like
core/src/sim/fleet.rs, and health checks measured as the scenario's `health` scripts them
(core/src/sim/scenario.rs `ScriptedHealth`); and it runs the simulator loop of core/src/sim/mod.rs (`Simulation::step`)
around the plugin, producing the report of `waverun simulate -o json`:
`{timeline, run?: {name, status}, runs?: [{name, autoUpgradeProfileName?, status}], summary}`.

    python tests/python/plugin_host.py SCENARIO.json [PLUGIN.wasm] [--crash-every N] [--snapshot-every N]

The scenario is JSON (`cargo run -p waverun-plugin --example scenario_json -- FILE.yaml` converts
YAML exactly as `waverun simulate` reads it). With --crash-every N the guest instance is thrown
away before every Nth input and a fresh one restarts from storage; with --snapshot-every N a
snapshot is requested before every Nth input.
"""

import json
import os
import sys
from datetime import datetime, timedelta, timezone

import wasmtime

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_WASM = os.path.join(ROOT, "target", "wasm32-unknown-unknown", "release", "waverun_plugin.wasm")

MASK64 = (1 << 64) - 1
MINUTE = 60_000
DAY = 86_400_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
FINISHED = {"Completed", "Failed", "Skipped", "Stopped"}


# ---------------------------------------------------------------------------------------- time

def parse_time(s):
    """RFC 3339 -> milliseconds since the epoch."""
    d = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    return (d - EPOCH) // timedelta(milliseconds=1)


def fmt_time(ms):
    """Milliseconds -> RFC 3339 UTC as chrono writes it (`Z`; fraction only when not whole)."""
    d = EPOCH + timedelta(milliseconds=ms)
    frac = ms % 1000
    return d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac:03d}" if frac else "") + "Z"


# ---------------------------------------------------------------------------------------- storage

class MemoryStorage:
    """The journal and the snapshot, in memory."""

    def __init__(self):
        self.journal = []  # record texts, in append order
        self.snapshot = None
        self.append_result = 0  # what journal_append answers (0 = durable)

    def append(self, text):
        if self.append_result != 0:
            return self.append_result
        self.journal.append(text)
        return 0

    def write_snapshot(self, text):
        n = json.loads(text)["journalSeq"]
        self.snapshot = text
        # The host MAY drop the records the snapshot covers; this one does.
        self.journal = [r for r in self.journal if json.loads(r)["seq"] > n]
        return 0

    def read(self, kind):
        """kind 0: the snapshot, 1: the journal after it; None when there is nothing."""
        if kind == 0:
            return None if self.snapshot is None else self.snapshot.encode()
        if kind == 1:
            return "\n".join(self.journal).encode() if self.journal else None
        return None


# ---------------------------------------------------------------------------------------- the fleet

def _behavior(b):
    b = b or {}
    return {
        "upgradeMinutes": b.get("upgradeMinutes", 30),
        "failAttempts": b.get("failAttempts", 0),
        "jitterMinutes": b.get("jitterMinutes", 0),
    }


class SimulatedFleet:
    """core/src/sim/fleet.rs, line by line."""

    def __init__(self, scenario):
        self.behaviors = {m["name"]: _behavior(m.get("behavior")) for m in scenario["members"]}
        self.attempts = {}
        self.in_flight = {}  # (due, seq) -> (operation id, succeeds)
        self.known = set()
        self.seq = 0
        self.rng = (int(scenario.get("seed", 0)) ^ 0x9E3779B97F4A7C15) & MASK64

    def submit(self, op, now):
        """Accepts an upgrade at `now`; a repeated operation id is the same operation."""
        if op["operationId"] in self.known:
            return
        self.known.add(op["operationId"])
        b = self.behaviors.get(op["member"], _behavior(None))
        attempt = self.attempts.get(op["member"], 0) + 1
        self.attempts[op["member"]] = attempt
        succeeds = attempt > b["failAttempts"]
        jitter = self.next_random() % (b["jitterMinutes"] + 1) if b["jitterMinutes"] > 0 else 0
        due = now + (b["upgradeMinutes"] + jitter) * MINUTE
        self.seq += 1
        self.in_flight[(due, self.seq)] = (op["operationId"], succeeds)

    def knows(self, operation_id):
        return operation_id in self.known

    def next_completion(self):
        return min(self.in_flight)[0] if self.in_flight else None

    def take_due(self, now):
        """Results due at or before `now`, in due order (ABI observations)."""
        out = []
        for key in sorted(k for k in self.in_flight if k[0] <= now):
            op, ok = self.in_flight.pop(key)
            out.append({"type": "upgradeSucceeded", "operationId": op} if ok else
                       {"type": "upgradeFailed", "operationId": op, "message": "simulated upgrade failure"})
        return out

    def idle(self):
        return not self.in_flight

    def next_random(self):
        # splitmix64, as in the Rust code (wrapping arithmetic on u64).
        self.rng = (self.rng + 0x9E3779B97F4A7C15) & MASK64
        z = self.rng
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


# ---------------------------------------------------------------------------------------- the guest

class Guest:
    """One plugin instance. `host` supplies the world: `now` (ms), `storage`, `submit(op)`,
    `query(operation_id)` and `check_submit(check_request)` returning the import's answer, and
    `logs` (a list)."""

    def __init__(self, engine, module, host):
        self.host = host
        self.store = wasmtime.Store(engine)
        linker = wasmtime.Linker(engine)
        i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()
        ft = wasmtime.FuncType
        imports = {
            "clock_now_ms": (ft([], [i64]), lambda: int(host.now)),
            "cluster_submit": (ft([i32, i32], [i32]), lambda p, n: host.submit(json.loads(self.text(p, n)))),
            "cluster_query": (ft([i32, i32], [i32]),
                              lambda p, n: host.query(json.loads(self.text(p, n))["operationId"])),
            "check_submit": (ft([i32, i32], [i32]), lambda p, n: host.check_submit(json.loads(self.text(p, n)))),
            "journal_append": (ft([i32, i32], [i32]), lambda p, n: host.storage.append(self.text(p, n))),
            "snapshot_write": (ft([i32, i32], [i32]), lambda p, n: host.storage.write_snapshot(self.text(p, n))),
            "storage_read": (ft([i32, i32, i32], [i32]), self._storage_read),
            "log": (ft([i32, i32, i32], []), lambda level, p, n: host.logs.append((level, self.text(p, n)))),
        }
        for name, (ty, fn) in imports.items():
            linker.define_func("waverun_host_v2", name, ty, fn)
        self.instance = linker.instantiate(self.store, module)
        ex = self.instance.exports(self.store)
        self.memory = ex["memory"]
        self.ex = ex
        version = ex["waverun_abi_version"](self.store)
        if version != 2:
            raise RuntimeError(f"plugin ABI version {version}; this host implements 2")

    def text(self, ptr, length):
        ptr &= 0xFFFFFFFF
        return self.memory.read(self.store, ptr, ptr + length).decode()

    def _storage_read(self, kind, ptr, cap):
        data = self.host.storage.read(kind)
        if data is None:
            return -1
        n = min(cap, len(data))
        if n:
            self.memory.write(self.store, data[:n], ptr & 0xFFFFFFFF)
        return len(data)

    def call(self, name, arg=None):
        """Calls an export, passing `arg` (JSON) if given; returns the parsed envelope."""
        if arg is None:
            r = self.ex[name](self.store)
        else:
            data = (arg if isinstance(arg, str) else json.dumps(arg, separators=(",", ":"))).encode()
            ptr = self.ex["waverun_alloc"](self.store, len(data))
            self.memory.write(self.store, data, ptr & 0xFFFFFFFF)
            r = self.ex[name](self.store, ptr, len(data))
        u = r & MASK64
        ptr, length = u >> 32, u & 0xFFFFFFFF
        text = self.text(ptr, length)
        self.ex["waverun_free"](self.store, ptr, length)
        env = json.loads(text)
        if env.get("v") != 1:
            raise RuntimeError(f'envelope without "v": 1: {text}')
        return env

    def init(self):
        return self.call("waverun_init")

    def request(self, request):
        return self.call("waverun_request", {"v": 1, "request": request})

    def command(self, command):
        return self.request({"type": "command", "command": command})

    def deliver(self, observation):
        return self.call("waverun_deliver", {"v": 1, "observation": observation})

    def wake(self):
        return self.call("waverun_wake")

    def status(self, run):
        return self.call("waverun_status", {"v": 1, "run": run})

    def next_wakeup(self):
        """ms since the epoch, or None for never."""
        t = self.ex["waverun_next_wakeup"](self.store)
        return None if t < 0 else t


# ---------------------------------------------------------------------------------------- the scenario

def catalog(s):
    """`Scenario::catalog`: the scenario's releases, or the implicit catalog (`implicit_catalog`:
    the run's target version, if any, and the node images of the members there from the start)."""
    if s.get("releases") is not None:
        return s["releases"]

    def everywhere(version):
        return {"version": version, "available": {"*": s["start"]}}

    cat = {"kubernetes": [], "nodeImages": []}
    v = s["run"]["managedClusterUpdate"]["upgrade"].get("kubernetesVersion") if s.get("run") else None
    if v is not None:
        cat["kubernetes"].append(everywhere(v))
    present = [m for m in s["members"] if m.get("joinsAt") is None]
    images = sorted({p["imageVersion"] for m in present for p in m.get("nodePools", [])},
                    key=lambda x: x.encode())
    cat["nodeImages"] = [everywhere(i) for i in images]
    return cat


def member_of(m):
    """`ScenarioMember::member`: the member without its behaviour (nor when it joins)."""
    return {k: v for k, v in m.items() if k not in ("behavior", "joinsAt")}


def joins_later(s, m):
    """Whether a member joins after the start (`joins_at > start`), so is not there at setup."""
    return m.get("joinsAt") is not None and parse_time(m["joinsAt"]) > parse_time(s["start"])


def run_spec(s):
    """`Scenario::run_spec`: the scenario's run as the engine takes it, or None without one."""
    if s.get("run") is None:
        return None
    run = {"name": s["run"]["name"], "managedClusterUpdate": s["run"]["managedClusterUpdate"]}
    if s.get("strategy") is not None:
        run["strategy"] = s["strategy"]
    if s["run"].get("updateStrategyName") is not None:
        run["updateStrategyName"] = s["run"]["updateStrategyName"]
    return run


def setup_commands(s):
    """`Scenario::setup_commands`, with the field path errors belong to: catalog, freezes, the
    members there from the start, named strategies, profiles, then the run (if any)."""
    out = [
        ("releases", {"type": "setCatalog", "catalog": catalog(s)}),
        ("freezes", {"type": "setFreezes", "freezes": s.get("freezes", [])}),
    ]
    for i, m in enumerate(s["members"]):
        if not joins_later(s, m):
            out.append((f"members[{i}]", {"type": "upsertMember", "member": member_of(m)}))
    for i, x in enumerate(s.get("strategies", [])):
        out.append((f"strategies[{i}]", {"type": "upsertStrategy", "name": x["name"], "strategy": x["strategy"]}))
    for i, profile in enumerate(s.get("profiles", [])):
        out.append((f"profiles[{i}]", {"type": "upsertProfile", "profile": profile}))
    run = run_spec(s)
    if run is not None:
        out.append(("run", {"type": "createRun", "run": run}))
    return out


def joins(s):
    """`Scenario::joins` with `ScenarioMember::member`: members that join after the start, in
    time order (ties in file order), as (at ms, member)."""
    later = sorted((parse_time(m["joinsAt"]), i) for i, m in enumerate(s["members"]) if joins_later(s, m))
    return [(at, member_of(s["members"][i])) for at, i in later]


def action_command(a, scenario_run):
    """`Action::command`: `scenario_run` is the scenario's run (an action's own `run` wins)."""
    kind = a["do"]
    run = a["run"] if a.get("run") is not None else scenario_run
    if kind == "generateUpdateRun":
        return {"type": "generateUpdateRun", "profile": a.get("profile") or ""}
    if kind == "start":
        return {"type": "startRun", "name": run}
    if kind == "stop":
        return {"type": "stopRun", "name": run}
    if kind == "skip":
        return {"type": "skip", "run": run, "targets": a.get("targets", [])}
    if kind == "approve":
        c = {"type": "completeGate", "run": run, "gate": dict(a.get("gate") or {})}
        if a.get("by") is not None:
            c["by"] = a["by"]
        return c
    raise ValueError(f"unknown action {kind}")


def skip_target(t):
    """A skip target as the Rust type prints it (`Kind:name`, trimmed)."""
    kind, sep, name = t.partition(":")
    return f"{kind.strip()}:{name.strip()}" if sep else t


def action_value(a):
    """`serde_json::to_value(&action)`: keys sorted (serde_json's map), defaults left out."""
    v = {"at": fmt_time(parse_time(a["at"])), "do": a["do"]}
    if a.get("gate") is not None:
        v["gate"] = {k: x for k, x in sorted(a["gate"].items()) if x is not None}
    if a.get("targets"):
        v["targets"] = [skip_target(t) for t in a["targets"]]
    if a.get("by") is not None:
        v["by"] = a["by"]
    if a.get("run") is not None:
        v["run"] = a["run"]
    if a.get("profile") is not None:
        v["profile"] = a["profile"]
    return dict(sorted(v.items()))


# ---------------------------------------------------------------------------------------- the simulator

def _health_matches(h, req, now):
    """`ScriptedHealth::matches`: whether a scripted entry answers `req` at `now` (ms)."""
    member = None if req["purpose"] == "Gate" else (req["members"][0]["name"] if req["members"] else None)
    return ((h.get("check") is None or h["check"] == req["check"]["name"])
            and (h.get("member") is None or h["member"] == member)
            and (h.get("group") is None or h["group"] == req.get("group"))
            and (h.get("stage") is None or h["stage"] == req["stage"])
            and (h.get("from") is None or parse_time(h["from"]) <= now)
            and (h.get("until") is None or now < parse_time(h["until"])))


def scripted_measurement(health, req, now):
    """The `checkMeasured` observation of `req` at `now` as the scenario's `health` scripts it
    (`ScriptedHealth::measurement`: the first entry that matches; a pass when none does)."""
    obs = {"type": "checkMeasured", "measurementId": req["measurementId"]}
    h = next((x for x in health or [] if _health_matches(x, req, now)), None)
    if h is None:
        return dict(obs, verdict="Pass")
    sample = {"value": h.get("value")}
    if len(req["members"]) == 1:
        sample = {"labels": f'cluster="{req["members"][0]["name"]}"', "value": h.get("value")}
    values = [] if h.get("empty") else ([sample] if h.get("value") is not None else None)
    if values is not None:
        obs["values"] = values
    verdict = h.get("result") if values is not None else (h.get("result") or "Pass")
    if verdict is not None:
        obs["verdict"] = verdict
    if h.get("message") is not None:
        obs["message"] = h["message"]
    return obs


class Host:
    """The world the guest sees: a virtual clock, storage, the simulated fleet, scripted health
    (measurements taken at once, waiting in `measured` to be delivered)."""

    def __init__(self, now, fleet, health=None):
        self.now = now
        self.storage = MemoryStorage()
        self.logs = []
        self.fleet = fleet
        self.health = health or []
        self.measured_ids = set()  # a repeated measurement id is the same measurement
        self.measured = []

    def check_submit(self, req):
        if not isinstance(req.get("measurementId"), str):
            return 2
        if req["measurementId"] not in self.measured_ids:
            self.measured_ids.add(req["measurementId"])
            self.measured.append(scripted_measurement(self.health, req, self.now))
        return 0

    def submit(self, cmd):
        if cmd.get("type") != "startUpgrade":
            return 2
        self.fleet.submit(cmd, self.now)
        return 0

    def query(self, operation_id):
        return 0 if self.fleet.knows(operation_id) else 1


def _events(r):
    return (r["result"].get("events") if r["ok"] else r.get("events")) or []


class Simulation:
    """core/src/sim/mod.rs `Simulation`, with the plugin as the engine."""

    def __init__(self, engine, module, scenario, crash_every=0, snapshot_every=0):
        self.engine, self.module = engine, module
        self.crash_every, self.snapshot_every = crash_every, snapshot_every
        self.inputs = 0
        self.restarts = 0
        self.run = scenario["run"]["name"] if scenario.get("run") else None  # the scenario's own run
        self.auto_approve = scenario.get("autoApprove", False)
        self.many_runs = bool(scenario.get("profiles"))  # profiles: timeline entries keep their run
        self.actions = [dict(a, atMs=parse_time(a["at"])) for a in scenario.get("actions", [])]
        self.next_action = 0
        self.joins = joins(scenario)  # members that join later, in time order
        self.next_join = 0
        start = parse_time(scenario["start"])
        self.until = parse_time(scenario["until"]) if scenario.get("until") else start + 366 * DAY
        self.now = start
        self.timeline = []
        self.done = False
        self.fleet = SimulatedFleet(scenario)
        self.host = Host(start, self.fleet, scenario.get("health"))
        self.guest = self.start()
        for path, cmd in setup_commands(scenario):
            r = self.input(lambda: self.guest.command(cmd))
            if not r["ok"]:
                raise ValueError(f"{path}: {r['error']['message']}")
            # Creation events are bookkeeping, not part of the run's timeline.

    def start(self):
        """A fresh instance, initialised from storage."""
        guest = Guest(self.engine, self.module, self.host)
        init = guest.init()
        if not init["ok"]:
            raise RuntimeError(f"waverun_init: {init['error']}")
        if init["result"].get("events"):
            self.drain(init["result"]["events"])
        return guest

    def input(self, call):
        """One state-changing call; now and then a snapshot first, or a crash and restart."""
        self.inputs += 1
        if self.snapshot_every and self.inputs % self.snapshot_every == 0:
            r = self.guest.request({"type": "snapshot"})
            if not r["ok"]:
                raise RuntimeError(f"snapshot: {r['error']}")
        if self.crash_every and self.inputs % self.crash_every == 0:
            self.guest = self.start()
            self.restarts += 1
        r = call()
        # The measurements it submitted, delivered at the same instant (the native simulator
        # answers them at once too); their events follow the input's.
        more = self.deliver_measured()
        if more:
            if r["ok"]:
                r["result"]["events"] = (r["result"].get("events") or []) + more
            else:
                r["events"] = (r.get("events") or []) + more
        return r

    def deliver_measured(self):
        """Delivers every measurement taken and not delivered yet; returns their events."""
        events = []
        while self.host.measured:
            r = self.guest.deliver(self.host.measured.pop(0))
            if not r["ok"]:
                raise RuntimeError(f"deliver: {r['error']}")
            events.extend(r["result"].get("events") or [])
        return events

    def run_to_end(self):
        while self.step():
            pass

    def step(self):
        if self.done:
            return False
        now = self.now
        self.host.now = now
        # 1. Upgrade results due now.
        for obs in self.fleet.take_due(now):
            r = self.input(lambda: self.guest.deliver(obs))
            if not r["ok"]:
                raise RuntimeError(f"deliver: {r['error']}")
            self.drain(_events(r))
        # 2. Members joining now.
        while self.next_join < len(self.joins) and self.joins[self.next_join][0] <= now:
            member = self.joins[self.next_join][1]
            self.next_join += 1
            r = self.input(lambda: self.guest.command({"type": "upsertMember", "member": member}))
            self.drain(_events(r))
            if not r["ok"]:
                raise RuntimeError(f"upsertMember {member['name']}: {r['error']}")
        # 3. Operator actions due now.
        while self.next_action < len(self.actions) and self.actions[self.next_action]["atMs"] <= now:
            a = self.actions[self.next_action]
            self.next_action += 1
            r = self.input(lambda: self.guest.command(action_command(a, self.run or "")))
            # What the input's due timers did comes first: it may be why the action is refused.
            self.drain(_events(r))
            if not r["ok"]:
                # With profiles, the entry names the run the action was for (none for
                # generateUpdateRun).
                run = ""
                if self.many_runs and a["do"] != "generateUpdateRun":
                    run = a.get("run") or self.run or ""
                entry = {"at": fmt_time(now), "kind": "ActionRejected"}
                if run:
                    entry["run"] = run
                entry["error"] = {"code": r["error"]["code"], "message": r["error"]["message"]}
                entry["action"] = action_value(a)
                self.timeline.append(entry)
        # 4. Engine timers due now.
        w = self.input(lambda: self.guest.wake())
        if not w["ok"]:
            raise RuntimeError(f"wake: {w['error']}")
        self.drain(_events(w))

        # With profiles, runs may still be generated: the simulation goes on while anything is
        # left to happen.
        finished = (not self.many_runs and self.run is not None
                    and self.run_state() in FINISHED and self.fleet.idle())
        actions_left = self.next_action < len(self.actions)
        if finished and not actions_left:
            self.done = True
            return False
        nxt = [t for t in (self.guest.next_wakeup(), self.fleet.next_completion(),
                           self.actions[self.next_action]["atMs"] if actions_left else None,
                           self.joins[self.next_join][0] if self.next_join < len(self.joins) else None)
               if t is not None]
        if nxt and min(nxt) <= self.until:
            self.now = max(min(nxt), now)
            return True
        self.done = True
        return False

    def drain(self, events):
        """`World::output` and `drive::answer`: events go to the timeline (keeping their run only
        with profiles); Approval gates are completed at once, in the event's own run, with
        autoApprove."""
        while True:
            approvals = []
            for ev in events:
                if ev["kind"] == "RunCreated":
                    continue
                if self.auto_approve and ev["kind"] == "GateCreated" and ev.get("gateType") == "Approval":
                    approvals.append((ev.get("run", ""), ev.get("gateId")))
                if not self.many_runs:
                    ev.pop("run", None)
                self.timeline.append(ev)
            if not approvals:
                return
            events = []
            for run, gate_id in approvals:
                cmd = {"type": "completeGate", "run": run,
                       "gate": {} if gate_id is None else {"id": gate_id}, "by": "autoApprove"}
                events.extend(_events(self.input(lambda: self.guest.command(cmd))))

    def run_state(self):
        r = self.guest.request({"type": "runs"})
        if not r["ok"]:
            raise RuntimeError(f"runs: {r['error']}")
        return next((x["state"] for x in r["result"]["runs"] if x["name"] == self.run), None)

    def report(self):
        """`Simulation::report`: the scenario's run, and with profiles every run (the scenario's
        first, then the generated ones in the order they were generated; deleted ones are gone),
        with the summary over all of them; as `waverun simulate -o json` prints it."""
        names = []  # (name, profile or None)
        if self.run is not None:
            names.append((self.run, None))
        if self.many_runs:
            for e in self.timeline:
                if e["kind"] == "RunGenerated" and not any(n == e["run"] for n, _ in names):
                    names.append((e["run"], e.get("profile")))
                elif e["kind"] == "RunDeleted":
                    names = [x for x in names if x[0] != e["run"]]
        runs = []
        for name, profile in names:
            r = self.guest.status(name)
            if not r["ok"]:
                continue
            run = {"name": name}
            if profile is not None:
                run["autoUpgradeProfileName"] = profile
            run["status"] = r["result"]
            runs.append(run)
        out = {"timeline": self.timeline}
        own = next((x for x in runs if x["name"] == self.run), None) if self.run is not None else None
        if own is not None:
            out["run"] = own
        if self.many_runs and runs:
            out["runs"] = runs
        out["summary"] = summary_of(runs, self.run)
        return out


def summary_of(runs, own):
    """`Summary::of`: the summary over `runs`; `own` is the scenario's run, whose state is the summary's."""
    n = {"Completed": 0, "Failed": 0, "Skipped": 0, "other": 0}
    for r in runs:
        for st in r["status"]["stages"]:
            for g in st["groups"]:
                for m in g["members"]:
                    s = m["status"]["state"]
                    n[s if s in ("Completed", "Failed", "Skipped") else "other"] += 1
    main = next((r for r in runs if r["name"] == own), None) if own is not None else None
    if main is None and runs:
        main = runs[-1]
    starts = [r["status"]["status"]["startTime"] for r in runs
              if r["status"]["status"].get("startTime") is not None]
    ends = [r["status"]["status"]["completedTime"] for r in runs
            if r["status"]["status"].get("completedTime") is not None]
    started = min(starts, key=parse_time) if starts else None
    finished = max(ends, key=parse_time) if ends and len(ends) == len(runs) else None
    makespan = None
    if started is not None and finished is not None:
        d = parse_time(finished) - parse_time(started)
        makespan = int(d / 1000)  # truncation toward zero, like chrono's num_seconds
    return {
        "state": main["status"]["status"]["state"] if main is not None else "NotStarted",
        "startedAt": started,
        "finishedAt": finished,
        "makespanSeconds": makespan,
        "membersCompleted": n["Completed"],
        "membersFailed": n["Failed"],
        "membersSkipped": n["Skipped"],
        "membersPending": n["other"],
    }


def load_module(path=DEFAULT_WASM, engine=None):
    """Compiles the plugin; returns (engine, module)."""
    engine = engine or wasmtime.Engine()
    return engine, wasmtime.Module.from_file(engine, path)


def simulate(engine, module, scenario, **options):
    """Runs a scenario (parsed JSON) to its end through the plugin; returns the report."""
    sim = Simulation(engine, module, scenario, **options)
    sim.run_to_end()
    return sim.report()


def main(argv):
    args = list(argv)
    options = {}
    for flag, key in (("--crash-every", "crash_every"), ("--snapshot-every", "snapshot_every")):
        if flag in args:
            i = args.index(flag)
            options[key] = int(args[i + 1])
            del args[i:i + 2]
    if not args:
        print("usage: plugin_host.py SCENARIO.json [PLUGIN.wasm] [--crash-every N] [--snapshot-every N]",
              file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as f:
        scenario = json.load(f)
    engine, module = load_module(args[1] if len(args) > 1 else DEFAULT_WASM)
    print(json.dumps(simulate(engine, module, scenario, **options), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
