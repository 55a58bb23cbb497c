//! Per-member decisions, shared by the engine (when it schedules) and the plan (when it
//! explains): what a member's upgrade would be ([`decide`]), and whether it may start now —
//! and if not, why and until when ([`may_start`]).

use crate::catalog::Catalog;
use crate::error::ErrorCode;
use crate::event::{Reason, WakeReason};
use crate::model::{
    Freeze, Member, NodeImageSelectionType, OsType, PoolImage, Support, Timestamp, UpdateRunSpec,
    UpgradeChannel, UpgradeType,
};
use crate::version::{compare_image_versions, image_family, KubeVersion};
use crate::window::CompiledWindow;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// What a run wants, resolved once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTarget {
    /// Upgrade type.
    pub upgrade_type: UpgradeType,
    /// Target Kubernetes version (Full, ControlPlaneOnly).
    pub kubernetes_version: Option<KubeVersion>,
    /// Node image selection kind.
    pub selection: NodeImageSelectionType,
    /// Consistent: the selected images (one per family); Custom: the given versions.
    pub images: Vec<String>,
    /// The channel of the auto-upgrade profile that generated the run: a member more than one
    /// minor behind is skipped (not failed), `NodeImage` moves pools made from snapshots, and
    /// `SecurityPatch` leaves Windows pools alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<UpgradeChannel>,
}

impl RunTarget {
    /// The run target of a spec (Consistent images still to be selected). A `ControlPlaneOnly`
    /// upgrade changes no node image, so whatever selection it carries counts as `Latest`
    /// (`validate` and `plan` warn about it).
    pub fn of(spec: &UpdateRunSpec) -> RunTarget {
        let up = &spec.managed_cluster_update;
        if up.upgrade.upgrade_type == UpgradeType::ControlPlaneOnly {
            return RunTarget {
                upgrade_type: UpgradeType::ControlPlaneOnly,
                kubernetes_version: up
                    .upgrade
                    .kubernetes_version
                    .as_deref()
                    .and_then(|v| KubeVersion::parse(v).ok()),
                selection: NodeImageSelectionType::Latest,
                images: Vec::new(),
                channel: None,
            };
        }
        RunTarget {
            upgrade_type: up.upgrade.upgrade_type,
            kubernetes_version: up
                .upgrade
                .kubernetes_version
                .as_deref()
                .and_then(|v| KubeVersion::parse(v).ok()),
            selection: up.node_image_selection.selection_type,
            images: match up.node_image_selection.selection_type {
                NodeImageSelectionType::Custom => up
                    .node_image_selection
                    .custom_node_image_versions
                    .iter()
                    .map(|v| v.version.clone())
                    .collect(),
                _ => Vec::new(),
            },
            channel: None,
        }
    }

    fn image_for_family(&self, family: &str) -> Option<&str> {
        self.images
            .iter()
            .find(|v| image_family(v) == Some(family))
            .map(|s| s.as_str())
    }
}

/// Why a member has nothing to do or cannot be processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SkipReason {
    /// Already at the target.
    AlreadyAtTarget,
    /// Consistent selection found no image for one of its pools.
    NoConsistentImage,
    /// Skipped by a user (member, group or stage).
    SkippedByUser,
    /// More than one minor behind the target of a generated run (an auto-upgrade never skips
    /// a minor; a manual run must bring the member closer first).
    MinorVersionSkip,
    /// Its pre-flight failed under `onPreflightFailure: Skip`.
    PreflightFailed,
}

/// What a member needs, decided against the catalog at `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Upgrade with these targets.
    Upgrade {
        /// Target control-plane version, when the control plane moves.
        kubernetes_version: Option<String>,
        /// Target image per pool that moves.
        node_images: Vec<PoolImage>,
        /// Notes (pools left alone, control plane ahead of target).
        message: Option<String>,
    },
    /// Nothing to do.
    Skip {
        /// Why.
        reason: SkipReason,
        /// Explanation.
        message: String,
    },
    /// Fails without a cluster call.
    Fail {
        /// Stable code.
        code: ErrorCode,
        /// Explanation.
        message: String,
    },
}

