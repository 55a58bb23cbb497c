//! The daemon driving AKS clusters through the `aks` provider, end to end: a real HTTP server on
//! loopback that plays Azure Resource Manager, Microsoft Entra and IMDS as Azure's REST
//! specification describes them (`tests/aks/fake_arm.py`, a child process: Azure itself cannot be
//! reached from here), the daemon with a real data directory, tokens from the client-secret flow.

mod aks_support;
mod http_support;
mod runtime_support;

use aks_support::{
    cluster_id, clusters, config_yaml, seed, FakeArm, NEW_IMAGE, OLD_IMAGE, REGIONS,
};
use http_support::{eventually, member, Client};
use runtime_support::shared_cache;
use serde_json::{json, Value};
use std::path::Path;
use waverun_host::serve::{ModuleSource, ServeConfig, Server};

fn start_daemon(dir: &Path, config_file: &Path) -> (Server, Client) {
    let mut config = ServeConfig::resolve(Some(config_file), Default::default()).unwrap();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = dir.join("data");
    config.module_cache = Some(shared_cache());
    let server = Server::start(&config, &ModuleSource::Embedded).expect("the daemon starts");
    let api = Client::new(&format!("http://{}/api/v1/fleets/default", server.addr()));
    (server, api)
}

/// Each test here runs a daemon and a fake ARM through minutes of real time whose pace is set
/// by fleet-time deadlines and ARM's throttling: side by side on two cores they starve each other
/// past their bounds, so they take turns.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn run_state(api: &Client, run: &str) -> Option<(String, Value)> {
    let s = api.get(&format!("/updateRuns/{run}"), None).body["properties"]["status"].clone();
    Some((s["status"]["state"].as_str()?.to_string(), s))
}

