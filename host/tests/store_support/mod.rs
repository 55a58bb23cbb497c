//! The store's contract, one suite for every backend (`shared/spec/store.md`): each function
//! here checks one behaviour of a [`Backend`] — SQLite in `store.rs`, PostgreSQL in
//! `store_postgres.rs` — so that the two cannot drift; and the rows the checks write.
#![allow(dead_code)] // each test file uses a part

use waverun_host::store::{
    meta, DeadLetter, DeliveryRecord, JournalRecord, NewAudit, NewEvent, OperationIntent,
    OperationState, OperationUpdate, ResourceMeta, SnapshotRecord, Step, Store, StoreError,
    StoreRead, WebhookWrites, DELIVERY_LOG_KEEP, SCHEMA_VERSION,
};

/// One store, opened as often as a test restarts its writer.
pub trait Backend {
    /// The store, opened (again) by a writer that may write.
    fn open(&mut self) -> Box<dyn Store>;
}

pub fn record(seq: u64) -> JournalRecord {
    JournalRecord {
        seq,
        now_ms: Some(1_000 * seq as i64),
        record: format!(r#"{{"seq":{seq},"now":"2026-12-01T00:00:0{seq}Z","input":"timeout"}}"#)
            .into_bytes(),
    }
}

pub fn event(kind: &str, run: &str) -> NewEvent {
    NewEvent {
        at_ms: 5,
        run: run.to_string(),
        kind: kind.to_string(),
        data: format!(r#"{{"kind":"{kind}","run":"{run}"}}"#),
    }
}

pub fn intent(id: &str) -> OperationIntent {
    OperationIntent {
        id: id.to_string(),
        member: id.rsplit('/').next().unwrap().to_string(),
        provider: "simulated".to_string(),
        request: format!(r#"{{"operationId":"{id}"}}"#),
    }
}

pub fn resource(name: &str, etag: &str) -> ResourceMeta {
    ResourceMeta {
        kind: "updateRuns".to_string(),
        name: name.to_string(),
        etag: etag.to_string(),
        created_by: "ops".to_string(),
        created_at: "2026-12-01T00:00:00Z".to_string(),
        last_modified_by: "ops".to_string(),
        last_modified_at: "2026-12-01T00:00:01Z".to_string(),
        body: None,
    }
}

pub fn audit(action: &str) -> NewAudit {
    NewAudit {
        at: "2026-12-01T00:00:00Z".to_string(),
        who: "ops".to_string(),
        action: action.to_string(),
        target: "/fleets/default/updateRuns/r1".to_string(),
        request_id: "req-1".to_string(),
        key: "key-1".to_string(),
        outcome: "ok".to_string(),
        detail: None,
    }
}

pub fn full_step() -> Step {
    Step {
        journal: vec![record(1), record(2)],
        events: vec![event("RunStarted", "r1"), event("MemberStarted", "r1")],
        operations: vec![intent("r1/m1")],
        resources: vec![resource("r1", "\"e1\"")],
        audit: vec![audit("updateRuns.start")],
        ..Step::default()
    }
}

/// Everything a test compares: the whole readable content of a store.
pub fn contents(s: &dyn StoreRead) -> String {
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        s.snapshot().unwrap(),
        s.journal_after(0).unwrap(),
        s.events_after(0, None, 1000).unwrap(),
        s.operations_in(&[
            OperationState::Intent,
            OperationState::Sent,
            OperationState::Done,
            OperationState::Uncertain
        ])
        .unwrap(),
        s.resources("updateRuns").unwrap(),
        s.audit_after(0, 1000).unwrap(),
    )
}

pub fn delivery(sub: &str, seq: u64, attempt: u32, outcome: &str) -> DeliveryRecord {
    DeliveryRecord {
        subscription: sub.to_string(),
        seq,
        attempt,
        at: "2026-12-06T10:00:00Z".to_string(),
        status: (outcome == "delivered").then_some(204),
        latency_ms: 12,
        outcome: outcome.to_string(),
        error: (outcome != "delivered").then(|| "HTTP 500".to_string()),
    }
}

pub fn dead(sub: &str, seq: u64) -> DeadLetter {
    DeadLetter {
        subscription: sub.to_string(),
        seq,
        at: "2026-12-06T11:00:00Z".to_string(),
        attempts: 9,
        error: "HTTP 500".to_string(),
    }
}

/// A step committed reads back whole from the writer that opens the store next.
pub fn a_committed_step_reads_back_whole_after_a_reopen(b: &mut dyn Backend) {
    let mut store = b.open();
    let c = store.commit(&full_step()).unwrap();
    assert_eq!((c.first_event_seq, c.last_event_seq), (Some(1), Some(2)));
    let before = contents(store.as_ref());
    let writer = store.epoch();
    store.close().unwrap();
    drop(store);

    let store = b.open();
    assert_eq!(contents(store.as_ref()), before);
    assert_eq!(store.journal_after(1).unwrap(), vec![record(2)]);
    assert_eq!(store.last_journal_seq().unwrap(), 2);
    let op = store.operation("r1/m1").unwrap().unwrap();
    assert_eq!(op.state, OperationState::Intent);
    assert_eq!(op.attempts, 0);
    assert_eq!(op.epoch, writer, "the epoch of the writer that wrote it");
    assert_eq!(
        store.resource("updateRuns", "r1").unwrap().unwrap().etag,
        "\"e1\""
    );
    assert_eq!(
        store.audit_after(0, 10).unwrap()[0].entry.action,
        "updateRuns.start"
    );
    assert_eq!(
        store.meta(meta::SCHEMA_VERSION).unwrap(),
        Some(SCHEMA_VERSION.to_string())
    );
    // A reader on another connection sees the same.
    assert_eq!(contents(store.reader().unwrap().as_ref()), before);
}

/// A page of a kind's resources is read alone: those after its token, in byte order (not the
/// database's locale, which would sort `m-2` and `M3` elsewhere), at most `limit`.
pub fn a_page_of_resources_is_those_after_its_token_in_byte_order(b: &mut dyn Backend) {
    let mut store = b.open();
    let mut resources: Vec<ResourceMeta> = ["m_0", "m1", "m-2", "M3", "m.9", "n"]
        .iter()
        .map(|n| resource(n, "\"e\""))
        .collect();
    let mut other = resource("m0", "\"e\"");
    other.kind = "members".to_string();
    resources.push(other);
    store
        .commit(&Step {
            resources,
            ..Step::default()
        })
        .unwrap();
    let page = |after: Option<&str>, limit: u32| -> Vec<String> {
        let rows = store.resources_after("updateRuns", after, limit).unwrap();
        rows.into_iter().map(|r| r.name).collect()
    };
    assert_eq!(page(None, 100), ["M3", "m-2", "m.9", "m1", "m_0", "n"]);
    assert_eq!(page(None, 2), ["M3", "m-2"]);
    assert_eq!(page(Some("m-2"), 2), ["m.9", "m1"]);
    assert_eq!(page(Some("m1"), 100), ["m_0", "n"]);
    assert_eq!(page(Some("n"), 100), Vec::<String>::new());
    assert_eq!(page(Some("m10"), 1), ["m_0"], "a token that names nothing");
    let all: Vec<String> = store
        .resources("updateRuns")
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(
        page(None, 100),
        sorted,
        "the order a page token compares in"
    );
}

/// A step that breaks a rule of the store writes nothing of itself.
pub fn a_step_that_breaks_a_rule_writes_nothing_of_itself(b: &mut dyn Backend) {
    let mut store = b.open();
    store.commit(&full_step()).unwrap();
    let before = contents(store.as_ref());
    // A gap in the journal (3 is missing), with events, an operation and an audit row that
    // must not be written either.
    let bad = Step {
        journal: vec![record(4)],
        events: vec![event("MemberCompleted", "r1")],
        operations: vec![intent("r1/m2")],
        audit: vec![audit("updateRuns.stop")],
        ..Step::default()
    };
    match store.commit(&bad) {
        Err(StoreError::Invalid(m)) => assert!(m.contains("4 does not follow 2"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(contents(store.as_ref()), before);
    // A snapshot that claims records the journal does not have.
    let bad = Step {
        snapshot: Some(SnapshotRecord {
            journal_seq: 9,
            module_hash: "h".to_string(),
            bytes: b"{}".to_vec(),
        }),
        events: vec![event("MemberCompleted", "r1")],
        ..Step::default()
    };
    assert!(matches!(store.commit(&bad), Err(StoreError::Invalid(_))));
    assert_eq!(contents(store.as_ref()), before);
    // The next event after the refused steps takes the next number: none is skipped.
    let c = store
        .commit(&Step {
            events: vec![event("MemberCompleted", "r1")],
            ..Step::default()
        })
        .unwrap();
    assert_eq!(c.first_event_seq, Some(3));
}

/// A snapshot replaces the last one and compacts the journal it covers; an older one is
/// refused.
pub fn a_snapshot_replaces_the_last_one_and_compacts_the_journal_it_covers(b: &mut dyn Backend) {
    let mut store = b.open();
    store.commit(&full_step()).unwrap();
    let snap = |seq: u64| SnapshotRecord {
        journal_seq: seq,
        module_hash: "sha256:abc".to_string(),
        bytes: format!(r#"{{"journalSeq":{seq}}}"#).into_bytes(),
    };
    store
        .commit(&Step {
            journal: vec![record(3)],
            snapshot: Some(snap(3)),
            ..Step::default()
        })
        .unwrap();
    assert_eq!(store.journal_len().unwrap(), 0);
    assert_eq!(store.last_journal_seq().unwrap(), 3);
    assert_eq!(store.snapshot().unwrap(), Some(snap(3)));
    store
        .commit(&Step {
            journal: vec![record(4)],
            ..Step::default()
        })
        .unwrap();
    assert_eq!(store.journal_after(3).unwrap(), vec![record(4)]);
    let older = Step {
        snapshot: Some(snap(2)),
        ..Step::default()
    };
    assert!(matches!(store.commit(&older), Err(StoreError::Invalid(_))));
    assert_eq!(store.snapshot().unwrap(), Some(snap(3)));
}

/// Event numbers go on across a writer that left without closing, and filter by run.
pub fn event_numbers_keep_increasing_across_restarts_and_filter_by_run(b: &mut dyn Backend) {
    let mut store = b.open();
    store.commit(&full_step()).unwrap();
    drop(store); // no close: as after a kill
    let mut store = b.open();
    let c = store
        .commit(&Step {
            events: vec![event("RunCreated", "r2"), event("MemberCompleted", "r1")],
            ..Step::default()
        })
        .unwrap();
    assert_eq!((c.first_event_seq, c.last_event_seq), (Some(3), Some(4)));
    assert_eq!(store.last_event_seq().unwrap(), 4);
    let seqs = |run: Option<&str>, after: u64, limit: u32| -> Vec<u64> {
        let rows = store.events_after(after, run, limit).unwrap();
        rows.iter().map(|r| r.seq).collect()
    };
    assert_eq!(seqs(None, 0, 100), vec![1, 2, 3, 4]);
    assert_eq!(seqs(Some("r1"), 0, 100), vec![1, 2, 4]);
    assert_eq!(seqs(Some("r1"), 2, 100), vec![4]);
    assert_eq!(seqs(None, 1, 2), vec![2, 3]);
}

/// An operation goes from intent to sent to done; a repeated intent changes nothing.
pub fn an_operation_goes_from_intent_to_sent_to_done(b: &mut dyn Backend) {
    let mut store = b.open();
    store.commit(&full_step()).unwrap();
    store
        .update_operations(&[OperationUpdate {
            id: "r1/m1".to_string(),
            state: OperationState::Sent,
            provider_operation_id: Some("p-17".to_string()),
            last_error: None,
            attempted: true,
        }])
        .unwrap();
    // The same intent again (a replay after a crash): the row keeps its state.
    store
        .commit(&Step {
            operations: vec![intent("r1/m1")],
            ..Step::default()
        })
        .unwrap();
    let op = store.operation("r1/m1").unwrap().unwrap();
    assert_eq!(
        (op.state, op.attempts, op.provider_operation_id.as_deref()),
        (OperationState::Sent, 1, Some("p-17"))
    );
    store
        .commit(&Step {
            journal: vec![record(3)],
            operation_updates: vec![OperationUpdate {
                id: "r1/m1".to_string(),
                state: OperationState::Done,
                provider_operation_id: None,
                last_error: None,
                attempted: false,
            }],
            ..Step::default()
        })
        .unwrap();
    let op = store.operation("r1/m1").unwrap().unwrap();
    assert_eq!(op.state, OperationState::Done);
    assert_eq!(op.provider_operation_id.as_deref(), Some("p-17"), "kept");
    assert!(store
        .operations_in(&[OperationState::Intent, OperationState::Sent])
        .unwrap()
        .is_empty());
}

/// The webhooks' cursors never go back; dead letters and delivery logs survive a reopen.
pub fn webhook_rows_survive_a_reopen_and_cursors_never_go_back(b: &mut dyn Backend) {
    {
        let mut store = b.open();
        store
            .record_webhooks(&WebhookWrites {
                cursors: vec![("pager".into(), 7), ("audit".into(), 3)],
                dead_letters: vec![dead("pager", 4), dead("pager", 6)],
                deliveries: vec![
                    delivery("pager", 4, 9, "deadLettered"),
                    delivery("pager", 7, 1, "delivered"),
                ],
                ..WebhookWrites::default()
            })
            .unwrap();
        // A cursor written late (an older batch) never moves one back.
        store
            .record_webhooks(&WebhookWrites {
                cursors: vec![("pager".into(), 5)],
                redelivered: vec![("pager".into(), 4)],
                ..WebhookWrites::default()
            })
            .unwrap();
        store.close().unwrap();
    }
    let store = b.open();
    let cursors = store.webhook_cursors().unwrap();
    assert_eq!(cursors["pager"], 7);
    assert_eq!(cursors["audit"], 3);
    assert_eq!(
        store.dead_letters("pager", 0, 10).unwrap(),
        [dead("pager", 6)]
    );
    assert_eq!(store.dead_letter_count("pager").unwrap(), 1);
    assert!(store.dead_letters("pager", 6, 10).unwrap().is_empty());
    let log = store.deliveries("pager", None, 10).unwrap();
    assert_eq!(
        log.iter().map(|(_, d)| d.clone()).collect::<Vec<_>>(),
        [
            delivery("pager", 7, 1, "delivered"),
            delivery("pager", 4, 9, "deadLettered")
        ],
        "newest first"
    );
    let older = store.deliveries("pager", Some(log[0].0), 10).unwrap();
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].1.seq, 4);
}

/// A delivery log keeps its newest attempts; a forgotten subscription leaves nothing.
pub fn a_delivery_log_keeps_its_newest_and_a_forgotten_subscription_leaves_nothing(
    b: &mut dyn Backend,
) {
    let mut store = b.open();
    let n = DELIVERY_LOG_KEEP + 50;
    for chunk in (1..=n).collect::<Vec<_>>().chunks(200) {
        store
            .record_webhooks(&WebhookWrites {
                deliveries: chunk
                    .iter()
                    .map(|s| delivery("chatty", *s, 1, "failed"))
                    .collect(),
                ..WebhookWrites::default()
            })
            .unwrap();
    }
    store
        .record_webhooks(&WebhookWrites {
            deliveries: vec![delivery("quiet", 1, 1, "delivered")],
            cursors: vec![("chatty".into(), n)],
            dead_letters: vec![dead("chatty", 2)],
            ..WebhookWrites::default()
        })
        .unwrap();
    let log = store.deliveries("chatty", None, 5000).unwrap();
    assert_eq!(log.len() as u64, DELIVERY_LOG_KEEP);
    assert_eq!(log[0].1.seq, n, "the newest is kept");
    assert_eq!(log.last().unwrap().1.seq, n - DELIVERY_LOG_KEEP + 1);
    assert_eq!(store.deliveries("quiet", None, 10).unwrap().len(), 1);

    store
        .record_webhooks(&WebhookWrites {
            forgotten: vec!["chatty".into()],
            // In the same batch, after the forgetting: a subscription made again.
            cursors: vec![("chatty".into(), n + 1)],
            ..WebhookWrites::default()
        })
        .unwrap();
    assert!(store.deliveries("chatty", None, 10).unwrap().is_empty());
    assert_eq!(store.dead_letter_count("chatty").unwrap(), 0);
    assert_eq!(store.webhook_cursors().unwrap()["chatty"], n + 1);
    assert_eq!(store.deliveries("quiet", None, 10).unwrap().len(), 1);
}

/// A fault a [`Faulty`] store plays at one of its next commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The step is written, and the commit fails all the same: the connection was lost while
    /// waiting for COMMIT's answer.
    AckLost,
    /// The commit fails and writes nothing (the lease lost mid-step).
    Fenced,
    /// The commit fails and writes nothing: a serialization failure (SQLSTATE 40001), a
    /// timeout before it.
    Failed,
}

/// The faults a [`Faulty`] store will play, in order; the test keeps a handle to queue more.
pub type Faults = std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<Fault>>>;

/// A store that plays queued faults on its commits, in order, then behaves.
pub struct Faulty<S: Store> {
    pub inner: S,
    pub faults: Faults,
    /// Which commits play a fault: only the steps that ask for cluster operations (whose loss
    /// or doubling would matter), or every step.
    pub every_step: bool,
}

impl<S: Store> Faulty<S> {
    /// Faults played on the steps that ask for cluster operations.
    pub fn on_operations(inner: S, faults: impl IntoIterator<Item = Fault>) -> (Self, Faults) {
        let faults: Faults =
            std::sync::Arc::new(std::sync::Mutex::new(faults.into_iter().collect()));
        let store = Faulty {
            inner,
            faults: faults.clone(),
            every_step: false,
        };
        (store, faults)
    }

    /// Faults played on the next commits, whatever their steps hold.
    pub fn on_every_step(inner: S) -> (Self, Faults) {
        let (mut store, faults) = Faulty::on_operations(inner, []);
        store.every_step = true;
        (store, faults)
    }
}

waverun_host::delegate_store_reads!(impl<S: Store> for Faulty<S> => inner);

impl<S: Store> Store for Faulty<S> {
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }
    fn commit(&mut self, step: &Step) -> Result<waverun_host::store::Committed, StoreError> {
        let fault = if step.operations.is_empty() && !self.every_step {
            None
        } else {
            self.faults.lock().unwrap().pop_front()
        };
        match fault {
            None => self.inner.commit(step),
            Some(Fault::AckLost) => {
                self.inner.commit(step)?;
                Err(StoreError::Database(
                    "injected fault: the connection was lost waiting for COMMIT's answer"
                        .to_string(),
                ))
            }
            Some(Fault::Fenced) => Err(StoreError::Fenced(
                "injected fault: the lease was lost mid-step".to_string(),
            )),
            Some(Fault::Failed) => Err(StoreError::Database(
                "injected fault: could not serialize access due to concurrent update (SQLSTATE 40001)".to_string(),
            )),
        }
    }
    fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.inner.set_meta(key, value)
    }
    fn update_operations(&mut self, updates: &[OperationUpdate]) -> Result<(), StoreError> {
        self.inner.update_operations(updates)
    }
    fn record_webhooks(&mut self, writes: &WebhookWrites) -> Result<(), StoreError> {
        self.inner.record_webhooks(writes)
    }
    fn close(&mut self) -> Result<(), StoreError> {
        self.inner.close()
    }
    fn reader(&self) -> Result<Box<dyn StoreRead + Send>, StoreError> {
        self.inner.reader()
    }
}
