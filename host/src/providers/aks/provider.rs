//! [`AksProvider`]: the [`Provider`] contract over Azure Resource Manager, for AKS clusters named
//! by their `clusterResourceId`. Reads go through [`super::model`] (what waverun understands of
//! AKS's JSON, and the bodies it sends back), calls through [`super::arm`] (tokens, rate limits,
//! 401 once, 429). What is upgraded how:
//!
//! - **Full** with a control-plane target: one `PUT` of the managed cluster with
//!   `kubernetesVersion` and every pool's `orchestratorVersion` at the target, as `az aks upgrade`
//!   does. AKS then upgrades the control plane, then the pools (each with its own surge and drain
//!   settings), and moves each pool to the newest node image it offers. One long-running
//!   operation keeps the single-writer rule trivially and leaves a trace AKS keeps (the desired
//!   `kubernetesVersion`), which is what makes a start whose outcome is unknown answerable. The
//!   pools' images are pinned the only way the API allows: a pool whose newest offered image is
//!   not the one the run asks for is refused before anything is written.
//! - **ControlPlaneOnly**: one `PUT` with the cluster's `kubernetesVersion` alone; a legacy
//!   cluster (AKS upgrades every pool with it) is refused.
//! - **NodeImageOnly** (and Full whose control plane is at target): per pool, one at a time (AKS
//!   runs one operation per cluster), `POST upgradeNodeImageVersion` when the image asked for is
//!   the newest AKS offers the pool, or a `PUT` of the pool with `nodeImageVersion` when it is one
//!   of its `recentlyUsedVersions` (a rollback); any other image is refused before anything is
//!   written. The next pool is started by `get-operation` when the one before it has finished.
//!
//! The provider's id of an operation ([`Handle`], JSON) holds its kind, its target and the
//! polling URLs ARM gave (`Azure-AsyncOperation`, `Location`); the daemon stores it with the
//! operation, so a restarted daemon polls the same URLs and never writes again. Success is what
//! the cluster runs, read back, not only the operation's status.
//!
//! Checks: the pre-flight reads the cluster (and, for a new control-plane version, its upgrade
//! profile) and health reads the cluster; [`model::preflight_of`] and [`model::health_of`]
//! judge what was read.

use super::arm::{ArmCallError, ArmClient, ArmResponse};
use super::model::{self, AksCluster, ClusterId, PoolSelection, PowerState};
use crate::clock::{Clock, SystemClock};
use crate::providers::{
    measurement_error, ClusterTarget, Described, OperationPhase, OperationReport, Provider,
    ProviderError, ProviderErrorCode, ProviderMetric, Releases, Started, UpgradeRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use waverun_core::health::Measurement;
use waverun_core::UpgradeType;

/// How long to wait before asking about an operation when ARM did not say (`Retry-After`), as
/// the Azure SDKs' pollers do.
pub const DEFAULT_POLL_SECONDS: u64 = 30;
/// How many pages of a list are followed before giving up (a `nextLink` loop).
const MAX_PAGES: usize = 100;

/// The provider's id of an operation, stored by the daemon (JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handle {
    /// `cluster` (one PUT of the cluster) or `nodeImages` (per pool, one at a time).
    pub kind: HandleKind,
    /// The control plane's target, for a cluster upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The control plane alone: the pools stay at their version.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control_plane_only: bool,
    /// Each pool's target image, for node images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<(String, String)>,
    /// The `Azure-AsyncOperation` URL of the last write, when ARM gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_operation: Option<String>,
    /// The `Location` URL of the last write, when ARM gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The pool the URLs are about, for node images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// What an operation does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HandleKind {
    /// A PUT of the managed cluster (Full, ControlPlaneOnly).
    #[default]
    Cluster,
    /// Node images, pool by pool.
    NodeImages,
}

impl Handle {
    fn of(request: &UpgradeRequest) -> Handle {
        match (&request.control_plane, request.upgrade_type) {
            (Some(v), UpgradeType::ControlPlaneOnly) => Handle {
                kind: HandleKind::Cluster,
                kubernetes_version: Some(v.clone()),
                control_plane_only: true,
                ..Handle::default()
            },
            (Some(v), UpgradeType::Full) => Handle {
                kind: HandleKind::Cluster,
                kubernetes_version: Some(v.clone()),
                images: images_of(request),
                ..Handle::default()
            },
            _ => Handle {
                kind: HandleKind::NodeImages,
                images: images_of(request),
                ..Handle::default()
            },
        }
    }

