//! `waverun`: plan, validate and simulate fleet upgrade runs.

use anyhow::{bail, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use waverun_core::plan_text;
use waverun_core::sim::{render_text, simulate};
use waverun_core::{Engine, Input};
use waverun_host::{load_document, load_scenario, Document};

#[derive(Parser)]
#[command(
    name = "waverun",
    version,
    about = "Fleet-wide Kubernetes upgrade orchestration: plan, validate and simulate update runs"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum EngineKind {
    Native,
    Wasm,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario through the engine on a virtual clock and print the timeline, the final
    /// status tree and a summary.
    Simulate {
        /// Scenario file (YAML, or JSON by extension).
        file: PathBuf,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: Format,
        /// Which engine decides: `native` (built in) or `wasm` (the WebAssembly plugin in
        /// wasmtime, the same decisions through the plugin ABI).
        #[arg(long, value_enum, default_value = "native")]
        engine: EngineKind,
        /// The plugin module for `--engine wasm` (default: $WAVERUN_PLUGIN, else the plugin
        /// built into this binary). Precompiled modules are
        /// cached in $WAVERUN_CACHE_DIR or ~/.cache/waverun/modules.
        #[arg(long, value_name = "PATH")]
        plugin: Option<PathBuf>,
    },
    /// Check a strategy or a scenario: prints "valid" (after any warnings) or every error with
    /// its field path.
    Validate {
        /// Strategy or scenario file.
        file: PathBuf,
        /// Output format: `json` prints {valid, errors, warnings}.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: Format,
    },
    /// Show the plan of a scenario's run at the scenario's start: members per stage and group,
    /// unassigned members, resolved limits, gates needing a human, selected images.
    Plan {
        /// Scenario file.
        file: PathBuf,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: Format,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    match run(cli, &mut out).and_then(|()| Ok(out.flush()?)) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`waverun simulate ... | head -1`) is not an error: stop
        // quietly, as Unix tools do.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(BrokenPipe))
    })
}

fn run(cli: Cli, out: &mut impl Write) -> Result<()> {
    match cli.command {
        Cmd::Simulate {
            file,
            output,
            engine,
            plugin,
        } => {
            let scenario = load_scenario(&file).map_err(anyhow::Error::msg)?;
            let report = match engine {
                EngineKind::Native if plugin.is_some() => bail!("--plugin needs --engine wasm"),
                EngineKind::Native => simulate(&scenario)?,
                EngineKind::Wasm => simulate_wasm(&scenario, plugin)?,
            };
            match output {
                Format::Json => {
                    serde_json::to_writer_pretty(&mut *out, &report)?;
                    writeln!(out)?;
                }
                Format::Text => out.write_all(render_text(&report).as_bytes())?,
            }
        }
        Cmd::Validate { file, output } => {
            let (result, warnings) = match load_document(&file).map_err(anyhow::Error::msg)? {
                Document::Scenario(s) => {
                    let warnings = waverun_core::validate::run_spec_warnings("run", &s.run_spec());
                    (s.validate(), warnings)
                }
                Document::Strategy { strategy, path } => {
                    let mut e = waverun_core::error::Errors::default();
                    waverun_core::validate::validate_strategy(path, &strategy, &mut e);
                    (e.into_result(), Vec::new())
                }
            };
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
                    serde_json::to_writer_pretty(&mut *out, &doc)?;
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
        }
        Cmd::Plan { file, output } => {
            let scenario = load_scenario(&file).map_err(anyhow::Error::msg)?;
            scenario.validate()?;
            let mut engine = Engine::new(scenario.start);
            for (path, cmd) in scenario.setup_commands() {
                if let Err(e) = engine.handle_input(scenario.start, Input::Command(cmd)) {
                    bail!("{path}: {e}");
                }
            }
            let mut plan = engine.plan(&scenario.run.name)?;
            // The engine names fields of the run spec; in a scenario file they sit under `run`.
            for w in &mut plan.warnings {
                w.path = waverun_core::validate::join("run", &w.path);
            }
            match output {
                Format::Json => {
                    serde_json::to_writer_pretty(&mut *out, &plan)?;
                    writeln!(out)?;
                }
                Format::Text => out.write_all(plan_text::render_text(&plan).as_bytes())?,
            }
        }
    }
    Ok(())
}

fn simulate_wasm(
    scenario: &waverun_core::sim::Scenario,
    plugin: Option<PathBuf>,
) -> Result<waverun_core::sim::SimulationReport> {
    use waverun_host::runtime::{self, PluginRuntime, RuntimeConfig};
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
