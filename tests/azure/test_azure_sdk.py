"""Azure's own SDK for Python drives a real waverun daemon through its Azure Resource Manager paths.

azure-mgmt-containerservicefleet (PyPI, pinned with every dependency in requirements.txt), with
its default api-version, talks to `target/debug/waverun serve` started here as a child process:
HTTPS on loopback with a test certificate authority that the SDK is told to trust
(`connection_verify=CA`; the certificate check stays on), a bearer token from a token
credential, any subscription and resource group, the daemon's fleet by name. What the tests show:

- the fleet and its members read as ARM resources (ids under /subscriptions/..., types), and a
  member is deleted, created again and updated, each long-running operation's poller finishing;
- update strategies are created, read, listed and deleted;
- an update run goes through a strategy's stages: created, listed, started, held at an approval
  gate that is found among the fleet's gates and approved by updating it to Completed, then
  completed with its members on the target version;
- a run is stopped, then deleted; a stage of a running run is skipped;
- an auto-upgrade profile is created, read, listed, generates an update run, and is deleted;
- a refusal reaches the SDK as an HttpResponseError whose `error` has a code and a message.

    target/azure-sdk/bin/python -m unittest discover -s tests/azure -v

Fleet time runs 300 times faster than real time (a member's simulated upgrade of 20 minutes
takes 4 seconds); every wait is bounded. The number of SDK operations exercised is printed at
the end.
"""

import collections
import hashlib
import http.client
import json
import os
import queue
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError, ServiceRequestError
from azure.core.rest import HttpRequest
from azure.mgmt.core.exceptions import ARMErrorFormat
from azure.mgmt.containerservicefleet import ContainerServiceFleetMgmtClient
from azure.mgmt.containerservicefleet import models as m

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("WAVERUN_SDK_TEST_BIN") or os.path.join(ROOT, "target", "debug", "waverun")
# The compiled-module cache the Rust tests share (CARGO_TARGET_TMPDIR), warm after `cargo test`.
MODULE_CACHE = os.path.join(ROOT, "target", "tmp", "waverun-test-modules")

SUB = "0b6f1e2a-5c1d-4f7e-9a3b-2c8d4e6f8a10"
RG = "rg-waverun-sdk"
FLEET = "fleet1"
SCOPE = "https://management.azure.com/.default"
SDK_API_VERSION = "2026-06-01"  # azure-mgmt-containerservicefleet 4.0.0's default
PREFIX = ("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.ContainerService/fleets/%s"
          % (SUB, RG, FLEET))
TIME_SCALE = 300
UPGRADE_MINUTES = 20
WAIT_SECONDS = 180  # the longest any one wait here may take
TERMINAL = ("Completed", "Failed", "Stopped", "Skipped")

OLD_IMAGE = "AKSUbuntu-2204gen2containerd-202611.01.0"
NEW_IMAGE = "AKSUbuntu-2204gen2containerd-202612.01.0"
# (name, update group): dev-1 and spare-1 in the first stage, prod-1 and prod-2 in the second.
CLUSTERS = [("dev-1", "dev"), ("spare-1", "spare"), ("prod-1", "prod"), ("prod-2", "prod")]

# Every SDK operation called, by "group.method", with how many times.
OPS = collections.Counter()
STATE = {}  # the module's temp dir, CA, token


def arm_id(kind, name):
    return "%s/%s/%s" % (PREFIX, kind, name)


def same_id(a, b):
    """ARM ids compare without regard to case."""
    return (a or "").lower() == (b or "").lower()


def openssl(cwd, *args):
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args), out.stderr))


