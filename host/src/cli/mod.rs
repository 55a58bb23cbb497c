//! The `waverun` command line: what each command takes and where it goes. The commands that
//! work on files alone (`simulate`, `plan`, `validate`) are in `offline`; the daemon's
//! (`serve`, `demo`) in `daemon`; the client of a daemon's API — `member`, `updatestrategy`,
//! `updaterun`, `gate`, with `az fleet`'s verbs and flags — in [`resources`] and [`runs`], over
//! [`client`] (HTTP and problems), [`conn`] (the flags every client command takes), [`output`]
//! (table, JSON, YAML), [`tree`] (a run for people) and `stream` (following a run's events).
//! `src/main.rs` only calls [`main`].

pub mod client;
pub mod conn;
mod daemon;
mod offline;
pub mod output;
pub mod profiles;
pub mod resources;
pub mod runs;
mod store;
mod stream;
pub mod subscriptions;
pub mod tree;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use client::CliError;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "waverun",
    version,
    about = "Fleet-wide Kubernetes upgrade orchestration: plan, simulate and run update runs",
    after_help = "The client commands talk to a daemon (--server / WAVERUN_SERVER, default \
                  http://127.0.0.1:7700; --token / WAVERUN_TOKEN). Start one with `waverun demo`."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum EngineKind {
    Native,
    Wasm,
}

#[derive(Subcommand)]
enum Cmd {
    /// Members: the fleet's clusters, bound to their providers (as `az fleet member`).
    #[command(subcommand)]
    Member(resources::MemberCmd),
    /// Update strategies: ordered stages of parallel groups (as `az fleet updatestrategy`).
    #[command(subcommand)]
    Updatestrategy(resources::StrategyCmd),
    /// Update runs (as `az fleet updaterun`), and waverun's watch, plan, forecast and retry.
    #[command(subcommand)]
    Updaterun(runs::RunCmd),
    /// Approval and scheduled-start gates (as `az fleet gate`).
    #[command(subcommand)]
    Gate(resources::GateCmd),
    /// Auto-upgrade profiles: release channels rolled out through a strategy as new versions
    /// appear (as `az fleet autoupgradeprofile`).
    #[command(subcommand)]
    Autoupgradeprofile(profiles::ProfileCmd),
    /// Event subscriptions: the fleet's events as signed CloudEvents to webhooks (gates
    /// waiting, runs failing), delivered at least once, in order.
    #[command(subcommand)]
    Eventsubscription(subscriptions::SubscriptionCmd),
    /// Shell completions, e.g. `source <(waverun completions bash)`.
    #[command(after_help = "Examples:\n  source <(waverun completions bash)\n  \
        waverun completions zsh > \"${fpath[1]}/_waverun\"\n  \
        waverun completions fish > ~/.config/fish/completions/waverun.fish")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Run a scenario through the engine on a virtual clock and print the timeline, the final
    /// status tree and a summary.
    #[command(
        after_help = "Examples:\n  waverun simulate host/examples/fleet-rollout.yaml\n  waverun simulate --engine wasm -o json tests/scenarios/gates-and-wait.yaml"
    )]
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
    #[command(
        after_help = "Examples:\n  waverun validate stages.yaml\n  waverun validate -o json host/examples/fleet-rollout.yaml"
    )]
    Validate {
        /// Strategy or scenario file.
        file: PathBuf,
        /// Output format: `json` prints {valid, errors, warnings}.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: Format,
    },
    /// Show the plan of a scenario's run at the scenario's start: members per stage and group,
    /// unassigned members, resolved limits, gates needing a human, selected images.
    #[command(after_help = "Example:\n  waverun plan host/examples/fleet-rollout.yaml")]
    Plan {
        /// Scenario file.
        file: PathBuf,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: Format,
    },
    /// Run the daemon: the fleet's engine in real (or scaled) time, durable in the data
    /// directory, behind the HTTP API. Stops cleanly on SIGTERM or Ctrl-C.
    #[command(
        after_help = "Examples:\n  waverun serve --config host/examples/waverun.yaml\n  waverun serve --fleet host/examples/fleet-rollout.yaml --time-scale 600 --data-dir /tmp/w"
    )]
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
        /// Serve plain HTTP on a non-loopback address (without it, such an address needs
        /// `tls:`). For a TLS-terminating proxy on the same host; tokens cross in clear.
        #[arg(long)]
        insecure_http: bool,
    },
    /// The data directory's database: check it, back it up, restore a backup.
    #[command(subcommand)]
    Store(store::StoreCmd),
    /// A live rollout to watch and approve: the daemon with a simulated fleet of 40 clusters in
    /// 4 regions, a 3-stage strategy with an approval gate before production, and a run that
    /// takes a few minutes. Run it again to continue; --fresh starts over.
    #[command(after_help = "Examples:\n  waverun demo\n  waverun demo --fresh --time-scale 10000")]
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
        /// Fleet time runs N times faster than real time (default 2000: the rollout takes about
        /// three minutes). A restart with another N continues from the fleet time reached.
        #[arg(long, value_name = "N")]
        time_scale: Option<f64>,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Parses the command line, runs the command, and says how it went as the exit code: 0, or 2
