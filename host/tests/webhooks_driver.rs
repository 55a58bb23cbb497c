//! The webhook driver ([`waverun_host::webhooks::driver`]) over a real SQLite store and a real
//! receiver on loopback (`tests/webhooks/receiver.py`, verifying with PyPI's
//! `standardwebhooks` and `cloudevents`): events committed to the log reach the receiver in
//! order, signed; a receiver that fails is retried and the order holds; an event too old is
//! dead-lettered and delivered again on request; cursors, dead letters and the delivery log
//! reach the store through its one writer (here, the test's thread).

mod http_support;
mod runtime_support;
mod webhook_support;

use http_support::eventually;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;
use waverun_host::clock::{Clock, SystemClock};
use waverun_host::daemon::FleetClock;
use waverun_host::store::{NewEvent, SqliteStore, Step, Store, StoreRead, WebhookWrites};
use waverun_host::webhooks::cloudevent::Origin;
use waverun_host::webhooks::delivery::Policy;
use waverun_host::webhooks::destination::AddressPolicy;
use waverun_host::webhooks::driver::{Active, Driver, DriverMsg};
use waverun_host::webhooks::sender::{Sender, SenderConfig};
use waverun_host::webhooks::signature::SigningKey;
use waverun_host::webhooks::subscription;
use webhook_support::{deliveries, mode, receiver};

/// `n` member events of run `r`, committed to the log as one step each.
fn log_events(store: &mut SqliteStore, from: u64, n: u64) {
    for i in from..from + n {
        let data = json!({"at": "2026-12-06T10:00:00Z", "kind": "MemberCompleted", "run": "r",
                          "stage": "s", "group": "g", "member": format!("m{i}"),
                          "operationId": format!("r/m{i}")});
        store
            .commit(&Step {
                events: vec![NewEvent {
                    at_ms: SystemClock.now_ms(),
                    run: "r".into(),
                    kind: "MemberCompleted".into(),
                    data: data.to_string(),
                }],
                ..Step::default()
            })
            .unwrap();
    }
}

struct Harness {
    store: SqliteStore,
    driver: Driver,
    writes: mpsc::Receiver<WebhookWrites>,
}

impl Harness {
    /// Applies what the driver handed over, as the engine thread would.
    fn apply_writes(&mut self) {
        while let Ok(w) = self.writes.try_recv() {
            self.store.record_webhooks(&w).unwrap();
        }
    }

    fn logged(&mut self) {
        let last = self.store.last_event_seq().unwrap();
        self.driver.handle().send(DriverMsg::Logged(last)).unwrap();
    }
}

fn start(dir: &std::path::Path, url: &str, key: &SigningKey, max_age_ms: i64) -> Harness {
    let store = SqliteStore::open(&dir.join("waverun.db")).unwrap();
    let body = json!({"properties": {"destination": {"endpointType": "WebHook",
        "properties": {"endpointUrl": url}}}})
    .to_string();
    let policy = AddressPolicy {
        allow_loopback: true,
    };
    let sub = subscription::parse(&body, policy, &[]).unwrap();
    let active = Active {
        subscription: sub,
        keys: vec![key.clone()],
        start_after: 0,
        max_age_ms,
        keys_until_ms: None,
    };
    let load = Box::new(move |_: &dyn StoreRead| {
        Ok(BTreeMap::from([("pager".to_string(), active.clone())]))
    });
    let (tx, writes) = mpsc::channel();
    let sender = Sender::new(SenderConfig {
        timeout: Duration::from_secs(2),
        policy,
        ..SenderConfig::default()
    })
    .unwrap();
    let driver = Driver::start(
        store.reader().unwrap(),
        load,
        Box::new(move |w| {
            let _ = tx.send(w);
        }),
        sender,
        Origin {
            fleet: "prod".into(),
            base_url: None,
        },
        FleetClock::real_time(),
        Policy {
            first_retry_ms: 200,
            max_backoff_ms: 1_000,
            ..Policy::default()
        },
    )
    .unwrap();
    Harness {
        store,
        driver,
        writes,
    }
}

