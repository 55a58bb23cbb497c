//! The scenario file (`shared/spec/scenario-format.md`): its types, its validation (errors name
//! the field, e.g. `members[3].nodePools[0].imageVersion: ...`) and the engine commands it
//! turns into.

use crate::catalog::ANY_REGION;
use crate::engine::{Command, GateSelector};
use crate::error::{Error, Errors};
use crate::model::{
    AutoUpgradeProfile, Freeze, GateTiming, Maintenance, ManagedClusterUpdate, Member, NodePool,
    ProviderRef, Release, ReleaseCatalog, SkipTarget, Timestamp, UpdateRunSpec, UpdateStrategy,
};
use crate::validate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How long a simulation may run when the scenario gives no `until`.
pub const DEFAULT_HORIZON_DAYS: i64 = 366;
/// Longest simulated upgrade (`behavior.upgradeMinutes`) and jitter: one year.
pub const MAX_BEHAVIOR_MINUTES: u32 = 366 * 24 * 60;

/// A scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Virtual clock at the beginning.
    #[serde(deserialize_with = "crate::time::de_timestamp")]
    pub start: Timestamp,
    /// Optional horizon (default: 366 days after `start`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::de_opt_timestamp"
    )]
    pub until: Option<Timestamp>,
    /// Complete every Approval gate the moment it is created.
    #[serde(default, deserialize_with = "crate::document::strict_bool")]
    pub auto_approve: bool,
    /// Seed of the simulated fleet's random choices (only `behavior.jitterMinutes` uses it).
    #[serde(default)]
    pub seed: u64,
    /// The fleet.
    pub members: Vec<ScenarioMember>,
    /// What is released where and when; absent = the run's target version everywhere from
    /// `start`, and no image newer than what the pools run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub releases: Option<ReleaseCatalog>,
    /// Fleet freeze calendar.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub freezes: Vec<Freeze>,
    /// The strategy; absent = every member one by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<UpdateStrategy>,
    /// Named strategies, for profiles and `run.updateStrategyName`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strategies: Vec<NamedStrategy>,
    /// Auto-upgrade profiles: each generates and starts runs as releases reach the catalog.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<AutoUpgradeProfile>,
    /// The scenario's own run; optional when there are profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<ScenarioRun>,
    /// Operator actions in time order; the run starts only when told to.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// What health checks measure, by check, place and time; the first entry that matches a
    /// measurement answers it, and a measurement nothing matches passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<ScriptedHealth>,
}

/// A scripted health result: which measurements it answers (every field given must match) and
/// what they measure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptedHealth {
    /// The check's name (`preflight`: the provider's pre-flight); any if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// A member's own checks (pre-flight, after its upgrade).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// Measurements in this group (members' and the group's gates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Measurements in this stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// From when (inclusive).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::de_opt_timestamp"
    )]
    pub from: Option<Timestamp>,
    /// Until when (exclusive).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::de_opt_timestamp"
    )]
    pub until: Option<Timestamp>,
    /// The verdict measured (default `Pass` unless `value` or `empty` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<crate::health::Verdict>,
    /// A query's sample, judged by the check's conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// A query that returns no sample.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
    /// What the source says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ScriptedHealth {
    /// Whether it answers `req` at `now`.
    pub fn matches(&self, req: &crate::event::CheckRequest, now: Timestamp) -> bool {
        use crate::event::CheckPurpose;
        let member = match req.purpose {
            CheckPurpose::Gate => None,
            _ => req.members.first().map(|m| m.name.as_str()),
        };
        self.check.as_ref().is_none_or(|c| *c == req.check.name)
            && self.member.as_deref().is_none_or(|m| Some(m) == member)
            && self
                .group
                .as_ref()
                .is_none_or(|g| Some(g) == req.group.as_ref())
            && self.stage.as_ref().is_none_or(|s| *s == req.stage)
            && self.from.is_none_or(|f| f <= now)
            && self.until.is_none_or(|u| now < u)
    }

    /// The measurement it scripts.
    pub fn measurement(&self, req: &crate::event::CheckRequest) -> crate::health::Measurement {
        use crate::health::{Measurement, Sample, Verdict};
        let labels = match req.members.as_slice() {
            [one] => format!("cluster=\"{}\"", one.name),
            _ => String::new(),
        };
        let values = if self.empty {
            Some(Vec::new())
        } else {
            self.value.as_ref().map(|v| {
                vec![Sample {
                    labels,
                    value: v.clone(),
                }]
            })
        };
        Measurement {
            verdict: if values.is_some() {
                self.result
            } else {
                Some(self.result.unwrap_or(Verdict::Pass))
            },
            values,
            message: self.message.clone(),
        }
    }
}

