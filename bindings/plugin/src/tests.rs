//! The driver against an in-memory host: envelopes, write-ahead journaling, snapshots, crash and
//! replay, and every scenario file simulated through the plugin (with and without crashes)
//! compared with the native simulator.

use super::*;
use serde_json::json;
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use waverun_core::sim::{simulate, EngineDriver, SharedFleet, Simulation};
use waverun_core::State;

// ---------------------------------------------------------------------- the in-memory host

/// Storage, a cluster that remembers submissions, a clock; knobs to make each import fail.
#[derive(Default)]
struct MemHost {
    now_ms: i64,
    journal: Vec<String>,
    snapshot: Option<String>,
    snapshots_written: u32,
    /// Submitted payloads, in order (when there is no fleet).
    submitted: Vec<UpgradeOperation>,
    /// A simulation's fleet: submissions go there, stamped with `now_ms`.
    fleet: Option<SharedFleet>,
    submit_calls: u32,
    known: BTreeSet<String>,
    queried: Vec<String>,
    /// `journal_append` answers this when non-zero.
    append_fails: i32,
    /// `cluster_submit` answers this when non-zero.
    submit_fails: i32,
    /// `cluster_query` answers 1 (unknown) for everything.
    forget: bool,
    /// Every `check_submit` call's request, in order.
    checks_submitted: Vec<CheckRequest>,
    /// Measurement ids accepted (a repeated one is the same measurement: measured once).
    checks_known: BTreeSet<String>,
    /// `check_submit` answers this when non-zero.
    check_fails: i32,
    /// Measurements taken, not delivered yet.
    measured: VecDeque<Observation>,
    logs: Vec<(GuestLogLevel, String)>,
}

impl HostImports for MemHost {
    fn clock_now_ms(&mut self) -> i64 {
        self.now_ms
    }
    fn cluster_submit(&mut self, operation: &str) -> i32 {
        self.submit_calls += 1;
        if self.submit_fails != 0 {
            return self.submit_fails;
        }
        let cmd: HostCommand = serde_json::from_str(operation).expect("a startUpgrade");
        let HostCommand::StartUpgrade(op) = cmd else {
            panic!("cluster_submit carries upgrades only: {operation}");
        };
        if !self.known.insert(op.operation_id.clone()) {
            return 0;
        }
        match &self.fleet {
            Some(fleet) => {
                let now = DateTime::from_timestamp_millis(self.now_ms).expect("a time");
                fleet.lock().submit(&op, now);
            }
            None => self.submitted.push(op),
        }
        0
    }
    fn cluster_query(&mut self, query: &str) -> i32 {
        let q: Value = serde_json::from_str(query).unwrap();
        let id = q["operationId"].as_str().unwrap().to_string();
        self.queried.push(id.clone());
        if self.forget || !self.known.contains(&id) {
            1
        } else {
            0
        }
    }
    fn check_submit(&mut self, request: &str) -> i32 {
        let req: CheckRequest = serde_json::from_str(request).expect("a CheckRequest");
        self.checks_submitted.push(req.clone());
        if self.check_fails != 0 {
            return self.check_fails;
        }
        if !self.checks_known.insert(req.measurement_id.clone()) {
            return 0;
        }
        if let Some(fleet) = &self.fleet {
            // As the native simulator measures: the fleet's scripted health, else a pass.
            let now = DateTime::from_timestamp_millis(self.now_ms).expect("a time");
            let m = fleet.lock().measure(&req, now);
            self.measured.push_back(Observation::CheckMeasured {
                measurement_id: req.measurement_id,
                values: m.values,
                verdict: m.verdict,
                message: m.message,
            });
        }
        0
    }
    fn journal_append(&mut self, record: &str) -> i32 {
        if self.append_fails != 0 {
            return self.append_fails;
        }
        let r: Record = serde_json::from_str(record).expect("a journal record");
        assert_eq!(r.seq, self.journal.len() as u64 + 1 + self.dropped(), "seq");
        self.journal.push(record.to_string());
        0
    }
    fn snapshot_write(&mut self, snapshot: &str) -> i32 {
        let doc: Value = serde_json::from_str(snapshot).unwrap();
        assert_eq!(doc["v"], 1);
        let n = doc["journalSeq"].as_u64().unwrap();
        self.snapshot = Some(snapshot.to_string());
        self.snapshots_written += 1;
        // The host MAY drop the records the snapshot covers; this one does.
        self.journal.retain(|r| seq_of(r) > n);
        0
    }
    fn storage_read(&mut self, kind: StorageKind) -> Result<Option<Vec<u8>>, i32> {
        Ok(match kind {
            StorageKind::Snapshot => self.snapshot.clone().map(String::into_bytes),
            StorageKind::Journal if self.journal.is_empty() => None,
            StorageKind::Journal => Some(self.journal.join("\n").into_bytes()),
        })
    }
    fn log(&mut self, level: GuestLogLevel, message: &str) {
        self.logs.push((level, message.to_string()));
    }
}

impl MemHost {
    fn at(t: &str) -> MemHost {
        MemHost {
            now_ms: ts(t).timestamp_millis(),
            ..MemHost::default()
        }
    }
    fn dropped(&self) -> u64 {
        self.snapshot.as_ref().map_or(0, |s| {
            serde_json::from_str::<Value>(s).unwrap()["journalSeq"]
                .as_u64()
                .unwrap()
        })
    }
}

fn seq_of(record: &str) -> u64 {
    serde_json::from_str::<Value>(record).unwrap()["seq"]
        .as_u64()
        .unwrap()
}

fn ts(t: &str) -> Timestamp {
    t.parse().expect("RFC 3339")
}

fn parse(envelope: &str) -> Value {
    let v: Value = serde_json::from_str(envelope).expect("an envelope is JSON");
    assert_eq!(v["v"], 1, "{envelope}");
    v
}

fn ok_result(envelope: &str) -> Value {
    let v = parse(envelope);
    assert_eq!(v["ok"], true, "{envelope}");
    v["result"].clone()
}

fn err_code(envelope: &str) -> String {
    let v = parse(envelope);
    assert_eq!(v["ok"], false, "{envelope}");
    v["error"]["code"].as_str().unwrap().to_string()
}

fn command(c: Value) -> Vec<u8> {
    json!({"v": 1, "request": {"type": "command", "command": c}})
        .to_string()
        .into_bytes()
}

fn request(r: Value) -> Vec<u8> {
    json!({"v": 1, "request": r}).to_string().into_bytes()
}

fn deliver(o: Value) -> Vec<u8> {
    json!({"v": 1, "observation": o}).to_string().into_bytes()
}

/// Restarts the guest on the same host, as after a trap: a fresh plugin and `waverun_init`.
fn crash(p: Guest<MemHost>) -> (Guest<MemHost>, Value) {
    let mut fresh = Guest::new(p.into_host());
    let init = ok_result(&fresh.init());
    (fresh, init)
}

fn snapshot_of(p: &Guest<MemHost>) -> String {
    p.engine().expect("initialised").snapshot()
}

// ---------------------------------------------------------------------- a small fleet

const START: &str = "2026-12-07T00:00:00Z";

fn member(name: &str, group: &str) -> Value {
    json!({
        "name": name, "group": group, "region": "eastus", "kubernetesVersion": "1.30.4",
        "nodePools": [{"name": "system", "osType": "Linux",
                       "imageVersion": "AKSUbuntu-2204gen2containerd-202411.03.0"}]
    })
}

