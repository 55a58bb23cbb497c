//! The engine thread: the one place a fleet's engine runs. API handlers, provider results and
//! timers reach it as messages on one channel; it sleeps until the engine's next wakeup, the
//! next provider poll or the next message, whichever comes first. Provider calls run on
//! threads of their own and report back as messages, so a slow cluster never holds the engine.
//!
//! The operation lifecycle it drives (`shared/spec/store.md`, exec-provider.md): an intent
//! committed by a step is sent (`start-upgrade` under its operation id); once the provider
//! accepted it, it is `sent` and polled (`get-operation`) after the provider's `pollAfter`
//! until it ends, and its result is delivered to the engine (which marks it `done` in the same
//! step). After a start, every unfinished operation is first *asked about*: found → adopted;
//! unknown to the provider → sent again under the same key.
//!
//! Refusals follow the protocol's retry classes (`ProviderErrorCode::retries`): permanent codes
//! fail the member with the code and message; `PreconditionFailed` describes the cluster again
//! and sends once more; `Internal` is retried at most twice; the others are retried with a
//! doubling backoff (or the provider's `retryAfterSeconds`). A start whose outcome is unknown is
//! never failed and never sent under a new key: `get-operation` (found → adopted), then
//! `describe` (at the target → succeeded), and with no trace after a grace period it is sent
//! again under the same key.

use super::clock::FleetClock;
use super::fleet_engine::{Applied, DaemonError, Extras, FleetEngine};
use super::members::{MemberBinding, MEMBERS};
use crate::providers::{ClusterTarget, Described, OperationPhase, OperationReport, Provider};
use crate::providers::{ProviderError, ProviderErrorCode, Started, UpgradeRequest};
use crate::runtime::host::Clock;
use crate::store::{OperationRow, OperationState, OperationUpdate};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use waverun_core::{Observation, UpgradeOperation};

/// The providers members are reached through, by name.
pub type Providers = BTreeMap<String, Arc<dyn Provider>>;

/// How long a retryable provider refusal waits before the call is made again, in fleet time
/// (at least [`MIN_REAL_RETRY`] in real time), unless the provider said `retryAfterSeconds`. It
/// doubles with each refusal in a row, up to [`MAX_BACKOFF_FLEET_SECONDS`].
const RETRY_FLEET_SECONDS: u64 = 30;
const MAX_BACKOFF_FLEET_SECONDS: u64 = 600;
const MIN_REAL_RETRY: Duration = Duration::from_millis(5);
/// An uncertain start the provider has no trace of, on a cluster not at its target, is sent
/// again under the same key once this long (fleet seconds) has passed since the first time the
/// provider had no trace of it.
const UNCERTAIN_GRACE_FLEET_SECONDS: u64 = 60;
/// An operation the provider accepted and later has no trace of is sent again (under the same
/// key) at most this many times; then the member fails.
const MAX_LOST_RESENDS: u32 = 2;
/// The longest the thread sleeps without looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(30);

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

enum Msg {
    Run(Job),
    Started {
        id: String,
        result: Result<Started, ProviderError>,
    },
    Polled {
        id: String,
        result: Result<OperationReport, ProviderError>,
    },
    Described {
        id: String,
        why: Redescribe,
        result: Result<Box<Described>, ProviderError>,
    },
    /// A member described again after its upgrade ended.
    Refreshed {
        member: String,
        result: Result<Box<Described>, ProviderError>,
    },
    Shutdown,
    /// Leave at once, closing nothing (tests: as close to `kill -9` as a thread gets).
    Abandon,
}

