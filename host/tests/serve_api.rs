//! The daemon behind its HTTP API, in-process, on a real loopback port with a real data
//! directory: strategies and runs go in over HTTP, gates are approved over HTTP, and the run ends
//! as `waverun simulate` says; ETags guard changes; bad bodies are problems naming the field and
//! change nothing; tokens and roles are enforced; the audit log says who did what.

mod daemon_support;
mod http_support;
mod runtime_support;

use daemon_support::{scenario, Daemon};
use http_support::agent;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use waverun_core::sim::{simulate, Scenario};
use waverun_host::api::Role;
use waverun_host::runtime::cache::sha256_hex;

impl Daemon {
    /// The scenario's strategy as `rollout`, and its run as `r1` (not started).
    fn create_run(&self, s: &Scenario) {
        let r = self.call(
            "PUT",
            "/updateStrategies/rollout",
            None,
            &[],
            Some(&strategy_body(s)),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let r = self.call("PUT", "/updateRuns/r1", None, &[], Some(&run_body(s)));
        assert_eq!(r.status, 201, "{}", r.body);
    }
}

fn strategy_body(s: &Scenario) -> String {
    json!({ "properties": { "strategy": s.strategy } }).to_string()
}

fn run_body(s: &Scenario) -> String {
    json!({ "properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/rollout",
        "managedClusterUpdate": s.run.as_ref().unwrap().managed_cluster_update,
    }})
    .to_string()
}

fn member_states(status: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for st in status["stages"].as_array().unwrap() {
        for g in st["groups"].as_array().unwrap() {
            for m in g["members"].as_array().unwrap() {
                out.insert(
                    m["name"].as_str().unwrap().to_string(),
                    m["status"]["state"].as_str().unwrap().to_string(),
                );
            }
        }
    }
    out
}

#[test]
fn a_run_created_over_http_ends_as_simulated_with_its_gate_approved_over_http() {
    let d = Daemon::start(&[]);
    let s = scenario();
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[],
        Some(&strategy_body(&s)),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.body["type"],
        "Microsoft.ContainerService/fleets/updateStrategies"
    );
    assert_eq!(r.body["id"], "/fleets/default/updateStrategies/rollout");
    assert_eq!(r.body["systemData"]["createdBy"], "anonymous");
    let r = d.call("PUT", "/updateRuns/r1", None, &[], Some(&run_body(&s)));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.body["properties"]["status"]["status"]["state"],
        "NotStarted"
    );
    assert_eq!(
        r.body["properties"]["strategy"],
        json!(s.strategy),
        "the strategy is snapshotted into the run"
    );
    let r = d.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let until = Instant::now() + Duration::from_secs(60);
    let mut approved = Vec::new();
    let status = loop {
        let gates = d.get("/gates?$filter=state%20eq%20Pending", None);
        assert_eq!(gates.status, 200, "{}", gates.body);
        for g in gates.body["value"].as_array().unwrap() {
            let name = g["name"].as_str().unwrap().to_string();
            assert_eq!(name.len(), 36, "a GUID: {name}");
            if g["properties"]["gateType"] == "Approval" && !approved.contains(&name) {
                // A scrape counts what waits, and on what: the gate's stage or group.
                let m = d.get(&d.base.replace("/api/v1/fleets/default", "/metrics"), None);
                let text = m.body.as_str().unwrap().to_string();
                assert!(
                    text.lines()
                        .any(|l| l.starts_with("waverun_waiting_nodes{run=\"r1\",")
                            && l.ends_with(",reason=\"Gate\"} 1")),
                    "nothing waits on the gate in:\n{text}"
                );
                let r = d.call("POST", &format!("/gates/{name}/approve"), None, &[], None);
                assert_eq!(r.status, 200, "{}", r.body);
                assert_eq!(r.body["properties"]["state"], "Completed");
                approved.push(name);
            }
        }
        let run = d.get("/updateRuns/r1", None);
        let state = run.body["properties"]["status"]["status"]["state"].clone();
        if ["Completed", "Failed", "Stopped", "Skipped"].contains(&state.as_str().unwrap()) {
            break run.body["properties"]["status"].clone();
        }
        assert!(Instant::now() < until, "the run did not end: {}", run.body);
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(approved.len(), 1, "one approval gate");
    let expected = serde_json::to_value(&simulate(&s).unwrap().run.unwrap().status).unwrap();
    assert_eq!(status["status"]["state"], expected["status"]["state"]);
    assert_eq!(member_states(&status), member_states(&expected));
    // Each upgraded member is described again when its upgrade ends: the fleet shows the
    // version it runs now, not the one of the last periodic observation (every 300 s).
    let upgraded: Vec<(String, String)> = status["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["groups"].as_array().unwrap())
        .flat_map(|g| g["members"].as_array().unwrap())
        .filter(|m| m["status"]["state"] == "Completed")
        .map(|m| {
            let to = m["kubernetesVersion"]
                .as_str()
                .unwrap_or_else(|| panic!("a target: {m}"));
            (m["name"].as_str().unwrap().to_string(), to.to_string())
        })
        .collect();
    assert!(!upgraded.is_empty());
    for (name, to) in &upgraded {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let m = d.get(&format!("/members/{name}"), None);
            let now = m.body["properties"]["status"]["kubernetesVersion"].clone();
            if now == json!(to) {
                break;
            }
            assert!(Instant::now() < until, "{name} still shows {now}, not {to}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The engine state a browser forecasts from, with the digest of the module that wrote it
    // (the one the portal serves).
    let state = d.get("/updateRuns/r1/forecastState", None);
    assert_eq!(state.status, 200, "{}", state.body);
    assert_eq!(state.body["run"], "r1");
    assert_eq!(state.body["snapshot"]["formatVersion"], 1);
    assert!(state.body["at"].is_string());
    let module = sha256_hex(waverun_host::runtime::EMBEDDED_PLUGIN);
    assert_eq!(state.body["module"], json!(module));
    assert_eq!(d.get("/updateRuns/nope/forecastState", None).status, 404);
    // The approval is on record, with who approved which gate.
    let audit = d.get("/audit", None);
    let actions: Vec<&str> = audit.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "updateStrategies.put",
            "updateRuns.put",
            "updateRuns.start",
            "gates.approve"
        ]
    );
    // The events, in order, numbered from 1 without gaps.
    let events = d.get("/events?$top=1000", None);
    let seqs: Vec<u64> = events.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(!seqs.is_empty());
    assert_eq!(
        seqs,
        (seqs[0]..seqs[0] + seqs.len() as u64).collect::<Vec<_>>()
    );
    // A client that accepts gzip gets the same run, gzipped (cached with the run's version).
    let plain = d.get("/updateRuns/r1", None);
    let req = ureq::http::Request::builder()
        .method("GET")
        .uri(format!("{}/updateRuns/r1", d.base))
        .header("accept-encoding", "br;q=1, gzip;q=0.8")
        .body(String::new())
        .unwrap();
    let mut gz = agent().run(req).unwrap();
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    assert_eq!(
        gz.headers()["etag"].to_str().unwrap(),
        plain.etag.as_deref().unwrap()
    );
    let bytes = gz.body_mut().read_to_vec().unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text)
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), plain.body);
    // The metrics count what happened.
    let m = d.get(&d.base.replace("/api/v1/fleets/default", "/metrics"), None);
    assert_eq!(m.status, 200);
    let text = m.body.as_str().unwrap().to_string();
    for line in [
        "waverun_nodes{run=\"r1\",node=\"member\",state=\"Completed\"} 3",
        "waverun_nodes{run=\"r1\",node=\"run\",state=\"Completed\"} 1",
        "waverun_run_failures{run=\"r1\"} 0",
        "waverun_upgrade_duration_fleet_seconds_count{outcome=\"succeeded\"} 3",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    let count = |name: &str| -> f64 {
        let l = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name}"));
        l.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(count("waverun_journal_commit_seconds_count") >= 4.0);
    assert!(count("waverun_plugin_call_seconds_count{call=\"command\"}") >= 4.0);
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn etags_guard_every_change() {
    let d = Daemon::start(&[]);
    let s = scenario();
    let body = strategy_body(&s);
    let first = d.call("PUT", "/updateStrategies/rollout", None, &[], Some(&body));
    let etag = first.etag.clone().expect("an ETag header");
    assert_eq!(first.body["eTag"], json!(etag));
    let again = d.get("/updateStrategies/rollout", None);
    assert_eq!(again.etag.as_deref(), Some(etag.as_str()));
    // Create-only on an existing resource.
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[("if-none-match", "*")],
        Some(&body),
    );
    assert_eq!(r.status, 412, "{}", r.body);
    assert_eq!(r.body["code"], "PreconditionFailed");
    // A stale ETag changes nothing.
    let mut changed = s.strategy.clone().unwrap();
    changed.stages[0].after_stage_wait_in_seconds = Some(7);
    let changed = json!({ "properties": { "strategy": changed } }).to_string();
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[("if-match", "\"stale\"")],
        Some(&changed),
    );
    assert_eq!(r.status, 412);
    assert_eq!(d.get("/updateStrategies/rollout", None).body, first.body);
    // The current one goes through, and the ETag moves.
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[("if-match", &etag)],
        Some(&changed),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_ne!(r.etag.as_deref(), Some(etag.as_str()));
    assert_eq!(
        r.body["properties"]["strategy"]["stages"][0]["afterStageWaitInSeconds"],
        7
    );
    assert_eq!(
        r.body["systemData"]["createdAt"],
        first.body["systemData"]["createdAt"]
    );
}

