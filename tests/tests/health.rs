//! Health-gated progression in the engine, through the simulator: the scenarios of
//! `tests/scenarios/health/` (each test asserts its file's "Must hold:" claims; like every
//! scenario, they also run through the plugin in every host, which must decide the same), the engine's
//! decisions on scripted measurements, and properties over generated check results — nothing
//! starts past a failed gate, a member whose check failed is never counted as succeeded, and a
//! replay of the journal decides the same without measuring again.

use proptest::prelude::*;
use std::path::PathBuf;
use waverun_core::health::Verdict;
use waverun_core::sim::{simulate, timeline_line, Scenario, Simulation, SimulationReport};
use waverun_core::state::{GateStatus, MemberStatus};
use waverun_core::{
    Command, Engine, EventKind, GateSelector, HostCommand, Input, Observation, Output, Reason,
    State,
};

fn load(name: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/health")
        .join(name);
    waverun_host::load_scenario(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn run(name: &str) -> SimulationReport {
    simulate(&load(name)).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// The timeline as text, without the lines of `skip` kinds.
fn lines(r: &SimulationReport, skip: &[EventKind]) -> Vec<String> {
    r.timeline
        .iter()
        .filter(|e| !skip.contains(&e.kind()))
        .map(timeline_line)
        .collect()
}

fn member<'a>(r: &'a SimulationReport, name: &str) -> &'a MemberStatus {
    r.run
        .as_ref()
        .expect("run")
        .status
        .stages
        .iter()
        .flat_map(|s| &s.groups)
        .flat_map(|g| &g.members)
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no member {name}"))
}

fn stage_gates<'a>(r: &'a SimulationReport, stage: &str) -> Vec<&'a GateStatus> {
    let s = r
        .run
        .as_ref()
        .expect("run")
        .status
        .stages
        .iter()
        .find(|s| s.name == stage)
        .expect("stage");
    s.before_gates.iter().chain(&s.after_gates).collect()
}

const SCAFFOLD: &[EventKind] = &[
    EventKind::RunStarted,
    EventKind::StageStarted,
    EventKind::GroupStarted,
    EventKind::GroupCompleted,
];

