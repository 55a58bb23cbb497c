//! The daemon's HTTP API (`shared/spec/api.md`): Azure Kubernetes Fleet Manager's resources and
//! envelopes under `/api/v1/fleets/{fleet}`, RFC 9457 problems, strong ETags, bearer tokens
//! with roles, the audit log. Handlers are thin: they check the caller and the body, then run
//! one job on the engine thread ([`crate::daemon::Daemon::call`]) that checks preconditions,
//! applies the command and writes the resource metadata in the command's own step — so a
//! request either changes the engine and the store together or changes nothing.

mod arm;
mod auth;
mod envelope;
mod events;
mod feed;
mod fleet;
mod gates;
mod members;
mod openapi;
mod problem;
mod profiles;
mod runs;
mod strategies;
mod subscriptions;

pub use arm::API_VERSIONS;
pub use auth::{token_hash, Auth, Caller, Need, Role};
pub use fleet::MAX_SIMULATIONS;
pub use problem::Problem;

use crate::daemon::{Daemon, Worker};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::handler::Handler;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A request that has waited this long for the engine is answered 503 without being run.
pub const REQUEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Request bodies larger than this are refused (413).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The most bytes of a members import's body (`POST /members`): 100,000 members at about
/// 600 bytes each, as `GET /members` lists them.
pub const MAX_IMPORT_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The most bytes `method` on `path` may send as its body.
fn body_limit(method: &axum::http::Method, path: &str) -> usize {
    let import = method == axum::http::Method::POST
        && path
            .strip_prefix("/api/v1/fleets/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(_, resource)| resource == "members");
    if import {
        MAX_IMPORT_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    }
}

/// The internal header that carries a request's key from [`around_request`] to its handler;
/// one sent by a client is removed first.
const REQUEST_KEY: &str = "x-waverun-request-key";

/// A request's id (the client's `x-request-id`, or the daemon's own) and its key (always the
/// daemon's own, unique to the request): the audit log records the id as a field and tells by
/// the key whether a request has its entry.
#[derive(Clone, Debug)]
pub(super) struct RequestId {
    /// What the client sees and the audit log shows.
    pub(super) id: String,
    /// Unique to this request.
    pub(super) key: String,
}

/// The daemon's public URL (`publicUrl`: `https://host[:port]`, no trailing slash), for the
/// absolute links it hands out; set on every request by [`around_request`] when configured.
#[derive(Clone, Debug)]
pub struct PublicUrl(pub Arc<str>);

/// What every handler shares.
pub struct ApiState {
    daemon: Arc<Daemon>,
    fleet: String,
    auth: Auth,
    requests: AtomicU64,
    boot: u64,
    /// `true` once the daemon is stopping: open event streams end, so that the graceful
    /// shutdown, which waits for every connection, can finish.
    closing: tokio::sync::watch::Sender<bool>,
    /// The engine module, for `POST /simulate` (a fresh instance per simulation).
    sandbox: Option<crate::runtime::PluginModule>,
    /// Bounds the simulations running at once.
    simulations: tokio::sync::Semaphore,
    /// Runs' resources as last computed, each with the engine version it is true at.
    runs: std::sync::Mutex<std::collections::HashMap<String, runs::CachedRun>>,
    /// Where clients reach the daemon, for absolute links (none: links are relative).
    public_url: Option<PublicUrl>,
    /// Read connections of the store: the event and audit logs are read without the engine.
    readers: Arc<feed::Readers>,
    /// New events, read once per commit for every live stream.
    feed: Arc<feed::Feed>,
    /// Live streams, bounded per token and in all.
    streams: Arc<feed::StreamLimits>,
    /// Events out (`eventSubscriptions`), when the daemon runs them.
    webhooks: Option<Arc<crate::webhooks::service::Webhooks>>,
    /// Among several replicas: whether this one leads (a follower answers changes with 503
    /// and the leader's address).
    replica: Option<Arc<crate::daemon::ReplicaStatus>>,
}

/// Live event streams one token may hold open, by default.
pub const STREAMS_PER_TOKEN: usize = 100;
/// Live event streams in all, by default.
pub const STREAMS: usize = 2_000;

impl ApiState {
    /// The API of the fleet `fleet`, run by `daemon`, for the callers `auth` knows.
    pub fn new(daemon: Arc<Daemon>, fleet: &str, auth: Auth) -> ApiState {
        let boot = crate::clock::SystemClock.now_ms() as u64;
        // The store's read connections are opened through the engine thread, which owns the
        // store; used without it from then on.
        let readers = daemon
            .call(|w| {
                (0..feed::READERS)
                    .map(|_| w.engine().stored().reader())
                    .collect::<Result<Vec<_>, _>>()
            })
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        ApiState {
            readers: Arc::new(feed::Readers::new(readers)),
            feed: Default::default(),
            streams: Arc::new(feed::StreamLimits::new(STREAMS_PER_TOKEN, STREAMS)),
            daemon,
            fleet: fleet.to_string(),
            auth,
            requests: AtomicU64::new(0),
            boot,
            closing: tokio::sync::watch::Sender::new(false),
            sandbox: None,
            simulations: tokio::sync::Semaphore::new(MAX_SIMULATIONS),
            runs: Default::default(),
            public_url: None,
            webhooks: None,
            replica: None,
        }
    }

    /// `eventSubscriptions` are served, over this handle on events out.
    pub fn with_webhooks(mut self, webhooks: Arc<crate::webhooks::service::Webhooks>) -> ApiState {
        self.webhooks = Some(webhooks);
        self
    }

    /// This daemon is one of several replicas, as `status` says.
    pub fn with_replica(mut self, status: Arc<crate::daemon::ReplicaStatus>) -> ApiState {
        self.replica = Some(status);
        self
    }

    /// A follower's answer to a change: 503 `NotLeader`, naming the leader and where it is
    /// reached (also in `x-waverun-leader`), as the leader last recorded it. `None` on the
    /// leader, and on a daemon alone on its store.
    async fn not_leader(&self) -> Option<(Problem, Option<String>)> {
        let r = self.replica.as_ref().filter(|r| !r.leading())?;
        let recorded = self
            .readers
            .read(|s| s.meta(crate::daemon::LEADER_URL))
            .await
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_str::<serde_json::Value>(&v).ok());
        let seen = r.leader();
        // The recorded leader counts only if it is the one the lease names now.
        let leader = recorded.filter(|v| {
            seen.as_ref().is_some_and(|(h, e)| {
                v["holder"].as_str() == Some(h.as_str()) && v["epoch"].as_u64() == Some(*e)
            })
        });
        let url = leader
            .as_ref()
            .and_then(|v| v["url"].as_str().map(str::to_string));
        let detail = match (&seen, &url) {
            (Some((h, e)), Some(u)) => format!(
                "this replica ({}) follows; the leader is {h} (epoch {e}) at {u}: send changes there",
                r.holder()
            ),
            (Some((h, e)), None) => format!(
                "this replica ({}) follows; the leader is {h} (epoch {e}), whose address is not recorded yet: try again shortly",
                r.holder()
            ),
            (None, _) => format!(
                "this replica ({}) follows, and no replica leads right now (a takeover is under way): try again shortly",
                r.holder()
            ),
        };
        Some((
            Problem::new(StatusCode::SERVICE_UNAVAILABLE, "NotLeader", detail),
            url,
        ))
    }

    /// Links the API hands out are absolute, under `url` (`https://host[:port]`).
    pub fn with_public_url(mut self, url: Option<&str>) -> ApiState {
        self.public_url = url.map(|u| PublicUrl(Arc::from(u.trim_end_matches('/'))));
        self
    }

    /// Simulations (`POST /simulate`) run on fresh instances of `module`.
    pub fn with_sandbox(mut self, module: crate::runtime::PluginModule) -> ApiState {
        self.sandbox = Some(module);
        self
    }

    /// At most `per_token` live event streams per token and `total` in all.
    pub fn with_stream_limits(mut self, per_token: usize, total: usize) -> ApiState {
        self.streams = Arc::new(feed::StreamLimits::new(per_token, total));
        self
    }

    /// Starts the fan-out of new events (once), on the current runtime.
    fn start_feed(&self) {
        self.feed
            .start(self.readers.clone(), self.daemon.events(), self.closing());
    }

    /// The daemon is stopping: ends the open event streams.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Whether the daemon is stopping, as it changes.
    fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// The fleet's name.
    pub fn fleet(&self) -> &str {
        &self.fleet
    }

    /// 404 unless `fleet` is the one this daemon serves.
    fn check_fleet(&self, fleet: &str) -> Result<(), Problem> {
        if fleet == self.fleet {
            Ok(())
        } else {
            Err(Problem::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!(
                    "fleet {fleet:?} is not served here; this daemon serves {:?}",
                    self.fleet
                ),
            ))
        }
    }

    /// The caller, after the fleet check.
    fn caller(&self, fleet: &str, headers: &HeaderMap, need: Need) -> Result<Caller, Problem> {
        self.check_fleet(fleet)?;
        self.auth.check(headers, need)
    }

    /// A new key, unique to one request of this daemon (also across restarts: the boot time
    /// leads it).
    fn new_request_key(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        format!("{:x}-{n}", self.boot)
    }

    /// The request's id and key, as [`around_request`] set them in its headers.
    fn request_id(&self, headers: &HeaderMap) -> RequestId {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let key = get(REQUEST_KEY).unwrap_or_else(|| self.new_request_key());
        RequestId {
            id: get("x-request-id")
                .filter(|v| v.len() <= 128)
                .unwrap_or_else(|| key.clone()),
            key,
        }
    }

    /// Runs `f` on the engine thread, unless the request's deadline ([`REQUEST_DEADLINE`])
    /// passes while it waits for its turn: then nothing is done and the answer is 503. Once it
    /// has begun, a job finishes (a step is never cut in half).
    async fn engine<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T, Problem> + Send + 'static,
    ) -> Result<T, Problem> {
        let daemon = self.daemon.clone();
        let deadline = std::time::Instant::now() + REQUEST_DEADLINE;
        let job = move |w: &mut Worker| {
            if std::time::Instant::now() > deadline {
                return Err(Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "DeadlineExceeded",
                    format!(
                        "the engine was busy for longer than the request's deadline ({} s); nothing was changed",
                        REQUEST_DEADLINE.as_secs()
                    ),
                ));
            }
            f(w)
        };
        tokio::task::spawn_blocking(move || daemon.call(job))
            .await
            .map_err(|_| Problem::unavailable("the engine call was cancelled"))??
    }
}

