//! The edge of events out: one thread that runs every subscription's lane
//! ([`Deliveries`](super::delivery::Deliveries)) against the world — it reads the event log
//! and the subscriptions from a reader of the store, makes each attempt on a thread of its
//! own ([`Sender`]), and hands what must be kept (cursors, dead letters, the delivery logs) to
//! the store's one writer as [`WebhookWrites`], through a callback that never blocks (the
//! daemon's engine thread commits them). Nothing here waits on a receiver: a receiver that is
//! down holds only its own lane, and never the engine or the API.
//!
//! Its inputs are [`DriverMsg`]s: the log grew (from the engine thread, after each commit),
//! the subscriptions changed or a redelivery was asked for (from the API), an attempt ended
//! (from an attempt's thread). Its clock is the system's (real milliseconds); an event's age
//! counts from its fleet time brought back to real time.

use super::cloudevent::{cloud_event, Origin};
use super::delivery::{Deliveries, Delivery, LaneConfig, Logged, Outcome, Policy};
use super::sender::{Attempt, Sender};
use super::signature::{self, SigningKey};
use super::subscription::Subscription;
use crate::clock::{Clock, SystemClock};
use crate::daemon::FleetClock;
use crate::store::{DeadLetter, DeliveryRecord, EventRow, StoreRead, WebhookWrites};
use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender as Tx};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The resource kind of event subscriptions in the store.
pub const KIND: &str = "eventSubscriptions";
/// Writes are handed over once this many are pending, or [`FLUSH_AFTER`] after the first.
const FLUSH_COUNT: usize = 64;
/// How long a pending write waits for others to join it.
const FLUSH_AFTER: Duration = Duration::from_millis(200);

/// What the driver is told.
#[derive(Debug)]
pub enum DriverMsg {
    /// The event log now ends at this sequence number.
    Logged(u64),
    /// Subscriptions were created, changed or deleted: read them again.
    Changed,
    /// Dead letters of a subscription to deliver again.
    Redeliver {
        /// The subscription.
        lane: String,
        /// The events.
        seqs: Vec<u64>,
    },
    /// An attempt ended.
    Attempted {
        /// The subscription.
        lane: String,
        /// The event.
        seq: u64,
        /// Which attempt.
        attempt: u32,
        /// How it went.
        result: Attempt,
    },
    /// Leave (after handing over what is pending).
    Shutdown,
}

/// A subscription as the driver holds it: what it receives, where, and the keys it signs with
/// (the newest first).
#[derive(Clone, Debug)]
pub struct Active {
    /// Its filters, endpoint and age.
    pub subscription: Subscription,
    /// Its signing keys, newest first.
    pub keys: Vec<SigningKey>,
    /// The cursor a new subscription starts from (the log's end when it was created).
    pub start_after: u64,
    /// Its events are dead-lettered once older than this (its `eventTimeToLiveInMinutes`).
    pub max_age_ms: i64,
    /// When the first of `keys` stops signing (a rotation's old secret): the driver reads the
    /// subscriptions again then.
    pub keys_until_ms: Option<i64>,
}

/// Reads the subscriptions the driver serves; given by the daemon (it knows where secrets
/// are kept and how a stored body reads). An error leaves the lanes as they are.
pub type LoadSubscriptions =
    Box<dyn Fn(&dyn StoreRead) -> Result<BTreeMap<String, Active>, String> + Send + 'static>;

/// Where the driver's writes go: the store's writer (never blocks).
pub type Writes = Box<dyn Fn(WebhookWrites) + Send + 'static>;

/// The driver's counters, for `/metrics` and the API.
#[derive(Debug, Default)]
pub struct DriverStats {
    inner: std::sync::Mutex<StatsInner>,
}

#[derive(Debug, Default, Clone)]
struct StatsInner {
    outcomes: BTreeMap<(String, &'static str), u64>,
    lag: BTreeMap<String, u64>,
}

impl DriverStats {
    fn count(&self, lane: &str, outcome: &'static str) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *s.outcomes.entry((lane.to_string(), outcome)).or_insert(0) += 1;
    }

    /// A subscription that is gone: its counts go too (a new one of its name starts at 0).
    fn forget(&self, lane: &str) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.outcomes.retain(|(n, _), _| n != lane);
        s.lag.remove(lane);
    }

