//! AKS's JSON, read into what waverun understands and built into what waverun sends: the pure
//! half of the `aks` provider. No I/O and no clock: every function takes the bodies the provider
//! read (as raw [`serde_json::Value`]) and returns values or bodies. Facts cited as "fact N" are
//! the numbered facts of `shared/reference/aks/README.md` (api-version `2026-08-01`).
//!
//! - [`ClusterId`]: a `clusterResourceId`, checked against ARM's naming rules.
//! - [`AksCluster`] (with [`AksPool`]): a managed cluster GET (and optionally its agent pool
//!   list), and [`AksCluster::described`], waverun's [`Described`].
//! - [`maintenance_of`]: the maintenance configurations as waverun's [`Maintenance`].
//! - [`releases_of`]: the Kubernetes and node image catalogues as [`Releases`].
//! - Bodies: [`cluster_upgrade_body`], [`pool_upgrade_body`], [`pool_image_rollback_body`],
//!   [`force_upgrade_override`], and [`if_match`] for the `If-Match` header.
//! - [`classify_arm_error`]: an ARM error answer as a [`ProviderError`].
//! - Checks: [`control_plane_upgrades`] (the cluster's upgrade profile), [`preflight_of`] and
//!   [`health_of`], a member's pre-flight and health as verdicts.
//!
//! # Decisions
//!
//! * **OS.** waverun's [`NodePool::os_type`] is the pool's `osType` (`Linux` or `Windows`,
//!   either case; missing means `Linux`, the swagger's default). The OS SKU (`Ubuntu`,
//!   `AzureLinux`, `Windows2022`, ...) is not an OS in waverun's model: it shows in the image
//!   family of `nodeImageVersion` (`AKSUbuntu-2204gen2containerd-…`, `AKSAzureLinux-…`), which is
//!   what the engine's image selection groups by, and is kept on [`AksPool::os_sku`]. Any other
//!   `osType` is refused ([`ModelErrorKind::Unsupported`]).
//! * **Snapshots.** A pool whose `creationData.sourceResourceId` names a
//!   `Microsoft.ContainerService/snapshots` resource is `fromSnapshot`.
//! * **Labels.** None. Azure `tags` are not Kubernetes labels (other syntax, edited for other
//!   reasons): turning them into labels would let an edit of a tag move a cluster between a
//!   strategy's stages without anyone touching waverun. waverun adds its own `waverun.dev/…`
//!   labels; a member's own labels are the place for anything else.
//! * **Busy.** The cluster or any pool has a `provisioningState` other than `Succeeded`,
//!   `Failed` or `Canceled`. A stopped cluster is not busy; [`AksCluster::power_state`] says it.
//! * **Maintenance.** See [`maintenance_of`]: each field, and what is done where waverun's window
//!   cannot say what AKS says.
//! * **Checks.** The pre-flight fails a stopped cluster (fact 14), a busy one (an operation
//!   waverun did not start, fact 10) and a target the cluster's upgrade profile does not offer
//!   (not available in its region, or a skipped minor: fact 6, 11). A `Failed` cluster passes:
//!   sending the versions again is how AKS retries (fact 15). Health fails a stopped cluster
//!   and a `Failed` cluster or pool (with its `provisioningError`), and is inconclusive while
//!   an operation runs. ARM reports no node readiness and nothing before a write about
//!   deprecated API usage (fact 12 is known only when a PUT is refused): node readiness is
//!   for a `prometheus` or `exec` check, and the deprecated-API block fails the upgrade.
//! * **Read-only fields.** [`CLUSTER_READ_ONLY`] and [`POOL_READ_ONLY`] are every property the
//!   swagger marks `readOnly: true` under `ManagedCluster` and `AgentPool` (following `$ref`,
//!   `allOf`, arrays and maps), plus ARM's envelope (`id`, `name`, `type`, `systemData`,
//!   read-only in common-types v6 `Resource`, which the swagger only references). A test derives
//!   both lists from the swagger and checks no built body keeps any of them.

use crate::providers::{Described, ProviderError, ProviderErrorCode, Release, Releases};
use chrono::{DateTime, Datelike, Duration, NaiveDate};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use waverun_core::error::Errors;
use waverun_core::health::Verdict;
use waverun_core::version::KubeVersion;
use waverun_core::window::{
    parse_utc_offset, DateSpan, DayOfWeek, MaintenanceWindow, Schedule, WeekIndex,
};
use waverun_core::{Maintenance, NodePool, OsType};

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// What kind of problem a [`ModelError`] is; decides its [`ProviderErrorCode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelErrorKind {
    /// AKS's JSON is not what the API promises (a field missing or of the wrong type):
    /// `Internal`.
    Malformed,
    /// A valid AKS setting waverun cannot express faithfully (a maintenance field it cannot
    /// carry, an OS it does not know): `Unsupported`.
    Unsupported,
    /// A request AKS would refuse, refused before it is sent (a control-plane-only upgrade of a
    /// legacy cluster, a rollback to an image AKS does not offer): `NotAllowed`.
    NotAllowed,
    /// A value the caller gave is wrong (a `clusterResourceId`, a pool name, a time):
    /// `InvalidRequest`.
    InvalidRequest,
}

/// A field of AKS's JSON (or of a caller's value) and the rule it broke:
/// `properties.agentPoolProfiles[2].name: missing`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// What kind of problem it is.
    pub kind: ModelErrorKind,
    /// The JSON path of the field (`properties.agentPoolProfiles[2].name`), or the value's name.
    pub path: String,
    /// The rule, for humans.
    pub message: String,
}

impl ModelError {
    fn new(kind: ModelErrorKind, path: impl Into<String>, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            path: path.into(),
            message: message.into(),
        }
    }

    fn missing(path: impl Into<String>) -> Self {
        ModelError::new(ModelErrorKind::Malformed, path, "missing")
    }

    fn malformed(path: impl Into<String>, message: impl Into<String>) -> Self {
        ModelError::new(ModelErrorKind::Malformed, path, message)
    }

    fn unsupported(path: impl Into<String>, message: impl Into<String>) -> Self {
        ModelError::new(ModelErrorKind::Unsupported, path, message)
    }

    fn not_allowed(path: impl Into<String>, message: impl Into<String>) -> Self {
        ModelError::new(ModelErrorKind::NotAllowed, path, message)
    }

    fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        ModelError::new(ModelErrorKind::InvalidRequest, path, message)
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ModelError {}

impl From<ModelError> for ProviderError {
    fn from(e: ModelError) -> ProviderError {
        let code = match e.kind {
            ModelErrorKind::Malformed => ProviderErrorCode::Internal,
            ModelErrorKind::Unsupported => ProviderErrorCode::Unsupported,
            ModelErrorKind::NotAllowed => ProviderErrorCode::NotAllowed,
            ModelErrorKind::InvalidRequest => ProviderErrorCode::InvalidRequest,
        };
        ProviderError::new(code, e.to_string())
    }
}

// ---------------------------------------------------------------------------------------------
// ClusterId
// ---------------------------------------------------------------------------------------------

const CLUSTER_ID_FORM: &str =
    "/subscriptions/{id}/resourceGroups/{name}/providers/Microsoft.ContainerService/managedClusters/{name}";

/// A managed cluster's ARM id, `clusterResourceId`:
/// `/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}`.
///
/// The fixed segments match in any case, as ARM matches them; the subscription is a GUID (kept
/// lower-case), the resource group 1–90 letters, digits, `_`, `-`, `.`, `(` or `)` not ending in
/// `.`, the name 1–63 letters, digits, `-` or `_` starting and ending with a letter or digit (the
/// swagger's `resourceName` pattern). Two ids are equal when they name the same resource (ARM
/// names are case-insensitive); [`Display`](fmt::Display) and [`path`](ClusterId::path) give the
/// canonical form, with the resource group and name as written.
#[derive(Clone, Debug)]
pub struct ClusterId {
    subscription: String,
    resource_group: String,
    name: String,
}

impl ClusterId {
    /// Parses and checks a `clusterResourceId`.
    pub fn parse(id: &str) -> Result<ClusterId, ModelError> {
        let err =
            |message: String| ModelError::invalid(format!("clusterResourceId {id:?}"), message);
        let shape = || err(format!("expected {CLUSTER_ID_FORM}"));
        let Some(rest) = id.strip_prefix('/') else {
            return Err(shape());
        };
        let seg: Vec<&str> = rest.split('/').collect();
        let fixed = [
            (0, "subscriptions"),
            (2, "resourceGroups"),
            (4, "providers"),
            (5, "Microsoft.ContainerService"),
            (6, "managedClusters"),
        ];
        if seg.len() != 8
            || fixed
                .iter()
                .any(|(i, word)| !seg[*i].eq_ignore_ascii_case(word))
        {
            return Err(shape());
        }
        let (subscription, resource_group, name) = (seg[1], seg[3], seg[7]);
        if !is_guid(subscription) {
            return Err(err(format!(
                "subscription {subscription:?} is not a GUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
            )));
        }
        let rg_chars = resource_group.chars().count();
        if !(1..=90).contains(&rg_chars)
            || resource_group.ends_with('.')
            || !resource_group
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')'))
        {
            return Err(err(format!(
                "resource group {resource_group:?} must be 1-90 letters, digits, '_', '-', '.', \
                 '(' or ')', not ending in '.'"
            )));
        }
        let b = name.as_bytes();
        let edge_ok = |c: u8| c.is_ascii_alphanumeric();
        if !(1..=63).contains(&b.len())
            || !edge_ok(b[0])
            || !edge_ok(b[b.len() - 1])
            || !b
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        {
            return Err(err(format!(
                "managed cluster name {name:?} must be 1-63 letters, digits, '-' or '_', \
                 starting and ending with a letter or digit"
            )));
        }
        Ok(ClusterId {
            subscription: subscription.to_ascii_lowercase(),
            resource_group: resource_group.to_string(),
            name: name.to_string(),
        })
    }

    /// The subscription id (lower-case).
    pub fn subscription(&self) -> &str {
        &self.subscription
    }

    /// The resource group, as written.
    pub fn resource_group(&self) -> &str {
        &self.resource_group
    }

    /// The managed cluster's name, as written.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The canonical ARM path (what [`Display`](fmt::Display) prints), for building URLs.
    pub fn path(&self) -> String {
        self.to_string()
    }

    fn key(&self) -> (String, String, String) {
        (
            self.subscription.clone(),
            self.resource_group.to_lowercase(),
            self.name.to_ascii_lowercase(),
        )
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.ContainerService/managedClusters/{}",
            self.subscription, self.resource_group, self.name
        )
    }
}

impl FromStr for ClusterId {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<ClusterId, ModelError> {
        ClusterId::parse(s)
    }
}

impl PartialEq for ClusterId {
    fn eq(&self, other: &ClusterId) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ClusterId {}

impl Hash for ClusterId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

fn is_guid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

// ---------------------------------------------------------------------------------------------
// The cluster and its pools
// ---------------------------------------------------------------------------------------------

/// `properties.powerState.code` (fact 14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerState {
    /// `Running`.
    Running,
    /// `Stopped`: no operation runs on a stopped cluster.
    Stopped,
    /// Missing, `null`, or a code AKS did not document.
    Unknown,
}

/// A pool's `mode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolMode {
    /// `System`: runs the cluster's system pods; a cluster has at least one.
    System,
    /// `User`.
    User,
    /// Another mode (`Gateway`, or one newer than this code), as given.
    Other(String),
}

/// `properties.status.provisioningError` of a failed cluster or pool (fact 15).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProvisioningError {
    /// ARM's error code.
    pub code: Option<String>,
    /// The message.
    pub message: Option<String>,
    /// AKS's `subcode`, when it gave one.
    pub subcode: Option<String>,
}

impl fmt::Display for ProvisioningError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code.as_deref().unwrap_or("error"))?;
        if let Some(s) = &self.subcode {
            write!(f, " ({s})")?;
        }
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

/// One agent pool, from a cluster's `agentPoolProfiles[]` or an agent pool GET / list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AksPool {
    /// The pool's name.
    pub name: String,
    /// `mode`, when given.
    pub mode: Option<PoolMode>,
    /// `osType` (missing: `Linux`).
    pub os_type: OsType,
    /// `osSKU` (`Ubuntu`, `AzureLinux`, `Windows2022`, ...), when given.
    pub os_sku: Option<String>,
    /// `type` (`VirtualMachineScaleSets`, `AvailabilitySet`, `VirtualMachines`), when given.
    pub pool_type: Option<String>,
    /// `orchestratorVersion`: the desired version, maybe a `major.minor` alias (fact 6).
    pub orchestrator_version: Option<String>,
    /// `currentOrchestratorVersion`: what runs.
    pub current_orchestrator_version: Option<String>,
    /// `nodeImageVersion`.
    pub node_image_version: String,
    /// The pool's eTag (`agentPoolProfiles[].eTag` or a pool GET's `properties.eTag`).
    pub etag: Option<String>,
    /// `provisioningState`.
    pub provisioning_state: String,
    /// `powerState.code`.
    pub power_state: PowerState,
    /// `status.provisioningError`, when the pool failed.
    pub provisioning_error: Option<ProvisioningError>,
    /// Created from a node image snapshot (`creationData.sourceResourceId`).
    pub from_snapshot: bool,
}

impl AksPool {
    /// Whether an operation is running on the pool (its `provisioningState` is not terminal).
    pub fn busy(&self) -> bool {
        !is_terminal_state(&self.provisioning_state)
    }
}

/// A managed cluster as a GET answered it (fact 6, 8, 14, 15, 16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AksCluster {
    /// `id`, when given.
    pub id: Option<String>,
    /// `name`.
    pub name: String,
    /// `location`: the region.
    pub location: String,
    /// `properties.kubernetesVersion`: the desired version, maybe a `major.minor` alias.
    pub kubernetes_version: String,
    /// `properties.currentKubernetesVersion`: what the control plane runs.
    pub current_kubernetes_version: String,
    /// The top-level `eTag`.
    pub etag: Option<String>,
    /// `properties.provisioningState`.
    pub provisioning_state: String,
    /// `properties.powerState.code`.
    pub power_state: PowerState,
    /// `properties.maxAgentPools`, when given.
    pub max_agent_pools: Option<u64>,
    /// `properties.status.provisioningError`, when the cluster failed.
    pub provisioning_error: Option<ProvisioningError>,
    /// The pools: the agent pool list's when one was given, else `agentPoolProfiles`.
    pub pools: Vec<AksPool>,
}

/// The smallest `maxAgentPools` of a cluster that is not legacy (fact 16).
pub const MODERN_MAX_AGENT_POOLS: u64 = 8;

