//! `waverun plan FILE` prints exactly the core's rendering of the plan
//! (`waverun_core::plan_text::render_text`): the text lives in the core, the CLI only writes it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use waverun_core::plan::Plan;
use waverun_core::{plan_text, Engine, Input};

/// The plan as `waverun plan` computes it: the scenario's setup at its start, then the run's
/// plan, warnings named as fields of the scenario file.
fn core_plan(file: &Path) -> Plan {
    let scenario = waverun_host::load_scenario(file).expect("scenario");
    scenario.validate().expect("valid scenario");
    let mut engine = Engine::new(scenario.start);
    for (path, cmd) in scenario.setup_commands() {
        if let Err(e) = engine.handle_input(scenario.start, Input::Command(cmd)) {
            panic!("{path}: {e}");
        }
    }
    let mut plan = engine.plan(scenario.run_name().unwrap()).expect("plan");
    for w in &mut plan.warnings {
        w.path = waverun_core::validate::join("run", &w.path);
    }
    plan
}

fn cli_plan_text(file: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .arg("plan")
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .expect("waverun runs");
    assert!(
        out.status.success(),
        "waverun plan {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_cli_prints_the_cores_plan_text_for_the_example() {
    let example = workspace().join("host/examples/fleet-rollout.yaml");
    let text = plan_text::render_text(&core_plan(&example));
    assert!(text.starts_with("Plan of run "), "{text}");
    assert!(text.contains("\nstage "), "{text}");
    assert_eq!(cli_plan_text(&example), text);
}

#[test]
fn the_cli_prints_the_cores_plan_text_for_every_scenario() {
    let dir = workspace().join("tests/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        assert_eq!(
            cli_plan_text(&file),
            plan_text::render_text(&core_plan(&file)),
            "{}",
            file.display()
        );
    }
}