/// A stored strategy with its name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedStrategy {
    /// Strategy name.
    pub name: String,
    /// The strategy.
    pub strategy: UpdateStrategy,
}

/// The release calendar of a fleet that gives none: `kubernetes` (a run's target version, if
/// any) and every node image the members run, each available everywhere from `at`.
pub fn implicit_catalog(
    members: &[ScenarioMember],
    kubernetes: Option<&str>,
    at: Timestamp,
) -> ReleaseCatalog {
    let everywhere = |v: &str| Release {
        version: v.to_string(),
        available: BTreeMap::from([(ANY_REGION.to_string(), at)]),
        ..Release::default()
    };
    let members = members.iter().filter(|m| m.joins_at.is_none());
    let mut images: Vec<&str> = members
        .flat_map(|m| m.node_pools.iter().map(|p| p.image_version.as_str()))
        .collect();
    images.sort();
    images.dedup();
    ReleaseCatalog {
        kubernetes: kubernetes.map(everywhere).into_iter().collect(),
        node_images: images.into_iter().map(everywhere).collect(),
        minors: Vec::new(),
    }
}

/// A member plus how its simulated cluster behaves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioMember {
    /// Name.
    pub name: String,
    /// Update group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "crate::labels::Labels::is_empty")]
    pub labels: crate::labels::Labels,
    /// Region.
    pub region: String,
    /// Control-plane version.
    pub kubernetes_version: String,
    /// Node pools.
    #[serde(default)]
    pub node_pools: Vec<NodePool>,
    /// Maintenance windows.
    #[serde(default, skip_serializing_if = "Maintenance::is_empty")]
    pub maintenance: Maintenance,
    /// LTS.
    #[serde(default, deserialize_with = "crate::document::strict_bool")]
    pub long_term_support: bool,
    /// Provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRef>,
    /// Simulated behaviour.
    #[serde(default)]
    pub behavior: Behavior,
    /// Extension: the member joins the fleet at this instant (absent: it is there from the
    /// start). A member that joins behind a profile's target triggers a catch-up run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::de_opt_timestamp"
    )]
    pub joins_at: Option<Timestamp>,
}

crate::plan::assignable_by_fields!(ScenarioMember);

impl ScenarioMember {
    /// Its member's fields, borrowed (to validate it in place).
    pub fn fields(&self) -> validate::MemberFields<'_> {
        validate::MemberFields {
            name: &self.name,
            group: self.group.as_deref(),
            labels: &self.labels,
            region: &self.region,
            kubernetes_version: &self.kubernetes_version,
            node_pools: &self.node_pools,
            maintenance: &self.maintenance,
            provider: self.provider.as_ref(),
        }
    }

    /// The member without its behaviour.
    pub fn member(&self) -> Member {
        self.clone().into_member()
    }

    /// The member without its behaviour, moved out.
    pub fn into_member(self) -> Member {
        Member {
            name: self.name,
            group: self.group,
            labels: self.labels,
            region: self.region,
            kubernetes_version: self.kubernetes_version,
            node_pools: self.node_pools,
            maintenance: self.maintenance,
            long_term_support: self.long_term_support,
            provider: self.provider,
        }
    }
}

/// How a simulated cluster behaves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Behavior {
    /// Minutes one upgrade takes (default 30).
    #[serde(default = "default_upgrade_minutes")]
    pub upgrade_minutes: u32,
    /// The first N upgrade attempts fail (default 0).
    #[serde(default)]
    pub fail_attempts: u32,
    /// Extension: add a seeded random 0..=N minutes to each upgrade (default 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub jitter_minutes: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn default_upgrade_minutes() -> u32 {
    30
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            upgrade_minutes: 30,
            fail_attempts: 0,
            jitter_minutes: 0,
        }
    }
}

