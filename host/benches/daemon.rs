//! The daemon's performance targets (issue 9), measured against the real binary on loopback —
//! this bench process is the client and load generator, `waverun serve` a child process:
//!
//! 1. cold start to ready: the first start (the engine module compiled and cached), then
//!    restarts with the module cached;
//! 2. `GET /updateRuns/{name}` of a 10,000-member run at 1,000 requests/s, open loop (latency
//!    counted from each request's scheduled time, so a slow server cannot hide its queue);
//! 3. a member whose maintenance window opens at T starts within 1 s of T (real time);
//! 4. restart with 100,000 journal records since the last snapshot, to ready;
//! 5. fsyncs per engine step (strace, when it is installed) and the journal commit latency
//!    histogram from `/metrics`;
//! 6. live event streams (issue 20): write throughput and GET p99 while a run moves, with 0,
//!    200 and 1,000 SSE clients connected;
//! 7. half-open connections (slowloris): how many one peer holds, what the rest get, whether
//!    another peer is served meanwhile, and when they are closed;
//! 8. the start-up check on a 1 GB database (`quick_check`, schema, journal; and the full
//!    `integrity_check` after an unclean stop);
//! 9. the `aks` provider against the fake ARM (`tests/aks/fake_arm.py`, ARM's throttling on):
//!    upgrades and ARM requests per second a run of many clusters sustains, with the client's
//!    default rate limits and with limits at ARM's own;
//! 10. events out (issue 24): deliveries per second to a fast receiver, and how far behind a
//!     slow receiver falls while a run moves (the run's own time beside it);
//! 11. failover (issue 25): three replicas on a private PostgreSQL, the leader `kill -9`ed 20
//!     times: until another leads, and until it takes a change (median, max);
//! 12. step commit latency and fsyncs, PostgreSQL against SQLite;
//! 13. a follower's `GET /updateRuns/{name}` of a 10,000-member run at 1,000 requests/s;
//! 14. a 100,000-member fleet (issue 26): start to ready with the fleet file, then the whole
//!     fleet registered again over HTTP in one `POST /members` (each member relabelled); a run
//!     of all of them started, one GET of it computed, GETs at 1,000 requests/s (cached), the
//!     `/metrics` scrape, a restart to ready and the first GET after it.
//!
//! `cargo bench -p waverun --bench daemon` (full sizes), `-- --quick` (small sizes, no window
//! wait: a smoke run), `-- get journal` (only those parts: cold, get, window, journal, fsync,
//! sse, slowloris, check, aks, webhooks, failover, commit, follower, fleet).
//! Figures are printed; nothing is asserted (shared machines are noisy).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_waverun");

struct Daemon {
    child: Child,
    base: String,
    root: String,
}

