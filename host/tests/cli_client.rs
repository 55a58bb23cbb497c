//! The CLI against a real daemon: `waverun serve` on an ephemeral loopback port with a small
//! simulated fleet, and the `waverun member | updatestrategy | updaterun | gate` verbs run as
//! child processes, in table, JSON and YAML. An Azure strategy file round-trips with every
//! field; `updaterun watch` in a pseudo-terminal shows the gate, takes an approval made from a
//! second command and ends with the run; `wait`'s exit codes; API and connection errors;
//! `eventsubscription`'s verbs against a receiver that verifies what it gets.

mod http_support;
mod process_support;
mod runtime_support;
mod webhook_support;

use process_support::Life;
use serde_json::{json, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Six clusters; upgrades take 10 fleet minutes, a second of real time at this scale.
const TIME_SCALE: &str = "600";

fn fleet_file(dir: &Path) -> PathBuf {
    let members: Vec<Value> = (1..=6)
        .map(|i| {
            json!({
                "name": format!("m{i}"),
                "region": "eastus",
                "labels": {"ring": if i <= 2 { "canary" } else { "main" }},
                "kubernetesVersion": "1.33.2",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
                "behavior": {"upgradeMinutes": 10},
            })
        })
        .collect();
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "seed": 1,
        "members": members,
        "releases": {
            "kubernetes": [{"version": "1.34.1", "available": since}],
            "nodeImages": [{"version": "AKSUbuntu-2204-202612.01.0", "available": since}],
        },
    });
    let path = dir.join("fleet.json");
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    path
}

