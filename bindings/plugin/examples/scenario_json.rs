//! Prints a scenario file (YAML or JSON) as the JSON the Wasm hosts under `tests/js` and
//! `tests/python` read: parsed as `waverun simulate` parses it (YAML with serde-saphyr into a
//! JSON value, JSON by extension; then the scenario types), then serialised, so timestamps and
//! defaults are normalised.
//!
//! `cargo run -q -p waverun-plugin --example scenario_json -- FILE`

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: scenario_json FILE");
        return ExitCode::from(2);
    };
    match load_scenario(std::path::Path::new(&path)) {
        Ok(s) => {
            println!(
                "{}",
                serde_json::to_string(&s).expect("a scenario serialises")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `waverun_host::load_scenario` without its error paths.
fn load_scenario(path: &std::path::Path) -> Result<waverun_core::sim::Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let value: serde_json::Value = if json {
        serde_json::from_str(&text).map_err(|e| format!("not valid JSON: {e}"))?
    } else {
        serde_saphyr::from_str(&text).map_err(|e| format!("not valid YAML: {e}"))?
    };
    serde_json::from_value(value).map_err(|e| e.to_string())
}
