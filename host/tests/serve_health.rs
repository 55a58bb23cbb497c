//! Health checks in the real binary: `waverun serve` (the engine in the plugin, ABI v2's
//! `check_submit`) measures a run's checks against an HTTP receiver on loopback written here.
//! A member whose check after its upgrade answers 403 fails with `HealthCheckFailed` while the
//! others complete; a HealthCheck gate whose receiver answers `inconclusive` stays Pending until
//! it is approved over the API, and the run then completes. Killed with SIGKILL while a
//! measurement is in flight (the receiver holds its answer), a restarted daemon submits the
//! measurement again and the run still completes; a measurement submitted again while it is in
//! flight (the guest rebuilt after a trap) is taken once.

mod http_support;
mod process_support;
mod prom_support;
mod runtime_support;

use http_support::{eventually, member, Client};
use process_support::{fleet_file as fleet_file_timed, Life};
use prom_support::{Loopback, Response};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Fleet time runs this many times faster: a 10-minute upgrade takes a second.
const TIME_SCALE: &str = "600";

/// What the receiver answers, by the request's path.
type Answer = fn(&str) -> (u16, &'static str);

/// An HTTP receiver on loopback: answers every request with `answer(path)`, remembers the
/// paths it was asked for, and holds every answer while `hold` is set.
struct Receiver {
    server: Loopback,
    hits: Arc<Mutex<Vec<String>>>,
    hold: Arc<AtomicBool>,
}

impl Receiver {
    fn start(answer: Answer) -> Receiver {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let hold = Arc::new(AtomicBool::new(false));
        let (h, held) = (hits.clone(), hold.clone());
        let server = Loopback::start(move |req| {
            h.lock().unwrap().push(req.target.clone());
            // Held answers wait (bounded: the check's timeout ends it anyway).
            for _ in 0..300 {
                if !held.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let (status, text) = answer(&req.target);
            Response::json(status, text)
        });
        Receiver { server, hits, hold }
    }

    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    fn hits(&self, path: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

/// Member `b` fails its check after the upgrade (403); the others pass; gates are inconclusive.
fn answer(path: &str) -> (u16, &'static str) {
    match path {
        "/after/b" => (403, r#"{"message":"b is unhealthy"}"#),
        p if p.starts_with("/after/") => (200, r#"{"result":"pass"}"#),
        "/gate" => (
            200,
            r#"{"result":"inconclusive","message":"no traffic yet"}"#,
        ),
        _ => (404, "{}"),
    }
}

/// Members `(name, group)` with ten-minute upgrades.
fn fleet_file(dir: &Path, members: &[(&str, &str)]) -> PathBuf {
    let minutes: Vec<(&str, &str, u32)> = members.iter().map(|(n, g)| (*n, *g, 10)).collect();
    fleet_file_timed(dir, &minutes)
}

fn start(dir: &Path, fleet: &Path, life: usize) -> Life {
    start_with(dir, fleet, life, &[])
}

fn start_with(dir: &Path, fleet: &Path, life: usize, env: &[(&str, &str)]) -> Life {
    let data = dir.join("data");
    let args = [
        "--time-scale",
        TIME_SCALE,
        "--data-dir",
        data.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
    ];
    let life = Life::start(&args, env, &dir.join(format!("life-{life}.log")));
    assert!(life.ready(60), "the daemon is not ready");
    life
}

fn create_and_start(api: &Client, strategy: &Value) {
    let r = api.call(
        "PUT",
        "/updateStrategies/checked",
        None,
        &[],
        Some(&json!({"properties": {"strategy": strategy}}).to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/checked",
        "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.34.1"}},
    }});
    let r = api.call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let r = api.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
}

fn status(api: &Client) -> Value {
    api.get("/updateRuns/r1", None).body["properties"]["status"].clone()
}

fn finished(api: &Client) -> Option<Value> {
    let s = status(api);
    let state = s["status"]["state"].as_str()?.to_string();
    matches!(
        state.as_str(),
        "Completed" | "Failed" | "Stopped" | "Skipped"
    )
    .then_some(s)
}

fn log_of(dir: &Path, life: usize) -> String {
    std::fs::read_to_string(dir.join(format!("life-{life}.log"))).unwrap_or_default()
}

#[test]
fn an_unhealthy_member_fails_its_check_and_an_inconclusive_gate_waits_for_approval() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(answer);
    let fleet = fleet_file(
        dir.path(),
        &[("a", "ring"), ("b", "ring"), ("c", "ring"), ("d", "tail")],
    );
    let life = start(dir.path(), &fleet, 0);
    let api = &life.api;
    let strategy = json!({
        "healthChecks": [
            {"name": "smoke", "http": {"url": receiver.url("/after/{{member}}")}, "timeoutSeconds": 5},
            {"name": "slo", "http": {"url": receiver.url("/gate")}, "timeoutSeconds": 5},
        ],
        "stages": [
            {"name": "prod", "maxAllowedFailures": "1",
             "groups": [{"name": "ring", "maxConcurrency": "3", "maxAllowedFailures": "1",
                         "afterMemberChecks": {"soakSeconds": 60, "checks": ["smoke"]}}],
             "afterGates": [{"type": "HealthCheck", "healthCheck": "slo"}]},
            {"name": "last", "groups": [{"name": "tail"}]},
        ],
    });
    create_and_start(api, &strategy);

    // The gate after `prod` is measured, inconclusive, and waits for a person.
    let gate = eventually(60, "the HealthCheck gate to be Pending", || {
        let gates = api.get("/gates?$filter=state%20eq%20Pending", None);
        gates.body["value"]
            .as_array()?
            .iter()
            .find(|g| g["properties"]["gateType"] == "HealthCheck")
            .cloned()
    });
    let s = status(api);
    assert_eq!(member(&s, "a")["status"]["state"], "Completed", "{s:#}");
    assert_eq!(member(&s, "c")["status"]["state"], "Completed", "{s:#}");
    let b = member(&s, "b");
    assert_eq!(b["status"]["state"], "Failed", "{b:#}");
    assert_eq!(b["status"]["error"]["code"], "HealthCheckFailed", "{b:#}");
    assert_eq!(member(&s, "d")["status"]["state"], "NotStarted", "{s:#}");
    for m in ["a", "b", "c"] {
        assert_eq!(receiver.hits(&format!("/after/{m}")), 1, "{m}");
    }
    assert!(receiver.hits("/gate") >= 1);
    // Still pending a while later: inconclusive is not a pass.
    std::thread::sleep(Duration::from_millis(500));
    let id = gate["name"].as_str().unwrap();
    let g = api.get(&format!("/gates/{id}"), None);
    assert_eq!(g.body["properties"]["state"], "Pending", "{}", g.body);

    let r = api.call("POST", &format!("/gates/{id}/approve"), None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let done = eventually(60, "the run to end", || finished(api));
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");
    assert_eq!(member(&done, "d")["status"]["state"], "Completed");
    assert_eq!(member(&done, "b")["status"]["state"], "Failed");
    assert!(life.stop(), "a clean shutdown:\n{}", log_of(dir.path(), 0));
}

#[test]
fn a_measurement_in_flight_at_a_kill_is_submitted_again_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(answer);
    let fleet = fleet_file(dir.path(), &[("a", "ring"), ("c", "ring")]);
    let life = start(dir.path(), &fleet, 0);
    receiver.hold.store(true, Ordering::SeqCst);
    let strategy = json!({
        "healthChecks": [
            {"name": "smoke", "http": {"url": receiver.url("/after/{{member}}")}, "timeoutSeconds": 30},
        ],
        "stages": [
            {"name": "prod",
             "groups": [{"name": "ring", "maxConcurrency": "1",
                         "afterMemberChecks": {"checks": ["smoke"]}}]},
        ],
    });
    create_and_start(&life.api, &strategy);
    // The first member's check reaches the receiver, which holds its answer: kill the daemon.
    eventually(60, "a measurement in flight", || {
        (receiver.hits("/after/a") == 1).then_some(())
    });
    life.kill();
    receiver.hold.store(false, Ordering::SeqCst);

    let life = start(dir.path(), &fleet, 1);
    let api = &life.api;
    let done = eventually(60, "the run to end", || finished(api));
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");
    for m in ["a", "c"] {
        assert_eq!(member(&done, m)["status"]["state"], "Completed", "{m}");
    }
    // Measured again after the restart: the request reached the receiver a second time.
    assert_eq!(
        receiver.hits("/after/a"),
        2,
        "{:?}",
        receiver.hits.lock().unwrap()
    );
    assert_eq!(receiver.hits("/after/c"), 1);
    assert!(life.stop(), "a clean shutdown:\n{}", log_of(dir.path(), 1));
}

#[test]
fn provider_checks_are_answered_by_the_members_provider() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_file(dir.path(), &[("a", "ring"), ("c", "ring")]);
    let life = start(dir.path(), &fleet, 0);
    let api = &life.api;
    // The simulated provider's pre-flight before each member, and its health check after.
    let strategy = json!({
        "healthChecks": [{"name": "cluster-ok", "provider": {}}],
        "stages": [
            {"name": "prod",
             "groups": [{"name": "ring", "maxConcurrency": "2", "onPreflightFailure": "Fail",
                         "afterMemberChecks": {"checks": ["cluster-ok"]}}]},
        ],
    });
    create_and_start(api, &strategy);
    let done = eventually(60, "the run to end", || finished(api));
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");
    let events = api.get("/events?after=0&$top=1000", None).body["value"].clone();
    let measured: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "CheckMeasured")
        .collect();
    for check in ["preflight", "cluster-ok"] {
        for m in ["a", "c"] {
            let e = measured
                .iter()
                .find(|e| e["check"] == check && e["member"] == m)
                .unwrap_or_else(|| panic!("no {check} measurement of {m}: {events:#}"));
            assert_eq!(e["verdict"], "Pass", "{e:#}");
        }
    }
    assert!(life.stop(), "a clean shutdown:\n{}", log_of(dir.path(), 0));
}

