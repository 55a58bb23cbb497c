//! Azure Resource Manager's paths for the fleet's resources, beside waverun's own, so that
//! Azure's own clients (the SDKs, `az rest`, scripts written against ARM) work unchanged:
//!
//! `/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/fleets/{fleet}[/…]?api-version=V`
//!
//! is the same request as `/api/v1/fleets/{fleet}[/…]` — the same handlers, checks, audit and
//! engine steps — with what ARM adds around it:
//!
//! - `api-version` is required and must be one whose shapes waverun serves ([`API_VERSIONS`]);
//!   anything else is refused as ARM refuses it.
//! - Ids in answers are Azure resource ids, under the subscription and resource group of the
//!   request: any subscription and resource group are accepted (a daemon serves one fleet;
//!   the pair only scopes the ids it hands back), so Azure automation keeps its ids.
//! - Errors are Azure's `{"error": {"code", "message", "target", "details"}}`, with the
//!   `x-ms-error-code` header.
//! - Status codes are those the API version declares: the GA versions declare 200 or 202 for
//!   `generateUpdateRun`, so when nothing is generated there the answer is 202 with an
//!   operation (`Azure-AsyncOperation`, `Location`) that has already succeeded, instead of the
//!   preview's 204.
//! - Answers are never compressed (ARM's are not, and ids are rewritten in the body).
//!
//! This module owns the translation only; it decides nothing about the fleet.

use axum::extract::State;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The API versions of `Microsoft.ContainerService/fleets` whose shapes waverun serves: the
/// 2026-06 pair it follows, and the older ones whose shapes are subsets of them.
pub const API_VERSIONS: &[&str] = &[
    "2023-10-15",
    "2024-04-01",
    "2025-03-01",
    "2026-06-01",
    "2024-02-02-preview",
    "2024-05-02-preview",
    "2025-04-01-preview",
    "2025-08-01-preview",
    "2026-02-01-preview",
    "2026-03-02-preview",
    "2026-05-01-preview",
    "2026-06-02-preview",
];

/// The resource provider's part of an ARM path.
const PROVIDER: &str = "Microsoft.ContainerService";

/// The location ARM's operation resources are under (a daemon has one).
const LOCATION: &str = "local";

/// Operations kept for their status reads.
const OPERATIONS_KEPT: usize = 10_000;

/// What the translation shares: the operations answered with 202, for their status reads.
#[derive(Default)]
pub struct ArmState {
    operations: Mutex<VecDeque<Operation>>,
}

/// An operation answered 202: finished already (`follow` none: waverun's operations complete
/// within their request), or the deletion of a started run, which ends when the run is gone
/// (`follow`: the run's path on waverun's API).
#[derive(Clone, Debug)]
struct Operation {
    name: String,
    subscription: String,
    started: String,
    ended: String,
    follow: Option<String>,
}

/// An ARM request's scope, taken from its path.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Scope {
    subscription: String,
    resource_group: String,
    version: String,
}

impl Scope {
    /// `/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService`.
    fn base(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{PROVIDER}",
            self.subscription, self.resource_group
        )
    }

    /// Whether the version is a preview one (declares 204 for `generateUpdateRun`).
    fn preview(&self) -> bool {
        self.version.ends_with("-preview")
    }
}

/// What an ARM path is.
#[derive(Debug, PartialEq, Eq)]
enum ArmPath {
    /// A fleet's resource: the scope's pair and the path under `/fleets`.
    Fleet {
        subscription: String,
        resource_group: String,
        rest: String,
    },
    /// `/subscriptions/{sub}/providers/Microsoft.ContainerService/locations/{loc}/operations/{id}`
    /// (`results`: `…/operationResults/{id}`).
    Operation {
        subscription: String,
        name: String,
        results: bool,
    },
    /// Under `/subscriptions/` but neither.
    Unknown,
}

