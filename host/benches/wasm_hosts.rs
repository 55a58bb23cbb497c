//! The engine on its three hosts, side by side in one run: native, the plugin in wasmtime, and
//! the browser package in Node. A plain `main` (no harness); it reports, it never asserts on
//! timings (only on correctness: every host completes the rollout, the plugin's report is byte
//! for byte the native one).
//!
//! ```text
//! cargo bench -p waverun --bench wasm_hosts            # full run (about a minute)
//! cargo bench -p waverun --bench wasm_hosts -- --quick # CI smoke: small fleet, one repetition
//! ```
//!
//! Inputs: the plugin and the core probe as published (`bindings/plugin/build.sh`, run every
//! time: the `wasm` profile, LTO, then `wasm-opt -O3`; `--quick` takes the release builds,
//! built when missing; `$WAVERUN_PLUGIN` and `$WAVERUN_PROBE` override) and the Node package
//! (`bindings/web/pkg/node`, `bindings/web/build.sh`, built when missing). The scenario is the rollout
//! bench's (`tests/src/bench_scenario.rs`): 10,000 members = 20 stages × 50 groups × 10.
//!
//! Sections:
//! - (a)–(c) `simulate` of the scenario natively, through `simulate_plugin` (wasmtime) and
//!   through the package's `simulate` in Node (`host/benches/node_simulate.mjs`; Node's
//!   startup, package load and the input's `JSON.parse` are reported apart), and the core probe
//!   in wasmtime with and without epoch interruption, all in interleaved rounds (each round
//!   runs every host once, so a slow spell of this shared machine slows them all alike; Node
//!   runs one `simulate` per line asked, `--rounds`); medians after a warm-up, ratios the
//!   median of the rounds' ratios; then where the plugin's time goes: the same
//!   rollout with each `EngineDriver` call timed, for the native engine, the guest's driver
//!   logic compiled natively (`waverun_plugin::Guest`, JSON envelopes and journaling without
//!   Wasm) and the plugin in wasmtime;
//! - (d) per-call overhead: the `ping` request on a `PluginInstance` (mean of 100,000 calls),
//!   and the same request handled by the guest's code compiled natively;
//! - (e) the module cache: cold compile, load from the on-disk cache (hit) and its parts,
//!   `InstancePre` instantiation and `waverun_init`; module sizes.
//!
//! `WAVERUN_BENCH_KEEP=1` keeps the scratch directory (the scenario JSON, the module cache).
//!
//! Targets (issue): wasmtime ≤ 1.5× native, Node ≤ 2× native, instantiate from the cache ≤ 5 ms.

#[path = "../../tests/src/bench_scenario.rs"]
#[allow(dead_code)]
mod bench_scenario;

use bench_scenario::{scenario, Grouping, Shape};
use serde::Deserialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::{Duration, Instant};
use waverun_core::error::{Error, ErrorCode};
use waverun_core::sim::SimulationReport;
use waverun_core::sim::{simulate, EngineDriver, Scenario, SharedFleet, Simulation};
use waverun_core::{Engine, Event, Input, Output, RunStatus, State, Timestamp, UpgradeOperation};
use waverun_host::runtime::{
    cache, simulate_plugin, timestamp_ms, InstanceConfig, ManualClock, MemoryPersistence,
    PluginDriver, PluginHost, PluginRuntime, QueueProvider, RuntimeConfig,
};

// ------------------------------------------------------------------ helpers

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn ms3(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB ({bytes} B)", bytes as f64 / (1024.0 * 1024.0))
}

fn from_ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1e3)
}

