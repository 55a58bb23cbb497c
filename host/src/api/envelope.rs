//! Azure's resource envelope `{id, name, type, systemData, properties, eTag}`, strong ETags,
//! `If-Match` / `If-None-Match`, lists with `$top` / `$skipToken`, and the audit entry of a
//! request.

use super::auth::{Caller, Need};
use super::problem::Problem;
use super::ApiState;
use crate::daemon::{StepWrites, Worker};
use crate::store::{NewAudit, ResourceMeta};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The resource kinds, as path segments, with their Azure `type`.
pub(super) fn azure_type(kind: &str) -> String {
    format!("Microsoft.ContainerService/fleets/{kind}")
}

/// A resource's id: its path without `/api/v1`.
pub(super) fn resource_id(fleet: &str, kind: &str, name: &str) -> String {
    format!("/fleets/{fleet}/{kind}/{name}")
}

/// The strong ETag of a resource's properties: it changes with every change of state.
pub(super) fn etag_of(properties: &Value) -> String {
    etag_of_text(&serde_json::to_vec(properties).expect("JSON serialises"))
}

/// [`etag_of`] the properties' JSON text.
fn etag_of_text(properties: &[u8]) -> String {
    let digest = Sha256::digest(properties);
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

use crate::now_rfc3339;

/// The metadata of a resource being written by `caller` (created now, or changed now).
pub(super) fn written(
    kind: &str,
    name: &str,
    caller: &Caller,
    existing: Option<&ResourceMeta>,
    body: &Value,
) -> ResourceMeta {
    let now = now_rfc3339();
    let (created_by, created_at) = match existing {
        Some(m) => (m.created_by.clone(), m.created_at.clone()),
        None => (caller.name.clone(), now.clone()),
    };
    ResourceMeta {
        kind: kind.to_string(),
        name: name.to_string(),
        etag: etag_of(body),
        created_by,
        created_at,
        last_modified_by: caller.name.clone(),
        last_modified_at: now,
        body: Some(body.to_string()),
    }
}

/// The envelope around `properties`; returns it and its ETag.
pub(super) fn envelope(fleet: &str, meta: &ResourceMeta, properties: Value) -> (Value, String) {
    let etag = etag_of(&properties);
    // Azure's clients (the SDKs' pollers) read `provisioningState`: a resource the API shows
    // has been written in full.
    let mut properties = properties;
    if let Some(p) = properties.as_object_mut() {
        p.entry("provisioningState")
            .or_insert_with(|| json!("Succeeded"));
    }
    // Built in place: `json!` would copy `properties` (a run's are megabytes) into a new tree.
    let mut v = serde_json::Map::new();
    v.insert(
        "id".into(),
        json!(resource_id(fleet, &meta.kind, &meta.name)),
    );
    v.insert("name".into(), json!(meta.name));
    v.insert("type".into(), json!(azure_type(&meta.kind)));
    v.insert("systemData".into(), system_data(meta));
    v.insert("properties".into(), properties);
    v.insert("eTag".into(), json!(etag));
    (Value::Object(v), etag)
}

/// Who made a resource and changed it last, and when.
fn system_data(meta: &ResourceMeta) -> Value {
    json!({
        "createdBy": meta.created_by,
        "createdByType": "User",
        "createdAt": meta.created_at,
        "lastModifiedBy": meta.last_modified_by,
        "lastModifiedByType": "User",
        "lastModifiedAt": meta.last_modified_at,
    })
}

/// A resource as JSON text, with its ETag: for a resource whose properties are megabytes (a run
/// of 100,000 members), written once, never parsed into a tree again.
#[derive(Clone)]
pub(super) struct Written {
    /// The envelope's JSON.
    pub body: axum::body::Bytes,
    /// Its ETag.
    pub etag: String,
}

/// [`envelope`] as text, from the properties as JSON text (`provisioningState` in them): the
/// bytes `envelope` would serialize to, with the same ETag.
pub(super) fn envelope_text(
    fleet: &str,
    meta: &ResourceMeta,
    properties: &serde_json::value::RawValue,
) -> Written {
    let etag = etag_of_text(properties.get().as_bytes());
    /// The envelope's keys in the order a `Value`'s map writes them (sorted).
    #[derive(serde::Serialize)]
    struct Text<'a> {
        #[serde(rename = "eTag")]
        etag: &'a str,
        id: String,
        name: &'a str,
        properties: &'a serde_json::value::RawValue,
        #[serde(rename = "systemData")]
        system_data: Value,
        #[serde(rename = "type")]
        kind: String,
    }
    let text = Text {
        etag: &etag,
        id: resource_id(fleet, &meta.kind, &meta.name),
        name: &meta.name,
        properties,
        system_data: system_data(meta),
        kind: azure_type(&meta.kind),
    };
    let body = serde_json::to_vec(&text).expect("JSON serialises").into();
    Written { body, etag }
}