/// Reads an ARM path (segment names case-insensitive, as ARM's are); `None` when the path is
/// not under `/subscriptions/`.
fn parse(path: &str) -> Option<ArmPath> {
    let rest = path.strip_prefix("/subscriptions/")?;
    let segs: Vec<&str> = rest.split('/').collect();
    let is = |i: usize, name: &str| segs.get(i).is_some_and(|s| s.eq_ignore_ascii_case(name));
    let nonempty = |i: usize| segs.get(i).is_some_and(|s| !s.is_empty());
    if nonempty(0)
        && is(1, "resourceGroups")
        && nonempty(2)
        && is(3, "providers")
        && is(4, PROVIDER)
        && is(5, "fleets")
        && nonempty(6)
    {
        return Some(ArmPath::Fleet {
            subscription: segs[0].to_string(),
            resource_group: segs[2].to_string(),
            rest: format!("/{}", segs[6..].join("/")),
        });
    }
    if nonempty(0)
        && is(1, "providers")
        && is(2, PROVIDER)
        && is(3, "locations")
        && nonempty(4)
        && (is(5, "operations") || is(5, "operationResults"))
        && nonempty(6)
        && segs.len() == 7
    {
        return Some(ArmPath::Operation {
            subscription: segs[0].to_string(),
            name: segs[6].to_string(),
            results: is(5, "operationResults"),
        });
    }
    Some(ArmPath::Unknown)
}

/// An error in Azure's shape, with `x-ms-error-code`.
fn azure_error(status: StatusCode, code: &str, message: &str, target: Option<&str>) -> Response {
    let mut error = json!({ "code": code, "message": message, "details": [] });
    if let Some(t) = target.filter(|t| !t.is_empty()) {
        error["target"] = json!(t);
    }
    let mut r = (status, axum::Json(json!({ "error": error }))).into_response();
    if let Ok(v) = HeaderValue::from_str(code) {
        r.headers_mut().insert("x-ms-error-code", v);
    }
    r
}

/// The query's `api-version` and the query without it.
fn split_version(query: &str) -> (Option<String>, String) {
    let mut version = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if super::envelope::percent_decode(k) == "api-version" {
            version = Some(super::envelope::percent_decode(v));
        } else {
            kept.push(pair);
        }
    }
    (version, kept.join("&"))
}

/// The answer to a request on ARM's paths; other requests go on as they are.
pub(super) async fn arm_paths(
    State(st): State<Arc<ArmState>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(path) = parse(req.uri().path()) else {
        return next.run(req).await;
    };
    let (version, query) = split_version(req.uri().query().unwrap_or(""));
    let Some(version) = version else {
        return azure_error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
            Some("api-version"),
        );
    };
    if !API_VERSIONS.contains(&version.as_str()) {
        return azure_error(
            StatusCode::BAD_REQUEST,
            "NoRegisteredProviderFound",
            &format!(
                "No registered resource provider found for API version '{version}' and type \
                 'fleets'. The supported api-versions are '{}'.",
                API_VERSIONS.join(", ")
            ),
            Some("api-version"),
        );
    }
    let (subscription, resource_group, rest) = match path {
        ArmPath::Fleet {
            subscription,
            resource_group,
            rest,
        } => (subscription, resource_group, rest),
        ArmPath::Operation {
            subscription,
            name,
            results,
        } => {
            let op = match st.find(req.method(), &subscription, &name) {
                Ok(op) => op,
                Err(r) => return *r,
            };
            let Some(follow) = op.follow.clone() else {
                return ArmState::finished(&op, results, true);
            };
            // In progress while the run is there: read it through the API (the caller's token).
            *req.uri_mut() = match follow.parse::<Uri>() {
                Ok(u) => u,
                Err(_) => return ArmState::finished(&op, results, true),
            };
            req.headers_mut().remove(header::ACCEPT_ENCODING);
            let r = next.run(req).await;
            return match r.status() {
                StatusCode::NOT_FOUND => ArmState::finished(&op, results, true),
                s if s.is_success() => ArmState::finished(&op, results, false),
                _ => st.answer(r, &scope_of(&subscription, &version), "", &Method::GET, false).await,
            };
        }
        ArmPath::Unknown => {
            return azure_error(
                StatusCode::NOT_FOUND,
                "InvalidResourceType",
                &format!(
                    "The resource type of {} is not served here: waverun serves \
                     /subscriptions/{{sub}}/resourceGroups/{{rg}}/providers/{PROVIDER}/fleets/{{fleet}}/…",
                    req.uri().path()
                ),
                None,
            )
        }
    };
    let scope = Scope {
        subscription,
        resource_group,
        version,
    };
    let inner = if query.is_empty() {
        format!("/api/v1/fleets{rest}")
    } else {
        format!("/api/v1/fleets{rest}?{query}")
    };
    match inner.parse::<Uri>() {
        Ok(uri) => *req.uri_mut() = uri,
        Err(e) => {
            return azure_error(
                StatusCode::BAD_REQUEST,
                "InvalidRequestUri",
                &format!("the path cannot be read: {e}"),
                None,
            )
        }
    }
    req.headers_mut().remove(header::ACCEPT_ENCODING);
    let method = req.method().clone();
    let generate = rest.ends_with("/generateUpdateRun");
    let fleet = rest
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    let response = next.run(req).await;
    st.answer(response, &scope, &fleet, &method, generate).await
}

