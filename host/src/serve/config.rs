//! `waverun serve`'s configuration: one YAML file (`waverun.yaml`), then `WAVERUN_*`
//! environment variables, then flags, each overriding the one before. Unknown keys are refused
//! with their path. `host/examples/waverun.yaml` is a commented example.
//!
//! Relative paths in the file (`dataDir`, `fleetFile`, a provider's `command` when it has a `/`,
//! `secretEnv.*.fromFile`, and under `healthChecks:` `prometheus.caFile`,
//! `secrets.*.headers.*.fromFile` and `exec.stateDir`) are relative to the file's directory, so a config works from any
//! working directory; paths from the environment and flags are relative to the working
//! directory, as a shell user expects.

use super::listener::Limits;
use super::tls::TlsFiles;
use crate::api::Role;
use crate::daemon::MemberBinding;
use crate::health::HealthConfig;
use crate::providers::aks::auth::AzureAuthConfig;
use crate::providers::{ExecTimeouts, SecretSource};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// Cluster providers besides the built-in `simulated` one, by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Members bound to their clusters: registered at start, as their provider describes them.
    #[serde(default)]
    pub members: Vec<MemberBinding>,
    /// How often every member is described again, in seconds (default 300).
    #[serde(default)]
    pub observe_interval_seconds: Option<u64>,
    /// Where clients reach the daemon (`https://waverun.example.com`): the origin of the
    /// absolute links it hands out (`nextLink`). Without it, links are relative.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Serve HTTPS with this certificate and key.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Connection and stream limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// What health checks may reach: Prometheus, the secrets whose headers checks send, the
    /// programs exec checks run ([`HealthConfig`]).
    #[serde(default)]
    pub health_checks: Option<HealthConfig>,
    /// Events out: where deliveries may go, how they are made, the secrets subscriptions may
    /// sign with by name ([`WebhooksFile`]).
    #[serde(default)]
    pub webhooks: Option<WebhooksFile>,
    /// Where the fleet's state lives: SQLite in the data directory (the default), or
    /// PostgreSQL shared by several replicas ([`StoreFile`]).
    #[serde(default)]
    pub store: Option<StoreFile>,
}

/// `store:` — `type: sqlite` (the default: `waverun.db` in the data directory) or
/// `type: postgres` with the database's address.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoreFile {
    /// `sqlite` or `postgres`.
    #[serde(rename = "type")]
    pub kind: String,
    /// PostgreSQL's address: a URL (`postgresql://waverun@db.example:5432/waverun`) or a
    /// libpq connection string, without the password.
    #[serde(default)]
    pub url: Option<String>,
    /// The password, from the environment or a file (never in this file, never logged).
    #[serde(default)]
    pub password_from: Option<SecretSource>,
    /// This replica's name in the leader lease (default: the host's name and the port it
    /// listens on).
    #[serde(default)]
    pub holder: Option<String>,
    /// How long a leader lease lasts without a renewal, in seconds (default 15, at least 1).
    /// A leader stops acting two thirds of it after its last renewal; a follower takes over
    /// once it has expired.
    #[serde(default)]
    pub lease_seconds: Option<f64>,
    /// The certificate authorities (PEM) PostgreSQL's certificate is checked against: TLS is
    /// then used whenever the server offers it, and with `sslmode=require` in the URL always
    /// (libpq's `sslrootcert`; without it, `require` checks against the system's bundle).
    #[serde(default)]
    pub ca_file: Option<std::path::PathBuf>,
}

/// Where the fleet's state lives, resolved.
#[derive(Clone, Debug, Default)]
pub enum StoreChoice {
    /// `waverun.db` in the data directory: one daemon.
    #[default]
    Sqlite,
    /// PostgreSQL, shared by several replicas.
    Postgres(PgChoice),
}

/// `store: {type: postgres}`, resolved.
#[derive(Clone)]
pub struct PgChoice {
    /// The connection string, with the password in it (never printed: see `Debug`).
    pub url: String,
    /// This replica's name in the lease (`None`: the host's name and the port it listens on).
    pub holder: Option<String>,
    /// The lease's TTL.
    pub lease: Duration,
}

impl std::fmt::Debug for PgChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgChoice")
            .field("url", &"<redacted>")
            .field("holder", &self.holder)
            .field("lease", &self.lease)
            .finish()
    }
}

/// The default lease TTL.
pub const LEASE_SECONDS: f64 = 15.0;

