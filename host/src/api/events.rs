//! `events` (the engine's events with their sequence numbers, paged; the SSE stream comes
//! next) and `audit` (who did what).

use super::envelope::store_problem;
use super::problem::Problem;
use super::{ApiState, Need};
use crate::store::StoreRead;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// `?after=N&$top=M&run=NAME`.
#[derive(Deserialize)]
pub(super) struct After {
    after: Option<u64>,
    #[serde(rename = "$top")]
    top: Option<u32>,
    run: Option<String>,
}

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    Query(q): Query<After>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
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
        (true, Some(last)) => {
            let mut link = format!(
                "/api/v1/fleets/{fleet}/events?after={}&$top={top}",
                last["seq"]
            );
            if let Some(r) = &q.run {
                link.push_str(&format!("&run={r}"));
            }
            json!(link)
        }
        _ => Value::Null,
    };
    Ok(axum::Json(json!({ "value": value, "nextLink": next })).into_response())
}

pub(super) async fn audit(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    Query(q): Query<After>,
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
        (true, Some(last)) => json!(format!(
            "/api/v1/fleets/{fleet}/audit?after={}&$top={top}",
            last["seq"]
        )),
        _ => Value::Null,
    };
    Ok(axum::Json(json!({ "value": value, "nextLink": next })).into_response())
}
