//! `updateRuns`: create (or change before it starts), read with the engine's status tree,
//! start, stop, skip, delete.

use super::envelope::{self, audit, page, refuse, store_problem, Written};
use super::envelope::{stored_body, written, Paging, Preconditions};
use super::problem::{under_properties, Problem};
use super::{json_body, ApiState, Need};
use crate::daemon::{ProviderWait, StepWrites, Worker};
use crate::store::{NewAudit, ResourceMeta};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use waverun_core::document;
use waverun_core::state::MemberStatus;
use waverun_core::{
    Command, ManagedClusterUpdate, RunStatus, SkipTarget, UpdateRunSpec, UpdateStrategy,
};

pub(super) const KIND: &str = "updateRuns";

/// An update run as a PUT body gives it; Azure's read-only fields are accepted and ignored.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunResource {
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
    properties: RunProperties,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunProperties {
    #[serde(default)]
    update_strategy_id: Option<String>,
    #[serde(default)]
    strategy: Option<UpdateStrategy>,
    managed_cluster_update: ManagedClusterUpdate,
    #[serde(default)]
    provisioning_state: Option<IgnoredAny>,
    #[serde(default)]
    status: Option<IgnoredAny>,
    #[serde(default)]
    auto_upgrade_profile_id: Option<IgnoredAny>,
    #[serde(default)]
    engine_modules: Option<IgnoredAny>,
    #[serde(default)]
    retry_of: Option<IgnoredAny>,
    #[serde(default)]
    delete_requested: Option<IgnoredAny>,
}

/// The strategy name in an `updateStrategyId`: `/fleets/{fleet}/updateStrategies/{name}` (an
/// ARM id ending the same way is accepted too).
pub(super) fn strategy_name(fleet: &str, id: &str) -> Result<String, Problem> {
    let bad = || {
        Problem::invalid(
            "properties.updateStrategyId",
            format!("{id:?} is not an update strategy of this fleet (/fleets/{fleet}/updateStrategies/NAME)"),
        )
    };
    let rest = id.trim_end_matches('/');
    let (head, name) = rest.rsplit_once("/updateStrategies/").ok_or_else(bad)?;
    if !head.ends_with(&format!("/fleets/{fleet}")) || name.is_empty() || name.contains('/') {
        return Err(bad());
    }
    Ok(name.to_string())
}

/// Engine paths of a run spec under the request's `properties`.
fn run_path(path: &str) -> String {
    match path {
        "updateStrategyName" => "properties.updateStrategyId".to_string(),
        p => under_properties(p),
    }
}

/// The run's resource: the stored properties with the engine's status tree, as JSON text (at
/// 100,000 members, megabytes: serialized once, for its ETag and the answer).
fn run_resource(w: &mut Worker, fleet: &str, meta: &ResourceMeta) -> Result<Written, Problem> {
    let mut properties = stored_body(meta);
    // A generated run's references, as Azure's ids.
    if let Some(obj) = properties.as_object_mut() {
        for (name_key, id_key, kind) in [
            (
                "updateStrategyName",
                "updateStrategyId",
                super::strategies::KIND,
            ),
            (
                "autoUpgradeProfileName",
                "autoUpgradeProfileId",
                super::profiles::KIND,
            ),
        ] {
            if let Some(Value::String(n)) = obj.remove(name_key) {
                obj.insert(id_key.into(), json!(envelope::resource_id(fleet, kind, &n)));
            }
        }
    }
    let mut status = w
        .engine()
        .status(&meta.name)
        .map_err(|e| Problem::daemon(&e, &run_path))?;
    let modules = w
        .engine()
        .stored()
        .run_modules(&meta.name)
        .map_err(store_problem)?;
    properties["provisioningState"] = json!("Succeeded");
    with_gate_ids(fleet, &mut status);
    with_cluster_ids(&mut status, &cluster_resource_ids(w)?);
    with_provider_waits(&mut status, w.provider_waits());
    if !modules.is_empty() {
        properties["engineModules"] = modules
            .iter()
            .map(|m| {
                json!({
                    "sha256": m.module_hash,
                    "since": chrono::DateTime::from_timestamp_millis(m.first_step_ms)
                        .unwrap_or_default()
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                })
            })
            .collect();
    }
    // The status tree is written from its types, never made a `Value` (at 100,000 members,
    // that tree would be most of the time); the properties around it keep a `Value`'s order.
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Property<'a> {
        Stored(Value),
        Status(&'a RunStatus),
    }
    let mut written: BTreeMap<String, Property> = match properties {
        Value::Object(m) => m
            .into_iter()
            .map(|(k, v)| (k, Property::Stored(v)))
            .collect(),
        _ => BTreeMap::new(),
    };
    written.insert("status".into(), Property::Status(&status));
    let text = serde_json::value::to_raw_value(&written).expect("JSON serialises");
    Ok(envelope::envelope_text(fleet, meta, &text))
}

