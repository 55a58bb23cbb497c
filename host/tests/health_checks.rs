//! One measurement of a health check, against real components on loopback: Debian's
//! Prometheus scraping an exporter in this process, HTTP receivers written here, shell
//! scripts in a temporary directory. Each test says what the host reports; what it means is the
//! engine's business (`waverun_core::health`).

mod prom_support;

use prom_support::{free_port, Exporter, Loopback, Prometheus, Request, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use waverun_core::health::{
    ExecCheck, HealthCheck, HttpCheck, Measurement, PrometheusCheck, ProviderCheck, Verdict,
};
use waverun_core::{CheckPurpose, CheckRequest, CheckTarget};
use waverun_host::health::{Checker, HealthConfig};

#[tokio::test]
async fn prometheus_checks_report_the_samples_a_real_prometheus_returns() {
    let exporter = Exporter::start();
    exporter.set("c1", 0.002);
    exporter.set("c2", 0.25);
    let mut prom = Prometheus::start(&exporter);
    prom.wait_for("count(waverun_test_error_ratio) == 2", 30);
    let checker = checker(&format!("prometheus: {{url: \"{}\"}}", prom.url));

    // {{member}}: the one member's series, its value as Prometheus wrote it.
    let q = "waverun_test_error_ratio{cluster=\"{{member}}\"}";
    let m = checker.measure(&request(prometheus(q), &["c1"])).await;
    let values = m.values.clone().unwrap_or_else(|| panic!("{m:?}"));
    assert_eq!(values.len(), 1, "{m:?}");
    assert_eq!(values[0].value, "0.002");
    assert!(
        values[0]
            .labels
            .starts_with("__name__=\"waverun_test_error_ratio\",cluster=\"c1\","),
        "{}",
        values[0].labels
    );
    assert_eq!(m.verdict, None);

    // {{members}}: a regex alternation for `=~`, every member's series.
    let q = "sort(waverun_test_error_ratio{cluster=~\"{{members}}\"})";
    let m = checker
        .measure(&request(prometheus(q), &["c1", "c2"]))
        .await;
    let values: Vec<String> = m.values.unwrap().into_iter().map(|s| s.value).collect();
    assert_eq!(values, ["0.002", "0.25"]);

    // A scalar: one sample without labels.
    let m = checker
        .measure(&request(
            prometheus("scalar(count(waverun_test_error_ratio))"),
            &["c1"],
        ))
        .await;
    let values = m.values.unwrap();
    assert_eq!(
        (values[0].labels.as_str(), values[0].value.as_str()),
        ("", "2")
    );

    // A series that is absent: no sample, no verdict (the engine decides what empty means).
    let m = checker.measure(&request(prometheus(q), &["c9"])).await;
    assert_eq!(m.values, Some(vec![]), "{m:?}");
    assert_eq!(m.verdict, None);

    // A query Prometheus refuses: an error carrying Prometheus's own words.
    let m = checker
        .measure(&request(
            prometheus("sum(waverun_test_error_ratio"),
            &["c1"],
        ))
        .await;
    assert_error(&m, "prometheus refused the query: bad_data: ");
    assert!(m.message.unwrap().contains("parse error"));

    // A range vector is not a measurement.
    let m = checker
        .measure(&request(
            prometheus("waverun_test_error_ratio[5s]"),
            &["c1"],
        ))
        .await;
    assert_error(&m, "use an instant vector or scalar");
}

#[tokio::test]
async fn a_prometheus_nobody_answers_at_is_an_error() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let checker = checker(&format!("prometheus: {{url: \"{url}\"}}"));
    let m = checker.measure(&request(prometheus("up"), &["c1"])).await;
    assert_error(&m, &format!("prometheus at {url} not reached"));
}

#[tokio::test]
async fn a_prometheus_check_without_prometheus_in_the_config_is_an_error() {
    let m = checker("{}")
        .measure(&request(prometheus("up"), &["c1"]))
        .await;
    assert_error(&m, "no prometheus.url in the daemon's config");
}

#[tokio::test]
async fn an_unknown_template_variable_is_an_error_naming_it() {
    let checker = checker("prometheus: {url: \"http://127.0.0.1:9\"}");
    let m = checker
        .measure(&request(prometheus("up{cluster=\"{{cluster}}\"}"), &["c1"]))
        .await;
    assert_error(
        &m,
        "prometheus.query: {{cluster}} is not a template variable",
    );
}