/// Times `f` `reps` times after `warmup` untimed calls.
fn time_runs<T>(warmup: usize, reps: usize, mut f: impl FnMut() -> T) -> Vec<Duration> {
    for _ in 0..warmup {
        black_box(f());
    }
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn run(cmd: &mut Process, what: &str) {
    println!("  building {what}: {cmd:?}");
    let status = cmd.status().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(status.success(), "{what} failed: {status}");
}

/// `target/wasm32-unknown-unknown/release/{file}` of workspace package `package`, built when
/// missing.
fn release_wasm(package: &str, file: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let path = target.join("wasm32-unknown-unknown/release").join(file);
    if !path.exists() {
        run(
            Process::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .current_dir(root())
                .args(["build", "--release", "--target", "wasm32-unknown-unknown"])
                .args(["-p", package]),
            package,
        );
    }
    path
}

/// The plugin and the probe as published (`bindings/plugin/build.sh`: the `wasm` profile, then
/// `wasm-opt -O3`), built or brought up to date: `target/wasm32-unknown-unknown/wasm/{file}`.
fn published_wasm(file: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let path = target.join("wasm32-unknown-unknown/wasm").join(file);
    run(
        &mut Process::new(root().join("bindings/plugin/build.sh")),
        "the published plugin and probe",
    );
    assert!(path.exists(), "{} after build.sh", path.display());
    path
}

/// The plugin: as published in full mode, the release build in quick mode (the CI smoke run,
/// which builds no LTO); `$WAVERUN_PLUGIN` overrides.
fn plugin_path(quick: bool) -> PathBuf {
    match std::env::var_os("WAVERUN_PLUGIN") {
        Some(p) => PathBuf::from(p),
        None if quick => release_wasm("waverun-plugin", "waverun_plugin.wasm"),
        None => published_wasm("waverun_plugin.opt.wasm"),
    }
}

/// The core alone as a module with no imports (`bindings/core-probe`), built as the plugin is;
/// `$WAVERUN_PROBE` overrides.
fn probe_path(quick: bool) -> PathBuf {
    match std::env::var_os("WAVERUN_PROBE") {
        Some(p) => PathBuf::from(p),
        None if quick => release_wasm("waverun-core-probe", "waverun_core_probe.wasm"),
        None => published_wasm("waverun_core_probe.opt.wasm"),
    }
}

/// The core probe in a fresh wasmtime engine, with or without epoch interruption, ready to
/// run `probe_simulate` of one scenario (JSON) again and again.
struct ProbeSession {
    store: wasmtime::Store<()>,
    memory: wasmtime::Memory,
    alloc: wasmtime::TypedFunc<u32, u32>,
    free: wasmtime::TypedFunc<(u32, u32), ()>,
    simulate: wasmtime::TypedFunc<(u32, u32), u64>,
    scenario: Vec<u8>,
}

impl ProbeSession {
    fn new(probe: &[u8], scenario: &[u8], epochs: bool) -> ProbeSession {
        use wasmtime::{Config, Engine as WasmEngine, Instance, Module, Store};
        let mut config = Config::new();
        config.epoch_interruption(epochs);
        let engine = WasmEngine::new(&config).expect("engine");
        let module = Module::new(&engine, probe).expect("compile the probe");
        let mut store = Store::new(&engine, ());
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = Instance::new(&mut store, &module, &[]).expect("no imports");
        ProbeSession {
            memory: instance.get_memory(&mut store, "memory").expect("memory"),
            alloc: instance
                .get_typed_func(&mut store, "probe_alloc")
                .expect("probe_alloc"),
            free: instance
                .get_typed_func(&mut store, "probe_free")
                .expect("probe_free"),
            simulate: instance
                .get_typed_func(&mut store, "probe_simulate")
                .expect("probe_simulate"),
            store,
            scenario: scenario.to_vec(),
        }
    }

    /// One `probe_simulate`, timed (the copy in and the free are not).
    fn once(&mut self) -> Duration {
        let len = self.scenario.len() as u32;
        let ptr = self.alloc.call(&mut self.store, len).expect("alloc");
        self.memory
            .write(&mut self.store, ptr as usize, &self.scenario)
            .expect("write");
        let t = Instant::now();
        let r = self
            .simulate
            .call(&mut self.store, (ptr, len))
            .expect("simulate");
        let took = t.elapsed();
        self.free
            .call(&mut self.store, ((r >> 32) as u32, r as u32))
            .expect("free");
        took
    }
}

/// The Node package, built when missing.
fn node_package() -> PathBuf {
    let pkg = root().join("bindings/web/pkg/node");
    if !pkg.join("waverun_wasm.js").exists() {
        run(
            &mut Process::new(root().join("bindings/web/build.sh")),
            "the Node package",
        );
    }
    pkg
}

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

// ------------------------------------------------------------------ timed drivers

/// Calls of one `EngineDriver` method: count and total time.
#[derive(Default, Clone, Copy)]
struct Tally {
    calls: u64,
    time: Duration,
}

/// An `EngineDriver` with every call timed.
struct Timed<D> {
    inner: D,
    /// handle_input, poll_output, next_wakeup, run_state, run_status.
    tally: [Tally; 5],
}

const METHODS: [&str; 5] = [
    "handle_input",
    "poll_output",
    "next_wakeup",
    "run_state",
    "run_status",
];

impl<D> Timed<D> {
    fn new(inner: D) -> Timed<D> {
        Timed {
            inner,
            tally: [Tally::default(); 5],
        }
    }
    fn timed<T>(&mut self, i: usize, f: impl FnOnce(&mut D) -> T) -> T {
        let t = Instant::now();
        let r = f(&mut self.inner);
        self.tally[i].time += t.elapsed();
        self.tally[i].calls += 1;
        r
    }
}

impl<D: EngineDriver> EngineDriver for Timed<D> {
    fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error> {
        self.timed(0, |d| d.handle_input(now, input))
    }
    fn poll_output(&mut self) -> Option<Output> {
        self.timed(1, |d| d.poll_output())
    }
    fn next_wakeup(&mut self) -> Option<Timestamp> {
        self.timed(2, |d| d.next_wakeup())
    }
    fn run_state(&mut self, run: &str) -> Option<State> {
        self.timed(3, |d| d.run_state(run))
    }
    fn run_status(&mut self, run: &str) -> Result<RunStatus, Error> {
        self.timed(4, |d| d.run_status(run))
    }
}

/// The guest's imports, natively: a virtual clock, in-memory journal and snapshot, the simulated
/// fleet as its cluster.
#[derive(Default)]
struct NativeGuestHost {
    now_ms: i64,
    /// Where `cluster_submit` puts an upgrade, as `PluginDriver`'s provider does.
    fleet: Option<SharedFleet>,
    journal: Vec<String>,
    snapshot: Option<String>,
    /// Journal records and snapshots written, and their bytes.
    records: (u64, u64),
    snapshots: (u64, u64),
}

impl waverun_plugin::HostImports for NativeGuestHost {
    fn clock_now_ms(&mut self) -> i64 {
        self.now_ms
    }
    fn cluster_submit(&mut self, operation: &str) -> i32 {
        let op: UpgradeOperation = serde_json::from_str(operation).expect("an operation");
        let now = Timestamp::from_timestamp_millis(self.now_ms).expect("a time");
        if let Some(fleet) = &self.fleet {
            fleet.lock().submit(&op, now);
        }
        0
    }
    fn cluster_query(&mut self, _query: &str) -> i32 {
        0
    }
    /// The benched scenarios have no health checks; one would be refused (an `Error`
    /// measurement), as a host that measures nothing answers.
    fn check_submit(&mut self, _request: &str) -> i32 {
        1
    }
    fn journal_append(&mut self, record: &str) -> i32 {
        self.records.0 += 1;
        self.records.1 += record.len() as u64;
        self.journal.push(record.to_string());
        0
    }
    fn snapshot_write(&mut self, snapshot: &str) -> i32 {
        self.snapshots.0 += 1;
        self.snapshots.1 += snapshot.len() as u64;
        self.snapshot = Some(snapshot.to_string());
        self.journal.clear();
        0
    }
    fn storage_read(&mut self, _kind: waverun_plugin::StorageKind) -> Result<Option<Vec<u8>>, i32> {
        Ok(None)
    }
    fn log(&mut self, _level: waverun_plugin::GuestLogLevel, _message: &str) {}
}

#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    events: Vec<Event>,
}

