"""Tests of the fake ARM + Entra + IMDS server (tests/aks/fake_arm.py), each against the fake
started as a child process on port 0, with the standard library's http.client only.

    python3 -m unittest discover -s tests/aks -v

Operations are made short with --time-scale; every wait is bounded.
"""

import copy
import http.client
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_arm.py")
SUB = "11111111-1111-1111-1111-111111111111"
TENANT = "22222222-2222-2222-2222-222222222222"
API = "2026-08-01"
PREVIEW = "2026-08-02-preview"
SCOPE = "https://management.azure.com/.default"
FEDERATED = ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6d2F2ZXJ1bjp3YXZlcnVuIn0"
             ".c2lnbmF0dXJl")


def image(version):
    return "AKSUbuntu-2204gen2containerd-" + version


IMG_OLD, IMG_MID, IMG_NEW = image("202610.01.0"), image("202611.01.0"), image("202612.01.0")


def mc(rg, name):
    return ("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.ContainerService/"
            "managedClusters/%s" % (SUB, rg, name))


def loc(location):
    return "/subscriptions/%s/providers/Microsoft.ContainerService/locations/%s" % (SUB, location)


def pool_seed(name, mode="User", img=IMG_MID, version="1.33.2", **extra):
    p = {"name": name, "mode": mode, "osType": "Linux", "osSKU": "Ubuntu",
         "type": "VirtualMachineScaleSets", "count": 2, "orchestratorVersion": version,
         "nodeImageVersion": img, "maxPods": 110}
    p.update(extra)
    return p


def base_seed():
    k8s = [{"version": "1.33", "patchVersions": ["1.33.2", "1.33.5"], "isDefault": True},
           {"version": "1.34", "patchVersions": ["1.34.1"]},
           {"version": "1.35", "patchVersions": ["1.35.0"], "isPreview": True}]
    return {
        "identity": {
            "tenantId": TENANT,
            "clients": [{"clientId": "app", "clientSecret": "s3cret"},
                        {"clientId": "wi", "federatedTokens": [FEDERATED]}],
            "managedIdentities": [{"clientId": "mi-1", "objectId": "obj-1"},
                                  {"clientId": "mi-2", "objectId": "obj-2"}]},
        "locations": {
            # eastus has the December image now; westus only an hour (of fake time) later
            "eastus": {"kubernetesVersions": k8s,
                       "nodeImageVersions": [IMG_OLD, IMG_MID, IMG_NEW,
                                             "AKSAzureLinux-V2gen2-202612.01.0"]},
            "westus": {"kubernetesVersions": k8s,
                       "nodeImageVersions": [IMG_OLD, IMG_MID,
                                             {"fullName": IMG_NEW, "availableFrom": 3600}]}},
        "subscriptions": {SUB: {"resourceGroups": {
            "rg1": {"managedClusters": {
                "alpha": {"location": "eastus", "kubernetesVersion": "1.33.2", "tags": {"t": "1"},
                          "properties": {"networkProfile": {"networkPlugin": "azure"}},
                          "agentPools": [pool_seed("system", "System", recentlyUsedVersions=[
                                             {"orchestratorVersion": "1.33.2",
                                              "nodeImageVersion": IMG_OLD}]),
                                         pool_seed("user1"), pool_seed("user2")],
                          "maintenanceConfigurations": {
                              "default": {"timeInWeek": [{"day": "Monday", "hourSlots": [1]}]},
                              "aksManagedAutoUpgradeSchedule": {"maintenanceWindow": {
                                  "schedule": {"weekly": {"intervalWeeks": 1,
                                                          "dayOfWeek": "Sunday"}},
                                  "durationHours": 4, "startTime": "00:00", "utcOffset": "+00:00"}},
                              "aksManagedNodeOSUpgradeSchedule": {"maintenanceWindow": {
                                  "schedule": {"daily": {"intervalDays": 3}},
                                  "durationHours": 4, "startTime": "09:30"}}}},
                "beta": {"location": "westus", "kubernetesVersion": "1.33.2",
                         "agentPools": [pool_seed("system", "System")]}}},
            "rg2": {"managedClusters": {
                "legacy": {"location": "eastus", "kubernetesVersion": "1.33.2",
                           "maxAgentPools": 1,
                           "agentPools": [pool_seed("nodepool1", "System",
                                                    type="AvailabilitySet")]}}}}}},
    }


