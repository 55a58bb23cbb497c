//! Validation of members, strategies, run specs and auto-upgrade profiles. Every error names the
//! field path and the rule.

use crate::error::{Error, Errors, FieldError};
use crate::limits::{Limit, MAX_STAGE_CONCURRENCY};
use crate::model::{
    AfterMemberChecks, AutoUpgradeProfile, GateConfig, GateType, Member, NodeImageSelectionType,
    Preflight, UpdateRunSpec, UpdateStrategy, UpgradeChannel, UpgradeType,
};
use crate::selector::{validate_label_key, validate_label_value, LabelSelector};
use crate::version::{image_family, validate_image_version, KubeVersion};
use crate::window::{parse_hh_mm, parse_utc_offset};
use std::collections::{BTreeMap, BTreeSet};

/// Most groups a stage may have.
pub const MAX_GROUPS_PER_STAGE: usize = 50;
/// Longest label selector.
pub const MAX_SELECTOR_LEN: usize = 512;
/// Longest after-stage wait (decision: one week).
pub const MAX_AFTER_STAGE_WAIT_SECONDS: u64 = 7 * 24 * 3600;
/// Longest provider id (an Azure resource id is at most a few hundred characters).
pub const MAX_PROVIDER_ID_CHARS: usize = 1024;
/// Most labels a member may carry (decision: Kubernetes sets no count, but every label is
/// matched by every selector of every strategy; a hundred is far more than fleets use, and
/// bounds what one member costs the engine).
pub const MAX_LABELS_PER_MEMBER: usize = 100;
/// Label prefix reserved for labels the system adds.
pub const SYSTEM_LABEL_PREFIX: &str = "waverun.dev/";

/// Longest resource name, in characters.
pub const MAX_NAME_CHARS: usize = 50;

/// Checks a resource name: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, 1–50 characters.
pub fn check_name(path: &str, name: &str, errors: &mut Errors) {
    if let Err(rule) = name_rule(name) {
        errors.push(path, format!("\"{name}\" {rule}"));
    }
}

fn name_rule(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty; a name needs 1 to 50 characters");
    }
    if name.len() > MAX_NAME_CHARS {
        return Err("is longer than 50 characters");
    }
    let b = name.as_bytes();
    let ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !ok(b[0]) || !ok(b[b.len() - 1]) || !b.iter().all(|c| ok(*c) || *c == b'-') {
        return Err("must match ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ (lowercase letters, digits and '-', starting and ending with a letter or digit)");
    }
    Ok(())
}

/// Longest free text (`displayName`, `by`, freeze names), in characters.
pub const MAX_TEXT_CHARS: usize = 100;

/// Checks free text (`displayName`, `by`, freeze names): at most `max` characters and no
/// control characters, which would otherwise reach terminals and logs (a display name could
/// retitle a window or clear the screen).
pub fn check_text(path: &str, text: &str, max: usize, errors: &mut Errors) {
    if let Err(rule) = text_rule(text, max) {
        errors.push(path, rule);
    }
}

fn text_rule(text: &str, max: usize) -> Result<(), String> {
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(format!(
            "contains the control character U+{:04X}; free text holds no control characters",
            u32::from(c)
        ));
    }
    let n = text.chars().count();
    if n > max {
        return Err(format!("is {n} characters long; at most {max}"));
    }
    Ok(())
}

/// Validates a member. `path` prefixes every field path (e.g. `members[3]`).
pub fn validate_member(path: &str, m: &Member, errors: &mut Errors) {
    validate_member_fields(path, &MemberFields::of(m), errors)
}

/// A member's fields as [`validate_member`] reads them, borrowed from whatever holds them (a
/// scenario's member is checked in place, not copied into a [`Member`] first).
pub struct MemberFields<'a> {
    /// `name`.
    pub name: &'a str,
    /// `group`.
    pub group: Option<&'a str>,
    /// `labels`.
    pub labels: &'a crate::labels::Labels,
    /// `region`.
    pub region: &'a str,
    /// `kubernetesVersion`.
    pub kubernetes_version: &'a str,
    /// `nodePools`.
    pub node_pools: &'a [crate::model::NodePool],
    /// `maintenance`.
    pub maintenance: &'a crate::model::Maintenance,
    /// `provider`.
    pub provider: Option<&'a crate::model::ProviderRef>,
}

