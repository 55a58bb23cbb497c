//! Crash safety of the real binary against AKS: `waverun serve` drives 12 AKS clusters through
//! the `aks` provider (the fake Azure Resource Manager of `tests/aks/fake_arm.py`, one child
//! process kept across every life of the daemon) in two runs, node images pool by pool
//! (NodeImageOnly) and then Kubernetes 1.34.1 (Full), and is killed with SIGKILL at 20 or more
//! seeded points while AKS operations are in flight: at random moments, right after an
//! upgrade-starting write reached ARM (before or after the daemon stored the operation's
//! handle), right after a poll of an operation's status. Each time it is restarted on the same
//! data directory. Both runs complete; each cluster received exactly one upgrade request per
//! target, and no write that started nothing (a restarted daemon follows the operation it
//! started, and never sends it again); every member started and completed once per run; every
//! cluster runs what the runs asked for.

mod aks_support;
mod http_support;
mod process_support;
mod runtime_support;

use aks_support::{cluster_id, clusters, config_yaml, seed, FakeArm, NEW_IMAGE, REGIONS};
use http_support::Client;
use process_support::{Life, Rng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Kills per run with AKS operations in flight (a run that completes first has fewer): 22 in
/// all, 20 at least.
const IN_FLIGHT_KILLS_PER_RUN: usize = 11;
const MIN_KILLS: usize = 20;
/// Kills per run, at most.
const MAX_KILLS_PER_RUN: usize = 20;
/// Fake seconds per real second: each phase of an AKS operation (60 fake seconds: the control
/// plane, then each pool) lasts 1.5 real seconds.
const TIME_SCALE: &str = "40";
/// The whole test, bounded.
const DEADLINE: Duration = Duration::from_secs(300);

/// Where a life ends.
#[derive(Clone, Copy, Debug)]
enum KillPoint {
    /// After the life has run this many milliseconds.
    After(u64),
    /// This many milliseconds after the next upgrade-starting write (a PUT of a cluster, a POST
    /// of a pool's image) was answered by ARM: the daemon may not have stored its handle yet.
    AfterWrite(u64),
    /// This many milliseconds after the next poll of an operation's status URL.
    AfterPoll(u64),
}

impl KillPoint {
    fn draw(rng: &mut Rng) -> KillPoint {
        match rng.below(10) {
            0..=3 => KillPoint::After(300 + rng.below(2700)),
            // Half of them at once: the daemon has the answer, or not even that, and has not
            // stored the operation's handle.
            4..=6 if rng.below(2) == 0 => KillPoint::AfterWrite(0),
            4..=6 => KillPoint::AfterWrite(rng.below(150)),
            _ => KillPoint::AfterPoll(rng.below(60)),
        }
    }
}

/// One kill, as it happened.
#[derive(Debug)]
#[allow(dead_code)] // printed
struct Kill {
    run: &'static str,
    life: usize,
    point: KillPoint,
    /// What the kill followed in the fake's request log (seq, method, path), when it waited.
    followed: Option<(u64, String, String)>,
    /// How long the life ran once it was ready, ms.
    lived_ms: u128,
    /// AKS operations the daemon started that were running when it died.
    in_flight: usize,
}

/// The fake, the daemon's current life, and what happened so far.
struct Harness {
    dir: PathBuf,
    config: PathBuf,
    fake: FakeArm,
    /// The daemon's current life (none between a kill and the next start).
    life: Option<Life>,
    lives: usize,
    rng: Rng,
    kills: Vec<Kill>,
    /// The last seq of the fake's request log looked at.
    log_seq: u64,
    deadline: Instant,
}

fn is_arm_write(r: &Value) -> bool {
    r["method"] != "GET"
        && r["path"]
            .as_str()
            .is_some_and(|p| p.contains("/providers/Microsoft.ContainerService/"))
}

fn is_status_poll(r: &Value) -> bool {
    r["method"] == "GET"
        && r["path"]
            .as_str()
            .is_some_and(|p| p.contains("/operations/") || p.contains("/operationresults/"))
}

fn start(dir: &Path, config: &Path, life: usize) -> Life {
    let data = dir.join("data");
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ];
    let life = Life::start(&args, &[], &dir.join(format!("life-{life}.log")));
    assert!(
        life.ready(60),
        "a life never got ready (see its log in {})",
        dir.display()
    );
    life
}

