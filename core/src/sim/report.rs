//! What a simulation reports: the timeline, the final status tree of each run and a summary —
//! what `waverun simulate -o json` prints.

use crate::event::Event;
use crate::model::Timestamp;
use crate::state::{NodeStatus, RunStatus, State};
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

/// A [`RunReport`] whose status tree is written as it serializes (a
/// [`crate::engine::RunStatusView`]); serializes as the `RunReport` it stands for.
#[derive(Serialize)]
pub(crate) struct RunReportView<'a, T: Serialize> {
    pub(crate) name: &'a str,
    #[serde(
        rename = "autoUpgradeProfileName",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) auto_upgrade_profile_name: Option<&'a str>,
    pub(crate) status: &'a T,
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

/// What a summary reads of a run: its name, its own node, and how many of its members are
/// Completed, Failed, Skipped and not finished.
#[derive(Clone, Debug)]
pub struct RunFacts<'a> {
    /// Run name.
    pub name: &'a str,
    /// The run's own node, as its status tree shows it.
    pub status: &'a NodeStatus,
    /// Members Completed, Failed, Skipped and not finished.
    pub tally: [u32; 4],
}

impl Summary {
    /// The summary over `runs`; `own` is the scenario's run, whose state is the summary's.
    pub fn of(runs: &[RunReport], own: Option<&str>) -> Summary {
        let facts: Vec<RunFacts> = runs
            .iter()
            .map(|r| RunFacts {
                name: &r.name,
                status: &r.status.status,
                tally: r.status.member_tally(),
            })
            .collect();
        Summary::over(&facts, own)
    }

    /// The summary over what each run's tree says ([`Summary::of`] without the trees).
    pub fn over(runs: &[RunFacts], own: Option<&str>) -> Summary {
        let [c, f, s, p] = runs.iter().fold([0; 4], |mut sum, r| {
            for (total, n) in sum.iter_mut().zip(r.tally) {
                *total += n;
            }
            sum
        });
        let main = own
            .and_then(|n| runs.iter().find(|r| r.name == n))
            .or(runs.last());
        let started = runs.iter().filter_map(|r| r.status.start_time).min();
        let finished = if runs.iter().all(|r| r.status.completed_time.is_some()) {
            runs.iter().filter_map(|r| r.status.completed_time).max()
        } else {
            None
        };
        Summary {
            state: main.map_or(State::NotStarted, |r| r.status.state),
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
