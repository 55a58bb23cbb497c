//! The CLI's tables and trees, byte for byte, against `tests/golden/cli/`: reviewed by eye once
//! and kept, so a change to what people read shows in a diff. The inputs are deterministic: the
//! shipped example rollout simulated by the engine (its status tree early, mid-way with waits and
//! countdowns, and at the end) and resources shaped as the daemon answers them. A change meant
//! to change the output records it with `WAVERUN_BLESS=1 cargo test -p waverun --test
//! cli_golden`.

use serde_json::{json, Value};
use std::path::PathBuf;
use waverun_core::sim::Simulation;
use waverun_core::Timestamp;
use waverun_host::cli::resources::{gate_table, member_table, strategy_table, strategy_tree};
use waverun_host::cli::runs::run_table;
use waverun_host::cli::tree::{render, FleetNow, RunView};

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden/cli")
        .join(name);
    if std::env::var_os("WAVERUN_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (record it with WAVERUN_BLESS=1)", path.display()));
    assert_eq!(
        actual, want,
        "{name} changed (if meant, WAVERUN_BLESS=1 records it)"
    );
}

fn example() -> waverun_core::sim::Scenario {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-rollout.yaml");
    waverun_host::load_scenario(&p).unwrap()
}

/// The run as the daemon answers it (flattened), around a status tree.
fn run_resource(s: &waverun_core::sim::Scenario, status: &waverun_core::RunStatus) -> Value {
    json!({
        "name": s.run_name().unwrap(),
        "updateStrategyId": "/fleets/default/updateStrategies/example",
        "managedClusterUpdate": s.run.as_ref().unwrap().managed_cluster_update,
        "status": status,
    })
}

/// Gate ids as the daemon gives them: the gate resource's id (`/fleets/F/gates/GUID`).
fn as_the_daemon_names_gates(status: &mut waverun_core::RunStatus) {
    let mut n = 0;
    let mut rename = |gates: &mut Vec<waverun_core::state::GateStatus>| {
        for g in gates.iter_mut().filter(|g| g.gate_id.is_some()) {
            n += 1;
            g.gate_id = Some(format!(
                "/fleets/default/gates/00000000-0000-4000-8000-{n:012}"
            ));
        }
    };
    for st in &mut status.stages {
        rename(&mut st.before_gates);
        rename(&mut st.after_gates);
        for g in &mut st.groups {
            rename(&mut g.before_gates);
            rename(&mut g.after_gates);
        }
    }
}

/// The tree as a person looking at `at` sees it (everything before `at` has happened; the
/// simulation's clock has moved on to the next instant that matters, which is not before it).
fn tree_at(
    sim: &mut Simulation,
    s: &waverun_core::sim::Scenario,
    at: Option<Timestamp>,
    compact: bool,
) -> String {
    let now = match at {
        Some(t) => {
            while sim.now() < t && sim.step() {}
            t
        }
        None => {
            sim.run_to_end();
            sim.now()
        }
    };
    let mut status = sim.engine().run_status(s.run_name().unwrap()).unwrap();
    as_the_daemon_names_gates(&mut status);
    let run = run_resource(s, &status);
    let approve = |id: &str| format!("waverun gate approve --gate-name {id}");
    render(&RunView {
        name: s.run_name().unwrap(),
        run: &run,
        status: &status,
        now: Some(FleetNow { now, scale: 2000.0 }),
        approve: &approve,
        expected_finish: None,
        compact,
    })
}

#[test]
fn the_run_tree_early_midway_and_at_the_end() {
    let s = example();
    let mut sim = Simulation::new(&s).unwrap();
    let mut out = String::new();
    for hours in [1, 45, 50] {
        let t = s.start + chrono::TimeDelta::hours(hours);
        out.push_str(&format!("# {hours} h after the start\n"));
        out.push_str(&tree_at(&mut sim, &s, Some(t), false));
        out.push('\n');
        out.push_str(&format!(
            "# {hours} h after the start, compact (watch, when the whole tree does not fit)\n"
        ));
        out.push_str(&tree_at(&mut sim, &s, Some(t), true));
        out.push('\n');
    }
    out.push_str("# at the end\n");
    out.push_str(&tree_at(&mut sim, &s, None, false));
    golden("run-tree.txt", &out);
}

#[test]
fn the_list_tables() {
    let s = example();
    let mut sim = Simulation::new(&s).unwrap();
    sim.run_to_end();
    let status = sim.engine().run_status(s.run_name().unwrap()).unwrap();
    let members: Vec<Value> = s
        .members
        .iter()
        .map(|m| {
            json!({
                "name": m.name,
                "group": m.group,
                "provider": "simulated",
                "labels": m.labels,
                "status": {"kubernetesVersion": m.kubernetes_version, "region": m.region},
            })
        })
        .collect();
    let strategy = json!({
        "name": "example",
        "strategy": s.strategy,
    });
    let gates = vec![
        json!({"name": "0f8fad5b-d9cb-469f-a165-70867728950e", "state": "Pending", "gateType": "Approval",
               "displayName": "production sign-off",
               "target": {"updateRunProperties": {"name": "k8s-1-31-rollout", "stage": "prod", "timing": "Before"}}}),
        json!({"name": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "state": "Completed", "gateType": "ScheduledStart",
               "target": {"updateRunProperties": {"name": "k8s-1-31-rollout", "stage": "staging", "group": "eu", "timing": "Before"}}}),
    ];
    let approve = |id: &str| format!("waverun gate approve --gate-name {id}");
    let mut out = String::new();
    out.push_str("# waverun member list -o table\n");
    out.push_str(&member_table(&members));
    out.push_str("\n# waverun updatestrategy list -o table\n");
    out.push_str(&strategy_table(std::slice::from_ref(&strategy)));
    out.push_str("\n# waverun updatestrategy show -o table\n");
    out.push_str(&strategy_tree(&strategy));
    out.push_str("\n# waverun updaterun list -o table\n");
    out.push_str(&run_table(&[run_resource(&s, &status)]));
    out.push_str("\n# waverun gate list -o table\n");
    out.push_str(&gate_table(&gates, &approve));
    golden("tables.txt", &out);
}