fn run_state(api: &Client, run: &str) -> Option<String> {
    let r = api.get(&format!("/updateRuns/{run}"), None);
    r.body["properties"]["status"]["status"]["state"]
        .as_str()
        .map(str::to_string)
}

impl Harness {
    fn api(&self) -> &Client {
        &self.life.as_ref().expect("a life runs").api
    }

    fn left(&self) -> bool {
        Instant::now() < self.deadline
    }

    /// Waits for the first request after the log's last seq that `matches`, for at most
    /// `secs` (reads the log at least once); the log's last seq moves on.
    fn next_request(
        &mut self,
        secs: u64,
        matches: impl Fn(&Value) -> bool,
    ) -> Option<(u64, String, String)> {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let log = self.fake.requests(self.log_seq)["requests"].clone();
            for r in log.as_array().into_iter().flatten() {
                let seq = r["seq"].as_u64().unwrap();
                self.log_seq = self.log_seq.max(seq);
                if matches(r) {
                    let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                    return Some((seq, text("method"), text("path")));
                }
            }
            if Instant::now() >= end || !self.left() {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Lets the current life run to a kill point, kills it with SIGKILL, starts the next one on
    /// the same data directory.
    fn kill_and_restart(&mut self, run: &'static str) {
        let point = KillPoint::draw(&mut self.rng);
        let born = Instant::now();
        // The log up to now is history: the kill follows a request of this life.
        self.next_request(0, |_| false);
        let followed = match point {
            KillPoint::After(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                None
            }
            KillPoint::AfterWrite(ms) => {
                let r = self.next_request(8, |r| is_arm_write(r) && r["upgrade"] == true);
                std::thread::sleep(Duration::from_millis(ms));
                r
            }
            KillPoint::AfterPoll(ms) => {
                let r = self.next_request(8, is_status_poll);
                std::thread::sleep(Duration::from_millis(ms));
                r
            }
        };
        self.lives += 1;
        let next = self.lives;
        self.life.take().expect("a life runs").kill();
        let lived_ms = born.elapsed().as_millis();
        let in_flight = self.fake.state()["operations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["internalStatus"] == "InProgress" && o["clientInitiated"] == true)
            .count();
        let kill = Kill {
            run,
            life: next - 1,
            point,
            followed,
            lived_ms,
            in_flight,
        };
        eprintln!("kill {}: {kill:?}", self.kills.len() + 1);
        self.kills.push(kill);
        self.life = Some(start(&self.dir, &self.config, next));
    }

    /// Creates and starts `run`, kills the daemon while it runs until IN_FLIGHT_KILLS_PER_RUN
    /// kills landed with AKS operations in flight (MAX_KILLS_PER_RUN at most), then lets the last
    /// life finish it: its final state.
    fn run_through_kills(&mut self, run: &'static str, spec: &Value) -> String {
        let r = self.api().call(
            "PUT",
            &format!("/updateRuns/{run}"),
            None,
            &[],
            Some(&spec.to_string()),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let r = self
            .api()
            .call("POST", &format!("/updateRuns/{run}/start"), None, &[], None);
        assert_eq!(r.status, 200, "{}", r.body);
        let of_run = |h: &Harness| h.kills.iter().filter(|k| k.run == run).count();
        let in_flight = |h: &Harness| {
            h.kills
                .iter()
                .filter(|k| k.run == run && k.in_flight > 0)
                .count()
        };
        while in_flight(self) < IN_FLIGHT_KILLS_PER_RUN
            && of_run(self) < MAX_KILLS_PER_RUN
            && self.left()
        {
            if run_state(self.api(), run).as_deref() == Some("Completed") {
                break;
            }
            self.kill_and_restart(run);
        }
        loop {
            match run_state(self.api(), run) {
                Some(s) if matches!(s.as_str(), "Completed" | "Failed" | "Stopped") => {
                    self.next_request(0, |_| false);
                    eprintln!(
                        "run {run}: {s} (the fake's request log at {})",
                        self.log_seq
                    );
                    return s;
                }
                _ => {}
            }
            if !self.left() {
                return "(still running at the deadline)".into();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn strategy() -> Value {
    json!({"stages": REGIONS.iter().map(|r| json!({
        "name": r, "groups": [{"name": r, "maxConcurrency": 2}],
    })).collect::<Vec<_>>()})
}

/// The events of `run`: how many times each member started and completed.
fn started_and_completed(api: &Client, run: &str) -> BTreeMap<String, (u32, u32)> {
    let mut per_member: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut after = 0;
    for _ in 0..1000 {
        let r = api.get(&format!("/events?run={run}&after={after}&$top=1000"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let page = r.body["value"].as_array().cloned().unwrap_or_default();
        let Some(last) = page.last() else {
            return per_member;
        };
        after = last["seq"].as_u64().unwrap();
        for e in &page {
            let Some(m) = e["member"].as_str() else {
                continue;
            };
            let counts = per_member.entry(m.to_string()).or_default();
            match e["kind"].as_str() {
                Some("MemberStarted") => counts.0 += 1,
                Some("MemberCompleted") => counts.1 += 1,
                _ => {}
            }
        }
    }
    panic!("more than 1000 pages of events");
}

/// The fake's request log lines about `cluster`'s ARM writes, for a failure message.
fn writes_to(log: &[Value], cluster: &str) -> Vec<String> {
    let id = cluster_id(cluster).to_lowercase();
    log.iter()
        .filter(|r| is_arm_write(r))
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.to_lowercase().starts_with(&id))
        })
        .map(|r| {
            format!(
                "#{} {} {} {} upgrade={} {}",
                r["seq"], r["method"], r["path"], r["status"], r["upgrade"], r["targets"]
            )
        })
        .collect()
}

#[test]
fn kill_9_at_20_points_of_two_aks_runs_sends_each_cluster_one_upgrade_request_per_target() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeArm::start(dir.path(), &seed(0), &["--time-scale", TIME_SCALE]);
    let config = config_yaml(dir.path(), &fake);
    let life = start(dir.path(), &config, 0);
    let mut h = Harness {
        dir: dir.path().to_path_buf(),
        config,
        fake,
        life: Some(life),
        lives: 0,
        rng: Rng(0x5eed_a1c5_0000_0021),
        kills: Vec::new(),
        log_seq: 0,
        deadline: Instant::now() + DEADLINE,
    };
    let began = Instant::now();

    // The 12 members, described by AKS, and the new image in every region's catalog.
    aks_support::eventually(60, "the 12 members", || {
        let v = h.api().get("/members?$top=100", None).body["value"].clone();
        (v.as_array()?.len() == 12).then_some(())
    });
    for region in REGIONS {
        aks_support::eventually(60, "the new image in every region's catalog", || {
            let r = h
                .api()
                .get(&format!("/releases?region={region}"), None)
                .body;
            r["nodeImages"]
                .to_string()
                .contains(NEW_IMAGE)
                .then_some(())
        });
    }

    // Run 1: node images, pool by pool (a write per pool; the next pool's is sent by a poll).
    let images = json!({"properties": {
        "strategy": strategy(),
        "managedClusterUpdate": {
            "upgrade": {"type": "NodeImageOnly"},
            "nodeImageSelection": {"type": "Consistent"},
        },
    }});
    let state = h.run_through_kills("images", &images);
    let status = h.api().get("/updateRuns/images", None).body;
    assert_eq!(
        state,
        "Completed",
        "{status:#} (logs in {})",
        dir.keep().display()
    );

    // Run 2: Kubernetes 1.34.1, one PUT of each cluster.
    let full = json!({"properties": {
        "strategy": strategy(),
        "managedClusterUpdate": {
            "upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
            "nodeImageSelection": {"type": "Consistent"},
        },
    }});
    let state = h.run_through_kills("full", &full);
    let status = h.api().get("/updateRuns/full", None).body;
    assert_eq!(
        state,
        "Completed",
        "{status:#} (logs in {})",
        dir.keep().display()
    );
    let elapsed = began.elapsed();

    let in_flight = h.kills.iter().filter(|k| k.in_flight > 0).count();
    eprintln!(
        "{} kills ({in_flight} with AKS operations in flight) in {elapsed:?}",
        h.kills.len()
    );
    assert!(
        in_flight >= MIN_KILLS,
        "only {in_flight} kills with AKS operations in flight: {:#?}",
        h.kills
    );

    // No operation lost, none done twice: every member started and completed once per run.
    for run in ["images", "full"] {
        let seen = started_and_completed(h.api(), run);
        let expected: BTreeMap<String, (u32, u32)> =
            clusters().into_iter().map(|(n, _)| (n, (1, 1))).collect();
        assert_eq!(seen, expected, "run {run}: (started, completed) per member");
    }

    // AKS: exactly one upgrade request per target, for every cluster.
    let log = h.fake.requests(0);
    let requests = log["requests"].as_array().cloned().unwrap_or_default();
    let counts: BTreeMap<String, BTreeMap<String, u64>> =
        serde_json::from_value(log["upgradeRequests"].clone()).unwrap();
    let once: BTreeMap<String, u64> = [
        format!("agentPools/system/nodeImageVersion={NEW_IMAGE}"),
        format!("agentPools/user/nodeImageVersion={NEW_IMAGE}"),
        "kubernetesVersion=1.34.1".to_string(),
        "agentPools/system/orchestratorVersion=1.34.1".to_string(),
        "agentPools/user/orchestratorVersion=1.34.1".to_string(),
    ]
    .into_iter()
    .map(|t| (t, 1))
    .collect();
    for (name, _) in clusters() {
        let id = cluster_id(&name);
        let got = counts.get(&id).or_else(|| counts.get(&id.to_lowercase()));
        assert_eq!(
            got,
            Some(&once),
            "{name}: upgrade requests per target; its writes:\n{}\nkills: {:#?}",
            writes_to(&requests, &name).join("\n"),
            h.kills
        );
    }
    // And no write sent again: every write ARM let through started an upgrade (a write sent
    // again would have been refused as the single writer's 409, or done nothing).
    let again: Vec<&Value> = requests
        .iter()
        .filter(|r| is_arm_write(r) && r["status"] != 429 && r["upgrade"] != true)
        .collect();
    assert!(
        again.is_empty(),
        "writes that started nothing: {again:#?}\nkills: {:#?}",
        h.kills
    );

    // Every cluster runs 1.34.1 and the new image on both pools, settled.
    let state = h.fake.state();
    let fake_clusters = state["clusters"].as_array().unwrap();
    assert_eq!(fake_clusters.len(), 12);
    for c in fake_clusters {
        let p = &c["resource"]["properties"];
        assert_eq!(p["currentKubernetesVersion"], "1.34.1", "{c:#}");
        assert_eq!(p["provisioningState"], "Succeeded", "{c:#}");
        let pools = p["agentPoolProfiles"].as_array().unwrap();
        assert_eq!(pools.len(), 2, "{c:#}");
        for pool in pools {
            assert_eq!(pool["currentOrchestratorVersion"], "1.34.1", "{c:#}");
            assert_eq!(pool["nodeImageVersion"], NEW_IMAGE, "{c:#}");
            assert_eq!(pool["provisioningState"], "Succeeded", "{c:#}");
        }
    }

    let last = h.life.take().expect("a life runs");
    assert!(last.stop(), "SIGTERM stops the last life cleanly");
}