/// Decides what `m` needs for `t` at `now`.
pub fn decide(m: &Member, t: &RunTarget, catalog: &Catalog, now: Timestamp) -> Decision {
    let mut notes: Vec<String> = Vec::new();
    let mut kube_target = None;
    if matches!(
        t.upgrade_type,
        UpgradeType::Full | UpgradeType::ControlPlaneOnly
    ) {
        if let (Some(target), Ok(current)) = (
            t.kubernetes_version,
            KubeVersion::parse(&m.kubernetes_version),
        ) {
            match current.cmp(&target) {
                Ordering::Less => {
                    if current.minors_until(&target) > 1 && t.channel.is_some() {
                        return Decision::Skip {
                            reason: SkipReason::MinorVersionSkip,
                            message: format!(
                                "control plane {current} is more than one minor version behind {target}: an auto-upgrade never skips a minor; bring it to {}.{} with a manual update run first",
                                current.major,
                                current.minor + 1
                            ),
                        };
                    }
                    if current.minors_until(&target) > 1 {
                        return Decision::Fail {
                            code: ErrorCode::MinorVersionSkip,
                            message: format!(
                                "control plane {current} is more than one minor version behind {target}; Kubernetes cannot skip a minor version: upgrade to {}.{} first",
                                current.major,
                                current.minor + 1
                            ),
                        };
                    }
                    if catalog.minor_support(&target) == Support::LtsOnly && !m.long_term_support
                    {
                        return Decision::Fail {
                            code: ErrorCode::LongTermSupportRequired,
                            message: format!(
                                "Kubernetes {}.{} is supported only with long-term support (LTSOnly), and member \"{}\" does not have it: enable LTS on the cluster, or leave it out of this run",
                                target.major, target.minor, m.name
                            ),
                        };
                    }
                    kube_target = Some(target.to_string());
                }
                Ordering::Equal => {}
                Ordering::Greater => notes.push(format!(
                    "control plane {current} is ahead of target {target}; treated as at target (no downgrade)"
                )),
            }
        }
    }
    let mut node_images = Vec::new();
    let mut left_alone = Vec::new();
    let mut windows_alone = Vec::new();
    if matches!(
        t.upgrade_type,
        UpgradeType::Full | UpgradeType::NodeImageOnly
    ) {
        for pool in &m.node_pools {
            if t.channel == Some(UpgradeChannel::SecurityPatch) && pool.os_type == OsType::Windows {
                windows_alone.push(pool.name.clone());
                continue;
            }
            let Some(family) = image_family(&pool.image_version) else {
                left_alone.push(pool.name.clone());
                continue;
            };
            let target = match t.selection {
                NodeImageSelectionType::Latest => {
                    if pool.from_snapshot && t.channel != Some(UpgradeChannel::NodeImage) {
                        left_alone.push(format!("{} (from snapshot)", pool.name));
                        continue;
                    }
                    catalog.newest_image(family, &m.region, now)
                }
                NodeImageSelectionType::Consistent => match t.image_for_family(family) {
                    Some(v) => Some(v),
                    None => {
                        return Decision::Skip {
                            reason: SkipReason::NoConsistentImage,
                            message: format!(
                                "Consistent selection found no image of family {family} available in every region of the run (pool {})",
                                pool.name
                            ),
                        }
                    }
                },
                NodeImageSelectionType::Custom => t.image_for_family(family),
            };
            match target {
                Some(v) if compare_image_versions(v, &pool.image_version) == Ordering::Greater => {
                    node_images.push(PoolImage {
                        node_pool: pool.name.clone(),
                        image_version: v.to_string(),
                    })
                }
                _ => left_alone.push(pool.name.clone()),
            }
        }
    }
    if !windows_alone.is_empty() {
        notes.push(format!(
            "Windows pools left alone: the SecurityPatch channel updates Linux pools only ({})",
            windows_alone.join(", ")
        ));
    }
    if kube_target.is_none() && node_images.is_empty() {
        let what = match t.upgrade_type {
            UpgradeType::ControlPlaneOnly => "control plane already at target",
            UpgradeType::Full => "control plane and every node pool already at target",
            UpgradeType::NodeImageOnly if !windows_alone.is_empty() => {
                if left_alone.is_empty() {
                    "no Linux node pool for the SecurityPatch channel"
                } else {
                    "every Linux node pool already at or ahead of its target image"
                }
            }
            UpgradeType::NodeImageOnly => "every node pool already at or ahead of its target image",
        };
        notes.insert(0, what.to_string());
        return Decision::Skip {
            reason: SkipReason::AlreadyAtTarget,
            message: notes.join("; "),
        };
    }
    if !node_images.is_empty() && !left_alone.is_empty() {
        notes.push(format!("pools left alone: {}", left_alone.join(", ")));
    }
    Decision::Upgrade {
        kubernetes_version: kube_target,
        node_images,
        message: if notes.is_empty() {
            None
        } else {
            Some(notes.join("; "))
        },
    }
}

