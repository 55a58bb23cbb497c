//! A blocking client of Azure Resource Manager over ureq, for the AKS provider's call threads.
//! It owns what every ARM call has in common, and nothing about clusters:
//!
//! 1. **Where**: a relative path (`/subscriptions/…`) goes to the configured endpoint with
//!    `api-version=2026-08-01` appended, or the preview `2026-08-02-preview` for the two routes
//!    that exist only there (`LOC/nodeImageVersions`, `MC[/agentPools/{pool}]/operations/{id}`;
//!    reference facts 1, 2). An absolute URL (a polling URL from `Azure-AsyncOperation` or
//!    `Location`) is used exactly as given (facts 1, 5), but only on the endpoint's own origin:
//!    a token never goes to another host. Redirects are not followed.
//! 2. **How much**: a token bucket per subscription for reads (GET) and one for writes
//!    (PUT/POST), well under ARM's own ([`RateLimits`]). An empty bucket makes a call wait when
//!    the wait is short (at most `max_wait`, 1 s), else refuses it as `Throttled` with
//!    `retryAfterSeconds`, without sending it. A 429 from ARM is `Throttled` with ARM's
//!    `Retry-After`, and the bucket stays empty until then: nothing is sent before it elapses
//!    (fact 13: a request sent earlier gets another 429).
//! 3. **Who**: `Authorization: Bearer` from the [`Credential`]; a 401 drops that token and the
//!    call is made once more with a new one; a second 401 is `Unauthenticated`.
//! 4. **What went wrong**: a call that never reached ARM (no connection, no token) is
//!    `Unavailable` (or `Unauthenticated`) and safe to repeat. A PUT or POST whose connection
//!    failed once it may have been received (reset, timeout, a cut answer) is `uncertain`: its
//!    outcome is unknown and the caller asks about it, never resends blindly. Writes use a
//!    connection of their own each (no pool), so a stale pooled connection never makes a write
//!    look uncertain. An answer outside 2xx is an [`ArmError`] (`{"error":{code, message,
//!    subcode}}`) for the provider to classify; this module maps no status to a provider code
//!    but 401 and 429.
//! 5. **What it saw**: [`ArmMetrics`], atomics listed by [`ArmMetrics::snapshot`] for a
//!    Prometheus exporter: calls by method and status, 429s, time spent throttled (client side
//!    and as ARM said), the last remaining reads/writes per subscription.
//!
//! Every request carries a fresh `x-ms-client-request-id` and `User-Agent: waverun/{version}`;
//! logs name the method, URL, status and request ids, never a header's value. Time is a value:
//! each call takes `now_ms` (ms since the Unix epoch) for its token and its bucket; the only
//! clock-like thing here is the short wait itself (a sleep).

use super::auth::{AuthError, AuthErrorKind, Credential};
use crate::providers::{ProviderError, ProviderErrorCode};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The pinned stable api-version (reference fact 1).
pub const API_VERSION: &str = "2026-08-01";
/// The preview api-version of the node-image catalogue and the operation-status resource.
pub const PREVIEW_API_VERSION: &str = "2026-08-02-preview";
/// A 429 without `Retry-After` waits this long (ARM always sends one; fact 13).
const DEFAULT_THROTTLE_SECONDS: u64 = 10;
/// A server's `Retry-After` is believed up to an hour.
const MAX_RETRY_AFTER_SECONDS: u64 = 3600;

/// One token bucket: `burst` requests at once, refilled at `per_second`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketLimit {
    /// The bucket's size (requests at once).
    pub burst: f64,
    /// Requests per second it refills.
    pub per_second: f64,
}

/// The client's own limits, per subscription.
///
/// ARM limits each subscription, per security principal and region, with token buckets of
/// 250 reads (refilled at 25/s) and 200 writes (10/s); clouds not yet moved to that scheme
/// allow 12,000 reads and 1,200 writes per hour per ARM instance (learn.microsoft.com
/// `azure/azure-resource-manager/management/request-limits-and-throttling`, "Regional
/// throttling and token bucket algorithm" and "Subscription and tenant limits"; reference
/// fact 13). The defaults stay under both, and leave the rest of ARM's budget to whatever
/// else uses the principal (the portal, other automation): reads 50 at once then 3/s (10,800
/// an hour), writes 10 at once then 0.3/s (1,080 an hour).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimits {
    /// GET.
    pub reads: BucketLimit,
    /// PUT and POST.
    pub writes: BucketLimit,
    /// The longest a call waits for its bucket; beyond, it is refused as `Throttled`.
    pub max_wait: Duration,
}

impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits {
            reads: BucketLimit {
                burst: 50.0,
                per_second: 3.0,
            },
            writes: BucketLimit {
                burst: 10.0,
                per_second: 0.3,
            },
            max_wait: Duration::from_secs(1),
        }
    }
}

/// Deadlines of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArmTimeouts {
    /// Connecting (TCP and TLS).
    pub connect: Duration,
    /// The whole request, answer included.
    pub request: Duration,
}

impl Default for ArmTimeouts {
    fn default() -> ArmTimeouts {
        ArmTimeouts {
            connect: Duration::from_secs(10),
            request: Duration::from_secs(60),
        }
    }
}