/// The scenario's run: a name and the upgrade (the strategy is the scenario's `strategy`, or
/// one of its named `strategies`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioRun {
    /// Run name.
    pub name: String,
    /// One of the scenario's named `strategies` (instead of `strategy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy_name: Option<String>,
    /// The upgrade.
    pub managed_cluster_update: ManagedClusterUpdate,
}

impl ScenarioRun {
    /// The run spec, with the scenario's inline `strategy`.
    fn into_spec(self, strategy: Option<UpdateStrategy>) -> UpdateRunSpec {
        UpdateRunSpec {
            name: self.name,
            strategy,
            update_strategy_name: self.update_strategy_name,
            managed_cluster_update: self.managed_cluster_update,
            auto_upgrade_profile_name: None,
        }
    }
}

/// What an operator does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ActionKind {
    /// Start (or resume) the run.
    Start,
    /// Stop the run.
    Stop,
    /// Approve a gate (or complete a scheduled gate early).
    Approve,
    /// Skip targets.
    Skip,
    /// `generateUpdateRun` of `profile`: create (not start) the run for its current target.
    GenerateUpdateRun,
    /// Fail a Pending gate (an inconclusive health check, an approval refused).
    FailGate,
}

/// A gate position in an action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateRef {
    /// Stage name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Group name, for a group gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Before or After.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<GateTiming>,
    /// Gate id instead of a position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// One operator action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// When.
    #[serde(deserialize_with = "crate::time::de_timestamp")]
    pub at: Timestamp,
    /// What.
    #[serde(rename = "do")]
    pub kind: ActionKind,
    /// For `approve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateRef>,
    /// For `skip`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<SkipTarget>,
    /// Who (recorded on approvals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The run it acts on (default: the scenario's run), e.g. one a profile generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// For `generateUpdateRun`: the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// For `failGate`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Action {
    /// An action of `kind` at `at` with nothing else set.
    pub fn new(at: Timestamp, kind: ActionKind) -> Action {
        Action {
            at,
            kind,
            gate: None,
            targets: Vec::new(),
            by: None,
            run: None,
            profile: None,
            message: None,
        }
    }

    /// The engine command for this action; `run` is the scenario's run (an action's own `run`
    /// wins).
    pub fn command(&self, run: &str) -> Command {
        let run = self.run.clone().unwrap_or_else(|| run.to_string());
        match self.kind {
            ActionKind::GenerateUpdateRun => Command::GenerateUpdateRun {
                profile: self.profile.clone().unwrap_or_default(),
            },
            ActionKind::Start => Command::StartRun { name: run },
            ActionKind::Stop => Command::StopRun { name: run },
            ActionKind::Skip => Command::Skip {
                run,
                targets: self.targets.clone(),
            },
            ActionKind::Approve | ActionKind::FailGate => {
                let g = self.gate.clone().unwrap_or(GateRef {
                    stage: None,
                    group: None,
                    timing: None,
                    id: None,
                });
                let gate = GateSelector {
                    id: g.id,
                    stage: g.stage,
                    group: g.group,
                    timing: g.timing,
                };
                if self.kind == ActionKind::FailGate {
                    Command::FailGate {
                        run,
                        gate,
                        by: self.by.clone(),
                        message: self.message.clone(),
                    }
                } else {
                    Command::CompleteGate {
                        run,
                        gate,
                        by: self.by.clone(),
                    }
                }
            }
        }
    }
}

impl Scenario {
    /// When the simulation stops at the latest.
    pub fn horizon(&self) -> Timestamp {
        self.until.unwrap_or_else(|| {
            self.start
                .checked_add_signed(chrono::TimeDelta::days(DEFAULT_HORIZON_DAYS))
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
        })
    }

