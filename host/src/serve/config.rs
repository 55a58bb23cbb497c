//! `waverun serve`'s configuration: one YAML file (`waverun.yaml`), then `WAVERUN_*`
//! environment variables, then flags, each overriding the one before. Unknown keys are refused
//! with their path. `host/examples/waverun.yaml` is a commented example.

use crate::api::Role;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The config file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    /// `ADDR:PORT` to listen on (default `127.0.0.1:7700`).
    #[serde(default)]
    pub listen: Option<String>,
    /// Where the database lives (default `./waverun-data`).
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// The fleet's name, the `{fleet}` of every path (default `default`).
    #[serde(default)]
    pub fleet: Option<String>,
    /// Fleet time runs this many times faster than real time (default 1).
    #[serde(default)]
    pub time_scale: Option<f64>,
    /// A simulated fleet file: the clusters of the `simulated` provider.
    #[serde(default)]
    pub fleet_file: Option<PathBuf>,
    /// Bearer tokens, stored as SHA-256 hashes.
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
}

/// One bearer token.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenConfig {
    /// What the audit log calls its holder.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The hex SHA-256 of the token (`printf %s TOKEN | sha256sum`).
    pub sha256: String,
}

/// Everything `serve` runs with, resolved.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The fleet's name.
    pub fleet: String,
    /// The fleet clock's scale.
    pub time_scale: f64,
    /// The simulated fleet file.
    pub fleet_file: Option<PathBuf>,
    /// The tokens.
    pub tokens: Vec<TokenConfig>,
    /// Where precompiled engine modules are cached (default `<data dir>/modules`;
    /// `$WAVERUN_CACHE_DIR`).
    pub module_cache: Option<PathBuf>,
}

/// What the command line gave (each overrides the file and the environment).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
    /// `--fleet-name`.
    pub fleet: Option<String>,
    /// `--time-scale`.
    pub time_scale: Option<f64>,
    /// `--fleet`.
    pub fleet_file: Option<PathBuf>,
}

impl ServeConfig {
    /// The file (if any), then the environment (`WAVERUN_LISTEN`, `WAVERUN_DATA_DIR`,
    /// `WAVERUN_FLEET_NAME`, `WAVERUN_TIME_SCALE`, `WAVERUN_FLEET_FILE`), then `flags`.
    pub fn resolve(file: Option<&Path>, flags: Overrides) -> Result<ServeConfig, String> {
        let base = match file {
            Some(p) => crate::load_file::<ConfigFile>(p)?,
            None => ConfigFile::default(),
        };
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let listen = flags
            .listen
            .or_else(|| env("WAVERUN_LISTEN"))
            .or(base.listen)
            .unwrap_or_else(|| "127.0.0.1:7700".to_string());
        let listen: SocketAddr = listen.parse().map_err(|_| {
            format!("listen: {listen:?} is not ADDR:PORT (for example 127.0.0.1:7700)")
        })?;
        let data_dir = flags
            .data_dir
            .or_else(|| env("WAVERUN_DATA_DIR").map(PathBuf::from))
            .or(base.data_dir)
            .unwrap_or_else(|| PathBuf::from("waverun-data"));
        let fleet = flags
            .fleet
            .or_else(|| env("WAVERUN_FLEET_NAME"))
            .or(base.fleet)
            .unwrap_or_else(|| "default".to_string());
        let mut errors = waverun_core::error::Errors::default();
        waverun_core::validate::check_name("fleet", &fleet, &mut errors);
        errors.into_result().map_err(|e| e.to_string())?;
        let time_scale = match flags.time_scale {
            Some(s) => s,
            None => match env("WAVERUN_TIME_SCALE") {
                Some(s) => s
                    .parse()
                    .map_err(|_| format!("WAVERUN_TIME_SCALE: {s:?} is not a number"))?,
                None => base.time_scale.unwrap_or(1.0),
            },
        };
        if !(time_scale.is_finite() && time_scale > 0.0) {
            return Err(format!("timeScale: {time_scale} must be a positive number"));
        }
        let fleet_file = flags
            .fleet_file
            .or_else(|| env("WAVERUN_FLEET_FILE").map(PathBuf::from))
            .or(base.fleet_file);
        for (i, t) in base.tokens.iter().enumerate() {
            let ok = t.sha256.len() == 64 && t.sha256.chars().all(|c| c.is_ascii_hexdigit());
            if !ok {
                return Err(format!(
                    "tokens[{i}].sha256: must be 64 hex digits (printf %s TOKEN | sha256sum)"
                ));
            }
        }
        if base.tokens.is_empty() && !listen.ip().is_loopback() {
            return Err(format!(
                "listen: {listen} is not a loopback address, and no tokens are configured: \
                 add tokens, or listen on 127.0.0.1"
            ));
        }
        Ok(ServeConfig {
            listen,
            data_dir,
            fleet,
            time_scale,
            fleet_file,
            tokens: base.tokens,
            module_cache: env("WAVERUN_CACHE_DIR").map(PathBuf::from),
        })
    }
}
