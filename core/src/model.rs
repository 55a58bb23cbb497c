//! The resources users write: members, update strategies, update runs, the release catalog and
//! the freeze calendar. Field names match the reference service's JSON (camelCase), so existing
//! strategy files work unchanged.

pub use crate::labels::Labels;
use crate::window::MaintenanceWindow;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::time::Timestamp;

/// A cluster in the fleet.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Member {
    /// Unique name, `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, 1–50 chars.
    pub name: String,
    /// Optional update-group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kubernetes labels.
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, String>))]
    pub labels: Labels,
    /// Where the cluster runs; release availability is per region.
    pub region: String,
    /// Current control-plane version `x.y.z`.
    pub kubernetes_version: String,
    /// Node pools.
    #[serde(default)]
    pub node_pools: Vec<NodePool>,
    /// Maintenance windows.
    #[serde(default, skip_serializing_if = "Maintenance::is_empty")]
    pub maintenance: Maintenance,
    /// Whether the cluster has long-term support enabled.
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "crate::document::strict_bool"
    )]
    pub long_term_support: bool,
    /// Which cluster provider drives it, and the provider's id for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRef>,
}

/// A node pool of a member.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    /// Pool name, unique within the member.
    pub name: String,
    /// Operating system of the pool's nodes.
    pub os_type: OsType,
    /// Current node image version; its family is everything before the last `-`.
    pub image_version: String,
    /// Whether the pool was created from a snapshot (keeps its image under `Latest`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_snapshot: bool,
}

/// One pool's target image (a member upgrade's, an event's, a status node's).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolImage {
    /// Node pool name.
    pub node_pool: String,
    /// Target image version.
    pub image_version: String,
}

/// Node operating system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OsType {
    /// Linux nodes.
    Linux,
    /// Windows nodes.
    Windows,
}

/// A member's maintenance windows.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Maintenance {
    // Both windows are boxed: most members have none, and the engine holds a `Member` per
    // fleet member (16 bytes each instead of 224).
    /// Governs `Full` and `ControlPlaneOnly` upgrades.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<Box<MaintenanceWindow>>,
    /// Governs `NodeImageOnly` upgrades.
    #[serde(
        default,
        rename = "nodeOS",
        alias = "nodeOs",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_os: Option<Box<MaintenanceWindow>>,
}

impl Maintenance {
    /// No window at all.
    pub fn is_empty(&self) -> bool {
        self.kubernetes.is_none() && self.node_os.is_none()
    }
}

/// Which provider drives a member.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderRef {
    /// Provider name (e.g. `simulated`, `aks`, `exec`).
    pub name: String,
    /// The provider's id for the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// An ordered list of stages.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStrategy {
    /// Stages, run strictly one after another.
    pub stages: Vec<Stage>,
    /// Named health checks that gates, `afterMemberChecks` and `preflight` refer to (waverun's
    /// addition; an Azure document has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<crate::health::HealthCheck>,
}

/// One stage of a strategy.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Stage {
    /// Unique within the strategy.
    pub name: String,
    /// Groups that run in parallel (at most 50).
    #[serde(default)]
    pub groups: Vec<Group>,
    /// Pre-filter for the groups, or the implicit group when there are no groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_selector: Option<MemberSelector>,
    /// Seconds to wait after the stage's groups finish (runs alongside the after-gates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_stage_wait_in_seconds: Option<u64>,
    /// `"N"` or `"p%"`; default `"50"`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "string_or_int"
    )]
    pub max_concurrency: Option<String>,
    /// `"N"` or `"p%"`; default `"0"`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "string_or_int"
    )]
    pub max_allowed_failures: Option<String>,
    /// Gates passed before the stage's groups start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_gates: Vec<GateConfig>,
    /// Gates passed after the groups finish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_gates: Vec<GateConfig>,
    /// Checks after each member's upgrade: soak, then measure (waverun's addition; a group's
    /// own setting wins over its stage's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_member_checks: Option<AfterMemberChecks>,
    /// Checks before each member starts, beside the provider's own pre-flight (waverun's
    /// addition; a group's own setting wins over its stage's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<Preflight>,
    /// What a failed pre-flight does to the member: `Fail` (the default, as Azure behaves),
    /// `Skip` or `Wait`. Setting it (or `preflight`) turns pre-flight on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_preflight_failure: Option<PreflightPolicy>,
}

