//! The lifecycle of provider operations, as a state machine with no threads, no store reads and
//! no clock reads ([`Lifecycle`]). The engine thread ([`super::Worker`]) feeds it what happens —
//! an operation committed, a provider's answer, time passing — each with `now` (fleet ms), and
//! carries out the [`Action`]s it gives: call the provider, record the operation's row, tell the
//! engine how the upgrade ended. Timers are fleet instants; the worker sleeps until
//! [`Lifecycle::poll_timeout`].
//!
//! An operation, by the store's state of it (`shared/spec/store.md`, exec-provider.md):
//!
//! ```text
//!  submit ─► Intent ──start-upgrade──► Sent ──get-operation…──► Succeeded / Failed (forgotten)
//!               │  ▲                    │  ▲
//!   refused for │  │ retried            │  └─ lost (NotFound): sent again under the same key,
//!   now / stale └──┘ (stale: describe   │     at most `max_lost_resends` times, then failed
//!                     first)            │
//!  start outcome unknown ─► Uncertain ──get-operation: found ─► Sent (adopted)
//!                                      └ NotFound ─► describe: at target ─► Succeeded
//!                                                            not yet ─► asked again; after
//!                                                            `uncertain_grace_ms`, sent again
//!                                                            under the same key
//!  resume (after a restart) ─► get-operation first: found ─► adopted; Intent not found ─► sent
//! ```
//!
//! Refusals follow the protocol's retry classes ([`ProviderErrorCode::retries`]): permanent
//! codes fail the member with the code and message; `PreconditionFailed` (a stale read, HTTP
//! 412) describes the cluster again and sends once more; `Internal` is retried at most twice;
//! `OperationInProgress` (busy, 409), `Throttled` (429) and `Unavailable` until they pass, each
//! after the provider's `retryAfterSeconds` or a doubling back-off with jitter (deterministic
//! from [`Policy::seed`], the operation and the refusal's place in the row), but never for
//! longer than [`Policy::give_up_after_ms`] of refusals in a row. A start whose outcome is
//! unknown is never failed for that and never sent under a new key.
//!
//! While an operation's calls are refused and made again, it *waits on its provider*
//! ([`ProviderWait`]): the run's status shows it on the member (`waitingOn: Provider`).

use crate::providers::{ClusterTarget, Described, OperationPhase, OperationReport};
use crate::providers::{ProviderError, ProviderErrorCode, Started, UpgradeRequest};
use crate::store::{OperationState, OperationUpdate};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The lifecycle's tunables, in fleet time.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// The first back-off after a refusal; it doubles with each refusal in a row.
    pub retry_ms: i64,
    /// The longest back-off.
    pub max_backoff_ms: i64,
    /// The shortest wait before any call is made again (the worker sets a few real
    /// milliseconds at its time scale, so a fast fleet clock never spins).
    pub min_retry_ms: i64,
    /// A back-off is shortened by up to this many thousandths, at random (from `seed`), so
    /// refusals of many operations at once do not come back at once.
    pub jitter_permille: u64,
    /// An uncertain start the provider has no trace of, on a cluster not at its target, is sent
    /// again under the same key once this long has passed since the provider first said so.
    pub uncertain_grace_ms: i64,
    /// An accepted operation the provider later has no trace of is sent again (same key) at
    /// most this many times; then the member fails.
    pub max_lost_resends: u32,
    /// Refusals in a row for longer than this fail the member (deadline exceeded), whatever
    /// their retry class.
    pub give_up_after_ms: i64,
    /// The jitter's seed.
    pub seed: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            retry_ms: 30_000,
            max_backoff_ms: 600_000,
            min_retry_ms: 0,
            jitter_permille: 200,
            uncertain_grace_ms: 60_000,
            max_lost_resends: 2,
            give_up_after_ms: 24 * 3_600_000,
            seed: 0,
        }
    }
}

/// An operation handed to the lifecycle: its stored row, read once by the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracked {
    /// The engine's operation id (the idempotency key).
    pub id: String,
    /// The member it upgrades.
    pub member: String,
    /// The provider that executes it, by name.
    pub provider: String,
    /// The cluster, as the provider sees it.
    pub target: ClusterTarget,
    /// What it asks for.
    pub request: UpgradeRequest,
    /// Where the store says it is (`Intent`, `Sent` or `Uncertain`).
    pub state: OperationState,
    /// The provider's own id of it, once known (for the AKS provider: its polling URLs).
    pub provider_operation_id: Option<String>,
}