class Fake:
    """The fake as a child process on port 0."""

    def __init__(self, seed, *args):
        self.dir = tempfile.mkdtemp(prefix="fake-arm-")
        state = os.path.join(self.dir, "seed.json")
        self.port_file = os.path.join(self.dir, "port")
        with open(state, "w") as f:
            json.dump(seed, f)
        self.proc = subprocess.Popen(
            [sys.executable, FAKE, "--port", "0", "--state", state, "--port-file", self.port_file,
             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline() if ready else ""
        m = re.fullmatch(r"listening on http://127\.0\.0\.1:(\d+)\n", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("the fake did not start: %r %s" % (line, self.proc.stderr.read()))
        self.port = int(m.group(1))
        self.base = "http://127.0.0.1:%d" % self.port
        self.tokens = {}

    def close(self):
        if self.proc.returncode is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- plain HTTP

    def request(self, method, url, body=None, headers=None, form=None):
        """(status, headers with lower-case names, JSON body or None)."""
        if url.startswith("http://"):
            url = url[len(self.base):]
        headers = dict(headers or {})
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        elif body is not None:
            data = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, url, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()
        return resp.status, hdrs, (json.loads(raw) if raw else None)

    # -- Entra and ARM

    def token(self, client="app", secret="s3cret"):
        if client not in self.tokens:
            status, _, body = self.request(
                "POST", "/%s/oauth2/v2.0/token" % TENANT,
                form={"grant_type": "client_credentials", "client_id": client,
                      "client_secret": secret, "scope": SCOPE})
            assert status == 200, body
            self.tokens[client] = body["access_token"]
        return self.tokens[client]

    def arm(self, method, path, body=None, api=API, headers=None, token=None):
        if not path.startswith("http") and api is not None and "api-version=" not in path:
            path += ("&" if "?" in path else "?") + "api-version=" + api
        headers = dict(headers or {})
        headers.setdefault("Authorization", "Bearer " + (token or self.token()))
        return self.request(method, path, body, headers)

    def admin(self, method, path, body=None):
        status, _, out = self.request(method, "/_fake/" + path, body)
        assert status in (200, 204), (status, out)
        return out

    def inject(self, **spec):
        return self.admin("POST", "inject", spec)

    def advance(self, seconds):
        return self.admin("POST", "clock", {"advanceSeconds": seconds})

    def upgrades(self, rg, name):
        return self.admin("GET", "requests")["upgradeRequests"].get(mc(rg, name), {})

    def wait(self, predicate, timeout=8, step=0.05):
        deadline = time.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.time() > deadline:
                raise AssertionError("timed out waiting")
            time.sleep(step)

    def poll(self, url, timeout=8):
        """Polls an Azure-AsyncOperation URL as given (fact 1) until it is terminal."""
        def done():
            status, _, body = self.arm("GET", url, api=None)
            assert status == 200, (status, body)
            return body if body["status"] in ("Succeeded", "Failed", "Canceled") else None
        return self.wait(done, timeout)

    def finish(self, url):
        """Moves fake time past any operation, then reads its end at its async URL."""
        self.advance(10000)
        return self.poll(url, timeout=2)

    def cluster(self, rg="rg1", name="alpha"):
        status, hdrs, body = self.arm("GET", mc(rg, name))
        assert status == 200, body
        return body


def put_body(cluster, version=None, pools=None):
    """The PUT of a cluster read back (fact 17): without read-only fields and without
    nodeImageVersion (fact 9), with new versions."""
    body = copy.deepcopy(cluster)
    for key in ("id", "name", "type", "eTag"):
        body.pop(key, None)
    props = body["properties"]
    for key in ("provisioningState", "powerState", "maxAgentPools", "currentKubernetesVersion",
                "fqdn", "status"):
        props.pop(key, None)
    if version:
        props["kubernetesVersion"] = version
    for p in props["agentPoolProfiles"]:
        for key in ("eTag", "currentOrchestratorVersion", "provisioningState", "status",
                    "nodeImageVersion"):
            p.pop(key, None)
        if pools and p["name"] in pools:
            p["orchestratorVersion"] = pools[p["name"]]
    return body


FAST = ("--time-scale", "100", "--operation-seconds", "20")  # 0.2 s of real time per phase
# fake time (nearly) stands still: operations end only when a test moves the clock, so what a
# test sees while one runs does not depend on how fast the machine is
FROZEN = ("--time-scale", "0.001", "--operation-seconds", "20")


class FakeTestCase(unittest.TestCase):
    ARGS = FAST

    def setUp(self):
        self.fake = Fake(self.seed(), *self.ARGS)
        self.addCleanup(lambda: self.fake.close())  # the fake a test restarted, too

    def seed(self):
        return base_seed()

    def assertError(self, response, status, code):
        got, _, body = response
        self.assertEqual(got, status, body)
        self.assertEqual(body["error"]["code"], code, body)
        self.assertIn("message", body["error"])
        return body["error"]


class StartupAndRouting(FakeTestCase):
    def test_port_file_and_listening_line(self):
        with open(self.fake.port_file) as f:
            self.assertEqual(int(f.read()), self.fake.port)

    def test_api_version_required_and_known(self):
        e = self.assertError(self.fake.arm("GET", mc("rg1", "alpha"), api=None), 400,
                             "MissingApiVersionParameter")
        self.assertIn("api-version", e["message"])
        self.assertError(self.fake.arm("GET", mc("rg1", "alpha"), api="2019-01-01"), 400,
                         "InvalidApiVersionParameter")
        # preview-only routes refuse the stable version, accept the preview one
        self.assertError(self.fake.arm("GET", loc("eastus") + "/nodeImageVersions"), 400,
                         "InvalidApiVersionParameter")
        self.assertEqual(self.fake.arm("GET", loc("eastus") + "/nodeImageVersions",
                                       api=PREVIEW)[0], 200)
        # the stable routes take the preview version too
        self.assertEqual(self.fake.arm("GET", mc("rg1", "alpha"), api=PREVIEW)[0], 200)

    def test_fixed_segments_and_names_are_case_insensitive(self):
        path = ("/SUBSCRIPTIONS/%s/RESOURCEGROUPS/RG1/PROVIDERS/microsoft.containerservice/"
                "MANAGEDCLUSTERS/Alpha/AGENTPOOLS/System" % SUB)
        status, _, body = self.fake.arm("GET", path)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["name"], "system")

    def test_not_found_and_unmodeled_method(self):
        self.assertError(self.fake.arm("GET", mc("rg1", "nope")), 404, "ResourceNotFound")
        self.assertError(self.fake.arm("GET", mc("rgx", "alpha")), 404, "ResourceGroupNotFound")
        self.assertError(self.fake.arm("GET", mc("rg1", "alpha").replace(SUB, "0" * 8)), 404,
                         "SubscriptionNotFound")
        self.assertError(self.fake.arm("DELETE", mc("rg1", "alpha")), 405, "MethodNotAllowed")
        self.assertError(self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/nope"), 404,
                         "NotFound")


class Auth(FakeTestCase):
    ARGS = FAST + ("--token-seconds", "1")

    def test_missing_unknown_and_expired_tokens(self):
        path = mc("rg1", "alpha")
        status, hdrs, body = self.fake.request("GET", path + "?api-version=" + API)
        self.assertEqual(status, 401)
        self.assertEqual(body["error"]["code"], "AuthenticationFailed")
        challenge = hdrs["www-authenticate"]
        self.assertTrue(challenge.startswith('Bearer authorization_uri="%s/%s"'
                                             % (self.fake.base, TENANT)), challenge)
        self.assertIn('error="invalid_token"', challenge)
        status, hdrs, body = self.fake.arm("GET", path, token="not-a-token")
        self.assertEqual((status, body["error"]["code"]), (401, "InvalidAuthenticationToken"))
        self.assertIn('error="invalid_token"', hdrs["www-authenticate"])
        token = self.fake.token()
        self.assertEqual(self.fake.arm("GET", path, token=token)[0], 200)
        time.sleep(1.2)  # --token-seconds 1
        status, hdrs, body = self.fake.arm("GET", path, token=token)
        self.assertEqual((status, body["error"]["code"]), (401, "ExpiredAuthenticationToken"))
        self.assertIn("expiry UTC time", body["error"]["message"])
        self.assertIn("www-authenticate", hdrs)

    def test_expire_tokens_injection(self):
        self.fake.tokens.clear()
        token = self.fake.token()
        self.fake.inject(kind="expireTokens")
        status, _, body = self.fake.arm("GET", mc("rg1", "alpha"), token=token)
        self.assertEqual(body["error"]["code"], "ExpiredAuthenticationToken")


class Entra(FakeTestCase):
    URL = "/%s/oauth2/v2.0/token" % TENANT

    def form(self, **extra):
        f = {"grant_type": "client_credentials", "client_id": "app", "client_secret": "s3cret",
             "scope": SCOPE}
        f.update(extra)
        return {k: v for k, v in f.items() if v is not None}

    def test_client_secret(self):
        status, _, body = self.fake.request("POST", self.URL, form=self.form())
        self.assertEqual(status, 200, body)
        self.assertEqual(body["token_type"], "Bearer")
        self.assertIsInstance(body["expires_in"], int)
        self.assertIsInstance(body["ext_expires_in"], int)
        self.assertEqual(body["access_token"].count("."), 2)
        self.assertEqual(self.fake.arm("GET", mc("rg1", "alpha"), token=body["access_token"])[0], 200)

    def test_wrong_secret_scope_client_tenant_grant(self):
        status, _, body = self.fake.request("POST", self.URL, form=self.form(client_secret="no"))
        self.assertEqual((status, body["error"]), (401, "invalid_client"))
        self.assertTrue(body["error_description"].startswith("AADSTS7000215:"), body)
        self.assertEqual(body["error_codes"], [7000215])
        for key in ("trace_id", "correlation_id", "timestamp"):
            self.assertIn(key, body)
        status, _, body = self.fake.request("POST", self.URL, form=self.form(client_secret=None))
        self.assertEqual((status, body["error"]), (401, "invalid_client"))
        status, _, body = self.fake.request(
            "POST", self.URL, form=self.form(scope="https://management.azure.com/user_impersonation"))
        self.assertEqual((status, body["error"]), (400, "invalid_scope"))
        status, _, body = self.fake.request("POST", self.URL, form=self.form(client_id="nobody"))
        self.assertEqual((status, body["error"]), (400, "unauthorized_client"))
        status, _, body = self.fake.request("POST", "/other-tenant/oauth2/v2.0/token",
                                            form=self.form())
        self.assertEqual((status, body["error"]), (400, "invalid_request"))
        status, _, body = self.fake.request("POST", self.URL, form=self.form(grant_type="password"))
        self.assertEqual((status, body["error"]), (400, "unsupported_grant_type"))

    def test_workload_identity_assertion(self):
        jwt_bearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        form = {"grant_type": "client_credentials", "client_id": "wi", "scope": SCOPE,
                "client_assertion_type": jwt_bearer, "client_assertion": FEDERATED}
        status, _, body = self.fake.request("POST", self.URL, form=form)
        self.assertEqual(status, 200, body)
        self.assertEqual(self.fake.arm("GET", mc("rg1", "alpha"), token=body["access_token"])[0], 200)
        form["client_assertion"] = FEDERATED[:-2] + "xx"
        status, _, body = self.fake.request("POST", self.URL, form=form)
        self.assertEqual((status, body["error"]), (401, "invalid_client"))
        self.assertIn("AADSTS700213", body["error_description"])
        self.assertIn("system:serviceaccount:waverun:waverun", body["error_description"])
        form["client_assertion"] = "not a jwt"
        status, _, body = self.fake.request("POST", self.URL, form=form)
        self.assertEqual((status, body["error"]), (400, "invalid_request"))

    def test_openid_configuration(self):
        status, _, body = self.fake.request("GET", "/%s/v2.0/.well-known/openid-configuration"
                                            % TENANT)
        self.assertEqual(status, 200)
        self.assertEqual(body["token_endpoint"], self.fake.base + self.URL)


class Imds(FakeTestCase):
    URL = "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=" + \
        urllib.parse.quote("https://management.azure.com/")

    def test_metadata_header_required(self):
        status, _, body = self.fake.request("GET", self.URL + "&client_id=mi-1")
        self.assertEqual((status, body["error"]), (400, "invalid_request"))
        self.assertIn("metadata header", body["error_description"])

    def test_token_shape_and_identity_choice(self):
        status, _, body = self.fake.request("GET", self.URL + "&client_id=mi-2",
                                            headers={"Metadata": "true"})
        self.assertEqual(status, 200, body)
        for key in ("access_token", "expires_in", "expires_on", "resource", "token_type"):
            self.assertIn(key, body)
        self.assertIsInstance(body["expires_in"], str)
        self.assertIsInstance(body["expires_on"], str)
        self.assertTrue(body["expires_on"].isdigit())
        self.assertEqual(body["resource"], "https://management.azure.com/")
        self.assertEqual(body["client_id"], "mi-2")
        self.assertEqual(self.fake.arm("GET", mc("rg1", "alpha"), token=body["access_token"])[0], 200)
        # two identities and none named: AKS cannot pick
        status, _, body = self.fake.request("GET", self.URL, headers={"Metadata": "true"})
        self.assertEqual(status, 400)
        status, _, body = self.fake.request("GET", self.URL + "&client_id=unknown",
                                            headers={"Metadata": "true"})
        self.assertEqual((status, body["error_description"]), (400, "Identity not found"))
        status, _, body = self.fake.request(
            "GET", "/metadata/identity/oauth2/token?api-version=2018-02-01&client_id=mi-1",
            headers={"Metadata": "true"})
        self.assertEqual(status, 400)


class Reads(FakeTestCase):
    def test_cluster_body(self):
        status, hdrs, c = self.fake.arm("GET", mc("rg1", "alpha"))
        self.assertEqual(status, 200)
        self.assertEqual(c["id"], mc("rg1", "alpha"))
        self.assertEqual(c["type"], "Microsoft.ContainerService/managedClusters")
        self.assertEqual(hdrs["etag"], '"%s"' % c["eTag"])
        p = c["properties"]
        self.assertEqual((p["kubernetesVersion"], p["currentKubernetesVersion"]), ("1.33.2", "1.33.2"))
        self.assertEqual(p["provisioningState"], "Succeeded")
        self.assertEqual(p["powerState"], {"code": "Running"})
        self.assertEqual(p["maxAgentPools"], 100)
        self.assertEqual(p["networkProfile"], {"networkPlugin": "azure"})
        self.assertEqual([x["name"] for x in p["agentPoolProfiles"]], ["system", "user1", "user2"])
        for prof in p["agentPoolProfiles"]:
            self.assertIn("eTag", prof)
            self.assertEqual(prof["nodeImageVersion"], IMG_MID)
            self.assertEqual(prof["currentOrchestratorVersion"], "1.33.2")
        self.assertIn("x-ms-ratelimit-remaining-subscription-reads", hdrs)

    def test_agent_pools_are_paged(self):
        status, _, page1 = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools")
        self.assertEqual(status, 200)
        self.assertEqual([p["name"] for p in page1["value"]], ["system", "user1"])
        self.assertIn("eTag", page1["value"][0]["properties"])
        self.assertIn("api-version=" + API, page1["nextLink"])
        status, _, page2 = self.fake.arm("GET", page1["nextLink"], api=None)
        self.assertEqual(status, 200, page2)
        self.assertEqual([p["name"] for p in page2["value"]], ["user2"])
        self.assertNotIn("nextLink", page2)

    def test_maintenance_configurations(self):
        names, url = [], mc("rg1", "alpha") + "/maintenanceConfigurations?api-version=" + API
        while url:
            status, _, page = self.fake.arm("GET", url, api=None)
            self.assertEqual(status, 200, page)
            names += [c["name"] for c in page["value"]]
            url = page.get("nextLink")
        self.assertEqual(sorted(names), ["aksManagedAutoUpgradeSchedule",
                                         "aksManagedNodeOSUpgradeSchedule", "default"])
        status, _, one = self.fake.arm("GET", mc("rg1", "alpha") +
                                       "/maintenanceConfigurations/aksManagedNodeOSUpgradeSchedule")
        self.assertEqual(status, 200)
        self.assertEqual(one["properties"]["maintenanceWindow"]["schedule"],
                         {"daily": {"intervalDays": 3}})
        self.assertError(self.fake.arm("GET", mc("rg1", "alpha") +
                                       "/maintenanceConfigurations/nope"), 404, "NotFound")

    def test_kubernetes_versions(self):
        status, _, body = self.fake.arm("GET", loc("eastus") + "/kubernetesVersions")
        self.assertEqual(status, 200)
        self.assertNotIn("nextLink", body)
        versions = {v["version"]: v for v in body["values"]}
        self.assertEqual(sorted(versions), ["1.33", "1.34", "1.35"])
        self.assertTrue(versions["1.33"]["isDefault"])
        self.assertTrue(versions["1.35"]["isPreview"])
        self.assertEqual(versions["1.33"]["patchVersions"]["1.33.2"]["upgrades"],
                         ["1.33.5", "1.34.1"])  # minors are not skipped
        self.assertEqual(versions["1.34"]["capabilities"], {"supportPlan": ["KubernetesOfficial"]})

    def test_node_image_versions_per_region_and_time(self):
        def names(location):
            status, _, body = self.fake.arm("GET", loc(location) + "/nodeImageVersions", api=PREVIEW)
            self.assertEqual(status, 200, body)
            return [i["fullName"] for i in body["value"]]
        self.assertIn(IMG_NEW, names("eastus"))
        self.assertNotIn(IMG_NEW, names("westus"))
        self.fake.advance(3600)
        self.assertIn(IMG_NEW, names("westus"))
        status, _, body = self.fake.arm("GET", loc("eastus") + "/nodeImageVersions", api=PREVIEW)
        entry = [i for i in body["value"] if i["fullName"] == IMG_NEW][0]
        self.assertEqual(entry, {"fullName": IMG_NEW, "os": "AKSUbuntu",
                                 "sku": "2204gen2containerd", "version": "202612.01.0"})

    def test_upgrade_profiles(self):
        status, _, prof = self.fake.arm("GET", mc("rg1", "alpha") + "/upgradeProfiles/default")
        self.assertEqual(status, 200)
        cp = prof["properties"]["controlPlaneProfile"]
        self.assertEqual(cp["kubernetesVersion"], "1.33.2")
        self.assertEqual([u["kubernetesVersion"] for u in cp["upgrades"]], ["1.33.5", "1.34.1"])
        pools = prof["properties"]["agentPoolProfiles"]
        self.assertEqual(pools[0]["upgrades"], [])  # not above the control plane
        status, _, pp = self.fake.arm("GET", mc("rg1", "alpha") +
                                      "/agentPools/system/upgradeProfiles/default")
        self.assertEqual(status, 200)
        self.assertEqual(pp["properties"]["latestNodeImageVersion"], IMG_NEW)
        self.assertEqual([r["nodeImageVersion"] for r in pp["properties"]["recentlyUsedVersions"]],
                         [IMG_OLD])
        status, _, pp = self.fake.arm("GET", mc("rg1", "beta") +
                                      "/agentPools/system/upgradeProfiles/default")
        self.assertEqual(pp["properties"]["latestNodeImageVersion"], IMG_MID)  # westus: later


class FullUpgrade(FakeTestCase):
    ARGS = FROZEN

    def test_control_plane_then_pools_then_nothing_more(self):
        c = self.fake.cluster()
        body = put_body(c, "1.34.1", {"system": "1.34.1", "user1": "1.34.1", "user2": "1.34.1"})
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), body)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["properties"]["provisioningState"], "Upgrading")
        self.assertEqual(out["properties"]["kubernetesVersion"], "1.34.1")
        self.assertEqual(out["properties"]["currentKubernetesVersion"], "1.33.2")
        self.assertEqual(out["properties"]["agentPoolProfiles"][0]["provisioningState"], "Upgrading")
        self.assertIn("retry-after", hdrs)
        self.assertIn("x-ms-ratelimit-remaining-subscription-writes", hdrs)
        url = hdrs["azure-asyncoperation"]
        self.assertIn("api-version=2016-03-30", url)  # its own api-version (fact 1)
        status, hdrs2, first = self.fake.arm("GET", url, api=None)
        self.assertEqual((status, first["status"]), (200, "InProgress"))
        self.assertEqual(set(first) - {"percentComplete"}, {"name", "status", "startTime"})
        self.assertIn("retry-after", hdrs2)
        # the preview operation resource says what runs
        op_id = url.split("/operations/")[1].split("?")[0]
        status, _, op = self.fake.arm("GET", mc("rg1", "alpha") + "/operations/" + op_id,
                                      api=PREVIEW)
        self.assertEqual((op["operationType"], op["subOperationType"]),
                         ("PutManagedCluster", "Upgrading"))
        # phase 1 (20 fake seconds): the control plane
        self.fake.advance(21)
        p = self.fake.cluster()["properties"]
        self.assertEqual(p["currentKubernetesVersion"], "1.34.1")
        self.assertEqual(p["provisioningState"], "Upgrading")
        self.assertEqual([x["currentOrchestratorVersion"] for x in p["agentPoolProfiles"]],
                         ["1.33.2"] * 3)
        # phase 2: the first pool, on the newest image of eastus
        self.fake.advance(20)
        pools = self.fake.cluster()["properties"]["agentPoolProfiles"]
        self.assertEqual([(x["currentOrchestratorVersion"], x["provisioningState"]) for x in pools],
                         [("1.34.1", "Succeeded"), ("1.33.2", "Upgrading"),
                          ("1.33.2", "Upgrading")])
        self.assertEqual(pools[0]["nodeImageVersion"], IMG_NEW)
        self.assertEqual(self.fake.arm("GET", url, api=None)[2]["status"], "InProgress")
        done = self.fake.finish(url)
        self.assertEqual(done["status"], "Succeeded")
        self.assertIn("endTime", done)
        c = self.fake.cluster()
        self.assertEqual(c["properties"]["provisioningState"], "Succeeded")
        for p in c["properties"]["agentPoolProfiles"]:
            self.assertEqual(p["currentOrchestratorVersion"], "1.34.1")
            self.assertEqual(p["nodeImageVersion"], IMG_NEW)
            self.assertEqual(p["provisioningState"], "Succeeded")
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {
            "kubernetesVersion=1.34.1": 1, "agentPools/system/orchestratorVersion=1.34.1": 1,
            "agentPools/user1/orchestratorVersion=1.34.1": 1,
            "agentPools/user2/orchestratorVersion=1.34.1": 1})
        # the same versions again: no operation, nothing counted, the eTag kept
        etag = c["eTag"]
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c))
        self.assertEqual(status, 200)
        self.assertEqual(out["properties"]["provisioningState"], "Succeeded")
        self.assertNotIn("azure-asyncoperation", hdrs)
        self.assertEqual(out["eTag"], etag)
        self.assertEqual(sum(self.fake.upgrades("rg1", "alpha").values()), 4)
        log = self.fake.admin("GET", "requests")["requests"]
        puts = [r for r in log if r["method"] == "PUT"]
        self.assertEqual([r["upgrade"] for r in puts], [True, False])
        self.assertEqual(puts[0]["status"], 200)
        self.assertIn("kubernetesVersion=1.34.1", puts[0]["targets"])