def make_ca(d):
    """ca.pem (a certificate authority) and server.pem/server.key for 127.0.0.1, signed by it,
    with the extensions a strict verifier wants (key usages, key identifiers)."""
    with open(os.path.join(d, "ca.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
                "subjectKeyIdentifier=hash\n")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n"
                "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl(d, "req", *ec, "-keyout", "ca.key", "-out", "ca.csr", "-subj", "/CN=waverun sdk test CA")
    openssl(d, "x509", "-req", "-in", "ca.csr", "-signkey", "ca.key", "-out", "ca.pem",
            "-days", "2", "-extfile", "ca.ext")
    openssl(d, "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    openssl(d, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext")


def fleet_file(path):
    """The simulated clusters on 1.33.2, with 1.33.5 and 1.34.1 and a newer node image released."""
    since = {"*": "2026-01-01T00:00:00Z"}
    doc = {
        "members": [{
            "name": name, "group": group, "region": "eastus", "kubernetesVersion": "1.33.2",
            "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": OLD_IMAGE}],
            "behavior": {"upgradeMinutes": UPGRADE_MINUTES},
        } for name, group in CLUSTERS],
        "releases": {
            "kubernetes": [{"version": "1.33.5", "available": since},
                           {"version": "1.34.1", "available": since}],
            "nodeImages": [{"version": OLD_IMAGE, "available": since},
                           {"version": NEW_IMAGE, "available": since}],
        },
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


class Token:
    """A token credential (azure.core.credentials.TokenCredential) holding the daemon's token."""

    def __init__(self, token):
        self.token = token
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)


class Journal:
    """The HTTP exchanges the SDK made (the client's raw_response_hook), for failure messages."""

    def __init__(self):
        self.entries = collections.deque(maxlen=12)

    def __call__(self, pipeline_response):
        req, resp = pipeline_response.http_request, pipeline_response.http_response
        body = getattr(req, "content", None) or getattr(req, "body", None) or b""
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        try:
            answer = resp.read().decode("utf-8", "replace")
        except Exception as e:  # noqa: BLE001 - a journal must never break the call
            answer = "(body not read: %s)" % e
        self.entries.append("%s %s%s\n  -> %s %s" % (
            req.method, req.url, ("\n  " + str(body)[:1500]) if body else "",
            resp.status_code, answer[:1500]))

    def tail(self, n=4):
        return "\n".join(list(self.entries)[-n:])


class Counted:
    """An operation group of the client whose calls are counted in OPS; an error it raises
    carries a note with the last HTTP exchanges."""

    def __init__(self, group, name, journal):
        self._group, self._name, self._journal = group, name, journal

    def __getattr__(self, attr):
        fn = getattr(self._group, attr)
        if not callable(fn):
            return fn

        def call(*args, **kwargs):
            OPS["%s.%s" % (self._name, attr)] += 1
            try:
                return fn(*args, **kwargs)
            except HttpResponseError as e:
                e.add_note("last exchanges:\n" + self._journal.tail(2))
                raise
        return call


