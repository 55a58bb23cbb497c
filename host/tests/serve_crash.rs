//! Crash safety of the real binary: `waverun serve` runs a 200-member rollout on the simulated
//! provider and is killed with SIGKILL at 50 or more random points, then restarted on the same
//! data directory; some of its lives also have the guest trap every few steps
//! (`WAVERUN_FAULT_TRAP_EVERY`). The run completes; the simulated platform saw exactly one
//! upgrade operation per member; every approval acknowledged before a kill is kept; the event
//! sequence has no gap and no duplicate, and an event never changes once it has been read. A
//! client follows the Server-Sent Events stream through every life, reconnecting with
//! `Last-Event-ID`: it sees every event once, in order, as the event log has it.

mod http_support;
mod process_support;
mod runtime_support;

use http_support::Client;
use process_support::{Life, Rng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MEMBERS: usize = 200;
const KILLS: usize = 50;
const TIME_SCALE: &str = "200";

fn fleet_file(dir: &Path) -> PathBuf {
    let members: Vec<Value> = (0..MEMBERS)
        .map(|i| {
            json!({
                "name": format!("m{i:03}"),
                "group": if i < 10 { "canary" } else { "rest" },
                "region": if i % 2 == 0 { "eastus" } else { "westeurope" },
                "kubernetesVersion": "1.33.2",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
                "behavior": {"upgradeMinutes": 10, "jitterMinutes": 5},
            })
        })
        .collect();
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "seed": 7,
        "members": members,
        "releases": {
            "kubernetes": [{"version": "1.34.1", "available": since}],
            "nodeImages": [
                {"version": "AKSUbuntu-2204-202611.01.0", "available": since},
                {"version": "AKSUbuntu-2204-202612.01.0", "available": since},
            ],
        },
    });
    let path = dir.join("fleet.json");
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    path
}

fn start(dir: &Path, fleet: &Path, life: usize, trap: bool) -> Life {
    let data = dir.join("data");
    let args = [
        "--time-scale",
        TIME_SCALE,
        "--data-dir",
        data.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
    ];
    let env: &[(&str, &str)] = if trap {
        &[("WAVERUN_FAULT_TRAP_EVERY", "5")]
    } else {
        &[]
    };
    Life::start(&args, env, &dir.join(format!("life-{life}.log")))
}

/// Everything the test has seen and must stay true.
#[derive(Default)]
struct Seen {
    /// seq → the event as first read.
    events: BTreeMap<u64, Value>,
    /// Approvals the daemon acknowledged (200).
    approved: BTreeSet<String>,
}

impl Seen {
    /// Reads the events after the last one seen; each seq must follow the previous one, and an
    /// event read before must read the same.
    fn read_events(&mut self, api: &Client, from_start: bool) {
        let mut after = if from_start {
            0
        } else {
            self.events.keys().next_back().copied().unwrap_or(0)
        };
        loop {
            let r = api.get(&format!("/events?after={after}&$top=1000"), None);
            if r.status != 200 {
                return; // killed meanwhile, or not ready: read again next life
            }
            let page = r.body["value"].as_array().cloned().unwrap_or_default();
            if page.is_empty() {
                return;
            }
            for e in page {
                let seq = e["seq"].as_u64().unwrap();
                assert_eq!(
                    seq,
                    after + 1,
                    "the event after {after} is {seq}: a gap or a repeat"
                );
                if let Some(before) = self.events.get(&seq) {
                    assert_eq!(before, &e, "event {seq} changed after a restart");
                }
                self.events.insert(seq, e);
                after = seq;
            }
        }
    }

    /// Approves every pending Approval gate; remembers those acknowledged.
    fn approve(&mut self, api: &Client) {
        let gates = api.get("/gates?$filter=state%20eq%20Pending", None);
        if gates.status != 200 {
            return;
        }
        for g in gates.body["value"].as_array().cloned().unwrap_or_default() {
            if g["properties"]["gateType"] != "Approval" {
                continue;
            }
            let id = g["name"].as_str().unwrap().to_string();
            let r = api.call("POST", &format!("/gates/{id}/approve"), None, &[], None);
            if r.status == 200 {
                self.approved.insert(id);
            }
        }
    }