    /// Checks everything the engine will not: member names unique, behaviours, actions in
    /// order and pointing at something that exists, releases well-formed, every member in at
    /// most one group; and the members, strategy and run with their own rules. Every error
    /// names its field, once, as it is in the file.
    pub fn validate(&self) -> Result<(), Error> {
        let mut e = Errors::default();
        if let Some(u) = self.until {
            if u < self.start {
                e.push("until", "is before start");
            }
        }
        let mut names = BTreeMap::new();
        for (i, m) in self.members.iter().enumerate() {
            let p = format!("members[{i}]");
            validate::validate_member_fields(&p, &m.fields(), &mut e);
            if let Some(prev) = names.insert(m.name.as_str(), i) {
                e.push(
                    format!("{p}.name"),
                    format!("\"{}\" is already the name of members[{prev}]", m.name),
                );
            }
            let b = &m.behavior;
            if b.upgrade_minutes == 0 {
                e.push(format!("{p}.behavior.upgradeMinutes"), "must be at least 1");
            }
            if b.upgrade_minutes > MAX_BEHAVIOR_MINUTES {
                e.push(
                    format!("{p}.behavior.upgradeMinutes"),
                    format!(
                        "{} is above the maximum of {MAX_BEHAVIOR_MINUTES} (one year)",
                        b.upgrade_minutes
                    ),
                );
            }
            if b.jitter_minutes > MAX_BEHAVIOR_MINUTES {
                e.push(
                    format!("{p}.behavior.jitterMinutes"),
                    format!(
                        "{} is above the maximum of {MAX_BEHAVIOR_MINUTES} (one year)",
                        b.jitter_minutes
                    ),
                );
            }
        }
        for (i, m) in self.members.iter().enumerate() {
            if let Some(t) = m.joins_at {
                if t < self.start {
                    e.push(
                        format!("members[{i}].joinsAt"),
                        "is before the scenario's start",
                    );
                }
            }
        }
        let strategy_valid = match &self.strategy {
            Some(s) => {
                let before = e.0.len();
                validate::validate_strategy("strategy", s, &mut e);
                e.0.len() == before
            }
            None => true,
        };
        let mut strategy_names = BTreeMap::new();
        for (i, s) in self.strategies.iter().enumerate() {
            let p = format!("strategies[{i}]");
            validate::check_name(&format!("{p}.name"), &s.name, &mut e);
            validate::validate_strategy(&format!("{p}.strategy"), &s.strategy, &mut e);
            if let Some(prev) = strategy_names.insert(s.name.as_str(), i) {
                e.push(
                    format!("{p}.name"),
                    format!("\"{}\" is already the name of strategies[{prev}]", s.name),
                );
            }
        }
        let named = |e: &mut Errors, path: String, n: &str| {
            if !strategy_names.contains_key(n) {
                e.push(
                    path,
                    format!("\"{n}\" is not one of the scenario's named strategies"),
                );
            }
        };
        let mut profile_names = BTreeMap::new();
        for (i, pr) in self.profiles.iter().enumerate() {
            let p = format!("profiles[{i}]");
            validate::validate_profile(&p, pr, &mut e);
            if let Some(n) = &pr.update_strategy_name {
                named(&mut e, format!("{p}.updateStrategyName"), n);
            }
            if let Some(prev) = profile_names.insert(pr.name.as_str(), i) {
                e.push(
                    format!("{p}.name"),
                    format!("\"{}\" is already the name of profiles[{prev}]", pr.name),
                );
            }
        }
        match &self.run {
            // The run's own fields; the strategy is the scenario's and was checked above, once.
            Some(run) => {
                validate::validate_run_spec(
                    "run",
                    &UpdateRunSpec {
                        strategy: None,
                        ..self.run_spec().expect("a run")
                    },
                    &mut e,
                );
                if let Some(n) = &run.update_strategy_name {
                    if self.strategy.is_some() {
                        e.push(
                            "run.updateStrategyName",
                            "the scenario has a `strategy` already: give the run one or the other",
                        );
                    }
                    named(&mut e, "run.updateStrategyName".to_string(), n);
                }
            }
            None if self.profiles.is_empty() => e.push(
                "run",
                "is required: a scenario needs a run, auto-upgrade profiles, or both",
            ),
            None => {}
        }
        if let Some(r) = &self.releases {
            for (i, k) in r.kubernetes.iter().enumerate() {
                if let Err(m) = crate::version::KubeVersion::parse(&k.version) {
                    e.push(format!("releases.kubernetes[{i}].version"), m);
                }
                if k.security_patch {
                    e.push(
                        format!("releases.kubernetes[{i}].securityPatch"),
                        "is only for node images",
                    );
                }
                if k.os_type.is_some() {
                    e.push(
                        format!("releases.kubernetes[{i}].osType"),
                        "is only for node images",
                    );
                }
            }
            for (i, k) in r.node_images.iter().enumerate() {
                if let Err(m) = crate::version::validate_image_version(&k.version) {
                    e.push(format!("releases.nodeImages[{i}].version"), m);
                }
                if k.preview {
                    e.push(
                        format!("releases.nodeImages[{i}].preview"),
                        "is only for Kubernetes versions",
                    );
                }
            }
            let mut minors = BTreeMap::new();
            for (i, m) in r.minors.iter().enumerate() {
                let p = format!("releases.minors[{i}].minor");
                if validate::parse_minor(&m.minor).is_none() {
                    e.push(
                        &p,
                        format!("\"{}\" is not a minor version of the form x.y", m.minor),
                    );
                } else if let Some(prev) = minors.insert(m.minor.as_str(), i) {
                    e.push(
                        p,
                        format!("{} is already listed at minors[{prev}]", m.minor),
                    );
                }
            }
        }
        for (i, f) in self.freezes.iter().enumerate() {
            validate::check_text(
                &format!("freezes[{i}].name"),
                &f.name,
                validate::MAX_TEXT_CHARS,
                &mut e,
            );
            if f.name.trim().is_empty() {
                e.push(format!("freezes[{i}].name"), "is required");
            }
            if f.end <= f.start {
                e.push(format!("freezes[{i}].end"), "must be after start");
            }
        }
        let strategy = self.run_strategy();
        let targets = ActionTargets::of(&strategy, &names);
        for (i, a) in self.actions.iter().enumerate() {
            let p = format!("actions[{i}]");
            if let Some(run) = &a.run {
                validate::check_name(&format!("{p}.run"), run, &mut e);
            }
            match (a.kind, &a.profile) {
                (ActionKind::GenerateUpdateRun, None) => {
                    e.push(format!("{p}.profile"), "generateUpdateRun needs a profile")
                }
                (ActionKind::GenerateUpdateRun, Some(n))
                    if !profile_names.contains_key(n.as_str()) =>
                {
                    e.push(
                        format!("{p}.profile"),
                        format!("\"{n}\" is not one of the scenario's profiles"),
                    )
                }
                (ActionKind::GenerateUpdateRun, Some(_)) => {}
                (_, Some(_)) => e.push(format!("{p}.profile"), "is only for generateUpdateRun"),
                (_, None) => {}
            }
            let own_run = self.run.as_ref().map(|r| r.name.as_str());
            let on = a.run.as_deref().or(own_run);
            if a.kind != ActionKind::GenerateUpdateRun && on.is_none() {
                e.push(
                    format!("{p}.run"),
                    "is required: the scenario has no run of its own, so name the run (e.g. one a profile generates)",
                );
            }
            // Stages, groups and members are checked against the scenario's run; a generated
            // run's are known only when it exists (a wrong one is an ActionRejected then).
            let targets = (on == own_run).then_some(&targets);
            self.validate_action(&p, i, a, targets, &mut e);
        }
        // Only the whole fleet shows a member in two groups; the engine refuses such a run at
        // start, so the scenario is refused here, naming the second group's selector.
        if strategy_valid && e.0.is_empty() {
            let mut refs: Vec<&ScenarioMember> = self.members.iter().collect();
            refs.sort_by(|a, b| a.name.cmp(&b.name));
            if let Err(mut err) = crate::plan::assign(&refs, &strategy) {
                // Keep the engine's code (MemberInTwoGroups); name the field as in the file.
                let prefix = if self.strategy.is_some() {
                    "strategy"
                } else {
                    ""
                };
                for f in &mut err.fields {
                    f.path = validate::join(prefix, &f.path);
                }
                if let Some(f) = err.fields.first() {
                    err.message = f.to_string();
                }
                return Err(err);
            }
        }
        e.into_result()
    }