use crate::clock::Clock;

/// A query string, or a 400 problem naming the parameter at fault (never axum's plain-text
/// rejection).
pub(super) struct Q<T>(pub T);

/// A query's parameters, and what else of the request they need (a list's next link).
pub(super) trait FromQuery: serde::de::DeserializeOwned {
    /// Takes what it needs of the request, once the parameters are read.
    fn with_request(&mut self, _parts: &axum::http::request::Parts) {}
}

impl<T, S> axum::extract::FromRequestParts<S> for Q<T>
where
    T: FromQuery,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Problem> {
        match axum::extract::Query::<T>::try_from_uri(&parts.uri) {
            Ok(axum::extract::Query(mut v)) => {
                T::with_request(&mut v, parts);
                Ok(Q(v))
            }
            Err(e) => {
                let text = e.body_text();
                let detail = text
                    .strip_prefix("Failed to deserialize query string: ")
                    .unwrap_or(&text)
                    .to_string();
                // `name: why` names the parameter; an unknown one is named by serde.
                let target = match detail.split_once(": ") {
                    Some((t, _)) if !t.contains(' ') => t.to_string(),
                    _ => String::new(),
                };
                let detail = if target.is_empty() {
                    format!("the query string: {detail}")
                } else {
                    detail
                };
                Err(Problem::new(StatusCode::BAD_REQUEST, "InvalidField", detail).at(target))
            }
        }
    }
}

