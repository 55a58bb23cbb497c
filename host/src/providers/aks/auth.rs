//! Microsoft Entra tokens for Azure Resource Manager, got the way the Azure SDKs get them and
//! chosen by an `auth:` block ([`AzureAuthConfig`]) with the SDKs' environment variables as
//! fallbacks. A [`Credential`] owns one way of getting tokens and a cache of the last one.
//!
//! The flows, each one request:
//! - **client secret**: `POST {authorityHost}/{tenantId}/oauth2/v2.0/token` with
//!   `grant_type=client_credentials`, the client id and secret, `scope={resourceManager}/.default`.
//!   The secret comes from `clientSecretFile` (read again at every acquisition: it may be
//!   rotated) or `$AZURE_CLIENT_SECRET`; never inline in the configuration.
//! - **workload identity**: the same endpoint with `client_assertion_type=…jwt-bearer` and
//!   `client_assertion` = the projected service-account token, read again at every acquisition
//!   (the kubelet rotates it).
//! - **managed identity**: `GET {imds}/metadata/identity/oauth2/token?api-version=2018-02-01&
//!   resource={resourceManager}[&client_id=…]` with `Metadata: true`, never through a proxy.
//! - **Azure CLI**: `az account get-access-token --output json --resource {resourceManager}
//!   [--tenant …]` as a child process with a deadline (its own process group, killed whole).
//! - **auto**: `DefaultAzureCredential`'s order: client secret, workload identity, managed
//!   identity, Azure CLI. A flow whose settings are incomplete is skipped; managed identity is
//!   skipped when no IMDS answers (or it has no identity: HTTP 400), the CLI when it is not
//!   installed or not logged in. Any other failure stops the chain, as in the SDKs. The first
//!   flow that gives a token is kept for the credential's life.
//!
//! The cache ([`Credential::token`]): a token is used until its refresh point (5 minutes before
//! it expires, or half its lifetime for short tokens; sooner if Entra sent `refresh_in`); one
//! acquisition runs at a time and the other callers wait for it; a failed refresh falls back on
//! the still valid token (and is not tried again for 30 s); a failed acquisition with no valid
//! token answers the same error to everyone for 5 s instead of queueing a request each.
//! [`Credential::invalidate`] drops the token ARM just refused (a 401), once, however many calls
//! saw it refused. Time is a value (`now_ms`): nothing here reads a clock.
//!
//! Secrets (client secret, federated token, access tokens) appear in no `Debug`, `Display`,
//! error or log line: errors are redacted of every secret of the attempt.

use serde::Deserialize;
use serde_json::Value;
use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Entra's public-cloud authority.
pub const DEFAULT_AUTHORITY_HOST: &str = "https://login.microsoftonline.com";
/// Azure Resource Manager in the public cloud: the audience of the tokens.
pub const DEFAULT_RESOURCE_MANAGER: &str = "https://management.azure.com";
/// The Instance Metadata Service.
pub const DEFAULT_IMDS_ENDPOINT: &str = "http://169.254.169.254";
/// IMDS's token API version (the one the SDKs send).
const IMDS_API_VERSION: &str = "2018-02-01";
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The tenant, when `tenantId` is not set.
pub const ENV_TENANT_ID: &str = "AZURE_TENANT_ID";
/// The application (client) id, when `clientId` is not set (also a user-assigned managed
/// identity's, as in `DefaultAzureCredential`).
pub const ENV_CLIENT_ID: &str = "AZURE_CLIENT_ID";
/// The client secret's value, when `clientSecretFile` is not set.
pub const ENV_CLIENT_SECRET: &str = "AZURE_CLIENT_SECRET";
/// The projected service-account token's path (set by the workload-identity webhook).
pub const ENV_FEDERATED_TOKEN_FILE: &str = "AZURE_FEDERATED_TOKEN_FILE";
/// The Entra authority, when `authorityHost` is not set (set by the webhook too).
pub const ENV_AUTHORITY_HOST: &str = "AZURE_AUTHORITY_HOST";
/// IMDS's address, when `imdsEndpoint` is not set (azure-identity's override, named after the
/// retired pod-identity NMI it pointed at).
pub const ENV_IMDS_ENDPOINT: &str = "AZURE_POD_IDENTITY_AUTHORITY_HOST";

/// A token is refreshed at most this long before it expires...
const REFRESH_MARGIN_MS: i64 = 5 * 60 * 1000;
/// ...and is still handed out (after a failed refresh) until this long before.
const USABLE_MARGIN_MS: i64 = 10 * 1000;
/// A failed refresh with a usable token in hand is not tried again for this long.
const REFRESH_RETRY_MS: i64 = 30 * 1000;
/// A failed acquisition is answered to every caller for this long.
const FAILURE_HOLD_MS: i64 = 5 * 1000;
/// The largest answer read from Entra, IMDS or the CLI.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;
/// What replaces a secret in anything shown.
const REDACTED: &str = "[REDACTED]";

/// How tokens are got (`auth.method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AuthMethod {
    /// A service principal's client secret.
    ClientSecret,
    /// A Kubernetes service account federated with an Entra application.
    WorkloadIdentity,
    /// The machine's managed identity (IMDS).
    ManagedIdentity,
    /// The Azure CLI's logged-in account.
    AzureCli,
    /// `DefaultAzureCredential`'s order.
    #[default]
    Auto,
}

impl AuthMethod {
    /// The name as written in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::ClientSecret => "clientSecret",
            AuthMethod::WorkloadIdentity => "workloadIdentity",
            AuthMethod::ManagedIdentity => "managedIdentity",
            AuthMethod::AzureCli => "azureCli",
            AuthMethod::Auto => "auto",
        }
    }
}

