//! What waverun's webhooks put on the wire, checked by implementations nobody here wrote: the
//! events of a log as CloudEvents ([`waverun_host::webhooks::cloudevent`]) signed as the
//! Standard Webhooks specification says ([`waverun_host::webhooks::signature`]), posted to a
//! receiver on loopback (`tests/webhooks/receiver.py`, a child process) that verifies each
//! signature with PyPI's `standardwebhooks` and reads each body with PyPI's `cloudevents`.
//! The receiver's Python is `target/webhook-receivers` (made by tests/run.sh from
//! tests/webhooks/requirements.txt). The same receiver answers as a failing, slow, silent,
//! redirecting or verbose endpoint would, for the sender ([`waverun_host::webhooks::sender`]).

mod http_support;
mod runtime_support;
mod webhook_support;

use http_support::agent;
use serde_json::{json, Value};
use std::time::Duration;
use waverun_host::store::{EventRow, NewEvent};
use waverun_host::webhooks::cloudevent::{self, cloud_event, Origin};
use waverun_host::webhooks::delivery::Outcome;
use waverun_host::webhooks::destination::AddressPolicy;
use waverun_host::webhooks::sender::{Sender, SenderConfig};
use waverun_host::webhooks::signature::{self, SignedHeaders, SigningKey};
use webhook_support::{deliveries, mode, receiver, Receiver};

/// Posts `body` with `headers` to the receiver; the status.
fn post(r: &Receiver, headers: &[(&str, String)], body: &[u8]) -> u16 {
    let mut req = ureq::http::Request::builder()
        .method("POST")
        .uri(format!("{}/hook", r.base))
        .header("content-type", cloudevent::CONTENT_TYPE);
    for (k, v) in headers {
        req = req.header(*k, v.as_str());
    }
    let resp = agent()
        .run(req.body(body.to_vec()).unwrap())
        .expect("the receiver answers");
    resp.status().as_u16()
}

fn row(seq: u64, run: &str, data: Value) -> EventRow {
    EventRow {
        seq,
        event: NewEvent {
            at_ms: 0,
            run: run.to_string(),
            kind: data["kind"].as_str().unwrap().to_string(),
            data: data.to_string(),
        },
    }
}

/// Events of one run as the log holds them: a pending approval, a failed member, the end.
fn events() -> Vec<EventRow> {
    vec![
        row(
            11,
            "weekly",
            json!({"at": "2026-12-07T08:00:00Z", "kind": "GateCreated", "run": "weekly",
                   "stage": "prod", "gateType": "Approval", "timing": "Before",
                   "gateId": "weekly/prod/before/0", "message": "SRE sign-off"}),
        ),
        row(
            12,
            "weekly",
            json!({"at": "2026-12-07T09:30:00Z", "kind": "MemberFailed", "run": "weekly",
                   "stage": "prod", "group": "eu", "member": "aks-eu-1",
                   "operationId": "weekly/aks-eu-1",
                   "error": {"code": "UpgradeFailed", "message": "drain: pods with PodDisruptionBudget"}}),
        ),
        row(
            13,
            "weekly",
            json!({"at": "2026-12-07T10:00:00Z", "kind": "RunFailed", "run": "weekly"}),
        ),
    ]
}

/// Seconds since the Unix epoch, as a receiver's clock reads them.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn origin() -> Origin {
    Origin {
        fleet: "prod".into(),
        base_url: Some("https://waverun.example:8443".into()),
    }
}

