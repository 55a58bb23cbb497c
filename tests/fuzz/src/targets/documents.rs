//! `documents`: bytes as YAML and as JSON through `waverun_host::parse_text` into a
//! `Scenario`, an `UpdateStrategy` (bare, `{strategy}` or `{properties: {strategy}}`, as
//! `waverun validate` reads it) and an `UpdateRunSpec`, and through the core's own
//! `Scenario::from_json`.
//!
//! Checks, beyond "no panic": whatever parses serialises and reads back equal (JSON round
//! trip); validation runs; a valid scenario that is small enough (at most 50 members, a
//! horizon within 400 days, ...) is simulated step by step (at most 20,000 steps), its
//! timeline is in time order and within the horizon, its summary counts every member once, and
//! the report serialises and renders as text.

use crate::rng::Rng;
use crate::runner::feature;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Debug;
use waverun_core::sim::{render_text, Scenario, Simulation};
use waverun_core::{validate, Error, UpdateRunSpec, UpdateStrategy};
use waverun_host::parse_text;

/// The most members a scenario may have to be simulated.
pub const MAX_SIM_MEMBERS: usize = 50;
/// The longest horizon simulated, in days.
pub const MAX_SIM_DAYS: i64 = 400;
/// Simulation steps at most.
pub const MAX_SIM_STEPS: usize = 20_000;

/// Words of the document formats.
pub const DICT: &[&str] = &[
    "start: ",
    "until: ",
    "members:\n",
    "- name: m",
    "region: eastus",
    "kubernetesVersion: ",
    "nodePools:",
    "behavior: {upgradeMinutes: ",
    "failAttempts: ",
    "jitterMinutes: ",
    "strategy:",
    "stages:",
    "groups:",
    "afterStageWaitInSeconds: ",
    "maxConcurrency: ",
    "maxAllowedFailures: ",
    "beforeGates: [{type: Approval}]",
    "scheduledStartConfiguration: {startDay: Monday, startTime: '09:00'}",
    "memberSelector: {byLabel: ",
    "maintenance:",
    "schedule: {weekly: {intervalWeeks: 1, dayOfWeek: Monday}}",
    "durationHours: ",
    "notAllowedDates: [{start: 2026-12-24, end: 2026-12-26}]",
    "releases:",
    "available: {'*': ",
    "freezes: [{name: f, start: ",
    "actions:",
    "- {at: ",
    "do: start",
    "do: skip",
    "targets: [",
    "autoApprove: true",
    "\"members\":",
    "\"upgradeMinutes\":",
    "\"until\":",
    "\"afterStageWaitInSeconds\":",
];

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(what: &str, x: &T) {
    let json = serde_json::to_string(x)
        .unwrap_or_else(|e| panic!("a parsed {what} does not serialise: {e}"));
    let back: T = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("a {what} does not read back from its own JSON: {e}\n{json}"));
    assert_eq!(&back, x, "{what} JSON round trip");
}

/// What kind of parse error a message is: the serde or YAML message without the path before it
/// (whose map keys are the input's own); `feature` drops the quoted values.
fn error_kind(message: &str) -> String {
    const STARTS: &[&str] = &[
        "unknown field",
        "unknown variant",
        "invalid type",
        "invalid value",
        "invalid length",
        "missing field",
        "duplicate field",
        "premature end",
        "trailing",
        "error:",
        "not valid JSON",
        "not valid YAML",
        "expected",
        "EOF",
    ];
    let line = message.lines().next().unwrap_or("");
    let start = STARTS
        .iter()
        .filter_map(|p| line.find(p))
        .min()
        .unwrap_or(0);
    line[start..].to_string()
}

fn error_feature(tag: &str, e: &Error) {
    feature(tag, e.code.as_str());
    for f in e.fields.iter().take(8) {
        // The field name (not the whole path: map keys in it are the input's own) and the rule.
        let field = f.path.rsplit(['.', '[']).next().unwrap_or("");
        let field = if field.ends_with(']') { "[]" } else { field };
        feature(tag, &format!("{field}: {}", f.message));
    }
}

/// Whether a valid scenario is small enough to simulate (panics of `horizon` itself propagate:
/// they are findings).
pub fn small_enough(sc: &Scenario) -> bool {
    let pools: usize = sc.members.iter().map(|m| m.node_pools.len()).sum();
    let releases = sc
        .releases
        .as_ref()
        .map_or(0, |r| r.kubernetes.len() + r.node_images.len());
    if sc.members.len() > MAX_SIM_MEMBERS
        || pools > 4 * MAX_SIM_MEMBERS
        || sc.actions.len() > 200
        || sc.freezes.len() > 100
        || releases > 400
    {
        return false;
    }
    let horizon = sc.horizon();
    horizon.signed_duration_since(sc.start).num_days() <= MAX_SIM_DAYS
}

