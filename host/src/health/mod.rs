//! Health checks, the host's side: performing **one measurement** of one check
//! ([`waverun_core::HostCommand::MeasureCheck`]) and saying what it got, as a
//! [`Measurement`]. The engine decides what it means (`waverun_core::health`): a Prometheus
//! query's samples are reported raw, as Prometheus wrote them; HTTP and exec checks give a
//! verdict of their own; anything that went wrong with the measurement itself is
//! `verdict: Error` with a message, never a pass.
//!
//! What it owns: [`Checker`] (the sources: `prometheus`, `http`, `exec`; the template
//! variables, [`template`]; the daemon's side of the config, [`config`]) and the deadline of a
//! measurement: it returns within the check's `timeoutSeconds` plus [`MARGIN`], whatever the
//! source does. Blocking I/O runs on tokio's blocking pool, never on the async runtime.
//!
//! Not here: `provider` checks. The member's provider answers them (the daemon routes them,
//! [`answered_by_provider`]); given one, [`Checker::measure`] reports an error saying so.

pub mod config;
mod exec;
mod http;
mod prometheus;
pub mod template;

pub use config::{ExecChecksConfig, HealthConfig, PrometheusConfig, SecretHeaders};

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use ureq::tls::TlsConfig;
use waverun_core::health::{HealthCheck, Measurement, Verdict};
use waverun_core::CheckRequest;

/// How long past a check's timeout a measurement may take before [`Checker::measure`] gives
/// up on it (an exec check's grace period after SIGTERM fits in it).
pub const MARGIN: Duration = Duration::from_secs(2);

/// After SIGTERM at an exec check's deadline, how long its process group has before SIGKILL.
const EXEC_GRACE: Duration = Duration::from_secs(1);

/// The longest message a measurement carries (characters).
const MAX_MESSAGE: usize = 500;

/// What the sources share.
pub(crate) struct Shared {
    pub(crate) config: HealthConfig,
    /// The TLS settings for Prometheus (its `caFile`, else the system's bundle), or why not.
    pub(crate) prometheus_tls: Result<TlsConfig, String>,
    /// The system's roots for `https` HTTP checks, read at the first one.
    pub(crate) https_roots: OnceLock<Result<TlsConfig, String>>,
    /// `exec.stateDir`, or the default.
    pub(crate) state_dir: PathBuf,
    /// Exec checks run so far (names their private `TMPDIR`).
    pub(crate) runs: AtomicU64,
}

/// Takes measurements of health checks under the daemon's [`HealthConfig`]. Cheap to share:
/// clone it.
#[derive(Clone)]
pub struct Checker {
    shared: Arc<Shared>,
}

/// Whether a check is answered by the member's provider rather than by a [`Checker`]: the
/// daemon sends it there.
pub fn answered_by_provider(check: &HealthCheck) -> bool {
    check.provider.is_some()
        && check.prometheus.is_none()
        && check.http.is_none()
        && check.exec.is_none()
}

impl Checker {
    /// A checker over `config`, checked first (the error names the field). The exec checks'
    /// state directory is created, private to this user.
    pub fn new(config: HealthConfig) -> Result<Checker, String> {
        config.validate()?;
        let prometheus_tls = match &config.prometheus {
            Some(p) => crate::outbound::tls_config(
                &p.url,
                p.ca_file.as_deref(),
                "healthChecks.prometheus.caFile",
                "name one with healthChecks.prometheus.caFile",
            ),
            None => {
                Err("no prometheus.url in the daemon's config (healthChecks.prometheus)".into())
            }
        };
        // A bad caFile is the operator's mistake: refused at start, not at every measurement.
        if config.prometheus.is_some() {
            if let Err(e) = &prometheus_tls {
                return Err(e.clone());
            }
        }
        let state_dir = config.exec.state_dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("waverun-health-{}", std::process::id()))
        });
        std::fs::create_dir_all(state_dir.join("home"))
            .and_then(|()| std::fs::create_dir_all(state_dir.join("tmp")))
            .map_err(|e| format!("healthChecks.exec.stateDir: {}: {e}", state_dir.display()))?;
        crate::providers::exec::private(&state_dir);
        Ok(Checker {
            shared: Arc::new(Shared {
                config,
                prometheus_tls,
                https_roots: OnceLock::new(),
                state_dir,
                runs: AtomicU64::new(0),
            }),
        })
    }

    /// Takes one measurement of `req.check` about `req`'s members. Never panics, never blocks
    /// the async runtime, and returns within the check's timeout plus [`MARGIN`]: a
    /// measurement that takes longer is an `Error` saying so (its blocking work ends by its own
    /// deadline, a little later). Runs on a tokio runtime.
    pub async fn measure(&self, req: &CheckRequest) -> Measurement {
        let check = &req.check;
        if answered_by_provider(check) {
            return error("a provider check is not measured here: provider checks are answered by the member's provider");
        }
        let timeout = Duration::from_secs(check.timeout().max(1));
        let shared = self.shared.clone();
        let owned = req.clone();
        let work = tokio::task::spawn_blocking(move || measure_blocking(&shared, &owned, timeout));
        let m = match tokio::time::timeout(timeout + MARGIN, work).await {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => error(format!("the measurement failed inside the daemon: {e}")),
            Err(_) => error(format!(
                "no result within the check's timeout ({} s)",
                timeout.as_secs()
            )),
        };
        tracing::debug!(
            measurement_id = %req.measurement_id,
            check = %check.name,
            verdict = ?m.verdict,
            samples = m.values.as_ref().map(Vec::len),
            "health check measured"
        );
        m
    }
}