/// Three members in two stages (approval gate before the second), a run `r1` started.
fn started_plugin() -> Guest<MemHost> {
    let mut p = Guest::new(MemHost::at(START));
    ok_result(&p.init());
    let setup = [
        json!({"type": "setCatalog", "catalog": {
            "kubernetes": [{"version": "1.31.2", "available": {"*": START}}],
            "nodeImages": [{"version": "AKSUbuntu-2204gen2containerd-202411.03.0", "available": {"*": START}}]}}),
        json!({"type": "upsertMember", "member": member("dev-1", "dev")}),
        json!({"type": "upsertMember", "member": member("prod-1", "prod")}),
        json!({"type": "upsertMember", "member": member("prod-2", "prod")}),
        json!({"type": "createRun", "run": {
            "name": "r1",
            "strategy": {"stages": [
                {"name": "test", "groups": [{"name": "dev"}]},
                {"name": "production", "beforeGates": [{"type": "Approval"}],
                 "groups": [{"name": "prod", "maxConcurrency": "2"}]}]},
            "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"},
                                     "nodeImageSelection": {"type": "Latest"}}}}),
        json!({"type": "startRun", "name": "r1"}),
    ];
    for c in setup {
        ok_result(&p.request(&command(c)));
    }
    p
}

fn succeed(p: &mut Guest<MemHost>, op: &str) -> Value {
    ok_result(&p.deliver(&deliver(
        json!({"type": "upgradeSucceeded", "operationId": op}),
    )))
}

fn kinds(events: &Value) -> Vec<String> {
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

// ---------------------------------------------------------------------- envelopes

#[test]
fn abi_version_is_2() {
    assert_eq!(Guest::new(MemHost::default()).abi_version(), 2);
}

#[test]
fn envelope_errors() {
    let mut p = Guest::new(MemHost::at(START));
    // Before init: ping works, everything else is NotInitialized.
    assert_eq!(
        ok_result(&p.request(&request(json!({"type": "ping"})))),
        json!({})
    );
    for env in [
        p.request(&request(json!({"type": "runs"}))),
        p.request(&command(json!({"type": "startRun", "name": "r1"}))),
        p.deliver(&deliver(
            json!({"type": "upgradeSucceeded", "operationId": "r1/x"}),
        )),
        p.wake(),
        p.status(br#"{"v":1,"run":"r1"}"#),
    ] {
        assert_eq!(err_code(&env), "NotInitialized");
    }
    assert_eq!(p.next_wakeup(), -1);
    ok_result(&p.init());
    assert_eq!(err_code(&p.init()), "InvalidState", "init is called once");

    assert_eq!(err_code(&p.request(b"not json")), "BadEnvelope");
    assert_eq!(err_code(&p.request(b"\xff\xfe")), "BadEnvelope");
    assert_eq!(err_code(&p.request(b"[1]")), "BadEnvelope");
    assert_eq!(
        err_code(&p.request(br#"{"request":{"type":"ping"}}"#)),
        "BadEnvelope"
    );
    assert_eq!(
        err_code(&p.request(br#"{"v":2,"request":{"type":"ping"}}"#)),
        "UnsupportedVersion"
    );
    assert_eq!(
        err_code(&p.request(br#"{"v":"1","request":{"type":"ping"}}"#)),
        "UnsupportedVersion"
    );
    assert_eq!(err_code(&p.request(br#"{"v":1}"#)), "BadEnvelope");
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "fly"})))),
        "BadEnvelope"
    );
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "status"})))),
        "BadEnvelope"
    );
    assert_eq!(
        err_code(&p.request(&command(json!({"type": "launch"})))),
        "BadEnvelope"
    );
    assert_eq!(
        err_code(&p.deliver(br#"{"v":1,"observation":{"type":"x"}}"#)),
        "BadEnvelope"
    );
    assert_eq!(err_code(&p.status(br#"{"v":1}"#)), "BadEnvelope");
    // Unknown fields are ignored.
    assert_eq!(
        ok_result(&p.request(br#"{"v":1,"extra":true,"request":{"type":"ping","x":1}}"#)),
        json!({})
    );
    // Nothing refused above reached the journal.
    assert!(p.host().journal.is_empty());

    // Engine errors keep their code; field errors carry a path.
    assert_eq!(err_code(&p.status(br#"{"v":1,"run":"nope"}"#)), "NotFound");
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "plan", "run": "nope"})))),
        "NotFound"
    );
    let mut m = member("m-1", "g");
    m["nodePools"][0]["imageVersion"] = json!("bogus");
    m["kubernetesVersion"] = json!("one.two");
    let e = parse(&p.request(&command(json!({"type": "upsertMember", "member": m}))));
    assert_eq!(e["error"]["code"], "InvalidField", "{e}");
    assert!(
        e["error"]["path"]
            .as_str()
            .unwrap()
            .contains("kubernetesVersion"),
        "{e}"
    );
    assert_eq!(
        err_code(&p.request(&command(json!({"type": "startRun", "name": "nope"})))),
        "NotFound"
    );
}

#[test]
fn requests() {
    let mut p = started_plugin();
    let runs = ok_result(&p.request(&request(json!({"type": "runs"}))));
    assert_eq!(runs, json!({"runs": [{"name": "r1", "state": "Running"}]}));
    let status = ok_result(&p.request(&request(json!({"type": "status", "run": "r1"}))));
    assert_eq!(status, ok_result(&p.status(br#"{"v":1,"run":"r1"}"#)));
    assert_eq!(
        status["stages"][0]["groups"][0]["members"][0]["status"]["state"],
        "Running"
    );
    // The outline: the same tree, its groups' members left out (nothing built for them).
    let outline = ok_result(&p.request(&request(
        json!({"type": "status", "run": "r1", "members": false}),
    )));
    let mut expected = status.clone();
    for stage in expected["stages"].as_array_mut().unwrap() {
        for group in stage["groups"].as_array_mut().unwrap() {
            group["members"] = json!([]);
        }
    }
    assert_eq!(outline, expected);
    assert_eq!(
        err_code(&p.request(&request(
            json!({"type": "status", "run": "r1", "members": "no"})
        ))),
        "BadEnvelope"
    );
    let tallies = ok_result(&p.request(&request(json!({"type": "tallies"}))));
    let tally = &tallies["runs"][0]["tally"];
    assert_eq!(tallies["runs"][0]["name"], "r1");
    assert_eq!(tally["run"]["states"], json!({"Running": 1}));
    let members = status["stages"][0]["groups"][0]["members"]
        .as_array()
        .unwrap();
    let running = members
        .iter()
        .filter(|m| m["status"]["state"] == "Running")
        .count();
    assert_eq!(tally["members"]["states"]["Running"], json!(running));
    assert_eq!(tally["failureCount"], 0);
    let plan = ok_result(&p.request(&request(json!({"type": "plan", "run": "r1"}))));
    assert_eq!(plan["run"], "r1");
    assert_eq!(
        ok_result(&p.request(&request(json!({"type": "nextWakeup"})))),
        json!({"at": null, "reason": null, "run": null})
    );
    let snap = ok_result(&p.request(&request(json!({"type": "snapshot"}))));
    assert_eq!(snap["v"], 1);
    assert_eq!(snap["journalSeq"], 6);
    assert_eq!(snap["operations"][0]["operationId"], "r1/dev-1");
    assert_eq!(p.host().snapshot.as_deref().map(parse_any), Some(snap));
    assert!(
        p.host().journal.is_empty(),
        "this host drops covered records"
    );
}

#[test]
fn catalog_freezes_and_forecast_requests_read_without_journaling() {
    let mut p = started_plugin();
    let journaled = p.host().journal.len();
    let catalog = ok_result(&p.request(&request(json!({"type": "catalog"}))));
    assert_eq!(catalog["kubernetes"][0]["version"], "1.31.2");
    let freezes = ok_result(&p.request(&request(json!({"type": "freezes"}))));
    assert_eq!(freezes, json!({"freezes": []}));
    let leases = ok_result(&p.request(&request(json!({"type": "leases"}))));
    assert_eq!(
        leases["leases"]["dev-1"], "r1",
        "the upgrading member is held by its run"
    );
    // A list's page asks for its own members' leases only; a name with no lease is left out.
    let some = |p: &mut Guest<MemHost>, members: Value| {
        p.request(&request(json!({"type": "leases", "members": members})))
    };
    let page = ok_result(&some(&mut p, json!(["dev-1", "nope"])));
    assert_eq!(page, json!({"leases": {"dev-1": "r1"}}));
    assert_eq!(ok_result(&some(&mut p, json!([]))), json!({"leases": {}}));
    assert_eq!(err_code(&some(&mut p, json!("dev-1"))), "BadEnvelope");
    let f = ok_result(&p.request(&request(
        json!({"type": "forecast", "run": "r1", "upgradeMinutes": 10}),
    )));
    assert_eq!(f["assumptions"]["upgradeMinutes"], 10);
    assert_eq!(f["assumptions"]["basis"], "given by the caller");
    // dev-1 has been upgrading since the start: it finishes 10 minutes after it started.
    assert_eq!(
        f["stages"][0]["groups"][0]["members"][0]["expectedFinish"],
        "2026-12-07T00:10:00Z"
    );
    assert_eq!(f["state"], "Completed");
    let bad = p.request(&request(
        json!({"type": "forecast", "run": "r1", "upgradeMinutes": 0}),
    ));
    assert_eq!(err_code(&bad), "InvalidField");
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "forecast", "run": "nope"})))),
        "NotFound"
    );
    assert_eq!(p.host().journal.len(), journaled, "reads journal nothing");
    // The live engine is untouched: dev-1 is still running.
    let status = ok_result(&p.request(&request(json!({"type": "status", "run": "r1"}))));
    assert_eq!(
        status["stages"][0]["groups"][0]["members"][0]["status"]["state"],
        "Running"
    );
}