impl AksCluster {
    /// Reads a managed cluster GET body and, when given, the GET of its agent pools
    /// (`{"value": [...]}`, every page merged: a `nextLink` is refused), whose pools win over the
    /// cluster's `agentPoolProfiles`.
    pub fn from_json(
        cluster: &Value,
        agent_pools: Option<&Value>,
    ) -> Result<AksCluster, ModelError> {
        let name = req_str(cluster, "", "name")?;
        let location = req_str(cluster, "", "location")?;
        let props = req_obj(cluster, "", "properties")?;
        let pools = match agent_pools {
            Some(list) => {
                let items = list_items(list, "")?;
                let mut pools = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let base = format!("value[{i}]");
                    let name = req_str(item, &base, "name")?;
                    let pprops = req_obj(item, &base, "properties")?;
                    pools.push(pool_of(name, pprops, &join(&base, "properties"))?);
                }
                pools
            }
            None => {
                let profiles = req_array(props, "properties", "agentPoolProfiles")?;
                let mut pools = Vec::with_capacity(profiles.len());
                for (i, p) in profiles.iter().enumerate() {
                    let base = format!("properties.agentPoolProfiles[{i}]");
                    let name = req_str(p, &base, "name")?;
                    pools.push(pool_of(name, p, &base)?);
                }
                pools
            }
        };
        for (i, p) in pools.iter().enumerate() {
            if pools[..i]
                .iter()
                .any(|q| q.name.eq_ignore_ascii_case(&p.name))
            {
                return Err(ModelError::malformed(
                    "pools",
                    format!("pool {:?} appears twice", p.name),
                ));
            }
        }
        Ok(AksCluster {
            id: opt_str(cluster, "", "id")?.map(str::to_string),
            name: name.to_string(),
            location: location.to_string(),
            kubernetes_version: req_str(props, "properties", "kubernetesVersion")?.to_string(),
            current_kubernetes_version: req_str(props, "properties", "currentKubernetesVersion")?
                .to_string(),
            etag: opt_str(cluster, "", "eTag")?.map(str::to_string),
            provisioning_state: req_str(props, "properties", "provisioningState")?.to_string(),
            power_state: power_state_of(props, "properties")?,
            max_agent_pools: opt_u64(props, "properties", "maxAgentPools")?,
            provisioning_error: provisioning_error_of(props, "properties")?,
            pools,
        })
    }

    /// Why the cluster is legacy, if it is (fact 16): `maxAgentPools` below
    /// [`MODERN_MAX_AGENT_POOLS`], or a pool of type `AvailabilitySet`. AKS upgrades every pool
    /// of a legacy cluster with its control plane.
    pub fn legacy_reason(&self) -> Option<String> {
        legacy_reason(
            self.max_agent_pools,
            self.pools
                .iter()
                .map(|p| (p.name.as_str(), p.pool_type.as_deref())),
        )
    }

    /// Whether the cluster is legacy (see [`legacy_reason`](AksCluster::legacy_reason)).
    pub fn is_legacy(&self) -> bool {
        self.legacy_reason().is_some()
    }

    /// Whether an operation is running on the cluster or any of its pools.
    pub fn busy(&self) -> bool {
        !is_terminal_state(&self.provisioning_state) || self.pools.iter().any(AksPool::busy)
    }

    /// The pool of that name (ARM names match in any case).
    pub fn pool(&self, name: &str) -> Option<&AksPool> {
        self.pools
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }

    /// waverun's view: the control plane's *current* version, each pool's OS and image, the
    /// region, busy, no labels (see the module's decisions). `maintenance` is `None`: the
    /// configurations are another GET; the provider sets it from [`maintenance_of`].
    pub fn described(&self) -> Described {
        Described {
            kubernetes_version: self.current_kubernetes_version.clone(),
            node_pools: self
                .pools
                .iter()
                .map(|p| NodePool {
                    name: p.name.clone(),
                    os_type: p.os_type,
                    image_version: p.node_image_version.clone(),
                    from_snapshot: p.from_snapshot,
                })
                .collect(),
            region: self.location.clone(),
            busy: self.busy(),
            power_state: match self.power_state {
                PowerState::Running => Some("Running".to_string()),
                PowerState::Stopped => Some("Stopped".to_string()),
                PowerState::Unknown => None,
            },
            maintenance: None,
            labels: BTreeMap::new(),
        }
    }
}

fn pool_of(name: &str, p: &Value, base: &str) -> Result<AksPool, ModelError> {
    let os_type = match opt_str(p, base, "osType")? {
        None => OsType::Linux,
        Some(s) if s.eq_ignore_ascii_case("Linux") => OsType::Linux,
        Some(s) if s.eq_ignore_ascii_case("Windows") => OsType::Windows,
        Some(s) => {
            return Err(ModelError::unsupported(
                join(base, "osType"),
                format!("{s:?} is neither Linux nor Windows"),
            ))
        }
    };
    let mode = opt_str(p, base, "mode")?.map(|m| {
        if m.eq_ignore_ascii_case("System") {
            PoolMode::System
        } else if m.eq_ignore_ascii_case("User") {
            PoolMode::User
        } else {
            PoolMode::Other(m.to_string())
        }
    });
    let from_snapshot = match get(p, "creationData") {
        Some(cd) => {
            let cd_base = join(base, "creationData");
            opt_str(cd, &cd_base, "sourceResourceId")?.is_some_and(|id| {
                id.to_ascii_lowercase()
                    .contains("/providers/microsoft.containerservice/snapshots/")
            })
        }
        None => false,
    };
    Ok(AksPool {
        name: name.to_string(),
        mode,
        os_type,
        os_sku: opt_str(p, base, "osSKU")?.map(str::to_string),
        pool_type: opt_str(p, base, "type")?.map(str::to_string),
        orchestrator_version: opt_str(p, base, "orchestratorVersion")?.map(str::to_string),
        current_orchestrator_version: opt_str(p, base, "currentOrchestratorVersion")?
            .map(str::to_string),
        node_image_version: req_str(p, base, "nodeImageVersion")?.to_string(),
        etag: opt_str(p, base, "eTag")?.map(str::to_string),
        provisioning_state: req_str(p, base, "provisioningState")?.to_string(),
        power_state: power_state_of(p, base)?,
        provisioning_error: provisioning_error_of(p, base)?,
        from_snapshot,
    })
}

fn is_terminal_state(state: &str) -> bool {
    ["Succeeded", "Failed", "Canceled"]
        .iter()
        .any(|t| state.eq_ignore_ascii_case(t))
}

fn power_state_of(obj: &Value, base: &str) -> Result<PowerState, ModelError> {
    let Some(ps) = get(obj, "powerState") else {
        return Ok(PowerState::Unknown);
    };
    let code = opt_str(ps, &join(base, "powerState"), "code")?;
    Ok(match code {
        Some(c) if c.eq_ignore_ascii_case("Running") => PowerState::Running,
        Some(c) if c.eq_ignore_ascii_case("Stopped") => PowerState::Stopped,
        _ => PowerState::Unknown,
    })
}

fn provisioning_error_of(obj: &Value, base: &str) -> Result<Option<ProvisioningError>, ModelError> {
    let Some(status) = get(obj, "status") else {
        return Ok(None);
    };
    let sbase = join(base, "status");
    let Some(pe) = get(status, "provisioningError") else {
        return Ok(None);
    };
    let pbase = join(&sbase, "provisioningError");
    Ok(Some(ProvisioningError {
        code: opt_str(pe, &pbase, "code")?.map(str::to_string),
        message: opt_str(pe, &pbase, "message")?.map(str::to_string),
        subcode: opt_str(pe, &pbase, "subcode")?.map(str::to_string),
    }))
}

fn legacy_reason<'a>(
    max_agent_pools: Option<u64>,
    mut pools: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Option<String> {
    if let Some(n) = max_agent_pools.filter(|n| *n < MODERN_MAX_AGENT_POOLS) {
        return Some(format!(
            "maxAgentPools is {n} (below {MODERN_MAX_AGENT_POOLS})"
        ));
    }
    pools
        .find(|(_, t)| t.is_some_and(|t| t.eq_ignore_ascii_case("AvailabilitySet")))
        .map(|(name, _)| format!("pool {name:?} is of type AvailabilitySet"))
}

// ---------------------------------------------------------------------------------------------
// Maintenance
// ---------------------------------------------------------------------------------------------

/// The maintenance configuration that becomes waverun's Kubernetes window.
pub const AUTO_UPGRADE_SCHEDULE: &str = "aksManagedAutoUpgradeSchedule";
/// The maintenance configuration that becomes waverun's node OS window.
pub const NODE_OS_UPGRADE_SCHEDULE: &str = "aksManagedNodeOSUpgradeSchedule";
/// The legacy configuration (`timeInWeek`), for AKS's own weekly releases.
pub const DEFAULT_CONFIGURATION: &str = "default";

/// [`maintenance_of`]'s answer: the windows, and what was set aside or adjusted, for the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AksMaintenance {
    /// The windows.
    pub maintenance: Maintenance,
    /// One sentence per configuration ignored or field adjusted (naming it).
    pub notes: Vec<String>,
}

/// The maintenance configurations (`GET MC/maintenanceConfigurations`, `{"value": [...]}`,
/// every page merged: a `nextLink` is refused) as waverun's windows (fact 18).
///
/// * `aksManagedAutoUpgradeSchedule` → [`Maintenance::kubernetes`] (governs `Full` and
///   `ControlPlaneOnly`); `aksManagedNodeOSUpgradeSchedule` → [`Maintenance::node_os`]
///   (`NodeImageOnly`). Names match in any case; one twice is refused.
/// * `default` (legacy `timeInWeek` hour slots) is **ignored**, with a note: AKS documents it
///   as the schedule of AKS's own weekly releases, not of Kubernetes or node image upgrades, and
///   its shape (a union of hour slots on several weekdays) is not one waverun window. Other
///   names (AKS allows none) are ignored with a note.
///
/// waverun's [`MaintenanceWindow`] is AKS's `maintenanceWindow` field for field; per field:
///
/// * `schedule`: exactly one of `daily {intervalDays}`, `weekly {intervalWeeks, dayOfWeek}`,
///   `absoluteMonthly {intervalMonths, dayOfMonth}`, `relativeMonthly {intervalMonths,
///   weekIndex, dayOfWeek}` is copied (`null` members count as absent); none, two, or an
///   unknown one is refused. Day names and week indexes match in any case.
/// * Intervals above 1: the weeks or months they skip depend on the date they count from. With
///   no `startDate`, AKS does not say which date that is, so such a window is **refused**
///   (Unsupported; set `startDate`). With one, `daily` and the monthly schedules count from
///   `startDate`'s day or month, as waverun does. `weekly` is **adjusted**: AKS counts weeks
///   from Sunday (Azure/AKS#5720: every 2 weeks on Sunday from Tuesday 2026-04-14 first opens on
///   2026-04-26) and waverun from Monday, so the window's `startDate` becomes AKS's first
///   occurrence on or after it, which makes the two agree on every occurrence (noted).
/// * `absoluteMonthly.dayOfMonth` 29–31: copied; waverun opens such a window on the last day of
///   a shorter month (its documented decision; AKS does not document what it does).
/// * `durationHours` (4–24), `startTime` (`HH:mm`): required, copied (no default: AKS's default
///   of 24 hours is the widest window).
/// * `utcOffset` (default `+00:00` in both), `startDate`, `notAllowedDates` (whole local dates,
///   both ends included, in both): copied.
/// * `notAllowedTime` (exact time spans) on these configurations: widened to the whole local
///   dates (in the window's `utcOffset`) they touch and added to `notAllowedDates` (a narrower
///   window; noted). `timeInWeek` on them: refused (it cannot narrow one window).
/// * Any other field of a configuration's `properties`, of `maintenanceWindow` or of a schedule
///   is **refused** (Unsupported): it may be a safety setting waverun would drop.
/// * Every window is then checked by waverun's own rules; a broken one is refused with its path.
pub fn maintenance_of(list: &Value) -> Result<AksMaintenance, ModelError> {
    let items = list_items(list, "")?;
    let mut out = AksMaintenance::default();
    for (i, item) in items.iter().enumerate() {
        let base = format!("value[{i}]");
        let name = req_str(item, &base, "name")?;
        let slot = if name.eq_ignore_ascii_case(AUTO_UPGRADE_SCHEDULE) {
            &mut out.maintenance.kubernetes
        } else if name.eq_ignore_ascii_case(NODE_OS_UPGRADE_SCHEDULE) {
            &mut out.maintenance.node_os
        } else if name.eq_ignore_ascii_case(DEFAULT_CONFIGURATION) {
            out.notes.push(format!(
                "maintenance configuration {name:?} ignored: it schedules AKS's own weekly \
                 releases, not Kubernetes or node image upgrades"
            ));
            continue;
        } else {
            out.notes.push(format!(
                "maintenance configuration {name:?} ignored: not one AKS documents"
            ));
            continue;
        };
        if slot.is_some() {
            return Err(ModelError::malformed(
                join(&base, "name"),
                format!("maintenance configuration {name:?} appears twice"),
            ));
        }
        let props = req_obj(item, &base, "properties")?;
        let window = window_of(name, props, &join(&base, "properties"), &mut out.notes)?;
        *slot = Some(Box::new(window));
    }
    Ok(out)
}

fn window_of(
    config: &str,
    props: &Value,
    base: &str,
    notes: &mut Vec<String>,
) -> Result<MaintenanceWindow, ModelError> {
    let unsupported =
        |path: String, msg: String| ModelError::unsupported(path, format!("{config}: {msg}"));
    refuse_unknown(
        config,
        props,
        base,
        &["maintenanceWindow", "timeInWeek", "notAllowedTime"],
    )?;
    if let Some(tiw) = opt_array(props, base, "timeInWeek")? {
        if !tiw.is_empty() {
            return Err(unsupported(
                join(base, "timeInWeek"),
                "hour slots on weekdays cannot narrow one maintenance window".into(),
            ));
        }
    }
    let wbase = join(base, "maintenanceWindow");
    let w = req_obj(props, base, "maintenanceWindow")?;
    refuse_unknown(
        config,
        w,
        &wbase,
        &[
            "schedule",
            "durationHours",
            "utcOffset",
            "startDate",
            "startTime",
            "notAllowedDates",
        ],
    )?;
    let sbase = join(&wbase, "schedule");
    let sched = req_obj(w, &wbase, "schedule")?;
    let kinds = ["daily", "weekly", "absoluteMonthly", "relativeMonthly"];
    let present: Vec<(&String, &Value)> = sched
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| !v.is_null())
        .collect();
    if let Some((k, _)) = present.iter().find(|(k, _)| !kinds.contains(&k.as_str())) {
        return Err(unsupported(
            join(&sbase, k),
            "a schedule type waverun does not know".into(),
        ));
    }
    let [(kind, body)] = present[..] else {
        return Err(ModelError::malformed(
            sbase,
            format!(
                "{config}: exactly one of daily, weekly, absoluteMonthly, relativeMonthly \
                 must be given ({} are)",
                present.len()
            ),
        ));
    };
    let kbase = join(&sbase, kind);
    let (schedule, interval, interval_field) = match kind.as_str() {
        "daily" => {
            refuse_unknown(config, body, &kbase, &["intervalDays"])?;
            let n = req_u32(body, &kbase, "intervalDays")?;
            (Schedule::Daily { interval_days: n }, n, "intervalDays")
        }
        "weekly" => {
            refuse_unknown(config, body, &kbase, &["intervalWeeks", "dayOfWeek"])?;
            let n = req_u32(body, &kbase, "intervalWeeks")?;
            let day = day_of_week(body, &kbase)?;
            (
                Schedule::Weekly {
                    interval_weeks: n,
                    day_of_week: day,
                },
                n,
                "intervalWeeks",
            )
        }
        "absoluteMonthly" => {
            refuse_unknown(config, body, &kbase, &["intervalMonths", "dayOfMonth"])?;
            let n = req_u32(body, &kbase, "intervalMonths")?;
            (
                Schedule::AbsoluteMonthly {
                    interval_months: n,
                    day_of_month: req_u32(body, &kbase, "dayOfMonth")?,
                },
                n,
                "intervalMonths",
            )
        }
        _ => {
            refuse_unknown(
                config,
                body,
                &kbase,
                &["intervalMonths", "weekIndex", "dayOfWeek"],
            )?;
            let n = req_u32(body, &kbase, "intervalMonths")?;
            let wi = req_str(body, &kbase, "weekIndex")?;
            let week_index = [
                ("First", WeekIndex::First),
                ("Second", WeekIndex::Second),
                ("Third", WeekIndex::Third),
                ("Fourth", WeekIndex::Fourth),
                ("Last", WeekIndex::Last),
            ]
            .into_iter()
            .find(|(s, _)| wi.eq_ignore_ascii_case(s))
            .map(|(_, w)| w)
            .ok_or_else(|| {
                unsupported(
                    join(&kbase, "weekIndex"),
                    format!("{wi:?} is not First, Second, Third, Fourth or Last"),
                )
            })?;
            (
                Schedule::RelativeMonthly {
                    interval_months: n,
                    day_of_week: day_of_week(body, &kbase)?,
                    week_index,
                },
                n,
                "intervalMonths",
            )
        }
    };
    let mut window = MaintenanceWindow {
        schedule,
        duration_hours: req_u32(w, &wbase, "durationHours")?,
        start_time: req_str(w, &wbase, "startTime")?.to_string(),
        utc_offset: opt_str(w, &wbase, "utcOffset")?.map(str::to_string),
        start_date: opt_str(w, &wbase, "startDate")?.map(str::to_string),
        not_allowed_dates: Vec::new(),
    };
    if let Some(spans) = opt_array(w, &wbase, "notAllowedDates")? {
        for (j, span) in spans.iter().enumerate() {
            let dbase = format!("{wbase}.notAllowedDates[{j}]");
            window.not_allowed_dates.push(DateSpan {
                start: req_str(span, &dbase, "start")?.to_string(),
                end: req_str(span, &dbase, "end")?.to_string(),
            });
        }
    }
    // Check the copied fields by waverun's rules before computing with them.
    let mut errors = Errors::default();
    window.validate(&wbase, &mut errors);
    if let Some(e) = errors.0.first() {
        return Err(unsupported(e.path.clone(), e.message.clone()));
    }
    if interval > 1 {
        let Some(start_date) = window.start_date.clone() else {
            return Err(unsupported(
                format!("{kbase}.{interval_field}"),
                format!(
                    "{interval_field} is {interval} but startDate is missing: AKS does not say \
                     from which date it counts, so waverun cannot tell when the window opens \
                     (set startDate on the configuration)"
                ),
            ));
        };
        if let Schedule::Weekly { day_of_week, .. } = &window.schedule {
            let first = aks_first_weekly(&start_date, *day_of_week, interval)
                .ok_or_else(|| ModelError::malformed(join(&wbase, "startDate"), "not a date"))?;
            if first != start_date {
                notes.push(format!(
                    "{config}: {wbase}.startDate {start_date} taken as {first}, AKS's first \
                     occurrence (it counts intervalWeeks in weeks from Sunday)"
                ));
                window.start_date = Some(first);
            }
        }
    }
    if let Some(spans) = opt_array(props, base, "notAllowedTime")? {
        // The offset was validated above.
        let offset = parse_utc_offset(window.utc_offset.as_deref().unwrap_or("+00:00"))
            .map_err(|e| unsupported(join(&wbase, "utcOffset"), e))?;
        for (j, span) in spans.iter().enumerate() {
            let tbase = format!("{base}.notAllowedTime[{j}]");
            let local_date = |field: &str| -> Result<String, ModelError> {
                let s = req_str(span, &tbase, field)?;
                let t = DateTime::parse_from_rfc3339(s).map_err(|e| {
                    ModelError::malformed(join(&tbase, field), format!("{s:?}: {e}"))
                })?;
                Ok(t.with_timezone(&offset).date_naive().to_string())
            };
            let (start, end) = (local_date("start")?, local_date("end")?);
            if end < start {
                return Err(ModelError::malformed(
                    join(&tbase, "end"),
                    format!("{config}: ends before it starts"),
                ));
            }
            notes.push(format!(
                "{config}: {tbase} closes the whole local dates {start}..{end}"
            ));
            window.not_allowed_dates.push(DateSpan { start, end });
        }
    }
    Ok(window)
}