#[derive(Deserialize)]
struct Events {
    #[serde(default)]
    events: Vec<Event>,
}

/// The guest's driver (`waverun_plugin::Guest`: JSON envelopes, write-ahead journal,
/// snapshots) compiled natively and driven exactly as `PluginDriver` drives the Wasm module,
/// minus the Wasm boundary: separates the cost of the ABI's JSON from the cost of running in
/// wasmtime.
struct NativeGuestDriver {
    guest: waverun_plugin::Guest<NativeGuestHost>,
    outputs: VecDeque<Output>,
}

impl NativeGuestDriver {
    fn new(fleet: SharedFleet) -> NativeGuestDriver {
        let mut guest = waverun_plugin::Guest::new(NativeGuestHost {
            fleet: Some(fleet),
            ..NativeGuestHost::default()
        });
        let init: Envelope = serde_json::from_str(&guest.init()).expect("init envelope");
        assert!(init.ok, "init");
        NativeGuestDriver {
            guest,
            outputs: VecDeque::new(),
        }
    }

    fn request(&mut self, request: Value) -> Result<Value, Error> {
        let arg = serde_json::to_vec(&serde_json::json!({"v": 1, "request": request}))
            .expect("JSON serialises");
        Self::envelope(&self.guest.request(&arg))
    }

    fn envelope(text: &str) -> Result<Value, Error> {
        let env: Envelope = serde_json::from_str(text).expect("an envelope");
        if env.ok {
            Ok(env.result)
        } else {
            Err(Error::new(
                ErrorCode::InvalidState,
                format!("{:?} ({} events)", env.error, env.events.len()),
            ))
        }
    }
}

