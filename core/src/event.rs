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
    RunGenerated,
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
    GateFailed,
    CheckStarted,
    CheckMeasured,
    CheckCompleted,
}

/// One state change: when, in which run, and the fact itself.
///
/// On the wire an event is one flat JSON object: `at`, `kind`, `run` (left out when empty),
/// then the fact's fields, always in the order `stage, group, member, reason, until, gateType,
/// timing, gateId, kubernetesVersion, nodeImages, operationId, error, message, by, action`;
/// a field without a value (`None`, an empty `nodeImages`) is left out. Reading refuses unknown
/// fields, fields the kind does not have and missing fields it requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// When it happened.
    pub at: Timestamp,
    /// The run (empty in single-run timelines).
    pub run: String,
    /// What happened, with exactly the details of that kind of event.
    pub fact: Fact,
}

/// What happened: one variant per [`EventKind`], each with the fields that kind carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact {
    /// A run was created.
    RunCreated,
    /// An auto-upgrade profile generated the run (before its `RunStarted`, when it starts it).
    RunGenerated {
        /// The profile.
        profile: String,
        /// Its target versions.
        versions: Vec<String>,
        /// Why: the release, or the catch-up, and the run it supersedes.
        message: Option<String>,
    },
    /// A run's spec was replaced.
    RunUpdated,
    /// A run was deleted.
    RunDeleted,
    /// A run started.
    RunStarted {
        /// `retry of run X` for a retry run.
        message: Option<String>,
    },
    /// A stopped or failed run resumed.
    RunResumed,
    /// Every stage finished.
    RunCompleted,
    /// Every stage was skipped.
    RunSkipped,
    /// The run drains: no new work, upgrades in flight finish.
    RunStopping {
        /// [`Reason::Stop`] (a user) or [`Reason::FailureThresholdExceeded`].
        reason: Reason,
    },
    /// A user's stop is complete.
    RunStopped {
        /// The run's error, if it has one.
        error: Option<StatusError>,
    },
    /// A failure stop is complete.
    RunFailed {
        /// The run's error, if it has one.
        error: Option<StatusError>,
    },
    /// A stage started.
    StageStarted {
        /// The stage.
        stage: String,
    },
    /// A stage finished.
    StageCompleted {
        /// The stage.
        stage: String,
    },
    /// A stage's failure threshold was exceeded (or one of its groups failed).
    StageFailed {
        /// The stage.
        stage: String,
        /// [`Reason::FailureThresholdExceeded`].
        reason: Reason,
        /// Why.
        message: String,
    },
    /// A stage was skipped.
    StageSkipped {
        /// The stage.
        stage: String,
        /// [`Reason::SkippedByUser`] or [`Reason::AlreadyAtTarget`].
        reason: Reason,
    },
    /// The run stopped while in this stage.
    StageStopped {
        /// The stage.
        stage: String,
    },
    /// A group started.
    GroupStarted {
        /// Its stage.
        stage: String,
        /// The group.
        group: String,
    },
    /// A group finished.
    GroupCompleted {
        /// Its stage.
        stage: String,
        /// The group.
        group: String,
    },
    /// A group's failure threshold was exceeded.
    GroupFailed {
        /// Its stage.
        stage: String,
        /// The group.
        group: String,
        /// [`Reason::FailureThresholdExceeded`].
        reason: Reason,
        /// Why.
        message: String,
    },
    /// A group was skipped.
    GroupSkipped {
        /// Its stage.
        stage: String,
        /// The group.
        group: String,
        /// [`Reason::SkippedByUser`] or [`Reason::AlreadyAtTarget`].
        reason: Reason,
    },
    /// The run stopped while the group was unfinished.
    GroupStopped {
        /// Its stage.
        stage: String,
        /// The group.
        group: String,
    },
    /// A gate became Pending.
    GateCreated {
        /// Its stage.
        stage: String,
        /// Its group (none for a stage's gate).
        group: Option<String>,
        /// When a scheduled-start gate opens.
        until: Option<Timestamp>,
        /// Gate kind.
        gate_type: GateType,
        /// Before or after.
        timing: GateTiming,
        /// Gate id.
        gate_id: String,
        /// The gate's display name.
        message: Option<String>,
    },
    /// A gate was approved or opened on schedule.
    GateCompleted {
        /// Its stage.
        stage: String,
        /// Its group (none for a stage's gate).
        group: Option<String>,
        /// Gate kind.
        gate_type: GateType,
        /// Before or after.
        timing: GateTiming,
        /// Gate id.
        gate_id: String,
        /// Who: the approver (`user` if unnamed) or `schedule`.
        by: String,
    },
    /// A Pending gate was skipped (with its group or stage).
    GateSkipped {
        /// Its stage.
        stage: String,
        /// Its group (none for a stage's gate).
        group: Option<String>,
        /// Gate kind.
        gate_type: GateType,
        /// Before or after.
        timing: GateTiming,
        /// Gate id.
        gate_id: String,
    },
    /// A gate failed: its health check failed, or a person failed it. Its stage (or group)
    /// fails and the run stops.
    GateFailed {
        /// Its stage.
        stage: String,
        /// Its group (none for a stage's gate).
        group: Option<String>,
        /// Gate kind.
        gate_type: GateType,
        /// Before or after.
        timing: GateTiming,
        /// Gate id.
        gate_id: String,
        /// Who: `healthCheck`, or the person.
        by: String,
        /// Why.
        message: String,
    },
    /// A health check started: of a gate, or of a member after its upgrade (measured from
    /// `until`, the end of its soak).
    CheckStarted {
        /// Its stage.
        stage: String,
        /// Its group.
        group: Option<String>,
        /// The member, for a member's check.
        member: Option<String>,
        /// When the first measurement is due.
        until: Option<Timestamp>,
        /// The gate, for a gate's check.
        gate_id: Option<String>,
        /// The check.
        check: String,
        /// Its source, in a few words.
        message: Option<String>,
    },
    /// One measurement of a check was reported.
    CheckMeasured {
        /// Its stage.
        stage: String,
        /// Its group.
        group: Option<String>,
        /// The member, for a member's check.
        member: Option<String>,
        /// [`Reason::Preflight`] for a pre-flight's measurement.
        reason: Option<Reason>,
        /// The gate, for a gate's check.
        gate_id: Option<String>,
        /// The check.
        check: String,
        /// The measurement's verdict.
        verdict: crate::health::Verdict,
        /// The sample that decided it.
        value: Option<String>,
        /// What it meant, or what the source said.
        message: Option<String>,
    },
    /// A check is over.
    CheckCompleted {
        /// Its stage.
        stage: String,
        /// Its group.
        group: Option<String>,
        /// The member, for a member's check.
        member: Option<String>,
        /// The gate, for a gate's check.
        gate_id: Option<String>,
        /// The check.
        check: String,
        /// Pass, Fail or Inconclusive.
        verdict: crate::health::Verdict,
        /// Why.
        message: String,
    },
    /// A stage's after-stage wait started.
    AfterStageWaitStarted {
        /// The stage.
        stage: String,
        /// When it ends.
        until: Timestamp,
    },
    /// A stage's after-stage wait ended.
    AfterStageWaitCompleted {
        /// The stage.
        stage: String,
    },
    /// A user skipped a stage's after-stage wait.
    AfterStageWaitSkipped {
        /// The stage.
        stage: String,
        /// [`Reason::SkippedByUser`].
        reason: Reason,
    },
    /// A member is blocked (window, release, freeze, lease...).
    MemberPending {
        /// Its stage.
        stage: String,
        /// Its group.
        group: String,
        /// The member.
        member: String,
        /// What blocks it.
        reason: Reason,
        /// Until when, when known.
        until: Option<Timestamp>,
        /// Details (none for a freeze).
        message: Option<String>,
    },
    /// A member upgrade started (a [`HostCommand::StartUpgrade`] follows).
    MemberStarted {
        /// Its stage.
        stage: String,
        /// Its group.
        group: String,
        /// The member.
        member: String,
        /// Target control plane, when it moves.
        kubernetes_version: Option<String>,
        /// Target image per pool that moves.
        node_images: Vec<PoolImage>,
        /// The operation id (`{run}/{member}`).
        operation_id: String,
        /// Details (e.g. pools kept on their image).
        message: Option<String>,
    },
    /// A member upgrade succeeded.
    MemberCompleted {
        /// Its stage.
        stage: String,
        /// Its group.
        group: String,
        /// The member.
        member: String,
        /// The operation id.
        operation_id: String,
    },
    /// A member failed: its upgrade failed, or it could not be upgraded (minor-version skip).
    MemberFailed {
        /// Its stage.
        stage: String,
        /// Its group.
        group: String,
        /// The member.
        member: String,
        /// The operation id, when an upgrade was started.
        operation_id: Option<String>,
        /// What went wrong.
        error: StatusError,
    },
    /// A member was skipped (nothing to do, no consistent image, a user).
    MemberSkipped {
        /// Its stage.
        stage: String,
        /// Its group.
        group: String,
        /// The member.
        member: String,
        /// Why.
        reason: Reason,
        /// Details.
        message: Option<String>,
    },
    /// Not emitted by the engine: simulators and hosts record refused actions with it.
    ActionRejected {
        /// The refused action.
        action: serde_json::Value,
        /// Why it was refused.
        error: StatusError,
    },
}