#[tokio::test]
async fn http_checks_read_the_receivers_answer_as_a_verdict() {
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let log = seen.clone();
    let receiver = Loopback::start(move |req| {
        log.lock().unwrap().push(req.clone());
        match req.target.split('?').next().unwrap() {
            "/pass" => Response::new(200, "ok"),
            "/fail" => Response::new(403, "error budget spent\n"),
            "/inconclusive" => Response::json(
                200,
                r#"{"result": "Inconclusive", "message": "no traffic yet"}"#,
            ),
            "/told-fail" => Response::json(200, r#"{"result": "fail", "message": "p99 high"}"#),
            "/boom" => Response::new(500, "oops"),
            "/busy" => Response::new(429, ""),
            _ => Response::new(404, "no such check"),
        }
    });
    let checker = checker("{}");
    let measure = |path: &str| {
        let req = request(http(&receiver.url(path), None), &["c1", "c2"]);
        let checker = checker.clone();
        async move { checker.measure(&req).await }
    };

    let m = measure("/pass?member={{member}}").await;
    assert_eq!(
        (m.verdict, m.message.as_deref()),
        (Some(Verdict::Pass), None)
    );
    let m = measure("/fail").await;
    assert_eq!(m.verdict, Some(Verdict::Fail), "{m:?}");
    assert_eq!(m.message.as_deref(), Some("HTTP 403: error budget spent"));
    let m = measure("/inconclusive").await;
    assert_eq!(m.verdict, Some(Verdict::Inconclusive));
    assert_eq!(m.message.as_deref(), Some("no traffic yet"));
    let m = measure("/told-fail").await;
    assert_eq!(
        (m.verdict, m.message.as_deref()),
        (Some(Verdict::Fail), Some("p99 high"))
    );
    assert_error(&measure("/boom").await, "HTTP 500");
    assert_error(&measure("/busy").await, "HTTP 429");

    // What the receiver got: a POST of the measurement as JSON, the URL's variables encoded.
    let first = seen.lock().unwrap()[0].clone();
    assert_eq!(first.method, "POST");
    assert_eq!(first.target, "/pass?member=c1");
    let body: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "run": "r1", "stage": "canary", "group": "g1", "gateId": "gate-1",
            "purpose": "Gate", "measurementId": "r1/canary/g1/check#1",
            "members": [{"name": "c1", "region": "westeurope"}, {"name": "c2", "region": "westeurope"}],
            "check": "check",
        })
    );
}

#[tokio::test]
async fn an_http_receiver_slower_than_the_timeout_is_an_error() {
    let receiver = Loopback::start(|_| {
        std::thread::sleep(Duration::from_secs(4));
        Response::new(200, "too late")
    });
    let mut check = http(&receiver.url("/slow"), None);
    check.timeout_seconds = Some(1);
    let m = checker("{}").measure(&request(check, &["c1"])).await;
    assert_error(&m, "no answer within 1 s");
}

#[tokio::test]
async fn with_allow_origins_http_checks_go_only_to_the_origins_listed() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let receiver = Loopback::start(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Response::new(200, "")
    });
    let allowed = checker(&format!(
        "http: {{allowOrigins: [\"{}\"]}}",
        receiver.url("")
    ));
    let m = allowed
        .measure(&request(http(&receiver.url("/ok"), None), &["c1"]))
        .await;
    assert_eq!(m.verdict, Some(Verdict::Pass), "{m:?}");
    let other = checker("http: {allowOrigins: [\"https://hooks.example\"]}");
    let m = other
        .measure(&request(http(&receiver.url("/ok?token=x"), None), &["c1"]))
        .await;
    assert_error(
        &m,
        "is not on an origin the daemon's config allows (healthChecks.http.allowOrigins)",
    );
    assert!(
        !m.message.unwrap().contains("token=x"),
        "the query is not shown"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "nothing was sent to a refused origin"
    );
}

