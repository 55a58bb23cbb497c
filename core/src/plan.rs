//! Which member goes where (spec section 2), what each member needs (sections 3 and 7), and the
//! plan preview of a run (section 9) — all pure functions of the fleet, the strategy, the catalog
//! and `now`.

use crate::catalog::Catalog;
use crate::error::{Error, ErrorCode, FieldError};
use crate::limits::{
    Limit, DEFAULT_ALLOWED_FAILURES, DEFAULT_GROUP_CONCURRENCY, DEFAULT_STAGE_CONCURRENCY,
};
use crate::model::{
    GateConfig, GateTiming, GateType, Member, NodeImageSelectionType, PoolImage, Stage, Timestamp,
    UpdateRunSpec, UpdateStrategy, UpgradeType,
};
use crate::selector::{LabelIndex, LabelSelector};
use crate::version::image_family;
use crate::window::{CompiledWindow, WindowPriority};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::decision::{decide, unavailable, Decision, RunTarget, SkipReason};
use crate::decision::{may_start, Situation};
use crate::event::Reason;

/// Name of the stage and group used when a run has no strategy ("every member one by one").
pub const DEFAULT_STAGE_NAME: &str = "default";

/// The strategy a run uses when it has none: one stage, one group of every member, one at a time.
pub fn default_strategy() -> UpdateStrategy {
    UpdateStrategy {
        stages: vec![Stage {
            name: DEFAULT_STAGE_NAME.to_string(),
            groups: vec![],
            member_selector: None,
            after_stage_wait_in_seconds: None,
            max_concurrency: Some("1".to_string()),
            max_allowed_failures: None,
            before_gates: vec![],
            after_gates: vec![],
            after_member_checks: None,
            preflight: None,
            on_preflight_failure: None,
        }],
        health_checks: vec![],
    }
}

/// Members per stage and group; indices refer to the member slice given to [`assign`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// Per stage, per group, the member indices in name order.
    pub stages: Vec<Vec<Vec<u32>>>,
    /// Members that match no group.
    pub unassigned: Vec<u32>,
}

/// The labels a selector sees: the member's own plus `waverun.dev/region`,
/// `waverun.dev/member-name` and `waverun.dev/provider` (which replace a label of the member's
/// own with the same key). Collected from [`Assignable::label_pairs`], the one place of the rule.
pub fn effective_labels(m: &Member) -> BTreeMap<String, String> {
    m.label_pairs()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// What [`assign`] reads of a member: the engine's [`Member`], or a scenario's member, which
/// is checked before any engine has a copy of it.
pub trait Assignable {
    /// The member's name.
    fn name(&self) -> &str;
    /// The update group the member names, if any.
    fn group(&self) -> Option<&str>;
    /// The member's own labels.
    fn own_labels(&self) -> &crate::labels::Labels;
    /// The member's region.
    fn region(&self) -> &str;
    /// The name of the member's provider, if any.
    fn provider_name(&self) -> Option<&str>;

    /// [`effective_labels`] without copying them, in no particular order: the member's own
    /// labels (but those the system labels replace) and the system labels.
    fn label_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        let system = [
            Some(("waverun.dev/region", self.region())),
            Some(("waverun.dev/member-name", self.name())),
            self.provider_name().map(|p| ("waverun.dev/provider", p)),
        ];
        let replaced = move |k: &str| system.iter().flatten().any(|(s, _)| *s == k);
        self.own_labels()
            .iter()
            .filter(move |(k, _)| !replaced(k))
            .chain(system.into_iter().flatten())
    }
}

/// Implements [`Assignable`] for a type with the member's fields (`name`, `group`, `labels`,
/// `region`, `provider`): [`Member`] and the scenario's member.
macro_rules! assignable_by_fields {
    ($t:ty) => {
        impl $crate::plan::Assignable for $t {
            fn name(&self) -> &str {
                &self.name
            }
            fn group(&self) -> Option<&str> {
                self.group.as_deref()
            }
            fn own_labels(&self) -> &$crate::labels::Labels {
                &self.labels
            }
            fn region(&self) -> &str {
                &self.region
            }
            fn provider_name(&self) -> Option<&str> {
                self.provider.as_ref().map(|p| p.name.as_str())
            }
        }
    };
}
pub(crate) use assignable_by_fields;