fn day_of_week(body: &Value, base: &str) -> Result<DayOfWeek, ModelError> {
    let s = req_str(body, base, "dayOfWeek")?;
    [
        ("Monday", DayOfWeek::Monday),
        ("Tuesday", DayOfWeek::Tuesday),
        ("Wednesday", DayOfWeek::Wednesday),
        ("Thursday", DayOfWeek::Thursday),
        ("Friday", DayOfWeek::Friday),
        ("Saturday", DayOfWeek::Saturday),
        ("Sunday", DayOfWeek::Sunday),
    ]
    .into_iter()
    .find(|(n, _)| s.eq_ignore_ascii_case(n))
    .map(|(_, d)| d)
    .ok_or_else(|| {
        ModelError::malformed(join(base, "dayOfWeek"), format!("{s:?} is not a weekday"))
    })
}

/// AKS's first weekly occurrence on or after `start_date`: weeks run Sunday to Saturday, the
/// week holding `start_date` is period 0, and an occurrence before `start_date` does not count.
fn aks_first_weekly(start_date: &str, day: DayOfWeek, interval_weeks: u32) -> Option<String> {
    let start = NaiveDate::parse_from_str(start_date, "%Y-%m-%d").ok()?;
    let week_start = start - Duration::days(i64::from(start.weekday().num_days_from_sunday()));
    let mut first = week_start + Duration::days(i64::from(day.to_weekday().num_days_from_sunday()));
    if first < start {
        first += Duration::days(7 * i64::from(interval_weeks));
    }
    Some(first.format("%Y-%m-%d").to_string())
}

/// Refuses a non-null field of `obj` not in `known`: it may be a setting waverun would drop.
fn refuse_unknown(config: &str, obj: &Value, base: &str, known: &[&str]) -> Result<(), ModelError> {
    if let Some(m) = obj.as_object() {
        if let Some((k, _)) = m
            .iter()
            .find(|(k, v)| !v.is_null() && !known.contains(&k.as_str()))
        {
            return Err(ModelError::unsupported(
                join(base, k),
                format!("{config}: a field waverun does not know, refused rather than dropped"),
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Releases
// ---------------------------------------------------------------------------------------------

/// The region's catalogues as waverun's [`Releases`] (fact 7).
///
/// `kubernetes_versions` is `GET LOC/kubernetesVersions` (`{"values": [...]}`; `value` is
/// accepted too): every key of each entry's `patchVersions` is a release, `preview` when the
/// entry says `isPreview: true`; an entry without patch versions has nothing to target and adds
/// nothing. `node_image_versions`, when the provider read it (preview api-version), is
/// `GET LOC/nodeImageVersions` (`value` or `values`): each entry's `fullName`, or
/// `{os}-{sku}-{version}` when it has none. The catalogues carry no dates (`since` is `None`)
/// and no security-patch flag (`security_patch` is `false`: the node image catalogue's entries
/// are `{fullName, os, sku, version}` only). Sorted (Kubernetes by version), without duplicates.
pub fn releases_of(
    kubernetes_versions: &Value,
    node_image_versions: Option<&Value>,
) -> Result<Releases, ModelError> {
    let mut out = Releases::default();
    let (key, entries) = values_or_value(kubernetes_versions, "values")?;
    for (i, e) in entries.iter().enumerate() {
        let base = format!("{key}[{i}]");
        let preview = opt_bool(e, &base, "isPreview")?.unwrap_or(false);
        let Some(patches) = get(e, "patchVersions") else {
            continue;
        };
        let pbase = join(&base, "patchVersions");
        let patches = patches
            .as_object()
            .ok_or_else(|| ModelError::malformed(&pbase, "not an object"))?;
        for version in patches.keys() {
            KubeVersion::parse(version)
                .map_err(|m| ModelError::malformed(format!("{pbase}.{version:?}"), m))?;
            out.kubernetes.push(Release {
                version: version.clone(),
                since: None,
                preview,
                security_patch: false,
            });
        }
    }
    out.kubernetes.sort_by(|a, b| {
        // Parsed above.
        let (x, y) = (
            KubeVersion::parse(&a.version),
            KubeVersion::parse(&b.version),
        );
        x.ok().cmp(&y.ok()).then_with(|| a.cmp(b))
    });
    out.kubernetes.dedup_by(|a, b| a.version == b.version);
    if let Some(images) = node_image_versions {
        let (key, entries) = values_or_value(images, "value")?;
        for (i, e) in entries.iter().enumerate() {
            let base = format!("{key}[{i}]");
            let version = match opt_str(e, &base, "fullName")? {
                Some(f) => f.to_string(),
                None => format!(
                    "{}-{}-{}",
                    req_str(e, &base, "os")?,
                    req_str(e, &base, "sku")?,
                    req_str(e, &base, "version")?
                ),
            };
            out.node_images.push(Release {
                version,
                since: None,
                preview: false,
                security_patch: false,
            });
        }
        out.node_images.sort();
        out.node_images.dedup_by(|a, b| a.version == b.version);
    }
    Ok(out)
}

/// The list under `first` or the other of `value`/`values`, with the key it was under.
fn values_or_value<'a>(
    body: &'a Value,
    first: &'static str,
) -> Result<(&'static str, &'a Vec<Value>), ModelError> {
    let other = if first == "value" { "values" } else { "value" };
    for key in [first, other] {
        if let Some(v) = opt_array(body, "", key)? {
            return Ok((key, v));
        }
    }
    Err(ModelError::missing(first))
}

// ---------------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------------

/// Every read-only property of a managed cluster body (swagger `ManagedCluster`, api-version
/// `2026-08-01`, plus ARM's envelope). `a[]` is each element of array `a`, `m{}` each value of
/// map `m`.
pub const CLUSTER_READ_ONLY: &[&str] = &[
    // ARM's envelope (common-types v6 `Resource`).
    "id",
    "name",
    "type",
    "systemData",
    "eTag",
    "identity.principalId",
    "identity.tenantId",
    "identity.userAssignedIdentities{}.clientId",
    "identity.userAssignedIdentities{}.principalId",
    "properties.addonProfiles{}.identity",
    "properties.agentPoolProfiles[].currentOrchestratorVersion",
    "properties.agentPoolProfiles[].eTag",
    "properties.agentPoolProfiles[].localDNSProfile.state",
    "properties.agentPoolProfiles[].provisioningState",
    "properties.agentPoolProfiles[].status.provisioningError",
    "properties.azurePortalFQDN",
    "properties.currentKubernetesVersion",
    "properties.fqdn",
    "properties.ingressProfile.webAppRouting.identity",
    "properties.maxAgentPools",
    "properties.networkProfile.loadBalancerProfile.effectiveOutboundIPs",
    "properties.networkProfile.natGatewayProfile.effectiveOutboundIPs",
    "properties.oidcIssuerProfile.issuerURL",
    "properties.podIdentityProfile.userAssignedIdentities[].provisioningInfo",
    "properties.podIdentityProfile.userAssignedIdentities[].provisioningState",
    "properties.powerState",
    "properties.privateFQDN",
    "properties.privateLinkResources[].privateLinkServiceID",
    "properties.provisioningState",
    "properties.resourceUID",
    "properties.status.provisioningError",
];

/// Every read-only property of an agent pool body (swagger `AgentPool`, plus ARM's envelope).
pub const POOL_READ_ONLY: &[&str] = &[
    "id",
    "name",
    "type",
    "systemData",
    "properties.currentOrchestratorVersion",
    "properties.eTag",
    "properties.localDNSProfile.state",
    "properties.provisioningState",
    "properties.status.provisioningError",
];

/// Which pools a cluster PUT moves with the control plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolSelection {
    /// Every pool (a `Full` upgrade).
    All,
    /// These pools (names match in any case; an unknown one is refused).
    Named(Vec<String>),
    /// None: only the control plane (`ControlPlaneOnly`).
    ControlPlaneOnly,
}

/// The eTag to send as `If-Match` with a PUT of what `get_body` is (fact 8): a cluster's
/// top-level `eTag`, or a pool GET's `properties.eTag`; sent as read (no quotes added).
pub fn if_match(get_body: &Value) -> Option<&str> {
    get(get_body, "eTag")
        .or_else(|| get(get_body, "properties").and_then(|p| get(p, "eTag")))
        .and_then(Value::as_str)
}

/// A cluster GET body made a PUT body (fact 17): a copy minus [`CLUSTER_READ_ONLY`], minus
/// `properties.servicePrincipalProfile` (its secret is never read back), minus each pool's
/// `nodeImageVersion` (fact 9: sending it back asks for a rollback); everything else, unknown
/// fields included, kept.
pub fn cluster_put_body(cluster_get_body: &Value) -> Value {
    let mut body = cluster_get_body.clone();
    for path in CLUSTER_READ_ONLY {
        strip(&mut body, path);
    }
    strip(&mut body, "properties.servicePrincipalProfile");
    strip(&mut body, "properties.agentPoolProfiles[].nodeImageVersion");
    body
}

/// A pool GET body made a PUT body: a copy minus [`POOL_READ_ONLY`] and minus
/// `properties.nodeImageVersion` (fact 9); everything else kept.
pub fn pool_put_body(pool_get_body: &Value) -> Value {
    let mut body = pool_get_body.clone();
    for path in POOL_READ_ONLY {
        strip(&mut body, path);
    }
    strip(&mut body, "properties.nodeImageVersion");
    body
}

/// One cluster PUT that upgrades the control plane to `target_version` and the selected pools
/// with it (their `orchestratorVersion` set to it; the others left as read), from the cluster's
/// GET body ([`cluster_put_body`]). A selection that leaves any pool behind
/// ([`PoolSelection::ControlPlaneOnly`] included) is refused for a legacy cluster (fact 16),
/// since AKS would move every pool anyway.
pub fn cluster_upgrade_body(
    cluster_get_body: &Value,
    target_version: &str,
    pools: &PoolSelection,
) -> Result<Value, ModelError> {
    if target_version.is_empty() {
        return Err(ModelError::invalid("targetVersion", "empty"));
    }
    let props = req_obj(cluster_get_body, "", "properties")?;
    let profiles = req_array(props, "properties", "agentPoolProfiles")?;
    let mut names = Vec::with_capacity(profiles.len());
    let mut types = Vec::with_capacity(profiles.len());
    for (i, p) in profiles.iter().enumerate() {
        let base = format!("properties.agentPoolProfiles[{i}]");
        names.push(req_str(p, &base, "name")?);
        types.push(opt_str(p, &base, "type")?);
    }
    let selected: Vec<bool> = match pools {
        PoolSelection::All => vec![true; names.len()],
        PoolSelection::ControlPlaneOnly => vec![false; names.len()],
        PoolSelection::Named(wanted) => {
            if let Some(w) = wanted
                .iter()
                .find(|w| !names.iter().any(|n| n.eq_ignore_ascii_case(w)))
            {
                return Err(ModelError::invalid(
                    "pools",
                    format!(
                        "the cluster has no pool {w:?} (it has {})",
                        names.join(", ")
                    ),
                ));
            }
            names
                .iter()
                .map(|n| wanted.iter().any(|w| w.eq_ignore_ascii_case(n)))
                .collect()
        }
    };
    if selected.iter().any(|s| !s) {
        let max = opt_u64(props, "properties", "maxAgentPools")?;
        if let Some(why) = legacy_reason(max, names.iter().copied().zip(types.iter().copied())) {
            let name = opt_str(cluster_get_body, "", "name")?.unwrap_or("the cluster");
            return Err(ModelError::not_allowed(
                "pools",
                format!(
                    "{name} is a legacy cluster ({why}): AKS upgrades every pool with its control \
                     plane, so it cannot upgrade the control plane alone or leave a pool behind"
                ),
            ));
        }
    }
    let mut body = cluster_put_body(cluster_get_body);
    let bprops = body["properties"]
        .as_object_mut()
        .expect("checked to be an object above");
    bprops.insert("kubernetesVersion".into(), Value::from(target_version));
    if let Some(Value::Array(ps)) = bprops.get_mut("agentPoolProfiles") {
        for (p, sel) in ps.iter_mut().zip(selected) {
            if sel {
                p["orchestratorVersion"] = Value::from(target_version);
            }
        }
    }
    Ok(body)
}

/// A pool PUT that upgrades it to `orchestrator_version`, from the pool's GET body
/// ([`pool_put_body`]).
pub fn pool_upgrade_body(
    pool_get_body: &Value,
    orchestrator_version: &str,
) -> Result<Value, ModelError> {
    if orchestrator_version.is_empty() {
        return Err(ModelError::invalid("orchestratorVersion", "empty"));
    }
    req_obj(pool_get_body, "", "properties")?;
    let mut body = pool_put_body(pool_get_body);
    body["properties"]["orchestratorVersion"] = Value::from(orchestrator_version);
    Ok(body)
}

/// A pool PUT that rolls its nodes back to `image` (fact 9): the pool's GET body
/// ([`pool_put_body`]) with `nodeImageVersion` set to `image`, only when the pool's upgrade
/// profile (`GET MC/agentPools/{pool}/upgradeProfiles/default`) lists `image` in
/// `properties.recentlyUsedVersions[].nodeImageVersion`; `orchestratorVersion` is left as read.
pub fn pool_image_rollback_body(
    pool_get_body: &Value,
    image: &str,
    pool_upgrade_profile: &Value,
) -> Result<Value, ModelError> {
    let pbase = "properties";
    let profile = req_obj(pool_upgrade_profile, "", pbase)?;
    let recent = opt_array(profile, pbase, "recentlyUsedVersions")?
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut offered = Vec::with_capacity(recent.len());
    for (i, r) in recent.iter().enumerate() {
        let rbase = format!("{pbase}.recentlyUsedVersions[{i}]");
        if let Some(v) = opt_str(r, &rbase, "nodeImageVersion")? {
            offered.push(v);
        }
    }
    if !offered.contains(&image) {
        return Err(ModelError::not_allowed(
            "nodeImageVersion",
            format!(
                "AKS rolls a pool back only to an image in its recentlyUsedVersions; {image:?} \
                 is not one ({})",
                if offered.is_empty() {
                    "there are none".to_string()
                } else {
                    offered.join(", ")
                }
            ),
        ));
    }
    req_obj(pool_get_body, "", "properties")?;
    let mut body = pool_put_body(pool_get_body);
    body["properties"]["nodeImageVersion"] = Value::from(image);
    Ok(body)
}

/// A cluster PUT body (one of the above) that also bypasses AKS's deprecated-API guard (fact 12):
/// `properties.upgradeSettings.overrideSettings` becomes `{forceUpgrade: true, until}`, other
/// upgrade settings kept. `until_rfc3339` must be an RFC 3339 time; that it is in the future is
/// the caller's business (AKS compares it with the upgrade's start).
pub fn force_upgrade_override(mut body: Value, until_rfc3339: &str) -> Result<Value, ModelError> {
    DateTime::parse_from_rfc3339(until_rfc3339).map_err(|e| {
        ModelError::invalid(
            "until",
            format!("{until_rfc3339:?} is not an RFC 3339 time: {e}"),
        )
    })?;
    let props = body
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ModelError::missing("properties"))?;
    let settings = props
        .entry("upgradeSettings")
        .or_insert_with(|| Value::Object(Map::new()));
    if settings.is_null() {
        *settings = Value::Object(Map::new());
    }
    let settings = settings
        .as_object_mut()
        .ok_or_else(|| ModelError::malformed("properties.upgradeSettings", "not an object"))?;
    let overrides = settings
        .entry("overrideSettings")
        .or_insert_with(|| Value::Object(Map::new()));
    if !overrides.is_object() {
        *overrides = Value::Object(Map::new());
    }
    overrides["forceUpgrade"] = Value::Bool(true);
    overrides["until"] = Value::from(until_rfc3339);
    Ok(body)
}

/// Removes what `path` names (`a.b`, `a[].b`, `a{}.b`) wherever it is; absent parts are fine.
fn strip(v: &mut Value, path: &str) {
    let segs: Vec<&str> = path.split('.').collect();
    strip_segs(v, &segs);
}

fn strip_segs(v: &mut Value, segs: &[&str]) {
    let (Some(obj), Some((first, rest))) = (v.as_object_mut(), segs.split_first()) else {
        return;
    };
    if rest.is_empty() {
        obj.remove(*first);
    } else if let Some(key) = first.strip_suffix("[]") {
        if let Some(Value::Array(items)) = obj.get_mut(key) {
            items.iter_mut().for_each(|it| strip_segs(it, rest));
        }
    } else if let Some(key) = first.strip_suffix("{}") {
        if let Some(Value::Object(m)) = obj.get_mut(key) {
            m.values_mut().for_each(|it| strip_segs(it, rest));
        }
    } else if let Some(child) = obj.get_mut(*first) {
        strip_segs(child, rest);
    }
}

// ---------------------------------------------------------------------------------------------
// ARM errors
// ---------------------------------------------------------------------------------------------

/// An ARM error body's `error` (common-types `ErrorDetail`, plus AKS's `subcode`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArmErrorDetail {
    /// `code`.
    pub code: String,
    /// `message`.
    pub message: String,
    /// `subcode` (AKS), when given.
    pub subcode: Option<String>,
    /// `target`, when given.
    pub target: Option<String>,
    /// `details`, as given (empty when none).
    pub details: Vec<Value>,
}

impl fmt::Display for ArmErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code)?;
        if let Some(s) = &self.subcode {
            write!(f, " ({s})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Reads `{"error": {code, message, subcode?, target?, details?}}` (or the same fields at the
/// top level); `None` when the body is not such JSON.
pub fn parse_arm_error(body: &[u8]) -> Option<ArmErrorDetail> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
    let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ArmErrorDetail {
        code: s("code")?,
        message: s("message").unwrap_or_default(),
        subcode: s("subcode"),
        target: s("target"),
        details: e
            .get("details")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    })
}

