//! The daemon's commands: `serve` (the daemon with a config file) and `demo` (the daemon with a
//! simulated fleet, a strategy and a started run, set up through the API as a client would);
//! both print where they listen and stop cleanly on SIGTERM or Ctrl-C.

use super::LogFormat;
use anyhow::{bail, Result};
use std::io::Write;
use std::path::PathBuf;

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

/// The demo's logs: everything (`$WAVERUN_LOG`, default `info`: one line per request) to
/// `file`, and only warnings and errors to the terminal, so that the banner a newcomer reads is
/// not buried under request lines.
fn init_demo_logs(file: &std::path::Path) -> Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_env("WAVERUN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .map_err(|e| anyhow::anyhow!("the demo's log {}: {e}", file.display()))?;
    let to_file = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(log))
        .with_filter(filter);
    let to_terminal = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
    let _ = tracing_subscriber::registry()
        .with(to_file)
        .with(to_terminal)
        .try_init();
    Ok(())
}

pub(super) fn serve(
    config: Option<PathBuf>,
    overrides: crate::serve::Overrides,
    plugin: Option<PathBuf>,
    log_format: LogFormat,
    out: &mut impl Write,
) -> Result<()> {
    use crate::serve::{ModuleSource, ServeConfig, Server};
    init_logs(log_format);
    let config = ServeConfig::resolve(config.as_deref(), overrides).map_err(anyhow::Error::msg)?;
    let source = match plugin.or_else(crate::runtime::plugin_override) {
        Some(p) => ModuleSource::File(p),
        None => ModuleSource::Embedded,
    };
    let stop = StopSignals::install()?;
    let server = Server::start(&config, &source).map_err(anyhow::Error::msg)?;
    writeln!(
        out,
        "waverun: serving fleet {:?} on {} (data dir {}, engine sha256:{})",
        server.fleet(),
        server.url(),
        server.data_dir().display(),
        &server.module_hash()[..12.min(server.module_hash().len())]
    )?;
    if config.tokens.is_empty() {
        writeln!(
            out,
            "waverun: no tokens configured: every request acts as admin, so it listens on loopback only"
        )?;
    }
    writeln!(
        out,
        "waverun: the portal is at {}/ (sign in with a token; {}/#token=TOKEN signs in directly)",
        server.url(),
        server.url()
    )?;
    out.flush()?;
    stop.wait()?;
    writeln!(
        out,
        "waverun: stopping (requests in flight finish; the store is closed cleanly)"
    )?;
    server.shutdown().map_err(anyhow::Error::msg)?;
    writeln!(out, "waverun: stopped")?;
    Ok(())
}

/// The demo's log file, in its data directory.
const DEMO_LOG: &str = "waverun.log";

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