/// `$top`: 1 to 1000.
fn top<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v: Option<String> = serde::Deserialize::deserialize(d)?;
    match v {
        None => Ok(None),
        Some(t) => match t.parse::<u32>() {
            Ok(n) if (1..=1000).contains(&n) => Ok(Some(n)),
            _ => Err(serde::de::Error::custom(format!(
                "{t:?} is not a whole number from 1 to 1000"
            ))),
        },
    }
}

/// A JSON request body: 415 unless it is JSON, 413 over [`MAX_BODY_BYTES`], 400 if not UTF-8.
fn json_body(
    headers: &HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<String, Problem> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|v| v == "application/json" || v.ends_with("+json"));
    if !is_json {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PayloadTooLarge",
                format!("the body is over {MAX_BODY_BYTES} bytes"),
            )
        } else {
            Problem::new(StatusCode::BAD_REQUEST, "InvalidBody", e.body_text())
        }
    })?;
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Problem::invalid("", "the body is not UTF-8 text"))
}

/// The body of an action that takes none (`start`, `stop`, `approve`): nothing, or an empty
/// JSON object. Anything else is refused as a body would be (413, 415, 400 naming the field),
/// never ignored.
fn no_body(
    headers: &HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<(), Problem> {
    if body.as_ref().is_ok_and(|b| b.is_empty()) {
        return Ok(());
    }
    /// The object such an action takes: no fields.
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Empty {}
    let text = json_body(headers, body)?;
    waverun_core::document::from_json_str::<Empty>(&text)
        .map(|_| ())
        .map_err(|e| Problem::engine(&e, ""))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(st): State<Arc<ApiState>>) -> Response {
    let ready = st.engine(|w| {
        let wakeup = w.engine().next_wakeup();
        wakeup.map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))
    });
    let role = match &st.replica {
        None => String::new(),
        Some(r) if r.leading() => format!(
            "leader {} (epoch {})\n",
            r.holder(),
            r.epoch().unwrap_or_default()
        ),
        Some(r) => match r.leader() {
            Some((h, e)) => format!("follower {} (leader {h}, epoch {e})\n", r.holder()),
            None => format!("follower {} (no leader right now)\n", r.holder()),
        },
    };
    match ready.await {
        Ok(_) => (StatusCode::OK, format!("ready\n{role}")).into_response(),
        Err(p) => p.into_response(),
    }
}

