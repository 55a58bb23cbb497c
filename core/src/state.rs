//! The one state enum used at every level, and the status tree a run reports (spec section 3).

use crate::model::{GateTiming, GateType, PoolImage, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Run, stage, group, member, after-stage wait and gate state.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum State {
    /// Not reached yet.
    #[default]
    NotStarted,
    /// In progress.
    Running,
    /// Stop requested; in-flight upgrades finishing.
    Stopping,
    /// Stopped by a user; resumable.
    Stopped,
    /// Skipped by a user or nothing to do.
    Skipped,
    /// Failed.
    Failed,
    /// Waiting on something outside the run's control (window, gate, availability...).
    Pending,
    /// Done (not necessarily all succeeded).
    Completed,
}

impl State {
    /// Completed, Failed or Skipped.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Skipped)
    }
}

/// Why something waits or was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Reason {
    /// The member's maintenance window is closed.
    MaintenanceWindow,
    /// The target version or image is not available in the member's region yet.
    VersionNotInRegion,
    /// A fleet freeze is in force.
    Freeze,
    /// Another run holds the member (one upgrade authority).
    Lease,
    /// Concurrency limits are full.
    Concurrency,
    /// A gate is pending.
    Gate,
    /// The after-stage wait is running.
    AfterStageWait,
    /// The run is stopping or stopped.
    Stop,
    /// Earlier stages or groups are not finished.
    PreviousStage,
    /// Members are still running.
    Members,
    /// Already at target: nothing to do.
    AlreadyAtTarget,
    /// Consistent selection found no image for one of the member's pools.
    NoConsistentImage,
    /// A user skipped it (or its group / stage).
    SkippedByUser,
    /// More than one minor behind a generated run's target (a manual run must bring it closer).
    MinorVersionSkip,
    /// A failure threshold was exceeded.
    FailureThresholdExceeded,
    /// The member's provider refuses or has not answered its upgrade's calls for now, and they
    /// are made again (unavailable, busy, timed out, an outcome not known yet). Never produced by
    /// the engine: the daemon adds it to a running member from what its provider last answered.
    Provider,
    /// A health check: a member soaks or is measured after its upgrade, or a HealthCheck gate
    /// measures.
    HealthCheck,
    /// A member's pre-flight is measured, or failed and is tried again later (`Wait`).
    Preflight,
    /// A health check failed (a gate's, failing its stage or group).
    HealthCheckFailed,
    /// A member's pre-flight failed (`onPreflightFailure: Skip`).
    PreflightFailed,
}

/// `{code, message}` on a status node.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusError {
    /// Stable code, e.g. `UpgradeFailed`, `MinorVersionSkip`, `FailureThresholdExceeded`.
    pub code: String,
    /// Explanation.
    pub message: String,
}

/// `{state, startTime, completedTime, error}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// State.
    pub state: State,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub start_time: Option<Timestamp>,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub completed_time: Option<Timestamp>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StatusError>,
}

/// What a waiting node waits on, and until when if known. The daemon adds one the engine does
/// not know of: `Provider` on a running member whose provider calls are refused for now (or
/// whose outcome is not known yet) and made again, `until` the next attempt, `message` the call
/// and the provider's answer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingOn {
    /// What it waits on.
    pub reason: Reason,
    /// Until when, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub until: Option<Timestamp>,
    /// Details for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A gate in the status tree.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateStatus {
    /// Id once the run reaches the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_id: Option<String>,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Approval or ScheduledStart.
    pub gate_type: GateType,
    /// Before or After.
    pub timing: GateTiming,
    /// State.
    pub status: NodeStatus,
    /// ScheduledStart: when it opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub absolute_start_time: Option<Timestamp>,
    /// Who completed it (audit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_by: Option<String>,
    /// HealthCheck: the check's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<String>,
    /// HealthCheck: its measurements so far and its verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckStatus>,
}

/// A health check on a node of the tree: where it stands, its last measurement, its verdict.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckStatus {
    /// The check's name (`preflight` for the provider's pre-flight).
    pub name: String,
    /// `NotStarted` (soaking), `Running`, `Completed` (passed), `Failed`, `Pending`
    /// (inconclusive, for a person), `Skipped` (abandoned: another check decided).
    pub state: State,
    /// The source, in a few words (`prometheus: <query>`), as viewers see it.
    pub source: String,
    /// The conditions over a query's result, when it has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Measurements taken (errors not counted), of how many.
    pub taken: u32,
    /// Measurements wanted.
    pub count: u32,
    /// Failed and inconclusive measurements so far.
    pub failed: u32,
    /// Inconclusive measurements so far.
    pub inconclusive: u32,
    /// Errors in a row so far.
    pub consecutive_errors: u32,
    /// When the next measurement is due (or the soak ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub next_at: Option<Timestamp>,
    /// The last measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<MeasurementStatus>,
    /// The verdict, once over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::health::Verdict>,
    /// Why it ended so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One measurement as the tree shows it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeasurementStatus {
    /// When it was reported.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub at: Timestamp,
    /// Its verdict.
    pub verdict: crate::health::Verdict,
    /// The value that decided it (a query's sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What it meant, or what the source said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `afterStageWaitStatus`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitStatus {
    /// State.
    pub status: NodeStatus,
    /// Configured duration.
    pub wait_duration_in_seconds: u64,
}