fn simulate(sc: &Scenario) {
    let mut sim = match Simulation::new(sc) {
        Ok(s) => s,
        Err(e) => {
            error_feature("setup", &e);
            return;
        }
    };
    let horizon = sc.horizon();
    let mut steps = 0;
    while steps < MAX_SIM_STEPS && sim.step() {
        steps += 1;
    }
    let report = sim.report();
    let mut last = sc.start;
    for ev in &report.timeline {
        assert!(
            ev.at >= last,
            "timeline out of order: {} after {}",
            ev.at,
            last
        );
        assert!(
            ev.at <= horizon,
            "an event at {} after the horizon {horizon}",
            ev.at
        );
        last = ev.at;
        feature("event", &format!("{:?} {:?}", ev.kind(), ev.reason()));
    }
    let s = &report.summary;
    let members: usize = report
        .all_runs()
        .iter()
        .flat_map(|r| r.status.stages.iter())
        .flat_map(|st| st.groups.iter())
        .map(|g| g.members.len())
        .sum();
    let counted = s.members_completed + s.members_failed + s.members_skipped + s.members_pending;
    assert_eq!(
        counted as usize, members,
        "the summary counts every member once"
    );
    if let Some(m) = s.makespan_seconds {
        assert!(m >= 0, "negative makespan {m}");
    }
    feature(
        "final",
        &format!("{:?} steps<{}", s.state, steps.next_power_of_two()),
    );
    serde_json::to_string(&report).expect("a report serialises");
    let _ = render_text(&report);
}

fn scenario(sc: Scenario) {
    round_trip("scenario", &sc);
    if let Err(e) = sc.validate() {
        error_feature("scenario", &e);
        return;
    }
    feature("scenario", "valid");
    if small_enough(&sc) {
        simulate(&sc);
    }
}

fn strategy(st: UpdateStrategy) {
    round_trip("strategy", &st);
    match validate::strategy(&st) {
        Ok(()) => feature("strategy", "valid"),
        Err(e) => error_feature("strategy", &e),
    }
}

fn run_spec(r: UpdateRunSpec) {
    round_trip("run spec", &r);
    match validate::run_spec(&r) {
        Ok(()) => feature("run", "valid"),
        Err(e) => error_feature("run", &e),
    }
}

fn parsed<T: DeserializeOwned>(tag: &str, text: &str, json: bool) -> Option<T> {
    match parse_text::<T>(text, json) {
        Ok(x) => Some(x),
        Err(e) => {
            feature(tag, &error_kind(&e));
            None
        }
    }
}

/// Runs one input.
pub fn run(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let text = text.as_ref();
    for json in [true, false] {
        let tag = if json { "json" } else { "yaml" };
        if let Some(sc) = parsed::<Scenario>(tag, text, json) {
            scenario(sc);
        }
        if let Some(st) = parsed::<UpdateStrategy>(tag, text, json) {
            strategy(st);
        }
        if let Some(r) = parsed::<UpdateRunSpec>(tag, text, json) {
            run_spec(r);
        }
        // The wrapped strategy forms `waverun validate` accepts.
        if let Ok(v) = parse_text::<Value>(text, json) {
            let inner = v
                .get("strategy")
                .or_else(|| v.get("properties").and_then(|p| p.get("strategy")));
            if let Some(inner) = inner {
                if let Ok(st) = serde_json::from_value::<UpdateStrategy>(inner.clone()) {
                    strategy(st);
                }
            }
        }
    }
    match Scenario::from_json(text) {
        Ok(sc) => {
            let _ = sc.validate();
        }
        Err(e) => feature("from_json", &error_kind(&e.message)),
    }
}

/// A small scenario from parts (mostly valid).
pub fn generate(rng: &mut Rng) -> Vec<u8> {
    let start = rng.pick(&[
        "2026-12-07T00:00:00Z",
        "2026-12-07T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "+262142-01-01T00:00:00Z",
        "1970-01-01T00:00:00Z",
    ]);
    let n = rng.range(1, 4);
    let mut s = format!("start: '{start}'\n");
    if rng.chance(1, 3) {
        s.push_str(&format!(
            "until: '{}'\n",
            rng.pick(&[
                "2027-01-07T00:00:00Z",
                "2026-12-08T00:00:00Z",
                "+262143-12-31T23:59:59Z"
            ])
        ));
    }
    s.push_str("members:\n");
    for i in 0..n {
        s.push_str(&format!(
            "- name: m{i}\n  group: {}\n  region: {}\n  kubernetesVersion: 1.30.4\n  nodePools:\n  - {{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}}\n",
            rng.pick(&["dev", "prod"]),
            rng.pick(&["eastus", "westeurope"]),
        ));
        if rng.chance(1, 3) {
            s.push_str(&format!(
                "  behavior: {{upgradeMinutes: {}, failAttempts: {}}}\n",
                rng.pick(&["30", "1", "4294967295", "100000"]),
                rng.pick(&["0", "1", "5"])
            ));
        }
    }
    s.push_str("strategy:\n  stages:\n  - name: test\n    groups: [{name: dev}]\n");
    if rng.chance(1, 2) {
        s.push_str(&format!(
            "    afterStageWaitInSeconds: {}\n",
            rng.pick(&["60", "3600", "604800", "604801", "18446744073709551615"])
        ));
    }
    s.push_str("  - name: production\n    groups: [{name: prod, maxConcurrency: '50%'}]\n");
    s.push_str("run:\n  name: r1\n  managedClusterUpdate:\n    upgrade: {type: Full, kubernetesVersion: 1.31.2}\n");
    s.push_str(&format!("actions:\n- {{at: '{start}', do: start}}\n"));
    s.into_bytes()
}
