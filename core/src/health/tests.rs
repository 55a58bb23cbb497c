use super::*;

fn prom(success: Option<&str>, failure: Option<&str>) -> HealthCheck {
    HealthCheck {
        name: "errors".into(),
        prometheus: Some(PrometheusCheck {
            query: "x".into(),
            success_condition: success.map(String::from),
            failure_condition: failure.map(String::from),
            on_empty: None,
        }),
        http: None,
        exec: None,
        provider: None,
        interval_seconds: None,
        count: None,
        duration_seconds: None,
        failure_limit: None,
        inconclusive_limit: None,
        consecutive_error_limit: None,
        timeout_seconds: None,
    }
}

fn samples(values: &[&str]) -> Measurement {
    Measurement {
        values: Some(
            values
                .iter()
                .map(|v| Sample {
                    labels: String::new(),
                    value: v.to_string(),
                })
                .collect(),
        ),
        verdict: None,
        message: None,
    }
}

fn verdict(v: Verdict) -> Measurement {
    Measurement {
        values: None,
        verdict: Some(v),
        message: None,
    }
}

#[test]
fn conditions_compare_result_with_numbers_joined_by_and_or() {
    let c = Condition::parse("result >= 0.95 && (result <= 1 || result == 7)").unwrap();
    assert!(c.holds("0.97"));
    assert!(c.holds("7"));
    assert!(!c.holds("0.5"));
    assert!(!c.holds("1.5"));
    assert!(Condition::parse("result < 1e-3").unwrap().holds("0.0001"));
    assert!(Condition::parse("result != 0").unwrap().holds("+Inf"));
}

#[test]
fn nan_meets_no_condition() {
    for text in ["result < 1", "result != 0", "result >= 0 || result < 0"] {
        assert!(!Condition::parse(text).unwrap().holds("NaN"), "{text}");
        assert!(!Condition::parse(text).unwrap().holds("many"), "{text}");
    }
}