#[test]
fn members_soak_then_are_measured_and_a_failed_check_fails_the_member_within_its_allowance() {
    let r = run("after-member-checks.yaml");
    let c = |s: &str| s.to_string();
    assert_eq!(
        lines(&r, SCAFFOLD),
        vec![
            c("2026-12-07T00:00:00Z  MemberStarted           prod/ring/c1  kubernetes 1.31.2"),
            c("2026-12-07T00:30:00Z  CheckStarted            prod/ring/c1  check error-rate until 2026-12-07T00:40:00Z"),
            c("2026-12-07T00:40:00Z  CheckMeasured           prod/ring/c1  check error-rate Pass (0.001)"),
            c("2026-12-07T00:41:00Z  CheckMeasured           prod/ring/c1  check error-rate Pass (0.001)"),
            c("2026-12-07T00:42:00Z  CheckMeasured           prod/ring/c1  check error-rate Pass (0.001)"),
            c("2026-12-07T00:42:00Z  CheckCompleted          prod/ring/c1  check error-rate Pass: 3 of 3 measurements passed"),
            c("2026-12-07T00:42:00Z  MemberCompleted         prod/ring/c1"),
            c("2026-12-07T00:42:00Z  MemberStarted           prod/ring/c2  kubernetes 1.31.2"),
            c("2026-12-07T01:12:00Z  CheckStarted            prod/ring/c2  check error-rate until 2026-12-07T01:22:00Z"),
            c("2026-12-07T01:22:00Z  CheckMeasured           prod/ring/c2  check error-rate Fail (0.2)"),
            c("2026-12-07T01:22:00Z  CheckCompleted          prod/ring/c2  check error-rate Fail: 1 failed measurements exceed failureLimit 0; last: 0.2 (cluster=\"c2\") does not meet result < 0.01"),
            c("2026-12-07T01:22:00Z  MemberFailed            prod/ring/c2  HealthCheckFailed: check \"error-rate\": 1 failed measurements exceed failureLimit 0; last: 0.2 (cluster=\"c2\") does not meet result < 0.01"),
            c("2026-12-07T01:22:00Z  MemberStarted           prod/ring/c3  kubernetes 1.31.2"),
            c("2026-12-07T01:52:00Z  CheckStarted            prod/ring/c3  check error-rate until 2026-12-07T02:02:00Z"),
            c("2026-12-07T02:02:00Z  CheckMeasured           prod/ring/c3  check error-rate Pass (0.001)"),
            c("2026-12-07T02:03:00Z  CheckMeasured           prod/ring/c3  check error-rate Pass (0.001)"),
            c("2026-12-07T02:04:00Z  CheckMeasured           prod/ring/c3  check error-rate Pass (0.001)"),
            c("2026-12-07T02:04:00Z  CheckCompleted          prod/ring/c3  check error-rate Pass: 3 of 3 measurements passed"),
            c("2026-12-07T02:04:00Z  MemberCompleted         prod/ring/c3"),
            c("2026-12-07T02:04:00Z  StageCompleted          prod"),
            c("2026-12-07T02:04:00Z  RunCompleted"),
        ]
    );
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.summary.members_failed, 1);
    // The failed member's check is on its node, with the value that decided it and the
    // condition; its upgrade happened (recorded), only its health failed.
    let c2 = member(&r, "c2");
    assert_eq!(c2.status.state, State::Failed);
    assert_eq!(
        c2.status.error.as_ref().map(|e| e.code.as_str()),
        Some("HealthCheckFailed")
    );
    let check = &c2.checks[0];
    assert_eq!(check.name, "error-rate");
    assert_eq!(check.verdict, Some(Verdict::Fail));
    assert_eq!(check.condition.as_deref(), Some("success: result < 0.01"));
    assert!(check
        .source
        .starts_with("prometheus: sum(rate(http_errors_total"));
    let last = check.last.as_ref().expect("last measurement");
    assert_eq!(last.value.as_deref(), Some("0.2"));
    assert_eq!((check.taken, check.count, check.failed), (1, 3, 1));
    let c1 = member(&r, "c1");
    assert_eq!(c1.checks[0].verdict, Some(Verdict::Pass));
    assert_eq!((c1.checks[0].taken, c1.checks[0].count), (3, 3));
}

#[test]
fn an_inconclusive_gate_waits_for_a_person_and_an_approval_lets_the_run_go_on() {
    let r = run("gate-inconclusive-approved.yaml");
    let timeline = lines(&r, SCAFFOLD).join("\n");
    for want in [
        "2026-12-07T00:30:00Z  GateCreated             canary  HealthCheck gate (After)",
        "2026-12-07T00:30:00Z  CheckStarted            canary  check canary-slo",
        "2026-12-07T00:30:00Z  CheckMeasured           canary  check canary-slo Inconclusive",
        "2026-12-07T00:30:00Z  CheckCompleted          canary  check canary-slo Inconclusive: 1 inconclusive measurements exceed inconclusiveLimit 0; last: the query returned no sample",
        "2026-12-07T02:00:00Z  GateCompleted           canary  HealthCheck gate (After)\n2026-12-07T02:00:00Z  StageCompleted          canary",
        "2026-12-07T02:00:00Z  MemberStarted           prod/prod/c2",
        "2026-12-07T02:30:00Z  RunCompleted",
    ] {
        assert!(timeline.contains(want), "missing {want:?} in\n{timeline}");
    }
    let gate = stage_gates(&r, "canary")[0];
    assert_eq!(gate.completed_by.as_deref(), Some("alice"));
    assert_eq!(gate.health_check.as_deref(), Some("canary-slo"));
    let check = gate.check.as_ref().expect("the gate's check");
    assert_eq!(check.verdict, Some(Verdict::Inconclusive));
}