    fn validate_action(
        &self,
        p: &str,
        i: usize,
        a: &Action,
        targets: Option<&ActionTargets>,
        e: &mut Errors,
    ) {
        if i > 0 && a.at < self.actions[i - 1].at {
            e.push(
                format!("{p}.at"),
                format!(
                    "is before actions[{}].at; actions are listed in time order",
                    i - 1
                ),
            );
        }
        if a.at < self.start {
            e.push(format!("{p}.at"), "is before the scenario's start");
        }
        if let Some(by) = &a.by {
            validate::check_text(&format!("{p}.by"), by, validate::MAX_TEXT_CHARS, e);
        }
        let Some(targets) = targets else {
            if a.kind == ActionKind::Skip && a.targets.is_empty() {
                e.push(format!("{p}.targets"), "skip needs at least one target");
            }
            return;
        };
        let strategy = targets.strategy;
        let stage_index = |name: &str| targets.stages.get(name).copied();
        let any_group = |name: &str| targets.groups.contains(name);
        let stage_names = || {
            let names: Vec<&str> = strategy
                .stages
                .iter()
                .map(|s| s.name.as_str())
                .take(10)
                .collect();
            let more = if strategy.stages.len() > 10 {
                ", ..."
            } else {
                ""
            };
            format!("{}{more}", names.join(", "))
        };
        match a.kind {
            ActionKind::Approve => match &a.gate {
                None => e.push(
                    format!("{p}.gate"),
                    "approve needs a gate ({stage, timing} and optionally group, or id)",
                ),
                Some(g) => match (&g.id, &g.stage) {
                    (Some(id), _) => {
                        if id.trim().is_empty() {
                            e.push(format!("{p}.gate.id"), "is empty");
                        }
                    }
                    (None, None) => e.push(
                        format!("{p}.gate"),
                        "names no gate: give its stage (and timing, and group for a group gate) or its id",
                    ),
                    (None, Some(stage)) => match stage_index(stage) {
                        None => e.push(
                            format!("{p}.gate.stage"),
                            format!("\"{stage}\" is not a stage of the strategy (stages: {})", stage_names()),
                        ),
                        Some(si) => {
                            let st = &strategy.stages[si];
                            let gates = match &g.group {
                                None => Some((&st.before_gates, &st.after_gates, format!("stage \"{stage}\""))),
                                Some(group) => match st.groups.iter().find(|x| &x.name == group) {
                                    Some(x) => Some((&x.before_gates, &x.after_gates, format!("group \"{group}\""))),
                                    None => {
                                        e.push(
                                            format!("{p}.gate.group"),
                                            format!("\"{group}\" is not a group of stage \"{stage}\""),
                                        );
                                        None
                                    }
                                },
                            };
                            if let Some((before, after, owner)) = gates {
                                let (count, timing) = match g.timing {
                                    Some(GateTiming::Before) => (before.len(), " Before"),
                                    Some(GateTiming::After) => (after.len(), " After"),
                                    None => (before.len() + after.len(), ""),
                                };
                                if count == 0 {
                                    e.push(
                                        format!("{p}.gate"),
                                        format!("{owner} has no{timing} gate to approve"),
                                    );
                                }
                            }
                        }
                    },
                },
            },
            ActionKind::Skip if a.targets.is_empty() => {
                e.push(format!("{p}.targets"), "skip needs at least one target")
            }
            ActionKind::Skip => {
                for (ti, t) in a.targets.iter().enumerate() {
                    let tp = format!("{p}.targets[{ti}]");
                    let problem = match t {
                        SkipTarget::Member(m) if !targets.members.contains_key(m.as_str()) => {
                            Some(format!("member \"{m}\" is not in the fleet"))
                        }
                        SkipTarget::Group(g) if !any_group(g) => {
                            Some(format!("\"{g}\" is not a group of the strategy"))
                        }
                        SkipTarget::Stage(s) | SkipTarget::AfterStageWait(s)
                            if stage_index(s).is_none() =>
                        {
                            Some(format!("\"{s}\" is not a stage of the strategy (stages: {})", stage_names()))
                        }
                        _ => None,
                    };
                    if let Some(m) = problem {
                        e.push(tp, m);
                    }
                }
            }
            _ => {}
        }
    }

