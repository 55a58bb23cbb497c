//! `gates`: the fleet's gates, from every run's status tree. A gate's name is a lowercase GUID
//! derived from the run and its place in the run (stable across restarts); approving it
//! (`PATCH {"properties":{"state":"Completed"}}` or `POST .../approve`) completes it in the
//! engine and records who approved it; `POST .../fail` (an inconclusive health check judged
//! unhealthy, an approval refused) fails it, its stage or group and the run.

use super::envelope::{self, audit, page, refuse, respond, store_problem, Paging};
use super::problem::Problem;
use super::{json_body, ApiState, Need};
use crate::daemon::{StepWrites, Worker};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use waverun_core::state::GateStatus;
use waverun_core::{Command, GateSelector, GateTiming, State as RunState};

pub(super) const KIND: &str = "gates";

/// A created gate of some run.
struct Found {
    guid: String,
    run: String,
    engine_id: String,
    stage: String,
    group: Option<String>,
    gate: GateStatus,
    /// Who created the run, and when (the stored resource's `systemData`).
    run_created_by: String,
    run_created_at: String,
    /// When the run started.
    run_start: Option<waverun_core::time::Timestamp>,
    /// A ScheduledStart gate's `scheduledStartConfiguration` as the run's strategy gives it.
    schedule: Option<Value>,
}

/// The GUID name of the engine's gate `engine_id`.
pub(super) fn guid(engine_id: &str) -> String {
    let d = Sha256::digest(format!("waverun-gate:{engine_id}").as_bytes());
    let h: String = d.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The item of `list` whose `name` is `name` (null when there is none).
fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|l| l.iter().find(|v| v["name"] == name))
        .unwrap_or(&Value::Null)
}

/// Every created gate of every run, in run and tree order (lists sort them by name).
fn all_gates(w: &mut Worker) -> Result<Vec<Found>, Problem> {
    let runs = w
        .engine()
        .stored()
        .resources(super::runs::KIND)
        .map_err(store_problem)?;
    let mut out = Vec::new();
    for run in runs {
        let strategy = super::envelope::stored_body(&run)["strategy"].clone();
        // The outline: gates are on stages and groups, never on members.
        let status = w
            .engine()
            .status_outline(&run.name)
            .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
        for s in &status.stages {
            let stage = named(&strategy["stages"], &s.name);
            let mut take = |group: Option<&str>, gates: &[GateStatus], configs: &Value| {
                for (i, g) in gates.iter().enumerate() {
                    if let Some(id) = &g.gate_id {
                        out.push(Found {
                            guid: guid(id),
                            run: run.name.clone(),
                            engine_id: id.clone(),
                            stage: s.name.clone(),
                            group: group.map(str::to_string),
                            gate: g.clone(),
                            run_created_by: run.created_by.clone(),
                            run_created_at: run.created_at.clone(),
                            run_start: status.status.start_time,
                            schedule: configs[i]
                                .get("scheduledStartConfiguration")
                                .filter(|c| c.is_object())
                                .cloned(),
                        });
                    }
                }
            };
            take(None, &s.before_gates, &stage["beforeGates"]);
            take(None, &s.after_gates, &stage["afterGates"]);
            for g in &s.groups {
                let group = named(&stage["groups"], &g.name);
                take(Some(&g.name), &g.before_gates, &group["beforeGates"]);
                take(Some(&g.name), &g.after_gates, &group["afterGates"]);
            }
        }
    }
    Ok(out)
}

