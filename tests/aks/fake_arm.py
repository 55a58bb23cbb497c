#!/usr/bin/env python3
"""A fake Azure Resource Manager (Microsoft.ContainerService managed clusters), Microsoft Entra ID
token endpoint and Azure Instance Metadata Service, in one loopback HTTP server, for testing AKS
clients (waverun's `aks` provider, Azure's SDKs) without Azure. Python 3.11 standard library only.

    python3 tests/aks/fake_arm.py --port 0 --state SEED.json [--time-scale N] [--port-file F]

It prints `listening on http://127.0.0.1:PORT` on stdout (and writes PORT to --port-file, in one
rename) and serves until SIGTERM. Plain http on 127.0.0.1 only. All state is in memory, seeded
from the --state file, which is never written.

It follows the pinned REST facts in /work/shared/reference/aks/README.md ("fact N" in comments),
api-version 2026-08-01 and 2026-08-02-preview (for the two preview routes).


CLI FLAGS (each overrides the seed's `settings`)
  --port N               port on 127.0.0.1 (0: any free port, printed)
  --state FILE           the seed (JSON, below); required
  --port-file F          also write the chosen port to F
  --time-scale N         fake seconds per real second (default 1): operations last
                         operationSeconds / N real seconds
  --operation-seconds S  fake seconds per phase of an operation (default 60)
  --token-seconds S      lifetime of issued access tokens, real seconds (default 3600)
  --page-size N          items per page of agentPools / maintenanceConfigurations (default 2)
  --no-async-header      PUT answers carry no Azure-AsyncOperation (the spec does not promise
                         one on a 200, fact 3): clients must poll the resource
  --retry-after S        the Retry-After of accepted operations and their polls (default 1)
  --reads CAP:RATE       ARM read token bucket per subscription (default 250:25, per second)
  --writes CAP:RATE      ARM write token bucket per subscription (default 200:10)
  --verbose              log each HTTP request on stderr

TIME
  Fake time drives operations, catalog availability (`availableFrom`), startTime/endTime,
  AKS-initiated operations and `overrideSettings.until`. It starts at settings.clockStart (RFC 3339;
  default: the real time at start), runs --time-scale times faster than real time and can be moved
  forward by POST /_fake/clock. Real time drives what the client measures with its own clock:
  token lifetimes, throttling refill and every Retry-After.
  Wherever the seed or an injection takes a time, it takes an RFC 3339 string or a number of fake
  seconds after "now" (the clock's start for the seed, the moment of the injection otherwise).


SEED FORMAT (--state)
{
  "settings": {"pageSize": 2, "operationSeconds": 60, "timeScale": 1, "tokenSeconds": 3600,
               "asyncHeaderOnPut": true, "retryAfterSeconds": 1, "pollApiVersion": "2016-03-30",
               "clockStart": "2026-09-01T00:00:00Z",
               "throttle": {"reads": {"capacity": 250, "refillPerSecond": 25},
                            "writes": {"capacity": 200, "refillPerSecond": 10}}},
  "identity": {
    "tenantId": "TENANT",                    # the tenant accepted in /{tenant}/oauth2/v2.0/token
    "resourceManager": "https://management.azure.com/",  # scope = this + ".default";
                                             # "self": this server's own origin
    "clients": [{"clientId": "APP", "clientSecret": "S"},                 # client credentials
                {"clientId": "WI", "federatedTokens": ["eyJ...x.y"]}],    # workload identity
    "managedIdentities": [{"clientId": "MI", "objectId": "O", "resourceId": "/subscriptions/..."}]
  },
  "locations": {                             # per-region catalogs; "*" is a default for any region
    "eastus": {
      "kubernetesVersions": [{"version": "1.33", "patchVersions": ["1.33.2", "1.33.5"],
                              "isDefault": true},
                             {"version": "1.34", "patchVersions": [{"version": "1.34.1",
                                                                     "availableFrom": 600}]},
                             {"version": "1.35", "patchVersions": ["1.35.0"], "isPreview": true}],
      "nodeImageVersions": ["AKSUbuntu-2204gen2containerd-202611.01.0",
                            {"fullName": "AKSUbuntu-2204gen2containerd-202612.01.0",
                             "availableFrom": "2026-09-02T00:00:00Z"}]
    }
  },
  "subscriptions": {"SUB": {"resourceGroups": {"RG": {"managedClusters": {"NAME": {
      "location": "eastus", "kubernetesVersion": "1.33.2",
      "currentKubernetesVersion": "1.33.2",  # default: kubernetesVersion resolved in the catalog
      "maxAgentPools": 100,                  # < 8 makes a legacy cluster (fact 16)
      "powerState": "Running",               # "Stopped", or null for an unknown state (fact 14)
      "provisioningState": "Succeeded", "dnsPrefix": "name-dns", "tags": {},
      "sku": {...}, "identity": {...},       # returned and compared as given
      "properties": {...},                   # any other cluster properties, returned as given
      "operationSeconds": 60,                # this cluster's phases
      "agentPools": [{"name": "system", "mode": "System", "osType": "Linux", "osSKU": "Ubuntu",
                      "type": "VirtualMachineScaleSets", "count": 3, "vmSize": "Standard_D4s_v5",
                      "orchestratorVersion": "1.33.2", "currentOrchestratorVersion": "1.33.2",
                      "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202611.01.0",
                      "powerState": "Running",
                      "recentlyUsedVersions": [{"orchestratorVersion": "1.33.2",
                                                "nodeImageVersion": "AKSUbuntu-...-202610.01.0"}],
                      "maxPods": 110}],       # other keys: more pool properties, as given
      "maintenanceConfigurations": {"aksManagedAutoUpgradeSchedule": {"maintenanceWindow": {...}}}
  }}}}}},
  "inject": [ ...injections, as for POST /_fake/inject... ]
}
  A node image's family is its os and sku (`{os}-{sku}-{version}`, split at the first and last
  "-"); a pool's newest image is the newest available image of its family in its region.


ADMIN ENDPOINTS (no auth, no api-version, not throttled, not in the request log)
  GET  /_fake/state               clusters (their ARM body, operation, upgrade counts,
                                  recentlyUsedVersions), operations, pending injections, now
  GET  /_fake/requests[?since=N]  {"requests": [{seq, time, method, path, apiVersion, status,
                                  cluster?, upgrade, targets, operationId?, injected?, client?}],
                                  "upgradeRequests": {CLUSTER_ID: {TARGET: N}}}; a target is
                                  "kubernetesVersion=V", "agentPools/P/orchestratorVersion=V" or
                                  "agentPools/P/nodeImageVersion=IMAGE", counted once per write
                                  that started an upgrade to it
  DELETE /_fake/requests          empties the request log (not the counts)
  POST /_fake/clock               {"advanceSeconds": S}: moves fake time forward
  POST /_fake/inject              one injection or a list; CLUSTER is NAME, RG/NAME, SUB/RG/NAME
                                  or the ARM id:
    {"kind": "fail", "cluster": C, "pool"?: P, "error": {"code", "message", "subcode"?},
     "phase"?: 0, "locationStatus"?: 400}
        (a) the next client-started operation on C (touching P) fails at the end of its phase
        number `phase`: the async operation says Failed with `error`, the resource Failed with
        status.provisioningError (fact 15); its Location URL answers locationStatus + the error
    {"kind": "stop" | "start", "cluster": C}              (b) powerState Stopped / Running
    {"kind": "stuck", "cluster": C}
        (c) the next operation on C finishes on the resource, but its async URL says InProgress
        (and its Location URL 202) forever
    {"kind": "reset", "cluster": C, "method"?: "PUT" | "POST"}
        (d) the next such write on C is applied, then the connection is reset (SO_LINGER 0)
        without an answer
    {"kind": "aksOperation", "cluster": C, "pool"?: P, "at"?: TIME, "seconds": S,
     "operationType"?: "NodeImageAutoUpgrade", "subOperationType"?: "UpgradingNodeImageVersion"}
        (e) AKS itself runs an operation on C from `at` (default now) for S fake seconds; with a
        pool, it moves the pool to its newest image; meanwhile writes get 409
    {"kind": "deprecatedApis", "cluster": C, "enabled"?: true}
        (f) minor upgrades of C's control plane get 400 ValidationError, subcode
        UpgradeBlockedOnDeprecatedAPIUsage, unless the PUT has upgradeSettings.overrideSettings
        {forceUpgrade: true, until: later than now} (fact 12)
    {"kind": "serverError", "status"?: 500, "code"?: "InternalServerError", "times"?: 1,
     "method"?: M, "pathContains"?: S, "retryAfter"?: S}
        (g) the next `times` matching requests (ARM, Entra or IMDS) get that 5xx, unapplied
    {"kind": "concurrentWrite", "cluster": C}
        the next PUT of C finds the cluster written by someone else since the client read it:
        its eTag changes first, so an If-Match with the eTag read gets 412 (fact 8)
    {"kind": "expireTokens"}   every token issued so far is expired
  Every injection but the immediate ones (stop, start, aksOperation, deprecatedApis,
  expireTokens) takes an optional "times" (default 1).


WHAT IT SERVES
  ARM (fact 2; every call needs ?api-version, missing: 400 MissingApiVersionParameter, unknown
  or not valid for the route: 400 InvalidApiVersionParameter; the fixed path segments, resource
  group and resource names match case-insensitively, as in ARM):
    GET/PUT   MC = /subscriptions/S/resourceGroups/RG/providers/Microsoft.ContainerService/
                   managedClusters/NAME
    GET       MC/agentPools (paged: value + nextLink), GET/PUT MC/agentPools/P
    POST      MC/agentPools/P/upgradeNodeImageVersion
    GET       MC/upgradeProfiles/default, MC/agentPools/P/upgradeProfiles/default
    GET       MC/maintenanceConfigurations (paged), MC/maintenanceConfigurations/NAME
    GET       /subscriptions/S/providers/Microsoft.ContainerService/locations/L/kubernetesVersions
    preview:  GET .../locations/L/nodeImageVersions, MC/operations/ID,
              MC/agentPools/P/operations/ID
    polling:  GET .../locations/L/operations/ID (Azure-AsyncOperation) and
              .../locations/L/operationresults/ID (Location), with the pollApiVersion they carry
              (default 2016-03-30) and only that one: use the URLs as given (fact 1)
  Every ARM call needs a bearer token this server issued (401 + WWW-Authenticate otherwise), and
  passes a token bucket per subscription, for reads (GET) and writes (others) (fact 13).
  Entra: POST /{tenant}/oauth2/v2.0/token (client credentials, with client_secret or a
    workload-identity client_assertion); GET /{tenant}/v2.0/.well-known/openid-configuration.
  IMDS: GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=...[&client_id=...]
    with the header `Metadata: true`.


DECISIONS WHERE THE SPEC IS SILENT (and simplifications)
  * Only updates: a PUT of a cluster or pool that does not exist is 400 (creation not modeled),
    and so is adding or removing pools through the cluster's agentPoolProfiles.
  * A PUT replaces the resource (fact 17): properties the fake does not model are stored as sent
    and returned as stored, so a client that drops one loses it (and starts an "Updating"
    operation). Read-only properties in a body are ignored. Required, naming the field in a 400:
    `location`, `properties`, `properties.agentPoolProfiles` listing every pool, each pool's
    `name` and `count` (stricter than AKS, which would default count to 1 and scale the pool).
    A missing `mode` means User (AKS's default), refused if no System pool would remain.
    A missing or empty kubernetesVersion / orchestratorVersion / nodeImageVersion keeps the
    current one. vmSize, osType, osSKU, type, dnsPrefix and location cannot change
    (400 PropertyChangeNotAllowed).
  * Versions (facts 6, 11): the same alias or patch again is no upgrade; any other target must be
    a newer patch of the same minor or a patch of the next minor, available in the region now,
    else 400 OperationNotAllowed "Upgrading Kubernetes version X to Y is not allowed. Available
    upgrades: [...]"; a pool newer than the control plane is 400 OperationNotAllowed too.
    An alias resolves to the newest GA patch of its minor in the region at that moment.
  * An upgrade runs in phases of operationSeconds each: the control plane, then each pool in
    order. A pool takes the newest image of its family in its region at the start of its phase;
    upgradeNodeImageVersion picks it when the POST arrives (fact 4), and answers 200 with no
    body when the pool already has it. On a legacy cluster a control-plane upgrade upgrades every
    pool too (fact 16).
  * A PUT that changes nothing on a Succeeded resource starts nothing and keeps the eTag
    (200 Succeeded, no upgrade counted); on a Failed resource it starts a retry (fact 15):
    the upgrade again if versions still differ, else an "Updating" operation that clears it.
  * eTags (fact 8) are new GUIDs at every change of the resource, including its operations'
    progress; a pool change changes the cluster's eTag too. If-Match (quoted or not, or "*") and
    If-None-Match are checked on PUT; a mismatch is 412 PreconditionFailed. Responses also carry
    an ETag header (quoted).
  * A rollback (fact 9) is a PUT whose pool nodeImageVersion differs from the current one: it
    must be one of recentlyUsedVersions' nodeImageVersion (else 400 InvalidParameter) and cannot
    come with a version upgrade. Every change of a pool's version or image records the previous
    pair in recentlyUsedVersions (newest first, at most 5).
  * A stopped cluster refuses every write with 400 ValidationError (fact 14 reports refusals
    because of state as ValidationError; the exact code of AKS is not documented).
  * Single writer (fact 10): while an operation runs on the cluster or a pool, every write is
    409 OperationNotAllowed "Operation is not allowed: Another operation (NAME - STATE) is in
    progress, please wait for it to finish before starting a new operation. See
    https://aka.ms/aks-pending-operation for more details". A "stuck" operation does not block.
  * Polling URLs follow the AKS resource provider: Azure-AsyncOperation =
    .../locations/L/operations/ID, Location = .../locations/L/operationresults/ID. The first
    always answers 200 {name, status, startTime, endTime?, percentComplete?, error?} (fact 5);
    the second 202 until the operation ends, then 200 with the resource, or (failed) the error
    with the injection's locationStatus (default 400), as the ARM RPC says.
  * Errors the fake gives when ARM itself would: 401 AuthenticationFailed (no Authorization
    header), InvalidAuthenticationToken (unknown), ExpiredAuthenticationToken; 429
    SubscriptionRequestsThrottled; 404 SubscriptionNotFound, ResourceGroupNotFound,
    ResourceNotFound. A route the fake does not model is 404 (unknown path) or 405 (method).
"""

