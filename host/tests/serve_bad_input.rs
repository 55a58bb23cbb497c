//! Bad input at every mutating operation of the live OpenAPI document (every PUT, PATCH, POST
//! and DELETE it lists): malformed JSON, a field of the wrong type, an unknown field, a body over
//! 4 MiB, a body that is not JSON, and a stale `If-Match` where the operation takes one. Each is
//! refused with the RFC 9457 problem the spec names (status, `application/problem+json`, `code`,
//! `target` naming the field), is audited once with its code as the outcome, and leaves what
//! the API serves exactly as it was. And the answers axum would give in plain text (a method
//! the path does not take, a path segment that does not decode) are problems too.

mod daemon_support;
mod http_support;
mod runtime_support;

use daemon_support::{scenario, Daemon};
use http_support::{Client, Reply};
use runtime_support::shared_cache;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use waverun_core::sim::Scenario;

/// What the fleet holds once set up: the strategy `rollout`, the run `r1` started and waiting
/// at its approval gate, that gate, and the auto-upgrade profile `patches` (disabled, so that
/// it generates nothing while the test compares what the API serves).
struct Fixture {
    gate: String,
}

fn set_up(d: &Daemon, s: &Scenario) -> Fixture {
    let strategy = json!({ "properties": { "strategy": s.strategy } }).to_string();
    let r = d.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[],
        Some(&strategy),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let run = json!({ "properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/rollout",
        "managedClusterUpdate": s.run.as_ref().unwrap().managed_cluster_update,
    }})
    .to_string();
    let r = d.call("PUT", "/updateRuns/r1", None, &[], Some(&run));
    assert_eq!(r.status, 201, "{}", r.body);
    let profile = json!({ "properties": {
        "channel": "Stable",
        "updateStrategyId": "/fleets/default/updateStrategies/rollout",
        "disabled": true,
    }})
    .to_string();
    let r = d.call(
        "PUT",
        "/autoUpgradeProfiles/patches",
        None,
        &[],
        Some(&profile),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    // Disabled, and created once the log is still: its status stays as it is.
    let subscription = json!({ "properties": {
        "destination": {"endpointType": "WebHook",
                        "properties": {"endpointUrl": "https://hooks.example.com/in"}},
        "enabled": false,
    }})
    .to_string();
    let r = d.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let gates = d.get("/gates?$filter=state%20eq%20Pending", None).body;
        let approval = gates["value"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["properties"]["gateType"] == "Approval")
            .map(|g| g["name"].as_str().unwrap().to_string());
        if let Some(gate) = approval {
            let r = d.call(
                "PUT",
                "/eventSubscriptions/pager",
                None,
                &[],
                Some(&subscription),
            );
            assert_eq!(r.status, 201, "{}", r.body);
            return Fixture { gate };
        }
        assert!(Instant::now() < until, "the run never reached its gate");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The live OpenAPI document.
fn openapi(d: &Daemon) -> Value {
    let doc = d.get(&format!("{}/openapi.json", d.root), None);
    assert_eq!(doc.status, 200);
    doc.body
}

/// The fleet-relative path of an operation, its `{name}` the fixture's resource of that kind.
fn concrete(path: &str, f: &Fixture) -> String {
    let path = path.trim_start_matches("/api/v1/fleets/{fleet}");
    if !path.contains("{name}") {
        return path.to_string();
    }
    let kind = path.trim_start_matches('/').split('/').next().unwrap();
    let name = match kind {
        "members" => "dev-1",
        "updateStrategies" => "rollout",
        "updateRuns" => "r1",
        "gates" => f.gate.as_str(),
        "autoUpgradeProfiles" => "patches",
        "eventSubscriptions" => "pager",
        other => panic!("which {other} does {path} name?"),
    };
    path.replace("{name}", name)
}

/// Everything the API serves of the fleet, read back through it: every list of the document
/// (a GET without `{name}`) and, for each item of a list, every GET of that item (`{name}`) —
/// but the forecast and the state it starts from, which carry the clock's time. Events and the audit log are compared
/// on their own.
fn stored(d: &Daemon, doc: &Value) -> BTreeMap<String, (u16, Option<String>, Value)> {
    let gets: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(p, item)| p.starts_with("/api/v1/fleets/{fleet}/") && item.get("get").is_some())
        .map(|(p, _)| p.trim_start_matches("/api/v1/fleets/{fleet}"))
        .filter(|p| !["/events", "/audit"].contains(p))
        .filter(|p| !p.ends_with("/forecast") && !p.ends_with("/forecastState"))
        .collect();
    let mut out = BTreeMap::new();
    let mut read = |path: String| {
        let r = d.get(&path, None);
        assert_eq!(r.status, 200, "GET {path}: {}", r.body);
        out.insert(path, (r.status, r.etag.clone(), r.body.clone()));
        r.body
    };
    for list in gets.iter().filter(|p| !p.contains("{name}")) {
        let body = read(list.to_string());
        let Some(items) = body["value"].as_array() else {
            continue; // not a list of resources (the freeze calendar, the releases)
        };
        assert!(body["nextLink"].is_null(), "one page holds {list}");
        let prefix = format!("{list}/{{name}}");
        for item in items {
            let name = item["name"].as_str().unwrap();
            for one in gets.iter().filter(|p| p.starts_with(&prefix)) {
                read(one.replace("{name}", name));
            }
        }
    }
    out
}