    fn check_approvals_kept(&self, api: &Client) {
        for id in &self.approved {
            let g = api.get(&format!("/gates/{id}"), None);
            assert_eq!(g.status, 200, "{}", g.body);
            assert_eq!(
                g.body["properties"]["state"], "Completed",
                "approval {id} was acknowledged before a kill: {}",
                g.body
            );
        }
    }
}

/// What the follower got: seq → event, the broken promises it saw, how often it connected.
type Streamed = (BTreeMap<u64, Value>, Vec<String>, usize);

/// An SSE client that follows the daemon through its lives: it connects to the current life's
/// `/events` stream, resumes with `Last-Event-ID` after every break, and keeps each event it
/// received (seq → data). A seq that does not follow the last one received is a broken promise.
struct SseFollower {
    /// The current life's fleet API base.
    base: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    /// The last seq received.
    last: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<Streamed>>,
}

impl SseFollower {
    fn start(base: &str) -> SseFollower {
        let base = Arc::new(Mutex::new(base.to_string()));
        let stop = Arc::new(AtomicBool::new(false));
        let last_seq = Arc::new(AtomicU64::new(0));
        let (b, st, ls) = (base.clone(), stop.clone(), last_seq.clone());
        let thread = std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(2)))
                .build()
                .into();
            let mut got: BTreeMap<u64, Value> = BTreeMap::new();
            let mut broken = Vec::new();
            let mut connections = 0;
            // Bounded: the test stops it (and the last life's SIGTERM ends its stream).
            let deadline = Instant::now() + Duration::from_secs(900);
            while !st.load(Ordering::SeqCst) && Instant::now() < deadline {
                let last = got.keys().next_back().copied().unwrap_or(0);
                let url = format!("{}/events", b.lock().unwrap());
                let resp = agent
                    .get(&url)
                    .header("accept", "text/event-stream")
                    .header("last-event-id", last.to_string())
                    .call();
                let resp = match resp {
                    Ok(r) if r.status() == 200 => r,
                    _ => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue; // killed, or not ready yet: the next life
                    }
                };
                connections += 1;
                let reader = std::io::BufReader::new(resp.into_body().into_reader());
                let mut id = None;
                for line in reader.lines() {
                    let Ok(line) = line else { break };
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.trim().parse::<u64>().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        let (Some(seq), Ok(data)) = (id.take(), serde_json::from_str::<Value>(v))
                        else {
                            broken.push(format!("an unreadable event: {line}"));
                            continue;
                        };
                        let last = got.keys().next_back().copied().unwrap_or(0);
                        if seq != last + 1 {
                            broken.push(format!("event {seq} after {last}"));
                        }
                        got.insert(seq, data);
                        ls.store(seq, Ordering::SeqCst);
                    }
                }
            }
            (got, broken, connections)
        });
        SseFollower {
            base,
            stop,
            last: last_seq,
            thread: Some(thread),
        }
    }

    fn follow(&self, life: &Life) {
        *self.base.lock().unwrap() = life.api.base.clone();
    }

    /// Stops following (its stream must end: stop the daemon next) and gives what it got.
    fn finish(mut self) -> Streamed {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

fn run_state(api: &Client) -> Option<String> {
    let r = api.get("/updateRuns/r1", None);
    r.body["properties"]["status"]["status"]["state"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn kill_9_at_50_points_of_a_200_member_run_loses_nothing_and_upgrades_each_member_once() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_file(dir.path());
    let mut seen = Seen::default();

    // The first life sets the rollout up.
    let mut life = start(dir.path(), &fleet, 0, false);
    assert!(life.ready(60), "the first life never got ready");
    let strategy = json!({"properties": {"strategy": {"stages": [
        {"name": "canary", "groups": [{"name": "canary", "maxConcurrency": 2}]},
        {"name": "rest", "beforeGates": [{"type": "Approval", "displayName": "go"}],
         "groups": [{"name": "rest", "maxConcurrency": 20}]},
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
        "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
                                 "nodeImageSelection": {"type": "Latest"}},
    }});
    let r = life
        .api
        .call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let r = life
        .api
        .call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let sse = SseFollower::start(&life.api.base);

    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut kills = 0;
    let mut n = 0;
    while kills < KILLS {
        // Live for a while, reading events and approving, then die at a random point.
        let end = Instant::now() + Duration::from_millis(50 + rng.below(600));
        while Instant::now() < end {
            seen.read_events(&life.api, false);
            seen.approve(&life.api);
            std::thread::sleep(Duration::from_millis(rng.below(40)));
        }
        if run_state(&life.api).as_deref() == Some("Completed") {
            break;
        }
        life.kill();
        kills += 1;
        n += 1;
        life = start(dir.path(), &fleet, n, n % 5 == 0);
        sse.follow(&life);
        assert!(
            life.ready(60),
            "life {n} never got ready (see life-{n}.log)"
        );
        seen.check_approvals_kept(&life.api);
    }
    assert!(
        kills >= KILLS,
        "the run ended after only {kills} kills: slow the fleet down"
    );

    // The last life runs the rollout to its end.
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        seen.approve(&life.api);
        match run_state(&life.api).as_deref() {
            Some("Completed") => break,
            Some(s @ ("Failed" | "Stopped" | "Skipped")) => panic!("the run ended {s}"),
            _ => {}
        }
        if Instant::now() > end {
            let status = life.api.get("/updateRuns/r1", None).body;
            let kept = dir.keep();
            panic!(
                "the run did not complete (logs in {}): {status:#}",
                kept.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(seen.approved.len(), 1, "one approval gate, approved once");
    seen.check_approvals_kept(&life.api);
    let status = life.api.get("/updateRuns/r1", None).body["properties"]["status"].clone();
    let members: Vec<&Value> = status["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["groups"].as_array().unwrap())
        .flat_map(|g| g["members"].as_array().unwrap())
        .collect();
    assert_eq!(members.len(), MEMBERS);
    for m in &members {
        assert_eq!(m["status"]["state"], "Completed", "{m}");
    }
    // Every event, from the first: numbered 1..N, none changed since it was first read.
    seen.read_events(&life.api, true);
    let seqs: Vec<u64> = seen.events.keys().copied().collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    // Nothing lost, nothing twice: each member started and completed once in the event log
    // (traps included: a trapped step's events come from its replay).
    for kind in ["MemberStarted", "MemberCompleted"] {
        let mut per_member: BTreeMap<String, u32> = BTreeMap::new();
        for e in seen.events.values().filter(|e| e["kind"] == kind) {
            *per_member
                .entry(e["member"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        assert_eq!(per_member.len(), MEMBERS, "{kind}: every member");
        assert!(
            per_member.values().all(|n| *n == 1),
            "{kind}: once each: {per_member:?}"
        );
    }

    // The stream's follower has caught up with the log (bounded wait), then the daemon
    // stops cleanly, which ends the stream.
    let last = *seqs.last().unwrap();
    let caught_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < caught_up && sse.last.load(Ordering::SeqCst) < last {
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) signals the child we started; no memory is involved.
    unsafe {
        libc::kill(life.child.id() as i32, libc::SIGTERM);
    }
    let streamed_until_stop = sse.finish();
    assert!(
        life.child.wait().unwrap().success(),
        "SIGTERM stops it cleanly"
    );
    let (streamed, broken, connections) = streamed_until_stop;
    assert!(
        broken.is_empty(),
        "the SSE stream broke its order: {broken:?}"
    );
    assert!(
        connections > KILLS / 2,
        "the follower reconnected only {connections} times"
    );
    assert_eq!(
        streamed.keys().copied().collect::<Vec<_>>(),
        seqs,
        "the stream delivered every event once, across every kill"
    );
    for (seq, data) in &streamed {
        let logged = &seen.events[seq];
        assert_eq!(data["kind"], logged["kind"], "event {seq}");
        assert_eq!(data["at"], logged["at"], "event {seq}");
        assert_eq!(data.get("member"), logged.get("member"), "event {seq}");
    }

    // The simulated platform's own record: in the daemon's database (SQLite, or the
    // harness's PostgreSQL).
    const COUNTS: &str = "SELECT member, COUNT(*) FROM sim_operations GROUP BY member";
    let data = dir.path().join("data");
    let counts: BTreeMap<String, i64> = match runtime_support::postgres_for(&data) {
        Some(url) => postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .query(COUNTS, &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect(),
        None => {
            let db = rusqlite::Connection::open(data.join("waverun.db")).unwrap();
            let mut st = db.prepare(COUNTS).unwrap();
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        }
    };
    assert_eq!(counts.len(), MEMBERS, "every member was upgraded");
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "members upgraded more than once: {twice:?}"
    );
    eprintln!("{kills} kills, {} events", seqs.len());
}
