//! The forecast: when a run is expected to finish, per member, group, stage and run, from the
//! fleet's real state *now*. A copy of the engine is simulated forward on a virtual clock
//! (the real engine is never touched): upgrades in flight finish `upgradeMinutes` after they
//! started, new ones take as long, none fails, and approval gates are approved as soon as they
//! are reached (a forecast cannot know when a person will). Maintenance windows, freezes,
//! release availability, scheduled gates, after-stage waits and other runs' leases all hold,
//! because the engine decides exactly as it will for real.
//!
//! `upgradeMinutes` is the median duration of the run's upgrades finished so far, else
//! [`DEFAULT_UPGRADE_MINUTES`], unless the caller gives one; the forecast says which.

use crate::engine::Engine;
use crate::error::Error;
use crate::event::UpgradeOperation;
use crate::model::{Timestamp, UpgradeType};
use crate::sim::{Behavior, SimulatedFleet, Simulation};
use crate::state::{NodeStatus, RunStatus, State};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Minutes an upgrade is assumed to take when the run has finished none yet.
pub const DEFAULT_UPGRADE_MINUTES: u32 = 20;
/// How far a forecast looks: a run not finished by then has no expected finish.
pub const HORIZON_DAYS: i64 = 366;

/// What a forecast assumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assumptions {
    /// How long every upgrade takes.
    pub upgrade_minutes: u32,
    /// Where that figure comes from.
    pub basis: String,
    /// Approval gates are approved as soon as they are reached.
    pub approvals: String,
    /// Upgrades do not fail.
    pub failures: String,
    /// The run had not started: it is forecast as if started now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started_now: bool,
}

/// When one node of the run is expected to start and finish.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Expected {
    /// The name.
    pub name: String,
    /// The state it is expected to end in.
    pub state: State,
    /// When it started or is expected to (actual when it is in the past).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_start: Option<Timestamp>,
    /// When it finished or is expected to (actual when it is in the past).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_finish: Option<Timestamp>,
}

impl Expected {
    fn of(name: &str, s: &NodeStatus) -> Expected {
        Expected {
            name: name.to_string(),
            state: s.state,
            expected_start: s.start_time,
            expected_finish: s.completed_time,
        }
    }
}

/// A group's forecast.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupForecast {
    /// The group.
    #[serde(flatten)]
    pub expected: Expected,
    /// Its members.
    pub members: Vec<Expected>,
}

/// A stage's forecast.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageForecast {
    /// The stage.
    #[serde(flatten)]
    pub expected: Expected,
    /// Its groups.
    pub groups: Vec<GroupForecast>,
}

/// A run's forecast.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    /// The run.
    pub run: String,
    /// When the forecast was made.
    pub at: Timestamp,
    /// What it assumed.
    pub assumptions: Assumptions,
    /// The run.
    #[serde(flatten)]
    pub expected: Expected,
    /// Its stages.
    pub stages: Vec<StageForecast>,
}

/// The median duration, in whole minutes (rounded up), of the run's finished upgrades.
fn observed_minutes(status: &RunStatus) -> Option<(u32, usize)> {
    let mut d: Vec<i64> = status
        .stages
        .iter()
        .flat_map(|s| &s.groups)
        .flat_map(|g| &g.members)
        .filter(|m| m.status.state == State::Completed && m.operation_id.is_some())
        .filter_map(|m| Some((m.status.completed_time? - m.status.start_time?).num_seconds()))
        .filter(|s| *s >= 0)
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_unstable();
    let median = d[d.len() / 2];
    Some((((median + 59) / 60).max(1) as u32, d.len()))
}

/// Forecasts the run `run` of `engine` from `now`. `upgrade_minutes` overrides the observed
/// figure.
pub fn forecast(
    engine: &Engine,
    run: &str,
    now: Timestamp,
    upgrade_minutes: Option<u32>,
) -> Result<Forecast, Error> {
    let status = engine.run_status(run)?;
    let (minutes, basis) = match (upgrade_minutes, observed_minutes(&status)) {
        (Some(m), _) => (m.max(1), "given by the caller".to_string()),
        (None, Some((m, n))) => (
            m,
            format!("the median of the {n} upgrades this run finished"),
        ),
        (None, None) => (
            DEFAULT_UPGRADE_MINUTES,
            "the default: this run has finished no upgrade yet".to_string(),
        ),
    };
    let behavior = Behavior {
        upgrade_minutes: minutes,
        fail_attempts: 0,
        jitter_minutes: 0,
    };
    let behaviors: BTreeMap<String, Behavior> = engine
        .members()
        .map(|m| (m.name.clone(), behavior.clone()))
        .collect();
    let mut fleet = SimulatedFleet::with_behaviors(behaviors, 0);
    // Upgrades in flight (of any run: they hold leases) finish `minutes` after they started.
    let mut started: BTreeMap<String, Timestamp> = BTreeMap::new();
    for name in engine.run_names() {
        if let Ok(s) = engine.run_status(name) {
            for m in s
                .stages
                .iter()
                .flat_map(|s| &s.groups)
                .flat_map(|g| &g.members)
            {
                if let (Some(op), Some(t)) = (&m.operation_id, m.status.start_time) {
                    started.insert(op.clone(), t);
                }
            }
        }
    }
    for (op, op_run, member) in engine.operations_in_flight() {
        let at = started.get(op).copied().unwrap_or(now).min(now);
        let upgrade = UpgradeOperation {
            operation_id: op.to_string(),
            run: op_run.to_string(),
            member: member.to_string(),
            region: String::new(),
            provider: None,
            upgrade_type: UpgradeType::Full,
            kubernetes_version: None,
            node_images: Vec::new(),
        };
        fleet.submit(&upgrade, at);
    }
    let until = now + chrono::Duration::days(HORIZON_DAYS);
    let started_now = status.status.state == State::NotStarted;
    let mut sim = Simulation::resume(engine.clone(), fleet, run, now, until, true, started_now);
    sim.run_to_end();
    let end = sim.engine().run_status(run)?;
    let stages = end
        .stages
        .iter()
        .map(|s| StageForecast {
            expected: Expected::of(&s.name, &s.status),
            groups: s
                .groups
                .iter()
                .map(|g| GroupForecast {
                    expected: Expected::of(&g.name, &g.status),
                    members: g
                        .members
                        .iter()
                        .map(|m| Expected::of(&m.name, &m.status))
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Ok(Forecast {
        run: run.to_string(),
        at: now,
        assumptions: Assumptions {
            upgrade_minutes: minutes,
            basis,
            approvals: "approval gates are approved as soon as they are reached".to_string(),
            failures: "no upgrade fails and every health check passes".to_string(),
            started_now,
        },
        expected: Expected::of(run, &end.status),
        stages,
    })
}