/// The whole event log.
fn events(d: &Daemon) -> Value {
    let r = d.get("/events?$top=1000", None);
    assert!(r.body["nextLink"].is_null());
    r.body["value"].clone()
}

/// The whole audit log.
fn audit(d: &Daemon) -> Vec<Value> {
    let r = d.get("/audit?$top=1000", None);
    assert!(r.body["nextLink"].is_null());
    r.body["value"].as_array().unwrap().clone()
}

/// What the API serves, once it no longer moves (the run has come to rest at its gate).
fn settled(d: &Daemon, doc: &Value) -> BTreeMap<String, (u16, Option<String>, Value)> {
    let until = Instant::now() + Duration::from_secs(30);
    let mut last = stored(d, doc);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = stored(d, doc);
        if now == last {
            return now;
        }
        assert!(Instant::now() < until, "the fleet never came to rest");
        last = now;
    }
}

/// Per operation: a body it would accept (and that would change something) and a body with a
/// field of the wrong type, with that field's path. `None` for the body of an operation that
/// takes no body. Every mutating operation of the document must be here.
fn bodies(op: &str, s: &Scenario) -> Option<(Value, Value, &'static str)> {
    let mut changed = s.strategy.clone().unwrap();
    changed.stages[0].after_stage_wait_in_seconds = Some(7);
    Some(match op {
        "members_put" | "members_patch" => (
            json!({"properties": {"group": "dev", "labels": {"team": "x"}}}),
            json!({"properties": {"group": 3}}),
            "properties.group",
        ),
        "members_import" => (
            json!({"value": [{"name": "dev-1", "properties": {"group": "dev", "labels": {"team": "x"}}}]}),
            json!({"value": [{"name": "dev-1", "properties": {"group": 3}}]}),
            "value[0].properties.group",
        ),
        "strategies_put" => (
            json!({"properties": {"strategy": changed}}),
            json!({"properties": {"strategy": {"stages": "all"}}}),
            "properties.strategy.stages",
        ),
        "runs_put" => (
            json!({"properties": {"strategy": changed, "managedClusterUpdate": s.run.as_ref().unwrap().managed_cluster_update}}),
            json!({"properties": {"managedClusterUpdate": {"upgrade": {"type": 5}}}}),
            "properties.managedClusterUpdate.upgrade.type",
        ),
        "runs_skip" => (
            json!({"targets": [{"type": "Member", "name": "prod-1"}]}),
            json!({"targets": "all"}),
            "targets",
        ),
        "runs_retry" => (json!({"name": "r1-again"}), json!({"name": 5}), "name"),
        // An action that takes no body takes an empty object; anything else is refused.
        "runs_start" | "runs_stop" | "gates_approve" | "profiles_generate" => {
            (json!({}), json!([]), "")
        }
        "gates_fail" => (
            json!({"message": "the error budget is spent"}),
            json!({"message": 5}),
            "message",
        ),
        "profiles_put" => (
            json!({"properties": {"channel": "Rapid", "disabled": true}}),
            json!({"properties": {"channel": 5}}),
            "properties.channel",
        ),
        "gates_patch" => (
            json!({"properties": {"state": "Completed"}}),
            json!({"properties": {"state": 5}}),
            "properties.state",
        ),
        "freezes_put" => (
            json!({"freezes": [{"name": "x", "start": "2027-01-01T00:00:00Z", "end": "2027-01-02T00:00:00Z"}]}),
            json!({"freezes": "none"}),
            "freezes",
        ),
        "simulate" => (
            serde_json::to_value(s).unwrap(),
            json!({"start": 7}),
            "start",
        ),
        "subscriptions_put" => (
            json!({"properties": {"destination": {"endpointType": "WebHook",
                "properties": {"endpointUrl": "https://hooks.example.com/other"}}, "enabled": false}}),
            json!({"properties": {"enabled": "yes"}}),
            "properties.enabled",
        ),
        "subscriptions_rotate" | "subscriptions_test" => (json!({}), json!([]), ""),
        "subscriptions_redeliver" => (
            json!({"eventIds": []}),
            json!({"eventIds": "all"}),
            "eventIds",
        ),
        "members_delete"
        | "strategies_delete"
        | "runs_delete"
        | "profiles_delete"
        | "subscriptions_delete" => return None,
        other => panic!("{other}: a mutating operation this test has no bodies for"),
    })
}

