//! The daemon driving clusters through the exec provider, end to end: real child processes
//! (`tests/exec/fake-cluster.py`) behind a real HTTP server on loopback, with a real data
//! directory. Members come from config and from `PUT /members`, releases from `list-releases`;
//! a run upgrades every member exactly once and the fake platform ends at the target. Stopped
//! clusters meet each pre-flight policy: one fails its member, one is skipped, one waits until
//! the platform says it runs again.

mod http_support;
mod runtime_support;

use http_support::{eventually, member, Client};
use runtime_support::{shared_cache, workspace};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use waverun_host::daemon::MemberBinding;
use waverun_host::serve::{ModuleSource, ServeConfig, Server};

/// The config file: the fake platform as an exec provider, and three members bound to it.
fn config_yaml(dir: &std::path::Path) -> String {
    config_yaml_with(dir, "", 1)
}

/// [`config_yaml`] with more of the fake platform's environment (`env`: YAML lines at the
/// provider's `env` indentation) and another observation interval.
fn config_yaml_with(dir: &std::path::Path, env: &str, observe_seconds: u64) -> String {
    config_yaml_of(
        dir,
        env,
        observe_seconds,
        &[("a", "canary"), ("b", "canary"), ("c", "rest")],
    )
}

/// [`config_yaml_with`] with other members: `(name, group)`.
fn config_yaml_of(
    dir: &std::path::Path,
    env: &str,
    observe_seconds: u64,
    members: &[(&str, &str)],
) -> String {
    let members: Vec<MemberBinding> = members.iter().map(|(n, g)| binding(n, g)).collect();
    format!(
        r#"
providers:
  fake:
    type: exec
    command: ["{script}"]
    env:
      FAKE_CLUSTER_STATE: "{state}"
      FAKE_UPGRADE_SECONDS: "0.2"
{env}    timeouts: {{ startUpgrade: 20, describe: 20, getOperation: 20 }}
members: {members}
observeIntervalSeconds: {observe_seconds}
"#,
        script = workspace().join("tests/exec/fake-cluster.py").display(),
        state = dir.join("clusters.json").display(),
        members = serde_json::to_string(&members).unwrap(),
    )
}

fn binding(name: &str, group: &str) -> MemberBinding {
    MemberBinding {
        name: name.to_string(),
        provider: "fake".to_string(),
        cluster_ref: Some(json!({"project": "p1", "cluster": name})),
        cluster_resource_id: None,
        group: Some(group.to_string()),
        labels: waverun_core::Labels::from([("env".to_string(), "test".to_string())]),
        long_term_support: false,
    }
}