impl EngineDriver for NativeGuestDriver {
    fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error> {
        // Encoded and decoded as `PluginInstance` does: typed arguments, one typed pass over
        // the answer.
        #[derive(serde::Serialize)]
        struct CommandRequest<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            command: &'a waverun_core::Command,
        }
        #[derive(serde::Serialize)]
        struct Arg<T> {
            v: u32,
            #[serde(skip_serializing_if = "Option::is_none")]
            request: Option<T>,
            #[serde(skip_serializing_if = "Option::is_none")]
            observation: Option<T>,
        }
        #[derive(Deserialize)]
        struct EventsEnvelope {
            ok: bool,
            #[serde(default)]
            result: Option<Events>,
            #[serde(default)]
            error: Option<Value>,
            #[serde(default)]
            events: Vec<Event>,
        }
        self.guest.host_mut().now_ms = timestamp_ms(now);
        let answer = match &input {
            Input::Command(command) => {
                let arg = serde_json::to_vec(&Arg {
                    v: 1,
                    request: Some(CommandRequest {
                        kind: "command",
                        command,
                    }),
                    observation: None,
                })
                .expect("JSON serialises");
                self.guest.request(&arg)
            }
            Input::Observation(o) => {
                let arg = serde_json::to_vec(&Arg {
                    v: 1,
                    request: None,
                    observation: Some(o),
                })
                .expect("JSON serialises");
                self.guest.deliver(&arg)
            }
            Input::Timeout => self.guest.wake(),
        };
        let env: EventsEnvelope = serde_json::from_str(&answer).expect("an envelope");
        if !env.ok {
            self.outputs
                .extend(env.events.into_iter().map(Output::Event));
            return Err(Error::new(
                ErrorCode::InvalidState,
                format!("{:?}", env.error),
            ));
        }
        let events = env.result.map(|r| r.events).unwrap_or_default();
        self.outputs.extend(events.into_iter().map(Output::Event));
        Ok(())
    }
    fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }
    fn next_wakeup(&mut self) -> Option<Timestamp> {
        #[derive(Deserialize)]
        struct Wakeup {
            at: Option<Timestamp>,
        }
        let r = self
            .request(serde_json::json!({"type": "nextWakeup"}))
            .ok()?;
        serde_json::from_value::<Wakeup>(r).ok()?.at
    }
    fn run_state(&mut self, run: &str) -> Option<State> {
        #[derive(Deserialize)]
        struct Entry {
            name: String,
            state: State,
        }
        #[derive(Deserialize)]
        struct Runs {
            runs: Vec<Entry>,
        }
        let r = self.request(serde_json::json!({"type": "runs"})).ok()?;
        let runs: Runs = serde_json::from_value(r).ok()?;
        runs.runs
            .into_iter()
            .find(|e| e.name == run)
            .map(|e| e.state)
    }
    fn run_status(&mut self, run: &str) -> Result<RunStatus, Error> {
        #[derive(Deserialize)]
        struct StatusEnvelope {
            result: Option<RunStatus>,
            #[serde(default)]
            error: Option<Value>,
        }
        let arg = serde_json::to_vec(&serde_json::json!({"v": 1, "run": run})).expect("JSON");
        let env: StatusEnvelope =
            serde_json::from_str(&self.guest.status(&arg)).expect("an envelope");
        env.result
            .ok_or_else(|| Error::new(ErrorCode::InvalidState, format!("{:?}", env.error)))
    }
}

/// One rollout through `driver` with every driver call timed; returns the tallies and the
/// total wall time.
fn profile<D: EngineDriver>(
    sc: &Scenario,
    driver: impl FnOnce(SharedFleet) -> D,
) -> ([Tally; 5], Duration) {
    let t = Instant::now();
    let fleet = SharedFleet::new(sc);
    let driver = Timed::new(driver(fleet.clone()));
    let mut sim = Simulation::with_fleet(sc, driver, fleet).expect("valid");
    sim.run_to_end();
    let report = sim.report();
    let total = t.elapsed();
    assert_eq!(report.summary.state, State::Completed);
    (sim.driver().tally, total)
}

// ------------------------------------------------------------------ Node

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeTimings {
    startup_ms: f64,
    load_ms: f64,
    read_ms: f64,
    parse_ms: f64,
    runs_ms: Vec<f64>,
    ping_ns: f64,
    events: usize,
    completed: u32,
    state: String,
    node: String,
}