import argparse
import base64
import copy
import datetime as dt
import http.server
import json
import math
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid

STABLE_API = "2026-08-01"  # fact 1
PREVIEW_API = "2026-08-02-preview"  # fact 2: nodeImageVersions and operations/{id}
RP = "Microsoft.ContainerService"
CLUSTER_TYPE = RP + "/managedClusters"
POOL_TYPE = CLUSTER_TYPE + "/agentPools"
PENDING_OPERATION_LINK = "https://aka.ms/aks-pending-operation"
IMDS_API_VERSIONS = ("2018-02-01", "2019-08-01", "2019-11-01", "2021-02-01")
RECENT_VERSIONS_KEPT = 5


# ---------------------------------------------------------------------------------------------
# small helpers

def new_etag():
    return str(uuid.uuid4())


def iso(t):
    """An instant (epoch seconds) as RFC 3339 UTC."""
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_instant(value, base):
    """An RFC 3339 string, or a number of seconds after `base`, as epoch seconds (None stays)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return base + float(value)
    if isinstance(value, str):
        s = value.strip()
        if s[-1:] in ("Z", "z"):
            s = s[:-1] + "+00:00"
        when = dt.datetime.fromisoformat(s)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return when.timestamp()
    raise ValueError("not a time: %r" % (value,))


def parse_version(s):
    """'1.34.1' -> (1, 34, 1), '1.34' -> (1, 34); None if it is neither."""
    if not isinstance(s, str) or not re.fullmatch(r"\d+\.\d+(\.\d+)?", s.strip()):
        return None
    return tuple(int(x) for x in s.strip().split("."))


def split_image(full):
    """'AKSUbuntu-2204gen2containerd-202401.12.0' -> ('AKSUbuntu', '2204gen2containerd',
    '202401.12.0'); None for a name without that shape."""
    m = re.fullmatch(r"([^-]+)-(.+)-([^-]+)", full or "")
    return (m.group(1), m.group(2), m.group(3)) if m else None


def image_order(version):
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(obj):
    return b64url(json.dumps(obj, separators=(",", ":")).encode())


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def without(d, keys):
    return {k: v for k, v in d.items() if k not in keys}


class AzureError(Exception):
    """An ARM error answer: {"error": {code, message, target?, subcode?}} (fact 15)."""

    def __init__(self, status, code, message, target=None, subcode=None, headers=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.target, self.subcode, self.headers = target, subcode, headers or {}

    def detail(self):
        d = {"code": self.code, "message": self.message}
        if self.subcode:
            d["subcode"] = self.subcode
        if self.target:
            d["target"] = self.target
        return d

    def response(self):
        return Response(self.status, {"error": self.detail()}, dict(self.headers))


def invalid(target, message, code="InvalidParameter"):
    return AzureError(400, code, message, target=target)


class Response:
    def __init__(self, status, body=None, headers=None, reset=False):
        self.status, self.body, self.headers, self.reset = status, body, headers or {}, reset


# ---------------------------------------------------------------------------------------------
# fake time

class Clock:
    """Fake time: starts at `start`, runs `scale` times faster than real time, and moves forward
    on demand."""

    def __init__(self, start, scale):
        self.real0 = time.time()
        self.fake0 = start if start is not None else self.real0
        self.scale = scale
        self.offset = 0.0

    def now(self):
        return self.fake0 + (time.time() - self.real0) * self.scale + self.offset

    def advance(self, seconds):
        self.offset += seconds


# ---------------------------------------------------------------------------------------------
# Microsoft Entra ID

class Entra:
    """The v2.0 token endpoint (client credentials), the tokens it issued, and the bearer check
    every ARM call passes (else 401 with WWW-Authenticate, as ARM answers)."""

    def __init__(self, cfg, token_seconds, app):
        cfg = cfg or {}
        self.app = app
        self.tenant = cfg.get("tenantId", "00000000-0000-0000-0000-000000000000")
        self.resource = cfg.get("resourceManager", "https://management.azure.com/")
        self.clients = {c["clientId"].lower(): c for c in cfg.get("clients", [])}
        self.token_seconds = token_seconds
        self.tokens = {}  # access token -> {"exp": real epoch, "client": id, "via": how}

    # -- issuing

    def issue(self, client_id, via):
        now = time.time()
        exp = now + self.token_seconds
        header = {"typ": "JWT", "alg": "RS256", "kid": "fake-arm"}
        claims = {"aud": self.resource, "iss": "https://sts.windows.net/%s/" % self.tenant,
                  "iat": int(now), "nbf": int(now), "exp": int(exp), "appid": client_id,
                  "tid": self.tenant, "sub": client_id, "jti": str(uuid.uuid4())}
        token = "%s.%s.%s" % (b64url_json(header), b64url_json(claims), b64url(os.urandom(32)))
        self.tokens[token] = {"exp": exp, "client": client_id, "via": via}
        return token, exp

    def expire_all(self):
        for rec in self.tokens.values():
            rec["exp"] = min(rec["exp"], time.time() - 1)

    def scopes_ok(self, scope):
        base = self.resource.rstrip("/")
        return scope in (base + "/.default", base + "//.default")

    def resource_ok(self, resource):
        return resource.rstrip("/") == self.resource.rstrip("/")

    # -- the token endpoint

    def error(self, status, error, number, text):
        """An AADSTS error body, the shape Entra answers with."""
        trace, corr = str(uuid.uuid4()), str(uuid.uuid4())
        ts = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
        desc = "AADSTS%d: %s\r\nTrace ID: %s\r\nCorrelation ID: %s\r\nTimestamp: %s" % (
            number, text, trace, corr, ts)
        return Response(status, {"error": error, "error_description": desc, "error_codes": [number],
                                 "timestamp": ts, "trace_id": trace, "correlation_id": corr,
                                 "error_uri": "%s/error?code=%d" % (self.app.base, number)})

    def token_endpoint(self, tenant, ctx):
        if tenant.lower() not in (self.tenant.lower(), "organizations"):
            return self.error(400, "invalid_request", 90002,
                              "Tenant '%s' not found. Check to make sure you have the correct "
                              "tenant ID and are signing into the correct cloud." % tenant)
        ctype = ctx.headers.get("Content-Type", "")
        if not ctype.lower().startswith("application/x-www-form-urlencoded"):
            return self.error(400, "invalid_request", 900144,
                              "The request body must contain the following parameter: "
                              "'grant_type'.")
        form = {k: v[0] for k, v in urllib.parse.parse_qs(ctx.raw.decode("utf-8", "replace"),
                                                          keep_blank_values=True).items()}
        for name in ("grant_type", "client_id", "scope"):
            if not form.get(name):
                return self.error(400, "invalid_request", 900144,
                                  "The request body must contain the following parameter: "
                                  "'%s'." % name)
        if form["grant_type"] != "client_credentials":
            return self.error(400, "unsupported_grant_type", 70003,
                              "The app requested an unsupported grant type '%s'."
                              % form["grant_type"])
        if not self.scopes_ok(form["scope"]):
            return self.error(400, "invalid_scope", 1002012,
                              "The provided value for scope %s is not valid. Client credential "
                              "flows must have a scope value with /.default suffixed to the "
                              "resource identifier (application ID URI)." % form["scope"])
        client = self.clients.get(form["client_id"].lower())
        if client is None:
            return self.error(400, "unauthorized_client", 700016,
                              "Application with identifier '%s' was not found in the directory "
                              "'%s'." % (form["client_id"], tenant))
        ctx.log["client"] = client["clientId"]
        if "client_assertion" in form or "client_assertion_type" in form:
            denied = self.check_assertion(client, form)
        elif "client_secret" in form:
            denied = None
            if client.get("clientSecret") is None or form["client_secret"] != client["clientSecret"]:
                denied = self.error(401, "invalid_client", 7000215,
                                    "Invalid client secret provided. Ensure the secret being sent "
                                    "in the request is the client secret value, not the client "
                                    "secret ID, for a secret added to app '%s'." % client["clientId"])
        else:
            denied = self.error(401, "invalid_client", 7000218,
                                "The request body must contain the following parameter: "
                                "'client_assertion' or 'client_secret'.")
        if denied:
            return denied
        token, _ = self.issue(client["clientId"], "assertion" if "client_assertion" in form
                              else "secret")
        seconds = math.ceil(self.token_seconds)
        return Response(200, {"token_type": "Bearer", "expires_in": seconds,
                              "ext_expires_in": seconds, "access_token": token})

    def check_assertion(self, client, form):
        """Workload identity: a JWT-bearer assertion matching one of the client's federated
        tokens."""
        if form.get("client_assertion_type") != \
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return self.error(400, "invalid_request", 700023,
                              "client_assertion_type must be "
                              "urn:ietf:params:oauth:client-assertion-type:jwt-bearer.")
        assertion = form.get("client_assertion", "")
        if not re.fullmatch(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*", assertion):
            return self.error(400, "invalid_request", 50027, "JWT token is invalid or malformed.")
        try:
            claims = json.loads(b64url_decode(assertion.split(".")[1]))
        except (ValueError, UnicodeDecodeError):
            claims = {}
        if isinstance(claims, dict) and isinstance(claims.get("exp"), (int, float)) \
                and claims["exp"] < time.time():
            return self.error(401, "invalid_client", 700024,
                              "Client assertion is not within its valid time range.")
        if assertion not in client.get("federatedTokens", []):
            subject = claims.get("sub", "") if isinstance(claims, dict) else ""
            return self.error(401, "invalid_client", 700213,
                              "No matching federated identity record found for presented "
                              "assertion subject '%s'. Check your federated identity credential "
                              "Subject, Audience and Issuer against the presented assertion."
                              % subject)
        return None

    def openid_configuration(self, tenant):
        root = "%s/%s" % (self.app.base, tenant)
        return Response(200, {
            "token_endpoint": root + "/oauth2/v2.0/token",
            "authorization_endpoint": root + "/oauth2/v2.0/authorize",
            "issuer": "%s/%s/v2.0" % (self.app.base, self.tenant),
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt"],
            "jwks_uri": root + "/discovery/v2.0/keys",
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"]})

    # -- checking bearer tokens on ARM calls

    def authenticate(self, header):
        """The token record for an Authorization header, or AzureError 401 (as ARM answers)."""
        def deny(code, message, description):
            challenge = ('Bearer authorization_uri="%s/%s", error="invalid_token", '
                         'error_description="%s"' % (self.app.base, self.tenant, description))
            return AzureError(401, code, message, headers={"WWW-Authenticate": challenge})

        if not header:
            raise deny("AuthenticationFailed",
                       "Authentication failed. The 'Authorization' header is missing.",
                       "The authentication failed because of missing 'Authorization' header.")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise deny("AuthenticationFailedInvalidHeader",
                       "Authentication failed. The 'Authorization' header is provided in an "
                       "invalid format.", "The 'Authorization' header is not a bearer token.")
        rec = self.tokens.get(token.strip())
        if rec is None:
            raise deny("InvalidAuthenticationToken", "The access token is invalid.",
                       "The access token is invalid.")
        now = time.time()
        if rec["exp"] <= now:
            fmt = "%m/%d/%Y %I:%M:%S %p"
            raise deny("ExpiredAuthenticationToken",
                       "The access token expiry UTC time '%s' is earlier than current UTC time "
                       "'%s'." % (dt.datetime.fromtimestamp(rec["exp"], dt.timezone.utc).strftime(fmt),
                                  dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime(fmt)),
                       "The access token expired.")
        return rec


class Imds:
    """The Instance Metadata Service's managed-identity token endpoint."""

    def __init__(self, entra, identities):
        self.entra = entra
        self.identities = identities or []

    def token(self, ctx):
        def bad(description, error="invalid_request"):
            return Response(400, {"error": error, "error_description": description})

        if ctx.headers.get("Metadata", "").lower() != "true":
            return bad("Required metadata header not specified")
        q = ctx.query
        if not q.get("api-version"):
            return bad("Required query variable 'api-version' is missing")
        if q["api-version"] not in IMDS_API_VERSIONS:
            return bad("Invalid api-version '%s'" % q["api-version"])
        resource = q.get("resource")
        if not resource:
            return bad("Required query variable 'resource' is missing")
        if not self.entra.resource_ok(resource):
            return bad("AADSTS500011: The resource principal named %s was not found in the "
                       "tenant." % resource, "invalid_resource")
        picked = self.pick(q)
        if isinstance(picked, Response):
            return picked
        ctx.log["client"] = picked["clientId"]
        token, exp = self.entra.issue(picked["clientId"], "imds")
        now = time.time()
        return Response(200, {"access_token": token, "refresh_token": "",
                              "expires_in": str(int(exp - now)), "expires_on": str(int(exp)),
                              "not_before": str(int(now)), "resource": resource,
                              "token_type": "Bearer", "client_id": picked["clientId"]})

    def pick(self, q):
        for key, field in (("client_id", "clientId"), ("object_id", "objectId"),
                           ("mi_res_id", "resourceId"), ("msi_res_id", "resourceId")):
            if q.get(key):
                for ident in self.identities:
                    if str(ident.get(field, "")).lower() == q[key].lower():
                        return ident
                return Response(400, {"error": "invalid_request",
                                      "error_description": "Identity not found"})
        if len(self.identities) == 1:
            return self.identities[0]
        if not self.identities:
            return Response(400, {"error": "invalid_request",
                                  "error_description": "Identity not found"})
        return Response(400, {"error": "invalid_request", "error_description":
                              "Multiple user assigned identities exist, please specify the "
                              "clientId / resourceId of the identity in the token request"})


