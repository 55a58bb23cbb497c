//! What goes into the engine: [`Input`] — an operator's [`Command`], an [`Observation`] of the
//! world, or a timeout — and the types they carry. This is the engine's whole input vocabulary,
//! the same JSON every host sends (`bindings/ABI.md`).

use crate::model::{
    AutoUpgradeProfile, Freeze, GateTiming, Member, NodePool, ReleaseCatalog, SkipTarget,
    Timestamp, UpdateRunSpec, UpdateStrategy,
};
use serde::{Deserialize, Serialize};

/// An input: what a user asks, what the world reports, or that time has passed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::large_enum_variant)] // inputs are transient; boxing would only burden callers
pub enum Input {
    /// An operator / API command.
    Command(Command),
    /// Something observed in the world.
    Observation(Observation),
    /// Time has advanced to `now`; fire due timers.
    Timeout,
}

/// Operator / API commands. Each is validated; a refused command changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "type",
    deny_unknown_fields
)]
#[allow(clippy::large_enum_variant)] // commands are transient; boxing would only burden callers
pub enum Command {
    /// Create or replace a member.
    UpsertMember {
        /// The member.
        member: Member,
    },
    /// Delete a member (refused while a started, unfinished run includes it).
    DeleteMember {
        /// Member name.
        name: String,
    },
    /// Create or replace a stored strategy (existing runs keep their copy).
    UpsertStrategy {
        /// Strategy name.
        name: String,
        /// The strategy.
        strategy: UpdateStrategy,
    },
    /// Delete a stored strategy.
    DeleteStrategy {
        /// Strategy name.
        name: String,
    },
    /// Create a run (not started).
    CreateRun {
        /// The run.
        run: UpdateRunSpec,
    },
    /// Replace a run's spec; only before it starts.
    UpdateRun {
        /// The run.
        run: UpdateRunSpec,
    },
    /// Delete a run (NotStarted, Stopped, Failed, Completed or Skipped).
    DeleteRun {
        /// Run name.
        name: String,
    },
    /// Start a run, or resume a Stopped / Failed one.
    StartRun {
        /// Run name.
        name: String,
    },
    /// Stop a run: no new member upgrades; in-flight ones finish.
    StopRun {
        /// Run name.
        name: String,
    },
    /// Skip members, groups, stages or after-stage waits.
    Skip {
        /// Run name.
        run: String,
        /// Targets; all are checked before any is applied.
        targets: Vec<SkipTarget>,
    },
    /// Complete a Pending gate (approve it, or open a scheduled gate early).
    CompleteGate {
        /// Run name.
        run: String,
        /// Which gate.
        gate: GateSelector,
        /// Who (audit record).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// Fail a Pending gate: an inconclusive HealthCheck gate a person judged unhealthy, or an
    /// approval refused. The gate's stage (or group) fails and the run stops as for a
    /// failure threshold.
    FailGate {
        /// Run name.
        run: String,
        /// Which gate.
        gate: GateSelector,
        /// Who (audit record).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// Why (shown on the gate and in the run's error).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Create a retry run over the failed / skipped / pending members of a finished run,
    /// pinned to the same resolved versions.
    CreateRetryRun {
        /// New run name.
        name: String,
        /// The finished run.
        from: String,
    },
    /// Replace the fleet freeze calendar.
    SetFreezes {
        /// Dated exclusions.
        freezes: Vec<Freeze>,
    },
    /// Replace the release catalog.
    SetCatalog {
        /// The catalog.
        catalog: ReleaseCatalog,
    },
    /// Create or replace an auto-upgrade profile. Creating one, or changing its channel,
    /// `targetKubernetesVersion` or `longTermSupport`, starts nothing: the profile acts on the
    /// next release that moves its target (or a member joining behind it); `generateUpdateRun`
    /// acts now. Re-enabling a profile catches up on the releases it missed while disabled.
    UpsertProfile {
        /// The profile.
        profile: AutoUpgradeProfile,
    },
    /// Delete an auto-upgrade profile (the runs it generated stay, and go on).
    DeleteProfile {
        /// Profile name.
        name: String,
    },
    /// Create (not start) the run for the profile's current target, or nothing when every member
    /// is at it; the run that exists for that target already is returned as it is
    /// ([`crate::Engine::generation_preview`] says which, before or after).
    GenerateUpdateRun {
        /// Profile name.
        profile: String,
    },
}

/// Which gate: by id, or by position (the first Pending gate there).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateSelector {
    /// Gate id (wins over position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Stage name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Group name, for group gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Before or After.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<GateTiming>,
}

/// What the world reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "type",
    deny_unknown_fields
)]
pub enum Observation {
    /// A member upgrade operation succeeded.
    UpgradeSucceeded {
        /// The operation.
        operation_id: String,
    },
    /// A member upgrade operation failed.
    UpgradeFailed {
        /// The operation.
        operation_id: String,
        /// What the cluster said.
        message: String,
    },
    /// One measurement of a health check ([`crate::HostCommand::MeasureCheck`]) was taken.
    /// Unknown or already-counted measurement ids are ignored.
    CheckMeasured {
        /// The measurement.
        measurement_id: String,
        /// A query's samples (empty: no data), decided by the check's conditions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        values: Option<Vec<crate::health::Sample>>,
        /// The verdict, for sources that give one, and for errors.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<crate::health::Verdict>,
        /// What the source said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A member's observed versions.
    MemberObserved {
        /// Member name.
        name: String,
        /// Control-plane version.
        kubernetes_version: String,
        /// Node pools as observed.
        node_pools: Vec<NodePool>,
    },
    /// A Kubernetes version became (or will become) available in a region.
    KubernetesReleased {
        /// Version.
        version: String,
        /// Region (`*` for all).
        region: String,
        /// Since when.
        #[serde(deserialize_with = "crate::time::de_timestamp")]
        since: Timestamp,
        /// A preview release (never targeted by a profile).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        preview: bool,
    },
    /// A node image became (or will become) available in a region.
    NodeImageReleased {
        /// Version.
        version: String,
        /// Region (`*` for all).
        region: String,
        /// Since when.
        #[serde(deserialize_with = "crate::time::de_timestamp")]
        since: Timestamp,
        /// A security-patch image (what the `SecurityPatch` channel rolls out).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        security_patch: bool,
    },
}