impl StoreFile {
    fn resolve(&self) -> Result<StoreChoice, String> {
        match self.kind.as_str() {
            "sqlite" => {
                if self.url.is_some()
                    || self.password_from.is_some()
                    || self.holder.is_some()
                    || self.lease_seconds.is_some()
                    || self.ca_file.is_some()
                {
                    return Err("store: url, passwordFrom, holder, leaseSeconds and caFile are settings of type: postgres".to_string());
                }
                Ok(StoreChoice::Sqlite)
            }
            "postgres" => {
                let url = self
                    .url
                    .clone()
                    .filter(|u| !u.trim().is_empty())
                    .ok_or_else(|| {
                        "store.url: missing: type: postgres needs the database's address, e.g. \
                     postgresql://waverun@db.example:5432/waverun"
                            .to_string()
                    })?;
                let target =
                    crate::store::pg_tls::parse(&url).map_err(|e| format!("store.url: {e}"))?;
                let parsed: postgres::Config = target.rest.parse().map_err(|e| {
                    format!("store.url: not a PostgreSQL URL or connection string ({e})")
                })?;
                let url = match &self.ca_file {
                    None => url,
                    Some(_) if target.root_cert.is_some() => {
                        return Err("store.caFile: the url names sslrootcert already; give \
                                    the authorities in one place"
                            .to_string())
                    }
                    Some(f) => {
                        std::fs::metadata(f)
                            .map_err(|e| format!("store.caFile: {}: {e}", f.display()))?;
                        with_param(&url, "sslrootcert", &f.to_string_lossy())
                    }
                };
                if parsed.get_password().is_some() {
                    return Err("store.url: holds a password; put it in store.passwordFrom \
                                ({fromEnv: NAME} or {fromFile: PATH}) so that it never sits in \
                                the config file"
                        .to_string());
                }
                let url = match &self.password_from {
                    None => url,
                    Some(source) => {
                        let password = source
                            .resolve()
                            .map_err(|e| format!("store.passwordFrom: {e}"))?;
                        with_password(&url, &password)
                    }
                };
                let lease = self.lease_seconds.unwrap_or(LEASE_SECONDS);
                if !(lease.is_finite() && (1.0..=600.0).contains(&lease)) {
                    return Err(format!(
                        "store.leaseSeconds: {lease} must be a number of seconds in [1, 600]"
                    ));
                }
                let holder = match &self.holder {
                    Some(h) => {
                        if h.is_empty() || h.len() > 200 || h.chars().any(char::is_control) {
                            return Err(format!(
                                "store.holder: {h:?} must be 1 to 200 printable characters"
                            ));
                        }
                        Some(h.clone())
                    }
                    None => None,
                };
                Ok(StoreChoice::Postgres(PgChoice {
                    url,
                    holder,
                    lease: Duration::from_secs_f64(lease),
                }))
            }
            other => Err(format!(
                "store.type: {other:?} is not a store: sqlite (the default) or postgres"
            )),
        }
    }
}

/// `url` with `password` added: as a query parameter of a URL, as a `password=` pair of a
/// connection string.
fn with_password(url: &str, password: &str) -> String {
    with_param(url, "password", password)
}

/// `url` with `key` set to `value`: a query parameter of a URL (percent-encoded), a quoted
/// pair of a libpq string.
fn with_param(url: &str, key: &str, value: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let encoded: String = value
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{key}={encoded}")
    } else {
        let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
        format!("{url} {key}='{quoted}'")
    }
}

/// The host's name (for the default lease holder).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "waverun".to_string())
}

/// `webhooks:` — every key optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhooksFile {
    /// Deliveries to loopback addresses, and plain `http` to them (default false: receivers on
    /// the daemon's own host are refused).
    #[serde(default)]
    pub allow_loopback: Option<bool>,
    /// Signing secrets a subscription may name in `signing.secretRef` instead of one the
    /// daemon generates: name → `fromFile` or `fromEnv`, holding `whsec_…`.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretSource>,
    /// Certificate authorities for https endpoints (a PEM bundle; default the system's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The deadline of one attempt, in seconds (default 10, at most 60).
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// The most of an answer that is read (default 65536).
    #[serde(default)]
    pub max_response_bytes: Option<u64>,
}