# ---------------------------------------------------------------------------------------------
# throttling

class TokenBucket:
    def __init__(self, capacity, rate):
        self.capacity, self.rate = float(capacity), float(rate)
        self.tokens, self.last = float(capacity), time.time()

    def refill(self):
        now = time.time()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def take(self):
        """(allowed, remaining, retry-after seconds)."""
        self.refill()
        if self.tokens >= 1:
            self.tokens -= 1
            return True, int(self.tokens), 0
        wait = (1 - self.tokens) / self.rate if self.rate > 0 else 3600
        return False, 0, max(1, math.ceil(wait))

    def remaining(self):
        self.refill()
        return int(self.tokens)


class Throttle:
    """ARM's token buckets (fact 13), one per subscription for reads and one for writes."""

    def __init__(self, reads, writes):
        self.sizes = {"reads": reads, "writes": writes}
        self.buckets = {}

    def bucket(self, sub, kind):
        key = (sub.lower(), kind)
        if key not in self.buckets:
            self.buckets[key] = TokenBucket(*self.sizes[kind])
        return self.buckets[key]

    def take(self, sub, kind, client):
        ok, remaining, wait = self.bucket(sub, kind).take()
        header = {"x-ms-ratelimit-remaining-subscription-" + kind: str(remaining)}
        if ok:
            return header
        verb = "read" if kind == "reads" else "write"
        header["Retry-After"] = str(wait)
        raise AzureError(429, "SubscriptionRequestsThrottled",
                         "Number of '%s' requests for subscription '%s' actor '%s' exceeded. "
                         "Please try again after '%d' seconds after additional tokens are "
                         "available. Refer to https://aka.ms/arm-throttling"
                         % (verb, sub, client, wait), headers=header)

    def peek(self, sub, kind):
        return {"x-ms-ratelimit-remaining-subscription-" + kind:
                str(self.bucket(sub, kind).remaining())}


# ---------------------------------------------------------------------------------------------
# catalogs

class Catalog:
    """Per-region Kubernetes versions and node images, each possibly available only from a given
    fake time (so an image reaches one region later than another)."""

    def __init__(self, cfg, t0):
        self.locations = {}
        for loc, c in (cfg or {}).items():
            minors = []
            for m in c.get("kubernetesVersions", []):
                patches = []
                for p in m.get("patchVersions", []):
                    p = {"version": p} if isinstance(p, str) else p
                    if parse_version(p["version"]) is None or len(parse_version(p["version"])) != 3:
                        raise ValueError("not a patch version: %r" % p["version"])
                    patches.append({"version": p["version"],
                                    "from": parse_instant(p.get("availableFrom"), t0),
                                    "isPreview": bool(p.get("isPreview", m.get("isPreview")))})
                minors.append({"version": m["version"], "isDefault": bool(m.get("isDefault")),
                               "isPreview": bool(m.get("isPreview")),
                               "supportPlan": m.get("supportPlan", ["KubernetesOfficial"]),
                               "from": parse_instant(m.get("availableFrom"), t0),
                               "patches": patches})
            images = []
            for im in c.get("nodeImageVersions", []):
                im = {"fullName": im} if isinstance(im, str) else im
                full = im.get("fullName") or "%s-%s-%s" % (im["os"], im["sku"], im["version"])
                parts = split_image(full)
                if parts is None:
                    raise ValueError("not a node image name {os}-{sku}-{version}: %r" % full)
                images.append({"fullName": full, "os": im.get("os", parts[0]),
                               "sku": im.get("sku", parts[1]), "version": im.get("version", parts[2]),
                               "from": parse_instant(im.get("availableFrom"), t0)})
            self.locations[loc.lower()] = {"minors": minors, "images": images}

    def region(self, location):
        return self.locations.get(location.lower()) or self.locations.get("*")

    @staticmethod
    def available(entry, t):
        return entry["from"] is None or entry["from"] <= t

    def patches(self, location, t):
        """[(patch, isPreview)] available in the region at t, oldest first."""
        out = []
        for m in (self.region(location) or {"minors": []})["minors"]:
            if self.available(m, t):
                out += [(p["version"], p["isPreview"]) for p in m["patches"] if self.available(p, t)]
        return sorted(out, key=lambda pv: parse_version(pv[0]))

    def resolve(self, location, requested, t):
        """A patch version, or an alias resolved to the newest GA patch of its minor (fact 6),
        if available in the region at t; else None."""
        v = parse_version(requested)
        avail = self.patches(location, t)
        if v is None:
            return None
        if len(v) == 3:
            return requested if any(p == requested for p, _ in avail) else None
        same = [pv for pv in avail if parse_version(pv[0])[:2] == v]
        ga = [p for p, preview in same if not preview]
        pick = ga or [p for p, _ in same]
        return pick[-1] if pick else None

    def upgrades(self, location, current, t, ceiling=None):
        """[(patch, isPreview)] one may upgrade `current` to: newer patches of its minor and the
        patches of the next minor (minors cannot be skipped, fact 6), at most `ceiling`."""
        cur = parse_version(current)
        top = parse_version(ceiling) if ceiling else None
        out = []
        for p, preview in self.patches(location, t):
            pv = parse_version(p)
            if pv > cur and pv[:2] <= (cur[0], cur[1] + 1) and (top is None or pv <= top):
                out.append((p, preview))
        return out

    def kubernetes_versions(self, location, t):
        """The body of locations/{loc}/kubernetesVersions: {"values": [...]} (fact 7)."""
        values = []
        avail = self.patches(location, t)
        for m in (self.region(location) or {"minors": []})["minors"]:
            mine = [p for p, _ in avail if parse_version(p)[:2] == parse_version(m["version"])[:2]]
            if not self.available(m, t) or not mine:
                continue
            entry = {"version": m["version"], "capabilities": {"supportPlan": m["supportPlan"]},
                     "patchVersions": {p: {"upgrades": [u for u, _ in self.upgrades(location, p, t)]}
                                       for p in mine}}
            if m["isDefault"]:
                entry["isDefault"] = True
            if m["isPreview"]:
                entry["isPreview"] = True
            values.append(entry)
        return {"values": values}

    def images(self, location, t):
        return [{"fullName": i["fullName"], "os": i["os"], "sku": i["sku"], "version": i["version"]}
                for i in (self.region(location) or {"images": []})["images"]
                if self.available(i, t)]

    def latest_image(self, location, current, t):
        """The newest image of `current`'s family available in the region at t (or `current`)."""
        parts = split_image(current)
        if parts is None:
            return current
        best, best_order = current, image_order(parts[2])
        for i in self.images(location, t):
            if (i["os"].lower(), i["sku"].lower()) == (parts[0].lower(), parts[1].lower()) \
                    and image_order(i["version"]) > best_order:
                best, best_order = i["fullName"], image_order(i["version"])
        return best


