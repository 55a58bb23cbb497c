//! Rollout benchmark: a plain `main` (no harness) timing the engine at fleet scale.
//!
//! ```text
//! cargo bench -p waverun-tests --bench rollout            # full run (a few minutes at most)
//! cargo bench -p waverun-tests --bench rollout -- --quick # CI smoke: small sizes, one repetition
//! cargo bench -p waverun-tests --bench rollout -- --only=rollout --shape=100x50x20  # (a)/(b) at 100,000
//! cargo bench -p waverun-tests --bench rollout -- --emit-scenario=s100k.json --shape=100x50x20
//! ```
//!
//! The last writes the 100,000-member scenario (100 stages × 50 groups × 20) as JSON for
//! `waverun simulate -o json s100k.json` (issue 26's whole-process figure).
//!
//! Sections:
//! - (a) a full simulated rollout (`waverun_core::sim::simulate`'s three parts) of a 10,000-member
//!   fleet through 20 stages × 50 groups of 10: wall time (median after a warm-up), engine
//!   events and inputs, time per event;
//! - (b) the latency of every engine input (`Engine::handle_input` + draining its outputs) over
//!   the same rollout, driven directly the way the simulator drives the engine;
//! - (c) the same rollout at 1,000 to 100,000 members (per-event cost must stay flat);
//! - (d) `plan` of 10,000 members against 1,000 label-selector groups;
//! - (e) 10,000 stages of one member each with two auto-approved Approval gates per stage (one
//!   before, one after), against the same stages without gates: what grows with the number of
//!   stages and gates (gate lookup and creation, status and plan building) shows here.
//!
//! Peak RSS per section is read from `/proc/self/status` (VmHWM, reset through
//! `/proc/self/clear_refs` before each section; "n/a" where that is not available).
//!
//! Targets (issue): rollout ≤ 1 s, per-event p50 ≤ 5 µs, plan ≤ 50 ms, 10,000 gated stages ≤ 1 s.
//! This binary only
//! reports; it asserts correctness (every member Completed, driver and simulator agree), never
//! timings.

use std::hint::black_box;
use std::time::{Duration, Instant};
use waverun_core::catalog::Catalog;
use waverun_core::sim::{Scenario, SimulatedFleet, Simulation};
use waverun_core::{
    Command, Engine, EventKind, GateSelector, GateType, HostCommand, Input, Member, Output, State,
    Timestamp,
};
use waverun_tests::bench_scenario::{gated_stages, scenario, selector, Grouping, Shape};

// ------------------------------------------------------------------ measurements

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn us(ns: f64) -> String {
    format!("{:.2} µs", ns / 1e3)
}

/// Resets the peak-RSS counter (VmHWM) of this process to the current RSS; false where
/// unsupported.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// VmHWM (peak resident set) in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Resets the peak-RSS counter and returns the resident set size now (the new peak's floor:
/// the allocator keeps memory freed by earlier sections), if the reset worked.
fn start_rss() -> Option<f64> {
    if !reset_peak_rss() {
        return None;
    }
    peak_rss_mib()
}

/// "peak (resident at section start)"; the process peak where the reset is unsupported.
fn rss(start: Option<f64>) -> String {
    match (peak_rss_mib(), start) {
        (Some(m), Some(s)) => format!("{m:.0} MiB (from {s:.0})"),
        (Some(m), None) => format!("{m:.0} MiB (process)"),
        (None, _) => "n/a".into(),
    }
}

/// One simulated rollout through `Simulation`, timed in its three parts.
struct SimTiming {
    setup: Duration,
    run: Duration,
    report: Duration,
    /// Dropping the simulation (engine, fleet, timeline), which `simulate` pays on return.
    teardown: Duration,
    events: usize,
    completed: u32,
}

impl SimTiming {
    fn total(&self) -> Duration {
        self.setup + self.run + self.report + self.teardown
    }
}