    fn id(&self) -> String {
        serde_json::to_string(self).expect("a handle serialises")
    }

    fn with_urls(mut self, r: &ArmResponse, pool: Option<&str>) -> Handle {
        self.async_operation = r.azure_async_operation.clone();
        self.location = r.location.clone();
        self.pool = pool.map(str::to_string);
        self
    }
}

fn images_of(request: &UpgradeRequest) -> Vec<(String, String)> {
    request
        .node_images
        .iter()
        .map(|i| (i.node_pool.clone(), i.image_version.clone()))
        .collect()
}

/// What the cluster shows about an upgrade towards a handle's target.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Progress {
    /// It runs the target.
    Done,
    /// An operation towards the target is running.
    Running,
    /// The cluster or a pool failed (its `provisioningError`).
    Failed(String),
    /// Node images: the pools before it are done, this one is next (pool, image).
    Next(String, String),
    /// The target is asked for, nothing runs, and the cluster is not there.
    Stalled(String),
    /// Something else runs on the cluster.
    Busy(String),
    /// No trace of an upgrade towards the target.
    Untouched,
}

/// A write that moves the cluster towards its target.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Write {
    /// PUT the cluster (Full or ControlPlaneOnly).
    Cluster,
    /// `POST upgradeNodeImageVersion` on the pool.
    NewestImage(String),
    /// PUT the pool with `nodeImageVersion` (a rollback to a recently used image).
    PinnedImage(String, String),
}

/// The `aks` provider.
pub struct AksProvider {
    name: String,
    arm: ArmClient,
    /// The subscription whose `locations/{region}` lists releases: configured, else the first
    /// member's described.
    releases_subscription: std::sync::Mutex<Option<String>>,
    /// Seconds between polls when ARM did not say (`Retry-After`).
    poll_seconds: u64,
}

impl std::fmt::Debug for AksProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AksProvider")
            .field("name", &self.name)
            .field("arm", &self.arm)
            .finish()
    }
}

impl AksProvider {
    /// A provider named `name` over `arm`, listing releases in `releases_subscription` (else in
    /// the first described member's).
    pub fn new(
        name: impl Into<String>,
        arm: ArmClient,
        releases_subscription: Option<String>,
    ) -> AksProvider {
        AksProvider {
            name: name.into(),
            arm,
            releases_subscription: std::sync::Mutex::new(releases_subscription),
            poll_seconds: DEFAULT_POLL_SECONDS,
        }
    }

    /// Polls every `seconds` when ARM does not say (default [`DEFAULT_POLL_SECONDS`]).
    pub fn with_poll_seconds(mut self, seconds: u64) -> AksProvider {
        self.poll_seconds = seconds.max(1);
        self
    }

    /// Its ARM client (metrics).
    pub fn arm(&self) -> &ArmClient {
        &self.arm
    }

    fn now(&self) -> i64 {
        SystemClock.now_ms()
    }

    fn get(&self, path_or_url: &str) -> Result<ArmResponse, ProviderError> {
        self.arm.get(self.now(), path_or_url).map_err(refusal)
    }

    /// Every item of a paged list (`value`, following `nextLink`).
    fn list(&self, path: &str) -> Result<Value, ProviderError> {
        let mut items = Vec::new();
        let mut next = Some(path.to_string());
        for _ in 0..MAX_PAGES {
            let Some(url) = next.take() else {
                return Ok(serde_json::json!({ "value": items }));
            };
            let page = self.get(&url)?.body;
            if let Some(v) = page.get("value").and_then(Value::as_array) {
                items.extend(v.iter().cloned());
            }
            next = page
                .get("nextLink")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
        }
        Err(ProviderError::new(
            ProviderErrorCode::Internal,
            format!("{path}: more than {MAX_PAGES} pages (a nextLink loop?)"),
        ))
    }

    /// The cluster, read (its body and what waverun understands of it).
    fn read(&self, id: &ClusterId) -> Result<(Value, AksCluster), ProviderError> {
        let body = self.get(&id.path())?.body;
        let cluster = AksCluster::from_json(&body, None).map_err(ProviderError::from)?;
        Ok((body, cluster))
    }

