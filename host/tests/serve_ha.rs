//! High availability on PostgreSQL with the real binary: three `waverun serve` replicas share
//! one private PostgreSQL server (Debian's, started by the test), a 200-member run on the
//! simulated provider (whose record of upgrades lives in the same database, so every replica
//! sees the same clusters), and the leader dies again and again — `kill -9`, and `SIGSTOP`
//! past its lease then `SIGCONT`, its sessions ended by `pg_terminate_backend`, PostgreSQL
//! itself restarted. Each time a replica leads again; the run completes;
//! the simulated platform saw exactly one upgrade per member; the approval given before a
//! failover is kept; a live stream on the followers sees every event once, in order; a
//! follower refuses changes with 503 and the leader's address.

mod http_support;
mod pg_support;
mod process_support;
mod runtime_support;

use http_support::Client;
use pg_support::Postgres;
use process_support::Life;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MEMBERS: usize = 200;
const TIME_SCALE: &str = "200";
const LEASE_SECONDS: f64 = 2.0;

fn fleet_file(dir: &Path) -> PathBuf {
    let members: Vec<Value> = (0..MEMBERS)
        .map(|i| {
            json!({
                "name": format!("m{i:03}"),
                "group": if i < 10 { "canary" } else { "rest" },
                "region": if i % 2 == 0 { "eastus" } else { "westeurope" },
                "kubernetesVersion": "1.33.2",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
                "behavior": {"upgradeMinutes": 20, "jitterMinutes": 5},
            })
        })
        .collect();
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "seed": 11,
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

/// The faults played on the leader, one after the other while the run goes on.
const FAULTS: [&str; 5] = [
    "kill -9",
    "pg_terminate_backend",
    "kill -9",
    "SIGSTOP",
    "restart PostgreSQL",
];

struct Replicas {
    dir: PathBuf,
    fleet: PathBuf,
    url: String,
    lives: Vec<Option<Life>>,
    /// Each live replica's root URL, for the stream's thread.
    bases: Arc<Mutex<Vec<Option<String>>>>,
    started: usize,
}

/// Whether `/readyz` says this replica leads (`leader HOLDER (epoch N)`), or follows
/// (`follower HOLDER (leader ..., epoch N)`).
fn leads(readyz: &str) -> bool {
    readyz.lines().any(|l| l.starts_with("leader "))
}

fn follows(readyz: &str) -> bool {
    readyz.lines().any(|l| l.starts_with("follower "))
}

/// What the followers' live stream saw.
#[derive(Clone, Debug, Default)]
struct Streamed {
    /// The last event id read (each one the one after the one before).
    last: u64,
    /// Streams opened (one per follower it read from).
    connections: u64,
    /// What broke the order, if anything did.
    broken: Option<String>,
}

/// A client of `/events` (SSE) that only reads from followers and resumes with
/// Last-Event-ID on another follower when its replica goes away.
struct Stream {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Streamed>>,
    thread: std::thread::JoinHandle<()>,
}

impl Stream {
    fn start(bases: Arc<Mutex<Vec<Option<String>>>>) -> Stream {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Streamed::default()));
        let (stop2, seen2) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            let short: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(2)))
                .build()
                .into();
            // A paused replica's stream goes quiet: it is left after a few seconds.
            let long: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_recv_body(Some(Duration::from_secs(5)))
                .build()
                .into();
            while !stop2.load(Ordering::Relaxed) {
                let roots: Vec<String> = bases.lock().unwrap().iter().flatten().cloned().collect();
                let follower = roots.into_iter().find(|root| {
                    short
                        .get(format!("{root}/readyz"))
                        .call()
                        .ok()
                        .and_then(|mut r| r.body_mut().read_to_string().ok())
                        .is_some_and(|t| follows(&t))
                });
                let Some(root) = follower else {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                let last = seen2.lock().unwrap().last;
                let resp = long
                    .get(format!("{root}/api/v1/fleets/default/events"))
                    .header("accept", "text/event-stream")
                    .header("last-event-id", last.to_string())
                    .call();
                let Ok(resp) = resp else { continue };
                if resp.status() != 200 {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                seen2.lock().unwrap().connections += 1;
                let lines = BufReader::new(resp.into_body().into_reader()).lines();
                for line in lines {
                    let Ok(line) = line else { break };
                    if stop2.load(Ordering::Relaxed) {
                        break;
                    }
                    let Some(id) = line.strip_prefix("id: ") else {
                        continue;
                    };
                    let id: u64 = id.trim().parse().unwrap();
                    let mut s = seen2.lock().unwrap();
                    if id != s.last + 1 && s.broken.is_none() {
                        s.broken = Some(format!("event {id} came after {}", s.last));
                    }
                    s.last = s.last.max(id);
                }
            }
        });
        Stream { stop, seen, thread }
    }

    /// Waits (up to a minute) for the stream to reach event `last`, then stops it.
    fn finish(self, last: u64) -> Streamed {
        let end = Instant::now() + Duration::from_secs(60);
        while self.seen.lock().unwrap().last < last && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the stream's thread");
        let s = self.seen.lock().unwrap().clone();
        assert!(s.broken.is_none(), "the followers' stream: {:?}", s.broken);
        s
    }
}

