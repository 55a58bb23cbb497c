//! `eventSubscriptions`: where events go out (Event Grid's shape, checked by
//! [`crate::webhooks::subscription`]), each with its delivery status, its delivery log, its dead
//! letters (listed, delivered again on request), a test delivery and a secret rotation.
//! Everything here takes the admin role — reads too: a subscription names an endpoint, which
//! can carry credentials of its own.
//!
//! Secrets: one the daemon generates is in the answer that created it (or rotated it) at
//! `properties.signing.secret`, and never again — not in reads, the audit, the log, or the
//! ETag's input.

use super::auth::Caller;
use super::envelope::{self, audit, envelope, refuse, respond, store_problem, stored_body};
use super::envelope::{written, Paging, Preconditions};
use super::problem::Problem;
use super::{json_body, no_body, ApiState, Need};
use crate::daemon::{StepWrites, Worker};
use crate::store::ResourceMeta;
use crate::webhooks::service::Webhooks;
use crate::webhooks::stored::Stored;
use crate::webhooks::subscription;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub(super) const KIND: &str = crate::webhooks::driver::KIND;
const WHAT: &str = "event subscription";

/// The handle on events out; 503 when the daemon runs without it (an API built in a test).
fn hooks(st: &ApiState) -> Result<Arc<Webhooks>, Problem> {
    st.webhooks
        .clone()
        .ok_or_else(|| Problem::unavailable("events out are not running in this daemon"))
}

/// What every change of a subscription starts from: the caller (an admin), the handle on
/// events out, the request's preconditions and id, and the audit entry's target.
struct Change {
    caller: Caller,
    hooks: Arc<Webhooks>,
    pre: Preconditions,
    request_id: super::RequestId,
    target: String,
}

fn change(st: &ApiState, fleet: &str, name: &str, headers: &HeaderMap) -> Result<Change, Problem> {
    Ok(Change {
        caller: st.caller(fleet, headers, Need::Administer)?,
        hooks: hooks(st)?,
        pre: Preconditions::of(headers),
        request_id: st.request_id(headers),
        target: envelope::resource_id(fleet, KIND, name),
    })
}

impl Change {
    /// The request's audit entry, as `action`.
    fn audit(&self, action: &str) -> crate::store::NewAudit {
        audit(&self.caller, action, &self.target, &self.request_id)
    }
}

/// The stored body, or 503 when it does not read (it was written by this daemon: it should).
fn body_of(meta: &ResourceMeta) -> Result<Stored, Problem> {
    serde_json::from_value(stored_body(meta)).map_err(|e| {
        Problem::unavailable(&format!(
            "the stored event subscription {:?} does not read: {e}",
            meta.name
        ))
    })
}

/// The resource as reads show it (public properties, then its delivery status), and the ETag
/// (over the public properties alone: the status moves with every delivery).
fn render(
    w: &mut Worker,
    hooks: &Webhooks,
    fleet: &str,
    meta: &ResourceMeta,
) -> Result<(Value, String), Problem> {
    let stored = body_of(meta)?;
    let (mut v, etag) = envelope(fleet, meta, stored.public_properties());
    let reader = w.engine().stored();
    let cursor = reader
        .webhook_cursors()
        .map_err(store_problem)?
        .get(&meta.name)
        .copied()
        .unwrap_or(stored.start_after);
    let dead = reader
        .dead_letter_count(&meta.name)
        .map_err(store_problem)?;
    let last = reader.last_event_seq().map_err(store_problem)?;
    let stats = hooks.stats();
    let outcomes = stats.outcomes();
    let count = |o: &str| {
        outcomes
            .iter()
            .find(|((n, k), _)| *n == meta.name && *k == o)
            .map_or(0, |(_, v)| *v)
    };
    v["properties"]["status"] = json!({
        "cursor": cursor,
        "logEnd": last,
        // Events after the stored cursor, matching or not (the driver stores it within
        // 200 ms of a delivery).
        "lag": last.saturating_sub(cursor),
        "deadLetters": dead,
        "attemptsSinceStart": {
            "delivered": count("delivered"),
            "failed": count("failed"),
            "deadLettered": count("deadLettered"),
        },
    });
    Ok((v, etag))
}