/// One group of a stage.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Group {
    /// Unique across the whole strategy.
    pub name: String,
    /// Members matching the selector; without one, members whose `group` equals the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_selector: Option<MemberSelector>,
    /// `"N"` or `"p%"`; default `"1"`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "string_or_int"
    )]
    pub max_concurrency: Option<String>,
    /// `"N"` or `"p%"`; default `"0"`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "string_or_int"
    )]
    pub max_allowed_failures: Option<String>,
    /// Gates passed before the group's members start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_gates: Vec<GateConfig>,
    /// Gates passed after the group's members finish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_gates: Vec<GateConfig>,
    /// Checks after each member's upgrade: soak, then measure (waverun's addition; a group's
    /// own setting wins over its stage's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_member_checks: Option<AfterMemberChecks>,
    /// Checks before each member starts, beside the provider's own pre-flight (waverun's
    /// addition; a group's own setting wins over its stage's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<Preflight>,
    /// What a failed pre-flight does to the member: `Fail` (the default, as Azure behaves),
    /// `Skip` or `Wait`. Setting it (or `preflight`) turns pre-flight on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_preflight_failure: Option<PreflightPolicy>,
}

/// `afterMemberChecks: {soakSeconds, checks}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AfterMemberChecks {
    /// Seconds after the upgrade succeeded before the first measurement (default 0). The
    /// member holds its concurrency slot (and its lease) until its checks end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_seconds: Option<u64>,
    /// Names of `healthChecks`, all measured side by side; each must pass.
    pub checks: Vec<String>,
}

/// `preflight: {checks, retryIntervalSeconds, maxWaitSeconds}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preflight {
    /// Names of `healthChecks` measured once each before the member starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// Under `Wait`: seconds between attempts (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval_seconds: Option<u64>,
    /// Under `Wait`: how long a member may wait before it fails (default 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_seconds: Option<u64>,
}

/// What a failed pre-flight does to a member.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PreflightPolicy {
    /// The member fails (counted toward `maxAllowedFailures`).
    #[default]
    Fail,
    /// The member is Skipped, with the reason.
    Skip,
    /// The member waits and is tried again, up to `maxWaitSeconds`, then fails.
    Wait,
}

/// `memberSelector: {byLabel: "..."}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberSelector {
    /// A Kubernetes label selector string (at most 512 characters).
    pub by_label: String,
}

/// A gate in a strategy.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateConfig {
    /// `Approval` or `ScheduledStart`.
    #[serde(rename = "type")]
    pub gate_type: GateType,
    /// Shown to approvers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Required for `ScheduledStart`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_start_configuration: Option<ScheduledStartConfiguration>,
    /// For `HealthCheck`: the name of one of the strategy's `healthChecks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<String>,
}

/// Gate kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GateType {
    /// A human approves.
    Approval,
    /// Opens at the next given weekday and time.
    ScheduledStart,
    /// Opens when its health check passes; fails the stage when it fails; waits for a person
    /// when it is inconclusive (waverun's addition).
    HealthCheck,
}

/// When a `ScheduledStart` gate opens.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduledStartConfiguration {
    /// `Monday`..`Sunday`.
    pub start_day: crate::window::DayOfWeek,
    /// `HH:mm`.
    pub start_time: String,
    /// `+hh:mm` / `-hh:mm`, -14:00..+14:00; default +00:00.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc_offset: Option<String>,
}

/// Before or after its stage / group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GateTiming {
    /// Before the stage's groups / the group's members.
    Before,
    /// After them.
    After,
}