/// The status tree with each gate's `gateId` as Azure gives it: the id of the gate resource
/// (`/fleets/{fleet}/gates/{guid}`), not the engine's own name for it.
fn with_gate_ids(fleet: &str, status: &mut RunStatus) {
    let tiers = status.stages.iter_mut().flat_map(|s| {
        let groups = s.groups.iter_mut();
        let gates = groups.flat_map(|g| g.before_gates.iter_mut().chain(&mut g.after_gates));
        gates.chain(s.before_gates.iter_mut().chain(&mut s.after_gates))
    });
    for g in tiers {
        if let Some(id) = &mut g.gate_id {
            let guid = super::gates::guid(id);
            *id = envelope::resource_id(fleet, super::gates::KIND, &guid);
        }
    }
}

/// The members that have Azure's `clusterResourceId`, with it.
fn cluster_resource_ids(w: &mut Worker) -> Result<BTreeMap<String, String>, Problem> {
    let members = w
        .engine()
        .stored()
        .resources_containing(super::members::KIND, "\"clusterResourceId\"")
        .map_err(store_problem)?;
    Ok(members
        .iter()
        .filter_map(|m| {
            let id = stored_body(m)["clusterResourceId"].as_str()?.to_string();
            Some((m.name.clone(), id))
        })
        .collect())
}

/// Every member of a status tree, to change in place.
fn members_mut(status: &mut RunStatus) -> impl Iterator<Item = &mut MemberStatus> {
    let groups = status.stages.iter_mut().flat_map(|s| &mut s.groups);
    groups.flat_map(|g| &mut g.members)
}

/// The status tree with each member's `clusterResourceId` (as Azure's run status has it), for
/// the members that have one.
fn with_cluster_ids(status: &mut RunStatus, ids: &BTreeMap<String, String>) {
    if ids.is_empty() {
        return;
    }
    for m in members_mut(status) {
        if let Some(id) = ids.get(&m.name) {
            m.cluster_resource_id = Some(id.clone());
        }
    }
}

/// The status tree with what running members wait on at their providers: a member whose
/// upgrade's provider calls are refused for now, or whose outcome is not known yet, and made
/// again (the daemon's, not the engine's: `ProviderWait` in daemon/worker.rs) has
/// `waitingOn: {reason: "Provider", until?, message}` — `until` when the call is made again,
/// `message` the call and the provider's (redacted) answer. A member the engine already says
/// waits on something keeps that.
fn with_provider_waits(status: &mut RunStatus, waits: &BTreeMap<String, ProviderWait>) {
    if waits.is_empty() {
        return;
    }
    for m in members_mut(status) {
        let wait = m.operation_id.as_ref().and_then(|id| waits.get(id));
        let (Some(w), false, None) = (wait, m.status.state.is_terminal(), &m.waiting_on) else {
            continue;
        };
        m.waiting_on = Some(waverun_core::state::WaitingOn {
            reason: waverun_core::Reason::Provider,
            until: w.until_ms.and_then(chrono::DateTime::from_timestamp_millis),
            message: Some(w.message.clone()),
        });
    }
}

/// A run's resource as computed at one engine version and one version of what members wait on
/// at their providers: true for as long as neither has moved (every step moves the first, every
/// provider refusal or recovery the second), so a read between them costs no engine call.
#[derive(Clone)]
pub(super) struct CachedRun {
    version: (u64, u64),
    body: axum::body::Bytes,
    /// `body` gzipped, made by the first request that accepts gzip.
    gzipped: Arc<std::sync::OnceLock<axum::body::Bytes>>,
    etag: String,
}

impl CachedRun {
    fn gzipped(&self) -> axum::body::Bytes {
        self.gzipped
            .get_or_init(|| {
                use std::io::Write;
                let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                z.write_all(&self.body).expect("writing to memory");
                z.finish().expect("writing to memory").into()
            })
            .clone()
    }
}