/// The `auth:` block of an AKS provider's configuration. Every field may be left out; where a
/// flow needs one, the SDKs' environment variable stands in for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AzureAuthConfig {
    /// How tokens are got (default `auto`).
    pub method: AuthMethod,
    /// The Entra tenant (`$AZURE_TENANT_ID`).
    pub tenant_id: Option<String>,
    /// The application's client id, or a user-assigned managed identity's (`$AZURE_CLIENT_ID`).
    pub client_id: Option<String>,
    /// A file holding the client secret (`$AZURE_CLIENT_SECRET` holds the value itself).
    pub client_secret_file: Option<PathBuf>,
    /// The projected service-account token (`$AZURE_FEDERATED_TOKEN_FILE`).
    pub federated_token_file: Option<PathBuf>,
    /// Entra's authority (`$AZURE_AUTHORITY_HOST`, default `https://login.microsoftonline.com`).
    pub authority_host: Option<String>,
    /// ARM's endpoint, the tokens' audience (default `https://management.azure.com`).
    pub resource_manager: Option<String>,
    /// IMDS (`$AZURE_POD_IDENTITY_AUTHORITY_HOST`, default `http://169.254.169.254`).
    pub imds_endpoint: Option<String>,
}

/// Transport settings of a [`Credential`] (not in the YAML block: the provider sets them).
#[derive(Clone, Debug)]
pub struct AuthOptions {
    /// Certificate authorities for Entra (see [`crate::outbound::tls_config`]).
    pub tls: ureq::tls::TlsConfig,
    /// Connecting to Entra or IMDS.
    pub connect_timeout: Duration,
    /// A whole token request.
    pub request_timeout: Duration,
    /// Connecting to IMDS when `auto` only probes for it (the SDKs wait a fraction of a second).
    pub imds_probe_timeout: Duration,
    /// The Azure CLI's run (the SDKs' default: 10 s).
    pub cli_timeout: Duration,
}

impl Default for AuthOptions {
    fn default() -> AuthOptions {
        AuthOptions {
            tls: ureq::tls::TlsConfig::default(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            imds_probe_timeout: Duration::from_secs(1),
            cli_timeout: Duration::from_secs(10),
        }
    }
}

/// What kind of failure an [`AuthError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthErrorKind {
    /// The configuration is incomplete or wrong (a missing setting, an unreadable file):
    /// trying again will not help until it is fixed.
    Config,
    /// Entra, IMDS or the CLI refused (a wrong secret, no such identity, not logged in).
    Refused,
    /// No answer, or a passing failure (network, timeout, HTTP 429/5xx): try again later.
    Unavailable,
}

/// Why no token could be had. The message names the setting or environment variable at fault
/// and keeps what Entra said (`AADSTS7000215: Invalid client secret provided…`); it never holds
/// a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthError {
    /// The kind.
    pub kind: AuthErrorKind,
    /// What happened, for people.
    pub message: String,
}

impl AuthError {
    fn new(kind: AuthErrorKind, message: impl Into<String>) -> AuthError {
        AuthError {
            kind,
            message: message.into(),
        }
    }

    fn config(message: impl Into<String>) -> AuthError {
        AuthError::new(AuthErrorKind::Config, message)
    }