/// A [`Written`] resource as the answer, with its ETag.
pub(super) fn respond_written(status: StatusCode, w: &Written) -> Response {
    let json = [(header::CONTENT_TYPE, "application/json")];
    let mut r = (status, json, w.body.clone()).into_response();
    if let Ok(v) = HeaderValue::from_str(&w.etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}

/// The stored body of a resource (its properties as last written).
pub(super) fn stored_body(meta: &ResourceMeta) -> Value {
    meta.body
        .as_deref()
        .and_then(|b| serde_json::from_str(b).ok())
        .unwrap_or_else(|| json!({}))
}

/// `If-Match` and `If-None-Match` of a request.
#[derive(Clone, Debug, Default)]
pub(super) struct Preconditions {
    if_match: Option<String>,
    if_none_match: Option<String>,
}

impl Preconditions {
    pub(super) fn of(headers: &HeaderMap) -> Preconditions {
        let get = |h: header::HeaderName| {
            headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_string())
        };
        Preconditions {
            if_match: get(header::IF_MATCH),
            if_none_match: get(header::IF_NONE_MATCH),
        }
    }

    /// For a request over many resources, which no one ETag describes: `true` for
    /// `If-None-Match: *` (only new resources), `false` for no precondition; any other is
    /// refused rather than ignored.
    pub(super) fn create_only(&self) -> Result<bool, Problem> {
        if let Some(m) = &self.if_match {
            return Err(Problem::invalid(
                "If-Match",
                format!("{m:?} names one resource's version; a request over many resources takes only If-None-Match: *"),
            ));
        }
        match self.if_none_match.as_deref() {
            None => Ok(false),
            Some("*") => Ok(true),
            Some(n) => Err(Problem::invalid(
                "If-None-Match",
                format!("{n:?} names one resource's version; a request over many resources takes only *"),
            )),
        }
    }

    /// 412 unless the resource's current ETag (`None`: it does not exist) meets them.
    /// Whether the request set neither header: then any current ETag passes, and the caller
    /// need not compute it (a run's is a hash of megabytes at 100,000 members).
    pub(super) fn is_empty(&self) -> bool {
        self.if_match.is_none() && self.if_none_match.is_none()
    }

    pub(super) fn check(&self, current: Option<&str>) -> Result<(), Problem> {
        let failed = |detail: String| {
            Err(Problem::new(
                StatusCode::PRECONDITION_FAILED,
                "PreconditionFailed",
                detail,
            ))
        };
        if let Some(m) = &self.if_match {
            let ok = match current {
                None => false,
                Some(cur) => m == "*" || m.split(',').any(|t| t.trim() == cur),
            };
            if !ok {
                return failed(match current {
                    None => format!("If-Match {m}: the resource does not exist"),
                    Some(cur) => format!("If-Match {m}: the resource's eTag is now {cur}"),
                });
            }
        }
        if let Some(n) = &self.if_none_match {
            let hit = match current {
                None => false,
                Some(cur) => n == "*" || n.split(',').any(|t| t.trim() == cur),
            };
            if hit {
                return failed(format!("If-None-Match {n}: the resource exists"));
            }
        }
        Ok(())
    }
}

