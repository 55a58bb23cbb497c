//! The `waverun` binary as users run it: exit codes, errors printed once, files refused before
//! they are read, warnings, and a reader that goes away.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn waverun(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("waverun runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/fleet-rollout.yaml")
        .display()
        .to_string()
}

const TWO_GROUPS: &str = "start: '2026-12-07T00:00:00Z'
members:
- {name: m1, region: eastus, kubernetesVersion: 1.30.4, labels: {env: prod}}
strategy:
  stages:
  - name: s
    groups:
    - {name: a, memberSelector: {byLabel: env=prod}}
    - {name: b, memberSelector: {byLabel: 'env in (prod)'}}
run: {name: r1, managedClusterUpdate: {upgrade: {type: Full, kubernetesVersion: 1.31.2}}}
actions:
- {at: '2026-12-07T00:00:00Z', do: start}
";

#[test]
fn validate_simulate_and_plan_agree_that_a_member_in_two_groups_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "two.yaml", TWO_GROUPS);
    let f = f.to_str().unwrap();
    for args in [
        vec!["validate", f],
        vec!["simulate", f],
        vec!["simulate", "-o", "json", f],
        vec!["plan", f],
    ] {
        let o = waverun(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.starts_with(
                "error: strategy.stages[0].groups[1].memberSelector.byLabel: member \"m1\" matches both group \"a\""
            ),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: printed once: {err}");
        assert!(!stdout(&o).contains("ActionRejected"), "{args:?}");
    }
}

#[test]
fn a_strategy_error_in_a_scenario_is_printed_once_with_its_path_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = TWO_GROUPS.replace(
        "{name: b, memberSelector: {byLabel: 'env in (prod)'}}",
        "{name: b, maxConcurrency: '120%'}",
    );
    let f = write(dir.path(), "bad.yaml", &text);
    let o = waverun(&["validate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: strategy.stages[0].groups[1].maxConcurrency: \"120%\" is above 100%\n"
    );
}

#[test]
fn wrapped_and_azure_strategy_files_get_paths_as_they_are_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let stages = "stages: [{name: s, groups: [{name: a, maxConcurrency: '0'}]}]";
    for (name, text, path) in [
        ("bare.yaml", stages.to_string(), "stages[0].groups[0].maxConcurrency"),
        (
            "wrapped.yaml",
            format!("strategy: {{{stages}}}"),
            "strategy.stages[0].groups[0].maxConcurrency",
        ),
        (
            "azure.yaml",
            format!("id: x\ntype: Microsoft.ContainerService/fleets/updateStrategies\nproperties:\n  strategy: {{{stages}}}\n"),
            "properties.strategy.stages[0].groups[0].maxConcurrency",
        ),
    ] {
        let f = write(dir.path(), name, &text);
        let o = waverun(&["validate", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(stderr(&o).starts_with(&format!("error: {path}: ")), "{name}: {}", stderr(&o));
    }
    let f = write(dir.path(), "null.yaml", "strategy: null\n");
    let o = waverun(&["validate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: strategy: is null"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_bad_timestamp_says_the_rule_not_premature_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "t.yaml",
        &TWO_GROUPS.replace(
            "start: '2026-12-07T00:00:00Z'",
            "start: 2026-12-07 00:00:00Z",
        ),
    );
    let o = waverun(&["simulate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.starts_with("error: start: \"2026-12-07 00:00:00Z\" is not an RFC 3339 timestamp: the date and the time must be separated by 'T', not a space"), "{err}");
    assert!(!err.contains("premature"), "{err}");
}

#[test]
fn non_regular_files_and_files_over_64_mib_are_refused_before_reading() {
    let o = waverun(&["validate", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/dev/zero: not a regular file"),
        "{}",
        stderr(&o)
    );

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.yaml");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success());
    if made.unwrap_or(false) {
        // Nobody writes to the FIFO: reading it would block forever, so this returning at all
        // shows it was refused before reading.
        let o = waverun(&["simulate", fifo.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    }

    let big = dir.path().join("big.yaml");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(64 * 1024 * 1024 + 1).unwrap(); // sparse: no disk used
    let o = waverun(&["validate", big.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("documents are at most 64 MiB"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    for args in [
        vec!["simulate", "EXAMPLE"],
        vec!["simulate", "-o", "json", "EXAMPLE"],
        vec!["plan", "EXAMPLE"],
    ] {
        let ex = example();
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "EXAMPLE" { ex.as_str() } else { a })
            .collect();
        let mut child = Command::new(env!("CARGO_BIN_EXE_waverun"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one line, like `| head -1`, then hang up.
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

#[test]
fn control_plane_only_with_consistent_images_validates_and_plans_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let text = TWO_GROUPS
        .replace("    - {name: b, memberSelector: {byLabel: 'env in (prod)'}}\n", "")
        .replace(
            "{upgrade: {type: Full, kubernetesVersion: 1.31.2}}",
            "{upgrade: {type: ControlPlaneOnly, kubernetesVersion: 1.31.2}, nodeImageSelection: {type: Consistent}}",
        );
    let f = write(dir.path(), "cp.yaml", &text);
    let f = f.to_str().unwrap();
    let warning = "run.managedClusterUpdate.nodeImageSelection.type: Consistent has no effect on a ControlPlaneOnly upgrade";

    let o = waverun(&["validate", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with(&format!("warning: {warning}")), "{out}");
    assert!(out.ends_with("valid\n"), "{out}");

    let o = waverun(&["validate", "-o", "json", f]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(
        v["warnings"][0]["path"],
        "run.managedClusterUpdate.nodeImageSelection.type"
    );

    let o = waverun(&["plan", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("warning: {warning}")),
        "{}",
        stdout(&o)
    );
    let o = waverun(&["plan", "-o", "json", f]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["warnings"][0]["path"],
        "run.managedClusterUpdate.nodeImageSelection.type"
    );
    assert!(v.get("selectedNodeImageVersions").is_none(), "{v}");
}

#[test]
fn validate_json_lists_every_error_and_exits_two() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "two.yaml", TWO_GROUPS);
    let o = waverun(&["validate", "-o", "json", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(
        v["errors"][0]["path"],
        "strategy.stages[0].groups[1].memberSelector.byLabel"
    );
}