#[tokio::test]
async fn secret_headers_reach_the_receiver_and_never_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "s3cret-value\n").unwrap();
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let log = seen.clone();
    let receiver = Loopback::start(move |req| {
        log.lock().unwrap().push(req.clone());
        let got = req.headers.get("x-api-key").cloned().unwrap_or_default();
        // A careless receiver echoes the key.
        Response::json(403, format!(r#"{{"message": "key {got} is revoked"}}"#))
    });
    let origin = format!("http://{}", receiver.addr);
    let checker = checker(&format!(
        "secrets:\n  hooks:\n    origins: [\"{origin}\"]\n    headers: {{X-Api-Key: {{fromFile: \"{}\"}}}}\n",
        key.display()
    ));
    let m = checker
        .measure(&request(http(&receiver.url("/x"), Some("hooks")), &["c1"]))
        .await;
    assert_eq!(m.verdict, Some(Verdict::Fail), "{m:?}");
    assert_eq!(
        m.message.as_deref(),
        Some("HTTP 403: key [REDACTED] is revoked")
    );
    assert_eq!(
        seen.lock().unwrap()[0]
            .headers
            .get("x-api-key")
            .map(String::as_str),
        Some("s3cret-value")
    );

    // A secret the config lacks is named; a URL off the secret's origins never gets it.
    let m = checker
        .measure(&request(http(&receiver.url("/x"), Some("other")), &["c1"]))
        .await;
    assert_error(
        &m,
        "http.secret: \"other\" is not a secret of the daemon's config",
    );
    let elsewhere = format!("http://127.0.0.1:{}/x", free_port());
    let m = checker
        .measure(&request(http(&elsewhere, Some("hooks")), &["c1"]))
        .await;
    assert_error(&m, "is sent only to its origins");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn exec_checks_read_the_exit_code_as_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let pass = script(
        dir.path(),
        "pass",
        // The request on stdin, the variables in the environment, the last line as message.
        "grep -q '\"measurementId\":\"r1/canary/g1/check#1\"' || exit 9\n\
         echo checking\n\
         echo \"$WAVERUN_MEMBER in $WAVERUN_RUN/$WAVERUN_STAGE/$WAVERUN_GROUP is fine, $1\"\n\
         echo\n",
    );
    let fail = script(dir.path(), "fail", "echo 'error rate 4%'; exit 1\n");
    let unsure = script(dir.path(), "unsure", "echo 'no traffic'; exit 3\n");
    let crash = script(dir.path(), "crash", "echo 'bad flag' >&2; exit 2\n");
    let checker = exec_checker(dir.path(), &[&pass, &fail, &unsure, &crash]);

    let m = checker
        .measure(&request(exec(&[&pass, "{{member}}!"]), &["c1"]))
        .await;
    assert_eq!(m.verdict, Some(Verdict::Pass), "{m:?}");
    assert_eq!(
        m.message.as_deref(),
        Some("c1 in r1/canary/g1 is fine, c1!")
    );
    let m = checker.measure(&request(exec(&[&fail]), &["c1"])).await;
    assert_eq!(
        (m.verdict, m.message.as_deref()),
        (Some(Verdict::Fail), Some("error rate 4%"))
    );
    let m = checker.measure(&request(exec(&[&unsure]), &["c1"])).await;
    assert_eq!(m.verdict, Some(Verdict::Inconclusive));
    let m = checker.measure(&request(exec(&[&crash]), &["c1"])).await;
    assert_error(&m, "exited 2 (stderr: bad flag)");
}

#[tokio::test]
async fn an_exec_check_past_its_deadline_is_killed_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let hang = script(
        dir.path(),
        "hang",
        &format!("sleep 60 &\necho $! > {}\nwait\n", pids.display()),
    );
    let checker = exec_checker(dir.path(), &[&hang]);
    let mut check = exec(&[&hang]);
    // Long enough for `sh` to start and write the pid file on a loaded machine: killed before
    // that, the test would have no child to look for.
    check.timeout_seconds = Some(5);
    let m = checker.measure(&request(check, &["c1"])).await;
    assert_error(&m, "no result within 5 s; its process group was killed");
    let pid: i32 = std::fs::read_to_string(&pids)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually(10, "the command's child is gone", || !alive(pid));
}

#[tokio::test]
async fn an_exec_check_runs_only_programs_the_config_allows() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let allowed = script(dir.path(), "allowed", "exit 0\n");
    let checker = exec_checker(dir.path(), &[&allowed]);
    let touch = format!("touch {}", marker.display());
    for command in [
        vec!["/bin/sh", "-c", touch.as_str()],
        vec!["sh", "-c", touch.as_str()],
    ] {
        let m = checker.measure(&request(exec(&command), &["c1"])).await;
        assert_error(
            &m,
            "is not a program the daemon's config allows (healthChecks.exec.allow)",
        );
    }
    assert!(!marker.exists(), "a program not allowed ran");
}

#[tokio::test]
async fn a_provider_check_is_left_to_the_members_provider() {
    let check = HealthCheck {
        provider: Some(ProviderCheck {}),
        ..base_check()
    };
    assert!(waverun_host::health::answered_by_provider(&check));
    let m = checker("{}").measure(&request(check, &["c1"])).await;
    assert_error(&m, "provider checks are answered by the member's provider");
}