/// A strategy as `az fleet updatestrategy show` prints an Azure resource, with the fields
/// Azure's own CLI drops: selectors, limits, a scheduled start.
fn azure_strategy_file(dir: &Path) -> PathBuf {
    let doc = json!({
        "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/fleets/f/updateStrategies/azure",
        "name": "azure",
        "type": "Microsoft.ContainerService/fleets/updateStrategies",
        "eTag": "\"abc\"",
        "properties": {
            "provisioningState": "Succeeded",
            "strategy": {"stages": [
                {"name": "canary",
                 "groups": [{"name": "canary", "memberSelector": {"byLabel": "ring=canary"},
                             "maxConcurrency": "50%", "maxAllowedFailures": "1"}],
                 "afterStageWaitInSeconds": 60},
                {"name": "main",
                 "beforeGates": [{"type": "Approval", "displayName": "go on"},
                                 {"type": "ScheduledStart", "displayName": "Friday evening",
                                  "scheduledStartConfiguration":
                                    {"startDay": "Friday", "startTime": "18:00", "utcOffset": "-05:00"}}],
                 "memberSelector": {"byLabel": "ring=main"},
                 "maxConcurrency": "2", "maxAllowedFailures": "25%"},
            ]},
        },
    });
    let path = dir.join("azure-strategy.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

/// `waverun ARGS` against `server`, stdin closed, stdout a pipe (so JSON unless `-o`).
fn cli(server: &str, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(args)
        .env("WAVERUN_SERVER", server)
        .env_remove("WAVERUN_TOKEN")
        .env_remove("WAVERUN_FLEET_NAME")
        .stdin(Stdio::null())
        .output()
        .expect("waverun runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

fn ok(server: &str, args: &[&str]) -> Out {
    let o = cli(server, args);
    assert_eq!(
        o.code, 0,
        "waverun {args:?} exited {}: {}{}",
        o.code, o.stdout, o.stderr
    );
    o
}

/// A daemon with the fleet, no tokens (loopback): its base URL.
fn daemon(dir: &Path) -> (Life, String) {
    let fleet = fleet_file(dir);
    let data = dir.join("data");
    let life = Life::start(
        &[
            "--time-scale",
            TIME_SCALE,
            "--data-dir",
            data.to_str().unwrap(),
            "--fleet",
            fleet.to_str().unwrap(),
        ],
        &[],
        &dir.join("daemon.log"),
    );
    assert!(life.ready(60), "the daemon never got ready");
    let server = life.api.base.split("/api/").next().unwrap().to_string();
    (life, server)
}

fn two_stage_strategy(server: &str) {
    ok(
        server,
        &[
            "updatestrategy",
            "create",
            "-n",
            "two",
            "--stages",
            r#"{"stages":[{"name":"canary","memberSelector":{"byLabel":"ring=canary"}},
                {"name":"main","beforeGates":[{"type":"Approval","displayName":"go on"}],
                 "memberSelector":{"byLabel":"ring=main"},"maxConcurrency":"2"}]}"#,
        ],
    );
}

#[test]
fn every_verb_answers_in_table_json_and_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let (life, s) = daemon(dir.path());
    let s = s.as_str();

    // member: create is an upsert (the fleet file registered m1 already), update, show, list.
    let m = ok(
        s,
        &[
            "member",
            "create",
            "-n",
            "m1",
            "--update-group",
            "g1",
            "--labels",
            "ring=canary tier=web",
        ],
    )
    .json();
    assert_eq!(m["name"], "m1");
    assert_eq!(m["group"], "g1", "flattened: properties at the top");
    assert_eq!(m["labels"], json!({"ring": "canary", "tier": "web"}));
    let m = ok(
        s,
        &["member", "update", "-n", "m1", "--labels", "ring=canary"],
    )
    .json();
    assert_eq!(m["labels"], json!({"ring": "canary"}));
    assert_eq!(m["group"], "g1", "update keeps what it was not given");
    let y = ok(s, &["member", "show", "-n", "m1", "-o", "yaml"]).stdout;
    assert!(
        y.contains("name: m1") && y.contains("kubernetesVersion: \"1.33.2\""),
        "{y}"
    );
    let t = ok(s, &["member", "list", "-o", "table"]).stdout;
    assert!(t.starts_with("NAME"), "{t}");
    assert_eq!(t.lines().count(), 7, "a header and six members: {t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("m1 ") && l.contains("g1") && l.contains("1.33.2")),
        "{t}"
    );
    let list = ok(s, &["member", "list"]).json();
    assert_eq!(list.as_array().unwrap().len(), 6);

    // updatestrategy: create, show (table, json, yaml), list.
    two_stage_strategy(s);
    let t = ok(s, &["updatestrategy", "show", "-n", "two", "-o", "table"]).stdout;
    assert!(
        t.contains("stage main") && t.contains("Approval \"go on\""),
        "{t}"
    );
    let j = ok(s, &["updatestrategy", "show", "-n", "two", "-o", "json"]).json();
    assert_eq!(j["strategy"]["stages"][1]["maxConcurrency"], "2");
    let y = ok(s, &["updatestrategy", "show", "-n", "two", "-o", "yaml"]).stdout;
    assert!(
        y.contains("strategy:") && y.contains("maxConcurrency:"),
        "{y}"
    );
    let t = ok(s, &["updatestrategy", "list", "-o", "table"]).stdout;
    assert!(t.contains("canary → main"), "{t}");

    // A run stopped as soon as it starts: `stop` waits until it is Stopped (upgrades in flight
    // finish first), and a stopped run can be deleted.
    ok(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "r0",
            "--upgrade-type",
            "Full",
            "--kubernetes-version",
            "1.34.1",
            "--update-strategy-name",
            "two",
            "--start",
        ],
    );
    let r = ok(s, &["updaterun", "stop", "-n", "r0", "--timeout", "2m"]).json();
    assert_eq!(r["status"]["status"]["state"], "Stopped", "{r}");
    ok(s, &["updaterun", "delete", "-n", "r0", "--yes"]);

    // updaterun: create (the hint on stderr), list, plan, start, the gate, wait.
    let c = ok(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "r1",
            "--upgrade-type",
            "Full",
            "--kubernetes-version",
            "1.34.1",
            "--update-strategy-name",
            "two",
        ],
    );
    assert_eq!(c.json()["status"]["status"]["state"], "NotStarted");
    assert!(
        c.stderr.contains("waverun updaterun start -n r1"),
        "{}",
        c.stderr
    );
    let t = ok(s, &["updaterun", "list", "-o", "table"]).stdout;
    assert!(
        t.lines()
            .any(|l| l.starts_with("r1 ") && l.contains("NotStarted") && l.contains("1.34.1")),
        "{t}"
    );
    let p = ok(s, &["updaterun", "plan", "-n", "r1", "-o", "table"]).stdout;
    assert!(p.contains("canary") && p.contains("m3"), "{p}");
    let p = ok(s, &["updaterun", "plan", "-n", "r1", "-o", "json"]).json();
    assert_eq!(p["run"], "r1");
    let r = ok(s, &["updaterun", "start", "-n", "r1"]).json();
    // r0 took the canaries to the target already: r1 may be at the gate at once (Pending).
    let state = r["status"]["status"]["state"].as_str().unwrap();
    assert!(matches!(state, "Running" | "Pending"), "{r}");
    let f = ok(s, &["updaterun", "forecast", "-n", "r1", "-o", "table"]).stdout;
    assert!(
        f.contains("expected finish") && f.contains("stage main"),
        "{f}"
    );
    // The gate, once the canary stage is done.
    let gate = {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let gates = ok(
                s,
                &["gate", "list", "--state-filter", "Pending", "--run", "r1"],
            )
            .json();
            if let Some(g) = gates.as_array().unwrap().first() {
                break g.clone();
            }
            assert!(Instant::now() < end, "the gate never became pending");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let id = gate["name"].as_str().unwrap().to_string();
    assert_eq!(gate["displayName"], "go on");
    let t = ok(
        s,
        &["gate", "list", "--state-filter", "Pending", "-o", "table"],
    )
    .stdout;
    assert!(
        t.contains(&format!("waverun gate approve --gate-name {id}")),
        "{t}"
    );
    let t = ok(s, &["updaterun", "show", "-n", "r1", "-o", "table"]).stdout;
    assert!(
        t.contains("Approval gate (Before) \"go on\": Pending"),
        "{t}"
    );
    assert!(
        t.contains(&format!("approve: waverun gate approve --gate-name {id}")),
        "{t}"
    );
    // The run's tree names the gate as Azure does: the gate resource's id.
    let r = ok(s, &["updaterun", "show", "-n", "r1", "-o", "json"]).json();
    assert_eq!(
        r["status"]["stages"][1]["beforeGates"][0]["gateId"],
        format!("/fleets/default/gates/{id}")
    );
    let g = ok(s, &["gate", "show", "--gate-name", &id, "-o", "yaml"]).stdout;
    assert!(g.contains("state: Pending"), "{g}");
    let g = ok(s, &["gate", "approve", "--gate-name", &id]).json();
    assert_eq!(g["state"], "Completed");
    let w = ok(
        s,
        &[
            "updaterun",
            "wait",
            "-n",
            "r1",
            "--custom",
            "Completed",
            "--timeout",
            "2m",
        ],
    );
    assert_eq!(w.stdout.trim(), "r1: Completed");
    let t = ok(s, &["updaterun", "show", "-n", "r1", "-o", "table"]).stdout;
    assert!(t.starts_with("Run r1: Completed"), "{t}");
    assert!(t.contains("▕██████████▏ 4/4"), "{t}");

    // Every reading verb in the three formats: the YAML is the JSON document; the table is
    // text for people, not a document.
    let reads: [&[&str]; 10] = [
        &["member", "show", "-n", "m1"],
        &["member", "list"],
        &["updatestrategy", "show", "-n", "two"],
        &["updatestrategy", "list"],
        &["updaterun", "show", "-n", "r1"],
        &["updaterun", "list"],
        &["updaterun", "plan", "-n", "r1"],
        &["updaterun", "forecast", "-n", "r1"],
        &["gate", "list", "--run", "r1"],
        &["gate", "show", "--gate-name", &id],
    ];
    for args in reads {
        let with = |o: &str| ok(s, &[args, &["-o", o]].concat());
        let mut json = with("json").json();
        let mut yaml: Value = serde_saphyr::from_str(&with("yaml").stdout)
            .unwrap_or_else(|e| panic!("{args:?} -o yaml: {e}"));
        // A forecast says when it was made: the two calls are moments apart.
        for doc in [&mut json, &mut yaml] {
            if let Some(o) = doc.as_object_mut() {
                o.remove("at");
            }
        }
        assert_eq!(yaml, json, "{args:?}: YAML and JSON say the same");
        let table = with("table").stdout;
        assert!(
            !table.trim().is_empty() && !table.trim_start().starts_with(['{', '[']),
            "{args:?} -o table: {table}"
        );
    }

    // A second run: a stage skipped before it starts, then run to its end, and deleted.
    let r2 = [
        "updaterun",
        "create",
        "-n",
        "r2",
        "--upgrade-type",
        "NodeImageOnly",
        "--update-strategy-name",
        "two",
    ];
    ok(s, &r2);
    ok(
        s,
        &["updaterun", "skip", "-n", "r2", "--targets", "Stage:main"],
    );
    ok(s, &["updaterun", "start", "-n", "r2", "-o", "yaml"]);
    // Every member has the newest images already (r0 and r1 took them there): r2 skips them all.
    ok(
        s,
        &[
            "updaterun",
            "wait",
            "-n",
            "r2",
            "--custom",
            "Skipped",
            "--timeout",
            "2m",
        ],
    );
    let r = ok(s, &["updaterun", "show", "-n", "r2"]).json();
    assert_eq!(r["status"]["stages"][1]["status"]["state"], "Skipped");
    ok(s, &["updaterun", "delete", "-n", "r2", "--yes"]);
    // A retry of the finished r1, over the members it skipped (the canaries r0 had done).
    let again = ok(
        s,
        &["updaterun", "retry", "-n", "r1", "--retry-name", "r1-again"],
    );
    assert!(
        again.stderr.contains("updaterun start -n r1-again"),
        "{}",
        again.stderr
    );
    let again = again.json();
    assert_eq!(again["name"], "r1-again");
    assert_eq!(again["retryOf"], "/fleets/default/updateRuns/r1");
    assert_eq!(again["status"]["status"]["state"], "NotStarted");
    let gone = cli(s, &["updaterun", "show", "-n", "r2"]);
    assert_eq!(gone.code, 1);
    assert!(gone.stderr.contains("r2"), "{}", gone.stderr);
    ok(s, &["updatestrategy", "delete", "-n", "two", "--yes"]);
    let t = ok(s, &["updatestrategy", "list", "-o", "table"]).stdout;
    assert_eq!(t.lines().count(), 1, "only the header: {t}");
    drop(life);
}