impl<'a> MemberFields<'a> {
    /// A [`Member`]'s fields.
    pub fn of(m: &'a Member) -> MemberFields<'a> {
        MemberFields {
            name: &m.name,
            group: m.group.as_deref(),
            labels: &m.labels,
            region: &m.region,
            kubernetes_version: &m.kubernetes_version,
            node_pools: &m.node_pools,
            maintenance: &m.maintenance,
            provider: m.provider.as_ref(),
        }
    }
}

/// [`validate_member`] of fields borrowed from anywhere.
pub fn validate_member_fields(path: &str, m: &MemberFields<'_>, errors: &mut Errors) {
    // Paths are made only for errors: a valid 100,000-member fleet makes none.
    if let Err(rule) = name_rule(m.name) {
        errors.push(join(path, "name"), format!("\"{}\" {rule}", m.name));
    }
    if let Some(g) = m.group {
        if let Err(rule) = name_rule(g) {
            errors.push(join(path, "group"), format!("\"{g}\" {rule}"));
        }
    }
    if m.labels.len() > MAX_LABELS_PER_MEMBER {
        // Refused whole, before any label is looked at: the cost stays bounded.
        errors.push(
            join(path, "labels"),
            format!(
                "has {} labels; at most {MAX_LABELS_PER_MEMBER}",
                m.labels.len()
            ),
        );
    }
    let labels = if m.labels.len() > MAX_LABELS_PER_MEMBER {
        None
    } else {
        Some(m.labels)
    };
    for (k, v) in labels.into_iter().flatten() {
        let p = || format!("{}[{k}]", join(path, "labels"));
        if let Err(e) = validate_label_key(k) {
            errors.push(p(), e);
        } else if k.starts_with(SYSTEM_LABEL_PREFIX) {
            errors.push(
                p(),
                format!("labels with the prefix {SYSTEM_LABEL_PREFIX} are added by waverun and cannot be set"),
            );
        }
        if let Err(e) = validate_label_value(v) {
            errors.push(p(), e);
        }
    }
    if m.region.trim().is_empty() {
        errors.push(join(path, "region"), "is required");
    } else if let Err(e) = validate_label_value(m.region) {
        errors.push(
            join(path, "region"),
            format!("must be usable as a label value: {e}"),
        );
    }
    if let Err(e) = KubeVersion::parse(m.kubernetes_version) {
        errors.push(join(path, "kubernetesVersion"), e);
    }
    let mut pools = BTreeSet::new();
    for (i, pool) in m.node_pools.iter().enumerate() {
        let p = || format!("{}[{i}]", join(path, "nodePools"));
        if name_rule(&pool.name).is_err() {
            check_name(&format!("{}.name", p()), &pool.name, errors);
        } else if !pools.insert(pool.name.as_str()) {
            errors.push(
                format!("{}.name", p()),
                format!("\"{}\" is used by two pools of this member", pool.name),
            );
        }
        if let Err(e) = validate_image_version(&pool.image_version) {
            errors.push(format!("{}.imageVersion", p()), e);
        }
    }
    if let Some(w) = &m.maintenance.kubernetes {
        w.validate(&join(path, "maintenance.kubernetes"), errors);
    }
    if let Some(w) = &m.maintenance.node_os {
        w.validate(&join(path, "maintenance.nodeOS"), errors);
    }
    if let Some(p) = m.provider {
        if let Err(rule) = name_rule(&p.name) {
            errors.push(
                join(path, "provider.name"),
                format!("\"{}\" {rule}", p.name),
            );
        }
        if let Some(id) = &p.id {
            check_text(
                &join(path, "provider.id"),
                id,
                MAX_PROVIDER_ID_CHARS,
                errors,
            );
        }
    }
}

/// Validates a strategy on its own (no members needed).
pub fn validate_strategy(path: &str, s: &UpdateStrategy, errors: &mut Errors) {
    if s.stages.is_empty() {
        errors.push(join(path, "stages"), "needs at least one stage");
    }
    let checks_path = join(path, "healthChecks");
    crate::health::validate_checks(&s.health_checks, &checks_path, errors);
    let checks = Checks {
        names: s.health_checks.iter().map(|c| c.name.as_str()).collect(),
        path: &checks_path,
    };
    let mut stage_names = BTreeMap::new();
    let mut group_names: BTreeMap<&str, String> = BTreeMap::new();
    for (si, stage) in s.stages.iter().enumerate() {
        let sp = format!("{}[{si}]", join(path, "stages"));
        check_name(&format!("{sp}.name"), &stage.name, errors);
        if let Some(prev) = stage_names.insert(stage.name.as_str(), si) {
            errors.push(
                format!("{sp}.name"),
                format!("\"{}\" is already the name of stages[{prev}]", stage.name),
            );
        }
        if stage.groups.is_empty() && stage.member_selector.is_none() {
            errors.push(&sp, "a stage needs groups, a memberSelector, or both");
        }
        if stage.groups.len() > MAX_GROUPS_PER_STAGE {
            errors.push(
                format!("{sp}.groups"),
                format!(
                    "has {} groups; a stage has at most {MAX_GROUPS_PER_STAGE}",
                    stage.groups.len()
                ),
            );
        }
        if let Some(sel) = &stage.member_selector {
            check_selector(
                &format!("{sp}.memberSelector.byLabel"),
                &sel.by_label,
                errors,
            );
        }
        if let Some(w) = stage.after_stage_wait_in_seconds {
            if w > MAX_AFTER_STAGE_WAIT_SECONDS {
                errors.push(
                    format!("{sp}.afterStageWaitInSeconds"),
                    format!("{w} is above the maximum of {MAX_AFTER_STAGE_WAIT_SECONDS} (7 days)"),
                );
            }
        }
        if let Some(mc) = &stage.max_concurrency {
            match Limit::parse_concurrency(mc) {
                Err(e) => errors.push(format!("{sp}.maxConcurrency"), e),
                Ok(Limit::Count(n)) if n > MAX_STAGE_CONCURRENCY => errors.push(
                    format!("{sp}.maxConcurrency"),
                    format!("\"{mc}\" is above the stage maximum of {MAX_STAGE_CONCURRENCY}"),
                ),
                Ok(_) => {}
            }
        }
        if let Some(f) = &stage.max_allowed_failures {
            if let Err(e) = Limit::parse_failures(f) {
                errors.push(format!("{sp}.maxAllowedFailures"), e);
            }
        }
        check_gates(
            &format!("{sp}.beforeGates"),
            &stage.before_gates,
            true,
            &checks,
            errors,
        );
        check_gates(
            &format!("{sp}.afterGates"),
            &stage.after_gates,
            false,
            &checks,
            errors,
        );
        checks.tier(&sp, &stage.after_member_checks, &stage.preflight, errors);
        for (gi, group) in stage.groups.iter().enumerate() {
            let gp = format!("{sp}.groups[{gi}]");
            check_name(&format!("{gp}.name"), &group.name, errors);
            if let Some(prev) = group_names.insert(group.name.as_str(), gp.clone()) {
                errors.push(
                    format!("{gp}.name"),
                    format!(
                        "\"{}\" is already the name of {prev}; group names are unique across the strategy",
                        group.name
                    ),
                );
            }
            if let Some(sel) = &group.member_selector {
                check_selector(
                    &format!("{gp}.memberSelector.byLabel"),
                    &sel.by_label,
                    errors,
                );
            }
            if let Some(mc) = &group.max_concurrency {
                if let Err(e) = Limit::parse_concurrency(mc) {
                    errors.push(format!("{gp}.maxConcurrency"), e);
                }
            }
            if let Some(f) = &group.max_allowed_failures {
                if let Err(e) = Limit::parse_failures(f) {
                    errors.push(format!("{gp}.maxAllowedFailures"), e);
                }
            }
            check_gates(
                &format!("{gp}.beforeGates"),
                &group.before_gates,
                true,
                &checks,
                errors,
            );
            check_gates(
                &format!("{gp}.afterGates"),
                &group.after_gates,
                false,
                &checks,
                errors,
            );
            checks.tier(&gp, &group.after_member_checks, &group.preflight, errors);
        }
    }
    // A stage without groups forms an implicit group named after the stage; it must not collide.
    for (si, stage) in s.stages.iter().enumerate() {
        if stage.groups.is_empty() {
            if let Some(other) = group_names.get(stage.name.as_str()) {
                errors.push(
                    format!("{}[{si}].name", join(path, "stages")),
                    format!(
                        "\"{}\" names this stage's implicit group and is also the name of {other}",
                        stage.name
                    ),
                );
            }
        }
    }
}

fn check_selector(path: &str, sel: &str, errors: &mut Errors) {
    if sel.len() > MAX_SELECTOR_LEN {
        errors.push(
            path,
            format!(
                "is {} characters long; at most {MAX_SELECTOR_LEN}",
                sel.len()
            ),
        );
        return;
    }
    if let Err(e) = LabelSelector::parse(sel) {
        errors.push(path, e);
    }
}

/// The strategy's check names, for the places that refer to them.
struct Checks<'a> {
    names: BTreeSet<&'a str>,
    path: &'a str,
}

