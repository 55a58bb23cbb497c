//! The fleet-scale benchmark scenario, shared by `tests/benches/rollout.rs` and
//! `host/benches/wasm_hosts.rs` (which includes this file with `#[path]`, since `waverun-tests`
//! depends on the host crate). Depends only on `waverun-core` and `serde_json`.

use serde_json::{json, Value};
use waverun_core::sim::{Behavior, Scenario, ScenarioMember};
use waverun_core::{Maintenance, NodePool, OsType};

/// The scenario's start (and every release's availability).
pub const START: &str = "2026-12-07T00:00:00Z";
const REGIONS: [&str; 4] = ["eastus", "westus", "northeurope", "westeurope"];
const TIERS: [&str; 2] = ["web", "api"];

/// A fleet shape: `stages` × `groups` groups of `per_group` members.
#[derive(Clone, Copy)]
pub struct Shape {
    /// Stages.
    pub stages: usize,
    /// Groups per stage.
    pub groups: usize,
    /// Members per group.
    pub per_group: usize,
}

impl Shape {
    /// Members in the fleet.
    pub fn members(&self) -> usize {
        self.stages * self.groups * self.per_group
    }
    /// "N members = S stages x G groups x M".
    pub fn label(&self) -> String {
        format!(
            "{} members = {} stages x {} groups x {}",
            self.members(),
            self.stages,
            self.groups,
            self.per_group
        )
    }
}

/// How groups pick their members.
#[derive(Clone, Copy, PartialEq)]
pub enum Grouping {
    /// Even stages by group name, odd stages by label selector.
    Mixed,
    /// Every group by label selector (`ring=rSS,cell=cGG,tier in (web,api)`).
    Selectors,
}

/// The label selector of group `g` of stage `s` (selector-grouped groups).
pub fn selector(s: usize, g: usize) -> String {
    format!("ring=r{s:02},cell=c{g:02},tier in (web,api)")
}

/// The benchmark scenario: members `m000000..`, member `i` in stage `i / (groups * per_group)`,
/// group `(i / per_group) % groups`; labels `ring`, `cell`, `tier`; four regions; one pool.
/// Full upgrade 1.30.4 → 1.31.2 with `Latest` images (one newer image released everywhere),
/// stage concurrency 50 (binding: 50 groups × 2 want 100), group concurrency 2, one auto-approved
/// Approval gate before each stage; upgrades take 30 min plus seeded jitter of up to 10 min.
pub fn scenario(shape: Shape, grouping: Grouping) -> Scenario {
    let per_stage = shape.groups * shape.per_group;
    // Members are built directly (not through JSON) to keep the process's memory low before
    // the peak-RSS measurement starts.
    let members: Vec<ScenarioMember> = (0..shape.members())
        .map(|i| {
            let (s, g) = (i / per_stage, (i / shape.per_group) % shape.groups);
            ScenarioMember {
                name: format!("m{i:06}"),
                group: Some(format!("s{s:02}-g{g:02}")),
                labels: waverun_core::Labels::from([
                    ("ring".to_string(), format!("r{s:02}")),
                    ("cell".to_string(), format!("c{g:02}")),
                    ("tier".to_string(), TIERS[i % 2].to_string()),
                ]),
                region: REGIONS[i % REGIONS.len()].to_string(),
                kubernetes_version: "1.30.4".to_string(),
                node_pools: vec![NodePool {
                    name: "system".to_string(),
                    os_type: OsType::Linux,
                    image_version: "AKSUbuntu-2204gen2containerd-202411.03.0".to_string(),
                    from_snapshot: false,
                }],
                maintenance: Maintenance::default(),
                long_term_support: false,
                provider: None,
                joins_at: None,
                behavior: Behavior {
                    upgrade_minutes: 30,
                    fail_attempts: 0,
                    jitter_minutes: 10,
                },
            }
        })
        .collect();
    let stages: Vec<Value> = (0..shape.stages)
        .map(|s| {
            let groups: Vec<Value> = (0..shape.groups)
                .map(|g| {
                    let mut group =
                        json!({"name": format!("s{s:02}-g{g:02}"), "maxConcurrency": "2"});
                    if grouping == Grouping::Selectors || s % 2 == 1 {
                        group["memberSelector"] = json!({"byLabel": selector(s, g)});
                    }
                    group
                })
                .collect();
            json!({
                "name": format!("stage-{s:02}"),
                "maxConcurrency": "50",
                "beforeGates": [{"type": "Approval", "displayName": format!("stage {s} sign-off")}],
                "groups": groups,
            })
        })
        .collect();
    with_fleet(json!(stages), members, Some(7))
}