impl WebhooksFile {
    fn resolve(&self) -> Result<crate::webhooks::service::WebhooksSettings, String> {
        let mut sender = crate::webhooks::sender::SenderConfig {
            policy: crate::webhooks::destination::AddressPolicy {
                allow_loopback: self.allow_loopback.unwrap_or(false),
            },
            ca_file: self.ca_file.clone(),
            ..Default::default()
        };
        if let Some(t) = self.timeout_seconds {
            if !(t.is_finite() && t > 0.0 && t <= 60.0) {
                return Err(format!(
                    "webhooks.timeoutSeconds: {t} must be a number of seconds in (0, 60]"
                ));
            }
            sender.timeout = Duration::from_secs_f64(t);
        }
        match self.max_response_bytes {
            Some(0) => return Err("webhooks.maxResponseBytes: must be at least 1".to_string()),
            Some(n) => sender.max_response_bytes = n,
            None => {}
        }
        let mut secrets = BTreeMap::new();
        for (name, source) in &self.secrets {
            let path = format!("webhooks.secrets.{name}");
            let mut errors = waverun_core::error::Errors::default();
            waverun_core::validate::check_name(&path, name, &mut errors);
            errors.into_result().map_err(|e| e.to_string())?;
            let value = source.resolve().map_err(|e| format!("{path}: {e}"))?;
            let key = crate::webhooks::signature::SigningKey::parse(&value)
                .map_err(|e| format!("{path}: {e}"))?;
            secrets.insert(name.clone(), key);
        }
        Ok(crate::webhooks::service::WebhooksSettings { sender, secrets })
    }
}

/// `tls:` — PEM files, read at start and again when they change or on SIGHUP.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// The private key.
    pub key_file: PathBuf,
}

/// `limits:` — every key optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsConfig {
    /// Connections open at once (default 1024).
    pub connections: Option<usize>,
    /// Connections open at once from one address (default 256).
    pub connections_per_peer: Option<usize>,
    /// Seconds for a request's headers, and for an idle connection to send its next request
    /// (default 10).
    pub header_read_seconds: Option<f64>,
    /// Seconds for a TLS handshake (default 10).
    pub tls_handshake_seconds: Option<f64>,
    /// Seconds a shutdown waits for requests in flight (default 10).
    pub shutdown_grace_seconds: Option<f64>,
    /// Live event streams one token may hold (default 100).
    pub streams_per_token: Option<usize>,
    /// Live event streams in all (default 2000).
    pub streams: Option<usize>,
}

impl LimitsConfig {
    fn resolve(&self) -> Result<(Limits, usize, usize), String> {
        let d = Limits::default();
        let count = |v: Option<usize>, name: &str, default: usize| match v {
            None => Ok(default),
            Some(0) => Err(format!("limits.{name}: must be at least 1")),
            Some(n) => Ok(n),
        };
        let secs = |v: Option<f64>, name: &str, default: Duration| match v {
            None => Ok(default),
            Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(Duration::from_secs_f64(s)),
            Some(s) => Err(format!(
                "limits.{name}: {s} must be a number of seconds in (0, 3600]"
            )),
        };
        let limits = Limits {
            connections: count(self.connections, "connections", d.connections)?,
            connections_per_peer: count(
                self.connections_per_peer,
                "connectionsPerPeer",
                d.connections_per_peer,
            )?,
            header_read: secs(self.header_read_seconds, "headerReadSeconds", d.header_read)?,
            handshake: secs(
                self.tls_handshake_seconds,
                "tlsHandshakeSeconds",
                d.handshake,
            )?,
            shutdown_grace: secs(
                self.shutdown_grace_seconds,
                "shutdownGraceSeconds",
                d.shutdown_grace,
            )?,
        };
        let per_token = count(
            self.streams_per_token,
            "streamsPerToken",
            crate::api::STREAMS_PER_TOKEN,
        )?;
        let streams = count(self.streams, "streams", crate::api::STREAMS)?;
        Ok((limits, per_token, streams))
    }
}

/// Tokens a daemon on the network refuses (their hashes are compared): the examples of this
/// project's documentation and the commonest passwords.
const WEAK_TOKENS: &[&str] = &[
    "test",
    "test2",
    "token",
    "secret",
    "password",
    "changeme",
    "change-me",
    "admin",
    "demo",
    "waverun",
    "default",
    "letmein",
    "example",
    "123456",
    "12345678",
    "qwerty",
    "TOKEN",
];

