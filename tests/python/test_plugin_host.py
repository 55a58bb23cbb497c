"""The plugin under the wasmtime Python package: every scenario's report must equal
`waverun simulate -o json` byte for byte, with and without crashes and snapshots.

    python -m unittest discover -s tests/python -v

Needs `wasmtime==50.0.1` (tests/run.sh installs it into a venv under target/). Builds what it
needs first (no-ops when fresh); WAVERUN_SKIP_BUILD=1 skips that.
"""

import json
import os
import subprocess
import unittest

import wasmtime

import plugin_host as ph

WAVERUN = os.path.join(ph.ROOT, "target", "debug", "waverun")
SCENARIO_JSON = os.path.join(ph.ROOT, "target", "debug", "examples", "scenario_json")
ENGINE = MODULE = None


def setUpModule():
    global ENGINE, MODULE
    if not os.environ.get("WAVERUN_SKIP_BUILD"):
        # The CLI and the example come from the workspace's test build (tests/run.sh): one
        # feature set, so wasmtime is not compiled a second time for a `cargo build -p waverun`.
        for args in (["build", "--release", "--target", "wasm32-unknown-unknown", "-p", "waverun-plugin"],
                     ["test", "--workspace", "--no-run"]):
            subprocess.run(["cargo", *args, "-q"], cwd=ph.ROOT, check=True,
                           stdout=subprocess.DEVNULL)
    ENGINE, MODULE = ph.load_module(ph.DEFAULT_WASM)


def scenario_files():
    """Every scenario file: tests/scenarios (with subdirectories), tests/js/scenarios, the example."""
    files = []
    for d in ("tests/scenarios", "tests/js/scenarios"):
        for dirpath, _, names in os.walk(os.path.join(ph.ROOT, d)):
            files += [os.path.relpath(os.path.join(dirpath, f), ph.ROOT) for f in names if f.endswith(".yaml")]
    return sorted(files) + ["host/examples/fleet-rollout.yaml"]


def native(path):
    return subprocess.run([WAVERUN, "simulate", "-o", "json", path], cwd=ph.ROOT, check=True,
                          capture_output=True, text=True).stdout