/// `GET /openapi.json`: the API's OpenAPI 3.1 document (public, like `/healthz`).
async fn openapi_json(State(st): State<Arc<ApiState>>) -> Response {
    axum::Json(openapi::document(&st.fleet)).into_response()
}

/// `GET /metrics`: the Prometheus text exposition; the counts by state are taken now.
async fn metrics(State(st): State<Arc<ApiState>>, headers: HeaderMap) -> Result<Response, Problem> {
    st.auth.check(&headers, Need::Read)?;
    let hooks = st.webhooks.clone();
    let replica = st.replica.clone();
    let text = st
        .engine(move |w| {
            let map = |e: crate::daemon::DaemonError| Problem::daemon(&e, &|p: &str| p.to_string());
            let runs = w.engine().tallies().map_err(map)?;
            let m = w.engine().metrics();
            m.set_runs(&runs);
            let mut samples = w.provider_metrics();
            if let Some(r) = &replica {
                samples.extend(r.metrics());
            }
            if let Some(h) = &hooks {
                let r = w.engine().stored();
                let mut subs = Vec::new();
                for s in r
                    .resources(subscriptions::KIND)
                    .map_err(envelope::store_problem)?
                {
                    let dead = r
                        .dead_letter_count(&s.name)
                        .map_err(envelope::store_problem)?;
                    subs.push((s.name, dead));
                }
                samples.extend(h.metrics(&subs));
            }
            Ok(m.encode_with(&samples))
        })
        .await?;
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

async fn no_such_path(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no such path: {}", uri.path()),
    )
}