#[test]
fn autoupgradeprofile_verbs_create_show_list_generate_and_delete_with_azures_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (life, s) = daemon(dir.path());
    let s = s.as_str();
    two_stage_strategy(s);
    // Azure's flags: -c, --tkv, --lts, --update-strategy-id (or waverun's -name), --disabled.
    let p = ok(
        s,
        &[
            "autoupgradeprofile",
            "create",
            "-n",
            "fast",
            "-c",
            "Rapid",
            "--update-strategy-name",
            "two",
            "--node-image-selection",
            "Consistent",
        ],
    )
    .json();
    assert_eq!(p["channel"], "Rapid", "flattened: properties at the top");
    assert_eq!(
        p["updateStrategyId"],
        "/fleets/default/updateStrategies/two"
    );
    assert_eq!(p["nodeImageSelection"], json!({"type": "Consistent"}));
    assert_eq!(p["disabled"], false);
    // 1.34.1 was in the catalog when the profile was made: its baseline, nothing started; the
    // table says what it would target next.
    let t = ok(
        s,
        &["autoupgradeprofile", "show", "-n", "fast", "-o", "table"],
    )
    .stdout;
    assert!(t.starts_with("Auto-upgrade profile fast: Rapid"), "{t}");
    assert!(t.contains("last trigger: none yet"), "{t}");
    // generate-update-run creates the run, not started, and says how to start it; twice, the
    // same run.
    let g = ok(
        s,
        &["autoupgradeprofile", "generate-update-run", "-n", "fast"],
    );
    assert_eq!(
        g.json()["id"],
        "/fleets/default/updateRuns/auto-fast-rapid-1-34-1"
    );
    assert!(
        g.stderr
            .contains("updaterun start -n auto-fast-rapid-1-34-1"),
        "{}",
        g.stderr
    );
    let again = ok(
        s,
        &[
            "autoupgradeprofile",
            "generate-update-run",
            "--profile-name",
            "fast",
        ],
    );
    assert_eq!(again.json()["id"], g.json()["id"]);
    let run = ok(s, &["updaterun", "show", "-n", "auto-fast-rapid-1-34-1"]).json();
    assert_eq!(run["status"]["status"]["state"], "NotStarted");
    assert_eq!(
        run["autoUpgradeProfileId"],
        "/fleets/default/autoUpgradeProfiles/fast"
    );
    let list = ok(s, &["autoupgradeprofile", "list", "-o", "table"]).stdout;
    assert!(list.starts_with("NAME"), "{list}");
    assert!(
        list.lines().any(|l| l.starts_with("fast ")
            && l.contains("Rapid")
            && l.contains("two")
            && l.contains("Succeeded 1.34.1")
            && l.contains("auto-fast-rapid-1-34-1")),
        "{list}"
    );
    let y = ok(
        s,
        &["autoupgradeprofile", "show", "-n", "fast", "-o", "yaml"],
    )
    .stdout;
    assert!(y.contains("lastTriggerStatus: Succeeded"), "{y}");
    // Usage errors exit 2; the API's exit 1 naming the field.
    let bad = cli(
        s,
        &[
            "autoupgradeprofile",
            "create",
            "-n",
            "img",
            "-c",
            "NodeImage",
            "--node-image-selection",
            "Latest",
        ],
    );
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("--node-image-selection"),
        "{}",
        bad.stderr
    );
    let bad = cli(
        s,
        &[
            "autoupgradeprofile",
            "create",
            "-n",
            "pin",
            "-c",
            "TargetKubernetesVersion",
        ],
    );
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("properties.targetKubernetesVersion"),
        "{}",
        bad.stderr
    );
    let pinned = ok(
        s,
        &[
            "autoupgradeprofile",
            "create",
            "-n",
            "pin",
            "-c",
            "TargetKubernetesVersion",
            "--tkv",
            "1.34",
            "--lts",
            "--disabled",
        ],
    )
    .json();
    assert_eq!(pinned["targetKubernetesVersion"], "1.34");
    assert_eq!(pinned["longTermSupport"], true);
    assert_eq!(pinned["disabled"], true);
    // Disabled, it generates nothing by itself, but asked, it makes its run (as Azure's does).
    let asked = cli(
        s,
        &["autoupgradeprofile", "generate-update-run", "-n", "pin"],
    );
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert!(
        asked
            .stderr
            .contains("auto-pin-targetkubernetesversion-1-34-1 is not started"),
        "{}",
        asked.stderr
    );
    ok(s, &["autoupgradeprofile", "delete", "-n", "pin", "--yes"]);
    let gone = cli(s, &["autoupgradeprofile", "show", "-n", "pin"]);
    assert_eq!(gone.code, 1);
    drop(life);
}