impl Fact {
    /// The kind of this fact.
    pub fn kind(&self) -> EventKind {
        match self {
            Fact::RunCreated => EventKind::RunCreated,
            Fact::RunGenerated { .. } => EventKind::RunGenerated,
            Fact::RunUpdated => EventKind::RunUpdated,
            Fact::RunDeleted => EventKind::RunDeleted,
            Fact::RunStarted { .. } => EventKind::RunStarted,
            Fact::RunResumed => EventKind::RunResumed,
            Fact::RunCompleted => EventKind::RunCompleted,
            Fact::RunSkipped => EventKind::RunSkipped,
            Fact::RunStopping { .. } => EventKind::RunStopping,
            Fact::RunStopped { .. } => EventKind::RunStopped,
            Fact::RunFailed { .. } => EventKind::RunFailed,
            Fact::StageStarted { .. } => EventKind::StageStarted,
            Fact::StageCompleted { .. } => EventKind::StageCompleted,
            Fact::StageFailed { .. } => EventKind::StageFailed,
            Fact::StageSkipped { .. } => EventKind::StageSkipped,
            Fact::StageStopped { .. } => EventKind::StageStopped,
            Fact::GroupStarted { .. } => EventKind::GroupStarted,
            Fact::GroupCompleted { .. } => EventKind::GroupCompleted,
            Fact::GroupFailed { .. } => EventKind::GroupFailed,
            Fact::GroupSkipped { .. } => EventKind::GroupSkipped,
            Fact::GroupStopped { .. } => EventKind::GroupStopped,
            Fact::GateCreated { .. } => EventKind::GateCreated,
            Fact::GateCompleted { .. } => EventKind::GateCompleted,
            Fact::GateSkipped { .. } => EventKind::GateSkipped,
            Fact::GateFailed { .. } => EventKind::GateFailed,
            Fact::CheckStarted { .. } => EventKind::CheckStarted,
            Fact::CheckMeasured { .. } => EventKind::CheckMeasured,
            Fact::CheckCompleted { .. } => EventKind::CheckCompleted,
            Fact::AfterStageWaitStarted { .. } => EventKind::AfterStageWaitStarted,
            Fact::AfterStageWaitCompleted { .. } => EventKind::AfterStageWaitCompleted,
            Fact::AfterStageWaitSkipped { .. } => EventKind::AfterStageWaitSkipped,
            Fact::MemberPending { .. } => EventKind::MemberPending,
            Fact::MemberStarted { .. } => EventKind::MemberStarted,
            Fact::MemberCompleted { .. } => EventKind::MemberCompleted,
            Fact::MemberFailed { .. } => EventKind::MemberFailed,
            Fact::MemberSkipped { .. } => EventKind::MemberSkipped,
            Fact::ActionRejected { .. } => EventKind::ActionRejected,
        }
    }
}