/// One bad request and the problem it must get.
struct Case {
    what: &'static str,
    body: Option<String>,
    headers: Vec<(&'static str, String)>,
    status: u16,
    code: &'static str,
    /// The field at fault, when the request has one (`""`: the body as a whole).
    target: Option<String>,
}

/// The cases that apply to an operation: the body cases when it takes a body (optional or
/// not), a stale `If-Match` when it takes one, and a body over its limit (4 MiB; a members
/// import's 64 MiB) whatever it takes.
fn cases(op: &Value, id: &str, s: &Scenario) -> Vec<Case> {
    let params: Vec<&str> = op["parameters"]
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    let takes_body = op.get("requestBody").is_some();
    let body_required = op["requestBody"]["required"] == true;
    let bodies = bodies(id, s);
    assert_eq!(
        bodies.is_some(),
        takes_body,
        "{id}: the document and this test disagree on whether it takes a body"
    );
    // An import of many members has a limit of its own.
    let (limit, what) = if id == "members_import" {
        (
            waverun_host::api::MAX_IMPORT_BODY_BYTES,
            "a body over 64 MiB",
        )
    } else {
        (waverun_host::api::MAX_BODY_BYTES, "a body over 4 MiB")
    };
    let mut out = vec![Case {
        what,
        body: Some(format!(
            "{{\"bogusField\": \"{}\"}}",
            "a".repeat(limit + 1024)
        )),
        headers: vec![],
        status: 413,
        code: "PayloadTooLarge",
        target: None,
    }];
    if let Some((valid, wrong_type, field)) = bodies {
        let mut unknown = valid.clone();
        unknown["bogusField"] = json!(1);
        out.push(Case {
            what: "malformed JSON",
            body: Some("{\"properties\": ".to_string()),
            headers: vec![],
            status: 400,
            code: "InvalidField",
            target: Some(String::new()),
        });
        out.push(Case {
            what: "a field of the wrong type",
            body: Some(wrong_type.to_string()),
            headers: vec![],
            status: 400,
            code: "InvalidField",
            target: Some(field.to_string()),
        });
        out.push(Case {
            what: "an unknown field",
            body: Some(unknown.to_string()),
            headers: vec![],
            status: 400,
            code: "InvalidField",
            target: Some("bogusField".to_string()),
        });
        out.push(Case {
            what: "a body that is not JSON",
            body: Some(valid.to_string()),
            headers: vec![("content-type", "text/plain".to_string())],
            status: 415,
            code: "UnsupportedMediaType",
            target: None,
        });
        if params.contains(&"If-Match") {
            out.push(Case {
                what: "a stale If-Match",
                body: body_required.then(|| valid.to_string()),
                headers: vec![("if-match", "\"0123456789abcdef01234567\"".to_string())],
                status: 412,
                code: "PreconditionFailed",
                target: None,
            });
        }
    } else if params.contains(&"If-Match") {
        out.push(Case {
            what: "a stale If-Match",
            body: None,
            headers: vec![("if-match", "\"0123456789abcdef01234567\"".to_string())],
            status: 412,
            code: "PreconditionFailed",
            target: None,
        });
    }
    out
}

fn assert_problem(r: &Reply, status: u16, code: &str, context: &str) {
    assert_eq!(r.status, status, "{context}: {}", r.body);
    assert_eq!(
        r.header("content-type"),
        Some("application/problem+json"),
        "{context}: {}",
        r.body
    );
    assert_eq!(r.body["status"], status, "{context}: {}", r.body);
    assert_eq!(r.body["code"], code, "{context}: {}", r.body);
    assert!(r.body["detail"].is_string(), "{context}: {}", r.body);
    assert!(r.body["title"].is_string(), "{context}: {}", r.body);
    assert_eq!(
        r.body["type"],
        format!("https://waverun.dev/problems/{code}"),
        "{context}"
    );
}

#[test]
fn every_mutation_refuses_bad_input_with_a_problem_audits_it_and_changes_nothing() {
    let d = Daemon::start(&[]);
    let s = scenario();
    let f = set_up(&d, &s);
    let doc = openapi(&d);
    let before = settled(&d, &doc);
    let events_before = events(&d);
    let mut audited = audit(&d);
    let mut operations = 0;
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !["put", "patch", "post", "delete"].contains(&method.as_str()) {
                continue;
            }
            operations += 1;
            let id = op["operationId"].as_str().unwrap();
            let url = if path.contains("{fleet}") {
                concrete(path, &f)
            } else {
                path.clone()
            };
            let m = method.to_uppercase();
            for (n, case) in cases(op, id, &s).into_iter().enumerate() {
                let context = format!("{m} {url} ({id}) with {}", case.what);
                let request_id = format!("bad-{id}-{n}");
                let mut headers: Vec<(&str, &str)> =
                    case.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                headers.push(("x-request-id", &request_id));
                let r = d.call(&m, &url, None, &headers, case.body.as_deref());
                assert_problem(&r, case.status, case.code, &context);
                assert_eq!(r.header("x-request-id"), Some(request_id.as_str()));
                match &case.target {
                    Some(t) => assert_eq!(
                        r.body["target"].as_str().unwrap_or(""),
                        t,
                        "{context}: {}",
                        r.body
                    ),
                    None => assert!(
                        r.body["target"].as_str().unwrap_or("").is_empty(),
                        "{context}: {}",
                        r.body
                    ),
                }
                assert_eq!(stored(&d, &doc), before, "{context} changed what is stored");
                assert_eq!(events(&d), events_before, "{context} made an event");
                // Audited once, under its request id, with the problem's code as the outcome.
                let now = audit(&d);
                let new: Vec<&Value> = now[audited.len()..].iter().collect();
                assert_eq!(new.len(), 1, "{context}: one audit entry: {new:?}");
                assert_eq!(new[0]["requestId"], request_id.as_str(), "{context}");
                assert_eq!(new[0]["outcome"], case.code, "{context}");
                assert_eq!(new[0]["who"], "anonymous", "{context}");
                audited = now;
                checked += 1;
            }
        }
    }
    assert_eq!(
        operations, 25,
        "every PUT, PATCH, POST and DELETE of the document"
    );
    assert!(checked >= 70, "{checked} cases");
}

