//! The commands that work on files alone: `simulate` (a scenario through the engine, natively
//! or as the plugin in wasmtime), `plan` and `validate`. No daemon, no network.

use super::{EngineKind, Format};
use crate::{load_document, load_scenario};
use anyhow::{bail, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use waverun_core::plan_text;
use waverun_core::sim::render_text;

/// `waverun simulate`: the scenario's report, as text or JSON.
pub(super) fn simulate(
    file: &Path,
    output: Format,
    engine: EngineKind,
    plugin: Option<PathBuf>,
    out: &mut impl Write,
) -> Result<()> {
    let scenario = load_scenario(file).map_err(anyhow::Error::msg)?;
    if plugin.is_some() && engine == EngineKind::Native {
        bail!("--plugin needs --engine wasm");
    }
    // JSON is streamed through a large buffer: never the whole report in memory (120 MB of
    // JSON for a 100,000-member rollout), and never a write per line (stdout is
    // line-buffered).
    let mut buffered = std::io::BufWriter::with_capacity(1 << 20, &mut *out);
    match (engine, output) {
        (EngineKind::Native, Format::Json) => {
            // The scenario is not kept (its members move into the engine), and the timeline
            // is written as the simulation runs instead of being held to the end.
            let mut sim = waverun_core::sim::Simulation::from_scenario(scenario)?;
            serde_json::to_writer_pretty(&mut buffered, &sim.stream_report())?;
            // The process ends once the report is printed: the engine is left to the OS
            // rather than freed record by record (a 100,000-member engine took a tenth of
            // the command's time to drop).
            std::mem::forget(sim);
        }
        (EngineKind::Native, Format::Text) => {
            let report = waverun_core::sim::simulate_owned(scenario)?;
            buffered.write_all(render_text(&report).as_bytes())?;
        }
        (EngineKind::Wasm, Format::Json) => {
            serde_json::to_writer_pretty(&mut buffered, &simulate_wasm(&scenario, plugin)?)?;
        }
        (EngineKind::Wasm, Format::Text) => {
            let report = simulate_wasm(&scenario, plugin)?;
            buffered.write_all(render_text(&report).as_bytes())?;
        }
    }
    if output == Format::Json {
        writeln!(buffered)?;
    }
    buffered.flush()?;
    Ok(())
}

/// `waverun validate`: `valid` (after any warnings) or every error with its field path; with
/// `-o json`, `{valid, errors, warnings}` and exit code 2 when invalid.
pub(super) fn validate(file: &Path, output: Format, out: &mut impl Write) -> Result<()> {
    let (result, warnings) = load_document(file).map_err(anyhow::Error::msg)?.validate();
    match output {
        Format::Json => {
            let errors = match &result {
                Ok(()) => Vec::new(),
                Err(e) if e.fields.is_empty() => {
                    vec![waverun_core::FieldError::new("", e.message.clone())]
                }
                Err(e) => e.fields.clone(),
            };
            let doc = serde_json::json!({
                "valid": result.is_ok(),
                "errors": errors,
                "warnings": warnings,
            });
            out.write_all(&serde_json::to_vec_pretty(&doc)?)?;
            writeln!(out)?;
            if result.is_err() {
                out.flush()?;
                std::process::exit(2);
            }
        }
        Format::Text => {
            for w in &warnings {
                writeln!(out, "warning: {w}")?;
            }
            result?;
            writeln!(out, "valid")?;
        }
    }
    Ok(())
}

/// `waverun plan`: the plan of the scenario's run at the scenario's start and, for each
/// auto-upgrade profile, what it would generate now (JSON: the run's plan with a `profiles`
/// list beside its fields).
pub(super) fn plan(file: &Path, output: Format, out: &mut impl Write) -> Result<()> {
    let scenario = load_scenario(file).map_err(anyhow::Error::msg)?;
    let doc = waverun_core::sim::plan_scenario(&scenario)?;
    match output {
        Format::Json => {
            out.write_all(&serde_json::to_vec_pretty(&doc)?)?;
            writeln!(out)?;
        }
        Format::Text => {
            if let Some(p) = &doc.plan {
                out.write_all(plan_text::render_text(p).as_bytes())?;
            }
            for p in &doc.profiles {
                out.write_all(plan_text::render_profile_plan(p).as_bytes())?;
            }
        }
    }
    Ok(())
}

/// The scenario through the plugin in wasmtime: `plugin`, else `$WAVERUN_PLUGIN`, else the one
/// built into this binary.
fn simulate_wasm(
    scenario: &waverun_core::sim::Scenario,
    plugin: Option<PathBuf>,
) -> Result<waverun_core::sim::SimulationReport> {
    use crate::runtime::{self, PluginRuntime, RuntimeConfig};
    let rt = PluginRuntime::new(RuntimeConfig {
        cache_dir: runtime::default_cache_dir(),
        ..RuntimeConfig::default()
    })?;
    let plugin = match plugin.or_else(runtime::plugin_override) {
        Some(path) if !path.is_file() => bail!("plugin {} not found", path.display()),
        Some(path) => rt.load_file(&path)?,
        None => rt.load(runtime::EMBEDDED_PLUGIN)?,
    };
    Ok(runtime::simulate_plugin(&plugin, scenario)?)
}