impl Event {
    /// `fact` for `run` at `at`.
    pub fn new(at: Timestamp, run: &str, fact: Fact) -> Event {
        Event {
            at,
            run: run.to_string(),
            fact,
        }
    }

    /// What happened.
    pub fn kind(&self) -> EventKind {
        self.fact.kind()
    }

    /// The stage, for stage, group, gate, wait and member events.
    pub fn stage(&self) -> Option<&str> {
        self.fields().stage
    }

    /// The group, for group and member events and a group's gate events.
    pub fn group(&self) -> Option<&str> {
        self.fields().group
    }

    /// The member, for member events.
    pub fn member(&self) -> Option<&str> {
        self.fields().member
    }

    /// Why (pending, skipped, failed, stopping).
    pub fn reason(&self) -> Option<Reason> {
        self.fields().reason
    }

    /// Until when (a pending member, a scheduled gate, an after-stage wait), when known.
    pub fn until(&self) -> Option<Timestamp> {
        self.fields().until
    }

    /// The gate's kind (gate events).
    pub fn gate_type(&self) -> Option<GateType> {
        self.fields().gate_type
    }

    /// The gate's timing (gate events).
    pub fn timing(&self) -> Option<GateTiming> {
        self.fields().timing
    }

    /// The gate's id (gate events).
    pub fn gate_id(&self) -> Option<&str> {
        self.fields().gate_id
    }

    /// The health check (check events).
    pub fn check(&self) -> Option<&str> {
        self.fields().check
    }

    /// A measurement's or a check's verdict (check events).
    pub fn verdict(&self) -> Option<crate::health::Verdict> {
        self.fields().verdict
    }

    /// The sample that decided a measurement (`CheckMeasured`).
    pub fn value(&self) -> Option<&str> {
        self.fields().value
    }

    /// The target control plane (`MemberStarted`, when it moves).
    pub fn kubernetes_version(&self) -> Option<&str> {
        self.fields().kubernetes_version
    }

