//! Auto-upgrade profiles (spec section 8) as pure answers: what a channel targets, given the
//! release catalog at an instant and the node pools the profile covers ([`resolve`]); the name
//! of the run a profile generates for a target ([`generated_run_name`]); and the status a
//! profile shows ([`ProfileStatus`]). The engine's `profiles` room decides *when* to act on
//! these answers: generate, start, supersede, wait for a running run, catch up.
//!
//! Channels, over the **GA** Kubernetes versions available somewhere at `now` (previews are
//! never targeted) and the support state of each minor (`Community` unless the catalog says
//! `LTSOnly` or `EndOfSupport`):
//! - `Rapid`: the latest patch of the newest minor in community support.
//! - `Stable`: the latest patch of the minor just before it (N-1), if that minor is in
//!   community support.
//! - `TargetKubernetesVersion`: the latest patch of the pinned `x.y`; an `LTSOnly` minor only
//!   with `longTermSupport`; never an `EndOfSupport` minor.
//! - `NodeImage`: the newest image of every image family the covered pools run
//!   (`NodeImageOnly` runs pinned to exactly those images, so a member whose region has not got
//!   its image yet waits for it; pools made from snapshots move too).
//! - `SecurityPatch`: the newest security-patch image of every family the covered **Linux**
//!   pools run (`NodeImageOnly` runs pinned to those images; Windows pools are left alone).
//!
//! Node image channels take no `nodeImageSelection` (as Azure's CLI refuses it for NodeImage):
//! their runs are pinned to the channel's images.

use crate::catalog::Catalog;
use crate::model::{
    AutoUpgradeProfile, CustomNodeImageVersion, ManagedClusterUpdate, NodeImageSelection,
    NodeImageSelectionType, OsType, Support, Timestamp, Upgrade, UpgradeChannel, UpgradeType,
};
use crate::state::StatusError;
use crate::validate::{parse_minor, MAX_NAME_CHARS};
use crate::version::KubeVersion;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a profile's channel targets now: the upgrade of the run it would generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelTarget {
    /// The generated run's `managedClusterUpdate`.
    pub update: ManagedClusterUpdate,
    /// The target versions, sorted: one Kubernetes version, or one node image per family. The
    /// profile's `lastTriggerUpgradeVersions` and the key of the generated run's name.
    pub versions: Vec<String>,
}

/// The Kubernetes version a Kubernetes channel targets now, or why there is none.
pub fn kubernetes_target(
    p: &AutoUpgradeProfile,
    catalog: &Catalog,
    now: Timestamp,
) -> Result<KubeVersion, String> {
    let ga = catalog.ga_kubernetes(now);
    let community = |v: &&KubeVersion| catalog.minor_support(v) == Support::Community;
    match p.channel {
        UpgradeChannel::Rapid => ga.iter().find(community).copied().ok_or_else(|| {
            "no GA Kubernetes version in community support is in the release catalog".to_string()
        }),
        UpgradeChannel::Stable => {
            let newest = ga.iter().find(community).ok_or_else(|| {
                "no GA Kubernetes version in community support is in the release catalog"
                    .to_string()
            })?;
            let Some(minor) = newest.minor.checked_sub(1) else {
                return Err(format!(
                    "{}.{} is the first minor of its major: there is no N-1 minor",
                    newest.major, newest.minor
                ));
            };
            let prev = KubeVersion {
                major: newest.major,
                minor,
                patch: 0,
            };
            if catalog.minor_support(&prev) != Support::Community {
                return Err(format!(
                    "{}.{} (N-1 of the newest minor {}.{}) is out of community support",
                    prev.major, prev.minor, newest.major, newest.minor
                ));
            }
            ga.iter()
                .find(|v| v.major == prev.major && v.minor == prev.minor)
                .copied()
                .ok_or_else(|| {
                    format!(
                        "no GA patch of {}.{} (N-1 of the newest minor {}.{}) is in the release catalog",
                        prev.major, prev.minor, newest.major, newest.minor
                    )
                })
        }
        UpgradeChannel::TargetKubernetesVersion => {
            let pinned = p.target_kubernetes_version.as_deref().unwrap_or_default();
            let (major, minor) = parse_minor(pinned)
                .ok_or_else(|| format!("targetKubernetesVersion \"{pinned}\" is not x.y"))?;
            let key = KubeVersion {
                major,
                minor,
                patch: 0,
            };
            match catalog.minor_support(&key) {
                Support::EndOfSupport => {
                    return Err(format!("{pinned} is at end of support: it is never targeted"))
                }
                Support::LtsOnly if !p.long_term_support => {
                    return Err(format!(
                        "{pinned} is supported only with long-term support (LTSOnly): set longTermSupport to target it"
                    ))
                }
                _ => {}
            }
            ga.iter()
                .find(|v| v.major == major && v.minor == minor)
                .copied()
                .ok_or_else(|| format!("no GA patch of {pinned} is in the release catalog yet"))
        }
        UpgradeChannel::NodeImage | UpgradeChannel::SecurityPatch => {
            Err(format!("the {:?} channel targets node images", p.channel))
        }
    }
}

