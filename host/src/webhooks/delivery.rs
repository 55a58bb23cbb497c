//! Delivery, as a state machine with no threads, no store reads and no clock reads
//! ([`Deliveries`], the operation lifecycle's way): the driver feeds it what happens — the
//! event log grew, events were read, an attempt ended, time passed — each with `now`, and
//! carries out the [`Delivery`] actions it gives: read the log, send an event, store a
//! subscription's cursor, dead-letter an event, log an attempt. Times are the driver's clock
//! (real milliseconds: receivers and their `Retry-After` live in real time).
//!
//! Each subscription is a lane:
//!
//! ```text
//!  log ─read─► queue (its matching events, in order) ─head─► Send ──2xx──► cursor moves past it
//!                                                        ▲      │
//!                                      back-off, jitter, └──────┘ error, timeout, non-2xx
//!                                      Retry-After              │ older than the lane's
//!                                                               ▼ maximum age
//!                                                          dead letter (kept; cursor moves on)
//! ```
//!
//! - **At least once, in order.** One attempt in flight per lane; the head is sent until it is
//!   delivered or dead-lettered, and only then does the next go. The cursor (every event at or
//!   before it is done) is stored after it moves: a crash repeats at most what was sent after
//!   the last stored cursor.
//! - **Back-off**: [`Policy::first_retry_ms`] doubled per failure in a row, at most
//!   [`Policy::max_backoff_ms`], less a jitter fixed by the seed, the lane, the event and the
//!   attempt; a receiver's `Retry-After` is honoured as given (at most
//!   [`Policy::max_retry_after_ms`]).
//! - **Maximum age**: an event's age counts from when it was logged. A retry that would come
//!   after the event is too old is made when it becomes too old, as the last one; an event
//!   whose turn comes when it is already too old is tried once. A failure past the age
//!   dead-letters it, and the lane goes on.
//! - **Redelivery** (by hand): dead letters asked for are sent before the lane's next event,
//!   each with a fresh age; delivered, their dead letter is cleared.
//! - Lanes are independent: a slow receiver holds only its own lane.

use std::collections::{BTreeMap, VecDeque};

/// The tunables (the driver's clock, milliseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// The first back-off after a failure; it doubles with each failure in a row.
    pub first_retry_ms: i64,
    /// The longest back-off.
    pub max_backoff_ms: i64,
    /// The longest `Retry-After` honoured.
    pub max_retry_after_ms: i64,
    /// A back-off is shortened by up to this many thousandths, at random (from `seed`).
    pub jitter_permille: u64,
    /// How many events a lane reads from the log at once.
    pub read_batch: u32,
    /// The jitter's seed.
    pub seed: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            first_retry_ms: 2_000,
            max_backoff_ms: 600_000,
            max_retry_after_ms: 3_600_000,
            jitter_permille: 200,
            read_batch: 256,
            seed: 0,
        }
    }
}

/// A subscription as a lane sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneConfig {
    /// The stored cursor: every event at or before it is done.
    pub cursor: u64,
    /// Events older than this are dead-lettered after a failure.
    pub max_age_ms: i64,
    /// A disabled subscription's lane sends nothing; its cursor stays where it is.
    pub enabled: bool,
}

/// An event read for a lane: its sequence number, and when it was logged (driver's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logged {
    /// The event's sequence number.
    pub seq: u64,
    /// When it was logged.
    pub at_ms: i64,
}

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered 2xx.
    Delivered {
        /// The status.
        status: u16,
    },
    /// Anything else: a non-2xx status (redirects are not followed), a timeout, a refused or
    /// reset connection, an address the policy refuses.
    Failed {
        /// The status, when the receiver answered.
        status: Option<u16>,
        /// What went wrong, for the log.
        error: String,
        /// The receiver's `Retry-After`, in milliseconds.
        retry_after_ms: Option<i64>,
    },
}

/// What the driver is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Read up to `limit` events of the log after `after`, and hand the lane's matching ones
    /// to [`Deliveries::read`].
    Read {
        /// The subscription.
        lane: String,
        /// Read after this sequence number.
        after: u64,
        /// At most this many.
        limit: u32,
    },
    /// Send the event `seq` (attempt `attempt`, from 1); report with [`Deliveries::sent`].
    Send {
        /// The subscription.
        lane: String,
        /// The event.
        seq: u64,
        /// Which attempt at it this is.
        attempt: u32,
    },
    /// Store the lane's cursor.
    Cursor {
        /// The subscription.
        lane: String,
        /// Every event at or before it is done.
        cursor: u64,
    },
    /// Keep the event as a dead letter of the lane.
    DeadLetter {
        /// The subscription.
        lane: String,
        /// The event.
        seq: u64,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        error: String,
    },
    /// A dead letter was delivered on request: it is no longer one.
    Redelivered {
        /// The subscription.
        lane: String,
        /// The event.
        seq: u64,
    },
}