/// The weak token whose hash `sha256` is, if it is one of [`WEAK_TOKENS`] (a token's strength
/// cannot be told from its hash otherwise).
fn weak_token(sha256: &str) -> Option<&'static str> {
    WEAK_TOKENS
        .iter()
        .find(|t| crate::api::token_hash(t).eq_ignore_ascii_case(sha256))
        .copied()
}

impl ConfigFile {
    /// Makes the file's relative paths relative to `dir`, the file's directory.
    fn anchor_paths(&mut self, dir: &Path) {
        let anchor = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        if let Some(p) = &mut self.data_dir {
            anchor(p);
        }
        if let Some(p) = &mut self.fleet_file {
            anchor(p);
        }
        if let Some(t) = &mut self.tls {
            anchor(&mut t.cert_file);
            anchor(&mut t.key_file);
        }
        if let Some(h) = &mut self.health_checks {
            if let Some(f) = h.prometheus.as_mut().and_then(|p| p.ca_file.as_mut()) {
                anchor(f);
            }
            for s in h.secrets.values_mut() {
                for source in s.headers.values_mut() {
                    if let SecretSource::FromFile(f) = source {
                        anchor(f);
                    }
                }
            }
            // `exec.allow` stays as written: absolute paths, compared with the commands of
            // checks as written.
            if let Some(d) = &mut h.exec.state_dir {
                anchor(d);
            }
        }
        if let Some(SecretSource::FromFile(f)) =
            self.store.as_mut().and_then(|s| s.password_from.as_mut())
        {
            anchor(f);
        }
        if let Some(w) = &mut self.webhooks {
            if let Some(f) = &mut w.ca_file {
                anchor(f);
            }
            for source in w.secrets.values_mut() {
                if let SecretSource::FromFile(f) = source {
                    anchor(f);
                }
            }
        }
        for p in self.providers.values_mut() {
            match p {
                ProviderConfig::Exec(p) => {
                    // `adapter` is looked up on PATH; `./adapter` and `bin/adapter` are files.
                    if let Some(program) = p.command.first_mut().filter(|c| c.contains('/')) {
                        if Path::new(program.as_str()).is_relative() {
                            *program = dir.join(&*program).to_string_lossy().into_owned();
                        }
                    }
                    for s in p.secret_env.values_mut() {
                        if let SecretSource::FromFile(f) = s {
                            anchor(f);
                        }
                    }
                }
                ProviderConfig::Aks(p) => {
                    for f in [
                        &mut p.auth.client_secret_file,
                        &mut p.auth.federated_token_file,
                        &mut p.ca_file,
                    ]
                    .into_iter()
                    .flatten()
                    {
                        anchor(f);
                    }
                }
            }
        }
    }
}

/// One configured provider, by its `type`.
#[derive(Clone, Debug)]
pub enum ProviderConfig {
    /// `exec.waverun.dev/v1alpha1`: the operator's command per call.
    Exec(ExecProviderConfig),
    /// AKS clusters over Azure Resource Manager.
    Aks(AksProviderConfig),
}

impl<'de> Deserialize<'de> for ProviderConfig {
    /// By `type`, then the rest with that type's fields (unknown ones refused), an error naming
    /// the field under the provider (`secretEnv.T: ...`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ProviderConfig, D::Error> {
        use serde::de::Error;
        let mut v = serde_json::Value::deserialize(d)?;
        let Some(fields) = v.as_object_mut() else {
            return Err(D::Error::custom("expected a mapping with a `type`"));
        };
        let kind = match fields.remove("type") {
            Some(serde_json::Value::String(k)) => k,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "type: {other} is not a provider type (exec, aks)"
                )))
            }
            None => return Err(D::Error::custom("type: missing (exec or aks)")),
        };
        fn rest<T: serde::de::DeserializeOwned, E: Error>(v: serde_json::Value) -> Result<T, E> {
            serde_path_to_error::deserialize(v).map_err(|e| {
                let path = e.path().to_string();
                if path == "." {
                    E::custom(e.into_inner())
                } else {
                    E::custom(format!("{path}: {}", e.into_inner()))
                }
            })
        }
        match kind.as_str() {
            "exec" => rest(v).map(ProviderConfig::Exec),
            "aks" => rest(v).map(ProviderConfig::Aks),
            other => Err(D::Error::custom(format!(
                "type: {other:?} is not a provider type (exec, aks)"
            ))),
        }
    }
}