/// What `p`'s channel targets now. `families` are the image families of the node pools the
/// profile covers, with their OS. The error says why there is nothing to target.
pub fn resolve(
    p: &AutoUpgradeProfile,
    catalog: &Catalog,
    families: &BTreeMap<String, OsType>,
    now: Timestamp,
) -> Result<ChannelTarget, String> {
    let selection = p
        .node_image_selection
        .as_ref()
        .map_or(NodeImageSelectionType::Latest, |s| s.selection_type);
    let plain = |t| NodeImageSelection {
        selection_type: t,
        custom_node_image_versions: Vec::new(),
    };
    if p.channel.is_kubernetes() {
        let v = kubernetes_target(p, catalog, now)?.to_string();
        return Ok(ChannelTarget {
            update: ManagedClusterUpdate {
                upgrade: Upgrade {
                    upgrade_type: UpgradeType::Full,
                    kubernetes_version: Some(v.clone()),
                },
                node_image_selection: plain(selection),
            },
            versions: vec![v],
        });
    }
    let security = p.channel == UpgradeChannel::SecurityPatch;
    let mut versions: Vec<String> = families
        .iter()
        .filter(|(_, os)| !security || **os == OsType::Linux)
        .filter_map(|(f, _)| catalog.newest_image_anywhere(f, now, security))
        .map(str::to_string)
        .collect();
    versions.sort();
    if versions.is_empty() {
        return Err(if security {
            "no security-patch image of the Linux pools' image families is in the release catalog"
                .to_string()
        } else {
            "no image of the pools' image families is in the release catalog".to_string()
        });
    }
    // Pinned to the target images: a member whose region does not have its family's yet waits
    // for it (VersionNotInRegion), rather than being settled with what its region has.
    let node_image_selection = NodeImageSelection {
        selection_type: NodeImageSelectionType::Custom,
        custom_node_image_versions: versions
            .iter()
            .map(|v| CustomNodeImageVersion { version: v.clone() })
            .collect(),
    };
    Ok(ChannelTarget {
        update: ManagedClusterUpdate {
            upgrade: Upgrade {
                upgrade_type: UpgradeType::NodeImageOnly,
                kubernetes_version: None,
            },
            node_image_selection,
        },
        versions,
    })
}

/// The name of the run `profile` (of `channel`) generates for `versions`, in Azure's form
/// `auto-{profile}-{channel}-{key}`; `attempt` 1 for the first run of a target, 2, 3, ... for
/// catch-up runs of the same target. A function of its arguments only: generating twice names
/// the same run. `patches` (TargetKubernetesVersion) + `["1.30.5"]` →
/// `auto-patches-targetkubernetesversion-1-30-5`; node images → 8 hex digits of a hash of the
/// versions as the key; a name that would be longer than 50 characters keeps its head and
/// hashes the rest.
pub fn generated_run_name(
    profile: &str,
    channel: UpgradeChannel,
    versions: &[String],
    attempt: u32,
) -> String {
    let key = match versions {
        [v] if KubeVersion::parse(v).is_ok() => v.replace('.', "-"),
        _ => format!("{:08x}", fnv1a(versions.join("\n").as_bytes())),
    };
    let suffix = if attempt > 1 {
        format!("-{attempt}")
    } else {
        String::new()
    };
    let channel = channel_name(channel).to_ascii_lowercase();
    let name = format!("auto-{profile}-{channel}-{key}{suffix}");
    if name.len() <= MAX_NAME_CHARS {
        return name;
    }
    let hash = format!(
        "{:08x}",
        fnv1a(format!("{profile}\n{channel}\n{key}").as_bytes())
    );
    let head = format!("auto-{profile}-{channel}");
    let room = MAX_NAME_CHARS.saturating_sub(1 + hash.len() + suffix.len());
    // Names are ASCII (the name rule), so any byte index is a character boundary.
    let head = head[..room.min(head.len())].trim_end_matches('-');
    format!("{head}-{hash}{suffix}")
}