/// 404 unless it exists, 412 unless `If-Match` holds; its metadata and body.
fn existing(
    w: &mut Worker,
    hooks: &Webhooks,
    fleet: &str,
    name: &str,
    pre: &Preconditions,
) -> Result<(ResourceMeta, Stored), Problem> {
    let meta = w
        .engine()
        .stored()
        .resource(KIND, name)
        .map_err(store_problem)?
        .ok_or_else(|| Problem::not_found(WHAT, name))?;
    let etag = render(w, hooks, fleet, &meta)?.1;
    pre.check(Some(&etag))?;
    let stored = body_of(&meta)?;
    Ok((meta, stored))
}

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(paging): super::Q<Paging>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Administer)?;
    let hooks = hooks(&st)?;
    let f = fleet.clone();
    let window = paging.window();
    let items = st
        .engine(move |w| {
            let metas = window.read(w.engine().stored(), KIND)?;
            metas
                .iter()
                .map(|m| Ok((m.name.clone(), render(w, &hooks, &f, m)?.0)))
                .collect::<Result<Vec<_>, Problem>>()
        })
        .await?;
    let path = format!("/api/v1/fleets/{fleet}/{KIND}");
    Ok(axum::Json(envelope::page(&path, items, &paging)).into_response())
}

pub(super) async fn show(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Administer)?;
    let hooks = hooks(&st)?;
    let (v, etag) = st
        .engine(move |w| {
            let meta = w
                .engine()
                .stored()
                .resource(KIND, &name)
                .map_err(store_problem)?
                .ok_or_else(|| Problem::not_found(WHAT, &name))?;
            render(w, &hooks, &fleet, &meta)
        })
        .await?;
    Ok(respond(StatusCode::OK, &etag, &v))
}

/// The properties to keep of a PUT body: as written, without what reads add.
fn writable(text: &str) -> Value {
    let mut p = serde_json::from_str::<Value>(text)
        .map(|v| v["properties"].clone())
        .unwrap_or(Value::Null);
    if let Some(o) = p.as_object_mut() {
        o.remove("provisioningState");
        o.remove("status");
        if let Some(s) = o.get_mut("signing").and_then(Value::as_object_mut) {
            s.remove("secrets");
        }
    }
    p
}

/// The answer of a write that made a secret: it, once, where the client looks for it.
fn with_secret(mut v: Value, secret: Option<String>) -> Value {
    if let Some(s) = secret {
        v["properties"]["signing"]["secret"] = json!(s);
    }
    v
}

pub(super) async fn put(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let c = change(&st, &fleet, &name, &headers)?;
    let text = json_body(&headers, body)?;
    check_name(&name)?;
    let sub = subscription::parse(&text, c.hooks.policy(), &c.hooks.secret_names())
        .map_err(|e| Problem::invalid(&e.field, e.message))?;
    let properties = writable(&text);
    let (created, v, etag, secret) = st
        .engine(move |w| {
            let entry = c.audit("eventSubscriptions.put");
            let meta = w
                .engine()
                .stored()
                .resource(KIND, &name)
                .map_err(store_problem)?;
            let current = match &meta {
                Some(m) => Some(render(w, &c.hooks, &fleet, m)?.1),
                None => None,
            };
            if let Err(p) = c.pre.check(current.as_deref()) {
                return Err(refuse(w, entry, p));
            }
            let now = crate::now_rfc3339();
            let made = match &meta {
                Some(m) => body_of(m)?.update(properties, &sub, &now),
                None => {
                    let start = w
                        .engine()
                        .stored()
                        .last_event_seq()
                        .map_err(store_problem)?;
                    Stored::create(properties, &sub, start, &now)
                }
            };
            let (stored, secret) = made.map_err(|e| Problem::unavailable(&e))?;
            let (v, etag) = save(w, &c, &fleet, &name, meta.as_ref(), &stored, entry)?;
            Ok((meta.is_none(), v, etag, secret))
        })
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(secret_response(status, &etag, &with_secret(v, secret)))
}

/// Commits `stored` as the subscription `name` (audited as `entry`), then tells the driver —
/// in the engine's job, so that a request dropped after the commit still reaches it. A new
/// subscription first clears what a deleted one of the same name may have left (its cursor,
/// dead letters and log). Returns the resource as reads show it, rendered before the commit
/// (a render that fails changes nothing), and its ETag.
fn save(
    w: &mut Worker,
    c: &Change,
    fleet: &str,
    name: &str,
    existing: Option<&ResourceMeta>,
    stored: &Stored,
    entry: crate::store::NewAudit,
) -> Result<(Value, String), Problem> {
    let body = serde_json::to_value(stored).map_err(|e| Problem::unavailable(&e.to_string()))?;
    let mut next = written(KIND, name, &c.caller, existing, &body);
    // The stored ETag, as every ETag of a subscription, is over what reads show (never over a
    // secret).
    next.etag = envelope::etag_of(&stored.public_properties());
    let shown = render(w, &c.hooks, fleet, &next)?;
    if existing.is_none() {
        forget(w, name)?;
    }
    w.engine()
        .record(StepWrites {
            audit: Some(entry),
            resources: vec![next],
            ..StepWrites::default()
        })
        .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
    c.hooks.changed();
    Ok(shown)
}