    /// Whether trying again later may succeed.
    pub fn retryable(&self) -> bool {
        self.kind == AuthErrorKind::Unavailable
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AuthError {}

/// A secret string: shown as `[REDACTED]`.
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A bearer token for ARM and when to stop using it.
#[derive(Clone)]
pub struct AccessToken {
    secret: Secret,
    expires_on_ms: i64,
    refresh_at_ms: i64,
    serial: u64,
}

impl AccessToken {
    /// The token itself, for an `Authorization: Bearer` header and nothing else.
    pub fn secret(&self) -> &str {
        &self.secret.0
    }

    /// When it expires (ms since the Unix epoch).
    pub fn expires_on_ms(&self) -> i64 {
        self.expires_on_ms
    }

    /// When the cache gets a new one (ms since the Unix epoch).
    pub fn refresh_at_ms(&self) -> i64 {
        self.refresh_at_ms
    }

    /// Whether this is the same acquisition as `other` (not merely an equal string).
    pub fn same_as(&self, other: &AccessToken) -> bool {
        self.serial == other.serial
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("token", &self.secret)
            .field("expires_on_ms", &self.expires_on_ms)
            .field("refresh_at_ms", &self.refresh_at_ms)
            .finish()
    }
}

/// Where a client secret comes from.
#[derive(Clone, Debug)]
enum SecretFrom {
    /// `clientSecretFile`, read at every acquisition.
    File(PathBuf),
    /// `$AZURE_CLIENT_SECRET`, read when the credential was made.
    Env(Secret),
}

/// One way of getting a token, its settings resolved.
#[derive(Clone, Debug)]
enum Flow {
    ClientSecret {
        tenant: String,
        client_id: String,
        secret: SecretFrom,
    },
    WorkloadIdentity {
        tenant: String,
        client_id: String,
        token_file: PathBuf,
    },
    ManagedIdentity {
        endpoint: String,
        client_id: Option<String>,
    },
    AzureCli {
        tenant: Option<String>,
        /// The `PATH` the CLI is looked up in (and runs with).
        path: Option<OsString>,
    },
}

impl Flow {
    fn method(&self) -> AuthMethod {
        match self {
            Flow::ClientSecret { .. } => AuthMethod::ClientSecret,
            Flow::WorkloadIdentity { .. } => AuthMethod::WorkloadIdentity,
            Flow::ManagedIdentity { .. } => AuthMethod::ManagedIdentity,
            Flow::AzureCli { .. } => AuthMethod::AzureCli,
        }
    }
}

/// A flow's failure: `unavailable` lets `auto` move on to the next flow.
struct Failure {
    error: AuthError,
    unavailable: bool,
}

impl From<AuthError> for Failure {
    fn from(error: AuthError) -> Failure {
        Failure {
            error,
            unavailable: false,
        }
    }
}

/// A token as a flow got it, before the cache dates it.
struct Got {
    token: Secret,
    /// Seconds from now, when the answer said.
    expires_in: Option<i64>,
    /// Seconds since the Unix epoch, when the answer said.
    expires_on: Option<i64>,
    /// Seconds from now, when Entra suggests refreshing early.
    refresh_in: Option<i64>,
}

#[derive(Default)]
struct Cache {
    token: Option<AccessToken>,
    /// The last failed acquisition (when, what), answered again for [`FAILURE_HOLD_MS`].
    failed: Option<(i64, AuthError)>,
    /// When a refresh failed while a usable token was in hand.
    refresh_failed_at: Option<i64>,
}

/// Tokens for ARM: one way of getting them (or `auto`'s chain) and a cache. Share it between
/// threads (`Arc<Credential>`): calls are safe from any thread, one acquisition at a time.
pub struct Credential {
    method: AuthMethod,
    flows: Vec<Flow>,
    /// Why `auto` left flows out (their settings were incomplete), for its final error.
    skipped: Vec<String>,
    /// `auto`: the flow that gave the first token.
    chosen: Mutex<Option<usize>>,
    authority: String,
    resource: String,
    options: AuthOptions,
    entra: ureq::Agent,
    imds: ureq::Agent,
    imds_probe: ureq::Agent,
    cache: Mutex<Cache>,
    acquiring: Mutex<()>,
    serial: AtomicU64,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("method", &self.method)
            .field("flows", &self.flows)
            .field("authority", &self.authority)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Credential {
    /// A credential from `config`, with the process's environment as its fallbacks.
    pub fn new(config: &AzureAuthConfig, options: AuthOptions) -> Result<Credential, AuthError> {
        Credential::with_env(config, &|name| std::env::var(name).ok(), options)
    }

    /// A credential from `config`, with `env` as its environment (`PATH` included: the Azure
    /// CLI is looked up in it). Fails when the chosen method lacks a setting, naming the field
    /// and the environment variable that would have given it.
    pub fn with_env(
        config: &AzureAuthConfig,
        env: &dyn Fn(&str) -> Option<String>,
        options: AuthOptions,
    ) -> Result<Credential, AuthError> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let authority = match &config.authority_host {
            Some(a) => checked_url("auth.authorityHost", a, true)?,
            None => match env(ENV_AUTHORITY_HOST) {
                Some(a) => checked_url(&format!("${ENV_AUTHORITY_HOST}"), &a, true)?,
                None => DEFAULT_AUTHORITY_HOST.to_string(),
            },
        };
        let resource = match &config.resource_manager {
            Some(r) => checked_url("auth.resourceManager", r, false)?,
            None => DEFAULT_RESOURCE_MANAGER.to_string(),
        };
        let settings = Settings { config, env: &env };
        let (flows, skipped) = match config.method {
            AuthMethod::ClientSecret => (vec![settings.client_secret()?], vec![]),
            AuthMethod::WorkloadIdentity => (vec![settings.workload_identity()?], vec![]),
            AuthMethod::ManagedIdentity => (vec![settings.managed_identity()?], vec![]),
            AuthMethod::AzureCli => (vec![settings.azure_cli()?], vec![]),
            AuthMethod::Auto => {
                let mut flows = Vec::new();
                let mut skipped = Vec::new();
                for (name, flow) in [
                    ("clientSecret", settings.client_secret()),
                    ("workloadIdentity", settings.workload_identity()),
                ] {
                    match flow {
                        Ok(f) => flows.push(f),
                        Err(e) => skipped.push(format!("{name}: {}", e.message)),
                    }
                }
                flows.push(settings.managed_identity()?);
                flows.push(settings.azure_cli()?);
                (flows, skipped)
            }
        };
        let agent = |connect: Duration, proxy: bool| -> ureq::Agent {
            let mut b = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .timeout_connect(Some(connect))
                .timeout_global(Some(options.request_timeout))
                .user_agent(concat!("waverun/", env!("CARGO_PKG_VERSION")))
                .tls_config(options.tls.clone());
            if !proxy {
                // IMDS is link-local: never through a proxy.
                b = b.proxy(None);
            }
            b.build().into()
        };
        Ok(Credential {
            method: config.method,
            entra: agent(options.connect_timeout, true),
            imds: agent(options.connect_timeout, false),
            imds_probe: agent(options.imds_probe_timeout, false),
            flows,
            skipped,
            chosen: Mutex::new(None),
            authority,
            resource,
            options,
            cache: Mutex::new(Cache::default()),
            acquiring: Mutex::new(()),
            serial: AtomicU64::new(0),
        })
    }

    /// The configured method (`auto` stays `auto`; see [`Credential::describe`]).
    pub fn method(&self) -> AuthMethod {
        self.method
    }

    /// The method and, for `auto`, the flow it settled on: `auto (managedIdentity)`.
    pub fn describe(&self) -> String {
        match (self.method, *lock(&self.chosen)) {
            (AuthMethod::Auto, Some(i)) => format!("auto ({})", self.flows[i].method().as_str()),
            (m, _) => m.as_str().to_string(),
        }
    }

    /// The audience of the tokens (ARM's endpoint, `auth.resourceManager`).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// A token valid at `now_ms`: the cached one until its refresh point, else a new one (one
    /// acquisition at a time; callers that arrive meanwhile wait and share its result).
    pub fn token(&self, now_ms: i64) -> Result<AccessToken, AuthError> {
        if let Some(t) = self.cached(now_ms)? {
            return Ok(t);
        }
        let _one = lock(&self.acquiring);
        // Another caller may have refreshed while this one waited.
        if let Some(t) = self.cached(now_ms)? {
            return Ok(t);
        }
        match self.acquire() {
            Ok(got) => {
                let token = self.dated(got, now_ms);
                let mut cache = lock(&self.cache);
                cache.token = Some(token.clone());
                cache.failed = None;
                cache.refresh_failed_at = None;
                tracing::debug!(
                    method = %self.describe(),
                    expires_on_ms = token.expires_on_ms,
                    refresh_at_ms = token.refresh_at_ms,
                    "got an ARM token"
                );
                Ok(token)
            }
            Err(e) => {
                let mut cache = lock(&self.cache);
                if let Some(t) = cache
                    .token
                    .clone()
                    .filter(|t| now_ms < t.expires_on_ms - USABLE_MARGIN_MS)
                {
                    tracing::warn!(method = %self.describe(), error = %e, "refreshing the ARM token failed; the current one is still valid and kept");
                    cache.refresh_failed_at = Some(now_ms);
                    return Ok(t);
                }
                cache.failed = Some((now_ms, e.clone()));
                Err(e)
            }
        }
    }

    /// Drops `rejected` from the cache (ARM answered 401 to it), so that the next
    /// [`Credential::token`] gets a new one. A token acquired since is kept: many calls
    /// refused with the same token cause one acquisition.
    pub fn invalidate(&self, rejected: &AccessToken) {
        let mut cache = lock(&self.cache);
        if cache.token.as_ref().is_some_and(|t| t.same_as(rejected)) {
            cache.token = None;
            cache.refresh_failed_at = None;
            cache.failed = None;
        }
    }

    /// The cached token when it is before its refresh point (or a refresh failed lately and it
    /// is still usable); the held failure; or nothing (acquire).
    fn cached(&self, now_ms: i64) -> Result<Option<AccessToken>, AuthError> {
        let cache = lock(&self.cache);
        if let Some(t) = &cache.token {
            if now_ms < t.refresh_at_ms {
                return Ok(Some(t.clone()));
            }
            let retry_later = cache
                .refresh_failed_at
                .is_some_and(|at| now_ms >= at && now_ms - at < REFRESH_RETRY_MS);
            if retry_later && now_ms < t.expires_on_ms - USABLE_MARGIN_MS {
                return Ok(Some(t.clone()));
            }
        }
        if let Some((at, e)) = &cache.failed {
            if now_ms >= *at && now_ms - at < FAILURE_HOLD_MS {
                return Err(e.clone());
            }
        }
        Ok(None)
    }

    /// A token dated: its expiry (from `expires_in`, robust to clock skew, else `expires_on`,
    /// else an hour) and its refresh point.
    fn dated(&self, got: Got, now_ms: i64) -> AccessToken {
        let expires_on_ms = match (got.expires_in, got.expires_on) {
            (Some(s), _) => now_ms + s.max(0) * 1000,
            (None, Some(on)) => on * 1000,
            (None, None) => now_ms + 3600 * 1000,
        };
        let lifetime = (expires_on_ms - now_ms).max(0);
        let mut refresh_at_ms = expires_on_ms - REFRESH_MARGIN_MS.min(lifetime / 2);
        if let Some(r) = got.refresh_in.filter(|r| *r > 0) {
            refresh_at_ms = refresh_at_ms.min(now_ms + r * 1000);
        }
        AccessToken {
            secret: got.token,
            expires_on_ms,
            refresh_at_ms,
            serial: self.serial.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// One acquisition: the flow, or `auto`'s chain.
    fn acquire(&self) -> Result<Got, AuthError> {
        if self.method != AuthMethod::Auto {
            return self.run(&self.flows[0], false).map_err(|f| f.error);
        }
        if let Some(i) = *lock(&self.chosen) {
            return self.run(&self.flows[i], false).map_err(|f| f.error);
        }
        let mut why = self.skipped.clone();
        for (i, flow) in self.flows.iter().enumerate() {
            match self.run(flow, true) {
                Ok(got) => {
                    *lock(&self.chosen) = Some(i);
                    tracing::info!(
                        flow = flow.method().as_str(),
                        "auth method auto: using this flow"
                    );
                    return Ok(got);
                }
                Err(f) if f.unavailable => {
                    why.push(format!("{}: {}", flow.method().as_str(), f.error.message));
                }
                Err(f) => return Err(f.error),
            }
        }
        Err(AuthError::config(format!(
            "auth (method auto): no way to get a token; {}",
            why.join("; ")
        )))
    }

    fn run(&self, flow: &Flow, probing: bool) -> Result<Got, Failure> {
        match flow {
            Flow::ClientSecret {
                tenant,
                client_id,
                secret,
            } => {
                let secret = match secret {
                    SecretFrom::File(path) => read_secret(path, "auth.clientSecretFile")?,
                    SecretFrom::Env(s) => s.clone(),
                };
                let form = [
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id.as_str()),
                    ("client_secret", secret.0.as_str()),
                    ("scope", &self.scope()),
                ];
                Ok(self.entra_token(tenant, client_id, &form, &[&secret.0])?)
            }
            Flow::WorkloadIdentity {
                tenant,
                client_id,
                token_file,
            } => {
                let assertion = read_secret(token_file, "auth.federatedTokenFile")?;
                let form = [
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id.as_str()),
                    ("client_assertion_type", JWT_BEARER),
                    ("client_assertion", assertion.0.as_str()),
                    ("scope", &self.scope()),
                ];
                Ok(self.entra_token(tenant, client_id, &form, &[&assertion.0])?)
            }
            Flow::ManagedIdentity {
                endpoint,
                client_id,
            } => self.imds_token(endpoint, client_id.as_deref(), probing),
            Flow::AzureCli { tenant, path } => self.cli_token(tenant.as_deref(), path.as_ref()),
        }
    }

    fn scope(&self) -> String {
        format!("{}/.default", self.resource)
    }

    /// `POST {authority}/{tenant}/oauth2/v2.0/token`.
    fn entra_token(
        &self,
        tenant: &str,
        client_id: &str,
        form: &[(&str, &str)],
        secrets: &[&str],
    ) -> Result<Got, AuthError> {
        let url = format!("{}/{tenant}/oauth2/v2.0/token", self.authority);
        let req = ureq::http::Request::builder()
            .method("POST")
            .uri(&url)
            .header("accept", "application/json")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_encode(form))
            .map_err(|e| AuthError::config(format!("{url}: {e}")))?;
        let who = format!("client {client_id} in tenant {tenant}");
        let (status, text) = match self.entra.run(req) {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let text = resp
                    .body_mut()
                    .with_config()
                    .limit(MAX_ANSWER_BYTES)
                    .read_to_string()
                    .map_err(|e| {
                        AuthError::new(
                            AuthErrorKind::Unavailable,
                            format!("Entra ID ({url}): reading the answer for {who}: {e}"),
                        )
                    })?;
                (status, text)
            }
            Err(e) => {
                return Err(AuthError::new(
                    AuthErrorKind::Unavailable,
                    redact(
                        &format!("Entra ID ({url}) not reached for {who}: {e}"),
                        secrets,
                    ),
                ))
            }
        };
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == 200 {
            return parse_token_answer(&body).ok_or_else(|| {
                AuthError::new(
                    AuthErrorKind::Unavailable,
                    format!("Entra ID ({url}) answered {who} without an access_token"),
                )
            });
        }
        let kind = if status == 429 || status >= 500 {
            AuthErrorKind::Unavailable
        } else {
            AuthErrorKind::Refused
        };
        let mut text =
            entra_error_text(&body).unwrap_or_else(|| text.chars().take(300).collect::<String>());
        text.push_str(secrets_hint(&body));
        Err(AuthError::new(
            kind,
            redact(
                &format!("Entra ID refused the token request of {who} (HTTP {status}): {text}"),
                secrets,
            ),
        ))
    }