fn simulate_timed(sc: &Scenario) -> SimTiming {
    let t0 = Instant::now();
    let mut sim = Simulation::new(sc).expect("valid");
    let t1 = Instant::now();
    sim.run_to_end();
    let t2 = Instant::now();
    let report = sim.report();
    let t3 = Instant::now();
    drop(sim);
    let t4 = Instant::now();
    assert_eq!(report.summary.state, State::Completed, "rollout completes");
    SimTiming {
        setup: t1 - t0,
        run: t2 - t1,
        report: t3 - t2,
        teardown: t4 - t3,
        events: report.timeline.len(),
        completed: report.summary.members_completed,
    }
}

/// The engine driven directly, exactly as `Simulation::step` drives it, timing each input:
/// `handle_input` plus draining every output (the outputs are handled after the clock stops).
struct Driver {
    engine: Engine,
    fleet: SimulatedFleet,
    run: String,
    now: Timestamp,
    /// Nanoseconds per input.
    latencies: Vec<u64>,
    /// Events per input (same order).
    events_per_input: Vec<u32>,
    events: u64,
    buf: Vec<Output>,
    start_run_ns: u64,
    /// The engine's snapshot (`Engine::snapshot`) right after StartRun, in bytes.
    snapshot_started: usize,
}

impl Driver {
    fn new(sc: &Scenario) -> Driver {
        let mut engine = Engine::new(sc.start);
        for (_, cmd) in sc.setup_commands() {
            engine
                .handle_input(sc.start, Input::Command(cmd))
                .expect("setup");
        }
        while engine.poll_output().is_some() {}
        Driver {
            engine,
            fleet: SimulatedFleet::new(sc),
            run: sc.run_name().unwrap().to_string(),
            now: sc.start,
            latencies: Vec::with_capacity(4 * sc.members.len()),
            events_per_input: Vec::with_capacity(4 * sc.members.len()),
            events: 0,
            buf: Vec::with_capacity(256),
            start_run_ns: 0,
            snapshot_started: 0,
        }
    }

    /// Feeds one input, timed; then submits upgrades and auto-approves gates like the simulator.
    fn input(&mut self, input: Input) -> u64 {
        let t0 = Instant::now();
        let _ = self.engine.handle_input(self.now, input);
        while let Some(o) = self.engine.poll_output() {
            self.buf.push(o);
        }
        let ns = t0.elapsed().as_nanos() as u64;
        self.latencies.push(ns);
        let mut approvals = Vec::new();
        let mut events = 0;
        for o in self.buf.drain(..) {
            match o {
                Output::Event(ev) => {
                    if ev.kind() == EventKind::RunCreated {
                        continue;
                    }
                    events += 1;
                    if ev.kind() == EventKind::GateCreated
                        && ev.gate_type() == Some(GateType::Approval)
                    {
                        approvals.push(ev.gate_id().map(str::to_string));
                    }
                }
                Output::Command(HostCommand::StartUpgrade(op)) => self.fleet.submit(&op, self.now),
                Output::Command(HostCommand::MeasureCheck(req)) => {
                    panic!("the bench's strategies have no health checks: {req:?}")
                }
            }
        }
        self.events += events as u64;
        self.events_per_input.push(events);
        for id in approvals {
            self.input(Input::Command(Command::CompleteGate {
                run: self.run.clone(),
                gate: GateSelector {
                    id,
                    stage: None,
                    group: None,
                    timing: None,
                },
                by: Some("autoApprove".into()),
            }));
        }
        ns
    }