#[test]
fn an_inconclusive_gate_is_pending_with_the_commands_to_act_in_its_wait() {
    // The same scenario stopped before the approval: the gate is Pending, the stage waits on it.
    let mut s = load("gate-inconclusive-approved.yaml");
    s.actions.truncate(1);
    s.until = Some(waverun_core::time::parse_timestamp("2026-12-07T01:00:00Z").unwrap());
    let r = simulate(&s).expect("simulates");
    let stage = &r.run.as_ref().unwrap().status.stages[0];
    assert_eq!(stage.status.state, State::Pending);
    let gate = &stage.after_gates[0];
    assert_eq!(gate.status.state, State::Pending);
    let wait = stage.waiting_on.as_ref().expect("the stage waits");
    assert_eq!(wait.reason, Reason::Gate);
    let msg = wait.message.as_deref().unwrap_or_default();
    assert!(
        msg.contains("health check \"canary-slo\" was inconclusive: approve or fail it"),
        "{msg}"
    );
}

#[test]
fn a_failed_gate_check_fails_the_stage_and_the_run_and_a_resume_measures_it_anew() {
    let r = run("gate-failed-then-resumed.yaml");
    let timeline = lines(&r, SCAFFOLD).join("\n");
    let want = "\
2026-12-07T00:30:00Z  GateCreated             prod  HealthCheck gate (Before)
2026-12-07T00:30:00Z  CheckStarted            prod  check alerts-quiet
2026-12-07T00:30:00Z  CheckMeasured           prod  check alerts-quiet Pass
2026-12-07T00:35:00Z  CheckMeasured           prod  check alerts-quiet Pass
2026-12-07T00:40:00Z  CheckMeasured           prod  check alerts-quiet Fail
2026-12-07T00:40:00Z  CheckCompleted          prod  check alerts-quiet Fail: 1 failed measurements exceed failureLimit 0; last: 2 alerts firing
2026-12-07T00:40:00Z  GateFailed              prod  HealthCheck gate (Before) by healthCheck: check \"alerts-quiet\": 1 failed measurements exceed failureLimit 0; last: 2 alerts firing
2026-12-07T00:40:00Z  StageFailed             prod  HealthCheckFailed
2026-12-07T00:40:00Z  RunFailed  HealthCheckFailed: stage \"prod\" failed: gate Before stage \"prod\" failed: check \"alerts-quiet\": 1 failed measurements exceed failureLimit 0; last: 2 alerts firing
2026-12-07T03:00:00Z  RunResumed
2026-12-07T03:00:00Z  CheckStarted            prod  check alerts-quiet
2026-12-07T03:00:00Z  CheckMeasured           prod  check alerts-quiet Pass
2026-12-07T03:05:00Z  CheckMeasured           prod  check alerts-quiet Pass
2026-12-07T03:10:00Z  CheckMeasured           prod  check alerts-quiet Pass
2026-12-07T03:10:00Z  CheckCompleted          prod  check alerts-quiet Pass: 3 of 3 measurements passed
2026-12-07T03:10:00Z  GateCompleted           prod  HealthCheck gate (Before)
2026-12-07T03:10:00Z  MemberStarted           prod/prod/c2  kubernetes 1.31.2
2026-12-07T03:40:00Z  MemberCompleted         prod/prod/c2";
    assert!(timeline.contains(want), "timeline:\n{timeline}");
    // c2 did not start before the resume.
    let c2_start = member(&r, "c2")
        .status
        .start_time
        .map(waverun_core::fmt_time);
    assert_eq!(c2_start.as_deref(), Some("2026-12-07T03:10:00Z"));
    assert_eq!(r.summary.state, State::Completed);
}