impl Daemon {
    /// Starts `waverun serve ARGS`; returns it and the time from spawn to `/readyz` = 200.
    fn start(args: &[&str], cache: &Path, log: &Path) -> (Daemon, Duration) {
        let began = Instant::now();
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .env("WAVERUN_CACHE_DIR", cache)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("the release binary runs");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        reader.read_line(&mut line).unwrap();
        std::thread::spawn(move || for _ in reader.lines() {});
        let addr = line
            .split("on http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {line:?}: see {}", log.display()))
            .to_string();
        let root = format!("http://{addr}");
        let agent = agent();
        loop {
            if let Ok(r) = agent.get(format!("{root}/readyz")).call() {
                if r.status() == 200 {
                    break;
                }
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        let ready = began.elapsed();
        let base = format!("{root}/api/v1/fleets/default");
        (Daemon { child, base, root }, ready)
    }

    /// `serve --data-dir DIR/data --fleet FLEET`, its stderr in `log`.
    fn serve(dir: &Path, fleet: &Path, cache: &Path, log: &Path) -> (Daemon, Duration) {
        let data = dir.join("data");
        let args = [
            "--data-dir",
            data.to_str().unwrap(),
            "--fleet",
            fleet.to_str().unwrap(),
        ];
        Daemon::start(&args, cache, log)
    }

    fn stop(mut self) {
        // SAFETY: kill(2) signals the child this bench started.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }

    fn put(&self, path: &str, body: &Value) -> Value {
        send(&agent(), "PUT", &format!("{}{path}", self.base), Some(body))
    }

    fn post(&self, path: &str) -> Value {
        send(&agent(), "POST", &format!("{}{path}", self.base), None)
    }

    fn get(&self, path: &str) -> Value {
        send(&agent(), "GET", &format!("{}{path}", self.base), None)
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

fn send(agent: &ureq::Agent, method: &str, url: &str, body: Option<&Value>) -> Value {
    let req = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(body.map(|b| b.to_string()).unwrap_or_default())
        .unwrap();
    let mut r = agent
        .run(req)
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let text = r.body_mut().read_to_string().unwrap_or_default();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if r.status().as_u16() >= 400 {
        panic!("{method} {url}: {} {v}", r.status());
    }
    v
}

fn member(i: usize, window: Option<&Value>) -> Value {
    let mut m = json!({
        "name": format!("m{i:05}"),
        "region": "eastus",
        "labels": {"env": "prod"},
        "kubernetesVersion": "1.33.2",
        "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
        "behavior": {"upgradeMinutes": 600},
    });
    if let Some(w) = window {
        m["maintenance"] = json!({ "kubernetes": w });
    }
    m
}

fn fleet_file(dir: &Path, members: Vec<Value>) -> PathBuf {
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "members": members,
        "releases": {
            "kubernetes": [{"version": "1.34.1", "available": since}],
            "nodeImages": [
                {"version": "AKSUbuntu-2204-202611.01.0", "available": since},
                {"version": "AKSUbuntu-2204-202612.01.0", "available": since},
            ],
        },
    });
    let p = dir.join("fleet.json");
    std::fs::write(&p, file.to_string()).unwrap();
    p
}

/// One stage, one group of every `env=prod` member, 100 at a time.
fn start_run(d: &Daemon) {
    d.put(
        "/updateStrategies/all",
        &json!({"properties": {"strategy": {"stages": [{"name": "all", "groups": [
            {"name": "prod", "memberSelector": {"byLabel": "env=prod"}, "maxConcurrency": "100"}
        ]}]}}}),
    );
    d.put(
        "/updateRuns/r1",
        &json!({"properties": {
            "updateStrategyId": "/fleets/default/updateStrategies/all",
            "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
                                     "nodeImageSelection": {"type": "Latest"}}}}),
    );
    d.post("/updateRuns/r1/start");
}

/// The wall clock (chrono is built here without its clock feature).
fn utc_now() -> chrono::DateTime<chrono::Utc> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    chrono::DateTime::from_timestamp_millis(ms).unwrap()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn cold_start(dir: &Path, quick: bool) {
    println!("== 1. cold start to ready (the example fleet, 14 members)");
    let cache = dir.join("cache-cold");
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-rollout.yaml");
    let data = dir.join("data-cold");
    let args = [
        "--data-dir",
        data.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
    ];
    let (d, first) = Daemon::start(&args, &cache, &dir.join("cold-0.log"));
    d.stop();
    println!(
        "first start (module compiled, data dir created): {}",
        ms(first)
    );
    let mut times = Vec::new();
    for i in 0..if quick { 3 } else { 10 } {
        let (d, t) = Daemon::start(&args, &cache, &dir.join(format!("cold-{}.log", i + 1)));
        d.stop();
        times.push(t);
    }
    times.sort();
    println!(
        "restarts with the module cached ({} runs): min {}, median {}, max {}   (target ≤ 300 ms; first ≤ 3 s)",
        times.len(),
        ms(times[0]),
        ms(percentile(&times, 0.5)),
        ms(*times.last().unwrap())
    );
}

fn get_under_load(dir: &Path, cache: &Path, quick: bool) {
    let n = if quick { 1_000 } else { 10_000 };
    let rate = 1_000.0;
    let seconds = if quick { 2.0 } else { 10.0 };
    println!("== 2. GET /updateRuns/r1 of a {n}-member run at {rate} requests/s for {seconds} s");
    let sub = dir.join("get");
    std::fs::create_dir_all(&sub).unwrap();
    let fleet = fleet_file(&sub, (0..n).map(|i| member(i, None)).collect());
    let (d, ready) = Daemon::serve(&sub, &fleet, cache, &sub.join("serve.log"));
    println!("ready after {} (registering {n} members)", ms(ready));
    start_run(&d);
    let url = format!("{}/updateRuns/r1", d.base);
    let one = agent();
    let began = Instant::now();
    let body = send(&one, "GET", &url, None);
    let single = began.elapsed();
    let bytes = body.to_string().len();
    let mut gz = one
        .get(&url)
        .header("accept-encoding", "gzip")
        .call()
        .unwrap();
    let gz_bytes = gz.body_mut().read_to_vec().unwrap().len();
    println!(
        "one GET alone (computed): {} ({} KiB of JSON, {} KiB gzipped; the load below asks for gzip)",
        ms(single),
        bytes / 1024,
        gz_bytes / 1024
    );
    let (lat, wall) = open_loop(&url, rate, seconds);
    print_latencies(&lat, wall, "(target p99 ≤ 10 ms)");
    d.stop();
}

/// One line of an open loop's figures, `note` after them.
fn print_latencies(lat: &[Duration], wall: Duration, note: &str) {
    println!(
        "{} requests in {:.1} s ({:.0}/s achieved): p50 {}, p99 {}, max {}   {note}",
        lat.len(),
        wall.as_secs_f64(),
        lat.len() as f64 / wall.as_secs_f64(),
        ms(percentile(lat, 0.5)),
        ms(percentile(lat, 0.99)),
        ms(*lat.last().unwrap())
    );
}

/// GETs `url` (gzip) at `rate` per second for `seconds`, open loop from 32 threads: each
/// request's latency counted from its scheduled time. The latencies sorted, and the wall time.
fn open_loop(url: &str, rate: f64, seconds: f64) -> (Vec<Duration>, Duration) {
    let threads = 32;
    let total = (rate * seconds) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now() + Duration::from_millis(200);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let url = url.to_string();
            std::thread::spawn(move || {
                let a = agent();
                let mut lat = Vec::new();
                let mut i = t;
                while i < total {
                    let due = start + interval * i as u32;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let r = a.get(&url).header("accept-encoding", "gzip").call();
                    if let Ok(mut r) = r {
                        let _ = r.body_mut().with_config().limit(u64::MAX).read_to_vec();
                    }
                    lat.push(Instant::now().saturating_duration_since(due));
                    i += threads;
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let wall = start.elapsed();
    lat.sort();
    (lat, wall)
}

fn window_start(dir: &Path, cache: &Path) {
    println!("== 3. a member whose maintenance window opens at T starts within 1 s of T");
    let sub = dir.join("window");
    std::fs::create_dir_all(&sub).unwrap();
    // The next whole minute at least 5 s away (windows start on minutes).
    let now = utc_now();
    let t = now
        + chrono::Duration::seconds(
            65 - i64::from(now.format("%S").to_string().parse::<u8>().unwrap()),
        );
    let t = t.with_timezone(&chrono::Utc);
    let start_time = t.format("%H:%M").to_string();
    let window = json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 4, "startTime": start_time});
    let fleet = fleet_file(&sub, vec![member(0, Some(&window))]);
    let (d, _) = Daemon::serve(&sub, &fleet, cache, &sub.join("serve.log"));
    start_run(&d);
    let opens = t.format("%Y-%m-%dT%H:%M:00Z").to_string();
    let opens_at = chrono::DateTime::parse_from_rfc3339(&opens).unwrap();
    println!("the window opens at {opens}; waiting");
    let mut after = 0;
    loop {
        let page = d.get(&format!("/events?after={after}&$top=1000"));
        let mut seen = None;
        for e in page["value"].as_array().cloned().unwrap_or_default() {
            after = e["seq"].as_u64().unwrap();
            if e["kind"] == "MemberStarted" {
                seen = Some(e);
            }
        }
        if let Some(e) = seen {
            let real = utc_now();
            let at = chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap()).unwrap();
            println!(
                "MemberStarted at {} ({} after T); seen by this client {} after T   (target ≤ 1 s)",
                e["at"],
                ms((at - opens_at).to_std().unwrap_or_default()),
                ms((real.fixed_offset() - opens_at)
                    .to_std()
                    .unwrap_or_default())
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    d.stop();
}

/// The guest's storage in memory, keeping every record (the store compacts them itself).
#[derive(Clone, Default)]
struct KeepAll(std::sync::Arc<std::sync::Mutex<KeptRecords>>);

#[derive(Default)]
struct KeptRecords {
    journal: Vec<(u64, Vec<u8>)>,
    snapshot: Option<(u64, Vec<u8>)>,
}

impl waverun_host::runtime::Persistence for KeepAll {
    fn append(&mut self, seq: u64, record: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap().journal.push((seq, record.to_vec()));
        Ok(())
    }
    fn write_snapshot(&mut self, journal_seq: u64, snapshot: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap().snapshot = Some((journal_seq, snapshot.to_vec()));
        Ok(())
    }
    fn read_snapshot(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .snapshot
            .as_ref()
            .map(|s| s.1.clone()))
    }
    fn read_journal(&mut self) -> std::io::Result<Vec<Vec<u8>>> {
        let k = self.0.lock().unwrap();
        let after = k.snapshot.as_ref().map_or(0, |s| s.0);
        Ok(k.journal
            .iter()
            .filter(|r| r.0 > after)
            .map(|r| r.1.clone())
            .collect())
    }
}

fn restart_with_journal(dir: &Path, cache: &Path, quick: bool) {
    use waverun_host::runtime::{
        InstanceConfig, ManualClock, PluginHost, PluginRuntime, QueueProvider, RuntimeConfig,
    };
    use waverun_host::store::{JournalRecord, SnapshotRecord, SqliteStore, Step, Store};
    let (members, records) = if quick {
        (10_000, 10_000)
    } else {
        (60_000, 100_000)
    };
    println!(
        "== 4. restart with {records} journal records since the last snapshot ({members} members)"
    );
    let sub = dir.join("journal");
    std::fs::create_dir_all(sub.join("data")).unwrap();
    // Write the journal with the plugin itself, in memory (no fsync per record), then store it.
    let rt = PluginRuntime::new(RuntimeConfig::with_cache(cache.to_path_buf())).unwrap();
    let module = rt.load(waverun_host::runtime::EMBEDDED_PLUGIN).unwrap();
    let persistence = KeepAll::default();
    let clock = ManualClock::new(1_796_000_000_000);
    let host = PluginHost::new(clock.clone(), QueueProvider::new(), persistence.clone());
    let mut p = module.instantiate(host, InstanceConfig::default()).unwrap();
    p.init().unwrap();
    let began = Instant::now();
    for i in 0..members {
        let mut m = member(i, None);
        m.as_object_mut().unwrap().remove("behavior");
        let c = serde_json::from_value(json!({"type": "upsertMember", "member": m})).unwrap();
        p.command(&c).unwrap();
    }
    p.request(&json!({"type": "snapshot"})).unwrap();
    for _ in 0..records {
        clock.advance_ms(1);
        let c = serde_json::from_value(json!({"type": "setFreezes", "freezes": []})).unwrap();
        p.command(&c).unwrap();
    }
    let (seq, snapshot, journal) = {
        let mut k = persistence.0.lock().unwrap();
        let (seq, snapshot) = k.snapshot.take().expect("a snapshot");
        (seq, snapshot, std::mem::take(&mut k.journal))
    };
    let after = journal.iter().filter(|r| r.0 > seq).count();
    println!(
        "prepared in {:.1} s: snapshot at seq {seq} ({} KiB), {after} records after it",
        began.elapsed().as_secs_f64(),
        snapshot.len() / 1024,
    );
    let db = sub.join("data/waverun.db");
    let mut store = SqliteStore::open(&db).unwrap();
    store.set_meta("fleet", "default").unwrap();
    let all = Step {
        journal: journal
            .into_iter()
            .map(|(seq, record)| JournalRecord {
                seq,
                now_ms: None,
                record,
            })
            .collect(),
        ..Step::default()
    };
    store.commit(&all).unwrap();
    let snapshot_step = Step {
        snapshot: Some(SnapshotRecord {
            journal_seq: seq,
            module_hash: module.sha256().to_string(),
            bytes: snapshot,
        }),
        ..Step::default()
    };
    store.commit(&snapshot_step).unwrap();
    store.close().unwrap();
    drop(p);
    let data = sub.join("data");
    let args = ["--data-dir", data.to_str().unwrap()];
    let (d, ready) = Daemon::start(&args, cache, &sub.join("serve.log"));
    println!("ready after {}   (target ≤ 2 s)", ms(ready));
    d.stop();
}

fn fsyncs(dir: &Path, cache: &Path) {
    println!("== 5. fsyncs per engine step, and the journal commit latency");
    let sub = dir.join("fsync");
    std::fs::create_dir_all(&sub).unwrap();
    let fleet = fleet_file(&sub, (0..50).map(|i| member(i, None)).collect());
    let (d, _) = Daemon::serve(&sub, &fleet, cache, &sub.join("serve.log"));
    let steps = 200;
    let strace = trace_fsyncs(&[d.child.id().to_string()]);
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..steps {
        d.put(
            &format!("/updateStrategies/s{i}"),
            &json!({"properties": {"strategy": {"stages": [{"name": "a", "groups": [{"name": "g"}]}]}}}),
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    match strace {
        Ok(s) => {
            let calls = fsync_count(s);
            println!(
                "{steps} steps (PUT updateStrategies): {calls} fsync/fdatasync calls = {:.2} per step   (target ≤ 1)",
                calls as f64 / steps as f64
            );
        }
        Err(e) => println!("strace is not installed ({e}): fsyncs not counted"),
    }
    let metrics = ureq::get(format!("{}/metrics", d.root))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    println!("journal commit latency (seconds, cumulative buckets):");
    for l in metrics
        .lines()
        .filter(|l| l.starts_with("waverun_journal_commit_seconds"))
    {
        println!("  {l}");
    }
    d.stop();
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `-- get journal` runs only those parts (cold, get, window, journal, fsync).
    let named: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let part = |p: &str| named.is_empty() || named.contains(&p);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    if part("cold") {
        cold_start(dir.path(), quick);
    }
    if part("get") {
        get_under_load(dir.path(), &cache, quick);
    }
    if part("window") && !(quick && named.is_empty()) {
        window_start(dir.path(), &cache);
    }
    if part("journal") {
        restart_with_journal(dir.path(), &cache, quick);
    }
    if part("fsync") {
        fsyncs(dir.path(), &cache);
    }
    if part("sse") {
        sse_fan_out(dir.path(), &cache, quick);
    }
    if part("slowloris") {
        slowloris(dir.path(), &cache, quick);
    }
    if part("check") {
        start_up_check(dir.path(), quick);
    }
    if part("aks") {
        aks_throughput(dir.path(), &cache, quick);
    }
    if part("webhooks") {
        webhooks_throughput(dir.path(), &cache, quick);
    }
    if part("failover") {
        failover(dir.path(), &cache, quick);
    }
    if part("commit") {
        commit_latency(dir.path(), &cache, quick);
    }
    if part("follower") {
        follower_reads(dir.path(), &cache, quick);
    }
    if part("fleet") {
        fleet_scale(dir.path(), &cache, quick);
    }
}

/// Part 14: a fleet of 100,000 members (2,000 quick) registered from the fleet file at start,
/// then again over HTTP in one import.
fn fleet_scale(dir: &Path, cache: &Path, quick: bool) {
    let n = if quick { 2_000 } else { 100_000 };
    println!(
        "== 14. a {n}-member fleet: the fleet file at start, then one POST /members of all of them"
    );
    let sub = dir.join("fleet-scale");
    std::fs::create_dir_all(&sub).unwrap();
    // The engine module compiled and cached first (part 1 measures that): the start measured
    // is the fleet's.
    let warm = fleet_file(&sub, vec![member(0, None)]);
    Daemon::serve(&sub.join("warm"), &warm, cache, &sub.join("warm.log"))
        .0
        .stop();
    let fleet = fleet_file(&sub, (0..n).map(|i| member(i, None)).collect());
    let (d, ready) = Daemon::serve(&sub, &fleet, cache, &sub.join("serve.log"));
    println!(
        "start to ready, the fleet file registered: {}   (target ≤ 5 s at 100,000)",
        ms(ready)
    );
    let value: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("m{i:05}"), "properties": {
                "labels": {"env": "prod", "ring": (i % 10).to_string()}}})
        })
        .collect();
    let body = json!({ "value": value });
    let size = body.to_string().len();
    let began = Instant::now();
    let r = send(
        &agent(),
        "POST",
        &format!("{}/members", d.base),
        Some(&body),
    );
    let took = began.elapsed();
    assert_eq!(r["updated"], n, "{r}");
    println!(
        "POST /members of {n} members ({} KiB): {} — {:.1} µs per member   (target ≤ 5 s at 100,000)",
        size / 1024,
        ms(took),
        took.as_secs_f64() * 1e6 / n as f64
    );
    // A run over all of them: its start, its reads, the scrape, a restart.
    let began = Instant::now();
    start_run(&d);
    println!(
        "a run of all {n} created and started (PUT strategy, PUT run, POST start): {}",
        ms(began.elapsed())
    );
    let url = format!("{}/updateRuns/r1", d.base);
    let (took, bytes) = timed_get(&url);
    println!(
        "one GET of the run, computed: {} ({} KiB)   (target ≤ 300 ms at 100,000)",
        ms(took),
        bytes / 1024
    );
    let (lat, wall) = open_loop(&url, 1_000.0, if quick { 2.0 } else { 10.0 });
    print_latencies(&lat, wall, "(cached; target p99 ≤ 10 ms at 100,000)");
    let mut scrapes: Vec<Duration> = (0..5)
        .map(|_| timed_get(&format!("{}/metrics", d.root)).0)
        .collect();
    scrapes.sort();
    println!(
        "GET /metrics (5 scrapes): median {}, max {}   (target ≤ 50 ms at 100,000)",
        ms(percentile(&scrapes, 0.5)),
        ms(*scrapes.last().unwrap())
    );
    d.stop();
    let (d, ready) = Daemon::serve(&sub, &fleet, cache, &sub.join("serve2.log"));
    println!(
        "restart to ready, the run's {n} members in the snapshot: {}   (target ≤ 2 s at 100,000)",
        ms(ready)
    );
    println!(
        "first GET of the run after the restart: {}",
        ms(timed_get(&format!("{}/updateRuns/r1", d.base)).0)
    );
    d.stop();
}

/// GETs `url` once (no gzip): the time to the last byte, and the bytes.
fn timed_get(url: &str) -> (Duration, usize) {
    let began = Instant::now();
    let mut r = agent().get(url).call().unwrap();
    assert_eq!(r.status().as_u16(), 200, "GET {url}");
    let bytes = r
        .body_mut()
        .with_config()
        .limit(u64::MAX)
        .read_to_vec()
        .unwrap();
    (began.elapsed(), bytes.len())
}

/// The fake ARM (a child process) seeded with `n` clusters in eastus on 1.33.2, 1.34.1
/// available; its base URL.
fn fake_arm(dir: &Path, n: usize) -> (Child, String) {
    let pool = |name: &str, mode: &str| {
        json!({"name": name, "mode": mode, "osType": "Linux", "count": 3,
               "orchestratorVersion": "1.33.2", "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202611.01.0"})
    };
    let clusters: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            let c = json!({"location": "eastus", "kubernetesVersion": "1.33.2",
                           "agentPools": [pool("system", "System"), pool("user", "User")]});
            (format!("c{i:04}"), c)
        })
        .collect();
    let seed = json!({
        "settings": {"operationSeconds": 60, "retryAfterSeconds": 1},
        "identity": {"tenantId": "t", "resourceManager": "self",
                     "clients": [{"clientId": "bench", "clientSecret": "bench-secret"}]},
        "locations": {"*": {
            "kubernetesVersions": [{"version": "1.33", "patchVersions": ["1.33.2"]},
                                   {"version": "1.34", "patchVersions": ["1.34.1"]}],
            "nodeImageVersions": ["AKSUbuntu-2204gen2containerd-202611.01.0"],
        }},
        "subscriptions": {"5b1e0f3a-0000-4000-8000-000000000009": {"resourceGroups": {"rg": {"managedClusters": clusters}}}},
    });
    let state = dir.join("seed.json");
    std::fs::write(&state, seed.to_string()).unwrap();
    let port_file = dir.join("fake.port");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/aks/fake_arm.py");
    // Phases of 0.1 s: the figures are the provider's and ARM's limits, not AKS's durations.
    let child = Command::new("python3")
        .arg(script)
        .args(["--port", "0", "--time-scale", "600", "--state"])
        .arg(&state)
        .arg("--port-file")
        .arg(&port_file)
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs the fake ARM");
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = loop {
        if let Some(p) = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|t| t.trim().parse::<u16>().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the fake ARM did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    (child, format!("http://127.0.0.1:{port}"))
}

