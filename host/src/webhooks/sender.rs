//! One attempt at one delivery, over the network: the one room of [`super`] that does I/O.
//! A signed CloudEvent is POSTed to a subscription's endpoint, and how it went comes back as
//! a [`delivery::Outcome`](super::delivery::Outcome) with the attempt's latency.
//!
//! What a receiver cannot make the daemon do:
//! - wait longer than the deadline ([`SenderConfig::timeout`], the whole attempt: resolving,
//!   connecting, sending, the answer);
//! - read more than [`SenderConfig::max_response_bytes`] of an answer (the rest is dropped
//!   with the connection; only the status counts);
//! - follow a redirect (a 3xx is a failure, with its status);
//! - connect to an address [`destination::check_address`] refuses: every address the host
//!   resolves to is checked, and the connection goes only to a checked one ([`CheckedResolver`]);
//! - go through a proxy named in the environment (the checks are of the receiver's addresses).

use super::cloudevent::CONTENT_TYPE;
use super::delivery::Outcome;
use super::destination::{self, AddressPolicy};
use super::signature::SignedHeaders;
use crate::clock::{Clock, SystemClock};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use ureq::config::Config;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// How attempts are made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// The deadline of one whole attempt.
    pub timeout: Duration,
    /// The most of an answer that is read.
    pub max_response_bytes: u64,
    /// Which addresses may be connected to.
    pub policy: AddressPolicy,
    /// Certificate authorities for https endpoints (a PEM bundle), else the system's bundle.
    pub ca_file: Option<PathBuf>,
}

impl Default for SenderConfig {
    fn default() -> SenderConfig {
        SenderConfig {
            timeout: Duration::from_secs(10),
            max_response_bytes: 64 * 1024,
            policy: AddressPolicy::default(),
            ca_file: None,
        }
    }
}

/// How one attempt went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// Delivered, or why not.
    pub outcome: Outcome,
    /// From the start of the attempt to its end.
    pub latency: Duration,
}

/// A resolver that keeps only the addresses the policy allows, and refuses a host with none.
#[derive(Debug)]
pub struct CheckedResolver {
    policy: AddressPolicy,
    inner: DefaultResolver,
}

/// Why a host's addresses were refused (carried through ureq's error).
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl Resolver for CheckedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let all = self.inner.resolve(uri, config, timeout)?;
        let mut kept = self.inner.empty();
        let mut refused = Vec::new();
        for a in all.iter().copied() {
            match destination::check_address(a.ip(), self.policy) {
                Ok(()) => kept.push(a),
                Err(e) => refused.push(e),
            }
        }
        if kept.is_empty() {
            let host = uri.host().unwrap_or_default();
            return Err(ureq::Error::Other(Box::new(Refused(format!(
                "{host} resolves only to addresses deliveries may not go to: {}",
                refused.join("; ")
            )))));
        }
        Ok(kept)
    }
}

/// Makes attempts; one per subscription's lane at a time, any number of lanes at once.
pub struct Sender {
    agent: ureq::Agent,
    config: SenderConfig,
    /// Why https endpoints cannot be reached (no certificate authorities), if they cannot.
    no_https: Option<String>,
}

impl Sender {
    /// A sender. A `caFile` that cannot be read is an error; a system without a bundle of
    /// certificate authorities fails each https attempt, saying so.
    pub fn new(config: SenderConfig) -> Result<Sender, String> {
        let tls = crate::outbound::tls_config(
            "https://receiver",
            config.ca_file.as_deref(),
            "webhooks.caFile",
            "name one with webhooks.caFile",
        );
        let (tls, no_https) = match (tls, &config.ca_file) {
            (Ok(t), _) => (t, None),
            (Err(e), Some(_)) => return Err(e),
            (Err(e), None) => (ureq::tls::TlsConfig::default(), Some(e)),
        };
        let agent_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .proxy(None)
            .timeout_global(Some(config.timeout))
            .user_agent(format!("waverun/{} (webhooks)", env!("CARGO_PKG_VERSION")))
            .tls_config(tls)
            .build();
        let resolver = CheckedResolver {
            policy: config.policy,
            inner: DefaultResolver::default(),
        };
        let agent = ureq::Agent::with_parts(agent_config, DefaultConnector::new(), resolver);
        Ok(Sender {
            agent,
            config,
            no_https,
        })
    }

    /// POSTs `body` (a CloudEvent) to `url` with the signature's headers.
    pub fn send(&self, url: &str, headers: &SignedHeaders, body: &[u8]) -> Attempt {
        let start = Instant::now();
        let outcome = self.attempt(url, headers, body);
        Attempt {
            outcome,
            latency: start.elapsed(),
        }
    }

    fn attempt(&self, url: &str, headers: &SignedHeaders, body: &[u8]) -> Outcome {
        let failed = |error: String| Outcome::Failed {
            status: None,
            error,
            retry_after_ms: None,
        };
        // The URL's own rules (scheme, literal addresses): a subscription written before the
        // daemon's policy changed is held to the policy of now.
        let endpoint = match destination::check_url(url, self.config.policy) {
            Ok(e) => e,
            Err(e) => return failed(e),
        };
        if let (true, Some(e)) = (endpoint.https, &self.no_https) {
            return failed(e.clone());
        }
        let mut req = self.agent.post(url).header("content-type", CONTENT_TYPE);
        for (k, v) in headers.pairs() {
            req = req.header(k, v);
        }
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(ureq::Error::Other(e)) => return failed(e.to_string()),
            Err(ureq::Error::Timeout(t)) => {
                return failed(format!(
                    "no answer within {} s ({t})",
                    self.config.timeout.as_secs_f64()
                ))
            }
            Err(e) => return failed(e.to_string()),
        };
        let status = resp.status().as_u16();
        let retry_after_ms = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| crate::providers::aks::arm::retry_after(v, SystemClock.now_ms()))
            .map(|s| (s as i64).saturating_mul(1000));
        // Read a little of the answer, for the log; never more than the limit.
        let answer = resp
            .body_mut()
            .with_config()
            .limit(self.config.max_response_bytes)
            .read_to_vec()
            .unwrap_or_default();
        if (200..300).contains(&status) {
            return Outcome::Delivered { status };
        }
        let said = String::from_utf8_lossy(&answer[..answer.len().min(200)])
            .trim()
            .to_string();
        let error = match (status, said.is_empty()) {
            (300..=399, _) => format!(
                "HTTP {status}: a redirect (to {}), not followed",
                resp.headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("nowhere")
            ),
            (_, true) => format!("HTTP {status}"),
            (_, false) => format!("HTTP {status}: {said}"),
        };
        Outcome::Failed {
            status: Some(status),
            error,
            retry_after_ms,
        }
    }
}