/// Whether the request accepts a gzipped answer.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',').any(|e| {
                let mut parts = e.split(';');
                let name = parts.next().unwrap_or("").trim();
                let refused = parts.any(|p| p.trim().replace(' ', "") == "q=0");
                name.eq_ignore_ascii_case("gzip") && !refused
            })
        })
}

impl ApiState {
    fn cached_run(&self, name: &str, version: (u64, u64)) -> Option<CachedRun> {
        let cache = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(name).filter(|c| c.version == version).cloned()
    }
}

/// The run's resource at the engine's current version: from the cache, or computed (on the
/// engine thread) and cached.
fn current_run(
    st: &ApiState,
    w: &mut Worker,
    fleet: &str,
    meta: &ResourceMeta,
) -> Result<CachedRun, Problem> {
    let version = (w.engine().version(), w.provider_waits_version());
    if let Some(hit) = st.cached_run(&meta.name, version) {
        return Ok(hit);
    }
    let Written { body, etag } = run_resource(w, fleet, meta)?;
    let c = CachedRun {
        version,
        body,
        gzipped: Default::default(),
        etag,
    };
    let mut cache = st.runs.lock().unwrap_or_else(|e| e.into_inner());
    cache.insert(meta.name.clone(), c.clone());
    Ok(c)
}

/// A cached run as a `200` with its `ETag`, gzipped when the client accepts it.
fn cached_response(c: &CachedRun, headers: &HeaderMap) -> Response {
    use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE, VARY};
    let json = [(CONTENT_TYPE, "application/json")];
    let mut r = if accepts_gzip(headers) {
        let gz = [(CONTENT_ENCODING, "gzip"), (VARY, "accept-encoding")];
        (StatusCode::OK, json, gz, c.gzipped()).into_response()
    } else {
        (
            StatusCode::OK,
            json,
            [(VARY, "accept-encoding")],
            c.body.clone(),
        )
            .into_response()
    };
    if let Ok(v) = axum::http::HeaderValue::from_str(&c.etag) {
        r.headers_mut().insert(axum::http::header::ETAG, v);
    }
    r
}

/// The run `name`, once its current ETag meets the request's preconditions; a failed check
/// is audited (`entry`) and refused.
fn checked(
    w: &mut Worker,
    fleet: &str,
    name: &str,
    pre: &Preconditions,
    entry: NewAudit,
) -> Result<(ResourceMeta, NewAudit), Problem> {
    let meta = find(w, name)?;
    if pre.is_empty() {
        return Ok((meta, entry));
    }
    let current = run_resource(w, fleet, &meta)?.etag;
    match pre.check(Some(&current)) {
        Ok(()) => Ok((meta, entry)),
        Err(p) => Err(refuse(w, entry, p)),
    }
}

fn find(w: &mut Worker, name: &str) -> Result<ResourceMeta, Problem> {
    w.engine()
        .stored()
        .resource(KIND, name)
        .map_err(store_problem)?
        .ok_or_else(|| Problem::not_found("update run", name))
}