class Daemon:
    """`waverun serve` as a child process: HTTPS on an ephemeral loopback port, its own data dir."""

    def __init__(self, name):
        self.dir = tempfile.mkdtemp(prefix="waverun-sdk-%s-" % name, dir=STATE["dir"])
        fleet_file(os.path.join(self.dir, "fleet.json"))
        with open(os.path.join(self.dir, "waverun.yaml"), "w") as f:
            f.write(
                "listen: '127.0.0.1:0'\n"
                "dataDir: data\n"
                "fleet: %s\n"
                "fleetFile: fleet.json\n"
                "timeScale: %d\n"
                "tls: {certFile: %s, keyFile: %s}\n"
                "tokens:\n"
                "- {name: azure-sdk, role: admin, sha256: %s}\n"
                % (FLEET, TIME_SCALE, os.path.join(STATE["dir"], "server.pem"),
                   os.path.join(STATE["dir"], "server.key"),
                   hashlib.sha256(STATE["token"].encode()).hexdigest()))
        env = {k: v for k, v in os.environ.items() if not k.startswith("WAVERUN_")}
        env["WAVERUN_CACHE_DIR"] = MODULE_CACHE
        self.log = os.path.join(self.dir, "daemon.log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [BIN, "serve", "--config", os.path.join(self.dir, "waverun.yaml")],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env)
        lines = queue.Queue()

        def drain():  # reads stdout to its end, so the daemon never blocks on it
            for line in self.proc.stdout:
                lines.put(line.decode("utf-8", "replace"))
        self.drain = threading.Thread(target=drain, daemon=True)
        self.drain.start()
        end = time.monotonic() + 60
        self.url = None
        while self.url is None:
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("the daemon did not say where it listens:\n" + self.log_text())
            try:
                found = re.search(r" on (https://127\.0\.0\.1:\d+)", lines.get(timeout=min(left, 1)))
            except queue.Empty:
                continue
            if found:
                self.url = found.group(1)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def wait_ready(self):
        ctx = ssl.create_default_context(cafile=os.path.join(STATE["dir"], "ca.pem"))
        host, port = self.url[len("https://"):].split(":")
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    c.close()
                    return
                c.close()
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the daemon is not ready within 60 s:\n" + self.log_text())

    def log_text(self):
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        """SIGTERM, then at most 20 s for a clean exit; killed otherwise. Whether it exited 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self.drain.join(timeout=5)
        if not self.drain.is_alive():
            self.proc.stdout.close()
        return self.proc.returncode == 0

    def client(self, journal):
        c = ContainerServiceFleetMgmtClient(
            STATE["credential"], SUB, base_url=self.url,
            credential_scopes=[SCOPE],
            connection_verify=os.path.join(STATE["dir"], "ca.pem"),
            connection_timeout=10, read_timeout=60,
            polling_interval=0.2,  # the daemon's operations finish within their request
            retry_total=0,  # a refusal is the daemon's answer, not something to retry
            raw_response_hook=journal)
        return c


def setUpModule():
    if not os.access(BIN, os.X_OK):
        raise RuntimeError(
            "%s is missing: build it first (`cargo build --bin waverun`, or tests/run.sh's "
            "`cargo test --workspace`)" % BIN)
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is missing: it makes the test certificate authority")
    STATE["dir"] = tempfile.mkdtemp(prefix="waverun-azure-sdk-")
    make_ca(STATE["dir"])
    STATE["token"] = "sdk-" + secrets.token_hex(24)
    STATE["credential"] = Token(STATE["token"])
    # Loopback is never proxied, whatever the environment says.
    for k in ("no_proxy", "NO_PROXY"):
        os.environ[k] = ",".join(filter(None, ["127.0.0.1,localhost", os.environ.get(k)]))


def tearDownModule():
    shutil.rmtree(STATE.get("dir", ""), ignore_errors=True)
    print("\nAzure SDK operations exercised: %d distinct, %d calls" % (len(OPS), sum(OPS.values())))
    for name in sorted(OPS):
        print("  %-58s %d" % (name, OPS[name]))


class DaemonCase(unittest.TestCase):
    """One daemon for the class; `self.sdk` is the SDK's client for it, its operations counted."""

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(cls.__name__)
        cls.addClassCleanup(cls.stop_daemon)
        cls.journal = Journal()
        raw = cls.daemon.client(cls.journal)
        cls.addClassCleanup(raw.close)
        cls.raw = raw
        groups = ["fleets", "fleet_members", "fleet_update_strategies", "update_runs", "gates",
                  "auto_upgrade_profiles", "auto_upgrade_profile_operations"]
        cls.sdk = type("Sdk", (), {g: Counted(getattr(raw, g), g, cls.journal) for g in groups})()

    @classmethod
    def stop_daemon(cls):
        clean = cls.daemon.stop()
        assert clean, "the daemon did not exit cleanly on SIGTERM:\n" + cls.daemon.log_text()

    def explain(self, what):
        """A failure message: what, and the last HTTP exchanges the SDK made."""
        return "%s\nlast exchanges:\n%s\ndaemon log (end):\n%s" % (
            what, self.journal.tail(), self.daemon.log_text()[-1500:])

    def finish(self, poller):
        """Waits (bounded) for a long-running operation's poller; its result."""
        try:
            result = poller.result(timeout=WAIT_SECONDS)
        except HttpResponseError as e:
            e.add_note("last exchanges:\n" + self.journal.tail(3))
            raise
        self.assertTrue(poller.done(), self.explain("the poller did not finish"))
        self.assertEqual(poller.status().lower(), "succeeded", self.explain("poller status"))
        return result

    def assert_resource(self, r, kind, name):
        self.assertEqual(r.name, name, self.explain("name"))
        self.assertTrue(same_id(r.id, arm_id(kind, name)), self.explain("id %r" % r.id))
        self.assertEqual((r.type or "").lower(),
                         ("Microsoft.ContainerService/fleets/" + kind).lower(), self.explain("type"))

    # -- shared steps -----------------------------------------------------------------------

    def put_strategy(self, name, wait_seconds=60, gate=True):
        """Stage `test` (groups dev, spare; then a wait), stage `production` (group prod, after
        an approval gate when `gate`)."""
        production = m.UpdateStage(name="production", groups=[m.UpdateGroup(name="prod")])
        if gate:
            production.before_gates = [m.GateConfiguration(type="Approval", display_name="prod sign-off")]
        body = m.FleetUpdateStrategy(properties=m.FleetUpdateStrategyProperties(
            strategy=m.UpdateRunStrategy(stages=[
                m.UpdateStage(name="test", groups=[m.UpdateGroup(name="dev"), m.UpdateGroup(name="spare")],
                              after_stage_wait_in_seconds=wait_seconds),
                production,
            ])))
        return self.finish(self.sdk.fleet_update_strategies.begin_create_or_update(RG, FLEET, name, body))

    def put_run(self, name, strategy_id, upgrade):
        body = m.UpdateRun(properties=m.UpdateRunProperties(
            update_strategy_id=strategy_id,
            managed_cluster_update=m.ManagedClusterUpdate(
                upgrade=upgrade, node_image_selection=m.NodeImageSelection(type="Latest"))))
        return self.finish(self.sdk.update_runs.begin_create_or_update(RG, FLEET, name, body))

    def run_state(self, run):
        return run.properties.status.status.state

    def wait_run(self, name, states, what):
        """Reads the run until its state is one of `states` (bounded); the run."""
        end = time.monotonic() + WAIT_SECONDS
        while True:
            run = self.sdk.update_runs.get(RG, FLEET, name)
            if self.run_state(run) in states:
                return run
            self.assertLess(time.monotonic(), end, self.explain(
                "%s: run %s still %s" % (what, name, self.run_state(run))))
            time.sleep(0.2)

    def stage(self, run, name):
        found = [s for s in run.properties.status.stages if s.name == name]
        self.assertEqual(len(found), 1, self.explain("stage %s of %s" % (name, run.name)))
        return found[0]


class TheFleetAndItsMembers(DaemonCase):

    def test_the_fleet_reads_as_an_arm_resource_of_any_subscription_and_resource_group(self):
        fleet = self.sdk.fleets.get(RG, FLEET)
        self.assertEqual(fleet.name, FLEET)
        self.assertTrue(same_id(fleet.id, PREFIX), self.explain("fleet id %r" % fleet.id))
        self.assertEqual(fleet.type.lower(), "microsoft.containerservice/fleets")
        # the token credential was asked for the scope the client was given
        self.assertIn((SCOPE,), STATE["credential"].scopes)

    def test_the_sdk_checks_the_certificate_and_refuses_the_daemon_without_the_test_ca(self):
        journal = Journal()
        untrusting = ContainerServiceFleetMgmtClient(
            STATE["credential"], SUB, base_url=self.daemon.url, credential_scopes=[SCOPE],
            connection_timeout=10, read_timeout=30, retry_total=0, raw_response_hook=journal)
        self.addCleanup(untrusting.close)
        with self.assertRaises(ServiceRequestError) as caught:
            untrusting.fleets.get(RG, FLEET)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(caught.exception))
        self.assertEqual(len(journal.entries), 0, "no answer was read")

    def test_members_of_the_fleet_file_are_listed_and_read_with_their_groups(self):
        listed = {mb.name: mb for mb in self.sdk.fleet_members.list_by_fleet(RG, FLEET)}
        self.assertEqual(sorted(listed), sorted(n for n, _ in CLUSTERS), self.explain("members"))
        for name, group in CLUSTERS:
            self.assert_resource(listed[name], "members", name)
            self.assertEqual(listed[name].properties.group, group)
        one = self.sdk.fleet_members.get(RG, FLEET, "prod-2")
        self.assert_resource(one, "members", "prod-2")
        self.assertEqual(one.properties.group, "prod")
        self.assertEqual(one.properties.provisioning_state, "Succeeded")

    def test_a_member_is_deleted_created_again_and_updated_through_pollers(self):
        self.assertIsNone(self.finish(self.sdk.fleet_members.begin_delete(RG, FLEET, "spare-1")))
        with self.assertRaises(ResourceNotFoundError):
            self.sdk.fleet_members.get(RG, FLEET, "spare-1")
        self.assertNotIn("spare-1", [mb.name for mb in self.sdk.fleet_members.list_by_fleet(RG, FLEET)])

        cluster = ("/subscriptions/%s/resourceGroups/rg-clusters/providers/"
                   "Microsoft.ContainerService/managedClusters/spare-1" % SUB)
        created = self.finish(self.sdk.fleet_members.begin_create(
            RG, FLEET, "spare-1", m.FleetMember(properties=m.FleetMemberProperties(
                cluster_resource_id=cluster, group="canary", labels={"tier": "spare"}))))
        self.assert_resource(created, "members", "spare-1")
        self.assertEqual(created.properties.group, "canary")
        self.assertEqual(created.properties.labels, {"tier": "spare"})
        self.assertEqual(created.properties.provisioning_state, "Succeeded")
        self.assertTrue(same_id(created.properties.cluster_resource_id, cluster),
                        self.explain("clusterResourceId %r" % created.properties.cluster_resource_id))

        updated = self.finish(self.sdk.fleet_members.begin_update(
            RG, FLEET, "spare-1", m.FleetMemberUpdate(properties=m.FleetMemberUpdateProperties(
                group="spare", labels={"tier": "spare", "team": "sdk"}))))
        self.assert_resource(updated, "members", "spare-1")
        self.assertEqual(updated.properties.group, "spare")
        self.assertEqual(updated.properties.labels, {"tier": "spare", "team": "sdk"})
        again = self.sdk.fleet_members.get(RG, FLEET, "spare-1")
        self.assertEqual((again.properties.group, again.properties.labels),
                         ("spare", {"tier": "spare", "team": "sdk"}))

    def test_a_refusal_reaches_the_sdk_with_the_arm_error_code_and_message(self):
        with self.assertRaises(ResourceNotFoundError) as caught:
            self.sdk.fleet_members.get(RG, FLEET, "no-such-member")
        e = caught.exception
        self.assertEqual(e.status_code, 404)
        self.assertIsNotNone(e.error, self.explain("the SDK read no ARM error body"))
        self.assertTrue(e.error.code, self.explain("error.code"))
        self.assertIn("no-such-member", e.error.message or "", self.explain("error.message"))

        # an invalid body: a run on a strategy that does not exist
        with self.assertRaises(HttpResponseError) as caught:
            self.put_run("orphan", arm_id("updateStrategies", "no-such-strategy"),
                         m.ManagedClusterUpgradeSpec(type="Full", kubernetes_version="1.34.1"))
        e = caught.exception
        self.assertTrue(400 <= e.status_code < 500, self.explain("status %s" % e.status_code))
        self.assertIsNotNone(e.error, self.explain("the SDK read no ARM error body"))
        self.assertTrue(e.error.code and e.error.message, self.explain("error %r" % e.error))

    def test_an_api_version_the_daemon_does_not_serve_is_refused_with_an_arm_error(self):
        # The SDK pins its api-version per call; the client's own send_request carries another.
        response = self.raw.send_request(HttpRequest("GET", PREFIX + "?api-version=2001-01-01"))
        self.assertEqual(response.status_code, 400, self.explain("status"))
        e = HttpResponseError(response=response, error_format=ARMErrorFormat)
        self.assertTrue(e.error.code and e.error.message, self.explain("error %r" % e.error))
        self.assertEqual(response.headers.get("x-ms-error-code"), e.error.code)
        # and the version the SDK sends by default is one it serves
        self.assertEqual(self.raw._config.api_version, SDK_API_VERSION)
        self.assertEqual(self.sdk.fleets.get(RG, FLEET).name, FLEET)
        self.assertIn("api-version=" + SDK_API_VERSION, self.journal.entries[-1].split("\n")[0])