#[test]
fn a_forecast_from_the_engine_state_in_another_guest_is_the_live_forecast_at_that_time() {
    let mut p = started_plugin();
    // Seven minutes in: dev-1 is upgrading, production waits for its gate.
    p.host_mut().now_ms += 7 * 60_000;
    let journaled = p.host().journal.len();
    let snapshots = p.host().snapshots_written;
    let state = ok_result(&p.request(&request(json!({"type": "forecastState", "run": "r1"}))));
    assert_eq!(state["run"], "r1");
    assert_eq!(state["at"], "2026-12-07T00:07:00Z");
    assert_eq!(state["snapshot"]["formatVersion"], 1);
    assert_eq!(
        p.host().journal.len(),
        journaled,
        "reading the state journals nothing"
    );
    assert_eq!(
        p.host().snapshots_written,
        snapshots,
        "and writes no snapshot"
    );
    for minutes in [json!(null), json!(25)] {
        let live = p.request(&request(
            json!({"type": "forecast", "run": "r1", "upgradeMinutes": minutes}),
        ));
        // A guest that was never started (as in a browser) answers the same from the state.
        let mut browser = Guest::new(MemHost::default());
        let from = browser.request(&request(json!({"type": "forecastFrom", "run": "r1",
            "snapshot": state["snapshot"], "at": state["at"], "upgradeMinutes": minutes})));
        assert_eq!(ok_result(&from), ok_result(&live));
        assert_eq!(from, live, "byte for byte");
    }
    let mut browser = Guest::new(MemHost::default());
    let ask = |b: &mut Guest<MemHost>, req: Value| err_code(&b.request(&request(req)));
    let snap = &state["snapshot"];
    assert_eq!(
        ask(
            &mut browser,
            json!({"type": "forecastFrom", "run": "nope", "snapshot": snap, "at": state["at"]})
        ),
        "NotFound"
    );
    assert_eq!(
        ask(
            &mut browser,
            json!({"type": "forecastFrom", "run": "r1", "snapshot": snap, "at": "yesterday"})
        ),
        "InvalidField"
    );
    assert_eq!(
        ask(
            &mut browser,
            json!({"type": "forecastFrom", "run": "r1",
            "snapshot": {"formatVersion": 99, "engine": {}}, "at": state["at"]})
        ),
        "InvalidSnapshot"
    );
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "forecastState", "run": "nope"})))),
        "NotFound"
    );
    // Later: dev-1 finished after 12 minutes, which the forecast takes as the upgrade time.
    p.host_mut().now_ms += 5 * 60_000;
    succeed(&mut p, "r1/dev-1");
    p.host_mut().now_ms += 60_000;
    let state = ok_result(&p.request(&request(json!({"type": "forecastState", "run": "r1"}))));
    let live = p.request(&request(json!({"type": "forecast", "run": "r1"})));
    assert_eq!(
        ok_result(&live)["assumptions"]["basis"],
        "the median of the 1 upgrades this run finished"
    );
    let from = Guest::new(MemHost::default()).request(&request(json!({"type": "forecastFrom",
        "run": "r1", "snapshot": state["snapshot"], "at": state["at"]})));
    assert_eq!(from, live, "byte for byte, after an upgrade finished");
    // Several runs from one restore: each as alone; a name with no run is said missing.
    let both = ok_result(&Guest::new(MemHost::default()).request(&request(json!({
        "type": "forecastFrom", "runs": ["r1", "nope"],
        "snapshot": state["snapshot"], "at": state["at"]}))));
    assert_eq!(both["forecasts"]["r1"], ok_result(&live));
    assert_eq!(both["missing"], json!(["nope"]));
}