/// Waits at most `secs` seconds for `run` to end; its state and status tree. A run that does
/// not end fails the test with where each of its members was last seen, and the fake's view of
/// its operations, so a slow or stuck member can be told apart from a loaded machine.
fn run_end(api: &Client, fake: &FakeArm, run: &str, secs: u64) -> (String, Value) {
    let started = std::time::Instant::now();
    let mut last = Value::Null;
    loop {
        if let Some((state, s)) = run_state(api, run) {
            if matches!(state.as_str(), "Completed" | "Failed" | "Stopped") {
                return (state, s);
            }
            last = s;
        }
        if started.elapsed() > std::time::Duration::from_secs(secs) {
            let stages = last["stages"].as_array().into_iter().flatten();
            let groups = stages.flat_map(|s| s["groups"].as_array().into_iter().flatten());
            let members: Vec<String> = groups
                .flat_map(|g| g["members"].as_array().into_iter().flatten())
                .map(|m| {
                    format!(
                        "{}: {} {} {}",
                        m["name"], m["status"]["state"], m["waitingOn"], m["message"]
                    )
                })
                .collect();
            let f = fake.state();
            let ops = json!({"now": f["now"], "operations": f["operations"],
                             "injections": f["injections"]});
            panic!(
                "run {run} did not end within {secs} s; its members:\n{}\nthe fake's operations: {ops:#}\nthe run: {last:#}",
                members.join("\n")
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

#[test]
fn a_three_region_run_upgrades_twelve_aks_clusters_once_each_to_the_consistent_image() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // The new image reaches japaneast 10 s (real) after the fake starts.
    let fake = FakeArm::start(dir.path(), &seed(600), &["--time-scale", "60"]);
    let config_file = config_yaml(dir.path(), &fake);
    let (server, api) = start_daemon(dir.path(), &config_file);

    // Every member, as AKS describes it: version, pools, images, region, both windows.
    let members = eventually(60, "the 12 members", || {
        let v = api.get("/members?$top=100", None).body["value"].clone();
        (v.as_array()?.len() == 12).then_some(v)
    });
    let first = members
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "aks-eastus-1")
        .unwrap();
    let status = &first["properties"]["status"];
    assert_eq!(status["kubernetesVersion"], "1.33.2", "{first:#}");
    assert_eq!(status["region"], "eastus");
    assert_eq!(
        status["nodePools"][0]["imageVersion"], OLD_IMAGE,
        "{first:#}"
    );
    assert!(
        status["maintenance"]["kubernetes"].is_object()
            && status["maintenance"]["nodeOS"].is_object(),
        "both AKS-managed schedules become the member's windows: {first:#}"
    );
    assert_eq!(
        first["properties"]["clusterResourceId"],
        cluster_id("aks-eastus-1")
    );

    // The releases per region come from AKS's catalogues; the new image reaches japaneast last.
    for region in REGIONS {
        eventually(60, "the new image in every region's catalog", || {
            let r = api.get(&format!("/releases?region={region}"), None).body;
            r["nodeImages"]
                .to_string()
                .contains(NEW_IMAGE)
                .then_some(())
        });
    }

    let run = json!({"properties": {
        "strategy": {"stages": REGIONS.iter().map(|r| json!({"name": r, "groups": [{"name": r}]})).collect::<Vec<_>>()},
        "managedClusterUpdate": {
            "upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
            "nodeImageSelection": {"type": "Consistent"},
        },
    }});
    let r = api.call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let (state, done) = run_end(&api, &fake, "r1", 240);
    assert_eq!(state, "Completed", "{done:#}");
    assert_eq!(
        done["nodeImageSelection"]["selectedNodeImageVersions"],
        json!([NEW_IMAGE]),
        "{done:#}"
    );

    // AKS: each cluster received exactly one upgrade request per target, and runs it.
    let counts = fake.upgrade_requests();
    assert_eq!(counts.len(), 12, "{counts:#?}");
    for (cluster, targets) in &counts {
        for (target, n) in targets {
            assert_eq!(*n, 1, "{cluster}: {target} requested {n} times");
        }
        assert!(
            targets.contains_key("kubernetesVersion=1.34.1"),
            "{cluster}: {targets:?}"
        );
    }
    let state = fake
        .admin()
        .get(&format!("{}/_fake/state", fake.base), None)
        .body;
    let text = state.to_string();
    assert!(
        !text.contains("\"currentKubernetesVersion\":\"1.33.2\""),
        "{state:#}"
    );

    // The same fleet, strategy and run, simulated by the same engine: where the behaviour is the
    // same (every member upgraded once, in the same stages and groups, to the same versions),
    // the final trees are the same but for times.
    let window = json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 24,
                        "utcOffset": "+00:00", "startTime": "00:00"});
    let members: Vec<Value> = clusters()
        .into_iter()
        .enumerate()
        .map(|(i, (name, region))| {
            let pool = |p: &str| json!({"name": p, "osType": "Linux", "imageVersion": OLD_IMAGE});
            let mut m = json!({"name": name, "group": region, "region": region,
                "kubernetesVersion": "1.33.2", "nodePools": [pool("system"), pool("user")]});
            if i % 2 == 0 {
                m["maintenance"] = json!({"kubernetes": window, "nodeOS": window});
            }
            m
        })
        .collect();
    let start = done["status"]["startTime"].clone();
    let everywhere: serde_json::Map<String, Value> = REGIONS
        .iter()
        .map(|r| (r.to_string(), start.clone()))
        .collect();
    let scenario = json!({
        "start": start,
        "members": members,
        "releases": {
            "kubernetes": [{"version": "1.34.1", "available": everywhere}],
            "nodeImages": [{"version": OLD_IMAGE, "available": everywhere},
                           {"version": NEW_IMAGE, "available": everywhere}],
        },
        "strategy": run["properties"]["strategy"],
        "run": {"name": "r1", "managedClusterUpdate": run["properties"]["managedClusterUpdate"]},
        "actions": [{"at": start, "do": "start"}],
    });
    let r = api.call("POST", "/simulate", None, &[], Some(&scenario.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        timeless(&r.body["run"]["status"]),
        timeless(&done),
        "the daemon's tree against AKS and the simulated one"
    );
    server.shutdown().unwrap();
    drop(fake);
}

/// A status tree without its times (when things happened differs between AKS and a simulation;
/// what happened does not), nor the daemon's Azure ids of members (a simulation has none).
fn timeless(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !k.ends_with("Time") && *k != "until" && *k != "clusterResourceId")
                .map(|(k, v)| (k.clone(), timeless(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(timeless).collect()),
        other => other.clone(),
    }
}

#[test]
fn each_aks_error_class_shows_in_the_tree_as_what_the_user_can_act_on() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeArm::start(
        dir.path(),
        &seed(0),
        // ARM's write bucket smaller than the client's: ARM answers 429 with Retry-After.
        &["--time-scale", "60", "--writes", "3:1"],
    );
    let id = |n: &str| cluster_id(n);
    // eastus-1: AKS runs an operation of its own for 10 s when waverun wants to start;
    // eastus-2: the upgrade fails in AKS; eastus-3: the cluster is Stopped; eastus-4: AKS blocks
    // the minor upgrade (deprecated APIs used); westeurope-1: the operation's status URL stays
    // InProgress while the cluster is done; westeurope-2: the connection is reset after the PUT
    // was applied; westeurope-3: someone else writes the cluster between waverun's GET and PUT
    // (412: read again, sent once more).
    fake.inject(&json!([
        {"kind": "aksOperation", "cluster": id("aks-eastus-1"), "seconds": 600},
        {"kind": "fail", "cluster": id("aks-eastus-2"),
         "error": {"code": "UpgradeFailed", "message": "Drain of node aks-system-0 did not complete: pods with PodDisruptionBudget"}},
        {"kind": "stop", "cluster": id("aks-eastus-3")},
        {"kind": "deprecatedApis", "cluster": id("aks-eastus-4")},
        {"kind": "stuck", "cluster": id("aks-westeurope-1")},
        {"kind": "reset", "cluster": id("aks-westeurope-2"), "method": "PUT"},
        {"kind": "concurrentWrite", "cluster": id("aks-westeurope-3")},
    ]));
    let config_file = config_yaml(dir.path(), &fake);
    let (server, api) = start_daemon(dir.path(), &config_file);
    eventually(60, "the 12 members", || {
        let v = api.get("/members?$top=100", None).body["value"].clone();
        (v.as_array()?.len() == 12).then_some(())
    });
    let names = [
        "aks-eastus-1",
        "aks-eastus-2",
        "aks-eastus-3",
        "aks-eastus-4",
        "aks-westeurope-1",
        "aks-westeurope-2",
        "aks-westeurope-3",
    ];
    let run = json!({"properties": {
        "strategy": {"stages": [{"name": "all", "maxAllowedFailures": "6", "groups": [
            {"name": "eastus", "maxConcurrency": "100%", "maxAllowedFailures": "4"},
            {"name": "westeurope", "maxConcurrency": "100%", "maxAllowedFailures": "4"},
        ]}]},
        "managedClusterUpdate": {
            "upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.34.1"},
        },
    }});
    let r = api.call(
        "PUT",
        "/updateRuns/errors",
        None,
        &[],
        Some(&run.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api.call("POST", "/updateRuns/errors/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    // Every token issued so far expires: the next ARM call gets 401, and a new token.
    fake.inject(&json!({"kind": "expireTokens"}));

    // The busy cluster waits on its provider, saying what runs on it.
    let busy = eventually(60, "eastus-1 to wait on AKS", || {
        let (_, s) = run_state(&api, "errors")?;
        let m = member(&s, "aks-eastus-1").clone();
        (m["waitingOn"]["reason"] == "Provider").then_some(m)
    });
    let why = busy["waitingOn"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("OperationInProgress"), "{busy:#}");

    // About a minute here (the uncertain start is asked about after 30 s, then the fleet-time
    // grace); the bound leaves room for a loaded machine.
    let (_, done) = run_end(&api, &fake, "errors", 420);
    let state_of = |n: &str| {
        member(&done, n)["status"]["state"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let message_of = |n: &str| {
        member(&done, n)["status"]["error"].to_string() + &member(&done, n)["message"].to_string()
    };
    assert_eq!(state_of("aks-eastus-1"), "Completed", "{done:#}");
    assert_eq!(state_of("aks-eastus-2"), "Failed", "{done:#}");
    assert!(
        message_of("aks-eastus-2").contains("UpgradeFailed")
            && message_of("aks-eastus-2").contains("PodDisruptionBudget"),
        "{}",
        message_of("aks-eastus-2")
    );
    assert_eq!(state_of("aks-eastus-3"), "Failed", "{done:#}");
    assert!(
        message_of("aks-eastus-3").contains("Stopped"),
        "{}",
        message_of("aks-eastus-3")
    );
    assert_eq!(state_of("aks-eastus-4"), "Failed", "{done:#}");
    assert!(
        message_of("aks-eastus-4").contains("UpgradeBlockedOnDeprecatedAPIUsage"),
        "{}",
        message_of("aks-eastus-4")
    );
    assert_eq!(state_of("aks-westeurope-1"), "Completed", "{done:#}");
    assert_eq!(state_of("aks-westeurope-2"), "Completed", "{done:#}");
    assert_eq!(state_of("aks-westeurope-3"), "Completed", "{done:#}");
    assert_eq!(state_of("aks-westeurope-4"), "Completed", "{done:#}");

    // Exactly one request per target, the reset one included; none to the stopped cluster.
    let counts = fake.upgrade_requests();
    for n in names {
        let got = counts
            .get(&id(n).to_lowercase())
            .or_else(|| counts.get(&id(n)));
        match n {
            "aks-eastus-3" | "aks-eastus-4" => {
                assert!(got.is_none_or(|t| t.is_empty()), "{n}: {got:?}")
            }
            _ => assert_eq!(
                got.and_then(|t| t.get("kubernetesVersion=1.34.1")),
                Some(&1),
                "{n}: {counts:#?}"
            ),
        }
    }
    // The stopped cluster is reported as such.
    let stopped = api.get("/members/aks-eastus-3", None).body;
    assert_eq!(
        stopped["properties"]["status"]["powerState"], "Stopped",
        "{stopped:#}"
    );
    // What the provider saw of ARM: calls by status, the 429s, the budget ARM says is left.
    let metrics = api
        .get(&format!("http://{}/metrics", server.addr()), None)
        .body;
    let metrics = metrics.as_str().unwrap_or_default();
    for line in [
        "# TYPE waverun_arm_requests counter",
        "waverun_arm_requests_total{provider=\"azure\",method=\"PUT\",code=\"429\"",
        "waverun_arm_throttled_total{provider=\"azure\"}",
        "waverun_arm_ratelimit_remaining{provider=\"azure\",subscription=",
    ] {
        assert!(metrics.contains(line), "{line} not in {metrics}");
    }
    assert!(metrics.ends_with("# EOF\n"));
    // ARM refused writes with 429: the daemon waited and went on.
    let requests = fake
        .admin()
        .get(&format!("{}/_fake/requests", fake.base), None)
        .body;
    let statuses: Vec<u64> = requests["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["status"].as_u64())
        .collect();
    assert!(statuses.contains(&429), "no 429 seen");
    assert!(statuses.contains(&412), "no 412 seen");
    assert!(
        statuses.contains(&401),
        "no 401 seen after the tokens expired"
    );
    server.shutdown().unwrap();
}

#[test]
fn aks_preflight_skips_a_stopped_cluster_waits_out_a_busy_one_and_checks_each_upgrade() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeArm::start(dir.path(), &seed(0), &["--time-scale", "60"]);
    let config_file = config_yaml(dir.path(), &fake);
    let (server, api) = start_daemon(dir.path(), &config_file);
    eventually(60, "the 12 members", || {
        let v = api.get("/members?$top=100", None).body["value"].clone();
        (v.as_array()?.len() == 12).then_some(())
    });
    for region in REGIONS {
        eventually(60, "1.34.1 in every region's catalog", || {
            let r = api.get(&format!("/releases?region={region}"), None).body;
            r["kubernetes"].to_string().contains("1.34.1").then_some(())
        });
    }
    // aks-eastus-1 is stopped; AKS itself runs an operation on aks-westeurope-1 for an hour of
    // fake time (a minute here): long enough that its first pre-flight finds it busy however
    // late a loaded machine gets to it (15 fake minutes were not always).
    fake.inject(&json!([
        {"kind": "stop", "cluster": "aks-eastus-1"},
        {"kind": "aksOperation", "cluster": "aks-westeurope-1", "seconds": 3600},
    ]));
    let run = json!({"properties": {
        "strategy": {
            "healthChecks": [{"name": "aks", "provider": {}, "timeoutSeconds": 20}],
            "stages": [{"name": "all", "maxConcurrency": "12",
                        "afterMemberChecks": {"checks": ["aks"]},
                        "groups": [
                {"name": "eastus", "maxConcurrency": "4", "onPreflightFailure": "Skip"},
                {"name": "westeurope", "maxConcurrency": "4", "onPreflightFailure": "Wait",
                 "preflight": {"retryIntervalSeconds": 1, "maxWaitSeconds": 600}},
                {"name": "japaneast", "maxConcurrency": "4"},
            ]}],
        },
        "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.34.1"}},
    }});
    let r = api.call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);

    // The busy cluster waits on its pre-flight, in AKS's words, until its next attempt.
    let waiting = eventually(
        60,
        "aks-westeurope-1 to wait on its failed pre-flight",
        || {
            let (_, s) = run_state(&api, "r1")?;
            let m = member(&s, "aks-westeurope-1").clone();
            let why = m["waitingOn"]["message"].as_str().unwrap_or_default();
            (m["waitingOn"]["reason"] == "Preflight"
                && why.contains("aks-westeurope-1: another operation is in progress"))
            .then_some(m)
        },
    );
    assert!(waiting["waitingOn"]["until"].is_string(), "{waiting:#}");

    let (state, done) = run_end(&api, &fake, "r1", 420);
    assert_eq!(state, "Completed", "{done:#}");
    // The stopped cluster is skipped, saying why; AKS was never asked to upgrade it.
    let stopped = member(&done, "aks-eastus-1");
    assert_eq!(stopped["status"]["state"], "Skipped", "{stopped:#}");
    assert!(
        stopped["message"]
            .as_str()
            .unwrap()
            .contains("aks-eastus-1 is Stopped (properties.powerState.code)"),
        "{stopped:#}"
    );
    let counts = fake.upgrade_requests();
    assert!(
        !counts.contains_key(&cluster_id("aks-eastus-1")),
        "{counts:#?}"
    );
    // Every other cluster is upgraded once, then found healthy by AKS's own account.
    for (name, _) in clusters().iter().filter(|(n, _)| n != "aks-eastus-1") {
        let m = member(&done, name);
        assert_eq!(m["status"]["state"], "Completed", "{m:#}");
        let checks = m["checks"].as_array().unwrap();
        let check = checks
            .iter()
            .find(|c| c["name"] == "aks")
            .unwrap_or_else(|| panic!("{m:#}"));
        assert_eq!(check["verdict"], "Pass", "{m:#}");
        assert!(
            check["last"]["message"]
                .as_str()
                .is_some_and(|t| t.contains("Succeeded on Kubernetes 1.34.1")),
            "{m:#}"
        );
        assert_eq!(counts[&cluster_id(name)].len(), 1, "{name}: {counts:#?}");
    }
    server.shutdown().unwrap();
}