/// Every request: gives it a request id (the client's `x-request-id`, else a new one, echoed in
/// the answer); reads a mutation's body whole first (one over [`MAX_BODY_BYTES`], or a members
/// import's [`MAX_IMPORT_BODY_BYTES`], is refused 413
/// here, whatever the route would have done with it); makes every error answer an RFC 9457
/// problem (axum's own — a 405 with its `Allow`, a path it cannot decode — are plain text);
/// logs the request once answered (method, path without the query string, status, time; never
/// a header, so never a token); and audits every mutation that failed without being audited in
/// its own step — refused before it reached the engine (no token, a weak one, a bad body) or
/// not run at all (503: the deadline passed, the engine is unavailable). A mutation that
/// succeeded is audited in the step that made it.
async fn around_request(
    State(st): State<Arc<ApiState>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    // The key is always the daemon's: a client's would let it pass off a refused request as
    // audited already.
    req.headers_mut().remove(REQUEST_KEY);
    let ids = st.request_id(req.headers());
    let request_id = ids.id.clone();
    if let Ok(v) = axum::http::HeaderValue::from_str(&request_id) {
        req.headers_mut().insert("x-request-id", v);
    }
    if let Ok(v) = axum::http::HeaderValue::from_str(&ids.key) {
        req.headers_mut().insert(REQUEST_KEY, v);
    }
    if let Some(u) = &st.public_url {
        req.extensions_mut().insert(u.clone());
    }
    let mutation = !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS");
    let who = st
        .auth
        .check(req.headers(), Need::Read)
        .map(|c| c.name)
        .unwrap_or_else(|_| "unauthenticated".to_string());
    let began = std::time::Instant::now();
    // A follower takes no change (a simulation changes nothing): it says where the leader is.
    let mut leader_url = None;
    let read = if mutation {
        // The token and its role are checked before a byte of the body is read: a caller
        // that may not make this request cannot make the daemon buffer its body.
        let check = st.auth.check(req.headers(), need_of(&method, &path));
        let following = match check {
            Ok(_) if !path.ends_with("/simulate") => st.not_leader().await,
            _ => None,
        };
        match check {
            Err(p) => Err(p),
            Ok(_) if following.is_some() => {
                let (p, url) = following.expect("checked");
                leader_url = Some(url);
                Err(p)
            }
            Ok(_) => {
                let (parts, body) = req.into_parts();
                let limit = body_limit(&method, &path);
                match tokio::time::timeout(BODY_READ_TIMEOUT, read_body(body, limit)).await {
                    Ok(Ok(bytes)) => Ok(axum::extract::Request::from_parts(
                        parts,
                        axum::body::Body::from(bytes),
                    )),
                    Ok(Err(p)) => Err(p),
                    Err(_) => Err(Problem::new(
                        StatusCode::REQUEST_TIMEOUT,
                        "RequestTimeout",
                        format!(
                            "the body was not received within {} s",
                            BODY_READ_TIMEOUT.as_secs()
                        ),
                    )),
                }
            }
        }
    } else {
        Ok(req)
    };
    let mut response = match read {
        Ok(req) => next.run(req).await,
        Err(p) => p.into_response(),
    };
    let status = response.status();
    if (status.is_client_error() || status.is_server_error())
        && response.extensions().get::<Problem>().is_none()
    {
        response = as_problem(response, &method, &path).await;
    }
    let ms = began.elapsed().as_secs_f64() * 1000.0;
    if status.is_server_error() {
        tracing::warn!(%method, %path, status = status.as_u16(), ms, request_id = %request_id, "request");
    } else {
        tracing::info!(%method, %path, status = status.as_u16(), ms, request_id = %request_id, "request");
    }
    if let Some(url) = leader_url.as_ref() {
        // Retry there (the CLI follows it), or here shortly when no leader is known yet.
        let headers = response.headers_mut();
        headers.insert(
            header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
        if let Some(v) = url
            .as_deref()
            .and_then(|u| axum::http::HeaderValue::from_str(u).ok())
        {
            headers.insert("x-waverun-leader", v);
        }
    }
    let failed = status.is_client_error() || status.is_server_error();
    // A follower's refusal is not audited: it wrote nothing, and cannot (the leader audits
    // the change when it is sent there).
    if mutation && failed && leader_url.is_none() && path.starts_with("/api/v1/fleets/") {
        let problem = response.extensions().get::<Problem>();
        let entry = crate::store::NewAudit {
            at: crate::now_rfc3339(),
            who,
            action: format!("{method} {}", path.trim_start_matches("/api/v1")),
            target: path.trim_start_matches("/api/v1").to_string(),
            request_id: request_id.clone(),
            key: ids.key.clone(),
            outcome: problem.map(|p| p.code.clone()).unwrap_or_else(|| {
                status
                    .canonical_reason()
                    .unwrap_or("Refused")
                    .replace(' ', "")
            }),
            detail: problem.map(|p| p.detail.clone()),
        };
        st.audit_failure(entry).await;
    }
    if method == axum::http::Method::HEAD {
        *response.body_mut() = axum::body::Body::empty();
    }
    if let Ok(v) = axum::http::HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    response
}

/// How long a request's body may take to arrive, once its headers have.
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a mutation needs of its caller, from its method and path alone (before its body is
/// read). Each handler checks again; this table must never ask more than the handler does
/// (`api_needs_match_the_handlers` checks every mutating route).
fn need_of(method: &axum::http::Method, path: &str) -> Need {
    let Some(rest) = path.strip_prefix("/api/v1/fleets/") else {
        return Need::Read;
    };
    let resource = rest.split('/').nth(1).unwrap_or("");
    match (method.as_str(), resource) {
        (_, "freezes" | "autoUpgradeProfiles" | "eventSubscriptions") => Need::Administer,
        (_, "gates") => Need::Approve,
        ("POST", "simulate") => Need::Read,
        (_, "members" | "updateStrategies" | "updateRuns") => Need::Operate,
        _ => Need::Read,
    }
}

/// How long a failed mutation's answer waits for its audit entry to be written (the engine may
/// be what failed: past this, the entry is written when the engine gets to it).
const AUDIT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl ApiState {
    /// Writes the audit entry of a failed mutation unless its step wrote one. The job has no
    /// deadline (a request that timed out waiting for the engine is audited all the same);
    /// the answer waits for it at most [`AUDIT_WAIT`]. When the engine is gone, the entry goes
    /// to the log instead.
    async fn audit_failure(&self, entry: crate::store::NewAudit) {
        let daemon = self.daemon.clone();
        let request_id = entry.request_id.clone();
        let logged = entry.clone();
        let write = tokio::task::spawn_blocking(move || {
            daemon.call(move |w| {
                if w.engine().stored().audited(&entry.key).unwrap_or(false) {
                    return Ok(());
                }
                w.engine().record(crate::daemon::StepWrites {
                    audit: Some(entry),
                    ..Default::default()
                })
            })
        });
        let failed = match tokio::time::timeout(AUDIT_WAIT, write).await {
            Err(_) => {
                tracing::warn!(request_id = %request_id, "the audit entry of a failed request waits for the engine");
                return;
            }
            Ok(Ok(Ok(Ok(())))) => return,
            Ok(Ok(Ok(Err(e)))) => e.to_string(),
            Ok(Ok(Err(_))) => "the engine is not running".to_string(),
            Ok(Err(_)) => "the audit write was cancelled".to_string(),
        };
        tracing::error!(
            request_id = %request_id,
            who = %logged.who,
            action = %logged.action,
            target = %logged.target,
            outcome = %logged.outcome,
            error = %failed,
            "the audit entry of a failed request could not be stored"
        );
    }
}

/// A request body, whole: 413 past `limit` bytes, 400 when it breaks off.
async fn read_body(body: axum::body::Body, limit: usize) -> Result<axum::body::Bytes, Problem> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "InvalidBody",
                format!("the body could not be read: {e}"),
            )
        })?;
        if buf.len() + chunk.len() > limit {
            // The rest is read and dropped (as much again at most, within the body deadline),
            // so that the client, still writing, reads the 413 rather than a reset connection.
            // Only a caller whose token and role were checked gets this far.
            let mut dropped = buf.len() + chunk.len();
            drop(buf);
            while dropped <= 2 * limit {
                match stream.next().await {
                    Some(Ok(c)) => dropped += c.len(),
                    _ => break,
                }
            }
            return Err(Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PayloadTooLarge",
                format!("the body is over {limit} bytes"),
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.into())
}