#[test]
fn an_azure_strategy_file_round_trips_with_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let (_life, s) = daemon(dir.path());
    let file = azure_strategy_file(dir.path());
    ok(
        &s,
        &[
            "updatestrategy",
            "create",
            "-n",
            "azure",
            "--stages",
            file.to_str().unwrap(),
        ],
    );
    let shown = ok(&s, &["updatestrategy", "show", "-n", "azure", "-o", "json"]).json();
    let original: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let want: waverun_core::UpdateStrategy =
        serde_json::from_value(original["properties"]["strategy"].clone()).unwrap();
    let got: waverun_core::UpdateStrategy =
        serde_json::from_value(shown["strategy"].clone()).unwrap();
    assert_eq!(got, want, "every field kept");
    let text = serde_json::to_string(&shown["strategy"]).unwrap();
    for field in [
        "memberSelector",
        "maxConcurrency",
        "maxAllowedFailures",
        "ScheduledStart",
        "afterStageWaitInSeconds",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
    // What `show -o json` printed goes back in unchanged, through stdin.
    let mut child = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(["updatestrategy", "create", "-n", "copy", "--stages", "-"])
        .env("WAVERUN_SERVER", &s)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        shown.to_string().as_bytes(),
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    let copy = ok(&s, &["updatestrategy", "show", "-n", "copy", "-o", "json"]).json();
    assert_eq!(copy["strategy"], shown["strategy"]);
    // And YAML.
    let y = ok(&s, &["updatestrategy", "show", "-n", "azure", "-o", "yaml"]).stdout;
    let yaml_file = dir.path().join("azure.yaml");
    std::fs::write(&yaml_file, y).unwrap();
    ok(
        &s,
        &[
            "updatestrategy",
            "create",
            "-n",
            "from-yaml",
            "--stages",
            yaml_file.to_str().unwrap(),
        ],
    );
    let again = ok(
        &s,
        &["updatestrategy", "show", "-n", "from-yaml", "-o", "json"],
    )
    .json();
    assert_eq!(again["strategy"], shown["strategy"]);
}