/// An `exec` provider.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecProviderConfig {
    /// The program and its first arguments (no shell); the operation is appended.
    pub command: Vec<String>,
    /// Variables set for it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of the daemon's environment passed through.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Secret variables: `{fromEnv: VAR}` or `{fromFile: PATH}`, read at every call, never
    /// logged.
    #[serde(default)]
    pub secret_env: BTreeMap<String, SecretSource>,
    /// Deadlines per operation, in seconds.
    #[serde(default)]
    pub timeouts: TimeoutsConfig,
    /// The largest response accepted on stdout (default 1 MiB).
    #[serde(default)]
    pub max_stdout_bytes: Option<usize>,
}

/// An `aks` provider: how it authenticates and reaches Azure Resource Manager.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AksProviderConfig {
    /// How tokens are got (`method`, `tenantId`, `clientId`, `clientSecretFile`,
    /// `federatedTokenFile`, `authorityHost`, `resourceManager`, `imdsEndpoint`), with the Azure
    /// SDKs' environment variables as fallbacks.
    #[serde(default)]
    pub auth: AzureAuthConfig,
    /// Certificate authorities to trust for ARM and Entra besides the system's (PEM).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The client's own rate limits per subscription, under ARM's.
    #[serde(default)]
    pub limits: AksLimitsConfig,
    /// One ARM request's deadline, in seconds (default 60).
    #[serde(default)]
    pub request_timeout_seconds: Option<f64>,
    /// The subscription whose `locations/{region}` lists releases (default: the first member's).
    #[serde(default)]
    pub releases_subscription: Option<String>,
    /// Seconds between polls of an operation when ARM does not say (`Retry-After`; default 30).
    #[serde(default)]
    pub poll_interval_seconds: Option<u64>,
}

/// Client-side rate limits of an `aks` provider, per subscription.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AksLimitsConfig {
    /// Reads per second, refilled (default from the provider).
    pub reads_per_second: Option<f64>,
    /// Reads at once.
    pub read_burst: Option<f64>,
    /// Writes per second, refilled.
    pub writes_per_second: Option<f64>,
    /// Writes at once.
    pub write_burst: Option<f64>,
}

/// Per-operation deadlines, in seconds.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutsConfig {
    /// `capabilities` (default 10).
    pub capabilities: Option<f64>,
    /// `describe` (default 30).
    pub describe: Option<f64>,
    /// `start-upgrade` (default 120).
    pub start_upgrade: Option<f64>,
    /// `get-operation` (default 30).
    pub get_operation: Option<f64>,
    /// Between SIGTERM and SIGKILL (default 5).
    pub grace: Option<f64>,
}

impl TimeoutsConfig {
    fn resolve(&self, path: &str) -> Result<ExecTimeouts, String> {
        let d = ExecTimeouts::default();
        let pick = |v: Option<f64>, name: &str, default: Duration| match v {
            None => Ok(default),
            Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
            Some(s) => Err(format!(
                "{path}.{name}: {s} must be a number of seconds in (0, 86400]"
            )),
        };
        Ok(ExecTimeouts {
            capabilities: pick(self.capabilities, "capabilities", d.capabilities)?,
            describe: pick(self.describe, "describe", d.describe)?,
            start_upgrade: pick(self.start_upgrade, "startUpgrade", d.start_upgrade)?,
            get_operation: pick(self.get_operation, "getOperation", d.get_operation)?,
            grace: pick(self.grace, "grace", d.grace)?,
        })
    }
}

/// A configured provider, resolved.
#[derive(Clone, Debug)]
pub enum ResolvedProvider {
    /// An `exec` provider.
    Exec {
        /// How to run it.
        config: ExecProviderConfig,
        /// Its deadlines.
        timeouts: ExecTimeouts,
    },
    /// An `aks` provider.
    Aks(AksProviderConfig),
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
    /// The configured providers, by name.
    pub providers: BTreeMap<String, ResolvedProvider>,
    /// The configured members.
    pub members: Vec<MemberBinding>,
    /// How often members are described again.
    pub observe_interval: Duration,
    /// Where clients reach the daemon, without a trailing slash.
    pub public_url: Option<String>,
    /// HTTPS with these files.
    pub tls: Option<TlsFiles>,
    /// Connection limits and deadlines.
    pub limits: Limits,
    /// Live event streams per token, and in all.
    pub stream_limits: (usize, usize),
    /// A non-loopback address without TLS was asked for explicitly (`--insecure-http`).
    pub insecure_http: bool,
    /// `healthChecks:` (checked; the default when absent).
    pub health_checks: HealthConfig,
    /// `webhooks:` (checked, its secrets read; the default when absent).
    pub webhooks: crate::webhooks::service::WebhooksSettings,
    /// `store:` (SQLite when absent).
    pub store: StoreChoice,
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
    /// `--insecure-http`.
    pub insecure_http: bool,
}