#[derive(Clone, Debug)]
struct Queued {
    seq: u64,
    at_ms: i64,
    /// A dead letter sent again on request (before the cursor; never moves it).
    redelivery: bool,
}

#[derive(Clone, Debug)]
struct Lane {
    config: LaneConfig,
    /// The highest sequence number read from the log for this lane (matching or not).
    read_to: u64,
    /// A read is under way.
    reading: bool,
    queue: VecDeque<Queued>,
    /// The head's attempt in flight.
    in_flight: Option<u32>,
    /// Attempts at the head so far.
    attempts: u32,
    /// The head's next attempt.
    due: Option<i64>,
    /// The last cursor handed out.
    stored: u64,
}

impl Lane {
    fn new(config: LaneConfig) -> Lane {
        Lane {
            read_to: config.cursor,
            stored: config.cursor,
            config,
            reading: false,
            queue: VecDeque::new(),
            in_flight: None,
            attempts: 0,
            due: None,
        }
    }

    /// Every event at or before it is done.
    fn cursor(&self) -> u64 {
        self.queue
            .iter()
            .find(|q| !q.redelivery)
            .map_or(self.read_to, |q| q.seq - 1)
    }
}

/// Every subscription's lane, and what to do next.
#[derive(Debug)]
pub struct Deliveries {
    policy: Policy,
    lanes: BTreeMap<String, Lane>,
    /// The last sequence number in the log.
    log_end: u64,
    actions: VecDeque<Delivery>,
}

impl Deliveries {
    /// No lanes; the log ends at `log_end`.
    pub fn new(policy: Policy, log_end: u64) -> Deliveries {
        Deliveries {
            policy,
            lanes: BTreeMap::new(),
            log_end,
            actions: VecDeque::new(),
        }
    }

    /// The next action, until there is none.
    pub fn poll_action(&mut self) -> Option<Delivery> {
        self.actions.pop_front()
    }