    /// The pool's upgrade profile (`latestNodeImageVersion`, `recentlyUsedVersions`).
    fn pool_profile(&self, id: &ClusterId, pool: &str) -> Result<Value, ProviderError> {
        let path = format!("{}/agentPools/{pool}/upgradeProfiles/default", id.path());
        Ok(self.get(&path)?.body)
    }

    /// How each pool of `handle` moves to its image: the write, or a refusal when AKS cannot
    /// put the image asked for on it.
    fn image_write(&self, id: &ClusterId, pool: &str, image: &str) -> Result<Write, ProviderError> {
        let profile = self.pool_profile(id, pool)?;
        let props = profile.get("properties").unwrap_or(&Value::Null);
        let latest = props
            .get("latestNodeImageVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if latest == image {
            return Ok(Write::NewestImage(pool.to_string()));
        }
        let recent = props
            .get("recentlyUsedVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("nodeImageVersion").and_then(Value::as_str))
            .any(|v| v == image);
        if recent {
            return Ok(Write::PinnedImage(pool.to_string(), image.to_string()));
        }
        Err(ProviderError::new(
            ProviderErrorCode::NotAllowed,
            format!(
                "pool {pool}: AKS can move it only to its newest image {latest:?} (or back to one \
                 of its recentlyUsedVersions), and the run asks for {image:?}; refused rather than \
                 upgrading to another image"
            ),
        ))
    }

    /// Where the cluster is with respect to `handle`'s target.
    fn progress(&self, c: &AksCluster, handle: &Handle) -> Progress {
        if c.provisioning_state.eq_ignore_ascii_case("Failed") {
            let why = c
                .provisioning_error
                .as_ref()
                .map_or_else(|| "no error given".to_string(), |e| e.to_string());
            return Progress::Failed(format!("the cluster's last operation failed: {why}"));
        }
        match handle.kind {
            HandleKind::Cluster => {
                let target = handle.kubernetes_version.as_deref().unwrap_or_default();
                let pools_at = handle.control_plane_only
                    || c.pools.iter().all(|p| {
                        p.current_orchestrator_version
                            .as_deref()
                            .or(p.orchestrator_version.as_deref())
                            .is_none_or(|v| v == target)
                    });
                if c.current_kubernetes_version == target && pools_at && !c.busy() {
                    let off: Vec<String> = handle
                        .images
                        .iter()
                        .filter_map(|(pool, img)| match c.pool(pool) {
                            Some(p) if p.node_image_version == *img => None,
                            Some(p) => Some(format!("{pool} runs {}", p.node_image_version)),
                            None => Some(format!("{pool} is gone")),
                        })
                        .collect();
                    return if off.is_empty() {
                        Progress::Done
                    } else {
                        Progress::Failed(format!(
                            "the cluster runs {target}, but not the images asked for ({})",
                            off.join(", ")
                        ))
                    };
                }
                match (c.kubernetes_version == target, c.busy()) {
                    (true, true) => Progress::Running,
                    (false, true) => Progress::Busy(busy_with(c)),
                    (true, false) => Progress::Stalled(format!(
                        "AKS has {target} as the cluster's version, runs {} and nothing is \
                         running on it",
                        c.current_kubernetes_version
                    )),
                    (false, false) => Progress::Untouched,
                }
            }
            HandleKind::NodeImages => {
                let mut next = None;
                let mut moved = false;
                for (pool, image) in &handle.images {
                    let Some(p) = c.pool(pool) else {
                        return Progress::Failed(format!(
                            "the cluster has no pool {pool} any more"
                        ));
                    };
                    if p.node_image_version == *image {
                        moved = true;
                    } else if p
                        .provisioning_state
                        .eq_ignore_ascii_case("UpgradingNodeImageVersion")
                    {
                        return Progress::Running;
                    } else if p.provisioning_state.eq_ignore_ascii_case("Failed") {
                        let why = p
                            .provisioning_error
                            .as_ref()
                            .map_or_else(|| "no error given".to_string(), |e| e.to_string());
                        return Progress::Failed(format!("pool {pool} failed: {why}"));
                    } else if next.is_none() {
                        next = Some((pool.clone(), image.clone()));
                    }
                }
                match (next, c.busy()) {
                    (None, false) => Progress::Done,
                    // Every pool at its image, the cluster settling.
                    (None, true) => Progress::Running,
                    (Some(_), true) => Progress::Busy(busy_with(c)),
                    // The pools before it are done: the next one.
                    (Some((pool, image)), false) if moved || handle.pool.is_some() => {
                        Progress::Next(pool, image)
                    }
                    (Some(_), false) => Progress::Untouched,
                }
            }
        }
    }

    /// Carries out `write`; the handle with its polling URLs.
    fn write(
        &self,
        id: &ClusterId,
        body: &Value,
        write: &Write,
        handle: Handle,
    ) -> Result<(Handle, u64), ProviderError> {
        let now = self.now();
        let (r, pool) = match write {
            Write::Cluster => {
                let target = handle.kubernetes_version.as_deref().unwrap_or_default();
                let pools = if handle.control_plane_only {
                    PoolSelection::ControlPlaneOnly
                } else {
                    PoolSelection::All
                };
                let put = model::cluster_upgrade_body(body, target, &pools)
                    .map_err(ProviderError::from)?;
                let etag = model::if_match(body).map(str::to_string);
                let r = self
                    .arm
                    .put(now, &id.path(), &put, etag.as_deref())
                    .map_err(write_refusal)?;
                (r, None)
            }
            Write::NewestImage(pool) => {
                let path = format!("{}/agentPools/{pool}/upgradeNodeImageVersion", id.path());
                let r = self.arm.post(now, &path, None).map_err(write_refusal)?;
                (r, Some(pool))
            }
            Write::PinnedImage(pool, image) => {
                let path = format!("{}/agentPools/{pool}", id.path());
                let got = self.get(&path)?.body;
                let profile = self.pool_profile(id, pool)?;
                let put = model::pool_image_rollback_body(&got, image, &profile)
                    .map_err(ProviderError::from)?;
                let etag = model::if_match(&got).map(str::to_string);
                let r = self
                    .arm
                    .put(now, &path, &put, etag.as_deref())
                    .map_err(write_refusal)?;
                (r, Some(pool))
            }
        };
        let poll = r.retry_after.unwrap_or(self.poll_seconds).max(1);
        Ok((handle.with_urls(&r, pool.map(String::as_str)), poll))
    }

    /// Before any write: the pools' images can be put on them as asked (else refused), and the
    /// first write to make.
    fn first_write(
        &self,
        id: &ClusterId,
        c: &AksCluster,
        handle: &Handle,
    ) -> Result<Write, ProviderError> {
        match handle.kind {
            HandleKind::Cluster => {
                for (pool, image) in &handle.images {
                    // A Full upgrade gives each pool the newest image AKS offers it.
                    if let Write::PinnedImage(..) = self.image_write(id, pool, image)? {
                        return Err(ProviderError::new(
                            ProviderErrorCode::NotAllowed,
                            format!(
                                "pool {pool}: a Full upgrade gives it AKS's newest image, and the \
                                 run asks for the older {image:?}; refused rather than upgrading \
                                 to another image"
                            ),
                        ));
                    }
                }
                if handle.control_plane_only {
                    if let Some(why) = c.legacy_reason() {
                        return Err(ProviderError::new(
                            ProviderErrorCode::NotAllowed,
                            format!(
                                "{} is a legacy cluster ({why}): AKS upgrades every pool with its \
                                 control plane, so a ControlPlaneOnly upgrade cannot be done",
                                c.name
                            ),
                        ));
                    }
                }
                Ok(Write::Cluster)
            }
            HandleKind::NodeImages => {
                let mut first = None;
                for (pool, image) in &handle.images {
                    let p = c.pool(pool).ok_or_else(|| {
                        ProviderError::new(
                            ProviderErrorCode::NotAllowed,
                            format!("the cluster has no pool {pool}"),
                        )
                    })?;
                    if p.node_image_version == *image {
                        continue;
                    }
                    let w = self.image_write(id, pool, image)?;
                    first.get_or_insert(w);
                }
                first.ok_or_else(|| {
                    ProviderError::new(
                        ProviderErrorCode::Internal,
                        "every pool already runs its image",
                    )
                })
            }
        }
    }

    /// The operation's status from its `Azure-AsyncOperation` URL, when it has one and it
    /// answers: `(status, error message, Retry-After)`. A failure to read it is not the
    /// operation's failure (fact 5): `None`, and the resource decides.
    fn async_status(&self, handle: &Handle) -> Option<(String, Option<String>, Option<u64>)> {
        let url = handle.async_operation.as_deref()?;
        match self.arm.get(self.now(), url) {
            Ok(r) => {
                let status = r.body.get("status")?.as_str()?.to_string();
                let error = r.body.get("error").map(|e| {
                    let code = e.get("code").and_then(Value::as_str).unwrap_or("Failed");
                    let message = e.get("message").and_then(Value::as_str).unwrap_or("");
                    format!("{code}: {message}")
                });
                Some((status, error, r.retry_after))
            }
            Err(e) => {
                tracing::debug!(provider = %self.name, error = %e, "reading an operation's status failed; reading the cluster");
                None
            }
        }
    }

    /// Where the operation under `handle` is, or the next pool started.
    fn follow(
        &self,
        id: &ClusterId,
        handle: Handle,
        key: &str,
    ) -> Result<OperationReport, ProviderError> {
        let status = self.async_status(&handle);
        let poll = status
            .as_ref()
            .and_then(|(_, _, r)| *r)
            .unwrap_or(self.poll_seconds)
            .max(1);
        let (body, c) = self.read(id)?;
        let report = |phase, message: Option<String>, handle: &Handle, poll: u64| OperationReport {
            operation_id: handle.id(),
            phase,
            message,
            poll_after_seconds: poll,
        };
        if let Some((s, Some(error), _)) = &status {
            if s.eq_ignore_ascii_case("Failed") || s.eq_ignore_ascii_case("Canceled") {
                let phase = if s.eq_ignore_ascii_case("Canceled") {
                    OperationPhase::Canceled
                } else {
                    OperationPhase::Failed
                };
                return Ok(report(phase, Some(error.clone()), &handle, 0));
            }
        }
        match self.progress(&c, &handle) {
            Progress::Done => Ok(report(OperationPhase::Succeeded, None, &handle, 0)),
            Progress::Failed(why) => Ok(report(OperationPhase::Failed, Some(why), &handle, 0)),
            Progress::Running | Progress::Busy(_) => {
                Ok(report(OperationPhase::Running, None, &handle, poll))
            }
            Progress::Stalled(why) => Ok(report(OperationPhase::Failed, Some(why), &handle, 0)),
            Progress::Next(pool, image) => {
                if c.power_state == PowerState::Stopped {
                    return Ok(report(
                        OperationPhase::Failed,
                        Some(stopped(&c)),
                        &handle,
                        0,
                    ));
                }
                tracing::info!(provider = %self.name, operation = key, pool = %pool, "the pool before it is done: the next pool's image is written");
                let w = self.image_write(id, &pool, &image)?;
                let (handle, poll) = self.write(id, &body, &w, handle)?;
                Ok(report(OperationPhase::Running, None, &handle, poll))
            }
            Progress::Untouched => Err(ProviderError::new(
                ProviderErrorCode::NotFound,
                format!("no upgrade of {id} towards its target is known to AKS"),
            )),
        }
    }
}

/// `judge`, asked again while ARM (or the client's own budget) throttles it, as long as the
/// wait it asks for ends before `timeout`: a check shares the subscription's read budget with
/// the upgrades, and a measurement that waits its turn is not an error.
fn patiently<T>(
    timeout: std::time::Duration,
    judge: impl Fn() -> Result<T, ProviderError>,
) -> Result<T, ProviderError> {
    let end = std::time::Instant::now() + timeout;
    loop {
        match judge() {
            Err(e) if e.code == ProviderErrorCode::Throttled => {
                let wait =
                    std::time::Duration::from_secs(e.retry_after_seconds.unwrap_or(1).max(1));
                if std::time::Instant::now() + wait >= end {
                    return Err(e);
                }
                std::thread::sleep(wait);
            }
            other => return other,
        }
    }
}

/// A judgement as a measurement; a call that failed is an `Error` (never a pass).
fn measured(j: Result<model::Judgement, ProviderError>, what: &str) -> Measurement {
    match j {
        Ok(j) => Measurement {
            values: None,
            verdict: Some(j.verdict),
            message: Some(j.message),
        },
        Err(e) => measurement_error(format!("aks {what}: {e}")),
    }
}

/// What a busy cluster is doing, for `waitingOn`.
fn busy_with(c: &AksCluster) -> String {
    let mut what = Vec::new();
    if !["Succeeded", "Failed", "Canceled"]
        .iter()
        .any(|t| c.provisioning_state.eq_ignore_ascii_case(t))
    {
        what.push(format!("the cluster is {}", c.provisioning_state));
    }
    for p in c.pools.iter().filter(|p| p.busy()) {
        what.push(format!("pool {} is {}", p.name, p.provisioning_state));
    }
    format!(
        "{}: an operation waverun did not start; waiting for it to end",
        what.join(", ")
    )
}

fn stopped(c: &AksCluster) -> String {
    format!(
        "{} is Stopped (properties.powerState.code): AKS runs no operation on a stopped cluster; \
         start it (az aks start) and retry the run",
        c.name
    )
}

/// An ARM call's failure as the lifecycle's retry classes see it.
fn refusal(e: ArmCallError) -> ProviderError {
    match e {
        ArmCallError::Provider(p) => p,
        ArmCallError::Status(e) => {
            let detail = model::ArmErrorDetail {
                code: e.code,
                message: e.message,
                subcode: e.subcode,
                ..model::ArmErrorDetail::default()
            };
            let mut p = model::classify(e.status, Some(&detail), &[]);
            p.retry_after_seconds = e.retry_after;
            if let Some(c) = &e.correlation_id {
                p.message.push_str(&format!(" [correlation id {c}]"));
            }
            p
        }
    }
}

/// A write's failure: as [`refusal`], and a server error (5xx) leaves its outcome unknown (the
/// write may have been applied before the gateway failed): asked about, never sent blindly.
fn write_refusal(e: ArmCallError) -> ProviderError {
    let server_error = matches!(&e, ArmCallError::Status(s) if s.status >= 500);
    let mut p = refusal(e);
    if server_error {
        p.uncertain = true;
    }
    p
}

fn cluster_id(target: &ClusterTarget) -> Result<ClusterId, ProviderError> {
    let id = target.cluster_ref.as_deref().ok_or_else(|| {
        ProviderError::new(
            ProviderErrorCode::InvalidRequest,
            format!(
                "member {}: no clusterResourceId (/subscriptions/…/resourceGroups/…/providers/\
                 Microsoft.ContainerService/managedClusters/NAME)",
                target.member
            ),
        )
    })?;
    ClusterId::parse(id).map_err(ProviderError::from)
}

impl Provider for AksProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn describe(&self, target: &ClusterTarget) -> Result<Described, ProviderError> {
        let id = cluster_id(target)?;
        let (_, c) = self.read(&id)?;
        self.releases_subscription
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| id.subscription().to_string());
        let configs = self.list(&format!("{}/maintenanceConfigurations", id.path()))?;
        let m = model::maintenance_of(&configs).map_err(ProviderError::from)?;
        for note in &m.notes {
            tracing::info!(provider = %self.name, member = %target.member, "{note}");
        }
        let mut d = c.described();
        d.maintenance = Some(m.maintenance);
        Ok(d)
    }

    fn start_upgrade(
        &self,
        target: &ClusterTarget,
        request: &UpgradeRequest,
    ) -> Result<Started, ProviderError> {
        let id = cluster_id(target)?;
        let handle = Handle::of(request);
        let (body, c) = self.read(&id)?;
        let started = |phase, handle: &Handle, poll, at_target| Started {
            operation_id: handle.id(),
            phase,
            already_at_target: at_target,
            poll_after_seconds: poll,
        };
        match self.progress(&c, &handle) {
            Progress::Done => return Ok(started(OperationPhase::Succeeded, &handle, 0, true)),
            // Started before (AKS keeps no key: the desired version is the trace).
            Progress::Running => {
                return Ok(started(
                    OperationPhase::Running,
                    &handle,
                    self.poll_seconds,
                    false,
                ))
            }
            Progress::Busy(why) => {
                return Err(ProviderError::new(
                    ProviderErrorCode::OperationInProgress,
                    why,
                ))
            }
            // A failed attempt is retried by sending the same versions again (fact 15).
            Progress::Failed(_)
            | Progress::Next(..)
            | Progress::Stalled(_)
            | Progress::Untouched => {}
        }
        if c.power_state == PowerState::Stopped {
            return Err(ProviderError::new(
                ProviderErrorCode::NotAllowed,
                stopped(&c),
            ));
        }
        let write = self.first_write(&id, &c, &handle)?;
        let (handle, poll) = self.write(&id, &body, &write, handle)?;
        Ok(started(OperationPhase::Running, &handle, poll, false))
    }

    fn get_operation(
        &self,
        target: &ClusterTarget,
        idempotency_key: &str,
    ) -> Result<OperationReport, ProviderError> {
        self.get_operation_by_id(target, idempotency_key, None)
    }

    fn get_operation_by_id(
        &self,
        target: &ClusterTarget,
        idempotency_key: &str,
        operation_id: Option<&str>,
    ) -> Result<OperationReport, ProviderError> {
        let id = cluster_id(target)?;
        let Some(handle) = operation_id.and_then(|h| serde_json::from_str::<Handle>(h).ok()) else {
            return Err(ProviderError::new(
                ProviderErrorCode::NotFound,
                format!(
                    "operation {idempotency_key}: AKS keeps no idempotency key; it is looked for \
                     by its target"
                ),
            ));
        };
        self.follow(&id, handle, idempotency_key)
    }

    fn get_operation_for(
        &self,
        target: &ClusterTarget,
        request: &UpgradeRequest,
        operation_id: Option<&str>,
    ) -> Result<OperationReport, ProviderError> {
        let id = cluster_id(target)?;
        let handle = match operation_id.and_then(|h| serde_json::from_str::<Handle>(h).ok()) {
            Some(h) => h,
            None => Handle::of(request),
        };
        self.follow(&id, handle, &request.idempotency_key)
    }

    fn metrics(&self) -> Vec<ProviderMetric> {
        self.arm.metrics().snapshot()
    }

    /// The cluster read (and, for a new control-plane version, its upgrade profile), judged by
    /// [`model::preflight_of`], within `timeout`.
    fn preflight(
        &self,
        target: &ClusterTarget,
        upgrade: Option<&waverun_core::UpgradeOperation>,
        timeout: std::time::Duration,
    ) -> Measurement {
        let judge = || -> Result<model::Judgement, ProviderError> {
            let id = cluster_id(target)?;
            let (_, c) = self.read(&id)?;
            let goal = upgrade.and_then(|u| u.kubernetes_version.as_deref());
            let offered = match goal {
                Some(v) if v != c.current_kubernetes_version => {
                    let path = format!("{}/upgradeProfiles/default", id.path());
                    let profile = self.get(&path)?.body;
                    model::control_plane_upgrades(&profile).map_err(ProviderError::from)?
                }
                _ => Vec::new(),
            };
            Ok(model::preflight_of(&c, goal, &offered))
        };
        measured(patiently(timeout, judge), "pre-flight")
    }

    /// The cluster read, judged by [`model::health_of`].
    fn health(&self, target: &ClusterTarget, timeout: std::time::Duration) -> Measurement {
        let judge = || -> Result<model::Judgement, ProviderError> {
            let id = cluster_id(target)?;
            let (_, c) = self.read(&id)?;
            Ok(model::health_of(&c))
        };
        measured(patiently(timeout, judge), "health")
    }

    fn list_releases(&self, region: &str) -> Result<Releases, ProviderError> {
        let subscription = self
            .releases_subscription
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                ProviderError::new(
                    ProviderErrorCode::Unavailable,
                    "no subscription to list releases in yet (no member described, and no \
                     releasesSubscription configured)",
                )
            })?;
        let loc = format!(
            "/subscriptions/{subscription}/providers/Microsoft.ContainerService/locations/{region}"
        );
        let kubernetes = self.get(&format!("{loc}/kubernetesVersions"))?.body;
        // The node-image catalogue is a preview route: a cloud without it lists no images.
        let images = match self.get(&format!("{loc}/nodeImageVersions")) {
            Ok(r) => Some(r.body),
            Err(e) if !e.retryable => {
                tracing::info!(provider = %self.name, region, error = %e, "no node-image catalogue");
                None
            }
            Err(e) => return Err(e),
        };
        model::releases_of(&kubernetes, images.as_ref()).map_err(ProviderError::from)
    }
}