impl ServeConfig {
    /// What an empty config file resolves to, without reading the environment.
    pub fn defaults() -> ServeConfig {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7700)),
            data_dir: PathBuf::from("waverun-data"),
            fleet: "default".to_string(),
            time_scale: 1.0,
            fleet_file: None,
            tokens: Vec::new(),
            module_cache: None,
            providers: BTreeMap::new(),
            members: Vec::new(),
            observe_interval: Duration::from_secs(300),
            public_url: None,
            tls: None,
            limits: Limits::default(),
            stream_limits: (crate::api::STREAMS_PER_TOKEN, crate::api::STREAMS),
            insecure_http: false,
            health_checks: HealthConfig::default(),
            webhooks: Default::default(),
            store: StoreChoice::Sqlite,
        }
    }

    /// The file (if any), then the environment (`WAVERUN_LISTEN`, `WAVERUN_DATA_DIR`,
    /// `WAVERUN_FLEET_NAME`, `WAVERUN_TIME_SCALE`, `WAVERUN_FLEET_FILE`), then `flags`.
    pub fn resolve(file: Option<&Path>, flags: Overrides) -> Result<ServeConfig, String> {
        let base = match file {
            Some(p) => {
                let mut f = crate::load_file::<ConfigFile>(p)?;
                f.anchor_paths(p.parent().unwrap_or(Path::new("")));
                f
            }
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
        let tls = base.tls.as_ref().map(|t| TlsFiles {
            cert: t.cert_file.clone(),
            key: t.key_file.clone(),
        });
        if !listen.ip().is_loopback() {
            if tls.is_none() && !flags.insecure_http {
                return Err(format!(
                    "listen: {listen} is not a loopback address and no tls is configured: bearer \
                     tokens would cross the network in clear. Configure tls (certFile, keyFile), \
                     or pass --insecure-http (behind a TLS-terminating proxy on this host)"
                ));
            }
            for (i, t) in base.tokens.iter().enumerate() {
                if let Some(weak) = weak_token(&t.sha256) {
                    return Err(format!(
                        "tokens[{i}].sha256: is the hash of {weak:?}, an example or common \
                         password; a daemon on {listen} refuses it. Make a token with \
                         `openssl rand -hex 32`"
                    ));
                }
            }
        }
        let (limits, per_token, streams) = base.limits.resolve()?;
        let mut providers = BTreeMap::new();
        for (name, p) in &base.providers {
            let path = format!("providers.{name}");
            let mut errors = waverun_core::error::Errors::default();
            waverun_core::validate::check_name(&path, name, &mut errors);
            errors.into_result().map_err(|e| e.to_string())?;
            if name == "simulated" {
                return Err(format!(
                    "{path}: the name \"simulated\" is the built-in provider's"
                ));
            }
            let resolved = match p {
                ProviderConfig::Exec(p) => {
                    if p.command.is_empty() || p.command[0].is_empty() {
                        return Err(format!(
                            "{path}.command: must name a program, e.g. [/usr/local/bin/adapter]"
                        ));
                    }
                    if p.max_stdout_bytes == Some(0) {
                        return Err(format!("{path}.maxStdoutBytes: must be at least 1"));
                    }
                    let timeouts = p.timeouts.resolve(&format!("{path}.timeouts"))?;
                    ResolvedProvider::Exec {
                        config: p.clone(),
                        timeouts,
                    }
                }
                ProviderConfig::Aks(p) => {
                    p.check(&path)?;
                    ResolvedProvider::Aks(p.clone())
                }
            };
            providers.insert(name.clone(), resolved);
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, m) in base.members.iter().enumerate() {
            if m.provider != "simulated" && !providers.contains_key(&m.provider) {
                let known: Vec<&str> = std::iter::once("simulated")
                    .chain(providers.keys().map(String::as_str))
                    .collect();
                return Err(format!(
                    "members[{i}].provider: {:?} is not a configured provider ({})",
                    m.provider,
                    known.join(", ")
                ));
            }
            if let Some(ResolvedProvider::Aks(_)) = providers.get(&m.provider) {
                let id = match (&m.cluster_resource_id, &m.cluster_ref) {
                    (Some(id), _) => id.clone(),
                    (None, Some(serde_json::Value::String(id))) => id.clone(),
                    _ => {
                        return Err(format!(
                            "members[{i}].clusterResourceId: missing: an aks member is named by \
                             /subscriptions/{{id}}/resourceGroups/{{name}}/providers/\
                             Microsoft.ContainerService/managedClusters/{{name}}"
                        ))
                    }
                };
                crate::providers::aks::model::ClusterId::parse(&id)
                    .map_err(|e| format!("members[{i}].clusterResourceId: {e}"))?;
            }
            if !seen.insert(m.name.as_str()) {
                return Err(format!("members[{i}].name: {:?} is listed twice", m.name));
            }
        }
        let observe_interval = match base.observe_interval_seconds {
            None => Duration::from_secs(300),
            Some(0) => return Err("observeIntervalSeconds: must be at least 1".to_string()),
            Some(s) => Duration::from_secs(s),
        };
        let public_url = match env("WAVERUN_PUBLIC_URL").or(base.public_url) {
            Some(u) => Some(check_public_url(&u)?),
            None => None,
        };
        let health_checks = base.health_checks.unwrap_or_default();
        health_checks.validate()?;
        let webhooks = base.webhooks.unwrap_or_default().resolve()?;
        let store = match &base.store {
            Some(s) => s.resolve()?,
            None => StoreChoice::Sqlite,
        };
        Ok(ServeConfig {
            listen,
            data_dir,
            fleet,
            time_scale,
            fleet_file,
            tokens: base.tokens,
            module_cache: env("WAVERUN_CACHE_DIR").map(PathBuf::from),
            providers,
            members: base.members,
            observe_interval,
            public_url,
            tls,
            limits,
            stream_limits: (per_token, streams),
            insecure_http: flags.insecure_http,
            health_checks,
            webhooks,
            store,
        })
    }
}