/// An error answer that is not a problem (axum's plain-text or empty ones) as one, its headers
/// (`Allow` of a 405) kept.
async fn as_problem(response: Response, method: &axum::http::Method, path: &str) -> Response {
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let status = parts.status;
    let problem = if status == StatusCode::METHOD_NOT_ALLOWED {
        let allow = parts
            .headers
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .replace(',', ", ");
        Problem::new(
            status,
            "MethodNotAllowed",
            format!("{method} is not allowed on {path}; it allows {allow}"),
        )
    } else if let Some(why) = text.strip_prefix("Invalid URL: ") {
        // A path segment axum could not decode: `... `name` ...` names the parameter.
        let target = why.split('`').nth(1).unwrap_or("").to_string();
        Problem::new(status, "InvalidField", format!("the path: {why}")).at(target)
    } else {
        let reason = status.canonical_reason().unwrap_or("Error");
        let detail = if text.is_empty() {
            reason.to_string()
        } else {
            text
        };
        Problem::new(status, &reason.replace(' ', ""), detail)
    };
    let mut r = problem.into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            r.headers_mut().append(name.clone(), value.clone());
        }
    }
    r
}

/// The API's name of the engine's gate `engine_id` (a GUID, as Azure names gates): what
/// `/gates/{name}` and the webhooks' links use.
pub fn gate_name(engine_id: &str) -> String {
    gates::guid(engine_id)
}

