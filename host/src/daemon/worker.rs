//! The engine thread: the one place a fleet's engine runs. API handlers, provider results and
//! timers reach it as messages on one channel ([`Msg`]); it sleeps until the engine's next
//! wakeup, the lifecycle's next timer or the next message, whichever comes first. This room is
//! the mailbox and the steps: every message becomes an engine step, an input of the operation
//! lifecycle ([`super::operations::Lifecycle`], which decides what is called when), or both; the
//! lifecycle's actions are carried out here — provider calls on threads of their own (reporting
//! back as messages, so a slow cluster never holds the engine), operation rows written, results
//! delivered to the engine as steps.
//!
//! Health checks: every measurement a committed step asks for ([`Applied::checks`]) is taken
//! on a tokio runtime of the worker's own ([`Measurements`]), never on this thread: a check the
//! member's provider answers (`provider: {}`, [`health::answered_by_provider`]) through the
//! provider's blocking `preflight`/`health`, any other through the [`Checker`]; each within the
//! check's timeout. Its result comes back as a message and is delivered to the engine as a
//! `checkMeasured` observation (journaled like every input). A measurement id already being
//! measured is not measured again (the guest submits every awaited one again after a start).

use super::clock::FleetClock;
use super::fleet_engine::{Applied, DaemonError, FleetEngine, StepWrites};
use super::members::{MemberBinding, MEMBERS};
use super::metrics::MeasurementLabels;
use super::operations::{Action, Lifecycle, Policy, ProviderWait, Tracked};
use super::replica::{Replica, FOLLOW_EVERY};
use crate::clock::Clock;
use crate::health::{self, Checker, HealthConfig};
use crate::providers::{ClusterTarget, Described, OperationReport, Provider};
use crate::providers::{ProviderError, Started, UpgradeRequest};
use crate::store::{OperationRow, OperationUpdate};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use waverun_core::health::{Measurement, Verdict};
use waverun_core::{CheckPurpose, CheckRequest, EventKind, Observation, UpgradeOperation};

/// The key, in a stored update run's properties, that says its deletion was asked for while it
/// ran (`{by, requestId, target}`): the API stopped it, and the engine thread deletes it once
/// it has stopped.
pub const DELETE_REQUESTED: &str = "deleteRequested";

/// The resource kind of update runs, as stored.
const RUNS: &str = "updateRuns";

/// The providers members are reached through, by name.
pub type Providers = BTreeMap<String, Arc<dyn Provider>>;

/// The shortest real time before a refused call is made again, whatever the time scale.
const MIN_REAL_RETRY: Duration = Duration::from_millis(5);
/// The longest the thread sleeps without looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(30);

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// What reaches the engine thread.
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
        result: Result<Box<Described>, ProviderError>,
    },
    /// A member described again after its upgrade ended.
    Refreshed {
        member: String,
        result: Result<Box<Described>, ProviderError>,
    },
    /// A health check's measurement was taken, in `took` (wall clock).
    Measured {
        id: String,
        measurement: Measurement,
        labels: MeasurementLabels,
        took: Duration,
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
    /// Every operation in flight, and what to do about each.
    lifecycle: Lifecycle,
    /// When each upgrade in flight started (fleet time), for the duration histogram.
    upgrade_started: BTreeMap<String, waverun_core::Timestamp>,
    /// The lifecycle's [`Lifecycle::waits_version`], for other threads (the API's run cache is
    /// keyed by it).
    waits_version: Arc<AtomicU64>,
    /// The last committed event's sequence number, for the SSE streams.
    events: tokio::sync::watch::Sender<u64>,
    /// Health-check measurements: where they run, and which are being taken.
    measurements: Measurements,
    /// The webhook driver, told when the event log grows.
    webhooks: Option<Sender<crate::webhooks::driver::DriverMsg>>,
    /// Among several replicas (PostgreSQL): whether it leads, and how it builds its engine.
    /// `None`: the only process on its store, which always acts.
    replica: Option<Replica>,
}

