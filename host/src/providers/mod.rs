//! Cluster providers: how the daemon reaches members. One contract, [`Provider`], shaped after
//! the exec provider protocol (`shared/spec/exec-provider.md`): `describe` a cluster, start an
//! upgrade under an idempotency key (the engine's operation id: the same key never starts a
//! second operation), and ask where an operation is. Calls may block (the exec provider runs a
//! process); the daemon makes them off its engine task.
//!
//! - [`ExecProvider`]: an operator's command per call (`exec.waverun.dev/v1alpha1`), one
//!   process in its own process group, request on stdin, response on stdout.
//! - [`SimulatedProvider`]: clusters described in a file (the scenario format's members and
//!   behaviour), upgrading in fleet time; its record of operations is in the daemon's database,
//!   so a daemon killed mid-upgrade finds the upgrade still running, or finished.

pub mod aks;
pub(crate) mod exec;
mod simulated;

pub use exec::{ExecConfig, ExecProvider, ExecTimeouts, SecretSource, API_VERSION};
pub use simulated::{SimulatedCluster, SimulatedProvider};

use std::collections::BTreeMap;
use std::fmt;
use waverun_core::health::{Measurement, Verdict};
use waverun_core::{Maintenance, NodePool, PoolImage, UpgradeType};

/// A member as a provider sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterTarget {
    /// The member's name.
    pub member: String,
    /// The provider's own id of the cluster (`clusterRef`), when it has one: a plain string,
    /// or a JSON object of the operator's identifiers.
    pub cluster_ref: Option<String>,
    /// The member's region, when the engine knows it.
    pub region: Option<String>,
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
    /// Each node pool: name, OS and image.
    pub node_pools: Vec<NodePool>,
    /// The region.
    pub region: String,
    /// An operation is in progress on it.
    pub busy: bool,
    /// Whether it runs (`Running`) or is stopped (`Stopped`), when the platform says: a stopped
    /// cluster runs no upgrade.
    pub power_state: Option<String>,
    /// Its maintenance windows, when the platform has them.
    pub maintenance: Option<Maintenance>,
    /// Labels the platform reports (a member's own labels win).
    pub labels: BTreeMap<String, String>,
}

impl Described {
    /// Whether the cluster runs `image` on its pool.
    pub fn runs(&self, image: &PoolImage) -> bool {
        self.node_pools
            .iter()
            .any(|p| p.name == image.node_pool && p.image_version == image.image_version)
    }
}

/// One release a provider reports for a region.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    /// The version (`1.34.1`, or a node image `AKSUbuntu-2204-202612.01.0`).
    pub version: String,
    /// Since when it is available there (RFC 3339), if the provider said.
    pub since: Option<String>,
    /// A preview Kubernetes version (in the catalog, never targeted by a profile).
    pub preview: bool,
    /// A security-patch node image (what the `SecurityPatch` channel rolls out).
    pub security_patch: bool,
}

/// `list-releases`' answer for one region, previews included (flagged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Releases {
    /// Kubernetes versions.
    pub kubernetes: Vec<Release>,
    /// Node images.
    pub node_images: Vec<Release>,
}

/// The protocol's error codes (exec-provider.md, "Error codes"). Each has a retry class
/// ([`ProviderErrorCode::retries`]), and the class decides, whatever a response's `retryable`
/// says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProviderErrorCode {
    /// The request is malformed.
    InvalidRequest,
    /// The provider cannot do this.
    Unsupported,
    /// No such cluster or operation.
    NotFound,
    /// The platform's credentials were refused.
    Unauthenticated,
    /// The credentials may not do this.
    PermissionDenied,
    /// The cluster changed since it was described (re-describe, retry once).
    PreconditionFailed,
    /// The platform is rate limiting (retryable).
    Throttled,
    /// Another operation is running on the cluster (retryable).
    OperationInProgress,
    /// Try later (retryable).
    Unavailable,
    /// The platform refuses (version skew, stopped cluster, ...).
    NotAllowed,
    /// Anything else (retryable, at most twice).
    Internal,
}

impl ProviderErrorCode {
    /// How many times a call refused with this code may be made again (`None`: until it
    /// passes, with backoff, honouring `retryAfterSeconds`): `InvalidRequest`, `Unsupported`,
    /// `NotFound`, `Unauthenticated`, `PermissionDenied` and `NotAllowed` never;
    /// `PreconditionFailed` once (after describing the cluster again); `Internal` at most twice;
    /// `OperationInProgress`, `Throttled` and `Unavailable` until they pass.
    pub fn retries(self) -> Option<u32> {
        use ProviderErrorCode::*;
        match self {
            InvalidRequest | Unsupported | NotFound | Unauthenticated | PermissionDenied
            | NotAllowed => Some(0),
            PreconditionFailed => Some(1),
            Internal => Some(2),
            OperationInProgress | Throttled | Unavailable => None,
        }
    }

    /// Whether a call refused with this code may be made again.
    pub fn retryable(self) -> bool {
        self.retries() != Some(0)
    }
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
    /// When to try again, if the provider said.
    pub retry_after_seconds: Option<u64>,
    /// A mutating call whose outcome is not known (it timed out, crashed, or answered
    /// nonsense): the operation may or may not have started. Never failed, never sent under a
    /// new key: asked about with `get-operation` under the same key.
    pub uncertain: bool,
}

impl ProviderError {
    /// An error with its code's retry class.
    pub fn new(code: ProviderErrorCode, message: impl Into<String>) -> ProviderError {
        ProviderError {
            code,
            message: message.into(),
            retryable: code.retryable(),
            retry_after_seconds: None,
            uncertain: false,
        }
    }

