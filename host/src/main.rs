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
    /// Run the daemon: the fleet's engine in real (or scaled) time, durable in the data
    /// directory, behind the HTTP API. Stops cleanly on SIGTERM or Ctrl-C.
    Serve {
        /// ADDR:PORT to listen on (default 127.0.0.1:7700; $WAVERUN_LISTEN).
        #[arg(long, value_name = "ADDR:PORT")]
        listen: Option<String>,
        /// The data directory (default ./waverun-data; $WAVERUN_DATA_DIR).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// The config file (waverun.yaml; see host/examples/waverun.yaml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Fleet time runs N times faster than real time (demos; default 1; $WAVERUN_TIME_SCALE).
        #[arg(long, value_name = "N")]
        time_scale: Option<f64>,
        /// A simulated fleet file (the scenario format's members, releases and freezes).
        #[arg(long = "fleet", value_name = "FILE")]
        fleet_file: Option<PathBuf>,
        /// The fleet's name in API paths (default `default`; $WAVERUN_FLEET_NAME).
        #[arg(long, value_name = "NAME")]
        fleet_name: Option<String>,
        /// The engine plugin to run instead of the one built in.
        #[arg(long, value_name = "PATH")]
        plugin: Option<PathBuf>,
        /// Log format.
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
    },
    /// A live rollout to watch and approve: the daemon with a simulated fleet of 40 clusters in
    /// 4 regions, a 3-stage strategy with an approval gate before production, and a run that
    /// takes a few minutes. Run it again to continue; --fresh starts over.
    Demo {
        /// ADDR:PORT to listen on.
        #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7700")]
        listen: String,
        /// The demo's data directory.
        #[arg(long, value_name = "DIR", default_value = "waverun-demo")]
        data_dir: PathBuf,
        /// Delete the demo's data directory first.
        #[arg(long)]
        fresh: bool,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
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
        Cmd::Demo {
            listen,
            data_dir,
            fresh,
        } => demo(&listen, data_dir, fresh, out)?,
        Cmd::Serve {
            listen,
            data_dir,
            config,
            time_scale,
            fleet_file,
            fleet_name,
            plugin,
            log_format,
        } => {
            let overrides = waverun_host::serve::Overrides {
                listen,
                data_dir,
                fleet: fleet_name,
                time_scale,
                fleet_file,
            };
            serve(config, overrides, plugin, log_format, out)?;
        }
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

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WAVERUN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

fn serve(
    config: Option<PathBuf>,
    overrides: waverun_host::serve::Overrides,
    plugin: Option<PathBuf>,
    log_format: LogFormat,
    out: &mut impl Write,
) -> Result<()> {
    use waverun_host::serve::{ModuleSource, ServeConfig, Server};
    init_logs(log_format);
    let config = ServeConfig::resolve(config.as_deref(), overrides).map_err(anyhow::Error::msg)?;
    let source = match plugin.or_else(waverun_host::runtime::plugin_override) {
        Some(p) => ModuleSource::File(p),
        None => ModuleSource::Embedded,
    };
    let server = Server::start(&config, &source).map_err(anyhow::Error::msg)?;
    writeln!(
        out,
        "waverun: serving fleet {:?} on http://{} (data dir {}, engine sha256:{})",
        server.fleet(),
        server.addr(),
        server.data_dir().display(),
        &server.module_hash()[..12.min(server.module_hash().len())]
    )?;
    if config.tokens.is_empty() {
        writeln!(
            out,
            "waverun: no tokens configured: every request acts as admin, so it listens on loopback only"
        )?;
    }
    out.flush()?;
    wait_for_signal()?;
    writeln!(
        out,
        "waverun: stopping (requests in flight finish; the store is closed cleanly)"
    )?;
    server.shutdown().map_err(anyhow::Error::msg)?;
    writeln!(out, "waverun: stopped")?;
    Ok(())
}

/// A token for the demo: `$WAVERUN_TOKEN`, else 128 random bits in hex.
fn demo_token() -> String {
    if let Some(t) = std::env::var("WAVERUN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        return t;
    }
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

fn demo(listen: &str, data_dir: PathBuf, fresh: bool, out: &mut impl Write) -> Result<()> {
    use waverun_host::api::{token_hash, Role};
    use waverun_host::serve::{demo, ModuleSource, ServeConfig, Server, TokenConfig, DB_FILE};
    init_logs(LogFormat::Text);
    if fresh && data_dir.exists() {
        let ours = data_dir.join(DB_FILE).exists()
            || std::fs::read_dir(&data_dir)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if !ours {
            bail!(
                "--fresh: {} is not a waverun data directory (no {DB_FILE}); not deleting it",
                data_dir.display()
            );
        }
        std::fs::remove_dir_all(&data_dir)?;
    }
    std::fs::create_dir_all(&data_dir)?;
    let fleet_path = data_dir.join("demo-fleet.json");
    if !fleet_path.exists() {
        let now = waverun_host::runtime::host::Clock::now_ms(&waverun_host::runtime::SystemClock);
        let today = chrono::DateTime::from_timestamp_millis(now - now.rem_euclid(86_400_000))
            .unwrap_or_default();
        let file = serde_json::to_string_pretty(&demo::fleet_file(today))?;
        std::fs::write(&fleet_path, file)?;
    }
    let token = demo_token();
    let config = ServeConfig {
        listen: listen
            .parse()
            .map_err(|_| anyhow::anyhow!("--listen: {listen:?} is not ADDR:PORT"))?,
        data_dir: data_dir.clone(),
        fleet: "demo".to_string(),
        time_scale: demo::TIME_SCALE,
        fleet_file: Some(fleet_path),
        tokens: vec![TokenConfig {
            name: "demo".to_string(),
            role: Role::Admin,
            sha256: token_hash(&token),
        }],
        module_cache: std::env::var_os("WAVERUN_CACHE_DIR").map(PathBuf::from),
        ..ServeConfig::defaults()
    };
    let source = match waverun_host::runtime::plugin_override() {
        Some(p) => ModuleSource::File(p),
        None => ModuleSource::Embedded,
    };
    let server = Server::start(&config, &source).map_err(anyhow::Error::msg)?;
    let api = format!("http://{}/api/v1/fleets/demo", server.addr());
    let started = demo_setup(&api, &token)?;
    let t = "$WAVERUN_TOKEN";
    writeln!(
        out,
        "waverun demo: fleet \"demo\" (40 simulated clusters in 4 regions) on http://{}",
        server.addr()
    )?;
    writeln!(out, "  data dir   {}", data_dir.display())?;
    writeln!(
        out,
        "  run        {} ({}): Kubernetes {} → {}, fleet time at {}× real time",
        demo::RUN,
        if started { "started now" } else { "continuing" },
        demo::FROM_VERSION,
        demo::TO_VERSION,
        demo::TIME_SCALE
    )?;
    writeln!(out)?;
    writeln!(out, "  export WAVERUN_TOKEN={token}")?;
    writeln!(out)?;
    writeln!(out, "Watch the run (its state, and why anything waits):")?;
    writeln!(
        out,
        "  curl -s -H \"Authorization: Bearer {t}\" {api}/updateRuns/{} | jq '.properties.status | {{state: .status.state, waitingOn, stages: [.stages[] | {{name, state: .status.state, waitingOn}}]}}'",
        demo::RUN
    )?;
    writeln!(out, "The gates waiting for someone:")?;
    writeln!(
        out,
        "  curl -s -H \"Authorization: Bearer {t}\" '{api}/gates?$filter=state%20eq%20Pending' | jq '.value[] | {{name, gate: .properties.displayName}}'"
    )?;
    writeln!(out, "Approve one (GATE is a name from the list above):")?;
    writeln!(
        out,
        "  curl -s -X POST -H \"Authorization: Bearer {t}\" {api}/gates/GATE/approve | jq .properties.state"
    )?;
    writeln!(out, "The events so far, and the audit log:")?;
    writeln!(out, "  curl -s -H \"Authorization: Bearer {t}\" {api}/events | jq '.value[] | [.seq, .at, .kind, .member // .stage] | @tsv' -r")?;
    writeln!(
        out,
        "  curl -s -H \"Authorization: Bearer {t}\" {api}/audit | jq .value"
    )?;
    writeln!(out)?;
    writeln!(out, "Ctrl-C stops the daemon; `waverun demo` again continues where it was, `--fresh` starts over.")?;
    out.flush()?;
    wait_for_signal()?;
    writeln!(out, "waverun demo: stopping")?;
    server.shutdown().map_err(anyhow::Error::msg)?;
    Ok(())
}

/// Creates the demo's strategy and run through the API unless they exist, and starts the run
/// if it has not started. Returns whether it started it.
fn demo_setup(api: &str, token: &str) -> Result<bool> {
    use waverun_host::serve::demo;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build()
        .into();
    let auth = format!("Bearer {token}");
    let put = |path: &str, body: serde_json::Value| -> Result<u16> {
        let r = agent
            .put(format!("{api}{path}"))
            .header("authorization", &auth)
            .header("if-none-match", "*")
            .send_json(&body)?;
        let status = r.status().as_u16();
        if status != 201 && status != 412 {
            bail!(
                "PUT {path}: HTTP {status}: {}",
                r.into_body().read_to_string()?
            );
        }
        Ok(status)
    };
    put(
        &format!("/updateStrategies/{}", demo::STRATEGY),
        demo::strategy(),
    )?;
    put(&format!("/updateRuns/{}", demo::RUN), demo::run("demo"))?;
    let mut r = agent
        .get(format!("{api}/updateRuns/{}", demo::RUN))
        .header("authorization", &auth)
        .call()?;
    let run: serde_json::Value = r.body_mut().read_json()?;
    if run["properties"]["status"]["status"]["state"] != "NotStarted" {
        return Ok(false);
    }
    let r = agent
        .post(format!("{api}/updateRuns/{}/start", demo::RUN))
        .header("authorization", &auth)
        .send_empty()?;
    if r.status().as_u16() != 200 {
        bail!(
            "starting the run: HTTP {}: {}",
            r.status(),
            r.into_body().read_to_string()?
        );
    }
    Ok(true)
}

/// Blocks until SIGTERM or SIGINT.
fn wait_for_signal() -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r,
                _ = term.recv() => Ok(()),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await
        }
    })?;
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