#[test]
fn a_method_a_path_does_not_take_is_a_problem_listing_the_ones_it_takes() {
    let d = Daemon::start(&[]);
    let r = d.call(
        "DELETE",
        "/gates",
        None,
        &[("x-request-id", "wrong-method")],
        None,
    );
    assert_problem(&r, 405, "MethodNotAllowed", "DELETE /gates");
    assert_eq!(r.header("allow"), Some("GET,HEAD"));
    assert_eq!(r.header("x-request-id"), Some("wrong-method"));
    assert!(
        r.body["detail"].as_str().unwrap().contains("GET, HEAD"),
        "{}",
        r.body
    );
    let r = d.call("GET", "/updateRuns/r1/start", None, &[], None);
    assert_problem(&r, 405, "MethodNotAllowed", "GET .../start");
    assert_eq!(r.header("allow"), Some("POST"));
    let r = d.call("PATCH", "/updateStrategies/rollout", None, &[], Some("{}"));
    assert_problem(&r, 405, "MethodNotAllowed", "PATCH a strategy");
    let allow = r.header("allow").unwrap();
    for m in ["GET", "PUT", "DELETE"] {
        assert!(allow.split(',').any(|a| a == m), "{allow}");
    }
    let r = d.call("POST", &format!("{}/healthz", d.root), None, &[], None);
    assert_problem(&r, 405, "MethodNotAllowed", "POST /healthz");
    // A refused mutation is audited like any other.
    let entry = audit(&d)
        .into_iter()
        .find(|e| e["requestId"] == "wrong-method")
        .expect("the 405 is audited");
    assert_eq!(entry["outcome"], "MethodNotAllowed");
}