/// The package in a Node process that runs `simulate` once per `run` line
/// (`node_simulate.mjs --rounds`), so that its runs interleave with the other hosts'.
struct NodeSession {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl NodeSession {
    /// Starts Node, which loads the package, parses the scenario and warms up.
    fn start(pkg: &Path, scenario_json: &Path, warmup: usize) -> NodeSession {
        use std::process::Stdio;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/node_simulate.mjs");
        let mut child = Process::new("node")
            .arg("--max-old-space-size=4096")
            .arg(&script)
            .arg(pkg)
            .arg(scenario_json)
            .arg("--rounds")
            .arg(warmup.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run node");
        let mut session = NodeSession {
            stdin: child.stdin.take().expect("stdin"),
            stdout: std::io::BufReader::new(child.stdout.take().expect("stdout")),
            child,
        };
        assert_eq!(session.line(), "ready", "node warmed up");
        session
    }

    fn line(&mut self) -> String {
        use std::io::BufRead;
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .expect("read node's answer");
        assert!(n > 0, "node ended early: {:?}", self.child.try_wait());
        line.trim_end().to_string()
    }

    /// One `simulate`, as Node timed it.
    fn run(&mut self) -> Duration {
        use std::io::Write;
        writeln!(self.stdin, "run").expect("ask node for a run");
        let v: Value = serde_json::from_str(&self.line()).expect("{ms}");
        from_ms(v["ms"].as_f64().expect("ms"))
    }

    /// Ends the runs; what Node measured.
    fn finish(mut self) -> NodeTimings {
        use std::io::Write;
        writeln!(self.stdin, "end").expect("end node's runs");
        let line = self.line();
        // Node's stdin closed: nothing keeps it alive.
        let NodeSession {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let status = child.wait().expect("node exits");
        assert!(status.success(), "node failed ({status})");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("node output ({e}): {line}"))
    }
}

/// Every host's runs in rounds: round `r` runs each host once, in order, after `warmup` runs
/// of each; a slow spell of this shared machine then lands on every host alike.
fn in_rounds(
    warmup: usize,
    reps: usize,
    hosts: &mut [&mut dyn FnMut() -> Duration],
) -> Vec<Vec<Duration>> {
    for h in hosts.iter_mut() {
        for _ in 0..warmup {
            h();
        }
    }
    let mut out = vec![Vec::with_capacity(reps); hosts.len()];
    for _ in 0..reps {
        for (i, h) in hosts.iter_mut().enumerate() {
            out[i].push(h());
        }
    }
    out
}

/// The median of the rounds' ratios `v[r] / base[r]`.
fn ratio(v: &[Duration], base: &[Duration]) -> f64 {
    let mut r: Vec<f64> = v
        .iter()
        .zip(base)
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
        .collect();
    r.sort_by(f64::total_cmp);
    r[r.len() / 2]
}

/// Times `f`.
fn timed<T>(f: impl FnOnce() -> T) -> Duration {
    let t = Instant::now();
    black_box(f());
    t.elapsed()
}

// ------------------------------------------------------------------ main

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let (warmup, reps) = if quick { (0, 1) } else { (1, 7) };
    let shape = if quick {
        Shape {
            stages: 20,
            groups: 5,
            per_group: 2,
        }
    } else {
        Shape::FLEET_10K
    };
    println!(
        "waverun wasm hosts benchmark ({} mode, {} build)",
        if quick { "quick" } else { "full" },
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "optimised"
        }
    );