class UpdateStrategies(DaemonCase):

    def test_strategies_are_created_read_listed_and_deleted(self):
        made = self.put_strategy("two-stage")
        self.assert_resource(made, "updateStrategies", "two-stage")
        self.assertEqual(made.properties.provisioning_state, "Succeeded")
        self.assertEqual([s.name for s in made.properties.strategy.stages], ["test", "production"])
        self.assertEqual(made.properties.strategy.stages[0].after_stage_wait_in_seconds, 60)
        self.assertEqual(made.properties.strategy.stages[1].before_gates[0].type, "Approval")
        self.put_strategy("scratch", gate=False)

        got = self.sdk.fleet_update_strategies.get(RG, FLEET, "two-stage")
        self.assert_resource(got, "updateStrategies", "two-stage")
        self.assertEqual([g.name for g in got.properties.strategy.stages[0].groups], ["dev", "spare"])
        listed = sorted(s.name for s in self.sdk.fleet_update_strategies.list_by_fleet(RG, FLEET))
        self.assertEqual(listed, ["scratch", "two-stage"])

        self.assertIsNone(self.finish(self.sdk.fleet_update_strategies.begin_delete(RG, FLEET, "scratch")))
        with self.assertRaises(ResourceNotFoundError):
            self.sdk.fleet_update_strategies.get(RG, FLEET, "scratch")
        listed = [s.name for s in self.sdk.fleet_update_strategies.list_by_fleet(RG, FLEET)]
        self.assertEqual(listed, ["two-stage"])