#[test]
fn a_run_upgrades_exec_members_once_each_and_the_platform_ends_at_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("waverun.yaml");
    std::fs::write(&config_file, config_yaml(dir.path())).unwrap();
    let mut config = ServeConfig::resolve(Some(&config_file), Default::default()).unwrap();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = dir.path().join("data");
    config.module_cache = Some(shared_cache());
    let server = Server::start(&config, &ModuleSource::Embedded).expect("the daemon starts");
    let api = Client::new(&format!("http://{}/api/v1/fleets/default", server.addr()));

    // The configured members are registered as the provider describes them.
    let members = eventually(30, "the configured members", || {
        let v = api.get("/members", None).body["value"].clone();
        (v.as_array()?.len() == 3).then_some(v)
    });
    assert_eq!(members[0]["properties"]["provider"], "fake");
    assert_eq!(
        members[0]["properties"]["status"]["kubernetesVersion"],
        "1.33.2"
    );

    // One more through the API; one naming a provider that does not exist is refused.
    let put = api.call(
        "PUT",
        "/members/d",
        None,
        &[],
        Some(
            &json!({"properties": {"provider": "fake", "clusterRef": {"cluster": "d"}, "group": "rest"}})
                .to_string(),
        ),
    );
    assert_eq!(put.status, 201, "{}", put.body);
    assert_eq!(put.body["properties"]["status"]["region"], "eastus");
    let bad = api.call(
        "PUT",
        "/members/e",
        None,
        &[],
        Some(&json!({"properties": {"provider": "nope"}}).to_string()),
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(bad.body["target"], "properties.provider");

    let strategy = json!({"properties": {"strategy": {"stages": [
        {"name": "canary", "groups": [{"name": "canary"}]},
        {"name": "rest", "groups": [{"name": "rest"}]},
    ]}}});
    let r = api.call(
        "PUT",
        "/updateStrategies/two",
        None,
        &[],
        Some(&strategy.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/two",
        "managedClusterUpdate": {
            "upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
            "nodeImageSelection": {"type": "Latest"},
        },
    }});
    create_and_start(&api, &run);
    let done = eventually(90, "the run to end", || {
        let s = api.get("/updateRuns/r1", None).body["properties"]["status"].clone();
        let state = s["status"]["state"].as_str()?.to_string();
        matches!(
            state.as_str(),
            "Completed" | "Failed" | "Stopped" | "Skipped"
        )
        .then_some(s)
    });
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");

    // The fake platform: one operation per member, every cluster at the target.
    let state = platform(dir.path());
    let mut per_cluster: BTreeMap<String, u32> = BTreeMap::new();
    for op in state["operations"].as_object().unwrap().values() {
        *per_cluster
            .entry(op["cluster"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(
        per_cluster,
        BTreeMap::from([
            ("a".to_string(), 1),
            ("b".to_string(), 1),
            ("c".to_string(), 1),
            ("d".to_string(), 1)
        ])
    );
    for c in ["a", "b", "c", "d"] {
        assert_eq!(state["clusters"][c]["version"], "1.34.1", "{c}");
        assert_eq!(
            state["clusters"][c]["nodePools"][0]["nodeImage"]["version"],
            "AKSUbuntu-2204-202612.01.0",
            "{c}"
        );
    }
    // The observer describes members again: their status follows the platform.
    eventually(30, "the members' status to show the new version", || {
        let v = api.get("/members/a", None).body;
        (v["properties"]["status"]["kubernetesVersion"] == "1.34.1").then_some(())
    });
    // A window the platform reports later reaches the member (and the engine) at the next
    // observation.
    let window = json!({"kubernetes": {"schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Saturday"}},
                                       "durationHours": 6, "startTime": "02:00"}});
    edit_platform(dir.path(), |state| {
        state["clusters"]["a"]["maintenance"] = window.clone();
    });
    eventually(30, "the member's window to be observed", || {
        let v = api.get("/members/a", None).body;
        (v["properties"]["status"]["maintenance"] == window).then_some(())
    });
    server.shutdown().unwrap();
}

