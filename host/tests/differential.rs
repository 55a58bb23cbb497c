//! The differential test: every scenario (`tests/scenarios/**/*.yaml`, `host/examples/*.yaml`)
//! simulated with the native engine and with the plugin in wasmtime gives byte-identical
//! reports (timeline, final status tree, summary). Also the CLI: `waverun simulate --engine wasm`
//! prints what `--engine native` prints.

mod runtime_support;

use runtime_support::{plugin, plugin_wasm, scenario_files, workspace};
use waverun_core::sim::{simulate, SharedFleet};
use waverun_host::load_scenario;
use waverun_host::runtime::{core_error, plugin_simulation, PluginDriver};

#[test]
fn every_scenario_decides_the_same_natively_and_in_wasmtime() {
    let (_rt, plugin) = plugin();
    let files = scenario_files();
    assert!(files.len() >= 5, "scenarios found: {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let name = file.strip_prefix(workspace()).unwrap_or(file).display();
        let scenario = load_scenario(file).unwrap_or_else(|e| panic!("{name}: {e}"));
        let native = simulate(&scenario).map(|r| serde_json::to_string(&r).unwrap());
        let wasm = plugin_simulation(&plugin, &scenario).map(|mut sim| {
            sim.run_to_end();
            let d = sim.driver();
            assert!(d.failure().is_none(), "{name}: {:?}", d.failure());
            assert_eq!(d.recoveries(), 0, "{name}: the plugin trapped");
            serde_json::to_string(&sim.report()).unwrap()
        });
        match (native, wasm) {
            (Ok(a), Ok(b)) if a == b => {}
            (Err(a), Err(b)) if a.to_string() == b.to_string() => {}
            (Ok(a), Ok(b)) => {
                let at = a
                    .bytes()
                    .zip(b.bytes())
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()));
                let from = at.saturating_sub(200);
                failures.push(format!(
                    "{name}: reports differ at byte {at}\n  native: ...{}\n  wasm:   ...{}",
                    &a[from..(at + 200).min(a.len())],
                    &b[from..(at + 200).min(b.len())]
                ));
            }
            (a, b) => failures.push(format!(
                "{name}: native {:?} vs wasm {:?}",
                a.map(|_| "report"),
                b.map(|_| "report")
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios differ:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} scenarios identical natively and in wasmtime",
        files.len()
    );
}

#[test]
fn every_scenario_simulates_the_same_inside_the_plugin() {
    // The plugin's pure `simulate` request: the whole simulation inside the guest.
    let (_rt, plugin) = plugin();
    let files = scenario_files();
    let first = load_scenario(&files[0]).unwrap();
    let mut driver = PluginDriver::new(&plugin, SharedFleet::new(&first)).unwrap();
    for file in &files {
        let name = file.strip_prefix(workspace()).unwrap_or(file).display();
        let scenario = load_scenario(file).unwrap_or_else(|e| panic!("{name}: {e}"));
        let native = simulate(&scenario).map(|r| serde_json::to_string(&r).unwrap());
        let text = serde_json::to_string(&scenario).unwrap();
        let wasm = driver.instance().simulate_json(&text);
        match (native, wasm) {
            (Ok(a), Ok(b)) => assert!(a == b, "{name}: the reports differ"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), core_error(b).to_string(), "{name}"),
            (a, b) => panic!("{name}: native {a:?} vs plugin {b:?}"),
        }
    }
    // Typed, and a refusal that names the field.
    let scenario = load_scenario(&files[0]).unwrap();
    let report = driver.instance().simulate(&scenario).unwrap();
    assert_eq!(report, simulate(&scenario).unwrap());
    let mut bad = serde_json::to_value(&scenario).unwrap();
    bad["strategy"]["stages"][0]["maxConcurrency"] = serde_json::json!("120%");
    let e = driver
        .instance()
        .simulate_json(&bad.to_string())
        .unwrap_err();
    let e = core_error(e);
    assert_eq!(e.code.as_str(), "InvalidField", "{e}");
    assert_eq!(e.fields[0].path, "strategy.stages[0].maxConcurrency", "{e}");
    let e = driver.instance().simulate_json("{not json").unwrap_err();
    assert!(e.to_string().contains("not JSON"), "{e}");
    // Nothing reached the journal: simulate is pure.
    assert_eq!(driver.persistence().appends(), 0);
}

#[test]
fn the_cli_prints_the_same_with_engine_wasm() {
    let exe = env!("CARGO_BIN_EXE_waverun");
    let example = workspace().join("host/examples/fleet-rollout.yaml");
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(exe)
            .arg("simulate")
            .arg(&example)
            .args(args)
            .env("WAVERUN_CACHE_DIR", cache.path())
            .output()
            .expect("run waverun");
        assert!(
            out.status.success(),
            "waverun simulate {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let wasm = plugin_wasm();
    let wasm = wasm.to_str().unwrap();
    for format in ["json", "text"] {
        let native = run(&["-o", format]);
        let plugin = run(&["-o", format, "--engine", "wasm", "--plugin", wasm]);
        assert_eq!(native, plugin, "-o {format}");
        // Second run: from the module cache.
        assert_eq!(
            run(&["-o", format, "--engine", "wasm", "--plugin", wasm]),
            native
        );
    }
    // No --plugin and no $WAVERUN_PLUGIN: the plugin built into the binary.
    let embedded = std::process::Command::new(exe)
        .arg("simulate")
        .arg(&example)
        .args(["-o", "json", "--engine", "wasm"])
        .env("WAVERUN_CACHE_DIR", cache.path())
        .env_remove("WAVERUN_PLUGIN")
        .output()
        .unwrap();
    assert!(
        embedded.status.success(),
        "{}",
        String::from_utf8_lossy(&embedded.stderr)
    );
    assert_eq!(
        String::from_utf8(embedded.stdout).unwrap(),
        run(&["-o", "json"])
    );
    let out = std::process::Command::new(exe)
        .arg("simulate")
        .arg(&example)
        .args(["--engine", "wasm", "--plugin", "/nonexistent/plugin.wasm"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}
