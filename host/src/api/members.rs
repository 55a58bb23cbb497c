//! `members`: the fleet's clusters, each bound to its provider (`provider` + `clusterRef`, or
//! Azure's `clusterResourceId`), with its update group and labels; `properties.status` is what
//! the provider described (versions, node pools, region, maintenance windows). A PUT or PATCH
//! describes the cluster through its provider first (off the engine thread), then registers it
//! in one step; a cluster the provider does not know is refused at `clusterRef`.

use super::envelope::{self, audit, delete_stored, list_stored, refuse, show_stored};
use super::envelope::{store_problem, stored_body, Paging, Preconditions};
use super::problem::{under_properties, Problem};
use super::{json_body, ApiState, Need};
use crate::daemon::describe_all;
use crate::daemon::{MemberBinding, StepWrites, Worker, MEMBERS};
use crate::providers::{ClusterTarget, ProviderError, ProviderErrorCode};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use waverun_core::{document, Command};

pub(super) const KIND: &str = MEMBERS;

/// A member as a PUT or PATCH body gives it (`N`: its name, which the path gives, is ignored)
/// or an import lists it (`N = String`: its name); Azure's read-only fields are accepted and
/// ignored.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberResource<N = Option<IgnoredAny>> {
    #[serde(default)]
    id: Option<IgnoredAny>,
    #[serde(default)]
    name: N,
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
    // The page's members only: the whole fleet's leases (100,000 of them during a fleet-wide
    // run) are not written and parsed for each page.
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    let leases = w
        .engine()
        .query(&serde_json::json!({ "type": "leases", "members": names }))
        .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
    for (name, p) in members.iter_mut() {
        if let Some(run) = leases["leases"].get(name.as_str()) {
            p["status"]["leaseHolder"] = run.clone();
        }
    }
    Ok(())
}