#[test]
fn bad_bodies_are_problems_naming_the_field_and_change_nothing() {
    let d = Daemon::start(&[]);
    let s = scenario();
    d.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[],
        Some(&strategy_body(&s)),
    );
    let before = d.get("/updateStrategies", None).body;
    let mut v: Value = serde_json::from_str(&strategy_body(&s)).unwrap();
    v["properties"]["strategy"]["stages"][0]["maxConcurrency"] = json!("120%");
    let r = d.call(
        "PUT",
        "/updateStrategies/other",
        None,
        &[],
        Some(&v.to_string()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["code"], "InvalidField");
    assert_eq!(
        r.body["target"],
        "properties.strategy.stages[0].maxConcurrency"
    );
    assert!(
        r.body["detail"].as_str().unwrap().contains("120%"),
        "{}",
        r.body
    );
    let mut v: Value = serde_json::from_str(&strategy_body(&s)).unwrap();
    v["properties"]["strategy"]["stages"][0]["afterStageWaitInSecond"] = json!(5);
    let r = d.call(
        "PUT",
        "/updateStrategies/other",
        None,
        &[],
        Some(&v.to_string()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("afterStageWaitInSeconds"),
        "a did-you-mean: {}",
        r.body
    );
    let r = d.call(
        "PUT",
        "/updateStrategies/other",
        None,
        &[],
        Some("{not json"),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = d.call(
        "PUT",
        "/updateStrategies/other",
        None,
        &[("content-type", "text/plain")],
        Some(&strategy_body(&s)),
    );
    assert_eq!(r.status, 415, "{}", r.body);
    // Just over the limit: the rest of the body fits in the socket buffers, so the client reads
    // the 413 instead of meeting a closed connection while it still writes.
    let huge = format!(
        "{{\"properties\": {{\"x\": \"{}\"}}}}",
        "a".repeat((4 << 20) + 1024)
    );
    let r = d.call("PUT", "/updateStrategies/other", None, &[], Some(&huge));
    assert_eq!(r.status, 413, "{}", r.body);
    let r = d.call(
        "PUT",
        "/updateRuns/r1",
        None,
        &[],
        Some(
            &json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/missing",
        "managedClusterUpdate": s.run.as_ref().unwrap().managed_cluster_update}})
            .to_string(),
        ),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.body["target"], "properties.updateStrategyId");
    let r = d.get("/updateRuns/nope", None);
    assert_eq!(r.status, 404);
    assert_eq!(r.body["code"], "NotFound");
    let other_fleet = d.base.replace("/fleets/default", "/fleets/elsewhere");
    let r = d.get(&format!("{other_fleet}/updateRuns"), None);
    assert_eq!(r.status, 404);
    assert!(
        r.body["detail"].as_str().unwrap().contains("\"default\""),
        "{}",
        r.body
    );
    assert_eq!(
        d.get("/updateStrategies", None).body,
        before,
        "nothing stored changed"
    );
    assert_eq!(d.get("/updateRuns", None).body["value"], json!([]));
}