    /// `GET {imds}/metadata/identity/oauth2/token?…` with `Metadata: true`.
    fn imds_token(
        &self,
        endpoint: &str,
        client_id: Option<&str>,
        probing: bool,
    ) -> Result<Got, Failure> {
        let mut query = vec![
            ("api-version", IMDS_API_VERSION),
            ("resource", self.resource.as_str()),
        ];
        if let Some(id) = client_id {
            query.push(("client_id", id));
        }
        let url = format!(
            "{endpoint}/metadata/identity/oauth2/token?{}",
            form_encode(&query)
        );
        let identity = match client_id {
            Some(id) => format!("the managed identity {id}"),
            None => "the system-assigned managed identity".to_string(),
        };
        let req = ureq::http::Request::builder()
            .method("GET")
            .uri(&url)
            .header("metadata", "true")
            .header("accept", "application/json")
            .body(())
            .map_err(|e| AuthError::config(format!("{url}: {e}")))?;
        let agent = if probing {
            &self.imds_probe
        } else {
            &self.imds
        };
        let mut resp = match agent.run(req) {
            Ok(r) => r,
            Err(e) => {
                return Err(Failure {
                    error: AuthError::new(
                        AuthErrorKind::Unavailable,
                        format!("no answer from IMDS at {endpoint} for {identity}: {e}"),
                    ),
                    unavailable: true,
                })
            }
        };
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == 200 {
            return parse_token_answer(&body).ok_or_else(|| {
                Failure::from(AuthError::new(
                    AuthErrorKind::Unavailable,
                    format!("IMDS at {endpoint} answered without an access_token"),
                ))
            });
        }
        let said = entra_error_text(&body).unwrap_or_else(|| text.chars().take(300).collect());
        // 400: no identity assigned (or not this one); the SDKs move on. 404, 410 (IMDS being
        // upgraded), 429 and 5xx pass.
        let (kind, unavailable) = match status {
            400 => (AuthErrorKind::Refused, true),
            404 | 410 | 429 | 500..=599 => (AuthErrorKind::Unavailable, false),
            _ => (AuthErrorKind::Refused, false),
        };
        Err(Failure {
            error: AuthError::new(
                kind,
                format!(
                    "IMDS at {endpoint} refused a token for {identity} (HTTP {status}): {said}"
                ),
            ),
            unavailable,
        })
    }