    /// The target images per pool (`MemberStarted`); empty for other kinds.
    pub fn node_images(&self) -> &[PoolImage] {
        self.fields().node_images
    }

    /// The operation id (member upgrade events).
    pub fn operation_id(&self) -> Option<&str> {
        self.fields().operation_id
    }

    /// The error (failures, a refused action).
    pub fn error(&self) -> Option<&StatusError> {
        self.fields().error
    }

    /// The human-readable detail.
    pub fn message(&self) -> Option<&str> {
        self.fields().message
    }

    /// Who completed a gate.
    pub fn by(&self) -> Option<&str> {
        self.fields().by
    }

    /// The refused action (`ActionRejected`).
    pub fn action(&self) -> Option<&serde_json::Value> {
        self.fields().action
    }

    /// The auto-upgrade profile (`RunGenerated`).
    pub fn profile(&self) -> Option<&str> {
        self.fields().profile
    }

    /// The target versions (`RunGenerated`); empty for other kinds.
    pub fn versions(&self) -> &[String] {
        self.fields().versions
    }

    /// The flat view: every field, in wire order, `None` where the kind has none.
    fn fields(&self) -> Fields<'_> {
        let mut f = Fields {
            at: &self.at,
            kind: self.kind(),
            run: &self.run,
            profile: None,
            versions: &[],
            stage: None,
            group: None,
            member: None,
            reason: None,
            until: None,
            gate_type: None,
            timing: None,
            gate_id: None,
            check: None,
            verdict: None,
            value: None,
            kubernetes_version: None,
            node_images: &[],
            operation_id: None,
            error: None,
            message: None,
            by: None,
            action: None,
        };
        match &self.fact {
            Fact::RunCreated
            | Fact::RunUpdated
            | Fact::RunDeleted
            | Fact::RunResumed
            | Fact::RunCompleted
            | Fact::RunSkipped => {}
            Fact::RunStarted { message } => f.message = message.as_deref(),
            Fact::RunGenerated {
                profile,
                versions,
                message,
            } => {
                f.profile = Some(profile);
                f.versions = versions;
                f.message = message.as_deref();
            }
            Fact::RunStopping { reason } => f.reason = Some(*reason),
            Fact::RunStopped { error } | Fact::RunFailed { error } => f.error = error.as_ref(),
            Fact::StageStarted { stage }
            | Fact::StageCompleted { stage }
            | Fact::StageStopped { stage }
            | Fact::AfterStageWaitCompleted { stage } => f.stage = Some(stage),
            Fact::StageFailed {
                stage,
                reason,
                message,
            } => {
                f.stage = Some(stage);
                f.reason = Some(*reason);
                f.message = Some(message);
            }
            Fact::StageSkipped { stage, reason }
            | Fact::AfterStageWaitSkipped { stage, reason } => {
                f.stage = Some(stage);
                f.reason = Some(*reason);
            }
            Fact::GroupStarted { stage, group }
            | Fact::GroupCompleted { stage, group }
            | Fact::GroupStopped { stage, group } => {
                f.stage = Some(stage);
                f.group = Some(group);
            }
            Fact::GroupFailed {
                stage,
                group,
                reason,
                message,
            } => {
                f.stage = Some(stage);
                f.group = Some(group);
                f.reason = Some(*reason);
                f.message = Some(message);
            }
            Fact::GroupSkipped {
                stage,
                group,
                reason,
            } => {
                f.stage = Some(stage);
                f.group = Some(group);
                f.reason = Some(*reason);
            }
            Fact::GateCreated {
                stage,
                group,
                until,
                gate_type,
                timing,
                gate_id,
                message,
            } => {
                f.stage = Some(stage);
                f.group = group.as_deref();
                f.until = *until;
                f.gate_type = Some(*gate_type);
                f.timing = Some(*timing);
                f.gate_id = Some(gate_id);
                f.message = message.as_deref();
            }
            Fact::GateCompleted {
                stage,
                group,
                gate_type,
                timing,
                gate_id,
                by,
            } => {
                f.stage = Some(stage);
                f.group = group.as_deref();
                f.gate_type = Some(*gate_type);
                f.timing = Some(*timing);
                f.gate_id = Some(gate_id);
                f.by = Some(by);
            }
            Fact::GateSkipped {
                stage,
                group,
                gate_type,
                timing,
                gate_id,
            } => {
                f.stage = Some(stage);
                f.group = group.as_deref();
                f.gate_type = Some(*gate_type);
                f.timing = Some(*timing);
                f.gate_id = Some(gate_id);
            }
            Fact::GateFailed {
                stage,
                group,
                gate_type,
                timing,
                gate_id,
                by,
                message,
            } => {
                f.stage = Some(stage);
                f.group = group.as_deref();
                f.gate_type = Some(*gate_type);
                f.timing = Some(*timing);
                f.gate_id = Some(gate_id);
                f.by = Some(by);
                f.message = Some(message);
            }
            Fact::CheckStarted {
                stage,
                group,
                member,
                until,
                gate_id,
                check,
                message,
            } => {
                f.stage = Some(stage);
                f.group = group.as_deref();
                f.member = member.as_deref();
                f.until = *until;
                f.gate_id = gate_id.as_deref();
                f.check = Some(check);
                f.message = message.as_deref();
            }
            Fact::CheckMeasured {
                stage,
                group,
                member,
                reason,
                gate_id,
                check,
                verdict,
                value,
                message,
            } => {
                f.stage = Some(stage);
                f.group = group.as_deref();
                f.member = member.as_deref();
                f.reason = *reason;
                f.gate_id = gate_id.as_deref();
                f.check = Some(check);
                f.verdict = Some(*verdict);
                f.value = value.as_deref();
                f.message = message.as_deref();
            }
            Fact::CheckCompleted {
                stage,
                group,
                member,
                gate_id,
                check,
                verdict,
                message,
            } => {
                f.stage = Some(stage);
                f.group = group.as_deref();
                f.member = member.as_deref();
                f.gate_id = gate_id.as_deref();
                f.check = Some(check);
                f.verdict = Some(*verdict);
                f.message = Some(message);
            }
            Fact::AfterStageWaitStarted { stage, until } => {
                f.stage = Some(stage);
                f.until = Some(*until);
            }
            Fact::MemberPending {
                stage,
                group,
                member,
                reason,
                until,
                message,
            } => {
                f.stage = Some(stage);
                f.group = Some(group);
                f.member = Some(member);
                f.reason = Some(*reason);
                f.until = *until;
                f.message = message.as_deref();
            }
            Fact::MemberStarted {
                stage,
                group,
                member,
                kubernetes_version,
                node_images,
                operation_id,
                message,
            } => {
                f.stage = Some(stage);
                f.group = Some(group);
                f.member = Some(member);
                f.kubernetes_version = kubernetes_version.as_deref();
                f.node_images = node_images;
                f.operation_id = Some(operation_id);
                f.message = message.as_deref();
            }
            Fact::MemberCompleted {
                stage,
                group,
                member,
                operation_id,
            } => {
                f.stage = Some(stage);
                f.group = Some(group);
                f.member = Some(member);
                f.operation_id = Some(operation_id);
            }
            Fact::MemberFailed {
                stage,
                group,
                member,
                operation_id,
                error,
            } => {
                f.stage = Some(stage);
                f.group = Some(group);
                f.member = Some(member);
                f.operation_id = operation_id.as_deref();
                f.error = Some(error);
            }
            Fact::MemberSkipped {
                stage,
                group,
                member,
                reason,
                message,
            } => {
                f.stage = Some(stage);
                f.group = Some(group);
                f.member = Some(member);
                f.reason = Some(*reason);
                f.message = message.as_deref();
            }
            Fact::ActionRejected { action, error } => {
                f.action = Some(action);
                f.error = Some(error);
            }
        }
        f
    }
}