pub(super) async fn list(
    State(st): State<Arc<ApiState>>,
    Path(fleet): Path<String>,
    headers: HeaderMap,
    super::Q(paging): super::Q<Paging>,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let f = fleet.clone();
    let state = st.clone();
    let window = paging.window();
    let items = st
        .engine(move |w| {
            // The page only: each run's status is read from the engine.
            let metas = window.read(w.engine().stored(), KIND)?;
            metas
                .iter()
                .map(|m| {
                    let c = current_run(&state, w, &f, m)?;
                    let v = serde_json::from_slice(&c.body).expect("written as JSON");
                    Ok((m.name.clone(), v))
                })
                .collect::<Result<Vec<_>, Problem>>()
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
    // Between steps, the answer is the one computed at the current version: no engine call.
    let version = (st.daemon.version(), st.daemon.provider_waits_version());
    if let Some(hit) = st.cached_run(&name, version) {
        return Ok(cached_response(&hit, &headers));
    }
    let f = fleet.clone();
    let state = st.clone();
    let c = st
        .engine(move |w| {
            let meta = find(w, &name)?;
            current_run(&state, w, &f, &meta)
        })
        .await?;
    Ok(cached_response(&c, &headers))
}

pub(super) async fn put(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Operate)?;
    let text = json_body(&headers, body)?;
    let r: RunResource = document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
    let p = r.properties;
    // Both given (as Azure's examples send them, and as a run's GET shows them): the strategy
    // given inline is the one the run runs and shows; `updateStrategyId` must still name a
    // strategy of this fleet, and is kept as the run's reference to it.
    let by_name = match &p.update_strategy_id {
        Some(id) => Some(strategy_name(&fleet, id)?),
        None => None,
    };
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let f = fleet.clone();
    let (created, written) = st
        .engine(move |w| {
            let entry = audit(&caller, "updateRuns.put", &target, &request_id);
            let existing = w
                .engine()
                .stored()
                .resource(KIND, &name)
                .map_err(store_problem)?;
            let current = match &existing {
                Some(m) if !pre.is_empty() => Some(run_resource(w, &f, m)?.etag),
                // Without a precondition only whether it exists matters.
                Some(_) => Some(String::new()),
                None => None,
            };
            // The referenced strategy is snapshotted into the run (as Azure does).
            let snapshot = match &by_name {
                Some(s) => {
                    let meta = w.engine().stored().resource(super::strategies::KIND, s);
                    let meta = meta.map_err(store_problem)?;
                    meta.map(|m| stored_body(&m)["strategy"].clone())
                }
                None => None,
            };
            let check =
                pre.check(current.as_deref())
                    .and_then(|()| match (&by_name, &snapshot) {
                        (Some(s), None) => Err(Problem::not_found("update strategy", s)
                            .at("properties.updateStrategyId")),
                        _ => Ok(()),
                    });
            if let Err(p) = check {
                return Err(refuse(w, entry, p));
            }
            let mut properties = json!({ "managedClusterUpdate": p.managed_cluster_update });
            if let Some(id) = &p.update_strategy_id {
                properties["updateStrategyId"] = json!(id);
            }
            if let Some(s) = p.strategy.as_ref() {
                properties["strategy"] = json!(s);
            } else if let Some(s) = snapshot {
                properties["strategy"] = s;
            }
            // A generated run (not started yet) may be changed, and stays its profile's.
            let profile = existing.as_ref().and_then(|m| {
                stored_body(m)["autoUpgradeProfileName"]
                    .as_str()
                    .map(str::to_string)
            });
            if let Some(pn) = &profile {
                properties["autoUpgradeProfileName"] = json!(pn);
            }
            let spec = UpdateRunSpec {
                name: name.clone(),
                strategy: p.strategy.clone(),
                update_strategy_name: by_name.clone().filter(|_| p.strategy.is_none()),
                managed_cluster_update: p.managed_cluster_update.clone(),
                auto_upgrade_profile_name: profile,
            };
            let command = if existing.is_some() {
                Command::UpdateRun { run: spec }
            } else {
                Command::CreateRun { run: spec }
            };
            let meta = written(KIND, &name, &caller, existing.as_ref(), &properties);
            let extras = StepWrites {
                audit: Some(entry),
                resources: vec![meta.clone()],
                ..StepWrites::default()
            };
            w.command_step(&command, extras)
                .map_err(|e| Problem::daemon(&e, &run_path))?;
            Ok((existing.is_none(), run_resource(w, &f, &meta)?))
        })
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(envelope::respond_written(status, &written))
}

/// `POST /updateRuns/{name}/skip`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SkipBody {
    targets: Vec<SkipTargetBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SkipTargetBody {
    #[serde(rename = "type")]
    kind: String,
    name: String,
}

/// `POST /updateRuns/{name}/retry`'s body (optional): the new run's name.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryBody {
    #[serde(default)]
    name: Option<String>,
}

/// `GET /updateRuns/{name}/plan`.
pub(super) async fn plan(
    st: State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    view(st, fleet, name, "plan", headers).await
}

/// `GET /updateRuns/{name}/forecast`.
pub(super) async fn forecast(
    st: State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    view(st, fleet, name, "forecast", headers).await
}