/// A member in the status tree.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// Member name.
    pub name: String,
    /// Azure's id of the member's cluster, as Azure's run status has it. Never set by the
    /// engine, which does not know it: a host that keeps members' `clusterResourceId` adds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_resource_id: Option<String>,
    /// State.
    pub status: NodeStatus,
    /// Notes: pending reason, skip reason, pools left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The cluster operation, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    /// Target control plane, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Target images, once started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_images: Vec<PoolImage>,
    /// What it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<WaitingOn>,
    /// Its pre-flight (last attempt) and its checks after the upgrade.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckStatus>,
}

/// A group in the status tree.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    /// Group name.
    pub name: String,
    /// State.
    pub status: NodeStatus,
    /// Failed members.
    pub failure_count: u32,
    /// Resolved concurrency (clamped to the stage's).
    pub max_concurrency: u32,
    /// Resolved failure threshold.
    pub max_allowed_failures: u32,
    /// Before-gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_gates: Vec<GateStatus>,
    /// After-gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_gates: Vec<GateStatus>,
    /// Members in processing order.
    pub members: Vec<MemberStatus>,
    /// What it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<WaitingOn>,
}

/// A stage in the status tree.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    /// Stage name.
    pub name: String,
    /// State.
    pub status: NodeStatus,
    /// Failed members in the stage.
    pub failure_count: u32,
    /// Resolved concurrency.
    pub max_concurrency: u32,
    /// Resolved failure threshold.
    pub max_allowed_failures: u32,
    /// Before-gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_gates: Vec<GateStatus>,
    /// After-gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_gates: Vec<GateStatus>,
    /// The after-stage wait.
    pub after_stage_wait_status: WaitStatus,
    /// Groups.
    pub groups: Vec<GroupStatus>,
    /// What it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<WaitingOn>,
}

/// `nodeImageSelection` in status.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageSelectionStatus {
    /// The images selected (Consistent).
    pub selected_node_image_versions: Vec<String>,
}

/// How many of `states` are Completed, Failed, Skipped, and not finished (NotStarted, Pending,
/// Running...): a simulation summary's member counts.
pub fn tally(states: impl IntoIterator<Item = State>) -> [u32; 4] {
    let mut counts = [0; 4];
    for s in states {
        counts[match s {
            State::Completed => 0,
            State::Failed => 1,
            State::Skipped => 2,
            _ => 3,
        }] += 1;
    }
    counts
}

/// How many of a run's nodes are in each state, and wait on each reason, level by level: what a
/// metrics scrape exports, counted without building the tree (the same counts as
/// [`RunStatus::node_tally`] of the tree).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTally {
    /// Failed members in the run.
    pub failure_count: u32,
    /// The run's own node (one).
    pub run: LevelTally,
    /// Its stages.
    pub stages: LevelTally,
    /// Its groups.
    pub groups: LevelTally,
    /// Its members.
    pub members: LevelTally,
}

/// One level of a [`NodeTally`]: its nodes by state (as the tree shows them), and those that wait
/// by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelTally {
    /// Nodes in each state; states no node is in are left out.
    pub states: BTreeMap<State, u32>,
    /// Nodes waiting, by reason; reasons no node waits on are left out.
    pub waits: BTreeMap<Reason, u32>,
}

impl LevelTally {
    /// Counts one node.
    pub fn count(&mut self, state: State, waiting_on: Option<Reason>) {
        *self.states.entry(state).or_default() += 1;
        if let Some(r) = waiting_on {
            *self.waits.entry(r).or_default() += 1;
        }
    }
}

/// The status of an update run.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// State of the run.
    pub status: NodeStatus,
    /// Failed members in the run.
    pub failure_count: u32,
    /// Consistent selection, visible before start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_image_selection: Option<NodeImageSelectionStatus>,
    /// Stages.
    pub stages: Vec<StageStatus>,
    /// What it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<WaitingOn>,
}

impl RunStatus {
    /// Its members Completed, Failed, Skipped and not finished ([`tally`]).
    pub fn member_tally(&self) -> [u32; 4] {
        let groups = self.stages.iter().flat_map(|s| &s.groups);
        tally(groups.flat_map(|g| &g.members).map(|m| m.status.state))
    }

    /// Its nodes by state and wait reason, level by level.
    pub fn node_tally(&self) -> NodeTally {
        let reason = |w: &Option<WaitingOn>| w.as_ref().map(|w| w.reason);
        let mut t = NodeTally {
            failure_count: self.failure_count,
            ..NodeTally::default()
        };
        t.run.count(self.status.state, reason(&self.waiting_on));
        for s in &self.stages {
            t.stages.count(s.status.state, reason(&s.waiting_on));
            for g in &s.groups {
                t.groups.count(g.status.state, reason(&g.waiting_on));
                for m in &g.members {
                    t.members.count(m.status.state, reason(&m.waiting_on));
                }
            }
        }
        t
    }
}