assignable_by_fields!(Member);

/// Assigns members (sorted by name) to the groups of a strategy.
///
/// A stage without groups but with a selector forms one implicit group named after the stage; a
/// strategy with no selector anywhere and a stage without groups (the default strategy) takes
/// every member. A member that lands in two groups is an error naming it and both groups.
pub fn assign<M: Assignable>(
    members: &[&M],
    strategy: &UpdateStrategy,
) -> Result<Assignment, Error> {
    // Every selector, parsed once: per stage, its own and its groups'.
    let parse = |s: &Option<crate::model::MemberSelector>| {
        s.as_ref().map(|s| LabelSelector::parse(&s.by_label))
    };
    let parsed: Vec<(Parsed, Vec<Parsed>)> = strategy
        .stages
        .iter()
        .map(|st| {
            let groups = st.groups.iter().map(|g| parse(&g.member_selector));
            (parse(&st.member_selector), groups.collect())
        })
        .collect();
    // Only the label keys some selector names are indexed: the labels no selector reads (such
    // as every member's own `waverun.dev/member-name`, unique to it) would cost the index most.
    // A selector that does not parse names none here; it fails below, in its turn.
    let named_keys: BTreeSet<&str> = parsed
        .iter()
        .flat_map(|(stage, groups)| std::iter::once(stage).chain(groups))
        .filter_map(|p| p.as_ref()?.as_ref().ok())
        .flat_map(|sel| sel.requirements().iter().map(|r| r.key()))
        .collect();
    let index = LabelIndex::from_pairs(
        members
            .iter()
            .map(|m| m.label_pairs().filter(|(k, _)| named_keys.contains(*k))),
    );
    let mut by_group_name: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        if let Some(g) = m.group() {
            by_group_name.entry(g).or_default().push(i as u32);
        }
    }
    let mut owner: Vec<Option<(u32, u32)>> = vec![None; members.len()];
    let mut stages = Vec::with_capacity(strategy.stages.len());
    for (si, stage) in strategy.stages.iter().enumerate() {
        let (stage_parsed, groups_parsed) = &parsed[si];
        let stage_sel = stage_parsed
            .as_ref()
            .map(|p| parsed_sel(p, &format!("stages[{si}].memberSelector.byLabel")))
            .transpose()?;
        // The stage selector's members (ascending), which its groups' members must be among.
        let stage_members = match (&stage_sel, stage.groups.is_empty()) {
            (Some(sel), false) => Some(index.matching(sel)),
            _ => None,
        };
        let mut groups = Vec::new();
        if stage.groups.is_empty() {
            let ms: Vec<u32> = match &stage_sel {
                Some(sel) => index.matching(sel),
                None => (0..members.len() as u32).collect(),
            };
            groups.push(ms);
        } else {
            for (group, group_parsed) in stage.groups.iter().zip(groups_parsed) {
                let mut ms: Vec<u32> = match group_parsed {
                    Some(p) => index.matching(parsed_sel(p, "memberSelector.byLabel")?),
                    None => by_group_name
                        .get(group.name.as_str())
                        .cloned()
                        .unwrap_or_default(),
                };
                if let Some(within) = &stage_members {
                    ms.retain(|i| within.binary_search(i).is_ok());
                }
                groups.push(ms);
            }
        }
        for (gi, ms) in groups.iter().enumerate() {
            for &i in ms {
                if let Some((ps, pg)) = owner[i as usize] {
                    let first = group_name(strategy, ps as usize, pg as usize);
                    let second = group_name(strategy, si, gi);
                    let mut e = Error::new(
                        ErrorCode::MemberInTwoGroups,
                        format!(
                            "member \"{}\" matches both group \"{first}\" (stage \"{}\") and group \"{second}\" (stage \"{}\"); a member may be in one group only",
                            members[i as usize].name(),
                            strategy.stages[ps as usize].name,
                            stage.name
                        ),
                    );
                    e.fields.push(FieldError::new(
                        membership_path(stage, si, gi),
                        e.message.clone(),
                    ));
                    return Err(e);
                }
                owner[i as usize] = Some((si as u32, gi as u32));
            }
        }
        stages.push(groups);
    }
    let unassigned = (0..members.len() as u32)
        .filter(|i| owner[*i as usize].is_none())
        .collect();
    Ok(Assignment { stages, unassigned })
}