#[test]
fn wait_exits_0_on_the_state_1_when_the_run_ends_otherwise_and_3_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (_life, s) = daemon(dir.path());
    let s = s.as_str();
    ok(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "quick",
            "--upgrade-type",
            "NodeImageOnly",
            "--stages",
            r#"{"stages":[{"name":"all","memberSelector":{"byLabel":"ring"}}]}"#,
        ],
    );
    let t = cli(
        s,
        &[
            "updaterun",
            "wait",
            "-n",
            "quick",
            "--custom",
            "Completed",
            "--timeout",
            "2s",
        ],
    );
    assert_eq!(t.code, 3, "timed out: {}{}", t.stdout, t.stderr);
    assert!(
        t.stderr.contains("timed out after 2s; it is NotStarted"),
        "{}",
        t.stderr
    );
    ok(s, &["updaterun", "start", "-n", "quick"]);
    let w = ok(
        s,
        &[
            "updaterun",
            "wait",
            "-n",
            "quick",
            "--custom",
            "Completed",
            "--timeout",
            "2m",
        ],
    );
    assert_eq!(w.stdout.trim(), "quick: Completed");
    let f = cli(
        s,
        &[
            "updaterun",
            "wait",
            "-n",
            "quick",
            "--custom",
            "Failed",
            "--timeout",
            "2m",
        ],
    );
    assert_eq!(f.code, 1);
    assert!(
        f.stderr
            .contains("update run quick ended Completed, not Failed"),
        "{}",
        f.stderr
    );
    let c = ok(
        s,
        &[
            "updaterun",
            "wait",
            "-n",
            "quick",
            "--created",
            "--timeout",
            "5s",
        ],
    );
    assert_eq!(c.stdout.trim(), "quick: created");
}

#[test]
fn api_errors_name_the_field_and_exit_1_and_bad_usage_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let (_life, s) = daemon(dir.path());
    let s = s.as_str();
    let e = cli(s, &["updaterun", "start", "-n", "nope"]);
    assert_eq!(e.code, 1);
    assert!(
        e.stderr.starts_with("error: ") && e.stderr.contains("nope"),
        "{}",
        e.stderr
    );
    let e = cli(
        s,
        &["member", "create", "-n", "m1", "--provider", "nowhere"],
    );
    assert_eq!(e.code, 1);
    assert!(
        e.stderr.contains("error: properties.provider: "),
        "{}",
        e.stderr
    );
    let e = cli(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "r",
            "--upgrade-type",
            "Full",
            "--kubernetes-version",
            "1.34.1",
            "--update-strategy-name",
            "missing",
        ],
    );
    assert_eq!(e.code, 1);
    assert!(
        e.stderr.contains("error: properties.updateStrategyId: "),
        "{}",
        e.stderr
    );
    // Caught before anything is sent: exit 2 with the field and the rule.
    let e = cli(
        s,
        &[
            "updatestrategy",
            "create",
            "-n",
            "bad",
            "--stages",
            r#"{"stages":[{"name":"a","maxConcurrency":"120%"}]}"#,
        ],
    );
    assert_eq!(e.code, 2);
    assert!(
        e.stderr.contains("maxConcurrency") && e.stderr.contains("120%"),
        "{}",
        e.stderr
    );
    let e = cli(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "r",
            "--upgrade-type",
            "Full",
            "--stages",
            "{}",
        ],
    );
    assert_eq!(e.code, 2);
    assert!(e.stderr.contains("--kubernetes-version"), "{}", e.stderr);
    let e = cli(s, &["updaterun", "skip", "-n", "r", "--targets", "stage:x"]);
    assert_eq!(e.code, 2);
    assert!(e.stderr.contains("--targets \"stage:x\""), "{}", e.stderr);
    let e = cli(s, &["updaterun", "delete", "-n", "r"]);
    assert_eq!(e.code, 1, "404 first: {}", e.stderr);
    let e = cli(
        s,
        &["gate", "update", "--gate-name", "x", "--state", "Skipped"],
    );
    assert_eq!(e.code, 2);
    assert!(e.stderr.contains("only Completed"), "{}", e.stderr);
    let e = cli(s, &["updaterun", "show"]);
    assert_eq!(e.code, 2, "clap's usage error: {}", e.stderr);
    // Deleting needs --yes without a terminal to ask on.
    two_stage_strategy(s);
    let e = cli(s, &["updatestrategy", "delete", "-n", "two"]);
    assert_eq!(e.code, 2);
    assert!(e.stderr.contains("--yes"), "{}", e.stderr);
}

#[test]
fn connection_errors_name_the_server_and_how_to_point_elsewhere() {
    // A port nobody listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("http://127.0.0.1:{port}");
    let e = cli(&server, &["updaterun", "list"]);
    assert_eq!(e.code, 1);
    assert!(
        e.stderr
            .contains(&format!("cannot reach the waverun daemon at {server}")),
        "{}",
        e.stderr
    );
    assert!(
        e.stderr.contains("--server") && e.stderr.contains("WAVERUN_SERVER"),
        "{}",
        e.stderr
    );
}