#[test]
fn a_path_segment_that_does_not_decode_is_a_problem_naming_it() {
    let d = Daemon::start(&[]);
    for path in [
        "/members/%FF",
        "/updateStrategies/%C3%28",
        "/gates/%FF/approve",
    ] {
        let method = if path.ends_with("approve") {
            "POST"
        } else {
            "GET"
        };
        let r = d.call(method, path, None, &[], None);
        assert_problem(&r, 400, "InvalidField", path);
        let expected = if path.starts_with("/gates") {
            "id"
        } else {
            "name"
        };
        assert_eq!(r.body["target"], expected, "{path}: {}", r.body);
    }
    // The same outside the fleet's resources: an unknown path is a problem too.
    let r = d.get(&format!("{}/nope", d.root), None);
    assert_problem(&r, 404, "NotFound", "/nope");
}

#[test]
fn a_mutation_the_store_could_not_take_is_answered_503_and_still_audited() {
    use std::sync::Arc;
    use waverun_host::api::{ApiState, Auth};
    use waverun_host::daemon::{Daemon as Engine, FleetClock, FleetEngine, Providers};
    use waverun_host::runtime::{InstanceConfig, PluginRuntime, RuntimeConfig, EMBEDDED_PLUGIN};
    use waverun_host::store::SqliteStore;
    // The API over an engine whose store can be made to fail its next commit (a full disk).
    let dir = tempfile::tempdir().unwrap();
    let runtime = PluginRuntime::new(RuntimeConfig::with_cache(shared_cache())).unwrap();
    let module = runtime.load(EMBEDDED_PLUGIN).unwrap();
    let mut store = SqliteStore::open(&dir.path().join("fleet.db")).unwrap();
    let clock = FleetClock::resume(&mut store, 1.0, None).unwrap();
    let (engine, _) = FleetEngine::start(
        &module,
        store,
        clock,
        InstanceConfig::default(),
        "simulated",
    )
    .unwrap();
    let engine = Arc::new(Engine::spawn(engine, clock, Providers::new()));
    let state = Arc::new(ApiState::new(engine.clone(), "default", Auth::open()));
    let router = waverun_host::api::router(state);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        axum::serve(listener, router).await
    });
    let c = Client::new(&format!("http://{addr}/api/v1/fleets/default"));
    let s = scenario();
    let body = json!({ "properties": { "strategy": s.strategy } }).to_string();
    engine
        .call(|w| w.engine().store().fail_next_commit())
        .unwrap();
    let r = c.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[("x-request-id", "full-disk")],
        Some(&body),
    );
    assert_problem(&r, 503, "Unavailable", "PUT on a full disk");
    // Nothing is stored, but the request is on record with its outcome.
    assert_eq!(c.get("/updateStrategies", None).body["value"], json!([]));
    let entries = c.get("/audit", None).body["value"].clone();
    let entry = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["requestId"] == "full-disk")
        .unwrap_or_else(|| panic!("the 503 is audited: {entries}"))
        .clone();
    assert_eq!(entry["outcome"], "Unavailable");
    assert_eq!(entry["who"], "anonymous");
    assert_eq!(entry["target"], "/fleets/default/updateStrategies/rollout");
    // The next one goes through, audited once in its own step.
    let r = c.call(
        "PUT",
        "/updateStrategies/rollout",
        None,
        &[("x-request-id", "fine")],
        Some(&body),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let entries = c.get("/audit", None).body["value"].clone();
    let fine: Vec<&Value> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["requestId"] == "fine")
        .collect();
    assert_eq!(fine.len(), 1, "{entries}");
    assert_eq!(fine[0]["outcome"], "ok");
    rt.shutdown_timeout(Duration::from_secs(5));
    if let Ok(e) = Arc::try_unwrap(engine) {
        e.shutdown().unwrap();
    }
}