/// The field that put group `gi` of stage `si` around its members: its selector, else its name
/// (members join by their `group`); for a stage's implicit group, the stage's selector.
fn membership_path(stage: &Stage, si: usize, gi: usize) -> String {
    match stage.groups.get(gi) {
        Some(g) if g.member_selector.is_some() => {
            format!("stages[{si}].groups[{gi}].memberSelector.byLabel")
        }
        Some(_) => format!("stages[{si}].groups[{gi}].name"),
        None if stage.member_selector.is_some() => format!("stages[{si}].memberSelector.byLabel"),
        None => format!("stages[{si}]"),
    }
}

/// A selector as [`assign`] parsed it: absent, or parsed, or why it does not parse.
type Parsed = Option<Result<LabelSelector, String>>;

/// A parsed selector, or its parse error at `path`.
fn parsed_sel<'p>(
    p: &'p Result<LabelSelector, String>,
    path: &str,
) -> Result<&'p LabelSelector, Error> {
    p.as_ref()
        .map_err(|e| Error::invalid(vec![crate::error::FieldError::new(path, e.clone())]))
}

/// The name of group `gi` of stage `si` (a stage without groups has one implicit group named after it).
pub fn group_name(strategy: &UpdateStrategy, si: usize, gi: usize) -> &str {
    let stage = &strategy.stages[si];
    if stage.groups.is_empty() {
        &stage.name
    } else {
        &stage.groups[gi].name
    }
}

/// Resolved limits of a stage given its member count.
pub fn stage_limits(stage: &Stage, members: u32) -> (u32, u32) {
    let mc = stage
        .max_concurrency
        .as_deref()
        .and_then(|s| Limit::parse_concurrency(s).ok())
        .unwrap_or(DEFAULT_STAGE_CONCURRENCY)
        .resolve_concurrency(members);
    let maf = stage
        .max_allowed_failures
        .as_deref()
        .and_then(|s| Limit::parse_failures(s).ok())
        .unwrap_or(DEFAULT_ALLOWED_FAILURES)
        .resolve_failures(members);
    (mc, maf)
}

/// Resolved limits of group `gi` of a stage given its member count; concurrency is clamped to
/// the stage's resolved value. An implicit group takes the stage's concurrency.
pub fn group_limits(stage: &Stage, gi: usize, members: u32, stage_mc: u32) -> (u32, u32) {
    let Some(group) = stage.groups.get(gi) else {
        // The implicit group of a stage without groups runs at the stage's pace.
        let (_, maf) = stage_limits(stage, members);
        return (stage_mc, maf);
    };
    let mc = group
        .max_concurrency
        .as_deref()
        .and_then(|s| Limit::parse_concurrency(s).ok())
        .unwrap_or(DEFAULT_GROUP_CONCURRENCY)
        .resolve_concurrency(members)
        .min(stage_mc);
    let maf = group
        .max_allowed_failures
        .as_deref()
        .and_then(|s| Limit::parse_failures(s).ok())
        .unwrap_or(DEFAULT_ALLOWED_FAILURES)
        .resolve_failures(members);
    (mc, maf)
}

/// The window that governs a member for an upgrade type.
pub fn governing_window(m: &Member, t: UpgradeType) -> Option<&crate::window::MaintenanceWindow> {
    match t {
        UpgradeType::NodeImageOnly => m.maintenance.node_os.as_deref(),
        _ => m.maintenance.kubernetes.as_deref(),
    }
}

