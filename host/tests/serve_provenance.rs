//! What the daemon tells about who holds and who ran what, against the real binary: a member
//! under upgrade shows the run that holds its lease; a run records the hash of every engine
//! module that executed it — the one built in, then another given with `--plugin` after a
//! restart mid-run.

mod http_support;
mod process_support;
mod runtime_support;

use process_support::Life;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::{Duration, Instant};

fn fleet_file(dir: &Path) -> std::path::PathBuf {
    let members: Vec<Value> = (1..=4)
        .map(|i| {
            json!({
                "name": format!("m{i}"),
                "group": "all",
                "region": "eastus",
                "kubernetesVersion": "1.33.2",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
                // Ten seconds of real time at scale 60, one at a time: the run outlives the
                // first life, and the second sees a member finish soon.
                "behavior": {"upgradeMinutes": 10},
            })
        })
        .collect();
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "seed": 3,
        "members": members,
        "releases": {
            "kubernetes": [{"version": "1.34.1", "available": since}],
            "nodeImages": [{"version": "AKSUbuntu-2204-202612.01.0", "available": since}],
        },
    });
    let path = dir.join("fleet.json");
    std::fs::write(&path, file.to_string()).unwrap();
    path
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn modules(life: &Life) -> Vec<String> {
    let r = life.api.get("/updateRuns/r1", None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["properties"]["engineModules"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|e| e["sha256"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_run_records_each_engine_module_that_executed_it_and_members_show_the_run_holding_them() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_file(dir.path());
    let data = dir.path().join("data");
    let args = [
        "--time-scale",
        "60",
        "--data-dir",
        data.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
    ];
    let life = Life::start(&args, &[], &dir.path().join("life-1.log"));
    assert!(life.ready(60));
    let strategy = json!({"properties": {"strategy": {"stages": [
        {"name": "all", "groups": [{"name": "all", "maxConcurrency": "1"}]},
    ]}}});
    let r = life.api.call(
        "PUT",
        "/updateStrategies/s",
        None,
        &[],
        Some(&strategy.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/s",
        "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"}},
    }});
    let r = life
        .api
        .call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(
        modules(&life).is_empty(),
        "a run not started was executed by nothing yet"
    );
    let r = life
        .api
        .call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);

    // The first life runs the built-in module.
    let first = modules(&life);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].len(), 64);
    // The member being upgraded is held by the run; the others are not held by anything else.
    let members = life.api.get("/members", None).body;
    let held: Vec<(&str, &str)> = members["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| {
            let h = m["properties"]["status"]["leaseHolder"].as_str()?;
            Some((m["name"].as_str().unwrap(), h))
        })
        .collect();
    assert!(
        !held.is_empty(),
        "a member under upgrade is held: {members}"
    );
    assert!(held.iter().all(|(_, run)| *run == "r1"), "{held:?}");
    let (name, _) = held[0];
    let one = life.api.get(&format!("/members/{name}"), None);
    assert_eq!(one.body["properties"]["status"]["leaseHolder"], "r1");
    assert!(life.stop(), "SIGTERM stops it cleanly");

    // The second life runs another module: the run records it beside the first.
    let plugin = runtime_support::plugin_wasm();
    let other = hex(&std::fs::read(&plugin).unwrap());
    assert_ne!(
        other, first[0],
        "the release plugin is not the embedded build"
    );
    let mut args2: Vec<&str> = args.to_vec();
    args2.extend(["--plugin", plugin.to_str().unwrap()]);
    let life = Life::start(&args2, &[], &dir.path().join("life-2.log"));
    assert!(life.ready(60));
    let end = Instant::now() + Duration::from_secs(60);
    let both = loop {
        let m = modules(&life);
        if m.len() == 2 || Instant::now() > end {
            break m;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        both,
        vec![first[0].clone(), other],
        "in the order they first ran it"
    );
    assert!(life.stop());
}