#[test]
fn preflight_fails_skips_or_defers_a_stopped_cluster_by_its_groups_policy() {
    let r = run("preflight-policies.yaml");
    let timeline = lines(&r, SCAFFOLD).join("\n");
    for want in [
        "2026-12-07T00:00:00Z  MemberFailed            fleet/strict/s1  PreflightFailed: pre-flight failed: check \"preflight\": cluster is Stopped",
        "2026-12-07T00:00:00Z  MemberSkipped           fleet/lenient/k1  PreflightFailed",
        "2026-12-07T00:00:00Z  MemberPending           fleet/patient/p1  Preflight until 2026-12-07T00:10:00Z",
        "2026-12-07T00:10:00Z  MemberPending           fleet/patient/p1  Preflight until 2026-12-07T00:20:00Z",
        "2026-12-07T00:20:00Z  MemberPending           fleet/patient/p1  Preflight until 2026-12-07T00:30:00Z",
        "2026-12-07T00:30:00Z  CheckMeasured           fleet/patient/p1  check preflight Pass  Preflight\n2026-12-07T00:30:00Z  MemberStarted           fleet/patient/p1",
        "2026-12-07T00:00:00Z  MemberStarted           fleet/strict/s2",
        "2026-12-07T00:00:00Z  MemberStarted           fleet/lenient/k2",
        "2026-12-07T01:00:00Z  RunCompleted",
    ] {
        assert!(timeline.contains(want), "missing {want:?} in\n{timeline}");
    }
    // The member that failed its pre-flight was never upgraded.
    assert!(r.timeline.iter().all(
        |e| !(e.kind() == EventKind::MemberStarted && matches!(e.member(), Some("s1" | "k1")))
    ));
    assert_eq!(member(&r, "k1").status.state, State::Skipped);
    assert_eq!(
        member(&r, "s1")
            .status
            .error
            .as_ref()
            .map(|e| e.code.as_str()),
        Some("PreflightFailed")
    );
    assert_eq!(r.summary.members_failed, 1);
    assert_eq!(r.summary.members_skipped, 1);
}

#[test]
fn health_scenarios_are_deterministic_and_every_file_has_a_test() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/health");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("readable")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "after-member-checks.yaml",
            "gate-failed-then-resumed.yaml",
            "gate-inconclusive-approved.yaml",
            "preflight-policies.yaml"
        ]
    );
    for f in files {
        let a = serde_json::to_string(&run(&f)).unwrap();
        let b = serde_json::to_string(&run(&f)).unwrap();
        assert_eq!(a, b, "{f}");
    }
}

// ---------------------------------------------------------------------------------------------
// The engine on its own: commands and measurements fed by hand.

/// An engine with `members` (one group, `g`), a strategy from YAML and a started run.
fn engine_with(strategy_yaml: &str, members: &[&str]) -> Engine {
    let mut doc = String::from("start: '2026-12-07T00:00:00Z'\nmembers:\n");
    for m in members {
        doc.push_str(&format!(
            "- {{name: {m}, group: g, region: eastus, kubernetesVersion: 1.30.4}}\n"
        ));
    }
    doc.push_str(strategy_yaml);
    doc.push_str(
        "run:\n  name: r1\n  managedClusterUpdate:\n    upgrade: {type: ControlPlaneOnly, kubernetesVersion: 1.31.2}\n",
    );
    let s = Scenario::from_text(&doc, waverun_core::document::Format::Yaml)
        .unwrap_or_else(|e| panic!("{e}"));
    let sim = Simulation::new(&s).expect("valid");
    sim.engine().clone()
}

fn now() -> waverun_core::Timestamp {
    waverun_core::time::parse_timestamp("2026-12-07T00:00:00Z").unwrap()
}

fn drain(e: &mut Engine) -> Vec<Output> {
    std::iter::from_fn(|| e.poll_output()).collect()
}

fn measured(id: &str, verdict: Verdict) -> Input {
    Input::Observation(Observation::CheckMeasured {
        measurement_id: id.to_string(),
        values: None,
        verdict: Some(verdict),
        message: None,
    })
}

const GATE_STRATEGY: &str = "strategy:
  healthChecks:
  - {name: quiet, http: {url: 'https://example.com/q'}}
  stages:
  - name: s
    beforeGates: [{type: HealthCheck, healthCheck: quiet}]
    groups: [{name: g}]
";

