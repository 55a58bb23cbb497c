#!/usr/bin/env python3
"""A well-behaved exec provider (exec.waverun.dev/v1alpha1): a fake platform of clusters kept in
a JSON file, for waverun's conformance tests and as a starting point for adapter authors.

    fake-cluster.py OPERATION < request.json > response.json

Environment (set through the provider's `env` in waverun.yaml):
  FAKE_CLUSTER_STATE    the JSON file holding the clusters and their operations (required)
  FAKE_UPGRADE_SECONDS  how long an upgrade runs, in real seconds (default 0.5)
  FAKE_FAIL_MEMBERS     comma-separated cluster ids whose upgrades fail
  FAKE_ENV_LOG          if set, each call appends its environment (as JSON) to this file
  FAKE_RELEASES         the `list-releases` result as JSON (default: 1.33.2 and 1.34.1, two
                        Ubuntu images, and a 1.35.0 preview)
  FAKE_CAPABILITIES     a JSON object merged over the `capabilities` result (a null removes a key)
  FAKE_REQUEST_LOG      if set, each call appends a JSON line: the operation, the cluster id, the
                        params, whether it leads a session of its own and can open a terminal,
                        and how many calls (and start-upgrades of its cluster) were running
  FAKE_INFLIGHT_DIR     where running calls leave a marker (to count them); with
  FAKE_CALL_SECONDS     how long each call takes (default 0)

Misbehaviours, each counted in the state file (so that it happens the given number of times):
  FAKE_PRECONDITION_FAILURES  the first N new start-upgrades answer PreconditionFailed
  FAKE_CRASH_START            "before" or "after": the first new start-upgrade is killed
                              (SIGKILL, half a response printed) before or after the platform
                              accepted it
  FAKE_GET_OPERATION_ERRORS   comma-separated codes: the i-th get-operation answers a Failure
                              with the i-th code (saying `retryable: true`, whatever the code)
  FAKE_FORGET_OPERATIONS      if set, get-operation has no trace of any operation (NotFound)
  FAKE_START_UNAVAILABLE      a file: while it exists, new start-upgrades of the clusters it
                              names (comma-separated; all if it is empty) answer Unavailable
                              (`retryAfterSeconds: 1`), not counted

The state file: {"clusters": {ID: {"region", "version", "nodePools": [{"name", "os",
"nodeImage": {"version"}}], "maintenance"?, "labels"?, "powerState"?, "health"?,
"healthMessage"?}}, "operations": {KEY: {...}}}
(`maintenance` in waverun's form, `{"kubernetes": {"schedule": ..., "durationHours": ...,
"startTime": ...}}`). Clusters not in the file are
created on first describe at 1.33.2 in the request's region.

`check` (waverun's optional operation, listed in `capabilities`): a stopped or busy cluster
fails; a pre-flight whose upgrade targets a Kubernetes version `list-releases` does not offer
fails; otherwise the cluster's `health` (Pass, Fail or Inconclusive; default Pass) with its
`healthMessage`, and one value, the cluster's version.
"""
import fcntl
import json
import os
import signal
import sys
import time

API = "exec.waverun.dev/v1alpha1"


def respond(req, result=None, error=None):
    out = {"apiVersion": API, "kind": "ProviderResponse",
           "operation": req.get("operation"), "requestId": req.get("requestId")}
    if error is None:
        out["status"] = "Success"
        out["result"] = result or {}
    else:
        out["status"] = "Failure"
        out["error"] = error
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
    sys.exit(0 if error is None else 1)


def fail(req, code, message, retryable=False):
    respond(req, error={"code": code, "message": message, "retryable": retryable})


def save(f, state):
    f.seek(0)
    f.truncate()
    f.write(json.dumps(state, indent=1, sort_keys=True))
    f.flush()


def crash():
    """Half a response, then killed: the caller cannot know what happened."""
    sys.stdout.write('{"apiVersion": "%s", "kind": "Provi' % API)
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def count(state, key):
    """Increments the state's counter `key`; returns its value before."""
    n = state.get(key, 0)
    state[key] = n + 1
    return n


def has_tty():
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
        return True
    except OSError:
        return False