    fn run_to_end(&mut self, until: Timestamp) {
        let mut started = false;
        loop {
            let now = self.now;
            for obs in self.fleet.take_due(now) {
                self.input(Input::Observation(obs));
            }
            if !started {
                started = true;
                let name = self.run.clone();
                self.start_run_ns = self.input(Input::Command(Command::StartRun { name }));
                self.snapshot_started = self.engine.snapshot().len();
            }
            self.input(Input::Timeout);
            let finished = self.engine.run_state(&self.run).is_some_and(|s| {
                matches!(
                    s,
                    State::Completed | State::Failed | State::Skipped | State::Stopped
                )
            }) && self.fleet.idle();
            if finished {
                return;
            }
            let next = [
                self.engine.poll_timeout().map(|w| w.at),
                self.fleet.next_completion(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= until => self.now = t.max(now),
                _ => return,
            }
        }
    }
}

struct DriverStats {
    inputs: usize,
    events: u64,
    sorted: Vec<u64>,
    /// Latencies of inputs that emitted at least one event, divided by their event count.
    per_event_sorted: Vec<u64>,
    busy: Duration,
    start_run_ns: u64,
    /// The engine's snapshot with the members registered, right after StartRun, at the end.
    snapshot_bytes: [usize; 3],
}

fn drive(sc: &Scenario) -> DriverStats {
    let mut d = Driver::new(sc);
    let snapshot_registered = d.engine.snapshot().len();
    d.run_to_end(sc.horizon());
    assert_eq!(
        d.engine.run_state(&d.run),
        Some(State::Completed),
        "driver run completes"
    );
    let busy = Duration::from_nanos(d.latencies.iter().sum());
    let mut per_event: Vec<u64> = d
        .latencies
        .iter()
        .zip(&d.events_per_input)
        .filter(|(_, e)| **e > 0)
        .map(|(ns, e)| ns / *e as u64)
        .collect();
    per_event.sort_unstable();
    let mut sorted = d.latencies.clone();
    sorted.sort_unstable();
    DriverStats {
        inputs: d.latencies.len(),
        events: d.events,
        sorted,
        per_event_sorted: per_event,
        busy,
        start_run_ns: d.start_run_ns,
        snapshot_bytes: [
            snapshot_registered,
            d.snapshot_started,
            d.engine.snapshot().len(),
        ],
    }
}

// ------------------------------------------------------------------ sections

struct Config {
    quick: bool,
    reps: usize,
}

fn section_rollout(cfg: &Config, shape: Shape) {
    println!("\n(a) full simulated rollout: {}", shape.label());
    let sc = scenario(shape, Grouping::Mixed);
    let reset = start_rss();
    if !cfg.quick {
        black_box(simulate_timed(&sc)); // warm-up
    }
    let runs: Vec<SimTiming> = (0..cfg.reps).map(|_| simulate_timed(&sc)).collect();
    let first = &runs[0];
    assert_eq!(
        first.completed as usize,
        shape.members(),
        "every member Completed"
    );
    let stats = drive(&sc);
    assert_eq!(
        stats.events, first.events as u64,
        "the bench driver and the simulator see the same events"
    );
    let total = median(runs.iter().map(SimTiming::total).collect());
    let setup = median(runs.iter().map(|r| r.setup).collect());
    let run = median(runs.iter().map(|r| r.run).collect());
    let report = median(runs.iter().map(|r| r.report).collect());
    let teardown = median(runs.iter().map(|r| r.teardown).collect());
    let ev = first.events as f64;
    println!("  runs: {} (median; warm-up run excluded)", runs.len());
    println!("  {:<50} {:>14}", "metric", "value");
    println!("  {:<50} {:>14}", "total wall time (simulate)", ms(total));
    println!(
        "  {:<50} {:>14}",
        "  setup (Simulation::new: catalog, members, run)",
        ms(setup)
    );
    println!("  {:<50} {:>14}", "  run_to_end", ms(run));
    println!("  {:<50} {:>14}", "  report (status tree)", ms(report));
    println!(
        "  {:<50} {:>14}",
        "  teardown (drop engine, fleet, timeline)",
        ms(teardown)
    );
    println!("  {:<50} {:>14}", "engine events (timeline)", first.events);
    println!("  {:<50} {:>14}", "engine inputs", stats.inputs);
    println!(
        "  {:<50} {:>14}",
        "run_to_end per event",
        us(run.as_nanos() as f64 / ev)
    );
    println!(
        "  {:<50} {:>14}",
        "total per event",
        us(total.as_nanos() as f64 / ev)
    );
    println!("  {:<50} {:>14}", "peak RSS", rss(reset));

    println!(
        "\n(b) per-input latency (handle_input + drain), {} inputs, {} events",
        stats.inputs, stats.events
    );
    let s = &stats.sorted;
    let pe = &stats.per_event_sorted;
    println!(
        "  {:<30} {:>10} {:>10} {:>10} {:>12}",
        "", "p50", "p90", "p99", "max"
    );
    println!(
        "  {:<30} {:>10} {:>10} {:>10} {:>12}",
        "per input",
        us(percentile(s, 0.5) as f64),
        us(percentile(s, 0.9) as f64),
        us(percentile(s, 0.99) as f64),
        us(*s.last().unwrap() as f64)
    );
    println!(
        "  {:<30} {:>10} {:>10} {:>10} {:>12}",
        "per event (inputs with events)",
        us(percentile(pe, 0.5) as f64),
        us(percentile(pe, 0.9) as f64),
        us(percentile(pe, 0.99) as f64),
        us(*pe.last().unwrap() as f64)
    );
    println!(
        "  engine busy time {} = {} per event; StartRun input (builds the run tree) {}",
        ms(stats.busy),
        us(stats.busy.as_nanos() as f64 / stats.events as f64),
        us(stats.start_run_ns as f64)
    );
    let members = shape.members() as f64;
    let per_member = stats.snapshot_bytes.map(|b| b as f64 / members);
    println!(
        "  engine state (Engine::snapshot, JSON) per member: {:.0} B registered, {:.0} B once \
         the run started, {:.0} B at the end",
        per_member[0], per_member[1], per_member[2]
    );
}

fn section_scaling(cfg: &Config, shapes: &[Shape]) {
    println!("\n(c) scaling: the same rollout at several fleet sizes (median of runs)");
    println!(
        "  (per-input work depends on the groups per stage, at most 50, not on the fleet: \
         compare rows with the same group count)"
    );
    println!(
        "  {:<42} {:>5} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>17}",
        "fleet",
        "runs",
        "events",
        "inputs",
        "total",
        "run_to_end",
        "run/event",
        "p50 input",
        "p99 input",
        "p50 event",
        "peak RSS"
    );
    for &shape in shapes {
        let sc = scenario(shape, Grouping::Mixed);
        let reset = start_rss();
        let reps = if cfg.quick {
            1
        } else if shape.members() > 10_000 {
            cfg.reps.clamp(5, 5)
        } else {
            cfg.reps
        };
        if !cfg.quick {
            black_box(simulate_timed(&sc));
        }
        let runs: Vec<SimTiming> = (0..reps).map(|_| simulate_timed(&sc)).collect();
        let stats = drive(&sc);
        let total = median(runs.iter().map(SimTiming::total).collect());
        let run = median(runs.iter().map(|r| r.run).collect());
        let events = runs[0].events;
        println!(
            "  {:<42} {:>5} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>17}",
            shape.label(),
            reps,
            events,
            stats.inputs,
            ms(total),
            ms(run),
            us(run.as_nanos() as f64 / events as f64),
            us(percentile(&stats.sorted, 0.5) as f64),
            us(percentile(&stats.sorted, 0.99) as f64),
            us(percentile(&stats.per_event_sorted, 0.5) as f64),
            rss(reset)
        );
    }
}

fn section_plan(cfg: &Config, shape: Shape) {
    let groups = shape.stages * shape.groups;
    println!(
        "\n(d) plan: {} members against {groups} label-selector groups ({} stages x {}, e.g. `{}`)",
        shape.members(),
        shape.stages,
        shape.groups,
        selector(17 % shape.stages, 3 % shape.groups)
    );
    let sc = scenario(shape, Grouping::Selectors);
    let members: Vec<Member> = sc.members.iter().map(|m| m.member()).collect();
    let refs: Vec<&Member> = members.iter().collect();
    let spec = sc.run_spec().expect("a run");
    let strategy = sc.strategy.clone().expect("strategy");
    let catalog = Catalog::new(sc.catalog());
    let reset = start_rss();
    let reps = if cfg.quick { 1 } else { cfg.reps.max(9) };
    let time = |f: &dyn Fn()| -> Duration {
        if !cfg.quick {
            f();
        }
        median(
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed()
                })
                .collect(),
        )
    };
    let p = waverun_core::plan::plan(&spec, &strategy, &refs, &catalog, sc.start).expect("plan");
    assert_eq!(p.members_to_upgrade as usize, shape.members());
    assert!(p.unassigned.is_empty());
    let plan_t = time(&|| {
        black_box(
            waverun_core::plan::plan(&spec, &strategy, &refs, &catalog, sc.start).expect("plan"),
        );
    });
    let assign_t = time(&|| {
        black_box(waverun_core::plan::assign(&refs, &strategy).expect("assign"));
    });
    // The same through the engine (collects the fleet from the engine first).
    let mut engine = Engine::new(sc.start);
    for (_, cmd) in sc.setup_commands() {
        engine
            .handle_input(sc.start, Input::Command(cmd))
            .expect("setup");
    }
    let engine_t = time(&|| {
        black_box(engine.plan(&spec.name).expect("plan"));
    });
    println!("  {:<50} {:>14}", "metric (median of runs)", "value");
    println!("  {:<50} {:>14}", "runs", reps);
    println!("  {:<50} {:>14}", "plan::plan", ms(plan_t));
    println!("  {:<50} {:>14}", "  of which plan::assign", ms(assign_t));
    println!("  {:<50} {:>14}", "Engine::plan", ms(engine_t));
    println!("  {:<50} {:>14}", "peak RSS", rss(reset));
}