/// The engine thread's state. Jobs sent with [`Daemon::call`] get it.
pub struct Worker {
    engine: FleetEngine,
    clock: FleetClock,
    providers: Providers,
    tx: Sender<Msg>,
    /// Provider polls and retries due, in real time: (due, seq) → (operation id, what to do).
    timers: BTreeMap<(Instant, u64), (String, Due)>,
    seq: u64,
    /// Operations with a provider call running (never two at once for one operation).
    calling: BTreeSet<String>,
    /// Refusals since the operation's last successful call, by operation.
    refusals: BTreeMap<String, Refusals>,
    /// Uncertain operations the provider has no trace of: when it first said so (fleet ms).
    unseen_since: BTreeMap<String, i64>,
    /// Accepted operations the provider later had no trace of: how many times each was sent
    /// again.
    lost: BTreeMap<String, u32>,
    /// When each upgrade in flight started (fleet time), for the duration histogram.
    upgrade_started: BTreeMap<String, waverun_core::Timestamp>,
    /// What each operation waits on at its provider, while its calls are made again.
    waits: BTreeMap<String, ProviderWait>,
    /// Moved at every change of `waits` (the API's run cache is keyed by it).
    waits_version: Arc<AtomicU64>,
    /// The last committed event's sequence number, for the SSE streams.
    events: tokio::sync::watch::Sender<u64>,
}

/// Why an operation's provider calls are being made again, for the run's status tree
/// (`waitingOn` `Provider` on its member): host-side, never the engine's. Set where a call is
/// refused for now (or its outcome is not known) and retried, dropped at the next successful
/// call and when the operation ends. The message is the provider's answer as
/// [`ProviderError`]'s `Display` gives it: an exec provider's output is redacted before it
/// becomes one (`providers/exec.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderWait {
    /// What the daemon is doing about it, and the provider's last answer.
    pub message: String,
    /// When the first refusal in a row came (fleet ms).
    pub since_ms: i64,
    /// When the call is made again (fleet ms), when known.
    pub until_ms: Option<i64>,
}

/// A provider's refusals of one operation's calls since its last successful call.
#[derive(Debug, Default)]
struct Refusals {
    /// In a row, whatever the code (for the backoff).
    streak: u32,
    /// By code (for the codes retried a bounded number of times).
    by_code: BTreeMap<ProviderErrorCode, u32>,
}

/// Why a cluster is described during an operation.
#[derive(Clone, Copy, Debug)]
enum Redescribe {
    /// `start-upgrade` said `PreconditionFailed`: describe again, then send once more.
    Precondition,
    /// A start whose outcome is unknown, and the provider has no trace of it: if the cluster is
    /// at the target, it succeeded.
    Uncertain,
}

#[derive(Clone, Copy, Debug)]
enum Due {
    /// Ask where it is.
    Poll,
    /// Send it (again, under the same key).
    Send,
}

impl Worker {
    /// The engine.
    pub fn engine(&mut self) -> &mut FleetEngine {
        &mut self.engine
    }