impl Checks<'_> {
    /// `path` names a check of the strategy.
    fn refer(&self, path: &str, name: &str, errors: &mut Errors) {
        if !self.names.contains(name) {
            let known = if self.names.is_empty() {
                "the strategy has no healthChecks".to_string()
            } else {
                let list: Vec<&str> = self.names.iter().copied().collect();
                format!("{} has {}", self.path, list.join(", "))
            };
            errors.push(
                path,
                format!("\"{name}\" is not a check of {} ({known})", self.path),
            );
        }
    }

    /// A stage's or group's `afterMemberChecks` and `preflight`.
    fn tier(
        &self,
        path: &str,
        after: &Option<AfterMemberChecks>,
        preflight: &Option<Preflight>,
        errors: &mut Errors,
    ) {
        if let Some(a) = after {
            let ap = format!("{path}.afterMemberChecks");
            if a.checks.is_empty() {
                errors.push(format!("{ap}.checks"), "names no check");
            }
            for (i, c) in a.checks.iter().enumerate() {
                self.refer(&format!("{ap}.checks[{i}]"), c, errors);
            }
            if let Some(s) = a.soak_seconds {
                if s > MAX_AFTER_STAGE_WAIT_SECONDS {
                    errors.push(
                        format!("{ap}.soakSeconds"),
                        format!(
                            "{s} is above the maximum of {MAX_AFTER_STAGE_WAIT_SECONDS} (7 days)"
                        ),
                    );
                }
            }
        }
        if let Some(p) = preflight {
            let pp = format!("{path}.preflight");
            for (i, c) in p.checks.iter().enumerate() {
                self.refer(&format!("{pp}.checks[{i}]"), c, errors);
            }
            if let Some(r) = p.retry_interval_seconds {
                if !(1..=86_400).contains(&r) {
                    errors.push(
                        format!("{pp}.retryIntervalSeconds"),
                        format!("{r} is outside 1..=86400"),
                    );
                }
            }
            if let Some(m) = p.max_wait_seconds {
                if m > MAX_AFTER_STAGE_WAIT_SECONDS {
                    errors.push(
                        format!("{pp}.maxWaitSeconds"),
                        format!(
                            "{m} is above the maximum of {MAX_AFTER_STAGE_WAIT_SECONDS} (7 days)"
                        ),
                    );
                }
            }
        }
    }
}

