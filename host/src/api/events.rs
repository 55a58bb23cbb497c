//! `events` — the engine's events with their sequence numbers: a Server-Sent Events stream for
//! `Accept: text/event-stream` (`id: <seq>`, `event: <kind>`, `data: <the event>`; resumed
//! after `Last-Event-ID` or `?after=`, filtered by `?run=`, a heartbeat comment every 15 s),
//! pages of JSON otherwise — and `audit` (who did what).

use super::envelope::store_problem;
use super::problem::Problem;
use super::{ApiState, Need};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// `?after=N&$top=M&run=NAME`.
#[derive(Deserialize)]
pub(super) struct After {
    after: Option<u64>,
    #[serde(rename = "$top", default, deserialize_with = "super::top")]
    top: Option<u32>,
    run: Option<String>,
    /// Filled from the request, not the query string.
    #[serde(skip)]
    next: super::envelope::NextLink,
}

impl super::FromQuery for After {
    fn with_request(&mut self, parts: &axum::http::request::Parts) {
        self.next = super::envelope::NextLink::of(parts, &["after", "$top"]);
    }
}

/// How many events one read takes from the store while a stream catches up.
const SSE_BATCH: u32 = 500;

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, Problem> {
    match headers.get("last-event-id").map(|v| v.to_str()) {
        None => Ok(None),
        Some(Ok(v)) => v.trim().parse().map(Some).map_err(|_| {
            Problem::invalid(
                "Last-Event-ID",
                format!("{v:?} is not an event sequence number"),
            )
        }),
        Some(Err(_)) => Err(Problem::invalid("Last-Event-ID", "is not text")),
    }
}

/// The SSE stream: every stored event after `after` (of `run`), then each new one as its step
/// commits. It never skips or repeats one: it reads the store from the last id it sent.
fn stream(st: Arc<ApiState>, after: u64, run: Option<String>) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use std::collections::VecDeque;
    struct S {
        st: Arc<ApiState>,
        after: u64,
        run: Option<String>,
        changes: tokio::sync::watch::Receiver<u64>,
        closing: tokio::sync::watch::Receiver<bool>,
        ready: VecDeque<crate::store::EventRow>,
    }
    let changes = st.events();
    let closing = st.closing();
    let s = S {
        st,
        after,
        run,
        changes,
        closing,
        ready: VecDeque::new(),
    };
    let events = futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if *s.closing.borrow() {
                return None; // the daemon is stopping
            }
            if let Some(row) = s.ready.pop_front() {
                s.after = row.seq;
                let ev = Event::default()
                    .id(row.seq.to_string())
                    .event(row.event.kind.clone())
                    .data(row.event.data.clone());
                return Some((Ok::<_, std::convert::Infallible>(ev), s));
            }
            // Mark the current value seen before reading, so a commit in between wakes us.
            s.changes.borrow_and_update();
            let (after, run) = (s.after, s.run.clone());
            let rows =
                s.st.engine(move |w| {
                    let rows = w
                        .engine()
                        .stored()
                        .events_after(after, run.as_deref(), SSE_BATCH);
                    rows.map_err(store_problem)
                })
                .await;
            match rows {
                Ok(rows) if !rows.is_empty() => s.ready.extend(rows),
                Ok(_) => {
                    tokio::select! {
                        changed = s.changes.changed() => {
                            if changed.is_err() {
                                return None; // the engine has stopped
                            }
                        }
                        _ = s.closing.changed() => return None,
                    }
                }
                Err(_) => return None,
            }
        }
    });
    Sse::new(events)
        .keep_alive(
            KeepAlive::new()
                .interval(std::time::Duration::from_secs(15))
                .text("heartbeat"),
        )
        .into_response()
}

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(q): super::Q<After>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    if wants_stream(&headers) {
        let after = last_event_id(&headers)?.or(q.after).unwrap_or(0);
        return Ok(stream(st.clone(), after, q.run.clone()));
    }
    let after = q.after.unwrap_or(0);
    let top = q.top.unwrap_or(100).clamp(1, 1000);
    let run = q.run.clone();
    let rows = st
        .engine(move |w| {
            w.engine()
                .stored()
                .events_after(after, run.as_deref(), top + 1)
                .map_err(store_problem)
        })
        .await?;
    let more = rows.len() > top as usize;
    let value: Vec<Value> = rows
        .iter()
        .take(top as usize)
        .map(|r| {
            let mut e: Value = serde_json::from_str(&r.event.data).unwrap_or(Value::Null);
            e["seq"] = json!(r.seq);
            e
        })
        .collect();
    let next = match (more, value.last()) {
        (true, Some(last)) => json!(q.next.link(
            &format!("/api/v1/fleets/{fleet}/events"),
            &[
                ("after", last["seq"].to_string()),
                ("$top", top.to_string())
            ],
        )),
        _ => Value::Null,
    };
    Ok(axum::Json(json!({ "value": value, "nextLink": next })).into_response())
}

pub(super) async fn audit(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(q): super::Q<After>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let after = q.after.unwrap_or(0);
    let top = q.top.unwrap_or(100).clamp(1, 1000);
    let rows = st
        .engine(move |w| {
            w.engine()
                .stored()
                .audit_after(after, top + 1)
                .map_err(store_problem)
        })
        .await?;
    let more = rows.len() > top as usize;
    let value: Vec<Value> = rows
        .iter()
        .take(top as usize)
        .map(|r| {
            json!({
                "seq": r.seq,
                "at": r.entry.at,
                "who": r.entry.who,
                "action": r.entry.action,
                "target": r.entry.target,
                "requestId": r.entry.request_id,
                "outcome": r.entry.outcome,
                "detail": r.entry.detail,
            })
        })
        .collect();
    let next = match (more, value.last()) {
        (true, Some(last)) => json!(q.next.link(
            &format!("/api/v1/fleets/{fleet}/audit"),
            &[
                ("after", last["seq"].to_string()),
                ("$top", top.to_string())
            ],
        )),
        _ => Value::Null,
    };
    Ok(axum::Json(json!({ "value": value, "nextLink": next })).into_response())
}