    fn set_lag(&self, lag: BTreeMap<String, u64>) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).lag = lag;
    }

    /// Attempts by (subscription, outcome): `delivered`, `failed`, `deadLettered`.
    pub fn outcomes(&self) -> BTreeMap<(String, &'static str), u64> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .outcomes
            .clone()
    }

    /// Events behind, by subscription.
    pub fn lag(&self) -> BTreeMap<String, u64> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lag
            .clone()
    }
}

/// The running driver: send it [`DriverMsg`]s.
pub struct Driver {
    tx: Tx<DriverMsg>,
    thread: Option<std::thread::JoinHandle<()>>,
    stats: Arc<DriverStats>,
}

impl Driver {
    /// Starts the driver thread.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        reader: Box<dyn StoreRead + Send>,
        load: LoadSubscriptions,
        writes: Writes,
        sender: Sender,
        origin: Origin,
        clock: FleetClock,
        policy: Policy,
    ) -> Result<Driver, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let stats = Arc::new(DriverStats::default());
        let log_end = reader.last_event_seq().map_err(|e| e.to_string())?;
        let mut run = Run {
            reader,
            load,
            writes,
            sender: Arc::new(sender),
            origin,
            clock,
            machine: Deliveries::new(policy, log_end),
            active: BTreeMap::new(),
            events: BTreeMap::new(),
            pending: WebhookWrites::default(),
            pending_since: None,
            tx: tx.clone(),
            stats: stats.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("waverun-webhooks".into())
            .spawn(move || run.main(rx))
            .map_err(|e| format!("the webhook driver's thread: {e}"))?;
        Ok(Driver {
            tx,
            thread: Some(thread),
            stats,
        })
    }

    /// Where to send it messages.
    pub fn handle(&self) -> Tx<DriverMsg> {
        self.tx.clone()
    }

    /// Its counters.
    pub fn stats(&self) -> Arc<DriverStats> {
        self.stats.clone()
    }

    /// Stops it, handing over what is pending.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.tx.send(DriverMsg::Shutdown);
            let _ = t.join();
        }
    }
}