#[test]
fn logged_events_reach_the_receiver_in_order_signed_and_the_cursor_follows() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    let r = receiver(dir.path(), &[&key.secret()]);
    let mut h = start(dir.path(), &format!("{}/hook", r.base), &key, 3_600_000);
    log_events(&mut h.store, 0, 20);
    h.logged();
    let got = eventually(60, "20 deliveries", || {
        let d = deliveries(&r);
        (d.len() >= 20).then_some(d)
    });
    let ids: Vec<String> = got
        .iter()
        .map(|d| d["event"]["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, (1..=20).map(|i| i.to_string()).collect::<Vec<_>>());
    assert!(
        got.iter().all(|d| d["verifiedWith"] == json!([0])),
        "{got:#?}"
    );
    assert_eq!(got[0]["webhookId"], "prod-1");
    eventually(30, "the cursor at 20 in the store", || {
        h.apply_writes();
        (h.store.webhook_cursors().unwrap().get("pager") == Some(&20)).then_some(())
    });
    let log = h.store.deliveries("pager", None, 100).unwrap();
    assert_eq!(log.len(), 20);
    assert!(log
        .iter()
        .all(|(_, d)| d.outcome == "delivered" && d.status == Some(204)));
    h.driver.shutdown();
}

#[test]
fn a_failing_receiver_is_retried_in_order_and_a_too_old_event_is_dead_lettered_then_redelivered() {
    let dir = tempfile::tempdir().unwrap();
    let key = SigningKey::generate().unwrap();
    let r = receiver(dir.path(), &[&key.secret()]);
    // Events older than 3 s are given up on.
    let mut h = start(dir.path(), &format!("{}/hook", r.base), &key, 3_000);
    mode(&r, json!({"mode": "fail", "status": 503}));
    log_events(&mut h.store, 0, 2);
    h.logged();
    // Event 1 is tried until it is 3 s old, then dead-lettered; event 2, as old, once.
    eventually(60, "both dead-lettered", || {
        h.apply_writes();
        (h.store.dead_letter_count("pager").unwrap() == 2).then_some(())
    });
    let attempts_at_1 = deliveries(&r)
        .iter()
        .filter(|d| d["event"]["id"] == "1")
        .count();
    assert!(attempts_at_1 >= 3, "retried: {attempts_at_1} attempts");
    // The receiver is back: new events go, and the dead letters go again on request.
    mode(&r, json!({"mode": "ok"}));
    log_events(&mut h.store, 2, 1);
    h.logged();
    h.driver
        .handle()
        .send(DriverMsg::Redeliver {
            lane: "pager".into(),
            seqs: vec![1, 2],
        })
        .unwrap();
    eventually(60, "the dead letters cleared and event 3 delivered", || {
        h.apply_writes();
        let delivered: Vec<String> = deliveries(&r)
            .iter()
            .filter(|d| d["answered"] == 204)
            .map(|d| d["event"]["id"].as_str().unwrap().to_string())
            .collect();
        (h.store.dead_letter_count("pager").unwrap() == 0 && delivered.len() == 3)
            .then_some(delivered)
    });
    assert_eq!(h.store.webhook_cursors().unwrap()["pager"], 3);
    let outcomes: Vec<String> = h
        .store
        .deliveries("pager", None, 100)
        .unwrap()
        .into_iter()
        .map(|(_, d)| d.outcome)
        .collect();
    assert!(outcomes.contains(&"failed".to_string()), "{outcomes:?}");
    assert!(outcomes.contains(&"delivered".to_string()), "{outcomes:?}");
    let stats = h.driver.stats().outcomes();
    assert_eq!(stats[&("pager".to_string(), "deadLettered")], 2);
    h.driver.shutdown();
}