#[test]
fn every_event_verifies_with_the_standard_webhooks_library_and_reads_as_a_cloudevent() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    let r = receiver(dir.path(), &[&key.secret()]);
    let now = unix_now();
    for ev in events() {
        let ce = cloud_event(&ev, &origin());
        let body = serde_json::to_vec(&ce).unwrap();
        let h = signature::sign(
            std::slice::from_ref(&key),
            &format!("prod-{}", ev.seq),
            now,
            &body,
        );
        assert_eq!(post(&r, &h.pairs(), &body), 204, "{ce:#}");
    }
    let got = deliveries(&r);
    assert_eq!(got.len(), 3, "{got:#?}");
    for (d, ev) in got.iter().zip(events()) {
        assert_eq!(d["verifiedWith"], json!([0]), "{d:#}");
        assert_eq!(d["eventError"], Value::Null, "{d:#}");
        let e = &d["event"];
        let ours = cloud_event(&ev, &origin());
        for attr in [
            "specversion",
            "id",
            "source",
            "type",
            "subject",
            "severity",
            "datacontenttype",
        ] {
            assert_eq!(e[attr], ours[attr], "{attr}: {d:#}");
        }
        assert_eq!(e["time"], ours["time"], "{d:#}");
        assert_eq!(e["data"], ours["data"], "{d:#}");
    }
    let gate = &got[0]["event"];
    assert_eq!(gate["type"], cloudevent::AZURE_GATE_CREATED);
    assert!(gate["data"]["links"]["approve"]
        .as_str()
        .unwrap()
        .starts_with("https://waverun.example:8443/api/v1/fleets/prod/gates/"));
    assert_eq!(got[1]["event"]["severity"], "error");
    assert_eq!(got[2]["event"]["type"], "io.waverun.RunFailed");
}

#[test]
fn during_a_rotation_a_receiver_holding_either_secret_accepts_the_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let old = SigningKey::generate().unwrap();
    let new = SigningKey::generate().unwrap();
    let stranger = SigningKey::generate().unwrap();
    // The receiver knows the old secret, the new one and one that signs nothing.
    let r = receiver(
        dir.path(),
        &[&old.secret(), &new.secret(), &stranger.secret()],
    );
    let ev = &events()[0];
    let body = serde_json::to_vec(&cloud_event(ev, &origin())).unwrap();
    let now = unix_now();
    let h = signature::sign(&[new.clone(), old.clone()], "prod-11", now, &body);
    assert_eq!(post(&r, &h.pairs(), &body), 204);
    let d = &deliveries(&r)[0];
    assert_eq!(d["verifiedWith"], json!([0, 1]), "{d:#}");
}

#[test]
fn a_tampered_late_or_unsigned_delivery_is_refused_by_the_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    let r = receiver(dir.path(), &[&key.secret()]);
    let ev = &events()[1];
    let body = serde_json::to_vec(&cloud_event(ev, &origin())).unwrap();
    let now = unix_now();
    let h = signature::sign(std::slice::from_ref(&key), "prod-12", now, &body);
    // The body changed after signing.
    let mut tampered = body.clone();
    let at = tampered.iter().position(|b| *b == b'1').unwrap();
    tampered[at] = b'7';
    assert_eq!(post(&r, &h.pairs(), &tampered), 400);
    // Signed ten minutes ago: outside the library's tolerance.
    let late = signature::sign(std::slice::from_ref(&key), "prod-12", now - 600, &body);
    assert_eq!(post(&r, &late.pairs(), &body), 400);
    // No signature at all.
    assert_eq!(post(&r, &[], &body), 400);
    let got = deliveries(&r);
    assert_eq!(got.len(), 3);
    assert!(
        got.iter().all(|d| d["signatureError"].is_string()),
        "{got:#?}"
    );
    // The same bytes, signed now, pass: the refusals were the signature's, not the event's.
    assert_eq!(post(&r, &h.pairs(), &body), 204);
}

#[test]
fn a_request_whose_sender_went_away_mid_body_is_counted_not_listed_as_a_delivery() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    let r = receiver(dir.path(), &[&key.secret()]);
    let ev = &events()[1];
    let body = serde_json::to_vec(&cloud_event(ev, &origin())).unwrap();
    let h = signature::sign(std::slice::from_ref(&key), "prod-12", unix_now(), &body);
    // A daemon killed after its headers and a part of its body: the connection closes short.
    let addr = r.base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "POST /hook HTTP/1.1\r\nHost: {addr}\r\ncontent-type: {}\r\ncontent-length: {}\r\n",
        cloudevent::CONTENT_TYPE,
        body.len()
    );
    for (k, v) in h.pairs() {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(&body[..body.len() / 2]).unwrap();
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = conn.read_to_end(&mut answer);
    assert!(answer.is_empty(), "nobody to answer: {answer:?}");
    assert_eq!(webhook_support::cut_short(&r), 1);
    assert!(deliveries(&r).is_empty(), "{:#?}", deliveries(&r));
    // The whole request, sent again, is a delivery that checks out.
    assert_eq!(post(&r, &h.pairs(), &body), 204);
    let got = deliveries(&r);
    assert_eq!(got.len(), 1);
    assert!(got[0]["signatureError"].is_null(), "{got:#?}");
}