/// `publicUrl`: `http` or `https`, a host, an optional port, nothing else (no path, query,
/// fragment or user info). Returned without a trailing slash.
fn check_public_url(url: &str) -> Result<String, String> {
    let bad = |why: &str| {
        Err(format!(
            "publicUrl: {url:?} {why} (for example https://waverun.example.com or http://10.0.0.5:7700)"
        ))
    };
    let trimmed = url.trim_end_matches('/');
    let Ok(uri) = trimmed.parse::<axum::http::Uri>() else {
        return bad("is not a URL");
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return bad("must start with http:// or https://"),
    }
    let Some(authority) = uri.authority() else {
        return bad("has no host");
    };
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return bad("must name a host without user information");
    }
    if uri.query().is_some() || !matches!(uri.path(), "" | "/") || trimmed.contains('#') {
        return bad("must be scheme://host[:port] only, without a path, query or fragment");
    }
    Ok(trimmed.to_string())
}

impl AksProviderConfig {
    /// Refuses what cannot work, naming the field under `path`.
    fn check(&self, path: &str) -> Result<(), String> {
        let positive = |v: Option<f64>, name: &str, max: f64| match v {
            Some(x) if !(x.is_finite() && x > 0.0 && x <= max) => {
                Err(format!("{path}.{name}: {x} must be a number in (0, {max}]"))
            }
            _ => Ok(()),
        };
        positive(
            self.request_timeout_seconds,
            "requestTimeoutSeconds",
            3600.0,
        )?;
        positive(
            self.poll_interval_seconds.map(|s| s as f64),
            "pollIntervalSeconds",
            3600.0,
        )?;
        positive(self.limits.reads_per_second, "limits.readsPerSecond", 25.0)?;
        positive(self.limits.read_burst, "limits.readBurst", 250.0)?;
        positive(
            self.limits.writes_per_second,
            "limits.writesPerSecond",
            10.0,
        )?;
        positive(self.limits.write_burst, "limits.writeBurst", 200.0)?;
        if let Some(s) = &self.releases_subscription {
            if s.trim().is_empty() || s.contains('/') {
                return Err(format!(
                    "{path}.releasesSubscription: {s:?} must be a subscription id"
                ));
            }
        }
        Ok(())
    }
}