/// A provider call to make: which provider, about which cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallTo {
    /// The provider's name.
    pub provider: String,
    /// The cluster.
    pub target: ClusterTarget,
}

/// What the lifecycle asks the worker to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Call `start-upgrade`; answer with [`Lifecycle::started`].
    Start {
        /// The operation.
        id: String,
        /// Where.
        to: CallTo,
        /// What.
        request: UpgradeRequest,
    },
    /// Call `get-operation`; answer with [`Lifecycle::polled`].
    Poll {
        /// The operation (the idempotency key).
        id: String,
        /// Where.
        to: CallTo,
        /// The provider's id of it, when known.
        provider_operation_id: Option<String>,
        /// What it asks for (a provider with no idempotency key looks for its target).
        request: UpgradeRequest,
    },
    /// Call `describe`; answer with [`Lifecycle::described`].
    Describe {
        /// The operation it is for.
        id: String,
        /// Where.
        to: CallTo,
    },
    /// Describe the member once more now that its upgrade ended, and record what it runs (no
    /// answer: the operation is forgotten).
    Refresh {
        /// The member.
        member: String,
        /// Where.
        to: CallTo,
    },
    /// Record what the provider said the member runs (as the periodic observation would).
    Observe {
        /// The member.
        member: String,
        /// What it runs.
        described: Box<Described>,
    },
    /// Write the operation's row.
    Record(OperationUpdate),
    /// The upgrade succeeded: tell the engine (which marks the operation done).
    Succeeded {
        /// The operation.
        id: String,
    },
    /// The upgrade failed: tell the engine, with why.
    Failed {
        /// The operation.
        id: String,
        /// Why, for the member's status.
        message: String,
    },
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

/// A call under way for an operation (never two at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Calling {
    Start,
    Poll,
    Describe(Redescribe),
}

/// Why a cluster is described during an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Redescribe {
    /// `start-upgrade` said `PreconditionFailed`: describe again, then send once more.
    Precondition,
    /// A start whose outcome is unknown, and the provider has no trace of it: if the cluster is
    /// at the target, it succeeded.
    Uncertain,
}

/// What a timer does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Due {
    /// Ask where it is.
    Poll,
    /// Send it (again, under the same key).
    Send,
}

/// One operation followed.
#[derive(Debug)]
struct Op {
    t: Tracked,
    calling: Option<Calling>,
    timer: Option<(i64, Due)>,
    /// Refusals in a row, whatever the code (for the back-off).
    streak: u32,
    /// Refusals by code since the last successful call (for the bounded retry classes).
    by_code: BTreeMap<ProviderErrorCode, u32>,
    /// When the first refusal in a row came.
    refused_since: Option<i64>,
    /// An uncertain start the provider has no trace of: since when it said so.
    unseen_since: Option<i64>,
    /// How many times it was sent again after the provider lost it.
    lost: u32,
}

/// Every operation in flight, their timers, and the actions to carry out.
#[derive(Debug)]
pub struct Lifecycle {
    policy: Policy,
    ops: BTreeMap<String, Op>,
    timers: BTreeSet<(i64, String)>,
    actions: VecDeque<Action>,
    waits: BTreeMap<String, ProviderWait>,
    waits_version: u64,
}