/// A resource response: the JSON with its `ETag` header.
pub(super) fn respond(status: StatusCode, etag: &str, body: &Value) -> Response {
    let mut r = (status, axum::Json(body.clone())).into_response();
    if let Ok(v) = HeaderValue::from_str(etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}

/// A PUT's answer: `201` when it created the resource, else `200`, with its ETag.
pub(super) fn put_response(created: bool, etag: &str, body: &Value) -> Response {
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    respond(status, etag, body)
}

/// The audit entry of a request (outcome `ok`; the engine sets a refusal's code).
pub(super) fn audit(
    caller: &Caller,
    action: &str,
    target: &str,
    request: &super::RequestId,
) -> NewAudit {
    NewAudit {
        at: now_rfc3339(),
        who: caller.name.clone(),
        action: action.to_string(),
        target: target.to_string(),
        request_id: request.id.clone(),
        key: request.key.clone(),
        outcome: "ok".to_string(),
        detail: None,
    }
}

/// The same entry, refused with `problem`.
pub(super) fn refused(mut a: NewAudit, problem: &Problem) -> NewAudit {
    a.outcome = problem.code.clone();
    a.detail = Some(problem.detail.clone());
    a
}

/// A request refused before it reached the engine (a failed precondition, a gate that does
/// not exist): its audit entry is written alone, and the problem returned.
pub(super) fn refuse(w: &mut Worker, entry: NewAudit, problem: Problem) -> Problem {
    let audited = w.engine().record(StepWrites {
        audit: Some(refused(entry, &problem)),
        ..StepWrites::default()
    });
    if let Err(e) = audited {
        tracing::error!(error = %e, "writing the audit entry of a refused request failed");
    }
    problem
}

/// `GET /{kind}` of resources whose properties are stored as written (strategies, members).
/// What a kind adds at read time to the properties it stored (a member's lease holder, which
/// the engine knows): called on the engine thread, once per request, with every item's
/// (name, properties). The eTag covers what it adds.
pub(super) type Live = fn(&mut Worker, &mut [(String, Value)]) -> Result<(), Problem>;

pub(super) async fn list_stored(
    st: &ApiState,
    fleet: &str,
    headers: &HeaderMap,
    paging: &Paging,
    kind: &'static str,
    live: Option<Live>,
) -> Result<Response, Problem> {
    st.caller(fleet, headers, Need::Read)?;
    let f = fleet.to_string();
    let window = paging.window();
    let items = st
        .engine(move |w| {
            // Only the page is read, parsed and given its live status: a 100,000-member fleet
            // is read 1,000 at a time, not 100,000 times over.
            let metas = window.read(w.engine().stored(), kind)?;
            let mut props: Vec<(String, Value)> = metas
                .iter()
                .map(|m| (m.name.clone(), stored_body(m)))
                .collect();
            if let Some(live) = live {
                live(w, &mut props)?;
            }
            Ok(metas
                .iter()
                .zip(props)
                .map(|(m, (name, p))| (name, envelope(&f, m, p).0))
                .collect::<Vec<_>>())
        })
        .await?;
    let path = format!("/api/v1/fleets/{fleet}/{kind}");
    Ok(axum::Json(page(&path, items, paging)).into_response())
}

/// `GET /{kind}/{name}` of a resource whose properties are stored as written; `what` names the
/// kind in a 404.
pub(super) async fn show_stored(
    st: &ApiState,
    fleet: &str,
    name: String,
    headers: &HeaderMap,
    kind: &'static str,
    what: &'static str,
    live: Option<Live>,
) -> Result<Response, Problem> {
    st.caller(fleet, headers, Need::Read)?;
    let f = fleet.to_string();
    let (v, etag) = st
        .engine(move |w| {
            let meta = w
                .engine()
                .stored()
                .resource(kind, &name)
                .map_err(store_problem)?;
            let meta = meta.ok_or_else(|| Problem::not_found(what, &name))?;
            let mut props = [(meta.name.clone(), stored_body(&meta))];
            if let Some(live) = live {
                live(w, &mut props)?;
            }
            let [(_, p)] = props;
            Ok(envelope(&f, &meta, p))
        })
        .await?;
    Ok(respond(StatusCode::OK, &etag, &v))
}

/// `DELETE /{kind}/{name}` of a resource whose properties are stored as written: 404 unless it
/// exists, 412 unless `If-Match` holds (both audited), then `command` with the resource's
/// removal in one step. `what` names the kind in a 404.
pub(super) async fn delete_stored(
    st: &ApiState,
    fleet: &str,
    name: String,
    headers: &HeaderMap,
    kind: &'static str,
    what: &'static str,
    command: waverun_core::Command,
) -> Result<Response, Problem> {
    let caller = st.caller(fleet, headers, Need::Operate)?;
    let pre = Preconditions::of(headers);
    let request_id = st.request_id(headers);
    let target = resource_id(fleet, kind, &name);
    st.engine(move |w| {
        let entry = audit(&caller, &format!("{kind}.delete"), &target, &request_id);
        let existing = w
            .engine()
            .stored()
            .resource(kind, &name)
            .map_err(store_problem)?;
        let check = match &existing {
            None => Err(Problem::not_found(what, &name)),
            Some(m) => pre.check(Some(&etag_of(&stored_body(m)))),
        };
        if let Err(p) = check {
            return Err(refuse(w, entry, p));
        }
        let extras = StepWrites {
            audit: Some(entry),
            deleted_resources: vec![(kind.to_string(), name.clone())],
            ..StepWrites::default()
        };
        w.command_step(&command, extras)
            .map_err(|e| Problem::daemon(&e, &super::problem::under_properties))?;
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A store read failed: 503, nothing changed.
pub(super) fn store_problem(e: crate::store::StoreError) -> Problem {
    Problem::unavailable(&e.to_string())
}

/// `$top` and `$skipToken` of a list request, and where its next page is.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(super) struct Paging {
    #[serde(rename = "$top", default, deserialize_with = "super::top")]
    pub(super) top: Option<u32>,
    #[serde(rename = "$skipToken")]
    pub(super) skip_token: Option<String>,
    /// Filled from the request, not the query string.
    #[serde(skip)]
    pub(super) next: NextLink,
}

impl Paging {
    /// How many items a page holds: `$top`, 100 by default, at most 1,000.
    pub(super) fn top(&self) -> usize {
        self.top.unwrap_or(100).clamp(1, 1000) as usize
    }

    /// Which stored resources the page shows, to pick them before their status is built.
    pub(super) fn window(&self) -> PageWindow {
        PageWindow {
            after: self.skip_token.clone(),
            top: self.top(),
        }
    }
}

/// The stored resources of one page: those named after `$skipToken`, in name order, at most
/// `$top` of them and one more (which tells [`page`] there is a next page).
pub(super) struct PageWindow {
    after: Option<String>,
    top: usize,
}

impl PageWindow {
    /// The stored resources of `kind` in the page, by name: read from the store alone (a
    /// page of 100,000 members reads 1,001 of them, not all).
    pub(super) fn read(
        &self,
        store: &dyn crate::store::Store,
        kind: &str,
    ) -> Result<Vec<ResourceMeta>, Problem> {
        let limit = u32::try_from(self.top + 1).unwrap_or(u32::MAX);
        // No name holds a NUL (PostgreSQL's TEXT cannot): the names after `abc\0x` are those
        // after `abc`, which is what the store is asked.
        let after = self
            .after
            .as_deref()
            .map(|t| t.split('\0').next().unwrap_or(""));
        store
            .resources_after(kind, after, limit)
            .map_err(store_problem)
    }
}

impl super::FromQuery for Paging {
    fn with_request(&mut self, parts: &axum::http::request::Parts) {
        self.next = NextLink::of(parts, &["$top", "$skipToken"]);
    }
}

/// `{value, nextLink}`: the items sorted by name, those after `$skipToken`, at most `$top`.
/// The order is the token's, so a client following `nextLink` sees every item that existed
/// throughout exactly once, whatever was added or removed meanwhile.
pub(super) fn page(path: &str, mut items: Vec<(String, Value)>, paging: &Paging) -> Value {
    let top = paging.top();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let after: Vec<(String, Value)> = items
        .into_iter()
        .filter(|(name, _)| paging.skip_token.as_ref().is_none_or(|t| name > t))
        .collect();
    let more = after.len() > top;
    let shown: Vec<(String, Value)> = after.into_iter().take(top).collect();
    let next = match (more, shown.last()) {
        (true, Some((last, _))) => Value::String(paging.next.link(
            path,
            &[("$top", top.to_string()), ("$skipToken", last.clone())],
        )),
        _ => Value::Null,
    };
    json!({
        "value": shown.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        "nextLink": next,
    })
}

/// What a list's `nextLink` is made of: the daemon's public URL when one is configured
/// (absolute, as Azure's are), else nothing (a link relative to the server), and the query's
/// parameters other than the paging ones, kept as sent (`$filter`, `run`, ...).
#[derive(Clone, Debug, Default)]
pub(super) struct NextLink {
    /// `scheme://host[:port]`, or empty (a link relative to the server) when no public URL is
    /// configured.
    origin: String,
    /// The query's other `key=value` pairs, as the request wrote them.
    kept: Vec<String>,
}

impl NextLink {
    /// The next link of a request whose paging parameters are `paging` (they are replaced).
    pub(super) fn of(parts: &axum::http::request::Parts, paging: &[&str]) -> NextLink {
        let kept = parts
            .uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty())
            .filter(|pair| {
                let key = pair.split('=').next().unwrap_or("");
                !paging.contains(&percent_decode(key).as_str())
            })
            .map(str::to_string)
            .collect();
        NextLink {
            origin: origin(parts).unwrap_or_default(),
            kept,
        }
    }

    /// The link to `path` with the kept parameters and then `params` (values percent-encoded).
    pub(super) fn link(&self, path: &str, params: &[(&str, String)]) -> String {
        let mut query = self.kept.clone();
        query.extend(
            params
                .iter()
                .map(|(k, v)| format!("{k}={}", percent_encode(v))),
        );
        format!("{}{path}?{}", self.origin, query.join("&"))
    }
}

/// `scheme://authority[/prefix]` of the links the API hands out: the configured public URL
/// (`publicUrl`), never the request's `Host` header (a client or a proxy could point links,
/// and the tokens that follow them, anywhere). Without one, links are relative.
fn origin(parts: &axum::http::request::Parts) -> Option<String> {
    parts
        .extensions
        .get::<super::PublicUrl>()
        .map(|p| p.0.to_string())
}

/// `s` with every byte but the unreserved ones (RFC 3986) percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `s` with its `%XX` escapes decoded (a malformed one is kept as it is).
pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |b: &u8| (*b as char).to_digit(16);
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let (h, l) = (
                bytes.get(i + 1).and_then(hex),
                bytes.get(i + 2).and_then(hex),
            );
            if let (Some(h), Some(l)) = (h, l) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