#[test]
fn member_import_takes_what_member_list_prints_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_life, server) = daemon(dir.path());
    // What `member list -o json` printed, with one member gone meanwhile and a label changed.
    let listed = ok(&server, &["member", "list", "-o", "json"]).stdout;
    let mut members: Vec<Value> = serde_json::from_str(&listed).unwrap();
    assert_eq!(members.len(), 6);
    members[0]["labels"]["ring"] = json!("first");
    let file = dir.path().join("members.json");
    std::fs::write(&file, serde_json::to_string(&members).unwrap()).unwrap();
    ok(&server, &["member", "delete", "-n", "m6", "--yes"]);
    let o = ok(
        &server,
        &[
            "member",
            "import",
            "--file",
            file.to_str().unwrap(),
            "-o",
            "table",
        ],
    );
    assert!(
        o.stdout
            .contains("6 members: 1 created, 5 registered again"),
        "{}",
        o.stdout
    );
    let m1 = ok(&server, &["member", "show", "-n", "m1", "-o", "json"]).stdout;
    let m1: Value = serde_json::from_str(&m1).unwrap();
    assert_eq!(m1["labels"]["ring"], "first");
    // --only-new refuses the whole file: they exist now. Exit 1, the member named.
    let o = cli(
        &server,
        &[
            "member",
            "import",
            "--file",
            file.to_str().unwrap(),
            "--only-new",
        ],
    );
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("\"m1\""), "{}", o.stderr);
    // YAML, as the API lists members; a member the provider does not know stops all of them.
    let yaml = dir.path().join("members.yaml");
    std::fs::write(
        &yaml,
        "value:\n- name: m2\n  properties: {labels: {ring: second}}\n- name: m9\n  properties: {}\n",
    )
    .unwrap();
    let o = cli(
        &server,
        &["member", "import", "--file", yaml.to_str().unwrap()],
    );
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("value[1].properties.clusterRef"),
        "{}",
        o.stderr
    );
    let m2 = ok(&server, &["member", "show", "-n", "m2", "-o", "json"]).stdout;
    assert_eq!(
        serde_json::from_str::<Value>(&m2).unwrap()["labels"]["ring"],
        "canary"
    );
    // A file that is not a list of members is bad usage (exit 2), before any request.
    std::fs::write(&yaml, "name: m2\n").unwrap();
    let o = cli(
        &server,
        &["member", "import", "--file", yaml.to_str().unwrap()],
    );
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("a list of members"), "{}", o.stderr);
}

#[test]
fn every_verb_s_help_ends_with_an_example() {
    let verbs: &[&[&str]] = &[
        &["simulate"],
        &["validate"],
        &["plan"],
        &["serve"],
        &["demo"],
        &["completions"],
        &["member", "create"],
        &["member", "update"],
        &["member", "show"],
        &["member", "list"],
        &["member", "import"],
        &["member", "delete"],
        &["updatestrategy", "create"],
        &["updatestrategy", "show"],
        &["updatestrategy", "list"],
        &["updatestrategy", "delete"],
        &["updaterun", "create"],
        &["updaterun", "start"],
        &["updaterun", "stop"],
        &["updaterun", "skip"],
        &["updaterun", "show"],
        &["updaterun", "list"],
        &["updaterun", "delete"],
        &["updaterun", "wait"],
        &["updaterun", "watch"],
        &["updaterun", "plan"],
        &["updaterun", "forecast"],
        &["updaterun", "retry"],
        &["gate", "list"],
        &["gate", "show"],
        &["gate", "approve"],
        &["gate", "update"],
        &["autoupgradeprofile", "create"],
        &["autoupgradeprofile", "show"],
        &["autoupgradeprofile", "list"],
        &["autoupgradeprofile", "delete"],
        &["autoupgradeprofile", "generate-update-run"],
        &["eventsubscription", "create"],
        &["eventsubscription", "show"],
        &["eventsubscription", "list"],
        &["eventsubscription", "delete"],
        &["eventsubscription", "test"],
        &["eventsubscription", "deliveries"],
        &["eventsubscription", "dead-letters"],
        &["eventsubscription", "redeliver"],
        &["eventsubscription", "rotate-secret"],
    ];
    for v in verbs {
        let o = cli("http://127.0.0.1:9", &[v, &["--help"][..]].concat());
        assert_eq!(o.code, 0, "{v:?}");
        assert!(
            o.stdout.contains("Example"),
            "{v:?} --help has no example: {}",
            o.stdout
        );
        assert!(
            o.stdout.contains(&format!("waverun {}", v.join(" "))),
            "{v:?}: {}",
            o.stdout
        );
    }
}

#[test]
fn completions_are_printed_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let o = cli("http://127.0.0.1:9", &["completions", shell]);
        assert_eq!(o.code, 0, "{shell}: {}", o.stderr);
        assert!(
            o.stdout.contains("updaterun") && o.stdout.contains("approve"),
            "{shell}"
        );
    }
}

/// A pseudo-terminal: the master end to read, the slave end for the child's stdio.
struct Pty {
    master: std::fs::File,
    slave: std::os::fd::OwnedFd,
}