    /// The provider named `name`.
    pub fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(name).cloned()
    }

    /// The fleet clock.
    pub fn clock(&self) -> &FleetClock {
        &self.clock
    }

    /// What operations wait on at their providers, by operation id.
    pub fn provider_waits(&self) -> &BTreeMap<String, ProviderWait> {
        &self.waits
    }

    /// The version of [`Worker::provider_waits`]: it moves at every change.
    pub fn provider_waits_version(&self) -> u64 {
        self.waits_version.load(Ordering::SeqCst)
    }

    /// The operation `id` waits on its provider: `message`; the call is made again after
    /// `wait` (real time), if known.
    fn waiting(&mut self, id: &str, message: String, wait: Option<Duration>) {
        let now = self.clock.now_ms();
        let until_ms = wait.map(|d| now + (d.as_secs_f64() * 1000.0 * self.clock.scale()) as i64);
        let since_ms = self.waits.get(id).map_or(now, |w| w.since_ms);
        let streak = self.refusals.get(id).map_or(0, |r| r.streak);
        let mut message = message;
        if streak > 1 {
            let since = chrono::DateTime::from_timestamp_millis(since_ms).unwrap_or_default();
            let since = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            message.push_str(&format!(" ({streak} refusals in a row since {since})"));
        }
        let w = ProviderWait {
            message,
            since_ms,
            until_ms,
        };
        self.waits.insert(id.to_string(), w);
        self.waits_version.fetch_add(1, Ordering::SeqCst);
    }

    /// The operation `id`'s provider answered: it waits on it no more.
    fn answered(&mut self, id: &str) {
        if self.waits.remove(id).is_some() {
            self.waits_version.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// An operator command: one step, then its operations go out.
    pub fn command(
        &mut self,
        command: &waverun_core::Command,
        audit: Option<crate::store::NewAudit>,
    ) -> Result<Applied, DaemonError> {
        self.command_step(
            command,
            Extras {
                audit,
                ..Extras::default()
            },
        )
    }

    /// An operator command with what the API writes beside it, as one step; then its
    /// operations go out.
    pub fn command_step(
        &mut self,
        command: &waverun_core::Command,
        extras: Extras,
    ) -> Result<Applied, DaemonError> {
        let applied = self.engine.command_step(command, extras)?;
        self.dispatch(&applied);
        Ok(applied)
    }

    /// A step was committed outside [`Worker::command_step`]: its events are announced and its
    /// operations go out.
    pub fn dispatched(&mut self, applied: &Applied) {
        self.dispatch(applied)
    }

    fn dispatch(&mut self, applied: &Applied) {
        if let Some(last) = applied.events.last() {
            self.events.send_replace(last.seq);
        }
        for p in &applied.events {
            self.measure(&p.event);
        }
        for op in &applied.operations {
            self.send(op.clone());
        }
    }

    /// Upgrade durations, in fleet time, from the events that start and end them.
    fn measure(&mut self, e: &waverun_core::Event) {
        use waverun_core::Fact;
        let ended = |started: Option<waverun_core::Timestamp>| {
            started.map(|t| (e.at - t).num_milliseconds() as f64 / 1000.0)
        };
        match &e.fact {
            Fact::MemberStarted { operation_id, .. } => {
                self.upgrade_started.insert(operation_id.clone(), e.at);
            }
            Fact::MemberCompleted { operation_id, .. } => {
                if let Some(d) = ended(self.upgrade_started.remove(operation_id)) {
                    self.engine.metrics().upgrade_ended(true, d);
                }
            }
            Fact::MemberFailed {
                operation_id: Some(op),
                ..
            } => {
                if let Some(d) = ended(self.upgrade_started.remove(op)) {
                    self.engine.metrics().upgrade_ended(false, d);
                }
            }
            _ => {}
        }
    }

    fn provider_of(&self, op: &OperationRow) -> Option<Arc<dyn Provider>> {
        self.providers.get(&op.provider).cloned()
    }

    fn deliver(&mut self, observation: Observation) {
        match self.engine.deliver(&observation) {
            Ok(applied) => self.dispatch(&applied),
            Err(e) => {
                tracing::warn!(error = %e, ?observation, "the engine refused a provider result")
            }
        }
    }

    fn fail_operation(&mut self, id: &str, message: String) {
        self.forget(id);
        self.deliver(Observation::UpgradeFailed {
            operation_id: id.to_string(),
            message,
        });
    }

    /// Calls `start-upgrade` for `op` on a thread of its own.
    fn send(&mut self, op: OperationRow) {
        let Some(provider) = self.provider_of(&op) else {
            let why = format!("no provider named {:?} is configured", op.provider);
            return self.fail_operation(&op.id, why);
        };
        let (target, request) = match request_of(&op) {
            Ok(r) => r,
            Err(why) => return self.fail_operation(&op.id, why),
        };
        if !self.calling.insert(op.id.clone()) {
            return;
        }
        let tx = self.tx.clone();
        let id = op.id.clone();
        std::thread::spawn(move || {
            let result = provider.start_upgrade(&target, &request);
            let _ = tx.send(Msg::Started { id, result });
        });
    }

    /// Drops what the worker keeps about an operation that ended.
    fn forget(&mut self, id: &str) {
        self.answered(id);
        self.refusals.remove(id);
        self.unseen_since.remove(id);
        self.lost.remove(id);
    }

    /// What a read call about operation `id` needs — the operation (not done), its provider
    /// and its cluster — with the call marked as under way; `None` when there is nothing to
    /// call (it is done, a call is under way, or it could not be read: then it is retried or
    /// failed here).
    fn read_call(&mut self, id: &str) -> Option<(OperationRow, Arc<dyn Provider>, ClusterTarget)> {
        let op = match self.engine.stored().operation(id) {
            Ok(Some(op)) if op.state != OperationState::Done => op,
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(error = %e, operation = %id, "reading an operation failed");
                self.after(id, Due::Poll, self.clock.real_span(RETRY_FLEET_SECONDS));
                return None;
            }
        };
        let Some(provider) = self.provider_of(&op) else {
            let why = format!("no provider named {:?} is configured", op.provider);
            self.fail_operation(&op.id, why);
            return None;
        };
        let (target, _) = match request_of(&op) {
            Ok(r) => r,
            Err(why) => {
                self.fail_operation(&op.id, why);
                return None;
            }
        };
        if !self.calling.insert(id.to_string()) {
            return None;
        }
        Some((op, provider, target))
    }

    /// Calls `describe` for operation `id`'s cluster on a thread of its own.
    fn describe(&mut self, id: String, why: Redescribe) {
        let Some((_, provider, target)) = self.read_call(&id) else {
            return;
        };
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            let result = provider.describe(&target).map(Box::new);
            let _ = tx.send(Msg::Described { id, why, result });
        });
    }

    /// Calls `get-operation` for operation `id` on a thread of its own.
    fn poll(&mut self, id: String) {
        let Some((op, provider, target)) = self.read_call(&id) else {
            return;
        };
        let tx = self.tx.clone();
        // The provider's id of it, once known, beside the key.
        let provider_id = op.provider_operation_id;
        std::thread::spawn(move || {
            let result = provider.get_operation_by_id(&target, &id, provider_id.as_deref());
            let _ = tx.send(Msg::Polled { id, result });
        });
    }

    fn after(&mut self, id: &str, what: Due, wait: Duration) {
        self.seq += 1;
        let at = Instant::now() + wait;
        self.timers.insert((at, self.seq), (id.to_string(), what));
    }

    fn record(&mut self, update: OperationUpdate) {
        if let Err(e) = self.engine.record_sent(&[update]) {
            tracing::error!(error = %e, "recording an operation's state failed");
        }
    }

    fn on_started(&mut self, id: String, result: Result<Started, ProviderError>) {
        self.calling.remove(&id);
        match result {
            Ok(s) => {
                self.refusals.remove(&id);
                self.answered(&id);
                self.record(OperationUpdate {
                    id: id.clone(),
                    state: OperationState::Sent,
                    provider_operation_id: Some(s.operation_id.clone()),
                    last_error: None,
                    attempted: true,
                });
                self.on_phase(&id, s.phase, None, s.poll_after_seconds);
            }
            Err(e) if e.uncertain => {
                // It may have started: never failed, never sent under a new key. Ask about it.
                tracing::warn!(operation = %id, error = %e, "start-upgrade's outcome is unknown; asking get-operation");
                self.record(OperationUpdate {
                    id: id.clone(),
                    state: OperationState::Uncertain,
                    provider_operation_id: None,
                    last_error: Some(e.to_string()),
                    attempted: true,
                });
                let wait = self.retry_wait(&id, &e);
                let why = refused("start-upgrade", &e);
                self.waiting(&id, why, Some(wait));
                self.after(&id, Due::Poll, wait);
            }
            Err(e) if self.may_retry(&id, &e) => {
                self.record(OperationUpdate {
                    id: id.clone(),
                    state: OperationState::Intent,
                    provider_operation_id: None,
                    last_error: Some(e.to_string()),
                    attempted: true,
                });
                if e.code == ProviderErrorCode::PreconditionFailed {
                    // The cluster changed since it was described: describe it again, then
                    // send once more.
                    tracing::info!(operation = %id, error = %e, "start-upgrade's precondition failed; describing the cluster again");
                    let why = format!(
                        "{} (describing the cluster again)",
                        refused("start-upgrade", &e)
                    );
                    self.waiting(&id, why, None);
                    self.describe(id, Redescribe::Precondition);
                } else {
                    tracing::info!(operation = %id, error = %e, "start-upgrade refused for now; retrying");
                    let wait = self.retry_wait(&id, &e);
                    self.waiting(&id, refused("start-upgrade", &e), Some(wait));
                    self.after(&id, Due::Send, wait);
                }
            }
            Err(e) => {
                let why = format!("the provider refused the upgrade: {e}{}", gave_up(&e));
                self.fail_operation(&id, why)
            }
        }
    }

    /// How long before a call of `id` refused with `e` is made again: the provider's
    /// `retryAfterSeconds`, else [`RETRY_FLEET_SECONDS`] doubled for each refusal in a row (at
    /// most [`MAX_BACKOFF_FLEET_SECONDS`]), in fleet time.
    fn retry_wait(&self, id: &str, e: &ProviderError) -> Duration {
        let streak = self.refusals.get(id).map_or(1, |r| r.streak.max(1));
        let backoff = RETRY_FLEET_SECONDS
            .saturating_mul(1u64 << (streak - 1).min(20))
            .min(MAX_BACKOFF_FLEET_SECONDS);
        let fleet_seconds = e.retry_after_seconds.unwrap_or(backoff).max(1);
        self.clock.real_span(fleet_seconds).max(MIN_REAL_RETRY)
    }

    /// Counts a refusal of one of `id`'s calls; whether the call may be made again: as the
    /// code's retry class says ([`ProviderErrorCode::retries`]), counted since the operation's
    /// last successful call.
    fn may_retry(&mut self, id: &str, e: &ProviderError) -> bool {
        let r = self.refusals.entry(id.to_string()).or_default();
        r.streak += 1;
        let n = r.by_code.entry(e.code).or_insert(0);
        *n += 1;
        e.code.retries().is_none_or(|max| *n <= max)
    }

    fn on_polled(&mut self, id: String, result: Result<OperationReport, ProviderError>) {
        self.calling.remove(&id);
        match result {
            Ok(r) => {
                self.refusals.remove(&id);
                self.unseen_since.remove(&id);
                self.answered(&id);
                self.adopt(&id, &r);
                self.on_phase(&id, r.phase, r.message, r.poll_after_seconds)
            }
            Err(e) if e.code == ProviderErrorCode::NotFound => {
                match self.engine.stored().operation(&id) {
                    // A start whose outcome is unknown: is the cluster at its target?
                    Ok(Some(op)) if op.state == OperationState::Uncertain => {
                        self.describe(id, Redescribe::Uncertain)
                    }
                    // Never sent (a crash before the call): send it, under its key.
                    Ok(Some(op)) if op.state == OperationState::Intent => self.send(op),
                    // Accepted, then lost by the provider: sent again under the same key, a
                    // bounded number of times.
                    Ok(Some(op)) if op.state == OperationState::Sent => {
                        let n = self.lost.entry(id.clone()).or_insert(0);
                        *n += 1;
                        if *n <= MAX_LOST_RESENDS {
                            tracing::warn!(operation = %id, error = %e, "the provider has no trace of an operation it accepted; sending it again under the same key");
                            self.send(op)
                        } else {
                            let why = format!("get-operation failed: {e} (the provider lost the operation it accepted, and it was sent again {MAX_LOST_RESENDS} times)");
                            self.fail_operation(&id, why)
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, operation = %id, "reading an operation failed")
                    }
                }
            }
            Err(e) if self.may_retry(&id, &e) => {
                tracing::info!(operation = %id, error = %e, "get-operation failed; asking again");
                let wait = self.retry_wait(&id, &e);
                self.waiting(&id, refused("get-operation", &e), Some(wait));
                self.after(&id, Due::Poll, wait);
            }
            Err(e) => {
                let why = format!("get-operation failed: {e}{}", gave_up(&e));
                self.fail_operation(&id, why)
            }
        }
    }

    /// An operation the provider reports on: one not known as sent (never sent before a
    /// restart, or whose start was uncertain) is adopted, with the provider's id of it.
    fn adopt(&mut self, id: &str, r: &OperationReport) {
        let op = match self.engine.stored().operation(id) {
            Ok(Some(op)) => op,
            _ => return,
        };
        let known = (r.operation_id != op.id).then(|| r.operation_id.clone());
        let adopted = match op.state {
            OperationState::Intent | OperationState::Uncertain => true,
            OperationState::Sent => op.provider_operation_id.is_none() && known.is_some(),
            OperationState::Done => false,
        };
        if adopted {
            self.record(OperationUpdate {
                id: id.to_string(),
                state: OperationState::Sent,
                provider_operation_id: known,
                last_error: None,
                attempted: false,
            });
        }
    }

    fn on_described(
        &mut self,
        id: String,
        why: Redescribe,
        result: Result<Box<Described>, ProviderError>,
    ) {
        self.calling.remove(&id);
        let op = match self.engine.stored().operation(&id) {
            Ok(Some(op)) if op.state != OperationState::Done => op,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, operation = %id, "reading an operation failed");
                return self.after(&id, Due::Poll, self.clock.real_span(RETRY_FLEET_SECONDS));
            }
        };
        if let Err(e) = &result {
            tracing::warn!(operation = %id, error = %e, "describing the cluster failed");
        }
        match why {
            Redescribe::Precondition => {
                if let Ok(d) = &result {
                    self.observe(&op.member, d);
                }
                // Once more (the step observing it may have ended the operation).
                match self.engine.stored().operation(&id) {
                    Ok(Some(op)) if op.state != OperationState::Done => self.send(op),
                    _ => {}
                }
            }
            Redescribe::Uncertain => {
                let at_target = match (&result, request_of(&op)) {
                    (Ok(d), Ok((_, request))) => at_target(d, &request),
                    _ => false,
                };
                if at_target {
                    tracing::info!(operation = %id, "the cluster is at the target of a start whose outcome was unknown: it succeeded");
                    // What it runs now, as after any upgrade that ends.
                    if let Ok(d) = &result {
                        self.observe(&op.member, d);
                    }
                    self.forget(&id);
                    return self.deliver(Observation::UpgradeSucceeded { operation_id: id });
                }
                let now = self.clock.now_ms();
                let since = *self.unseen_since.entry(id.clone()).or_insert(now);
                let grace = (UNCERTAIN_GRACE_FLEET_SECONDS * 1000) as i64;
                let waited = now.saturating_sub(since);
                if waited >= grace {
                    // No trace after the grace period: sent again, under the same key.
                    tracing::warn!(operation = %id, "the provider has no trace of a start whose outcome was unknown; sending it again under the same key");
                    self.unseen_since.remove(&id);
                    self.send(op)
                } else {
                    let left = ((grace - waited) as u64).div_ceil(1000);
                    let wait = self.clock.real_span(left.max(1)).max(MIN_REAL_RETRY);
                    let why = "the provider has no trace of a start whose outcome is unknown; \
                        asking again, then sending it again under the same key"
                        .to_string();
                    self.waiting(&id, why, Some(wait));
                    self.after(&id, Due::Poll, wait);
                }
            }
        }
    }

    /// What the provider says a member is now, recorded as the periodic observation would
    /// (for a member with a stored binding).
    fn observe(&mut self, member: &str, d: &Described) {
        let binding = match self.engine.stored().resource(MEMBERS, member) {
            Ok(Some(meta)) => MemberBinding::of_stored(&meta),
            _ => None,
        };
        if let Some(b) = binding {
            if let Err(e) = self.observed(&b, d) {
                tracing::warn!(member, error = %e, "recording what a member runs failed");
            }
        }
    }

    /// Describes operation `id`'s cluster once more, on a thread of its own, for what it runs
    /// now that its upgrade has ended: the fleet's versions are then current at once, not at the
    /// next periodic observation (`observeIntervalSeconds`).
    fn refresh_after(&mut self, id: &str) {
        let Ok(Some(op)) = self.engine.stored().operation(id) else {
            return;
        };
        let (Some(provider), Ok((target, _))) = (self.provider_of(&op), request_of(&op)) else {
            return;
        };
        let tx = self.tx.clone();
        let member = op.member;
        std::thread::spawn(move || {
            let result = provider.describe(&target).map(Box::new);
            let _ = tx.send(Msg::Refreshed { member, result });
        });
    }

    fn on_refreshed(&mut self, member: String, result: Result<Box<Described>, ProviderError>) {
        match result {
            Ok(d) => self.observe(&member, &d),
            // The periodic observation tries again.
            Err(e) => {
                tracing::debug!(member, error = %e, "describing a member after its upgrade failed")
            }
        }
    }

    fn on_phase(&mut self, id: &str, phase: OperationPhase, message: Option<String>, poll: u64) {
        if matches!(
            phase,
            OperationPhase::Succeeded | OperationPhase::Failed | OperationPhase::Canceled
        ) {
            self.refresh_after(id);
        }
        match phase {
            OperationPhase::Succeeded => {
                self.forget(id);
                self.deliver(Observation::UpgradeSucceeded {
                    operation_id: id.to_string(),
                })
            }
            OperationPhase::Failed | OperationPhase::Canceled => {
                let why = message.unwrap_or_else(|| format!("the upgrade ended {phase:?}"));
                self.fail_operation(id, why)
            }
            OperationPhase::Pending | OperationPhase::Running | OperationPhase::Unknown => {
                let wait = self.clock.real_span(poll.max(1));
                self.after(id, Due::Poll, wait);
            }
        }
    }

    /// Fires the engine's timers if due, and the provider timers that are due.
    fn tick(&mut self) {
        match self.engine.next_wakeup() {
            Ok(Some(at)) if at.timestamp_millis() <= self.clock.now_ms() => {
                match self.engine.wake() {
                    Ok(applied) => self.dispatch(&applied),
                    Err(e) => tracing::error!(error = %e, "waking the engine failed"),
                }
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "asking the engine for its next wakeup failed"),
        }
        let now = Instant::now();
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (id, what) = entry.remove();
            match what {
                Due::Poll => self.poll(id),
                Due::Send => match self.engine.stored().operation(&id) {
                    Ok(Some(op)) if op.state != OperationState::Done => self.send(op),
                    _ => {}
                },
            }
        }
    }

    /// How long to sleep: until the engine's next wakeup or the next provider timer.
    fn sleep(&mut self) -> Duration {
        let engine = match self.engine.next_wakeup() {
            Ok(Some(at)) => self.clock.real_until(at.timestamp_millis()),
            _ => MAX_SLEEP,
        };
        let timer = self.timers.keys().next().map_or(MAX_SLEEP, |(at, _)| {
            at.saturating_duration_since(Instant::now())
        });
        engine.min(timer).min(MAX_SLEEP)
    }
}

