//! What a simulation reports: the timeline, the final status tree of each run and a summary —
//! what `waverun simulate -o json` prints.

use crate::event::Event;
use crate::model::Timestamp;
use crate::state::{RunStatus, State};
use serde::{Deserialize, Serialize};

/// A run in a report: its name, the profile that generated it, and its status tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// Run name.
    pub name: String,
    /// The auto-upgrade profile that generated it.
    #[serde(
        rename = "autoUpgradeProfileName",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub auto_upgrade_profile_name: Option<String>,
    /// Final status tree.
    pub status: RunStatus,
}

/// The summary line of a simulation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The run's state at the end (the scenario's run; without one, the last generated run's).
    pub state: State,
    /// When the (first) run started.
    pub started_at: Option<Timestamp>,
    /// When the (last) run finished, once every run has.
    pub finished_at: Option<Timestamp>,
    /// `finishedAt - startedAt` in seconds, when both are known.
    pub makespan_seconds: Option<i64>,
    /// Members Completed (over every run).
    pub members_completed: u32,
    /// Members Failed.
    pub members_failed: u32,
    /// Members Skipped.
    pub members_skipped: u32,
    /// Members not finished (NotStarted, Pending or Running).
    pub members_pending: u32,
}

impl Summary {
    /// The summary over `runs`; `own` is the scenario's run, whose state is the summary's.
    pub fn of(runs: &[RunReport], own: Option<&str>) -> Summary {
        let (mut c, mut f, mut s, mut p) = (0, 0, 0, 0);
        for r in runs {
            for st in &r.status.stages {
                for g in &st.groups {
                    for m in &g.members {
                        match m.status.state {
                            State::Completed => c += 1,
                            State::Failed => f += 1,
                            State::Skipped => s += 1,
                            _ => p += 1,
                        }
                    }
                }
            }
        }
        let main = own
            .and_then(|n| runs.iter().find(|r| r.name == n))
            .or(runs.last());
        let started = runs.iter().filter_map(|r| r.status.status.start_time).min();
        let finished = if runs
            .iter()
            .all(|r| r.status.status.completed_time.is_some())
        {
            runs.iter()
                .filter_map(|r| r.status.status.completed_time)
                .max()
        } else {
            None
        };
        Summary {
            state: main.map_or(State::NotStarted, |r| r.status.status.state),
            started_at: started,
            finished_at: finished,
            makespan_seconds: match (started, finished) {
                (Some(a), Some(b)) => Some((b - a).num_seconds()),
                _ => None,
            },
            members_completed: c,
            members_failed: f,
            members_skipped: s,
            members_pending: p,
        }
    }
}

/// What `waverun simulate -o json` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulationReport {
    /// Every event, in time order (ties in the order the engine decided them). With profiles,
    /// every entry names its run.
    pub timeline: Vec<Event>,
    /// The scenario's own run and its final status tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunReport>,
    /// With profiles: every run (the scenario's first, then the generated ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunReport>,
    /// Totals over every run.
    pub summary: Summary,
}

impl SimulationReport {
    /// The runs the report shows: `runs` with profiles, else the scenario's run.
    pub fn all_runs(&self) -> Vec<&RunReport> {
        if self.runs.is_empty() {
            self.run.iter().collect()
        } else {
            self.runs.iter().collect()
        }
    }
}