/// A sender that may deliver to loopback, with a one-second deadline.
fn loopback_sender() -> Sender {
    Sender::new(SenderConfig {
        timeout: Duration::from_secs(1),
        policy: AddressPolicy {
            allow_loopback: true,
        },
        ..SenderConfig::default()
    })
    .unwrap()
}

/// One signed delivery of the run's failed member: its URL's receiver sees it signed.
fn signed(key: &SigningKey) -> (SignedHeaders, Vec<u8>) {
    let body = serde_json::to_vec(&cloud_event(&events()[1], &origin())).unwrap();
    let h = signature::sign(std::slice::from_ref(key), "prod-12", unix_now(), &body);
    (h, body)
}

#[test]
fn the_sender_reports_each_answer_as_a_delivery_outcome_within_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    let r = receiver(dir.path(), &[&key.secret()]);
    let url = format!("{}/hook", r.base);
    let sender = loopback_sender();
    let (h, body) = signed(&key);

    let a = sender.send(&url, &h, &body);
    assert_eq!(a.outcome, Outcome::Delivered { status: 204 });

    mode(&r, json!({"mode": "fail", "status": 503, "retryAfter": 7}));
    match sender.send(&url, &h, &body).outcome {
        Outcome::Failed {
            status: Some(503),
            retry_after_ms: Some(7000),
            ..
        } => {}
        other => panic!("{other:?}"),
    }

    mode(
        &r,
        json!({"mode": "redirect", "location": "http://169.254.169.254/"}),
    );
    match sender.send(&url, &h, &body).outcome {
        Outcome::Failed {
            status: Some(307),
            error,
            ..
        } => assert!(error.contains("not followed"), "{error}"),
        other => panic!("{other:?}"),
    }

    // A receiver that answers late, or never: the attempt ends at its deadline (1 s), long
    // before the receiver would have answered (20 s, 60 s).
    for m in [
        json!({"mode": "slow", "seconds": 20}),
        json!({"mode": "never", "seconds": 60}),
    ] {
        mode(&r, m.clone());
        let a = sender.send(&url, &h, &body);
        match &a.outcome {
            Outcome::Failed {
                status: None,
                error,
                ..
            } => {
                assert!(error.contains("no answer within 1 s"), "{m}: {error}")
            }
            other => panic!("{m}: {other:?}"),
        }
        assert!(a.latency < Duration::from_secs(15), "{m}: {:?}", a.latency);
    }

    // A huge answer: only its status counts.
    mode(&r, json!({"mode": "big", "bytes": 4 << 20}));
    let a = sender.send(&url, &h, &body);
    assert_eq!(a.outcome, Outcome::Delivered { status: 200 });

    // Every attempt reached the receiver once, signed: the redirect was not followed.
    let got = deliveries(&r);
    assert_eq!(got.len(), 6, "{got:#?}");
    assert!(
        got.iter().all(|d| d["verifiedWith"] == json!([0])),
        "{got:#?}"
    );
}

#[test]
fn the_sender_never_connects_where_the_address_policy_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    let r = receiver(dir.path(), &[&key.secret()]);
    let port = r.base.rsplit(':').next().unwrap().to_string();
    let strict = Sender::new(SenderConfig {
        timeout: Duration::from_secs(1),
        ..SenderConfig::default()
    })
    .unwrap();
    let (h, body) = signed(&key);
    for (url, why) in [
        // A literal loopback address, and a name that resolves only to loopback.
        (format!("https://127.0.0.1:{port}/hook"), "loopback"),
        (format!("https://localhost:{port}/hook"), "resolves only to"),
        (format!("http://127.0.0.1:{port}/hook"), "loopback"),
        ("https://169.254.169.254/latest".to_string(), "metadata"),
    ] {
        match strict.send(&url, &h, &body).outcome {
            Outcome::Failed {
                status: None,
                error,
                ..
            } => {
                assert!(error.contains(why), "{url}: {error}")
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    assert!(deliveries(&r).is_empty(), "nothing reached the receiver");
    // A port nobody listens on: refused, said so.
    drop(r);
    match loopback_sender()
        .send(&format!("http://127.0.0.1:{port}/hook"), &h, &body)
        .outcome
    {
        Outcome::Failed { status: None, .. } => {}
        other => panic!("{other:?}"),
    }
}