#[test]
fn a_member_its_provider_refuses_for_now_waits_on_the_provider_in_the_run_status() {
    let dir = tempfile::tempdir().unwrap();
    // While this file exists, the platform refuses to start b's upgrade: Unavailable.
    let down = dir.path().join("down");
    std::fs::write(&down, "b").unwrap();
    let env = format!("      FAKE_START_UNAVAILABLE: \"{}\"\n", down.display());
    let config_file = dir.path().join("waverun.yaml");
    // Observed rarely: no observation moves the engine while b's calls are refused (the run's
    // status must not be a cached one from before the refusals).
    std::fs::write(&config_file, config_yaml_with(dir.path(), &env, 3600)).unwrap();
    let mut config = ServeConfig::resolve(Some(&config_file), Default::default()).unwrap();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = dir.path().join("data");
    config.module_cache = Some(shared_cache());
    let server = Server::start(&config, &ModuleSource::Embedded).expect("the daemon starts");
    let api = Client::new(&format!("http://{}/api/v1/fleets/default", server.addr()));
    eventually(30, "the configured members", || {
        let v = api.get("/members", None).body["value"].clone();
        (v.as_array()?.len() == 3).then_some(())
    });

    let run = json!({"properties": {
        "strategy": {"stages": [{"name": "all", "groups": [{"name": "canary"}, {"name": "rest"}]}]},
        "managedClusterUpdate": {
            "upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
            "nodeImageSelection": {"type": "Latest"},
        },
    }});
    create_and_start(&api, &run);

    // b runs, and says what it waits on: the provider's answer, and when it is asked again.
    let status = eventually(60, "b to wait on its provider", || {
        let s = api.get("/updateRuns/r1", None).body["properties"]["status"].clone();
        (member(&s, "b")["waitingOn"]["reason"] == "Provider").then_some(s)
    });
    let b = member(&status, "b");
    assert_eq!(b["status"]["state"], "Running", "{b:#}");
    let message = b["waitingOn"]["message"].as_str().unwrap();
    // The provider's code and (redacted) message, as the exec provider gives them: its name
    // and the call first.
    assert!(
        message.starts_with(
            "Unavailable: fake: start-upgrade: b: the platform is down for maintenance"
        ),
        "{message}"
    );
    assert!(b["waitingOn"]["until"].is_string(), "{b:#}");
    assert!(
        member(&status, "a").get("waitingOn").is_none(),
        "{status:#}"
    );
    // Each refusal is seen as it comes, without a step of the engine between them.
    let again = eventually(30, "b's refusals to be counted", || {
        let s = api.get("/updateRuns/r1", None).body["properties"]["status"].clone();
        let m = member(&s, "b")["waitingOn"]["message"]
            .as_str()?
            .to_string();
        m.contains("refusals in a row since").then_some(s)
    });
    // The CLI's tree says it.
    let properties = json!({"managedClusterUpdate": run["properties"]["managedClusterUpdate"]});
    let parsed: waverun_core::RunStatus = serde_json::from_value(again.clone()).unwrap();
    let tree = waverun_host::cli::tree::render(&waverun_host::cli::tree::RunView {
        name: "r1",
        run: &properties,
        status: &parsed,
        now: None,
        approve: &|id: &str| id.to_string(),
        expected_finish: None,
        compact: false,
    });
    let line = tree
        .lines()
        .find(|l| l.contains(" b "))
        .unwrap_or_else(|| panic!("{tree}"));
    assert!(
        line.contains("waiting on: Provider until ")
            && line.contains(
                "Unavailable: fake: start-upgrade: b: the platform is down for maintenance"
            ),
        "{tree}"
    );

    // The platform is back: b is upgraded, and waits on nothing any more.
    std::fs::remove_file(&down).unwrap();
    let done = eventually(90, "the run to end", || {
        let s = api.get("/updateRuns/r1", None).body["properties"]["status"].clone();
        let state = s["status"]["state"].as_str()?.to_string();
        matches!(state.as_str(), "Completed" | "Failed" | "Stopped").then_some(s)
    });
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");
    let b = member(&done, "b");
    assert_eq!(b["status"]["state"], "Completed", "{b:#}");
    assert!(b.get("waitingOn").is_none(), "{b:#}");
    server.shutdown().unwrap();
}