/// Priority class of a member with an optional compiled window.
pub fn priority(window: Option<&CompiledWindow>, now: Timestamp) -> WindowPriority {
    match window {
        None => WindowPriority::NoWindow,
        Some(w) => w.priority(now),
    }
}

/// Consistent selection: for each family present in any pool of `members`, the newest version
/// available at `now` in every region that hosts a pool of that family. Sorted by family.
pub fn select_consistent(members: &[&Member], catalog: &Catalog, now: Timestamp) -> Vec<String> {
    let mut regions: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for m in members {
        for p in &m.node_pools {
            if let Some(f) = image_family(&p.image_version) {
                regions.entry(f).or_default().insert(m.region.as_str());
            }
        }
    }
    regions
        .iter()
        .filter_map(|(family, rs)| {
            catalog
                .newest_image_everywhere(family, rs.iter().copied(), now)
                .map(str::to_string)
        })
        .collect()
}

/// A gate in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGate {
    /// Stage.
    pub stage: String,
    /// Group, for group gates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Before or after.
    pub timing: GateTiming,
    /// Gate kind.
    pub gate_type: GateType,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Whether a human must act (Approval gates).
    pub needs_human: bool,
    /// A HealthCheck gate's check, as the strategy writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<String>,
}

/// One member in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedMember {
    /// Member name.
    pub name: String,
    /// Region.
    pub region: String,
    /// `Upgrade`, `Skip` or `Fail`.
    pub action: String,
    /// Target control plane, if it moves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Target images, for pools that move.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_images: Vec<PoolImage>,
    /// Why (skip reason, failure, notes, window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One group in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGroup {
    /// Group name.
    pub name: String,
    /// Resolved (clamped) concurrency.
    pub max_concurrency: u32,
    /// Resolved failure threshold.
    pub max_allowed_failures: u32,
    /// Members in priority order at plan time, then by name.
    pub members: Vec<PlannedMember>,
    /// The checks after each member's upgrade (`afterMemberChecks`, the group's or its
    /// stage's), and the least time they add to each member: the soak and the intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_member_checks: Option<PlannedChecks>,
    /// The pre-flight before each member, when on: its policy and checks (beside the
    /// provider's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<PlannedPreflight>,
}

/// A group's checks after each member's upgrade, in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedChecks {
    /// Check names.
    pub checks: Vec<String>,
    /// Soak before the first measurement.
    pub soak_seconds: u64,
    /// The least time the checks add to each member when every measurement passes: the soak
    /// plus the longest check's intervals.
    pub added_seconds: u64,
}

/// A group's pre-flight, in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPreflight {
    /// `Fail`, `Skip` or `Wait`.
    pub policy: crate::model::PreflightPolicy,
    /// Configured checks (the provider's own pre-flight always runs too).
    pub checks: Vec<String>,
}

/// One stage in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedStage {
    /// Stage name.
    pub name: String,
    /// Resolved concurrency.
    pub max_concurrency: u32,
    /// Resolved failure threshold.
    pub max_allowed_failures: u32,
    /// After-stage wait.
    pub after_stage_wait_in_seconds: u64,
    /// Groups.
    pub groups: Vec<PlannedGroup>,
}

/// The plan preview of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Run name.
    pub run: String,
    /// Stages in order.
    pub stages: Vec<PlannedStage>,
    /// Members that match no group and are left out of the run.
    pub unassigned: Vec<String>,
    /// Every gate, in order; `needsHuman` marks approvals.
    pub gates: Vec<PlannedGate>,
    /// Consistent selection: the images selected now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected_node_image_versions: Vec<String>,
    /// Members that will fail without a cluster call (minor version skips).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub will_fail: Vec<String>,
    /// Totals.
    pub members_to_upgrade: u32,
    /// Members with nothing to do.
    pub members_to_skip: u32,
    /// What the run spec asks for that has no effect (field path and message), e.g. a
    /// node-image selection on a `ControlPlaneOnly` upgrade.
    pub warnings: Vec<FieldError>,
}