class AnUpdateRunThroughAnApprovalGate(DaemonCase):

    def test_a_run_waits_at_its_gate_until_the_gate_is_updated_to_completed_then_completes(self):
        strategy = self.put_strategy("two-stage")
        run = self.put_run("rollout", strategy.id,
                           m.ManagedClusterUpgradeSpec(type="Full", kubernetes_version="1.34.1"))
        self.assert_resource(run, "updateRuns", "rollout")
        self.assertEqual(run.properties.provisioning_state, "Succeeded")
        self.assertEqual(self.run_state(run), "NotStarted")
        self.assertTrue(same_id(run.properties.update_strategy_id, strategy.id))
        self.assertEqual([s.name for s in run.properties.strategy.stages], ["test", "production"])
        self.assertEqual(run.properties.managed_cluster_update.upgrade.kubernetes_version, "1.34.1")
        self.assertEqual([r.name for r in self.sdk.update_runs.list_by_fleet(RG, FLEET)], ["rollout"])

        started = self.finish(self.sdk.update_runs.begin_start(RG, FLEET, "rollout"))
        self.assert_resource(started, "updateRuns", "rollout")
        self.assertEqual(self.run_state(started), "Running")

        # the production stage's approval gate, among the fleet's gates once the test stage is done
        end = time.monotonic() + WAIT_SECONDS
        while True:
            pending = [g for g in self.sdk.gates.list_by_fleet(RG, FLEET)
                       if g.properties.state == "Pending" and g.properties.gate_type == "Approval"]
            if pending:
                break
            self.assertLess(time.monotonic(), end, self.explain("no pending approval gate"))
            time.sleep(0.2)
        self.assertEqual(len(pending), 1, self.explain("pending gates"))
        gate = pending[0]
        self.assertTrue(gate.id.lower().startswith((PREFIX + "/gates/").lower()), self.explain(gate.id))
        self.assertEqual(gate.properties.display_name, "prod sign-off")
        self.assertTrue(same_id(gate.properties.target.id, run.id),
                        self.explain("gate target %r" % gate.properties.target.id))
        target = gate.properties.target.update_run_properties
        self.assertEqual((target.name, target.stage, target.timing), ("rollout", "production", "Before"))
        got = self.sdk.gates.get(RG, FLEET, gate.name)
        self.assertTrue(same_id(got.id, gate.id))
        self.assertEqual(got.properties.state, "Pending")
        # held at the gate: the run and its stage are Pending (as Azure shows a run at a gate)
        held = self.sdk.update_runs.get(RG, FLEET, "rollout")
        self.assertEqual(self.run_state(held), "Pending")
        self.assertEqual(self.stage(held, "test").status.state, "Completed")
        self.assertEqual(self.stage(held, "production").status.state, "Pending")
        gate_status = self.stage(held, "production").before_gates[0]
        self.assertTrue(same_id(gate_status.gate_id, gate.id), self.explain("gateId %r" % gate_status.gate_id))

        approved = self.finish(self.sdk.gates.begin_update(
            RG, FLEET, gate.name, m.GatePatch(properties=m.GatePatchProperties(state="Completed"))))
        self.assertTrue(same_id(approved.id, gate.id))
        self.assertEqual(approved.properties.state, "Completed")

        done = self.wait_run("rollout", TERMINAL, "after the approval")
        self.assertEqual(self.run_state(done), "Completed", self.explain("the run's end"))
        members = {mb.name: mb.status.state
                   for st in done.properties.status.stages for g in st.groups for mb in g.members}
        self.assertEqual(members, {name: "Completed" for name, _ in CLUSTERS})
        self.assertEqual(self.sdk.gates.get(RG, FLEET, gate.name).properties.state, "Completed")
        prod = self.sdk.fleet_members.get(RG, FLEET, "prod-2")
        self.assertEqual(prod.properties.status.get("kubernetesVersion"), "1.34.1",
                         self.explain("prod-2 after the run"))