fn section_gates(cfg: &Config, stages: usize) {
    println!(
        "\n(e) {stages} stages x 1 group x 1 member, two auto-approved Approval gates per stage \
         (one before, one after) vs none (median of runs)"
    );
    println!(
        "  {:<28} {:>5} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>17}",
        "case",
        "runs",
        "events",
        "total",
        "setup",
        "run_to_end",
        "report",
        "run/event",
        "plan",
        "peak RSS"
    );
    for gates in [2, 0] {
        let sc = gated_stages(stages, gates);
        let reset = start_rss();
        let reps = if cfg.quick { 1 } else { cfg.reps.min(5) };
        if !cfg.quick {
            black_box(simulate_timed(&sc));
        }
        let runs: Vec<SimTiming> = (0..reps).map(|_| simulate_timed(&sc)).collect();
        assert_eq!(runs[0].completed as usize, stages, "every member Completed");
        // The plan preview of the same run through the engine.
        let mut engine = Engine::new(sc.start);
        for (_, cmd) in sc.setup_commands() {
            engine
                .handle_input(sc.start, Input::Command(cmd))
                .expect("setup");
        }
        let plan = median(
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    black_box(engine.plan(sc.run_name().unwrap()).expect("plan"));
                    t.elapsed()
                })
                .collect(),
        );
        let run = median(runs.iter().map(|r| r.run).collect());
        let events = runs[0].events;
        println!(
            "  {:<28} {:>5} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>17}",
            format!("{gates} gates per stage"),
            reps,
            events,
            ms(median(runs.iter().map(SimTiming::total).collect())),
            ms(median(runs.iter().map(|r| r.setup).collect())),
            ms(run),
            ms(median(runs.iter().map(|r| r.report).collect())),
            us(run.as_nanos() as f64 / events as f64),
            ms(plan),
            rss(reset)
        );
    }
}

