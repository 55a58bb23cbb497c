//! Azure's own REST examples (`shared/reference/azure-fleet-examples`: 2026-06-01 GA and
//! 2026-06-02-preview, verbatim from Azure's REST API specification) sent to a real daemon on
//! ARM's paths (`/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/fleets/{fleet}/…?api-version=V`):
//! every example's answer has a status Azure lists for it, and its body covers the example's
//! shape — every key, its nesting, its JSON type, and enum values spelled as Azure spells them.
//! Values that depend on state (times, counts, which gate is pending) are not compared.
//!
//! The examples are read for shapes, not values: where they name things that cannot all hold
//! at once (ids of `myFleet` in a request to `fleet1`, a gate GUID nobody created), the request
//! is sent to what exists here instead, and the test says so at that step.

mod daemon_support;
mod http_support;
mod runtime_support;

use daemon_support::Daemon;
use http_support::Reply;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;

const SUB: &str = "00000000-0000-0000-0000-000000000000";
const RG: &str = "rg1";
const FLEET: &str = "fleet1";

fn examples_dir() -> PathBuf {
    runtime_support::workspace().join("../shared/reference/azure-fleet-examples")
}

/// A daemon serving `fleet1` over a simulated fleet whose members the examples name, on
/// Kubernetes 1.25 with 1.26.1 released (the examples' target); upgrades take 2 fleet minutes,
/// and fleet time runs `time_scale` times real time.
fn daemon_at(dir: &std::path::Path, time_scale: f64) -> Daemon {
    let member = |name: &str, group: &str, labels: Value| {
        json!({
            "name": name, "group": group, "labels": labels, "region": "eastus",
            "behavior": {"upgradeMinutes": 2},
            "kubernetesVersion": "1.25.6",
            "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
        })
    };
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "members": [
            member("member-1", "staging", json!({"env": "production"})),
            member("member1", "group-a", json!({"tier": "frontend"})),
            member("member-one", "group-a", json!({"tier": "frontend"})),
        ],
        "releases": {
            "kubernetes": [{"version": "1.26.1", "available": since}],
            "nodeImages": [{"version": "AKSUbuntu-2204-202611.01.0", "available": since}],
        },
    });
    let path = dir.join("fleet.json");
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    Daemon::start_with(&path, time_scale, &[], |c| c.fleet = FLEET.to_string())
}

/// [`daemon_at`] in real time: nothing finishes while a test looks.
fn daemon(dir: &std::path::Path) -> Daemon {
    daemon_at(dir, 1.0)
}

/// The ARM URL of `rest` (under the fleet) at `version`.
fn arm(d: &Daemon, version: &str, rest: &str) -> String {
    format!(
        "{}/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.ContainerService/fleets/{FLEET}{rest}?api-version={version}",
        d.root
    )
}

/// An example file, read.
struct Example {
    name: String,
    version: String,
    doc: Value,
}

impl Example {
    fn parameter(&self, key: &str) -> Option<&Value> {
        self.doc["parameters"].get(key)
    }

    /// The request body, with ids of the examples' other fleets (`myFleet`, `fleet-1`) made
    /// this fleet's.
    fn body(&self) -> Option<String> {
        let body = ["resource", "properties", "body"]
            .iter()
            .find_map(|k| self.parameter(k))?;
        let text = body.to_string();
        Some(
            text.replace("/fleets/myFleet/", "/fleets/fleet1/")
                .replace("/fleets/fleet-1/", "/fleets/fleet1/")
                .replace(
                    "/resourceGroups/rgfleets/",
                    &format!("/resourceGroups/{RG}/"),
                ),
        )
    }

    /// The statuses Azure lists for it.
    fn statuses(&self) -> BTreeSet<u16> {
        self.doc["responses"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.parse().unwrap())
            .collect()
    }

