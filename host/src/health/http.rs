//! `http` checks: a POST to the check's URL (template variables percent-encoded) of what is
//! measured, as JSON — `{"run", "stage", "group", "gateId", "purpose", "measurementId",
//! "members": [{"name", "region"}], "check"}` — with the headers of the secret the check
//! names, and the answer read as a verdict.
//!
//! What it owns: the status and body read as a verdict. Decisions:
//! - **2xx passes**, unless the body is a JSON object whose `"result"` says `"fail"` or
//!   `"inconclusive"` (or `"pass"`; any case); its `"message"` becomes the message. Another
//!   `"result"` is an error: the receiver said something this daemon does not understand.
//! - **4xx fails** (but 408 and 429): the receiver answered, and said no. A receiver that wants
//!   "try again" answers 5xx, 408 or 429, or 2xx with `"result": "inconclusive"`.
//! - **5xx, 408, 429, 3xx** (no redirect is followed: a secret's headers stay on the URL's
//!   origin), a timeout, a connection that failed, a body over [`MAX_BODY`]: **errors**,
//!   never a pass.
//! - A secret's values never appear in a message: a body that echoes one is redacted.
//! - With the config's `healthChecks.http.allowOrigins`, a URL on another origin is an error,
//!   and nothing is sent.

use super::template::{self, Target};
use super::{error, redact, verdict, Shared};
use serde_json::{json, Value};
use std::time::Duration;
use waverun_core::health::{HttpCheck, Measurement, Verdict};
use waverun_core::CheckRequest;

/// The most of an answer's body read (bytes).
pub const MAX_BODY: u64 = 64 * 1024;

/// POSTs the measurement to `check`'s URL rendered for `req`.
pub(super) fn measure(
    shared: &Shared,
    req: &CheckRequest,
    check: &HttpCheck,
    timeout: Duration,
) -> Measurement {
    let url = match template::render(&check.url, req, Target::Url) {
        Ok(u) => u,
        Err(e) => return error(format!("http.url: {e}")),
    };
    if !shared.config.http.allows(&url) {
        return error(format!(
            "http.url: {} is not on an origin the daemon's config allows \
             (healthChecks.http.allowOrigins)",
            shown_url(&url)
        ));
    }
    let headers = match &check.secret {
        Some(s) => match shared.secret_headers(s, &url, "http.secret") {
            Ok(h) => h,
            Err(e) => return error(e),
        },
        None => Vec::new(),
    };
    let tls = if url.to_ascii_lowercase().starts_with("https://") {
        let roots = shared.https_roots.get_or_init(|| {
            crate::outbound::tls_config(
                "https://",
                None,
                "",
                "the system's bundle of certificate authorities is missing",
            )
        });
        match roots {
            Ok(t) => t.clone(),
            Err(e) => return error(e.clone()),
        }
    } else {
        ureq::tls::TlsConfig::default()
    };
    let body = json!({
        "run": req.run,
        "stage": req.stage,
        "group": req.group,
        "gateId": req.gate_id,
        "purpose": req.purpose,
        "measurementId": req.measurement_id,
        "members": req.members.iter().map(|m| json!({"name": m.name, "region": m.region})).collect::<Vec<_>>(),
        "check": req.check.name,
    });
    let mut request = ureq::http::Request::builder()
        .method("POST")
        .uri(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json");
    for (name, value) in &headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = match request.body(body.to_string()) {
        Ok(r) => r,
        Err(e) => return error(format!("http.url: the request cannot be made: {e}")),
    };
    let shown = shown_url(&url);
    let answer = super::send(request, timeout, tls, MAX_BODY);
    let m = match answer {
        Ok((status, body)) if body.len() as u64 > MAX_BODY => error(format!(
            "{shown} answered HTTP {status} with a body over {} KiB",
            MAX_BODY >> 10
        )),
        Ok((status, body)) => read_answer(status, &body),
        Err(ureq::Error::Timeout(_)) => {
            error(format!("{shown}: no answer within {} s", timeout.as_secs()))
        }
        Err(e) => error(format!("{shown} not reached: {e}")),
    };
    Measurement {
        message: m.message.map(|msg| redact(&msg, &headers)),
        ..m
    }
}

/// The URL as a message shows it: without its query (which may carry values a viewer need not
/// see), or the whole of it when it does not parse.
fn shown_url(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or(url).to_string()
}

/// What an answer means (see the module docs).
pub(crate) fn read_answer(status: u16, body: &[u8]) -> Measurement {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let said = |k: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let reason = || {
        said("message").or_else(|| {
            let text = String::from_utf8_lossy(body);
            let line = text.lines().find(|l| !l.trim().is_empty())?.trim();
            (parsed.is_none() && !line.is_empty()).then(|| line.to_string())
        })
    };
    let with_reason = |head: String| match reason() {
        Some(r) => format!("{head}: {r}"),
        None => head,
    };
    match status {
        200..=299 => {
            let result = parsed.as_ref().and_then(|v| v.get("result"));
            let v = match result {
                None | Some(Value::Null) => Verdict::Pass,
                Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                    "pass" => Verdict::Pass,
                    "fail" => Verdict::Fail,
                    "inconclusive" => Verdict::Inconclusive,
                    _ => {
                        return error(format!(
                            "HTTP {status} with result {s:?}: not pass, fail or inconclusive"
                        ))
                    }
                },
                Some(other) => {
                    return error(format!(
                        "HTTP {status} with result {other}: not pass, fail or inconclusive"
                    ))
                }
            };
            verdict(v, said("message"))
        }
        408 | 429 => error(with_reason(format!(
            "HTTP {status}: the receiver asks to try later"
        ))),
        400..=499 => verdict(Verdict::Fail, Some(with_reason(format!("HTTP {status}")))),
        300..=399 => error(format!("HTTP {status}: redirects are not followed")),
        _ => error(with_reason(format!("HTTP {status}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_http_statuses_and_bodies_read_as_verdicts() {
        let v = |s, b: &str| read_answer(s, b.as_bytes());
        assert_eq!(v(200, "").verdict, Some(Verdict::Pass));
        assert_eq!(v(204, "ok").verdict, Some(Verdict::Pass));
        let m = v(
            200,
            r#"{"result": "Inconclusive", "message": "no traffic"}"#,
        );
        assert_eq!(m.verdict, Some(Verdict::Inconclusive));
        assert_eq!(m.message.as_deref(), Some("no traffic"));
        assert_eq!(v(200, r#"{"result":"FAIL"}"#).verdict, Some(Verdict::Fail));
        assert_eq!(
            v(200, r#"{"result":"maybe"}"#).verdict,
            Some(Verdict::Error)
        );
        let m = v(403, "forbidden\n");
        assert_eq!(m.verdict, Some(Verdict::Fail));
        assert_eq!(m.message.as_deref(), Some("HTTP 403: forbidden"));
        for s in [408, 429, 500, 503, 302] {
            assert_eq!(v(s, "").verdict, Some(Verdict::Error), "{s}");
        }
    }
}
