//! `abi`: the plugin (`waverun_plugin::Guest`, built natively) against an in-memory host,
//! driven by a session of lines `VERB payload`:
//!
//! | verb | what |
//! |---|---|
//! | `I` | `init` (a session that calls anything else first is initialised implicitly) |
//! | `R payload` | `request(payload)` (`B payload`: the same, without the implicit init) |
//! | `D payload` | `deliver(payload)` |
//! | `S payload` | `status(payload)` |
//! | `W` | `wake()` |
//! | `N` | `next_wakeup()` |
//! | `T ms` | move the host clock by `ms` (signed; not a number: to the next wakeup) |
//! | `A ms` | set the host clock to `ms` since the epoch |
//! | `X s` / `X f` / `X a` | deliver success / failure for the oldest submitted operation, or success for all |
//! | `M p` / `M f` / `M i` / `M e` | deliver a `checkMeasured` (Pass / Fail / Inconclusive / Error) for the oldest submitted measurement |
//! | `F a N` / `F s N` / `F n N` / `F c N` / `F q` / `F r` | make `journal_append` / `cluster_submit` / `snapshot_write` / `check_submit` answer `N`, make `cluster_query` forget, make `storage_read` fail |
//! | `P payload` / `J payload` | put a snapshot / a journal record into storage (read at the next init) |
//! | `C` | crash: a fresh plugin on the same host, then `init` |
//!
//! Checks, beyond "no panic": every reply is a JSON envelope (`"v": 1`, `ok`, a `result` or an
//! `error` with a known code and a message); journal records, snapshots, submissions,
//! measurements (`check_submit`: a CheckRequest) and queries the plugin hands the host parse, and records are numbered without gaps;
//! `next_wakeup` is `-1` or a time; and — when storage was not tampered with and no import was
//! made to fail — a crash and restart replays to the same engine snapshot.

use crate::rng::Rng;
use crate::targets::documents::small_enough;
use serde_json::Value;
use std::collections::{BTreeSet, VecDeque};
use waverun_core::sim::Scenario;
use waverun_core::{CheckRequest, HostCommand};
use waverun_plugin::{Guest, GuestLogLevel, HostImports, Record, StorageKind};

use crate::runner::feature;

/// The host clock at the start of a session: 2026-12-07T00:00:00Z.
pub const START_MS: i64 = 1_796_601_600_000;

/// Words of the envelopes.
pub const DICT: &[&str] = &[
    "{\"v\":1,",
    "\"request\":",
    "\"observation\":",
    "\"run\":",
    "\"type\":",
    "\"command\":",
    "\"scenario\":",
    "ping",
    "simulate",
    "command",
    "status",
    "plan",
    "runs",
    "nextWakeup",
    "snapshot",
    "upsertMember",
    "deleteMember",
    "upsertStrategy",
    "deleteStrategy",
    "createRun",
    "updateRun",
    "deleteRun",
    "startRun",
    "stopRun",
    "skip",
    "completeGate",
    "createRetryRun",
    "setFreezes",
    "setCatalog",
    "upgradeSucceeded",
    "upgradeFailed",
    "memberObserved",
    "kubernetesReleased",
    "nodeImageReleased",
    "\"operationId\":\"r1/dev-1\"",
    "\nW",
    "\nC",
    "\nT 3600000",
    "\nX s",
    "\nX f",
    "\nM p",
    "\nM f",
    "\nM i",
    "checkMeasured",
    "\"measurementId\":",
    "healthChecks",
    "afterMemberChecks",
    "HealthCheck",
    "\nN",
    "\nI",
];

const CODES: &[&str] = &[
    "InvalidField",
    "NotFound",
    "AlreadyExists",
    "InvalidState",
    "MemberInTwoGroups",
    "MinorVersionSkip",
    "UpgradeFailed",
    "FailureThresholdExceeded",
    "InvalidSnapshot",
    "BadEnvelope",
    "UnsupportedVersion",
    "NotInitialized",
    "PersistenceFailed",
    "ClusterSubmitFailed",
];