    /// `az account get-access-token --output json --resource R [--tenant T]`.
    fn cli_token(&self, tenant: Option<&str>, path: Option<&OsString>) -> Result<Got, Failure> {
        let mut cmd = Command::new("az");
        cmd.args([
            "account",
            "get-access-token",
            "--output",
            "json",
            "--resource",
        ])
        .arg(&self.resource);
        if let Some(t) = tenant {
            cmd.args(["--tenant", t]);
        }
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        cmd.env("AZURE_CORE_NO_COLOR", "true")
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let unavailable = |message: String| Failure {
            error: AuthError::new(AuthErrorKind::Refused, message),
            unavailable: true,
        };
        let out =
            match run_with_deadline(cmd, self.options.cli_timeout) {
                Ok(out) => out,
                Err(RunError::NotFound) => return Err(unavailable(
                    "the Azure CLI (az) is not on PATH; install it or choose another auth.method"
                        .to_string(),
                )),
                Err(RunError::Other(e)) => {
                    return Err(Failure::from(AuthError::new(
                        AuthErrorKind::Unavailable,
                        format!("the Azure CLI (az) could not be run: {e}"),
                    )))
                }
                Err(RunError::Timeout) => {
                    return Err(Failure::from(AuthError::new(
                        AuthErrorKind::Unavailable,
                        format!(
                        "`az account get-access-token` gave no answer within {} s; it was killed",
                        self.options.cli_timeout.as_secs_f64()
                    ),
                    )))
                }
            };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = sanitize_cli(&String::from_utf8_lossy(&out.stderr));
        if out.code != Some(0) {
            if out.code == Some(127) {
                return Err(unavailable("the Azure CLI (az) is not on PATH".to_string()));
            }
            if stderr.contains("az login") || stderr.contains("az account set") {
                return Err(unavailable(format!(
                    "the Azure CLI is not logged in: run `az login` ({})",
                    tail(&stderr, 300)
                )));
            }
            return Err(Failure::from(AuthError::new(
                AuthErrorKind::Refused,
                format!(
                    "`az account get-access-token` failed (exit {}): {}",
                    out.code
                        .map_or("by a signal".to_string(), |c| c.to_string()),
                    tail(&stderr, 500)
                ),
            )));
        }
        parse_cli_output(&stdout).ok_or_else(|| {
            Failure::from(AuthError::new(
                AuthErrorKind::Refused,
                format!(
                    "unexpected output from `az account get-access-token`: {}",
                    tail(&sanitize_cli(&stdout), 300)
                ),
            ))
        })
    }
}

