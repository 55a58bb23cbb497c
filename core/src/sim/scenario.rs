//! The scenario file (`shared/spec/scenario-format.md`): its types, its validation (errors name
//! the field, e.g. `members[3].nodePools[0].imageVersion: ...`) and the engine commands it
//! turns into.

use crate::catalog::ANY_REGION;
use crate::engine::{Command, GateSelector};
use crate::error::{Error, Errors};
use crate::model::{
    Freeze, GateTiming, Maintenance, ManagedClusterUpdate, Member, NodePool, ProviderRef, Release,
    ReleaseCatalog, SkipTarget, Timestamp, UpdateRunSpec, UpdateStrategy,
};
use crate::validate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How long a simulation may run when the scenario gives no `until`.
pub const DEFAULT_HORIZON_DAYS: i64 = 366;

/// A scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Virtual clock at the beginning.
    pub start: Timestamp,
    /// Optional horizon (default: 366 days after `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    /// Complete every Approval gate the moment it is created.
    #[serde(default)]
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
    /// The run.
    pub run: ScenarioRun,
    /// Operator actions in time order; the run starts only when told to.
    #[serde(default)]
    pub actions: Vec<Action>,
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
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
    #[serde(default)]
    pub long_term_support: bool,
    /// Provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRef>,
    /// Simulated behaviour.
    #[serde(default)]
    pub behavior: Behavior,
}

impl ScenarioMember {
    /// The member without its behaviour.
    pub fn member(&self) -> Member {
        Member {
            name: self.name.clone(),
            group: self.group.clone(),
            labels: self.labels.clone(),
            region: self.region.clone(),
            kubernetes_version: self.kubernetes_version.clone(),
            node_pools: self.node_pools.clone(),
            maintenance: self.maintenance.clone(),
            long_term_support: self.long_term_support,
            provider: self.provider.clone(),
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

/// The scenario's run: a name and the upgrade (the strategy is the scenario's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioRun {
    /// Run name.
    pub name: String,
    /// The upgrade.
    pub managed_cluster_update: ManagedClusterUpdate,
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
}

impl Action {
    /// The engine command for this action on `run`.
    pub fn command(&self, run: &str) -> Command {
        let run = run.to_string();
        match self.kind {
            ActionKind::Start => Command::StartRun { name: run },
            ActionKind::Stop => Command::StopRun { name: run },
            ActionKind::Skip => Command::Skip {
                run,
                targets: self.targets.clone(),
            },
            ActionKind::Approve => {
                let g = self.gate.clone().unwrap_or(GateRef {
                    stage: None,
                    group: None,
                    timing: None,
                    id: None,
                });
                Command::CompleteGate {
                    run,
                    gate: GateSelector {
                        id: g.id,
                        stage: g.stage,
                        group: g.group,
                        timing: g.timing,
                    },
                    by: self.by.clone(),
                }
            }
        }
    }
}

impl Scenario {
    /// Parses JSON (YAML is parsed by the host into the same type).
    pub fn from_json(text: &str) -> Result<Scenario, Error> {
        serde_json::from_str(text).map_err(|e| {
            Error::invalid(vec![crate::error::FieldError::new(
                "",
                format!("scenario: {e}"),
            )])
        })
    }

    /// When the simulation stops at the latest.
    pub fn horizon(&self) -> Timestamp {
        self.until
            .unwrap_or(self.start + chrono::Duration::days(DEFAULT_HORIZON_DAYS))
    }

    /// Checks everything the engine will not: member names unique, behaviours, actions in
    /// order with what they need, releases well-formed; and the members, strategy and run
    /// with their own rules. Every error names its field.
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
            validate::validate_member(&p, &m.member(), &mut e);
            if let Some(prev) = names.insert(m.name.as_str(), i) {
                e.push(
                    format!("{p}.name"),
                    format!("\"{}\" is already the name of members[{prev}]", m.name),
                );
            }
            if m.behavior.upgrade_minutes == 0 {
                e.push(format!("{p}.behavior.upgradeMinutes"), "must be at least 1");
            }
        }
        if let Some(s) = &self.strategy {
            validate::validate_strategy("strategy", s, &mut e);
        }
        validate::validate_run_spec("run", &self.run_spec(), &mut e);
        if let Some(r) = &self.releases {
            for (i, k) in r.kubernetes.iter().enumerate() {
                if let Err(m) = crate::version::KubeVersion::parse(&k.version) {
                    e.push(format!("releases.kubernetes[{i}].version"), m);
                }
            }
            for (i, k) in r.node_images.iter().enumerate() {
                if let Err(m) = crate::version::validate_image_version(&k.version) {
                    e.push(format!("releases.nodeImages[{i}].version"), m);
                }
            }
        }
        for (i, f) in self.freezes.iter().enumerate() {
            if f.end <= f.start {
                e.push(format!("freezes[{i}].end"), "must be after start");
            }
        }
        for (i, a) in self.actions.iter().enumerate() {
            let p = format!("actions[{i}]");
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
            match a.kind {
                ActionKind::Approve if a.gate.is_none() => e.push(
                    format!("{p}.gate"),
                    "approve needs a gate ({stage, timing} and optionally group, or id)",
                ),
                ActionKind::Skip if a.targets.is_empty() => {
                    e.push(format!("{p}.targets"), "skip needs at least one target")
                }
                _ => {}
            }
        }
        e.into_result()
    }

    /// The run spec the scenario describes.
    pub fn run_spec(&self) -> UpdateRunSpec {
        UpdateRunSpec {
            name: self.run.name.clone(),
            strategy: self.strategy.clone(),
            update_strategy_name: None,
            managed_cluster_update: self.run.managed_cluster_update.clone(),
            auto_upgrade_profile_name: None,
        }
    }

    /// The release catalog the engine sees: the scenario's, or the implicit one.
    pub fn catalog(&self) -> ReleaseCatalog {
        if let Some(r) = &self.releases {
            return r.clone();
        }
        let everywhere = |v: &str| Release {
            version: v.to_string(),
            available: BTreeMap::from([(ANY_REGION.to_string(), self.start)]),
        };
        let mut catalog = ReleaseCatalog::default();
        if let Some(v) = &self.run.managed_cluster_update.upgrade.kubernetes_version {
            catalog.kubernetes.push(everywhere(v));
        }
        let mut images: Vec<&str> = self
            .members
            .iter()
            .flat_map(|m| m.node_pools.iter().map(|p| p.image_version.as_str()))
            .collect();
        images.sort();
        images.dedup();
        catalog.node_images = images.into_iter().map(everywhere).collect();
        catalog
    }

    /// The commands that set the engine up, each with the field path errors belong to.
    pub fn setup_commands(&self) -> Vec<(String, Command)> {
        let mut out = vec![
            (
                "releases".to_string(),
                Command::SetCatalog {
                    catalog: self.catalog(),
                },
            ),
            (
                "freezes".to_string(),
                Command::SetFreezes {
                    freezes: self.freezes.clone(),
                },
            ),
        ];
        for (i, m) in self.members.iter().enumerate() {
            out.push((
                format!("members[{i}]"),
                Command::UpsertMember { member: m.member() },
            ));
        }
        out.push((
            "run".to_string(),
            Command::CreateRun {
                run: self.run_spec(),
            },
        ));
        out
    }
}