/// A refused call as the status tree shows it: the provider's answer (`Code: message`), after
/// the call's name unless the answer names it already (an exec provider's does:
/// `PROVIDER: OPERATION: ...`).
fn refused(call: &str, e: &ProviderError) -> String {
    if e.message.contains(&format!("{call}: ")) {
        e.to_string()
    } else {
        format!("{call}: {e}")
    }
}

/// What a refusal that is not retried again says beyond its code and message.
fn gave_up(e: &ProviderError) -> String {
    match (e.code, e.code.retries()) {
        (ProviderErrorCode::PreconditionFailed, _) => {
            " (again after describing the cluster anew and retrying once)".to_string()
        }
        (_, Some(n)) if n > 0 => format!(" (after {n} retries)"),
        _ => String::new(),
    }
}

/// Whether the cluster runs what `request` asks for: its control plane version, and every
/// pool's image.
fn at_target(d: &Described, request: &UpgradeRequest) -> bool {
    request
        .control_plane
        .as_ref()
        .is_none_or(|v| *v == d.kubernetes_version)
        && request.node_images.iter().all(|i| d.runs(i))
}

fn request_of(op: &OperationRow) -> Result<(ClusterTarget, UpgradeRequest), String> {
    let u: UpgradeOperation = serde_json::from_str(&op.request)
        .map_err(|e| format!("the stored operation {} does not read: {e}", op.id))?;
    let target = ClusterTarget {
        member: u.member.clone(),
        cluster_ref: u.provider.as_ref().and_then(|p| p.id.clone()),
        region: Some(u.region.clone()),
    };
    let request = UpgradeRequest {
        idempotency_key: u.operation_id,
        upgrade_type: u.upgrade_type,
        control_plane: u.kubernetes_version,
        node_images: u.node_images,
    };
    Ok((target, request))
}