    /// Sends it (`rest` under the fleet, the example's own path parameters already in it) and
    /// checks the answer; returns it.
    fn send(&self, d: &Daemon, method: &str, rest: &str, seen: &mut Vec<String>) -> Reply {
        let body = self.body();
        let r = d.call(
            method,
            &arm(d, &self.version, rest),
            None,
            &[],
            body.as_deref(),
        );
        let what = format!("{} {} {method} {rest}", self.version, self.name);
        assert!(
            self.statuses().contains(&r.status),
            "{what}: status {} is not one Azure lists ({:?}): {}",
            r.status,
            self.statuses(),
            r.body
        );
        if let Some(expected) = self.doc["responses"][r.status.to_string()].get("body") {
            let mut problems = Vec::new();
            covers(expected, &r.body, "", &mut problems);
            assert!(
                problems.is_empty(),
                "{what}: the answer does not cover the example's shape:\n  {}\nanswer: {}",
                problems.join("\n  "),
                serde_json::to_string_pretty(&r.body).unwrap()
            );
        }
        seen.push(format!("{}/{}", self.version, self.name));
        r
    }
}

fn example(version: &str, name: &str) -> Option<Example> {
    let path = examples_dir().join(version).join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).ok()?;
    Some(Example {
        name: name.to_string(),
        version: version.to_string(),
        doc: serde_json::from_str(&text).unwrap(),
    })
}

/// Keys (or the ends of their paths) that hold only in some states, and the state.
const STATE_DEPENDENT: &[(&str, &str)] = &[
    ("properties.group", "only on a member given an update group"),
    ("lastOperationError", "only after a member operation failed"),
    (
        "updateRunProperties.group",
        "only on a group's gate (a stage's has none)",
    ),
    ("nextLink", "only when there is a next page"),
    ("gateId", "only on a gate that has been reached"),
    ("error", "only on what failed"),
    ("startTime", "only once started"),
    ("completedTime", "only once completed"),
    ("absoluteStartTime", "only once the gate's time is resolved"),
];

/// Keys of Azure's that waverun does not serve, and why.
const NOT_SERVED: &[(&str, &str)] = &[
    ("meshProperties", "cluster mesh, not an upgrade concern"),
    (
        "lastOperationId",
        "the id of Azure's own last operation on the member resource",
    ),
];

/// Keys whose values are maps of names chosen by people (their keys are data, not shape).
const MAPS: &[&str] = &["labels"];

/// Enum spellings, as Azure's specification lists them.
fn enum_values(key: &str) -> Option<&'static [&'static str]> {
    Some(match key {
        "state" => &[
            "NotStarted",
            "Running",
            "Stopping",
            "Stopped",
            "Skipped",
            "Failed",
            "Pending",
            "Completed",
        ],
        "provisioningState" => &[
            "Succeeded",
            "Failed",
            "Canceled",
            "Joining",
            "Leaving",
            "Updating",
        ],
        "gateType" => &["Approval", "ScheduledStart"],
        "timing" => &["Before", "After"],
        "channel" => &[
            "Stable",
            "Rapid",
            "NodeImage",
            "TargetKubernetesVersion",
            "SecurityPatch",
        ],
        "createdByType" | "lastModifiedByType" => {
            &["User", "Application", "ManagedIdentity", "Key"]
        }
        _ => return None,
    })
}

/// Adds to `problems` every way `actual` fails to cover `expected`'s shape.
fn covers(expected: &Value, actual: &Value, at: &str, problems: &mut Vec<String>) {
    let key = at.rsplit(['.', '[']).next().unwrap_or("");
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match a.get(k) {
                    Some(av) if MAPS.contains(&k.as_str()) => {
                        if !av.is_object() {
                            problems.push(format!("{path}: a map in Azure's, {av} here"));
                        }
                    }
                    Some(av) => covers(ev, av, &path, problems),
                    None if STATE_DEPENDENT
                        .iter()
                        .any(|(s, _)| path == *s || path.ends_with(&format!(".{s}")))
                        || NOT_SERVED.iter().any(|(s, _)| s == k) => {}
                    None => problems.push(format!("{path}: missing")),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            // Which items there are depends on state; the first of each shows the shape.
            if let (Some(e0), Some(a0)) = (e.first(), a.first()) {
                covers(e0, a0, &format!("{at}[0]"), problems);
            }
        }
        (Value::String(_), Value::String(s)) => {
            if let Some(values) = enum_values(key) {
                if !values.contains(&s.as_str()) {
                    problems.push(format!("{at}: {s:?} is not one of Azure's {values:?}"));
                }
            }
        }
        (Value::Number(_), Value::Number(_)) | (Value::Bool(_), Value::Bool(_)) => {}
        (Value::Null, _) => {}
        (e, a) => problems.push(format!("{at}: {a} here where Azure's has {e}")),
    }
}