fn resource(fleet: &str, f: &Found) -> (Value, String) {
    let timing = match f.gate.timing {
        GateTiming::Before => "Before",
        GateTiming::After => "After",
    };
    let mut target = json!({
        "id": envelope::resource_id(fleet, super::runs::KIND, &f.run),
        "updateRunProperties": { "name": f.run, "stage": f.stage, "timing": timing },
    });
    if let Some(g) = &f.group {
        target["updateRunProperties"]["group"] = json!(g);
    }
    let mut properties = json!({
        "provisioningState": "Succeeded",
        "gateType": f.gate.gate_type,
        "target": target,
        "state": f.gate.status.state,
    });
    if let Some(d) = &f.gate.display_name {
        properties["displayName"] = json!(d);
    }
    // A ScheduledStart gate: its day, time and offset as given, and the time they resolved to.
    let mut scheduled = f.schedule.clone().unwrap_or_else(|| json!({}));
    if let Some(t) = f.gate.absolute_start_time {
        scheduled["absoluteStartTime"] = json!(t);
    }
    if scheduled.as_object().is_some_and(|o| !o.is_empty()) {
        properties["scheduledStartProperties"] = scheduled;
    }
    if let Some(by) = &f.gate.completed_by {
        properties["completedBy"] = json!(by);
    }
    // waverun's additions: a HealthCheck gate's check and its measurements.
    if let Some(c) = &f.gate.health_check {
        properties["healthCheck"] = json!(c);
    }
    if let Some(c) = &f.gate.check {
        properties["check"] = json!(c);
    }
    let etag = envelope::etag_of(&properties);
    let v = json!({
        "id": envelope::resource_id(fleet, KIND, &f.guid),
        "name": f.guid,
        "type": envelope::azure_type(KIND),
        "systemData": system_data(f),
        "properties": properties,
        "eTag": etag,
    });
    (v, etag)
}

/// A gate's `systemData`, from what the engine and the store keep: created by whoever created
/// its run, when the run reached it (else when the run started, else when the run was
/// created); last modified by whoever completed it (an approver's token name, or `schedule`
/// for a scheduled start: an application), when it was completed — until then, as created.
fn system_data(f: &Found) -> Value {
    let time =
        |t: waverun_core::time::Timestamp| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let created_at = f
        .gate
        .status
        .start_time
        .or(f.run_start)
        .map(time)
        .unwrap_or_else(|| f.run_created_at.clone());
    let (modified_by, modified_type, modified_at) = match &f.gate.completed_by {
        Some(by) => {
            let kind = if by == "schedule" {
                "Application"
            } else {
                "User"
            };
            let at = f.gate.status.completed_time.map(time);
            (by.clone(), kind, at.unwrap_or_else(|| created_at.clone()))
        }
        None => (f.run_created_by.clone(), "User", created_at.clone()),
    };
    json!({
        "createdBy": f.run_created_by,
        "createdByType": "User",
        "createdAt": created_at,
        "lastModifiedBy": modified_by,
        "lastModifiedByType": modified_type,
        "lastModifiedAt": modified_at,
    })
}

/// `GET /gates`'s query: `$filter=state eq Pending`, `run=NAME`, paging.
#[derive(Deserialize)]
pub(super) struct ListQuery {
    #[serde(rename = "$filter")]
    filter: Option<String>,
    run: Option<String>,
    #[serde(flatten)]
    paging: Paging,
}

impl super::FromQuery for ListQuery {
    fn with_request(&mut self, parts: &axum::http::request::Parts) {
        super::FromQuery::with_request(&mut self.paging, parts);
    }
}

fn state_filter(filter: &str) -> Result<RunState, Problem> {
    let bad = || {
        Problem::invalid(
            "$filter",
            format!("{filter:?}: the supported filter is `state eq Pending|Completed|Skipped`"),
        )
    };
    let rest = filter.trim().strip_prefix("state eq ").ok_or_else(bad)?;
    serde_json::from_value(json!(rest.trim().trim_matches('\''))).map_err(|_| bad())
}

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(q): super::Q<ListQuery>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let state = q.filter.as_deref().map(state_filter).transpose()?;
    let f = fleet.clone();
    let run = q.run.clone();
    let items = st
        .engine(move |w| {
            let gates = all_gates(w)?;
            Ok(gates
                .iter()
                .filter(|g| state.is_none_or(|s| g.gate.status.state == s))
                .filter(|g| run.as_ref().is_none_or(|r| &g.run == r))
                .map(|g| (g.guid.clone(), resource(&f, g).0))
                .collect::<Vec<_>>())
        })
        .await?;
    let path = format!("/api/v1/fleets/{fleet}/{KIND}");
    Ok(axum::Json(page(&path, items, &q.paging)).into_response())
}