#[test]
fn a_gate_measuring_its_check_cannot_be_approved_or_failed_by_a_person() {
    let mut e = engine_with(GATE_STRATEGY, &["m1"]);
    e.handle_command_at(now(), Command::StartRun { name: "r1".into() })
        .unwrap();
    drain(&mut e);
    let gate = GateSelector {
        id: None,
        stage: Some("s".into()),
        group: None,
        timing: None,
    };
    for cmd in [
        Command::CompleteGate {
            run: "r1".into(),
            gate: gate.clone(),
            by: None,
        },
        Command::FailGate {
            run: "r1".into(),
            gate: gate.clone(),
            by: None,
            message: None,
        },
    ] {
        let err = e.handle_command_at(now(), cmd).unwrap_err();
        assert!(
            err.message
                .contains("is measuring its health check \"quiet\""),
            "{}",
            err.message
        );
    }
}

#[test]
fn a_person_fails_an_inconclusive_gate_and_the_run_fails_with_their_reason() {
    let mut e = engine_with(GATE_STRATEGY, &["m1"]);
    e.handle_command_at(now(), Command::StartRun { name: "r1".into() })
        .unwrap();
    let id = drain(&mut e)
        .into_iter()
        .find_map(|o| match o {
            Output::Command(HostCommand::MeasureCheck(req)) => Some(req.measurement_id),
            _ => None,
        })
        .expect("a measurement is asked for");
    assert_eq!(id, "r1/stage:s/before/0/quiet#1");
    e.handle_input(now(), measured(&id, Verdict::Inconclusive))
        .unwrap();
    drain(&mut e);
    assert_eq!(
        e.run_status("r1").unwrap().stages[0].before_gates[0]
            .status
            .state,
        State::Pending
    );
    e.handle_command_at(
        now(),
        Command::FailGate {
            run: "r1".into(),
            gate: GateSelector {
                id: Some("r1/stage:s/before/0".into()),
                stage: None,
                group: None,
                timing: None,
            },
            by: Some("bob".into()),
            message: Some("dashboards look wrong".into()),
        },
    )
    .unwrap();
    let events = drain(&mut e);
    assert!(
        events.iter().all(|o| !matches!(o, Output::Command(_))),
        "nothing starts"
    );
    let status = e.run_status("r1").unwrap();
    assert_eq!(status.status.state, State::Failed);
    let err = status.status.error.expect("the run's error");
    assert_eq!(err.code, "HealthCheckFailed");
    assert!(
        err.message.contains("dashboards look wrong"),
        "{}",
        err.message
    );
    assert_eq!(
        status.stages[0].before_gates[0].completed_by.as_deref(),
        Some("bob")
    );
}

#[test]
fn a_measurement_reported_twice_or_unknown_is_ignored() {
    let mut e = engine_with(GATE_STRATEGY, &["m1"]);
    e.handle_command_at(now(), Command::StartRun { name: "r1".into() })
        .unwrap();
    drain(&mut e);
    let before = e.snapshot();
    e.handle_input(now(), measured("r1/nothing#1", Verdict::Fail))
        .unwrap();
    assert!(drain(&mut e).is_empty());
    assert_eq!(e.snapshot(), before);
    e.handle_input(
        now(),
        measured("r1/stage:s/before/0/quiet#1", Verdict::Pass),
    )
    .unwrap();
    let first = drain(&mut e);
    assert!(first
        .iter()
        .any(|o| matches!(o, Output::Command(HostCommand::StartUpgrade(_)))));
    let after = e.snapshot();
    e.handle_input(
        now(),
        measured("r1/stage:s/before/0/quiet#1", Verdict::Fail),
    )
    .unwrap();
    assert!(drain(&mut e).is_empty());
    assert_eq!(e.snapshot(), after);
}