    /// The run spec the scenario describes, if it has a run.
    pub fn run_spec(&self) -> Option<UpdateRunSpec> {
        Some(self.run.clone()?.into_spec(self.strategy.clone()))
    }

    /// The scenario run's name, if it has a run.
    pub fn run_name(&self) -> Option<&str> {
        self.run.as_ref().map(|r| r.name.as_str())
    }

    /// The strategy of the scenario's run: `strategy`, the named one, or every member one by
    /// one.
    pub fn run_strategy(&self) -> UpdateStrategy {
        let named = self
            .run
            .as_ref()
            .and_then(|r| r.update_strategy_name.as_deref())
            .and_then(|n| self.strategies.iter().find(|s| s.name == n));
        match (&self.strategy, named) {
            (Some(s), _) => s.clone(),
            (None, Some(n)) => n.strategy.clone(),
            (None, None) => crate::plan::default_strategy(),
        }
    }

    /// The release catalog the engine sees: the scenario's, or the implicit one
    /// ([`implicit_catalog`]: the run's version and the fleet's node images, from `start`).
    pub fn catalog(&self) -> ReleaseCatalog {
        if let Some(r) = &self.releases {
            return r.clone();
        }
        let version = self.run.as_ref().and_then(|r| {
            r.managed_cluster_update
                .upgrade
                .kubernetes_version
                .as_deref()
        });
        implicit_catalog(&self.members, version, self.start)
    }