/// with `error: ...` on stderr.
pub fn main() -> ExitCode {
    let args = match at_files(std::env::args_os().collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    let mut out = std::io::stdout().lock();
    match run(cli, &mut out).and_then(|()| Ok(out.flush()?)) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`waverun simulate ... | head -1`) is not an error: stop
        // quietly, as Unix tools do.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<CliError>().is_some() => {
            let c = e.downcast_ref::<CliError>().expect("checked");
            eprintln!("error: {c}");
            ExitCode::from(c.exit_code())
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The client commands, whose values take `az`'s `@file`.
const CLIENT_COMMANDS: &[&str] = &[
    "member",
    "updatestrategy",
    "updaterun",
    "gate",
    "autoupgradeprofile",
    "eventsubscription",
];

/// The arguments with `az`'s `@file` expanded, for the client commands: a value `@PATH` (or
/// `--flag=@PATH`) is the file's content (`--stages @stages.json`); a trailing newline is
/// dropped. A file that cannot be read is an error naming it.
fn at_files(args: Vec<std::ffi::OsString>) -> Result<Vec<std::ffi::OsString>, String> {
    let client = args
        .get(1)
        .and_then(|a| a.to_str())
        .is_some_and(|a| CLIENT_COMMANDS.contains(&a));
    if !client {
        return Ok(args);
    }
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|t| t.strip_suffix('\n').unwrap_or(&t).to_string())
            .map_err(|e| format!("@{path}: the file cannot be read: {e}"))
    };
    args.into_iter()
        .enumerate()
        .map(|(i, a)| {
            let Some(text) = a.to_str().filter(|_| i > 1) else {
                return Ok(a);
            };
            if let Some(path) = text.strip_prefix('@').filter(|p| !p.is_empty()) {
                return read(path).map(Into::into);
            }
            match text.split_once("=@") {
                Some((flag, path)) if flag.starts_with("--") && !path.is_empty() => {
                    read(path).map(|v| format!("{flag}={v}").into())
                }
                _ => Ok(a),
            }
        })
        .collect()
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(BrokenPipe))
            || matches!(c.downcast_ref::<CliError>(), Some(CliError::Io(io)) if io.kind() == BrokenPipe)
    })
}

fn run(cli: Cli, out: &mut impl Write) -> Result<()> {
    match cli.command {
        Cmd::Member(c) => resources::member(c, out)?,
        Cmd::Updatestrategy(c) => resources::strategy(c, out)?,
        Cmd::Updaterun(c) => runs::run(c, out)?,
        Cmd::Gate(c) => resources::gate(c, out)?,
        Cmd::Autoupgradeprofile(c) => profiles::profile(c, out)?,
        Cmd::Eventsubscription(c) => subscriptions::subscription(c, out)?,
        Cmd::Store(c) => store::store(c, out)?,
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "waverun", out);
        }
        Cmd::Demo {
            listen,
            data_dir,
            fresh,
            time_scale,
        } => daemon::demo(&listen, data_dir, fresh, time_scale, out)?,
        Cmd::Serve {
            listen,
            data_dir,
            config,
            time_scale,
            fleet_file,
            fleet_name,
            plugin,
            log_format,
            insecure_http,
        } => {
            let overrides = crate::serve::Overrides {
                listen,
                data_dir,
                fleet: fleet_name,
                time_scale,
                fleet_file,
                insecure_http,
            };
            daemon::serve(config, overrides, plugin, log_format, out)?;
        }
        Cmd::Simulate {
            file,
            output,
            engine,
            plugin,
        } => offline::simulate(&file, output, engine, plugin, out)?,
        Cmd::Validate { file, output } => offline::validate(&file, output, out)?,
        Cmd::Plan { file, output } => offline::plan(&file, output, out)?,
    }
    Ok(())
}
