//! What a simulation reports: the timeline, the run's final status tree and a summary — what
//! `waverun simulate -o json` prints.

use crate::event::Event;
use crate::model::Timestamp;
use crate::state::{RunStatus, State};
use serde::{Deserialize, Serialize};

/// The run in a report: its name and status tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// Run name.
    pub name: String,
    /// Final status tree.
    pub status: RunStatus,
}

/// The summary line of a simulation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The run's state at the end.
    pub state: State,
    /// When the run started.
    pub started_at: Option<Timestamp>,
    /// When the run finished.
    pub finished_at: Option<Timestamp>,
    /// `finishedAt - startedAt` in seconds, when both are known.
    pub makespan_seconds: Option<i64>,
    /// Members Completed.
    pub members_completed: u32,
    /// Members Failed.
    pub members_failed: u32,
    /// Members Skipped.
    pub members_skipped: u32,
    /// Members not finished (NotStarted, Pending or Running).
    pub members_pending: u32,
}

/// What `waverun simulate -o json` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulationReport {
    /// Every event, in time order (ties in the order the engine decided them).
    pub timeline: Vec<Event>,
    /// The run and its final status tree.
    pub run: RunReport,
    /// Totals.
    pub summary: Summary,
}