    /// The commands that set the engine up, each with the field path errors belong to.
    pub fn setup_commands(&self) -> Vec<(String, Command)> {
        self.clone().into_setup_commands().collect()
    }

    /// [`Scenario::setup_commands`], the scenario consumed: each member moves into its command
    /// as the commands are taken, so that a large fleet is not held twice while an engine is set
    /// up from it. Members that join later ([`Scenario::joins`]) have no command here.
    pub fn into_setup_commands(self) -> impl Iterator<Item = (String, Command)> {
        let head = [
            (
                "releases".to_string(),
                Command::SetCatalog {
                    catalog: self.catalog(),
                },
            ),
            (
                "freezes".to_string(),
                Command::SetFreezes {
                    freezes: self.freezes,
                },
            ),
        ];
        let mut tail = Vec::new();
        for (i, s) in self.strategies.into_iter().enumerate() {
            tail.push((
                format!("strategies[{i}]"),
                Command::UpsertStrategy {
                    name: s.name,
                    strategy: s.strategy,
                },
            ));
        }
        for (i, p) in self.profiles.into_iter().enumerate() {
            tail.push((
                format!("profiles[{i}]"),
                Command::UpsertProfile { profile: p },
            ));
        }
        if let Some(run) = self.run {
            let run = run.into_spec(self.strategy);
            tail.push(("run".to_string(), Command::CreateRun { run }));
        }
        let start = self.start;
        let members = self
            .members
            .into_iter()
            .enumerate()
            .filter(move |(_, m)| !m.joins_at.is_some_and(|t| t > start))
            .map(|(i, m)| {
                let member = m.into_member();
                (format!("members[{i}]"), Command::UpsertMember { member })
            });
        head.into_iter().chain(members).chain(tail)
    }

    /// Members that join after the start, in time order (ties in file order): `(at, index)`.
    pub fn joins(&self) -> Vec<(Timestamp, usize)> {
        let mut out: Vec<(Timestamp, usize)> = self
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.joins_at.filter(|t| *t > self.start).map(|t| (t, i)))
            .collect();
        out.sort();
        out
    }
}

/// What scenario actions may name, indexed once (actions are checked in O(log n) each).
struct ActionTargets<'a> {
    strategy: &'a UpdateStrategy,
    stages: BTreeMap<&'a str, usize>,
    /// Group names, including the implicit group of a stage without groups.
    groups: std::collections::BTreeSet<&'a str>,
    members: &'a BTreeMap<&'a str, usize>,
}

impl<'a> ActionTargets<'a> {
    fn of(strategy: &'a UpdateStrategy, members: &'a BTreeMap<&'a str, usize>) -> Self {
        let mut stages = BTreeMap::new();
        let mut groups = std::collections::BTreeSet::new();
        for (si, st) in strategy.stages.iter().enumerate() {
            stages.entry(st.name.as_str()).or_insert(si);
            if st.groups.is_empty() {
                groups.insert(st.name.as_str());
            }
            groups.extend(st.groups.iter().map(|g| g.name.as_str()));
        }
        ActionTargets {
            strategy,
            stages,
            groups,
            members,
        }
    }
}