/// `STAGESxGROUPSxMEMBERS`, e.g. `20x50x10`.
fn parse_shape(text: &str) -> Shape {
    let n: Vec<usize> = text
        .split('x')
        .map(|n| n.parse().expect("--shape=STAGESxGROUPSxMEMBERS"))
        .collect();
    assert!(n.len() == 3, "--shape=STAGESxGROUPSxMEMBERS");
    Shape {
        stages: n[0],
        groups: n[1],
        per_group: n[2],
    }
}

const SECTIONS: [&str; 4] = ["rollout", "scaling", "plan", "gates"];

fn main() {
    // `cargo bench` passes `--bench`; unknown arguments are ignored.
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only=rollout|scaling|plan|gates` runs one section (for profiling).
    let only = args
        .iter()
        .find_map(|a| a.strip_prefix("--only=").map(str::to_string));
    if let Some(o) = &only {
        assert!(
            SECTIONS.contains(&o.as_str()),
            "--only=rollout|scaling|plan|gates"
        );
    }
    let want = |s: &str| only.as_deref().is_none_or(|o| o == s);
    // Internal: set on the per-section child processes.
    let child = args.iter().any(|a| a == "--child");
    // `--shape=STAGESxGROUPSxMEMBERS` replaces the (a)/(b) fleet (e.g. `--shape=20x50x10`).
    let shape_arg = args
        .iter()
        .find_map(|a| a.strip_prefix("--shape="))
        .map(parse_shape);
    // `--emit-scenario=PATH` writes the 10,000-member scenario, or `--shape`'s (JSON, which
    // `waverun simulate` reads), and exits: for profiling the CLI, or diffing reports across
    // engine changes. The issue's 100,000-member fleet: `--shape=100x50x20`.
    if let Some(path) = args.iter().find_map(|a| a.strip_prefix("--emit-scenario=")) {
        let sc = scenario(shape_arg.unwrap_or(Shape::FLEET_10K), Grouping::Mixed);
        let text = serde_json::to_string(&sc).expect("scenario serialises");
        std::fs::write(path, text).expect("write scenario");
        return;
    }
    let cfg = Config {
        quick,
        reps: if quick { 1 } else { 7 },
    };
    if !child {
        println!(
            "waverun rollout benchmark ({} mode, {} build)",
            if quick { "quick" } else { "full" },
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "optimised"
            }
        );
    }
    // Without `--only`, each section runs in a child process of its own, so that its peak RSS
    // is its own (the allocator keeps what earlier sections freed).
    if only.is_none() && !child {
        let exe = std::env::current_exe().expect("own path");
        for section in SECTIONS {
            let forwarded = args[1..].iter().filter(|a| {
                *a == "--quick" || a.starts_with("--shape=") || a.starts_with("--gated-stages=")
            });
            let status = std::process::Command::new(&exe)
                .arg(format!("--only={section}"))
                .arg("--child")
                .args(forwarded)
                .status()
                .expect("start a section process");
            assert!(status.success(), "section {section} failed: {status}");
        }
        println!(
            "\ntargets: rollout <= 1 s, per-event p50 <= 5 µs, plan <= 50 ms (10,000 members), \
             10,000 gated stages <= 1 s"
        );
        return;
    }
    let shape = |members_per_group, groups| Shape {
        stages: 20,
        groups,
        per_group: members_per_group,
    };
    let (rollout, scaling, plan) = if quick {
        (shape(10, 5), vec![shape(5, 5), shape(10, 5)], shape(10, 5))
    } else {
        (
            shape(10, 50),
            vec![
                shape(10, 5),
                shape(1, 50),
                shape(10, 50),
                shape(20, 50),
                // The issue's large fleets: 50,000 and 100,000 members, 50 groups per stage.
                Shape {
                    stages: 50,
                    groups: 50,
                    per_group: 20,
                },
                Shape {
                    stages: 100,
                    groups: 50,
                    per_group: 20,
                },
            ],
            shape(10, 50),
        )
    };
    let rollout = shape_arg.unwrap_or(rollout);
    if want("rollout") {
        section_rollout(&cfg, rollout);
    }
    if want("scaling") {
        section_scaling(&cfg, &scaling);
    }
    if want("plan") {
        section_plan(&cfg, plan);
    }
    if want("gates") {
        // `--gated-stages=N` replaces the (e) stage count (e.g. to check that it scales linearly).
        let stages = match args.iter().find_map(|a| a.strip_prefix("--gated-stages=")) {
            Some(n) => n.parse().expect("--gated-stages=N"),
            None if quick => 500,
            None => 10_000,
        };
        section_gates(&cfg, stages);
    }
}