# ---------------------------------------------------------------------------------------------
# operations and the cluster state machine

class Phase:
    """One step of an operation: the control plane, one pool's version or image, an update."""

    def __init__(self, kind, seconds, pool=None, target=None, image=None):
        self.kind, self.seconds, self.pool = kind, seconds, pool
        self.target, self.image = target, image
        self.start = self.end = None


class Operation:
    """A long-running operation (facts 3-5): phases run one after the other in fake time."""

    def __init__(self, cluster, pool, op_type, sub_type, start, phases, client=True):
        self.id = str(uuid.uuid4())
        self.cluster, self.pool = cluster, pool
        self.op_type, self.sub_type = op_type, sub_type
        self.start, self.phases, self.client = start, phases, client
        t = start
        for ph in phases:
            ph.start, t = t, t + ph.seconds
            ph.end = t
        self.next = 0
        self.status = "InProgress"
        self.end = self.error = None
        self.fail = None  # an injected failure: {"error", "phase", "locationStatus"}
        self.stuck = False

    def percent(self, now):
        total = self.phases[-1].end - self.start if self.phases else 0
        if total <= 0:
            return 99
        return max(0, min(99, int(100 * (now - self.start) / total)))

    def reported_status(self):
        return "InProgress" if self.stuck else self.status

    def status_body(self, now):
        """The Azure-AsyncOperation body (fact 5)."""
        status = self.reported_status()
        body = {"name": self.id, "status": status, "startTime": iso(self.start)}
        if status == "InProgress":
            body["percentComplete"] = self.percent(min(now, self.end or now))
        else:
            body["endTime"] = iso(self.end)
            body["percentComplete"] = 100
        if status == "Failed":
            body["error"] = dict(self.error)
        return body

    def resource_body(self, now):
        """The preview OperationStatusResult (OperationStatusResultGet*.json)."""
        body = self.status_body(now)
        body["id"] = (self.pool.id if self.pool else self.cluster.id) + "/operations/" + self.id
        body["operationType"] = self.op_type
        body["subOperationType"] = self.sub_type
        return body

    def busy_label(self):
        """(name, state) for the 409 message (fact 10)."""
        if self.pool is not None:
            return self.pool.name, self.pool.state if self.client else self.sub_type
        return self.cluster.name, self.cluster.state if self.client else self.sub_type


class PoolPlan:
    """What one PUT asks of one pool, validated but not applied."""

    def __init__(self, pool, desired, target, rollback, count, mode, extras):
        self.pool, self.desired, self.target, self.rollback = pool, desired, target, rollback
        self.count, self.mode, self.extras = count, mode, extras

    @property
    def changed(self):
        p = self.pool
        return (self.count, self.mode, self.extras) != (p.count, p.mode, p.extras)

    @property
    def versions(self):
        return bool(self.target or self.rollback)


class Pool:
    SEED_KEYS = {"name", "mode", "osType", "osSKU", "type", "count", "vmSize", "orchestratorVersion",
                 "currentOrchestratorVersion", "nodeImageVersion", "powerState", "provisioningState",
                 "recentlyUsedVersions"}
    MODELED = {"count", "vmSize", "osType", "osSKU", "type", "mode", "orchestratorVersion",
               "nodeImageVersion", "powerState"}
    READ_ONLY = {"name", "eTag", "currentOrchestratorVersion", "provisioningState", "status"}

    def __init__(self, cluster, seed, now):
        self.cluster = cluster
        self.name = seed["name"]
        self.mode = seed.get("mode", "User")
        self.os_type = seed.get("osType", "Linux")
        self.os_sku = seed.get("osSKU", "Ubuntu" if self.os_type == "Linux" else "Windows2022")
        self.type = seed.get("type", "VirtualMachineScaleSets")
        self.count = seed.get("count", 3)
        self.vm_size = seed.get("vmSize", "Standard_D4s_v5")
        self.orchestrator = seed.get("orchestratorVersion") or cluster.desired
        self.current = seed.get("currentOrchestratorVersion") or cluster.resolve_seed(self.orchestrator, now)
        if "nodeImageVersion" not in seed:
            raise ValueError("pool %s of %s: nodeImageVersion is required" % (self.name, cluster.id))
        self.image = seed["nodeImageVersion"]
        self.power = seed.get("powerState", "Running")
        self.state = seed.get("provisioningState", "Succeeded")
        self.error = None
        self.recent = []
        for r in seed.get("recentlyUsedVersions", []):
            r = {"nodeImageVersion": r} if isinstance(r, str) else dict(r)
            r.setdefault("orchestratorVersion", self.current)
            r.setdefault("timestamp", iso(now))
            self.recent.append(r)
        self.extras = without(seed, self.SEED_KEYS)
        self.etag = new_etag()

    @property
    def id(self):
        return self.cluster.id + "/agentPools/" + self.name

    def touch(self):
        self.etag = new_etag()
        self.cluster.touch()

    def remember(self, t):
        """Records the running (version, image) in recentlyUsedVersions before it changes."""
        entry = {"orchestratorVersion": self.current, "nodeImageVersion": self.image,
                 "timestamp": iso(t)}
        self.recent = [entry] + [r for r in self.recent
                                 if (r["orchestratorVersion"], r["nodeImageVersion"])
                                 != (self.current, self.image)]
        del self.recent[RECENT_VERSIONS_KEPT:]

    def properties(self):
        p = copy.deepcopy(self.extras)
        p.update({"eTag": self.etag, "count": self.count, "vmSize": self.vm_size,
                  "osType": self.os_type, "osSKU": self.os_sku, "type": self.type,
                  "mode": self.mode, "orchestratorVersion": self.orchestrator,
                  "currentOrchestratorVersion": self.current, "nodeImageVersion": self.image,
                  "provisioningState": self.state})
        if self.power:
            p["powerState"] = {"code": self.power}
        if self.error:
            p["status"] = {"provisioningError": dict(self.error)}
        return p

    def resource(self):
        """An AgentPool (AgentPoolsGet.json): the eTag is properties.eTag (fact 8)."""
        return {"id": self.id, "name": self.name, "type": POOL_TYPE, "properties": self.properties()}

    def profile(self):
        """The pool in the cluster's agentPoolProfiles (ManagedClustersGet.json)."""
        p = {"name": self.name}
        p.update(self.properties())
        return p

    def plan(self, props, path, cp_version, now):
        """Validates a pool body (PUT pool, or one of PUT cluster's agentPoolProfiles)."""
        if not isinstance(props, dict):
            raise invalid(path, "The value of parameter %s must be an object." % path)
        count = props.get("count")
        if count is None:
            raise invalid(path + ".count",
                          "The value of parameter %s.count is required: a PUT replaces the whole "
                          "agent pool (this fake does not default it)." % path)
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 1000:
            raise invalid(path + ".count", "The value of parameter %s.count is invalid." % path)
        mode = props.get("mode") or "User"
        if mode not in ("System", "User", "Gateway"):
            raise invalid(path + ".mode", "The value of parameter %s.mode is invalid." % path)
        if mode == "System" and count < 1:
            raise invalid(path + ".count", "A System agent pool needs at least one node.")
        for key, cur in (("vmSize", self.vm_size), ("osType", self.os_type),
                         ("osSKU", self.os_sku), ("type", self.type)):
            v = props.get(key)
            if v not in (None, "") and str(v).lower() != str(cur).lower():
                raise AzureError(400, "PropertyChangeNotAllowed",
                                 "Changing property '%s' is not allowed." % key,
                                 target="%s.%s" % (path, key))
        power = props.get("powerState")
        if isinstance(power, dict) and power.get("code") not in (None, self.power):
            raise invalid(path + ".powerState", "Starting or stopping an agent pool is not "
                          "modeled by this fake.")
        desired, target = self.orchestrator, None
        requested = props.get("orchestratorVersion")
        if requested not in (None, ""):
            desired = requested
            target = self.cluster.version_target(requested, self.current, now,
                                                 path + ".orchestratorVersion")
            if target and parse_version(target) > parse_version(cp_version):  # fact 6, 11
                raise AzureError(400, "OperationNotAllowed",
                                 "Node pool version %s and control plane version %s are "
                                 "incompatible: a node pool cannot be newer than the control "
                                 "plane." % (target, cp_version),
                                 target=path + ".orchestratorVersion")
        rollback = None
        image = props.get("nodeImageVersion")
        if image not in (None, "") and image != self.image:  # fact 9: a rollback
            if target:
                raise invalid(path + ".nodeImageVersion", "A node image rollback cannot be "
                              "combined with an orchestratorVersion upgrade.")
            allowed = [r["nodeImageVersion"] for r in self.recent]
            if image not in allowed:
                raise invalid(path + ".nodeImageVersion",
                              "Rolling back agent pool '%s' to node image version %s is not "
                              "allowed: only versions in recentlyUsedVersions are (%s)."
                              % (self.name, image, ", ".join(allowed) or "none"))
            rollback = image
        extras = without(props, self.MODELED | self.READ_ONLY)
        return PoolPlan(self, desired, target, rollback, count, mode, extras)