class Upgrades(FakeTestCase):
    """Operations that run in (fast) real time, followed at their async URL as a client would."""

    def test_full_upgrade_in_real_time(self):
        c = self.fake.cluster()
        body = put_body(c, "1.34.1", {"system": "1.34.1", "user1": "1.34.1", "user2": "1.34.1"})
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), body)
        self.assertEqual(status, 200, out)
        self.assertEqual(self.fake.poll(hdrs["azure-asyncoperation"])["status"], "Succeeded")
        p = self.fake.cluster()["properties"]
        self.assertEqual(p["currentKubernetesVersion"], "1.34.1")
        self.assertEqual({x["currentOrchestratorVersion"] for x in p["agentPoolProfiles"]},
                         {"1.34.1"})

    def test_alias_of_the_running_minor_is_no_upgrade(self):
        c = self.fake.cluster()
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33"))
        self.assertEqual(status, 200, out)
        self.assertNotIn("azure-asyncoperation", hdrs)
        self.assertEqual(out["properties"]["kubernetesVersion"], "1.33")
        self.assertEqual(out["properties"]["currentKubernetesVersion"], "1.33.2")
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {})

    def test_alias_of_the_next_minor_resolves_to_its_newest_patch(self):
        c = self.fake.cluster()
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.34"))
        self.assertEqual(status, 200, out)
        self.fake.poll(hdrs["azure-asyncoperation"])
        c = self.fake.cluster()
        self.assertEqual(c["properties"]["currentKubernetesVersion"], "1.34.1")
        # control plane only: the pools stay where they were
        self.assertEqual(c["properties"]["agentPoolProfiles"][0]["currentOrchestratorVersion"],
                         "1.33.2")

    def test_refused_paths(self):
        c = self.fake.cluster()
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.35.0")),
                             400, "OperationNotAllowed")
        self.assertIn("Upgrading Kubernetes version 1.33.2 to 1.35.0 is not allowed", e["message"])
        self.assertIn("1.34.1", e["message"])
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"),
                                           put_body(c, None, {"user1": "1.33.5"})),
                             400, "OperationNotAllowed")  # a pool above the control plane
        self.assertIn("control plane", e["message"])
        self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.1")),
                         400, "OperationNotAllowed")  # not in the catalog / a downgrade
        self.assertEqual(self.fake.cluster()["properties"]["provisioningState"], "Succeeded")
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {})

    def test_legacy_cluster_upgrades_its_pools_with_the_control_plane(self):
        c = self.fake.cluster("rg2", "legacy")
        status, hdrs, out = self.fake.arm("PUT", mc("rg2", "legacy"), put_body(c, "1.34.1"))
        self.assertEqual(status, 200, out)
        self.assertEqual(out["properties"]["agentPoolProfiles"][0]["orchestratorVersion"], "1.34.1")
        self.fake.poll(hdrs["azure-asyncoperation"])
        c = self.fake.cluster("rg2", "legacy")
        self.assertEqual(c["properties"]["agentPoolProfiles"][0]["currentOrchestratorVersion"],
                         "1.34.1")
        self.assertEqual(self.fake.upgrades("rg2", "legacy"), {
            "kubernetesVersion=1.34.1": 1, "agentPools/nodepool1/orchestratorVersion=1.34.1": 1})

    def test_pool_put_upgrade(self):
        status, hdrs, _ = self.fake.arm("PUT", mc("rg1", "alpha"),
                                        put_body(self.fake.cluster(), "1.34"))  # control plane only
        self.fake.poll(hdrs["azure-asyncoperation"])
        status, _, pool = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user1")
        body = {"properties": {k: v for k, v in pool["properties"].items()
                               if k not in ("eTag", "nodeImageVersion")}}
        body["properties"]["orchestratorVersion"] = "1.35.0"
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha") + "/agentPools/user1", body),
                             400, "OperationNotAllowed")  # a minor skipped
        self.assertIn("Upgrading Kubernetes version 1.33.2 to 1.35.0 is not allowed", e["message"])
        self.assertEqual(e["target"], "properties.orchestratorVersion")
        body["properties"]["orchestratorVersion"] = "1.34.1"
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha") + "/agentPools/user1", body)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["properties"]["provisioningState"], "Upgrading")
        self.assertNotEqual(out["properties"]["eTag"], pool["properties"]["eTag"])
        done = self.fake.poll(hdrs["azure-asyncoperation"])
        self.assertEqual(done["status"], "Succeeded")
        status, _, pool = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user1")
        self.assertEqual(pool["properties"]["currentOrchestratorVersion"], "1.34.1")
        self.assertEqual(pool["properties"]["nodeImageVersion"], IMG_NEW)
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {
            "kubernetesVersion=1.34.1": 1, "agentPools/user1/orchestratorVersion=1.34.1": 1})

    def test_no_async_header_option(self):
        self.fake.close()
        self.fake = Fake(self.seed(), *FAST, "--no-async-header")
        c = self.fake.cluster()
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"))
        self.assertEqual(status, 200, out)
        self.assertNotIn("azure-asyncoperation", hdrs)
        self.assertIn("retry-after", hdrs)
        self.assertEqual(out["properties"]["provisioningState"], "Upgrading")
        self.fake.wait(lambda: self.fake.cluster()["properties"]["provisioningState"] == "Succeeded")
        self.assertEqual(self.fake.cluster()["properties"]["currentKubernetesVersion"], "1.33.5")