/// What an update run asks for.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateRunSpec {
    /// Unique run name (same pattern as member names).
    pub name: String,
    /// Inline strategy (exclusive with `updateStrategyName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<UpdateStrategy>,
    /// A stored strategy, copied into the run at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy_name: Option<String>,
    /// The upgrade to apply.
    pub managed_cluster_update: ManagedClusterUpdate,
    /// Set when an auto-upgrade profile generated the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_upgrade_profile_name: Option<String>,
}

/// The upgrade and how node images are chosen.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterUpdate {
    /// Upgrade type and version.
    pub upgrade: Upgrade,
    /// Node image selection (default `Latest`).
    #[serde(default)]
    pub node_image_selection: NodeImageSelection,
}

/// `{type, kubernetesVersion}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Upgrade {
    /// What is upgraded.
    #[serde(rename = "type")]
    pub upgrade_type: UpgradeType,
    /// Required for Full and ControlPlaneOnly, forbidden for NodeImageOnly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
}

/// Upgrade types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum UpgradeType {
    /// Control plane and every pool (including the node image).
    Full,
    /// The control plane only.
    ControlPlaneOnly,
    /// Node images only.
    NodeImageOnly,
}

/// Node image selection.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeImageSelection {
    /// `Latest` (default), `Consistent` or `Custom`.
    #[serde(rename = "type", default)]
    pub selection_type: NodeImageSelectionType,
    /// For `Custom`: at most one version per image family.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_node_image_versions: Vec<CustomNodeImageVersion>,
}

/// `{version}` entries of `customNodeImageVersions`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomNodeImageVersion {
    /// A full image version.
    pub version: String,
}

/// Node image selection kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeImageSelectionType {
    /// Newest image of each pool's family in the member's region when the member starts.
    #[default]
    Latest,
    /// One image per family, the newest available in every region of the run, chosen at run start.
    Consistent,
    /// The given versions.
    Custom,
}

/// Where and since when one version is available.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Release {
    /// A Kubernetes version `x.y.z` or a node image version.
    pub version: String,
    /// Region → available since.
    #[serde(default, deserialize_with = "crate::time::de_timestamp_map")]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, String>))]
    pub available: BTreeMap<String, Timestamp>,
    /// A preview release (Kubernetes versions): never the target of an auto-upgrade profile.
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "crate::document::strict_bool"
    )]
    pub preview: bool,
    /// A security-patch node image: what the `SecurityPatch` channel rolls out.
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "crate::document::strict_bool"
    )]
    pub security_patch: bool,
    /// A node image's OS, when the provider says (its family is the version before the last
    /// `-`); the `SecurityPatch` channel never targets a Windows image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub os_type: Option<OsType>,
}

/// Who supports a Kubernetes minor version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Support {
    /// Supported by the community (the default for a minor the catalog says nothing about).
    #[default]
    Community,
    /// Out of community support; supported only for clusters with long-term support.
    #[serde(rename = "LTSOnly")]
    LtsOnly,
    /// Not supported at all: never targeted by a profile.
    EndOfSupport,
}

/// The support state of one Kubernetes minor version.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MinorSupport {
    /// The minor, `"x.y"`.
    pub minor: String,
    /// `Community`, `LTSOnly` or `EndOfSupport`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub support: Support,
}

/// What versions exist and where. Providers feed it; the engine only reads it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseCatalog {
    /// Kubernetes versions.
    #[serde(default)]
    pub kubernetes: Vec<Release>,
    /// Node image versions (any family).
    #[serde(default)]
    pub node_images: Vec<Release>,
    /// Support state per Kubernetes minor (a minor not listed is `Community`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub minors: Vec<MinorSupport>,
}

