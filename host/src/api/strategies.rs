//! `updateStrategies`: stored strategies (`properties.strategy`), read back as written.

use super::envelope::show_stored;
use super::envelope::{self, audit, delete_stored, envelope, list_stored, refuse};
use super::envelope::{store_problem, stored_body, written, Paging, Preconditions};
use super::problem::{under_properties, Problem};
use super::{json_body, ApiState, Need};
use crate::daemon::StepWrites;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;
use std::sync::Arc;
use waverun_core::document::{self, Document, Format};
use waverun_core::Command;

pub(super) const KIND: &str = "updateStrategies";

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(paging): super::Q<Paging>,
) -> Result<Response, Problem> {
    list_stored(&st, &fleet, &headers, &paging, KIND, None).await
}

pub(super) async fn show(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    show_stored(&st, &fleet, name, &headers, KIND, "update strategy", None).await
}

pub(super) async fn put(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Operate)?;
    let text = json_body(&headers, body)?;
    let strategy = match document::document(&text, Format::Json) {
        Ok(Document::Strategy { strategy, .. }) => strategy,
        Ok(Document::Scenario(_)) => {
            return Err(Problem::invalid(
                "properties.strategy",
                "is required: the body is an update strategy resource, {properties: {strategy: {stages: [...]}}}",
            ))
        }
        Err(e) => return Err(Problem::engine(&e, "")),
    };
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let f = fleet.clone();
    let (created, v, etag) = st
        .engine(move |w| {
            let entry = audit(&caller, "updateStrategies.put", &target, &request_id);
            let existing = w
                .engine()
                .stored()
                .resource(KIND, &name)
                .map_err(store_problem)?;
            let current = existing
                .as_ref()
                .map(|m| envelope::etag_of(&stored_body(m)));
            if let Err(p) = pre.check(current.as_deref()) {
                return Err(refuse(w, entry, p));
            }
            let properties = json!({ "strategy": strategy });
            let meta = written(KIND, &name, &caller, existing.as_ref(), &properties);
            let command = Command::UpsertStrategy {
                name: name.clone(),
                strategy,
            };
            let extras = StepWrites {
                audit: Some(entry),
                resources: vec![meta.clone()],
                ..StepWrites::default()
            };
            w.command_step(&command, extras)
                .map_err(|e| Problem::daemon(&e, &under_properties))?;
            let (v, etag) = envelope(&f, &meta, properties);
            Ok((existing.is_none(), v, etag))
        })
        .await?;
    Ok(envelope::put_response(created, &etag, &v))
}

pub(super) async fn delete(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let command = Command::DeleteStrategy { name: name.clone() };
    delete_stored(
        &st,
        &fleet,
        name,
        &headers,
        KIND,
        "update strategy",
        command,
    )
    .await
}