impl Replicas {
    fn start(&mut self, i: usize) {
        let config = self.dir.join(format!("replica-{i}.json"));
        let c = json!({"store": {"type": "postgres", "url": self.url,
                                 "holder": format!("replica-{i}"),
                                 "leaseSeconds": LEASE_SECONDS}});
        std::fs::write(&config, c.to_string()).unwrap();
        let data = self.dir.join(format!("data-{i}"));
        let args = [
            "--config",
            config.to_str().unwrap(),
            "--time-scale",
            TIME_SCALE,
            "--data-dir",
            data.to_str().unwrap(),
            "--fleet",
            self.fleet.to_str().unwrap(),
        ];
        self.started += 1;
        let log = self
            .dir
            .join(format!("replica-{i}-life-{}.log", self.started));
        let life = Life::start(&args, &[], &log);
        assert!(life.ready(60), "replica {i} never got ready");
        let root = life.api.base.split("/api/").next().unwrap().to_string();
        self.bases.lock().unwrap()[i] = Some(root);
        self.lives[i] = Some(life);
    }

    fn readyz(life: &Life) -> String {
        let url = life.api.base.split("/api/").next().unwrap().to_string() + "/readyz";
        let r = life.api.get(&url, None);
        r.body.as_str().unwrap_or_default().to_string()
    }

    /// The replica that says it leads, waiting for one for up to `secs`.
    fn leader(&self, secs: u64) -> Option<usize> {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            for (i, l) in self.lives.iter().enumerate() {
                if let Some(l) = l {
                    if leads(&Self::readyz(l)) {
                        return Some(i);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    fn api(&self, i: usize) -> &Client {
        &self.lives[i].as_ref().unwrap().api
    }
}

fn run_state(api: &Client) -> Option<String> {
    let r = api.get("/updateRuns/r1", None);
    r.body["properties"]["status"]["status"]["state"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn three_replicas_survive_leader_kills_and_pauses_with_one_upgrade_per_member() {
    let dir = tempfile::tempdir().unwrap();
    let pg = Postgres::start();
    let url = pg.create_db("ha");
    let mut r = Replicas {
        dir: dir.path().to_path_buf(),
        fleet: fleet_file(dir.path()),
        url: url.clone(),
        lives: vec![None, None, None],
        bases: Arc::new(Mutex::new(vec![None, None, None])),
        started: 0,
    };
    for i in 0..3 {
        r.start(i);
    }
    let leader = r.leader(30).expect("a replica leads");

    // A follower refuses a change, naming the leader.
    let follower = (leader + 1) % 3;
    let strategy = json!({"properties": {"strategy": {"stages": [
        {"name": "canary", "groups": [{"name": "canary", "maxConcurrency": 5}]},
        {"name": "rest", "beforeGates": [{"type": "Approval", "displayName": "go"}],
         "groups": [{"name": "rest", "maxConcurrency": 25}]},
    ]}}});
    let refused = r.api(follower).call(
        "PUT",
        "/updateStrategies/s",
        None,
        &[],
        Some(&strategy.to_string()),
    );
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.body["code"], "NotLeader", "{}", refused.body);
    let leader_base = r
        .api(leader)
        .base
        .split("/api/")
        .next()
        .unwrap()
        .to_string();
    let hint = refused.header("x-waverun-leader").map(str::to_string);
    // The leader records its address when it takes over; a follower names it once it has.
    if let Some(h) = &hint {
        assert_eq!(h, &leader_base, "the follower named another leader");
    }

    let api = r.api(leader);
    // The CLI, pointed at the follower, is sent on to the leader.
    let follower_root = r
        .api(follower)
        .base
        .split("/api/")
        .next()
        .unwrap()
        .to_string();
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args([
            "updatestrategy",
            "create",
            "-n",
            "s",
            "--verbose",
            "--stages",
        ])
        .arg(strategy["properties"]["strategy"].to_string())
        .env("WAVERUN_SERVER", &follower_root)
        .env_remove("WAVERUN_TOKEN")
        .env_remove("WAVERUN_FLEET_NAME")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&cli.stderr).to_string();
    assert!(cli.status.success(), "the CLI via a follower: {said}");
    assert!(said.contains("asking the leader at"), "{said}");
    assert_eq!(api.get("/updateStrategies/s", None).status, 200);
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/s",
        "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
                                 "nodeImageSelection": {"type": "Latest"}},
    }});
    let put = api.call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(put.status, 201, "{}", put.body);
    let started = api.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(started.status, 200, "{}", started.body);

