//! High availability on PostgreSQL with the real binary: three `waverun serve` replicas share
//! one private PostgreSQL server (Debian's, started by the test), a 200-member run on the
//! simulated provider (whose record of upgrades lives in the same database, so every replica
//! sees the same clusters), and the leader dies again and again — `kill -9`, and `SIGSTOP`
//! past its lease then `SIGCONT`. Each time another replica takes over; the run completes;
//! the simulated platform saw exactly one upgrade per member; the approval given before a
//! failover is kept; a follower refuses changes with 503 and the leader's address.

mod http_support;
mod pg_support;
mod process_support;
mod runtime_support;

use http_support::Client;
use pg_support::Postgres;
use process_support::Life;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
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

struct Replicas {
    dir: PathBuf,
    fleet: PathBuf,
    url: String,
    lives: Vec<Option<Life>>,
    started: usize,
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
                    if Self::readyz(l).contains("leader replica-") {
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
#[ignore = "issue 25, open: under CI's parallel load the run once stalled after a failover (it passed alone); run with --ignored while it is being fixed"]
fn three_replicas_survive_leader_kills_and_pauses_with_one_upgrade_per_member() {
    let dir = tempfile::tempdir().unwrap();
    let pg = Postgres::start();
    let url = pg.create_db("ha");
    let mut r = Replicas {
        dir: dir.path().to_path_buf(),
        fleet: fleet_file(dir.path()),
        url: url.clone(),
        lives: vec![None, None, None],
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
    let put = api.call(
        "PUT",
        "/updateStrategies/s",
        None,
        &[],
        Some(&strategy.to_string()),
    );
    assert_eq!(put.status, 201, "{}", put.body);
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/s",
        "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
                                 "nodeImageSelection": {"type": "Latest"}},
    }});
    let put = api.call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(put.status, 201, "{}", put.body);
    let started = api.call("POST", "/updateRuns/r1/start", None, &[], None);
    assert_eq!(started.status, 200, "{}", started.body);

    // Followers serve reads: the run, as the leader wrote it.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        run_state(r.api(follower)).is_some(),
        "a follower does not show the run"
    );

    let mut leader = leader;
    let mut failovers = Vec::new();
    let mut approved = false;
    let mut round = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        assert!(
            Instant::now() < deadline,
            "the run did not complete in 10 minutes"
        );
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
        if round < 4 {
            std::thread::sleep(Duration::from_millis(700));
            let began = Instant::now();
            if round == 3 {
                // Paused past its lease: another replica takes over meanwhile, and the
                // paused one, woken, steps down before anything else.
                let pid = r.lives[leader].as_ref().unwrap().child.id() as i32;
                // SAFETY: kill(2) signals the child this test started.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                let next = loop {
                    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
                    let found = others.iter().copied().find(|i| {
                        Replicas::readyz(r.lives[*i].as_ref().unwrap()).contains("leader replica-")
                    });
                    if let Some(n) = found {
                        break n;
                    }
                    assert!(
                        began.elapsed() < Duration::from_secs(60),
                        "nobody took over"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                };
                failovers.push(began.elapsed());
                std::thread::sleep(Duration::from_millis((LEASE_SECONDS * 1000.0) as u64));
                unsafe { libc::kill(pid, libc::SIGCONT) };
                std::thread::sleep(Duration::from_millis(500));
                let woke = Replicas::readyz(r.lives[leader].as_ref().unwrap());
                assert!(woke.contains("follower"), "the woken replica says {woke:?}");
                leader = next;
            } else {
                r.lives[leader].take().unwrap().kill();
                let next = r.leader(60).expect("another replica takes over");
                failovers.push(began.elapsed());
                let old = leader;
                leader = next;
                r.start(old);
            }
            round += 1;
        } else {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(approved, "the approval gate was never seen pending");
    assert_eq!(
        round, 4,
        "the run completed before every failover was played"
    );

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
    let ms: Vec<u128> = failovers.iter().map(|d| d.as_millis()).collect();
    eprintln!("failovers (ms, lease {LEASE_SECONDS} s): {ms:?}");
}