    /// When [`Deliveries::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<i64> {
        self.lanes
            .values()
            .filter(|l| l.in_flight.is_none() && l.config.enabled)
            .filter_map(|l| l.due)
            .min()
    }

    /// How far behind each lane is: events in the log after its cursor (matching or not).
    pub fn lag(&self) -> BTreeMap<String, u64> {
        self.lanes
            .iter()
            .map(|(n, l)| (n.clone(), self.log_end.saturating_sub(l.cursor())))
            .collect()
    }

    /// Each lane's cursor: every event at or before it is done.
    pub fn cursors(&self) -> BTreeMap<String, u64> {
        self.lanes
            .iter()
            .map(|(n, l)| (n.clone(), l.cursor()))
            .collect()
    }

    /// The lanes, by name.
    pub fn lanes(&self) -> impl Iterator<Item = &str> {
        self.lanes.keys().map(String::as_str)
    }

    /// A subscription created, or changed (its cursor is kept when it already has a lane).
    pub fn subscribe(&mut self, name: &str, config: LaneConfig, now: i64) {
        match self.lanes.get_mut(name) {
            Some(l) => {
                l.config.max_age_ms = config.max_age_ms;
                l.config.enabled = config.enabled;
            }
            None => {
                self.lanes.insert(name.to_string(), Lane::new(config));
            }
        }
        self.drive(name, now);
    }

    /// A subscription deleted: its lane goes; an answer for it is ignored.
    pub fn unsubscribe(&mut self, name: &str) {
        self.lanes.remove(name);
    }

    /// The log grew to `last_seq`.
    pub fn logged(&mut self, last_seq: u64, now: i64) {
        if last_seq <= self.log_end {
            return;
        }
        self.log_end = last_seq;
        let names: Vec<String> = self.lanes.keys().cloned().collect();
        for n in names {
            self.drive(&n, now);
        }
    }

    /// What a [`Delivery::Read`] found: the lane's matching events after `after`, in order,
    /// and `upto`, the last sequence number read (matching or not).
    pub fn read(&mut self, name: &str, matching: &[Logged], upto: u64, now: i64) {
        let Some(l) = self.lanes.get_mut(name) else {
            return;
        };
        l.reading = false;
        for e in matching {
            if e.seq > l.read_to && e.seq <= upto {
                l.queue.push_back(Queued {
                    seq: e.seq,
                    at_ms: e.at_ms,
                    redelivery: false,
                });
            }
        }
        l.read_to = l.read_to.max(upto);
        self.log_end = self.log_end.max(upto);
        self.drive(name, now);
    }

    /// Dead letters of `name` to send again, before its next event.
    pub fn redeliver(&mut self, name: &str, seqs: &[u64], now: i64) {
        let Some(l) = self.lanes.get_mut(name) else {
            return;
        };
        // After the head in flight (if any), before everything else; in order.
        let mut at = usize::from(l.in_flight.is_some()).min(l.queue.len());
        for seq in seqs {
            if l.queue.iter().any(|q| q.seq == *seq) {
                continue;
            }
            l.queue.insert(
                at,
                Queued {
                    seq: *seq,
                    at_ms: now,
                    redelivery: true,
                },
            );
            at += 1;
        }
        if l.in_flight.is_none() {
            l.attempts = 0;
            l.due = None;
        }
        self.drive(name, now);
    }

    /// How attempt `attempt` at `seq` of `name` ended.
    pub fn sent(&mut self, name: &str, seq: u64, attempt: u32, outcome: Outcome, now: i64) {
        let policy = self.policy.clone();
        let Some(l) = self.lanes.get_mut(name) else {
            return;
        };
        let is_head = l.queue.front().is_some_and(|q| q.seq == seq);
        if l.in_flight != Some(attempt) || !is_head {
            return;
        }
        l.in_flight = None;
        l.attempts = attempt;
        let head = l.queue.front().cloned().expect("the head");
        match outcome {
            Outcome::Delivered { .. } => {
                l.queue.pop_front();
                l.attempts = 0;
                l.due = None;
                if head.redelivery {
                    self.actions.push_back(Delivery::Redelivered {
                        lane: name.to_string(),
                        seq,
                    });
                }
            }
            Outcome::Failed {
                error,
                retry_after_ms,
                ..
            } => {
                let expires = head.at_ms.saturating_add(l.config.max_age_ms);
                if now >= expires {
                    l.queue.pop_front();
                    l.attempts = 0;
                    l.due = None;
                    self.actions.push_back(Delivery::DeadLetter {
                        lane: name.to_string(),
                        seq,
                        attempts: attempt,
                        error,
                    });
                } else {
                    let wait = match retry_after_ms {
                        Some(ms) => ms.clamp(0, policy.max_retry_after_ms),
                        None => backoff(&policy, name, seq, attempt),
                    };
                    // The last attempt is made when the event becomes too old.
                    l.due = Some(now.saturating_add(wait.max(1)).min(expires));
                }
            }
        }
        self.drive(name, now);
    }

    /// Time passed: lanes whose retry is due send it.
    pub fn handle_timeout(&mut self, now: i64) {
        let due: Vec<String> = self
            .lanes
            .iter()
            .filter(|(_, l)| l.in_flight.is_none() && l.due.is_some_and(|d| d <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for n in due {
            if let Some(l) = self.lanes.get_mut(&n) {
                l.due = None;
            }
            self.drive(&n, now);
        }
    }

    /// The one place a lane makes progress: its cursor stored when it moved, the next read
    /// asked for, the head sent when nothing is in flight and no retry is pending.
    fn drive(&mut self, name: &str, _now: i64) {
        let batch = self.policy.read_batch;
        let log_end = self.log_end;
        let Some(l) = self.lanes.get_mut(name) else {
            return;
        };
        let cursor = l.cursor();
        if cursor != l.stored {
            l.stored = cursor;
            self.actions.push_back(Delivery::Cursor {
                lane: name.to_string(),
                cursor,
            });
        }
        if !l.config.enabled {
            return;
        }
        if !l.reading && l.read_to < log_end && l.queue.len() < batch as usize {
            l.reading = true;
            self.actions.push_back(Delivery::Read {
                lane: name.to_string(),
                after: l.read_to,
                limit: batch,
            });
        }
        if l.in_flight.is_none() && l.due.is_none() {
            if let Some(head) = l.queue.front() {
                let attempt = l.attempts + 1;
                l.in_flight = Some(attempt);
                self.actions.push_back(Delivery::Send {
                    lane: name.to_string(),
                    seq: head.seq,
                    attempt,
                });
            }
        }
    }
}

/// The wait after failure `attempt` of `seq` in lane `lane`: doubled per failure, at most the
/// policy's longest, less the jitter.
fn backoff(p: &Policy, lane: &str, seq: u64, attempt: u32) -> i64 {
    let base = p
        .first_retry_ms
        .saturating_mul(1i64 << (attempt.max(1) - 1).min(30))
        .min(p.max_backoff_ms);
    let key = format!("{lane}/{seq}");
    let cut =
        crate::daemon::jitter(p.seed, &key, attempt) % 1000 * p.jitter_permille.min(1000) / 1000;
    (base - base * cut as i64 / 1000).max(1)
}

#[cfg(test)]
mod tests;
