//! `prometheus` checks: one instant query (`GET {url}/api/v1/query?query=…`) to the
//! Prometheus of the daemon's config, its answer reported as samples, each value the string
//! Prometheus wrote (`"0.002"`, `"NaN"`, `"+Inf"`). The check's conditions are the engine's
//! business; an empty vector is reported as no sample, not judged here.
//!
//! What it owns: the HTTP API's answer read into a [`Measurement`]: a `vector` (every
//! sample, its labels `name="value"` sorted by name, `__name__` included) or a `scalar` (one
//! sample without labels); a `matrix` or `string`, a refused query (`status: error`, with
//! Prometheus's `errorType` and message), another status, a body that is not its JSON, or no
//! answer at all is an error.

use super::template::{self, Target};
use super::{error, Shared};
use serde_json::Value;
use std::time::Duration;
use waverun_core::health::{Measurement, PrometheusCheck, Sample};
use waverun_core::CheckRequest;

/// The largest answer read (bytes): a query that returns more is not a health check.
const MAX_BODY: u64 = 4 << 20;

/// Queries the configured Prometheus with `check`'s query rendered for `req`.
pub(super) fn measure(
    shared: &Shared,
    req: &CheckRequest,
    check: &PrometheusCheck,
    timeout: Duration,
) -> Measurement {
    let Some(config) = &shared.config.prometheus else {
        return error("no prometheus.url in the daemon's config (healthChecks.prometheus)");
    };
    let query = match template::render(&check.query, req, Target::PromQl) {
        Ok(q) => q,
        Err(e) => return error(format!("prometheus.query: {e}")),
    };
    let tls = match &shared.prometheus_tls {
        Ok(t) => t.clone(),
        Err(e) => return error(e.clone()),
    };
    let headers = match &config.secret {
        Some(s) => match shared.secret_headers(s, &config.url, "healthChecks.prometheus.secret") {
            Ok(h) => h,
            Err(e) => return error(e),
        },
        None => Vec::new(),
    };
    let timeout = config
        .timeout_seconds
        .map_or(timeout, |s| timeout.min(Duration::from_secs(s)));
    let base = config.url.trim_end_matches('/');
    let url = format!(
        "{base}/api/v1/query?query={}&timeout={}s",
        template::percent_encode(&query),
        timeout.as_secs().max(1)
    );
    let mut request = ureq::http::Request::builder()
        .method("GET")
        .uri(&url)
        .header("accept", "application/json");
    for (name, value) in &headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = match request.body(()) {
        Ok(r) => r,
        Err(e) => {
            return error(format!(
                "prometheus at {base}: the request cannot be made: {e}"
            ))
        }
    };
    let answer = super::send(request, timeout, tls, MAX_BODY);
    match answer {
        Ok((_, body)) if body.len() as u64 > MAX_BODY => error(format!(
            "prometheus at {base}: the answer is over {} MiB",
            MAX_BODY >> 20
        )),
        Ok((status, body)) => read_answer(status, &body),
        Err(ureq::Error::Timeout(_)) => error(format!(
            "prometheus at {base}: no answer within {} s",
            timeout.as_secs()
        )),
        Err(e) => error(super::redact(
            &format!("prometheus at {base} not reached: {e}"),
            &headers,
        )),
    }
}

/// What an answer of the query API says.
pub(crate) fn read_answer(status: u16, body: &[u8]) -> Measurement {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        let text = String::from_utf8_lossy(body);
        let first = text.lines().next().unwrap_or("").trim();
        return error(format!(
            "prometheus answered HTTP {status} without its JSON{}",
            if first.is_empty() {
                String::new()
            } else {
                format!(": {first}")
            }
        ));
    };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    match text(&v, "status").as_deref() {
        Some("success") if (200..300).contains(&status) => {}
        Some("error") => {
            let kind = text(&v, "errorType").unwrap_or_else(|| "error".to_string());
            let why = text(&v, "error").unwrap_or_default();
            return error(format!("prometheus refused the query: {kind}: {why}"));
        }
        _ => {
            return error(format!(
                "prometheus answered HTTP {status} without a result"
            ))
        }
    }
    let data = v.get("data").unwrap_or(&Value::Null);
    let result = data.get("result").unwrap_or(&Value::Null);
    match text(data, "resultType").as_deref() {
        Some("vector") => {
            let Some(items) = result.as_array() else {
                return error("prometheus: a vector's result is not a list");
            };
            let mut samples = Vec::with_capacity(items.len());
            for item in items {
                let (Some(metric), Some(value)) = (
                    item.get("metric").and_then(Value::as_object),
                    sample_value(item.get("value")),
                ) else {
                    return error("prometheus: a vector's sample has no metric or value");
                };
                let mut labels: Vec<(&String, String)> = metric
                    .iter()
                    .map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_default()))
                    .collect();
                labels.sort();
                let labels = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", template::promql_string(v)))
                    .collect::<Vec<_>>()
                    .join(",");
                samples.push(Sample { labels, value });
            }
            Measurement {
                values: Some(samples),
                verdict: None,
                message: None,
            }
        }
        Some("scalar") => match sample_value(Some(result)) {
            Some(value) => Measurement {
                values: Some(vec![Sample {
                    labels: String::new(),
                    value,
                }]),
                verdict: None,
                message: None,
            },
            None => error("prometheus: a scalar's result is not [time, \"value\"]"),
        },
        Some(other @ ("matrix" | "string")) => error(format!(
            "prometheus returned a {other}: use an instant vector or scalar query"
        )),
        other => error(format!(
            "prometheus returned resultType {other:?}: use an instant vector or scalar query"
        )),
    }
}

/// `[time, "value"]` → the value as written.
fn sample_value(v: Option<&Value>) -> Option<String> {
    v?.as_array()?.get(1)?.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use waverun_core::health::Verdict;

    #[test]
    fn health_prometheus_vectors_keep_values_as_written_and_labels_sorted() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"cluster":"c1","__name__":"x","az":"1"},"value":[1.5,"0.002"]},
            {"metric":{},"value":[1.5,"NaN"]}]}}"#;
        let m = read_answer(200, body);
        let v = m.values.unwrap();
        assert_eq!(v[0].labels, "__name__=\"x\",az=\"1\",cluster=\"c1\"");
        assert_eq!(v[0].value, "0.002");
        assert_eq!((v[1].labels.as_str(), v[1].value.as_str()), ("", "NaN"));
        assert_eq!(m.verdict, None);
    }

    #[test]
    fn health_prometheus_scalars_empty_vectors_and_refusals() {
        let m = read_answer(
            200,
            br#"{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}"#,
        );
        assert_eq!(m.values.unwrap()[0].value, "+Inf");
        let m = read_answer(
            200,
            br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
        );
        assert_eq!(m.values, Some(vec![]));
        let m = read_answer(
            200,
            br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
        );
        assert_eq!(m.verdict, Some(Verdict::Error));
        assert!(m.message.unwrap().contains("instant vector or scalar"));
        let m = read_answer(
            400,
            br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
        );
        assert_eq!(
            m.message.as_deref(),
            Some("prometheus refused the query: bad_data: parse error")
        );
        let m = read_answer(502, b"<html>Bad Gateway</html>");
        assert_eq!(m.verdict, Some(Verdict::Error));
        assert!(m.message.unwrap().contains("HTTP 502"));
    }
}