def scenario_of(path):
    out = subprocess.run([SCENARIO_JSON, path], cwd=ph.ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def canonical(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class BareHost:
    """A host with no fleet: submissions are recorded and every operation is known."""

    def __init__(self):
        self.now = ph.parse_time("2026-12-07T00:00:00Z")
        self.storage = ph.MemoryStorage()
        self.logs = []
        self.submitted = []

    def submit(self, op):
        self.submitted.append(op)
        return 0

    def query(self, _operation_id):
        return 0

    def check_submit(self, _request):
        return 1  # measures nothing: refused (an Error measurement)


class Module(unittest.TestCase):
    def test_imports_are_exactly_imports_txt(self):
        with open(os.path.join(ph.ROOT, "bindings", "plugin", "imports.txt"), encoding="utf-8") as f:
            want = sorted(l.strip() for l in f if l.strip() and not l.startswith("#"))
        found = sorted(f"{i.module}.{i.name} func" for i in MODULE.imports
                       if isinstance(i.type, wasmtime.FuncType))
        self.assertEqual(found, want)
        self.assertEqual(len(MODULE.imports), 8)

    def test_exports(self):
        names = {e.name for e in MODULE.exports}
        for f in ("memory", "waverun_abi_version", "waverun_alloc", "waverun_free", "waverun_init",
                  "waverun_request", "waverun_deliver", "waverun_wake", "waverun_status",
                  "waverun_next_wakeup"):
            self.assertIn(f, names)


class Envelopes(unittest.TestCase):
    def test_envelopes_and_error_codes(self):
        g = ph.Guest(ENGINE, MODULE, BareHost())
        self.assertEqual(g.request({"type": "ping"}), {"v": 1, "ok": True, "result": {}})
        self.assertEqual(g.request({"type": "runs"})["error"]["code"], "NotInitialized")
        self.assertIsNone(g.next_wakeup())
        self.assertEqual(g.init()["result"], {"journalSeq": 0, "replayed": 0, "inFlight": 0, "events": [], "lastRecordEvents": []})
        self.assertEqual(g.init()["error"]["code"], "InvalidState")
        self.assertEqual(g.call("waverun_request", "{")["error"]["code"], "BadEnvelope")
        self.assertEqual(g.call("waverun_request", {"v": 3, "request": {"type": "ping"}})["error"]["code"],
                         "UnsupportedVersion")
        self.assertEqual(g.status("nope")["error"]["code"], "NotFound")
        r = g.command({"type": "upsertMember",
                       "member": {"name": "m", "region": "eastus", "kubernetesVersion": "x"}})
        self.assertEqual((r["error"]["code"], r["error"]["path"]), ("InvalidField", "kubernetesVersion"))

    def test_persistence_failed_changes_nothing(self):
        sim = ph.Simulation(ENGINE, MODULE, scenario_of("tests/scenarios/gates-and-wait.yaml"))
        sim.step()
        before = canonical(sim.guest.status(sim.run))
        journal = list(sim.host.storage.journal)
        sim.host.storage.append_result = 9
        sim.host.now += 30 * ph.MINUTE
        for r in (sim.guest.deliver({"type": "upgradeSucceeded", "operationId": "r1/dev-1"}),
                  sim.guest.command({"type": "stopRun", "name": "r1"}),
                  sim.guest.wake()):
            self.assertEqual(r["error"]["code"], "PersistenceFailed")
        self.assertEqual(canonical(sim.guest.status(sim.run)), before)
        self.assertEqual(sim.host.storage.journal, journal)
        sim.host.storage.append_result = 0
        r = sim.guest.deliver({"type": "upgradeSucceeded", "operationId": "r1/dev-1"})
        self.assertIn("MemberCompleted", [e["kind"] for e in r["result"]["events"]])

    def test_a_restart_submits_every_awaited_measurement_again(self):
        sim = ph.Simulation(ENGINE, MODULE, scenario_of("tests/scenarios/health/gate-inconclusive-approved.yaml"))
        held = []
        # This host takes measurements and never answers them.
        sim.host.check_submit = lambda req: held.append(req) or 0
        for _ in range(50):
            if held:
                break
            sim.step()
        self.assertEqual(len(held), 1)
        self.assertEqual(held[0]["purpose"], "Gate")
        again = []
        sim.host.check_submit = lambda req: again.append(req) or 0
        self.assertTrue(ph.Guest(ENGINE, MODULE, sim.host).init()["ok"])
        self.assertEqual(again, held)
        # Refused: an Error measurement, journaled.
        before = len(sim.host.storage.journal)
        sim.host.check_submit = lambda req: 7
        self.assertTrue(ph.Guest(ENGINE, MODULE, sim.host).init()["ok"])
        self.assertEqual(len(sim.host.storage.journal), before + 1)
        obs = json.loads(sim.host.storage.journal[-1])["input"]["observation"]
        self.assertEqual((obs["type"], obs["verdict"]), ("checkMeasured", "Error"))
        self.assertTrue(obs["message"].startswith("check_submit refused the measurement (the host answered 7)"))


class Scenarios(unittest.TestCase):
    def test_reports_equal_waverun_simulate(self):
        for path in scenario_files():
            with self.subTest(path):
                expected = native(path)
                report = ph.simulate(ENGINE, MODULE, scenario_of(path))
                self.assertEqual(canonical(report), canonical(json.loads(expected)))
                # Even the pretty-printed text is the same bytes.
                self.assertEqual(json.dumps(report, indent=2, ensure_ascii=False) + "\n", expected)

    def test_reports_survive_crashes_and_snapshots(self):
        for path in scenario_files():
            expected = canonical(json.loads(native(path)))
            for options in ({"crash_every": 2}, {"crash_every": 3, "snapshot_every": 5}):
                with self.subTest(path, **options):
                    sim = ph.Simulation(ENGINE, MODULE, scenario_of(path), **options)
                    sim.run_to_end()
                    self.assertGreater(sim.restarts, 0)
                    self.assertEqual(canonical(sim.report()), expected)


if __name__ == "__main__":
    unittest.main()
