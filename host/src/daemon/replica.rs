//! One replica among several over PostgreSQL: the edge of [`Leadership`]. This room owns the
//! lease keeper (the thread that asks the store for the leader lease when the state machine
//! says so and carries out what it decides), the engine thread's standing ([`Replica`]: how it
//! builds a leader's or a follower's engine, and whether it leads), and what the API shows of
//! it ([`ReplicaStatus`]: `/readyz`, `/metrics`, the leader's address in a follower's 503).
//!
//! The rule it keeps: **never two engines acting.** The [`ActingDeadline`] the keeper moves
//! with each renewal is checked by the writer before every transaction and by every provider
//! call just before it goes out; it passes before another replica can take the lease, so a
//! leader that stalls (the database unreachable, the process paused) has stopped acting by
//! the time anyone else starts.

use super::leadership::{Leadership, LeaseAction, LeaseAnswer, LeaseTiming, Role};
use super::{DaemonError, FleetEngine};
use crate::store::{ActingDeadline, LeaseState, PgStore};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Builds the fleet's engine: a leader's over a writer holding the lease of `Some(epoch)`, a
/// follower's (read-only, over the leader's database) for `None`.
pub type BuildEngine = Box<dyn Fn(Option<u64>) -> Result<FleetEngine, DaemonError> + Send + Sync>;

/// What a new leader does once its engine runs (records where clients reach it, registers
/// the fleet file): on the engine thread, with the epoch it leads under.
pub type OnLead = Box<dyn FnMut(&mut super::Worker, u64) + Send>;

/// How often a follower looks for the leader's new steps.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// The engine thread's standing among the replicas.
pub struct Replica {
    /// Until when this process may act.
    pub(super) deadline: ActingDeadline,
    /// The epoch it leads under (`None`: it follows).
    pub(super) leading: Option<u64>,
    /// An epoch it was told to lead under but could not start its engine for: tried again.
    pub(super) pending: Option<u64>,
    pub(super) build: Arc<BuildEngine>,
    /// A follower's next engine, under way on a thread of its own (its number: one that
    /// comes back after another was asked for, or after a takeover, is dropped).
    pub(super) building: Option<u64>,
    /// Follower engines asked for so far.
    pub(super) builds: u64,
    /// The leader's journal and event log ends, as this follower's engine last read them.
    pub(super) seen: (u64, u64),
    /// When it last looked.
    pub(super) looked: Option<Instant>,
    /// Run each time it takes the lead.
    pub(super) on_lead: Option<OnLead>,
}

impl Replica {
    /// A replica that follows until the keeper says it leads.
    pub fn new(deadline: ActingDeadline, build: BuildEngine) -> Replica {
        Replica {
            deadline,
            leading: None,
            pending: None,
            build: Arc::new(build),
            building: None,
            builds: 0,
            seen: (0, 0),
            looked: None,
            on_lead: None,
        }
    }

    /// What to do each time this replica's engine takes the lead.
    pub fn on_lead(mut self, f: OnLead) -> Replica {
        self.on_lead = Some(f);
        self
    }

    /// Builds an engine now, on this thread: a leader's for `Some(epoch)`, a follower's for
    /// `None`.
    pub(super) fn build_now(&self, epoch: Option<u64>) -> Result<FleetEngine, DaemonError> {
        (self.build)(epoch)
    }

    /// Whether it may act now: it leads, and its deadline has not passed.
    pub fn acting(&self) -> bool {
        self.leading.is_some() && self.deadline.may_act()
    }
}

/// What a replica is, for the API.
#[derive(Debug)]
pub struct ReplicaStatus {
    holder: String,
    url: Option<String>,
    inner: Mutex<StatusInner>,
}

#[derive(Clone, Debug, Default)]
struct StatusInner {
    /// Leading with this epoch.
    epoch: Option<u64>,
    /// The leader as last seen (holder, epoch).
    leader: Option<(String, u64)>,
    /// Times it took the lead, and stepped down.
    leaderships: u64,
    step_downs: u64,
}

/// The `meta` key where the leader says where clients reach it.
pub const LEADER_URL: &str = "leader_url";