/// A running fleet: the handle on its engine thread.
pub struct Daemon {
    tx: Sender<Msg>,
    events: tokio::sync::watch::Receiver<u64>,
    version: Arc<std::sync::atomic::AtomicU64>,
    waits_version: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<(), DaemonError>>>,
}

/// The engine thread is gone (it stopped, or failed).
#[derive(Debug)]
pub struct Gone;

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the engine is not running")
    }
}

impl std::error::Error for Gone {}

impl Daemon {
    /// Starts the engine thread over a started engine: every operation the store has not seen
    /// finish is asked about first, then the loop runs.
    pub fn spawn(engine: FleetEngine, clock: FleetClock, providers: Providers) -> Daemon {
        let (tx, rx) = mpsc::channel();
        let worker_tx = tx.clone();
        let last = engine.stored().last_event_seq().unwrap_or(0);
        let (events, events_rx) = tokio::sync::watch::channel(last);
        let version = engine.version_handle();
        let waits_version = Arc::new(AtomicU64::new(0));
        let worker_waits_version = waits_version.clone();
        let thread = std::thread::Builder::new()
            .name("waverun-engine".to_string())
            .spawn(move || {
                let mut w = Worker {
                    engine,
                    clock,
                    providers,
                    tx: worker_tx,
                    timers: BTreeMap::new(),
                    seq: 0,
                    calling: BTreeSet::new(),
                    refusals: BTreeMap::new(),
                    unseen_since: BTreeMap::new(),
                    lost: BTreeMap::new(),
                    upgrade_started: BTreeMap::new(),
                    waits: BTreeMap::new(),
                    waits_version: worker_waits_version,
                    events,
                };
                let unfinished = w.engine.unfinished_operations()?;
                for op in unfinished {
                    w.poll(op.id);
                }
                run(w, rx)
            })
            .expect("spawn the engine thread");
        Daemon {
            tx,
            events: events_rx,
            version,
            waits_version,
            thread: Some(thread),
        }
    }