/// One measurement, on a thread that may block.
fn measure_blocking(shared: &Shared, req: &CheckRequest, timeout: Duration) -> Measurement {
    let check = &req.check;
    if let Some(p) = &check.prometheus {
        prometheus::measure(shared, req, p, timeout)
    } else if let Some(h) = &check.http {
        http::measure(shared, req, h, timeout)
    } else if let Some(e) = &check.exec {
        exec::measure(shared, req, e, timeout)
    } else {
        error("the check has no source (prometheus, http, exec or provider)")
    }
}

impl Shared {
    /// The headers of the secret `name` for a request to `url`, their values read now. `field`
    /// is where the check named it (`http.secret`). Errors never carry a value.
    pub(crate) fn secret_headers(
        &self,
        name: &str,
        url: &str,
        field: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let Some(secret) = self.config.secrets.get(name) else {
            return Err(format!(
                "{field}: {name:?} is not a secret of the daemon's config (healthChecks.secrets)"
            ));
        };
        if !secret.allows(url) {
            return Err(format!(
                "{field}: the secret {name:?} is sent only to its origins \
                 (healthChecks.secrets.{name}.origins), over https unless on this machine; \
                 the URL is not on them"
            ));
        }
        let mut out = Vec::with_capacity(secret.headers.len());
        for (header, source) in &secret.headers {
            let value = source
                .resolve()
                .map_err(|why| format!("healthChecks.secrets.{name}.headers.{header}: {why}"))?;
            if ureq::http::HeaderValue::from_str(&value).is_err() {
                return Err(format!(
                    "healthChecks.secrets.{name}.headers.{header}: the value is not a valid header value"
                ));
            }
            out.push((header.clone(), value));
        }
        Ok(out)
    }
}

/// A client for one measurement: no redirect followed (a secret's headers stay on the URL's
/// origin), statuses returned rather than raised, the whole exchange within `timeout`.
pub(crate) fn agent(timeout: Duration, tls: TlsConfig) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_idle_connections(0)
        .max_idle_connections_per_host(0)
        .timeout_global(Some(timeout))
        .user_agent(concat!("waverun/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls)
        .build()
        .into()
}

/// Sends `request` within `timeout` and reads its status and at most `max + 1` bytes of its
/// body (a longer body is the caller's to refuse).
pub(crate) fn send<B: ureq::AsSendBody>(
    request: ureq::http::Request<B>,
    timeout: Duration,
    tls: TlsConfig,
    max: u64,
) -> Result<(u16, Vec<u8>), ureq::Error> {
    use std::io::Read;
    agent(timeout, tls).run(request).and_then(|mut resp| {
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        resp.body_mut()
            .as_reader()
            .take(max + 1)
            .read_to_end(&mut body)
            .map_err(ureq::Error::Io)?;
        Ok((status, body))
    })
}

/// A measurement that went wrong.
pub(crate) fn error(message: impl Into<String>) -> Measurement {
    Measurement {
        values: None,
        verdict: Some(Verdict::Error),
        message: Some(cap(&message.into())),
    }
}

/// A measurement with a verdict of its own.
pub(crate) fn verdict(verdict: Verdict, message: Option<String>) -> Measurement {
    Measurement {
        values: None,
        verdict: Some(verdict),
        message: message.map(|m| cap(&m)).filter(|m| !m.is_empty()),
    }
}

/// `text` cut to [`MAX_MESSAGE`] characters (an ellipsis says it was).
pub(crate) fn cap(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= MAX_MESSAGE {
        return text.to_string();
    }
    let mut out: String = text.chars().take(MAX_MESSAGE - 1).collect();
    out.push('…');
    out
}

/// `text` with every value of `secrets` replaced.
pub(crate) fn redact(text: &str, secrets: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (_, v) in secrets.iter().filter(|(_, v)| !v.is_empty()) {
        out = out.replace(v.as_str(), "[REDACTED]");
    }
    out
}