#[test]
fn tokens_and_roles_decide_who_may_do_what() {
    let d = Daemon::start(&[
        ("watcher", Role::Viewer, "t-viewer"),
        ("ops", Role::Operator, "t-operator"),
        ("lead", Role::Approver, "t-approver"),
        ("root", Role::Admin, "t-admin"),
    ]);
    let s = scenario();
    let body = strategy_body(&s);
    let r = d.get("/updateStrategies", None);
    assert_eq!(r.status, 401, "{}", r.body);
    let r = d.get("/updateStrategies", Some("wrong"));
    assert_eq!(r.status, 401);
    assert_eq!(d.get("/updateStrategies", Some("t-viewer")).status, 200);
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        Some("t-viewer"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        Some("t-approver"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 403);
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        Some("t-operator"),
        &[],
        Some(&body),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["systemData"]["createdBy"], "ops");
    d.call(
        "PUT",
        "/updateRuns/r1",
        Some("t-admin"),
        &[],
        Some(&run_body(&s)),
    );
    let r = d.call(
        "POST",
        "/updateRuns/r1/start",
        Some("t-approver"),
        &[],
        None,
    );
    assert_eq!(r.status, 403);
    let r = d.call(
        "POST",
        "/updateRuns/r1/start",
        Some("t-operator"),
        &[],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Wait for the approval gate; only an approver or an admin may approve it.
    let until = Instant::now() + Duration::from_secs(60);
    let gate = loop {
        let gates = d.get("/gates?$filter=state%20eq%20Pending", Some("t-viewer"));
        let found = gates.body["value"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["properties"]["gateType"] == "Approval")
            .map(|g| g["name"].as_str().unwrap().to_string());
        if let Some(g) = found {
            break g;
        }
        assert!(Instant::now() < until, "no approval gate");
        std::thread::sleep(Duration::from_millis(5));
    };
    let path = format!("/gates/{gate}");
    let patch = r#"{"properties":{"state":"Completed"}}"#;
    let r = d.call("PATCH", &path, Some("t-operator"), &[], Some(patch));
    assert_eq!(r.status, 403);
    let r = d.call(
        "PATCH",
        &path,
        Some("t-approver"),
        &[],
        Some(r#"{"properties":{"state":"Pending"}}"#),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let pending = d.get(&path, Some("t-viewer")).body;
    let r = d.call("PATCH", &path, Some("t-approver"), &[], Some(patch));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["properties"]["completedBy"], "lead");
    // The gate's systemData: created by whoever created its run, when the run reached it;
    // last modified by its approver, when approved.
    let sd = &r.body["systemData"];
    assert_eq!(sd["createdBy"], "root", "{sd}");
    assert_eq!(sd["createdAt"], pending["systemData"]["createdAt"]);
    assert_eq!(pending["systemData"]["lastModifiedBy"], "root");
    assert_eq!(sd["lastModifiedBy"], "lead", "{sd}");
    assert_eq!(sd["lastModifiedByType"], "User");
    assert!(
        sd["lastModifiedAt"].as_str().unwrap() >= sd["createdAt"].as_str().unwrap(),
        "{sd}"
    );
    let run = d.get("/updateRuns/r1", Some("t-viewer")).body;
    let run_gate = run["properties"]["status"]["stages"][1]["beforeGates"][0].clone();
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(sd["createdAt"].as_str().unwrap()).unwrap(),
        chrono::DateTime::parse_from_rfc3339(run_gate["status"]["startTime"].as_str().unwrap())
            .unwrap(),
        "created when the run reached it: {run_gate}"
    );
    let audit = d.get("/audit?$top=100", Some("t-viewer")).body;
    let approve = audit["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "gates.approve" && a["outcome"] == "ok")
        .expect("the approval is audited")
        .clone();
    assert_eq!(approve["who"], "lead");
    assert!(
        approve["detail"].as_str().unwrap().contains("run r1"),
        "{approve}"
    );
}

#[test]
fn health_and_readiness_answer_without_a_token() {
    let d = Daemon::start(&[("ops", Role::Operator, "t")]);
    let root = d.base.split("/api/").next().unwrap().to_string();
    assert_eq!(d.get(&format!("{root}/healthz"), None).status, 200);
    assert_eq!(d.get(&format!("{root}/readyz"), None).status, 200);
    let r = d.get(&format!("{root}/nope"), None);
    assert_eq!(r.status, 404);
    let _ = PathBuf::new();
}

/// Reads SSE frames (`id`, `event`, `data`) from `lines` until `n` events came.
fn read_events(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    n: usize,
) -> Vec<(u64, String, Value)> {
    let mut out = Vec::new();
    let (mut id, mut kind, mut data) = (None, None, None);
    while out.len() < n {
        let line = lines.next().expect("the stream goes on").expect("a line");
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.parse::<u64>().unwrap());
        } else if let Some(v) = line.strip_prefix("event: ") {
            kind = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = Some(serde_json::from_str::<Value>(v).unwrap());
        } else if line.is_empty() {
            if let (Some(i), Some(k), Some(d)) = (id.take(), kind.take(), data.take()) {
                out.push((i, k, d));
            }
        }
    }
    out
}

fn open_stream(
    d: &Daemon,
    query: &str,
    last_id: Option<u64>,
) -> impl Iterator<Item = std::io::Result<String>> {
    use std::io::BufRead;
    let mut req = agent()
        .get(format!("{}/events{query}", d.base))
        .header("accept", "text/event-stream");
    if let Some(id) = last_id {
        req = req.header("last-event-id", id.to_string());
    }
    let resp = req.call().expect("the stream opens");
    assert_eq!(resp.status().as_u16(), 200);
    let ct = resp
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    std::io::BufReader::new(resp.into_body().into_reader()).lines()
}

#[test]
fn the_event_stream_resumes_after_the_last_id_without_gaps_or_repeats() {
    let mut d = Daemon::start(&[]);
    let s = scenario();
    d.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[],
        Some(&strategy_body(&s)),
    );
    d.call("PUT", "/updateRuns/r1", None, &[], Some(&run_body(&s)));
    let stored = d.get("/events?$top=1000", None).body["value"]
        .as_array()
        .unwrap()
        .len();
    assert!(stored >= 1, "the run's creation is an event");
    // From the start: the stored events, then the live ones as the run starts.
    let mut live = open_stream(&d, "", None);
    let first = read_events(&mut live, stored);
    assert_eq!(
        first.iter().map(|e| e.0).collect::<Vec<_>>(),
        (1..=stored as u64).collect::<Vec<_>>()
    );
    let r = d.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200);
    let more = read_events(&mut live, 3);
    assert_eq!(more[0].0, stored as u64 + 1, "the next id, live");
    assert_eq!(more[0].1, "RunStarted");
    assert_eq!(more[0].2["kind"], "RunStarted");
    assert!(more.windows(2).all(|w| w[1].0 == w[0].0 + 1));
    // Reconnect after the 2nd: the 3rd comes first.
    let mut again = open_stream(&d, "", Some(2));
    let resumed = read_events(&mut again, 2);
    assert_eq!(resumed.iter().map(|e| e.0).collect::<Vec<_>>(), vec![3, 4]);
    let seen: Vec<&(u64, String, Value)> = first.iter().chain(&more).collect();
    assert_eq!(resumed[0], *seen[2], "the same event under the same id");
    // `?run=` keeps to one run; `?after=` is the same as Last-Event-ID.
    let mut one = open_stream(&d, "?run=r1&after=1", None);
    let ev = read_events(&mut one, 1);
    assert_eq!(ev[0].0, 2);
    assert!(ev.iter().all(|e| e.2["run"] == "r1"), "{ev:?}");
    // A stopping daemon ends the streams still open (its shutdown waits for them), and stops.
    drop((again, one));
    d.server
        .take()
        .unwrap()
        .shutdown()
        .expect("a clean shutdown");
    // The stream ends cleanly (EOF), not by the client's 30 s timeout (an error).
    let rest: Vec<std::io::Result<String>> = live.collect();
    assert!(
        rest.iter().all(|r| r.is_ok()),
        "ended by the server: {rest:?}"
    );
}