impl Shape {
    /// The fleet: 10,000 members = 20 stages × 50 groups × 10.
    pub const FLEET_10K: Shape = Shape {
        stages: 20,
        groups: 50,
        per_group: 10,
    };
}

/// Many small stages: `stages` stages of one group of one member (`m000000..` in `g000000..`),
/// each stage with `gates` auto-approved Approval gates, alternately before and after it (two
/// gates: one before, one after). Full upgrade 1.30.4 → 1.31.2 with `Latest` images; upgrades
/// take 10 min, no jitter, so up to 50,000 stages end within the default horizon of 366 days.
/// Costs that grow with the number of stages or gates (not with a stage's size) show here.
pub fn gated_stages(stages: usize, gates: usize) -> Scenario {
    let members: Vec<ScenarioMember> = (0..stages)
        .map(|i| ScenarioMember {
            name: format!("m{i:06}"),
            group: Some(format!("g{i:06}")),
            labels: waverun_core::Labels::new(),
            region: REGIONS[i % REGIONS.len()].to_string(),
            kubernetes_version: "1.30.4".to_string(),
            node_pools: vec![NodePool {
                name: "system".to_string(),
                os_type: OsType::Linux,
                image_version: "AKSUbuntu-2204gen2containerd-202411.03.0".to_string(),
                from_snapshot: false,
            }],
            maintenance: Maintenance::default(),
            long_term_support: false,
            provider: None,
            joins_at: None,
            behavior: Behavior {
                upgrade_minutes: 10,
                fail_attempts: 0,
                jitter_minutes: 0,
            },
        })
        .collect();
    let stage_list: Vec<Value> = (0..stages)
        .map(|s| {
            let gate = |k: usize| json!({"type": "Approval", "displayName": format!("stage {s} gate {k}")});
            let before: Vec<Value> = (0..gates).step_by(2).map(gate).collect();
            let after: Vec<Value> = (1..gates).step_by(2).map(gate).collect();
            json!({
                "name": format!("stage-{s:06}"),
                "beforeGates": before,
                "afterGates": after,
                "groups": [{"name": format!("g{s:06}")}],
            })
        })
        .collect();
    with_fleet(json!(stage_list), members, None)
}

/// The scenario around `stages` and `members`: the target version and two images released
/// everywhere at the start, every gate auto-approved, the run started at once.
fn with_fleet(
    stages: serde_json::Value,
    members: Vec<ScenarioMember>,
    seed: Option<u64>,
) -> Scenario {
    let everywhere = json!({"*": START});
    let mut v = json!({
        "start": START,
        "autoApprove": true,
        "members": [],
        "releases": {
            "kubernetes": [{"version": "1.31.2", "available": everywhere}],
            "nodeImages": [
                {"version": "AKSUbuntu-2204gen2containerd-202411.03.0", "available": everywhere},
                {"version": "AKSUbuntu-2204gen2containerd-202412.01.0", "available": everywhere},
            ],
        },
        "strategy": {"stages": stages},
        "run": {"name": "bench", "managedClusterUpdate": {
            "upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"},
            "nodeImageSelection": {"type": "Latest"},
        }},
        "actions": [{"at": START, "do": "start"}],
    });
    if let Some(seed) = seed {
        v["seed"] = json!(seed);
    }
    let mut sc = Scenario::from_json(&v.to_string()).expect("benchmark scenario parses");
    sc.members = members;
    sc.validate().expect("benchmark scenario is valid");
    sc
}