/// 9: a Full run of many AKS clusters, every one at once, through the `aks` provider and the
/// fake ARM with its throttling at ARM's published limits (250 reads, 200 writes, refilled at
/// 25 and 10 a second per subscription).
fn aks_throughput(dir: &Path, cache: &Path, quick: bool) {
    let variants: &[(&str, &str)] = &[
        ("the client's default limits (reads 3/s burst 50, writes 0.3/s burst 10)", ""),
        (
            "client limits at ARM's (reads 25/s burst 250, writes 10/s burst 200)",
            "    limits: {readsPerSecond: 25, readBurst: 250, writesPerSecond: 10, writeBurst: 200}\n",
        ),
    ];
    // `WAVERUN_BENCH_AKS_CLUSTERS=N` for another size.
    let n = std::env::var("WAVERUN_BENCH_AKS_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 6 } else { 60 });
    for (v, (label, limits)) in variants.iter().enumerate() {
        if quick && v == 0 {
            continue;
        }
        let sub = dir.join(format!("aks{v}"));
        std::fs::create_dir_all(&sub).unwrap();
        let (mut fake, base) = fake_arm(&sub, n);
        std::fs::write(sub.join("secret"), "bench-secret").unwrap();
        let members: Vec<Value> = (0..n)
            .map(|i| json!({"name": format!("c{i:04}"), "provider": "azure", "group": "all",
                "clusterResourceId": format!("/subscriptions/5b1e0f3a-0000-4000-8000-000000000009/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c{i:04}")}))
            .collect();
        let config = sub.join("waverun.yaml");
        std::fs::write(
            &config,
            format!(
                "listen: 127.0.0.1:0\ndataDir: {data}\nproviders:\n  azure:\n    type: aks\n    auth: {{method: clientSecret, tenantId: t, clientId: bench, clientSecretFile: {secret}, authorityHost: {base}, resourceManager: {base}}}\n    pollIntervalSeconds: 1\n{limits}members: {members}\n",
                data = sub.join("data").display(),
                secret = sub.join("secret").display(),
                members = Value::from(members),
            ),
        )
        .unwrap();
        let began = Instant::now();
        let (d, _) = Daemon::start(
            &["--config", config.to_str().unwrap()],
            cache,
            &sub.join("log"),
        );
        let deadline = Instant::now() + Duration::from_secs(1_800);
        while d.get("/members?$top=1000")["value"]
            .as_array()
            .map_or(0, Vec::len)
            < n
        {
            assert!(
                Instant::now() < deadline,
                "members not registered: see {}",
                sub.join("log").display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        while !d.get("/releases?region=eastus")["kubernetes"]
            .to_string()
            .contains("1.34.1")
        {
            assert!(
                Instant::now() < deadline,
                "no releases: see {}",
                sub.join("log").display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let registered = began.elapsed();
        let before = send(&agent(), "GET", &format!("{base}/_fake/requests"), None)["requests"]
            .as_array()
            .map_or(0, Vec::len);
        let started = Instant::now();
        d.put(
            "/updateRuns/r1",
            &json!({"properties": {
                "strategy": {"stages": [{"name": "all", "groups": [{"name": "all", "maxConcurrency": "100%"}]}]},
                "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
                                         "nodeImageSelection": {"type": "Latest"}}}}),
        );
        d.post("/updateRuns/r1/start");
        loop {
            let s = d.get("/updateRuns/r1")["properties"]["status"]["status"]["state"].clone();
            if s != "Running" && s != "NotStarted" {
                assert_eq!(s, "Completed", "see {}", sub.join("log").display());
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the run did not end: see {}",
                sub.join("log").display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let took = started.elapsed();
        let log = send(&agent(), "GET", &format!("{base}/_fake/requests"), None);
        let requests = &log["requests"].as_array().unwrap()[before..];
        let throttled = requests.iter().filter(|r| r["status"] == 429).count();
        let writes = requests.iter().filter(|r| r["method"] != "GET").count();
        println!(
            "aks, {n} clusters, {label}: registered (described, releases listed) in {:.1} s; the run took {:.1} s: {:.2} upgrades/s, {} ARM requests ({:.1}/s; {} writes, {:.2}/s), {} answered 429",
            registered.as_secs_f64(),
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64(),
            requests.len(),
            requests.len() as f64 / took.as_secs_f64(),
            writes,
            writes as f64 / took.as_secs_f64(),
            throttled,
        );
        d.stop();
        let _ = fake.kill();
        let _ = fake.wait();
    }
}

/// A config file for `serve --config` with `limits` raised for load (YAML text).
fn config_with(dir: &Path, fleet: &Path, extra: &str) -> PathBuf {
    let p = dir.join("waverun.yaml");
    let text = format!(
        "listen: 127.0.0.1:0\ndataDir: {}\nfleetFile: {}\ntimeScale: 600\n{extra}",
        dir.join("data").display(),
        fleet.display()
    );
    std::fs::write(&p, text).unwrap();
    p
}

fn sse_fan_out(dir: &Path, cache: &Path, quick: bool) {
    use std::io::{Read, Write};
    let members = if quick { 200 } else { 1_000 };
    let seconds = if quick { 3.0 } else { 10.0 };
    let counts: &[usize] = if quick { &[0, 200] } else { &[0, 200, 1_000] };
    println!(
        "== 6. live event streams: PUTs and GETs for {seconds} s while a {members}-member run moves, with {counts:?} SSE clients"
    );
    for &clients in counts {
        let sub = dir.join(format!("sse-{clients}"));
        std::fs::create_dir_all(&sub).unwrap();
        let mut ms_ = Vec::new();
        for i in 0..members {
            let mut m = member(i, None);
            m["behavior"] = json!({"upgradeMinutes": 20, "jitterMinutes": 15});
            ms_.push(m);
        }
        let fleet = fleet_file(&sub, ms_);
        let config = config_with(
            &sub,
            &fleet,
            "limits: {streamsPerToken: 5000, streams: 5000, connections: 5000, connectionsPerPeer: 5000}\n",
        );
        let (d, _) = Daemon::start(
            &["--config", config.to_str().unwrap()],
            cache,
            &sub.join("serve.log"),
        );
        start_run(&d);
        let addr = d.root.trim_start_matches("http://").to_string();
        let received = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The clients: raw sockets, read by a few threads (a thread each would measure the
        // bench's scheduler, not the daemon).
        let readers = 8;
        let mut handles = Vec::new();
        for r in 0..readers {
            let mine = clients / readers + usize::from(r < clients % readers);
            let (addr, received, stop) = (addr.clone(), received.clone(), stop.clone());
            handles.push(std::thread::spawn(move || {
                let mut socks: Vec<std::net::TcpStream> = (0..mine)
                    .map(|_| {
                        let mut s = std::net::TcpStream::connect(&addr).unwrap();
                        s.write_all(
                            b"GET /api/v1/fleets/default/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n",
                        )
                        .unwrap();
                        s.set_nonblocking(true).unwrap();
                        s
                    })
                    .collect();
                let mut buf = vec![0u8; 64 * 1024];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut any = false;
                    for s in &mut socks {
                        if let Ok(n) = s.read(&mut buf) {
                            if n > 0 {
                                any = true;
                                let ids = buf[..n].windows(4).filter(|w| w == b"\nid:").count();
                                received.fetch_add(ids as u64, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                    if !any {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            }));
        }
        std::thread::sleep(Duration::from_millis(500));
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        let base = d.base.clone();
        let getter = std::thread::spawn(move || {
            let a = agent();
            let mut lat = Vec::new();
            while Instant::now() < end {
                let t = Instant::now();
                let _ = a
                    .get(format!("{base}/updateRuns/r1"))
                    .call()
                    .map(|mut r| r.body_mut().read_to_vec());
                lat.push(t.elapsed());
                std::thread::sleep(Duration::from_millis(10));
            }
            lat
        });
        let a = agent();
        let mut writes = 0u64;
        let strategy = json!({"properties": {"strategy": {"stages": [{"name": "s", "groups": [{"name": "g"}]}]}}});
        let began = Instant::now();
        while Instant::now() < end {
            send(
                &a,
                "PUT",
                &format!("{}/updateStrategies/w{writes}", d.base),
                Some(&strategy),
            );
            writes += 1;
        }
        let wall = began.elapsed().as_secs_f64();
        let mut lat = getter.join().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        lat.sort();
        println!(
            "{clients:>5} clients: {:.0} writes/s, GET /updateRuns/r1 p50 {} p99 {} ({} GETs), {} events delivered to the clients",
            writes as f64 / wall,
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
            lat.len(),
            received.load(std::sync::atomic::Ordering::Relaxed)
        );
        d.stop();
    }
}

fn slowloris(dir: &Path, cache: &Path, quick: bool) {
    use std::io::{Read, Write};
    let sockets = if quick { 600 } else { 1_500 };
    println!("== 7. {sockets} half-open connections from 127.0.0.1 (default limits: 256 per peer, 1,024 in all, headers within 10 s)");
    let sub = dir.join("slowloris");
    std::fs::create_dir_all(&sub).unwrap();
    let fleet = fleet_file(&sub, (0..10).map(|i| member(i, None)).collect());
    let config = config_with(&sub, &fleet, "");
    let (d, _) = Daemon::start(
        &["--config", config.to_str().unwrap()],
        cache,
        &sub.join("serve.log"),
    );
    let addr = d.root.trim_start_matches("http://").to_string();
    let began = Instant::now();
    let mut held: Vec<std::net::TcpStream> = Vec::new();
    for _ in 0..sockets {
        if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
            let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHo");
            s.set_nonblocking(true).unwrap();
            held.push(s);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut buf = [0u8; 64];
    let closed = |socks: &mut Vec<std::net::TcpStream>, buf: &mut [u8]| {
        socks
            .iter_mut()
            .filter(|s| match (&**s).read(buf) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            })
            .count()
    };
    let refused = closed(&mut held, &mut buf[..]);
    println!(
        "opened {} in {}: {} closed at once by the daemon (over the per-peer cap: closed or reset), {} held",
        held.len(),
        ms(began.elapsed()),
        refused,
        held.len() - refused
    );
    // Another peer meanwhile (127.0.0.2 is loopback too).
    let t = Instant::now();
    let other = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--interface",
            "127.0.0.2",
            "--max-time",
            "5",
        ])
        .arg(format!("{}/healthz", d.root))
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_else(|_| "curl missing".to_string());
    println!(
        "another peer's GET /healthz meanwhile: {other} in {}",
        ms(t.elapsed())
    );
    let t = Instant::now();
    let mut open: usize = held.len();
    while open > 0 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(250));
        open = held
            .iter_mut()
            .filter(|s| matches!((&**s).read(&mut buf), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock))
            .count();
    }
    println!(
        "all closed by the daemon {} after they were opened (header deadline 10 s); {} still open",
        ms(began.elapsed()),
        open
    );
    let log = std::fs::read_to_string(sub.join("serve.log")).unwrap_or_default();
    println!(
        "log lines about refused connections: {}",
        log.matches("connection refused").count()
    );
    d.stop();
}

fn start_up_check(dir: &Path, quick: bool) {
    use waverun_host::store::{SqliteStore, Store};
    let target: u64 = if quick { 100 << 20 } else { 1 << 30 };
    println!(
        "== 8. the start-up check on a {} MiB database",
        target >> 20
    );
    let sub = dir.join("check");
    std::fs::create_dir_all(&sub).unwrap();
    let db = sub.join("waverun.db");
    {
        let mut store = SqliteStore::open(&db).unwrap();
        store.set_meta("fleet", "default").unwrap();
        store.close().unwrap();
    }
    let began = Instant::now();
    {
        // Event rows of 1 KiB, as a long-lived fleet's log holds them, written in bulk.
        let c = rusqlite::Connection::open(&db).unwrap();
        let data = format!(
            "{{\"type\":\"MemberProgress\",\"detail\":\"{}\"}}",
            "x".repeat(1000)
        );
        let mut written = 0u64;
        let mut batch = 0;
        while written < target {
            let tx = c.unchecked_transaction().unwrap();
            {
                let mut st = tx
                    .prepare_cached("INSERT INTO events (at_ms, run, kind, data, epoch) VALUES (?1, ?2, 'MemberProgress', ?3, 0)")
                    .unwrap();
                for i in 0..10_000 {
                    st.execute(rusqlite::params![i as i64, format!("run-{batch}"), data])
                        .unwrap();
                }
            }
            tx.commit().unwrap();
            batch += 1;
            written = std::fs::metadata(&db).unwrap().len()
                + std::fs::metadata(sub.join("waverun.db-wal"))
                    .map(|m| m.len())
                    .unwrap_or(0);
        }
        let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
    let bytes = std::fs::metadata(&db).unwrap().len();
    println!(
        "written in {:.1} s: {} MiB",
        began.elapsed().as_secs_f64(),
        bytes >> 20
    );
    let t = Instant::now();
    let mut store = SqliteStore::open(&db).unwrap();
    let clean = t.elapsed();
    store.close().unwrap();
    drop(store);
    // Unclean: the last process did not close it.
    let store = SqliteStore::open(&db).unwrap();
    drop(store); // not closed: the next open is after an unclean stop
    let t = Instant::now();
    let store = SqliteStore::open(&db).unwrap();
    let unclean = t.elapsed();
    drop(store);
    println!(
        "open after a clean stop (quick_check + schema + journal): {}; after an unclean stop (integrity_check + schema + journal): {}",
        ms(clean),
        ms(unclean)
    );
}

/// A receiver on loopback for the webhooks part: HTTP/1.1 with keep-alive, answering every
/// POST 204 after `delay`; the time of each delivery it got.
struct BenchReceiver {
    url: String,
    got: std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
}

fn bench_receiver(delay: Duration) -> BenchReceiver {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/in", listener.local_addr().unwrap());
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            let g = g.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    // One request: its head, then Content-Length bytes of body.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + len);
                    std::thread::sleep(delay);
                    g.lock().unwrap().push(Instant::now());
                    if s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    BenchReceiver { url, got }
}

fn subscription_status(d: &Daemon, name: &str) -> Value {
    d.get(&format!("/eventSubscriptions/{name}"))["properties"]["status"].clone()
}

/// Part 10, events out (issue 24): deliveries per second to a fast receiver from a backlog (the
/// subscription enabled once the run's events are all logged), and how far behind a slow one
/// falls while a run moves (and whether the run notices).
fn webhooks_throughput(dir: &Path, cache: &Path, quick: bool) {
    let fast_members = if quick { 200 } else { 2_000 };
    let slow_members = if quick { 100 } else { 500 };
    let slow_delay = Duration::from_millis(if quick { 20 } else { 100 });
    println!(
        "== 10. events out: a backlog of a {fast_members}-member run's events to a fast receiver; a {slow_members}-member run to a receiver that answers in {}",
        ms(slow_delay)
    );
    let config_for = |sub: &Path, members: usize| {
        std::fs::create_dir_all(sub).unwrap();
        let ms_: Vec<Value> = (0..members)
            .map(|i| {
                let mut m = member(i, None);
                m["behavior"] = json!({"upgradeMinutes": 20, "jitterMinutes": 15});
                m
            })
            .collect();
        let fleet = fleet_file(sub, ms_);
        config_with(sub, &fleet, "webhooks: {allowLoopback: true}\n")
    };
    let wait_run = |d: &Daemon| {
        let began = Instant::now();
        loop {
            let s = d.get("/updateRuns/r1")["properties"]["status"]["status"]["state"].clone();
            if s == "Completed" || began.elapsed() > Duration::from_secs(900) {
                return began.elapsed();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // The backlog: logged first, then delivered as fast as the receiver takes them.
    let sub = dir.join("webhooks-fast");
    let config = config_for(&sub, fast_members);
    let (d, _) = Daemon::start(
        &["--config", config.to_str().unwrap()],
        cache,
        &sub.join("serve.log"),
    );
    let fast = bench_receiver(Duration::ZERO);
    let body = |url: &str, enabled: bool| {
        json!({"properties": {"destination": {"endpointType": "WebHook",
            "properties": {"endpointUrl": url}}, "enabled": enabled}})
    };
    d.put("/eventSubscriptions/fast", &body(&fast.url, false));
    start_run(&d);
    let run_alone = wait_run(&d);
    let backlog = {
        let s = subscription_status(&d, "fast");
        s["logEnd"].as_u64().unwrap() - s["cursor"].as_u64().unwrap()
    };
    let began = Instant::now();
    d.put("/eventSubscriptions/fast", &body(&fast.url, true));
    loop {
        let s = subscription_status(&d, "fast");
        if s["cursor"] == s["logEnd"] || began.elapsed() > Duration::from_secs(900) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let drained = began.elapsed();
    let got = fast.got.lock().unwrap().clone();
    let span = match (got.first(), got.last()) {
        (Some(a), Some(b)) if got.len() > 1 => b.duration_since(*a),
        _ => drained,
    };
    println!(
        "  fast receiver: {backlog} events delivered in {:.2} s: {:.0} events/s (receiver's first to last: {:.0} events/s); the run itself took {:.1} s",
        drained.as_secs_f64(),
        backlog as f64 / drained.as_secs_f64(),
        got.len().saturating_sub(1) as f64 / span.as_secs_f64().max(1e-9),
        run_alone.as_secs_f64()
    );
    d.stop();

    // A slow receiver while a run moves: how far behind it falls, and how long it takes to
    // catch up once the run is over.
    for (name, delay) in [("none", None), ("slow", Some(slow_delay))] {
        let sub = dir.join(format!("webhooks-{name}"));
        let config = config_for(&sub, slow_members);
        let (d, _) = Daemon::start(
            &["--config", config.to_str().unwrap()],
            cache,
            &sub.join("serve.log"),
        );
        let r = delay.map(bench_receiver);
        if let Some(r) = &r {
            d.put("/eventSubscriptions/slow", &body(&r.url, true));
        }
        start_run(&d);
        let began = Instant::now();
        let mut max_lag = 0u64;
        loop {
            if let Some(_r) = &r {
                let s = subscription_status(&d, "slow");
                max_lag = max_lag.max(s["lag"].as_u64().unwrap_or(0));
            }
            let s = d.get("/updateRuns/r1")["properties"]["status"]["status"]["state"].clone();
            if s == "Completed" || began.elapsed() > Duration::from_secs(900) {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let run = began.elapsed();
        let Some(_) = &r else {
            println!(
                "  no subscription: the {slow_members}-member run took {:.1} s",
                run.as_secs_f64()
            );
            d.stop();
            continue;
        };
        let at_end = subscription_status(&d, "slow")["lag"].as_u64().unwrap_or(0);
        let caught = Instant::now();
        loop {
            let s = subscription_status(&d, "slow");
            if s["cursor"] == s["logEnd"] || caught.elapsed() > Duration::from_secs(1800) {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        println!(
            "  receiver answering in {}: the run took {:.1} s; at most {max_lag} events behind while it ran, {at_end} at its end, caught up {:.1} s later",
            ms(slow_delay),
            run.as_secs_f64(),
            caught.elapsed().as_secs_f64()
        );
        d.stop();
    }
}

/// `strace -f -c` of the fsync and fdatasync calls of the processes `pids`, until
/// [`fsync_count`].
fn trace_fsyncs(pids: &[String]) -> std::io::Result<Child> {
    let mut strace = Command::new("strace");
    strace.args(["-f", "-c", "-e", "trace=fsync,fdatasync"]);
    for p in pids {
        strace.args(["-p", p]);
    }
    strace.stdout(Stdio::null()).stderr(Stdio::piped()).spawn()
}

/// Stops a trace of [`trace_fsyncs`]: the calls it counted.
fn fsync_count(mut s: Child) -> u64 {
    // SAFETY: signals the strace child this bench started.
    unsafe {
        libc::kill(s.id() as i32, libc::SIGINT);
    }
    let mut out = String::new();
    let _ = std::io::Read::read_to_string(s.stderr.as_mut().unwrap(), &mut out);
    let _ = s.wait();
    out.lines()
        .filter(|l| l.contains("fsync") || l.contains("fdatasync"))
        .filter_map(|l| {
            l.split_whitespace()
                .nth(3)
                .and_then(|c| c.parse::<u64>().ok())
        })
        .sum()
}

/// A private PostgreSQL server (`tests/postgres-server.sh`), stopped when dropped.
struct Pg {
    dir: PathBuf,
    /// The connection string of its `postgres` database.
    server: String,
}

impl Pg {
    fn start(dir: &Path) -> Pg {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/postgres-server.sh");
        let dir = dir.join("pg");
        let out = Command::new(&script)
            .arg("start")
            .arg(&dir)
            .output()
            .expect("tests/postgres-server.sh runs");
        assert!(
            out.status.success(),
            "starting PostgreSQL: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let server = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Pg { dir, server }
    }

    /// A new database: its connection string.
    fn database(&self, name: &str) -> String {
        let mut c = postgres::Client::connect(&self.server, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        format!("{} dbname={name}", self.server)
    }

    /// The server's processes (the postmaster and its children), for strace.
    fn pids(&self) -> Vec<String> {
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let children = Command::new("ps")
            .args(["-o", "pid=", "--ppid", &pid])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default();
        std::iter::once(pid)
            .chain(children.split_whitespace().map(str::to_string))
            .filter(|p| !p.is_empty())
            .collect()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/postgres-server.sh");
        let _ = Command::new(script).arg("stop").arg(&self.dir).status();
    }
}

/// Replicas of one database, over one fleet file, at one time scale.
struct Ha<'a> {
    dir: &'a Path,
    url: String,
    lease: f64,
    fleet: PathBuf,
    scale: &'static str,
    cache: &'a Path,
}

impl Ha<'_> {
    /// `serve` as replica `holder` (its `life`-th start).
    fn replica(&self, holder: &str, life: usize) -> Daemon {
        let config = self.dir.join(format!("{holder}.json"));
        let c = json!({"store": {"type": "postgres", "url": self.url, "holder": holder,
                                 "leaseSeconds": self.lease}});
        std::fs::write(&config, c.to_string()).unwrap();
        let data = self.dir.join(format!("data-{holder}"));
        let args = [
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--fleet",
            self.fleet.to_str().unwrap(),
            "--time-scale",
            self.scale,
        ];
        let log = self.dir.join(format!("{holder}-{life}.log"));
        Daemon::start(&args, self.cache, &log).0
    }
}

/// Whether the replica at `root` says it leads.
fn leads(agent: &ureq::Agent, root: &str) -> bool {
    agent
        .get(format!("{root}/readyz"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .is_some_and(|t| t.lines().any(|l| l.starts_with("leader ")))
}

fn short_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(2)))
        .build()
        .into()
}

/// Bench 11, failover (issue 25): three replicas on one PostgreSQL, the leader `kill -9`ed again
/// and again while a run moves: the time until another says it leads, and until it takes a
/// change.
fn failover(dir: &Path, cache: &Path, quick: bool) {
    let kills = if quick { 3 } else { 20 };
    let lease = 2.0;
    println!("== 11. failover: 3 replicas on PostgreSQL, lease {lease} s, the leader killed {kills} times");
    let sub = dir.join("failover");
    std::fs::create_dir_all(&sub).unwrap();
    let pg = Pg::start(&sub);
    let ha = Ha {
        dir: &sub,
        url: pg.database("failover"),
        lease,
        fleet: fleet_file(&sub, (0..50).map(|i| member(i, None)).collect()),
        scale: "60",
        cache,
    };
    let holders = ["r0", "r1", "r2"];
    let mut lives = 0;
    let mut replicas: Vec<Option<Daemon>> = holders
        .iter()
        .map(|h| {
            lives += 1;
            Some(ha.replica(h, lives))
        })
        .collect();
    let probe = short_agent();
    let find_leader = |replicas: &Vec<Option<Daemon>>| -> Option<usize> {
        (0..replicas.len()).find(|i| {
            replicas[*i]
                .as_ref()
                .is_some_and(|d| leads(&probe, &d.root))
        })
    };
    let end = Instant::now() + Duration::from_secs(30);
    let mut leader = loop {
        if let Some(l) = find_leader(&replicas) {
            break l;
        }
        assert!(Instant::now() < end, "nobody leads");
        std::thread::sleep(Duration::from_millis(20));
    };
    start_run(replicas[leader].as_ref().unwrap());
    let (mut to_lead, mut to_change) = (Vec::new(), Vec::new());
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(500));
        let mut d = replicas[leader].take().unwrap();
        let _ = d.child.kill();
        let _ = d.child.wait();
        let killed = Instant::now();
        let next = loop {
            if let Some(l) = find_leader(&replicas) {
                break l;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "nobody took over"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        to_lead.push(killed.elapsed());
        // A change accepted: the new leader's engine runs.
        let base = replicas[next].as_ref().unwrap().base.clone();
        let body = json!({"properties": {"strategy": {"stages": [{"name": "a", "groups": [{"name": "g"}]}]}}});
        loop {
            let r = probe
                .put(format!("{base}/updateStrategies/k{k}"))
                .header("content-type", "application/json")
                .send(body.to_string());
            if r.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "no change taken"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        to_change.push(killed.elapsed());
        lives += 1;
        replicas[leader] = Some(ha.replica(holders[leader], lives));
        leader = next;
    }
    for r in replicas.into_iter().flatten() {
        r.stop();
    }
    to_lead.sort();
    to_change.sort();
    println!(
        "{kills} kills: another replica leads after median {}, max {}; takes a change after median {}, max {}   (target ≤ 2 × lease = {} ms)",
        ms(percentile(&to_lead, 0.5)),
        ms(*to_lead.last().unwrap()),
        ms(percentile(&to_change, 0.5)),
        ms(*to_change.last().unwrap()),
        lease * 2000.0
    );
}

/// Bench 12, step commits on PostgreSQL against SQLite (issue 25): PUTs of strategies, one step
/// each, on a daemon of either store; client latency, the server's mean commit time, and the
/// fsyncs of each (the daemon's on SQLite, the database server's on PostgreSQL).
fn commit_latency(dir: &Path, cache: &Path, quick: bool) {
    let steps = if quick { 50 } else { 500 };
    println!(
        "== 12. step commit latency and fsyncs: PostgreSQL against SQLite, {steps} steps each"
    );
    let sub = dir.join("commit");
    std::fs::create_dir_all(&sub).unwrap();
    let pg = Pg::start(&sub);
    let fleet = fleet_file(&sub, (0..50).map(|i| member(i, None)).collect());
    let mut means = Vec::new();
    for store in ["sqlite", "postgres"] {
        let d = if store == "sqlite" {
            Daemon::serve(&sub, &fleet, cache, &sub.join("sqlite.log")).0
        } else {
            let ha = Ha {
                dir: &sub,
                url: pg.database("commits"),
                lease: 15.0,
                fleet: fleet.clone(),
                scale: "1",
                cache,
            };
            let d = ha.replica("solo", 1);
            let probe = short_agent();
            while !leads(&probe, &d.root) {
                std::thread::sleep(Duration::from_millis(10));
            }
            d
        };
        let pids: Vec<String> = if store == "sqlite" {
            vec![d.child.id().to_string()]
        } else {
            pg.pids()
        };
        let strace = trace_fsyncs(&pids);
        std::thread::sleep(Duration::from_millis(500));
        let a = agent();
        let mut lat = Vec::new();
        for i in 0..steps {
            let began = Instant::now();
            send(
                &a,
                "PUT",
                &format!("{}/updateStrategies/s{i}", d.base),
                Some(
                    &json!({"properties": {"strategy": {"stages": [{"name": "a", "groups": [{"name": "g"}]}]}}}),
                ),
            );
            lat.push(began.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
        let fsyncs = match strace {
            Ok(s) => format!(
                "{:.2} fsync/fdatasync per step",
                fsync_count(s) as f64 / steps as f64
            ),
            Err(e) => format!("fsyncs not counted (strace: {e})"),
        };
        let metrics = ureq::get(format!("{}/metrics", d.root))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        let sample = |name: &str| -> f64 {
            metrics
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().last())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        let mean = sample("waverun_journal_commit_seconds_sum")
            / sample("waverun_journal_commit_seconds_count").max(1.0);
        means.push(mean);
        lat.sort();
        println!(
            "{store:>8}: PUT p50 {}, p99 {}; commit mean {:.2} ms (server); {fsyncs}",
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
            mean * 1000.0
        );
        d.stop();
    }
    println!(
        "PostgreSQL / SQLite, mean commit: {:.2}×   (target ≤ 3×)",
        means[1] / means[0].max(f64::MIN_POSITIVE)
    );
}

/// Bench 13, a follower's reads (issue 25): `GET /updateRuns/r1` of a 10,000-member run at 1,000
/// requests/s, open loop, from a follower while the leader runs it (moving: the follower
/// rebuilds its view as the journal grows).
fn follower_reads(dir: &Path, cache: &Path, quick: bool) {
    let n = if quick { 1_000 } else { 10_000 };
    let (rate, seconds) = (1_000.0, if quick { 2.0 } else { 10.0 });
    println!(
        "== 13. a follower's GET /updateRuns/r1 of a {n}-member run at {rate}/s for {seconds} s"
    );
    let sub = dir.join("follower");
    std::fs::create_dir_all(&sub).unwrap();
    let pg = Pg::start(&sub);
    let ha = Ha {
        dir: &sub,
        url: pg.database("follower"),
        lease: 15.0,
        fleet: fleet_file(&sub, (0..n).map(|i| member(i, None)).collect()),
        // Fast enough that the run moves while it is read: upgrades of 600 fleet minutes
        // take a second, a hundred at a time, so the follower follows ~100 steps a second.
        scale: "36000",
        cache,
    };
    let began = Instant::now();
    let a = ha.replica("a", 1);
    let probe = short_agent();
    while !leads(&probe, &a.root) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let b = ha.replica("b", 2);
    println!("leader and follower ready after {}", ms(began.elapsed()));
    start_run(&a);
    let url = format!("{}/updateRuns/r1", b.base);
    // The follower has caught up once it shows the run started.
    let end = Instant::now() + Duration::from_secs(120);
    let probe = agent();
    loop {
        let shown = probe
            .get(&url)
            .call()
            .ok()
            .filter(|r| r.status() == 200)
            .and_then(|mut r| r.body_mut().read_json::<Value>().ok());
        if shown.is_some_and(|v| v["properties"]["status"]["status"]["state"] == "Running") {
            break;
        }
        assert!(Instant::now() < end, "the follower never showed the run");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("the follower shows the run after {}", ms(began.elapsed()));
    let (lat, wall) = open_loop(&url, rate, seconds);
    print_latencies(&lat, wall, "(on the leader, bench 2's target: p99 ≤ 10 ms)");
    b.stop();
    a.stop();
}