def observe(req, operation):
    """Logs the call (FAKE_REQUEST_LOG) and, with FAKE_INFLIGHT_DIR, how many calls were running
    then; returns the marker to remove when the call ends."""
    marker = None
    inflight = same = None
    cid = (req.get("cluster") or {}).get("id")
    folder = os.environ.get("FAKE_INFLIGHT_DIR")
    if folder and operation != "capabilities":
        os.makedirs(folder, exist_ok=True)
        marker = os.path.join(folder, "%d.%s.%s" % (os.getpid(), operation, cid))
        open(marker, "w").close()
        names = os.listdir(folder)
        inflight = len(names)
        same = sum(1 for n in names if n.endswith(".start-upgrade.%s" % cid))
    if os.environ.get("FAKE_REQUEST_LOG"):
        line = {"operation": operation, "cluster": cid, "params": req.get("params"),
                "sessionLeader": os.getsid(0) == os.getpid(), "tty": has_tty(),
                "inflight": inflight, "startsOfCluster": same}
        with open(os.environ["FAKE_REQUEST_LOG"], "a") as f:
            f.write(json.dumps(line) + "\n")
    if marker:
        time.sleep(float(os.environ.get("FAKE_CALL_SECONDS", "0")))
    return marker


def settle(state, now):
    """Finishes the operations whose time has come, changing their clusters."""
    failing = set(filter(None, os.environ.get("FAKE_FAIL_MEMBERS", "").split(",")))
    for op in state["operations"].values():
        if op["state"] == "Running" and op["due"] <= now:
            c = state["clusters"][op["cluster"]]
            if op["cluster"] in failing:
                op["state"] = "Failed"
                op["message"] = "the fake platform failed this upgrade"
            else:
                op["state"] = "Succeeded"
                if op.get("controlPlane"):
                    c["version"] = op["controlPlane"]
                for p in op.get("nodePools", []):
                    for pool in c["nodePools"]:
                        if pool["name"] == p["name"]:
                            pool["nodeImage"] = {"version": p["nodeImage"]["version"]}
            op["finishedAt"] = now


def releases():
    default = {"kubernetesVersions": [{"version": "1.33.2"}, {"version": "1.34.1"},
                                      {"version": "1.35.0", "preview": True}],
               "nodeImages": [{"family": "AKSUbuntu-2204", "version": "AKSUbuntu-2204-202611.01.0"},
                              {"family": "AKSUbuntu-2204", "version": "AKSUbuntu-2204-202612.01.0"}],
               "ttlSeconds": 3600}
    return json.loads(os.environ.get("FAKE_RELEASES", "null")) or default


def check(cid, cluster, busy, params):
    """The `check` operation's verdict on one cluster."""
    if cluster.get("powerState", "Running") == "Stopped":
        return {"verdict": "Fail", "message": cid + ": the cluster is stopped"}
    if busy:
        return {"verdict": "Fail", "message": cid + ": an upgrade is running"}
    target = params.get("upgrade", {}).get("controlPlane", {}).get("version")
    if params.get("purpose") == "preflight" and target:
        offered = [v["version"] for v in releases()["kubernetesVersions"]]
        if target not in offered:
            return {"verdict": "Fail",
                    "message": "%s: Kubernetes %s is not available in %s"
                    % (cid, target, cluster["region"])}
    verdict = cluster.get("health", "Pass")
    return {"verdict": verdict,
            "message": cluster.get("healthMessage", "%s: %s" % (cid, verdict.lower())),
            "values": [{"labels": 'cluster="%s"' % cid, "value": cluster["version"]}]}


def main():
    operation = sys.argv[-1]
    req = json.load(sys.stdin)
    if req.get("apiVersion") != API or req.get("operation") != operation:
        print("request does not match the operation argument", file=sys.stderr)
        sys.exit(2)
    marker = observe(req, operation)
    try:
        serve(req, operation)
    finally:
        if marker:
            os.remove(marker)