/// Storage, a cluster, a clock; knobs that make imports fail. Checks what the plugin gives it.
#[derive(Default)]
struct FuzzHost {
    now_ms: i64,
    journal: Vec<String>,
    snapshot: Option<String>,
    /// Accepted operations without a result yet, oldest first.
    pending: VecDeque<String>,
    known: BTreeSet<String>,
    /// Accepted measurements without a result yet, oldest first (each id once).
    measuring: VecDeque<String>,
    measured_ids: BTreeSet<String>,
    append_fails: i32,
    submit_fails: i32,
    check_fails: i32,
    snapshot_fails: i32,
    forget: bool,
    storage_fails: bool,
    /// The last journal record's `seq` (checked only while storage is the plugin's own).
    last_seq: u64,
    /// Storage was written by the session, not the plugin: numbering is not checked.
    tampered: bool,
}

impl HostImports for FuzzHost {
    fn clock_now_ms(&mut self) -> i64 {
        self.now_ms
    }
    fn cluster_submit(&mut self, operation: &str) -> i32 {
        let cmd: HostCommand = serde_json::from_str(operation)
            .unwrap_or_else(|e| panic!("cluster_submit got no startUpgrade ({e}): {operation}"));
        let HostCommand::StartUpgrade(op) = cmd else {
            panic!("cluster_submit carries upgrades only: {operation}");
        };
        if self.submit_fails != 0 {
            return self.submit_fails;
        }
        if self.known.insert(op.operation_id.clone()) {
            self.pending.push_back(op.operation_id);
        }
        0
    }
    fn cluster_query(&mut self, query: &str) -> i32 {
        let q: Value = serde_json::from_str(query)
            .unwrap_or_else(|e| panic!("cluster_query got no JSON ({e}): {query}"));
        let id = q["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("cluster_query without an operationId: {query}"));
        if self.forget || !self.known.contains(id) {
            1
        } else {
            0
        }
    }
    fn check_submit(&mut self, request: &str) -> i32 {
        let req: CheckRequest = serde_json::from_str(request)
            .unwrap_or_else(|e| panic!("check_submit got no CheckRequest ({e}): {request}"));
        feature("check_submit", &format!("{:?}", req.purpose));
        if self.check_fails != 0 {
            return self.check_fails;
        }
        if self.measured_ids.insert(req.measurement_id.clone()) {
            self.measuring.push_back(req.measurement_id);
        }
        0
    }
    fn journal_append(&mut self, record: &str) -> i32 {
        let r: Record = serde_json::from_str(record)
            .unwrap_or_else(|e| panic!("journal_append got no record ({e}): {record}"));
        if self.append_fails != 0 {
            return self.append_fails;
        }
        if !self.tampered {
            assert_eq!(
                r.seq,
                self.last_seq + 1,
                "journal records are numbered without gaps"
            );
        }
        self.last_seq = r.seq;
        self.journal.push(record.to_string());
        0
    }
    fn snapshot_write(&mut self, snapshot: &str) -> i32 {
        let doc: Value = serde_json::from_str(snapshot)
            .unwrap_or_else(|e| panic!("snapshot_write got no JSON ({e})"));
        assert_eq!(doc["v"], 1, "a snapshot document has v 1");
        let n = doc["journalSeq"]
            .as_u64()
            .unwrap_or_else(|| panic!("a snapshot document without journalSeq"));
        if self.snapshot_fails != 0 {
            return self.snapshot_fails;
        }
        self.snapshot = Some(snapshot.to_string());
        self.journal.retain(|r| {
            serde_json::from_str::<Value>(r)
                .ok()
                .and_then(|v| v["seq"].as_u64())
                .is_none_or(|s| s > n)
        });
        0
    }
    fn storage_read(&mut self, kind: StorageKind) -> Result<Option<Vec<u8>>, i32> {
        if self.storage_fails {
            return Err(-2);
        }
        Ok(match kind {
            StorageKind::Snapshot => self.snapshot.clone().map(String::into_bytes),
            StorageKind::Journal if self.journal.is_empty() => None,
            StorageKind::Journal => Some(self.journal.join("\n").into_bytes()),
        })
    }
    fn log(&mut self, _level: GuestLogLevel, _message: &str) {}
}

/// Checks one reply; returns it parsed.
fn check_envelope(call: &str, reply: &str) -> Value {
    let v: Value = serde_json::from_str(reply)
        .unwrap_or_else(|e| panic!("{call}: the reply is not JSON ({e}): {reply}"));
    assert_eq!(v["v"], 1, "{call}: the reply has no \"v\": 1: {reply}");
    match v["ok"].as_bool() {
        Some(true) => {
            assert!(
                v.get("result").is_some(),
                "{call}: ok without a result: {reply}"
            );
            feature(call, "ok");
        }
        Some(false) => {
            let code = v["error"]["code"]
                .as_str()
                .unwrap_or_else(|| panic!("{call}: an error without a code: {reply}"));
            assert!(
                CODES.contains(&code),
                "{call}: unknown error code {code}: {reply}"
            );
            assert!(
                v["error"]["message"].is_string(),
                "{call}: an error without a message: {reply}"
            );
            feature(call, code);
            feature(call, v["error"]["message"].as_str().unwrap_or(""));
        }
        None => panic!("{call}: the reply has no boolean \"ok\": {reply}"),
    }
    if let Some(events) = v["result"]["events"].as_array() {
        for e in events {
            feature("event", e["kind"].as_str().unwrap_or("?"));
        }
    }
    v
}

/// A `simulate` request too large to run here (the guest would simulate it in full).
fn heavy_simulate(payload: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(payload) else {
        return false;
    };
    if v["request"]["type"] != "simulate" {
        return false;
    }
    match Scenario::from_json(&v["request"]["scenario"].to_string()) {
        Ok(sc) => sc.validate().is_ok() && !small_enough(&sc),
        Err(_) => false,
    }
}

struct Session {
    plugin: Option<Guest<FuzzHost>>,
    host: Option<FuzzHost>,
    /// Whether the replay check applies (storage untouched, no import made to fail).
    pristine: bool,
}

impl Session {
    fn plugin(&mut self, auto_init: bool) -> &mut Guest<FuzzHost> {
        if self.plugin.is_none() {
            let host = self.host.take().expect("a host");
            self.plugin = Some(Guest::new(host));
            if auto_init {
                let reply = self.plugin.as_mut().expect("plugin").init();
                check_envelope("init", &reply);
            }
        }
        self.plugin.as_mut().expect("plugin")
    }