    // Followers serve reads: the run, as the leader wrote it (once they have followed it).
    let shown = Instant::now() + Duration::from_secs(20);
    while run_state(r.api(follower)).is_none() {
        assert!(Instant::now() < shown, "a follower does not show the run");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A live stream on the followers, as a dashboard would hold it: it reconnects to a
    // follower with Last-Event-ID whenever its replica goes away, and must see every event
    // once, in order.
    let stream = Stream::start(r.bases.clone());

    let mut failovers: Vec<(&str, Duration)> = Vec::new();
    let mut approved = false;
    let mut round = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        assert!(
            Instant::now() < deadline,
            "the run did not complete in 10 minutes"
        );
        // The leader may change by itself too (a lease not renewed in time under load): the
        // approval and the next fault go to whoever leads now.
        let leader = r.leader(60).expect("a replica leads");
        let api = r.api(leader);
        if !approved {
            let gates = api.get("/gates?$filter=state%20eq%20Pending", None);
            for g in gates.body["value"].as_array().cloned().unwrap_or_default() {
                if g["properties"]["gateType"] != "Approval" {
                    continue;
                }
                let id = g["name"].as_str().unwrap().to_string();
                let a = api.call("POST", &format!("/gates/{id}/approve"), None, &[], None);
                if a.status == 200 {
                    approved = true;
                }
            }
        }
        if run_state(api).as_deref() == Some("Completed") {
            break;
        }
        if round >= FAULTS.len() {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        std::thread::sleep(Duration::from_millis(700));
        let fault = FAULTS[round];
        let began = Instant::now();
        match fault {
            "kill -9" => {
                r.bases.lock().unwrap()[leader] = None;
                r.lives[leader].take().unwrap().kill();
                r.leader(60).expect("another replica takes over");
                failovers.push((fault, began.elapsed()));
                r.start(leader);
            }
            "pg_terminate_backend" => {
                // Every session of the leader's writer and lease keeper ends at once.
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                let ended = c
                    .query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE application_name = $1",
                        &[&format!("waverun:replica-{leader}")],
                    )
                    .unwrap()
                    .len();
                assert!(
                    ended >= 2,
                    "the leader's writer and keeper: {ended} sessions"
                );
                r.leader(60).expect("a replica leads again");
                failovers.push((fault, began.elapsed()));
            }
            "SIGSTOP" => {
                // Paused past its lease: another replica takes over meanwhile, and the
                // paused one, woken, steps down before anything else.
                let pid = r.lives[leader].as_ref().unwrap().child.id() as i32;
                // SAFETY: kill(2) signals the child this test started.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                let next = loop {
                    let found = (0..3)
                        .filter(|i| *i != leader)
                        .find(|i| leads(&Replicas::readyz(r.lives[*i].as_ref().unwrap())));
                    if let Some(n) = found {
                        break n;
                    }
                    assert!(
                        began.elapsed() < Duration::from_secs(60),
                        "nobody took over"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                };
                failovers.push((fault, began.elapsed()));
                std::thread::sleep(Duration::from_millis((LEASE_SECONDS * 1000.0) as u64));
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                std::thread::sleep(Duration::from_millis(500));
                let woke = Replicas::readyz(r.lives[leader].as_ref().unwrap());
                assert!(follows(&woke), "the woken replica says {woke:?}");
                assert_ne!(next, leader);
            }
            "restart PostgreSQL" => {
                pg.restart();
                r.leader(60).expect("a replica leads after the restart");
                failovers.push((fault, began.elapsed()));
            }
            other => unreachable!("{other}"),
        }
        round += 1;
    }
    assert!(approved, "the approval gate was never seen pending");
    assert_eq!(
        round,
        FAULTS.len(),
        "the run completed before every fault was played"
    );
    assert!(approved, "the approval gate was never seen pending");

    // Exactly one upgrade per member, by the simulated platform's own record.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows = c
        .query(
            "SELECT member, COUNT(*) FROM sim_operations GROUP BY member ORDER BY member",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), MEMBERS, "every member was upgraded");
    for row in rows {
        let (m, n): (String, i64) = (row.get(0), row.get(1));
        assert_eq!(n, 1, "{m} was upgraded {n} times");
    }
    // The event log has no gap.
    let seqs: Vec<i64> = c
        .query("SELECT seq FROM events ORDER BY seq", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for (i, s) in seqs.iter().enumerate() {
        assert_eq!(*s, i as i64 + 1, "the event log has a gap");
    }
    // The followers' stream saw all of it, once and in order (checked as it read).
    let last = *seqs.last().unwrap() as u64;
    let streamed = stream.finish(last);
    assert_eq!(
        streamed.last, last,
        "the stream stopped at {}",
        streamed.last
    );
    assert!(
        streamed.connections >= 1,
        "the stream never reached a follower"
    );
    // Each fault: a leader again within 2 × TTL (measured here with the polling's slack).
    let ms: Vec<(&str, u128)> = failovers.iter().map(|(f, d)| (*f, d.as_millis())).collect();
    eprintln!(
        "failovers (ms, lease {LEASE_SECONDS} s): {ms:?}; the stream reconnected {} times",
        streamed.connections
    );
}