/// What a provider's refusal to describe a cluster means to the caller; `at` is where the
/// member's `properties` sit in the body.
fn describe_problem(provider: &str, e: &ProviderError, at: &str) -> Problem {
    let field = format!("{at}properties.clusterRef");
    match e.code {
        ProviderErrorCode::NotFound => Problem::invalid(
            &field,
            format!("the {provider} provider has no such cluster: {}", e.message),
        ),
        ProviderErrorCode::InvalidRequest | ProviderErrorCode::NotAllowed => {
            Problem::invalid(&field, e.message.clone())
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

/// A member with nothing bound yet: what a PUT's body replaces.
fn unbound(name: &str) -> MemberBinding {
    MemberBinding {
        name: name.to_string(),
        provider: String::new(),
        cluster_ref: None,
        cluster_resource_id: None,
        group: None,
        labels: waverun_core::Labels::new(),
        long_term_support: false,
    }
}

/// [`bind`], then the checks made before the engine thread sees the member (its labels'
/// number) and the default provider; `at` is where the member sits in the body.
fn bound(base: MemberBinding, p: MemberProperties, at: &str) -> Result<MemberBinding, Problem> {
    let mut binding = bind(base, p);
    let most = waverun_core::validate::MAX_LABELS_PER_MEMBER;
    if binding.labels.len() > most {
        return Err(Problem::invalid(
            &format!("{at}properties.labels"),
            format!("has {} labels; at most {most}", binding.labels.len()),
        ));
    }
    if binding.provider.is_empty() {
        binding.provider = "simulated".to_string();
    }
    Ok(binding)
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
        (_, false) => unbound(&name),
    };
    let binding = bound(base, r.properties, "")?;
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
        .map_err(|e| describe_problem(&binding.provider, &e, ""));
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

/// The most members one import takes.
pub const MAX_IMPORT_MEMBERS: usize = 100_000;

/// The body of `POST /members`: the shape `GET /members` answers with, so one fleet's list
/// imports into another.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberImport {
    value: Vec<MemberResource<String>>,
    #[serde(default)]
    #[allow(dead_code)]
    next_link: Option<IgnoredAny>,
}

/// `POST /members`: registers (or re-registers) many members at once, each as its PUT would —
/// the body a list of members, each with its `name` — all of them or none: every one is
/// checked and described by its provider (one call per provider, off the engine thread)
/// before one step registers them all. `If-None-Match: *` takes only new members.
/// Answers `{"created": n, "updated": m}`.
pub(super) async fn import(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Operate)?;
    let create_only = Preconditions::of(&headers).create_only()?;
    let text = json_body(&headers, body)?;
    let list: MemberImport = document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
    drop(text);
    let n = list.value.len();
    if n > MAX_IMPORT_MEMBERS {
        return Err(Problem::invalid(
            "value",
            format!("has {n} members; one import takes at most {MAX_IMPORT_MEMBERS} (send the rest in another)"),
        ));
    }
    let mut first = std::collections::HashMap::with_capacity(n);
    let mut bindings = Vec::with_capacity(n);
    for (i, r) in list.value.into_iter().enumerate() {
        let at = format!("value[{i}].");
        if r.name.is_empty() {
            return Err(Problem::invalid(&format!("{at}name"), "is required"));
        }
        if let Some(j) = first.insert(r.name.clone(), i) {
            return Err(Problem::invalid(
                &format!("{at}name"),
                format!("{:?} is given twice (also value[{j}])", r.name),
            ));
        }
        bindings.push(bound(unbound(&r.name), r.properties, &at)?);
    }
    drop(first);
    // The members' providers, and the region each member is known in (a re-registration).
    let (bindings, providers, regions) = st
        .engine(move |w| {
            let mut providers = BTreeMap::new();
            let mut regions = Vec::with_capacity(bindings.len());
            let names: Vec<&str> = bindings.iter().map(|b| b.name.as_str()).collect();
            let stored = w
                .stored_members(&names)
                .map_err(|e| Problem::daemon(&e, &under_properties))?;
            for (i, b) in bindings.iter().enumerate() {
                if !providers.contains_key(&b.provider) {
                    let provider = w.provider(&b.provider).ok_or_else(|| {
                        Problem::invalid(
                            &format!("value[{i}].properties.provider"),
                            format!("{:?} is not a provider of this daemon", b.provider),
                        )
                    })?;
                    providers.insert(b.provider.clone(), provider);
                }
                let region = stored
                    .get(&b.name)
                    .map(stored_body)
                    .and_then(|p| p["status"]["region"].as_str().map(str::to_string));
                regions.push(region);
            }
            Ok((bindings, providers, regions))
        })
        .await?;
    let targets: Vec<_> = bindings
        .iter()
        .zip(regions)
        .map(|(b, region)| b.target(region))
        .collect();
    let (bindings, described) = tokio::task::spawn_blocking(move || {
        let asked: Vec<(&str, ClusterTarget)> = bindings
            .iter()
            .map(|b| b.provider.as_str())
            .zip(targets)
            .collect();
        let described = describe_all(&providers, &asked);
        (bindings, described)
    })
    .await
    .map_err(|_| Problem::unavailable("the provider calls were cancelled"))?;
    let mut members = Vec::with_capacity(n);
    for (i, (b, d)) in bindings.into_iter().zip(described).enumerate() {
        let d = d.map_err(|e| describe_problem(&b.provider, &e, &format!("value[{i}].")))?;
        members.push((b, d));
    }
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, "");
    let target = target.trim_end_matches('/').to_string();
    let (created, updated) = st
        .engine(move |w| {
            let mut entry = audit(&caller, "members.import", &target, &request_id);
            if create_only {
                let names: Vec<&str> = members.iter().map(|(b, _)| b.name.as_str()).collect();
                let stored = w
                    .stored_members(&names)
                    .map_err(|e| Problem::daemon(&e, &under_properties))?;
                let found = members
                    .iter()
                    .enumerate()
                    .find(|(_, (b, _))| stored.contains_key(&b.name));
                if let Some((i, (b, _))) = found {
                    let p = Problem::new(
                        StatusCode::PRECONDITION_FAILED,
                        "PreconditionFailed",
                        format!("If-None-Match *: value[{i}], member {:?}, exists", b.name),
                    );
                    return Err(refuse(w, entry, p));
                }
            }
            entry.detail = Some(format!("{} members", members.len()));
            let registered = w
                .register_members(&members, &caller.name, Some(entry))
                .map_err(|(i, e)| match i {
                    Some(i) => Problem::daemon(&e, &|p: &str| {
                        format!("value[{i}].{}", under_properties(p))
                    }),
                    None => Problem::daemon(&e, &under_properties),
                })?;
            let created = registered.iter().filter(|(_, new)| *new).count();
            Ok((created, registered.len() - created))
        })
        .await?;
    let body = serde_json::json!({ "created": created, "updated": updated });
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

pub(super) async fn delete(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let command = Command::DeleteMember { name: name.clone() };
    delete_stored(&st, &fleet, name, &headers, KIND, "member", command).await
}