#[test]
fn a_measurement_submitted_again_while_in_flight_is_taken_once() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(answer);
    // Every other step traps; the receiver holds its answers, so the guest rebuilt after a trap
    // submits the measurements in flight again.
    let fleet = fleet_file_timed(dir.path(), &[("a", "one", 10), ("c", "two", 20)]);
    let env = [
        ("WAVERUN_FAULT_TRAP_EVERY", "2"),
        ("WAVERUN_LOG", "info,waverun_host::daemon=debug"),
    ];
    let life = start_with(dir.path(), &fleet, 0, &env);
    receiver.hold.store(true, Ordering::SeqCst);
    let strategy = json!({
        "healthChecks": [
            {"name": "smoke", "http": {"url": receiver.url("/after/{{member}}")}, "timeoutSeconds": 30},
        ],
        "stages": [
            {"name": "prod", "groups": [
                {"name": "one", "afterMemberChecks": {"checks": ["smoke"]}},
                {"name": "two", "afterMemberChecks": {"checks": ["smoke"]}},
            ]},
        ],
    });
    create_and_start(&life.api, &strategy);
    eventually(60, "both members' checks at the receiver", || {
        (receiver.hits("/after/a") == 1 && receiver.hits("/after/c") == 1).then_some(())
    });
    // Two more steps while both are held: one of them traps, and the rebuilt guest submits both
    // measurements again.
    for i in 0..2 {
        let spare = json!({"properties": {"strategy": {"stages": [{"name": "s", "groups": [{"name": "one"}]}]}}});
        let r = life.api.call(
            "PUT",
            &format!("/updateStrategies/spare-{i}"),
            None,
            &[],
            Some(&spare.to_string()),
        );
        assert_eq!(r.status, 201, "{}", r.body);
    }
    receiver.hold.store(false, Ordering::SeqCst);
    let api = &life.api;
    let done = eventually(60, "the run to end", || finished(api));
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");
    assert_eq!(receiver.hits("/after/a"), 1, "measured once");
    assert_eq!(receiver.hits("/after/c"), 1, "measured once");
    assert!(life.stop(), "a clean shutdown:\n{}", log_of(dir.path(), 0));
    let log = log_of(dir.path(), 0);
    assert!(
        log.contains("already being measured"),
        "no measurement was submitted again while in flight:\n{log}"
    );
}