fn pty() -> Pty {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    // A terminal of 200 × 60 so that nothing wraps.
    let size = libc::winsize {
        ws_row: 60,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new descriptors into the integers we own; the null name and
    // termios pointers are allowed, the winsize pointer points at a live value.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just returned by openpty and are owned by nobody else.
    unsafe {
        Pty {
            master: std::fs::File::from_raw_fd(master),
            slave: std::os::fd::OwnedFd::from_raw_fd(slave),
        }
    }
}

#[test]
fn watch_in_a_terminal_shows_the_gate_takes_an_approval_and_ends_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (_life, s) = daemon(dir.path());
    let s = s.as_str();
    two_stage_strategy(s);
    ok(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "r1",
            "--upgrade-type",
            "Full",
            "--kubernetes-version",
            "1.34.1",
            "--update-strategy-name",
            "two",
            "--start",
        ],
    );

    let p = pty();
    let tty = |fd: &std::os::fd::OwnedFd| Stdio::from(fd.try_clone().unwrap());
    let mut watch = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(["updaterun", "watch", "-n", "r1"])
        .env("WAVERUN_SERVER", s)
        .env("TERM", "xterm")
        .stdin(tty(&p.slave))
        .stdout(tty(&p.slave))
        .stderr(tty(&p.slave))
        .spawn()
        .unwrap();
    drop(p.slave);
    let screen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let screen = screen.clone();
        let mut master = p.master;
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends when the child has exited and the terminal is closed (EIO) or at EOF.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let seen = |needle: &str| screen.lock().unwrap().contains(needle);
    let wait_for = |what: &str, f: &dyn Fn() -> bool| {
        let end = Instant::now() + Duration::from_secs(90);
        while !f() {
            assert!(
                Instant::now() < end,
                "watch never showed {what}: {}",
                screen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("the tree", &|| {
        seen("Run r1: Running") && seen("stage canary")
    });
    wait_for("the gate with its approve command", &|| {
        seen("approve: waverun gate approve --gate-name ")
    });
    let gate = {
        let text = screen.lock().unwrap().clone();
        let at = text
            .rfind("approve: waverun gate approve --gate-name ")
            .unwrap();
        text[at..]
            .split_whitespace()
            .nth(5)
            .unwrap()
            .trim_matches(|c: char| !c.is_ascii_hexdigit() && c != '-')
            .to_string()
    };
    assert!(
        seen("waiting on: Gate"),
        "the stage says it waits on the gate"
    );
    // A second command approves it; watch carries on to the end of the run, then exits 0.
    ok(s, &["gate", "approve", "--gate-name", &gate]);
    let end = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(st) = watch.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < end,
            "watch did not end with the run: {}",
            screen.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    assert!(status.success(), "{}", screen.lock().unwrap());
    let text = screen.lock().unwrap().clone();
    assert!(text.contains("Run r1: Completed"), "{text}");
    assert!(
        text.contains("\u{1b}["),
        "redrawn in place with escape codes"
    );
    assert!(text.contains("▕██████████▏ 4/4"), "progress bars: {text}");
}

#[test]
fn watch_without_a_terminal_prints_one_line_per_event_until_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (_life, s) = daemon(dir.path());
    let s = s.as_str();
    ok(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "q",
            "--upgrade-type",
            "NodeImageOnly",
            "--stages",
            r#"{"stages":[{"name":"all","memberSelector":{"byLabel":"ring"},"maxConcurrency":"3"}]}"#,
        ],
    );
    // Started only once watch is watching: the run takes two seconds, less than starting a
    // second command may take on a loaded machine (watch of an ended run prints one line).
    let mut watch = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(["updaterun", "watch", "-n", "q"])
        .env("WAVERUN_SERVER", s)
        .env_remove("WAVERUN_TOKEN")
        .env_remove("WAVERUN_FLEET_NAME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let collect = |mut from: Box<dyn Read + Send>| {
        let text = Arc::new(Mutex::new(String::new()));
        let into = text.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        (text, reader)
    };
    let (stdout, out_reader) = collect(Box::new(watch.stdout.take().unwrap()));
    let (stderr, err_reader) = collect(Box::new(watch.stderr.take().unwrap()));
    let shown = || format!("{}{}", stdout.lock().unwrap(), stderr.lock().unwrap());
    let end = Instant::now() + Duration::from_secs(90);
    while !stdout.lock().unwrap().contains('\n') {
        if let Some(st) = watch.try_wait().unwrap() {
            panic!("watch exited ({st}) before watching: {}", shown());
        }
        assert!(Instant::now() < end, "watch printed nothing: {}", shown());
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(s, &["updaterun", "start", "-n", "q"]);
    let end = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(st) = watch.try_wait().unwrap() {
            break st;
        }
        if Instant::now() >= end {
            let _ = watch.kill();
            let _ = watch.wait();
            panic!("watch did not end with the run: {}", shown());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    out_reader.join().unwrap();
    err_reader.join().unwrap();
    assert!(status.success(), "watch exited {status}: {}", shown());
    let printed = stdout.lock().unwrap().clone();
    let lines: Vec<&str> = printed.lines().collect();
    assert!(lines[0].starts_with("watching update run q"), "{}", printed);
    assert_eq!(
        lines.iter().filter(|l| l.contains("MemberStarted")).count(),
        6,
        "{}",
        printed
    );
    assert!(
        lines.last().unwrap().contains("RunCompleted"),
        "{}",
        printed
    );
}

#[test]
fn eventsubscription_verbs_create_test_rotate_list_show_deliveries_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_file(dir.path());
    let config = dir.path().join("serve.yaml");
    std::fs::write(
        &config,
        "webhooks: {allowLoopback: true, timeoutSeconds: 2}\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let life = Life::start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--time-scale",
            TIME_SCALE,
            "--data-dir",
            data.to_str().unwrap(),
            "--fleet",
            fleet.to_str().unwrap(),
        ],
        &[],
        &dir.path().join("daemon.log"),
    );
    assert!(life.ready(60), "the daemon never got ready");
    let server = life.api.base.split("/api/").next().unwrap().to_string();
    let s = server.as_str();
    let r = webhook_support::receiver(dir.path(), &[]);
    let endpoint = format!("{}/in", r.base);

    // Created: the secret printed once (stdout), said so on stderr.
    let c = ok(
        s,
        &[
            "eventsubscription",
            "create",
            "-n",
            "pager",
            "--endpoint",
            &endpoint,
            "--included-event-types",
            "GateCreated",
            "RunCompleted",
        ],
    );
    let created = c.json();
    let secret = created["signing"]["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{created}");
    assert!(c.stderr.contains("printed this once"), "{}", c.stderr);
    webhook_support::add_secret(&r, &secret);
    let t = ok(
        s,
        &["eventsubscription", "show", "-n", "pager", "-o", "table"],
    )
    .stdout;
    assert!(
        t.starts_with(&format!("Event subscription pager → {endpoint}")),
        "{t}"
    );
    assert!(t.contains("events: GateCreated, RunCompleted"), "{t}");
    assert!(!t.contains("whsec_"), "{t}");
    let l = ok(s, &["eventsubscription", "list", "-o", "table"]).stdout;
    assert!(l.starts_with("NAME"), "{l}");
    assert!(
        l.lines()
            .any(|x| x.starts_with("pager ") && x.contains("GateCreated, RunCompleted")),
        "{l}"
    );

    // A test delivery, verified by the receiver; a rotation signs with both secrets.
    let t = ok(s, &["eventsubscription", "test", "-n", "pager"]).json();
    assert_eq!(t["outcome"], "delivered", "{t}");
    let rotated = ok(s, &["eventsubscription", "rotate-secret", "-n", "pager"]).json();
    let second = rotated["signing"]["secret"].as_str().unwrap().to_string();
    assert_ne!(second, secret);
    webhook_support::add_secret(&r, &second);
    let t = ok(
        s,
        &["eventsubscription", "test", "-n", "pager", "-o", "table"],
    )
    .stdout;
    assert!(t.starts_with("delivered: "), "{t}");
    let got = webhook_support::deliveries(&r);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1]["verifiedWith"], json!([0, 1]), "{}", got[1]);

    // A run waits at its gate: the delivery log shows it.
    two_stage_strategy(s);
    ok(
        s,
        &[
            "updaterun",
            "create",
            "-n",
            "r1",
            "--upgrade-type",
            "Full",
            "--kubernetes-version",
            "1.34.1",
            "--update-strategy-name",
            "two",
            "--start",
        ],
    );
    http_support::eventually(60, "the gate delivered", || {
        let d = ok(s, &["eventsubscription", "deliveries", "-n", "pager"]).json();
        (d.as_array()?.len() == 1).then_some(())
    });
    let d = ok(
        s,
        &[
            "eventsubscription",
            "deliveries",
            "-n",
            "pager",
            "-o",
            "table",
        ],
    )
    .stdout;
    assert!(d.starts_with("AT"), "{d}");
    assert!(d.contains("delivered") && d.contains("204"), "{d}");
    assert_eq!(
        ok(s, &["eventsubscription", "dead-letters", "-n", "pager"]).json(),
        json!([])
    );
    let n = ok(s, &["eventsubscription", "redeliver", "-n", "pager"]).json();
    assert_eq!(n["redelivering"], 0);
    let e = cli(
        s,
        &[
            "eventsubscription",
            "redeliver",
            "-n",
            "pager",
            "--event-ids",
            "999999",
        ],
    );
    assert_eq!(e.code, 1, "{}{}", e.stdout, e.stderr);
    assert!(e.stderr.contains("eventIds[0]"), "{}", e.stderr);

    // An endpoint nobody listens on: the test says so and exits 1; a metadata address is
    // refused, naming the field.
    ok(
        s,
        &[
            "eventsubscription",
            "create",
            "-n",
            "down",
            "--endpoint",
            "http://127.0.0.1:9/x",
        ],
    );
    let t = cli(
        s,
        &["eventsubscription", "test", "-n", "down", "-o", "table"],
    );
    assert_eq!(t.code, 1, "{}{}", t.stdout, t.stderr);
    assert!(t.stdout.starts_with("failed after"), "{}", t.stdout);
    let bad = cli(
        s,
        &[
            "eventsubscription",
            "create",
            "-n",
            "bad",
            "--endpoint",
            "http://169.254.169.254/",
        ],
    );
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains("properties.destination.properties.endpointUrl"),
        "{}",
        bad.stderr
    );
    ok(s, &["eventsubscription", "delete", "-n", "pager", "--yes"]);
    let gone = cli(s, &["eventsubscription", "show", "-n", "pager"]);
    assert_eq!(gone.code, 1, "{}", gone.stderr);
    drop(life);
}