/// `GET /updateRuns/{name}/forecastState`: the engine state and the time a forecast of the run
/// starts from, `{module, run, at, snapshot}` (`module`: the hex SHA-256 of the plugin that
/// wrote it), for the portal to simulate forward in the browser with the plugin this daemon
/// serves (the ABI's `forecastFrom`). Passed on as the plugin wrote it, never parsed here.
pub(super) async fn forecast_state(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let text = st
        .engine(move |w| {
            find(w, &name)?;
            w.engine()
                .query_raw(&json!({ "type": "forecastState", "run": name }))
                .map_err(|e| Problem::daemon(&e, &run_path))
        })
        .await?;
    // The module that wrote the state, beside it: a browser forecasts from it only with the
    // same module (a daemon started with `--plugin`, or upgraded under an open tab, runs
    // another one than the page has).
    let text: Box<str> = text.into();
    let module = st.sandbox.as_ref().map_or("", |m| m.sha256());
    let body = match text.strip_prefix('{') {
        Some(rest) => format!("{{\"module\":{},{rest}", json!(module)),
        None => text.into_string(),
    };
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

async fn view(
    State(st): State<Arc<ApiState>>,
    fleet: String,
    name: String,
    view: &str,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    st.caller(&fleet, &headers, Need::Read)?;
    let kind = view.to_string();
    let v = st
        .engine(move |w| {
            find(w, &name)?;
            w.engine()
                .query(&json!({ "type": kind, "run": name }))
                .map_err(|e| Problem::daemon(&e, &run_path))
        })
        .await?;
    Ok(axum::Json(v).into_response())
}

/// `POST /updateRuns/{name}/retry`: a new run (not started) over the failed, skipped and
/// pending members of the finished run `name`, pinned to its resolved versions. 201 with it.
async fn retry(
    st: Arc<ApiState>,
    caller: super::Caller,
    fleet: String,
    name: String,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let has_body = body.as_ref().is_ok_and(|b| !b.is_empty());
    let b: RetryBody = if has_body {
        let text = json_body(&headers, body)?;
        document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?
    } else {
        RetryBody::default()
    };
    let new_name = b.name.unwrap_or_else(|| format!("{name}-retry"));
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let f = fleet.clone();
    let written = st
        .engine(move |w| {
            let entry = audit(&caller, "updateRuns.retry", &target, &request_id);
            let (from, entry) = checked(w, &f, &name, &pre, entry)?;
            let existing = w
                .engine()
                .stored()
                .resource(KIND, &new_name)
                .map_err(store_problem)?;
            if existing.is_some() {
                let p = Problem::new(
                    StatusCode::CONFLICT,
                    "AlreadyExists",
                    format!("update run {new_name:?} exists: name the retry run with {{\"name\": \"...\"}}"),
                )
                .at("name");
                return Err(refuse(w, entry, p));
            }
            let mut properties = stored_body(&from);
            properties["retryOf"] = json!(envelope::resource_id(&f, KIND, &name));
            let meta = written(KIND, &new_name, &caller, None, &properties);
            let extras = StepWrites {
                audit: Some(entry),
                resources: vec![meta.clone()],
                ..StepWrites::default()
            };
            let command = Command::CreateRetryRun {
                name: new_name.clone(),
                from: name.clone(),
            };
            w.command_step(&command, extras)
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            run_resource(w, &f, &meta)
        })
        .await?;
    Ok(envelope::respond_written(StatusCode::CREATED, &written))
}

/// `POST /updateRuns/{name}/{action}` for `start`, `stop`, `skip` and `retry`.
macro_rules! run_action {
    ($f:ident, $action:expr) => {
        pub(super) async fn $f(
            st: State<Arc<ApiState>>,
            Path((fleet, name)): Path<(String, String)>,
            headers: HeaderMap,
            body: Result<axum::body::Bytes, BytesRejection>,
        ) -> Result<Response, Problem> {
            action(st, fleet, name, $action.to_string(), headers, body).await
        }
    };
}

run_action!(start, "start");
run_action!(stop, "stop");
run_action!(skip, "skip");
run_action!(retry_run, "retry");

async fn action(
    State(st): State<Arc<ApiState>>,
    fleet: String,
    name: String,
    action: String,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Operate)?;
    if action == "retry" {
        return retry(st, caller, fleet, name, headers, body).await;
    }
    let command = match action.as_str() {
        "start" => {
            super::no_body(&headers, body)?;
            Command::StartRun { name: name.clone() }
        }
        "stop" => {
            super::no_body(&headers, body)?;
            Command::StopRun { name: name.clone() }
        }
        "skip" => {
            let text = json_body(&headers, body)?;
            let b: SkipBody =
                document::from_json_str(&text).map_err(|e| Problem::engine(&e, ""))?;
            if b.targets.is_empty() {
                return Err(Problem::invalid("targets", "must name at least one target"));
            }
            let mut targets = Vec::new();
            for (i, t) in b.targets.iter().enumerate() {
                let parsed = SkipTarget::parse(&format!("{}:{}", t.kind, t.name))
                    .map_err(|e| Problem::invalid(&format!("targets[{i}]"), e))?;
                targets.push(parsed);
            }
            Command::Skip {
                run: name.clone(),
                targets,
            }
        }
        other => {
            return Err(Problem::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!("no action {other:?} on update runs (start, stop, skip, retry)"),
            ))
        }
    };
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let f = fleet.clone();
    let written = st
        .engine(move |w| {
            let entry = audit(
                &caller,
                &format!("updateRuns.{action}"),
                &target,
                &request_id,
            );
            let (meta, entry) = checked(w, &f, &name, &pre, entry)?;
            let extras = StepWrites {
                audit: Some(entry),
                ..StepWrites::default()
            };
            w.command_step(&command, extras)
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            run_resource(w, &f, &meta)
        })
        .await?;
    Ok(envelope::respond_written(StatusCode::OK, &written))
}

