//! Auto-upgrade profiles through the daemon's API, in-process on a real loopback port with a
//! real data directory: a release dated in the simulated provider's calendar reaches the
//! catalog at its fleet time and the profile's run is generated and started then, listed like
//! any run, and completes; `generateUpdateRun` answers 200 with the run's id or 204; bad
//! profiles are problems naming the field; profiles (and generating) take the admin role.

mod daemon_support;
mod http_support;
mod runtime_support;

use daemon_support::Daemon;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use waverun_host::api::Role;

/// Three members on 1.30.4 (upgrades take 5 minutes); a 1.30 patch is released every 6 fleet
/// hours, 1.30.5 to 1.30.9, and a 1.31 preview never counts.
const FLEET: &str = r#"
start: 2026-12-07T00:00:00Z
members:
  - {name: dev-1, group: dev, region: eastus, kubernetesVersion: 1.30.4, behavior: {upgradeMinutes: 5}, nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]}
  - {name: prod-1, group: prod, region: eastus, kubernetesVersion: 1.30.4, behavior: {upgradeMinutes: 5}, nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]}
  - {name: prod-2, group: prod, region: westeurope, kubernetesVersion: 1.30.4, behavior: {upgradeMinutes: 5}, nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]}
releases:
  kubernetes:
    - {version: 1.30.4, available: {'*': 2026-11-01T00:00:00Z}}
    - {version: 1.30.5, available: {'*': 2026-12-07T06:00:00Z}}
    - {version: 1.30.6, available: {'*': 2026-12-07T12:00:00Z}}
    - {version: 1.30.7, available: {'*': 2026-12-07T18:00:00Z}}
    - {version: 1.30.8, available: {'*': 2026-12-08T00:00:00Z}}
    - {version: 1.30.9, available: {'*': 2026-12-08T06:00:00Z}}
    - {version: 1.31.0, available: {'*': 2026-12-07T01:00:00Z}, preview: true}
  nodeImages:
    - {version: AKSUbuntu-2204gen2containerd-202411.03.0, available: {'*': 2026-11-01T00:00:00Z}}
"#;

/// The release instants of `FLEET`'s 1.30 patches.
const RELEASES: [(&str, &str); 5] = [
    ("1.30.5", "2026-12-07T06:00:00Z"),
    ("1.30.6", "2026-12-07T12:00:00Z"),
    ("1.30.7", "2026-12-07T18:00:00Z"),
    ("1.30.8", "2026-12-08T00:00:00Z"),
    ("1.30.9", "2026-12-08T06:00:00Z"),
];

const ADMIN: &str = "tok-admin-77c1e0";
const OPERATOR: &str = "tok-operator-1a9d42";

/// The daemon over `FLEET` at 3600× (one fleet hour a second).
fn daemon() -> (Daemon, tempfile::TempDir) {
    daemon_over(FLEET)
}

/// The daemon over `fleet` at 3600×.
fn daemon_over(fleet: &str) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.yaml");
    std::fs::write(&file, fleet).unwrap();
    let d = Daemon::start_fleet(
        &file,
        3600.0,
        &[
            ("admin", Role::Admin, ADMIN),
            ("operator", Role::Operator, OPERATOR),
        ],
    );
    (d, dir)
}

fn put(d: &Daemon, path: &str, token: &str, body: Value) -> http_support::Reply {
    d.call("PUT", path, Some(token), &[], Some(&body.to_string()))
}

fn rings_and_profile(d: &Daemon) {
    let strategy = json!({"properties": {"strategy": {"stages": [
        {"name": "test", "groups": [{"name": "dev"}]},
        {"name": "prod", "groups": [{"name": "prod", "maxConcurrency": "2"}]}]}}});
    let r = put(d, "/updateStrategies/rings", OPERATOR, strategy);
    assert_eq!(r.status, 201, "{}", r.body);
    let profile = json!({"properties": {
        "channel": "TargetKubernetesVersion",
        "targetKubernetesVersion": "1.30",
        "updateStrategyId": "/fleets/default/updateStrategies/rings",
        "nodeImageSelection": {"type": "Latest"}}});
    let r = put(d, "/autoUpgradeProfiles/patches", ADMIN, profile);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["properties"]["channel"], "TargetKubernetesVersion");
    assert_eq!(r.body["properties"]["provisioningState"], "Succeeded");
    assert!(r.etag.is_some());
}