#[test]
fn plan_forecast_retry_freezes_releases_and_simulate_answer_over_http() {
    let d = Daemon::start(&[]);
    let s = scenario();
    d.create_run(&s);
    // The plan: members per stage and group, and the gate that needs a human.
    let plan = d.get("/updateRuns/r1/plan", None);
    assert_eq!(plan.status, 200, "{}", plan.body);
    let text = plan.body.to_string();
    assert!(text.contains("dev-1") && text.contains("prod-2"), "{text}");
    // The forecast of a run not started: as if started now, with an expected finish.
    let f = d.get("/updateRuns/r1/forecast", None);
    assert_eq!(f.status, 200, "{}", f.body);
    assert_eq!(f.body["assumptions"]["startedNow"], true);
    assert_eq!(f.body["state"], "Completed");
    assert!(f.body["expectedFinish"].is_string(), "{}", f.body);
    assert_eq!(d.get("/updateRuns/nope/forecast", None).status, 404);
    assert_eq!(d.get("/updateRuns/r1/nope", None).status, 404);
    // A retry of a run that has not finished is refused, and nothing is created.
    let r = d.call("POST", "/updateRuns/r1/retry", None, &[], None);
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(d.get("/updateRuns/r1-retry", None).status, 404);

    // Freezes: read with an ETag, replaced under If-Match, refused when stale or invalid.
    let fr = d.get("/freezes", None);
    assert_eq!(fr.status, 200, "{}", fr.body);
    let etag = fr.etag.clone().unwrap();
    let body = json!({"freezes": [{"name": "year-end", "start": "2026-12-24T00:00:00Z", "end": "2027-01-02T00:00:00Z"}]}).to_string();
    let r = d.call("PUT", "/freezes", None, &[("if-match", &etag)], Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["freezes"][0]["name"], "year-end");
    let r = d.call("PUT", "/freezes", None, &[("if-match", &etag)], Some(&body));
    assert_eq!(r.status, 412, "the old ETag is stale: {}", r.body);
    let bad = json!({"freezes": [{"name": "x", "start": "2027-01-02T00:00:00Z", "end": "2026-12-24T00:00:00Z"}]}).to_string();
    let r = d.call("PUT", "/freezes", None, &[], Some(&bad));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["target"], "freezes[0].end");
    assert_eq!(
        d.get("/freezes", None).body["freezes"][0]["name"],
        "year-end"
    );

    // Releases: the catalog, and per region.
    let all = d.get("/releases", None);
    assert_eq!(all.status, 200, "{}", all.body);
    assert!(all.body["kubernetes"]
        .as_array()
        .is_some_and(|k| !k.is_empty()));
    let east = d.get("/releases?region=eastus", None);
    assert_eq!(east.body["region"], "eastus");
    assert!(
        east.body["kubernetes"][0]["availableSince"].is_string(),
        "{}",
        east.body
    );

    // Simulate: a scenario gives the report `waverun simulate -o json` prints.
    let scenario_json = serde_json::to_string(&s).unwrap();
    let r = d.call("POST", "/simulate", None, &[], Some(&scenario_json));
    assert_eq!(r.status, 200, "{}", r.body);
    let expected = serde_json::to_value(simulate(&s).unwrap()).unwrap();
    assert_eq!(r.body, expected);
    let mut broken: Value = serde_json::from_str(&scenario_json).unwrap();
    broken["strategy"]["stages"][0]["maxConcurrency"] = json!("120%");
    let r = d.call("POST", "/simulate", None, &[], Some(&broken.to_string()));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["target"], "strategy.stages[0].maxConcurrency");
}