/// Plans `spec` over `members` (any order) with `strategy` (the run's own or the stored one).
pub fn plan(
    spec: &UpdateRunSpec,
    strategy: &UpdateStrategy,
    members: &[&Member],
    catalog: &Catalog,
    now: Timestamp,
) -> Result<Plan, Error> {
    plan_generated(spec, None, strategy, members, catalog, now)
}

/// [`plan`] of a run an auto-upgrade profile of `channel` generated (members more than one
/// minor behind are skipped, not failed; see [`RunTarget::channel`]).
pub fn plan_generated(
    spec: &UpdateRunSpec,
    channel: Option<crate::model::UpgradeChannel>,
    strategy: &UpdateStrategy,
    members: &[&Member],
    catalog: &Catalog,
    now: Timestamp,
) -> Result<Plan, Error> {
    let mut sorted: Vec<&Member> = members.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let assignment = assign(&sorted, strategy)?;
    let mut target = RunTarget::of(spec);
    target.channel = channel;
    let in_run: Vec<&Member> = assignment
        .stages
        .iter()
        .flatten()
        .flatten()
        .map(|i| sorted[*i as usize])
        .collect();
    if target.selection == NodeImageSelectionType::Consistent {
        target.images = select_consistent(&in_run, catalog, now);
    }
    let mut stages = Vec::new();
    let mut gates = Vec::new();
    let mut will_fail = Vec::new();
    let (mut up, mut skip) = (0, 0);
    for (si, stage) in strategy.stages.iter().enumerate() {
        let count: u32 = assignment.stages[si].iter().map(|g| g.len() as u32).sum();
        let (mc, maf) = stage_limits(stage, count);
        push_gates(
            &mut gates,
            &stage.name,
            None,
            &stage.before_gates,
            GateTiming::Before,
        );
        let mut groups = Vec::new();
        for (gi, ms) in assignment.stages[si].iter().enumerate() {
            let gname = group_name(strategy, si, gi).to_string();
            let (gmc, gmaf) = group_limits(stage, gi, ms.len() as u32, mc);
            if let Some(g) = stage.groups.get(gi) {
                push_gates(
                    &mut gates,
                    &stage.name,
                    Some(&gname),
                    &g.before_gates,
                    GateTiming::Before,
                );
                push_gates(
                    &mut gates,
                    &stage.name,
                    Some(&gname),
                    &g.after_gates,
                    GateTiming::After,
                );
            }
            let mut ordered: Vec<(WindowPriority, &Member)> = ms
                .iter()
                .map(|i| {
                    let m = sorted[*i as usize];
                    let w = governing_window(m, target.upgrade_type).and_then(|w| w.compile().ok());
                    (priority(w.as_ref(), now), m)
                })
                .collect();
            ordered.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
            let members = ordered
                .into_iter()
                .map(|(_, m)| {
                    let mut pm = PlannedMember {
                        name: m.name.clone(),
                        region: m.region.clone(),
                        action: String::new(),
                        kubernetes_version: None,
                        node_images: vec![],
                        message: None,
                    };
                    let window =
                        governing_window(m, target.upgrade_type).and_then(|w| w.compile().ok());
                    let readiness = may_start(&Situation {
                        member: m,
                        window: window.as_ref(),
                        target: &target,
                        catalog,
                        now,
                        freeze: None,
                        held_by: None,
                    });
                    match readiness.decision {
                        Decision::Upgrade {
                            kubernetes_version,
                            node_images,
                            message,
                        } => {
                            up += 1;
                            pm.action = "Upgrade".into();
                            let mut notes: Vec<String> = message.into_iter().collect();
                            for hold in readiness.holds {
                                match (hold.reason, hold.until) {
                                    (Reason::VersionNotInRegion, Some(t)) => notes.push(format!(
                                        "{} (from {})",
                                        hold.message,
                                        crate::time::fmt_time(t)
                                    )),
                                    (Reason::VersionNotInRegion, None) => notes.push(hold.message),
                                    (Reason::MaintenanceWindow, Some(t)) => notes.push(format!(
                                        "maintenance window opens {}",
                                        crate::time::fmt_time(t)
                                    )),
                                    _ => {}
                                }
                            }
                            pm.kubernetes_version = kubernetes_version;
                            pm.node_images = node_images;
                            pm.message = (!notes.is_empty()).then(|| notes.join("; "));
                        }
                        Decision::Skip { message, .. } => {
                            skip += 1;
                            pm.action = "Skip".into();
                            pm.message = Some(message);
                        }
                        Decision::Fail { code, message } => {
                            pm.action = "Fail".into();
                            will_fail.push(m.name.clone());
                            pm.message = Some(format!("{code}: {message}"));
                        }
                    }
                    pm
                })
                .collect();
            let after_member_checks =
                crate::health::after_member_checks(strategy, si, gi).map(|a| {
                    let soak = a.soak_seconds.unwrap_or(0);
                    let longest = a
                        .checks
                        .iter()
                        .filter_map(|c| strategy.health_checks.iter().find(|h| h.name == *c))
                        .map(|h| h.interval() * u64::from(h.measurements().saturating_sub(1)))
                        .max()
                        .unwrap_or(0);
                    PlannedChecks {
                        checks: a.checks.clone(),
                        soak_seconds: soak,
                        added_seconds: soak + longest,
                    }
                });
            let preflight =
                crate::health::preflight_plan(strategy, si, gi).map(|p| PlannedPreflight {
                    policy: p.policy,
                    checks: p.checks,
                });
            groups.push(PlannedGroup {
                name: gname,
                max_concurrency: gmc,
                max_allowed_failures: gmaf,
                members,
                after_member_checks,
                preflight,
            });
        }
        push_gates(
            &mut gates,
            &stage.name,
            None,
            &stage.after_gates,
            GateTiming::After,
        );
        stages.push(PlannedStage {
            name: stage.name.clone(),
            max_concurrency: mc,
            max_allowed_failures: maf,
            after_stage_wait_in_seconds: stage.after_stage_wait_in_seconds.unwrap_or(0),
            groups,
        });
    }
    Ok(Plan {
        run: spec.name.clone(),
        stages,
        unassigned: assignment
            .unassigned
            .iter()
            .map(|i| sorted[*i as usize].name.clone())
            .collect(),
        gates,
        selected_node_image_versions: if target.selection == NodeImageSelectionType::Consistent {
            target.images
        } else {
            vec![]
        },
        will_fail,
        members_to_upgrade: up,
        members_to_skip: skip,
        warnings: crate::validate::run_spec_warnings("", spec),
    })
}