/// If a decided upgrade needs a version not yet available in the member's region: what is
/// missing and, when known, from when it will be there.
pub fn unavailable(
    m: &Member,
    kubernetes_version: Option<&str>,
    node_images: &[PoolImage],
    t: &RunTarget,
    catalog: &Catalog,
    now: Timestamp,
) -> Option<(String, Option<Timestamp>)> {
    if let Some(v) = kubernetes_version {
        match catalog.kubernetes_since(v, &m.region) {
            Some(at) if at <= now => {}
            until => {
                return Some((
                    format!("Kubernetes {v} is not yet available in {}", m.region),
                    until,
                ))
            }
        }
    }
    if t.selection != NodeImageSelectionType::Latest {
        for p in node_images {
            match catalog.image_since(&p.image_version, &m.region) {
                Some(at) if at <= now => {}
                until => {
                    return Some((
                        format!(
                            "node image {} is not yet available in {}",
                            p.image_version, m.region
                        ),
                        until,
                    ))
                }
            }
        }
    }
    None
}

/// Why a member may not start now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The reason a status shows.
    pub reason: Reason,
    /// Until when, when known.
    pub until: Option<Timestamp>,
    /// What a user reads.
    pub message: String,
    /// What ends it.
    pub ends: HoldEnds,
}

/// What ends a [`Hold`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldEnds {
    /// Time: the engine wakes at this instant.
    At(Timestamp, WakeReason),
    /// The run holding the member finishes its upgrade.
    LeaseReleased,
    /// A release is observed (the catalog changes).
    CatalogChanged,
    /// Nothing known (a window that never opens again).
    Never,
}

/// One member's situation, as [`may_start`] sees it.
pub struct Situation<'a> {
    /// The member as the engine knows it now.
    pub member: &'a Member,
    /// Its maintenance window for the run's upgrade type.
    pub window: Option<&'a CompiledWindow>,
    /// What the run wants.
    pub target: &'a RunTarget,
    /// The release catalog.
    pub catalog: &'a Catalog,
    /// The instant of the decision.
    pub now: Timestamp,
    /// A fleet freeze in force now.
    pub freeze: Option<&'a Freeze>,
    /// Another run holding the member (one upgrade authority per member).
    pub held_by: Option<&'a str>,
}

/// The answer for one member: what it needs, and what holds it back now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// What the member needs ([`decide`]). A skip or a failure needs no slot: once nothing
    /// holds the member, it is settled at once.
    pub decision: Decision,
    /// Everything that keeps it from starting now, in the order they apply: a fleet freeze,
    /// another run's lease, then (for an upgrade) the release not yet in its region and its
    /// closed maintenance window. Empty: it may start (or be settled) now.
    pub holds: Vec<Hold>,
}

/// May this member start now, and if not, why and until when. The one place that decides it:
/// the engine waits on the first hold when it schedules, and the plan explains the holds.
/// Concurrency and failure thresholds are the stage's and groups' (see the engine's schedule).
pub fn may_start(s: &Situation) -> Readiness {
    let mut holds = Vec::new();
    if let Some(f) = s.freeze {
        holds.push(freeze_hold(f));
    }
    if let Some(holder) = s.held_by {
        holds.push(Hold {
            reason: Reason::Lease,
            until: None,
            message: format!("in flight in run \"{holder}\"; waits for it to finish"),
            ends: HoldEnds::LeaseReleased,
        });
    }
    let decision = decide(s.member, s.target, s.catalog, s.now);
    if let Decision::Upgrade {
        kubernetes_version,
        node_images,
        ..
    } = &decision
    {
        if let Some((message, until)) = unavailable(
            s.member,
            kubernetes_version.as_deref(),
            node_images,
            s.target,
            s.catalog,
            s.now,
        ) {
            holds.push(Hold {
                reason: Reason::VersionNotInRegion,
                until,
                message,
                ends: match until {
                    Some(t) => HoldEnds::At(t, WakeReason::VersionAvailable),
                    None => HoldEnds::CatalogChanged,
                },
            });
        }
        if let Some(w) = s.window.filter(|w| !w.is_open(s.now)) {
            let next = w.next_opening(s.now);
            holds.push(Hold {
                reason: Reason::MaintenanceWindow,
                until: next,
                message: match next {
                    Some(t) => format!("maintenance window closed; opens {}", crate::fmt_time(t)),
                    None => "maintenance window never opens again".to_string(),
                },
                ends: match next {
                    Some(t) => HoldEnds::At(t, WakeReason::MaintenanceWindow),
                    None => HoldEnds::Never,
                },
            });
        }
    }
    Readiness { decision, holds }
}

/// The hold of a fleet freeze in force: every member waits until it ends.
pub fn freeze_hold(f: &Freeze) -> Hold {
    Hold {
        reason: Reason::Freeze,
        until: Some(f.end),
        message: format!(
            "fleet freeze \"{}\" until {}",
            f.name,
            crate::fmt_time(f.end)
        ),
        ends: HoldEnds::At(f.end, WakeReason::FreezeEnds),
    }
}