class NodeImages(FakeTestCase):
    ARGS = FROZEN

    def test_upgrade_node_image_version_goes_to_the_newest_of_the_region_now(self):
        url = mc("rg1", "alpha") + "/agentPools/user1/upgradeNodeImageVersion"
        status, hdrs, out = self.fake.arm("POST", url)
        self.assertEqual(status, 202, out)
        self.assertEqual(out["properties"]["provisioningState"], "UpgradingNodeImageVersion")
        self.assertEqual(out["properties"]["nodeImageVersion"], IMG_MID)
        for h in ("azure-asyncoperation", "location", "retry-after"):
            self.assertIn(h, hdrs)
        self.assertEqual(self.fake.arm("GET", hdrs["location"], api=None)[0], 202)
        # the preview operation resources
        op_id = hdrs["azure-asyncoperation"].split("/operations/")[1].split("?")[0]
        status, _, op = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user1/operations/"
                                      + op_id, api=PREVIEW)
        self.assertEqual(status, 200, op)
        self.assertEqual(op["subOperationType"], "UpgradingNodeImageVersion")
        self.assertEqual(op["name"], op_id)
        self.fake.advance(21)
        status, _, final = self.fake.arm("GET", hdrs["location"], api=None)
        self.assertEqual(status, 200, final)
        self.assertEqual(final["properties"]["nodeImageVersion"], IMG_NEW)
        self.assertEqual(final["properties"]["provisioningState"], "Succeeded")
        # the previous image is remembered for a rollback
        status, _, pp = self.fake.arm("GET", mc("rg1", "alpha") +
                                      "/agentPools/user1/upgradeProfiles/default")
        self.assertEqual(pp["properties"]["recentlyUsedVersions"][0]["nodeImageVersion"], IMG_MID)
        # already on the newest: 200, no body, nothing counted
        status, hdrs, out = self.fake.arm("POST", url)
        self.assertEqual((status, out), (200, None))
        self.assertEqual(self.fake.upgrades("rg1", "alpha"),
                         {"agentPools/user1/nodeImageVersion=" + IMG_NEW: 1})

    def test_an_image_reaches_westus_later(self):
        url = mc("rg1", "beta") + "/agentPools/system/upgradeNodeImageVersion"
        self.assertEqual(self.fake.arm("POST", url)[0], 200)  # westus has nothing newer yet
        self.fake.advance(3600)
        status, hdrs, out = self.fake.arm("POST", url)
        self.assertEqual(status, 202, out)
        self.fake.finish(hdrs["azure-asyncoperation"])
        self.assertEqual(self.fake.cluster("rg1", "beta")["properties"]["agentPoolProfiles"][0]
                         ["nodeImageVersion"], IMG_NEW)

    def test_rollback_only_to_recently_used_versions(self):
        path = mc("rg1", "alpha") + "/agentPools/system"
        status, _, pool = self.fake.arm("GET", path)
        props = {k: v for k, v in pool["properties"].items() if k != "eTag"}
        e = self.assertError(self.fake.arm("PUT", path, {"properties": dict(
            props, nodeImageVersion=image("202501.01.0"))}), 400, "InvalidParameter")
        self.assertIn("recentlyUsedVersions", e["message"])
        status, hdrs, out = self.fake.arm("PUT", path, {"properties": dict(
            props, nodeImageVersion=IMG_OLD)})
        self.assertEqual(status, 200, out)
        self.fake.finish(hdrs["azure-asyncoperation"])
        status, _, pool = self.fake.arm("GET", path)
        self.assertEqual(pool["properties"]["nodeImageVersion"], IMG_OLD)
        self.assertEqual(self.fake.upgrades("rg1", "alpha"),
                         {"agentPools/system/nodeImageVersion=" + IMG_OLD: 1})

    def test_sending_back_a_stale_node_image_is_a_rollback(self):
        """Fact 9: a body read before AKS moved the image asks for the old image back."""
        path = mc("rg1", "alpha") + "/agentPools/user2"
        status, _, before = self.fake.arm("GET", path)
        status, hdrs, _ = self.fake.arm("POST", path + "/upgradeNodeImageVersion")
        self.fake.finish(hdrs["azure-asyncoperation"])
        props = {k: v for k, v in before["properties"].items() if k != "eTag"}
        status, hdrs, out = self.fake.arm("PUT", path, {"properties": props})
        self.assertEqual(status, 200, out)
        self.assertIn("agentPools/user2/nodeImageVersion=" + IMG_MID,
                      self.fake.upgrades("rg1", "alpha"))