/// Removes a subscription's cursor, dead letters and delivery log.
fn forget(w: &mut Worker, name: &str) -> Result<(), Problem> {
    let writes = crate::store::WebhookWrites {
        forgotten: vec![name.to_string()],
        ..Default::default()
    };
    w.engine()
        .store()
        .record_webhooks(&writes)
        .map_err(store_problem)
}

/// An answer that carries a secret: never kept by a cache on the way.
fn secret_response(status: StatusCode, etag: &str, body: &Value) -> Response {
    let mut r = respond(status, etag, body);
    r.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    r
}

/// A subscription's name: the rules of every resource name.
fn check_name(name: &str) -> Result<(), Problem> {
    let mut errors = waverun_core::error::Errors::default();
    waverun_core::validate::check_name("name", name, &mut errors);
    errors.into_result().map_err(|e| Problem::engine(&e, ""))
}

pub(super) async fn delete(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let c = change(&st, &fleet, &name, &headers)?;
    st.engine(move |w| {
        let entry = c.audit("eventSubscriptions.delete");
        if let Err(p) = existing(w, &c.hooks, &fleet, &name, &c.pre) {
            return Err(refuse(w, entry, p));
        }
        w.engine()
            .record(StepWrites {
                audit: Some(entry),
                deleted_resources: vec![(KIND.to_string(), name.clone())],
                ..StepWrites::default()
            })
            .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
        // Its rows go with it (the driver, told next, also forgets its lane).
        forget(w, &name)?;
        c.hooks.changed();
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /eventSubscriptions/{name}/rotateSecret`: a new secret, in the answer (once); the
/// old ones keep signing beside it for a day ([`crate::webhooks::stored::ROTATION_OVERLAP_MS`]).
pub(super) async fn rotate(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let c = change(&st, &fleet, &name, &headers)?;
    no_body(&headers, body)?;
    let (v, etag, secret) = st
        .engine(move |w| {
            let entry = c.audit("eventSubscriptions.rotateSecret");
            let (meta, mut stored) = match existing(w, &c.hooks, &fleet, &name, &c.pre) {
                Ok(x) => x,
                Err(p) => return Err(refuse(w, entry, p)),
            };
            if let Some(r) = stored.properties["signing"]["secretRef"].as_str() {
                let p = Problem::new(
                    StatusCode::CONFLICT,
                    "Conflict",
                    format!(
                        "event subscription {name:?} signs with the configured secret {r:?} \
                         (properties.signing.secretRef): rotate it in the configuration"
                    ),
                );
                return Err(refuse(w, entry, p));
            }
            let now_ms = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
            let secret = stored
                .rotate(now_ms, &crate::now_rfc3339())
                .map_err(|e| Problem::unavailable(&e))?;
            let (v, etag) = save(w, &c, &fleet, &name, Some(&meta), &stored, entry)?;
            Ok((v, etag, secret))
        })
        .await?;
    Ok(secret_response(
        StatusCode::OK,
        &etag,
        &with_secret(v, Some(secret)),
    ))
}

/// `POST /eventSubscriptions/{name}/test`: one `io.waverun.Test` event to the endpoint now,
/// signed as deliveries are; the answer says how the receiver took it. Not logged as a
/// delivery, not retried; audited.
pub(super) async fn test(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let c = change(&st, &fleet, &name, &headers)?;
    no_body(&headers, body)?;
    let hooks = c.hooks.clone();
    let n = name.clone();
    let active = st
        .engine(move |w| {
            let entry = c.audit("eventSubscriptions.test");
            let meta = match existing(w, &c.hooks, &fleet, &n, &c.pre) {
                Ok((m, _)) => m,
                Err(p) => return Err(refuse(w, entry, p)),
            };
            let now_ms = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
            let bodies = [(meta.name.clone(), meta.body.clone())];
            let active = crate::webhooks::stored::active(
                &bodies,
                c.hooks.policy(),
                c.hooks.secrets(),
                now_ms,
            );
            let Some(a) = active.into_values().next() else {
                let p = Problem::new(
                    StatusCode::CONFLICT,
                    "Conflict",
                    format!(
                        "event subscription {n:?} no longer holds under this daemon's \
                         configuration (its endpoint or secretRef): write it again"
                    ),
                );
                return Err(refuse(w, entry, p));
            };
            w.engine()
                .record(StepWrites {
                    audit: Some(entry),
                    ..StepWrites::default()
                })
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            Ok(a)
        })
        .await?;
    let url = active.subscription.endpoint.url.clone();
    let (event, attempt) =
        tokio::task::spawn_blocking(move || hooks.test(&name, &url, &active.keys))
            .await
            .map_err(|_| Problem::unavailable("the test delivery was cancelled"))?;
    let (outcome, status, error) = match attempt.outcome {
        crate::webhooks::delivery::Outcome::Delivered { status } => {
            ("delivered", Some(status), None)
        }
        crate::webhooks::delivery::Outcome::Failed { status, error, .. } => {
            ("failed", status, Some(error))
        }
    };
    Ok(axum::Json(json!({
        "outcome": outcome,
        "status": status,
        "latencyMs": attempt.latency.as_millis() as u64,
        "error": error,
        "event": event,
    }))
    .into_response())
}

/// `?$top=N&before=ID`: the delivery log, newest first.
#[derive(Deserialize)]
pub(super) struct LogQuery {
    #[serde(rename = "$top", default, deserialize_with = "super::top")]
    top: Option<u32>,
    before: Option<u64>,
    #[serde(skip)]
    next: envelope::NextLink,
}

impl super::FromQuery for LogQuery {
    fn with_request(&mut self, parts: &axum::http::request::Parts) {
        self.next = envelope::NextLink::of(parts, &["before", "$top"]);
    }
}

/// A page of one subscription's log at `/{segment}`: `read(store, name, limit)` gives up to
/// `limit` rows in the page's order; `nextLink` goes on after the last row shown (its `key`,
/// under the query parameter `param`); `show` renders a row.
#[allow(clippy::too_many_arguments)]
async fn log_page<T: Send + 'static>(
    st: &ApiState,
    fleet: &str,
    name: &str,
    headers: &HeaderMap,
    top: Option<u32>,
    next: &envelope::NextLink,
    (segment, param): (&str, &str),
    read: impl FnOnce(&dyn crate::store::StoreRead, &str, u32) -> Result<Vec<T>, crate::store::StoreError>
        + Send
        + 'static,
    key: fn(&T) -> u64,
    show: fn(T) -> Value,
) -> Result<Response, Problem> {
    st.caller(fleet, headers, Need::Administer)?;
    let top = top.unwrap_or(100).clamp(1, 1000);
    let n = name.to_string();
    let rows = st
        .engine(move |w| {
            let r = w.engine().stored();
            if r.resource(KIND, &n).map_err(store_problem)?.is_none() {
                return Err(Problem::not_found(WHAT, &n));
            }
            read(r, &n, top + 1).map_err(store_problem)
        })
        .await?;
    let more = rows.len() > top as usize;
    let shown: Vec<T> = rows.into_iter().take(top as usize).collect();
    let link = match (more, shown.last()) {
        (true, Some(last)) => json!(next.link(
            &format!("/api/v1/fleets/{fleet}/{KIND}/{name}/{segment}"),
            &[("$top", top.to_string()), (param, key(last).to_string())],
        )),
        _ => Value::Null,
    };
    let value: Vec<Value> = shown.into_iter().map(show).collect();
    Ok(axum::Json(json!({"value": value, "nextLink": link})).into_response())
}

/// `GET /eventSubscriptions/{name}/deliveries`: its attempts, newest first (the newest 1,000
/// are kept): event, attempt, time, status, latency, outcome, error.
pub(super) async fn deliveries(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    super::Q(q): super::Q<LogQuery>,
) -> Result<Response, Problem> {
    // Past i64 the store's numbers end: the same as no bound.
    let before = q.before.map(|b| b.min(i64::MAX as u64));
    log_page(
        &st,
        &fleet,
        &name,
        &headers,
        q.top,
        &q.next,
        ("deliveries", "before"),
        move |r, n, limit| r.deliveries(n, before, limit),
        |(id, _)| *id,
        |(id, d)| {
            json!({"id": id, "eventId": d.seq, "attempt": d.attempt, "at": d.at,
                   "status": d.status, "latencyMs": d.latency_ms, "outcome": d.outcome,
                   "error": d.error})
        },
    )
    .await
}

/// `?$top=N&after=SEQ`: dead letters, oldest first.
#[derive(Deserialize)]
pub(super) struct DeadQuery {
    #[serde(rename = "$top", default, deserialize_with = "super::top")]
    top: Option<u32>,
    after: Option<u64>,
    #[serde(skip)]
    next: envelope::NextLink,
}

impl super::FromQuery for DeadQuery {
    fn with_request(&mut self, parts: &axum::http::request::Parts) {
        self.next = envelope::NextLink::of(parts, &["after", "$top"]);
    }
}

/// `GET /eventSubscriptions/{name}/deadLetters`: events given up on, oldest first.
pub(super) async fn dead_letters(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    super::Q(q): super::Q<DeadQuery>,
) -> Result<Response, Problem> {
    let after = q.after.unwrap_or(0).min(i64::MAX as u64);
    log_page(
        &st,
        &fleet,
        &name,
        &headers,
        q.top,
        &q.next,
        ("deadLetters", "after"),
        move |r, n, limit| r.dead_letters(n, after, limit),
        |d| d.seq,
        |d| json!({"eventId": d.seq, "at": d.at, "attempts": d.attempts, "error": d.error}),
    )
    .await
}

/// The body of `deadLetters/redeliver`: which events (all of them when absent).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RedeliverBody {
    #[serde(default)]
    event_ids: Option<Vec<u64>>,
}

/// The most `eventIds` one request names.
const REDELIVER_IDS_MAX: usize = 1_000;
/// Dead letters read at a time when all of them are delivered again.
const DEAD_LETTER_PAGE: u32 = 10_000;

/// `POST /eventSubscriptions/{name}/deadLetters/redeliver`: its dead letters (`eventIds`, or
/// all) go back into its lane, after what it is delivering now; 202 with how many.
pub(super) async fn redeliver(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let c = change(&st, &fleet, &name, &headers)?;
    let wanted = if body.as_ref().is_ok_and(|b| b.is_empty()) {
        None
    } else {
        let text = json_body(&headers, body)?;
        let b: RedeliverBody =
            waverun_core::document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
        b.event_ids
    };
    if let Some(ids) = &wanted {
        if ids.len() > REDELIVER_IDS_MAX {
            return Err(Problem::invalid(
                "eventIds",
                format!(
                    "{} ids; at most {REDELIVER_IDS_MAX} (without eventIds, every dead letter)",
                    ids.len()
                ),
            ));
        }
    }
    let count = st
        .engine(move |w| {
            let entry = c.audit("eventSubscriptions.redeliver");
            if let Err(p) = existing(w, &c.hooks, &fleet, &name, &c.pre) {
                return Err(refuse(w, entry, p));
            }
            let mut seqs: Vec<u64> = Vec::new();
            match wanted {
                None => loop {
                    let after = seqs.last().copied().unwrap_or(0);
                    let page = w
                        .engine()
                        .stored()
                        .dead_letters(&name, after, DEAD_LETTER_PAGE)
                        .map_err(store_problem)?;
                    if page.is_empty() {
                        break;
                    }
                    seqs.extend(page.iter().map(|d| d.seq));
                },
                Some(ids) => {
                    for (i, id) in ids.into_iter().enumerate() {
                        let found = w
                            .engine()
                            .stored()
                            .dead_letters(&name, id.saturating_sub(1), 1)
                            .map_err(store_problem)?;
                        if found.first().map(|d| d.seq) != Some(id) {
                            let p = Problem::invalid(
                                &format!("eventIds[{i}]"),
                                format!("{id} is not a dead letter of event subscription {name:?}"),
                            );
                            return Err(refuse(w, entry, p));
                        }
                        if !seqs.contains(&id) {
                            seqs.push(id);
                        }
                    }
                }
            }
            let mut entry = entry;
            entry.detail = Some(format!("{} events", seqs.len()));
            w.engine()
                .record(StepWrites {
                    audit: Some(entry),
                    ..StepWrites::default()
                })
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            let count = seqs.len();
            if !seqs.is_empty() {
                c.hooks.redeliver(&name, seqs);
            }
            Ok(count)
        })
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({ "redelivering": count })),
    )
        .into_response())
}