impl ReplicaStatus {
    /// The status of the replica `holder`, reached at `url`.
    pub fn new(holder: &str, url: Option<String>) -> ReplicaStatus {
        ReplicaStatus {
            holder: holder.to_string(),
            url,
            inner: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StatusInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This replica's name in the lease.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Where clients reach this replica (its `publicUrl`, else its listening address).
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// Whether it leads.
    pub fn leading(&self) -> bool {
        self.lock().epoch.is_some()
    }

    /// The epoch it leads under, if it does.
    pub fn epoch(&self) -> Option<u64> {
        self.lock().epoch
    }

    /// The leader as last seen: holder and epoch.
    pub fn leader(&self) -> Option<(String, u64)> {
        let s = self.lock();
        match s.epoch {
            Some(e) => Some((self.holder.clone(), e)),
            None => s.leader.clone(),
        }
    }

    /// `/metrics` samples: whether it leads, the lease's epoch as last seen, and how often it
    /// took the lead and stepped down.
    pub fn metrics(&self) -> Vec<crate::providers::ProviderMetric> {
        use crate::providers::ProviderMetric;
        let s = self.lock();
        let holder = || vec![("holder", self.holder.clone())];
        let epoch = s.epoch.or(s.leader.as_ref().map(|l| l.1)).unwrap_or(0);
        vec![
            ProviderMetric {
                name: "waverun_leader",
                counter: false,
                labels: holder(),
                value: u64::from(s.epoch.is_some()),
            },
            ProviderMetric {
                name: "waverun_lease_epoch",
                counter: false,
                labels: holder(),
                value: epoch,
            },
            ProviderMetric {
                name: "waverun_leaderships_total",
                counter: true,
                labels: holder(),
                value: s.leaderships,
            },
            ProviderMetric {
                name: "waverun_step_downs_total",
                counter: true,
                labels: holder(),
                value: s.step_downs,
            },
        ]
    }

    fn led(&self, epoch: u64) {
        let mut s = self.lock();
        s.epoch = Some(epoch);
        s.leader = Some((self.holder.clone(), epoch));
        s.leaderships += 1;
    }

    fn stepped_down(&self) {
        let mut s = self.lock();
        if s.epoch.take().is_some() {
            s.step_downs += 1;
        }
        s.leader = None;
    }

    fn saw(&self, holder: String, epoch: u64) {
        let mut s = self.lock();
        if s.epoch.is_none() {
            s.leader = Some((holder, epoch));
        }
    }
}

/// What the keeper tells the rest of the daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// This replica leads now, under `epoch`: start the engine as the leader.
    Lead {
        /// The lease's epoch.
        epoch: u64,
    },
    /// It does not any more (already stopped acting: the deadline is cleared first).
    StepDown {
        /// Why.
        why: String,
    },
}

/// Every answer moves the deadline: the leader's renewal, or none.
fn sync(l: &Leadership, deadline: &ActingDeadline) {
    match l.role() {
        Role::Leader { act_until_ms, .. } => deadline.set(*act_until_ms),
        Role::Follower { .. } => deadline.set(0),
    }
}

/// The lease keeper's thread.
pub struct LeaseKeeper {
    stop: mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LeaseKeeper {
    /// Starts asking for the lease through `store` (a connection of the keeper's own), moving
    /// `deadline` with each answer and telling `on` of every change of standing.
    pub fn start(
        mut store: PgStore,
        timing: LeaseTiming,
        deadline: ActingDeadline,
        status: Arc<ReplicaStatus>,
        mut on: Box<dyn FnMut(Transition) + Send>,
    ) -> Result<LeaseKeeper, String> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("waverun-lease".to_string())
            .spawn(move || {
                let mut l = Leadership::new(timing, deadline.now_ms());
                loop {
                    l.handle_timeout(deadline.now_ms());
                    while let Some(action) = l.poll_action() {
                        match action {
                            LeaseAction::Ask => {
                                let asked = deadline.now_ms();
                                let answer = match store.acquire() {
                                    Ok(LeaseState::Held { epoch }) => LeaseAnswer::Held { epoch },
                                    Ok(LeaseState::Other {
                                        holder,
                                        epoch,
                                        remaining,
                                    }) => {
                                        status.saw(holder.clone(), epoch);
                                        LeaseAnswer::Other {
                                            holder,
                                            epoch,
                                            remaining_ms: remaining.as_millis() as i64,
                                        }
                                    }
                                    Err(e) => {
                                        tracing::warn!(error = %e, "asking for the leader lease");
                                        LeaseAnswer::Failed
                                    }
                                };
                                l.answered(answer, asked, deadline.now_ms());
                                sync(&l, &deadline);
                            }
                            LeaseAction::Lead { epoch } => {
                                tracing::info!(epoch, holder = %status.holder(), "this replica leads");
                                status.led(epoch);
                                on(Transition::Lead { epoch });
                            }
                            LeaseAction::StepDown { why } => {
                                deadline.set(0);
                                tracing::warn!(why = %why, holder = %status.holder(), "this replica stops leading");
                                status.stepped_down();
                                on(Transition::StepDown { why });
                            }
                        }
                        sync(&l, &deadline);
                    }
                    let wait = (l.poll_timeout() - deadline.now_ms()).clamp(1, 60_000);
                    match stopped.recv_timeout(Duration::from_millis(wait as u64)) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                            // A clean stop: nothing acts any more, and the lease is given up
                            // so that another replica takes over at once.
                            deadline.set(0);
                            if matches!(l.role(), Role::Leader { .. }) {
                                status.stepped_down();
                                on(Transition::StepDown {
                                    why: "shutting down".to_string(),
                                });
                                if let Err(e) = store.release() {
                                    tracing::warn!(error = %e, "giving up the leader lease");
                                }
                            }
                            return;
                        }
                    }
                }
            })
            .map_err(|e| format!("the lease keeper's thread: {e}"))?;
        Ok(LeaseKeeper {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops asking; a leader gives the lease up (after it stopped acting).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.stop.send(());
            let _ = t.join();
        }
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.halt();
    }
}