/// A channel's name, as Azure spells it.
fn channel_name(channel: UpgradeChannel) -> &'static str {
    match channel {
        UpgradeChannel::Rapid => "Rapid",
        UpgradeChannel::Stable => "Stable",
        UpgradeChannel::TargetKubernetesVersion => "TargetKubernetesVersion",
        UpgradeChannel::NodeImage => "NodeImage",
        UpgradeChannel::SecurityPatch => "SecurityPatch",
    }
}

/// FNV-1a, 32 bits: a stable, dependency-free hash for names (not for security).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// A profile as the engine keeps it (its rules are in `engine/profiles.rs`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ProfileRt {
    pub(crate) spec: AutoUpgradeProfile,
    pub(crate) status: ProfileStatus,
    /// The target versions the profile last acted on (or was set up at); a different target is
    /// a new release to roll out.
    pub(crate) seen: Option<Vec<String>>,
    /// A member joined behind the target: a catch-up run is due.
    pub(crate) catch_up: bool,
}

/// How the last trigger went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TriggerStatus {
    /// A run was generated (and started, for a release).
    Succeeded,
    /// Generating or starting the run failed (`lastTriggerError` says why).
    Failed,
}

/// A profile's status: Azure's `autoUpgradeProfileStatus` fields plus waverun's
/// `lastUpdateRunName` and `nextTarget`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileStatus {
    /// When a run was last generated (or generation last failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub last_triggered_at: Option<Timestamp>,
    /// `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub last_trigger_status: Option<TriggerStatus>,
    /// Why the last trigger failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_trigger_error: Option<StatusError>,
    /// The versions the last trigger targeted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_trigger_upgrade_versions: Vec<String>,
    /// What the last trigger did, for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_trigger_message: Option<String>,
    /// The run the last trigger generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_run_name: Option<String>,
    /// What the profile targets next, and what it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_target: Option<NextTarget>,
}

/// The target a profile has not rolled out yet, and why not.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NextTarget {
    /// The target versions (empty when the channel has no target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// Why it is not rolled out now (a running run, disabled, nothing behind, no release).
    pub message: String,
}

/// What a profile would generate now (`waverun plan` of a scenario with profiles).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfilePlan {
    /// The profile.
    pub profile: String,
    /// Its channel.
    pub channel: crate::model::UpgradeChannel,
    /// Whether it is disabled (the plan shows what it would generate once enabled).
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "crate::document::strict_bool"
    )]
    pub disabled: bool,
    /// What the channel targets now (empty when nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// What `generateUpdateRun` would do, or why nothing.
    pub message: String,
    /// The run it would create, or that exists for this target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// That run's plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::plan::Plan>,
}

/// What `waverun plan -o json` prints for a scenario: its run's plan (its fields at the top
/// level) and, with profiles, what each would generate now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScenarioPlan {
    /// The scenario's run's plan, when it has a run.
    #[serde(flatten)]
    pub plan: Option<crate::plan::Plan>,
    /// Each profile's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfilePlan>,
}

/// What `generateUpdateRun` does (or did) for a profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result")]
pub enum Generation {
    /// A run for the current target exists (not started, or running): it is returned.
    Existing {
        /// The run.
        run: String,
    },
    /// A new run is (or would be) created, not started.
    New {
        /// The run.
        run: String,
        /// Its target versions.
        versions: Vec<String>,
    },
    /// Nothing to generate (no target, or no member behind it).
    Nothing {
        /// Why.
        message: String,
    },
}
