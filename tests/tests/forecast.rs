//! The forecast (`waverun_core::forecast`): a copy of the engine simulated forward from now.
//! With the true durations and approvals given as it assumes, it predicts exactly what then
//! happens; it takes its duration from the run's finished upgrades; a run not started is
//! forecast as if started now; the same engine and instant give the same forecast.

use std::path::PathBuf;
use waverun_core::forecast::{forecast, Forecast};
use waverun_core::sim::{ActionKind, Scenario, Simulation};
use waverun_core::{State, Timestamp};

fn scenario() -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/gates-and-wait.yaml");
    let mut s = waverun_host::load_scenario(&path).unwrap();
    // The forecast approves gates as they are reached: so does this run.
    s.auto_approve = true;
    s.actions.retain(|a| a.kind == ActionKind::Start);
    s
}

fn at(text: &str) -> Timestamp {
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&chrono::Utc)
}

/// The simulation, stepped until its clock reaches `t`.
fn until(t: &str) -> Simulation {
    let mut sim = Simulation::new(&scenario()).unwrap();
    while sim.now() < at(t) && sim.step() {}
    sim
}

fn finish_of(f: &Forecast, member: &str) -> Option<Timestamp> {
    f.stages
        .iter()
        .flat_map(|s| &s.groups)
        .flat_map(|g| &g.members)
        .find(|m| m.name == member)
        .and_then(|m| m.expected_finish)
}

#[test]
fn a_forecast_with_the_true_durations_predicts_what_then_happens() {
    let mut sim = until("2026-12-07T00:10:00Z");
    let f = forecast(sim.engine(), "r1", sim.now(), Some(30)).unwrap();
    sim.run_to_end();
    let report = sim.report();
    assert_eq!(report.summary.state, State::Completed);
    assert_eq!(f.expected.state, State::Completed);
    assert_eq!(f.expected.expected_finish, report.summary.finished_at);
    let end = sim.engine().run_status("r1").unwrap();
    for m in end
        .stages
        .iter()
        .flat_map(|s| &s.groups)
        .flat_map(|g| &g.members)
    {
        assert_eq!(
            finish_of(&f, &m.name),
            m.status.completed_time,
            "{}",
            m.name
        );
    }
    // dev-1 was in flight at 00:10: it finishes at 00:30, 30 minutes after it started.
    assert_eq!(finish_of(&f, "dev-1"), Some(at("2026-12-07T00:30:00Z")));
    // The ScheduledStart gate holds prod until Tuesday 09:00 +01:00, as the scenario says.
    assert_eq!(finish_of(&f, "prod-2"), Some(at("2026-12-08T09:00:00Z")));
}

#[test]
fn a_forecast_takes_the_duration_of_the_run_s_finished_upgrades() {
    let sim = until("2026-12-07T00:40:00Z");
    let f = forecast(sim.engine(), "r1", sim.now(), None).unwrap();
    assert_eq!(f.assumptions.upgrade_minutes, 30);
    assert!(
        f.assumptions.basis.contains("median of the 1 upgrades"),
        "{}",
        f.assumptions.basis
    );
    assert!(!f.assumptions.started_now);
}

#[test]
fn a_run_not_started_is_forecast_as_if_started_now() {
    let sim = Simulation::new(&scenario()).unwrap();
    let f = forecast(sim.engine(), "r1", sim.now(), None).unwrap();
    assert!(f.assumptions.started_now);
    assert_eq!(f.expected.state, State::Completed);
    assert_eq!(f.expected.expected_start, Some(at("2026-12-07T00:00:00Z")));
    // Nothing finished yet: the default duration, 20 minutes, is assumed.
    assert_eq!(f.assumptions.upgrade_minutes, 20);
    assert_eq!(finish_of(&f, "dev-1"), Some(at("2026-12-07T00:20:00Z")));
}

#[test]
fn the_same_engine_and_instant_give_the_same_forecast() {
    let sim = until("2026-12-07T02:00:00Z");
    let a = forecast(sim.engine(), "r1", sim.now(), None).unwrap();
    let b = forecast(sim.engine(), "r1", sim.now(), None).unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert!(forecast(sim.engine(), "nope", sim.now(), None).is_err());
}