/// The largest answer that is translated (a run's status tree of a very large fleet).
const MAX_ANSWER_BYTES: usize = 512 * 1024 * 1024;

impl ArmState {
    /// The inner answer as ARM gives it.
    async fn answer(
        &self,
        response: Response,
        scope: &Scope,
        fleet: &str,
        method: &Method,
        generate: bool,
    ) -> Response {
        let (mut parts, body) = response.into_parts();
        let status = parts.status;
        if generate && status == StatusCode::NO_CONTENT && !scope.preview() {
            return self.accepted(scope, None);
        }
        if *method == Method::DELETE && status == StatusCode::ACCEPTED {
            // A started run being stopped, then deleted: the operation ends when it is gone.
            let follow = parts
                .headers
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            return self.accepted(scope, follow);
        }
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !content_type.contains("json") || *method == Method::HEAD {
            return Response::from_parts(parts, body);
        }
        let bytes = match axum::body::to_bytes(body, MAX_ANSWER_BYTES).await {
            Ok(b) => b,
            Err(e) => {
                return azure_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalError",
                    &format!("the answer could not be read: {e}"),
                    None,
                )
            }
        };
        let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
            return Response::from_parts(parts, axum::body::Body::from(bytes));
        };
        if status.is_client_error() || status.is_server_error() {
            let text = |k: &str| value[k].as_str().map(str::to_string);
            let code = text("code").unwrap_or_else(|| "Error".to_string());
            let message = text("detail").unwrap_or_default();
            let mut r = azure_error(status, &code, &message, text("target").as_deref());
            for (name, v) in parts.headers.iter() {
                if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                    r.headers_mut().append(name.clone(), v.clone());
                }
            }
            return r;
        }
        rewrite_ids(&mut value, scope, fleet);
        if let Some(Some(loc)) = parts
            .headers
            .get(header::LOCATION)
            .map(|v| v.to_str().ok().map(|s| arm_link(s, scope, fleet)))
        {
            if let Ok(v) = HeaderValue::from_str(&loc) {
                parts.headers.insert(header::LOCATION, v);
            }
        }
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let body = serde_json::to_vec(&value).expect("JSON serialises");
        Response::from_parts(parts, axum::body::Body::from(body))
    }

    /// 202 with an operation: one that has already succeeded, or one that lasts until
    /// `follow` (a path of waverun's API) is gone.
    fn accepted(&self, scope: &Scope, follow: Option<String>) -> Response {
        let now = crate::now_rfc3339();
        let op = Operation {
            name: operation_name(&now, self.operations.lock().map(|o| o.len()).unwrap_or(0)),
            subscription: scope.subscription.clone(),
            started: now.clone(),
            ended: now,
            follow,
        };
        let base = format!(
            "/subscriptions/{}/providers/{PROVIDER}/locations/{LOCATION}",
            op.subscription
        );
        let status_url = format!(
            "{base}/operations/{}?api-version={}",
            op.name, scope.version
        );
        let result_url = format!(
            "{base}/operationResults/{}?api-version={}",
            op.name, scope.version
        );
        let op_follows = op.follow.is_some();
        if let Ok(mut ops) = self.operations.lock() {
            if ops.len() >= OPERATIONS_KEPT {
                ops.pop_front();
            }
            ops.push_back(op);
        }
        let mut r = StatusCode::ACCEPTED.into_response();
        for (name, v) in [
            ("azure-asyncoperation", status_url),
            ("location", result_url),
            (
                "retry-after",
                if op_follows { "5" } else { "0" }.to_string(),
            ),
        ] {
            if let Ok(v) = HeaderValue::from_str(&v) {
                r.headers_mut().insert(name, v);
            }
        }
        r
    }

    /// The operation `name` of `subscription`, for a GET; else the error answer.
    fn find(
        &self,
        method: &Method,
        subscription: &str,
        name: &str,
    ) -> Result<Operation, Box<Response>> {
        if method != Method::GET {
            return Err(Box::new(azure_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                &format!("{method} is not allowed on an operation; it allows GET"),
                None,
            )));
        }
        let found = self.operations.lock().ok().and_then(|ops| {
            ops.iter()
                .find(|o| o.name == name && o.subscription == subscription)
                .cloned()
        });
        found.ok_or_else(|| {
            Box::new(azure_error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!(
                    "operation {name:?} does not exist (operations are kept in memory: the \
                     latest {OPERATIONS_KEPT}, until the daemon restarts)"
                ),
                None,
            ))
        })
    }

    /// `…/operations/{id}` (its status: Succeeded when `done`, else InProgress) or
    /// `…/operationResults/{id}` (204 when `done`, else 202).
    fn finished(op: &Operation, results: bool, done: bool) -> Response {
        if results {
            let mut r = if done {
                StatusCode::NO_CONTENT
            } else {
                StatusCode::ACCEPTED
            }
            .into_response();
            if !done {
                r.headers_mut()
                    .insert("retry-after", HeaderValue::from_static("5"));
            }
            return r;
        }
        let mut body = json!({
            "id": format!(
                "/subscriptions/{}/providers/{PROVIDER}/locations/{LOCATION}/operations/{}",
                op.subscription, op.name
            ),
            "name": op.name,
            "status": if done { "Succeeded" } else { "InProgress" },
            "startTime": op.started,
        });
        if done && op.follow.is_none() {
            body["endTime"] = json!(op.ended);
        }
        let mut r = axum::Json(body).into_response();
        if !done {
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("5"));
        }
        r
    }
}

