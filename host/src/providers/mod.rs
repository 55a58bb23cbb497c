//! Cluster providers: how the daemon reaches members. One contract, [`Provider`], shaped after
//! the exec provider protocol (`shared/spec/exec-provider.md`): `describe` a cluster, start an
//! upgrade under an idempotency key (the engine's operation id: the same key never starts a
//! second operation), and ask where an operation is. Calls may block (the exec provider runs a
//! process); the daemon makes them off its engine task.
//!
//! - [`SimulatedProvider`]: clusters described in a file (the scenario format's members and
//!   behaviour), upgrading in fleet time; its record of operations is in the daemon's database,
//!   so a daemon killed mid-upgrade finds the upgrade still running, or finished.

mod simulated;

pub use simulated::{SimulatedCluster, SimulatedProvider};

use std::fmt;
use waverun_core::{PoolImage, UpgradeType};

/// A member as a provider sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterTarget {
    /// The member's name.
    pub member: String,
    /// The provider's own id of the cluster (`clusterRef`), when it has one.
    pub cluster_ref: Option<String>,
}

/// `start-upgrade`'s parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeRequest {
    /// The same key never starts a second operation (the engine's operation id).
    pub idempotency_key: String,
    /// Full, ControlPlaneOnly or NodeImageOnly.
    pub upgrade_type: UpgradeType,
    /// The control plane's target version, when it moves.
    pub control_plane: Option<String>,
    /// The node pools' target images, for the pools that move.
    pub node_images: Vec<PoolImage>,
}

/// Where an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationPhase {
    /// Accepted, not started.
    Pending,
    /// In progress.
    Running,
    /// Finished: the cluster is at its target.
    Succeeded,
    /// Finished: the upgrade failed.
    Failed,
    /// Cancelled on the platform.
    Canceled,
    /// The provider cannot tell.
    Unknown,
}

impl OperationPhase {
    /// Whether the operation has ended.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            OperationPhase::Succeeded | OperationPhase::Failed | OperationPhase::Canceled
        )
    }
}

/// `start-upgrade`'s answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// The provider's id of the operation.
    pub operation_id: String,
    /// Where it is now.
    pub phase: OperationPhase,
    /// The cluster was at the target already (and `phase` is `Succeeded`).
    pub already_at_target: bool,
    /// When to ask again, in fleet seconds.
    pub poll_after_seconds: u64,
}

/// `get-operation`'s answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationReport {
    /// The provider's id of the operation.
    pub operation_id: String,
    /// Where it is.
    pub phase: OperationPhase,
    /// What the platform says (a failure's reason).
    pub message: Option<String>,
    /// When to ask again, in fleet seconds (for an operation still going).
    pub poll_after_seconds: u64,
}

/// `describe`'s answer: what the cluster runs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// The control plane's version.
    pub kubernetes_version: String,
    /// Each node pool's image.
    pub node_images: Vec<PoolImage>,
    /// The region.
    pub region: String,
    /// An operation is in progress on it.
    pub busy: bool,
}

/// The protocol's error codes (exec-provider.md, "Error codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderErrorCode {
    /// The request is malformed.
    InvalidRequest,
    /// The provider cannot do this.
    Unsupported,
    /// No such cluster or operation.
    NotFound,
    /// Another operation is running on the cluster (retryable).
    OperationInProgress,
    /// Try later (retryable).
    Unavailable,
    /// The platform refuses (version skew, stopped cluster, ...).
    NotAllowed,
    /// Anything else.
    Internal,
}

/// A provider's refusal or failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    /// The code.
    pub code: ProviderErrorCode,
    /// What happened.
    pub message: String,
    /// Whether the same call may succeed later.
    pub retryable: bool,
}

impl ProviderError {
    /// An error with the code's usual retryability.
    pub fn new(code: ProviderErrorCode, message: impl Into<String>) -> ProviderError {
        let retryable = matches!(
            code,
            ProviderErrorCode::OperationInProgress | ProviderErrorCode::Unavailable
        );
        ProviderError {
            code,
            message: message.into(),
            retryable,
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for ProviderError {}

/// A way to reach clusters.
pub trait Provider: Send + Sync {
    /// The provider's name (`simulated`, `exec`, ...), as members name it.
    fn name(&self) -> &str;
    /// What the cluster runs now. Read-only and cheap.
    fn describe(&self, cluster: &ClusterTarget) -> Result<Described, ProviderError>;
    /// Starts an upgrade, or answers for the one already started under the same key. Returns as
    /// soon as the platform accepted it.
    fn start_upgrade(
        &self,
        cluster: &ClusterTarget,
        request: &UpgradeRequest,
    ) -> Result<Started, ProviderError>;
    /// Where the operation started under `idempotency_key` is.
    fn get_operation(
        &self,
        cluster: &ClusterTarget,
        idempotency_key: &str,
    ) -> Result<OperationReport, ProviderError>;
}