#[test]
fn errors_are_measured_again_at_the_interval_and_never_pass() {
    let strategy = "strategy:
  healthChecks:
  - {name: quiet, http: {url: 'https://example.com/q'}, intervalSeconds: 30, consecutiveErrorLimit: 1}
  stages:
  - name: s
    beforeGates: [{type: HealthCheck, healthCheck: quiet}]
    groups: [{name: g}]
";
    let mut e = engine_with(strategy, &["m1"]);
    e.handle_command_at(now(), Command::StartRun { name: "r1".into() })
        .unwrap();
    drain(&mut e);
    e.handle_input(
        now(),
        measured("r1/stage:s/before/0/quiet#1", Verdict::Error),
    )
    .unwrap();
    drain(&mut e);
    let wake = e.poll_timeout().expect("a wakeup");
    assert_eq!(waverun_core::fmt_time(wake.at), "2026-12-07T00:00:30Z");
    assert_eq!(wake.reason, waverun_core::WakeReason::HealthCheck);
    e.handle_timeout(wake.at);
    let asked = drain(&mut e);
    assert!(asked.iter().any(|o| matches!(o,
        Output::Command(HostCommand::MeasureCheck(r)) if r.measurement_id == "r1/stage:s/before/0/quiet#2")));
    e.handle_input(
        wake.at,
        measured("r1/stage:s/before/0/quiet#2", Verdict::Error),
    )
    .unwrap();
    drain(&mut e);
    let status = e.run_status("r1").unwrap();
    assert_eq!(status.status.state, State::Failed);
    let msg = status.status.error.unwrap().message;
    assert!(
        msg.contains("2 measurements in a row were errors (consecutiveErrorLimit 1)"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------------------------
// Properties over generated measurements.

/// The strategy of the generated fleets: a HealthCheck gate before the stage, checks after each
/// member, pre-flight under `Skip`.
const GENERATED_STRATEGY: &str = "strategy:
  healthChecks:
  - {name: gate-check, http: {url: 'https://example.com/g'}, intervalSeconds: 60, count: 2, consecutiveErrorLimit: 1}
  - {name: member-check, http: {url: 'https://example.com/m'}, intervalSeconds: 60, count: 2, failureLimit: 1}
  stages:
  - name: s
    maxConcurrency: '3'
    maxAllowedFailures: '50%'
    beforeGates: [{type: HealthCheck, healthCheck: gate-check}]
    afterMemberChecks: {soakSeconds: 120, checks: [member-check]}
    onPreflightFailure: Skip
    groups: [{name: g, maxConcurrency: '2', maxAllowedFailures: '1'}]
";

/// A fleet of `n` members in one group of one stage behind a HealthCheck gate, with member
/// checks after each upgrade; every measurement's verdict is drawn from `verdicts` in order
/// (cycling). Drives the engine natively, answering measurements and upgrades at once, and
/// returns the outputs with the inputs it fed (the journal).
fn drive(n: usize, verdicts: &[Verdict]) -> (Vec<Output>, Vec<(waverun_core::Timestamp, Input)>) {
    let members: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = members.iter().map(String::as_str).collect();
    let strategy = GENERATED_STRATEGY;
    let mut e = engine_with(strategy, &refs);
    let mut t = now();
    let mut journal = vec![(t, Input::Command(Command::StartRun { name: "r1".into() }))];
    e.handle_input(t, journal[0].1.clone()).unwrap();
    let mut outputs = Vec::new();
    let mut k = 0;
    for _ in 0..10_000 {
        let mut answers = Vec::new();
        while let Some(o) = e.poll_output() {
            match &o {
                Output::Command(HostCommand::MeasureCheck(req)) => {
                    let v = verdicts[k % verdicts.len()];
                    k += 1;
                    answers.push(measured(&req.measurement_id, v));
                }
                Output::Command(HostCommand::StartUpgrade(op)) => {
                    answers.push(Input::Observation(Observation::UpgradeSucceeded {
                        operation_id: op.operation_id.clone(),
                    }));
                }
                Output::Event(_) => {}
            }
            outputs.push(o);
        }
        if answers.is_empty() {
            match e.poll_timeout() {
                Some(w) => {
                    t = w.at;
                    journal.push((t, Input::Timeout));
                    e.handle_timeout(t);
                }
                None => break,
            }
        }
        for a in answers {
            journal.push((t, a.clone()));
            e.handle_input(t, a).unwrap();
        }
    }
    (outputs, journal)
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        4 => Just(Verdict::Pass),
        1 => Just(Verdict::Fail),
        1 => Just(Verdict::Inconclusive),
        1 => Just(Verdict::Error),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn nothing_starts_past_a_gate_whose_check_did_not_pass(
        n in 1usize..6,
        verdicts in proptest::collection::vec(verdict(), 1..12),
    ) {
        let (outputs, _) = drive(n, &verdicts);
        let events: Vec<&waverun_core::Event> = outputs.iter().filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        }).collect();
        let gate_passed = events.iter().position(|e| e.kind() == EventKind::GateCompleted);
        let first_start = events.iter().position(|e| e.kind() == EventKind::MemberStarted);
        if let Some(s) = first_start {
            prop_assert!(gate_passed.is_some_and(|g| g < s), "a member started before the gate passed");
        }
        if events.iter().any(|e| e.kind() == EventKind::GateFailed) {
            prop_assert!(first_start.is_none(), "a member started although the gate failed");
        }
    }

    #[test]
    fn a_member_whose_check_failed_is_never_counted_as_succeeded(
        n in 1usize..6,
        verdicts in proptest::collection::vec(verdict(), 1..12),
    ) {
        let (outputs, _) = drive(n, &verdicts);
        let mut failed_check = std::collections::BTreeSet::new();
        for o in &outputs {
            let Output::Event(e) = o else { continue };
            if e.kind() == EventKind::CheckCompleted && e.verdict() != Some(Verdict::Pass) {
                if let Some(m) = e.member() {
                    failed_check.insert(m.to_string());
                }
            }
            if e.kind() == EventKind::MemberCompleted {
                prop_assert!(!failed_check.contains(e.member().unwrap()),
                    "{} completed after its check failed", e.member().unwrap());
            }
        }
        // And every MemberCompleted follows a passed check of that member.
        for o in &outputs {
            let Output::Event(e) = o else { continue };
            if e.kind() == EventKind::MemberCompleted {
                let m = e.member().unwrap();
                prop_assert!(outputs.iter().any(|o| matches!(o, Output::Event(c)
                    if c.kind() == EventKind::CheckCompleted && c.member() == Some(m)
                        && c.verdict() == Some(Verdict::Pass))));
            }
        }
    }

    #[test]
    fn replaying_the_journal_decides_the_same_without_measuring(
        n in 1usize..5,
        verdicts in proptest::collection::vec(verdict(), 1..10),
    ) {
        let (outputs, journal) = drive(n, &verdicts);
        // A fresh engine fed the journal: the measurements come from it, nothing is measured.
        let members: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let refs: Vec<&str> = members.iter().map(String::as_str).collect();
        let strategy = GENERATED_STRATEGY;
        let mut e = engine_with(strategy, &refs);
        let mut replayed = Vec::new();
        for (t, input) in journal {
            let _ = e.handle_input(t, input);
            replayed.extend(std::iter::from_fn(|| e.poll_output()));
        }
        prop_assert_eq!(replayed, outputs);
    }
}

#[test]
fn the_generated_fleet_completes_when_every_measurement_passes_and_fails_at_the_gate_otherwise() {
    // The properties above are not vacuous: the same harness completes members and fails gates.
    let kinds = |outputs: &[Output], kind: EventKind| {
        outputs
            .iter()
            .filter(|o| matches!(o, Output::Event(e) if e.kind() == kind))
            .count()
    };
    let (pass, journal) = drive(5, &[Verdict::Pass]);
    assert_eq!(kinds(&pass, EventKind::MemberCompleted), 5);
    assert_eq!(kinds(&pass, EventKind::RunCompleted), 1);
    assert!(
        journal.iter().any(|(_, i)| matches!(i, Input::Timeout)),
        "soaks and intervals wait"
    );
    let (fail, _) = drive(5, &[Verdict::Fail]);
    assert_eq!(kinds(&fail, EventKind::GateFailed), 1);
    assert_eq!(kinds(&fail, EventKind::MemberStarted), 0);
    // Gate passes (two measurements), then every member's first check measurement fails and
    // its second passes (failureLimit 1): members complete.
    let (mixed, _) = drive(
        3,
        &[
            Verdict::Pass,
            Verdict::Pass,
            Verdict::Pass,
            Verdict::Fail,
            Verdict::Pass,
        ],
    );
    assert!(kinds(&mixed, EventKind::MemberStarted) > 0);
}

#[test]
fn skipping_a_stage_whose_gate_measures_abandons_the_check() {
    let strategy = "strategy:
  healthChecks:
  - {name: quiet, http: {url: 'https://example.com/q'}, intervalSeconds: 60, count: 5}
  stages:
  - name: s
    beforeGates: [{type: HealthCheck, healthCheck: quiet}]
    groups: [{name: g}]
";
    let mut e = engine_with(strategy, &["m1"]);
    e.handle_command_at(now(), Command::StartRun { name: "r1".into() })
        .unwrap();
    drain(&mut e);
    e.handle_input(
        now(),
        measured("r1/stage:s/before/0/quiet#1", Verdict::Pass),
    )
    .unwrap();
    drain(&mut e);
    // Measuring: the stage is Running and waits on the check until its next measurement.
    let st = e.run_status("r1").unwrap();
    let wait = st.stages[0].waiting_on.clone().expect("waits");
    assert_eq!(wait.reason, Reason::HealthCheck);
    assert_eq!(st.stages[0].status.state, State::Running);
    assert_eq!(
        wait.until.map(waverun_core::fmt_time).as_deref(),
        Some("2026-12-07T00:01:00Z")
    );
    e.handle_command_at(
        now(),
        Command::Skip {
            run: "r1".into(),
            targets: vec![waverun_core::SkipTarget::Stage("s".into())],
        },
    )
    .unwrap();
    let out = drain(&mut e);
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Event(ev) if ev.kind() == EventKind::GateSkipped)));
    // The next measurement's timer finds nothing to measure; a late result changes nothing.
    e.handle_timeout(waverun_core::time::parse_timestamp("2026-12-07T00:05:00Z").unwrap());
    assert!(drain(&mut e)
        .iter()
        .all(|o| !matches!(o, Output::Command(HostCommand::MeasureCheck(_)))));
    assert_eq!(e.measurements_in_flight().count(), 0);
}