class Writes(FakeTestCase):
    ARGS = FROZEN

    def test_etags_and_if_match(self):
        c = self.fake.cluster()
        status, _, pool = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user1")
        self.assertEqual(pool["properties"]["eTag"], c["properties"]["agentPoolProfiles"][1]["eTag"])
        stale = c["eTag"]
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"),
                                          headers={"If-Match": '"%s"' % stale})
        self.assertEqual(status, 200, out)
        self.assertNotEqual(out["eTag"], stale)
        self.fake.finish(hdrs["azure-asyncoperation"])
        c2 = self.fake.cluster()
        self.assertNotEqual(c2["eTag"], out["eTag"])  # the operation's progress is a change too
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c2, "1.34.1"),
                                           headers={"If-Match": stale}), 412, "PreconditionFailed")
        self.assertIn("If-Match", e["message"])
        self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c2),
                                       headers={"If-None-Match": "*"}), 412, "PreconditionFailed")
        status, hdrs, _ = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c2, "1.34.1"),
                                        headers={"If-Match": c2["eTag"]})
        self.assertEqual(status, 200)
        self.fake.finish(hdrs["azure-asyncoperation"])
        # a pool's eTag moves when the pool changes (and only then)
        path = mc("rg1", "alpha") + "/agentPools/user1"
        status, _, now = self.fake.arm("GET", path)
        self.assertEqual(now["properties"]["eTag"], pool["properties"]["eTag"])
        status, hdrs, out = self.fake.arm("PUT", path, {"properties": {"count": 3, "mode": "User"}},
                                          headers={"If-Match": now["properties"]["eTag"]})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["properties"]["provisioningState"], "Updating")
        self.assertNotEqual(out["properties"]["eTag"], pool["properties"]["eTag"])
        self.fake.finish(hdrs["azure-asyncoperation"])
        self.assertError(self.fake.arm("PUT", path, {"properties": {"count": 2, "mode": "User"}},
                                       headers={"If-Match": pool["properties"]["eTag"]}),
                         412, "PreconditionFailed")

    def test_read_only_fields_ignored_required_fields_named(self):
        c = self.fake.cluster()
        body = put_body(c)
        body["properties"].update({"currentKubernetesVersion": "9.9.9", "provisioningState": "Failed",
                                   "maxAgentPools": 999, "fqdn": "x"})
        body["eTag"] = "whatever"
        body["properties"]["agentPoolProfiles"][0]["currentOrchestratorVersion"] = "9.9.9"
        status, _, out = self.fake.arm("PUT", mc("rg1", "alpha"), body)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["properties"]["currentKubernetesVersion"], "1.33.2")
        self.assertEqual(out["properties"]["maxAgentPools"], 100)
        self.assertEqual(out["properties"]["provisioningState"], "Succeeded")
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {})
        b = put_body(c)
        del b["location"]
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), b), 400, "LocationRequired")
        self.assertEqual(e["target"], "location")
        b = put_body(c)
        del b["properties"]["agentPoolProfiles"][1]["count"]
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), b), 400, "InvalidParameter")
        self.assertEqual(e["target"], "properties.agentPoolProfiles[1].count")
        b = put_body(c)
        del b["properties"]["agentPoolProfiles"][2]
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), b), 400, "InvalidParameter")
        self.assertIn("user2", e["message"])
        b = put_body(c)
        del b["properties"]["agentPoolProfiles"][0]["mode"]  # the only System pool becomes User
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), b), 400, "InvalidParameter")
        self.assertIn("System", e["message"])
        b = put_body(c)
        b["properties"]["agentPoolProfiles"][0]["vmSize"] = "Standard_B2s"
        self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), b), 400,
                         "PropertyChangeNotAllowed")
        self.assertError(self.fake.arm("PUT", mc("rg1", "alpha") + "/agentPools/user1", {}), 400,
                         "InvalidParameter")

    def test_a_dropped_property_is_lost_and_updates(self):
        c = self.fake.cluster()
        b = put_body(c)
        del b["properties"]["networkProfile"]
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), b)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["properties"]["provisioningState"], "Updating")
        self.assertNotIn("networkProfile", out["properties"])
        self.fake.finish(hdrs["azure-asyncoperation"])
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {})

    def test_single_writer(self):
        c = self.fake.cluster()
        status, hdrs, _ = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"))
        self.assertEqual(status, 200)
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5")),
                             409, "OperationNotAllowed")
        self.assertEqual(e["message"], "Operation is not allowed: Another operation (alpha - "
                         "Upgrading) is in progress, please wait for it to finish before starting "
                         "a new operation. See https://aka.ms/aks-pending-operation for more "
                         "details")
        self.assertError(self.fake.arm("POST", mc("rg1", "alpha") +
                                       "/agentPools/user1/upgradeNodeImageVersion"),
                         409, "OperationNotAllowed")
        self.fake.finish(hdrs["azure-asyncoperation"])
        status, hdrs, _ = self.fake.arm("POST", mc("rg1", "alpha") +
                                        "/agentPools/user1/upgradeNodeImageVersion")
        self.assertEqual(status, 202)
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"),
                                           put_body(self.fake.cluster(), "1.34.1")),
                             409, "OperationNotAllowed")
        self.assertIn("(user1 - UpgradingNodeImageVersion)", e["message"])
        self.fake.finish(hdrs["azure-asyncoperation"])
        # a pool's own upgrade blocks its siblings and the cluster
        status, _, pool = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user1")
        body = {"properties": {k: v for k, v in pool["properties"].items()
                               if k not in ("eTag", "nodeImageVersion")}}
        status, hdrs, _ = self.fake.arm("PUT", mc("rg1", "alpha") + "/agentPools/user1",
                                        {"properties": dict(body["properties"], count=5)})
        self.assertEqual(status, 200)
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha") + "/agentPools/user2", body),
                             409, "OperationNotAllowed")
        self.assertIn("(user1 - Updating)", e["message"])
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {
            "kubernetesVersion=1.33.5": 1, "agentPools/user1/nodeImageVersion=" + IMG_NEW: 1})

    def test_stopped_cluster_refuses_writes(self):
        self.fake.inject(kind="stop", cluster="alpha")
        c = self.fake.cluster()
        self.assertEqual(c["properties"]["powerState"], {"code": "Stopped"})
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5")),
                             400, "ValidationError")
        self.assertIn("stopped", e["message"])
        self.assertError(self.fake.arm("POST", mc("rg1", "alpha") +
                                       "/agentPools/user1/upgradeNodeImageVersion"),
                         400, "ValidationError")
        self.fake.inject(kind="start", cluster="rg1/alpha")
        self.assertEqual(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"))[0], 200)


class StoppedSeed(FakeTestCase):
    def seed(self):
        s = base_seed()
        beta = s["subscriptions"][SUB]["resourceGroups"]["rg1"]["managedClusters"]["beta"]
        beta["powerState"] = "Stopped"
        alpha = s["subscriptions"][SUB]["resourceGroups"]["rg1"]["managedClusters"]["alpha"]
        alpha["powerState"] = None
        return s

    def test_seeded_power_states(self):
        beta = self.fake.cluster("rg1", "beta")
        self.assertEqual(beta["properties"]["powerState"], {"code": "Stopped"})
        self.assertError(self.fake.arm("PUT", mc("rg1", "beta"), put_body(beta, "1.33.5")),
                         400, "ValidationError")
        self.assertNotIn("powerState", self.fake.cluster()["properties"])  # unknown (fact 14)


class Throttling(FakeTestCase):
    ARGS = FAST + ("--reads", "3:2", "--writes", "1:1")

    def test_read_and_write_buckets(self):
        path = mc("rg1", "alpha")
        token = self.fake.token()
        remaining = []
        for _ in range(3):
            status, hdrs, _ = self.fake.arm("GET", path, token=token)
            self.assertEqual(status, 200)
            remaining.append(int(hdrs["x-ms-ratelimit-remaining-subscription-reads"]))
        self.assertEqual(remaining, [2, 1, 0])
        status, hdrs, body = self.fake.arm("GET", path, token=token)
        self.assertEqual(status, 429, body)
        self.assertIn(body["error"]["code"], ("SubscriptionRequestsThrottled", "TooManyRequests"))
        wait = int(hdrs["retry-after"])
        self.assertGreaterEqual(wait, 1)
        self.assertEqual(hdrs["x-ms-ratelimit-remaining-subscription-reads"], "0")
        self.assertEqual(self.fake.arm("GET", path, token=token)[0], 429)  # before Retry-After
        time.sleep(wait)
        self.assertEqual(self.fake.arm("GET", path, token=token)[0], 200)
        # writes have their own bucket
        b = {"properties": {"count": 2, "mode": "User"}}
        status, hdrs, _ = self.fake.arm("PUT", path + "/agentPools/user1", b, token=token)
        self.assertEqual(status, 200)
        self.assertEqual(hdrs["x-ms-ratelimit-remaining-subscription-writes"], "0")
        status, hdrs, body = self.fake.arm("PUT", path + "/agentPools/user1", b, token=token)
        self.assertEqual(status, 429, body)
        self.assertIn("'write' requests", body["error"]["message"])


class Injected(FakeTestCase):
    def test_next_upgrade_fails_then_a_retry_succeeds(self):
        self.fake.inject(kind="fail", cluster="alpha",
                         error={"code": "UpgradeFailed", "message": "drain failed",
                                "subcode": "PodDrainFailure"})
        c = self.fake.cluster()
        body = put_body(c, "1.34.1", {"system": "1.34.1"})
        status, hdrs, _ = self.fake.arm("PUT", mc("rg1", "alpha"), body)
        self.assertEqual(status, 200)
        done = self.fake.poll(hdrs["azure-asyncoperation"])
        self.assertEqual(done["status"], "Failed")
        self.assertEqual(done["error"], {"code": "UpgradeFailed", "message": "drain failed",
                                         "subcode": "PodDrainFailure"})
        c = self.fake.cluster()
        self.assertEqual(c["properties"]["provisioningState"], "Failed")
        self.assertEqual(c["properties"]["status"]["provisioningError"]["code"], "UpgradeFailed")
        self.assertEqual(c["properties"]["currentKubernetesVersion"], "1.33.2")
        # fact 15: the same versions again is the retry
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c))
        self.assertEqual(status, 200, out)
        self.assertEqual(out["properties"]["provisioningState"], "Upgrading")
        self.assertEqual(self.fake.poll(hdrs["azure-asyncoperation"])["status"], "Succeeded")
        c = self.fake.cluster()
        self.assertEqual(c["properties"]["currentKubernetesVersion"], "1.34.1")
        self.assertNotIn("status", c["properties"])
        self.assertEqual(self.fake.upgrades("rg1", "alpha")["kubernetesVersion=1.34.1"], 2)

    def test_failed_node_image_upgrade_location_answers_the_error(self):
        self.fake.inject(kind="fail", cluster="alpha", pool="user1", locationStatus=409,
                         error={"code": "NodeImageUpgradeFailed", "message": "no"})
        status, hdrs, _ = self.fake.arm("POST", mc("rg1", "alpha") +
                                        "/agentPools/user1/upgradeNodeImageVersion")
        self.assertEqual(self.fake.poll(hdrs["azure-asyncoperation"])["status"], "Failed")
        status, _, body = self.fake.arm("GET", hdrs["location"], api=None)
        self.assertEqual((status, body["error"]["code"]), (409, "NodeImageUpgradeFailed"))
        status, _, pool = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user1")
        self.assertEqual(pool["properties"]["provisioningState"], "Failed")
        self.assertEqual(pool["properties"]["status"]["provisioningError"]["code"],
                         "NodeImageUpgradeFailed")

    def test_stuck_operation(self):
        self.fake.inject(kind="stuck", cluster="alpha")
        status, hdrs, _ = self.fake.arm("POST", mc("rg1", "alpha") +
                                        "/agentPools/user1/upgradeNodeImageVersion")
        self.assertEqual(status, 202)
        self.fake.wait(lambda: self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user1")[2]
                       ["properties"]["provisioningState"] == "Succeeded")
        time.sleep(0.3)
        status, _, body = self.fake.arm("GET", hdrs["azure-asyncoperation"], api=None)
        self.assertEqual(body["status"], "InProgress")
        self.assertEqual(self.fake.arm("GET", hdrs["location"], api=None)[0], 202)
        # the resource is done, so it takes writes
        self.assertEqual(self.fake.arm("POST", mc("rg1", "alpha") +
                                       "/agentPools/user2/upgradeNodeImageVersion")[0], 202)

    def test_connection_reset_after_the_write_was_applied(self):
        self.fake.inject(kind="reset", cluster="alpha", method="PUT")
        c = self.fake.cluster()
        with self.assertRaises((ConnectionResetError, http.client.RemoteDisconnected,
                                ConnectionAbortedError, BrokenPipeError)):
            self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"))
        c = self.fake.cluster()
        self.assertEqual(c["properties"]["kubernetesVersion"], "1.33.5")
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {"kubernetesVersion=1.33.5": 1})
        log = self.fake.admin("GET", "requests")["requests"]
        self.assertEqual([r["status"] for r in log if r["method"] == "PUT"], ["reset"])
        # only once
        self.fake.wait(lambda: self.fake.cluster()["properties"]["provisioningState"] == "Succeeded")
        self.assertEqual(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.34.1"))[0], 200)

    def test_a_concurrent_write_makes_the_next_if_match_stale(self):
        self.fake.inject(kind="concurrentWrite", cluster="alpha")
        c = self.fake.cluster()
        self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"),
                                       headers={"If-Match": c["eTag"]}), 412, "PreconditionFailed")
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {})
        # read again, written again: it passes (the injection was used once)
        c = self.fake.cluster()
        status, _, out = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"),
                                       headers={"If-Match": c["eTag"]})
        self.assertEqual(status, 200, out)
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {"kubernetesVersion=1.33.5": 1})

    def test_aks_initiated_operation_blocks_writes(self):
        self.fake.inject(kind="aksOperation", cluster="alpha", pool="user2", seconds=100000)
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"),
                                           put_body(self.fake.cluster(), "1.33.5")),
                             409, "OperationNotAllowed")
        self.assertIn("(user2 - UpgradingNodeImageVersion)", e["message"])
        status, _, pool = self.fake.arm("GET", mc("rg1", "alpha") + "/agentPools/user2")
        self.assertEqual(pool["properties"]["provisioningState"], "UpgradingNodeImageVersion")
        # when it ends, AKS has moved the pool to the newest image, and writes pass again
        self.fake.advance(100000)
        self.assertEqual(self.fake.arm("PUT", mc("rg1", "alpha"),
                                       put_body(self.fake.cluster(), "1.33.5"))[0], 200)
        pools = self.fake.cluster()["properties"]["agentPoolProfiles"]
        self.assertEqual(pools[2]["nodeImageVersion"], IMG_NEW)
        self.assertEqual(self.fake.upgrades("rg1", "alpha"), {"kubernetesVersion=1.33.5": 1})

    def test_aks_operation_later(self):
        self.fake.inject(kind="aksOperation", cluster="alpha", at=3600, seconds=600)
        self.assertEqual(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(self.fake.cluster(),
                                                                            "1.33"))[0], 200)
        self.fake.advance(3600)
        self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(self.fake.cluster())),
                         409, "OperationNotAllowed")
        self.fake.advance(600)
        self.assertEqual(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(self.fake.cluster()))[0],
                         200)

    def test_deprecated_api_guard(self):
        self.fake.inject(kind="deprecatedApis", cluster="alpha")
        c = self.fake.cluster()
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.34.1")),
                             400, "ValidationError")
        self.assertEqual(e["subcode"], "UpgradeBlockedOnDeprecatedAPIUsage")
        # a patch upgrade is not blocked
        body = put_body(c, "1.34.1")
        body["properties"]["upgradeSettings"] = {"overrideSettings": {
            "forceUpgrade": True, "until": "2000-01-01T00:00:00Z"}}
        e = self.assertError(self.fake.arm("PUT", mc("rg1", "alpha"), body), 400, "ValidationError")
        self.assertEqual(e["subcode"], "UpgradeBlockedOnDeprecatedAPIUsage")  # `until` is past
        body["properties"]["upgradeSettings"]["overrideSettings"]["until"] = "2999-01-01T00:00:00Z"
        status, hdrs, out = self.fake.arm("PUT", mc("rg1", "alpha"), body)
        self.assertEqual(status, 200, out)
        self.fake.poll(hdrs["azure-asyncoperation"])
        self.assertEqual(self.fake.cluster()["properties"]["currentKubernetesVersion"], "1.34.1")

    def test_deprecated_api_guard_spares_patch_upgrades(self):
        self.fake.inject(kind="deprecatedApis", cluster="alpha")
        self.assertEqual(self.fake.arm("PUT", mc("rg1", "alpha"),
                                       put_body(self.fake.cluster(), "1.33.5"))[0], 200)

    def test_temporary_server_errors(self):
        self.fake.inject(kind="serverError", status=503, times=2, method="GET",
                         pathContains="/managedClusters/alpha", retryAfter=1)
        token = self.fake.token()
        first = self.fake.arm("GET", mc("rg1", "alpha"), token=token)
        self.assertEqual(first[0], 503)
        self.assertEqual(first[1]["retry-after"], "1")
        self.assertEqual(self.fake.arm("GET", mc("rg1", "alpha"), token=token)[0], 503)
        self.assertEqual(self.fake.arm("GET", mc("rg1", "alpha"), token=token)[0], 200)

    def test_seeded_injections(self):
        self.fake.close()
        seed = base_seed()
        seed["inject"] = [{"kind": "stop", "cluster": "beta"},
                          {"kind": "serverError", "status": 500, "pathContains": "oauth2"}]
        self.fake = Fake(seed, *FAST)
        status, _, _ = self.fake.request("POST", "/%s/oauth2/v2.0/token" % TENANT, form={
            "grant_type": "client_credentials", "client_id": "app", "client_secret": "s3cret",
            "scope": SCOPE})
        self.assertEqual(status, 500)
        self.assertEqual(self.fake.cluster("rg1", "beta")["properties"]["powerState"]["code"],
                         "Stopped")
        state = self.fake.admin("GET", "state")
        self.assertEqual(len(state["clusters"]), 3)