    println!("\ninputs");
    let wasm_path = plugin_path(quick);
    let pkg = node_package();
    let wasm = std::fs::read(&wasm_path).expect("read the plugin");
    let node_wasm = pkg.join("waverun_wasm_bg.wasm");
    let sc = scenario(shape, Grouping::Mixed);
    let scratch = root().join(format!("target/tmp/wasm_hosts-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let scenario_json = scratch.join("scenario.json");
    std::fs::write(
        &scenario_json,
        serde_json::to_string(&sc).expect("scenario serialises"),
    )
    .expect("write the scenario");
    println!(
        "  plugin        {} ({})",
        wasm_path.display(),
        mib(wasm.len() as u64)
    );
    println!(
        "  node package  {} (module {})",
        pkg.display(),
        mib(file_size(&node_wasm))
    );
    println!(
        "  scenario      {} ({}, JSON {})",
        scenario_json.display(),
        shape.label(),
        mib(file_size(&scenario_json))
    );

    // (e) first, since it also yields the runtime the other sections use.
    let cache_dir = scratch.join("cache");
    let rt = PluginRuntime::new(RuntimeConfig::with_cache(&cache_dir)).expect("runtime");
    let t = Instant::now();
    let cold = rt.load(&wasm).expect("compile the plugin");
    let cold_t = t.elapsed();
    let cwasm = rt.cache_path(&wasm).expect("cache on");
    let cache_reps = if quick { 3 } else { 21 };
    // A fresh runtime (engine, linker) as a restarted process would have, then repeated hits.
    let rt2 = PluginRuntime::new(RuntimeConfig::with_cache(&cache_dir)).expect("runtime");
    let hits = time_runs(1, cache_reps, || {
        let p = rt2.load(&wasm).expect("cache hit");
        assert_eq!(p.cache_status(), &waverun_host::runtime::CacheStatus::Hit);
        p
    });
    let sha_t = time_runs(1, cache_reps, || cache::sha256_hex(&wasm));
    let read_cwasm_t = time_runs(1, cache_reps, || std::fs::read(&cwasm).expect("read"));
    let crc_cwasm_t = time_runs(1, cache_reps, || {
        crc32fast::hash(&std::fs::read(&cwasm).expect("read"))
    });
    let sha_cwasm_t = time_runs(1, cache_reps, || {
        cache::sha256_hex(&std::fs::read(&cwasm).expect("read"))
    });
    let deser_t = time_runs(1, cache_reps, || {
        // SAFETY: the artifact `rt.load` just wrote for this engine configuration.
        unsafe { wasmtime::Module::deserialize_file(rt2.wasm_engine(), &cwasm) }
            .expect("deserialize")
    });
    let plugin = rt2.load(&wasm).expect("cache hit");
    let new_host = || {
        PluginHost::new(
            ManualClock::new(0),
            QueueProvider::new(),
            MemoryPersistence::new(),
        )
    };
    let inst_t = time_runs(1, cache_reps, || {
        plugin
            .instantiate(new_host(), InstanceConfig::default())
            .expect("instantiate")
    });
    let mut init_samples = Vec::new();
    let mut both_samples = Vec::new();
    for _ in 0..cache_reps + 1 {
        let t0 = Instant::now();
        let mut i = plugin
            .instantiate(new_host(), InstanceConfig::default())
            .expect("instantiate");
        let t1 = Instant::now();
        i.init().expect("init");
        let t2 = Instant::now();
        init_samples.push(t2 - t1);
        both_samples.push(t2 - t0);
    }
    init_samples.remove(0);
    both_samples.remove(0);
    drop(cold);

    // (a)-(c)
    let sc_text = std::fs::read_to_string(&scenario_json).expect("read the scenario");
    let native = simulate(&sc).expect("native");
    assert_eq!(native.summary.state, State::Completed);
    assert_eq!(native.summary.members_completed as usize, shape.members());
    let native_text = serde_json::to_string(&native).expect("json");
    let native_json = |text: &str| {
        let s = Scenario::from_json(text).expect("a scenario");
        serde_json::to_string(&simulate(&s).expect("native")).expect("json")
    };
    let mut simulator = plugin
        .instantiate(new_host(), InstanceConfig::default())
        .expect("instantiate");
    let request_identical = simulator.simulate_json(&sc_text).expect("simulate") == native_text;
    assert!(request_identical, "the plugin's simulate report differs");
    let in_wasm: SimulationReport = simulate_plugin(&plugin, &sc).expect("plugin");
    let identical = native_text == serde_json::to_string(&in_wasm).expect("json");
    assert!(identical, "the plugin's report differs from the native one");
    let probe = std::fs::read(probe_path(quick)).expect("read the core probe");
    let mut without = ProbeSession::new(&probe, sc_text.as_bytes(), false);
    let mut with = ProbeSession::new(&probe, sc_text.as_bytes(), true);
    let t = Instant::now();
    let mut node_session = NodeSession::start(&pkg, &scenario_json, 0);
    let node_start = t.elapsed();
    let mut node_run_wall = Duration::ZERO;
    // Every host in each round, so that the ratios compare runs made side by side.
    let runs = in_rounds(
        warmup,
        reps,
        &mut [
            &mut || timed(|| simulate(&sc).expect("native")),
            &mut || timed(|| native_json(&sc_text)),
            &mut || {
                timed(|| {
                    let fleet = SharedFleet::new(&sc);
                    let driver = NativeGuestDriver::new(fleet.clone());
                    let mut sim = Simulation::with_fleet(&sc, driver, fleet).expect("valid");
                    sim.run_to_end();
                    sim.report()
                })
            },
            &mut || timed(|| simulator.simulate_json(&sc_text).expect("simulate request")),
            &mut || timed(|| simulate_plugin(&plugin, &sc).expect("plugin")),
            &mut || {
                let t = Instant::now();
                let took = node_session.run();
                node_run_wall += t.elapsed();
                took
            },
            &mut || without.once(),
            &mut || with.once(),
        ],
    );
    drop(simulator);
    let [native_reps, native_json_reps, driven_native_reps, request_reps, plugin_reps, node_reps, without, with] =
        <[Vec<Duration>; 8]>::try_from(runs).expect("eight hosts");
    let node = node_session.finish();
    let node_wall = node_start + node_run_wall;
    assert_eq!(node.state, "Completed");
    assert_eq!(node.events, native.timeline.len(), "Node: same events");
    assert_eq!(node.completed, native.summary.members_completed);
    // Its runs: the rounds' warm-up, then one a round.
    assert_eq!(
        node.runs_ms.len(),
        warmup + node_reps.len(),
        "Node: one run per round"
    );

    let n = median(native_reps.clone());
    let row = |name: &str, v: &[Duration], like: Option<&[Duration]>, target: &str| {
        let m = median(v.to_vec());
        let min = *v.iter().min().expect("runs");
        let max = *v.iter().max().expect("runs");
        let like = like.map_or(String::new(), |l| format!("{:.2}x", ratio(v, l)));
        println!(
            "  {:<48} {:>10} {:>10} {:>10} {:>8.2}x {:>8} {:>8}",
            name,
            ms(m),
            ms(min),
            ms(max),
            m.as_secs_f64() / n.as_secs_f64(),
            like,
            target
        );
    };
    println!(
        "\n(a)-(c) simulate: {}, {} events; median of {} round(s){}, every host once a round \
         (ratios: the median of the rounds' ratios)",
        shape.label(),
        native.timeline.len(),
        reps,
        if warmup > 0 {
            " after a warm-up run of each"
        } else {
            ""
        }
    );
    println!(
        "  {:<48} {:>10} {:>10} {:>10} {:>9} {:>8} {:>8}",
        "host", "median", "min", "max", "vs (a1)", "vs like", "target"
    );
    row(
        "(a1) native: typed scenario -> typed report",
        &native_reps,
        None,
        "",
    );
    row(
        "(a2) native: JSON text -> JSON text",
        &native_json_reps,
        None,
        "",
    );
    row(
        "(a3) native: guest driver, input by input",
        &driven_native_reps,
        None,
        "",
    );
    row(
        "(b1) wasmtime: `simulate` request (JSON->JSON)",
        &request_reps,
        Some(&native_json_reps),
        "<= 1.5x",
    );
    row(
        "(b2) wasmtime: driven input by input, journaled",
        &plugin_reps,
        Some(&driven_native_reps),
        "",
    );
    row(
        &format!("(c) Node {}: package `simulate`", node.node),
        &node_reps,
        Some(&native_reps),
        "<= 2x",
    );
    println!(
        "  vs like: (b1) / (a2) (same bytes in and out), (b2) / (a3) (the same driver code: \
         JSON envelopes, write-ahead journal, snapshots), (c) / (a1) (JS objects in and out)"
    );
    println!(
        "  (b1) report byte-identical to (a2): {request_identical}; (b2) report byte-identical \
         to (a1): {identical}"
    );
    println!(
        "  Node: same event count ({}) and members completed ({}) as native",
        node.events, node.completed
    );
    println!(
        "  Node, outside the timed runs: process startup {:.1} ms, package load (compile + \
         instantiate) {:.1} ms, read scenario {:.1} ms, JSON.parse {:.1} ms, warm-up run(s) \
         {:?} ms; whole node process (start, warm-up, the rounds' runs) {}",
        node.startup_ms,
        node.load_ms,
        node.read_ms,
        node.parse_ms,
        node.runs_ms[..warmup]
            .iter()
            .map(|v| (v * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        ms(node_wall)
    );
    println!(
        "  (the Node runs include converting the scenario to Rust and the report to JS objects)"
    );

    // Where the time goes: one profiled rollout per driver.
    println!("\n  where the time goes (one rollout each, every EngineDriver call timed):");
    let profiles = [
        ("native Engine", profile(&sc, |_| Engine::new(sc.start))),
        ("guest driver, native", profile(&sc, NativeGuestDriver::new)),
        (
            "plugin in wasmtime",
            profile(&sc, |fleet| {
                PluginDriver::new(&plugin, fleet).expect("driver")
            }),
        ),
    ];
    print!("  {:<22} {:>10}", "driver", "total");
    for m in METHODS {
        print!(" {:>22}", m);
    }
    println!();
    for (name, (tally, total)) in &profiles {
        print!("  {:<22} {:>10}", name, ms(*total));
        for t in tally {
            let per = if t.calls == 0 {
                0.0
            } else {
                t.time.as_secs_f64() * 1e6 / t.calls as f64
            };
            print!(
                " {:>22}",
                format!("{} ({}×{:.1}µs)", ms(t.time), t.calls, per)
            );
        }
        println!();
    }

    let fleet = SharedFleet::new(&sc);
    let driver = NativeGuestDriver::new(fleet.clone());
    let mut sim = Simulation::with_fleet(&sc, driver, fleet).expect("valid");
    sim.run_to_end();
    let h = sim.driver().guest.host();
    println!(
        "  guest persistence per rollout: {} journal records ({}), {} snapshots ({}), \
         the snapshots being written every {} records",
        h.records.0,
        mib(h.records.1),
        h.snapshots.0,
        mib(h.snapshots.1),
        waverun_plugin::SNAPSHOT_EVERY
    );
    drop(sim);

    // What epoch interruption costs: the core alone (no driver, no imports), JSON in and out,
    // timed in the rounds above.
    println!(
        "\n  the core alone in wasmtime (`bindings/core-probe`, JSON -> JSON, default Config), \
         what the epoch checks cost:"
    );
    row(
        "(p1) without epoch interruption",
        &without,
        Some(&native_json_reps),
        "",
    );
    row(
        "(p2) with epoch interruption",
        &with,
        Some(&native_json_reps),
        "",
    );
    println!(
        "  epoch checks (every function entry and loop header): {:.2}x; vs like: / (a2)",
        ratio(&with, &without)
    );

    // (d) per-call overhead.
    let calls = if quick { 10_000 } else { 200_000 };
    let mut inst = plugin
        .instantiate(new_host(), InstanceConfig::default())
        .expect("instantiate");
    inst.init().expect("init");
    for _ in 0..calls / 10 {
        inst.ping().expect("ping");
    }
    let t = Instant::now();
    for _ in 0..calls {
        inst.ping().expect("ping");
    }
    let ping_wasm = t.elapsed().as_secs_f64() * 1e9 / calls as f64;
    let mut guest = waverun_plugin::Guest::new(NativeGuestHost::default());
    let ping_native = |guest: &mut waverun_plugin::Guest<NativeGuestHost>| {
        let arg = serde_json::to_vec(&serde_json::json!({"v": 1, "request": {"type": "ping"}}))
            .expect("JSON");
        let env: Envelope = serde_json::from_str(&guest.request(&arg)).expect("envelope");
        assert!(env.ok);
        black_box(env.result);
    };
    for _ in 0..calls / 10 {
        ping_native(&mut guest);
    }
    let t = Instant::now();
    for _ in 0..calls {
        ping_native(&mut guest);
    }
    let ping_nat = t.elapsed().as_secs_f64() * 1e9 / calls as f64;
    println!("\n(d) per-call overhead: the `ping` request, mean of {calls} calls");
    println!(
        "  {:<60} {:>10.2} µs",
        "PluginInstance::ping (wasmtime)",
        ping_wasm / 1e3
    );
    println!(
        "  {:<60} {:>10.2} µs",
        "same request, guest code native (JSON in and out, no Wasm)",
        ping_nat / 1e3
    );
    println!(
        "  {:<60} {:>10.2} µs",
        "  => the Wasm boundary (alloc + copy + call + free, deadline)",
        (ping_wasm - ping_nat) / 1e3
    );
    println!(
        "  {:<60} {:>10.2} µs",
        "Node: a trivial package call (isWaverunError), for scale",
        node.ping_ns / 1e3
    );

    // (e) cache.
    println!("\n(e) module cache and instantiation (median of {cache_reps})");
    println!(
        "  {:<60} {:>12}",
        "cold: compile + store (Cranelift), once",
        ms(cold_t)
    );
    println!(
        "  {:<60} {:>12}",
        "load from the on-disk cache (hit), PluginRuntime::load",
        ms3(median(hits))
    );
    println!(
        "  {:<60} {:>12}",
        "  for scale: SHA-256 of the wasm (cache key)",
        ms3(median(sha_t))
    );
    println!(
        "  {:<60} {:>12}",
        "  for scale: read the .cwasm into memory",
        ms3(median(read_cwasm_t))
    );
    println!(
        "  {:<60} {:>12}",
        "  for scale: read + CRC-32 of the .cwasm",
        ms3(median(crc_cwasm_t))
    );
    println!(
        "  {:<60} {:>12}",
        "  for scale: read + SHA-256 of the .cwasm",
        ms3(median(sha_cwasm_t))
    );
    println!(
        "  {:<60} {:>12}",
        "  for scale: Module::deserialize_file alone",
        ms3(median(deser_t))
    );
    println!(
        "  {:<60} {:>12}",
        "InstancePre instantiate (+ ABI version check)",
        ms3(median(inst_t))
    );
    println!(
        "  {:<60} {:>12}",
        "waverun_init (empty storage)",
        ms3(median(init_samples))
    );
    println!(
        "  {:<60} {:>12}",
        "instantiate + waverun_init",
        ms3(median(both_samples))
    );
    println!("  {:<60} {:>12}", "", "");
    println!("  sizes: plugin .wasm {}", mib(wasm.len() as u64));
    println!("         plugin .cwasm {}", mib(file_size(&cwasm)));
    println!(
        "         Node package module {}",
        mib(file_size(&node_wasm))
    );

    println!(
        "\ntargets: wasmtime <= 1.5x native, Node <= 2x native, instantiate from the cache <= 5 ms"
    );
    drop(plugin);
    drop(rt2);
    drop(rt);
    if std::env::var_os("WAVERUN_BENCH_KEEP").is_some() {
        println!("kept the scratch directory {}", scratch.display());
    } else {
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