class Cluster:
    """A managed cluster and its pools: GET bodies, PUT / POST semantics (facts 3-16), and the
    operations running on them."""

    TOP_EXTRAS = ("sku", "identity", "kind", "extendedLocation")
    SEED_KEYS = {"location", "kubernetesVersion", "currentKubernetesVersion", "maxAgentPools",
                 "powerState", "provisioningState", "dnsPrefix", "tags", "properties",
                 "operationSeconds", "agentPools", "maintenanceConfigurations"} | set(TOP_EXTRAS)
    MODELED = {"kubernetesVersion", "agentPoolProfiles", "dnsPrefix"}
    READ_ONLY = {"provisioningState", "powerState", "maxAgentPools", "currentKubernetesVersion",
                 "fqdn", "privateFQDN", "azurePortalFQDN", "resourceUID", "status"}

    def __init__(self, fleet, sub, rg, name, seed, now):
        unknown = set(seed) - self.SEED_KEYS
        if unknown:
            raise ValueError("cluster %s: unknown seed keys %s (put other properties under "
                             "\"properties\")" % (name, sorted(unknown)))
        self.fleet, self.sub, self.rg, self.name = fleet, sub, rg, name
        self.location = seed["location"]
        self.desired = seed["kubernetesVersion"]
        self.current = seed.get("currentKubernetesVersion") or self.resolve_seed(self.desired, now)
        self.max_pools = seed.get("maxAgentPools", 100)
        self.power = seed.get("powerState", "Running")
        self.state = seed.get("provisioningState", "Succeeded")
        self.dns_prefix = seed.get("dnsPrefix", name + "-dns")
        self.tags = seed.get("tags")
        self.top = {k: seed[k] for k in self.TOP_EXTRAS if k in seed}
        self.extras = dict(seed.get("properties", {}))
        self.op_seconds = seed.get("operationSeconds")
        self.error = None
        self.pools = {}
        for p in seed.get("agentPools", []):
            pool = Pool(self, p, now)
            self.pools[pool.name.lower()] = pool
        if not self.pools:
            raise ValueError("cluster %s has no agentPools" % name)
        self.maintenance = {}
        for cname, cfg in (seed.get("maintenanceConfigurations") or {}).items():
            self.maintenance[cname] = cfg["properties"] if "properties" in cfg else cfg
        self.op = None
        self.free_since = now
        self.scheduled = []  # AKS-initiated operations to come (injection e)
        self.deprecated_guard = False  # injection f
        self.uid = uuid.uuid4().hex[:8]
        self.etag = new_etag()

    # -- identity and bodies

    @property
    def id(self):
        return "/subscriptions/%s/resourceGroups/%s/providers/%s/%s" % (
            self.sub, self.rg, CLUSTER_TYPE, self.name)

    def touch(self):
        self.etag = new_etag()

    def resolve_seed(self, version, now):
        v = parse_version(version)
        if v is not None and len(v) == 3:
            return version
        resolved = self.fleet.catalog.resolve(self.location, version, now)
        if resolved is None:
            raise ValueError("%s: cannot resolve Kubernetes version %r in %s's catalog; give the "
                             "current version" % (self.name, version, self.location))
        return resolved

    def legacy(self):
        """Fact 16: these clusters cannot upgrade only the control plane."""
        return self.max_pools < 8 or any(p.type == "AvailabilitySet" for p in self.pools.values())

    def resource(self):
        props = copy.deepcopy(self.extras)
        props.update({"provisioningState": self.state, "maxAgentPools": self.max_pools,
                      "kubernetesVersion": self.desired, "currentKubernetesVersion": self.current,
                      "dnsPrefix": self.dns_prefix,
                      "fqdn": "%s-%s.hcp.%s.azmk8s.io" % (self.dns_prefix, self.uid, self.location),
                      "agentPoolProfiles": [p.profile() for p in self.pools.values()]})
        if self.power:
            props["powerState"] = {"code": self.power}
        if self.error:
            props["status"] = {"provisioningError": dict(self.error)}
        body = {"id": self.id, "name": self.name, "type": CLUSTER_TYPE, "location": self.location,
                "eTag": self.etag}
        if self.tags is not None:
            body["tags"] = copy.deepcopy(self.tags)
        body.update(copy.deepcopy(self.top))
        body["properties"] = props
        return body

    def upgrade_profile(self, now):
        cat = self.fleet.catalog

        def upgrades(current, ceiling=None):
            out = []
            for v, preview in cat.upgrades(self.location, current, now, ceiling):
                out.append({"kubernetesVersion": v, "isPreview": True} if preview
                           else {"kubernetesVersion": v})
            return out

        return {"id": self.id + "/upgradeProfiles/default", "name": "default",
                "type": CLUSTER_TYPE + "/upgradeprofiles",
                "properties": {
                    "controlPlaneProfile": {"kubernetesVersion": self.current, "osType": "Linux",
                                            "upgrades": upgrades(self.current)},
                    "agentPoolProfiles": [{"name": p.name, "kubernetesVersion": p.current,
                                           "osType": p.os_type,
                                           "upgrades": upgrades(p.current, self.current)}
                                          for p in self.pools.values()]}}

    def pool_upgrade_profile(self, pool, now):
        cat = self.fleet.catalog
        ups = [{"kubernetesVersion": v, "isPreview": True} if pre else {"kubernetesVersion": v}
               for v, pre in cat.upgrades(self.location, pool.current, now, self.current)]
        return {"id": pool.id + "/upgradeProfiles/default", "name": "default",
                "type": POOL_TYPE + "/upgradeProfiles",
                "properties": {"kubernetesVersion": pool.current, "osType": pool.os_type,
                               "upgrades": ups,
                               "latestNodeImageVersion": cat.latest_image(self.location, pool.image, now),
                               "recentlyUsedVersions": copy.deepcopy(pool.recent)}}

    # -- rules

    def version_target(self, requested, current, now, field):
        """The patch a requested version upgrades to, or None when it asks for no upgrade."""
        v, cur = parse_version(requested), parse_version(current)
        if v is None:
            raise invalid(field, "'%s' is not a Kubernetes version (<major.minor> or "
                          "<major.minor.patch>)." % requested)
        if (len(v) == 2 and v == cur[:2]) or v == cur:  # fact 6: the same alias never upgrades
            return None
        cat = self.fleet.catalog
        resolved = cat.resolve(self.location, requested, now)
        allowed = [u for u, _ in cat.upgrades(self.location, current, now)]
        if resolved is None or resolved not in allowed:  # fact 11
            raise AzureError(400, "OperationNotAllowed",
                             "Upgrading Kubernetes version %s to %s is not allowed. Available "
                             "upgrades: [%s]" % (current, requested, ", ".join(allowed)),
                             target=field)
        return resolved

    def check_writable(self):
        if self.op is not None:  # fact 10
            name, state = self.op.busy_label()
            raise AzureError(409, "OperationNotAllowed",
                             "Operation is not allowed: Another operation (%s - %s) is in "
                             "progress, please wait for it to finish before starting a new "
                             "operation. See %s for more details"
                             % (name, state, PENDING_OPERATION_LINK))
        if self.power == "Stopped":  # fact 14
            raise AzureError(400, "ValidationError",
                             "Operation is not allowed because the managed cluster '%s' is "
                             "stopped (powerState.code: Stopped). Start the cluster first."
                             % self.name)

    def check_system_pool(self, plans, target):
        modes = {p.name.lower(): p.mode for p in self.pools.values()}
        for plan in plans:
            modes[plan.pool.name.lower()] = plan.mode
        if "System" not in modes.values():
            raise invalid(target, "A managed cluster must have at least one 'System' agent pool "
                          "(a missing mode means User).")

    def check_deprecated_apis(self, props, cp_target, now):
        """Fact 12: the deprecated-API guard on control-plane minor upgrades (injection f)."""
        if not self.deprecated_guard or parse_version(cp_target)[:2] == parse_version(self.current)[:2]:
            return
        over = ((props.get("upgradeSettings") or {}).get("overrideSettings") or {})
        until = None
        if over.get("until") is not None:
            try:
                until = parse_instant(str(over["until"]), now)
            except ValueError:
                raise invalid("properties.upgradeSettings.overrideSettings.until",
                              "The value of until is not an RFC 3339 date-time.")
        if over.get("forceUpgrade") is True and until is not None and until > now:
            return
        raise AzureError(400, "ValidationError",
                         "Control plane upgrade is blocked due to recent usage of a Kubernetes "
                         "API deprecated in the specified version. Please visit "
                         "https://learn.microsoft.com/azure/aks/stop-cluster-upgrade-api-breaking-changes "
                         "to mitigate the issue, or set upgradeSettings.overrideSettings "
                         "{forceUpgrade: true, until} to bypass it.",
                         subcode="UpgradeBlockedOnDeprecatedAPIUsage")

    # -- writes

    def put(self, body, now):
        """PUT cluster (facts 3, 6, 9, 11, 12, 14, 16, 17): (operation or None, targets)."""
        if not isinstance(body, dict):
            raise invalid(None, "The request content was invalid and could not be deserialized.",
                          "InvalidRequestContent")
        if not body.get("location"):
            raise AzureError(400, "LocationRequired", "The location property is required for "
                             "this definition.", target="location")
        if str(body["location"]).replace(" ", "").lower() != self.location.replace(" ", "").lower():
            raise AzureError(400, "PropertyChangeNotAllowed",
                             "Changing property 'location' is not allowed.", target="location")
        props = body.get("properties")
        if not isinstance(props, dict):
            raise invalid("properties", "The value of parameter properties is required.")
        profiles = props.get("agentPoolProfiles")
        if not isinstance(profiles, list) or not profiles:
            raise invalid("properties.agentPoolProfiles",
                          "The value of parameter properties.agentPoolProfiles is required: a PUT "
                          "replaces the whole cluster.")
        if props.get("dnsPrefix") not in (None, self.dns_prefix):
            raise AzureError(400, "PropertyChangeNotAllowed",
                             "Changing property 'dnsPrefix' is not allowed.",
                             target="properties.dnsPrefix")
        pairs = []
        for i, prof in enumerate(profiles):
            path = "properties.agentPoolProfiles[%d]" % i
            name = prof.get("name") if isinstance(prof, dict) else None
            if not name:
                raise invalid(path + ".name", "The value of parameter %s.name is required." % path)
            pool = self.pools.get(name.lower())
            if pool is None:
                raise invalid(path + ".name", "Adding agent pool '%s' through the managed "
                              "cluster is not modeled by this fake." % name)
            pairs.append((path, prof, pool))
        missing = sorted(set(self.pools) - {pool.name.lower() for _, _, pool in pairs})
        if missing:
            raise invalid("properties.agentPoolProfiles",
                          "properties.agentPoolProfiles must list every agent pool of the "
                          "cluster (a PUT replaces the whole cluster); missing: %s"
                          % ", ".join(self.pools[m].name for m in missing))
        self.check_writable()
        cp_desired, cp_target = self.desired, None
        if props.get("kubernetesVersion") not in (None, ""):
            cp_desired = props["kubernetesVersion"]
            cp_target = self.version_target(cp_desired, self.current, now,
                                            "properties.kubernetesVersion")
        plans = [pool.plan(prof, path, cp_target or self.current, now) for path, prof, pool in pairs]
        self.check_system_pool(plans, "properties.agentPoolProfiles")
        if cp_target:
            self.check_deprecated_apis(props, cp_target, now)
            if self.legacy():  # fact 16: every pool goes with the control plane
                for plan in plans:
                    if not plan.target and parse_version(plan.pool.current) < parse_version(cp_target):
                        if plan.rollback:
                            raise invalid("properties.agentPoolProfiles", "A node image rollback "
                                          "cannot be combined with a control plane upgrade on a "
                                          "legacy cluster.")
                        plan.target = plan.desired = cp_target
        extras = without(props, self.MODELED | self.READ_ONLY)
        if isinstance(extras.get("servicePrincipalProfile"), dict):  # GET never returns the secret
            extras["servicePrincipalProfile"] = without(extras["servicePrincipalProfile"], {"secret"})
        top = {k: body[k] for k in self.TOP_EXTRAS if k in body}
        changed = (extras != self.extras or top != self.top or body.get("tags") != self.tags
                   or any(p.changed for p in plans))
        versions = bool(cp_target) or any(p.versions for p in plans)
        failed = self.state == "Failed" or any(p.state == "Failed" for p in self.pools.values())
        strings = (cp_desired != self.desired
                   or any(p.desired != p.pool.orchestrator for p in plans))
        # commit
        self.desired = cp_desired
        self.extras, self.top, self.tags = extras, top, body.get("tags")
        for plan in plans:
            pool = plan.pool
            if (plan.desired, plan.count, plan.mode, plan.extras) != \
                    (pool.orchestrator, pool.count, pool.mode, pool.extras):
                pool.orchestrator, pool.count, pool.mode = plan.desired, plan.count, plan.mode
                pool.extras = plan.extras
                pool.etag = new_etag()
        if not (versions or changed or failed):
            if strings:
                self.touch()
            return None, []
        seconds = self.phase_seconds()
        phases, targets = [], []
        if cp_target:
            phases.append(Phase("controlPlane", seconds, target=cp_target))
            targets.append("kubernetesVersion=" + cp_target)
        for plan in plans:
            if plan.target:
                phases.append(Phase("poolVersion", seconds, pool=plan.pool, target=plan.target))
                targets.append("agentPools/%s/orchestratorVersion=%s" % (plan.pool.name, plan.target))
            elif plan.rollback:
                phases.append(Phase("poolImage", seconds, pool=plan.pool, image=plan.rollback))
                targets.append("agentPools/%s/nodeImageVersion=%s" % (plan.pool.name, plan.rollback))
        if not phases:
            phases.append(Phase("update", seconds))
        self.error = None
        for plan in plans:
            pool = plan.pool
            if plan.versions or plan.changed or pool.state == "Failed":
                pool.state = "Upgrading" if plan.versions else "Updating"
                pool.error = None
                pool.etag = new_etag()
        sub_type = "Upgrading" if versions else "Updating"
        self.state = sub_type
        op = self.start_operation("PutManagedCluster", sub_type, phases, now, None)
        return op, targets

    def put_pool(self, pool, body, now):
        """PUT agent pool (facts 3, 6, 9, 11): (operation or None, targets)."""
        if not isinstance(body, dict):
            raise invalid(None, "The request content was invalid and could not be deserialized.",
                          "InvalidRequestContent")
        props = body.get("properties")
        if not isinstance(props, dict):
            raise invalid("properties", "The value of parameter properties is required.")
        self.check_writable()
        plan = pool.plan(props, "properties", self.current, now)
        self.check_system_pool([plan], "properties.mode")
        failed = pool.state == "Failed"
        strings = plan.desired != pool.orchestrator
        changed = plan.changed
        pool.orchestrator, pool.count, pool.mode, pool.extras = \
            plan.desired, plan.count, plan.mode, plan.extras
        if not (plan.versions or changed or failed):
            if strings:
                pool.touch()
            return None, []
        seconds = self.phase_seconds()
        if plan.target:
            phases = [Phase("poolVersion", seconds, pool=pool, target=plan.target)]
            targets = ["agentPools/%s/orchestratorVersion=%s" % (pool.name, plan.target)]
        elif plan.rollback:
            phases = [Phase("poolImage", seconds, pool=pool, image=plan.rollback)]
            targets = ["agentPools/%s/nodeImageVersion=%s" % (pool.name, plan.rollback)]
        else:
            phases, targets = [Phase("update", seconds)], []
        sub_type = "Upgrading" if plan.versions else "Updating"
        pool.state, pool.error = sub_type, None
        op = self.start_operation("PutAgentPool", sub_type, phases, now, pool)
        return op, targets

    def upgrade_node_image(self, pool, now):
        """POST upgradeNodeImageVersion (fact 4): the newest image in the region, now."""
        self.check_writable()
        latest = self.fleet.catalog.latest_image(self.location, pool.image, now)
        if latest == pool.image:
            return None, []
        pool.state, pool.error = "UpgradingNodeImageVersion", None
        op = self.start_operation("UpgradeNodeImageVersion", "UpgradingNodeImageVersion",
                                  [Phase("poolImage", self.phase_seconds(), pool=pool, image=latest)],
                                  now, pool)
        return op, ["agentPools/%s/nodeImageVersion=%s" % (pool.name, latest)]

    def phase_seconds(self):
        return float(self.op_seconds if self.op_seconds is not None
                     else self.fleet.settings["operationSeconds"])

    def start_operation(self, op_type, sub_type, phases, now, pool):
        op = Operation(self, pool, op_type, sub_type, now, phases)
        injections = self.fleet.injections
        fail = injections.take("fail", cluster=self, pool=pool, phases=phases)
        if fail:
            op.fail = fail
        if injections.take("stuck", cluster=self):
            op.stuck = True
        self.fleet.operations[op.id] = op
        self.op = op
        (pool or self).touch()
        return op

    # -- time passing

    def settle(self, now):
        """Applies what fake time has done: phases ending, operations ending, AKS starting its
        own operations (injection e)."""
        while True:
            if self.op is None:
                due = [s for s in self.scheduled if s["at"] <= now]
                if not due:
                    return
                spec = min(due, key=lambda s: s["at"])
                self.scheduled.remove(spec)
                self.start_aks_operation(spec, max(spec["at"], self.free_since))
                continue
            op = self.op
            while op.next < len(op.phases):
                ph = op.phases[op.next]
                if ph.end > now:
                    return
                if op.fail and op.next == min(op.fail.get("phase", 0), len(op.phases) - 1):
                    self.finish(op, ph.end, op.fail["error"])
                    break
                self.apply(op, ph)
                op.next += 1
            else:
                self.finish(op, op.phases[-1].end if op.phases else op.start, None)

    def start_aks_operation(self, spec, start):
        pool = self.pools.get(spec["pool"].lower()) if spec.get("pool") else None
        image = self.fleet.catalog.latest_image(self.location, pool.image, start) if pool else None
        sub_type = spec.get("subOperationType") or (
            "UpgradingNodeImageVersion" if pool else "Updating")
        op = Operation(self, pool, spec.get("operationType", "NodeImageAutoUpgrade"), sub_type,
                       start, [Phase("aks", float(spec["seconds"]), pool=pool, image=image)],
                       client=False)
        self.fleet.operations[op.id] = op
        self.op = op
        if pool:
            pool.state = sub_type
            pool.touch()
        else:
            self.state = sub_type
            self.touch()

    def apply(self, op, ph):
        if ph.kind == "controlPlane":
            self.current = ph.target
            self.touch()
        elif ph.kind == "poolVersion":  # the newest image of the region when its phase starts
            pool = ph.pool
            image = self.fleet.catalog.latest_image(self.location, pool.image, ph.start)
            pool.remember(ph.end)
            pool.current, pool.image, pool.state, pool.error = ph.target, image, "Succeeded", None
            pool.touch()
        elif ph.pool is not None and ph.image and ph.image != ph.pool.image:
            pool = ph.pool
            pool.remember(ph.end)
            pool.image = ph.image
            pool.touch()

    def finish(self, op, t, error):
        op.end = t
        self.op = None
        self.free_since = t
        if error is None:
            op.status = "Succeeded"
            if op.pool is None:
                self.state, self.error = "Succeeded", None
                for pool in self.pools.values():
                    if pool.state != "Succeeded":
                        pool.state, pool.error = "Succeeded", None
                        pool.etag = new_etag()
            else:
                op.pool.state, op.pool.error = "Succeeded", None
                op.pool.etag = new_etag()
        else:
            op.status, op.error = "Failed", dict(error)
            failing = op.phases[op.next]
            if op.pool is None:
                self.state, self.error = "Failed", dict(error)
                for pool in self.pools.values():
                    if pool is failing.pool:
                        pool.state, pool.error = "Failed", dict(error)
                    elif pool.state != "Succeeded":
                        pool.state = "Succeeded"
                    pool.etag = new_etag()
            else:
                op.pool.state, op.pool.error = "Failed", dict(error)
                op.pool.etag = new_etag()
        self.touch()