#[test]
fn the_config_names_the_field_it_refuses() {
    let bad = [
        ("exec: {allow: [bin/check]}", "healthChecks.exec.allow[0]: bin/check is not an absolute path"),
        ("prometheus: {url: \"ftp://x\"}", "healthChecks.prometheus.url: "),
        ("prometheus: {url: \"http://p:9090\", secret: s}", "healthChecks.prometheus.secret: \"s\" is not in healthChecks.secrets"),
        (
            "secrets: {s: {origins: [\"http://hooks.example\"], headers: {A: {fromEnv: A}}}}",
            "healthChecks.secrets.s.origins[0]: \"http://hooks.example\": secrets go over plain http only to this machine",
        ),
        ("secrets: {s: {origins: [], headers: {A: {fromEnv: A}}}}", "healthChecks.secrets.s.origins: "),
        ("http: {allowOrigins: [\"hooks.example\"]}", "healthChecks.http.allowOrigins[0]: \"hooks.example\" is not an http:// or https:// origin"),
    ];
    for (yaml, want) in bad {
        let config: HealthConfig = waverun_host::parse_text(yaml, false).unwrap();
        let e = Checker::new(config)
            .err()
            .unwrap_or_else(|| panic!("{yaml} was accepted"));
        assert!(e.starts_with(want), "{yaml}: {e}");
    }
    let e = waverun_host::parse_text::<HealthConfig>("prometheus: {url: x, token: y}", false)
        .unwrap_err();
    assert!(e.contains("token"), "{e}");
}

// ---- helpers ----

fn checker(yaml: &str) -> Checker {
    let config: HealthConfig = waverun_host::parse_text(yaml, false).unwrap();
    Checker::new(config).unwrap()
}

/// A checker allowing `programs`, its state under `dir`.
fn exec_checker(dir: &Path, programs: &[&str]) -> Checker {
    let allow: Vec<String> = programs.iter().map(|p| format!("\"{p}\"")).collect();
    checker(&format!(
        "exec: {{allow: [{}], stateDir: \"{}\"}}",
        allow.join(", "),
        dir.join("state").display()
    ))
}

fn base_check() -> HealthCheck {
    HealthCheck {
        name: "check".to_string(),
        prometheus: None,
        http: None,
        exec: None,
        provider: None,
        interval_seconds: None,
        count: None,
        duration_seconds: None,
        failure_limit: None,
        inconclusive_limit: None,
        consecutive_error_limit: None,
        timeout_seconds: Some(10),
    }
}

fn prometheus(query: &str) -> HealthCheck {
    HealthCheck {
        prometheus: Some(PrometheusCheck {
            query: query.to_string(),
            success_condition: Some("result < 0.01".to_string()),
            failure_condition: None,
            on_empty: None,
        }),
        ..base_check()
    }
}

fn http(url: &str, secret: Option<&str>) -> HealthCheck {
    HealthCheck {
        http: Some(HttpCheck {
            url: url.to_string(),
            secret: secret.map(str::to_string),
        }),
        ..base_check()
    }
}

fn exec(command: &[&str]) -> HealthCheck {
    HealthCheck {
        exec: Some(ExecCheck {
            command: command.iter().map(|s| s.to_string()).collect(),
        }),
        ..base_check()
    }
}

fn request(check: HealthCheck, members: &[&str]) -> CheckRequest {
    CheckRequest {
        measurement_id: "r1/canary/g1/check#1".to_string(),
        run: "r1".to_string(),
        stage: "canary".to_string(),
        group: Some("g1".to_string()),
        gate_id: Some("gate-1".to_string()),
        purpose: CheckPurpose::Gate,
        members: members
            .iter()
            .map(|n| CheckTarget {
                name: n.to_string(),
                region: "westeurope".to_string(),
                provider: None,
            })
            .collect(),
        check,
        upgrade: None,
    }
}

fn assert_error(m: &Measurement, contains: &str) {
    assert_eq!(m.verdict, Some(Verdict::Error), "{m:?}");
    assert!(
        m.message.as_deref().unwrap_or("").contains(contains),
        "{:?} does not contain {contains:?}",
        m.message
    );
}

/// A shell script `name` in `dir`, executable; its absolute path.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

/// Whether `pid` is a live process (a zombie nobody reaped is not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("not within {secs} s: {what}");
}