/// An event as written: every field an event may have, in wire order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Fields<'a> {
    at: &'a Timestamp,
    kind: EventKind,
    #[serde(skip_serializing_if = "str_is_empty")]
    run: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<&'a str>,
    #[serde(skip_serializing_if = "slice_is_empty")]
    versions: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Reason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gate_type: Option<GateType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timing: Option<GateTiming>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gate_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    check: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<crate::health::Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kubernetes_version: Option<&'a str>,
    #[serde(skip_serializing_if = "slice_is_empty")]
    node_images: &'a [PoolImage],
    #[serde(skip_serializing_if = "Option::is_none")]
    operation_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a StatusError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<&'a serde_json::Value>,
}

fn str_is_empty(s: &&str) -> bool {
    s.is_empty()
}

fn slice_is_empty<T>(s: &&[T]) -> bool {
    s.is_empty()
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.fields().serialize(s)
    }
}

/// An event as read: every field optional but `at` and `kind`; [`Wire::into_event`] checks
/// them against the kind.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Wire {
    at: Timestamp,
    kind: EventKind,
    #[serde(default)]
    run: String,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    versions: Option<Vec<String>>,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    member: Option<String>,
    #[serde(default)]
    reason: Option<Reason>,
    #[serde(default)]
    until: Option<Timestamp>,
    #[serde(default)]
    gate_type: Option<GateType>,
    #[serde(default)]
    timing: Option<GateTiming>,
    #[serde(default)]
    gate_id: Option<String>,
    #[serde(default)]
    check: Option<String>,
    #[serde(default)]
    verdict: Option<crate::health::Verdict>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    kubernetes_version: Option<String>,
    #[serde(default)]
    node_images: Option<Vec<PoolImage>>,
    #[serde(default)]
    operation_id: Option<String>,
    #[serde(default)]
    error: Option<StatusError>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    action: Option<serde_json::Value>,
}

