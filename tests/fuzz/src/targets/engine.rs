//! `engine`: a byte-driven generator of inputs for one `Engine`: operator commands (members,
//! strategies, catalog, freezes, runs and their lifecycle, skips, gates, retry runs),
//! observations (upgrade results for known and unknown operations, observed members,
//! releases), time advances with `Input::Timeout` (also to the far future and back), and
//! snapshot/restore swaps. Every byte read past the end is 0, so every input is a valid
//! program; the first entry of every choice is the common case.
//!
//! Checks after every input (outputs drained): no panic; the engine's clock is the latest `now`
//! it was given; every output serialises; events are in time order and not in the future;
//! operation ids are `{run}/{member}`, an operation is started at most once while in flight and
//! a member at most once per run; the engine's operations in flight are exactly those started
//! and not yet answered, and each run's count adds up to them; after a `Timeout` no wakeup is
//! due; `run_status`, `run_state` and `plan` of every run work and serialise; and
//! `snapshot()` → `Engine::restore` → `snapshot()` is byte-identical. (The last two — whole
//! serialisations of the engine — run after each of the first 16 inputs of a stream, then after
//! every eighth and at the end.)

use crate::rng::Rng;
use crate::runner::feature;
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use waverun_core::{
    Command, Engine, Error, Event, Fact, HostCommand, Input, Observation, Output, Timestamp,
};

/// Most operations one input drives.
pub const MAX_OPS: usize = 200;

/// Byte values with a meaning (none: the input is read as numbers).
pub const DICT: &[&str] = &["\u{0}", "\u{1}", "\u{7f}", "\u{ff}"];

thread_local! {
    static EXPLAIN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static UNPARSED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    static TRACE: std::cell::RefCell<Option<Trace>> = const { std::cell::RefCell::new(None) };
}

/// A digest of everything an engine showed the outside for one input stream: each input with
/// its result, every output, the next wakeup, and (at the full checks) every run's status and
/// plan. Two engines with the same trace digest behaved the same to every host.
struct Trace {
    /// FNV-1a 64 over the lines.
    digest: u64,
    lines: u64,
    /// The lines themselves, when asked for ([`trace_text`]).
    text: Option<String>,
}

fn trace(line: &str) {
    TRACE.with(|t| {
        if let Some(t) = t.borrow_mut().as_mut() {
            for b in line.bytes().chain(std::iter::once(b'\n')) {
                t.digest ^= u64::from(b);
                t.digest = t.digest.wrapping_mul(0x0000_0100_0000_01B3);
            }
            t.lines += 1;
            if let Some(text) = &mut t.text {
                text.push_str(line);
                text.push('\n');
            }
        }
    });
}

/// Runs one input (as [`run`]) and returns the digest of what the engine showed, with the
/// number of lines it covers, as `"{digest:016x} {lines}"`.
pub fn trace_digest(input: &[u8]) -> String {
    let t = traced(input, false);
    format!("{:016x} {}", t.digest, t.lines)
}

/// The lines [`trace_digest`] digests, to compare two engines' traces line by line.
pub fn trace_text(input: &[u8]) -> String {
    traced(input, true).text.unwrap_or_default()
}

fn traced(input: &[u8], text: bool) -> Trace {
    TRACE.with(|t| {
        *t.borrow_mut() = Some(Trace {
            digest: 0xCBF2_9CE4_8422_2325,
            lines: 0,
            text: text.then(String::new),
        })
    });
    run(input);
    TRACE.with(|t| t.borrow_mut().take()).expect("tracing")
}

fn unparsed(e: &serde_json::Error) {
    feature("unparsed", &e.to_string());
    UNPARSED.with(|u| {
        let mut u = u.borrow_mut();
        if u.len() < 1000 {
            u.push(e.to_string());
        }
    });
}

/// Prints every input the bytes decode to (and its result) on stdout while `on`: what
/// `waverun-fuzz --explain FILE --target engine` shows.
pub fn set_explain(on: bool) {
    EXPLAIN.with(|e| e.set(on));
}

/// How many generated commands and observations did not deserialise on this thread (a
/// harness bug: the generator's JSON does not match the engine's types), with examples.
pub fn unparsed_examples() -> Vec<String> {
    UNPARSED.with(|u| u.borrow().clone())
}

/// Reads choices from the input bytes; past the end every byte is 0.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
    /// Usually one of `common`; one byte value in eight picks one of `odd` instead.
    fn pick2<T: Copy>(&mut self, common: &[T], odd: &[T]) -> T {
        let b = self.byte() as usize;
        if b % 8 == 7 && !odd.is_empty() {
            odd[(b / 8) % odd.len()]
        } else {
            common[b % common.len()]
        }
    }
    /// True for one byte value in `n` (the 0 byte is false).
    fn one_in(&mut self, n: u8) -> bool {
        self.byte() % n == n - 1
    }
}