fn fleet_time(d: &Daemon) -> String {
    d.get("", Some(ADMIN)).body["properties"]["fleetTime"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Polls (bounded) until `done` holds for the run's resource.
fn wait_run(d: &Daemon, run: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let r = d.get(&format!("/updateRuns/{run}"), Some(ADMIN));
        if r.status == 200 && done(&r.body) {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} not there in time: {} {}",
            r.status,
            r.body
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_release_in_the_simulated_calendar_generates_and_starts_the_profiles_run_which_completes() {
    let (d, _dir) = daemon();
    rings_and_profile(&d);
    // The first release after the profile exists is the one it acts on (however long the
    // daemon took to start, on a busy machine).
    let created = fleet_time(&d);
    let (version, release_at) = *RELEASES
        .iter()
        .find(|(_, at)| *at > created.as_str())
        .unwrap_or_else(|| panic!("the daemon took too long: fleet time {created}"));
    let run_name = format!(
        "auto-patches-targetkubernetesversion-{}",
        version.replace('.', "-")
    );
    let shown = d.get("/autoUpgradeProfiles/patches", Some(ADMIN)).body;
    assert!(shown["properties"]["autoUpgradeProfileStatus"]["lastTriggerStatus"].is_null());

    // The release reaches the catalog at its fleet time: the run is generated and started.
    let run = wait_run(&d, &run_name, |_| true);
    let p = &run["properties"];
    assert_eq!(
        p["autoUpgradeProfileId"],
        "/fleets/default/autoUpgradeProfiles/patches"
    );
    assert_eq!(
        p["updateStrategyId"],
        "/fleets/default/updateStrategies/rings"
    );
    assert_eq!(
        p["managedClusterUpdate"]["upgrade"]["kubernetesVersion"],
        version
    );
    assert_eq!(run["systemData"]["createdBy"], "autoUpgradeProfile:patches");
    let events = d.get("/events?$top=1000", Some(ADMIN)).body;
    let find = |kind: &str| -> Value {
        events["value"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == kind && e["run"] == run_name.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("no {kind}: {events}"))
    };
    let generated = find("RunGenerated");
    assert_eq!(generated["profile"], "patches");
    assert_eq!(generated["versions"], json!([version]));
    // Within 1 s of fleet time after the release (event-driven: the engine wakes at it).
    let at = |e: &Value| chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap()).unwrap();
    let release = chrono::DateTime::parse_from_rfc3339(release_at).unwrap();
    assert!(
        (at(&generated) - release).num_milliseconds().abs() <= 1000,
        "{generated}"
    );
    assert!((at(&find("RunStarted")) - release).num_milliseconds().abs() <= 1000);

    // The run completes through the strategy, and the profile says what it did.
    let done = wait_run(&d, &run_name, |r| {
        r["properties"]["status"]["status"]["state"] == "Completed"
    });
    assert_eq!(done["properties"]["status"]["stages"][1]["name"], "prod");
    let listed = d.get("/updateRuns", Some(ADMIN)).body;
    assert!(listed["value"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == run_name.as_str()));
    let status = d.get("/autoUpgradeProfiles/patches", Some(ADMIN)).body["properties"]
        ["autoUpgradeProfileStatus"]
        .clone();
    assert_eq!(status["lastTriggerStatus"], "Succeeded");
    // The profile has moved on to later releases meanwhile, or not yet.
    assert!(status["lastTriggerUpgradeVersions"][0].as_str() >= Some(version));
}

#[test]
fn generate_update_run_returns_the_runs_id_and_the_same_run_twice_also_on_a_disabled_profile() {
    // Hour-long upgrades: each release's run (three members one by one) runs for three fleet
    // hours, three seconds, of the six between releases, long enough to be seen running on a
    // loaded machine (with `FLEET`'s five minutes it ran for a quarter of a second).
    let fleet = FLEET.replace("upgradeMinutes: 5}", "upgradeMinutes: 60}");
    assert_eq!(fleet.matches("upgradeMinutes: 60}").count(), 3);
    let (d, _dir) = daemon_over(&fleet);
    // A Rapid profile without a strategy: members one by one.
    let r = put(
        &d,
        "/autoUpgradeProfiles/fast",
        ADMIN,
        json!({"properties": {"channel": "Rapid"}}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let gen_as = |name: &str, token: &str| {
        d.call(
            "POST",
            &format!("/autoUpgradeProfiles/{name}/generateUpdateRun"),
            Some(token),
            &[],
            None,
        )
    };
    let gen = |name: &str| gen_as(name, ADMIN);
    // Profiles, generateUpdateRun included, are the admin's (api.md section 4).
    assert_eq!(gen_as("fast", OPERATOR).status, 403);
    // Each release generates and starts a run; while it runs, generateUpdateRun returns it
    // (200 with its id, the same twice); once every member is at the target, 204.
    let mut seen_running = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !seen_running {
        let a = gen("fast");
        match a.status {
            200 => {
                let id = a.body["id"].as_str().unwrap().to_string();
                assert!(
                    id.starts_with("/fleets/default/updateRuns/auto-fast-rapid-1-30-"),
                    "{id}"
                );
                let b = gen("fast");
                // The run may end between the two calls; if it still runs, it is the same one.
                assert!(
                    b.status == 204 || b.body == a.body,
                    "{} {}",
                    b.status,
                    b.body
                );
                seen_running = true;
            }
            204 => std::thread::sleep(Duration::from_millis(20)),
            s => panic!("{s} {}", a.body),
        }
    }
    assert!(seen_running, "no generated run was seen running");
    // Disabled: asked, it still answers as an enabled one does (Azure's recorded answer): the
    // run for its target, or 204 when every member is at it; the profile's runs stay.
    let r = put(
        &d,
        "/autoUpgradeProfiles/fast",
        ADMIN,
        json!({"properties": {"channel": "Rapid", "disabled": true}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let asked = gen("fast");
    assert!(
        matches!(asked.status, 200 | 204),
        "{} {}",
        asked.status,
        asked.body
    );
    if asked.status == 200 {
        assert!(asked.body["id"]
            .as_str()
            .unwrap()
            .starts_with("/fleets/default/updateRuns/auto-fast-rapid-1-30-"));
    }
    assert_eq!(gen("nope").status, 404);
    // The audit log has the generation requests.
    let audit = d.get("/audit?$top=1000", Some(ADMIN)).body;
    let n = audit["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "autoUpgradeProfiles.generateUpdateRun")
        .count();
    assert!(n >= 3, "{audit}");
}

#[test]
fn bad_profiles_are_problems_naming_the_field_and_profiles_take_the_admin_role() {
    let (d, _dir) = daemon();
    let cases = [
        (
            json!({"properties": {"channel": "TargetKubernetesVersion"}}),
            "properties.targetKubernetesVersion",
        ),
        (
            json!({"properties": {"channel": "Rapid", "longTermSupport": true}}),
            "properties.longTermSupport",
        ),
        (
            json!({"properties": {"channel": "Fast"}}),
            "properties.channel",
        ),
        (
            json!({"properties": {"channel": "Rapid", "targetKubernetesVerison": "1.30"}}),
            "properties.targetKubernetesVerison",
        ),
        (
            json!({"properties": {"channel": "Rapid", "nodeImageSelection": {"type": "Custom"}}}),
            "properties.nodeImageSelection.type",
        ),
        (
            json!({"properties": {"channel": "NodeImage", "nodeImageSelection": {"type": "Latest"}}}),
            "properties.nodeImageSelection",
        ),
        (
            json!({"properties": {"channel": "Rapid", "updateStrategyId": "/fleets/default/updateStrategies/missing"}}),
            "properties.updateStrategyId",
        ),
    ];
    for (body, target) in cases {
        let r = put(&d, "/autoUpgradeProfiles/p", ADMIN, body.clone());
        assert!(
            r.status == 400 || r.status == 404,
            "{body}: {} {}",
            r.status,
            r.body
        );
        assert_eq!(r.body["target"], target, "{body}: {}", r.body);
    }
    let typo = put(
        &d,
        "/autoUpgradeProfiles/p",
        ADMIN,
        json!({"properties": {"channel": "Rapid", "targetKubernetesVerison": "1.30"}}),
    );
    assert!(typo.body["detail"]
        .as_str()
        .unwrap()
        .contains("targetKubernetesVersion"));
    // Nothing was stored.
    assert_eq!(d.get("/autoUpgradeProfiles/p", Some(ADMIN)).status, 404);
    // An operator may not create or delete a profile.
    let r = put(
        &d,
        "/autoUpgradeProfiles/p",
        OPERATOR,
        json!({"properties": {"channel": "Rapid"}}),
    );
    assert_eq!(r.status, 403);
    let r = put(
        &d,
        "/autoUpgradeProfiles/p",
        ADMIN,
        json!({"properties": {"channel": "Stable"}}),
    );
    assert_eq!(r.status, 201);
    // If-Match is honoured on delete with the ETag the profile is shown with.
    let shown = d.get("/autoUpgradeProfiles/p", Some(ADMIN));
    let r = d.call(
        "DELETE",
        "/autoUpgradeProfiles/p",
        Some(ADMIN),
        &[("if-match", "\"stale\"")],
        None,
    );
    assert_eq!(r.status, 412);
    let etag = shown.etag.unwrap();
    let r = d.call(
        "DELETE",
        "/autoUpgradeProfiles/p",
        Some(ADMIN),
        &[("if-match", &etag)],
        None,
    );
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(
        d.get("/autoUpgradeProfiles", Some(ADMIN)).body["value"],
        json!([])
    );
}