fn find(w: &mut Worker, id: &str) -> Result<Found, Problem> {
    all_gates(w)?
        .into_iter()
        .find(|g| g.guid == id)
        .ok_or_else(|| Problem::not_found("gate", id))
}

pub(super) async fn show(
    State(st): State<Arc<ApiState>>,
    Path((fleet, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let f = fleet.clone();
    let (v, etag) = st.engine(move |w| Ok(resource(&f, &find(w, &id)?))).await?;
    Ok(respond(StatusCode::OK, &etag, &v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GatePatch {
    properties: GatePatchProperties,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GatePatchProperties {
    state: String,
}

pub(super) async fn patch(
    State(st): State<Arc<ApiState>>,
    Path((fleet, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Approve)?;
    let text = json_body(&headers, body)?;
    let p: GatePatch =
        waverun_core::document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
    if p.properties.state != "Completed" {
        return Err(Problem::invalid(
            "properties.state",
            format!(
                "{:?}: a gate can only be set to Completed",
                p.properties.state
            ),
        ));
    }
    approve_gate(st, fleet, id, headers, caller).await
}

pub(super) async fn approve(
    State(st): State<Arc<ApiState>>,
    Path((fleet, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Approve)?;
    super::no_body(&headers, body)?;
    approve_gate(st, fleet, id, headers, caller).await
}

/// `POST .../fail`'s optional body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FailBody {
    #[serde(default)]
    message: Option<String>,
}

/// `POST /gates/{id}/fail`: a person fails a Pending gate (an inconclusive health check, an
/// approval refused); its stage or group fails and the run stops.
pub(super) async fn fail(
    State(st): State<Arc<ApiState>>,
    Path((fleet, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Approve)?;
    let empty = body.as_ref().is_ok_and(|b| b.is_empty());
    let message = if empty {
        None
    } else {
        let text = json_body(&headers, body)?;
        let b: FailBody =
            waverun_core::document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
        b.message
    };
    act_on_gate(st, fleet, id, headers, caller, Some(message)).await
}

async fn approve_gate(
    st: Arc<ApiState>,
    fleet: String,
    id: String,
    headers: HeaderMap,
    caller: super::Caller,
) -> Result<Response, Problem> {
    act_on_gate(st, fleet, id, headers, caller, None).await
}

/// Approves the gate (`fail` None) or fails it (`fail` Some(message)).
async fn act_on_gate(
    st: Arc<ApiState>,
    fleet: String,
    id: String,
    headers: HeaderMap,
    caller: super::Caller,
    fail: Option<Option<String>>,
) -> Result<Response, Problem> {
    let pre = envelope::Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &id);
    let f = fleet.clone();
    let (v, etag) = st
        .engine(move |w| {
            let action = if fail.is_some() {
                "gates.fail"
            } else {
                "gates.approve"
            };
            let mut entry = audit(&caller, action, &target, &request_id);
            let found = match find(w, &id) {
                Ok(g) => g,
                Err(p) => {
                    return Err(refuse(w, entry, p));
                }
            };
            entry.detail = Some(format!(
                "run {} stage {}{} gate {}",
                found.run,
                found.stage,
                found
                    .group
                    .as_ref()
                    .map(|g| format!(" group {g}"))
                    .unwrap_or_default(),
                found.engine_id
            ));
            if let Err(p) = pre.check(Some(&resource(&f, &found).1)) {
                return Err(refuse(w, entry, p));
            }
            let gate = GateSelector {
                id: Some(found.engine_id.clone()),
                stage: None,
                group: None,
                timing: None,
            };
            let command = match fail.clone() {
                None => Command::CompleteGate {
                    run: found.run.clone(),
                    gate,
                    by: Some(caller.name.clone()),
                },
                Some(message) => Command::FailGate {
                    run: found.run.clone(),
                    gate,
                    by: Some(caller.name.clone()),
                    message,
                },
            };
            let extras = StepWrites {
                audit: Some(entry),
                ..StepWrites::default()
            };
            w.command_step(&command, extras)
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            Ok(resource(&f, &find(w, &id)?))
        })
        .await?;
    Ok(respond(StatusCode::OK, &etag, &v))
}