# ---------------------------------------------------------------------------------------------
# failure injection

class Injections:
    """Failures to come (settable in the seed and through POST /_fake/inject)."""

    QUEUED = ("fail", "stuck", "reset", "serverError", "concurrentWrite")
    IMMEDIATE = ("stop", "start", "aksOperation", "deprecatedApis", "expireTokens")

    def __init__(self, fleet):
        self.fleet = fleet
        self.pending = []

    def add(self, spec, now):
        if not isinstance(spec, dict) or spec.get("kind") not in self.QUEUED + self.IMMEDIATE:
            raise ValueError("an injection needs a kind among %s" % (self.QUEUED + self.IMMEDIATE,))
        spec = dict(spec)
        kind = spec["kind"]
        cluster = None
        if kind not in ("serverError", "expireTokens"):
            cluster = self.fleet.find_cluster(spec.get("cluster"))
            cluster.settle(now)
        if kind == "fail":
            err = spec.get("error")
            if not isinstance(err, dict) or not err.get("code") or not err.get("message"):
                raise ValueError("a fail injection needs error {code, message[, subcode]}")
        if kind in ("stop", "start"):
            cluster.power = "Stopped" if kind == "stop" else "Running"
            cluster.touch()
        elif kind == "aksOperation":
            if spec.get("pool") and spec["pool"].lower() not in cluster.pools:
                raise ValueError("no pool %r in %s" % (spec["pool"], cluster.name))
            cluster.scheduled.append({"at": parse_instant(spec.get("at", 0), now),
                                      "seconds": float(spec["seconds"]), "pool": spec.get("pool"),
                                      "operationType": spec.get("operationType", "NodeImageAutoUpgrade"),
                                      "subOperationType": spec.get("subOperationType")})
            cluster.settle(now)
        elif kind == "deprecatedApis":
            cluster.deprecated_guard = bool(spec.get("enabled", True))
        elif kind == "expireTokens":
            self.fleet.app.entra.expire_all()
        else:
            spec["times"] = int(spec.get("times", 1))
            spec["clusterId"] = cluster.id if cluster else None
            self.pending.append(spec)

    def take(self, kind, cluster=None, pool=None, phases=None, method=None, path=None):
        """The first pending injection of `kind` matching, used once (None if none)."""
        for spec in self.pending:
            if spec["kind"] != kind:
                continue
            if cluster is not None and spec.get("clusterId") != cluster.id:
                continue
            if kind == "fail" and spec.get("pool"):
                if not any(ph.pool is not None and ph.pool.name.lower() == spec["pool"].lower()
                           for ph in phases or []):
                    continue
            if method and spec.get("method") and spec["method"].upper() != method:
                continue
            if path is not None and spec.get("pathContains") and \
                    spec["pathContains"].lower() not in path.lower():
                continue
            spec["times"] -= 1
            if spec["times"] <= 0:
                self.pending.remove(spec)
            return spec
        return None


# ---------------------------------------------------------------------------------------------
# the fleet

class Fleet:
    """Subscriptions, resource groups, clusters, operations, the request log and counts."""

    def __init__(self, app, seed, settings, clock):
        self.app, self.settings, self.clock = app, settings, clock
        now = clock.now()
        self.catalog = Catalog(seed.get("locations"), clock.fake0)
        self.subscriptions = {}  # lower -> as seeded
        self.groups = {}  # (sub, rg) lower -> rg as seeded
        self.clusters = {}  # (sub, rg, name) lower -> Cluster
        self.operations = {}
        self.injections = Injections(self)
        self.requests = []
        self.seq = 0
        self.upgrades = {}  # cluster id -> {target: count}
        for sub, s in (seed.get("subscriptions") or {}).items():
            self.subscriptions[sub.lower()] = sub
            for rg, r in (s.get("resourceGroups") or {}).items():
                self.groups[(sub.lower(), rg.lower())] = rg
                for name, c in (r.get("managedClusters") or {}).items():
                    self.clusters[(sub.lower(), rg.lower(), name.lower())] = \
                        Cluster(self, sub, rg, name, c, now)

    def settle(self, now):
        for c in self.clusters.values():
            c.settle(now)

    def find_cluster(self, ref):
        """A cluster by NAME, RG/NAME, SUB/RG/NAME or ARM id (case-insensitive, unique)."""
        if not isinstance(ref, str) or not ref:
            raise ValueError("an injection needs \"cluster\"")
        parts = [p for p in ref.strip("/").split("/") if p]
        if len(parts) == 8 and parts[0].lower() == "subscriptions":
            parts = [parts[1], parts[3], parts[7]]
        if not 1 <= len(parts) <= 3:
            raise ValueError("not a cluster reference: %r" % ref)
        want = [p.lower() for p in parts]
        found = [c for key, c in self.clusters.items() if list(key[-len(want):]) == want]
        if len(found) != 1:
            raise ValueError("%r names %d clusters" % (ref, len(found)))
        return found[0]

    def count_upgrades(self, cluster, targets):
        counts = self.upgrades.setdefault(cluster.id, {})
        for t in targets:
            counts[t] = counts.get(t, 0) + 1

    def state(self, now):
        clusters = []
        for c in self.clusters.values():
            clusters.append({
                "id": c.id, "resource": c.resource(),
                "operation": c.op.id if c.op else None,
                "upgradeRequests": dict(self.upgrades.get(c.id, {})),
                "recentlyUsedVersions": {p.name: copy.deepcopy(p.recent) for p in c.pools.values()},
                "deprecatedApiGuard": c.deprecated_guard,
                "scheduledOperations": [dict(s, at=iso(s["at"])) for s in c.scheduled]})
        ops = []
        for op in self.operations.values():
            body = op.resource_body(now)
            body.update({"cluster": op.cluster.id, "pool": op.pool.name if op.pool else None,
                         "internalStatus": op.status, "stuck": op.stuck,
                         "clientInitiated": op.client})
            ops.append(body)
        return {"now": iso(now), "clusters": clusters, "operations": ops,
                "injections": [without(s, {"clusterId"}) for s in self.injections.pending]}