/// The API's routes over `state`.
pub fn router(state: Arc<ApiState>) -> Router {
    let fleet = Router::new()
        .route("/updateStrategies", get(strategies::list))
        .route(
            "/updateStrategies/{name}",
            get(strategies::show)
                .put(strategies::put)
                .delete(strategies::delete),
        )
        .route("/updateRuns", get(runs::list))
        .route(
            "/updateRuns/{name}",
            get(runs::show).put(runs::put).delete(runs::delete),
        )
        .route("/updateRuns/{name}/start", post(runs::start))
        .route("/updateRuns/{name}/stop", post(runs::stop))
        .route("/updateRuns/{name}/skip", post(runs::skip))
        .route("/updateRuns/{name}/retry", post(runs::retry_run))
        .route("/updateRuns/{name}/plan", get(runs::plan))
        .route("/updateRuns/{name}/forecast", get(runs::forecast))
        .route(
            "/updateRuns/{name}/forecastState",
            get(runs::forecast_state),
        )
        .route("/autoUpgradeProfiles", get(profiles::list))
        .route(
            "/autoUpgradeProfiles/{name}",
            get(profiles::show)
                .put(profiles::put)
                .delete(profiles::delete),
        )
        .route(
            "/autoUpgradeProfiles/{name}/generateUpdateRun",
            post(profiles::generate),
        )
        .route("/freezes", get(fleet::freezes).put(fleet::put_freezes))
        .route("/releases", get(fleet::releases))
        .route("/simulate", post(fleet::simulate))
        .route("/gates", get(gates::list))
        .route("/gates/{id}", get(gates::show).patch(gates::patch))
        .route("/gates/{id}/approve", post(gates::approve))
        .route("/gates/{id}/fail", post(gates::fail))
        .route(
            "/members",
            get(members::list)
                .post(members::import.layer(DefaultBodyLimit::max(MAX_IMPORT_BODY_BYTES))),
        )
        .route(
            "/members/{name}",
            get(members::show)
                .put(members::put)
                .patch(members::patch)
                .delete(members::delete),
        )
        .route("/eventSubscriptions", get(subscriptions::list))
        .route(
            "/eventSubscriptions/{name}",
            get(subscriptions::show)
                .put(subscriptions::put)
                .delete(subscriptions::delete),
        )
        .route(
            "/eventSubscriptions/{name}/rotateSecret",
            post(subscriptions::rotate),
        )
        .route("/eventSubscriptions/{name}/test", post(subscriptions::test))
        .route(
            "/eventSubscriptions/{name}/deliveries",
            get(subscriptions::deliveries),
        )
        .route(
            "/eventSubscriptions/{name}/deadLetters",
            get(subscriptions::dead_letters),
        )
        .route(
            "/eventSubscriptions/{name}/deadLetters/redeliver",
            post(subscriptions::redeliver),
        )
        .route("/events", get(events::list))
        .route("/audit", get(events::audit));
    let api = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi_json))
        .route("/api/v1/fleets", get(fleet::list_fleets))
        .route("/api/v1/fleets/{fleet}", get(fleet::show_fleet))
        .nest("/api/v1/fleets/{fleet}", fleet)
        .fallback(no_such_path)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state.clone());
    // The middleware goes around the whole router (not each route, as `layer` would put it),
    // so that it sees every answer as it leaves: a 405 with its `Allow` header.
    let app = Router::new()
        .merge(crate::portal::router())
        .fallback_service(api)
        .layer(axum::middleware::from_fn_with_state(state, around_request));
    // ARM's paths are rewritten to waverun's before `app` routes them (a layer on `app` itself
    // would run after its routing), so they reach the same handlers, checks and audit.
    Router::new()
        .fallback_service(app)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(arm::ArmState::default()),
            arm::arm_paths,
        ))
}