#[test]
fn members_are_put_patched_and_deleted_through_their_provider() {
    let d = Daemon::start(&[]);
    let before = d.get("/members/dev-1", None);
    assert_eq!(before.status, 200, "{}", before.body);
    assert_eq!(before.body["properties"]["status"]["region"], "eastus");
    // PATCH changes what it names; the provider describes the cluster again.
    let etag = before.etag.clone().unwrap();
    let r = d.call(
        "PATCH",
        "/members/dev-1",
        None,
        &[("if-match", &etag)],
        Some(&json!({"properties": {"labels": {"env": "dev", "team": "a"}}}).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["properties"]["labels"]["team"], "a");
    assert_eq!(r.body["properties"]["group"], "dev");
    assert_eq!(
        r.body["properties"]["status"]["kubernetesVersion"],
        "1.30.4"
    );
    // Azure's shape works: clusterResourceId is kept; the simulated provider knows the cluster
    // by the member's name.
    let r = d.call(
        "PUT",
        "/members/prod-1",
        None,
        &[],
        Some(&json!({"properties": {"clusterResourceId": "/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/prod-1", "group": "prod"}}).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["properties"]["clusterResourceId"]
        .as_str()
        .unwrap()
        .ends_with("/prod-1"));
    // A cluster the provider does not know is refused at clusterRef, and nothing is stored.
    let r = d.call(
        "PUT",
        "/members/ghost",
        None,
        &[],
        Some(&json!({"properties": {"group": "prod"}}).to_string()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["target"], "properties.clusterRef");
    assert_eq!(d.get("/members/ghost", None).status, 404);
    let r = d.call(
        "PUT",
        "/members/dev-1",
        None,
        &[],
        Some(&json!({"properties": {"group": "dev", "colour": "red"}}).to_string()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["target"], "properties.colour");
    // DELETE under a stale ETag is refused; then it goes.
    let r = d.call(
        "DELETE",
        "/members/prod-2",
        None,
        &[("if-match", "\"x\"")],
        None,
    );
    assert_eq!(r.status, 412);
    let r = d.call("DELETE", "/members/prod-2", None, &[], None);
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(d.get("/members/prod-2", None).status, 404);
    let n = d.get("/members", None).body["value"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(n, 2);
}

#[test]
fn a_members_import_registers_all_of_them_or_none_and_names_the_member_refused() {
    let d = Daemon::start(&[]);
    let etag = |name: &str| d.get(&format!("/members/{name}"), None).etag;
    let import = |headers: &[(&str, &str)], value: Value| {
        d.call(
            "POST",
            "/members",
            None,
            headers,
            Some(&json!({ "value": value }).to_string()),
        )
    };
    // The fleet's own list, posted back: every member registered again, none new.
    let list = d.get("/members", None);
    let r = d.call("POST", "/members", None, &[], Some(&list.body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({"created": 0, "updated": 3}));
    // One member gone; an import brings it back and changes another, in one request.
    assert_eq!(
        d.call("DELETE", "/members/prod-2", None, &[], None).status,
        204
    );
    let r = import(
        &[],
        json!([
            {"name": "dev-1", "properties": {"group": "dev", "labels": {"ring": "0"}}},
            {"name": "prod-2", "properties": {"group": "prod"}},
        ]),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({"created": 1, "updated": 1}));
    let dev = d.get("/members/dev-1", None).body;
    assert_eq!(dev["properties"]["labels"], json!({"ring": "0"}));
    let prod = d.get("/members/prod-2", None).body;
    assert_eq!(prod["properties"]["group"], "prod");
    assert_eq!(prod["properties"]["status"]["kubernetesVersion"], "1.30.4");
    let before = (etag("dev-1"), etag("prod-1"), etag("prod-2"));
    // Refusals name the member by its place in the list, and change nothing.
    let refusals = [
        (
            json!([
                {"name": "dev-1", "properties": {"group": "dev"}},
                {"name": "ghost", "properties": {"group": "prod"}},
            ]),
            "value[1].properties.clusterRef",
            "no such cluster",
        ),
        (
            json!([
                {"name": "prod-1", "properties": {"group": "prod"}},
                {"name": "prod-1", "properties": {"group": "dev"}},
            ]),
            "value[1].name",
            "is given twice (also value[0])",
        ),
        (
            json!([{"name": "dev-1", "properties": {"group": "dev", "colour": "red"}}]),
            "value[0].properties.colour",
            "",
        ),
        (
            json!([{"properties": {"group": "dev"}}]),
            "value[0].name",
            "is required",
        ),
        (
            json!([
                {"name": "dev-1", "properties": {"group": "dev"}},
                {"name": "prod-1", "properties": {"provider": "nowhere"}},
            ]),
            "value[1].properties.provider",
            "not a provider of this daemon",
        ),
        (
            json!([
                {"name": "dev-1", "properties": {"group": "dev"}},
                {"name": "prod-1", "properties": {"labels": {"not a key!": "x"}}},
            ]),
            "value[1].properties.labels",
            "",
        ),
    ];
    for (value, target, detail) in refusals {
        let r = import(&[], value.clone());
        assert_eq!(r.status, 400, "{value}: {}", r.body);
        let at = r.body["target"].as_str().unwrap_or_default();
        assert!(at.starts_with(target), "{value}: {}", r.body);
        assert!(
            r.body["detail"].as_str().unwrap().contains(detail),
            "{value}: {}",
            r.body
        );
        assert_eq!((etag("dev-1"), etag("prod-1"), etag("prod-2")), before);
    }
    // Only new members with If-None-Match: *; a version of one resource means nothing here.
    let value = json!([{"name": "dev-1", "properties": {"group": "dev"}}]);
    let r = import(&[("if-none-match", "*")], value.clone());
    assert_eq!(r.status, 412, "{}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("\"dev-1\""));
    let r = import(&[("if-match", "\"x\"")], value);
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["target"], "If-Match");
    assert_eq!((etag("dev-1"), etag("prod-1"), etag("prod-2")), before);
    // Each import, taken or refused, is in the audit log.
    let audit = d.get("/audit", None).body.to_string();
    assert!(audit.contains("members.import"), "{audit}");
}

#[test]
fn a_members_import_takes_a_body_past_one_resources_limit_and_refuses_one_past_its_own() {
    // 3,000 clusters with 20 long labels each: a 5 MB import, over the 4 MiB of one resource.
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..3000).map(|i| format!("m{i:04}")).collect();
    let members: Vec<Value> = names
        .iter()
        .map(|name| {
            json!({
                "name": name, "region": "eastus", "kubernetesVersion": "1.32.7",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
            })
        })
        .collect();
    let fleet = dir.path().join("fleet.json");
    let file = json!({"start": "2026-12-07T00:00:00Z", "members": members});
    std::fs::write(&fleet, file.to_string()).unwrap();
    let d = Daemon::start_fleet(&fleet, 60.0, &[]);
    let value: Vec<Value> = names
        .iter()
        .map(|name| {
            let labels: serde_json::Map<String, Value> = (0..20)
                .map(|k| {
                    (
                        format!("example.com/key-{k:02}"),
                        json!(format!("{name}-{}", "v".repeat(50))),
                    )
                })
                .collect();
            json!({"name": name, "properties": {"group": "all", "labels": labels}})
        })
        .collect();
    let body = json!({ "value": value }).to_string();
    assert!(
        body.len() > waverun_host::api::MAX_BODY_BYTES,
        "{}",
        body.len()
    );
    let r = d.call("POST", "/members", None, &[], Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({"created": 0, "updated": 3000}));
    let m = d.get("/members/m2999", None).body;
    assert_eq!(m["properties"]["group"], "all");
    assert_eq!(m["properties"]["labels"].as_object().unwrap().len(), 20);
    // The larger limit is the import's alone; past its own, it is refused too.
    let r = d.call("PUT", "/members/m0000", None, &[], Some(&body));
    assert_eq!(r.status, 413, "{}", r.body);
    let huge = format!(
        "{{\"value\": [{}]}}",
        " ".repeat(waverun_host::api::MAX_IMPORT_BODY_BYTES)
    );
    let r = d.call("POST", "/members", None, &[], Some(&huge));
    assert_eq!(r.status, 413, "{}", r.body);
}

#[test]
fn the_openapi_document_is_3_1_and_every_operation_in_it_is_routed() {
    let d = Daemon::start(&[]);
    let root = d.base.replace("/api/v1/fleets/default", "");
    let doc = d.get(&format!("{root}/openapi.json"), None);
    assert_eq!(doc.status, 200);
    assert_eq!(doc.body["openapi"], "3.1.0");
    let paths = doc.body["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            operations += 1;
            let url = format!(
                "{root}{}",
                path.replace("{fleet}", "default").replace("{name}", "nope")
            );
            let body = (method != "get" && method != "delete").then_some("{}");
            let r = d.call(&method.to_uppercase(), &url, None, &[], body);
            assert_ne!(r.status, 405, "{method} {path} is not routed");
            let fallback = r.body["detail"]
                .as_str()
                .is_some_and(|t| t.starts_with("no such path"));
            assert!(!fallback, "{method} {path} is not routed: {}", r.body);
            if r.status >= 400 && path != "/readyz" {
                assert!(
                    r.body["code"].is_string(),
                    "{method} {path}: not a problem: {}",
                    r.body
                );
            }
        }
    }
    assert_eq!(
        operations, 52,
        "the spec's paths, waverun's own and the fleet's"
    );
    // The headers: If-None-Match on a PUT, If-Match on every change but a simulation, ETag
    // beside a resource, x-request-id on every answer; the event stream's content type.
    let op = |path: &str, method: &str| doc.body["paths"][path][method].clone();
    let params = |o: &Value| -> Vec<String> {
        o["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let fleet = "/api/v1/fleets/{fleet}";
    for (path, method) in [
        ("/updateStrategies/{name}", "put"),
        ("/updateStrategies/{name}", "delete"),
        ("/updateRuns/{name}", "put"),
        ("/updateRuns/{name}", "delete"),
        ("/updateRuns/{name}/start", "post"),
        ("/updateRuns/{name}/stop", "post"),
        ("/updateRuns/{name}/skip", "post"),
        ("/updateRuns/{name}/retry", "post"),
        ("/members/{name}", "put"),
        ("/members/{name}", "patch"),
        ("/members/{name}", "delete"),
        ("/gates/{name}", "patch"),
        ("/gates/{name}/approve", "post"),
        ("/gates/{name}/fail", "post"),
        ("/freezes", "put"),
    ] {
        let o = op(&format!("{fleet}{path}"), method);
        let names = params(&o);
        assert!(names.contains(&"If-Match".to_string()), "{method} {path}");
        let none_match = names.contains(&"If-None-Match".to_string());
        assert_eq!(
            none_match,
            method == "put" || method == "patch",
            "{method} {path}"
        );
        assert_eq!(
            o["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "If-Match")
                .unwrap()["in"],
            "header"
        );
    }
    assert!(!params(&op(&format!("{fleet}/simulate"), "post")).contains(&"If-Match".to_string()));
    // An import is of many members: only If-None-Match (`*`, only new ones) means something.
    let import = params(&op(&format!("{fleet}/members"), "post"));
    assert!(!import.contains(&"If-Match".to_string()), "{import:?}");
    assert!(import.contains(&"If-None-Match".to_string()), "{import:?}");
    let show = op(&format!("{fleet}/updateRuns/{{name}}"), "get");
    assert!(
        show["responses"]["200"]["headers"]["ETag"].is_object(),
        "{show}"
    );
    for (path, item) in paths {
        for (method, o) in item.as_object().unwrap() {
            for (status, r) in o["responses"].as_object().unwrap() {
                assert!(
                    r["headers"]["x-request-id"].is_object(),
                    "{method} {path} {status}: no x-request-id"
                );
            }
        }
    }
    let events = op(&format!("{fleet}/events"), "get");
    assert!(events["responses"]["200"]["content"]["text/event-stream"].is_object());
    assert!(params(&events).contains(&"Last-Event-ID".to_string()));
    let gate = &doc.body["components"]["schemas"]["GateResource"]["properties"];
    assert!(gate["systemData"].is_object(), "{gate}");
    // The model's enums are open strings.
    let state = &doc.body["components"]["schemas"]["State"];
    assert_eq!(state["type"], "string");
    assert!(state.get("enum").is_none());
}

/// What the daemon logs, collected (for the check that no token is ever logged).
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The logs of every test in this file from the first call on.
fn logs() -> &'static Logs {
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        logs
    })
}

/// The least role each operation needs (`shared/spec/api.md` §4): viewer reads (and simulates,
/// which changes nothing), operator changes members, strategies and runs, approver completes
/// gates, admin replaces the freeze calendar and owns event subscriptions (reads too).
fn least_role(operation_id: &str) -> Role {
    match operation_id {
        "members_put" | "members_patch" | "members_delete" | "members_import"
        | "strategies_put" | "strategies_delete" | "runs_put" | "runs_delete" | "runs_start"
        | "runs_stop" | "runs_skip" | "runs_retry" => Role::Operator,
        "gates_patch" | "gates_approve" | "gates_fail" => Role::Approver,
        "freezes_put" | "profiles_put" | "profiles_delete" | "profiles_generate" => Role::Admin,
        // Event subscriptions name endpoints (which may carry credentials): reads are admin's too.
        id if id.starts_with("subscriptions_") => Role::Admin,
        _ => Role::Viewer,
    }
}

#[test]
fn the_role_by_endpoint_matrix_holds_for_every_operation_and_no_token_is_logged() {
    let logs = logs();
    let tokens = [
        (Role::Viewer, "tok-viewer-5f1c9a"),
        (Role::Operator, "tok-operator-8e27b4"),
        (Role::Approver, "tok-approver-3d90c1"),
        (Role::Admin, "tok-admin-a4b6e2"),
    ];
    let d = Daemon::start(&[
        ("v", tokens[0].0, tokens[0].1),
        ("o", tokens[1].0, tokens[1].1),
        ("p", tokens[2].0, tokens[2].1),
        ("a", tokens[3].0, tokens[3].1),
    ]);
    let root = d.base.replace("/api/v1/fleets/default", "");
    let doc = d.get(&format!("{root}/openapi.json"), None).body;
    let mut cells = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            let public = ["healthz", "readyz", "openapi"].contains(&id);
            let url = format!(
                "{root}{}",
                path.replace("{fleet}", "default").replace("{name}", "nope")
            );
            let body = (method != "get" && method != "delete").then_some("{}");
            let m = method.to_uppercase();
            let anonymous = d.call(&m, &url, None, &[], body);
            let forged = d.call(&m, &url, Some("not-a-token"), &[], body);
            if public {
                assert_ne!(anonymous.status, 401, "{m} {path} is public");
                continue;
            }
            assert_eq!(
                anonymous.status, 401,
                "{m} {path} without a token: {}",
                anonymous.body
            );
            assert_eq!(forged.status, 401, "{m} {path} with a forged token");
            for (role, token) in tokens {
                let r = d.call(&m, &url, Some(token), &[], body);
                let allowed = match least_role(id) {
                    Role::Viewer => true,
                    Role::Operator => matches!(role, Role::Operator | Role::Admin),
                    Role::Approver => matches!(role, Role::Approver | Role::Admin),
                    Role::Admin => role == Role::Admin,
                };
                if allowed {
                    assert!(
                        r.status != 401 && r.status != 403,
                        "{m} {path} as {role:?} must be allowed: {} {}",
                        r.status,
                        r.body
                    );
                } else {
                    assert_eq!(r.status, 403, "{m} {path} as {role:?}: {}", r.body);
                    assert_eq!(r.body["code"], "Forbidden");
                }
                cells += 1;
            }
        }
    }
    assert_eq!(
        cells,
        49 * 4,
        "every operation but the three public ones, by four roles"
    );
    // Refused mutations are in the audit log too: who (as far as known) and the outcome.
    let audit = d.get("/audit?$top=1000", Some(tokens[3].1)).body;
    let entries = audit["value"].as_array().unwrap();
    let forbidden: Vec<&str> = entries
        .iter()
        .filter(|e| e["outcome"] == "Forbidden")
        .map(|e| e["who"].as_str().unwrap())
        .collect();
    assert!(!forbidden.is_empty());
    assert!(
        forbidden.iter().all(|w| ["v", "o", "p"].contains(w)),
        "{forbidden:?}"
    );
    assert!(entries
        .iter()
        .any(|e| e["outcome"] == "Unauthorized" && e["who"] == "unauthenticated"));
    let ids: std::collections::BTreeSet<&str> = entries
        .iter()
        .map(|e| e["requestId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), entries.len(), "one entry per request");
    drop(d);
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("request"), "requests are logged: {text}");
    for (_, token) in tokens {
        assert!(!text.contains(token), "a token is in the logs");
    }
}

/// One bad request: method, path, body, an extra header, the status and the target expected.
type BadInput<'a> = (
    &'a str,
    &'a str,
    String,
    Option<(&'a str, &'a str)>,
    u16,
    Option<&'a str>,
);