class StoppingARun(DaemonCase):

    def test_a_running_run_is_stopped_and_then_deleted(self):
        strategy = self.put_strategy("stoppable", gate=False)
        self.put_run("halted", strategy.id,
                     m.ManagedClusterUpgradeSpec(type="Full", kubernetes_version="1.33.5"))
        started = self.finish(self.sdk.update_runs.begin_start(RG, FLEET, "halted"))
        self.assertEqual(self.run_state(started), "Running")
        stopping = self.finish(self.sdk.update_runs.begin_stop(RG, FLEET, "halted"))
        self.assert_resource(stopping, "updateRuns", "halted")
        self.assertIn(self.run_state(stopping), ("Stopping", "Stopped"))
        stopped = self.wait_run("halted", TERMINAL, "after stop")
        self.assertEqual(self.run_state(stopped), "Stopped")
        self.assertEqual(self.stage(stopped, "production").status.state, "NotStarted")

        self.assertIsNone(self.finish(self.sdk.update_runs.begin_delete(RG, FLEET, "halted")))
        with self.assertRaises(ResourceNotFoundError):
            self.sdk.update_runs.get(RG, FLEET, "halted")
        self.assertNotIn("halted", [r.name for r in self.sdk.update_runs.list_by_fleet(RG, FLEET)])



