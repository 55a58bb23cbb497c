//! `members`: the fleet's clusters as the daemon registered them (their group, labels,
//! provider and cluster reference), with what their provider reported (`properties.status`).

use super::envelope::{list_stored, show_stored, Paging};
use super::problem::Problem;
use super::ApiState;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use std::sync::Arc;

pub(super) const KIND: &str = "members";

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    Query(paging): Query<Paging>,
) -> Result<Response, Problem> {
    list_stored(&st, &fleet, &headers, &paging, KIND).await
}

pub(super) async fn show(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    show_stored(&st, &fleet, name, &headers, KIND, "member").await
}
