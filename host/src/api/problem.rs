//! Errors as RFC 9457 problems (`application/problem+json`): `{type, title, status, detail,
//! message, code, target}` (`message` repeats `detail`, for Azure's clients, which print it),
//! where `code` is the engine's stable code (`InvalidField`, `NotFound`, ...) or the API's own
//! (`PreconditionFailed`, `Unauthorized`, ...) and `target` the field path as the request wrote
//! it (`properties.strategy.stages[1].groups[0].maxConcurrency`).

use crate::daemon::{DaemonError, Gone};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use waverun_core::error::{Error, ErrorCode};

/// A refused or failed request. Its `type` (`https://waverun.dev/problems/{code}`) and `title`
/// (the status's reason phrase) are derived when it is written out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The HTTP status.
    pub status: u16,
    /// The stable code.
    pub code: String,
    /// What went wrong, for people.
    pub detail: String,
    /// The field at fault, when there is one.
    pub target: Option<String>,
}

impl Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry(
            "type",
            &format!("https://waverun.dev/problems/{}", self.code),
        )?;
        m.serialize_entry("title", status.canonical_reason().unwrap_or("Error"))?;
        m.serialize_entry("status", &self.status)?;
        m.serialize_entry("detail", &self.detail)?;
        // Azure's clients print `message`.
        m.serialize_entry("message", &self.detail)?;
        m.serialize_entry("code", &self.code)?;
        if let Some(t) = &self.target {
            m.serialize_entry("target", t)?;
        }
        m.end()
    }
}

impl Problem {
    /// A problem with this status and code.
    pub fn new(status: StatusCode, code: &str, detail: impl Into<String>) -> Problem {
        Problem {
            status: status.as_u16(),
            code: code.to_string(),
            detail: detail.into(),
            target: None,
        }
    }

    /// The same problem, about a field.
    pub fn at(mut self, target: impl Into<String>) -> Problem {
        self.target = Some(target.into());
        self
    }

    /// 404 for a resource that does not exist.
    pub fn not_found(what: &str, name: &str) -> Problem {
        Problem::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{what} {name:?} does not exist"),
        )
    }

    /// 400 for a field that breaks a rule.
    pub fn invalid(target: &str, detail: impl Into<String>) -> Problem {
        let detail = detail.into();
        let detail = if target.is_empty() {
            detail
        } else {
            format!("{target}: {detail}")
        };
        Problem::new(StatusCode::BAD_REQUEST, "InvalidField", detail).at(target)
    }

    /// An engine error, its field paths under `prefix` (where the engine's object sits in the
    /// request body, e.g. `properties`).
    pub fn engine(e: &Error, prefix: &str) -> Problem {
        Problem::engine_with(e, &|path: &str| join(prefix, path))
    }

    /// An engine error, its field paths rewritten by `map` (engine path → request path).
    pub fn engine_with(e: &Error, map: &dyn Fn(&str) -> String) -> Problem {
        let status = match e.code {
            ErrorCode::InvalidField
            | ErrorCode::MemberInTwoGroups
            | ErrorCode::MinorVersionSkip => StatusCode::BAD_REQUEST,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::AlreadyExists | ErrorCode::InvalidState => StatusCode::CONFLICT,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        match e.fields.first() {
            Some(f) => {
                let target = map(&f.path);
                let detail = if target.is_empty() {
                    f.message.clone()
                } else {
                    format!("{target}: {}", f.message)
                };
                Problem::new(status, e.code.as_str(), detail).at(target)
            }
            None => Problem::new(status, e.code.as_str(), e.message.clone()),
        }
    }

    /// A daemon failure: a refusal of the engine (its code and field, the path rewritten by
    /// `map`), or the engine or the store failing (503: nothing was changed).
    pub fn daemon(e: &DaemonError, map: &dyn Fn(&str) -> String) -> Problem {
        match e {
            DaemonError::Refused(p) => match p.guest() {
                Some(g) => {
                    let error =
                        crate::runtime::core_error(crate::runtime::PluginError::Guest(g.clone()));
                    Problem::engine_with(&error, map)
                }
                None => Problem::unavailable(&e.to_string()),
            },
            _ => Problem::unavailable(&e.to_string()),
        }
    }

    /// 503: the engine or the store cannot take the request now; nothing was changed.
    pub fn unavailable(detail: &str) -> Problem {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable",
            format!("{detail} (nothing was changed)"),
        )
    }
}

/// `prefix` + `path` as one field path.
pub fn join(prefix: &str, path: &str) -> String {
    match (prefix.is_empty(), path.is_empty()) {
        (true, _) => path.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) if path.starts_with('[') => format!("{prefix}{path}"),
        (false, false) => format!("{prefix}.{path}"),
    }
}

/// Engine paths as they sit under `properties` in a request body (`strategy.stages[0]` →
/// `properties.strategy.stages[0]`); other paths (the name, from the URL) stay.
pub fn under_properties(path: &str) -> String {
    if path.is_empty() || path == "name" {
        path.to_string()
    } else {
        join("properties", path)
    }
}

impl From<Gone> for Problem {
    fn from(_: Gone) -> Problem {
        Problem::unavailable("the engine is not running")
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).expect("a problem serialises");
        let mut r = (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body,
        )
            .into_response();
        // For the request middleware: the audit entry of a refused mutation takes its code.
        r.extensions_mut().insert(self);
        r
    }
}