/// Whether an answer is AKS blocking a minor upgrade because deprecated APIs were used (fact
/// 12): 400 `ValidationError` with subcode `UpgradeBlockedOnDeprecatedAPIUsage`. Resending with
/// [`force_upgrade_override`] bypasses it, if the operator allows.
pub fn is_deprecated_api_block(status: u16, body: &[u8]) -> bool {
    status == 400
        && parse_arm_error(body).is_some_and(|e| {
            e.subcode
                .is_some_and(|s| s.eq_ignore_ascii_case("UpgradeBlockedOnDeprecatedAPIUsage"))
        })
}

/// An ARM answer outside 2xx as a [`ProviderError`] (facts 10–15). The status decides before
/// the code:
///
/// | status | code |
/// |---|---|
/// | 409 `OperationNotAllowed` (another operation is running) | `OperationInProgress` |
/// | 409 with another code | `Internal` (retried at most twice) |
/// | 412 | `PreconditionFailed` (re-read, recompute, resend) |
/// | 429 | `Throttled` |
/// | 400 (an upgrade path AKS refuses, a minor skipped, `ValidationError` …) | `NotAllowed` |
/// | 401 / 403 / 404 | `Unauthenticated` / `PermissionDenied` / `NotFound` |
/// | 408, 5xx | `Unavailable` |
/// | any other | `Internal` |
///
/// The message is `code (subcode): message`; a body that is not an ARM error gives
/// `HTTP {status}: ` and its first 200 bytes. `retry_after` is the `Retry-After` header's
/// value: whole seconds are kept (an HTTP date would need a clock, and is left to the caller).
/// A provider whose *write* got a 5xx does not know whether it was applied, and sets
/// [`ProviderError::uncertain`] itself.
pub fn classify_arm_error(status: u16, body: &[u8], retry_after: Option<&str>) -> ProviderError {
    let detail = parse_arm_error(body);
    let mut e = classify(status, detail.as_ref(), body);
    e.retry_after_seconds = retry_after.and_then(|s| s.trim().parse().ok());
    e
}

/// [`classify_arm_error`] of an error already read: its status and detail (`raw` is the body,
/// quoted when there is no detail).
pub fn classify(status: u16, detail: Option<&ArmErrorDetail>, raw: &[u8]) -> ProviderError {
    use ProviderErrorCode::*;
    let code = match status {
        409 if detail.is_some_and(|d| d.code.eq_ignore_ascii_case("OperationNotAllowed")) => {
            OperationInProgress
        }
        412 => PreconditionFailed,
        429 => Throttled,
        400 => NotAllowed,
        401 => Unauthenticated,
        403 => PermissionDenied,
        404 => NotFound,
        408 | 500..=599 => Unavailable,
        _ => Internal,
    };
    let message = match detail {
        Some(d) => d.to_string(),
        None if raw.is_empty() => format!("HTTP {status} (no body)"),
        None => format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        ),
    };
    ProviderError::new(code, message)
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// The Kubernetes versions a cluster's control plane may be upgraded to now, from its upgrade
/// profile (`MC/upgradeProfiles/default`: `properties.controlPlaneProfile.upgrades[]`), previews
/// included: what AKS offers in the cluster's region from its current version.
pub fn control_plane_upgrades(profile: &Value) -> Result<Vec<String>, ModelError> {
    let props = req_obj(profile, "", "properties")?;
    let cp = req_obj(props, "properties", "controlPlaneProfile")?;
    let base = "properties.controlPlaneProfile";
    let mut out = Vec::new();
    if let Some(list) = opt_array(cp, base, "upgrades")? {
        for (i, u) in list.iter().enumerate() {
            out.push(
                req_str(u, &format!("{base}.upgrades[{i}]"), "kubernetesVersion")?.to_string(),
            );
        }
    }
    Ok(out)
}

/// A check's verdict on a cluster and why, in words a person acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// Pass, Fail or Inconclusive.
    pub verdict: Verdict,
    /// Why.
    pub message: String,
}

fn judged(verdict: Verdict, message: String) -> Judgement {
    Judgement { verdict, message }
}

/// May an upgrade of the control plane to `target` (none: node images only) start on `c` now?
/// `offered` is [`control_plane_upgrades`]'s answer, needed only when `target` is not what the
/// cluster runs already.
pub fn preflight_of(c: &AksCluster, target: Option<&str>, offered: &[String]) -> Judgement {
    if c.power_state == PowerState::Stopped {
        return judged(
            Verdict::Fail,
            format!(
                "{} is Stopped (properties.powerState.code): AKS runs no operation on a stopped \
                 cluster",
                c.name
            ),
        );
    }
    if c.busy() {
        let mut what = Vec::new();
        if !is_terminal_state(&c.provisioning_state) {
            what.push(format!("the cluster is {}", c.provisioning_state));
        }
        for p in c.pools.iter().filter(|p| p.busy()) {
            what.push(format!("pool {} is {}", p.name, p.provisioning_state));
        }
        return judged(
            Verdict::Fail,
            format!(
                "{}: another operation is in progress ({})",
                c.name,
                what.join(", ")
            ),
        );
    }
    if let Some(v) = target.filter(|v| *v != c.current_kubernetes_version) {
        if !offered.iter().any(|o| o == v) {
            return judged(
                Verdict::Fail,
                format!(
                    "{}: AKS does not offer Kubernetes {v} to this cluster in {} now (from {}: {})",
                    c.name,
                    c.location,
                    c.current_kubernetes_version,
                    if offered.is_empty() {
                        "no upgrades".to_string()
                    } else {
                        offered.join(", ")
                    }
                ),
            );
        }
    }
    let mut message = format!(
        "{}: {}, Kubernetes {}",
        c.name,
        power_word(c.power_state),
        c.current_kubernetes_version
    );
    if let Some(v) = target.filter(|v| *v != c.current_kubernetes_version) {
        message.push_str(&format!("; {v} offered"));
    }
    if c.provisioning_state.eq_ignore_ascii_case("Failed") {
        message.push_str("; its last operation failed (sending the versions again retries it)");
    }
    judged(Verdict::Pass, message)
}

fn power_word(p: PowerState) -> &'static str {
    match p {
        PowerState::Running => "Running",
        PowerState::Stopped => "Stopped",
        PowerState::Unknown => "power state not reported",
    }
}

/// Is `c` healthy as AKS reports it: running, and neither the cluster nor any pool `Failed`?
/// Inconclusive while an operation runs on it.
pub fn health_of(c: &AksCluster) -> Judgement {
    if c.power_state == PowerState::Stopped {
        return judged(
            Verdict::Fail,
            format!("{} is Stopped (properties.powerState.code)", c.name),
        );
    }
    let mut failed = Vec::new();
    if c.provisioning_state.eq_ignore_ascii_case("Failed") {
        failed.push(match &c.provisioning_error {
            Some(e) => format!("the cluster failed: {e}"),
            None => "the cluster failed".to_string(),
        });
    }
    for p in &c.pools {
        if p.provisioning_state.eq_ignore_ascii_case("Failed") {
            failed.push(match &p.provisioning_error {
                Some(e) => format!("pool {} failed: {e}", p.name),
                None => format!("pool {} failed", p.name),
            });
        }
    }
    if !failed.is_empty() {
        return judged(Verdict::Fail, format!("{}: {}", c.name, failed.join("; ")));
    }
    if c.busy() {
        return judged(
            Verdict::Inconclusive,
            format!(
                "{}: an operation is running (provisioningState {}); health is known when it ends",
                c.name, c.provisioning_state
            ),
        );
    }
    judged(
        Verdict::Pass,
        format!(
            "{}: {}; the cluster and its {} pool(s) Succeeded on Kubernetes {}",
            c.name,
            power_word(c.power_state),
            c.pools.len(),
            c.current_kubernetes_version
        ),
    )
}

// ---------------------------------------------------------------------------------------------
// JSON helpers: every error names its path
// ---------------------------------------------------------------------------------------------

fn join(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

/// The field, `None` when missing or `null`.
fn get<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn opt_str<'a>(obj: &'a Value, base: &str, key: &str) -> Result<Option<&'a str>, ModelError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ModelError::malformed(join(base, key), "not a string")),
    }
}

fn req_str<'a>(obj: &'a Value, base: &str, key: &str) -> Result<&'a str, ModelError> {
    opt_str(obj, base, key)?.ok_or_else(|| ModelError::missing(join(base, key)))
}

fn opt_bool(obj: &Value, base: &str, key: &str) -> Result<Option<bool>, ModelError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ModelError::malformed(join(base, key), "not a boolean")),
    }
}

fn opt_u64(obj: &Value, base: &str, key: &str) -> Result<Option<u64>, ModelError> {
    match get(obj, key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| ModelError::malformed(join(base, key), "not a whole number")),
    }
}

fn req_u32(obj: &Value, base: &str, key: &str) -> Result<u32, ModelError> {
    let n = opt_u64(obj, base, key)?.ok_or_else(|| ModelError::missing(join(base, key)))?;
    u32::try_from(n)
        .map_err(|_| ModelError::malformed(join(base, key), format!("{n} is too large")))
}

fn req_obj<'a>(obj: &'a Value, base: &str, key: &str) -> Result<&'a Value, ModelError> {
    match get(obj, key) {
        None => Err(ModelError::missing(join(base, key))),
        Some(v) if v.is_object() => Ok(v),
        Some(_) => Err(ModelError::malformed(join(base, key), "not an object")),
    }
}

fn opt_array<'a>(
    obj: &'a Value,
    base: &str,
    key: &str,
) -> Result<Option<&'a Vec<Value>>, ModelError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(_) => Err(ModelError::malformed(join(base, key), "not an array")),
    }
}

fn req_array<'a>(obj: &'a Value, base: &str, key: &str) -> Result<&'a Vec<Value>, ModelError> {
    opt_array(obj, base, key)?.ok_or_else(|| ModelError::missing(join(base, key)))
}