/// The worker's side of health checks: a checker, a small tokio runtime of its own to take
/// measurements on, and the ids being measured.
pub struct Measurements {
    checker: Checker,
    runtime: Option<tokio::runtime::Runtime>,
    in_flight: BTreeSet<String>,
    /// The provider of a member whose provider the engine does not name.
    default_provider: String,
}

impl Measurements {
    /// Measurements under `checker`, on a runtime of their own (one worker thread, plus
    /// tokio's blocking pool for the blocking sources and provider calls).
    pub fn new(checker: Checker) -> std::io::Result<Measurements> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("waverun-checks")
            .enable_all()
            .build()?;
        Ok(Measurements {
            checker,
            runtime: Some(runtime),
            in_flight: BTreeSet::new(),
            default_provider: "simulated".to_string(),
        })
    }

    /// With a checker of the default configuration (no Prometheus, no secrets, no exec
    /// programs).
    pub fn unconfigured() -> std::io::Result<Measurements> {
        let checker = Checker::new(HealthConfig::default()).map_err(std::io::Error::other)?;
        Measurements::new(checker)
    }
}

impl Drop for Measurements {
    fn drop(&mut self) {
        // Never wait for a measurement still running: its result would go nowhere.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
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

    /// What each provider measured, by provider name.
    pub fn provider_metrics(&self) -> Vec<crate::providers::ProviderMetric> {
        self.providers
            .iter()
            .flat_map(|(name, p)| {
                p.metrics().into_iter().map(move |mut m| {
                    m.labels.insert(0, ("provider", name.clone()));
                    m
                })
            })
            .collect()
    }

    /// The fleet clock.
    pub fn clock(&self) -> &FleetClock {
        &self.clock
    }

    /// What operations wait on at their providers, by operation id.
    pub fn provider_waits(&self) -> &BTreeMap<String, ProviderWait> {
        self.lifecycle.waits()
    }

    /// The version of [`Worker::provider_waits`]: it moves at every change.
    pub fn provider_waits_version(&self) -> u64 {
        self.lifecycle.waits_version()
    }

    /// An operator command: one step, then its operations go out.
    pub fn command(
        &mut self,
        command: &waverun_core::Command,
        audit: Option<crate::store::NewAudit>,
    ) -> Result<Applied, DaemonError> {
        self.command_step(
            command,
            StepWrites {
                audit,
                ..StepWrites::default()
            },
        )
    }

    /// An operator command with what the API writes beside it, as one step; then its
    /// operations go out.
    pub fn command_step(
        &mut self,
        command: &waverun_core::Command,
        writes: StepWrites,
    ) -> Result<Applied, DaemonError> {
        let applied = self.engine.command_step(command, writes)?;
        self.dispatch(&applied);
        Ok(applied)
    }

    /// A step was committed outside [`Worker::command_step`]: its events are announced and its
    /// operations go out.
    pub fn dispatched(&mut self, applied: &Applied) {
        self.dispatch(applied)
    }

    /// Tells the webhook driver, from now on, each time the event log grows.
    pub fn set_webhooks(&mut self, tx: Sender<crate::webhooks::driver::DriverMsg>) {
        let _ = tx.send(crate::webhooks::driver::DriverMsg::Logged(
            *self.events.borrow(),
        ));
        self.webhooks = Some(tx);
    }

    /// Whether this engine thread may act — call providers, write, fire timers: always when it
    /// is the only process on its store; among replicas, while it leads and its lease's
    /// deadline has not passed.
    pub fn acting(&self) -> bool {
        self.replica.as_ref().is_none_or(Replica::acting)
    }

    /// The lease keeper says this replica leads under `epoch`: the leader's engine is built
    /// over the database (the snapshot and journal replayed), then every operation in flight is
    /// asked about before anything is sent again — an upgrade the old leader started is
    /// adopted, not repeated.
    pub fn lead(&mut self, epoch: u64) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if !r.deadline.may_act() {
            // The lease keeper renews it or steps down; until then the takeover waits (a
            // follower's look tries it again).
            tracing::warn!(
                epoch,
                "the lease's deadline passed before the engine could take over; waiting for the next renewal"
            );
            r.pending = Some(epoch);
            return;
        }
        // A follower's engine still being built is not wanted any more.
        r.building = None;
        let built = r.build_now(Some(epoch));
        let engine = match built {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(epoch, error = %e, "taking over as the leader failed; trying again");
                r.pending = Some(epoch);
                return;
            }
        };
        r.pending = None;
        r.leading = Some(epoch);
        self.replace_engine(engine);
        self.lifecycle = Lifecycle::new(policy(self.clock.scale()));
        let last = self.engine.stored().last_event_seq().unwrap_or(0);
        self.announce(last);
        match self.recover() {
            Ok(n) => tracing::info!(
                epoch,
                operations_in_flight = n,
                "leading: the engine is running"
            ),
            Err(e) => tracing::error!(epoch, error = %e, "recovering the operations in flight"),
        }
        if let Some(mut f) = self.replica.as_mut().and_then(|r| r.on_lead.take()) {
            f(self, epoch);
            if let Some(r) = self.replica.as_mut() {
                r.on_lead = Some(f);
            }
        }
    }

    /// The lease keeper says this replica does not lead any more (it stopped acting already):
    /// the leader's engine goes, everything it followed is forgotten (the next leader asks
    /// about it), and a follower's engine over the database takes its place.
    pub fn follow_leader(&mut self) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        r.leading = None;
        r.pending = None;
        r.looked = None;
        r.building = None;
        r.seen = (u64::MAX, u64::MAX);
        self.lifecycle = Lifecycle::new(policy(self.clock.scale()));
        self.upgrade_started.clear();
        self.measurements.in_flight.clear();
        self.follower_look();
    }

    /// A follower looks at the leader's database (every [`FOLLOW_EVERY`]): when the journal
    /// or the event log moved, its engine is built again from it, and the live streams hear
    /// of the new events.
    fn follower_look(&mut self) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if r.leading.is_some() {
            // Leading, but past its deadline: nothing is done until the step-down.
            return;
        }
        if r.looked.is_some_and(|t| t.elapsed() < FOLLOW_EVERY) {
            return;
        }
        r.looked = Some(Instant::now());
        if let Some(epoch) = r.pending.filter(|_| r.deadline.may_act()) {
            return self.lead(epoch);
        }
        let store = self.engine.stored();
        let ends = match (store.last_journal_seq(), store.last_event_seq()) {
            (Ok(j), Ok(e)) => (j, e),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "reading the leader's progress");
                return;
            }
        };
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if !self.engine.is_follower() {
            // Just stepped down: the leader's engine goes at once, built here.
            match r.build_now(None) {
                Ok(mut engine) => {
                    engine.make_follower();
                    r.seen = ends;
                    self.replace_engine(engine);
                    self.announce(ends.1);
                }
                Err(e) => tracing::warn!(error = %e, "following the leader's database"),
            }
            return;
        }
        // A new view is built off this thread; reads are served from this one meanwhile.
        if r.building.is_none() && ends != r.seen {
            r.builds += 1;
            let number = r.builds;
            r.building = Some(number);
            let build = r.build.clone();
            let tx = self.tx.clone();
            let spawned = std::thread::Builder::new()
                .name("waverun-follow".to_string())
                .spawn(move || {
                    let built = build(None);
                    let _ = tx.send(Msg::Run(Box::new(move |w: &mut Worker| {
                        w.follower_built(number, ends, built)
                    })));
                });
            if let Err(e) = spawned {
                r.building = None;
                tracing::warn!(error = %e, "a thread to follow the leader's database");
            }
        }
    }

    /// A follower's engine built off the engine thread ([`Worker::follower_look`]) takes the
    /// place of the one that served meanwhile — unless another was asked for since, or this
    /// replica leads now.
    fn follower_built(
        &mut self,
        number: u64,
        at: (u64, u64),
        built: Result<FleetEngine, DaemonError>,
    ) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if r.building != Some(number) || r.leading.is_some() {
            return;
        }
        r.building = None;
        match built {
            Ok(mut engine) => {
                engine.make_follower();
                r.seen = at;
                self.replace_engine(engine);
                self.announce(at.1);
            }
            Err(e) => tracing::warn!(error = %e, "following the leader's database"),
        }
    }

    fn replace_engine(&mut self, mut engine: FleetEngine) {
        engine.carry_over(&self.engine);
        self.engine = engine;
    }

    /// The event log ends at `last` (never moving back): live streams and the webhook driver
    /// are told.
    fn announce(&mut self, last: u64) {
        if last > *self.events.borrow() {
            self.events.send_replace(last);
        }
        if let Some(tx) = &self.webhooks {
            let _ = tx.send(crate::webhooks::driver::DriverMsg::Logged(last));
        }
    }

    /// After a start or a takeover: every operation the store has not seen finish is asked
    /// about first, the measurements the engine awaits are taken, and runs whose deletion was
    /// asked for and that stopped meanwhile go. Returns how many operations were in flight.
    fn recover(&mut self) -> Result<usize, DaemonError> {
        let unfinished = self.engine.unfinished_operations()?;
        for op in &unfinished {
            self.follow(op, true);
        }
        self.start_unsent_checks();
        self.drive();
        let asked = self.engine.stored().resources(RUNS).unwrap_or_default();
        self.delete_requested_runs(asked.into_iter().map(|m| m.name).collect());
        Ok(unfinished.len())
    }

    fn dispatch(&mut self, applied: &Applied) {
        if let Some(last) = applied.events.last() {
            self.events.send_replace(last.seq);
            if let Some(tx) = &self.webhooks {
                // Never blocks: the driver reads the log at its own pace.
                let _ = tx.send(crate::webhooks::driver::DriverMsg::Logged(last.seq));
            }
        }
        for p in &applied.events {
            self.measure(&p.event);
        }
        let ended: BTreeSet<String> = applied
            .events
            .iter()
            .filter(|p| {
                matches!(
                    p.event.kind(),
                    EventKind::RunStopped
                        | EventKind::RunCompleted
                        | EventKind::RunFailed
                        | EventKind::RunSkipped
                )
            })
            .map(|p| p.event.run.clone())
            .collect();
        if !ended.is_empty() {
            self.delete_requested_runs(ended);
        }
        for op in &applied.operations {
            self.follow(op, false);
        }
        for req in &applied.checks {
            self.start_check(req.clone());
        }
        self.drive();
    }

    /// Deletes those of `runs` whose deletion was asked for while they ran
    /// ([`DELETE_REQUESTED`]) and that have ended: each in a step of its own, audited as the
    /// request that asked for it.
    fn delete_requested_runs(&mut self, runs: BTreeSet<String>) {
        for name in runs {
            let meta = match self.engine.stored().resource(RUNS, &name) {
                Ok(Some(m)) => m,
                _ => continue,
            };
            let body: serde_json::Value = meta
                .body
                .as_deref()
                .and_then(|b| serde_json::from_str(b).ok())
                .unwrap_or_default();
            let asked = &body[DELETE_REQUESTED];
            if !asked.is_object() {
                continue;
            }
            let ended = match self.engine.status_outline(&name) {
                Ok(s) => matches!(
                    s.status.state,
                    waverun_core::State::Stopped
                        | waverun_core::State::Completed
                        | waverun_core::State::Failed
                        | waverun_core::State::Skipped
                ),
                Err(_) => false,
            };
            if !ended {
                continue;
            }
            let text = |k: &str| asked[k].as_str().unwrap_or_default().to_string();
            let entry = crate::store::NewAudit {
                at: crate::now_rfc3339(),
                who: text("by"),
                action: "updateRuns.delete".to_string(),
                target: text("target"),
                request_id: text("requestId"),
                key: format!("delete-after-stop:{name}:{}", meta.last_modified_at),
                outcome: "ok".to_string(),
                detail: Some("deleted once stopped, as asked while it ran".to_string()),
            };
            let writes = StepWrites {
                audit: Some(entry),
                deleted_resources: vec![(RUNS.to_string(), name.clone())],
                ..StepWrites::default()
            };
            let command = waverun_core::Command::DeleteRun { name: name.clone() };
            match self.command_step(&command, writes) {
                Ok(_) => tracing::info!(run = %name, "deleted once stopped, as asked"),
                Err(e) => tracing::error!(run = %name, error = %e, "deleting a stopped run failed"),
            }
        }
    }

    /// Starts one measurement on the checks' runtime, unless it is being taken already. Its
    /// result comes back as [`Msg::Measured`].
    fn start_check(&mut self, req: CheckRequest) {
        if !self
            .measurements
            .in_flight
            .insert(req.measurement_id.clone())
        {
            tracing::debug!(measurement_id = %req.measurement_id, "already being measured");
            return;
        }
        let Some(rt) = self.measurements.runtime.as_ref() else {
            return;
        };
        let tx = self.tx.clone();
        let id = req.measurement_id.clone();
        tracing::debug!(measurement_id = %id, check = %req.check.name, purpose = ?req.purpose, "measuring");
        // The verdict is the engine's judgement, filled in when the measurement ends.
        let check = req.check.clone();
        let mut labels = MeasurementLabels {
            check: req.check.name.clone(),
            source: req.check.source().to_string(),
            purpose: format!("{:?}", req.purpose),
            verdict: String::new(),
        };
        let started = Instant::now();
        if health::answered_by_provider(&req.check) {
            let providers = self.providers.clone();
            let default = self.measurements.default_provider.clone();
            let timeout = Duration::from_secs(req.check.timeout().max(1));
            rt.spawn(async move {
                let work = tokio::task::spawn_blocking(move || {
                    provider_measure(&providers, &default, &req, timeout)
                });
                let measurement = match tokio::time::timeout(timeout + health::MARGIN, work).await {
                    Ok(Ok(m)) => m,
                    Ok(Err(e)) => measurement_error(format!("the provider's check failed: {e}")),
                    Err(_) => measurement_error(format!(
                        "no answer from the provider within the check's timeout ({} s)",
                        timeout.as_secs()
                    )),
                };
                let took = started.elapsed();
                labels.verdict = format!("{:?}", check.judge(&measurement).verdict);
                let _ = tx.send(Msg::Measured {
                    id,
                    measurement,
                    labels,
                    took,
                });
            });
        } else {
            let checker = self.measurements.checker.clone();
            rt.spawn(async move {
                let measurement = checker.measure(&req).await;
                let took = started.elapsed();
                labels.verdict = format!("{:?}", check.judge(&measurement).verdict);
                let _ = tx.send(Msg::Measured {
                    id,
                    measurement,
                    labels,
                    took,
                });
            });
        }
    }

    /// Measurements of steps whose [`Applied`] went nowhere (an input the engine refused after
    /// its timers fired, a step that did not commit, a recovery): started now, so a check never
    /// waits for the next step to be measured.
    fn start_unsent_checks(&mut self) {
        let checks = self.engine.take_checks();
        if !self.acting() {
            return;
        }
        for req in checks {
            self.start_check(req);
        }
    }

    fn on_measured(
        &mut self,
        id: String,
        m: Measurement,
        labels: MeasurementLabels,
        took: Duration,
    ) {
        self.measurements.in_flight.remove(&id);
        tracing::debug!(measurement_id = %id, verdict = ?m.verdict, took_ms = took.as_millis() as u64, "measured");
        self.engine.metrics().measured(labels, took);
        self.deliver(Observation::CheckMeasured {
            measurement_id: id,
            values: m.values,
            verdict: m.verdict,
            message: m.message,
        });
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

    /// Hands a stored operation to the lifecycle: submitted (a step just committed it) or
    /// resumed (after a start). One that cannot be carried out at all fails at once.
    fn follow(&mut self, op: &OperationRow, resume: bool) {
        let now = self.clock.now_ms();
        let tracked = match tracked(op) {
            Ok(t) if self.providers.contains_key(&t.provider) => t,
            Ok(t) => {
                let why = format!("no provider named {:?} is configured", t.provider);
                return self.deliver(Observation::UpgradeFailed {
                    operation_id: op.id.clone(),
                    message: why,
                });
            }
            Err(why) => {
                return self.deliver(Observation::UpgradeFailed {
                    operation_id: op.id.clone(),
                    message: why,
                })
            }
        };
        if resume {
            self.lifecycle.resume(tracked, now)
        } else {
            self.lifecycle.submit(tracked, now)
        }
    }

    /// After a commit that failed, the store is what counts: a step written despite the
    /// error (its acknowledgement lost) holds operations nobody sends. Every operation it holds
    /// unfinished that is not followed yet is asked about and followed, as after a restart
    /// (found at its provider → adopted; not found → sent once).
    fn adopt_unconfirmed(&mut self) {
        if !self.engine.take_unconfirmed() || !self.acting() {
            return;
        }
        match self.engine.unfinished_operations() {
            Ok(ops) => {
                for op in &ops {
                    self.follow(op, true);
                }
                self.drive();
            }
            Err(e) => {
                tracing::error!(error = %e, "reading the operations in flight after a failed commit");
            }
        }
    }

    /// Carries out the lifecycle's actions, until it has none.
    fn drive(&mut self) {
        while let Some(action) = self.lifecycle.poll_action() {
            match action {
                Action::Start { id, to, request } => self.spawn_call(&to.provider, move |p, tx| {
                    let result = p.start_upgrade(&to.target, &request);
                    let _ = tx.send(Msg::Started { id, result });
                }),
                Action::Poll {
                    id,
                    to,
                    provider_operation_id,
                    request,
                } => self.spawn_call(&to.provider, move |p, tx| {
                    let result =
                        p.get_operation_for(&to.target, &request, provider_operation_id.as_deref());
                    let _ = tx.send(Msg::Polled { id, result });
                }),
                Action::Describe { id, to } => self.spawn_call(&to.provider, move |p, tx| {
                    let result = p.describe(&to.target).map(Box::new);
                    let _ = tx.send(Msg::Described { id, result });
                }),
                Action::Refresh { member, to } => self.spawn_call(&to.provider, move |p, tx| {
                    let result = p.describe(&to.target).map(Box::new);
                    let _ = tx.send(Msg::Refreshed { member, result });
                }),
                Action::Observe { member, described } => self.observe(&member, &described),
                Action::Record(update) => self.record(update),
                Action::Succeeded { id } => {
                    self.deliver(Observation::UpgradeSucceeded { operation_id: id })
                }
                Action::Failed { id, message } => self.deliver(Observation::UpgradeFailed {
                    operation_id: id,
                    message,
                }),
            }
        }
        self.waits_version
            .store(self.lifecycle.waits_version(), Ordering::SeqCst);
    }

    /// Runs `call` with the provider named `provider` on a thread of its own. (The lifecycle
    /// only follows operations whose provider is configured.)
    fn spawn_call(
        &self,
        provider: &str,
        call: impl FnOnce(&dyn Provider, Sender<Msg>) + Send + 'static,
    ) {
        let Some(p) = self.providers.get(provider).cloned() else {
            tracing::error!(provider, "no such provider: the call is not made");
            return;
        };
        let tx = self.tx.clone();
        let deadline = self.replica.as_ref().map(|r| r.deadline.clone());
        std::thread::spawn(move || {
            // Checked just before the call: a process paused since the call was decided
            // finds its deadline passed, and leaves it to the next leader.
            if deadline.is_some_and(|d| !d.may_act()) {
                tracing::warn!("a provider call was not made: this replica no longer leads");
                return;
            }
            call(p.as_ref(), tx)
        });
    }

    fn deliver(&mut self, observation: Observation) {
        match self.engine.deliver(&observation) {
            Ok(applied) => self.dispatch(&applied),
            Err(e) => {
                tracing::warn!(error = %e, ?observation, "the engine refused a provider result")
            }
        }
    }

    fn record(&mut self, update: OperationUpdate) {
        if let Err(e) = self.engine.record_sent(&[update]) {
            tracing::error!(error = %e, "recording an operation's state failed");
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

    fn on_refreshed(&mut self, member: String, result: Result<Box<Described>, ProviderError>) {
        match result {
            Ok(d) => self.observe(&member, &d),
            // The periodic observation tries again.
            Err(e) => {
                tracing::debug!(member, error = %e, "describing a member after its upgrade failed")
            }
        }
    }

    /// A message from a provider call: the lifecycle's input, then its actions.
    fn on_answer(&mut self, msg: Msg) {
        if !self.acting() {
            // An answer to a leader this replica no longer is: the next leader asks again.
            if let Msg::Measured { id, .. } = &msg {
                self.measurements.in_flight.remove(id);
            }
            return;
        }
        let now = self.clock.now_ms();
        match msg {
            Msg::Started { id, result } => self.lifecycle.started(&id, result, now),
            Msg::Polled { id, result } => self.lifecycle.polled(&id, result, now),
            Msg::Described { id, result } => self.lifecycle.described(&id, result, now),
            Msg::Refreshed { member, result } => self.on_refreshed(member, result),
            Msg::Measured {
                id,
                measurement,
                labels,
                took,
            } => self.on_measured(id, measurement, labels, took),
            Msg::Run(_) | Msg::Shutdown | Msg::Abandon => {}
        }
        self.drive();
    }

    /// Fires the engine's timers if due, and the lifecycle's.
    fn tick(&mut self) {
        if !self.acting() {
            return self.follower_look();
        }
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
        if self
            .lifecycle
            .poll_timeout()
            .is_some_and(|at| at <= self.clock.now_ms())
        {
            self.lifecycle.handle_timeout(self.clock.now_ms());
            self.drive();
        }
    }

    /// How long to sleep: until the engine's next wakeup or the lifecycle's next timer.
    fn sleep(&mut self) -> Duration {
        if !self.acting() {
            return FOLLOW_EVERY;
        }
        let engine = match self.engine.next_wakeup() {
            Ok(Some(at)) => self.clock.real_until(at.timestamp_millis()),
            _ => MAX_SLEEP,
        };
        let timer = self
            .lifecycle
            .poll_timeout()
            .map_or(MAX_SLEEP, |at| self.clock.real_until(at));
        engine.min(timer).min(MAX_SLEEP)
    }
}

fn measurement_error(message: String) -> Measurement {
    crate::providers::measurement_error(message)
}

/// A provider check (`provider: {}`) of every member of `req`, through each member's provider
/// (blocking): a pre-flight asks [`Provider::preflight`], any other [`Provider::health`]. Over
/// several members (a gate), the worst verdict wins (`Fail`, then `Error`, then
/// `Inconclusive`), with the message of the first member that gave it.
fn provider_measure(
    providers: &Providers,
    default: &str,
    req: &CheckRequest,
    timeout: Duration,
) -> Measurement {
    if req.members.is_empty() {
        return measurement_error("the check is about no member".to_string());
    }
    let rank = |v: Option<Verdict>| match v {
        Some(Verdict::Fail) => 3,
        Some(Verdict::Error) | None => 2,
        Some(Verdict::Inconclusive) => 1,
        Some(Verdict::Pass) => 0,
    };
    let mut worst: Option<Measurement> = None;
    for m in &req.members {
        let name = m.provider.as_ref().map_or(default, |p| p.name.as_str());
        let target = ClusterTarget {
            member: m.name.clone(),
            cluster_ref: m.provider.as_ref().and_then(|p| p.id.clone()),
            region: Some(m.region.clone()),
        };
        let measured = match providers.get(name) {
            None => measurement_error(format!(
                "{}: no provider named {name:?} is configured",
                m.name
            )),
            Some(p) if req.purpose == CheckPurpose::Preflight => {
                p.preflight(&target, req.upgrade.as_ref(), timeout)
            }
            Some(p) => p.health(&target, timeout),
        };
        if worst
            .as_ref()
            .is_none_or(|w| rank(measured.verdict) > rank(w.verdict))
        {
            worst = Some(measured);
        }
    }
    worst.expect("at least one member")
}

/// A stored operation as the lifecycle follows it.
fn tracked(op: &OperationRow) -> Result<Tracked, String> {
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
    Ok(Tracked {
        id: op.id.clone(),
        member: op.member.clone(),
        provider: op.provider.clone(),
        target,
        request,
        state: op.state,
        provider_operation_id: op.provider_operation_id.clone(),
    })
}

/// The lifecycle's policy for a fleet clock at `scale`: a refused call waits at least
/// [`MIN_REAL_RETRY`] in real time; the jitter's seed differs from one start to the next.
fn policy(scale: f64) -> Policy {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()).rotate_left(32);
    Policy {
        min_retry_ms: (MIN_REAL_RETRY.as_secs_f64() * 1000.0 * scale).ceil() as i64,
        seed,
        ..Policy::default()
    }
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
    /// finish is asked about first, then the loop runs. Health checks are measured with the
    /// default configuration ([`Measurements::unconfigured`]).
    pub fn spawn(engine: FleetEngine, clock: FleetClock, providers: Providers) -> Daemon {
        let measurements = Measurements::unconfigured().expect("a runtime for health checks");
        Daemon::spawn_with(engine, clock, providers, measurements)
    }

    /// [`Daemon::spawn`], health checks measured by `measurements`. The measurements the
    /// engine's start submitted again are taken first.
    pub fn spawn_with(
        engine: FleetEngine,
        clock: FleetClock,
        providers: Providers,
        measurements: Measurements,
    ) -> Daemon {
        Daemon::spawn_replica(engine, clock, providers, measurements, None)
    }

    /// [`Daemon::spawn_with`] for one of several replicas: it starts as a follower over
    /// `engine` (a follower's) and leads when the lease keeper says so ([`Worker::lead`]).
    /// `None`: the only process on its store.
    pub fn spawn_replica(
        engine: FleetEngine,
        clock: FleetClock,
        providers: Providers,
        measurements: Measurements,
        replica: Option<Replica>,
    ) -> Daemon {
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
                    lifecycle: Lifecycle::new(policy(clock.scale())),
                    engine,
                    clock,
                    providers,
                    tx: worker_tx,
                    upgrade_started: BTreeMap::new(),
                    waits_version: worker_waits_version,
                    events,
                    measurements,
                    webhooks: None,
                    replica,
                };
                if w.acting() {
                    w.recover()?;
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

    /// Runs `f` on the engine thread, without waiting for it.
    pub fn post(&self, f: impl FnOnce(&mut Worker) + Send + 'static) -> Result<(), Gone> {
        self.tx.send(Msg::Run(Box::new(f))).map_err(|_| Gone)
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

    /// Where the webhook driver's writes go: the store's one writer, on the engine thread,
    /// without the driver waiting for them.
    pub fn webhook_writes(&self) -> crate::webhooks::driver::Writes {
        let tx = self.tx.clone();
        Box::new(move |writes| {
            let job: Job = Box::new(move |w| {
                if let Err(e) = w.engine().store().record_webhooks(&writes) {
                    tracing::error!(error = %e, "storing the webhooks' cursors and logs");
                }
            });
            let _ = tx.send(Msg::Run(job));
        })
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
        w.adopt_unconfirmed();
        w.start_unsent_checks();
        let msg = match rx.recv_timeout(w.sleep()) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => Msg::Shutdown,
        };
        match msg {
            Msg::Run(job) => job(&mut w),
            Msg::Shutdown => return w.engine.shutdown(),
            Msg::Abandon => return Ok(()),
            answer => w.on_answer(answer),
        }
        w.adopt_unconfirmed();
        w.start_unsent_checks();
    }
}