/// A gate of the fleet whose `gateType` is `kind` and `state` is Pending.
fn pending_gate(d: &Daemon, version: &str, kind: &str) -> String {
    let list = d.get(&arm(d, version, "/gates"), None);
    assert_eq!(list.status, 200, "{}", list.body);
    list.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["properties"]["gateType"] == kind && g["properties"]["state"] == "Pending")
        .unwrap_or_else(|| panic!("no pending {kind} gate: {}", list.body))["name"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every example of `version`, in an order in which each finds what it needs; returns the
/// examples sent.
fn replay(version: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path());
    let mut seen = Vec::new();
    let ex = |name: &str| example(version, name);
    let param = |e: &Example, k: &str| e.parameter(k).unwrap().as_str().unwrap().to_string();

    // Members are created by their Azure ids, as Azure's clients create them.
    for m in ["member1", "member-one"] {
        let body = json!({"properties": {"clusterResourceId": format!(
            "/subscriptions/{SUB}/resourceGroups/clusters/providers/Microsoft.ContainerService/managedClusters/{m}"),
            "group": "group-a", "labels": {"tier": "frontend"}}});
        let r = d.call(
            "PUT",
            &arm(&d, version, &format!("/members/{m}")),
            None,
            &[],
            Some(&body.to_string()),
        );
        assert!(matches!(r.status, 200 | 201), "{}", r.body);
    }
    if let Some(e) = ex("FleetMembers_Create") {
        let name = param(&e, "fleetMemberName");
        e.send(&d, "PUT", &format!("/members/{name}"), &mut seen);
    }
    if let Some(e) = ex("FleetMembers_Update") {
        let name = param(&e, "fleetMemberName");
        e.send(&d, "PATCH", &format!("/members/{name}"), &mut seen);
    }
    if let Some(e) = ex("FleetMembers_Get") {
        let name = param(&e, "fleetMemberName");
        let r = e.send(&d, "GET", &format!("/members/{name}"), &mut seen);
        assert!(r.body["id"]
            .as_str()
            .unwrap()
            .starts_with(&format!("/subscriptions/{SUB}/resourceGroups/{RG}/")));
    }
    if let Some(e) = ex("UpdateStrategies_CreateOrUpdate") {
        let name = param(&e, "updateStrategyName");
        e.send(&d, "PUT", &format!("/updateStrategies/{name}"), &mut seen);
    }
    let run = ex("UpdateRuns_CreateOrUpdate").map(|e| {
        let name = param(&e, "updateRunName");
        let r = e.send(&d, "PUT", &format!("/updateRuns/{name}"), &mut seen);
        // Both an updateStrategyId and a strategy: the strategy given is the one shown.
        let sent: Value = serde_json::from_str(&e.body().unwrap()).unwrap();
        assert_eq!(
            r.body["properties"]["strategy"]["stages"][0]["maxConcurrency"],
            sent["properties"]["strategy"]["stages"][0]["maxConcurrency"]
        );
        name
    });
    if let Some(e) = ex("UpdateRuns_Get") {
        // The run as the example shows it was made (its strategy has limits the create
        // example's has not): written so first, as a person would change a run not started.
        let name = param(&e, "updateRunName");
        let shown = &e.doc["responses"]["200"]["body"]["properties"];
        let body = json!({"properties": {
            "strategy": shown["strategy"],
            "managedClusterUpdate": shown["managedClusterUpdate"],
        }});
        let r = d.call(
            "PUT",
            &arm(&d, version, &format!("/updateRuns/{name}")),
            None,
            &[],
            Some(&body.to_string()),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        e.send(&d, "GET", &format!("/updateRuns/{name}"), &mut seen);
    }
    if let Some(e) = ex("UpdateRuns_ListByFleet") {
        e.send(&d, "GET", "/updateRuns", &mut seen);
    }
    if let Some(e) = ex("UpdateRuns_Start") {
        let name = param(&e, "updateRunName");
        let r = e.send(&d, "POST", &format!("/updateRuns/{name}/start"), &mut seen);
        assert_ne!(
            r.body["properties"]["status"]["status"]["state"],
            "NotStarted"
        );
    } else if let Some(name) = &run {
        // The GA examples have no start: the run is started the same way.
        let r = d.call(
            "POST",
            &arm(&d, version, &format!("/updateRuns/{name}/start")),
            None,
            &[],
            None,
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    if let Some(e) = ex("Gates_ListByFleet") {
        let r = e.send(&d, "GET", "/gates", &mut seen);
        assert!(
            !r.body["value"].as_array().unwrap().is_empty(),
            "{}",
            r.body
        );
    }
    if let Some(e) = ex("Gates_Get") {
        // The example's GUID names no gate here: the pending approval gate is read instead.
        let gate = pending_gate(&d, version, "Approval");
        e.send(&d, "GET", &format!("/gates/{gate}"), &mut seen);
    }
    if let Some(e) = ex("Gates_Get_ScheduledStart") {
        // A run whose first gate is the example's (Friday 18:00 at -05:00), started.
        let strategy = json!({"properties": {"strategy": {"stages": [{"name": "stage1",
            "groups": [{"name": "staging",
                "beforeGates": [{"displayName": "Wait for Friday evening", "type": "ScheduledStart",
                    "scheduledStartConfiguration": {"startDay": "Friday", "startTime": "18:00", "utcOffset": "-05:00"}}]}]}]},
            "managedClusterUpdate": {"upgrade": {"type": "NodeImageOnly"}}}});
        let r = d.call(
            "PUT",
            &arm(&d, version, "/updateRuns/friday"),
            None,
            &[],
            Some(&strategy.to_string()),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let r = d.call(
            "POST",
            &arm(&d, version, "/updateRuns/friday/start"),
            None,
            &[],
            None,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let gate = pending_gate(&d, version, "ScheduledStart");
        let r = e.send(&d, "GET", &format!("/gates/{gate}"), &mut seen);
        let p = &r.body["properties"]["scheduledStartProperties"];
        assert_eq!(
            (&p["startDay"], &p["startTime"], &p["utcOffset"]),
            (&json!("Friday"), &json!("18:00"), &json!("-05:00"))
        );
        let r = d.call(
            "POST",
            &arm(&d, version, "/updateRuns/friday/stop"),
            None,
            &[],
            None,
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    if let Some(e) = ex("Gates_Update") {
        let gate = pending_gate(&d, version, "Approval");
        let r = e.send(&d, "PATCH", &format!("/gates/{gate}"), &mut seen);
        if r.status == 200 {
            assert_eq!(r.body["properties"]["state"], "Completed");
        }
    }
    if let Some(e) = ex("UpdateRuns_Skip") {
        let name = param(&e, "updateRunName");
        e.send(&d, "POST", &format!("/updateRuns/{name}/skip"), &mut seen);
    }
    if let Some(e) = ex("UpdateRuns_Stop") {
        let name = param(&e, "updateRunName");
        e.send(&d, "POST", &format!("/updateRuns/{name}/stop"), &mut seen);
    }
    if let Some(e) = ex("AutoUpgradeProfiles_CreateOrUpdate") {
        let name = param(&e, "autoUpgradeProfileName");
        e.send(
            &d,
            "PUT",
            &format!("/autoUpgradeProfiles/{name}"),
            &mut seen,
        );
    }
    if let Some(e) = ex("AutoUpgradeProfiles_Get") {
        let name = param(&e, "autoUpgradeProfileName");
        e.send(
            &d,
            "GET",
            &format!("/autoUpgradeProfiles/{name}"),
            &mut seen,
        );
    }
    if let Some(e) = ex("AutoUpgradeProfiles_ListByFleet") {
        e.send(&d, "GET", "/autoUpgradeProfiles", &mut seen);
    }
    if let Some(e) = ex("AutoUpgradeProfileOperations_GenerateUpdateRun") {
        // The example's profile (`aup1`) is the one created above, under its own name.
        let body = ex("AutoUpgradeProfiles_CreateOrUpdate")
            .unwrap()
            .body()
            .unwrap();
        let r = d.call(
            "PUT",
            &arm(&d, version, "/autoUpgradeProfiles/aup1"),
            None,
            &[],
            Some(&body),
        );
        assert!(matches!(r.status, 200 | 201), "{}", r.body);
        let r = e.send(
            &d,
            "POST",
            "/autoUpgradeProfiles/aup1/generateUpdateRun",
            &mut seen,
        );
        if r.status == 202 {
            // The operation ARM points at has succeeded; its result is empty.
            let op = r.header("azure-asyncoperation").unwrap().to_string();
            let s = d.get(&format!("{}{op}", d.root), None);
            assert_eq!(
                (s.status, &s.body["status"]),
                (200, &json!("Succeeded")),
                "{}",
                s.body
            );
            let loc = r.header("location").unwrap().to_string();
            assert_eq!(d.get(&format!("{}{loc}", d.root), None).status, 204);
        }
    }
    if let Some(e) = ex("UpdateRuns_Delete") {
        let name = param(&e, "updateRunName");
        e.send(&d, "DELETE", &format!("/updateRuns/{name}"), &mut seen);
    }
    if let Some(e) = ex("UpdateStrategies_Delete") {
        let name = param(&e, "updateStrategyName");
        e.send(
            &d,
            "DELETE",
            &format!("/updateStrategies/{name}"),
            &mut seen,
        );
    }
    if let Some(e) = ex("AutoUpgradeProfiles_Delete") {
        let name = param(&e, "autoUpgradeProfileName");
        e.send(
            &d,
            "DELETE",
            &format!("/autoUpgradeProfiles/{name}"),
            &mut seen,
        );
    }
    seen
}

/// The example files of `version`.
fn files(version: &str) -> BTreeSet<String> {
    std::fs::read_dir(examples_dir().join(version))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".json").map(|s| format!("{version}/{s}")))
        .collect()
}

#[test]
fn every_ga_example_answers_with_a_listed_status_in_azures_shape() {
    let seen: BTreeSet<String> = replay("2026-06-01").into_iter().collect();
    assert_eq!(seen, files("2026-06-01"));
}

#[test]
fn every_preview_example_answers_with_a_listed_status_in_azures_shape() {
    let seen: BTreeSet<String> = replay("2026-06-02-preview").into_iter().collect();
    assert_eq!(seen, files("2026-06-02-preview"));
}

/// A run whose stage's `maxConcurrency` is above 100%.
const BAD_RUN: &str = r#"{"properties": {"strategy": {"stages": [{"name": "s", "maxConcurrency": "120%", "groups": [{"name": "g"}]}]},
    "managedClusterUpdate": {"upgrade": {"type": "NodeImageOnly"}}}}"#;

#[test]
fn arm_paths_refuse_a_missing_or_unknown_api_version_in_azures_error_shape() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path());
    let base = format!(
        "{}/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.ContainerService/fleets/{FLEET}/updateRuns",
        d.root
    );
    let r = d.get(&base, None);
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], "MissingApiVersionParameter");
    let r = d.get(&format!("{base}?api-version=2019-01-01"), None);
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], "NoRegisteredProviderFound");
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("2026-06-01"));
    // A refusal of the API itself, in Azure's shape, naming the field.
    let r = d.call(
        "PUT",
        &format!("{base}/bad?api-version=2026-06-01"),
        None,
        &[],
        Some(BAD_RUN),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.header("x-ms-error-code"), Some("InvalidField"));
    assert_eq!(r.body["error"]["code"], "InvalidField");
    assert_eq!(
        r.body["error"]["target"],
        "properties.strategy.stages[0].maxConcurrency"
    );
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("120%"));
    // waverun's own paths keep RFC 9457, with Azure's `message` beside `detail`.
    let r = d.call(
        "PUT",
        &format!("{}/api/v1/fleets/{FLEET}/updateRuns/bad", d.root),
        None,
        &[],
        Some(BAD_RUN),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.body["message"], r.body["detail"]);
    assert!(r.body["message"].as_str().unwrap().contains("120%"));
}