#[test]
fn an_engine_state_is_written_once_into_a_buffer_sized_from_the_last_one() {
    // At 100,000 members the state is about 77 MB: a buffer doubling up to it held 64 MB and
    // 128 MB at once, and the guest hit its memory limit on the second forecastState.
    let mut p = started_plugin();
    const HEAD: usize = r#"{"v":1,"ok":true,"result":"#.len();
    for kind in ["forecastState", "snapshot"] {
        let ask = |p: &mut Guest<MemHost>| p.request(&request(json!({"type": kind, "run": "r1"})));
        let first = ask(&mut p);
        let second = ask(&mut p);
        // The answer's text is the envelope around the engine's own snapshot, unchanged.
        assert!(
            second.starts_with(r#"{"v":1,"ok":true,"result":{"#),
            "{kind}"
        );
        assert!(second.contains(&snapshot_of(&p)), "{kind}");
        assert_eq!(first, second, "{kind}");
        // Written into the buffer the first answer's length asked for, the envelope in it too:
        // never grown, never copied into another.
        let last = first.len() - HEAD - 1;
        assert_eq!(second.capacity(), last + last / 8 + 4096, "{kind}");
    }
}

#[test]
fn profile_requests_show_status_generation_and_plan_and_a_release_generates_a_run_across_a_crash() {
    let mut p = Guest::new(MemHost::at(START));
    ok_result(&p.init());
    let setup = [
        json!({"type": "setCatalog", "catalog": {
            "kubernetes": [{"version": "1.30.4", "available": {"*": START}},
                           {"version": "1.30.5", "available": {"*": "2026-12-07T06:00:00Z"}}],
            "nodeImages": [{"version": "AKSUbuntu-2204gen2containerd-202411.03.0", "available": {"*": START}}]}}),
        json!({"type": "upsertMember", "member": member("dev-1", "dev")}),
        json!({"type": "upsertProfile", "profile": {"name": "patches",
            "channel": "TargetKubernetesVersion", "targetKubernetesVersion": "1.30"}}),
    ];
    for c in setup {
        ok_result(&p.request(&command(c)));
    }
    let profiles = ok_result(&p.request(&request(json!({"type": "profiles"}))));
    assert_eq!(profiles["profiles"][0]["profile"]["name"], "patches");
    assert_eq!(profiles["generatedRuns"], json!({}));
    let g = ok_result(&p.request(&request(
        json!({"type": "generation", "profile": "patches"}),
    )));
    assert_eq!(g["result"], "Nothing", "{g}");
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "generation", "profile": "nope"})))),
        "NotFound"
    );
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "generation"})))),
        "BadEnvelope"
    );
    // The release time is a wakeup; at 06:00 the run is generated and started.
    let w = ok_result(&p.request(&request(json!({"type": "nextWakeup"}))));
    assert_eq!(w["at"], "2026-12-07T06:00:00Z");
    assert_eq!(w["run"], "");
    let (mut p, _) = crash(p);
    p.host_mut().now_ms = ts("2026-12-07T06:00:00Z").timestamp_millis();
    let woke = ok_result(&p.wake());
    assert_eq!(
        kinds(&woke)[..3],
        ["RunCreated", "RunGenerated", "RunStarted"]
    );
    assert_eq!(woke["events"][1]["profile"], "patches");
    assert_eq!(woke["events"][1]["versions"], json!(["1.30.5"]));
    let profiles = ok_result(&p.request(&request(json!({"type": "profiles"}))));
    assert_eq!(
        profiles["generatedRuns"]["auto-patches-targetkubernetesversion-1-30-5"],
        json!({"profile": "patches", "versions": ["1.30.5"]})
    );
    let status = &profiles["profiles"][0]["status"];
    assert_eq!(status["lastTriggerStatus"], "Succeeded");
    assert_eq!(
        status["lastUpdateRunName"],
        "auto-patches-targetkubernetesversion-1-30-5"
    );
    let g = ok_result(&p.request(&request(
        json!({"type": "generation", "profile": "patches"}),
    )));
    assert_eq!(
        g,
        json!({"result": "Existing", "run": "auto-patches-targetkubernetesversion-1-30-5"})
    );
    let plan = ok_result(&p.request(&request(
        json!({"type": "profilePlan", "profile": "patches"}),
    )));
    assert_eq!(plan["run"], "auto-patches-targetkubernetesversion-1-30-5");
    assert_eq!(
        plan["plan"]["run"],
        "auto-patches-targetkubernetesversion-1-30-5"
    );
}