/// An [`ArmClient`]'s settings.
#[derive(Clone, Debug)]
pub struct ArmOptions {
    /// Certificate authorities (see [`crate::outbound::tls_config`]).
    pub tls: ureq::tls::TlsConfig,
    /// The api-version of relative paths.
    pub api_version: String,
    /// The api-version of the preview-only routes.
    pub preview_api_version: String,
    /// Deadlines.
    pub timeouts: ArmTimeouts,
    /// Client-side rate limits.
    pub limits: RateLimits,
    /// The largest answer read (bytes).
    pub max_body_bytes: u64,
}

impl Default for ArmOptions {
    fn default() -> ArmOptions {
        ArmOptions {
            tls: ureq::tls::TlsConfig::default(),
            api_version: API_VERSION.to_string(),
            preview_api_version: PREVIEW_API_VERSION.to_string(),
            timeouts: ArmTimeouts::default(),
            limits: RateLimits::default(),
            max_body_bytes: 32 * 1024 * 1024,
        }
    }
}

/// A 2xx answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmResponse {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body (`Null` when empty).
    pub body: Value,
    /// `Azure-AsyncOperation`: the operation-status URL.
    pub azure_async_operation: Option<String>,
    /// `Location`: the operation-result URL.
    pub location: Option<String>,
    /// `Retry-After`, in seconds (from seconds or an HTTP date).
    pub retry_after: Option<u64>,
    /// `ETag`.
    pub etag: Option<String>,
    /// `x-ms-ratelimit-remaining-subscription-reads`.
    pub remaining_reads: Option<u64>,
    /// `x-ms-ratelimit-remaining-subscription-writes`.
    pub remaining_writes: Option<u64>,
    /// `x-ms-request-id`.
    pub request_id: Option<String>,
    /// `x-ms-correlation-request-id`.
    pub correlation_id: Option<String>,
    /// The `x-ms-client-request-id` this client sent.
    pub client_request_id: String,
}

/// An answer outside 2xx, as ARM described it (`{"error": {code, message, subcode?}}`): for the
/// provider to classify. Never holds a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArmError {
    /// The HTTP status.
    pub status: u16,
    /// ARM's code (`OperationNotAllowed`), or `HTTP{status}` when the body had none.
    pub code: String,
    /// ARM's message, or the start of the body.
    pub message: String,
    /// AKS's `subcode` (`UpgradeBlockedOnDeprecatedAPIUsage`), when there is one.
    pub subcode: Option<String>,
    /// `Retry-After`, in seconds.
    pub retry_after: Option<u64>,
    /// `x-ms-correlation-request-id`, to quote to Azure support.
    pub correlation_id: Option<String>,
}

impl fmt::Display for ArmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {} {}: {}", self.status, self.code, self.message)?;
        if let Some(s) = &self.subcode {
            write!(f, " (subcode {s})")?;
        }
        if let Some(c) = &self.correlation_id {
            write!(f, " [correlation id {c}]")?;
        }
        Ok(())
    }
}

/// Why a call gave no 2xx answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArmCallError {
    /// ARM answered outside 2xx (but 401 and 429): the provider classifies it.
    Status(ArmError),
    /// The call failed around ARM, already a provider error: not sent (`Throttled` by the
    /// client's buckets, a URL on another host, no token), `Throttled` by ARM (429), a second
    /// 401 (`Unauthenticated`), or a transport failure (`Unavailable`, `uncertain` for a write
    /// that may have been received).
    Provider(ProviderError),
}

impl fmt::Display for ArmCallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArmCallError::Status(e) => e.fmt(f),
            ArmCallError::Provider(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ArmCallError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Get,
    Put,
    Post,
}

impl Verb {
    const ALL: [Verb; 3] = [Verb::Get, Verb::Put, Verb::Post];

    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Put => "PUT",
            Verb::Post => "POST",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn writes(self) -> bool {
        self != Verb::Get
    }
}

/// A bucket's answer.
#[derive(Debug, PartialEq)]
enum Take {
    /// Go.
    Now,
    /// Go after this many ms (the token is reserved).
    After(i64),
    /// Empty for longer than a call waits: ms until a token.
    Empty(i64),
    /// ARM said 429: ms until its `Retry-After` elapses.
    Blocked(i64),
}

#[derive(Debug, Default)]
struct Bucket {
    tokens: f64,
    /// When `tokens` was last brought up to date (`None`: never used, full).
    updated_ms: Option<i64>,
    /// Nothing is sent before this (a 429's `Retry-After`).
    blocked_until_ms: i64,
}

impl Bucket {
    fn take(&mut self, now: i64, limit: BucketLimit, max_wait_ms: i64) -> Take {
        if now < self.blocked_until_ms {
            return Take::Blocked(self.blocked_until_ms - now);
        }
        match self.updated_ms {
            None => {
                self.tokens = limit.burst;
                self.updated_ms = Some(now);
            }
            Some(at) if now > at => {
                let refill = (now - at) as f64 / 1000.0 * limit.per_second;
                self.tokens = (self.tokens + refill).min(limit.burst);
                self.updated_ms = Some(now);
            }
            Some(_) => {}
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Take::Now;
        }
        let wait_ms = if limit.per_second > 0.0 {
            ((1.0 - self.tokens) / limit.per_second * 1000.0).ceil() as i64
        } else {
            i64::MAX
        };
        if wait_ms <= max_wait_ms {
            self.tokens -= 1.0;
            Take::After(wait_ms)
        } else {
            Take::Empty(wait_ms)
        }
    }