impl Wire {
    fn into_event<E: serde::de::Error>(mut self) -> Result<Event, E> {
        let kind = self.kind;
        fn need<T, E: serde::de::Error>(kind: EventKind, name: &str, v: Option<T>) -> Result<T, E> {
            v.ok_or_else(|| E::custom(format!("a {kind:?} event needs the field `{name}`")))
        }
        macro_rules! need {
            ($f:ident, $name:literal) => {
                need(kind, $name, self.$f.take())?
            };
        }
        macro_rules! opt {
            ($f:ident) => {
                self.$f.take()
            };
        }
        let fact = match kind {
            EventKind::RunCreated => Fact::RunCreated,
            EventKind::RunGenerated => Fact::RunGenerated {
                profile: need!(profile, "profile"),
                versions: need!(versions, "versions"),
                message: opt!(message),
            },
            EventKind::RunUpdated => Fact::RunUpdated,
            EventKind::RunDeleted => Fact::RunDeleted,
            EventKind::RunStarted => Fact::RunStarted {
                message: opt!(message),
            },
            EventKind::RunResumed => Fact::RunResumed,
            EventKind::RunCompleted => Fact::RunCompleted,
            EventKind::RunSkipped => Fact::RunSkipped,
            EventKind::RunStopping => Fact::RunStopping {
                reason: need!(reason, "reason"),
            },
            EventKind::RunStopped => Fact::RunStopped { error: opt!(error) },
            EventKind::RunFailed => Fact::RunFailed { error: opt!(error) },
            EventKind::StageStarted => Fact::StageStarted {
                stage: need!(stage, "stage"),
            },
            EventKind::StageCompleted => Fact::StageCompleted {
                stage: need!(stage, "stage"),
            },
            EventKind::StageFailed => Fact::StageFailed {
                stage: need!(stage, "stage"),
                reason: need!(reason, "reason"),
                message: need!(message, "message"),
            },
            EventKind::StageSkipped => Fact::StageSkipped {
                stage: need!(stage, "stage"),
                reason: need!(reason, "reason"),
            },
            EventKind::StageStopped => Fact::StageStopped {
                stage: need!(stage, "stage"),
            },
            EventKind::GroupStarted => Fact::GroupStarted {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
            },
            EventKind::GroupCompleted => Fact::GroupCompleted {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
            },
            EventKind::GroupFailed => Fact::GroupFailed {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
                reason: need!(reason, "reason"),
                message: need!(message, "message"),
            },
            EventKind::GroupSkipped => Fact::GroupSkipped {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
                reason: need!(reason, "reason"),
            },
            EventKind::GroupStopped => Fact::GroupStopped {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
            },
            EventKind::GateCreated => Fact::GateCreated {
                stage: need!(stage, "stage"),
                group: opt!(group),
                until: opt!(until),
                gate_type: need!(gate_type, "gateType"),
                timing: need!(timing, "timing"),
                gate_id: need!(gate_id, "gateId"),
                message: opt!(message),
            },
            EventKind::GateCompleted => Fact::GateCompleted {
                stage: need!(stage, "stage"),
                group: opt!(group),
                gate_type: need!(gate_type, "gateType"),
                timing: need!(timing, "timing"),
                gate_id: need!(gate_id, "gateId"),
                by: need!(by, "by"),
            },
            EventKind::GateSkipped => Fact::GateSkipped {
                stage: need!(stage, "stage"),
                group: opt!(group),
                gate_type: need!(gate_type, "gateType"),
                timing: need!(timing, "timing"),
                gate_id: need!(gate_id, "gateId"),
            },
            EventKind::GateFailed => Fact::GateFailed {
                stage: need!(stage, "stage"),
                group: opt!(group),
                gate_type: need!(gate_type, "gateType"),
                timing: need!(timing, "timing"),
                gate_id: need!(gate_id, "gateId"),
                by: need!(by, "by"),
                message: need!(message, "message"),
            },
            EventKind::CheckStarted => Fact::CheckStarted {
                stage: need!(stage, "stage"),
                group: opt!(group),
                member: opt!(member),
                until: opt!(until),
                gate_id: opt!(gate_id),
                check: need!(check, "check"),
                message: opt!(message),
            },
            EventKind::CheckMeasured => Fact::CheckMeasured {
                stage: need!(stage, "stage"),
                group: opt!(group),
                member: opt!(member),
                reason: opt!(reason),
                gate_id: opt!(gate_id),
                check: need!(check, "check"),
                verdict: need!(verdict, "verdict"),
                value: opt!(value),
                message: opt!(message),
            },
            EventKind::CheckCompleted => Fact::CheckCompleted {
                stage: need!(stage, "stage"),
                group: opt!(group),
                member: opt!(member),
                gate_id: opt!(gate_id),
                check: need!(check, "check"),
                verdict: need!(verdict, "verdict"),
                message: need!(message, "message"),
            },
            EventKind::AfterStageWaitStarted => Fact::AfterStageWaitStarted {
                stage: need!(stage, "stage"),
                until: need!(until, "until"),
            },
            EventKind::AfterStageWaitCompleted => Fact::AfterStageWaitCompleted {
                stage: need!(stage, "stage"),
            },
            EventKind::AfterStageWaitSkipped => Fact::AfterStageWaitSkipped {
                stage: need!(stage, "stage"),
                reason: need!(reason, "reason"),
            },
            EventKind::MemberPending => Fact::MemberPending {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
                member: need!(member, "member"),
                reason: need!(reason, "reason"),
                until: opt!(until),
                message: opt!(message),
            },
            EventKind::MemberStarted => Fact::MemberStarted {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
                member: need!(member, "member"),
                kubernetes_version: opt!(kubernetes_version),
                node_images: opt!(node_images).unwrap_or_default(),
                operation_id: need!(operation_id, "operationId"),
                message: opt!(message),
            },
            EventKind::MemberCompleted => Fact::MemberCompleted {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
                member: need!(member, "member"),
                operation_id: need!(operation_id, "operationId"),
            },
            EventKind::MemberFailed => Fact::MemberFailed {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
                member: need!(member, "member"),
                operation_id: opt!(operation_id),
                error: need!(error, "error"),
            },
            EventKind::MemberSkipped => Fact::MemberSkipped {
                stage: need!(stage, "stage"),
                group: need!(group, "group"),
                member: need!(member, "member"),
                reason: need!(reason, "reason"),
                message: opt!(message),
            },
            EventKind::ActionRejected => Fact::ActionRejected {
                action: need!(action, "action"),
                error: need!(error, "error"),
            },
        };
        // Whatever is left is a field this kind does not have.
        let left = [
            ("profile", self.profile.is_some()),
            ("versions", self.versions.is_some()),
            ("stage", self.stage.is_some()),
            ("group", self.group.is_some()),
            ("member", self.member.is_some()),
            ("reason", self.reason.is_some()),
            ("until", self.until.is_some()),
            ("gateType", self.gate_type.is_some()),
            ("timing", self.timing.is_some()),
            ("gateId", self.gate_id.is_some()),
            ("check", self.check.is_some()),
            ("verdict", self.verdict.is_some()),
            ("value", self.value.is_some()),
            ("kubernetesVersion", self.kubernetes_version.is_some()),
            ("nodeImages", self.node_images.is_some()),
            ("operationId", self.operation_id.is_some()),
            ("error", self.error.is_some()),
            ("message", self.message.is_some()),
            ("by", self.by.is_some()),
            ("action", self.action.is_some()),
        ];
        if let Some((name, _)) = left.iter().find(|(_, present)| *present) {
            return Err(E::custom(format!("a {kind:?} event has no field `{name}`")));
        }
        Ok(Event {
            at: self.at,
            run: self.run,
            fact,
        })
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Event, D::Error> {
        Wire::deserialize(d)?.into_event()
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
#[allow(clippy::large_enum_variant)] // commands are transient; boxing would only burden hosts
pub enum HostCommand {
    /// Start (or, if already started, keep following) a member upgrade.
    StartUpgrade(UpgradeOperation),
    /// Take one measurement of a health check and report it
    /// ([`crate::Observation::CheckMeasured`] with the same `measurementId`).
    MeasureCheck(CheckRequest),
}

/// One measurement of a health check the host must take: the check as the strategy wrote it,
/// what it is about, and why. The host measures (query, request, command, provider call) within
/// the check's `timeoutSeconds` and reports what it got; the engine decides what it means.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRequest {
    /// Deterministic id: `{run}/{where}/{check}#{n}` — a repeated command is the same measurement.
    pub measurement_id: String,
    /// The run.
    pub run: String,
    /// The stage.
    pub stage: String,
    /// The group (none for a stage's gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The gate, for a HealthCheck gate's measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_id: Option<String>,
    /// Why it is measured.
    pub purpose: CheckPurpose,
    /// The members it is about: the one member (after its upgrade, or before it starts), or
    /// the members of the gate's group or stage.
    pub members: Vec<CheckTarget>,
    /// The check. A pre-flight's provider check is `{"name": "preflight", "provider": {}}`.
    pub check: crate::health::HealthCheck,
    /// For a pre-flight: the upgrade the member would start (the provider's guards need it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeOperation>,
}

/// Why a check is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CheckPurpose {
    /// Before a member starts: may it?
    Preflight,
    /// After a member's upgrade: is it healthy?
    AfterMember,
    /// A HealthCheck gate before or after a stage or group.
    Gate,
}

/// A member a check is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckTarget {
    /// Member name.
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRef>,
}