def serve(req, operation):
    if os.environ.get("FAKE_ENV_LOG"):
        with open(os.environ["FAKE_ENV_LOG"], "a") as f:
            f.write(json.dumps(dict(os.environ)) + "\n")
    if operation == "capabilities":
        caps = {"provider": {"name": "fake-cluster", "version": "1.0.0"},
                "apiVersions": [API],
                "operations": ["capabilities", "describe", "list-releases",
                               "start-upgrade", "get-operation", "check"],
                "upgradeTypes": ["Full", "ControlPlaneOnly", "NodeImageOnly"],
                "features": ["node-image-pinning"], "maxConcurrency": 100}
        for k, v in json.loads(os.environ.get("FAKE_CAPABILITIES", "{}")).items():
            if v is None:
                caps.pop(k, None)
            else:
                caps[k] = v
        respond(req, caps)
    if operation == "list-releases":
        respond(req, releases())
    path = os.environ["FAKE_CLUSTER_STATE"]
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        state = json.loads(text) if text.strip() else {}
        state.setdefault("clusters", {})
        state.setdefault("operations", {})
        now = time.time()
        settle(state, now)
        cid = req.get("cluster", {}).get("id")
        cluster = state["clusters"].get(cid)
        if cluster is None:
            cluster = {"region": req["cluster"].get("region") or "eastus", "version": "1.33.2",
                       "nodePools": [{"name": "system", "os": "Linux",
                                      "nodeImage": {"version": "AKSUbuntu-2204-202611.01.0"}}]}
            state["clusters"][cid] = cluster
        params = req.get("params", {})
        busy = any(o["state"] == "Running" and o["cluster"] == cid
                   for o in state["operations"].values())
        if operation == "describe":
            result = {"controlPlane": {"version": cluster["version"]},
                      "nodePools": cluster["nodePools"], "region": cluster["region"],
                      "powerState": cluster.get("powerState", "Running"), "busy": busy}
            for key in ("maintenance", "labels"):
                if key in cluster:
                    result[key] = cluster[key]
        elif operation == "start-upgrade":
            key = params["idempotencyKey"]
            op = state["operations"].get(key)
            if op is None:
                unavailable = os.environ.get("FAKE_START_UNAVAILABLE")
                if unavailable and os.path.exists(unavailable):
                    with open(unavailable) as u:
                        names = set(filter(None, u.read().strip().split(",")))
                    if not names or cid in names:
                        respond(req, error={"code": "Unavailable", "retryable": True,
                                            "message": cid + ": the platform is down for maintenance",
                                            "retryAfterSeconds": 1})
                if busy:
                    fail(req, "OperationInProgress", cid + ": another upgrade is running", True)
                if count(state, "preconditionFailures") < int(
                        os.environ.get("FAKE_PRECONDITION_FAILURES", "0")):
                    save(f, state)
                    fail(req, "PreconditionFailed", cid + ": the cluster changed since it was described")
                crash_start = os.environ.get("FAKE_CRASH_START")
                if crash_start == "before" and count(state, "crashes") == 0:
                    save(f, state)
                    crash()
                at_target = (params.get("controlPlane", {}).get("version", cluster["version"])
                             == cluster["version"]) and all(
                    any(p["name"] == q["name"] and p["nodeImage"] == q["nodeImage"]
                        for p in cluster["nodePools"]) for q in params.get("nodePools", []))
                op = {"operationId": "op-%d" % (len(state["operations"]) + 1), "key": key,
                      "cluster": cid, "startedAt": now,
                      "due": now + float(os.environ.get("FAKE_UPGRADE_SECONDS", "0.5")),
                      "state": "Succeeded" if at_target else "Running",
                      "alreadyAtTarget": at_target,
                      "controlPlane": params.get("controlPlane", {}).get("version"),
                      "nodePools": params.get("nodePools", [])}
                state["operations"][key] = op
                if crash_start == "after" and count(state, "crashes") == 0:
                    save(f, state)
                    crash()
            result = {"operationId": op["operationId"], "state": op["state"],
                      "alreadyAtTarget": op["alreadyAtTarget"], "pollAfterSeconds": 1}
        elif operation == "check":
            result = check(cid, cluster, busy, params)
        elif operation == "get-operation":
            codes = list(filter(None, os.environ.get("FAKE_GET_OPERATION_ERRORS", "").split(",")))
            n = count(state, "getOperationCalls")
            if n < len(codes):
                save(f, state)
                fail(req, codes[n], "injected failure %d of get-operation" % (n + 1), True)
            op = state["operations"].get(params.get("idempotencyKey"))
            if op is not None and "operationId" in params and params["operationId"] != op["operationId"]:
                op = None
            if op is None or os.environ.get("FAKE_FORGET_OPERATIONS"):
                save(f, state)
                fail(req, "NotFound", "no operation %r under key %r"
                     % (params.get("operationId"), params.get("idempotencyKey")))
            result = {"operationId": op["operationId"], "state": op["state"],
                      "message": op.get("message", ""), "startedAt": op["startedAt"],
                      "pollAfterSeconds": 1}
        else:
            print("unsupported operation " + operation, file=sys.stderr)
            sys.exit(3)
        save(f, state)
    respond(req, result)


main()