impl Lifecycle {
    /// No operation followed yet.
    pub fn new(policy: Policy) -> Lifecycle {
        Lifecycle {
            policy,
            ops: BTreeMap::new(),
            timers: BTreeSet::new(),
            actions: VecDeque::new(),
            waits: BTreeMap::new(),
            waits_version: 0,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether operation `id` is being followed.
    pub fn follows(&self, id: &str) -> bool {
        self.ops.contains_key(id)
    }

    /// How many operations are being followed.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no operation is being followed.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// What operations wait on at their providers, by operation id.
    pub fn waits(&self) -> &BTreeMap<String, ProviderWait> {
        &self.waits
    }

    /// Moves at every change of [`Lifecycle::waits`].
    pub fn waits_version(&self) -> u64 {
        self.waits_version
    }

    /// The next action to carry out.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Lifecycle::handle_timeout`] is next due (fleet ms).
    pub fn poll_timeout(&self) -> Option<i64> {
        self.timers.first().map(|(at, _)| *at)
    }

    // ---- inputs -------------------------------------------------------------------------

    /// An operation a step just committed: it is sent. One already followed is left as it is
    /// (the engine submitted it again, e.g. after a recovery).
    pub fn submit(&mut self, t: Tracked, now: i64) {
        if self.follows(&t.id) {
            return;
        }
        let id = t.id.clone();
        self.ops.insert(id.clone(), Op::new(t));
        self.send(&id, now);
    }

    /// An operation the store has not seen finish, after a start: the provider is asked about
    /// it before anything is sent (found → adopted; an intent not found → sent).
    pub fn resume(&mut self, t: Tracked, now: i64) {
        if self.follows(&t.id) {
            return;
        }
        let id = t.id.clone();
        self.ops.insert(id.clone(), Op::new(t));
        self.poll(&id, now);
    }

    /// `start-upgrade`'s answer for `id`.
    pub fn started(&mut self, id: &str, result: Result<Started, ProviderError>, now: i64) {
        if !self.answer(id, Calling::Start) {
            return;
        }
        match result {
            Ok(s) => {
                self.accepted(id);
                let op = self.op(id);
                op.t.state = OperationState::Sent;
                op.t.provider_operation_id = Some(s.operation_id.clone());
                self.record(id, OperationState::Sent, Some(s.operation_id), None, true);
                self.on_phase(id, s.phase, None, s.poll_after_seconds, now);
            }
            Err(e) if e.uncertain => {
                // It may have started: never failed, never sent under a new key. Ask about it.
                tracing::warn!(operation = %id, error = %e, "start-upgrade's outcome is unknown; asking get-operation");
                self.op(id).t.state = OperationState::Uncertain;
                self.record(
                    id,
                    OperationState::Uncertain,
                    None,
                    Some(e.to_string()),
                    true,
                );
                // The refusals before it were answers; this start may have been taken, so the
                // row starts again: it is asked about after the first back-off, not after one
                // doubled by the throttling that came before it.
                let op = self.op(id);
                op.streak = 0;
                op.refused_since = None;
                self.refusal(id, now);
                let wait = self.retry_wait(id, &e);
                self.waiting(id, refused("start-upgrade", &e), Some(wait), now);
                self.after(id, Due::Poll, wait, now);
            }
            Err(e) if self.may_retry(id, &e, now) => {
                self.op(id).t.state = OperationState::Intent;
                self.record(id, OperationState::Intent, None, Some(e.to_string()), true);
                if e.code == ProviderErrorCode::PreconditionFailed {
                    // The cluster changed since it was described: describe it again, then
                    // send once more.
                    tracing::info!(operation = %id, error = %e, "start-upgrade's precondition failed; describing the cluster again");
                    let why = format!(
                        "{} (describing the cluster again)",
                        refused("start-upgrade", &e)
                    );
                    self.waiting(id, why, None, now);
                    self.describe(id, Redescribe::Precondition);
                } else {
                    tracing::info!(operation = %id, error = %e, "start-upgrade refused for now; retrying");
                    let wait = self.retry_wait(id, &e);
                    self.waiting(id, refused("start-upgrade", &e), Some(wait), now);
                    self.after(id, Due::Send, wait, now);
                }
            }
            Err(e) => {
                let why = format!(
                    "the provider refused the upgrade: {e}{}",
                    self.gave_up(id, &e, now)
                );
                self.fail(id, why)
            }
        }
    }

    /// `get-operation`'s answer for `id`.
    pub fn polled(&mut self, id: &str, result: Result<OperationReport, ProviderError>, now: i64) {
        if !self.answer(id, Calling::Poll) {
            return;
        }
        match result {
            Ok(r) => {
                self.accepted(id);
                self.op(id).unseen_since = None;
                self.adopt(id, &r);
                self.on_phase(id, r.phase, r.message, r.poll_after_seconds, now)
            }
            Err(e) if e.code == ProviderErrorCode::NotFound => match self.op(id).t.state {
                // A start whose outcome is unknown: is the cluster at its target?
                OperationState::Uncertain => self.describe(id, Redescribe::Uncertain),
                // Never sent (a crash before the call): send it, under its key.
                OperationState::Intent => self.send(id, now),
                // Accepted, then lost by the provider: sent again under the same key, a bounded
                // number of times.
                OperationState::Sent | OperationState::Done => {
                    let max = self.policy.max_lost_resends;
                    let op = self.op(id);
                    op.lost += 1;
                    if op.lost <= max {
                        tracing::warn!(operation = %id, error = %e, "the provider has no trace of an operation it accepted; sending it again under the same key");
                        self.send(id, now)
                    } else {
                        let why = format!("get-operation failed: {e} (the provider lost the operation it accepted, and it was sent again {max} times)");
                        self.fail(id, why)
                    }
                }
            },
            Err(e) if self.may_retry(id, &e, now) => {
                tracing::info!(operation = %id, error = %e, "get-operation failed; asking again");
                let wait = self.retry_wait(id, &e);
                self.waiting(id, refused("get-operation", &e), Some(wait), now);
                self.after(id, Due::Poll, wait, now);
            }
            Err(e) => {
                let why = format!("get-operation failed: {e}{}", self.gave_up(id, &e, now));
                self.fail(id, why)
            }
        }
    }

    /// `describe`'s answer for `id`'s cluster.
    pub fn described(&mut self, id: &str, result: Result<Box<Described>, ProviderError>, now: i64) {
        let why = match self.ops.get(id).and_then(|op| op.calling) {
            Some(Calling::Describe(why)) => why,
            _ => return,
        };
        self.op(id).calling = None;
        if let Err(e) = &result {
            tracing::warn!(operation = %id, error = %e, "describing the cluster failed");
        }
        match why {
            Redescribe::Precondition => {
                if let Ok(d) = result {
                    self.observe(id, d);
                }
                // Once more.
                self.send(id, now)
            }
            Redescribe::Uncertain => {
                let at_target = result
                    .as_ref()
                    .is_ok_and(|d| at_target(d, &self.ops[id].t.request));
                if at_target {
                    tracing::info!(operation = %id, "the cluster is at the target of a start whose outcome was unknown: it succeeded");
                    // What it runs now, as after any upgrade that ends.
                    if let Ok(d) = result {
                        self.observe(id, d);
                    }
                    return self.succeed(id);
                }
                let grace = self.policy.uncertain_grace_ms;
                let since = *self.op(id).unseen_since.get_or_insert(now);
                let waited = now.saturating_sub(since);
                if waited >= grace {
                    // No trace after the grace period: sent again, under the same key.
                    tracing::warn!(operation = %id, "the provider has no trace of a start whose outcome was unknown; sending it again under the same key");
                    self.op(id).unseen_since = None;
                    self.send(id, now)
                } else {
                    let wait = (grace - waited).max(1000).max(self.policy.min_retry_ms);
                    let why = "the provider has no trace of a start whose outcome is unknown; \
                        asking again, then sending it again under the same key"
                        .to_string();
                    self.waiting(id, why, Some(wait), now);
                    self.after(id, Due::Poll, wait, now);
                }
            }
        }
    }

    /// Time passed: the timers due at `now` fire.
    pub fn handle_timeout(&mut self, now: i64) {
        while let Some((at, id)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(op) = self.ops.get_mut(&id) else {
                continue;
            };
            let Some((_, due)) = op.timer.take() else {
                continue;
            };
            if op.calling.is_some() {
                // Its answer decides what comes next.
                continue;
            }
            match due {
                Due::Poll => self.poll(&id, now),
                Due::Send => self.send(&id, now),
            }
        }
    }

    // ---- transitions --------------------------------------------------------------------

    fn op(&mut self, id: &str) -> &mut Op {
        self.ops.get_mut(id).expect("a followed operation")
    }

    /// A call's answer came for `id`: whether it is still followed with that call under way.
    fn answer(&mut self, id: &str, call: Calling) -> bool {
        match self.ops.get_mut(id) {
            Some(op) if op.calling == Some(call) => {
                op.calling = None;
                true
            }
            _ => false,
        }
    }

    fn call_to(&self, id: &str) -> CallTo {
        let t = &self.ops[id].t;
        CallTo {
            provider: t.provider.clone(),
            target: t.target.clone(),
        }
    }

    fn begin(&mut self, id: &str, call: Calling) -> bool {
        let op = self.op(id);
        if op.calling.is_some() {
            return false;
        }
        op.calling = Some(call);
        if let Some((at, _)) = op.timer.take() {
            self.timers.remove(&(at, id.to_string()));
        }
        true
    }

    fn send(&mut self, id: &str, _now: i64) {
        if !self.begin(id, Calling::Start) {
            return;
        }
        let to = self.call_to(id);
        let request = self.ops[id].t.request.clone();
        self.actions.push_back(Action::Start {
            id: id.to_string(),
            to,
            request,
        });
    }

    fn poll(&mut self, id: &str, _now: i64) {
        if !self.begin(id, Calling::Poll) {
            return;
        }
        let to = self.call_to(id);
        let t = &self.ops[id].t;
        let provider_operation_id = t.provider_operation_id.clone();
        let request = t.request.clone();
        self.actions.push_back(Action::Poll {
            id: id.to_string(),
            to,
            provider_operation_id,
            request,
        });
    }

    fn describe(&mut self, id: &str, why: Redescribe) {
        if !self.begin(id, Calling::Describe(why)) {
            return;
        }
        let to = self.call_to(id);
        self.actions.push_back(Action::Describe {
            id: id.to_string(),
            to,
        });
    }

    fn after(&mut self, id: &str, due: Due, wait_ms: i64, now: i64) {
        let at = now.saturating_add(wait_ms.max(0));
        let op = self.op(id);
        let old = op.timer.replace((at, due));
        if let Some((old_at, _)) = old {
            self.timers.remove(&(old_at, id.to_string()));
        }
        self.timers.insert((at, id.to_string()));
    }

    fn record(
        &mut self,
        id: &str,
        state: OperationState,
        provider_operation_id: Option<String>,
        last_error: Option<String>,
        attempted: bool,
    ) {
        self.actions.push_back(Action::Record(OperationUpdate {
            id: id.to_string(),
            state,
            provider_operation_id,
            last_error,
            attempted,
        }));
    }

    fn observe(&mut self, id: &str, described: Box<Described>) {
        let member = self.ops[id].t.member.clone();
        self.actions
            .push_back(Action::Observe { member, described });
    }

    /// An operation the provider reports on: one not known as sent (never sent before a
    /// restart, or whose start was uncertain) is adopted, with the provider's id of it.
    fn adopt(&mut self, id: &str, r: &OperationReport) {
        let op = self.op(id);
        let known = (r.operation_id != op.t.id).then(|| r.operation_id.clone());
        let adopted = match op.t.state {
            OperationState::Intent | OperationState::Uncertain => true,
            OperationState::Sent => op.t.provider_operation_id.is_none() && known.is_some(),
            OperationState::Done => false,
        };
        if adopted {
            op.t.state = OperationState::Sent;
            if known.is_some() {
                op.t.provider_operation_id = known.clone();
            }
            self.record(id, OperationState::Sent, known, None, false);
        }
    }

    fn on_phase(
        &mut self,
        id: &str,
        phase: OperationPhase,
        message: Option<String>,
        poll_after_seconds: u64,
        now: i64,
    ) {
        if phase.is_final() {
            let member = self.ops[id].t.member.clone();
            let to = self.call_to(id);
            self.actions.push_back(Action::Refresh { member, to });
        }
        match phase {
            OperationPhase::Succeeded => self.succeed(id),
            OperationPhase::Failed | OperationPhase::Canceled => {
                let why = message.unwrap_or_else(|| format!("the upgrade ended {phase:?}"));
                self.fail(id, why)
            }
            OperationPhase::Pending | OperationPhase::Running | OperationPhase::Unknown => {
                let wait = (poll_after_seconds.max(1) as i64).saturating_mul(1000);
                self.after(id, Due::Poll, wait, now);
            }
        }
    }

    fn succeed(&mut self, id: &str) {
        self.forget(id);
        self.actions
            .push_back(Action::Succeeded { id: id.to_string() });
    }

    fn fail(&mut self, id: &str, message: String) {
        self.forget(id);
        self.actions.push_back(Action::Failed {
            id: id.to_string(),
            message,
        });
    }

    fn forget(&mut self, id: &str) {
        if let Some(op) = self.ops.remove(id) {
            if let Some((at, _)) = op.timer {
                self.timers.remove(&(at, id.to_string()));
            }
        }
        self.unwait(id);
    }

    /// A call of `id` succeeded: its refusals in a row end.
    fn accepted(&mut self, id: &str) {
        let op = self.op(id);
        op.streak = 0;
        op.by_code.clear();
        op.refused_since = None;
        self.unwait(id);
    }

    /// Counts a refusal of one of `id`'s calls in the row.
    fn refusal(&mut self, id: &str, now: i64) {
        let op = self.op(id);
        op.streak += 1;
        op.refused_since.get_or_insert(now);
    }

    /// Counts a refusal of one of `id`'s calls; whether the call may be made again: as the
    /// code's retry class says ([`ProviderErrorCode::retries`]), counted since the operation's
    /// last successful call, and while the refusals in a row are within
    /// [`Policy::give_up_after_ms`].
    fn may_retry(&mut self, id: &str, e: &ProviderError, now: i64) -> bool {
        self.refusal(id, now);
        let give_up = self.policy.give_up_after_ms;
        let op = self.op(id);
        let n = op.by_code.entry(e.code).or_insert(0);
        *n += 1;
        let within_class = e.code.retries().is_none_or(|max| *n <= max);
        let within_deadline = op.refused_since.is_none_or(|s| now - s < give_up);
        within_class && within_deadline
    }

    /// How long before a call of `id` refused with `e` is made again (fleet ms): the
    /// provider's `retryAfterSeconds`, else [`Policy::retry_ms`] doubled for each refusal in a
    /// row (at most [`Policy::max_backoff_ms`]) less the jitter; at least
    /// [`Policy::min_retry_ms`].
    fn retry_wait(&self, id: &str, e: &ProviderError) -> i64 {
        let p = &self.policy;
        let streak = self.ops[id].streak.max(1);
        let wait = match e.retry_after_seconds {
            Some(s) => (s.max(1) as i64).saturating_mul(1000),
            None => {
                let backoff = p
                    .retry_ms
                    .saturating_mul(1i64 << (streak - 1).min(20))
                    .min(p.max_backoff_ms);
                let cut = jitter(p.seed, id, streak) % 1000 * p.jitter_permille.min(1000) / 1000;
                backoff - backoff * cut as i64 / 1000
            }
        };
        wait.max(p.min_retry_ms).max(1)
    }

    /// What a refusal that is not retried again says beyond its code and message.
    fn gave_up(&self, id: &str, e: &ProviderError, now: i64) -> String {
        let op = &self.ops[id];
        let within_class = e
            .code
            .retries()
            .is_none_or(|max| op.by_code.get(&e.code).copied().unwrap_or(0) <= max);
        if within_class && e.code.retryable() {
            let since = op.refused_since.unwrap_or(now);
            let state = if op.t.state == OperationState::Intent {
                ""
            } else {
                "; the upgrade may still be running on the platform"
            };
            return format!(
                " (refused in a row for {}, longer than the {} the daemon waits{state})",
                span(now - since),
                span(self.policy.give_up_after_ms)
            );
        }
        match (e.code, e.code.retries()) {
            (ProviderErrorCode::PreconditionFailed, _) => {
                " (again after describing the cluster anew and retrying once)".to_string()
            }
            (_, Some(n)) if n > 0 => format!(" (after {n} retries)"),
            _ => String::new(),
        }
    }

    /// The operation `id` waits on its provider: `message`; the call is made again after
    /// `wait_ms`, if known.
    fn waiting(&mut self, id: &str, message: String, wait_ms: Option<i64>, now: i64) {
        let since_ms = self.waits.get(id).map_or(now, |w| w.since_ms);
        let streak = self.ops.get(id).map_or(0, |op| op.streak);
        let mut message = message;
        if streak > 1 {
            let since = chrono::DateTime::from_timestamp_millis(since_ms).unwrap_or_default();
            let since = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            message.push_str(&format!(" ({streak} refusals in a row since {since})"));
        }
        let w = ProviderWait {
            message,
            since_ms,
            until_ms: wait_ms.map(|w| now + w),
        };
        self.waits.insert(id.to_string(), w);
        self.waits_version += 1;
    }

    /// The operation `id`'s provider answered: it waits on it no more.
    fn unwait(&mut self, id: &str) {
        if self.waits.remove(id).is_some() {
            self.waits_version += 1;
        }
    }
}

impl Op {
    fn new(t: Tracked) -> Op {
        Op {
            t,
            calling: None,
            timer: None,
            streak: 0,
            by_code: BTreeMap::new(),
            refused_since: None,
            unseen_since: None,
            lost: 0,
        }
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

/// A span of fleet time, for messages: `36h`, `90m`, `45s`.
fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s >= 7200 && s % 3600 == 0 {
        format!("{}h", s / 3600)
    } else if s >= 120 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Whether the cluster runs what `request` asks for: its control plane version, and every
/// pool's image.
pub fn at_target(d: &Described, request: &UpgradeRequest) -> bool {
    request
        .control_plane
        .as_ref()
        .is_none_or(|v| *v == d.kubernetes_version)
        && request.node_images.iter().all(|i| d.runs(i))
}

/// A number in `0..u64::MAX` fixed by the seed, the operation and the refusal's place in the
/// row (splitmix64 over FNV-1a): the same inputs, the same back-off, in every run.
pub(crate) fn jitter(seed: u64, id: &str, streak: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut z = seed ^ h ^ (u64::from(streak) << 32);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