pub(super) fn demo(
    listen: &str,
    data_dir: PathBuf,
    fresh: bool,
    time_scale: Option<f64>,
    out: &mut impl Write,
) -> Result<()> {
    use crate::api::{token_hash, Role};
    use crate::serve::{demo, ModuleSource, ServeConfig, Server, TokenConfig, DB_FILE};
    if let Some(n) = time_scale.filter(|n| !(n.is_finite() && *n > 0.0)) {
        bail!("--time-scale: {n} must be a positive number");
    }
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
        // Not from under a demo that is running there.
        let lock = crate::serve::DataDirLock::acquire(&data_dir, "waverun demo --fresh")
            .map_err(anyhow::Error::msg)?;
        std::fs::remove_dir_all(&data_dir)?;
        drop(lock);
    }
    std::fs::create_dir_all(&data_dir)?;
    let log_path = data_dir.join(DEMO_LOG);
    init_demo_logs(&log_path)?;
    let fleet_path = data_dir.join("demo-fleet.json");
    if !fleet_path.exists() {
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
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
        time_scale: time_scale.unwrap_or(demo::TIME_SCALE),
        fleet_file: Some(fleet_path),
        tokens: vec![TokenConfig {
            name: "demo".to_string(),
            role: Role::Admin,
            sha256: token_hash(&token),
        }],
        module_cache: std::env::var_os("WAVERUN_CACHE_DIR").map(PathBuf::from),
        ..ServeConfig::defaults()
    };
    let source = match crate::runtime::plugin_override() {
        Some(p) => ModuleSource::File(p),
        None => ModuleSource::Embedded,
    };
    let stop = StopSignals::install()?;
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
        "  log        {} (one line per request; warnings also here)",
        log_path.display()
    )?;
    writeln!(
        out,
        "  run        {} ({}): Kubernetes {} → {}, fleet time at {}× real time",
        demo::RUN,
        if started { "started now" } else { "continuing" },
        demo::FROM_VERSION,
        demo::TO_VERSION,
        config.time_scale
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "Follow and approve the rollout in the portal (the link signs you in; the token stays in the tab):"
    )?;
    writeln!(
        out,
        "  http://{}/runs/{}#token={token}",
        server.addr(),
        demo::RUN
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "In another terminal, the CLI (this same binary) drives it; set it up with:"
    )?;
    for line in cli_setup(&server.addr().to_string(), &token) {
        writeln!(out, "  {line}")?;
    }
    writeln!(out)?;
    let run = demo::RUN;
    writeln!(
        out,
        "Watch the run live (its tree, what waits and until when, the gate that needs you):"
    )?;
    writeln!(out, "  waverun updaterun watch -n {run}")?;
    writeln!(out, "The run's gates waiting for someone:")?;
    writeln!(
        out,
        "  waverun gate list --state-filter Pending --run {run}"
    )?;
    writeln!(out, "Approve one (GATE is a name from the list above):")?;
    writeln!(out, "  waverun gate approve --gate-name GATE")?;
    writeln!(
        out,
        "Wait for the end, as a pipeline would (exit 0 when Completed):"
    )?;
    writeln!(
        out,
        "  waverun updaterun wait -n {run} --custom Completed --timeout 30m"
    )?;
    writeln!(
        out,
        "The auto-upgrade profile {} follows 1.33 patches: {} is released on fleet day {}, and it rolls it out through the same strategy:",
        demo::PROFILE,
        demo::PATCH_VERSION,
        demo::PATCH_DAY + 1
    )?;
    writeln!(
        out,
        "  waverun autoupgradeprofile show -n {}",
        demo::PROFILE
    )?;
    writeln!(out, "  waverun updaterun list")?;
    writeln!(out, "The same API with curl: the run, and the audit log:")?;
    writeln!(
        out,
        "  curl -s -H \"Authorization: Bearer {t}\" {api}/updateRuns/{run} | jq '.properties.status.status'"
    )?;
    writeln!(
        out,
        "  curl -s -H \"Authorization: Bearer {t}\" {api}/audit | jq .value"
    )?;
    writeln!(out)?;
    writeln!(out, "Ctrl-C stops the daemon; `waverun demo` again continues where it was, `--fresh` starts over.")?;
    out.flush()?;
    stop.wait()?;
    writeln!(out, "waverun demo: stopping")?;
    server.shutdown().map_err(anyhow::Error::msg)?;
    Ok(())
}

/// The shell lines that point the CLI at this demo: the token, the server when it is not the
/// CLI's default, and `waverun` itself when this binary is not on `PATH` (as after `cargo run`).
fn cli_setup(addr: &str, token: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut exports = format!("export WAVERUN_TOKEN={token}");
    let server = format!("http://{addr}");
    if server != super::client::DEFAULT_SERVER {
        exports.push_str(&format!(" WAVERUN_SERVER={server}"));
    }
    lines.push(exports);
    let exe = std::env::current_exe().ok();
    let on_path = exe.as_ref().and_then(|e| e.parent()).is_some_and(|dir| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d == dir))
    });
    if let (false, Some(exe)) = (on_path, exe) {
        lines.push(format!("alias waverun='{}'", exe.display()));
    }
    lines
}

/// Creates the demo's strategy and run through the API unless they exist, and starts the run
/// if it has not started. Returns whether it started it.
fn demo_setup(api: &str, token: &str) -> Result<bool> {
    use crate::serve::demo;
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
    put(
        &format!("/autoUpgradeProfiles/{}", demo::PROFILE),
        demo::profile("demo"),
    )?;
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

/// SIGTERM and SIGINT, caught from the moment it is made (so that one arriving while the daemon
/// starts stops it cleanly once it has started, rather than killing it half-way).
struct StopSignals {
    rt: tokio::runtime::Runtime,
    #[cfg(unix)]
    signals: (tokio::signal::unix::Signal, tokio::signal::unix::Signal),
}

impl StopSignals {
    fn install() -> Result<StopSignals> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signals = rt.block_on(async {
                Ok::<_, std::io::Error>((
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::interrupt())?,
                ))
            })?;
            Ok(StopSignals { rt, signals })
        }
        #[cfg(not(unix))]
        Ok(StopSignals { rt })
    }

    /// Blocks until one arrives (or has arrived).
    fn wait(mut self) -> Result<()> {
        #[cfg(unix)]
        {
            let (term, int) = &mut self.signals;
            self.rt.block_on(async {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
            });
            Ok(())
        }
        #[cfg(not(unix))]
        {
            self.rt.block_on(tokio::signal::ctrl_c())?;
            Ok(())
        }
    }
}