class SkippingAStage(DaemonCase):
    """A daemon of its own: a stopped run's member upgrades in flight would still hold clusters."""

    def test_a_skipped_stage_of_a_running_run_is_not_upgraded_and_the_run_completes(self):
        strategy = self.put_strategy("skippable", wait_seconds=0)
        self.put_run("partial", strategy.id, m.ManagedClusterUpgradeSpec(type="NodeImageOnly"))
        started = self.finish(self.sdk.update_runs.begin_start(RG, FLEET, "partial"))
        self.assertEqual(self.run_state(started), "Running")
        skipped = self.finish(self.sdk.update_runs.begin_skip(
            RG, FLEET, "partial",
            m.SkipProperties(targets=[m.SkipTarget(type="Stage", name="production")])))
        self.assert_resource(skipped, "updateRuns", "partial")
        self.assertEqual(self.stage(skipped, "production").status.state, "Skipped",
                         self.explain("the stage after the skip"))
        done = self.wait_run("partial", TERMINAL, "after the skip")
        self.assertEqual(self.run_state(done), "Completed", self.explain("the run's end"))
        self.assertEqual(self.stage(done, "test").status.state, "Completed")
        self.assertEqual(self.stage(done, "production").status.state, "Skipped")
        prod = self.sdk.fleet_members.get(RG, FLEET, "prod-1")
        pools = prod.properties.status.get("nodePools") or []
        self.assertEqual([p.get("imageVersion") for p in pools], [OLD_IMAGE],
                         self.explain("prod-1's node image after its stage was skipped"))