#[test]
fn a_forecast_counts_soaks_and_measurements_and_answers_the_measurement_awaited() {
    // Two members one at a time, each soaking 10 minutes and measured 3 times a minute apart
    // after a 30-minute upgrade: 42 minutes each. Forecast while m0's first check measurement
    // is awaited (at 00:40): m0 ends 00:42, m1 00:42 → 01:24.
    let strategy = "strategy:
  healthChecks:
  - {name: quiet, http: {url: 'https://example.com/q'}, intervalSeconds: 60, count: 3}
  stages:
  - name: s
    groups: [{name: g, afterMemberChecks: {soakSeconds: 600, checks: [quiet]}}]
";
    let mut e = engine_with(strategy, &["m0", "m1"]);
    e.handle_command_at(now(), Command::StartRun { name: "r1".into() })
        .unwrap();
    drain(&mut e);
    let t30 = waverun_core::time::parse_timestamp("2026-12-07T00:30:00Z").unwrap();
    e.handle_input(
        t30,
        Input::Observation(Observation::UpgradeSucceeded {
            operation_id: "r1/m0".into(),
        }),
    )
    .unwrap();
    drain(&mut e);
    let t40 = waverun_core::time::parse_timestamp("2026-12-07T00:40:00Z").unwrap();
    e.handle_timeout(t40);
    drain(&mut e);
    assert_eq!(e.measurements_in_flight().count(), 1);
    let f = waverun_core::forecast::forecast(&e, "r1", t40, Some(30)).expect("forecast");
    assert_eq!(f.expected.state, State::Completed);
    let finish = |m: usize| {
        f.stages[0].groups[0].members[m]
            .expected_finish
            .map(waverun_core::fmt_time)
    };
    assert_eq!(finish(0).as_deref(), Some("2026-12-07T00:42:00Z"));
    assert_eq!(finish(1).as_deref(), Some("2026-12-07T01:24:00Z"));
    assert!(f.assumptions.failures.contains("every health check passes"));
}