/// A configuration and an environment, resolving each flow's settings.
struct Settings<'a> {
    config: &'a AzureAuthConfig,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Settings<'_> {
    fn tenant(&self, method: &str) -> Result<String, AuthError> {
        let tenant = match &self.config.tenant_id {
            Some(t) => t.trim().to_string(),
            None => (self.env)(ENV_TENANT_ID).ok_or_else(|| {
                AuthError::config(format!(
                    "auth.tenantId: not set, and ${ENV_TENANT_ID} is not in the environment \
                     ({method} needs the Entra tenant)"
                ))
            })?,
        };
        let ok = !tenant.is_empty()
            && tenant
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !ok {
            return Err(AuthError::config(format!(
                "auth.tenantId: {tenant:?} is not a tenant id or domain"
            )));
        }
        Ok(tenant)
    }

    fn client_id(&self, method: &str, needed: bool) -> Result<Option<String>, AuthError> {
        let id = match &self.config.client_id {
            Some(c) => Some(c.trim().to_string()),
            None => (self.env)(ENV_CLIENT_ID),
        };
        match id {
            Some(id)
                if id.is_empty() || id.chars().any(|c| c.is_whitespace() || c.is_control()) =>
            {
                Err(AuthError::config(format!(
                    "auth.clientId: {id:?} is not a client id"
                )))
            }
            None if needed => Err(AuthError::config(format!(
                "auth.clientId: not set, and ${ENV_CLIENT_ID} is not in the environment \
                 ({method} needs the application's client id)"
            ))),
            id => Ok(id),
        }
    }

    fn client_secret(&self) -> Result<Flow, AuthError> {
        let tenant = self.tenant("clientSecret")?;
        let client_id = self.client_id("clientSecret", true)?.unwrap_or_default();
        let secret = match &self.config.client_secret_file {
            Some(f) => SecretFrom::File(f.clone()),
            None => match (self.env)(ENV_CLIENT_SECRET) {
                Some(s) => SecretFrom::Env(Secret(s)),
                None => {
                    return Err(AuthError::config(format!(
                        "auth.clientSecretFile: not set, and ${ENV_CLIENT_SECRET} is not in the \
                         environment (clientSecret needs the secret)"
                    )))
                }
            },
        };
        Ok(Flow::ClientSecret {
            tenant,
            client_id,
            secret,
        })
    }

    fn workload_identity(&self) -> Result<Flow, AuthError> {
        let tenant = self.tenant("workloadIdentity")?;
        let client_id = self
            .client_id("workloadIdentity", true)?
            .unwrap_or_default();
        let token_file = match &self.config.federated_token_file {
            Some(f) => f.clone(),
            None => (self.env)(ENV_FEDERATED_TOKEN_FILE)
                .map(PathBuf::from)
                .ok_or_else(|| {
                    AuthError::config(format!(
                        "auth.federatedTokenFile: not set, and ${ENV_FEDERATED_TOKEN_FILE} is \
                         not in the environment (workloadIdentity needs the service-account \
                         token's path)"
                    ))
                })?,
        };
        Ok(Flow::WorkloadIdentity {
            tenant,
            client_id,
            token_file,
        })
    }

    fn managed_identity(&self) -> Result<Flow, AuthError> {
        let endpoint = match &self.config.imds_endpoint {
            Some(e) => checked_url("auth.imdsEndpoint", e, false)?,
            None => match (self.env)(ENV_IMDS_ENDPOINT) {
                Some(e) => checked_url(&format!("${ENV_IMDS_ENDPOINT}"), &e, false)?,
                None => DEFAULT_IMDS_ENDPOINT.to_string(),
            },
        };
        Ok(Flow::ManagedIdentity {
            endpoint,
            client_id: self.client_id("managedIdentity", false)?,
        })
    }

    fn azure_cli(&self) -> Result<Flow, AuthError> {
        let tenant = match &self.config.tenant_id {
            Some(_) => Some(self.tenant("azureCli")?),
            None => None,
        };
        Ok(Flow::AzureCli {
            tenant,
            path: (self.env)("PATH").map(OsString::from),
        })
    }
}