class AutoUpgradeProfiles(DaemonCase):

    def test_a_profile_is_created_read_listed_generates_a_run_and_is_deleted(self):
        strategy = self.put_strategy("for-profiles", gate=False)
        body = m.AutoUpgradeProfile(properties=m.AutoUpgradeProfileProperties(
            channel="Rapid", update_strategy_id=strategy.id,
            node_image_selection=m.AutoUpgradeNodeImageSelection(type="Latest")))
        made = self.finish(self.sdk.auto_upgrade_profiles.begin_create_or_update(RG, FLEET, "rapid", body))
        self.assert_resource(made, "autoUpgradeProfiles", "rapid")
        self.assertEqual(made.properties.channel, "Rapid")
        self.assertEqual(made.properties.provisioning_state, "Succeeded")
        self.assertTrue(same_id(made.properties.update_strategy_id, strategy.id))

        got = self.sdk.auto_upgrade_profiles.get(RG, FLEET, "rapid")
        self.assert_resource(got, "autoUpgradeProfiles", "rapid")
        self.assertEqual(got.properties.node_image_selection.type, "Latest")
        self.assertEqual([p.name for p in self.sdk.auto_upgrade_profiles.list_by_fleet(RG, FLEET)], ["rapid"])

        generated = self.finish(self.sdk.auto_upgrade_profile_operations.begin_generate_update_run(
            RG, FLEET, "rapid"))
        self.assertIsNotNone(generated, self.explain("generateUpdateRun gave no result"))
        self.assertTrue(generated.id.lower().startswith((PREFIX + "/updateRuns/").lower()),
                        self.explain("generated id %r" % generated.id))
        run = self.sdk.update_runs.get(RG, FLEET, generated.id.rsplit("/", 1)[1])
        self.assertTrue(same_id(run.id, generated.id))
        self.assertTrue(same_id(run.properties.auto_upgrade_profile_id, made.id),
                        self.explain("autoUpgradeProfileId %r" % run.properties.auto_upgrade_profile_id))
        self.assertEqual(run.properties.managed_cluster_update.upgrade.type, "Full")
        self.assertEqual(run.properties.managed_cluster_update.upgrade.kubernetes_version, "1.34.1")
        self.assertEqual(self.run_state(run), "NotStarted")

        self.assertIsNone(self.finish(self.sdk.auto_upgrade_profiles.begin_delete(RG, FLEET, "rapid")))
        with self.assertRaises(ResourceNotFoundError):
            self.sdk.auto_upgrade_profiles.get(RG, FLEET, "rapid")
        self.assertEqual(list(self.sdk.auto_upgrade_profiles.list_by_fleet(RG, FLEET)), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
