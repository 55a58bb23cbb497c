//! What the engine emits: events (every state change, in the scenario-format vocabulary),
//! commands for the host (cluster calls to make) and the next wakeup.

use crate::model::{GateTiming, GateType, PoolImage, ProviderRef, Timestamp, UpgradeType};
pub use crate::state::Reason;
use crate::state::StatusError;
use serde::{Deserialize, Serialize};

/// Event kinds. The names are an interface: the timeline, webhooks and the audit log use them.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    RunCreated,
    RunUpdated,
    RunDeleted,
    RunStarted,
    RunResumed,
    RunCompleted,
    RunFailed,
    RunStopping,
    RunStopped,
    RunSkipped,
    StageStarted,
    StageCompleted,
    StageFailed,
    StageSkipped,
    StageStopped,
    GroupStarted,
    GroupCompleted,
    GroupFailed,
    GroupSkipped,
    GroupStopped,
    GateCreated,
    GateCompleted,
    GateSkipped,
    AfterStageWaitStarted,
    AfterStageWaitCompleted,
    AfterStageWaitSkipped,
    MemberPending,
    MemberStarted,
    MemberCompleted,
    MemberFailed,
    MemberSkipped,
    /// Not emitted by the engine: simulators and hosts record refused actions with it.
    ActionRejected,
}

/// One state change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// When it happened.
    pub at: Timestamp,
    /// What happened.
    pub kind: EventKind,
    /// The run (empty in single-run timelines).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run: String,
    /// Stage, where it applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Group, where it applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Member, where it applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// Why (pending / skipped / stopping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// Until when, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    /// Gate kind (gate events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_type: Option<GateType>,
    /// Gate timing (gate events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<GateTiming>,
    /// Gate id (gate events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_id: Option<String>,
    /// Target control plane (MemberStarted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Target images per pool (MemberStarted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_images: Vec<PoolImage>,
    /// Operation id (member events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    /// Error (failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StatusError>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who acted (gate approvals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The refused action (ActionRejected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<serde_json::Value>,
}

impl Event {
    /// A bare event of `kind` for `run` at `at`.
    pub fn new(at: Timestamp, kind: EventKind, run: &str) -> Event {
        Event {
            at,
            kind,
            run: run.to_string(),
            stage: None,
            group: None,
            member: None,
            reason: None,
            until: None,
            gate_type: None,
            timing: None,
            gate_id: None,
            kubernetes_version: None,
            node_images: Vec::new(),
            operation_id: None,
            error: None,
            message: None,
            by: None,
            action: None,
        }
    }
}

/// One member upgrade the host must perform.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeOperation {
    /// Deterministic id (`{run}/{member}`): a repeated command is recognisably the same operation.
    pub operation_id: String,
    /// The run that owns it.
    pub run: String,
    /// The member to upgrade.
    pub member: String,
    /// Region of the member.
    pub region: String,
    /// Provider that drives the member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRef>,
    /// Upgrade type.
    pub upgrade_type: UpgradeType,
    /// Target control plane, when it moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Target image per pool that moves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_images: Vec<PoolImage>,
}

/// A cluster call for the host. Results come back as [`crate::Observation`]s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum HostCommand {
    /// Start (or, if already started, keep following) a member upgrade.
    StartUpgrade(UpgradeOperation),
}

/// What [`crate::Engine::poll_output`] yields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Output {
    /// A cluster call to make.
    Command(HostCommand),
    /// A state change.
    Event(Event),
}

/// Why the engine wants to wake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WakeReason {
    /// A member's maintenance window opens.
    MaintenanceWindow,
    /// A version becomes available in a region.
    VersionAvailable,
    /// A scheduled-start gate opens.
    ScheduledGate,
    /// An after-stage wait ends.
    AfterStageWait,
    /// A fleet freeze ends.
    FreezeEnds,
}

/// The next instant the engine must be woken ([`crate::Engine::handle_timeout`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wakeup {
    /// When.
    pub at: Timestamp,
    /// Why.
    pub reason: WakeReason,
    /// Which run.
    pub run: String,
}