/// Creates run `r1` from `run` and starts it.
fn create_and_start(api: &Client, run: &Value) {
    let r = api.call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Starts a daemon over the fake platform with `members`, its clusters as `clusters.json`
/// already says; waits until every member is known.
fn daemon_of(dir: &std::path::Path, members: &[(&str, &str)]) -> (Server, Client) {
    let config_file = dir.join("waverun.yaml");
    std::fs::write(&config_file, config_yaml_of(dir, "", 1, members)).unwrap();
    let mut config = ServeConfig::resolve(Some(&config_file), Default::default()).unwrap();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = dir.join("data");
    config.module_cache = Some(shared_cache());
    let server = Server::start(&config, &ModuleSource::Embedded).expect("the daemon starts");
    let api = Client::new(&format!("http://{}/api/v1/fleets/default", server.addr()));
    eventually(30, "the configured members", || {
        let v = api.get("/members", None).body["value"].clone();
        (v.as_array()?.len() == members.len()).then_some(())
    });
    (server, api)
}

/// The fake platform's state file, read under the lock it takes (it truncates, then writes).
fn platform(dir: &std::path::Path) -> Value {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut f = std::fs::File::open(dir.join("clusters.json")).unwrap();
    // SAFETY: flock(2) on a descriptor this function owns; released when `f` closes.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH) }, 0);
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Changes the fake platform's state file under the lock it takes (flock), so that neither
/// side loses the other's change (it rewrites the file on every call).
fn edit_platform(dir: &std::path::Path, change: impl FnOnce(&mut Value)) {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("clusters.json"))
        .unwrap();
    // SAFETY: flock(2) on a descriptor this function owns; released when `f` closes.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    let mut v: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"clusters": {}, "operations": {}}));
    change(&mut v);
    f.set_len(0).unwrap();
    f.rewind().unwrap();
    f.write_all(v.to_string().as_bytes()).unwrap();
}

/// Sets a cluster's `powerState` on the fake platform.
fn power(dir: &std::path::Path, cluster: &str, state: &str) {
    edit_platform(dir, |v| {
        v["clusters"][cluster] = json!({
            "region": "eastus", "version": "1.33.2", "powerState": state,
            "nodePools": [{"name": "system", "os": "Linux",
                           "nodeImage": {"version": "AKSUbuntu-2204-202611.01.0"}}],
        });
    });
}

#[test]
fn stopped_clusters_fail_are_skipped_or_wait_by_their_groups_preflight_policy() {
    let dir = tempfile::tempdir().unwrap();
    for (cluster, state) in [
        ("f1", "Stopped"),
        ("f2", "Running"),
        ("s1", "Stopped"),
        ("s2", "Running"),
        ("w1", "Stopped"),
    ] {
        power(dir.path(), cluster, state);
    }
    let (server, api) = daemon_of(
        dir.path(),
        &[
            ("f1", "strict"),
            ("f2", "strict"),
            ("s1", "lenient"),
            ("s2", "lenient"),
            ("w1", "patient"),
        ],
    );
    let run = json!({"properties": {
        "strategy": {"stages": [{"name": "all", "maxAllowedFailures": "1", "groups": [
            {"name": "strict", "maxAllowedFailures": "1", "onPreflightFailure": "Fail"},
            {"name": "lenient", "onPreflightFailure": "Skip"},
            {"name": "patient", "onPreflightFailure": "Wait",
             "preflight": {"retryIntervalSeconds": 1, "maxWaitSeconds": 600}},
        ]}]},
        "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.34.1"}},
    }});
    create_and_start(&api, &run);

    // w1 waits on its pre-flight, saying why and until when, while the others are decided.
    let s = eventually(
        60,
        "w1 to wait on its pre-flight and the others to end",
        || {
            let s = api.get("/updateRuns/r1", None).body["properties"]["status"].clone();
            let ended = ["f1", "f2", "s1", "s2"].iter().all(|m| {
                matches!(
                    member(&s, m)["status"]["state"].as_str(),
                    Some("Completed" | "Failed" | "Skipped")
                )
            });
            (ended && member(&s, "w1")["waitingOn"]["reason"] == "Preflight").then_some(s)
        },
    );
    let f1 = member(&s, "f1");
    assert_eq!(f1["status"]["state"], "Failed", "{f1:#}");
    assert_eq!(f1["status"]["error"]["code"], "PreflightFailed", "{f1:#}");
    assert!(
        f1["status"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("f1: the cluster is stopped"),
        "{f1:#}"
    );
    let s1 = member(&s, "s1");
    assert_eq!(s1["status"]["state"], "Skipped", "{s1:#}");
    assert!(
        s1["message"]
            .as_str()
            .unwrap()
            .contains("s1: the cluster is stopped"),
        "{s1:#}"
    );
    for m in ["f2", "s2"] {
        assert_eq!(member(&s, m)["status"]["state"], "Completed", "{m}");
    }
    let w1 = member(&s, "w1");
    assert_eq!(w1["status"]["state"], "Pending", "{w1:#}");
    assert!(w1["waitingOn"]["until"].is_string(), "{w1:#}");
    assert!(
        w1["waitingOn"]["message"]
            .as_str()
            .unwrap()
            .contains("w1: the cluster is stopped"),
        "{w1:#}"
    );
    // Neither the failed nor the skipped cluster was ever asked to upgrade.
    let state = platform(dir.path());
    let started: Vec<&str> = state["operations"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["cluster"].as_str().unwrap())
        .collect();
    assert!(
        !started.contains(&"f1") && !started.contains(&"s1") && !started.contains(&"w1"),
        "{started:?}"
    );

    // The platform runs w1 again: its next pre-flight passes and it is upgraded.
    power(dir.path(), "w1", "Running");
    let done = eventually(90, "the run to end", || {
        let s = api.get("/updateRuns/r1", None).body["properties"]["status"].clone();
        let state = s["status"]["state"].as_str()?.to_string();
        matches!(state.as_str(), "Completed" | "Failed" | "Stopped").then_some(s)
    });
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");
    assert_eq!(member(&done, "w1")["status"]["state"], "Completed");
    assert_eq!(member(&done, "f1")["status"]["state"], "Failed");
    assert_eq!(member(&done, "s1")["status"]["state"], "Skipped");
    server.shutdown().unwrap();
}