fn push_gates(
    out: &mut Vec<PlannedGate>,
    stage: &str,
    group: Option<&str>,
    gates: &[GateConfig],
    timing: GateTiming,
) {
    for g in gates {
        out.push(PlannedGate {
            stage: stage.to_string(),
            group: group.map(str::to_string),
            timing,
            gate_type: g.gate_type,
            display_name: g.display_name.clone(),
            needs_human: g.gate_type == GateType::Approval,
            health_check: g.health_check.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(json: serde_json::Value) -> Member {
        serde_json::from_value(json).expect("a valid member")
    }

    #[test]
    fn system_labels_replace_a_members_own_labels_of_the_same_key() {
        let m = member(serde_json::json!({
            "name": "m1", "region": "westeurope", "kubernetesVersion": "1.32.7",
            "labels": {"env": "prod", "waverun.dev/region": "mars"},
        }));
        let labels = effective_labels(&m);
        assert_eq!(labels["waverun.dev/region"], "westeurope");
        assert_eq!(labels["waverun.dev/member-name"], "m1");
        assert_eq!(labels["env"], "prod");
        assert!(!labels.contains_key("waverun.dev/provider"));
        // The borrowed pairs the index reads hold the same labels, each key once.
        let mut pairs: Vec<_> = m.label_pairs().collect();
        pairs.sort_unstable();
        let collected: Vec<_> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(pairs, collected);
    }
}
