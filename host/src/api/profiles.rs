//! `autoUpgradeProfiles`: profiles as written (Azure's properties: `channel`,
//! `updateStrategyId`, `nodeImageSelection`, `disabled`, `targetKubernetesVersion`,
//! `longTermSupport`) with the engine's `autoUpgradeProfileStatus`, and `generateUpdateRun`.
//! Everything that changes profiles, `generateUpdateRun` included, takes the admin role (api.md
//! section 4: "admin (everything, freezes, profiles)").

use super::envelope::{self, audit, envelope, list_stored, refuse, show_stored};
use super::envelope::{store_problem, stored_body, written, Paging, Preconditions};
use super::problem::{under_properties, Problem};
use super::{json_body, ApiState, Need};
use crate::daemon::{StepWrites, Worker};
use crate::store::ResourceMeta;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use waverun_core::document;
use waverun_core::model::{AutoUpgradeNodeImageSelection, AutoUpgradeProfile, UpgradeChannel};
use waverun_core::Command;

pub(super) const KIND: &str = "autoUpgradeProfiles";

/// A profile as a PUT body gives it; Azure's read-only fields are accepted and ignored.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProfileResource {
    #[serde(default)]
    id: Option<IgnoredAny>,
    #[serde(default)]
    name: Option<IgnoredAny>,
    #[serde(default, rename = "type")]
    kind: Option<IgnoredAny>,
    #[serde(default)]
    system_data: Option<IgnoredAny>,
    #[serde(default)]
    e_tag: Option<IgnoredAny>,
    properties: ProfileProperties,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProfileProperties {
    channel: UpgradeChannel,
    #[serde(default)]
    update_strategy_id: Option<String>,
    #[serde(default)]
    node_image_selection: Option<AutoUpgradeNodeImageSelection>,
    #[serde(default, deserialize_with = "waverun_core::document::strict_bool")]
    disabled: bool,
    #[serde(default)]
    target_kubernetes_version: Option<String>,
    #[serde(default, deserialize_with = "waverun_core::document::strict_bool")]
    long_term_support: bool,
    #[serde(default)]
    provisioning_state: Option<IgnoredAny>,
    #[serde(default)]
    auto_upgrade_profile_status: Option<IgnoredAny>,
}

/// Engine paths of a profile under the request's `properties`.
fn profile_path(path: &str) -> String {
    match path {
        "updateStrategyName" => "properties.updateStrategyId".to_string(),
        p => under_properties(p),
    }
}

/// `properties.autoUpgradeProfileStatus` (and `provisioningState`): the engine's status of
/// each profile, as it is now.
fn live(w: &mut Worker, profiles: &mut [(String, Value)]) -> Result<(), Problem> {
    let answer = w
        .engine()
        .query(&json!({ "type": "profiles" }))
        .map_err(|e| Problem::daemon(&e, &profile_path))?;
    let empty = Vec::new();
    let statuses = answer["profiles"].as_array().unwrap_or(&empty);
    for (name, p) in profiles.iter_mut() {
        let status = statuses
            .iter()
            .find(|s| s["profile"]["name"] == name.as_str())
            .map_or_else(|| json!({}), |s| s["status"].clone());
        p["provisioningState"] = json!("Succeeded");
        p["autoUpgradeProfileStatus"] = status;
    }
    Ok(())
}

/// The profile's resource as `show` gives it, and its ETag.
fn render(w: &mut Worker, fleet: &str, meta: &ResourceMeta) -> Result<(Value, String), Problem> {
    let mut props = [(meta.name.clone(), stored_body(meta))];
    live(w, &mut props)?;
    let [(_, p)] = props;
    Ok(envelope(fleet, meta, p))
}

/// 404 unless the profile exists, 412 unless `If-Match` holds for it as `show` gives it.
fn exists_as_shown(
    w: &mut Worker,
    fleet: &str,
    name: &str,
    pre: &Preconditions,
) -> Result<(), Problem> {
    let stored = w.engine().stored().resource(KIND, name);
    match stored.map_err(store_problem)? {
        None => Err(Problem::not_found("auto-upgrade profile", name)),
        Some(m) => {
            let etag = render(w, fleet, &m)?.1;
            pre.check(Some(&etag))
        }
    }
}

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(paging): super::Q<Paging>,
) -> Result<Response, Problem> {
    list_stored(&st, &fleet, &headers, &paging, KIND, Some(live)).await
}

pub(super) async fn show(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let what = "auto-upgrade profile";
    show_stored(&st, &fleet, name, &headers, KIND, what, Some(live)).await
}