fn check_gates(
    path: &str,
    gates: &[GateConfig],
    before: bool,
    checks: &Checks<'_>,
    errors: &mut Errors,
) {
    for (i, g) in gates.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if let Some(d) = &g.display_name {
            check_text(&format!("{p}.displayName"), d, MAX_TEXT_CHARS, errors);
        }
        match (g.gate_type, &g.health_check) {
            (GateType::HealthCheck, None) => errors.push(
                format!("{p}.healthCheck"),
                "is required for a HealthCheck gate (the name of one of the strategy's healthChecks)",
            ),
            (GateType::HealthCheck, Some(name)) => {
                checks.refer(&format!("{p}.healthCheck"), name, errors)
            }
            (_, Some(_)) => errors.push(
                format!("{p}.healthCheck"),
                "is only allowed on a HealthCheck gate",
            ),
            (_, None) => {}
        }
        match (g.gate_type, &g.scheduled_start_configuration) {
            (GateType::HealthCheck, Some(_)) => errors.push(
                format!("{p}.scheduledStartConfiguration"),
                "is only allowed on a ScheduledStart gate",
            ),
            (GateType::HealthCheck, None) => {}
            (GateType::Approval, Some(_)) => errors.push(
                format!("{p}.scheduledStartConfiguration"),
                "is only allowed on a ScheduledStart gate",
            ),
            (GateType::ScheduledStart, None) => errors.push(
                format!("{p}.scheduledStartConfiguration"),
                "is required for a ScheduledStart gate",
            ),
            (GateType::ScheduledStart, Some(c)) => {
                if !before {
                    errors.push(
                        format!("{p}.type"),
                        "a ScheduledStart gate may only be a before gate",
                    );
                }
                if let Err(e) = parse_hh_mm(&c.start_time) {
                    errors.push(format!("{p}.scheduledStartConfiguration.startTime"), e);
                }
                if let Some(o) = &c.utc_offset {
                    if let Err(e) = parse_utc_offset(o) {
                        errors.push(format!("{p}.scheduledStartConfiguration.utcOffset"), e);
                    }
                }
            }
            (GateType::Approval, None) => {}
        }
    }
}

