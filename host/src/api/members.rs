//! `members`: the fleet's clusters as the daemon registered them (their group, labels,
//! provider and cluster reference), with what their provider reported (`properties.status`).

use super::envelope::{envelope, page, respond, stored_body, Paging};
use super::problem::Problem;
use super::strategies::store_problem;
use super::{ApiState, Need};
use crate::store::StoreRead;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub(super) const KIND: &str = "members";

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    Query(paging): Query<Paging>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let f = fleet.clone();
    let items = st
        .engine(move |w| {
            let metas = w.engine().stored().resources(KIND).map_err(store_problem)?;
            Ok(metas
                .iter()
                .map(|m| (m.name.clone(), envelope(&f, m, stored_body(m)).0))
                .collect::<Vec<_>>())
        })
        .await?;
    let path = format!("/api/v1/fleets/{fleet}/{KIND}");
    Ok(axum::Json(page(&path, items, &paging)).into_response())
}

pub(super) async fn show(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let f = fleet.clone();
    let (v, etag) = st
        .engine(move |w| {
            let meta = w
                .engine()
                .stored()
                .resource(KIND, &name)
                .map_err(store_problem)?;
            let meta = meta.ok_or_else(|| Problem::not_found("member", &name))?;
            Ok(envelope(&f, &meta, stored_body(&meta)))
        })
        .await?;
    Ok(respond(StatusCode::OK, &etag, &v))
}