/// An auto-upgrade profile (spec section 8): when a release matching its channel reaches the
/// catalog, a run is generated and started through its strategy. Field names are Azure's.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoUpgradeProfile {
    /// Unique profile name (same pattern as member names).
    pub name: String,
    /// Which releases the profile follows.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub channel: UpgradeChannel,
    /// The stored strategy generated runs go through; without one, members one by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy_name: Option<String>,
    /// `Latest` (default) or `Consistent`; `Custom` is not allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_image_selection: Option<AutoUpgradeNodeImageSelection>,
    /// A disabled profile generates nothing by itself (runs it started go on); asked
    /// (`generateUpdateRun`), it makes its run, as Azure's does.
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "crate::document::strict_bool"
    )]
    pub disabled: bool,
    /// `"x.y"`: required for `TargetKubernetesVersion`, forbidden otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_kubernetes_version: Option<String>,
    /// Target an LTS-only minor (only with `TargetKubernetesVersion`).
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "crate::document::strict_bool"
    )]
    pub long_term_support: bool,
}

/// A profile's `nodeImageSelection`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoUpgradeNodeImageSelection {
    /// `Latest` or `Consistent`.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub selection_type: NodeImageSelectionType,
}

/// Auto-upgrade channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum UpgradeChannel {
    /// The latest patch of the newest GA minor.
    Rapid,
    /// The latest patch of the minor before the newest GA minor.
    Stable,
    /// The latest patch of `targetKubernetesVersion`.
    TargetKubernetesVersion,
    /// The newest image of every node image family (NodeImageOnly runs).
    NodeImage,
    /// Security-patch images for Linux pools (NodeImageOnly runs).
    SecurityPatch,
}

impl UpgradeChannel {
    /// Whether the channel moves the control plane (`Full` runs) rather than node images only.
    pub fn is_kubernetes(self) -> bool {
        matches!(
            self,
            UpgradeChannel::Rapid
                | UpgradeChannel::Stable
                | UpgradeChannel::TargetKubernetesVersion
        )
    }
}

/// A fleet-wide dated exclusion: no member upgrade starts in `[start, end)`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Freeze {
    /// Name shown in waits.
    pub name: String,
    /// First frozen instant.
    #[serde(deserialize_with = "crate::time::de_timestamp")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub start: Timestamp,
    /// First instant after the freeze.
    #[serde(deserialize_with = "crate::time::de_timestamp")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub end: Timestamp,
}

/// A skip target: `Member:name`, `Group:name`, `Stage:name`, `AfterStageWait:stageName`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SkipTarget {
    /// One member.
    Member(String),
    /// A group, its members and gates.
    Group(String),
    /// A stage, its groups, gates and wait.
    Stage(String),
    /// The after-stage wait of the named stage.
    AfterStageWait(String),
}

impl TryFrom<String> for SkipTarget {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        SkipTarget::parse(&s)
    }
}

impl From<SkipTarget> for String {
    fn from(t: SkipTarget) -> String {
        t.to_string()
    }
}

impl SkipTarget {
    /// Parses `Kind:name`.
    pub fn parse(s: &str) -> Result<SkipTarget, String> {
        let Some((kind, name)) = s.split_once(':') else {
            return Err(format!(
                "\"{s}\" is not a skip target; use Member:NAME, Group:NAME, Stage:NAME or AfterStageWait:STAGE"
            ));
        };
        let name = name.trim().to_string();
        if name.is_empty() {
            return Err(format!("\"{s}\": the name after ':' is empty"));
        }
        match kind.trim() {
            "Member" => Ok(SkipTarget::Member(name)),
            "Group" => Ok(SkipTarget::Group(name)),
            "Stage" => Ok(SkipTarget::Stage(name)),
            "AfterStageWait" => Ok(SkipTarget::AfterStageWait(name)),
            other => Err(format!(
                "\"{other}\" is not a skip target type; use Member, Group, Stage or AfterStageWait"
            )),
        }
    }
}

impl std::fmt::Display for SkipTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipTarget::Member(n) => write!(f, "Member:{n}"),
            SkipTarget::Group(n) => write!(f, "Group:{n}"),
            SkipTarget::Stage(n) => write!(f, "Stage:{n}"),
            SkipTarget::AfterStageWait(n) => write!(f, "AfterStageWait:{n}"),
        }
    }
}

/// Accepts `"3"`, `"25%"` and also a bare YAML/JSON integer `3` for limit fields.
fn string_or_int<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string such as \"3\" or \"25%\", or a whole number")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(V)
}