pub(super) async fn put(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Administer)?;
    let text = json_body(&headers, body)?;
    let r: ProfileResource = document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
    let p = r.properties;
    let strategy = match &p.update_strategy_id {
        Some(id) => Some(super::runs::strategy_name(&fleet, id)?),
        None => None,
    };
    let profile = AutoUpgradeProfile {
        name: name.clone(),
        channel: p.channel,
        update_strategy_name: strategy.clone(),
        node_image_selection: p.node_image_selection.clone(),
        disabled: p.disabled,
        target_kubernetes_version: p.target_kubernetes_version.clone(),
        long_term_support: p.long_term_support,
    };
    // Stored as written, in Azure's names.
    let mut properties = json!({
        "channel": p.channel,
        "disabled": p.disabled,
        "longTermSupport": p.long_term_support,
    });
    if let Some(id) = &p.update_strategy_id {
        properties["updateStrategyId"] = json!(id);
    }
    if let Some(s) = &p.node_image_selection {
        properties["nodeImageSelection"] = json!(s);
    }
    if let Some(v) = &p.target_kubernetes_version {
        properties["targetKubernetesVersion"] = json!(v);
    }
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let f = fleet.clone();
    let (created, v, etag) = st
        .engine(move |w| {
            let entry = audit(&caller, "autoUpgradeProfiles.put", &target, &request_id);
            let existing = w
                .engine()
                .stored()
                .resource(KIND, &name)
                .map_err(store_problem)?;
            let current = match &existing {
                Some(m) => Some(render(w, &f, m)?.1),
                None => None,
            };
            let check = pre
                .check(current.as_deref())
                .and_then(|()| match &strategy {
                    Some(s) => match w.engine().stored().resource(super::strategies::KIND, s) {
                        Ok(Some(_)) => Ok(()),
                        Ok(None) => Err(Problem::not_found("update strategy", s)
                            .at("properties.updateStrategyId")),
                        Err(e) => Err(store_problem(e)),
                    },
                    None => Ok(()),
                });
            if let Err(p) = check {
                return Err(refuse(w, entry, p));
            }
            let meta = written(KIND, &name, &caller, existing.as_ref(), &properties);
            let extras = StepWrites {
                audit: Some(entry),
                resources: vec![meta.clone()],
                ..StepWrites::default()
            };
            w.command_step(&Command::UpsertProfile { profile }, extras)
                .map_err(|e| Problem::daemon(&e, &profile_path))?;
            let (v, etag) = render(w, &f, &meta)?;
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
    let caller = st.caller(&fleet, &headers, Need::Administer)?;
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    st.engine(move |w| {
        let entry = audit(&caller, "autoUpgradeProfiles.delete", &target, &request_id);
        if let Err(p) = exists_as_shown(w, &fleet, &name, &pre) {
            return Err(refuse(w, entry, p));
        }
        let extras = StepWrites {
            audit: Some(entry),
            deleted_resources: vec![(KIND.to_string(), name.clone())],
            ..StepWrites::default()
        };
        let command = Command::DeleteProfile { name: name.clone() };
        w.command_step(&command, extras)
            .map_err(|e| Problem::daemon(&e, &profile_path))?;
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /autoUpgradeProfiles/{name}/generateUpdateRun`: 200 `{id}` of the run for the
/// profile's current target (created now, not started, or the one that exists already), or 204
/// when there is nothing to generate (no target, or every member at it).
pub(super) async fn generate(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Administer)?;
    super::no_body(&headers, body)?;
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let f = fleet.clone();
    let run = st
        .engine(move |w| {
            let entry = audit(
                &caller,
                "autoUpgradeProfiles.generateUpdateRun",
                &target,
                &request_id,
            );
            if let Err(p) = exists_as_shown(w, &f, &name, &pre) {
                return Err(refuse(w, entry, p));
            }
            let preview = w
                .engine()
                .query(&json!({ "type": "generation", "profile": name }));
            let preview = match preview {
                Ok(v) => v,
                Err(e) => return Err(refuse(w, entry, Problem::daemon(&e, &profile_path))),
            };
            match preview["result"].as_str() {
                Some("New") => {
                    let command = Command::GenerateUpdateRun {
                        profile: name.clone(),
                    };
                    let extras = StepWrites {
                        audit: Some(entry),
                        ..StepWrites::default()
                    };
                    w.command_step(&command, extras)
                        .map_err(|e| Problem::daemon(&e, &profile_path))?;
                    Ok(preview["run"].as_str().map(str::to_string))
                }
                Some("Existing") => {
                    w.engine()
                        .record(StepWrites {
                            audit: Some(entry),
                            ..StepWrites::default()
                        })
                        .map_err(|e| Problem::daemon(&e, &profile_path))?;
                    Ok(preview["run"].as_str().map(str::to_string))
                }
                _ => {
                    let mut entry = entry;
                    entry.detail = preview["message"].as_str().map(str::to_string);
                    w.engine()
                        .record(StepWrites {
                            audit: Some(entry),
                            ..StepWrites::default()
                        })
                        .map_err(|e| Problem::daemon(&e, &profile_path))?;
                    Ok(None)
                }
            }
        })
        .await?;
    Ok(match run {
        Some(run) => {
            let id = envelope::resource_id(&fleet, super::runs::KIND, &run);
            (StatusCode::OK, axum::Json(json!({ "id": id, "name": run }))).into_response()
        }
        None => StatusCode::NO_CONTENT.into_response(),
    })
}