/// A list body's `value`, refusing a `nextLink`: the caller follows it and merges the pages.
fn list_items<'a>(list: &'a Value, base: &str) -> Result<&'a Vec<Value>, ModelError> {
    if let Some(next) = opt_str(list, base, "nextLink")? {
        if !next.is_empty() {
            return Err(ModelError::malformed(
                join(base, "nextLink"),
                "more pages follow: read them and pass every page's value in one list",
            ));
        }
    }
    req_array(list, base, "value")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use serde_json::json;
    use std::collections::BTreeSet;

    const CLUSTER_GET: &str =
        include_str!("../../../tests/fixtures/aks/2026-08-01/ManagedClustersGet.json");
    const POOL_GET: &str =
        include_str!("../../../tests/fixtures/aks/2026-08-01/AgentPoolsGet.json");
    const POOL_LIST: &str =
        include_str!("../../../tests/fixtures/aks/2026-08-01/AgentPoolsList.json");
    const POOL_UPGRADE_PROFILE: &str =
        include_str!("../../../tests/fixtures/aks/2026-08-01/AgentPoolsGetUpgradeProfile.json");
    const MAINTENANCE_LIST: &str = include_str!(
        "../../../tests/fixtures/aks/2026-08-01/MaintenanceConfigurationsList_MaintenanceWindow.json"
    );
    const KUBERNETES_VERSIONS: &str =
        include_str!("../../../tests/fixtures/aks/2026-08-01/KubernetesVersions_List.json");
    const NODE_IMAGE_VERSIONS: &str =
        include_str!("../../../tests/fixtures/aks/2026-08-02-preview/NodeImageVersions_List.json");
    const SWAGGER: &str =
        include_str!("../../../tests/fixtures/aks/2026-08-01/managedClusters.json");
    const CLUSTER_UPGRADE_PROFILE: &str = include_str!(
        "../../../tests/fixtures/aks/2026-08-01/ManagedClustersGetUpgradeProfile.json"
    );

    // ----- ClusterId -----

    #[test]
    fn cluster_id_reads_any_case_of_the_fixed_segments_and_prints_the_canonical_form() {
        let id = ClusterId::parse(
            "/SUBSCRIPTIONS/0000AAAA-0000-0000-0000-000000000000/resourcegroups/My.rg(1)\
             /PROVIDERS/microsoft.containerservice/MANAGEDCLUSTERS/Prod_eu-1",
        )
        .unwrap();
        assert_eq!(id.subscription(), "0000aaaa-0000-0000-0000-000000000000");
        assert_eq!(id.resource_group(), "My.rg(1)");
        assert_eq!(id.name(), "Prod_eu-1");
        let canonical = "/subscriptions/0000aaaa-0000-0000-0000-000000000000/resourceGroups/\
                         My.rg(1)/providers/Microsoft.ContainerService/managedClusters/Prod_eu-1";
        assert_eq!(id.path(), canonical);
        assert_eq!(id.to_string(), canonical);
        assert_eq!(canonical.parse::<ClusterId>().unwrap(), id);
    }

    #[test]
    fn cluster_ids_naming_one_resource_in_other_cases_are_equal() {
        let a = ClusterId::parse(&reference_id()).unwrap();
        let b = ClusterId::parse(
            &reference_id()
                .replace("rg1", "RG1")
                .replace("clustername1", "ClusterName1"),
        )
        .unwrap();
        assert_eq!(a, b);
        let mut set = std::collections::HashSet::new();
        set.insert(a);
        assert!(set.contains(&b));
    }

    #[test]
    fn cluster_id_of_another_shape_says_the_expected_one() {
        for bad in [
            "",
            "subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1/providers/Microsoft.ContainerService/managedClusters/c",
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1/providers/Microsoft.ContainerService/managedClusters/c/",
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1/providers/Microsoft.ContainerService/managedClusters/c/agentPools/p",
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1/providers/Microsoft.Compute/managedClusters/c",
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1/providers/Microsoft.ContainerService/fleets/c",
        ] {
            let e = ClusterId::parse(bad).unwrap_err();
            assert_eq!(e.kind, ModelErrorKind::InvalidRequest);
            assert_eq!(
                e.to_string(),
                format!(
                    "clusterResourceId {bad:?}: expected /subscriptions/{{id}}/resourceGroups/{{name}}/providers/Microsoft.ContainerService/managedClusters/{{name}}"
                )
            );
        }
    }

    #[test]
    fn cluster_id_names_the_arm_rule_a_part_breaks() {
        let with = |sub: &str, rg: &str, name: &str| {
            ClusterId::parse(&format!(
                "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}"
            ))
        };
        let sub = "00000000-0000-0000-0000-000000000000";
        let e = with("not-a-guid", "rg", "c").unwrap_err();
        assert!(
            e.message
                .contains("subscription \"not-a-guid\" is not a GUID"),
            "{e}"
        );
        for rg in ["rg.", "", "r g", "r/g", &"r".repeat(91)] {
            if rg.contains('/') {
                assert!(with(sub, rg, "c")
                    .unwrap_err()
                    .message
                    .starts_with("expected"));
                continue;
            }
            let e = with(sub, rg, "c").unwrap_err();
            assert!(
                e.message.contains("resource group") && e.message.contains("1-90"),
                "{e}"
            );
        }
        assert!(with(sub, &"r".repeat(90), "c").is_ok());
        assert!(
            with(sub, "rg-ü_(x).y", "c").is_ok(),
            "ARM allows Unicode letters"
        );
        for name in ["-c", "c-", "c.d", "c_", &"c".repeat(64)] {
            let e = with(sub, "rg", name).unwrap_err();
            assert!(
                e.message.contains("managed cluster name") && e.message.contains("1-63"),
                "{e}"
            );
        }
        assert!(with(sub, "rg", "a").is_ok());
        assert!(with(sub, "rg", &"c".repeat(63)).is_ok());
    }

    // ----- the cluster -----

    #[test]
    fn reference_cluster_reads_versions_etags_states_and_its_pool() {
        let c = AksCluster::from_json(&cluster_get(), None).unwrap();
        assert_eq!(c.name, "clustername1");
        assert_eq!(c.location, "location1");
        assert_eq!(c.id.as_deref(), Some(reference_id().as_str()));
        assert_eq!(c.kubernetes_version, "1.9.6");
        assert_eq!(c.current_kubernetes_version, "1.9.6");
        assert_eq!(c.etag.as_deref(), Some("beywbwei"));
        assert_eq!(c.provisioning_state, "Succeeded");
        assert_eq!(
            c.power_state,
            PowerState::Unknown,
            "the example has no powerState"
        );
        assert_eq!(c.max_agent_pools, Some(1));
        assert_eq!(c.provisioning_error, None);
        assert_eq!(
            c.pools,
            vec![AksPool {
                name: "nodepool1".into(),
                mode: None,
                os_type: OsType::Linux,
                os_sku: None,
                pool_type: None,
                orchestrator_version: Some("1.9.6".into()),
                current_orchestrator_version: Some("1.9.6".into()),
                node_image_version: "AKSUbuntu:1604:2020.03.11".into(),
                etag: Some("nvewbvoi".into()),
                provisioning_state: "Succeeded".into(),
                power_state: PowerState::Unknown,
                provisioning_error: None,
                from_snapshot: false,
            }]
        );
        assert_eq!(if_match(&cluster_get()), Some("beywbwei"));
    }

    #[test]
    fn desired_and_current_versions_are_kept_apart() {
        let mut body = cluster_get();
        body["properties"]["kubernetesVersion"] = json!("1.30");
        body["properties"]["currentKubernetesVersion"] = json!("1.29.8");
        body["properties"]["agentPoolProfiles"][0]["orchestratorVersion"] = json!("1.30");
        body["properties"]["agentPoolProfiles"][0]["currentOrchestratorVersion"] = json!("1.29.8");
        let c = AksCluster::from_json(&body, None).unwrap();
        assert_eq!(c.kubernetes_version, "1.30");
        assert_eq!(c.current_kubernetes_version, "1.29.8");
        assert_eq!(c.pools[0].orchestrator_version.as_deref(), Some("1.30"));
        assert_eq!(
            c.pools[0].current_orchestrator_version.as_deref(),
            Some("1.29.8")
        );
        assert_eq!(c.described().kubernetes_version, "1.29.8");
    }

    #[test]
    fn agent_pool_list_wins_over_agent_pool_profiles() {
        let c = AksCluster::from_json(&cluster_get(), Some(&example(POOL_LIST))).unwrap();
        assert_eq!(c.pools.len(), 1);
        assert_eq!(c.pools[0].name, "agentpool1");
        assert_eq!(c.pools[0].etag.as_deref(), Some("ewnfuib"));
    }

    #[test]
    fn agent_pool_list_with_a_next_page_is_refused() {
        let mut list = example(POOL_LIST);
        list["nextLink"] = json!("https://management.azure.com/...&$skipToken=2");
        let e = AksCluster::from_json(&cluster_get(), Some(&list)).unwrap_err();
        assert_eq!(e.path, "nextLink");
        list["nextLink"] = Value::Null;
        assert!(AksCluster::from_json(&cluster_get(), Some(&list)).is_ok());
    }

    #[test]
    fn missing_required_fields_are_named_by_their_json_path() {
        let mut body = cluster_get();
        let pool = body["properties"]["agentPoolProfiles"][0].clone();
        let mut nameless = pool.clone();
        nameless.as_object_mut().unwrap().remove("name");
        body["properties"]["agentPoolProfiles"] = json!([pool.clone(), pool.clone(), nameless]);
        body["properties"]["agentPoolProfiles"][1]["name"] = json!("second");
        let e = AksCluster::from_json(&body, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "properties.agentPoolProfiles[2].name: missing"
        );
        assert_eq!(e.kind, ModelErrorKind::Malformed);
        assert_eq!(ProviderError::from(e).code, ProviderErrorCode::Internal);

        for (path, message) in [
            ("location", "missing"),
            ("properties.currentKubernetesVersion", "missing"),
            ("properties.provisioningState", "missing"),
            (
                "properties.agentPoolProfiles[0].nodeImageVersion",
                "missing",
            ),
            (
                "properties.agentPoolProfiles[0].provisioningState",
                "missing",
            ),
        ] {
            let mut body = cluster_get();
            remove(&mut body, path);
            let e = AksCluster::from_json(&body, None).unwrap_err();
            assert_eq!((e.path.as_str(), e.message.as_str()), (path, message));
        }
        let mut body = cluster_get();
        body["properties"]["maxAgentPools"] = json!("many");
        assert_eq!(
            AksCluster::from_json(&body, None).unwrap_err().to_string(),
            "properties.maxAgentPools: not a whole number"
        );
        let mut list = example(POOL_LIST);
        remove(&mut list, "value[0].properties.provisioningState");
        assert_eq!(
            AksCluster::from_json(&cluster_get(), Some(&list))
                .unwrap_err()
                .to_string(),
            "value[0].properties.provisioningState: missing"
        );
    }

    #[test]
    fn power_state_missing_or_null_is_unknown() {
        let mut body = cluster_get();
        for (ps, want) in [
            (json!({"code": "Running"}), PowerState::Running),
            (json!({"code": "Stopped"}), PowerState::Stopped),
            (json!(null), PowerState::Unknown),
            (json!({"code": null}), PowerState::Unknown),
            (json!({}), PowerState::Unknown),
            (json!({"code": "Hibernating"}), PowerState::Unknown),
        ] {
            body["properties"]["powerState"] = ps.clone();
            body["properties"]["agentPoolProfiles"][0]["powerState"] = ps;
            let c = AksCluster::from_json(&body, None).unwrap();
            assert_eq!((c.power_state, c.pools[0].power_state), (want, want));
        }
    }

    #[test]
    fn provisioning_error_keeps_code_message_and_subcode() {
        let mut body = cluster_get();
        body["properties"]["provisioningState"] = json!("Failed");
        body["properties"]["status"] = json!({"provisioningError": {
            "code": "UpgradeFailed", "subcode": "DrainPodsFailed",
            "message": "Drain node aks-nodepool1-1 failed", "details": []}});
        body["properties"]["agentPoolProfiles"][0]["status"] =
            json!({"provisioningError": {"code": "VMExtensionError", "message": "boom"}});
        let c = AksCluster::from_json(&body, None).unwrap();
        let e = c.provisioning_error.clone().unwrap();
        assert_eq!(e.code.as_deref(), Some("UpgradeFailed"));
        assert_eq!(e.subcode.as_deref(), Some("DrainPodsFailed"));
        assert_eq!(
            e.to_string(),
            "UpgradeFailed (DrainPodsFailed): Drain node aks-nodepool1-1 failed"
        );
        assert_eq!(
            c.pools[0].provisioning_error.as_ref().unwrap().to_string(),
            "VMExtensionError: boom"
        );
        assert!(!c.busy(), "Failed is terminal");
    }

    #[test]
    fn busy_while_the_cluster_or_any_pool_is_not_in_a_terminal_state() {
        let mut body = two_pool_cluster();
        assert!(!AksCluster::from_json(&body, None).unwrap().busy());
        body["properties"]["agentPoolProfiles"][1]["provisioningState"] = json!("Upgrading");
        let c = AksCluster::from_json(&body, None).unwrap();
        assert!(c.busy() && c.described().busy);
        assert!(!c.pools[0].busy() && c.pools[1].busy());
        body["properties"]["agentPoolProfiles"][1]["provisioningState"] = json!("Canceled");
        body["properties"]["provisioningState"] = json!("UpgradingNodeImageVersion");
        assert!(AksCluster::from_json(&body, None).unwrap().busy());
        body["properties"]["provisioningState"] = json!("succeeded");
        assert!(!AksCluster::from_json(&body, None).unwrap().busy());
    }

    // ----- Checks -----

    #[test]
    fn control_plane_upgrades_are_read_from_the_upgrade_profile_previews_included() {
        let profile = example(CLUSTER_UPGRADE_PROFILE);
        assert_eq!(
            control_plane_upgrades(&profile).unwrap(),
            ["1.7.9", "1.7.11"]
        );
        let mut none = profile.clone();
        none["properties"]["controlPlaneProfile"]
            .as_object_mut()
            .unwrap()
            .remove("upgrades");
        assert!(control_plane_upgrades(&none).unwrap().is_empty());
        let mut bad = profile;
        bad["properties"]["controlPlaneProfile"]["upgrades"][1] = json!({"isPreview": true});
        assert_eq!(
            control_plane_upgrades(&bad).unwrap_err().to_string(),
            "properties.controlPlaneProfile.upgrades[1].kubernetesVersion: missing"
        );
    }

    #[test]
    fn preflight_fails_a_stopped_or_busy_cluster_and_a_target_aks_does_not_offer() {
        let offered = vec!["1.10.3".to_string()];
        let mut body = two_pool_cluster();
        body["properties"]["powerState"] = json!({"code": "Running"});
        let c = AksCluster::from_json(&body, None).unwrap();
        let ok = preflight_of(&c, Some("1.10.3"), &offered);
        assert_eq!(ok.verdict, Verdict::Pass, "{ok:?}");
        assert_eq!(
            ok.message,
            "clustername1: Running, Kubernetes 1.9.6; 1.10.3 offered"
        );
        // Node images only, or a target it runs: no profile needed.
        assert_eq!(preflight_of(&c, None, &[]).verdict, Verdict::Pass);
        assert_eq!(preflight_of(&c, Some("1.9.6"), &[]).verdict, Verdict::Pass);

        let far = preflight_of(&c, Some("1.11.1"), &offered);
        assert_eq!(far.verdict, Verdict::Fail);
        assert_eq!(
            far.message,
            "clustername1: AKS does not offer Kubernetes 1.11.1 to this cluster in location1 \
             now (from 1.9.6: 1.10.3)"
        );

        body["properties"]["agentPoolProfiles"][1]["provisioningState"] = json!("Upgrading");
        let busy = preflight_of(&AksCluster::from_json(&body, None).unwrap(), None, &[]);
        assert_eq!(busy.verdict, Verdict::Fail);
        assert_eq!(
            busy.message,
            "clustername1: another operation is in progress (pool win1 is Upgrading)"
        );

        body["properties"]["agentPoolProfiles"][1]["provisioningState"] = json!("Succeeded");
        body["properties"]["powerState"] = json!({"code": "Stopped"});
        let off = preflight_of(&AksCluster::from_json(&body, None).unwrap(), None, &[]);
        assert_eq!(off.verdict, Verdict::Fail);
        assert!(
            off.message.starts_with("clustername1 is Stopped"),
            "{off:?}"
        );

        // A failed cluster may start: sending the versions again is AKS's retry (fact 15).
        body["properties"]["powerState"] = json!({"code": "Running"});
        body["properties"]["provisioningState"] = json!("Failed");
        let failed = preflight_of(&AksCluster::from_json(&body, None).unwrap(), None, &[]);
        assert_eq!(failed.verdict, Verdict::Pass, "{failed:?}");
        assert!(failed.message.contains("its last operation failed"));
    }

    #[test]
    fn health_fails_a_stopped_or_failed_cluster_and_is_inconclusive_while_it_is_busy() {
        let mut body = two_pool_cluster();
        body["properties"]["powerState"] = json!({"code": "Running"});
        let good = health_of(&AksCluster::from_json(&body, None).unwrap());
        assert_eq!(good.verdict, Verdict::Pass, "{good:?}");
        assert_eq!(
            good.message,
            "clustername1: Running; the cluster and its 2 pool(s) Succeeded on Kubernetes 1.9.6"
        );

        body["properties"]["agentPoolProfiles"][1]["provisioningState"] = json!("Failed");
        body["properties"]["agentPoolProfiles"][1]["status"] =
            json!({"provisioningError": {"code": "VMExtensionError", "message": "boom"}});
        let sick = health_of(&AksCluster::from_json(&body, None).unwrap());
        assert_eq!(sick.verdict, Verdict::Fail);
        assert_eq!(
            sick.message,
            "clustername1: pool win1 failed: VMExtensionError: boom"
        );

        body["properties"]["agentPoolProfiles"][1]["provisioningState"] = json!("Succeeded");
        body["properties"]["provisioningState"] = json!("Upgrading");
        let busy = health_of(&AksCluster::from_json(&body, None).unwrap());
        assert_eq!(busy.verdict, Verdict::Inconclusive, "{busy:?}");

        body["properties"]["provisioningState"] = json!("Succeeded");
        body["properties"]["powerState"] = json!({"code": "Stopped"});
        let off = health_of(&AksCluster::from_json(&body, None).unwrap());
        assert_eq!(off.verdict, Verdict::Fail, "{off:?}");
    }

    #[test]
    fn described_gives_the_current_version_region_pools_and_no_labels() {
        let mut body = two_pool_cluster();
        body["tags"] = json!({"team": "payments"});
        let d = AksCluster::from_json(&body, None).unwrap().described();
        assert_eq!(d.kubernetes_version, "1.9.6");
        assert_eq!(d.region, "location1");
        assert!(!d.busy);
        assert_eq!(d.maintenance, None);
        assert!(d.labels.is_empty(), "Azure tags are not labels");
        assert_eq!(
            d.node_pools,
            vec![
                NodePool {
                    name: "nodepool1".into(),
                    os_type: OsType::Linux,
                    image_version: "AKSUbuntu:1604:2020.03.11".into(),
                    from_snapshot: false,
                },
                NodePool {
                    name: "win1".into(),
                    os_type: OsType::Windows,
                    image_version: "AKSWindows-2022-containerd-20348.2582.240716".into(),
                    from_snapshot: false,
                },
            ]
        );
    }

    #[test]
    fn os_type_is_linux_or_windows_and_the_sku_stays_on_the_pool() {
        let mut body = cluster_get();
        let p = &mut body["properties"]["agentPoolProfiles"][0];
        p["osSKU"] = json!("AzureLinux");
        p["mode"] = json!("System");
        p["type"] = json!("VirtualMachineScaleSets");
        p["nodeImageVersion"] = json!("AKSAzureLinux-V2gen2-202411.03.0");
        let c = AksCluster::from_json(&body, None).unwrap();
        assert_eq!(c.pools[0].os_type, OsType::Linux);
        assert_eq!(c.pools[0].os_sku.as_deref(), Some("AzureLinux"));
        assert_eq!(c.pools[0].mode, Some(PoolMode::System));
        assert_eq!(
            c.pools[0].pool_type.as_deref(),
            Some("VirtualMachineScaleSets")
        );

        body["properties"]["agentPoolProfiles"][0]["osType"] = json!("windows");
        let c = AksCluster::from_json(&body, None).unwrap();
        assert_eq!(c.pools[0].os_type, OsType::Windows);

        body["properties"]["agentPoolProfiles"][0]["osType"] = json!("Plan9");
        let e = AksCluster::from_json(&body, None).unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::Unsupported);
        assert_eq!(e.path, "properties.agentPoolProfiles[0].osType");

        body["properties"]["agentPoolProfiles"][0]["osType"] = json!(null);
        assert_eq!(
            AksCluster::from_json(&body, None).unwrap().pools[0].os_type,
            OsType::Linux
        );
        body["properties"]["agentPoolProfiles"][0]["mode"] = json!("Gateway");
        assert_eq!(
            AksCluster::from_json(&body, None).unwrap().pools[0].mode,
            Some(PoolMode::Other("Gateway".into()))
        );
    }

    #[test]
    fn a_pool_made_from_a_snapshot_keeps_its_image_under_latest() {
        let mut body = cluster_get();
        body["properties"]["agentPoolProfiles"][0]["creationData"] = json!({"sourceResourceId":
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1/providers/Microsoft.ContainerService/snapshots/snapshot1"});
        let d = AksCluster::from_json(&body, None).unwrap().described();
        assert!(d.node_pools[0].from_snapshot);
        body["properties"]["agentPoolProfiles"][0]["creationData"] = json!({"sourceResourceId":
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1/providers/Microsoft.Compute/images/img"});
        assert!(!AksCluster::from_json(&body, None).unwrap().pools[0].from_snapshot);
    }

    #[test]
    fn legacy_when_max_agent_pools_is_below_8_or_a_pool_is_an_availability_set() {
        let c = AksCluster::from_json(&cluster_get(), None).unwrap();
        assert_eq!(
            c.legacy_reason().as_deref(),
            Some("maxAgentPools is 1 (below 8)")
        );
        let mut body = cluster_get();
        body["properties"]["maxAgentPools"] = json!(100);
        assert!(!AksCluster::from_json(&body, None).unwrap().is_legacy());
        body["properties"]["agentPoolProfiles"][0]["type"] = json!("AvailabilitySet");
        assert_eq!(
            AksCluster::from_json(&body, None)
                .unwrap()
                .legacy_reason()
                .as_deref(),
            Some("pool \"nodepool1\" is of type AvailabilitySet")
        );
        remove(&mut body, "properties.maxAgentPools");
        body["properties"]["agentPoolProfiles"][0]["type"] = json!("VirtualMachineScaleSets");
        assert!(!AksCluster::from_json(&body, None).unwrap().is_legacy());
    }

    // ----- maintenance -----

    #[test]
    fn reference_maintenance_configurations_become_both_windows_unchanged() {
        let m = maintenance_of(&example(MAINTENANCE_LIST)).unwrap();
        assert_eq!(m.notes, Vec::<String>::new());
        assert_eq!(
            m.maintenance.node_os.as_deref(),
            Some(&MaintenanceWindow {
                schedule: Schedule::Daily { interval_days: 5 },
                duration_hours: 10,
                start_time: "13:30".into(),
                utc_offset: Some("-07:00".into()),
                start_date: Some("2023-01-01".into()),
                not_allowed_dates: vec![],
            })
        );
        assert_eq!(
            m.maintenance.kubernetes.as_deref(),
            Some(&MaintenanceWindow {
                schedule: Schedule::AbsoluteMonthly {
                    interval_months: 3,
                    day_of_month: 15
                },
                duration_hours: 5,
                start_time: "08:30".into(),
                utc_offset: Some("+00:00".into()),
                start_date: Some("2023-01-01".into()),
                not_allowed_dates: vec![
                    DateSpan {
                        start: "2023-02-18".into(),
                        end: "2023-02-25".into()
                    },
                    DateSpan {
                        start: "2023-12-23".into(),
                        end: "2024-01-05".into()
                    },
                ],
            })
        );
    }

    #[test]
    fn default_configuration_and_unknown_names_are_ignored_with_a_note() {
        let list = json!({"value": [
            {"name": "default", "properties": {"timeInWeek": [{"day": "Monday", "hourSlots": [1, 2]}],
             "notAllowedTime": [{"start": "2026-12-24T00:00:00Z", "end": "2026-12-27T00:00:00Z"}]}},
            {"name": "somethingElse", "properties": {}}
        ]});
        let m = maintenance_of(&list).unwrap();
        assert!(m.maintenance.is_empty());
        assert_eq!(m.notes.len(), 2);
        assert!(m.notes[0].contains("\"default\" ignored: it schedules AKS's own weekly releases"));
        assert!(m.notes[1].contains("\"somethingElse\" ignored"));
        assert!(maintenance_of(&json!({"value": []}))
            .unwrap()
            .maintenance
            .is_empty());
    }

    #[test]
    fn every_schedule_type_is_copied() {
        for (schedule, want) in [
            (
                json!({"daily": {"intervalDays": 1}}),
                Schedule::Daily { interval_days: 1 },
            ),
            (
                json!({"weekly": {"intervalWeeks": 1, "dayOfWeek": "Friday"}}),
                Schedule::Weekly {
                    interval_weeks: 1,
                    day_of_week: DayOfWeek::Friday,
                },
            ),
            (
                json!({"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 31}}),
                Schedule::AbsoluteMonthly {
                    interval_months: 1,
                    day_of_month: 31,
                },
            ),
            (
                json!({"relativeMonthly": {"intervalMonths": 2, "weekIndex": "Last", "dayOfWeek": "sunday"},
                       "daily": null}),
                Schedule::RelativeMonthly {
                    interval_months: 2,
                    day_of_week: DayOfWeek::Sunday,
                    week_index: WeekIndex::Last,
                },
            ),
        ] {
            let mut w = json!({"schedule": schedule, "durationHours": 4, "startTime": "00:00",
                               "startDate": "2026-01-01"});
            if !matches!(want, Schedule::RelativeMonthly { .. }) {
                w.as_object_mut().unwrap().remove("startDate");
            }
            let m = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap();
            assert_eq!(m.maintenance.kubernetes.unwrap().schedule, want);
            assert!(m.maintenance.node_os.is_none());
        }
    }

    #[test]
    fn weekly_interval_counts_from_sunday_as_aks_does() {
        // Azure/AKS#5720: every 2 weeks on Sunday from Tuesday 2026-04-14 first opens 04-26.
        let w = json!({"schedule": {"weekly": {"intervalWeeks": 2, "dayOfWeek": "Sunday"}},
                       "durationHours": 4, "startTime": "01:00", "startDate": "2026-04-14"});
        let m = maintenance_of(&one_config(NODE_OS_UPGRADE_SCHEDULE, w.clone())).unwrap();
        let window = m.maintenance.node_os.unwrap();
        assert_eq!(window.start_date.as_deref(), Some("2026-04-26"));
        assert_eq!(m.notes.len(), 1);
        assert!(
            m.notes[0].contains("startDate 2026-04-14 taken as 2026-04-26"),
            "{:?}",
            m.notes
        );
        let at = |d| Utc.with_ymd_and_hms(2026, 4, d, 0, 0, 0).unwrap();
        let compiled = window.compile().unwrap();
        assert_eq!(
            compiled.next_opening(at(13)),
            Some(Utc.with_ymd_and_hms(2026, 4, 26, 1, 0, 0).unwrap())
        );
        assert_eq!(
            compiled.next_opening(at(27)),
            Some(Utc.with_ymd_and_hms(2026, 5, 10, 1, 0, 0).unwrap())
        );
        // Copied as it is, waverun's Monday weeks would have opened a week early.
        let mut unadjusted = window.clone();
        unadjusted.start_date = Some("2026-04-14".into());
        assert_eq!(
            unadjusted.compile().unwrap().next_opening(at(13)),
            Some(Utc.with_ymd_and_hms(2026, 4, 19, 1, 0, 0).unwrap())
        );

        // A Sunday startDate and a Monday window: AKS opens the next day, waverun alone would
        // have waited two weeks.
        let w = json!({"schedule": {"weekly": {"intervalWeeks": 2, "dayOfWeek": "Monday"}},
                       "durationHours": 4, "startTime": "01:00", "startDate": "2026-04-12"});
        let m = maintenance_of(&one_config(NODE_OS_UPGRADE_SCHEDULE, w)).unwrap();
        let window = m.maintenance.node_os.unwrap();
        assert_eq!(window.start_date.as_deref(), Some("2026-04-13"));
        assert_eq!(
            window.compile().unwrap().next_opening(at(12)),
            Some(Utc.with_ymd_and_hms(2026, 4, 13, 1, 0, 0).unwrap())
        );

        // Where both count alike, startDate is kept.
        let w = json!({"schedule": {"weekly": {"intervalWeeks": 3, "dayOfWeek": "Friday"}},
                       "durationHours": 4, "startTime": "01:00", "startDate": "2026-04-14"});
        let m = maintenance_of(&one_config(NODE_OS_UPGRADE_SCHEDULE, w)).unwrap();
        assert_eq!(
            m.maintenance.node_os.unwrap().start_date.as_deref(),
            Some("2026-04-17")
        );
    }

    #[test]
    fn an_interval_without_start_date_is_refused_naming_configuration_and_field() {
        for (schedule, field) in [
            (json!({"daily": {"intervalDays": 3}}), "daily.intervalDays"),
            (
                json!({"weekly": {"intervalWeeks": 2, "dayOfWeek": "Monday"}}),
                "weekly.intervalWeeks",
            ),
            (
                json!({"absoluteMonthly": {"intervalMonths": 2, "dayOfMonth": 1}}),
                "absoluteMonthly.intervalMonths",
            ),
        ] {
            let w = json!({"schedule": schedule, "durationHours": 4, "startTime": "00:00"});
            let e = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap_err();
            assert_eq!(e.kind, ModelErrorKind::Unsupported);
            assert_eq!(
                e.path,
                format!("value[0].properties.maintenanceWindow.schedule.{field}")
            );
            assert!(
                e.message.starts_with("aksManagedAutoUpgradeSchedule: "),
                "{e}"
            );
            assert!(e.message.contains("startDate is missing"), "{e}");
            assert_eq!(ProviderError::from(e).code, ProviderErrorCode::Unsupported);
        }
    }

    #[test]
    fn fields_waverun_cannot_carry_are_refused_not_dropped() {
        let base = json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 4, "startTime": "00:00"});
        let mut w = base.clone();
        w["notAllowedWeekdays"] = json!(["Friday"]);
        let e = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap_err();
        assert_eq!(
            e.path,
            "value[0].properties.maintenanceWindow.notAllowedWeekdays"
        );
        assert_eq!(e.kind, ModelErrorKind::Unsupported);

        let mut w = base.clone();
        w["schedule"]["daily"]["skipHolidays"] = json!(true);
        let e = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap_err();
        assert_eq!(
            e.path,
            "value[0].properties.maintenanceWindow.schedule.daily.skipHolidays"
        );

        let mut w = base.clone();
        w["schedule"] = json!({"hourly": {"intervalHours": 6}});
        let e = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap_err();
        assert_eq!(
            e.path,
            "value[0].properties.maintenanceWindow.schedule.hourly"
        );

        let list = json!({"value": [{"name": NODE_OS_UPGRADE_SCHEDULE, "properties": {
            "maintenanceWindow": base, "timeInWeek": [{"day": "Monday", "hourSlots": [1]}]}}]});
        let e = maintenance_of(&list).unwrap_err();
        assert_eq!(e.path, "value[0].properties.timeInWeek");
        assert!(
            e.message.starts_with("aksManagedNodeOSUpgradeSchedule: "),
            "{e}"
        );

        let list = json!({"value": [{"name": NODE_OS_UPGRADE_SCHEDULE, "properties": {
            "maintenanceWindow": base, "timeInWeek": [], "blackout": {"x": 1}}}]});
        assert_eq!(
            maintenance_of(&list).unwrap_err().path,
            "value[0].properties.blackout"
        );
    }

    #[test]
    fn a_schedule_needs_exactly_one_type() {
        for schedule in [
            json!({}),
            json!({"daily": {"intervalDays": 1}, "weekly": {"intervalWeeks": 1, "dayOfWeek": "Monday"}}),
        ] {
            let w = json!({"schedule": schedule, "durationHours": 4, "startTime": "00:00"});
            let e = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap_err();
            assert_eq!(e.path, "value[0].properties.maintenanceWindow.schedule");
            assert!(e.message.contains("exactly one of"), "{e}");
        }
    }

    #[test]
    fn a_window_breaking_waverun_rules_is_refused_with_its_path() {
        for (patch, path) in [
            (json!({"durationHours": 3}), "durationHours"),
            (json!({"durationHours": 25}), "durationHours"),
            (json!({"startTime": "24:00"}), "startTime"),
            (json!({"utcOffset": "+15:00"}), "utcOffset"),
            (json!({"startDate": "2026-02-30"}), "startDate"),
            (
                json!({"notAllowedDates": [{"start": "2026-12-27", "end": "2026-12-24"}]}),
                "notAllowedDates[0].end",
            ),
            (
                json!({"schedule": {"daily": {"intervalDays": 8}}}),
                "schedule.daily.intervalDays",
            ),
        ] {
            let mut w = json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 4, "startTime": "00:00"});
            for (k, v) in patch.as_object().unwrap() {
                w[k] = v.clone();
            }
            let e = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap_err();
            assert_eq!(
                e.path,
                format!("value[0].properties.maintenanceWindow.{path}"),
                "{e}"
            );
            assert_eq!(e.kind, ModelErrorKind::Unsupported);
        }
        // No default for the required fields: AKS's 24 hours would be the widest window.
        for field in ["durationHours", "startTime", "schedule"] {
            let mut w = json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 4, "startTime": "00:00"});
            w.as_object_mut().unwrap().remove(field);
            let e = maintenance_of(&one_config(AUTO_UPGRADE_SCHEDULE, w)).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("value[0].properties.maintenanceWindow.{field}: missing")
            );
        }
    }

    #[test]
    fn not_allowed_time_closes_the_whole_local_dates_it_touches() {
        let list = json!({"value": [{"name": AUTO_UPGRADE_SCHEDULE, "properties": {
            "maintenanceWindow": {"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 4,
                                  "startTime": "00:00", "utcOffset": "+02:00",
                                  "notAllowedDates": [{"start": "2026-12-24", "end": "2026-12-26"}]},
            "notAllowedTime": [{"start": "2027-01-01T21:30:00Z", "end": "2027-01-02T03:00:00+00:00"}]}}]});
        let m = maintenance_of(&list).unwrap();
        let w = m.maintenance.kubernetes.unwrap();
        assert_eq!(
            w.not_allowed_dates,
            vec![
                DateSpan {
                    start: "2026-12-24".into(),
                    end: "2026-12-26".into()
                },
                // 21:30Z is 23:30 on 01-01 at +02:00; 03:00Z is 05:00 on 01-02.
                DateSpan {
                    start: "2027-01-01".into(),
                    end: "2027-01-02".into()
                },
            ]
        );
        assert!(m.notes[0]
            .contains("notAllowedTime[0] closes the whole local dates 2027-01-01..2027-01-02"));
    }

    #[test]
    fn a_configuration_named_twice_or_a_next_page_is_refused() {
        let w = json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 4, "startTime": "00:00"});
        let list = json!({"value": [
            {"name": AUTO_UPGRADE_SCHEDULE, "properties": {"maintenanceWindow": w}},
            {"name": "AKSManagedAutoUpgradeSchedule", "properties": {"maintenanceWindow": w}}]});
        assert_eq!(maintenance_of(&list).unwrap_err().path, "value[1].name");
        let mut list = one_config(AUTO_UPGRADE_SCHEDULE, w);
        list["nextLink"] = json!("https://management.azure.com/next");
        assert_eq!(maintenance_of(&list).unwrap_err().path, "nextLink");
    }

    // ----- releases -----

    #[test]
    fn kubernetes_releases_are_every_patch_with_previews_flagged() {
        let r = releases_of(&example(KUBERNETES_VERSIONS), None).unwrap();
        let got: Vec<(&str, bool)> = r
            .kubernetes
            .iter()
            .map(|r| (r.version.as_str(), r.preview))
            .collect();
        assert_eq!(
            got,
            vec![
                ("1.23.12", false),
                ("1.23.15", false),
                ("1.24.6", false),
                ("1.24.9", false),
                ("1.25.4", false),
                ("1.25.5", false),
                ("1.26.0", true),
            ]
        );
        assert!(r
            .kubernetes
            .iter()
            .all(|r| r.since.is_none() && !r.security_patch));
        assert!(r.node_images.is_empty());
    }

    #[test]
    fn kubernetes_versions_sort_as_numbers() {
        let body = json!({"values": [
            {"version": "1.10", "patchVersions": {"1.10.2": {"upgrades": []}, "1.10.10": {"upgrades": []}}},
            {"version": "1.9", "patchVersions": {"1.9.11": {"upgrades": []}}},
            {"version": "1.11"}]});
        let r = releases_of(&body, None).unwrap();
        let got: Vec<&str> = r.kubernetes.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(got, ["1.9.11", "1.10.2", "1.10.10"]);
        let bad = json!({"values": [{"version": "1.10", "patchVersions": {"1.10": {}}}]});
        assert_eq!(
            releases_of(&bad, None).unwrap_err().path,
            "values[0].patchVersions.\"1.10\""
        );
        assert_eq!(
            releases_of(&json!({}), None).unwrap_err().to_string(),
            "values: missing"
        );
    }

    #[test]
    fn node_images_are_read_from_value_or_values() {
        let k = example(KUBERNETES_VERSIONS);
        let images = example(NODE_IMAGE_VERSIONS);
        let r = releases_of(&k, Some(&images)).unwrap();
        let got: Vec<&str> = r.node_images.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(
            got,
            [
                "AKSCBLMariner-V1-202308.28.0",
                "AKSUbuntu-2204gen2minimalcontainerd-202401.12.0"
            ]
        );
        assert!(r
            .node_images
            .iter()
            .all(|r| !r.preview && !r.security_patch && r.since.is_none()));
        let values = json!({"values": images["value"]});
        assert_eq!(
            releases_of(&k, Some(&values)).unwrap().node_images,
            r.node_images
        );
        let no_full_name = json!({"value": [{"os": "AKSUbuntu", "sku": "2204gen2containerd", "version": "202401.12.0"}]});
        assert_eq!(
            releases_of(&k, Some(&no_full_name)).unwrap().node_images[0].version,
            "AKSUbuntu-2204gen2containerd-202401.12.0"
        );
    }

    // ----- bodies -----

    #[test]
    fn full_upgrade_is_one_put_of_the_cluster_and_the_selected_pools() {
        let body =
            cluster_upgrade_body(&two_pool_cluster(), "1.10.13", &PoolSelection::All).unwrap();
        assert_eq!(body["properties"]["kubernetesVersion"], "1.10.13");
        for p in body["properties"]["agentPoolProfiles"].as_array().unwrap() {
            assert_eq!(p["orchestratorVersion"], "1.10.13");
        }
        let body = cluster_upgrade_body(
            &two_pool_cluster(),
            "1.10.13",
            &PoolSelection::Named(vec!["WIN1".into()]),
        )
        .unwrap();
        let pools = &body["properties"]["agentPoolProfiles"];
        assert_eq!(pools[0]["orchestratorVersion"], "1.9.6");
        assert_eq!(pools[1]["orchestratorVersion"], "1.10.13");
        let e = cluster_upgrade_body(
            &two_pool_cluster(),
            "1.10.13",
            &PoolSelection::Named(vec!["nope".into()]),
        )
        .unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::InvalidRequest);
        assert!(
            e.message
                .contains("no pool \"nope\" (it has nodepool1, win1)"),
            "{e}"
        );
    }

    #[test]
    fn control_plane_only_leaves_the_pools_as_read() {
        let get = two_pool_cluster();
        let body = cluster_upgrade_body(&get, "1.10.13", &PoolSelection::ControlPlaneOnly).unwrap();
        assert_eq!(body["properties"]["kubernetesVersion"], "1.10.13");
        let pools = &body["properties"]["agentPoolProfiles"];
        assert_eq!(pools[0]["orchestratorVersion"], "1.9.6");
        assert_eq!(pools[1]["orchestratorVersion"], "1.9");
    }

    #[test]
    fn a_legacy_cluster_cannot_upgrade_its_control_plane_alone() {
        let e = cluster_upgrade_body(&cluster_get(), "1.10.13", &PoolSelection::ControlPlaneOnly)
            .unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::NotAllowed);
        assert_eq!(
            e.message,
            "clustername1 is a legacy cluster (maxAgentPools is 1 (below 8)): AKS upgrades every \
             pool with its control plane, so it cannot upgrade the control plane alone or leave a \
             pool behind"
        );
        assert_eq!(ProviderError::from(e).code, ProviderErrorCode::NotAllowed);
        let mut get = two_pool_cluster();
        get["properties"]["agentPoolProfiles"][1]["type"] = json!("AvailabilitySet");
        let e = cluster_upgrade_body(
            &get,
            "1.10.13",
            &PoolSelection::Named(vec!["nodepool1".into()]),
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("pool \"win1\" is of type AvailabilitySet"),
            "{e}"
        );
        assert!(cluster_upgrade_body(&cluster_get(), "1.10.13", &PoolSelection::All).is_ok());
    }

    #[test]
    fn cluster_body_is_what_was_read_minus_read_only_fields_secrets_and_node_images() {
        let get = cluster_get();
        let body = cluster_upgrade_body(&get, "1.10.13", &PoolSelection::All).unwrap();
        let mut want = get.clone();
        for key in ["id", "name", "type", "eTag"] {
            want.as_object_mut().unwrap().remove(key);
        }
        let p = want["properties"].as_object_mut().unwrap();
        for key in [
            "azurePortalFQDN",
            "currentKubernetesVersion",
            "fqdn",
            "maxAgentPools",
            "provisioningState",
            "servicePrincipalProfile",
        ] {
            p.remove(key);
        }
        p["kubernetesVersion"] = json!("1.10.13");
        remove(
            &mut p["networkProfile"],
            "loadBalancerProfile.effectiveOutboundIPs",
        );
        let pool = p["agentPoolProfiles"][0].as_object_mut().unwrap();
        for key in [
            "currentOrchestratorVersion",
            "eTag",
            "provisioningState",
            "nodeImageVersion",
        ] {
            pool.remove(key);
        }
        pool["orchestratorVersion"] = json!("1.10.13");
        assert_eq!(body, want);
        // The forced-upgrade setting the cluster has is the operator's: kept.
        assert_eq!(
            body["properties"]["upgradeSettings"],
            get["properties"]["upgradeSettings"]
        );
    }

    #[test]
    fn pool_upgrade_body_sets_the_version_and_drops_the_image() {
        let get = example(POOL_GET);
        assert_eq!(if_match(&get), Some("ebwiyfneowv"));
        let body = pool_upgrade_body(&get, "1.10.13").unwrap();
        assert_eq!(
            body,
            json!({"properties": {"count": 3, "maxPods": 110, "orchestratorVersion": "1.10.13",
                   "osType": "Linux", "upgradeSettings": {"maxSurge": "33%"},
                   "vmSize": "Standard_DS1_v2"}})
        );
        assert_eq!(
            pool_put_body(&get)["properties"]["orchestratorVersion"],
            "1.9.6"
        );
        assert_eq!(
            pool_upgrade_body(&json!({}), "1.10.13")
                .unwrap_err()
                .to_string(),
            "properties: missing"
        );
    }

    #[test]
    fn rollback_only_to_an_image_aks_recently_used() {
        let get = example(POOL_GET);
        let profile = upgrade_profile_with_recent();
        let body =
            pool_image_rollback_body(&get, "AKSUbuntu-2204gen2containerd-202410.15.0", &profile)
                .unwrap();
        assert_eq!(
            body["properties"]["nodeImageVersion"],
            "AKSUbuntu-2204gen2containerd-202410.15.0"
        );
        assert_eq!(body["properties"]["orchestratorVersion"], "1.9.6");
        assert!(body["properties"].get("eTag").is_none());

        let e =
            pool_image_rollback_body(&get, "AKSUbuntu-2204gen2containerd-202301.01.0", &profile)
                .unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::NotAllowed);
        assert!(e.message.contains("AKSUbuntu-2204gen2containerd-202410.15.0, AKSUbuntu-2204gen2containerd-202409.30.0"), "{e}");
        let e = pool_image_rollback_body(
            &get,
            "AKSUbuntu:1604:2020.03.11",
            &example(POOL_UPGRADE_PROFILE),
        )
        .unwrap_err();
        assert!(e.message.ends_with("(there are none)"), "{e}");
    }

    #[test]
    fn force_upgrade_override_sets_until_and_keeps_other_upgrade_settings() {
        let mut get = two_pool_cluster();
        get["properties"]["upgradeSettings"] =
            json!({"overrideSettings": {"forceUpgrade": false}, "future": 1});
        let body = cluster_upgrade_body(&get, "1.10.13", &PoolSelection::All).unwrap();
        let body = force_upgrade_override(body, "2026-12-04T15:00:00Z").unwrap();
        assert_eq!(
            body["properties"]["upgradeSettings"],
            json!({"overrideSettings": {"forceUpgrade": true, "until": "2026-12-04T15:00:00Z"}, "future": 1})
        );
        get["properties"]
            .as_object_mut()
            .unwrap()
            .remove("upgradeSettings");
        let body =
            force_upgrade_override(cluster_put_body(&get), "2026-12-04T16:00:00+01:00").unwrap();
        assert_eq!(
            body["properties"]["upgradeSettings"],
            json!({"overrideSettings": {"forceUpgrade": true, "until": "2026-12-04T16:00:00+01:00"}})
        );
        let e = force_upgrade_override(cluster_put_body(&get), "tomorrow").unwrap_err();
        assert_eq!(
            (e.kind, e.path.as_str()),
            (ModelErrorKind::InvalidRequest, "until")
        );
    }

    #[test]
    fn read_only_lists_are_the_swaggers() {
        let swagger: Value = serde_json::from_str(SWAGGER).unwrap();
        let defs = &swagger["definitions"];
        let envelope = ["id", "name", "type", "systemData"];
        for (def, list) in [
            ("ManagedCluster", CLUSTER_READ_ONLY),
            ("AgentPool", POOL_READ_ONLY),
        ] {
            let mut derived = BTreeSet::new();
            walk_read_only(defs, &defs[def], "", &mut Vec::new(), &mut derived);
            derived.extend(envelope.iter().map(|s| s.to_string()));
            let ours: BTreeSet<String> = list.iter().map(|s| s.to_string()).collect();
            assert_eq!(ours, derived, "{def}");
        }
    }

    #[test]
    fn no_read_only_property_survives_in_any_body_and_unknown_fields_do() {
        let swagger: Value = serde_json::from_str(SWAGGER).unwrap();
        let defs = &swagger["definitions"];
        let (cluster_def, pool_def) = (&defs["ManagedCluster"], &defs["AgentPool"]);

        // The reference GETs with every read-only property planted and unknown fields added.
        let mut cluster = cluster_get();
        let mut ro = BTreeSet::new();
        walk_read_only(defs, cluster_def, "", &mut Vec::new(), &mut ro);
        ro.extend(["id", "name", "type", "systemData"].map(String::from));
        for path in &ro {
            plant(&mut cluster, &path.split('.').collect::<Vec<_>>());
        }
        cluster["properties"]["agentPoolProfiles"][0]["name"] = json!("nodepool1");
        let unknown_cluster = [
            "/zzTopLevel",
            "/properties/zzFuture",
            "/properties/agentPoolProfiles/0/zzFuture",
            "/properties/networkProfile/zzFuture",
            "/identity/userAssignedIdentities/k/zzFuture",
        ];
        for p in unknown_cluster {
            set_pointer(&mut cluster, p, json!({"kept": true}));
        }
        // The walker finds every planted property in what was read.
        assert_eq!(survivors(defs, cluster_def, &cluster), ro);

        let mut pool = example(POOL_GET);
        let mut pool_ro = BTreeSet::new();
        walk_read_only(defs, pool_def, "", &mut Vec::new(), &mut pool_ro);
        pool_ro.extend(["id", "name", "type", "systemData"].map(String::from));
        for path in &pool_ro {
            plant(&mut pool, &path.split('.').collect::<Vec<_>>());
        }
        let unknown_pool = [
            "/zzTopLevel",
            "/properties/zzFuture",
            "/properties/upgradeSettings/zzFuture",
        ];
        for p in unknown_pool {
            set_pointer(&mut pool, p, json!({"kept": true}));
        }
        assert_eq!(survivors(defs, pool_def, &pool), pool_ro);

        let mut modern = cluster.clone();
        modern["properties"]["maxAgentPools"] = json!(100);
        let cluster_bodies = [
            cluster_put_body(&cluster),
            cluster_upgrade_body(&cluster, "1.10.13", &PoolSelection::All).unwrap(),
            cluster_upgrade_body(&modern, "1.10.13", &PoolSelection::ControlPlaneOnly).unwrap(),
            force_upgrade_override(
                cluster_upgrade_body(&cluster, "1.10.13", &PoolSelection::All).unwrap(),
                "2026-12-04T15:00:00Z",
            )
            .unwrap(),
        ];
        for body in &cluster_bodies {
            assert_eq!(survivors(defs, cluster_def, body), BTreeSet::new());
            for p in unknown_cluster {
                assert_eq!(body.pointer(p), Some(&json!({"kept": true})), "{p}");
            }
            assert!(body["properties"].get("servicePrincipalProfile").is_none());
            assert!(body["properties"]["agentPoolProfiles"][0]
                .get("nodeImageVersion")
                .is_none());
        }
        let pool_bodies = [
            (pool_put_body(&pool), false),
            (pool_upgrade_body(&pool, "1.10.13").unwrap(), false),
            (
                pool_image_rollback_body(
                    &pool,
                    "AKSUbuntu-2204gen2containerd-202410.15.0",
                    &upgrade_profile_with_recent(),
                )
                .unwrap(),
                true,
            ),
        ];
        for (body, rollback) in &pool_bodies {
            assert_eq!(survivors(defs, pool_def, body), BTreeSet::new());
            for p in unknown_pool {
                assert_eq!(body.pointer(p), Some(&json!({"kept": true})), "{p}");
            }
            assert_eq!(
                body["properties"].get("nodeImageVersion").is_some(),
                *rollback
            );
        }
    }

    // ----- ARM errors -----

    #[test]
    fn conflict_with_another_operation_is_operation_in_progress() {
        let body = arm_error("OperationNotAllowed", None,
            "Operation is not allowed: Another operation (Upgrading - clustername1) is in progress, please wait for it to finish before starting a new operation. See https://aka.ms/aks-pending-operation for more details");
        let e = classify_arm_error(409, &body, Some("30"));
        assert_eq!(e.code, ProviderErrorCode::OperationInProgress);
        assert!(e.retryable && !e.uncertain);
        assert_eq!(e.retry_after_seconds, Some(30));
        assert!(e
            .message
            .starts_with("OperationNotAllowed: Operation is not allowed: Another operation"));
        let e = classify_arm_error(409, &arm_error("Conflict", None, "x"), None);
        assert_eq!(e.code, ProviderErrorCode::Internal);
    }

    #[test]
    fn status_decides_before_code() {
        let refused = arm_error("OperationNotAllowed", None,
            "Upgrading Kubernetes version 1.28.5 to 1.30.1 is not allowed. Available upgrades: [1.29.4]");
        let e = classify_arm_error(400, &refused, None);
        assert_eq!(e.code, ProviderErrorCode::NotAllowed);
        assert!(!e.retryable);
        assert_eq!(
            e.message,
            "OperationNotAllowed: Upgrading Kubernetes version 1.28.5 to 1.30.1 is not allowed. Available upgrades: [1.29.4]"
        );
    }

    #[test]
    fn deprecated_api_block_is_not_allowed_with_its_subcode() {
        let body = arm_error(
            "ValidationError",
            Some("UpgradeBlockedOnDeprecatedAPIUsage"),
            "Upgrade is blocked due to deprecated API usage",
        );
        let e = classify_arm_error(400, &body, None);
        assert_eq!(e.code, ProviderErrorCode::NotAllowed);
        assert_eq!(
            e.message,
            "ValidationError (UpgradeBlockedOnDeprecatedAPIUsage): Upgrade is blocked due to deprecated API usage"
        );
        assert!(is_deprecated_api_block(400, &body));
        assert!(!is_deprecated_api_block(409, &body));
        assert!(!is_deprecated_api_block(
            400,
            &arm_error("ValidationError", None, "x")
        ));
    }

    #[test]
    fn each_status_has_its_code() {
        let body = arm_error("Some", None, "thing");
        for (status, code) in [
            (401, ProviderErrorCode::Unauthenticated),
            (403, ProviderErrorCode::PermissionDenied),
            (404, ProviderErrorCode::NotFound),
            (412, ProviderErrorCode::PreconditionFailed),
            (429, ProviderErrorCode::Throttled),
            (408, ProviderErrorCode::Unavailable),
            (500, ProviderErrorCode::Unavailable),
            (502, ProviderErrorCode::Unavailable),
            (503, ProviderErrorCode::Unavailable),
            (418, ProviderErrorCode::Internal),
        ] {
            let e = classify_arm_error(status, &body, None);
            assert_eq!((status, e.code), (status, code));
            assert_eq!(e.retryable, code.retryable());
            assert_eq!(e.message, "Some: thing");
        }
    }

    #[test]
    fn throttled_keeps_retry_after_seconds() {
        let body = arm_error("TooManyRequests", None, "slow down");
        let e = classify_arm_error(429, &body, Some(" 17 "));
        assert_eq!(
            (e.code, e.retry_after_seconds),
            (ProviderErrorCode::Throttled, Some(17))
        );
        assert!(e.retryable);
        let e = classify_arm_error(429, &body, Some("Wed, 21 Oct 2026 07:28:00 GMT"));
        assert_eq!(e.retry_after_seconds, None);
    }

    #[test]
    fn an_unreadable_body_keeps_the_status_and_its_first_200_bytes() {
        let html = format!("<html><body>{}</body></html>", "x".repeat(500));
        let e = classify_arm_error(502, html.as_bytes(), None);
        assert_eq!(e.code, ProviderErrorCode::Unavailable);
        assert_eq!(e.message, format!("HTTP 502: {}", &html[..200]));
        assert_eq!(
            classify_arm_error(404, b"", None).message,
            "HTTP 404 (no body)"
        );
        let e = classify_arm_error(
            400,
            br#"{"code": "InvalidParameter", "message": "top-level"}"#,
            None,
        );
        assert_eq!(e.message, "InvalidParameter: top-level");
        let multibyte = "é".repeat(150);
        assert!(classify_arm_error(500, multibyte.as_bytes(), None)
            .message
            .starts_with("HTTP 500: é"));
    }

    #[test]
    fn model_errors_map_to_provider_codes() {
        let e = ClusterId::parse("/nope").unwrap_err();
        assert_eq!(
            ProviderError::from(e).code,
            ProviderErrorCode::InvalidRequest
        );
    }

    // ----- helpers -----

    fn example(text: &str) -> Value {
        let v: Value = serde_json::from_str(text).unwrap();
        v["responses"]["200"]["body"].clone()
    }

    fn cluster_get() -> Value {
        example(CLUSTER_GET)
    }

    fn reference_id() -> String {
        cluster_get()["id"].as_str().unwrap().to_string()
    }

    /// The reference cluster, not legacy, with a second (Windows) pool on a `major.minor` alias.
    fn two_pool_cluster() -> Value {
        let mut body = cluster_get();
        body["properties"]["maxAgentPools"] = json!(100);
        let mut win = body["properties"]["agentPoolProfiles"][0].clone();
        win["name"] = json!("win1");
        win["osType"] = json!("Windows");
        win["orchestratorVersion"] = json!("1.9");
        win["eTag"] = json!("wineTag");
        win["nodeImageVersion"] = json!("AKSWindows-2022-containerd-20348.2582.240716");
        body["properties"]["agentPoolProfiles"]
            .as_array_mut()
            .unwrap()
            .push(win);
        body
    }

    fn upgrade_profile_with_recent() -> Value {
        let mut profile = example(POOL_UPGRADE_PROFILE);
        profile["properties"]["recentlyUsedVersions"] = json!([
            {"orchestratorVersion": "1.9.6", "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202410.15.0",
             "timestamp": "2026-11-01T00:00:00Z"},
            {"orchestratorVersion": "1.9.6", "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202409.30.0",
             "timestamp": "2026-10-01T00:00:00Z"}]);
        profile
    }

    fn one_config(name: &str, window: Value) -> Value {
        json!({"value": [{"name": name, "id": format!("{}/maintenanceConfigurations/{name}", reference_id()),
                          "properties": {"maintenanceWindow": window}}]})
    }

    fn arm_error(code: &str, subcode: Option<&str>, message: &str) -> Vec<u8> {
        let mut e = json!({"code": code, "message": message});
        if let Some(s) = subcode {
            e["subcode"] = json!(s);
        }
        serde_json::to_vec(&json!({ "error": e })).unwrap()
    }

    /// Removes a dotted path (`a.b[0].c`).
    fn remove(v: &mut Value, path: &str) {
        let pointer = format!("/{}", path.replace(['.', '['], "/").replace(']', ""));
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let parent = v.pointer_mut(parent).unwrap();
        match parent {
            Value::Object(m) => {
                m.remove(key).unwrap();
            }
            Value::Array(a) => {
                a.remove(key.parse().unwrap());
            }
            _ => panic!("{path}"),
        }
    }

    fn set_pointer(v: &mut Value, pointer: &str, value: Value) {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let mut at = v;
        for seg in parent.split('/').skip(1) {
            at = match at {
                Value::Array(a) => &mut a[seg.parse::<usize>().unwrap()],
                other => other
                    .as_object_mut()
                    .unwrap()
                    .entry(seg)
                    .or_insert_with(|| json!({})),
            };
        }
        at.as_object_mut().unwrap().insert(key.into(), value);
    }

    /// Puts a value at every place a read-only path names, making the parents it needs.
    fn plant(v: &mut Value, segs: &[&str]) {
        let (first, rest) = segs.split_first().unwrap();
        let obj = v.as_object_mut().unwrap();
        if rest.is_empty() {
            obj.entry(*first).or_insert(json!("planted"));
        } else if let Some(key) = first.strip_suffix("[]") {
            let a = obj.entry(key).or_insert(json!([]));
            if a.as_array().unwrap().is_empty() {
                a.as_array_mut().unwrap().push(json!({}));
            }
            a.as_array_mut()
                .unwrap()
                .iter_mut()
                .for_each(|e| plant(e, rest));
        } else if let Some(key) = first.strip_suffix("{}") {
            let m = obj.entry(key).or_insert(json!({}));
            if m.as_object().unwrap().is_empty() {
                m.as_object_mut().unwrap().insert("k".into(), json!({}));
            }
            m.as_object_mut()
                .unwrap()
                .values_mut()
                .for_each(|e| plant(e, rest));
        } else {
            plant(obj.entry(*first).or_insert(json!({})), rest);
        }
    }

    /// A local `$ref`'s definition (`None` for common-types', outside this swagger).
    fn resolve<'a>(defs: &'a Value, schema: &'a Value) -> Option<(&'a Value, Option<&'a str>)> {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => r
                .strip_prefix("#/definitions/")
                .map(|name| (&defs[name], Some(name))),
            None => Some((schema, None)),
        }
    }

    fn is_read_only(defs: &Value, schema: &Value) -> bool {
        schema["readOnly"] == json!(true)
            || resolve(defs, schema).is_some_and(|(s, _)| s["readOnly"] == json!(true))
    }

    /// A schema's properties, with those of its `allOf`.
    fn properties_of<'a>(defs: &'a Value, schema: &'a Value) -> Vec<(&'a String, &'a Value)> {
        let mut out: Vec<(&String, &Value)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .collect();
        for part in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some((s, _)) = resolve(defs, part) {
                out.extend(properties_of(defs, s));
            }
        }
        out
    }

    /// Every read-only property under `schema`, as `a.b[].c{}.d` paths.
    fn walk_read_only(
        defs: &Value,
        schema: &Value,
        path: &str,
        stack: &mut Vec<String>,
        out: &mut BTreeSet<String>,
    ) {
        for (name, prop) in properties_of(defs, schema) {
            let p = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            if is_read_only(defs, prop) {
                out.insert(p);
            } else {
                descend(defs, prop, &p, stack, out);
            }
        }
    }

    fn descend(
        defs: &Value,
        prop: &Value,
        path: &str,
        stack: &mut Vec<String>,
        out: &mut BTreeSet<String>,
    ) {
        let Some((schema, name)) = resolve(defs, prop) else {
            return;
        };
        if let Some(n) = name {
            if stack.iter().any(|s| s == n) {
                return;
            }
            stack.push(n.to_string());
        }
        walk_read_only(defs, schema, path, stack, out);
        if let Some(items) = schema.get("items") {
            descend(defs, items, &format!("{path}[]"), stack, out);
        }
        if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            descend(defs, ap, &format!("{path}{{}}"), stack, out);
        }
        if name.is_some() {
            stack.pop();
        }
    }

    /// The read-only properties present in `body`, found by walking it along the swagger (so
    /// independent of the lists under test), as `a.b[].c{}.d` paths.
    fn survivors(defs: &Value, def: &Value, body: &Value) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for key in ["id", "name", "type", "systemData"] {
            if body.get(key).is_some() {
                out.insert(key.to_string());
            }
        }
        check_body(defs, def, body, "", &mut out);
        out
    }

    fn check_body(
        defs: &Value,
        schema: &Value,
        body: &Value,
        path: &str,
        out: &mut BTreeSet<String>,
    ) {
        let Some(obj) = body.as_object() else {
            return;
        };
        let props = properties_of(defs, schema);
        for (key, value) in obj {
            let p = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let Some((_, prop)) = props.iter().find(|(n, _)| *n == key) else {
                continue; // unknown to the swagger: kept, not checked
            };
            if is_read_only(defs, prop) {
                out.insert(p);
            } else {
                check_value(defs, prop, value, &p, out);
            }
        }
    }

    fn check_value(
        defs: &Value,
        prop: &Value,
        value: &Value,
        path: &str,
        out: &mut BTreeSet<String>,
    ) {
        let Some((schema, _)) = resolve(defs, prop) else {
            return;
        };
        match value {
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for it in items {
                        check_value(defs, item_schema, it, &format!("{path}[]"), out);
                    }
                }
            }
            Value::Object(m) => {
                if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                    for v in m.values() {
                        check_value(defs, ap, v, &format!("{path}{{}}"), out);
                    }
                } else {
                    check_body(defs, schema, value, path, out);
                }
            }
            _ => {}
        }
    }
}