# ---------------------------------------------------------------------------------------------
# HTTP: the router and the request context

class Ctx:
    """One request: what came in, and what the log will say about it."""

    def __init__(self, method, target, headers, raw):
        self.method, self.headers, self.raw = method, headers, raw
        url = urllib.parse.urlsplit(target)
        self.path = url.path
        self.query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        self.log = {"method": method, "path": self.path, "apiVersion": self.query.get("api-version"),
                    "upgrade": False, "targets": []}

    def json(self):
        if not self.raw:
            return None
        try:
            return json.loads(self.raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise AzureError(400, "InvalidRequestContent", "The request content was invalid and "
                             "could not be deserialized: '%s'." % e)


MC = ("subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/"
      "managedClusters/{cluster}")
LOC = "subscriptions/{sub}/providers/Microsoft.ContainerService/locations/{location}"
ARM_VERSIONS = (STABLE_API, PREVIEW_API)
PREVIEW_ONLY = (PREVIEW_API,)
POLL = "poll"  # the api-version the polling URLs carry


class Router:
    """ARM routes (fact 2), matched case-insensitively on their fixed segments."""

    ROUTES = [
        ("cluster", ("GET", "PUT"), MC, ARM_VERSIONS),
        ("pools", ("GET",), MC + "/agentPools", ARM_VERSIONS),
        ("pool", ("GET", "PUT"), MC + "/agentPools/{pool}", ARM_VERSIONS),
        ("nodeImageUpgrade", ("POST",), MC + "/agentPools/{pool}/upgradeNodeImageVersion", ARM_VERSIONS),
        ("poolUpgradeProfile", ("GET",), MC + "/agentPools/{pool}/upgradeProfiles/default", ARM_VERSIONS),
        ("clusterUpgradeProfile", ("GET",), MC + "/upgradeProfiles/default", ARM_VERSIONS),
        ("maintenanceConfigurations", ("GET",), MC + "/maintenanceConfigurations", ARM_VERSIONS),
        ("maintenanceConfiguration", ("GET",), MC + "/maintenanceConfigurations/{config}", ARM_VERSIONS),
        ("clusterOperation", ("GET",), MC + "/operations/{op}", PREVIEW_ONLY),
        ("poolOperation", ("GET",), MC + "/agentPools/{pool}/operations/{op}", PREVIEW_ONLY),
        ("kubernetesVersions", ("GET",), LOC + "/kubernetesVersions", ARM_VERSIONS),
        ("nodeImageVersions", ("GET",), LOC + "/nodeImageVersions", PREVIEW_ONLY),
        ("asyncOperation", ("GET",), LOC + "/operations/{op}", POLL),
        ("operationResult", ("GET",), LOC + "/operationresults/{op}", POLL),
    ]

    def __init__(self):
        self.routes = [(name, methods, [s if s.startswith("{") else s.lower()
                                        for s in pattern.split("/")], versions)
                       for name, methods, pattern, versions in self.ROUTES]

    def match(self, path):
        """(name, methods, params, versions) or None."""
        segs = [urllib.parse.unquote(s) for s in path.strip("/").split("/")]
        for name, methods, pattern, versions in self.routes:
            if len(pattern) != len(segs):
                continue
            params = {}
            for pat, seg in zip(pattern, segs):
                if pat.startswith("{"):
                    if not seg:
                        break
                    params[pat[1:-1]] = seg
                elif pat != seg.lower():
                    break
            else:
                return name, methods, params, versions
        return None


# ---------------------------------------------------------------------------------------------
# the application

class App:
    def __init__(self, seed, settings):
        self.settings = settings
        self.lock = threading.RLock()
        self.base = "http://127.0.0.1"
        self.clock = Clock(parse_instant(settings.get("clockStart"), time.time()),
                           float(settings["timeScale"]))
        identity = seed.get("identity") or {}
        self.entra = Entra(identity, float(settings["tokenSeconds"]), self)
        self.imds = Imds(self.entra, identity.get("managedIdentities"))
        t = settings["throttle"]
        self.throttle = Throttle((t["reads"]["capacity"], t["reads"]["refillPerSecond"]),
                                 (t["writes"]["capacity"], t["writes"]["refillPerSecond"]))
        self.fleet = Fleet(self, seed, settings, self.clock)
        self.router = Router()
        for spec in seed.get("inject", []):
            self.fleet.injections.add(spec, self.clock.now())
        self.verbose = False

    # -- entry point from the HTTP handler

    def handle(self, method, target, headers, raw):
        ctx = Ctx(method, target, headers, raw)
        with self.lock:
            if ctx.path.startswith("/_fake/"):
                try:
                    return self.admin(ctx)
                except (ValueError, KeyError, TypeError) as e:
                    return Response(400, {"error": {"code": "BadAdminRequest", "message": repr(e)}})
            try:
                resp = self.dispatch(ctx)
            except AzureError as e:
                resp = e.response()
            except Exception as e:  # a bug of the fake: say so rather than drop the connection
                import traceback
                traceback.print_exc()
                resp = Response(500, {"error": {"code": "FakeInternalError", "message": repr(e)}})
            if getattr(ctx, "extra_headers", None):
                for k, v in ctx.extra_headers.items():
                    resp.headers.setdefault(k, v)
            self.fleet.seq += 1
            entry = dict(ctx.log, seq=self.fleet.seq, time=iso(self.clock.now()),
                         status="reset" if resp.reset else resp.status)
            self.fleet.requests.append(entry)
            return resp

    def dispatch(self, ctx):
        now = self.clock.now()
        path = ctx.path
        low = path.lower().rstrip("/")
        injected = self.fleet.injections.take("serverError", method=ctx.method, path=path)
        if injected:  # (g) a temporary 5xx, before anything is applied
            ctx.log["injected"] = "serverError"
            status = int(injected.get("status", 500))
            headers = {"Retry-After": str(injected["retryAfter"])} if "retryAfter" in injected else {}
            raise AzureError(status, injected.get("code", "InternalServerError"),
                             injected.get("message", "An internal server error occurred (injected)."),
                             headers=headers)
        if low == "/metadata/identity/oauth2/token":
            if ctx.method != "GET":
                return Response(405, {"error": "invalid_request", "error_description": "GET only"})
            return self.imds.token(ctx)
        m = re.fullmatch(r"/([^/]+)/oauth2/v2\.0/token", path)
        if m:
            if ctx.method != "POST":
                return Response(405, {"error": "invalid_request", "error_description": "POST only"})
            return self.entra.token_endpoint(m.group(1), ctx)
        m = re.fullmatch(r"/([^/]+)/v2\.0/\.well-known/openid-configuration", path)
        if m and ctx.method == "GET":
            return self.entra.openid_configuration(m.group(1))
        return self.arm(ctx, now)

    # -- ARM

    def arm(self, ctx, now):
        route = self.router.match(ctx.path)
        if route is None:
            raise AzureError(404, "NotFound", "The fake ARM has no route for '%s'." % ctx.path)
        name, methods, params, versions = route
        ctx.log["route"] = name
        # fact 1: every call carries an api-version
        version = ctx.query.get("api-version")
        if not version:
            raise AzureError(400, "MissingApiVersionParameter",
                             "The api-version query parameter (?api-version=) is required for all "
                             "requests.")
        allowed = (self.settings["pollApiVersion"],) if versions == POLL else versions
        if version not in allowed:
            raise AzureError(400, "InvalidApiVersionParameter",
                             "The api-version '%s' is invalid. The supported versions are '%s'."
                             % (version, ",".join(allowed)))
        sub = params["sub"]
        kind = "reads" if ctx.method == "GET" else "writes"
        ctx.extra_headers = self.throttle.peek(sub, kind)
        record = self.entra.authenticate(ctx.headers.get("Authorization"))
        ctx.log["client"] = record["client"]
        ctx.extra_headers = self.throttle.take(sub, kind, record["client"])  # fact 13
        if ctx.method not in methods:
            raise AzureError(405, "MethodNotAllowed", "The fake ARM does not model %s on '%s'."
                             % (ctx.method, ctx.path))
        if sub.lower() not in self.fleet.subscriptions:
            raise AzureError(404, "SubscriptionNotFound", "The subscription '%s' could not be "
                             "found." % sub)
        self.fleet.settle(now)
        handler = getattr(self, "route_" + name)
        if "cluster" in params:
            cluster = self.cluster(params)
            ctx.log["cluster"] = cluster.id
            return handler(ctx, now, cluster, params)
        return handler(ctx, now, params)

    def cluster(self, params):
        sub, rg, name = params["sub"].lower(), params["rg"].lower(), params["cluster"].lower()
        if (sub, rg) not in self.fleet.groups:
            raise AzureError(404, "ResourceGroupNotFound",
                             "Resource group '%s' could not be found." % params["rg"])
        c = self.fleet.clusters.get((sub, rg, name))
        if c is None:
            raise AzureError(404, "ResourceNotFound",
                             "The Resource '%s/%s' under resource group '%s' was not found. For "
                             "more details please go to https://aka.ms/ARMResourceNotFoundFix"
                             % (CLUSTER_TYPE, params["cluster"], params["rg"]))
        return c

    @staticmethod
    def pool(cluster, params):
        p = cluster.pools.get(params["pool"].lower())
        if p is None:
            raise AzureError(404, "NotFound", "Agent pool '%s' was not found in managed cluster "
                             "'%s'." % (params["pool"], cluster.name))
        return p

    def page(self, ctx, items):
        """A page of a list (fact 7): {"value", "nextLink"?}."""
        size = int(self.settings["pageSize"])
        token = ctx.query.get("$skipToken")
        try:
            start = int(token) if token else 0
        except ValueError:
            raise invalid("$skipToken", "The $skipToken '%s' is invalid." % token)
        body = {"value": items[start:start + size]}
        if start + size < len(items):
            query = urllib.parse.urlencode({"api-version": ctx.query["api-version"],
                                            "$skipToken": str(start + size)})
            body["nextLink"] = "%s%s?%s" % (self.base, ctx.path, query)
        return body

    def polling_headers(self, cluster, op, location=False):
        """Azure-AsyncOperation (and Location) for an accepted operation, as the AKS RP gives
        them: with their own api-version (fact 1)."""
        root = "%s/subscriptions/%s/providers/%s/locations/%s" % (
            self.base, cluster.sub, RP, cluster.location)
        query = "?api-version=" + self.settings["pollApiVersion"]
        headers = {"Azure-AsyncOperation": "%s/operations/%s%s" % (root, op.id, query),
                   "Retry-After": self.retry_after()}
        if location:
            headers["Location"] = "%s/operationresults/%s%s" % (root, op.id, query)
        return headers

    def retry_after(self):
        """Retry-After is whole seconds (fact 13)."""
        return str(max(0, math.ceil(float(self.settings["retryAfterSeconds"]))))

    @staticmethod
    def check_etag(ctx, etag):
        """Fact 8: If-Match / If-None-Match on PUT; 412 when they do not hold."""
        def values(header):
            return [v.strip().removeprefix("W/").strip('"') for v in header.split(",") if v.strip()]

        if_match = ctx.headers.get("If-Match")
        if if_match is not None:
            vals = values(if_match)
            if "*" not in vals and etag not in vals:
                raise AzureError(412, "PreconditionFailed",
                                 "The specified precondition 'If-Match' = %s failed: the resource's "
                                 "eTag is now \"%s\"." % (if_match, etag))
        if_none = ctx.headers.get("If-None-Match")
        if if_none is not None:
            vals = values(if_none)
            if "*" in vals or etag in vals:
                raise AzureError(412, "PreconditionFailed",
                                 "The specified precondition 'If-None-Match' = %s failed: the "
                                 "resource exists." % if_none)

    def write_accepted(self, ctx, cluster, op, targets):
        """Logs and counts a write that started an operation (fact 8 of the brief), and the
        reset injection (d)."""
        if op is not None:
            ctx.log["operationId"] = op.id
        if targets:
            ctx.log["upgrade"] = True
            ctx.log["targets"] = targets
            self.fleet.count_upgrades(cluster, targets)
        if self.fleet.injections.take("reset", cluster=cluster, method=ctx.method):
            ctx.log["injected"] = "reset"
            return True
        return False

    # -- route handlers

    def route_cluster(self, ctx, now, cluster, params):
        if ctx.method == "GET":
            return Response(200, cluster.resource(), {"ETag": '"%s"' % cluster.etag})
        if self.fleet.injections.take("concurrentWrite", cluster=cluster):
            # Someone else wrote the cluster between the client's GET and this PUT.
            ctx.log["injected"] = "concurrentWrite"
            cluster.touch()
        self.check_etag(ctx, cluster.etag)
        op, targets = cluster.put(ctx.json(), now)
        reset = self.write_accepted(ctx, cluster, op, targets)
        headers = {"ETag": '"%s"' % cluster.etag}
        if op is not None:
            headers.update(self.polling_headers(cluster, op))  # fact 3
            if not self.settings["asyncHeaderOnPut"]:
                del headers["Azure-AsyncOperation"]
        return Response(200, cluster.resource(), headers, reset=reset)

    def route_pools(self, ctx, now, cluster, params):
        return Response(200, self.page(ctx, [p.resource() for p in cluster.pools.values()]))

    def route_pool(self, ctx, now, cluster, params):
        pool = self.pool(cluster, params)
        if ctx.method == "GET":
            return Response(200, pool.resource(), {"ETag": '"%s"' % pool.etag})
        self.check_etag(ctx, pool.etag)
        op, targets = cluster.put_pool(pool, ctx.json(), now)
        reset = self.write_accepted(ctx, cluster, op, targets)
        headers = {"ETag": '"%s"' % pool.etag}
        if op is not None:
            headers.update(self.polling_headers(cluster, op))
            if not self.settings["asyncHeaderOnPut"]:
                del headers["Azure-AsyncOperation"]
        return Response(200, pool.resource(), headers, reset=reset)

    def route_nodeImageUpgrade(self, ctx, now, cluster, params):
        pool = self.pool(cluster, params)
        op, targets = cluster.upgrade_node_image(pool, now)
        reset = self.write_accepted(ctx, cluster, op, targets)
        if op is None:  # already on the newest image: 200, no body (fact 4)
            return Response(200, None, reset=reset)
        return Response(202, pool.resource(), self.polling_headers(cluster, op, location=True),
                        reset=reset)

    def route_poolUpgradeProfile(self, ctx, now, cluster, params):
        return Response(200, cluster.pool_upgrade_profile(self.pool(cluster, params), now))

    def route_clusterUpgradeProfile(self, ctx, now, cluster, params):
        return Response(200, cluster.upgrade_profile(now))

    def maintenance_body(self, cluster, name):
        return {"id": cluster.id + "/maintenanceConfigurations/" + name, "name": name,
                "type": CLUSTER_TYPE + "/maintenanceConfigurations",
                "properties": copy.deepcopy(cluster.maintenance[name])}

    def route_maintenanceConfigurations(self, ctx, now, cluster, params):
        return Response(200, self.page(ctx, [self.maintenance_body(cluster, n)
                                             for n in cluster.maintenance]))

    def route_maintenanceConfiguration(self, ctx, now, cluster, params):
        for name in cluster.maintenance:
            if name.lower() == params["config"].lower():
                return Response(200, self.maintenance_body(cluster, name))
        raise AzureError(404, "NotFound", "Maintenance configuration '%s' was not found in "
                         "managed cluster '%s'." % (params["config"], cluster.name))

    def route_clusterOperation(self, ctx, now, cluster, params):
        op = self.fleet.operations.get(params["op"].lower())
        if op is None or op.cluster is not cluster:
            raise AzureError(404, "NotFound", "Operation '%s' was not found." % params["op"])
        return Response(200, op.resource_body(now))

    def route_poolOperation(self, ctx, now, cluster, params):
        pool = self.pool(cluster, params)
        op = self.fleet.operations.get(params["op"].lower())
        if op is None or op.pool is not pool:
            raise AzureError(404, "NotFound", "Operation '%s' was not found." % params["op"])
        return Response(200, op.resource_body(now))

    def location_known(self, params):
        if not self.fleet.catalog.region(params["location"]):
            raise AzureError(400, "LocationNotAvailableForResourceType",
                             "The provided location '%s' is not available for resource type "
                             "'%s/locations'." % (params["location"], RP))

    def route_kubernetesVersions(self, ctx, now, params):
        self.location_known(params)
        return Response(200, self.fleet.catalog.kubernetes_versions(params["location"], now))

    def route_nodeImageVersions(self, ctx, now, params):
        self.location_known(params)
        return Response(200, {"value": self.fleet.catalog.images(params["location"], now)})

    def polled(self, params):
        op = self.fleet.operations.get(params["op"].lower())
        if op is None or op.cluster.sub.lower() != params["sub"].lower() or \
                op.cluster.location.lower() != params["location"].lower():
            raise AzureError(404, "NotFound", "Operation '%s' was not found." % params["op"])
        return op

    def route_asyncOperation(self, ctx, now, params):
        op = self.polled(params)
        headers = {}
        if op.reported_status() == "InProgress":
            headers["Retry-After"] = self.retry_after()
        return Response(200, op.status_body(now), headers)

    def route_operationResult(self, ctx, now, params):
        op = self.polled(params)
        status = op.reported_status()
        if status == "InProgress":
            return Response(202, None, self.polling_headers(op.cluster, op, location=True))
        if status == "Failed":
            return Response(int(op.fail.get("locationStatus", 400)), {"error": dict(op.error)})
        target = op.pool if op.pool is not None else op.cluster
        return Response(200, target.resource())

    # -- admin

    def admin(self, ctx):
        now = self.clock.now()
        self.fleet.settle(now)
        path = ctx.path.rstrip("/")
        if path == "/_fake/state" and ctx.method == "GET":
            return Response(200, self.fleet.state(now))
        if path == "/_fake/requests" and ctx.method == "GET":
            since = int(ctx.query.get("since", 0))
            return Response(200, {"requests": [r for r in self.fleet.requests if r["seq"] > since],
                                  "upgradeRequests": copy.deepcopy(self.fleet.upgrades)})
        if path == "/_fake/requests" and ctx.method == "DELETE":
            self.fleet.requests.clear()
            return Response(204)
        if path == "/_fake/clock" and ctx.method == "POST":
            body = json.loads(ctx.raw or b"{}")
            self.clock.advance(float(body.get("advanceSeconds", 0)))
            now = self.clock.now()
            self.fleet.settle(now)
            return Response(200, {"now": iso(now)})
        if path == "/_fake/inject" and ctx.method == "POST":
            body = json.loads(ctx.raw or b"null")
            specs = body if isinstance(body, list) else [body]
            for spec in specs:
                self.fleet.injections.add(spec, now)
            return Response(200, {"accepted": len(specs),
                                  "pending": [without(s, {"clusterId"})
                                              for s in self.fleet.injections.pending]})
        return Response(404, {"error": {"code": "NotFound", "message": "no admin route " + path}})


# ---------------------------------------------------------------------------------------------
# the HTTP server

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-arm/1.0"

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def serve(self):
        app = self.server.app
        resp = app.handle(self.command, self.path, self.headers, self.body())
        if resp.reset:  # injection (d): applied, then the connection reset without an answer
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            os.close(self.connection.detach())
            return
        data = b"" if resp.body is None else json.dumps(resp.body).encode()
        self.send_response(resp.status)
        if resp.body is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-ms-request-id", str(uuid.uuid4()))
        self.send_header("x-ms-correlation-request-id",
                         self.headers.get("x-ms-correlation-request-id") or str(uuid.uuid4()))
        if self.headers.get("x-ms-client-request-id"):
            self.send_header("x-ms-client-request-id", self.headers["x-ms-client-request-id"])
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = serve

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    def log_message(self, fmt, *args):
        if self.server.app.verbose:
            sys.stderr.write("fake_arm: %s\n" % (fmt % args))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog is 5: a client opening dozens of connections at once
    # (a daemon starting 60 upgrades) would see some reset after sending its request.
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)