    /// A 429: nothing until `until_ms`, then one request, then the refill rate.
    fn block(&mut self, until_ms: i64) {
        if until_ms > self.blocked_until_ms {
            self.blocked_until_ms = until_ms;
            self.tokens = 1.0;
            self.updated_ms = Some(until_ms);
        }
    }
}

#[derive(Debug, Default)]
struct Buckets {
    reads: Bucket,
    writes: Bucket,
}

/// What the metrics key a subscription-less URL under (tenant-level calls, and polling URLs
/// without `/subscriptions/…`, which AKS sends: see the reference's "Reading the examples").
pub const NO_SUBSCRIPTION: &str = "(none)";

/// Why a call was not sent.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// A bucket: empty, or blocked by a 429.
    RateLimit,
    /// No token.
    Credential,
    /// A URL on another host, or not a URL.
    Url,
}

const REFUSALS: [(Refusal, &str); 3] = [
    (Refusal::RateLimit, "rate_limit"),
    (Refusal::Credential, "credential"),
    (Refusal::Url, "url"),
];
/// Status slots per method: 100..=599, and one for "no answer" (a transport failure).
const STATUS_SLOTS: usize = 601;
const TRANSPORT_SLOT: usize = 600;

/// One measurement ([`crate::providers::ProviderMetric`]).
pub use crate::providers::ProviderMetric as MetricSample;

/// What an [`ArmClient`] saw, in atomics (the per-subscription gauges behind a small lock).
/// Shared (`Arc`) by the client and whoever exports it.
pub struct ArmMetrics {
    /// Calls by method and status (index `method * STATUS_SLOTS + status`).
    calls: Box<[AtomicU64]>,
    /// Calls not sent, by method and [`Refusal`].
    refused: [[AtomicU64; 3]; 3],
    throttled_429: AtomicU64,
    wait_client_ms: AtomicU64,
    wait_server_ms: AtomicU64,
    /// The last `x-ms-ratelimit-remaining-subscription-{reads,writes}` per subscription.
    remaining: Mutex<BTreeMap<String, Remaining>>,
}

/// The last remaining reads and writes ARM reported for a subscription.
type Remaining = (Option<u64>, Option<u64>);

impl Default for ArmMetrics {
    fn default() -> ArmMetrics {
        ArmMetrics {
            calls: (0..Verb::ALL.len() * STATUS_SLOTS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            refused: Default::default(),
            throttled_429: AtomicU64::new(0),
            wait_client_ms: AtomicU64::new(0),
            wait_server_ms: AtomicU64::new(0),
            remaining: Mutex::new(BTreeMap::new()),
        }
    }
}

impl fmt::Debug for ArmMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArmMetrics")
            .field("samples", &self.snapshot().len())
            .finish()
    }
}

impl ArmMetrics {
    fn answered(&self, verb: Verb, status: u16) {
        let slot = if (100..600).contains(&status) {
            status as usize
        } else {
            TRANSPORT_SLOT
        };
        self.calls[verb.index() * STATUS_SLOTS + slot].fetch_add(1, Ordering::Relaxed);
    }

    fn unanswered(&self, verb: Verb) {
        self.calls[verb.index() * STATUS_SLOTS + TRANSPORT_SLOT].fetch_add(1, Ordering::Relaxed);
    }