class Accounting(FakeTestCase):
    def test_request_log(self):
        self.fake.cluster()
        c = self.fake.cluster()
        status, hdrs, _ = self.fake.arm("PUT", mc("rg1", "alpha"), put_body(c, "1.33.5"))
        out = self.fake.admin("GET", "requests")
        entries = out["requests"]
        token_call = entries[0]
        self.assertEqual((token_call["method"], token_call["status"]), ("POST", 200))
        put = entries[-1]
        self.assertEqual(put["method"], "PUT")
        self.assertEqual(put["path"], mc("rg1", "alpha"))
        self.assertEqual(put["status"], 200)
        self.assertTrue(put["upgrade"])
        self.assertEqual(put["targets"], ["kubernetesVersion=1.33.5"])
        self.assertEqual(put["cluster"], mc("rg1", "alpha"))
        self.assertEqual(put["apiVersion"], API)
        self.assertEqual(put["client"], "app")
        self.assertIn("operationId", put)
        later = self.fake.admin("GET", "requests?since=%d" % put["seq"])["requests"]
        self.assertEqual(later, [])
        state = self.fake.admin("GET", "state")
        alpha = [c for c in state["clusters"] if c["id"] == mc("rg1", "alpha")][0]
        self.assertEqual(alpha["upgradeRequests"], {"kubernetesVersion=1.33.5": 1})
        self.assertEqual(alpha["operation"], put["operationId"])
        self.fake.admin("DELETE", "requests")
        self.assertEqual(self.fake.admin("GET", "requests")["requests"], [])

    def test_bad_injection_is_refused(self):
        status, _, body = self.fake.request("POST", "/_fake/inject", {"kind": "nope"})
        self.assertEqual(status, 400)
        status, _, body = self.fake.request("POST", "/_fake/inject",
                                            {"kind": "fail", "cluster": "ghost",
                                             "error": {"code": "X", "message": "y"}})
        self.assertEqual(status, 400)


if __name__ == "__main__":
    unittest.main()
