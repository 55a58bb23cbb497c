//! `events` — the engine's events with their sequence numbers: a Server-Sent Events stream for
//! `Accept: text/event-stream` (`id: <seq>`, `event: <kind>`, `data: <the event>`; resumed
//! after `Last-Event-ID` or `?after=`, filtered by `?run=`, a heartbeat comment every 15 s),
//! pages of JSON otherwise — and `audit` (who did what).

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
const SSE_BATCH: u32 = super::feed::BATCH;

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
/// commits, from the store's readers and the fan-out ([`super::feed`]), never the engine
/// thread. It never skips or repeats one. `slot` is its place among the open streams.
fn stream(
    st: Arc<ApiState>,
    after: u64,
    run: Option<String>,
    slot: super::feed::StreamSlot,
) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use std::collections::VecDeque;
    use tokio::sync::broadcast::error::RecvError;
    struct S {
        st: Arc<ApiState>,
        /// The last event sent (of the run, if filtered).
        after: u64,
        /// Every event up to this one has been looked at (sent, or not of the run).
        seen: u64,
        run: Option<String>,
        live: tokio::sync::broadcast::Receiver<Arc<crate::store::EventRow>>,
        /// Reading the store (catching up), or following the fan-out.
        catching_up: bool,
        closing: tokio::sync::watch::Receiver<bool>,
        ready: VecDeque<Event>,
        _slot: super::feed::StreamSlot,
    }
    fn event(row: &crate::store::EventRow) -> Event {
        Event::default()
            .id(row.seq.to_string())
            .event(row.event.kind.clone())
            .data(row.event.data.clone())
    }
    // Subscribed before the first read of the store: nothing committed after that read is
    // missed.
    let live = st.feed.subscribe();
    st.start_feed();
    let closing = st.closing();
    let s = S {
        st,
        after,
        seen: after,
        run,
        live,
        catching_up: true,
        closing,
        ready: VecDeque::new(),
        _slot: slot,
    };
    let events = futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if *s.closing.borrow() {
                return None; // the daemon is stopping
            }
            if let Some(ev) = s.ready.pop_front() {
                return Some((Ok::<_, std::convert::Infallible>(ev), s));
            }
            if s.catching_up {
                let floor = s.st.feed.floor().await?;
                let (after, run) = (s.after, s.run.clone());
                let read =
                    s.st.readers
                        .read(move |r| {
                            // The newest event before the read: every one up to it is visible
                            // to the read that follows.
                            let newest = r.last_event_seq()?;
                            let rows = r.events_after(after, run.as_deref(), SSE_BATCH)?;
                            Ok((newest, rows))
                        })
                        .await;
                let Ok((newest, rows)) = read else {
                    return None; // the client reconnects with Last-Event-ID
                };
                let full = rows.len() == SSE_BATCH as usize;
                for row in &rows {
                    s.after = row.seq;
                    s.ready.push_back(event(row));
                }
                s.seen = s.seen.max(s.after);
                if !full {
                    s.seen = s.seen.max(newest);
                    s.catching_up = s.seen < floor;
                }
                continue;
            }
            tokio::select! {
                got = s.live.recv() => match got {
                    Ok(row) => {
                        if row.seq <= s.seen {
                            continue;
                        }
                        s.seen = row.seq;
                        if s.run.as_deref().is_none_or(|r| r == row.event.run) {
                            s.after = row.seq;
                            s.ready.push_back(event(&row));
                        }
                    }
                    // Behind the fan-out's buffer: read the store again from the last sent.
                    Err(RecvError::Lagged(_)) => {
                        s.seen = s.after;
                        s.catching_up = true;
                    }
                    Err(RecvError::Closed) => return None,
                },
                _ = s.closing.changed() => return None,
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
    let caller = st.caller(&fleet, &headers, Need::Read)?;
    if wants_stream(&headers) {
        let after = last_event_id(&headers)?.or(q.after).unwrap_or(0);
        let slot = st.streams.take(&caller.name)?;
        return Ok(stream(st.clone(), after, q.run.clone(), slot));
    }
    let after = q.after.unwrap_or(0);
    let top = q.top.unwrap_or(100).clamp(1, 1000);
    let run = q.run.clone();
    let rows = st
        .readers
        .read(move |r| r.events_after(after, run.as_deref(), top + 1))
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
        .readers
        .read(move |r| r.audit_after(after, top + 1))
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
