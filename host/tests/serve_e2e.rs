//! End to end against the real binary: `waverun serve` with the shipped example fleet
//! (`host/examples/fleet-rollout.yaml`: windows, a scheduled gate, an approval, a flaky cluster,
//! a release that reaches regions on different days, a cluster two minors behind) on the
//! simulated provider. Over HTTP the test registers the members, creates the strategy and the
//! run, starts it and approves the gate once it is pending and the fleet clock has reached the
//! example's own approval time (alice's, 09:00 on the 9th). The run's final status tree is what
//! `waverun simulate` gives for the same fleet, strategy and actions, the approval at the
//! instant the daemon recorded it: the same states, the same failure counts, the same order of
//! member starts.
//!
//! Not as soon as the gate is pending: at 20,000× a fleet minute is 3 ms, and whether all three
//! European members start inside the window open then (it closes at 03:00, an hour after the
//! gate is created) or the last waits for the next one turned on a few dozen milliseconds of the
//! daemon's and the test's latency — on a loaded machine the order of member starts came out
//! otherwise. Approved at 09:00, they wait for the window that opens at 21:00 (on a timer), and
//! the last starts about half an hour later in a window open until 03:00: hours of fleet time
//! (about a second of real time) to spare.

mod http_support;
mod process_support;
mod runtime_support;

use process_support::Life;
use runtime_support::workspace;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use waverun_core::sim::{simulate, ActionKind};
use waverun_core::time::Timestamp;
use waverun_core::{Fact, State};

const EXAMPLE: &str = "host/examples/fleet-rollout.yaml";

/// Every node's state and failure count, by path (`stage`, `stage/group`, `stage/group/member`).
fn outcome(status: &Value) -> BTreeMap<String, (String, u64)> {
    let mut out = BTreeMap::new();
    let node = |v: &Value| {
        (
            v["status"]["state"].as_str().unwrap().to_string(),
            v["failureCount"].as_u64().unwrap_or(0),
        )
    };
    out.insert("run".to_string(), node(status));
    for st in status["stages"].as_array().unwrap() {
        let s = st["name"].as_str().unwrap();
        out.insert(s.to_string(), node(st));
        for g in st["groups"].as_array().unwrap() {
            let gp = format!("{s}/{}", g["name"].as_str().unwrap());
            out.insert(gp.clone(), node(g));
            for m in g["members"].as_array().unwrap() {
                out.insert(format!("{gp}/{}", m["name"].as_str().unwrap()), node(m));
            }
        }
    }
    out
}