/// `url` without a trailing slash, if it is an absolute `https` URL (or `http`, where `https`
/// is not required or the host is this machine).
fn checked_url(setting: &str, url: &str, https: bool) -> Result<String, AuthError> {
    let url = url.trim().trim_end_matches('/');
    let Some((scheme, _, _)) = crate::outbound::origin(url) else {
        return Err(AuthError::config(format!(
            "{setting}: {url:?} is not an http(s) URL"
        )));
    };
    if https && scheme != "https" && !crate::outbound::is_loopback(url) {
        return Err(AuthError::config(format!(
            "{setting}: {url:?} must be https (secrets are sent there)"
        )));
    }
    Ok(url.to_string())
}

/// A secret file's content, trimmed.
fn read_secret(path: &Path, setting: &str) -> Result<Secret, AuthError> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_ANSWER_BYTES).read_to_string(&mut text))
        .map_err(|e| AuthError::config(format!("{setting}: {}: {e}", path.display())))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(AuthError::config(format!(
            "{setting}: {} is empty",
            path.display()
        )));
    }
    Ok(Secret(text.to_string()))
}

/// A number that may come as a JSON string (IMDS's `expires_in`, `expires_on`).
fn number(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse::<f64>().ok().map(|f| f as i64),
        _ => None,
    }
}

/// Entra's or IMDS's successful answer.
fn parse_token_answer(body: &Value) -> Option<Got> {
    let token = body.get("access_token")?.as_str()?;
    if token.is_empty() {
        return None;
    }
    Some(Got {
        token: Secret(token.to_string()),
        expires_in: number(body.get("expires_in")),
        expires_on: number(body.get("expires_on")),
        refresh_in: number(body.get("refresh_in")),
    })
}

/// `error: error_description` of an OAuth error answer, on one line.
fn entra_error_text(body: &Value) -> Option<String> {
    let error = body.get("error").and_then(Value::as_str);
    let description = body.get("error_description").and_then(Value::as_str);
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match (error, description) {
        (Some(e), Some(d)) => Some(format!("{e}: {}", one_line(d))),
        (Some(e), None) => Some(e.to_string()),
        (None, Some(d)) => Some(one_line(d)),
        (None, None) => None,
    }
}

/// A pointer to the setting to check, for Entra's errors about secrets and assertions.
fn secrets_hint(body: &Value) -> &'static str {
    let codes: Vec<i64> = body
        .get("error_codes")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    if codes.contains(&7000215) || codes.contains(&7000222) {
        " (check the secret in auth.clientSecretFile or $AZURE_CLIENT_SECRET)"
    } else {
        ""
    }
}

/// `text` with every secret replaced.
fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s, REDACTED);
    }
    out
}

/// The Azure CLI's output with any `accessToken` value replaced (as azure-identity does).
fn sanitize_cli(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("\"accessToken\"") {
        out.push_str(&rest[..i]);
        out.push_str("\"accessToken\": \"");
        out.push_str(REDACTED);
        out.push('"');
        let after = &rest[i + "\"accessToken\"".len()..];
        // Skip `: "value"` (or to the end of the text when the value is cut).
        let value_start = after.find('"').map_or(after.len(), |q| q + 1);
        let value = &after[value_start.min(after.len())..];
        let end = value.find('"').map_or(value.len(), |q| q + 1);
        rest = &value[end..];
    }
    out.push_str(rest);
    out
}

/// The last `n` characters of `text`, trimmed.
fn tail(text: &str, n: usize) -> String {
    let text = text.trim();
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(n)).collect()
}

/// `az account get-access-token`'s JSON: `accessToken`, and `expires_on` (Unix seconds, CLI
/// 2.54.0 and later) or else `expiresOn` (a naive local time, `2023-11-14 15:50:46.000000`).
fn parse_cli_output(stdout: &str) -> Option<Got> {
    let v: Value = serde_json::from_str(stdout.trim()).ok()?;
    let token = v.get("accessToken")?.as_str()?;
    if token.is_empty() {
        return None;
    }
    let expires_on = match number(v.get("expires_on")) {
        Some(on) => on,
        None => local_time_to_epoch(v.get("expiresOn")?.as_str()?)?,
    };
    Some(Got {
        token: Secret(token.to_string()),
        expires_in: None,
        expires_on: Some(expires_on),
        refresh_in: None,
    })
}

/// A naive local date-time (`%Y-%m-%d %H:%M:%S[.%f]`) as Unix seconds, through mktime(3) and
/// the machine's time zone, as the CLI wrote it (and as azure-identity reads it).
fn local_time_to_epoch(text: &str) -> Option<i64> {
    let t = chrono::NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S%.f").ok()?;
    use chrono::{Datelike, Timelike};
    // SAFETY: `tm` is a plain C struct, zeroed then filled; mktime(3) reads and normalises it
    // and touches nothing else of ours.
    let secs = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        tm.tm_year = t.year() - 1900;
        tm.tm_mon = t.month0() as i32;
        tm.tm_mday = t.day() as i32;
        tm.tm_hour = t.hour() as i32;
        tm.tm_min = t.minute() as i32;
        tm.tm_sec = t.second() as i32;
        tm.tm_isdst = -1;
        libc::mktime(&mut tm)
    };
    (secs != -1).then_some(secs as i64)
}