#[test]
fn a_condition_that_does_not_parse_says_where_and_what_was_expected() {
    let cases = [
        ("", "a condition is empty"),
        (
            "result <",
            "expected a number after `result <`, found the end",
        ),
        ("value < 1", "\"value\" at column 1 is not `result`"),
        ("result = 1", "`=` at column 8 is not an operator"),
        (
            "result < 1 result",
            "unexpected `result` after a complete condition",
        ),
        ("(result < 1", "expected `)`, found the end"),
        ("result < 1 &&", "expected `result` or `(`, found the end"),
        ("result < 1e999", "is not a finite number"),
    ];
    for (text, want) in cases {
        let e = Condition::parse(text).unwrap_err();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn an_empty_result_is_inconclusive_unless_on_empty_says_otherwise() {
    let mut c = prom(Some("result < 0.01"), None);
    assert_eq!(c.judge(&samples(&[])).verdict, Verdict::Inconclusive);
    c.prometheus.as_mut().unwrap().on_empty = Some(Verdict::Pass);
    assert_eq!(c.judge(&samples(&[])).verdict, Verdict::Pass);
}

#[test]
fn every_sample_must_meet_the_success_condition() {
    let c = prom(Some("result < 0.01"), None);
    let j = c.judge(&samples(&["0.001", "0.02"]));
    assert_eq!(j.verdict, Verdict::Fail);
    assert_eq!(j.value.as_deref(), Some("0.02"));
    assert_eq!(
        c.judge(&samples(&["0.001", "0.002"])).verdict,
        Verdict::Pass
    );
}

#[test]
fn any_sample_meeting_the_failure_condition_fails_and_neither_is_inconclusive() {
    let c = prom(Some("result < 0.01"), Some("result >= 0.05"));
    assert_eq!(c.judge(&samples(&["0.001", "0.07"])).verdict, Verdict::Fail);
    assert_eq!(c.judge(&samples(&["0.03"])).verdict, Verdict::Inconclusive);
    assert_eq!(c.judge(&samples(&["0.003"])).verdict, Verdict::Pass);
    let only_failure = prom(None, Some("result >= 0.05"));
    assert_eq!(
        only_failure.judge(&samples(&["0.03"])).verdict,
        Verdict::Pass
    );
}

#[test]
fn an_error_is_never_a_pass_even_with_values() {
    let c = prom(Some("result < 1"), None);
    let mut m = samples(&["0"]);
    m.verdict = Some(Verdict::Error);
    assert_eq!(c.judge(&m).verdict, Verdict::Error);
    // A measurement that says nothing is an error too.
    assert_eq!(c.judge(&Measurement::default()).verdict, Verdict::Error);
}

#[test]
fn a_check_passes_after_count_measurements_within_its_limits() {
    let mut c = prom(Some("result < 1"), None);
    c.count = Some(3);
    c.failure_limit = Some(1);
    let mut a = Analysis::default();
    assert_eq!(a.record(&c, Verdict::Pass), Next::Again);
    assert_eq!(a.record(&c, Verdict::Fail), Next::Again);
    assert!(matches!(
        a.record(&c, Verdict::Pass),
        Next::Done(Verdict::Pass, _)
    ));
}

#[test]
fn failures_beyond_the_limit_fail_at_once() {
    let mut c = prom(Some("result < 1"), None);
    c.count = Some(5);
    let mut a = Analysis::default();
    match a.record(&c, Verdict::Fail) {
        Next::Done(Verdict::Fail, why) => assert!(why.contains("failureLimit 0"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn inconclusive_beyond_the_limit_ends_inconclusive() {
    let mut c = prom(Some("result < 1"), None);
    c.count = Some(5);
    c.inconclusive_limit = Some(1);
    let mut a = Analysis::default();
    assert_eq!(a.record(&c, Verdict::Inconclusive), Next::Again);
    assert!(matches!(
        a.record(&c, Verdict::Inconclusive),
        Next::Done(Verdict::Inconclusive, _)
    ));
}

#[test]
fn errors_do_not_count_as_measurements_and_too_many_in_a_row_fail() {
    let mut c = prom(Some("result < 1"), None);
    c.consecutive_error_limit = Some(2);
    let mut a = Analysis::default();
    assert_eq!(a.record(&c, Verdict::Error), Next::Again);
    assert_eq!(a.record(&c, Verdict::Error), Next::Again);
    assert_eq!(a.taken, 0);
    match a.record(&c, Verdict::Error) {
        Next::Done(Verdict::Fail, why) => assert!(why.contains("3 measurements in a row")),
        other => panic!("{other:?}"),
    }
    // A pass in between resets the run of errors.
    let mut b = Analysis::default();
    c.count = Some(2);
    b.record(&c, Verdict::Error);
    b.record(&c, Verdict::Error);
    assert_eq!(b.record(&c, Verdict::Pass), Next::Again);
    assert_eq!(b.record(&c, Verdict::Error), Next::Again);
    assert!(matches!(
        b.record(&c, Verdict::Pass),
        Next::Done(Verdict::Pass, _)
    ));
}

#[test]
fn a_duration_means_one_measurement_per_interval_and_one_at_the_start() {
    let mut c = prom(Some("result < 1"), None);
    c.interval_seconds = Some(60);
    c.duration_seconds = Some(300);
    assert_eq!(c.measurements(), 6);
    assert_eq!(prom(Some("result < 1"), None).measurements(), 1);
}

#[test]
fn verdict_sources_give_their_verdict_and_message() {
    let mut c = prom(None, None);
    c.prometheus = None;
    c.http = Some(HttpCheck {
        url: "http://127.0.0.1/x".into(),
        secret: None,
    });
    let j = c.judge(&Measurement {
        values: None,
        verdict: Some(Verdict::Inconclusive),
        message: Some("canary not ready".into()),
    });
    assert_eq!(j.verdict, Verdict::Inconclusive);
    assert_eq!(j.message.as_deref(), Some("canary not ready"));
    assert_eq!(c.judge(&verdict(Verdict::Pass)).verdict, Verdict::Pass);
}

#[test]
fn checks_are_validated_with_their_paths() {
    let mut bad = prom(Some("result <"), None);
    bad.name = "Bad Name".into();
    bad.http = Some(HttpCheck {
        url: "ftp://x".into(),
        secret: None,
    });
    bad.count = Some(0);
    let dup = prom(Some("result < 1"), None);
    let mut errors = Errors::default();
    validate_checks(&[bad, dup.clone(), dup], "healthChecks", &mut errors);
    let text = errors.into_result().unwrap_err().to_string();
    for want in [
        "healthChecks[0].name: \"Bad Name\"",
        "healthChecks[0]: a check has exactly one source",
        "healthChecks[0].prometheus.successCondition:",
        "healthChecks[0].http.url: \"ftp://x\" is not an http:// or https:// URL",
        "healthChecks[0].count: 0 is outside 1..=1000",
        "healthChecks[2].name: \"errors\" is already the name of healthChecks[1]",
    ] {
        assert!(text.contains(want), "missing {want:?} in {text}");
    }
}