/// Validates a run spec on its own.
pub fn validate_run_spec(path: &str, r: &UpdateRunSpec, errors: &mut Errors) {
    check_name(&join(path, "name"), &r.name, errors);
    match (&r.strategy, &r.update_strategy_name) {
        (Some(_), Some(_)) => errors.push(
            join(path, "updateStrategyName"),
            "a run takes an inline strategy or updateStrategyName, not both",
        ),
        (Some(s), None) => validate_strategy(&join(path, "strategy"), s, errors),
        (None, Some(n)) => check_name(&join(path, "updateStrategyName"), n, errors),
        (None, None) => {}
    }
    let up = &r.managed_cluster_update.upgrade;
    let vpath = join(path, "managedClusterUpdate.upgrade.kubernetesVersion");
    match (up.upgrade_type, &up.kubernetes_version) {
        (UpgradeType::NodeImageOnly, Some(_)) => {
            errors.push(vpath, "is not allowed for a NodeImageOnly upgrade")
        }
        (UpgradeType::Full | UpgradeType::ControlPlaneOnly, None) => errors.push(
            vpath,
            format!("is required for a {:?} upgrade", up.upgrade_type),
        ),
        (_, Some(v)) => {
            if let Err(e) = KubeVersion::parse(v) {
                errors.push(vpath, e);
            }
        }
        _ => {}
    }
    let sel = &r.managed_cluster_update.node_image_selection;
    let cpath = join(
        path,
        "managedClusterUpdate.nodeImageSelection.customNodeImageVersions",
    );
    match sel.selection_type {
        NodeImageSelectionType::Custom => {
            if sel.custom_node_image_versions.is_empty() {
                errors.push(&cpath, "Custom selection needs at least one version");
            }
            let mut families = BTreeMap::new();
            for (i, v) in sel.custom_node_image_versions.iter().enumerate() {
                let p = format!("{cpath}[{i}].version");
                if let Err(e) = validate_image_version(&v.version) {
                    errors.push(p, e);
                } else if let Some(f) = image_family(&v.version) {
                    if let Some(prev) = families.insert(f, i) {
                        errors.push(
                            p,
                            format!("family {f} already has a version at [{prev}]; at most one per image family"),
                        );
                    }
                }
            }
        }
        _ => {
            if !sel.custom_node_image_versions.is_empty() {
                errors.push(cpath, "is only allowed with nodeImageSelection.type Custom");
            }
        }
    }
}