    fn host(&mut self) -> &mut FuzzHost {
        match (&mut self.plugin, &mut self.host) {
            (Some(p), _) => p.host_mut(),
            (None, Some(h)) => h,
            (None, None) => unreachable!("the session holds a host or a plugin"),
        }
    }

    /// A crash and restart; with pristine storage, the replayed engine equals the old one.
    fn crash(&mut self) {
        let Some(p) = self.plugin.take() else {
            return;
        };
        let before = p.engine().map(|e| e.snapshot());
        let replayable = self.pristine && p.journal_seq().is_some_and(|s| s > 0);
        let mut fresh = Guest::new(p.into_host());
        let reply = fresh.init();
        let v = check_envelope("init after crash", &reply);
        if replayable {
            assert_eq!(
                v["ok"], true,
                "init after a crash with the plugin's own storage: {reply}"
            );
            let after = fresh.engine().map(|e| e.snapshot());
            assert!(
                before == after,
                "the replayed engine differs from the engine before the crash"
            );
        }
        self.plugin = Some(fresh);
    }
}

fn knob(payload: &[u8]) -> (u8, i32) {
    let text = String::from_utf8_lossy(payload);
    let mut parts = text.split_whitespace();
    let which = parts.next().and_then(|w| w.bytes().next()).unwrap_or(b'a');
    let n = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
    (which, n)
}

/// Runs one session.
pub fn run(input: &[u8]) {
    let mut s = Session {
        plugin: None,
        host: Some(FuzzHost {
            now_ms: START_MS,
            ..FuzzHost::default()
        }),
        pristine: true,
    };
    for line in input.split(|&b| b == b'\n').take(300) {
        let Some((&verb, rest)) = line.split_first() else {
            continue;
        };
        let payload = rest.strip_prefix(b" ").unwrap_or(rest);
        match verb {
            b'P' => {
                let h = s.host();
                h.snapshot = Some(String::from_utf8_lossy(payload).into_owned());
                h.tampered = true;
                s.pristine = false;
            }
            b'J' => {
                let h = s.host();
                h.journal
                    .push(String::from_utf8_lossy(payload).into_owned());
                h.tampered = true;
                s.pristine = false;
            }
            b'I' => {
                let reply = s.plugin(false).init();
                check_envelope("init", &reply);
            }
            b'B' | b'R' => {
                if heavy_simulate(payload) {
                    feature("simulate", "skipped");
                    continue;
                }
                let reply = s.plugin(verb == b'R').request(payload);
                check_envelope("request", &reply);
            }
            b'D' => {
                let reply = s.plugin(true).deliver(payload);
                check_envelope("deliver", &reply);
            }
            b'S' => {
                let reply = s.plugin(true).status(payload);
                check_envelope("status", &reply);
            }
            b'W' => {
                let reply = s.plugin(true).wake();
                check_envelope("wake", &reply);
            }
            b'N' => {
                let next = s.plugin(true).next_wakeup();
                assert!(next >= -1, "next_wakeup answered {next}");
            }
            b'T' => {
                let p = s.plugin(true);
                let text = String::from_utf8_lossy(payload);
                match text.trim().parse::<i64>() {
                    Ok(d) => {
                        let h = p.host_mut();
                        h.now_ms = h.now_ms.saturating_add(d);
                    }
                    Err(_) => {
                        let next = p.next_wakeup();
                        if next >= 0 {
                            p.host_mut().now_ms = next;
                        }
                    }
                }
            }
            b'A' => {
                if let Ok(t) = String::from_utf8_lossy(payload).trim().parse::<i64>() {
                    s.host().now_ms = t;
                }
            }
            b'X' => {
                let p = s.plugin(true);
                let ids: Vec<String> = match payload.first() {
                    Some(b'a') => p.host_mut().pending.drain(..).collect(),
                    _ => p.host_mut().pending.pop_front().into_iter().collect(),
                };
                for id in ids {
                    let obs = if payload.first() == Some(&b'f') {
                        serde_json::json!({"type": "upgradeFailed", "operationId": id, "message": "fuzz"})
                    } else {
                        serde_json::json!({"type": "upgradeSucceeded", "operationId": id})
                    };
                    let env = serde_json::json!({"v": 1, "observation": obs}).to_string();
                    let reply = p.deliver(env.as_bytes());
                    check_envelope("deliver", &reply);
                }
            }
            b'M' => {
                let p = s.plugin(true);
                let Some(id) = p.host_mut().measuring.pop_front() else {
                    continue;
                };
                let verdict = match payload.first() {
                    Some(b'f') => "Fail",
                    Some(b'i') => "Inconclusive",
                    Some(b'e') => "Error",
                    _ => "Pass",
                };
                let obs = serde_json::json!({"type": "checkMeasured", "measurementId": id, "verdict": verdict});
                let env = serde_json::json!({"v": 1, "observation": obs}).to_string();
                let reply = p.deliver(env.as_bytes());
                check_envelope("deliver", &reply);
            }
            b'F' => {
                let (which, n) = knob(payload);
                s.pristine = false;
                let h = s.host();
                match which {
                    b'a' => h.append_fails = n,
                    b's' => h.submit_fails = n,
                    b'c' => h.check_fails = n,
                    b'n' => h.snapshot_fails = n,
                    b'q' => h.forget = !h.forget,
                    _ => h.storage_fails = !h.storage_fails,
                }
            }
            b'C' => s.crash(),
            _ => {
                if heavy_simulate(line) {
                    continue;
                }
                let reply = s.plugin(true).request(line);
                check_envelope("request", &reply);
            }
        }
    }
    // Every session ends with a crash and restart.
    s.crash();
}

fn cmd(c: Value) -> String {
    format!(
        "R {}",
        serde_json::json!({"v": 1, "request": {"type": "command", "command": c}})
    )
}

const MEMBERS: &[&str] = &["dev-1", "prod-1", "prod-2"];

/// One random line.
pub fn line(rng: &mut Rng) -> Vec<u8> {
    let run = rng.pick(&["r1", "r2"]);
    let l = match rng.below(14) {
        0 => "W".to_string(),
        1 => format!(
            "T {}",
            rng.pick(&[
                "1000",
                "60000",
                "1800000",
                "3600000",
                "86400000",
                "604800000",
                "-3600000",
                "x",
                "9223372036854775807"
            ])
        ),
        2 => format!("X {}", rng.pick(&["s", "f", "a"])),
        3 => "C".to_string(),
        4 => "N".to_string(),
        5 => format!("S {{\"v\":1,\"run\":\"{run}\"}}"),
        6 => format!(
            "R {{\"v\":1,\"request\":{{\"type\":\"{}\",\"run\":\"{run}\"}}}}",
            rng.pick(&["status", "plan", "runs", "nextWakeup", "snapshot", "ping"])
        ),
        7 => cmd(
            serde_json::json!({"type": rng.pick(&["startRun", "stopRun", "deleteRun"]), "name": run}),
        ),
        8 => cmd(
            serde_json::json!({"type": "completeGate", "run": run, "gate": {"stage": "production", "timing": "Before"}, "by": "fuzz"}),
        ),
        9 => cmd(
            serde_json::json!({"type": "skip", "run": run, "targets": [rng.pick(&["Member:prod-1", "Group:prod", "Stage:test", "AfterStageWait:test"])]}),
        ),
        10 => cmd(serde_json::json!({"type": "createRetryRun", "name": "r2", "from": "r1"})),
        11 => format!(
            "D {}",
            serde_json::json!({"v": 1, "observation": {"type": rng.pick(&["upgradeSucceeded", "upgradeFailed"]), "operationId": format!("{run}/{}", rng.pick(MEMBERS)), "message": "m"}})
        ),
        12 => format!(
            "F {} {}",
            rng.pick(&["a", "s", "n", "q"]),
            rng.pick(&["0", "1", "-1"])
        ),
        _ => cmd(
            serde_json::json!({"type": "setFreezes", "freezes": [{"name": "f", "start": "2026-12-07T01:00:00Z", "end": rng.pick(&["2026-12-08T00:00:00Z", "+262142-01-01T00:00:00Z"])}]}),
        ),
    };
    l.into_bytes()
}

/// A session like the plugin's own tests: a catalog, three members, a two-stage run, then
/// random lines.
pub fn generate(rng: &mut Rng) -> Vec<u8> {
    let start = "2026-12-07T00:00:00Z";
    let mut lines = vec!["I".to_string()];
    lines.push(cmd(serde_json::json!({"type": "setCatalog", "catalog": {
        "kubernetes": [{"version": "1.31.2", "available": {"*": start}}],
        "nodeImages": [{"version": "AKSUbuntu-2204gen2containerd-202411.03.0", "available": {"*": start}}]}})));
    for (m, g) in [("dev-1", "dev"), ("prod-1", "prod"), ("prod-2", "prod")] {
        lines.push(cmd(serde_json::json!({"type": "upsertMember", "member": {
            "name": m, "group": g, "region": "eastus", "kubernetesVersion": "1.30.4",
            "nodePools": [{"name": "system", "osType": "Linux",
                           "imageVersion": "AKSUbuntu-2204gen2containerd-202411.03.0"}]}})));
    }
    lines.push(cmd(serde_json::json!({"type": "createRun", "run": {
        "name": "r1",
        "strategy": {"stages": [
            {"name": "test", "groups": [{"name": "dev"}], "afterStageWaitInSeconds": rng.pick(&[60u64, 3600, 604800])},
            {"name": "production", "beforeGates": [{"type": "Approval"}],
             "groups": [{"name": "prod", "maxConcurrency": "2"}]}]},
        "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"},
                                 "nodeImageSelection": {"type": "Latest"}}}})));
    lines.push(cmd(serde_json::json!({"type": "startRun", "name": "r1"})));
    for _ in 0..rng.range(0, 12) {
        lines.push(String::from_utf8_lossy(&line(rng)).into_owned());
    }
    lines.join("\n").into_bytes()
}