/// Everything the API stores, as read back through it.
fn stored_state(d: &Daemon) -> Vec<Value> {
    [
        "/members",
        "/updateStrategies",
        "/updateRuns",
        "/gates",
        "/freezes",
    ]
    .iter()
    .map(|p| d.get(p, None).body)
    .collect()
}

#[test]
fn bad_input_at_every_endpoint_is_a_problem_naming_the_field_and_changes_nothing() {
    let d = Daemon::start(&[]);
    let s = scenario();
    d.create_run(&s);
    let before = stored_state(&d);
    let with_stage =
        |stage: Value| json!({"properties": {"strategy": {"stages": [stage]}}}).to_string();
    let big = format!(
        "{{\"properties\": {{\"strategy\": {{\"stages\": [], \"x\": \"{}\"}}}}}}",
        "y".repeat(5 << 20)
    );
    let cases: Vec<BadInput> = vec![
        ("PUT", "/updateStrategies/rollout", "{\"properties\": ".to_string(), None, 400, Some("")),
        ("PUT", "/updateStrategies/rollout", json!({"properties": {"strategy": {"stages": "all"}}}).to_string(), None, 400, Some("properties.strategy.stages")),
        ("PUT", "/updateStrategies/rollout", with_stage(json!({"name": "a", "beforeGate": []})), None, 400, Some("properties.strategy.stages[0].beforeGate")),
        ("PUT", "/updateStrategies/rollout", with_stage(json!({"name": "a", "groups": [{"name": "g", "memberSelector": {"byLabel": "env in (prod"}}]})), None, 400, Some("properties.strategy.stages[0].groups[0].memberSelector.byLabel")),
        ("PUT", "/updateStrategies/rollout", with_stage(json!({"name": "a", "maxConcurrency": "120%", "groups": [{"name": "g"}]})), None, 400, Some("properties.strategy.stages[0].maxConcurrency")),
        ("PUT", "/updateStrategies/rollout", strategy_body(&s), Some(("if-match", "\"stale\"")), 412, None),
        ("PUT", "/updateStrategies/rollout", strategy_body(&s), Some(("content-type", "text/yaml")), 415, None),
        ("PUT", "/updateStrategies/rollout", big, None, 413, None),
        ("DELETE", "/updateStrategies/rollout", String::new(), Some(("if-match", "\"stale\"")), 412, None),
        ("PUT", "/updateRuns/r1", json!({"properties": {"managedClusterUpdate": {"upgrade": {"type": 5}}}}).to_string(), None, 400, Some("properties.managedClusterUpdate.upgrade.type")),
        ("PUT", "/updateRuns/r1", json!({"properties": {"managedClusterUpdate": s.run.as_ref().unwrap().managed_cluster_update, "colour": 1}}).to_string(), None, 400, Some("properties.colour")),
        ("PUT", "/updateRuns/r1", json!({"properties": {"updateStrategyId": "/fleets/default/updateStrategies/nope", "managedClusterUpdate": s.run.as_ref().unwrap().managed_cluster_update}}).to_string(), None, 404, Some("properties.updateStrategyId")),
        ("POST", "/updateRuns/r1/skip", json!({"targets": [{"type": "Bogus", "name": "x"}]}).to_string(), None, 400, Some("targets[0]")),
        ("POST", "/updateRuns/r1/skip", json!({"targets": [], "extra": true}).to_string(), None, 400, Some("extra")),
        ("POST", "/updateRuns/r1/start", String::new(), Some(("if-match", "\"stale\"")), 412, None),
        ("PUT", "/members/dev-1", json!({"properties": {"labels": "env=dev"}}).to_string(), None, 400, Some("properties.labels")),
        ("PATCH", "/members/dev-1", json!({"properties": {"group": 3}}).to_string(), None, 400, Some("properties.group")),
        ("PUT", "/freezes", json!({"freezes": [{"name": "x", "start": "soon", "end": "2027-01-02T00:00:00Z"}]}).to_string(), None, 400, Some("freezes[0].start")),
        ("PUT", "/freezes", json!({"freeze": []}).to_string(), None, 400, Some("freeze")),
        ("POST", "/simulate", json!({"start": 7}).to_string(), None, 400, Some("start")),
    ];
    for (method, path, body, header, status, target) in cases {
        let headers: Vec<(&str, &str)> = header.into_iter().collect();
        let body = (!body.is_empty()).then_some(body.as_str());
        let r = d.call(method, path, None, &headers, body);
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert!(
            r.body["code"].is_string(),
            "{method} {path}: not a problem: {}",
            r.body
        );
        if let Some(t) = target {
            assert_eq!(
                r.body["target"].as_str().unwrap_or(""),
                t,
                "{method} {path}: {}",
                r.body
            );
        }
        assert_eq!(
            stored_state(&d),
            before,
            "{method} {path} changed what is stored"
        );
    }
    // A gate: only Completed, and nothing else in the body.
    let r = d.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200);
    let gate = loop {
        let g = d.get("/gates", None).body["value"][0]["name"].clone();
        if let Some(g) = g.as_str() {
            break g.to_string();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let path = format!("/gates/{gate}");
    let g = d.get(&path, None).body;
    for (body, target) in [
        (
            json!({"properties": {"state": "Pending"}}),
            "properties.state",
        ),
        (
            json!({"properties": {"state": "Completed", "by": "me"}}),
            "properties.by",
        ),
    ] {
        let r = d.call("PATCH", &path, None, &[], Some(&body.to_string()));
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.body["target"], target);
        assert_eq!(
            d.get(&path, None).body["properties"]["state"],
            g["properties"]["state"]
        );
    }
}