const MEMBERS: &[&str] = &["m0", "m1", "m2", "m3", "m4", "m5"];
const GROUPS: &[&str] = &["g0", "g1", "g2", "g3"];
const STAGES: &[&str] = &["s0", "s1", "s2"];
const RUNS: &[&str] = &["r0", "r1", "r2"];
const STRATEGIES: &[&str] = &["st0", "st1"];
const REGIONS: &[&str] = &["eastus", "westeurope", "japaneast"];
const VERSIONS: &[&str] = &["1.30.4", "1.30.9", "1.31.0", "1.30.4"];
const ODD_VERSIONS: &[&str] = &[
    "1.31.2",
    "1.32.1",
    "1.29.8",
    "1.28.0",
    "2.0.0",
    "1.31",
    "1.30.4-rc1",
];
const TARGETS: &[&str] = &["1.31.2", "1.31.2", "1.32.1"];
const ODD_TARGETS: &[&str] = &["1.30.4", "1.31.0", "1.29.8", "9.99.99"];
const IMAGES: &[&str] = &[
    "AKSUbuntu-2204gen2containerd-202411.03.0",
    "AKSUbuntu-2204gen2containerd-202410.01.0",
    "AKSUbuntu-2204gen2containerd-202412.05.0",
    "AKSWindows-2022-containerd-20348.2849.241105",
    "AKSWindows-2022-containerd-20348.2966.241210",
    "bad",
];
const SELECTORS: &[&str] = &[
    "env=dev",
    "env=prod",
    "env in (dev,prod)",
    "tier!=db",
    "!tier",
    "env",
    "env notin (dev)",
    "tier=web,env=prod",
];
const LIMITS: &[&str] = &["1", "2", "50%", "3", "100%", "25%"];
const ODD_LIMITS: &[&str] = &[
    "0",
    "101%",
    "0%",
    "-1",
    "x",
    "18446744073709551615",
    "4294967296",
    "1%",
];
const FAILURES: &[&str] = &["0", "1", "50%", "100%", "2"];
const ODD_FAILURES: &[&str] = &["-1", "101%", "4294967295", "x"];
const WAITS: &[u64] = &[60, 3600, 86_400, 604_800, 1];
const ODD_WAITS: &[u64] = &[
    0,
    604_801,
    4_294_967_295,
    9_223_372_036_854_775_807,
    u64::MAX,
];
const TIMES: &[&str] = &["09:00", "00:00", "23:59", "12:30"];
const ODD_TIMES: &[&str] = &["24:00", "9:00", "23:60", ""];
const OFFSETS: &[&str] = &["+00:00", "+01:00", "-14:00", "+14:00", "+05:30"];
const ODD_OFFSETS: &[&str] = &["+14:01", "bogus", "-00:00", "+1:00"];
const DATES: &[&str] = &["2026-12-07", "2026-12-24", "2027-01-01", "2026-12-06"];
const ODD_DATES: &[&str] = &[
    "9999-12-31",
    "0001-01-01",
    "2026-02-30",
    "+262142-12-31",
    "2026-12-07T00:00:00Z",
];
const DAYS: &[&str] = &[
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const WEEKS: &[&str] = &["First", "Second", "Third", "Fourth", "Last"];

fn start() -> Timestamp {
    DateTime::parse_from_rfc3339("2026-12-07T00:00:00Z")
        .expect("a valid start")
        .with_timezone(&Utc)
}

fn shift(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add_signed(d).unwrap_or(if d > Duration::zero() {
        DateTime::<Utc>::MAX_UTC
    } else {
        DateTime::<Utc>::MIN_UTC
    })
}

/// A time around `now`, sometimes at the edges of what chrono can hold.
fn time(r: &mut Reader, now: Timestamp) -> Timestamp {
    match r.below(16) {
        0 => now,
        1 => shift(now, Duration::hours(1)),
        2 => shift(now, Duration::days(1)),
        3 => shift(now, Duration::days(7)),
        4 => shift(now, Duration::days(30)),
        5 => shift(now, Duration::minutes(30)),
        6 => shift(now, Duration::hours(-1)),
        7 => shift(now, Duration::days(-7)),
        8 => shift(now, Duration::days(366)),
        9 => shift(now, Duration::seconds(1)),
        10 => DateTime::<Utc>::MAX_UTC,
        11 => DateTime::<Utc>::MIN_UTC,
        12 => shift(DateTime::<Utc>::MAX_UTC, Duration::days(-1)),
        13 => DateTime::parse_from_rfc3339("9999-12-31T23:59:59Z")
            .expect("valid")
            .with_timezone(&Utc),
        14 => DateTime::UNIX_EPOCH,
        _ => shift(now, Duration::days(3650)),
    }
}

/// A timestamp as a command carries it. Documents hold years 1970–9999 only (spec section 10),
/// so times beyond are clamped here; the engine still meets the extremes as `now`.
fn ts(t: Timestamp) -> Value {
    let last = DateTime::parse_from_rfc3339("9999-12-31T23:59:59Z")
        .expect("valid")
        .with_timezone(&Utc);
    let t = t.clamp(DateTime::UNIX_EPOCH, last);
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn window(r: &mut Reader) -> Value {
    let interval = r.pick2(&[1u32, 2, 3], &[0, 4, 6, 7, 8, u32::MAX]);
    let schedule = match r.below(4) {
        0 => {
            json!({"weekly": {"intervalWeeks": interval.clamp(1, 4) + u32::from(r.one_in(8)) * 10, "dayOfWeek": r.pick(DAYS)}})
        }
        1 => json!({"daily": {"intervalDays": interval}}),
        2 => {
            json!({"absoluteMonthly": {"intervalMonths": interval.clamp(1, 6), "dayOfMonth": r.pick2(&[1u32, 15, 28, 29, 30, 31], &[0, 32])}})
        }
        _ => {
            json!({"relativeMonthly": {"intervalMonths": interval.clamp(1, 6), "dayOfWeek": r.pick(DAYS), "weekIndex": r.pick(WEEKS)}})
        }
    };
    let mut w = json!({
        "schedule": schedule,
        "durationHours": r.pick2(&[4u32, 8, 24, 6], &[3, 25, 0, u32::MAX]),
        "startTime": r.pick2(TIMES, ODD_TIMES),
    });
    if r.one_in(2) {
        w["utcOffset"] = json!(r.pick2(OFFSETS, ODD_OFFSETS));
    }
    if r.one_in(3) {
        w["startDate"] = json!(r.pick2(DATES, ODD_DATES));
    }
    if r.one_in(3) {
        let a = r.pick2(DATES, ODD_DATES);
        let b = r.pick2(DATES, ODD_DATES);
        w["notAllowedDates"] = json!([{"start": a, "end": b}]);
    }
    w
}

fn member(r: &mut Reader) -> Value {
    let name = r.pick(MEMBERS);
    let mut m = json!({
        "name": name,
        "region": r.pick(REGIONS),
        "kubernetesVersion": r.pick2(VERSIONS, ODD_VERSIONS),
    });
    if let Some(g) = r.pick(&[Some("g0"), Some("g1"), None, Some("g2"), Some("g3")]) {
        m["group"] = json!(g);
    }
    let mut labels = serde_json::Map::new();
    if let Some(env) = r.pick(&[Some("dev"), Some("prod"), None]) {
        labels.insert("env".into(), json!(env));
    }
    if let Some(tier) = r.pick(&[None, Some("web"), Some("db")]) {
        labels.insert("tier".into(), json!(tier));
    }
    m["labels"] = Value::Object(labels);
    let pools = r.pick(&[1usize, 2, 0]);
    let mut ps = Vec::new();
    for i in 0..pools {
        let image = r.pick2(&IMAGES[..3], IMAGES);
        let os = if image.starts_with("AKSWindows") {
            "Windows"
        } else {
            "Linux"
        };
        let pool = ["system", "user"][i];
        ps.push(
            json!({"name": pool, "osType": os, "imageVersion": image, "fromSnapshot": r.one_in(8)}),
        );
    }
    m["nodePools"] = json!(ps);
    if r.one_in(3) {
        let mut maint = serde_json::Map::new();
        if r.one_in(2) {
            maint.insert("nodeOS".into(), window(r));
        } else {
            maint.insert("kubernetes".into(), window(r));
        }
        m["maintenance"] = Value::Object(maint);
    }
    if r.one_in(6) {
        m["longTermSupport"] = json!(true);
    }
    m
}

fn gates(r: &mut Reader) -> Value {
    let n = r.pick(&[0usize, 0, 1, 2]);
    let mut out = Vec::new();
    for _ in 0..n {
        if r.one_in(2) {
            let mut cfg = json!({"startDay": r.pick(DAYS), "startTime": r.pick2(TIMES, ODD_TIMES)});
            if r.one_in(2) {
                cfg["utcOffset"] = json!(r.pick2(OFFSETS, ODD_OFFSETS));
            }
            out.push(json!({"type": "ScheduledStart", "scheduledStartConfiguration": cfg}));
        } else {
            let mut g = json!({"type": "Approval"});
            if r.one_in(4) {
                g["displayName"] = json!("x".repeat(r.pick(&[5usize, 100, 101])));
            }
            out.push(g);
        }
    }
    json!(out)
}

fn strategy(r: &mut Reader) -> Value {
    let stages = r.pick(&[1usize, 2, 3, 0]);
    let mut out = Vec::new();
    let mut group_no = 0;
    for &own in &STAGES[..stages] {
        let name = if r.one_in(12) { STAGES[0] } else { own };
        let mut st = json!({"name": name});
        let groups = r.pick(&[1usize, 2, 0, 3]);
        let mut gs = Vec::new();
        for _ in 0..groups {
            let gname = if r.one_in(10) {
                GROUPS[0]
            } else {
                GROUPS[group_no % GROUPS.len()]
            };
            group_no += 1;
            let mut g = json!({"name": gname});
            if r.one_in(3) {
                g["memberSelector"] = json!({"byLabel": r.pick(SELECTORS)});
            }
            if r.one_in(2) {
                g["maxConcurrency"] = json!(r.pick2(LIMITS, ODD_LIMITS));
            }
            if r.one_in(3) {
                g["maxAllowedFailures"] = json!(r.pick2(FAILURES, ODD_FAILURES));
            }
            if r.one_in(3) {
                g["beforeGates"] = gates(r);
            }
            if r.one_in(3) {
                g["afterGates"] = gates(r);
            }
            gs.push(g);
        }
        st["groups"] = json!(gs);
        if r.one_in(4) {
            st["memberSelector"] = json!({"byLabel": r.pick(SELECTORS)});
        }
        if r.one_in(2) {
            st["afterStageWaitInSeconds"] = json!(r.pick2(WAITS, ODD_WAITS));
        }
        if r.one_in(3) {
            st["maxConcurrency"] = json!(r.pick2(LIMITS, ODD_LIMITS));
        }
        if r.one_in(3) {
            st["maxAllowedFailures"] = json!(r.pick2(FAILURES, ODD_FAILURES));
        }
        if r.one_in(3) {
            st["beforeGates"] = gates(r);
        }
        if r.one_in(3) {
            st["afterGates"] = gates(r);
        }
        out.push(st);
    }
    json!({"stages": out})
}

fn run_spec(r: &mut Reader) -> Value {
    let mut spec = json!({"name": r.pick(RUNS)});
    match r.below(6) {
        0..=2 => spec["strategy"] = strategy(r),
        3 => spec["updateStrategyName"] = json!(r.pick(STRATEGIES)),
        4 => {}
        _ => {
            spec["strategy"] = strategy(r);
            spec["updateStrategyName"] = json!(r.pick(STRATEGIES));
        }
    }
    let kind = r.pick(&["Full", "NodeImageOnly", "ControlPlaneOnly"]);
    let mut upgrade = json!({"type": kind});
    if kind != "NodeImageOnly" || r.one_in(6) {
        upgrade["kubernetesVersion"] = json!(r.pick2(TARGETS, ODD_TARGETS));
    }
    let selection = r.pick(&["Latest", "Consistent", "Custom"]);
    let mut sel = json!({"type": selection});
    if selection == "Custom" {
        let n = r.pick(&[1usize, 2, 0]);
        let versions: Vec<Value> = (0..n).map(|_| json!({"version": r.pick(IMAGES)})).collect();
        sel["customNodeImageVersions"] = json!(versions);
    }
    spec["managedClusterUpdate"] = json!({"upgrade": upgrade, "nodeImageSelection": sel});
    spec
}

fn releases(r: &mut Reader, now: Timestamp, versions: &[&str]) -> Value {
    let n = r.pick(&[2usize, 1, 3, 0]);
    let mut out = Vec::new();
    for _ in 0..n {
        let v = r.pick(versions);
        let mut available = serde_json::Map::new();
        let regions = r.pick(&[1usize, 2, 0]);
        for _ in 0..regions {
            let region = r.pick(&["*", "eastus", "westeurope", "japaneast"]);
            available.insert(region.into(), ts(time(r, now)));
        }
        out.push(json!({"version": v, "available": available}));
    }
    json!(out)
}

/// What the harness knows, to check the engine against.
struct World {
    engine: Engine,
    now: Timestamp,
    /// Operations started and not answered.
    in_flight: BTreeSet<String>,
    /// Operations started per run since its creation.
    started: BTreeMap<String, BTreeSet<String>>,
    /// Gates seen created: (run, gate id).
    gate_ids: Vec<(String, String)>,
    /// Inputs handled so far.
    inputs: u64,
}

/// Every check runs after each of the first this many inputs of a stream, then after every
/// eighth (and at the end): serialising the whole engine twice per input dominates otherwise.
const FULL_CHECKS: u64 = 16;

impl World {
    fn input(&mut self, tag: &str, now: Timestamp, input: Input) -> Result<(), Error> {
        let before = self.engine.now();
        let answered = match &input {
            Input::Observation(
                Observation::UpgradeSucceeded { operation_id }
                | Observation::UpgradeFailed { operation_id, .. },
            ) => Some(operation_id.clone()),
            _ => None,
        };
        let timeout = matches!(input, Input::Timeout);
        let explain = EXPLAIN.with(|e| e.get());
        if explain {
            let text = serde_json::to_string(&input).unwrap_or_default();
            println!("{} {tag}: {text}", waverun_core::fmt_time(now));
        }
        let text = serde_json::to_string(&input).unwrap_or_default();
        let result = self.engine.handle_input(now, input);
        trace(&format!(
            "{} {tag} {text} -> {}",
            waverun_core::fmt_time(now),
            match &result {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("{}: {}", e.code.as_str(), e.message),
            }
        ));
        if explain {
            if let Err(e) = &result {
                println!("    -> {}: {}", e.code.as_str(), e.message);
            }
        }
        feature(
            "input",
            &format!(
                "{tag} {}",
                result.as_ref().err().map_or("ok", |e| e.code.as_str())
            ),
        );
        if let Err(e) = &result {
            feature(tag, &e.message);
        }
        if let Some(id) = answered {
            self.in_flight.remove(&id);
        }
        self.inputs += 1;
        let full = self.inputs <= FULL_CHECKS || self.inputs.is_multiple_of(8);
        self.check(before, now, timeout, full);
        result
    }

    /// The checks after an input; the expensive ones (serialising every status and plan, the
    /// snapshot round trip) when `full`.
    fn check(&mut self, before: Timestamp, now: Timestamp, timeout: bool, full: bool) {
        let e = &self.engine;
        assert_eq!(
            e.now(),
            before.max(now),
            "the engine's clock is the latest now it was given"
        );
        let now = e.now();
        let mut last: Option<Timestamp> = None;
        let mut new_ops = Vec::new();
        let explain = EXPLAIN.with(|e| e.get());
        while let Some(out) = self.engine.poll_output() {
            if explain {
                match &out {
                    Output::Event(ev) => println!(
                        "    {} {:?} {}{}{}",
                        waverun_core::fmt_time(ev.at),
                        ev.kind(),
                        [ev.stage(), ev.group(), ev.member()]
                            .iter()
                            .flatten()
                            .copied()
                            .collect::<Vec<_>>()
                            .join("/"),
                        ev.reason().map_or(String::new(), |r| format!(" {r:?}")),
                        ev.until().map_or(String::new(), |u| format!(
                            " until {}",
                            waverun_core::fmt_time(u)
                        ))
                    ),
                    Output::Command(HostCommand::StartUpgrade(op)) => {
                        println!("    startUpgrade {}", op.operation_id)
                    }
                    Output::Command(HostCommand::MeasureCheck(req)) => {
                        println!("    measureCheck {}", req.measurement_id)
                    }
                }
            }
            let text = serde_json::to_string(&out)
                .unwrap_or_else(|err| panic!("an output does not serialise: {err}: {out:?}"));
            trace(&text);
            let back: Output = serde_json::from_str(&text)
                .unwrap_or_else(|err| panic!("an output does not read back: {err}: {text}"));
            assert_eq!(back, out, "an output does not round-trip: {text}");
            match out {
                Output::Event(ev) => self.event(&ev, now, &mut last),
                Output::Command(HostCommand::MeasureCheck(req)) => {
                    panic!("the harness's strategies have no health checks: {req:?}")
                }
                Output::Command(HostCommand::StartUpgrade(op)) => {
                    feature("start", &format!("{:?}", op.upgrade_type));
                    let id = op.operation_id.clone();
                    assert_eq!(id, format!("{}/{}", op.run, op.member), "operation id");
                    assert!(
                        self.in_flight.insert(id.clone()),
                        "{id} started again while in flight"
                    );
                    assert!(
                        self.started
                            .entry(op.run.clone())
                            .or_default()
                            .insert(id.clone()),
                        "{id}: member upgraded twice in one run"
                    );
                    new_ops.push(id);
                }
            }
        }
        let e = &self.engine;
        for id in &new_ops {
            assert!(
                e.is_operation_in_flight(id),
                "{id} was started but is not in flight"
            );
        }
        let engine_ops: BTreeSet<String> = e
            .operations_in_flight()
            .map(|(id, _, _)| id.to_string())
            .collect();
        assert_eq!(
            engine_ops.len(),
            e.operations_in_flight_count(),
            "operations_in_flight_count"
        );
        assert_eq!(
            engine_ops, self.in_flight,
            "the operations in flight are those started and not answered"
        );
        trace(&serde_json::to_string(&e.poll_timeout()).expect("a wakeup serialises"));
        if timeout {
            if let Some(w) = e.poll_timeout() {
                assert!(
                    w.at > now,
                    "after a Timeout at {now} a wakeup is still due at {} ({:?})",
                    w.at,
                    w.reason
                );
            }
        }
        let mut counted = 0u64;
        for name in e.run_names() {
            let status = e
                .run_status(name)
                .unwrap_or_else(|err| panic!("run_status({name}): {err:?}"));
            if full {
                trace(&serde_json::to_string(&status).expect("a status serialises"));
            }
            let state = e.run_state(name).expect("a listed run has a state");
            feature("state", &format!("{state:?}"));
            counted += u64::from(
                e.run_in_flight(name)
                    .expect("a listed run has in-flight count"),
            );
            if let Ok(plan) = e.plan(name) {
                if full {
                    trace(&serde_json::to_string(&plan).expect("a plan serialises"));
                }
            }
        }
        assert_eq!(
            counted,
            self.in_flight.len() as u64,
            "runs' in-flight counts add up"
        );
        if !full {
            return;
        }
        let snap = e.snapshot();
        let restored = Engine::restore(&snap)
            .unwrap_or_else(|err| panic!("a snapshot does not restore: {err:?}"));
        assert!(
            restored.snapshot() == snap,
            "snapshot -> restore -> snapshot differs"
        );
    }

    fn event(&mut self, ev: &Event, now: Timestamp, last: &mut Option<Timestamp>) {
        feature("event", &format!("{:?} {:?}", ev.kind(), ev.reason()));
        assert!(
            ev.at <= now,
            "an event at {} after now {now}: {ev:?}",
            ev.at
        );
        if let Some(l) = *last {
            assert!(ev.at >= l, "events out of order: {} after {l}", ev.at);
        }
        *last = Some(ev.at);
        match &ev.fact {
            Fact::GateCreated { gate_id: id, .. } if self.gate_ids.len() < 64 => {
                self.gate_ids.push((ev.run.clone(), id.clone()));
            }
            Fact::RunDeleted => {
                self.started.remove(&ev.run);
            }
            _ => {}
        }
    }

    fn command(&mut self, tag: &str, now: Timestamp, c: Value) {
        match serde_json::from_value::<Command>(c) {
            Ok(c) => {
                let _ = self.input(tag, now, Input::Command(c));
            }
            Err(e) => unparsed(&e),
        }
    }

    fn observe(&mut self, tag: &str, now: Timestamp, o: Value) {
        match serde_json::from_value::<Observation>(o) {
            Ok(o) => {
                let _ = self.input(tag, now, Input::Observation(o));
            }
            Err(e) => unparsed(&e),
        }
    }

    fn step(&mut self, r: &mut Reader) {
        let now = self.now;
        match r.below(32) {
            0 | 1 => {
                let m = member(r);
                self.command(
                    "upsertMember",
                    now,
                    json!({"type": "upsertMember", "member": m}),
                );
            }
            2 => self.command(
                "deleteMember",
                now,
                json!({"type": "deleteMember", "name": r.pick(MEMBERS)}),
            ),
            3 => {
                let s = strategy(r);
                self.command(
                    "upsertStrategy",
                    now,
                    json!({"type": "upsertStrategy", "name": r.pick(STRATEGIES), "strategy": s}),
                );
            }
            4 => self.command(
                "deleteStrategy",
                now,
                json!({"type": "deleteStrategy", "name": r.pick(STRATEGIES)}),
            ),
            5 | 6 => {
                let spec = run_spec(r);
                self.command("createRun", now, json!({"type": "createRun", "run": spec}));
            }
            7 => {
                let spec = run_spec(r);
                self.command("updateRun", now, json!({"type": "updateRun", "run": spec}));
            }
            8 => self.command(
                "deleteRun",
                now,
                json!({"type": "deleteRun", "name": r.pick(RUNS)}),
            ),
            9 | 10 => self.command(
                "startRun",
                now,
                json!({"type": "startRun", "name": r.pick(RUNS)}),
            ),
            11 => self.command(
                "stopRun",
                now,
                json!({"type": "stopRun", "name": r.pick(RUNS)}),
            ),
            12 => {
                let n = r.pick(&[1usize, 2, 0]);
                let targets: Vec<String> = (0..n)
                    .map(|_| match r.below(4) {
                        0 => format!("Member:{}", r.pick(MEMBERS)),
                        1 => format!("Group:{}", r.pick(GROUPS)),
                        2 => format!("Stage:{}", r.pick(STAGES)),
                        _ => format!("AfterStageWait:{}", r.pick(STAGES)),
                    })
                    .collect();
                self.command(
                    "skip",
                    now,
                    json!({"type": "skip", "run": r.pick(RUNS), "targets": targets}),
                );
            }
            13 | 14 => {
                let mut run = r.pick(RUNS).to_string();
                let gate = if !self.gate_ids.is_empty() && !r.one_in(4) {
                    let (gate_run, id) = self.gate_ids[r.below(self.gate_ids.len())].clone();
                    if !r.one_in(8) {
                        run = gate_run;
                    }
                    json!({"id": id})
                } else {
                    let mut g =
                        json!({"stage": r.pick(STAGES), "timing": r.pick(&["Before", "After"])});
                    if r.one_in(2) {
                        g["group"] = json!(r.pick(GROUPS));
                    }
                    g
                };
                self.command(
                    "completeGate",
                    now,
                    json!({"type": "completeGate", "run": run, "gate": gate, "by": "fuzz"}),
                );
            }
            15 => self.command(
                "createRetryRun",
                now,
                json!({"type": "createRetryRun", "name": r.pick(RUNS), "from": r.pick(RUNS)}),
            ),
            16 => {
                let n = r.pick(&[1usize, 0, 2]);
                let freezes: Vec<Value> = (0..n)
                    .map(|i| json!({"name": format!("f{i}"), "start": ts(time(r, now)), "end": ts(time(r, now))}))
                    .collect();
                self.command(
                    "setFreezes",
                    now,
                    json!({"type": "setFreezes", "freezes": freezes}),
                );
            }
            17 => {
                let kubernetes = releases(r, now, TARGETS);
                let images = releases(r, now, IMAGES);
                self.command("setCatalog", now, json!({"type": "setCatalog", "catalog": {"kubernetes": kubernetes, "nodeImages": images}}));
            }
            18 => self.answer_all(),
            19..=22 => {
                let known: Vec<String> = self.in_flight.iter().cloned().collect();
                let id = if !known.is_empty() && !r.one_in(6) {
                    known[r.below(known.len())].clone()
                } else {
                    format!("{}/{}", r.pick(RUNS), r.pick(MEMBERS))
                };
                if r.one_in(3) {
                    self.observe(
                        "upgradeFailed",
                        now,
                        json!({"type": "upgradeFailed", "operationId": id, "message": "fuzz"}),
                    );
                } else {
                    self.observe(
                        "upgradeSucceeded",
                        now,
                        json!({"type": "upgradeSucceeded", "operationId": id}),
                    );
                }
            }
            23 => {
                let o = match r.below(3) {
                    0 => {
                        json!({"type": "memberObserved", "name": r.pick(MEMBERS), "kubernetesVersion": r.pick2(TARGETS, VERSIONS),
                                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": r.pick(IMAGES)}]})
                    }
                    1 => {
                        json!({"type": "kubernetesReleased", "version": r.pick(TARGETS), "region": r.pick(&["*", "eastus", "westeurope"]), "since": ts(time(r, now))})
                    }
                    _ => {
                        json!({"type": "nodeImageReleased", "version": r.pick(IMAGES), "region": r.pick(&["*", "eastus", "japaneast"]), "since": ts(time(r, now))})
                    }
                };
                self.observe("observed", now, o);
            }
            24..=28 => {
                let next = self.engine.poll_timeout().map(|w| w.at);
                let to = match (r.below(12), next) {
                    (0..=2, Some(t)) => t,
                    (3, Some(t)) => shift(t, Duration::seconds(-1)),
                    (4, _) => shift(now, Duration::minutes(30)),
                    (5, _) => shift(now, Duration::hours(1)),
                    (6, _) => shift(now, Duration::days(1)),
                    (7, _) => shift(now, Duration::days(8)),
                    (8, _) => shift(now, Duration::days(366)),
                    (9, _) => shift(now, Duration::days(365 * 1000)),
                    (10, _) => shift(
                        DateTime::<Utc>::MAX_UTC,
                        Duration::days(-r.pick(&[1i64, 7, 30, 366])),
                    ),
                    _ => shift(now, Duration::seconds(1)),
                };
                self.now = to.max(now);
                let _ = self.input("timeout", self.now, Input::Timeout);
            }
            29 => {
                let snap = self.engine.snapshot();
                self.engine =
                    Engine::restore(&snap).unwrap_or_else(|err| panic!("restore: {err:?}"));
            }
            31 => self.setup(r),
            _ => {
                // An input with an earlier `now`: it counts as the engine's current time.
                let back = shift(now, Duration::hours(-r.pick(&[1i64, 24, 1_000_000])));
                let _ = self.input("past", back, Input::Timeout);
            }
        }
    }

    /// A fleet and a started run in one go (most inputs begin with it): a catalog with the
    /// targets available everywhere, 2 to 6 members in two groups, one of a few strategies,
    /// a run `r0`, started.
    fn setup(&mut self, r: &mut Reader) {
        let now = self.now;
        let shape = r.byte();
        let later = ts(if shape & 0x40 != 0 {
            shift(now, Duration::hours(2))
        } else {
            now
        });
        let everywhere = |v: &str, t: &Value| json!({"version": v, "available": {"*": t}});
        let catalog = json!({
            "kubernetes": [everywhere("1.31.2", &later), everywhere("1.32.1", &ts(now))],
            "nodeImages": IMAGES[..5].iter().map(|v| everywhere(v, &ts(now))).collect::<Vec<_>>(),
        });
        self.command(
            "setup",
            now,
            json!({"type": "setCatalog", "catalog": catalog}),
        );
        let n = 2 + (shape as usize) % 5;
        for i in 0..n {
            let mut m = json!({
                "name": MEMBERS[i],
                "group": GROUPS[i % 2],
                "labels": {"env": if i % 2 == 0 { "dev" } else { "prod" }},
                "region": REGIONS[i % REGIONS.len()],
                "kubernetesVersion": "1.30.4",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": IMAGES[1]}],
            });
            if shape & 0x80 != 0 && i % 3 == 1 {
                m["maintenance"] = json!({"kubernetes": {
                    "schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": DAYS[i % 7]}},
                    "durationHours": 8, "startTime": "09:00", "utcOffset": "+01:00"}});
            }
            self.command("setup", now, json!({"type": "upsertMember", "member": m}));
        }
        let wait = r.pick2(WAITS, ODD_WAITS);
        let strategy = match r.below(4) {
            0 | 1 => json!({"stages": [
                {"name": "s0", "groups": [{"name": "g0"}], "afterStageWaitInSeconds": wait},
                {"name": "s1", "beforeGates": [{"type": "Approval"}],
                 "groups": [{"name": "g1", "maxConcurrency": "2", "afterGates": [{"type": "Approval"}]}]}]}),
            2 => json!({"stages": [
                {"name": "s0", "maxConcurrency": "50%", "groups": [
                    {"name": "g2", "memberSelector": {"byLabel": "env=dev"}},
                    {"name": "g3", "memberSelector": {"byLabel": "env in (prod)"}, "maxAllowedFailures": "1",
                     "beforeGates": [{"type": "ScheduledStart", "scheduledStartConfiguration": {"startDay": "Tuesday", "startTime": "09:00"}}]}],
                 "afterStageWaitInSeconds": wait}]}),
            _ => Value::Null,
        };
        let kind = r.pick2(&["Full", "Full", "NodeImageOnly", "ControlPlaneOnly"], &[]);
        let mut upgrade = json!({"type": kind});
        if kind != "NodeImageOnly" {
            upgrade["kubernetesVersion"] = json!("1.31.2");
        }
        let selection = r.pick(&["Latest", "Consistent", "Latest"]);
        let mut spec = json!({"name": "r0", "managedClusterUpdate": {"upgrade": upgrade, "nodeImageSelection": {"type": selection}}});
        if !strategy.is_null() {
            spec["strategy"] = strategy;
        }
        self.command("setup", now, json!({"type": "createRun", "run": spec}));
        self.command("setup", now, json!({"type": "startRun", "name": "r0"}));
    }

    /// Answers every operation in flight with success.
    fn answer_all(&mut self) {
        let ops: Vec<String> = self.in_flight.iter().cloned().collect();
        for id in ops {
            let obs = Observation::UpgradeSucceeded { operation_id: id };
            let _ = self.input("settle", self.now, Input::Observation(obs));
        }
    }

    /// Answers everything in flight, approves every gate seen, and follows the wakeups, a
    /// bounded number of times.
    fn settle(&mut self) {
        for _ in 0..64 {
            self.answer_all();
            for (run, id) in std::mem::take(&mut self.gate_ids) {
                let c =
                    json!({"type": "completeGate", "run": run, "gate": {"id": id}, "by": "settle"});
                self.command("settle", self.now, c);
            }
            match self.engine.poll_timeout() {
                Some(w) => {
                    self.now = w.at.max(self.now);
                    let _ = self.input("settle", self.now, Input::Timeout);
                }
                None if self.in_flight.is_empty() => return,
                None => {}
            }
        }
    }
}

/// Runs one input.
pub fn run(input: &[u8]) {
    let mut r = Reader {
        data: input,
        pos: 0,
    };
    // The first byte picks the start: usually the corpus's date, sometimes near the end of time.
    let first = r.byte();
    let now = match first % 8 {
        6 => DateTime::parse_from_rfc3339("9999-12-31T00:00:00Z")
            .expect("valid")
            .with_timezone(&Utc),
        7 => shift(DateTime::<Utc>::MAX_UTC, Duration::days(-30)),
        _ => start(),
    };
    let mut w = World {
        engine: Engine::new(now),
        now,
        in_flight: BTreeSet::new(),
        started: BTreeMap::new(),
        gate_ids: Vec::new(),
        inputs: 0,
    };
    if first & 0x10 == 0 {
        w.setup(&mut r);
    }
    let mut ops = 0;
    while !r.done() && ops < MAX_OPS {
        w.step(&mut r);
        ops += 1;
    }
    w.settle();
    let now = w.engine.now();
    w.check(now, now, false, true);
}

/// Random bytes (most of them start with the standard setup, see [`run`]).
pub fn generate(rng: &mut Rng) -> Vec<u8> {
    let n = rng.range(4, 300);
    (0..n).map(|_| rng.next_u64() as u8).collect()
}