#[test]
fn the_example_rollout_over_http_ends_as_waverun_simulate_says() {
    let dir = tempfile::tempdir().unwrap();
    let example = workspace().join(EXAMPLE);
    let mut scenario = waverun_host::load_scenario(&example).unwrap();
    let data = dir.path().join("data");
    let args = |scale: &'static str| {
        vec![
            "--data-dir".to_string(),
            data.to_string_lossy().into_owned(),
            "--fleet".to_string(),
            example.to_string_lossy().into_owned(),
            "--time-scale".to_string(),
            scale.to_string(),
        ]
    };
    // Set up with the fleet clock at real speed (so the run starts at the fleet's start)...
    let a = args("1");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let life = Life::start(&a, &[], &dir.path().join("setup.log"));
    assert!(life.ready(60));
    let api = &life.api;
    for m in &scenario.members {
        let body = json!({"properties": {"group": m.group, "labels": m.labels}});
        let r = api.call(
            "PUT",
            &format!("/members/{}", m.name),
            None,
            &[],
            Some(&body.to_string()),
        );
        assert_eq!(r.status, 200, "{}: {}", m.name, r.body);
    }
    let strategy = json!({"properties": {"strategy": scenario.strategy}});
    let r = api.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[],
        Some(&strategy.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let run_name = scenario.run_name().unwrap().to_string();
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/rollout",
        "managedClusterUpdate": scenario.run.as_ref().unwrap().managed_cluster_update,
    }});
    let run_path = format!("/updateRuns/{run_name}");
    let r = api.call("PUT", &run_path, None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api.call("POST", &format!("{run_path}/start"), None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(life.stop());

    // ... then let fleet time run 20,000 times faster from where it got to.
    let a = args("20000");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let life = Life::start(&a, &[], &dir.path().join("run.log"));
    assert!(life.ready(60));
    let api = &life.api;
    // The example's approval time: the canary stage is long done and the European windows
    // closed (they open at 21:00).
    let approve_at = scenario
        .actions
        .iter()
        .find(|a| a.kind == ActionKind::Approve)
        .expect("the example approves the canary gate")
        .at;
    let end = Instant::now() + Duration::from_secs(240);
    let mut approved = 0;
    let status = loop {
        let gates = api.get("/gates?$filter=state%20eq%20Pending", None).body;
        for g in gates["value"].as_array().cloned().unwrap_or_default() {
            if g["properties"]["gateType"] == "Approval" && fleet_time(api) >= approve_at {
                let id = g["name"].as_str().unwrap();
                let r = api.call("POST", &format!("/gates/{id}/approve"), None, &[], None);
                assert_eq!(r.status, 200, "{}", r.body);
                approved += 1;
            }
        }
        let s = api.get(&run_path, None).body["properties"]["status"].clone();
        let state = s["status"]["state"].as_str().unwrap_or("").to_string();
        if ["Completed", "Failed", "Stopped", "Skipped"].contains(&state.as_str()) {
            break s;
        }
        assert!(
            Instant::now() < end,
            "the run did not end: {}",
            serde_json::to_string(&outcome(&s)).unwrap()
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    assert_eq!(approved, 1);
    // The member starts, in order, and when the approval took effect, from the event log.
    let mut starts = Vec::new();
    let mut approved_at = None;
    let mut after = 0;
    loop {
        let page = api
            .get(&format!("/events?after={after}&$top=1000"), None)
            .body;
        let items = page["value"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            break;
        }
        for e in items {
            after = e["seq"].as_u64().unwrap();
            if e["kind"] == "MemberStarted" {
                starts.push(e["member"].as_str().unwrap().to_string());
            }
            if e["kind"] == "GateCompleted" && e["gateType"] == "Approval" {
                approved_at = Some(timestamp(&e["at"]));
            }
        }
    }
    assert!(life.stop(), "SIGTERM stops it cleanly");

    // What `waverun simulate` says for the same fleet, strategy and run, the run started at the
    // fleet's start and the gate approved when the daemon recorded the approval.
    let approved_at = approved_at.expect("the approval is in the event log");
    assert!(approved_at >= approve_at, "approved at {approved_at}");
    scenario.auto_approve = false;
    scenario
        .actions
        .retain(|a| matches!(a.kind, ActionKind::Start | ActionKind::Approve));
    for a in &mut scenario.actions {
        a.at = match a.kind {
            ActionKind::Approve => approved_at,
            _ => scenario.start,
        };
    }
    let report = simulate(&scenario).unwrap();
    assert_eq!(report.summary.state, status_state(&status));
    let expected = serde_json::to_value(&report.run.as_ref().unwrap().status).unwrap();
    assert_eq!(outcome(&status), outcome(&expected));
    let simulated_starts: Vec<String> = report
        .timeline
        .iter()
        .filter_map(|e| match &e.fact {
            Fact::MemberStarted { member, .. } => Some(member.clone()),
            _ => None,
        })
        .collect();
    assert!(!simulated_starts.is_empty());
    assert_eq!(starts, simulated_starts, "the order of member starts");
}

/// The daemon's fleet clock now.
fn fleet_time(api: &http_support::Client) -> Timestamp {
    let r = api.get("", None);
    assert_eq!(r.status, 200, "{}", r.body);
    timestamp(&r.body["properties"]["fleetTime"])
}

fn timestamp(v: &Value) -> Timestamp {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

fn status_state(status: &Value) -> State {
    serde_json::from_value(status["status"]["state"].clone()).unwrap()
}