/// Follows `nextLink` from `first` to the end: every page's items, and the links followed.
fn all_pages(d: &Daemon, first: &str) -> (Vec<Value>, Vec<String>) {
    let mut items = Vec::new();
    let mut links = Vec::new();
    let mut page = d.get(first, None);
    loop {
        assert_eq!(page.status, 200, "{}", page.body);
        items.extend(page.body["value"].as_array().unwrap().iter().cloned());
        let Some(next) = page.body["nextLink"].as_str() else {
            return (items, links);
        };
        links.push(next.to_string());
        assert!(links.len() < 100, "nextLink goes on: {links:?}");
        // Relative to the server (no public URL is configured).
        page = d.get(&format!("{}{next}", d.root), None);
    }
}

#[test]
fn lists_page_in_name_order_through_next_links_that_keep_the_query() {
    let d = Daemon::start(&[]);
    let s = scenario();
    // Three approval gates before the only stage: created together when a run starts, in
    // tree order, which is not the order of their GUID names. Two runs: six gates.
    let gate = json!({"type": "Approval", "displayName": "sign-off"});
    let strategy = json!({"stages": [{
        "name": "test",
        "beforeGates": [gate, gate, gate],
        "groups": [{"name": "dev"}],
    }]});
    let body = json!({"properties": {"strategy": strategy}}).to_string();
    let r = d.call("PUT", "/updateStrategies/rollout", None, &[], Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    for run in ["r2", "r1"] {
        let r = d.call(
            "PUT",
            &format!("/updateRuns/{run}"),
            None,
            &[],
            Some(&run_body(&s)),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let r = d.call("POST", &format!("/updateRuns/{run}/start"), None, &[], None);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let until = Instant::now() + Duration::from_secs(60);
    let all = loop {
        let all = d.get("/gates", None).body["value"]
            .as_array()
            .unwrap()
            .clone();
        if all.len() == 6 {
            break all;
        }
        assert!(Instant::now() < until, "six gates: {all:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    let names = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect()
    };
    let mut sorted = names(&all);
    sorted.sort();
    assert_eq!(names(&all), sorted, "a list is in name order");
    // Page by page: each gate once, in the same order; the links are relative to the server
    // (absolute under `publicUrl` when one is configured: serve_hardening) and keep the other
    // parameters.
    let (paged, links) = all_pages(&d, "/gates?$top=2");
    assert_eq!(names(&paged), sorted);
    assert_eq!(links.len(), 2);
    for l in &links {
        assert!(l.starts_with("/api/v1/fleets/default/gates?"), "{l}");
    }
    let (pending, links) = all_pages(&d, "/gates?$filter=state%20eq%20Pending&run=r2&$top=1");
    assert_eq!(pending.len(), 3);
    assert!(pending
        .iter()
        .all(|g| g["properties"]["target"]["updateRunProperties"]["name"] == "r2"));
    assert_eq!(links.len(), 2);
    for l in &links {
        assert!(
            l.contains("$filter=state%20eq%20Pending&run=r2&$top=1&$skipToken="),
            "{l}"
        );
    }
    // Runs and strategies page the same way; so do events and the audit log (by sequence).
    let (runs, _) = all_pages(&d, "/updateRuns?$top=1");
    assert_eq!(names(&runs), ["r1", "r2"]);
    let (events, links) = all_pages(&d, "/events?run=r1&$top=2");
    assert!(events.iter().all(|e| e["run"] == "r1"));
    assert!(
        links
            .iter()
            .all(|l| l.starts_with("/api/v1/fleets/default/events?") && l.contains("run=r1")),
        "{links:?}"
    );
    let everything = d.get("/events?run=r1&$top=1000", None).body["value"].clone();
    assert_eq!(json!(events), everything);
    // Members and strategies are paged before their status is read: the pages, joined, are
    // the whole list.
    let whole = d.get("/members?$top=1000", None).body["value"].clone();
    let (members, links) = all_pages(&d, "/members?$top=2");
    assert!(whole.as_array().unwrap().len() > 2 && !links.is_empty());
    assert_eq!(json!(members), whole);
    let r = d.call("PUT", "/updateStrategies/blue", None, &[], Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    let (strategies, links) = all_pages(&d, "/updateStrategies?$top=1");
    assert_eq!(names(&strategies), ["blue", "rollout"]);
    assert_eq!(links.len(), 1);
    let (strategies, _) = all_pages(&d, "/updateStrategies?$top=1&$skipToken=blue");
    assert_eq!(names(&strategies), ["rollout"]);
    // A token with a NUL (no name has one; PostgreSQL cannot hold one): the names after it.
    let (strategies, _) = all_pages(&d, "/updateStrategies?$top=1&$skipToken=blu%00e");
    assert_eq!(names(&strategies), ["blue", "rollout"]);
    let (audit, _) = all_pages(&d, "/audit?$top=1");
    assert_eq!(audit.len(), 6, "{audit:?}");
    // A Host header that is not a plain host[:port] is not echoed: the link is relative.
    let r = d.call(
        "GET",
        "/gates?$top=1",
        None,
        &[("host", "evil.example@x")],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let link = r.body["nextLink"].as_str().unwrap();
    assert!(link.starts_with("/api/v1/fleets/default/gates?"), "{link}");
}
