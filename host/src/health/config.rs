//! The daemon's side of health checks, as configured (to become the `healthChecks:` section of
//! `waverun.yaml`): where Prometheus is, the secrets whose headers checks may send, and the
//! programs exec checks may run. Strategies (written by API users, shown to viewers) name a
//! secret, never hold one, and run only what this allows.
//!
//! ```yaml
//! healthChecks:
//!   prometheus: {url: "https://prometheus.example:9090", caFile: ca.pem, secret: prom, timeoutSeconds: 20}
//!   secrets:
//!     prom: {origins: ["https://prometheus.example:9090"], headers: {Authorization: {fromFile: /run/prom-token}}}
//!     hooks: {origins: ["https://hooks.example"], headers: {X-Api-Key: {fromEnv: HOOK_KEY}}}
//!   exec: {allow: [/usr/local/bin/smoke-test], stateDir: /var/lib/waverun/health}
//!   http: {allowOrigins: ["https://hooks.example"]}
//! ```
//!
//! A secret's headers go only to its `origins` (scheme, host, port), and over plain `http`
//! only to this machine: a strategy could otherwise point a check naming it at any URL. With
//! `http.allowOrigins`, `http` checks go to those origins only (without it, anywhere: a daemon
//! whose strategy writers should not make it call its own network sets it).

use crate::providers::SecretSource;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `healthChecks:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthConfig {
    /// The Prometheus that `prometheus` checks query; without it they are errors.
    #[serde(default)]
    pub prometheus: Option<PrometheusConfig>,
    /// Secrets by name: headers a check (or Prometheus) sends.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretHeaders>,
    /// What `exec` checks may run.
    #[serde(default)]
    pub exec: ExecChecksConfig,
    /// Where `http` checks may go.
    #[serde(default)]
    pub http: HttpChecksConfig,
}

/// `healthChecks.http:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpChecksConfig {
    /// The origins (`https://host[:port]`) `http` checks may be sent to; `None`: any.
    #[serde(default)]
    pub allow_origins: Option<Vec<String>>,
}

impl HttpChecksConfig {
    /// Whether an `http` check may go to `url`.
    pub fn allows(&self, url: &str) -> bool {
        self.allow_origins
            .as_ref()
            .is_none_or(|list| list.iter().any(|o| crate::outbound::same_origin(o, url)))
    }
}

/// `healthChecks.prometheus:`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusConfig {
    /// `http(s)://host:port[/prefix]`; queries go to `{url}/api/v1/query`.
    pub url: String,
    /// Certificate authorities to trust for an `https` URL (PEM), instead of the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A secret of [`HealthConfig::secrets`] whose headers every query sends.
    #[serde(default)]
    pub secret: Option<String>,
    /// The most seconds a query may take, whatever a check's `timeoutSeconds` says (also sent
    /// to Prometheus as its evaluation `timeout`).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// `healthChecks.secrets.NAME:`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretHeaders {
    /// The origins (`https://host[:port]`) the headers may be sent to.
    pub origins: Vec<String>,
    /// Header name → where its value comes from (`{fromEnv: VAR}` or `{fromFile: PATH}`, as
    /// an exec provider's `secretEnv`), read again at every measurement.
    pub headers: BTreeMap<String, SecretSource>,
}

/// `healthChecks.exec:`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecChecksConfig {
    /// The programs (absolute paths, compared as written) an exec check may run.
    #[serde(default)]
    pub allow: Vec<PathBuf>,
    /// A private directory for the commands' `HOME` and `TMPDIR` (default: one under the
    /// system's temporary directory).
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

impl HealthConfig {
    /// Checks what can be checked before a measurement; errors name the field
    /// (`healthChecks.secrets.hooks.origins[0]: ...`).
    pub fn validate(&self) -> Result<(), String> {
        let at = "healthChecks";
        if let Some(p) = &self.prometheus {
            if crate::outbound::origin(&p.url).is_none() {
                return Err(format!(
                    "{at}.prometheus.url: {:?} is not an http:// or https:// URL",
                    p.url
                ));
            }
            if p.url.contains('?') || p.url.contains('#') {
                return Err(format!(
                    "{at}.prometheus.url: {:?}: no query or fragment (queries go to URL/api/v1/query)",
                    p.url
                ));
            }
            if p.timeout_seconds == Some(0) {
                return Err(format!(
                    "{at}.prometheus.timeoutSeconds: must be at least 1"
                ));
            }
            if let Some(s) = &p.secret {
                let Some(secret) = self.secrets.get(s) else {
                    return Err(format!(
                        "{at}.prometheus.secret: {s:?} is not in {at}.secrets"
                    ));
                };
                if !secret.allows(&p.url) {
                    return Err(format!(
                        "{at}.prometheus.url: not on an origin of {at}.secrets.{s}.origins"
                    ));
                }
            }
        }
        for (name, s) in &self.secrets {
            let here = format!("{at}.secrets.{name}");
            if s.origins.is_empty() {
                return Err(format!(
                    "{here}.origins: list the origins (https://host[:port]) its headers may be sent to"
                ));
            }
            for (i, o) in s.origins.iter().enumerate() {
                let Some((scheme, _, _)) = crate::outbound::origin(o) else {
                    return Err(format!(
                        "{here}.origins[{i}]: {o:?} is not an http:// or https:// origin"
                    ));
                };
                if scheme != "https" && !crate::outbound::is_loopback(o) {
                    return Err(format!(
                        "{here}.origins[{i}]: {o:?}: secrets go over plain http only to this machine (use https)"
                    ));
                }
            }
            if s.headers.is_empty() {
                return Err(format!("{here}.headers: names no header"));
            }
            for name in s.headers.keys() {
                if ureq::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(format!("{here}.headers.{name}: not a valid header name"));
                }
            }
        }
        for (i, o) in self.http.allow_origins.iter().flatten().enumerate() {
            if crate::outbound::origin(o).is_none() {
                return Err(format!(
                    "{at}.http.allowOrigins[{i}]: {o:?} is not an http:// or https:// origin"
                ));
            }
        }
        for (i, p) in self.exec.allow.iter().enumerate() {
            if !p.is_absolute() {
                return Err(format!(
                    "{at}.exec.allow[{i}]: {} is not an absolute path",
                    p.display()
                ));
            }
        }
        Ok(())
    }
}

impl SecretHeaders {
    /// Whether its headers may go to `url`: on one of its origins, and over `https` unless
    /// `url` is on this machine.
    pub fn allows(&self, url: &str) -> bool {
        let secure = crate::outbound::origin(url)
            .is_some_and(|(scheme, _, _)| scheme == "https" || crate::outbound::is_loopback(url));
        secure
            && self
                .origins
                .iter()
                .any(|o| crate::outbound::same_origin(o, url))
    }
}