/// `DELETE /updateRuns/{name}`. A run that has not started, or has ended, is deleted at once
/// (204). A started one (Running, Pending, Stopping) is stopped first: upgrades in flight finish
/// and are recorded, and the run is deleted once Stopped (by the engine thread,
/// [`crate::daemon::DELETE_REQUESTED`]); the answer is 202 with the run (`Location`: its URL,
/// which answers 404 once it is gone). Azure accepts deleting a started run; this is the
/// equivalent that never leaves an upgrade untracked.
pub(super) async fn delete(
    State(st): State<Arc<ApiState>>,
    Path((fleet, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = st.caller(&fleet, &headers, Need::Operate)?;
    let pre = Preconditions::of(&headers);
    let request_id = st.request_id(&headers);
    let target = envelope::resource_id(&fleet, KIND, &name);
    let f = fleet.clone();
    let n = name.clone();
    let pending = st
        .engine(move |w| {
            let entry = audit(&caller, "updateRuns.delete", &target, &request_id);
            let (meta, entry) = checked(w, &f, &name, &pre, entry)?;
            let state = w
                .engine()
                .status_outline(&name)
                .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?
                .status
                .state;
            if !matches!(
                state,
                waverun_core::State::Running
                    | waverun_core::State::Pending
                    | waverun_core::State::Stopping
            ) {
                let extras = StepWrites {
                    audit: Some(entry),
                    deleted_resources: vec![(KIND.to_string(), name.clone())],
                    ..StepWrites::default()
                };
                w.command_step(&Command::DeleteRun { name }, extras)
                    .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
                return Ok(None);
            }
            // Marked in the same step that stops it: once Stopped, the engine thread deletes it
            // (also after a restart).
            let mut body = stored_body(&meta);
            body[crate::daemon::DELETE_REQUESTED] = json!({
                "by": entry.who,
                "requestId": entry.request_id,
                "target": entry.target,
            });
            let mut marked = meta.clone();
            marked.body = Some(body.to_string());
            let extras = StepWrites {
                audit: Some(entry),
                resources: vec![marked],
                ..StepWrites::default()
            };
            if state == waverun_core::State::Stopping {
                w.engine()
                    .record(extras)
                    .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            } else {
                w.command_step(&Command::StopRun { name: name.clone() }, extras)
                    .map_err(|e| Problem::daemon(&e, &|p: &str| p.to_string()))?;
            }
            match find(w, &name) {
                Ok(meta) => Ok(Some(run_resource(w, &f, &meta)?)),
                // Stopped at once, and deleted in the same turn.
                Err(_) => Ok(None),
            }
        })
        .await?;
    Ok(match pending {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(written) => {
            let mut r = envelope::respond_written(StatusCode::ACCEPTED, &written);
            let location = format!("/api/v1/fleets/{fleet}/updateRuns/{n}");
            if let Ok(v) = axum::http::HeaderValue::from_str(&location) {
                r.headers_mut().insert(axum::http::header::LOCATION, v);
            }
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("5"),
            );
            r
        }
    })
}