/// The scope of an operation read (no resource group: operations are the subscription's).
fn scope_of(subscription: &str, version: &str) -> Scope {
    Scope {
        subscription: subscription.to_string(),
        resource_group: String::new(),
        version: version.to_string(),
    }
}

/// A new operation's name: unique within the daemon's life (the time and a counter).
fn operation_name(now: &str, n: usize) -> String {
    let digits: String = now.chars().filter(char::is_ascii_digit).collect();
    format!("op-{digits}-{n}")
}

/// Ids (`id` and every `…Id` key) as Azure resource ids under the request's scope; `nextLink`
/// on ARM's path with its `api-version` (dropped when there is no next page, as ARM does).
fn rewrite_ids(v: &mut Value, scope: &Scope, fleet: &str) {
    match v {
        Value::Object(map) => {
            if map.get("nextLink").is_some_and(Value::is_null) {
                map.remove("nextLink");
            }
            for (k, item) in map.iter_mut() {
                match item {
                    Value::String(s) if k == "nextLink" => *s = arm_link(s, scope, fleet),
                    Value::String(s) if k == "id" || k.ends_with("Id") => {
                        if let Some(id) = arm_id(s, scope, fleet) {
                            *s = id;
                        }
                    }
                    _ => rewrite_ids(item, scope, fleet),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rewrite_ids(item, scope, fleet)),
        _ => {}
    }
}

/// `/fleets/{fleet}[/…]` as an Azure resource id; `None` for anything else.
fn arm_id(id: &str, scope: &Scope, fleet: &str) -> Option<String> {
    let own = format!("/fleets/{fleet}");
    (id == own || id.starts_with(&format!("{own}/"))).then(|| format!("{}{id}", scope.base()))
}

/// A link to waverun's path (`[origin]/api/v1/fleets/{fleet}/…?q`) as the same link on ARM's,
/// with the request's `api-version`.
fn arm_link(link: &str, scope: &Scope, fleet: &str) -> String {
    let own = format!("/api/v1/fleets/{fleet}");
    let Some(at) = link.find(&own) else {
        return link.to_string();
    };
    let (origin, rest) = link.split_at(at);
    let rest = &rest["/api/v1".len()..];
    let sep = if rest.contains('?') { '&' } else { '?' };
    format!(
        "{origin}{}{rest}{sep}api-version={}",
        scope.base(),
        scope.version
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(version: &str) -> Scope {
        Scope {
            subscription: "sub".into(),
            resource_group: "rg".into(),
            version: version.into(),
        }
    }

    #[test]
    fn arm_paths_are_read_with_their_segment_names_in_any_case() {
        assert_eq!(
            parse("/subscriptions/s/resourcegroups/r/providers/microsoft.containerservice/Fleets/f1/updateRuns/x"),
            Some(ArmPath::Fleet {
                subscription: "s".into(),
                resource_group: "r".into(),
                rest: "/f1/updateRuns/x".into()
            })
        );
        assert_eq!(
            parse("/subscriptions/s/providers/Microsoft.ContainerService/locations/l/operationResults/op-1"),
            Some(ArmPath::Operation {
                subscription: "s".into(),
                name: "op-1".into(),
                results: true
            })
        );
        assert_eq!(
            parse(
                "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/virtualMachines/v"
            ),
            Some(ArmPath::Unknown)
        );
        assert_eq!(parse("/api/v1/fleets/f1"), None);
    }

    #[test]
    fn ids_become_azure_ids_and_next_links_keep_arm_paths() {
        let mut v = json!({
            "value": [{ "id": "/fleets/f1/updateRuns/r1", "properties": {
                "updateStrategyId": "/fleets/f1/updateStrategies/s",
                "clusterResourceId": "/subscriptions/x/resourceGroups/y/providers/Microsoft.ContainerService/managedClusters/c",
                "name": "/fleets/f1/not-an-id"
            }}],
            "nextLink": "https://w.example/api/v1/fleets/f1/updateRuns?$skipToken=r1"
        });
        rewrite_ids(&mut v, &scope("2026-06-01"), "f1");
        let base = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.ContainerService";
        assert_eq!(
            v["value"][0]["id"],
            format!("{base}/fleets/f1/updateRuns/r1")
        );
        assert_eq!(
            v["value"][0]["properties"]["updateStrategyId"],
            format!("{base}/fleets/f1/updateStrategies/s")
        );
        assert!(v["value"][0]["properties"]["clusterResourceId"]
            .as_str()
            .unwrap()
            .starts_with("/subscriptions/x/"));
        assert_eq!(v["value"][0]["properties"]["name"], "/fleets/f1/not-an-id");
        assert_eq!(
            v["nextLink"],
            format!(
                "https://w.example{base}/fleets/f1/updateRuns?$skipToken=r1&api-version=2026-06-01"
            )
        );
        let mut last = json!({ "value": [], "nextLink": null });
        rewrite_ids(&mut last, &scope("2026-06-01"), "f1");
        assert!(last.get("nextLink").is_none());
    }

    #[test]
    fn the_api_version_is_taken_out_of_the_query_and_the_rest_kept() {
        assert_eq!(
            split_version("$top=2&api-version=2026-06-01&$filter=state%20eq%20Pending"),
            (
                Some("2026-06-01".to_string()),
                "$top=2&$filter=state%20eq%20Pending".to_string()
            )
        );
        assert_eq!(split_version(""), (None, String::new()));
    }
}