/// A driver dropped without [`Driver::shutdown`] (a daemon that failed to start) stops too:
/// its thread never delivers on its own.
impl Drop for Driver {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Run {
    reader: Box<dyn StoreRead + Send>,
    load: LoadSubscriptions,
    writes: Writes,
    sender: Arc<Sender>,
    origin: Origin,
    clock: FleetClock,
    machine: Deliveries,
    active: BTreeMap<String, Active>,
    /// Events read and not yet done by every lane that wants them.
    events: BTreeMap<u64, EventRow>,
    pending: WebhookWrites,
    pending_since: Option<Instant>,
    tx: Tx<DriverMsg>,
    stats: Arc<DriverStats>,
}

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

impl Run {
    fn main(&mut self, rx: Receiver<DriverMsg>) {
        self.reload();
        loop {
            self.act();
            let wait = self.wait();
            match rx.recv_timeout(wait) {
                Ok(DriverMsg::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                    self.flush(true);
                    return;
                }
                Ok(msg) => self.handle(msg),
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.keys_until().is_some_and(|t| t <= now_ms()) {
                self.reload();
            }
            self.machine.handle_timeout(now_ms());
            self.flush(false);
        }
    }

    /// How long to wait for a message: until the next retry or the next flush.
    fn wait(&self) -> Duration {
        let mut wait = Duration::from_secs(60);
        if let Some(t) = self.machine.poll_timeout() {
            wait = wait.min(Duration::from_millis((t - now_ms()).max(0) as u64));
        }
        if let Some(since) = self.pending_since {
            wait = wait.min(FLUSH_AFTER.saturating_sub(since.elapsed()));
        }
        if let Some(t) = self.keys_until() {
            wait = wait.min(Duration::from_millis((t - now_ms()).max(0) as u64));
        }
        wait
    }

    /// When a signing key of some subscription stops signing.
    fn keys_until(&self) -> Option<i64> {
        self.active.values().filter_map(|a| a.keys_until_ms).min()
    }

    fn handle(&mut self, msg: DriverMsg) {
        let now = now_ms();
        match msg {
            DriverMsg::Logged(seq) => self.machine.logged(seq, now),
            DriverMsg::Changed => self.reload(),
            DriverMsg::Redeliver { lane, seqs } => self.machine.redeliver(&lane, &seqs, now),
            DriverMsg::Attempted {
                lane,
                seq,
                attempt,
                result,
            } if self.active.contains_key(&lane) => {
                let (outcome, status, error) = match &result.outcome {
                    Outcome::Delivered { status } => ("delivered", Some(*status), None),
                    Outcome::Failed { status, error, .. } => {
                        ("failed", *status, Some(error.clone()))
                    }
                };
                self.stats.count(&lane, outcome);
                self.log(&lane, seq, attempt, status, &result, outcome, error);
                self.machine.sent(&lane, seq, attempt, result.outcome, now);
            }
            // An attempt of a subscription deleted meanwhile: nothing to keep of it.
            DriverMsg::Attempted { .. } | DriverMsg::Shutdown => {}
        }
    }

    /// The subscriptions, read again: new lanes start at their creation's end of the log,
    /// changed ones keep their place, deleted ones go (with their rows), and one deleted and
    /// made again under its name (another `start_after`) starts anew. A read that fails
    /// changes nothing: the lanes go on as they were, and the next change reads again.
    fn reload(&mut self) {
        let active = match (self.load)(self.reader.as_ref()) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "reading the event subscriptions; delivering as before");
                return;
            }
        };
        let cursors = match self.reader.webhook_cursors() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "reading the webhooks' cursors; delivering as before");
                return;
            }
        };
        let now = now_ms();
        let gone: Vec<String> = self
            .active
            .iter()
            .filter(|(n, old)| {
                active
                    .get(*n)
                    .is_none_or(|new| new.start_after != old.start_after)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            self.machine.unsubscribe(&n);
            self.stats.forget(&n);
            // What it had pending goes unwritten: its rows are forgotten.
            let p = &mut self.pending;
            p.cursors.retain(|(l, _)| *l != n);
            p.dead_letters.retain(|d| d.subscription != n);
            p.redelivered.retain(|(l, _)| *l != n);
            p.deliveries.retain(|d| d.subscription != n);
            p.forgotten.push(n);
            self.touch();
        }
        for (name, a) in &active {
            // A cursor left by an older subscription of the name is never behind this one's
            // start.
            let cursor = cursors
                .get(name)
                .copied()
                .map_or(a.start_after, |c| c.max(a.start_after));
            self.machine.subscribe(
                name,
                LaneConfig {
                    cursor,
                    max_age_ms: a.max_age_ms,
                    enabled: a.subscription.enabled,
                },
                now,
            );
        }
        self.active = active;
    }

    /// Carries out what the lanes ask for.
    fn act(&mut self) {
        while let Some(a) = self.machine.poll_action() {
            match a {
                Delivery::Read { lane, after, limit } => self.read(&lane, after, limit),
                Delivery::Send { lane, seq, attempt } => self.send(lane, seq, attempt),
                Delivery::Cursor { lane, cursor } => {
                    self.pending.cursors.push((lane, cursor));
                    self.touch();
                }
                Delivery::DeadLetter {
                    lane,
                    seq,
                    attempts,
                    error,
                } => {
                    self.stats.count(&lane, "deadLettered");
                    let at = rfc3339(now_ms());
                    self.pending.deliveries.push(DeliveryRecord {
                        subscription: lane.clone(),
                        seq,
                        attempt: attempts,
                        at: at.clone(),
                        status: None,
                        latency_ms: 0,
                        outcome: "deadLettered".into(),
                        error: Some(error.clone()),
                    });
                    self.pending.dead_letters.push(DeadLetter {
                        subscription: lane,
                        seq,
                        at,
                        attempts,
                        error,
                    });
                    self.touch();
                }
                Delivery::Redelivered { lane, seq } => {
                    self.pending.redelivered.push((lane, seq));
                    self.touch();
                }
            }
        }
        self.stats.set_lag(self.machine.lag());
        self.forget_done_events();
    }

    fn read(&mut self, lane: &str, after: u64, limit: u32) {
        let now = now_ms();
        let rows = match self.reader.events_after(after, None, limit) {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(subscription = lane, error = %e, "reading the event log");
                Vec::new()
            }
        };
        let upto = rows.last().map_or(after, |r| r.seq);
        let Some(active) = self.active.get(lane) else {
            return;
        };
        let fleet_now = self.clock.now_ms();
        let scale = self.clock.scale();
        let mut matching = Vec::new();
        for row in rows {
            let data: serde_json::Value =
                serde_json::from_str(&row.event.data).unwrap_or(serde_json::Value::Null);
            if !active
                .subscription
                .matches(&row.event.kind, &row.event.run, &data)
            {
                continue;
            }
            // When it was logged, in real time.
            let behind = ((fleet_now - row.event.at_ms).max(0) as f64 / scale) as i64;
            matching.push(Logged {
                seq: row.seq,
                at_ms: now - behind,
            });
            self.events.insert(row.seq, row);
        }
        self.machine.read(lane, &matching, upto, now);
    }

    fn send(&mut self, lane: String, seq: u64, attempt: u32) {
        let row = match self.events.get(&seq).cloned() {
            Some(r) => Some(r),
            // A dead letter asked for again: read it anew.
            None => self
                .reader
                .events_after(seq.saturating_sub(1), None, 1)
                .ok()
                .and_then(|mut v| v.pop())
                .filter(|r| r.seq == seq),
        };
        let Some(active) = self.active.get(&lane) else {
            return;
        };
        let Some(row) = row else {
            // The event is no longer in the log: nothing to send, ever.
            let why = format!("event {seq} is no longer in the event log");
            return self.failed_at_once(lane, seq, attempt, why);
        };
        let body = serde_json::to_vec(&cloud_event(&row, &self.origin)).unwrap_or_default();
        let id = format!("{}-{}", self.origin.fleet, seq);
        let headers = signature::sign(&active.keys, &id, now_ms() / 1000, &body);
        let url = active.subscription.endpoint.url.clone();
        let sender = self.sender.clone();
        let tx = self.tx.clone();
        let spawned = std::thread::Builder::new()
            .name("waverun-webhook-attempt".into())
            .spawn({
                let lane = lane.clone();
                move || {
                    let result = sender.send(&url, &headers, &body);
                    let _ = tx.send(DriverMsg::Attempted {
                        lane,
                        seq,
                        attempt,
                        result,
                    });
                }
            });
        if let Err(e) = spawned {
            self.failed_at_once(
                lane,
                seq,
                attempt,
                format!("no thread for the attempt: {e}"),
            );
        }
    }

    /// An attempt that could not be made, answered as a failed one.
    fn failed_at_once(&self, lane: String, seq: u64, attempt: u32, error: String) {
        let result = Attempt {
            outcome: Outcome::Failed {
                status: None,
                error,
                retry_after_ms: None,
            },
            latency: Duration::ZERO,
        };
        let _ = self.tx.send(DriverMsg::Attempted {
            lane,
            seq,
            attempt,
            result,
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn log(
        &mut self,
        lane: &str,
        seq: u64,
        attempt: u32,
        status: Option<u16>,
        result: &Attempt,
        outcome: &str,
        error: Option<String>,
    ) {
        self.pending.deliveries.push(DeliveryRecord {
            subscription: lane.to_string(),
            seq,
            attempt,
            at: rfc3339(now_ms()),
            status,
            latency_ms: result.latency.as_millis() as u64,
            outcome: outcome.to_string(),
            error,
        });
        self.touch();
    }

    /// Events every enabled lane is past are dropped from memory (a disabled lane reads its
    /// events again from the store once enabled).
    fn forget_done_events(&mut self) {
        let enabled = |n: &String| self.active.get(n).is_some_and(|a| a.subscription.enabled);
        let oldest = self
            .machine
            .cursors()
            .into_iter()
            .filter(|(n, _)| enabled(n))
            .map(|(_, c)| c)
            .min();
        match oldest {
            Some(oldest) => self.events = self.events.split_off(&(oldest + 1)),
            None => self.events.clear(),
        }
    }

    fn touch(&mut self) {
        self.pending_since.get_or_insert_with(Instant::now);
    }

    fn count(&self) -> usize {
        let p = &self.pending;
        p.cursors.len()
            + p.dead_letters.len()
            + p.redelivered.len()
            + p.deliveries.len()
            + p.forgotten.len()
    }

    /// Hands pending writes to the writer when enough have gathered, or waited long enough.
    fn flush(&mut self, force: bool) {
        let due = self
            .pending_since
            .is_some_and(|s| s.elapsed() >= FLUSH_AFTER);
        if self.pending.is_empty() || !(force || due || self.count() >= FLUSH_COUNT) {
            return;
        }
        (self.writes)(std::mem::take(&mut self.pending));
        self.pending_since = None;
    }
}