/// Checks an auto-upgrade profile (spec section 1, AutoUpgradeProfile): its name, the strategy
/// name, `targetKubernetesVersion` (`"x.y"`, required for and only for the
/// `TargetKubernetesVersion` channel), `longTermSupport` (only with that channel) and the node
/// image selection (`Latest` or `Consistent`).
pub fn validate_profile(path: &str, p: &AutoUpgradeProfile, errors: &mut Errors) {
    check_name(&join(path, "name"), &p.name, errors);
    if let Some(n) = &p.update_strategy_name {
        check_name(&join(path, "updateStrategyName"), n, errors);
    }
    let tpath = join(path, "targetKubernetesVersion");
    match (p.channel, &p.target_kubernetes_version) {
        (UpgradeChannel::TargetKubernetesVersion, None) => errors.push(
            tpath,
            "is required for the TargetKubernetesVersion channel (a minor such as \"1.30\")",
        ),
        (UpgradeChannel::TargetKubernetesVersion, Some(v)) => {
            if parse_minor(v).is_none() {
                errors.push(
                    tpath,
                    format!("\"{v}\" is not a minor version of the form x.y (e.g. \"1.30\")"),
                );
            }
        }
        (channel, Some(_)) => errors.push(
            tpath,
            format!("is only allowed with the TargetKubernetesVersion channel, not {channel:?}"),
        ),
        (_, None) => {}
    }
    if p.long_term_support && p.channel != UpgradeChannel::TargetKubernetesVersion {
        errors.push(
            join(path, "longTermSupport"),
            format!(
                "is only allowed with the TargetKubernetesVersion channel, not {:?}",
                p.channel
            ),
        );
    }
    if let Some(sel) = &p.node_image_selection {
        if !p.channel.is_kubernetes() {
            errors.push(
                join(path, "nodeImageSelection"),
                format!(
                    "is not allowed with the {:?} channel: its runs take exactly the channel's newest images (each member waits until its region has them)",
                    p.channel
                ),
            );
        } else if sel.selection_type == NodeImageSelectionType::Custom {
            errors.push(
                join(path, "nodeImageSelection.type"),
                "Custom is not allowed for an auto-upgrade profile: use Latest or Consistent",
            );
        }
    }
}

/// `"x.y"` as (major, minor): digits only, no patch.
pub fn parse_minor(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.split_once('.')?;
    let num = |s: &str| {
        (!s.is_empty() && s.len() <= 9 && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    Some((num(a)?, num(b)?))
}

/// Validates a profile and returns it as an [`Error`] if anything is wrong.
pub fn profile(p: &AutoUpgradeProfile) -> Result<(), Error> {
    let mut e = Errors::default();
    validate_profile("", p, &mut e);
    e.into_result()
}

/// What is allowed in a run spec but has no effect, as warnings (field path and message):
/// today, a node-image selection other than `Latest` on a `ControlPlaneOnly` upgrade (Azure
/// run files carry one; the run behaves exactly as with `Latest`).
pub fn run_spec_warnings(path: &str, r: &UpdateRunSpec) -> Vec<FieldError> {
    let mut warnings = Vec::new();
    let mcu = &r.managed_cluster_update;
    if mcu.upgrade.upgrade_type == UpgradeType::ControlPlaneOnly
        && mcu.node_image_selection.selection_type != NodeImageSelectionType::Latest
    {
        warnings.push(FieldError::new(
            join(path, "managedClusterUpdate.nodeImageSelection.type"),
            format!(
                "{:?} has no effect on a ControlPlaneOnly upgrade: no node image changes, the run behaves as with Latest",
                mcu.node_image_selection.selection_type
            ),
        ));
    }
    warnings
}

/// Joins a path prefix and a field.
pub fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

/// Validates a strategy and returns it as an [`Error`] if anything is wrong.
pub fn strategy(s: &UpdateStrategy) -> Result<(), Error> {
    let mut e = Errors::default();
    validate_strategy("", s, &mut e);
    e.into_result()
}

/// Validates a member and returns it as an [`Error`] if anything is wrong.
pub fn member(m: &Member) -> Result<(), Error> {
    let mut e = Errors::default();
    validate_member("", m, &mut e);
    e.into_result()
}

/// Validates a run spec and returns it as an [`Error`] if anything is wrong.
pub fn run_spec(r: &UpdateRunSpec) -> Result<(), Error> {
    let mut e = Errors::default();
    validate_run_spec("", r, &mut e);
    e.into_result()
}
