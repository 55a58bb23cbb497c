//! waverun's fleet-wide endpoints beside Azure's resources: the freeze calendar
//! (`GET|PUT /freezes`), the release catalog per region (`GET /releases`), and `POST /simulate`
//! (a scenario → the report of `scenario-format.md`, computed by a fresh instance of the same
//! engine module, never by the fleet's own engine).

use super::envelope::{self, audit, refuse, respond, Preconditions};
use super::problem::Problem;
use super::{json_body, ApiState, Caller, Need};
use crate::daemon::StepWrites;
use crate::runtime::{InstanceConfig, PluginHost};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use waverun_core::{document, Command, Freeze};

/// Simulations that may run at once (each holds a guest of up to 1 GiB).
pub const MAX_SIMULATIONS: usize = 2;

/// The freeze calendar as the engine has it, with its ETag.
fn current_freezes(w: &mut crate::daemon::Worker) -> Result<(Value, String), Problem> {
    let v = w
        .engine()
        .query(&json!({ "type": "freezes" }))
        .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
    let etag = envelope::etag_of(&v);
    Ok((v, etag))
}

pub(super) async fn freezes(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let (v, etag) = st.engine(current_freezes).await?;
    Ok(respond(StatusCode::OK, &etag, &v))
}

/// `PUT /freezes`' body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FreezesBody {
    freezes: Vec<Freeze>,
}

pub(super) async fn put_freezes(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Administer)?;
    let text = json_body(&headers, body)?;
    let b: FreezesBody = document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = format!("/fleets/{fleet}/freezes");
    let (v, etag) = st
        .engine(move |w| {
            let entry = audit(&caller, "freezes.put", &target, &request_id);
            let (_, current) = current_freezes(w)?;
            if let Err(p) = pre.check(Some(&current)) {
                return Err(refuse(w, entry, p));
            }
            let extras = StepWrites {
                audit: Some(entry),
                ..StepWrites::default()
            };
            let command = Command::SetFreezes { freezes: b.freezes };
            w.command_step(&command, extras)
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            current_freezes(w)
        })
        .await?;
    Ok(respond(StatusCode::OK, &etag, &v))
}

/// `GET /releases`' query.
#[derive(Deserialize)]
pub(super) struct ReleasesQuery {
    /// Only what is available in this region (or in every region, `*`), with its date there.
    region: Option<String>,
}

impl super::FromQuery for ReleasesQuery {}

/// The releases of `list` available in `region`: `[{version, availableSince}]`.
fn in_region(list: &Value, region: &str) -> Value {
    let items = list.as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|r| {
            let available = r.get("available")?;
            let since = available.get(region).or_else(|| available.get("*"))?;
            Some(json!({ "version": r["version"], "availableSince": since }))
        })
        .collect()
}

pub(super) async fn releases(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(q): super::Q<ReleasesQuery>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let catalog = st
        .engine(|w| {
            w.engine()
                .query(&json!({ "type": "catalog" }))
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))
        })
        .await?;
    let v = match q.region {
        None => catalog,
        Some(region) => json!({
            "region": region,
            "kubernetes": in_region(&catalog["kubernetes"], &region),
            "nodeImages": in_region(&catalog["nodeImages"], &region),
        }),
    };
    Ok(axum::Json(v).into_response())
}

pub(super) async fn simulate(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let text = json_body(&headers, body)?;
    // Text that is not JSON is the request's fault (400), not the simulation's.
    document::from_json_str::<serde::de::IgnoredAny>(&text).map_err(|e| Problem::engine(&e, ""))?;
    let module = st
        .sandbox
        .clone()
        .ok_or_else(|| Problem::unavailable("this daemon has no engine module for simulations"))?;
    let _permit = st
        .simulations
        .acquire()
        .await
        .map_err(|_| Problem::unavailable("the daemon is stopping"))?;
    let report = tokio::task::spawn_blocking(move || {
        let config = InstanceConfig {
            memory_limit: 1 << 30,
            ..InstanceConfig::default()
        };
        let mut instance = module.instantiate(PluginHost::inert(), config)?;
        instance.simulate_json(&text)
    })
    .await
    .map_err(|_| Problem::unavailable("the simulation was cancelled"))?;
    match report {
        Ok(text) => Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            text,
        )
            .into_response()),
        Err(crate::runtime::PluginError::Guest(g)) => {
            let e = crate::runtime::core_error(crate::runtime::PluginError::Guest(g));
            Err(Problem::engine(&e, ""))
        }
        Err(e) => Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "SimulationFailed",
            format!("the simulation did not finish: {e}"),
        )),
    }
}

/// The fleet as a resource: its name, and what time it is in the fleet and how fast fleet time
/// runs (1 in production; a demo's clock runs faster). Clients count down to a fleet-time
/// `until` with it.
async fn fleet_resource(st: &ApiState, caller: &Caller) -> Result<Value, Problem> {
    let (now_ms, scale, last_event) = st
        .engine(|w| {
            let clock = *w.clock();
            let last_event = w
                .engine()
                .stored()
                .last_event_seq()
                .map_err(super::envelope::store_problem)?;
            Ok((
                crate::clock::Clock::now_ms(&clock),
                clock.scale(),
                last_event,
            ))
        })
        .await?;
    let now = chrono::DateTime::from_timestamp_millis(now_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Ok(json!({
        "id": format!("/fleets/{}", st.fleet),
        "name": st.fleet,
        "type": "Microsoft.ContainerService/fleets",
        "properties": {
            "fleetTime": now,
            "timeScale": scale,
            "caller": { "name": caller.name, "role": caller.role },
            "lastEventSeq": last_event,
        },
    }))
}

/// `GET /api/v1/fleets`: the one fleet this daemon serves (what a client without `-f` uses).
pub(super) async fn list_fleets(
    State(st): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = st.auth.check(&headers, Need::Read)?;
    let f = fleet_resource(&st, &caller).await?;
    Ok(axum::Json(json!({ "value": [f] })).into_response())
}

/// `GET /api/v1/fleets/{fleet}`.
pub(super) async fn show_fleet(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Read)?;
    Ok(axum::Json(fleet_resource(&st, &caller).await?).into_response())
}