    /// The protocol's code for its name (`Internal` for one it does not know).
    pub fn code_named(name: &str) -> ProviderErrorCode {
        use ProviderErrorCode::*;
        match name {
            "InvalidRequest" => InvalidRequest,
            "Unsupported" => Unsupported,
            "NotFound" => NotFound,
            "Unauthenticated" => Unauthenticated,
            "PermissionDenied" => PermissionDenied,
            "PreconditionFailed" => PreconditionFailed,
            "OperationInProgress" => OperationInProgress,
            "Throttled" => Throttled,
            "Unavailable" => Unavailable,
            "NotAllowed" => NotAllowed,
            _ => Internal,
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for ProviderError {}

/// One measurement a provider exports (the daemon's `/metrics` adds a `provider` label).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderMetric {
    /// The metric (`waverun_arm_requests_total`, …): a counter's name ends in `_total`.
    pub name: &'static str,
    /// Whether it only goes up (a counter) or is a gauge.
    pub counter: bool,
    /// Its labels, in order.
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub value: u64,
}

/// A way to reach clusters.
pub trait Provider: Send + Sync {
    /// The provider's name (`simulated`, `exec`, ...), as members name it.
    fn name(&self) -> &str;
    /// What the cluster runs now. Read-only and cheap.
    fn describe(&self, cluster: &ClusterTarget) -> Result<Described, ProviderError>;
    /// What each of many clusters runs now, in their order (a bulk registration, the
    /// observer's rounds): by default [`Provider::describe`] of each, one after another (a
    /// platform's rate limits pace them); a provider that can answer for many clusters in
    /// fewer calls does.
    fn describe_many(&self, clusters: &[ClusterTarget]) -> Vec<Result<Described, ProviderError>> {
        clusters.iter().map(|c| self.describe(c)).collect()
    }
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
    /// Where the operation is, asked by the provider's own id of it (`operation_id`, once
    /// `start-upgrade` or `get-operation` gave one) and its key: `get-operation`'s
    /// `{operationId, idempotencyKey}`. A provider keyed on the idempotency key alone need not
    /// implement it.
    fn get_operation_by_id(
        &self,
        cluster: &ClusterTarget,
        idempotency_key: &str,
        operation_id: Option<&str>,
    ) -> Result<OperationReport, ProviderError> {
        let _ = operation_id;
        self.get_operation(cluster, idempotency_key)
    }
    /// Where the operation asked for by `request` is: [`Provider::get_operation_by_id`], for
    /// providers that need the request itself to answer (a platform with no idempotency key,
    /// where the trace of an upgrade is its target: the `aks` provider).
    fn get_operation_for(
        &self,
        cluster: &ClusterTarget,
        request: &UpgradeRequest,
        operation_id: Option<&str>,
    ) -> Result<OperationReport, ProviderError> {
        self.get_operation_by_id(cluster, &request.idempotency_key, operation_id)
    }
    /// What the provider measured (calls, throttling), for `/metrics`.
    fn metrics(&self) -> Vec<ProviderMetric> {
        Vec::new()
    }
    /// The releases available in `region`. A provider without a release calendar of its own
    /// (the simulated one: its fleet file has the releases) answers `Unsupported`.
    fn list_releases(&self, region: &str) -> Result<Releases, ProviderError> {
        let _ = region;
        Err(ProviderError::new(
            ProviderErrorCode::Unsupported,
            format!("{} lists no releases", self.name()),
        ))
    }
    /// The provider's own pre-flight of a member (the strategy's `preflight` check, source
    /// `provider: {}`): may `upgrade` start on `cluster` now? One measurement, taken within
    /// `timeout` (the check's); blocking like the other calls. By default a provider has none:
    /// an `Error`, never a pass.
    fn preflight(
        &self,
        cluster: &ClusterTarget,
        upgrade: Option<&waverun_core::UpgradeOperation>,
        timeout: std::time::Duration,
    ) -> Measurement {
        let _ = (cluster, upgrade, timeout);
        measurement_error(format!("provider {} has no pre-flight check", self.name()))
    }
    /// The provider's own health check of a member (a check whose source is `provider: {}`,
    /// after an upgrade or at a gate), taken within `timeout`. One measurement; blocking. By
    /// default an `Error`.
    fn health(&self, cluster: &ClusterTarget, timeout: std::time::Duration) -> Measurement {
        let _ = (cluster, timeout);
        measurement_error(format!("provider {} has no health check", self.name()))
    }
}

/// The pre-flight any provider can answer from `describe`: a cluster that is stopped, or busy
/// with another operation, may not start an upgrade now (`Fail`, saying which); otherwise it
/// may (`Pass`).
pub fn preflight_of(member: &str, d: &Described) -> Measurement {
    let (verdict, message) = if d.busy {
        (
            Verdict::Fail,
            format!("{member}: another operation is in progress"),
        )
    } else if d
        .power_state
        .as_deref()
        .is_some_and(|p| p.eq_ignore_ascii_case("stopped"))
    {
        (Verdict::Fail, format!("{member}: the cluster is stopped"))
    } else {
        (
            Verdict::Pass,
            format!("{member}: running Kubernetes {}", d.kubernetes_version),
        )
    };
    Measurement {
        values: None,
        verdict: Some(verdict),
        message: Some(message),
    }
}

/// A measurement that went wrong (verdict `Error`) saying `message`.
pub fn measurement_error(message: impl Into<String>) -> Measurement {
    Measurement {
        values: None,
        verdict: Some(Verdict::Error),
        message: Some(message.into()),
    }
}