#[test]
fn deleting_a_started_run_stops_it_lets_its_upgrades_finish_and_ends_its_operation_when_it_is_gone()
{
    let dir = tempfile::tempdir().unwrap();
    let d = daemon_at(dir.path(), 60.0);
    let v = "2026-06-01";
    let body = json!({"properties": {
        "strategy": {"stages": [{"name": "s", "groups": [{"name": "group-a"}]}]},
        "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.26.1"},
            "nodeImageSelection": {"type": "Latest"}}}});
    let r = d.call(
        "PUT",
        &arm(&d, v, "/updateRuns/doomed"),
        None,
        &[],
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = d.call(
        "POST",
        &arm(&d, v, "/updateRuns/doomed/start"),
        None,
        &[],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let in_flight = http_support::eventually(30, "a member in flight", || {
        let run = d.get(&arm(&d, v, "/updateRuns/doomed"), None).body;
        let members = run["properties"]["status"]["stages"][0]["groups"][0]["members"].clone();
        members
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["status"]["state"] == "Running")
            .map(|m| m["name"].as_str().unwrap().to_string())
    });
    // Azure accepts the deletion of a started run: 202 and an operation to follow.
    let r = d.call("DELETE", &arm(&d, v, "/updateRuns/doomed"), None, &[], None);
    assert_eq!(r.status, 202, "{}", r.body);
    let op = r.header("azure-asyncoperation").unwrap().to_string();
    let result = r.header("location").unwrap().to_string();
    assert!(
        op.starts_with(&format!(
            "/subscriptions/{SUB}/providers/Microsoft.ContainerService/locations/"
        )),
        "{op}"
    );
    let status = http_support::eventually(60, "the deletion to end", || {
        let s = d.get(&format!("{}{op}", d.root), None);
        assert_eq!(s.status, 200, "{}", s.body);
        let state = s.body["status"].as_str().unwrap().to_string();
        assert!(
            matches!(state.as_str(), "InProgress" | "Succeeded"),
            "{state}"
        );
        (state == "Succeeded").then_some(s.body)
    });
    assert_eq!(status["status"], "Succeeded");
    assert_eq!(d.get(&format!("{}{result}", d.root), None).status, 204);
    let gone = d.get(&arm(&d, v, "/updateRuns/doomed"), None);
    assert_eq!(gone.status, 404);
    assert_eq!(gone.body["error"]["code"], "NotFound");
    // The upgrade in flight finished and was recorded on its member.
    http_support::eventually(30, "the member's upgrade recorded", || {
        let m = d.get(&arm(&d, v, &format!("/members/{in_flight}")), None);
        (m.body["properties"]["status"]["kubernetesVersion"] == "1.26.1").then_some(())
    });
    // And the audit log says who deleted it, once it had stopped.
    let audit = d.get(
        &format!("{}/api/v1/fleets/{FLEET}/audit?$top=1000", d.root),
        None,
    );
    assert!(
        audit.body["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "updateRuns.delete"
                && e["detail"]
                    .as_str()
                    .is_some_and(|t| t.contains("once stopped"))),
        "{}",
        audit.body
    );
}