#[test]
fn simulate_request_is_pure_and_matches_the_native_report() {
    // Answered before `waverun_init`, byte for byte the native report, nothing journaled.
    let mut p = Guest::new(MemHost::at(START));
    for path in scenario_files() {
        let s = load_scenario(&path).expect("scenario");
        let native = serde_json::to_string(&simulate(&s).unwrap()).unwrap();
        let env = p.request(&request(json!({"type": "simulate", "scenario": s})));
        let report = env
            .strip_prefix(r#"{"v":1,"ok":true,"result":"#)
            .and_then(|r| r.strip_suffix('}'))
            .unwrap_or_else(|| panic!("{}: {}", path.display(), &env[..env.len().min(300)]));
        assert_eq!(report, native, "{}", path.display());
    }
    assert!(
        p.engine().is_none(),
        "simulate does not initialise the plugin"
    );
    assert!(p.host().journal.is_empty());
    assert!(p.host().submitted.is_empty());
}

#[test]
fn simulate_request_names_the_field_it_refuses() {
    let mut p = Guest::new(MemHost::at(START));
    let path = scenario_files().pop().expect("the example");
    let mut s = serde_json::to_value(load_scenario(&path).unwrap()).unwrap();
    s["strategy"]["stages"][0]["maxConcurrency"] = json!("120%");
    let e = parse(&p.request(&request(json!({"type": "simulate", "scenario": s}))));
    assert_eq!(e["error"]["code"], "InvalidField", "{e}");
    assert_eq!(
        e["error"]["path"], "strategy.stages[0].maxConcurrency",
        "{e}"
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("120%"),
        "{e}"
    );
    // Missing, or not a scenario at all.
    assert_eq!(
        err_code(&p.request(&request(json!({"type": "simulate"})))),
        "BadEnvelope"
    );
    let e = parse(&p.request(&request(json!({"type": "simulate", "scenario": [1]}))));
    assert_eq!(e["error"]["code"], "InvalidField", "{e}");
    assert!(p.host().journal.is_empty());
}

#[test]
fn simulate_request_reads_yaml_text_as_the_cli_reads_a_file() {
    let mut p = Guest::new(MemHost::at(START));
    let path = scenario_files().pop().expect("the example");
    let text = std::fs::read_to_string(&path).unwrap();
    let native = serde_json::to_string(&simulate(&load_scenario(&path).unwrap()).unwrap()).unwrap();
    let env = p.request(&request(
        json!({"type": "simulate", "text": text, "format": "yaml"}),
    ));
    assert_eq!(ok_result(&env), parse_any(&native));
    // A YAML error names its line, as `waverun simulate` does.
    let e = parse(&p.request(&request(
        json!({"type": "simulate", "text": "start: 2026-12-07T00:00:00Z\nmembers: 5\n"}),
    )));
    assert_eq!(e["error"]["code"], "InvalidField", "{e}");
    assert_eq!(e["error"]["path"], "members", "{e}");
    let e = parse(&p.request(&request(
        json!({"type": "simulate", "text": "{}", "format": "toml"}),
    )));
    assert_eq!(e["error"]["code"], "BadEnvelope", "{e}");
    assert!(p.engine().is_none() && p.host().journal.is_empty());
}

#[test]
fn validate_request_says_what_waverun_validate_says_with_the_kind_and_the_strategy() {
    let mut p = Guest::new(MemHost::at(START));
    let yaml =
        "stages:\n  - name: dev\n    groups:\n      - name: a\n        maxConcurrency: \"120%\"\n";
    let v = ok_result(&p.request(&request(json!({"type": "validate", "text": yaml}))));
    assert_eq!(v["valid"], false);
    assert_eq!(v["kind"], "strategy");
    assert_eq!(
        v["errors"][0]["path"], "stages[0].groups[0].maxConcurrency",
        "{v}"
    );
    assert!(v["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("is above 100%"));
    // A typo in a key: named, with the field it probably meant.
    let v = ok_result(&p.request(&request(json!({"type": "validate",
        "text": "stages:\n  - name: dev\n    beforeGate: []\n"}))));
    assert_eq!(v["valid"], false);
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean beforeGates"),
        "{v}"
    );
    // A valid Azure resource, in JSON: the strategy as the API stores it.
    let json_text =
        r#"{"properties": {"strategy": {"stages": [{"name": "s", "groups": [{"name": "g"}]}]}}}"#;
    let v = ok_result(&p.request(&request(
        json!({"type": "validate", "text": json_text, "format": "json"}),
    )));
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["errors"], json!([]));
    assert_eq!(v["strategy"]["stages"][0]["groups"][0]["name"], "g");
    // A scenario is recognised as one.
    let path = scenario_files().pop().expect("the example");
    let text = std::fs::read_to_string(&path).unwrap();
    let v = ok_result(&p.request(&request(json!({"type": "validate", "text": text}))));
    assert_eq!(
        (v["valid"].clone(), v["kind"].clone()),
        (json!(true), json!("scenario")),
        "{v}"
    );
    assert!(p.engine().is_none() && p.host().journal.is_empty());
}

#[test]
fn select_request_filters_members_with_the_strategies_selector_syntax() {
    let mut p = Guest::new(MemHost::at(START));
    let members = json!([
        {"name": "a", "labels": {"env": "prod", "geo": "eu"}},
        {"name": "b", "labels": {"env": "prod", "geo": "us"}},
        {"name": "c", "labels": {"env": "dev"}},
        {"name": "d"},
    ]);
    let pick = |p: &mut Guest<MemHost>, sel: &str| {
        ok_result(&p.request(&request(
            json!({"type": "select", "selector": sel, "members": members}),
        )))["matches"]
            .clone()
    };
    assert_eq!(pick(&mut p, "env=prod"), json!(["a", "b"]));
    assert_eq!(
        pick(&mut p, "env in (prod, dev), geo!=us"),
        json!(["a", "c"])
    );
    assert_eq!(pick(&mut p, "!env"), json!(["d"]));
    let e = parse(&p.request(&request(
        json!({"type": "select", "selector": "env in (prod", "members": members}),
    )));
    assert_eq!(e["error"]["code"], "InvalidField", "{e}");
    assert_eq!(e["error"]["path"], "selector", "{e}");
    assert!(p.engine().is_none() && p.host().journal.is_empty());
}

#[test]
fn windows_request_lists_when_a_maintenance_window_is_open() {
    let mut p = Guest::new(MemHost::at(START));
    let maintenance = json!({"kubernetes": {"schedule": {"daily": {"intervalDays": 1}},
        "durationHours": 4, "startTime": "22:00", "utcOffset": "+02:00"}});
    let w = ok_result(&p.request(&request(
        json!({"type": "windows", "maintenance": maintenance,
        "from": "2026-12-07T21:00:00Z", "until": "2026-12-09T00:00:00Z"}),
    )));
    // 22:00+02:00 is 20:00Z: open now (cut at `from`) until midnight, then the next evening.
    assert_eq!(
        w,
        json!({"kubernetes": [
            {"start": "2026-12-07T21:00:00Z", "end": "2026-12-08T00:00:00Z"},
            {"start": "2026-12-08T20:00:00Z", "end": "2026-12-09T00:00:00Z"},
        ]})
    );
    let e = parse(&p.request(&request(
        json!({"type": "windows", "maintenance": maintenance,
        "from": "yesterday", "until": "2026-12-09T00:00:00Z"}),
    )));
    assert_eq!(e["error"]["path"], "from", "{e}");
    assert!(p.engine().is_none() && p.host().journal.is_empty());
}

#[test]
fn plan_scenario_request_is_what_waverun_plan_prints() {
    let mut p = Guest::new(MemHost::at(START));
    let path = scenario_files().pop().expect("the example");
    let s = load_scenario(&path).unwrap();
    let native = serde_json::to_value(waverun_core::sim::plan_scenario(&s).unwrap()).unwrap();
    let plan = ok_result(&p.request(&request(json!({"type": "planScenario", "scenario": s}))));
    assert_eq!(plan, native);
    assert!(p.engine().is_none() && p.host().journal.is_empty());
}

fn parse_any(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

/// One member behind a scheduled-start gate opening at 09:00 the same day; run `r1` started.
fn scheduled_plugin() -> Guest<MemHost> {
    let mut p = Guest::new(MemHost::at(START));
    ok_result(&p.init());
    for c in [
        json!({"type": "setCatalog", "catalog": {
            "kubernetes": [{"version": "1.31.2", "available": {"*": START}}],
            "nodeImages": [{"version": "AKSUbuntu-2204gen2containerd-202411.03.0", "available": {"*": START}}]}}),
        json!({"type": "upsertMember", "member": member("a", "g")}),
        json!({"type": "createRun", "run": {"name": "r1",
            "strategy": {"stages": [{"name": "s", "groups": [{"name": "g", "beforeGates": [
                {"type": "ScheduledStart", "scheduledStartConfiguration":
                    {"startDay": "Monday", "startTime": "09:00", "utcOffset": "+00:00"}}]}]}]},
            "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"}}}}),
        json!({"type": "startRun", "name": "r1"}),
    ] {
        ok_result(&p.request(&command(c)));
    }
    p
}

#[test]
fn wake_and_next_wakeup() {
    let mut p = scheduled_plugin();
    let at = ts("2026-12-07T09:00:00Z").timestamp_millis();
    assert_eq!(p.next_wakeup(), at);
    let w = ok_result(&p.request(&request(json!({"type": "nextWakeup"}))));
    assert_eq!(w["at"], "2026-12-07T09:00:00Z");
    assert_eq!(w["reason"], "ScheduledGate");
    let seq = p.journal_seq().unwrap();
    // Early wake with no time passed: nothing applied, nothing journaled.
    assert_eq!(ok_result(&p.wake()), json!({"events": []}));
    assert_eq!(p.journal_seq(), Some(seq));
    // Early wake after time passed: journaled (the engine's clock moves), nothing fires.
    p.host_mut().now_ms = at - 1000;
    assert_eq!(ok_result(&p.wake()), json!({"events": []}));
    assert_eq!(p.journal_seq(), Some(seq + 1));
    p.host_mut().now_ms = at;
    let ev = ok_result(&p.wake());
    assert!(kinds(&ev).contains(&"GateCompleted".to_string()), "{ev}");
    assert!(kinds(&ev).contains(&"MemberStarted".to_string()), "{ev}");
    assert_eq!(p.host().submitted.len(), 1);
    assert_eq!(p.next_wakeup(), -1);
    let last: Record = serde_json::from_str(p.host().journal.last().unwrap()).unwrap();
    assert_eq!(last.input, Input::Timeout);
    assert_eq!(last.now, ts("2026-12-07T09:00:00Z"));
}

// ---------------------------------------------------------------------- write-ahead journal