/// `application/x-www-form-urlencoded` (also a query string): unreserved characters as they
/// are, everything else percent-encoded.
pub(crate) fn form_encode(pairs: &[(&str, &str)]) -> String {
    fn enc(s: &str, out: &mut String) {
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        enc(k, &mut out);
        out.push('=');
        enc(v, &mut out);
    }
    out
}

/// What a child process left.
struct RunOutput {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

enum RunError {
    NotFound,
    Timeout,
    Other(std::io::Error),
}

/// Runs `cmd` in a process group of its own; kills the group when `timeout` passes.
fn run_with_deadline(mut cmd: Command, timeout: Duration) -> Result<RunOutput, RunError> {
    use std::os::unix::process::CommandExt;
    // SAFETY: setpgid(2) is async-signal-safe and touches no memory of the parent: the child
    // leads a process group of its own, so a timeout kills whatever it started too.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => RunError::NotFound,
        _ => RunError::Other(e),
    })?;
    let group = child.id() as i32;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(p) = pipe {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = p.take(MAX_ANSWER_BYTES).read_to_end(&mut buf);
                let _ = tx.send(buf);
            });
        }
        rx
    };
    let out_rx = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err_rx = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let end = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= end => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                // SAFETY: kill(2) on our own child's process group.
                unsafe { libc::kill(-group, libc::SIGKILL) };
                let _ = child.wait();
                return Err(RunError::Other(e));
            }
        }
    };
    // Whatever the CLI started goes with it.
    // SAFETY: kill(2) on our own child's process group.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let Some(status) = status else {
        let _ = child.wait();
        return Err(RunError::Timeout);
    };
    let grace = Duration::from_secs(1);
    Ok(RunOutput {
        code: status.code(),
        stdout: out_rx.recv_timeout(grace).unwrap_or_default(),
        stderr: err_rx.recv_timeout(grace).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn got(expires_in: i64, refresh_in: Option<i64>) -> Got {
        Got {
            token: Secret("t".into()),
            expires_in: Some(expires_in),
            expires_on: None,
            refresh_in,
        }
    }

    fn credential() -> Credential {
        let config = AzureAuthConfig {
            method: AuthMethod::ManagedIdentity,
            ..AzureAuthConfig::default()
        };
        Credential::with_env(&config, &|_| None, AuthOptions::default()).unwrap()
    }

    #[test]
    fn an_hour_token_is_refreshed_five_minutes_before_it_expires() {
        let t = credential().dated(got(3600, None), 1_000_000);
        assert_eq!(t.expires_on_ms, 1_000_000 + 3_600_000);
        assert_eq!(t.refresh_at_ms, t.expires_on_ms - 300_000);
    }

    #[test]
    fn a_short_token_is_refreshed_at_half_its_lifetime() {
        let t = credential().dated(got(120, None), 0);
        assert_eq!(t.refresh_at_ms, 60_000);
    }

    #[test]
    fn refresh_in_brings_the_refresh_forward() {
        let t = credential().dated(got(86_400, Some(43_200)), 0);
        assert_eq!(t.refresh_at_ms, 43_200_000);
    }

    #[test]
    fn cli_output_with_expires_on_is_read_as_unix_seconds() {
        let g = parse_cli_output(
            r#"{"accessToken":"x","expiresOn":"2030-01-01 00:00:00.000000","expires_on":1893456000,"subscription":"s","tenant":"t","tokenType":"Bearer"}"#,
        )
        .unwrap();
        assert_eq!(g.expires_on, Some(1_893_456_000));
    }

    #[test]
    fn cli_output_with_only_expires_on_local_time_is_read_in_the_local_zone() {
        let g = parse_cli_output(
            r#"{"accessToken":"x","expiresOn":"2030-01-01 00:00:00.000000","tokenType":"Bearer"}"#,
        )
        .unwrap();
        // Whatever the machine's zone, it is within a day of midnight UTC.
        let on = g.expires_on.unwrap();
        assert!((on - 1_893_456_000).abs() <= 14 * 3600, "{on}");
    }

    #[test]
    fn cli_output_is_sanitised_of_access_tokens() {
        let s = sanitize_cli(r#"{"accessToken": "eyJsecret", "tokenType": "Bearer"}"#);
        assert!(!s.contains("eyJsecret"), "{s}");
        assert!(s.contains("tokenType"), "{s}");
        let cut = sanitize_cli(r#"oops {"accessToken": "eyJcut"#);
        assert!(!cut.contains("eyJcut"), "{cut}");
    }

    #[test]
    fn form_values_are_percent_encoded() {
        assert_eq!(
            form_encode(&[
                ("scope", "https://management.azure.com/.default"),
                ("a b", "+&=")
            ]),
            "scope=https%3A%2F%2Fmanagement.azure.com%2F.default&a%20b=%2B%26%3D"
        );
    }

    #[test]
    fn entra_errors_keep_the_aadsts_code_on_one_line() {
        let body: Value = serde_json::json!({
            "error": "invalid_client",
            "error_description": "AADSTS7000215: Invalid client secret provided.\r\nTrace ID: 1\r\nCorrelation ID: 2",
            "error_codes": [7000215]
        });
        assert_eq!(
            entra_error_text(&body).unwrap(),
            "invalid_client: AADSTS7000215: Invalid client secret provided. Trace ID: 1 Correlation ID: 2"
        );
        assert!(secrets_hint(&body).contains("auth.clientSecretFile"));
    }
}