DEFAULTS = {"pageSize": 2, "operationSeconds": 60, "timeScale": 1, "tokenSeconds": 3600,
            "asyncHeaderOnPut": True, "retryAfterSeconds": 1, "pollApiVersion": "2016-03-30",
            "clockStart": None,
            "throttle": {"reads": {"capacity": 250, "refillPerSecond": 25},
                         "writes": {"capacity": 200, "refillPerSecond": 10}}}


def bucket_arg(text):
    cap, _, rate = text.partition(":")
    return {"capacity": float(cap), "refillPerSecond": float(rate or cap)}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Fake ARM + Entra + IMDS for AKS clients "
                                 "(the module docstring is the manual).")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--state", required=True)
    ap.add_argument("--port-file")
    ap.add_argument("--time-scale", type=float)
    ap.add_argument("--operation-seconds", type=float)
    ap.add_argument("--token-seconds", type=float)
    ap.add_argument("--page-size", type=int)
    ap.add_argument("--retry-after", type=int)
    ap.add_argument("--no-async-header", action="store_true")
    ap.add_argument("--reads", type=bucket_arg, metavar="CAP:RATE")
    ap.add_argument("--writes", type=bucket_arg, metavar="CAP:RATE")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    with open(args.state) as f:
        seed = json.load(f)
    settings = copy.deepcopy(DEFAULTS)
    given = seed.get("settings") or {}
    throttle = given.get("throttle") or {}
    settings.update(without(given, {"throttle"}))
    for kind in ("reads", "writes"):
        settings["throttle"][kind].update(throttle.get(kind) or {})
    for flag, key in (("time_scale", "timeScale"), ("operation_seconds", "operationSeconds"),
                      ("token_seconds", "tokenSeconds"), ("page_size", "pageSize"),
                      ("retry_after", "retryAfterSeconds")):
        if getattr(args, flag) is not None:
            settings[key] = getattr(args, flag)
    if args.no_async_header:
        settings["asyncHeaderOnPut"] = False
    for kind in ("reads", "writes"):
        if getattr(args, kind):
            settings["throttle"][kind] = getattr(args, kind)

    app = App(seed, settings)
    app.verbose = args.verbose
    server = Server(("127.0.0.1", args.port), Handler)
    server.app = app
    port = server.server_address[1]
    app.base = "http://127.0.0.1:%d" % port
    if app.entra.resource == "self":
        # The tokens' audience is this server itself (a client whose ARM endpoint is the fake).
        app.entra.resource = app.base + "/"
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print("listening on %s" % app.base, flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