#[test]
fn persistence_failed_leaves_state_untouched() {
    let mut p = started_plugin();
    let before = snapshot_of(&p);
    let seq = p.journal_seq();
    let records = p.host().journal.len();
    let submits = p.host().submit_calls;
    p.host_mut().append_fails = 5;
    p.host_mut().now_ms += 30 * 60_000;
    let e = parse(&p.deliver(&deliver(
        json!({"type": "upgradeSucceeded", "operationId": "r1/dev-1"}),
    )));
    assert_eq!(e["error"]["code"], "PersistenceFailed", "{e}");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("returned 5"));
    assert_eq!(
        err_code(&p.request(&command(json!({"type": "stopRun", "name": "r1"})))),
        "PersistenceFailed"
    );
    assert_eq!(err_code(&p.wake()), "PersistenceFailed");
    assert_eq!(snapshot_of(&p), before, "nothing applied");
    assert_eq!(p.journal_seq(), seq);
    assert_eq!(p.host().journal.len(), records);
    assert_eq!(p.host().submit_calls, submits);
    // Queries still work; once the journal works again, so does the input.
    ok_result(&p.status(br#"{"v":1,"run":"r1"}"#));
    p.host_mut().append_fails = 0;
    let ev = succeed(&mut p, "r1/dev-1");
    assert!(kinds(&ev).contains(&"MemberCompleted".to_string()), "{ev}");
    assert_eq!(p.journal_seq(), seq.map(|s| s + 1));
}

#[test]
fn journal_records_are_write_ahead_and_replay_exactly() {
    let mut p = started_plugin();
    let rec: Vec<Record> = p
        .host()
        .journal
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    assert_eq!(
        rec.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6]
    );
    assert!(matches!(
        rec[5].input,
        Input::Command(Command::StartRun { .. })
    ));
    // A refused command is journaled too (it was accepted as input; replay refuses it again).
    assert_eq!(
        err_code(&p.request(&command(json!({"type": "deleteRun", "name": "r1"})))),
        "InvalidState"
    );
    assert_eq!(p.journal_seq(), Some(7));

    p.host_mut().now_ms += 30 * 60_000;
    succeed(&mut p, "r1/dev-1");
    let ev = ok_result(&p.request(&command(json!({
        "type": "completeGate", "run": "r1",
        "gate": {"stage": "production", "timing": "Before"}, "by": "alice"}))));
    assert!(kinds(&ev).contains(&"GateCompleted".to_string()), "{ev}");
    assert_eq!(p.host().submitted.len(), 3);

    let before = snapshot_of(&p);
    let status = p.status(br#"{"v":1,"run":"r1"}"#);
    let submits = p.host().submit_calls;
    let (mut q, init) = crash(p);
    assert_eq!(init["journalSeq"], 9);
    assert_eq!(init["replayed"], 9);
    assert_eq!(init["inFlight"], 2);
    assert_eq!(
        snapshot_of(&q),
        before,
        "replay gives the identical engine state"
    );
    assert_eq!(q.status(br#"{"v":1,"run":"r1"}"#), status);
    // Replay submitted nothing; it queried both operations in flight, which the host knows.
    assert_eq!(q.host().submit_calls, submits);
    assert_eq!(q.host().queried, vec!["r1/prod-1", "r1/prod-2"]);

    // Work goes on after the restart.
    q.host_mut().now_ms += 30 * 60_000;
    succeed(&mut q, "r1/prod-1");
    let ev = succeed(&mut q, "r1/prod-2");
    assert!(kinds(&ev).contains(&"RunCompleted".to_string()), "{ev}");
    assert_eq!(q.journal_seq(), Some(11));
}

#[test]
fn restart_resubmits_operations_the_host_forgot() {
    let mut p = started_plugin();
    p.host_mut().now_ms += 30 * 60_000;
    succeed(&mut p, "r1/dev-1");
    ok_result(&p.request(&command(json!({
        "type": "completeGate", "run": "r1", "gate": {"stage": "production"}}))));
    // Snapshot now, so the payloads must come from the snapshot, not from the replay.
    ok_result(&p.request(&request(json!({"type": "snapshot"}))));
    let mut host = p.into_host();
    host.forget = true;
    host.known.clear();
    host.submitted.clear();
    let mut q = Guest::new(host);
    let init = ok_result(&q.init());
    assert_eq!(init["replayed"], 0);
    assert_eq!(init["inFlight"], 2);
    let resubmitted: Vec<&str> = q
        .host()
        .submitted
        .iter()
        .map(|o| o.operation_id.as_str())
        .collect();
    assert_eq!(resubmitted, vec!["r1/prod-1", "r1/prod-2"]);
    assert_eq!(
        q.host().submitted[0].kubernetes_version.as_deref(),
        Some("1.31.2")
    );
    assert_eq!(q.host().submitted[0].region, "eastus");
}

#[test]
fn refused_submission_fails_the_member_with_cluster_submit_failed() {
    let mut p = Guest::new(MemHost::at(START));
    ok_result(&p.init());
    p.host_mut().submit_fails = 3;
    for c in [
        json!({"type": "setCatalog", "catalog": {
            "kubernetes": [{"version": "1.31.2", "available": {"*": START}}]}}),
        json!({"type": "upsertMember", "member": member("a", "g")}),
        json!({"type": "createRun", "run": {"name": "r1",
            "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.31.2"}}}}),
    ] {
        ok_result(&p.request(&command(c)));
    }
    let ev = ok_result(&p.request(&command(json!({"type": "startRun", "name": "r1"}))));
    let failed = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "MemberFailed")
        .unwrap_or_else(|| panic!("{ev}"))
        .clone();
    assert_eq!(failed["error"]["code"], "ClusterSubmitFailed", "{failed}");
    let st = ok_result(&p.status(br#"{"v":1,"run":"r1"}"#));
    let m = &st["stages"][0]["groups"][0]["members"][0]["status"];
    assert_eq!(m["state"], "Failed");
    assert_eq!(m["error"]["code"], "ClusterSubmitFailed");
    // The failure is journaled: the replay reproduces it without calling the cluster.
    let last: Record = serde_json::from_str(p.host().journal.last().unwrap()).unwrap();
    assert!(matches!(
        last.input,
        Input::Observation(Observation::UpgradeFailed { .. })
    ));
    assert!(p
        .host()
        .journal
        .last()
        .unwrap()
        .contains("\"operationId\":\"r1/a\""));
    let before = snapshot_of(&p);
    let calls = p.host().submit_calls;
    let (q, init) = crash(p);
    assert_eq!(init["inFlight"], 0);
    assert_eq!(snapshot_of(&q), before);
    assert_eq!(q.host().submit_calls, calls);
}

/// A run `r1` whose stage waits on a HealthCheck gate (`slo`, http) before it starts; started.
fn gated_plugin(host: MemHost) -> Guest<MemHost> {
    let mut p = Guest::new(host);
    ok_result(&p.init());
    for c in [
        json!({"type": "setCatalog", "catalog": {
            "kubernetes": [{"version": "1.31.2", "available": {"*": START}}]}}),
        json!({"type": "upsertMember", "member": member("a", "g")}),
        json!({"type": "createRun", "run": {"name": "r1",
            "strategy": {
                "healthChecks": [{"name": "slo", "http": {"url": "http://127.0.0.1:9/slo"}}],
                "stages": [{"name": "s", "beforeGates": [{"type": "HealthCheck", "healthCheck": "slo"}],
                            "groups": [{"name": "g"}]}]},
            "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.31.2"}}}}),
        json!({"type": "startRun", "name": "r1"}),
    ] {
        ok_result(&p.request(&command(c)));
    }
    p
}

