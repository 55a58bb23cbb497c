//! `members`: the fleet's clusters, each bound to its provider (`provider` + `clusterRef`, or
//! Azure's `clusterResourceId`), with its update group and labels; `properties.status` is what
//! the provider described (versions, node pools, region, maintenance windows). A PUT or PATCH
//! describes the cluster through its provider first (off the engine thread), then registers it
//! in one step; a cluster the provider does not know is refused at `clusterRef`.

use super::envelope::{self, audit, delete_stored, list_stored, refuse, show_stored};
use super::envelope::{store_problem, stored_body, Paging, Preconditions};
use super::problem::{under_properties, Problem};
use super::{json_body, ApiState, Need};
use crate::daemon::{MemberBinding, StepWrites, Worker, MEMBERS};
use crate::providers::{ProviderError, ProviderErrorCode};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use waverun_core::{document, Command};

pub(super) const KIND: &str = MEMBERS;

/// A member as a PUT or PATCH body gives it; Azure's read-only fields are accepted and ignored.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberResource {
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
    properties: MemberProperties,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberProperties {
    #[serde(default)]
    cluster_resource_id: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    cluster_ref: Option<Value>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    labels: Option<waverun_core::Labels>,
    #[serde(default, deserialize_with = "waverun_core::document::strict_opt_bool")]
    long_term_support: Option<bool>,
    #[serde(default)]
    status: Option<IgnoredAny>,
    #[serde(default)]
    provisioning_state: Option<IgnoredAny>,
}

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(paging): super::Q<Paging>,
) -> Result<Response, Problem> {
    list_stored(&st, &fleet, &headers, &paging, KIND, Some(leases)).await
}

pub(super) async fn show(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    show_stored(&st, &fleet, name, &headers, KIND, "member", Some(leases)).await
}

/// `properties.status.leaseHolder`: the run that holds each member (one upgrade authority), as
/// the engine knows it now.
fn leases(w: &mut Worker, members: &mut [(String, Value)]) -> Result<(), Problem> {
    let leases = w
        .engine()
        .query(&serde_json::json!({ "type": "leases" }))
        .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
    for (name, p) in members.iter_mut() {
        if let Some(run) = leases["leases"].get(name.as_str()) {
            p["status"]["leaseHolder"] = run.clone();
        }
    }
    Ok(())
}

/// What a provider's refusal to describe a cluster means to the caller.
fn describe_problem(provider: &str, e: &ProviderError) -> Problem {
    match e.code {
        ProviderErrorCode::NotFound => Problem::invalid(
            "properties.clusterRef",
            format!("the {provider} provider has no such cluster: {}", e.message),
        ),
        ProviderErrorCode::InvalidRequest | ProviderErrorCode::NotAllowed => {
            Problem::invalid("properties.clusterRef", e.message.clone())
        }
        _ => Problem::new(
            StatusCode::BAD_GATEWAY,
            "ProviderUnavailable",
            format!("the {provider} provider could not describe the cluster: {e}"),
        ),
    }
}

/// Applies a body's properties over `base` (a PATCH changes only what it names).
fn bind(base: MemberBinding, p: MemberProperties) -> MemberBinding {
    let mut b = base;
    if let Some(v) = p.provider {
        b.provider = v;
    }
    if let Some(v) = p.cluster_resource_id {
        b.cluster_resource_id = Some(v);
    }
    if let Some(v) = p.cluster_ref {
        b.cluster_ref = Some(v).filter(|v| !v.is_null());
    }
    if let Some(v) = p.group {
        b.group = Some(v).filter(|g| !g.is_empty());
    }
    if let Some(v) = p.labels {
        b.labels = v;
    }
    if let Some(v) = p.long_term_support {
        b.long_term_support = v;
    }
    b
}

pub(super) async fn put(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    write(st, fleet, name, headers, body, false).await
}

pub(super) async fn patch(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    write(st, fleet, name, headers, body, true).await
}

/// PUT (`patch == false`: the body is the whole binding) or PATCH (over the stored one).
async fn write(
    st: Arc<ApiState>,
    fleet: String,
    name: String,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
    patch: bool,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Operate)?;
    let text = json_body(&headers, body)?;
    let r: MemberResource = document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let action = if patch {
        "members.patch"
    } else {
        "members.put"
    };
    // The stored binding (a PATCH applies over it) and the provider to describe with.
    let n = name.clone();
    let stored = st
        .engine(move |w| {
            let meta = w
                .engine()
                .stored()
                .resource(KIND, &n)
                .map_err(store_problem)?;
            Ok(meta)
        })
        .await?;
    let base = match (&stored, patch) {
        (Some(m), true) => MemberBinding::of_stored(m)
            .ok_or_else(|| Problem::unavailable("the stored member does not read"))?,
        (None, true) => return Err(Problem::not_found("member", &name)),
        (_, false) => MemberBinding {
            name: name.clone(),
            provider: String::new(),
            cluster_ref: None,
            cluster_resource_id: None,
            group: None,
            labels: waverun_core::Labels::new(),
            long_term_support: false,
        },
    };
    let mut binding = bind(base, r.properties);
    let most = waverun_core::validate::MAX_LABELS_PER_MEMBER;
    if binding.labels.len() > most {
        // Refused here, before the engine thread sees it.
        return Err(Problem::invalid(
            "properties.labels",
            format!("has {} labels; at most {most}", binding.labels.len()),
        ));
    }
    if binding.provider.is_empty() {
        binding.provider = "simulated".to_string();
    }
    let provider_name = binding.provider.clone();
    let provider = st
        .engine(move |w| Ok(w.provider(&provider_name)))
        .await?
        .ok_or_else(|| {
            Problem::invalid(
                "properties.provider",
                format!("{:?} is not a provider of this daemon", binding.provider),
            )
        })?;
    let region = stored
        .as_ref()
        .map(stored_body)
        .and_then(|p| p["status"]["region"].as_str().map(str::to_string));
    let cluster = binding.target(region);
    let described = tokio::task::spawn_blocking(move || provider.describe(&cluster))
        .await
        .map_err(|_| Problem::unavailable("the provider call was cancelled"))?
        .map_err(|e| describe_problem(&binding.provider, &e));
    let f = fleet.clone();
    let (created, v, etag) = st
        .engine(move |w| {
            let entry = audit(&caller, action, &target, &request_id);
            let existing = w
                .engine()
                .stored()
                .resource(KIND, &name)
                .map_err(store_problem)?;
            let current = existing
                .as_ref()
                .map(|m| envelope::etag_of(&stored_body(m)));
            let check = pre
                .check(current.as_deref())
                .and_then(|()| match (patch, &existing) {
                    (true, None) => Err(Problem::not_found("member", &name)),
                    _ => Ok(()),
                });
            let d = match check.and(described) {
                Ok(d) => d,
                Err(p) => return Err(refuse(w, entry, p)),
            };
            let extras = StepWrites {
                audit: Some(entry),
                ..StepWrites::default()
            };
            let meta = w
                .register_member(&binding, &d, &caller.name, extras)
                .map_err(|e| Problem::daemon(&e, &under_properties))?;
            let mut props = [(meta.name.clone(), stored_body(&meta))];
            leases(w, &mut props)?;
            let [(_, p)] = props;
            let (v, etag) = envelope::envelope(&f, &meta, p);
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
    let command = Command::DeleteMember { name: name.clone() };
    delete_stored(&st, &fleet, name, &headers, KIND, "member", command).await
}