    /// The last committed event's sequence number, changed after every step with events.
    pub fn events(&self) -> tokio::sync::watch::Receiver<u64> {
        self.events.clone()
    }

    /// The engine state's version ([`FleetEngine::version`]), read without the engine thread.
    pub fn version(&self) -> u64 {
        self.version.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The version of what operations wait on at their providers
    /// ([`Worker::provider_waits`]), read without the engine thread: it moves at every change.
    pub fn provider_waits_version(&self) -> u64 {
        self.waits_version.load(Ordering::SeqCst)
    }

    /// Runs `f` on the engine thread and waits for its answer.
    pub fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> T + Send + 'static,
    ) -> Result<T, Gone> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |w| {
            let _ = reply.send(f(w));
        });
        self.tx.send(Msg::Run(job)).map_err(|_| Gone)?;
        answer.recv().map_err(|_| Gone)
    }

    /// Stops the loop, closes the store cleanly and waits for the thread.
    pub fn shutdown(mut self) -> Result<(), DaemonError> {
        let _ = self.tx.send(Msg::Shutdown);
        self.join()
    }

    /// Leaves at once without closing anything (crash tests).
    pub fn abandon(mut self) {
        let _ = self.tx.send(Msg::Abandon);
        let _ = self.join();
    }

    fn join(&mut self) -> Result<(), DaemonError> {
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(DaemonError::Plugin(Box::new(
                crate::runtime::PluginError::Protocol("the engine thread panicked".to_string()),
            ))),
            None => Ok(()),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.tx.send(Msg::Shutdown);
            let _ = self.join();
        }
    }
}

fn run(mut w: Worker, rx: Receiver<Msg>) -> Result<(), DaemonError> {
    loop {
        w.tick();
        let msg = match rx.recv_timeout(w.sleep()) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => Msg::Shutdown,
        };
        match msg {
            Msg::Run(job) => job(&mut w),
            Msg::Started { id, result } => w.on_started(id, result),
            Msg::Polled { id, result } => w.on_polled(id, result),
            Msg::Described { id, why, result } => w.on_described(id, why, result),
            Msg::Refreshed { member, result } => w.on_refreshed(member, result),
            Msg::Shutdown => return w.engine.shutdown(),
            Msg::Abandon => return Ok(()),
        }
    }
}