#[test]
fn a_check_is_submitted_and_its_delivered_measurement_completes_the_gate() {
    let mut p = gated_plugin(MemHost::at(START));
    assert_eq!(p.host().checks_submitted.len(), 1);
    let req = p.host().checks_submitted[0].clone();
    assert_eq!(req.check.name, "slo");
    assert_eq!(req.purpose, waverun_core::CheckPurpose::Gate);
    assert!(req.gate_id.is_some());
    let ev = ok_result(&p.deliver(&deliver(json!({"type": "checkMeasured",
        "measurementId": req.measurement_id, "verdict": "Pass"}))));
    let kinds = kinds(&ev);
    assert!(kinds.iter().any(|k| k == "GateCompleted"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "MemberStarted"), "{kinds:?}");
    assert_eq!(p.host().submitted.len(), 1);
}

#[test]
fn refused_check_is_an_error_measurement_journaled_and_replayed_without_the_host() {
    let mut host = MemHost::at(START);
    host.check_fails = 5;
    let p = gated_plugin(host);
    let last = p.host().journal.last().unwrap().clone();
    let rec: Record = serde_json::from_str(&last).unwrap();
    let Input::Observation(Observation::CheckMeasured {
        verdict, message, ..
    }) = rec.input
    else {
        panic!("{last}")
    };
    assert_eq!(verdict, Some(waverun_core::health::Verdict::Error));
    assert!(message.unwrap().starts_with(CHECK_REFUSED));
    let calls = p.host().checks_submitted.len();
    let before = snapshot_of(&p);
    let (q, _) = crash(p);
    assert_eq!(snapshot_of(&q), before);
    // The engine measures again after the error (its interval): whatever it awaits now was
    // submitted again at init; nothing replayed called the host.
    let awaited = q.engine().unwrap().measurements_in_flight().count();
    assert_eq!(q.host().checks_submitted.len(), calls + awaited);
}

#[test]
fn restart_submits_every_awaited_measurement_again_also_from_a_snapshot() {
    let p = gated_plugin(MemHost::at(START));
    let id = p.host().checks_submitted[0].measurement_id.clone();
    let (mut q, _) = crash(p);
    let again: Vec<&str> = q
        .host()
        .checks_submitted
        .iter()
        .map(|r| r.measurement_id.as_str())
        .collect();
    assert_eq!(again, vec![id.as_str(), id.as_str()]);
    assert_eq!(
        q.host().checks_known.len(),
        1,
        "the host measures a repeated id once"
    );
    // Through a snapshot: the request travels in it.
    ok_result(&q.request(&request(json!({"type": "snapshot"}))));
    let snap: Value = parse_any(q.host().snapshot.as_ref().unwrap());
    assert_eq!(snap["measurements"][0]["measurementId"], id.as_str());
    let (r, _) = crash(q);
    assert_eq!(r.host().checks_submitted.len(), 3);
    assert_eq!(r.host().checks_submitted[2].measurement_id, id);
    assert_eq!(r.host().checks_submitted[2].check.name, "slo");
}

#[test]
fn snapshot_every_1000_records_and_restore_from_it() {
    let mut p = started_plugin();
    // Each wake one second later is a journaled input.
    for _ in 0..1200 {
        p.host_mut().now_ms += 1000;
        ok_result(&p.wake());
    }
    assert_eq!(p.journal_seq(), Some(1206));
    assert_eq!(p.host().snapshots_written, 1);
    let snap: Value = parse_any(p.host().snapshot.as_ref().unwrap());
    assert_eq!(snap["journalSeq"], 1000);
    assert_eq!(snap["operations"][0]["operationId"], "r1/dev-1");
    assert_eq!(p.host().journal.len(), 206, "records after the snapshot");
    p.host_mut().now_ms += 1000;
    succeed(&mut p, "r1/dev-1");
    let before = snapshot_of(&p);
    let (q, init) = crash(p);
    assert_eq!(init["journalSeq"], 1207);
    assert_eq!(init["replayed"], 207);
    assert_eq!(snapshot_of(&q), before);
}

#[test]
fn invalid_storage_is_refused() {
    let mut host = MemHost::at(START);
    host.snapshot = Some("{\"v\":1".to_string());
    let mut p = Guest::new(host);
    assert_eq!(err_code(&p.init()), "InvalidSnapshot");
    assert_eq!(err_code(&p.wake()), "NotInitialized");

    let mut host = MemHost::at(START);
    host.journal = vec![
        json!({"seq": 1, "now": START, "input": "timeout"}).to_string(),
        json!({"seq": 3, "now": START, "input": "timeout"}).to_string(),
    ];
    let e = parse(&Guest::new(host).init());
    assert_eq!(e["error"]["code"], "InvalidSnapshot");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("record 2 was expected"),
        "{e}"
    );

    let mut host = MemHost::at(START);
    host.journal = vec!["{\"seq\":1,\"now\":\"yesterday\"}".to_string()];
    assert_eq!(err_code(&Guest::new(host).init()), "InvalidSnapshot");
}

#[test]
fn a_refused_command_returns_the_events_of_timers_that_fired_first() {
    let mut p = scheduled_plugin();
    // No timer due: a refused command has no events.
    let e = parse(&p.request(&command(json!({"type": "deleteRun", "name": "r1"}))));
    assert_eq!(e["error"]["code"], "InvalidState", "{e}");
    assert!(e.get("events").is_none(), "{e}");
    // At 09:00 the gate opens before the command is refused: the envelope carries its events,
    // and the member it starts is submitted.
    p.host_mut().now_ms = ts("2026-12-07T09:00:00Z").timestamp_millis();
    let raw = p.request(&command(json!({"type": "deleteRun", "name": "r1"})));
    let e = parse(&raw);
    assert_eq!(e["error"]["code"], "InvalidState", "{e}");
    // Events keep the engine's field order (hosts compare timelines byte for byte).
    assert!(
        raw.contains(r#"{"at":"2026-12-07T09:00:00Z","kind":"GateCompleted","run":"r1""#),
        "{raw}"
    );
    let kinds: Vec<&str> = e["events"]
        .as_array()
        .unwrap_or_else(|| panic!("{e}"))
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["GateCompleted", "MemberStarted"]);
    assert_eq!(p.host().submitted.len(), 1);
    // The refused input is journaled (it moved the clock and fired the timer); replay agrees.
    let before = snapshot_of(&p);
    let (q, _) = crash(p);
    assert_eq!(snapshot_of(&q), before);
}

// ---------------------------------------------------------------------- whole scenarios

/// The plugin as an [`EngineDriver`], so the native simulator drives it through envelopes:
/// the same loop, a different engine boundary; its cluster is the simulation's fleet. Optionally
/// "crashes" every `crash_every` inputs.
struct PluginDriver {
    plugin: Option<Guest<MemHost>>,
    pending: VecDeque<Output>,
    crash_every: Option<usize>,
    inputs: usize,
    restarts: usize,
}

impl PluginDriver {
    fn new(s: &Scenario, crash_every: Option<usize>, fleet: SharedFleet) -> PluginDriver {
        let mut plugin = Guest::new(MemHost {
            now_ms: s.start.timestamp_millis(),
            fleet: Some(fleet),
            ..MemHost::default()
        });
        ok_result(&plugin.init());
        PluginDriver {
            plugin: Some(plugin),
            pending: VecDeque::new(),
            crash_every,
            inputs: 0,
            restarts: 0,
        }
    }

    fn p(&mut self) -> &mut Guest<MemHost> {
        self.plugin.as_mut().expect("plugin")
    }

