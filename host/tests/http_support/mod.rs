//! Shared by the daemon's HTTP tests: a plain client for the API on loopback.
#![allow(dead_code)] // each test file uses a part

use serde_json::Value;
use std::time::Duration;

/// A client without a connection pool: every request on a connection of its own, so a
/// connection the server closed (after refusing a body it did not read: 413) is never reused.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_idle_connections(0)
        .max_idle_connections_per_host(0)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// An answer: status, ETag, the body (JSON, or the text as a JSON string), and every header.
pub struct Reply {
    pub status: u16,
    pub etag: Option<String>,
    pub body: Value,
    pub headers: ureq::http::HeaderMap,
}

impl Reply {
    /// The header `name`, as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The API of one fleet (`base` = `http://ADDR/api/v1/fleets/NAME`).
pub struct Client {
    pub base: String,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(base: &str) -> Client {
        Client {
            base: base.to_string(),
            agent: agent(),
        }
    }

    /// `method path` (relative to the fleet, or a whole URL) with a bearer token, headers and
    /// a JSON body.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Reply {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{path}", self.base)
        };
        let mut req = ureq::http::Request::builder().method(method).uri(&url);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let has_type = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        if body.is_some() && !has_type {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(body.unwrap_or("").to_string()).unwrap();
        let mut resp = self
            .agent
            .run(req)
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        let etag = resp
            .headers()
            .get("etag")
            .map(|v| v.to_str().unwrap().to_string());
        let headers = resp.headers().clone();
        let text = resp.body_mut().read_to_string().unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Reply {
            status,
            etag,
            body,
            headers,
        }
    }

    /// `GET path`.
    pub fn get(&self, path: &str, token: Option<&str>) -> Reply {
        self.call("GET", path, token, &[], None)
    }
}

/// Polls `f` until it gives a value, for at most `secs` seconds.
pub fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The member `name` in a run's status tree.
pub fn member<'a>(status: &'a Value, name: &str) -> &'a Value {
    let stages = status["stages"].as_array().into_iter().flatten();
    let groups = stages.flat_map(|s| s["groups"].as_array().into_iter().flatten());
    let members = groups.flat_map(|g| g["members"].as_array().into_iter().flatten());
    members
        .into_iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no member {name} in {status:#}"))
}