    fn not_sent(&self, verb: Verb, why: Refusal) {
        self.refused[verb.index()][why as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn remaining(&self, subscription: &str, reads: Option<u64>, writes: Option<u64>) {
        if reads.is_none() && writes.is_none() {
            return;
        }
        let mut map = lock(&self.remaining);
        let entry = map.entry(subscription.to_string()).or_default();
        if reads.is_some() {
            entry.0 = reads;
        }
        if writes.is_some() {
            entry.1 = writes;
        }
    }

    /// Calls ARM answered with `status` (a transport failure counts under no status).
    pub fn calls(&self, method: &str, status: u16) -> u64 {
        Verb::ALL
            .iter()
            .find(|v| v.as_str() == method)
            .filter(|_| (100..600).contains(&status))
            .map_or(0, |v| {
                self.calls[v.index() * STATUS_SLOTS + status as usize].load(Ordering::Relaxed)
            })
    }

    /// 429s ARM answered.
    pub fn throttled(&self) -> u64 {
        self.throttled_429.load(Ordering::Relaxed)
    }

    /// Calls the client did not send because of its buckets (or a 429's `Retry-After`).
    pub fn refused_by_rate_limit(&self) -> u64 {
        self.refused
            .iter()
            .map(|r| r[Refusal::RateLimit as usize].load(Ordering::Relaxed))
            .sum()
    }

    /// Milliseconds calls waited for their bucket, and the sum of ARM's `Retry-After`s.
    pub fn throttle_wait_ms(&self) -> (u64, u64) {
        (
            self.wait_client_ms.load(Ordering::Relaxed),
            self.wait_server_ms.load(Ordering::Relaxed),
        )
    }

    /// The last remaining reads and writes ARM reported for `subscription`.
    pub fn remaining_for(&self, subscription: &str) -> (Option<u64>, Option<u64>) {
        lock(&self.remaining)
            .get(&subscription.to_ascii_lowercase())
            .copied()
            .unwrap_or_default()
    }

    /// Every sample that is not zero, in a stable order:
    /// - `waverun_arm_requests_total{method, code, class}` (counter; `code` `transport` and
    ///   `class` `error` for calls that got no answer);
    /// - `waverun_arm_requests_not_sent_total{method, reason}` (counter; `rate_limit`,
    ///   `credential`, `url`);
    /// - `waverun_arm_throttled_total` (counter: 429s);
    /// - `waverun_arm_throttle_wait_milliseconds_total{source}` (counter; `client`: waits for
    ///   a bucket, `server`: ARM's `Retry-After`s);
    /// - `waverun_arm_ratelimit_remaining{subscription, kind}` (gauge; `reads`, `writes`).
    pub fn snapshot(&self) -> Vec<MetricSample> {
        let mut out = Vec::new();
        for verb in Verb::ALL {
            for slot in 100..STATUS_SLOTS {
                let v = self.calls[verb.index() * STATUS_SLOTS + slot].load(Ordering::Relaxed);
                if v == 0 {
                    continue;
                }
                let (code, class) = if slot == TRANSPORT_SLOT {
                    ("transport".to_string(), "error".to_string())
                } else {
                    (slot.to_string(), format!("{}xx", slot / 100))
                };
                out.push(MetricSample {
                    name: "waverun_arm_requests_total",
                    counter: true,
                    labels: vec![
                        ("method", verb.as_str().to_string()),
                        ("code", code),
                        ("class", class),
                    ],
                    value: v,
                });
            }
        }
        for verb in Verb::ALL {
            for (why, name) in REFUSALS {
                let v = self.refused[verb.index()][why as usize].load(Ordering::Relaxed);
                if v > 0 {
                    out.push(MetricSample {
                        name: "waverun_arm_requests_not_sent_total",
                        counter: true,
                        labels: vec![
                            ("method", verb.as_str().to_string()),
                            ("reason", name.to_string()),
                        ],
                        value: v,
                    });
                }
            }
        }
        let throttled = self.throttled();
        if throttled > 0 {
            out.push(MetricSample {
                name: "waverun_arm_throttled_total",
                counter: true,
                labels: vec![],
                value: throttled,
            });
        }
        let (client, server) = self.throttle_wait_ms();
        for (source, v) in [("client", client), ("server", server)] {
            if v > 0 {
                out.push(MetricSample {
                    name: "waverun_arm_throttle_wait_milliseconds_total",
                    counter: true,
                    labels: vec![("source", source.to_string())],
                    value: v,
                });
            }
        }
        for (sub, (reads, writes)) in lock(&self.remaining).iter() {
            for (kind, v) in [("reads", reads), ("writes", writes)] {
                if let Some(v) = v {
                    out.push(MetricSample {
                        name: "waverun_arm_ratelimit_remaining",
                        counter: false,
                        labels: vec![("subscription", sub.clone()), ("kind", kind.to_string())],
                        value: *v,
                    });
                }
            }
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A blocking ARM client: share it between threads (`Arc<ArmClient>`).
pub struct ArmClient {
    endpoint: String,
    credential: Arc<Credential>,
    options: ArmOptions,
    /// GETs, on pooled connections.
    reads: ureq::Agent,
    /// PUTs and POSTs, each on a connection of its own.
    writes: ureq::Agent,
    buckets: Mutex<BTreeMap<String, Buckets>>,
    metrics: Arc<ArmMetrics>,
}

impl fmt::Debug for ArmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArmClient")
            .field("endpoint", &self.endpoint)
            .field("credential", &self.credential)
            .field("api_version", &self.options.api_version)
            .field("limits", &self.options.limits)
            .finish_non_exhaustive()
    }
}

/// What ARM answered: status, headers and body text.
struct Sent {
    status: u16,
    headers: ureq::http::HeaderMap,
    text: String,
}

impl ArmClient {
    /// A client of `endpoint` (`https://management.azure.com`; plain `http` only on this
    /// machine, for tests) with tokens from `credential`.
    pub fn new(
        endpoint: &str,
        credential: Arc<Credential>,
        options: ArmOptions,
    ) -> Result<ArmClient, String> {
        let endpoint = endpoint.trim().trim_end_matches('/').to_string();
        let Some((scheme, _, _)) = crate::outbound::origin(&endpoint) else {
            return Err(format!("ARM endpoint {endpoint:?}: not an http(s) URL"));
        };
        let path = endpoint
            .parse::<ureq::http::Uri>()
            .map(|u| u.path().to_string())
            .unwrap_or_default();
        if !(path.is_empty() || path == "/") {
            return Err(format!(
                "ARM endpoint {endpoint:?}: only a scheme, host and port (no path)"
            ));
        }
        if scheme != "https" && !crate::outbound::is_loopback(&endpoint) {
            return Err(format!(
                "ARM endpoint {endpoint:?}: must be https (tokens are sent there)"
            ));
        }
        let agent = |pooled: bool| -> ureq::Agent {
            let mut b = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .timeout_connect(Some(options.timeouts.connect))
                .timeout_global(Some(options.timeouts.request))
                .user_agent(concat!("waverun/", env!("CARGO_PKG_VERSION")))
                .tls_config(options.tls.clone());
            if !pooled {
                b = b.max_idle_connections(0).max_idle_connections_per_host(0);
            }
            b.build().into()
        };
        Ok(ArmClient {
            reads: agent(true),
            writes: agent(false),
            endpoint,
            credential,
            options,
            buckets: Mutex::new(BTreeMap::new()),
            metrics: Arc::new(ArmMetrics::default()),
        })
    }

    /// The endpoint (`https://management.azure.com`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// What the client saw (shared: hand it to an exporter).
    pub fn metrics(&self) -> Arc<ArmMetrics> {
        self.metrics.clone()
    }

    /// `GET path_or_url`: a path under the endpoint (api-version added), or a URL on the
    /// endpoint's origin (a polling URL, used as given).
    pub fn get(&self, now_ms: i64, path_or_url: &str) -> Result<ArmResponse, ArmCallError> {
        self.call(now_ms, Verb::Get, path_or_url, None, None)
    }

    /// `PUT path` with a JSON body, `If-Match: if_match` when given.
    pub fn put(
        &self,
        now_ms: i64,
        path: &str,
        body: &Value,
        if_match: Option<&str>,
    ) -> Result<ArmResponse, ArmCallError> {
        self.call(now_ms, Verb::Put, path, Some(body), if_match)
    }

    /// `POST path`, with a JSON body or none (`Content-Length: 0`).
    pub fn post(
        &self,
        now_ms: i64,
        path: &str,
        body: Option<&Value>,
    ) -> Result<ArmResponse, ArmCallError> {
        self.call(now_ms, Verb::Post, path, body, None)
    }

    /// The URL a call of `path_or_url` goes to, or why it may not go anywhere.
    pub fn url(&self, path_or_url: &str) -> Result<String, ProviderError> {
        let refused = |why: String| ProviderError::new(ProviderErrorCode::InvalidRequest, why);
        let head = path_or_url
            .get(..8)
            .unwrap_or(path_or_url)
            .to_ascii_lowercase();
        if head.starts_with("https://") || head.starts_with("http://") {
            if crate::outbound::same_origin(&self.endpoint, path_or_url) {
                return Ok(path_or_url.to_string());
            }
            return Err(refused(format!(
                "{path_or_url} is not on the ARM endpoint {}: not sending a token there",
                self.endpoint
            )));
        }
        if !path_or_url.starts_with('/') || path_or_url.starts_with("//") {
            return Err(refused(format!(
                "{path_or_url:?} is neither a path under the ARM endpoint nor a URL on it"
            )));
        }
        let (path, query) = match path_or_url.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_or_url, None),
        };
        let has_version = query.is_some_and(|q| {
            q.split('&')
                .any(|kv| kv.split('=').next() == Some("api-version"))
        });
        let url = if has_version {
            format!("{}{path_or_url}", self.endpoint)
        } else {
            let version = if preview_only(path) {
                &self.options.preview_api_version
            } else {
                &self.options.api_version
            };
            let sep = if query.is_some() { '&' } else { '?' };
            format!("{}{path_or_url}{sep}api-version={version}", self.endpoint)
        };
        url.parse::<ureq::http::Uri>()
            .map_err(|e| refused(format!("{path_or_url:?}: {e}")))?;
        Ok(url)
    }

    fn call(
        &self,
        now_ms: i64,
        verb: Verb,
        target: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<ArmResponse, ArmCallError> {
        let url = self.url(target).map_err(|e| {
            self.metrics.not_sent(verb, Refusal::Url);
            ArmCallError::Provider(e)
        })?;
        let subscription = subscription_of(&url);
        let text = body.map(Value::to_string);
        let mut now = now_ms;
        let mut refreshed = false;
        loop {
            now += self.admit(now, &subscription, verb, &url)?;
            let token = self.credential.token(now).map_err(|e| {
                self.metrics.not_sent(verb, Refusal::Credential);
                ArmCallError::Provider(credential_failure(verb, &url, e))
            })?;
            let client_request_id = new_request_id();
            let sent = self.send(
                verb,
                &url,
                text.as_deref(),
                if_match,
                token.secret(),
                &client_request_id,
            );
            let sent = match sent {
                Ok(s) => s,
                Err(e) => {
                    self.metrics.unanswered(verb);
                    let p = transport_failure(verb, &url, &client_request_id, &e);
                    if p.uncertain {
                        tracing::warn!(method = verb.as_str(), %url, client_request_id, error = %e, "an ARM write failed after it was sent: its outcome is unknown");
                    } else {
                        tracing::info!(method = verb.as_str(), %url, client_request_id, error = %e, "ARM call failed");
                    }
                    return Err(ArmCallError::Provider(p));
                }
            };
            self.metrics.answered(verb, sent.status);
            let resp = response(&sent, now, client_request_id);
            self.metrics
                .remaining(&subscription, resp.remaining_reads, resp.remaining_writes);
            tracing::debug!(
                method = verb.as_str(),
                %url,
                status = sent.status,
                client_request_id = %resp.client_request_id,
                request_id = resp.request_id.as_deref().unwrap_or(""),
                correlation_id = resp.correlation_id.as_deref().unwrap_or(""),
                "ARM call"
            );
            match sent.status {
                200..=299 => {
                    let body = if sent.text.trim().is_empty() {
                        Value::Null
                    } else {
                        match serde_json::from_str(&sent.text) {
                            Ok(v) => v,
                            Err(_) => {
                                let mut p = ProviderError::new(
                                    ProviderErrorCode::Internal,
                                    format!(
                                        "{} {url}: HTTP {}, and the answer is not JSON: {}",
                                        verb.as_str(),
                                        sent.status,
                                        sent.text.chars().take(200).collect::<String>()
                                    ),
                                );
                                if verb.writes() {
                                    mark_uncertain(&mut p);
                                }
                                return Err(ArmCallError::Provider(p));
                            }
                        }
                    };
                    return Ok(ArmResponse { body, ..resp });
                }
                401 if !refreshed => {
                    tracing::info!(method = verb.as_str(), %url, "ARM refused the token (401); getting a new one and calling once more");
                    self.credential.invalidate(&token);
                    refreshed = true;
                }
                401 => {
                    let e = arm_error(&sent, &resp);
                    return Err(ArmCallError::Provider(ProviderError::new(
                        ProviderErrorCode::Unauthenticated,
                        format!(
                            "{} {url}: ARM refused a new token too ({e}); check the \
                             credential ({})",
                            verb.as_str(),
                            self.credential.describe()
                        ),
                    )));
                }
                429 => {
                    let e = arm_error(&sent, &resp);
                    let seconds = e
                        .retry_after
                        .unwrap_or(DEFAULT_THROTTLE_SECONDS)
                        .clamp(1, MAX_RETRY_AFTER_SECONDS);
                    self.throttled_by_server(&subscription, verb, now, seconds);
                    let mut p = ProviderError::new(
                        ProviderErrorCode::Throttled,
                        format!(
                            "{} {url}: ARM is throttling ({e}); nothing is sent to {} for \
                             subscription {subscription} for {seconds} s",
                            verb.as_str(),
                            if verb.writes() { "writes" } else { "reads" }
                        ),
                    );
                    p.retry_after_seconds = Some(seconds);
                    return Err(ArmCallError::Provider(p));
                }
                _ => return Err(ArmCallError::Status(arm_error(&sent, &resp))),
            }
        }
    }

    /// The bucket's answer: the ms waited (a short wait), or `Throttled` unsent.
    fn admit(
        &self,
        now: i64,
        subscription: &str,
        verb: Verb,
        url: &str,
    ) -> Result<i64, ArmCallError> {
        let limits = self.options.limits;
        let limit = if verb.writes() {
            limits.writes
        } else {
            limits.reads
        };
        let max_wait_ms = limits.max_wait.as_millis() as i64;
        let take = {
            let mut buckets = lock(&self.buckets);
            let b = buckets.entry(subscription.to_string()).or_default();
            let bucket = if verb.writes() {
                &mut b.writes
            } else {
                &mut b.reads
            };
            bucket.take(now, limit, max_wait_ms)
        };
        let kind = if verb.writes() { "writes" } else { "reads" };
        let (ms, why) = match take {
            Take::Now => return Ok(0),
            Take::After(ms) => {
                self.metrics
                    .wait_client_ms
                    .fetch_add(ms as u64, Ordering::Relaxed);
                tracing::trace!(method = verb.as_str(), %url, wait_ms = ms, "waiting for the ARM rate limit");
                std::thread::sleep(Duration::from_millis(ms as u64));
                return Ok(ms);
            }
            Take::Empty(ms) => (
                ms,
                format!(
                    "the client's budget for {kind} of subscription {subscription} is spent \
                     ({} at once, {}/s)",
                    limit.burst, limit.per_second
                ),
            ),
            Take::Blocked(ms) => (
                ms,
                format!("ARM answered 429 for {kind} of subscription {subscription}"),
            ),
        };
        self.metrics.not_sent(verb, Refusal::RateLimit);
        let seconds = ((ms as u64).div_ceil(1000)).max(1);
        let mut p = ProviderError::new(
            ProviderErrorCode::Throttled,
            format!(
                "{} {url}: not sent: {why}; next in {seconds} s",
                verb.as_str()
            ),
        );
        p.retry_after_seconds = Some(seconds);
        Err(ArmCallError::Provider(p))
    }

    fn throttled_by_server(&self, subscription: &str, verb: Verb, now: i64, seconds: u64) {
        self.metrics.throttled_429.fetch_add(1, Ordering::Relaxed);
        self.metrics
            .wait_server_ms
            .fetch_add(seconds * 1000, Ordering::Relaxed);
        let mut buckets = lock(&self.buckets);
        let b = buckets.entry(subscription.to_string()).or_default();
        let bucket = if verb.writes() {
            &mut b.writes
        } else {
            &mut b.reads
        };
        bucket.block(now + seconds as i64 * 1000);
    }

    fn send(
        &self,
        verb: Verb,
        url: &str,
        body: Option<&str>,
        if_match: Option<&str>,
        token: &str,
        client_request_id: &str,
    ) -> Result<Sent, ureq::Error> {
        let mut req = ureq::http::Request::builder()
            .method(verb.as_str())
            .uri(url)
            .header("accept", "application/json")
            .header("authorization", format!("Bearer {token}"))
            .header("x-ms-client-request-id", client_request_id)
            .header("x-ms-return-client-request-id", "true");
        if verb.writes() {
            req = req.header("content-type", "application/json");
        }
        if let Some(e) = if_match {
            req = req.header("if-match", e);
        }
        let req = req.body(body.unwrap_or("").to_string())?;
        let agent = if verb.writes() {
            &self.writes
        } else {
            &self.reads
        };
        let mut resp = agent.run(req)?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp
            .body_mut()
            .with_config()
            .limit(self.options.max_body_bytes)
            .read_to_string()?;
        Ok(Sent {
            status,
            headers,
            text,
        })
    }
}

/// Whether `path` is one of the routes only the preview api-version has (reference fact 2):
/// `LOC/nodeImageVersions`, `MC/operations/{id}`, `MC/agentPools/{pool}/operations/{id}`.
fn preview_only(path: &str) -> bool {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let n = segs.len();
    let at = |i: usize| segs.get(i).map(String::as_str);
    (n >= 3 && at(n - 1) == Some("nodeimageversions") && at(n - 3) == Some("locations"))
        || (n >= 2
            && at(n - 2) == Some("operations")
            && segs.iter().any(|s| s == "managedclusters"))
}

/// The subscription a URL is under (lower case), or [`NO_SUBSCRIPTION`].
fn subscription_of(url: &str) -> String {
    let path = url
        .parse::<ureq::http::Uri>()
        .map(|u| u.path().to_string())
        .unwrap_or_default();
    let mut segs = path.split('/').filter(|s| !s.is_empty());
    while let Some(s) = segs.next() {
        if s.eq_ignore_ascii_case("subscriptions") {
            if let Some(id) = segs.next() {
                return id.to_ascii_lowercase();
            }
        }
    }
    NO_SUBSCRIPTION.to_string()
}

fn header(headers: &ureq::http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `Retry-After` in seconds: delay-seconds, or an HTTP date (RFC 9110 §10.2.3) counted from
/// `now_ms`.
pub(crate) fn retry_after(value: &str, now_ms: i64) -> Option<u64> {
    let value = value.trim();
    if let Ok(s) = value.parse::<u64>() {
        return Some(s);
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let ms = at.timestamp_millis() - now_ms;
    Some((ms.max(0) as u64).div_ceil(1000))
}

fn response(sent: &Sent, now_ms: i64, client_request_id: String) -> ArmResponse {
    let h = &sent.headers;
    let number = |name: &str| header(h, name).and_then(|v| v.parse::<u64>().ok());
    ArmResponse {
        status: sent.status,
        body: Value::Null,
        azure_async_operation: header(h, "azure-asyncoperation"),
        location: header(h, "location"),
        retry_after: header(h, "retry-after").and_then(|v| retry_after(&v, now_ms)),
        etag: header(h, "etag"),
        remaining_reads: number("x-ms-ratelimit-remaining-subscription-reads"),
        remaining_writes: number("x-ms-ratelimit-remaining-subscription-writes"),
        request_id: header(h, "x-ms-request-id"),
        correlation_id: header(h, "x-ms-correlation-request-id"),
        client_request_id,
    }
}

/// An error answer as ARM described it: `{"error": {…}}`, or the fields at the top (older
/// resource providers, operation-status bodies).
fn arm_error(sent: &Sent, resp: &ArmResponse) -> ArmError {
    let body: Value = serde_json::from_str(&sent.text).unwrap_or(Value::Null);
    let e = body.get("error").filter(|e| e.is_object()).unwrap_or(&body);
    let text = |k: &str| match e.get(k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let message = text("message").unwrap_or_else(|| {
        let start: String = sent.text.trim().chars().take(300).collect();
        if start.is_empty() {
            ureq::http::StatusCode::from_u16(sent.status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("no body")
                .to_string()
        } else {
            start
        }
    });
    ArmError {
        status: sent.status,
        code: text("code").unwrap_or_else(|| format!("HTTP{}", sent.status)),
        message,
        subcode: text("subcode"),
        retry_after: resp.retry_after,
        correlation_id: resp.correlation_id.clone(),
    }
}

fn credential_failure(verb: Verb, url: &str, e: AuthError) -> ProviderError {
    let code = match e.kind {
        AuthErrorKind::Unavailable => ProviderErrorCode::Unavailable,
        AuthErrorKind::Config | AuthErrorKind::Refused => ProviderErrorCode::Unauthenticated,
    };
    ProviderError::new(
        code,
        format!("{} {url}: not sent: no ARM token: {e}", verb.as_str()),
    )
}

/// Whether `e` happened before any byte of the request could have left: no connection.
fn not_sent(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    use ureq::Error as E;
    match e {
        E::HostNotFound
        | E::ConnectionFailed
        | E::BadUri(_)
        | E::Http(_)
        | E::InvalidProxyUrl
        | E::ConnectProxyFailed(_)
        | E::TlsRequired
        | E::RequireHttpsOnly(_)
        | E::Tls(_) => true,
        E::Timeout(t) => matches!(t, ureq::Timeout::Resolve | ureq::Timeout::Connect),
        E::Io(io) => matches!(
            io.kind(),
            K::ConnectionRefused
                | K::AddrNotAvailable
                | K::NetworkUnreachable
                | K::HostUnreachable
                | K::NotConnected
        ),
        _ => false,
    }
}

fn transport_failure(
    verb: Verb,
    url: &str,
    client_request_id: &str,
    e: &ureq::Error,
) -> ProviderError {
    let method = verb.as_str();
    if not_sent(e) {
        return ProviderError::new(
            ProviderErrorCode::Unavailable,
            format!("{method} {url}: ARM not reached ({e})"),
        );
    }
    let code = match e {
        ureq::Error::BodyExceedsLimit(_) => ProviderErrorCode::Internal,
        _ => ProviderErrorCode::Unavailable,
    };
    let mut p = ProviderError::new(
        code,
        format!("{method} {url}: the connection failed after the request was sent ({e})"),
    );
    if verb.writes() {
        mark_uncertain(&mut p);
        p.message
            .push_str(&format!(" (client request id {client_request_id})"));
    }
    p
}

/// A write whose outcome is unknown: ask, do not resend blindly.
fn mark_uncertain(p: &mut ProviderError) {
    p.uncertain = true;
    p.retryable = true;
    p.message.push_str(
        "; ARM may have received it: the outcome is unknown, ask before sending it again",
    );
}

/// A fresh `x-ms-client-request-id`: a GUID (version 4 layout) from the standard library's
/// per-process random keys and a counter. Unique, not secret.
fn new_request_id() -> String {
    use std::hash::BuildHasher;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let a = std::collections::hash_map::RandomState::new().hash_one(n);
    let b = std::collections::hash_map::RandomState::new().hash_one((n, a));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        (a >> 32) as u32,
        (a >> 16) as u16,
        a as u16 & 0x0fff,
        ((b >> 48) as u16 & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preview_routes_are_recognised() {
        let loc = "/subscriptions/s/providers/Microsoft.ContainerService/locations/westeurope";
        let mc = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c";
        assert!(preview_only(&format!("{loc}/nodeImageVersions")));
        assert!(preview_only(&format!("{mc}/operations/op1")));
        assert!(preview_only(&format!("{mc}/agentPools/np1/operations/op1")));
        assert!(!preview_only(&format!("{loc}/kubernetesVersions")));
        assert!(!preview_only(mc));
        assert!(!preview_only(&format!("{mc}/agentPools/np1")));
        assert!(!preview_only(&format!("{mc}/agentPools/operations")));
        assert!(!preview_only(
            "/providers/Microsoft.ContainerService/operations"
        ));
    }

    #[test]
    fn the_subscription_is_read_from_the_path() {
        assert_eq!(
            subscription_of("https://m.example/subscriptions/ABC-1/resourceGroups/rg?x=1"),
            "abc-1"
        );
        assert_eq!(
            subscription_of("https://m.example/providers/Microsoft.ContainerService/locations/l/operationStatus/x"),
            NO_SUBSCRIPTION
        );
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        assert_eq!(retry_after("17", 0), Some(17));
        // Sun, 06 Nov 1994 08:49:37 GMT = 784111777 s.
        let now = 784_111_777_000 - 30_500;
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(31));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now + 60_000),
            Some(0)
        );
        assert_eq!(retry_after("soon", 0), None);
    }

    #[test]
    fn a_bucket_waits_briefly_then_refuses() {
        let limit = BucketLimit {
            burst: 2.0,
            per_second: 4.0,
        };
        let mut b = Bucket::default();
        assert_eq!(b.take(0, limit, 1000), Take::Now);
        assert_eq!(b.take(0, limit, 1000), Take::Now);
        assert_eq!(b.take(0, limit, 1000), Take::After(250));
        assert_eq!(b.take(0, limit, 1000), Take::After(500));
        assert_eq!(b.take(0, limit, 400), Take::Empty(750));
        // Refilled over a second: 4 tokens less the 2 reserved.
        assert_eq!(b.take(1000, limit, 0), Take::Now);
        assert_eq!(b.take(1000, limit, 0), Take::Now);
        assert_eq!(b.take(1000, limit, 0), Take::Empty(250));
    }

    #[test]
    fn a_429_blocks_the_bucket_then_lets_one_through() {
        let limit = BucketLimit {
            burst: 10.0,
            per_second: 1.0,
        };
        let mut b = Bucket::default();
        assert_eq!(b.take(0, limit, 0), Take::Now);
        b.block(30_000);
        assert_eq!(b.take(1_000, limit, 0), Take::Blocked(29_000));
        assert_eq!(b.take(30_000, limit, 0), Take::Now);
        assert_eq!(b.take(30_000, limit, 0), Take::Empty(1000));
    }

    #[test]
    fn request_ids_are_guids_and_fresh() {
        let a = new_request_id();
        let b = new_request_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(matches!(a.as_bytes()[19], b'8' | b'9' | b'a' | b'b'), "{a}");
    }
}