    fn take_events(&mut self, events: &Value) {
        for e in events.as_array().into_iter().flatten() {
            let ev: Event = serde_json::from_value(e.clone()).expect("an event");
            self.pending.push_back(Output::Event(ev));
        }
    }
}

impl EngineDriver for PluginDriver {
    fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error> {
        self.inputs += 1;
        if self
            .crash_every
            .is_some_and(|k| self.inputs.is_multiple_of(k))
        {
            let (fresh, init) = crash(self.plugin.take().unwrap());
            assert_eq!(init["events"], json!([]));
            self.plugin = Some(fresh);
            self.restarts += 1;
        }
        self.p().host_mut().now_ms = now.timestamp_millis();
        let env = match input {
            Input::Command(c) => self.p().request(&command(serde_json::to_value(c).unwrap())),
            Input::Observation(o) => self.p().deliver(&deliver(serde_json::to_value(o).unwrap())),
            Input::Timeout => self.p().wake(),
        };
        let v = parse(&env);
        let result = if v["ok"] == true {
            self.take_events(&v["result"]["events"]);
            Ok(())
        } else {
            self.take_events(&v["events"]);
            let code: ErrorCode = serde_json::from_value(v["error"]["code"].clone())
                .unwrap_or_else(|_| panic!("an engine error code: {v}"));
            Err(Error::new(code, v["error"]["message"].as_str().unwrap()))
        };
        // The measurements the input submitted, delivered at the same instant (the native
        // simulator answers them at once too).
        while let Some(o) = self.p().host_mut().measured.pop_front() {
            let env = self.p().deliver(&deliver(serde_json::to_value(o).unwrap()));
            let events = ok_result(&env)["events"].clone();
            self.take_events(&events);
        }
        result
    }
    fn poll_output(&mut self) -> Option<Output> {
        self.pending.pop_front()
    }
    fn next_wakeup(&mut self) -> Option<Timestamp> {
        let ms = self.p().next_wakeup();
        (ms >= 0).then(|| DateTime::from_timestamp_millis(ms).unwrap())
    }
    fn run_state(&mut self, run: &str) -> Option<State> {
        let runs = ok_result(&self.p().request(&request(json!({"type": "runs"}))));
        runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == run)
            .map(|r| serde_json::from_value(r["state"].clone()).unwrap())
    }
    fn run_status(&mut self, run: &str) -> Result<RunStatus, Error> {
        let env = self
            .p()
            .status(json!({"v": 1, "run": run}).to_string().as_bytes());
        Ok(serde_json::from_value(ok_result(&env)).unwrap())
    }
}

/// A scenario file as `waverun simulate` reads it (YAML through serde-saphyr into JSON values).
fn load_scenario(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let value: Value = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Every scenario file: tests/scenarios (with subdirectories), tests/js/scenarios, the example.
fn scenario_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "yaml") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    walk(&root.join("tests/scenarios"), &mut files);
    walk(&root.join("tests/js/scenarios"), &mut files);
    files.sort();
    files.push(root.join("host/examples/fleet-rollout.yaml"));
    assert!(files.len() >= 11, "{files:?}");
    files
}

fn through_plugin(s: &Scenario, crash_every: Option<usize>) -> (String, usize) {
    let fleet = SharedFleet::new(s);
    let driver = PluginDriver::new(s, crash_every, fleet.clone());
    let mut sim = Simulation::with_fleet(s, driver, fleet).expect("valid scenario");
    sim.run_to_end();
    let report = serde_json::to_string(&sim.report()).unwrap();
    (report, sim.driver().restarts)
}

#[test]
fn every_scenario_through_the_plugin_matches_the_native_simulator() {
    for path in scenario_files() {
        let s = load_scenario(&path).expect("scenario");
        let native = serde_json::to_string(&simulate(&s).unwrap()).unwrap();
        let (plugin, _) = through_plugin(&s, None);
        assert_eq!(plugin, native, "{}", path.display());
    }
}

#[test]
fn every_scenario_survives_crashes_and_replay() {
    for path in scenario_files() {
        let s = load_scenario(&path).expect("scenario");
        let native = serde_json::to_string(&simulate(&s).unwrap()).unwrap();
        for k in [1, 2, 7] {
            let (plugin, restarts) = through_plugin(&s, Some(k));
            assert!(k > 1 || restarts > 0);
            assert_eq!(
                plugin,
                native,
                "{} crashing every {k} inputs",
                path.display()
            );
        }
    }
}

/// What a request argument reads as: its fields (each raw text) or the error's code and message.
fn read_request(
    read: fn(&[u8]) -> Result<RequestFields<'_>, AbiError>,
    arg: &[u8],
) -> Result<Vec<Option<String>>, (Code, String)> {
    read(arg)
        .map(|r| {
            [r.kind, r.command, r.run, r.scenario, r.text, r.members]
                .iter()
                .map(|f| f.map(|v| v.get().to_string()))
                .collect()
        })
        .map_err(|e| (e.code, e.message))
}

#[test]
fn a_request_read_in_one_pass_reads_and_refuses_as_the_envelope_then_its_request_did() {
    // The reading before the one pass: the envelope, then its request's fields.
    fn two_passes(bytes: &[u8]) -> Result<RequestFields<'_>, AbiError> {
        let env = parse_envelope(bytes)?;
        env.request
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .ok_or_else(|| bad("the envelope has no \"request\" object"))
    }
    let scenario = load_scenario(&scenario_files().pop().expect("the example")).unwrap();
    let simulate = serde_json::to_vec(&json!({"v": 1, "request": {
        "type": "simulate", "scenario": scenario}}))
    .unwrap();
    let args: Vec<&[u8]> = vec![
        br#"{"v":1,"request":{"type":"ping"}}"#,
        br#"{"request":{"run":"r1","type":"status","members":false},"v":1,"extra":[1]}"#,
        br#"{"v":1,"request":{"type":"command","command":{"type":"startRun","name":"r\u0031"}}}"#,
        &simulate,
        // Refused: not UTF-8, not JSON, not an object, no or another version, no request.
        b"\xff\xfe",
        b"not json",
        b"[1]",
        br#"{"request":{"type":"ping"}}"#,
        br#"{"v":2,"request":{"type":"ping"}}"#,
        br#"{"v":"1","request":5}"#,
        br#"{"v":1}"#,
        br#"{"v":1,"request":null}"#,
        br#"{"v":1,"request":5}"#,
        br#"{"v":1,"request":[{"type":"ping"}]}"#,
        // A key twice: in the request, in the envelope, in a field neither pass reads.
        br#"{"v":1,"request":{"type":"ping","type":"ping"}}"#,
        br#"{"v":1,"request":{"type":"ping"},"request":{"type":"ping"}}"#,
        br#"{"v":1,"run":"a","run":"b","request":{"type":"ping"}}"#,
        br#"{"v":1,"v":1,"request":{"type":"ping"}}"#,
        // Trailing bytes, a truncated request.
        br#"{"v":1,"request":{"type":"ping"}} x"#,
        br#"{"v":1,"request":{"type":"ping""#,
    ];
    for arg in args {
        let one = read_request(parse_request, arg);
        let two = read_request(two_passes, arg);
        assert_eq!(one, two, "{}", String::from_utf8_lossy(arg));
    }
    // And the well-formed ones read as requests.
    let fields = read_request(parse_request, br#"{"v":1,"request":{"type":"ping"}}"#);
    assert_eq!(fields.unwrap()[0].as_deref(), Some(r#""ping""#));
}