/// What [`crate::Engine::poll_output`] yields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::large_enum_variant)] // outputs are transient; boxing would only burden hosts
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
    /// A version becomes available in a region (a waiting member's, or a release that
    /// auto-upgrade profiles wait for).
    VersionAvailable,
    /// A scheduled-start gate opens.
    ScheduledGate,
    /// An after-stage wait ends.
    AfterStageWait,
    /// A fleet freeze ends.
    FreezeEnds,
    /// A health check's next measurement is due (or a member's soak ends).
    HealthCheck,
    /// A member whose pre-flight failed is tried again.
    Preflight,
}

/// The next instant the engine must be woken ([`crate::Engine::handle_timeout`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wakeup {
    /// When.
    pub at: Timestamp,
    /// Why.
    pub reason: WakeReason,
    /// Which run; empty for a fleet-wide wakeup (a release that auto-upgrade profiles wait for).
    pub run: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_timestamp;

    fn at(s: &str) -> Timestamp {
        parse_timestamp(s).expect("timestamp")
    }

    fn read(text: &str) -> Result<Event, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn fields_are_written_in_wire_order_and_empty_ones_left_out() {
        let ev = Event::new(
            at("2026-12-07T00:00:00Z"),
            "r",
            Fact::MemberStarted {
                stage: "s".into(),
                group: "g".into(),
                member: "m".into(),
                kubernetes_version: Some("1.31.2".into()),
                node_images: vec![PoolImage {
                    node_pool: "p".into(),
                    image_version: "img-1".into(),
                }],
                operation_id: "r/m".into(),
                message: None,
            },
        );
        let text = serde_json::to_string(&ev).expect("serialises");
        assert_eq!(
            text,
            r#"{"at":"2026-12-07T00:00:00Z","kind":"MemberStarted","run":"r","stage":"s","group":"g","member":"m","kubernetesVersion":"1.31.2","nodeImages":[{"nodePool":"p","imageVersion":"img-1"}],"operationId":"r/m"}"#
        );
        assert_eq!(read(&text), Ok(ev));

        let gate = Event::new(
            at("2026-12-07T00:00:00Z"),
            "",
            Fact::GateCreated {
                stage: "s".into(),
                group: None,
                until: Some(at("2026-12-08T08:00:00Z")),
                gate_type: GateType::ScheduledStart,
                timing: GateTiming::Before,
                gate_id: "s/before/0".into(),
                message: Some("weekly".into()),
            },
        );
        let text = serde_json::to_string(&gate).expect("serialises");
        assert_eq!(
            text,
            r#"{"at":"2026-12-07T00:00:00Z","kind":"GateCreated","stage":"s","until":"2026-12-08T08:00:00Z","gateType":"ScheduledStart","timing":"Before","gateId":"s/before/0","message":"weekly"}"#
        );
        assert_eq!(read(&text), Ok(gate));
    }

    #[test]
    fn reading_names_the_kind_and_the_field_it_refuses() {
        let base = r#""at":"2026-12-07T00:00:00Z","run":"r""#;
        let e = read(&format!(r#"{{{base},"kind":"RunStarted","gateId":"x"}}"#)).unwrap_err();
        assert!(
            e.contains("a RunStarted event has no field `gateId`"),
            "{e}"
        );
        let e = read(&format!(r#"{{{base},"kind":"StageStarted"}}"#)).unwrap_err();
        assert!(
            e.contains("a StageStarted event needs the field `stage`"),
            "{e}"
        );
        let e = read(&format!(
            r#"{{{base},"kind":"RunCreated","nodeImages":[]}}"#
        ))
        .unwrap_err();
        assert!(
            e.contains("a RunCreated event has no field `nodeImages`"),
            "{e}"
        );
        let e = read(&format!(r#"{{{base},"kind":"RunCreated","colour":"red"}}"#)).unwrap_err();
        assert!(e.contains("unknown field `colour`"), "{e}");
        let e = read(&format!(r#"{{{base},"kind":"Exploded"}}"#)).unwrap_err();
        assert!(e.contains("unknown variant `Exploded`"), "{e}");
        // A MemberStarted without nodeImages has none (that is how an empty list is written).
        let ev = read(&format!(
            r#"{{{base},"kind":"MemberStarted","stage":"s","group":"g","member":"m","operationId":"r/m"}}"#
        ))
        .expect("reads");
        assert!(ev.node_images().is_empty());
        assert_eq!(ev.operation_id(), Some("r/m"));
        assert_eq!(ev.kind(), EventKind::MemberStarted);
    }
}
