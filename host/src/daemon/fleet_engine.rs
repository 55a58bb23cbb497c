//! [`FleetEngine`]: the plugin instance and the store writer of one fleet, and the step rule
//! between them — journal, apply, commit, then send.

use super::metrics::Metrics;
use super::step::{Outbox, Pending, PendingChecks, SharedReader, StepJournal};
use crate::clock::Clock;
use crate::runtime::host::PluginHost;
use crate::runtime::{InitReport, InstanceConfig, PluginError, PluginInstance, PluginModule};
use crate::store::{
    NewAudit, NewEvent, OperationRow, OperationState, OperationUpdate, ResourceMeta, Step, Store,
    StoreError,
};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use waverun_core::{CheckRequest, Command, Event, NodeTally, Observation, RunStatus, Timestamp};

/// Why a step did not happen.
#[derive(Debug)]
pub enum DaemonError {
    /// The engine refused the input (a guest error: its code, message and field).
    Refused(Box<PluginError>),
    /// The plugin failed (a trap it could not recover from, a broken module).
    Plugin(Box<PluginError>),
    /// The store failed; nothing of the step was kept, and the engine was rebuilt from the
    /// store.
    Store(StoreError),
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DaemonError::Refused(e) | DaemonError::Plugin(e) => e.fmt(f),
            DaemonError::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DaemonError {}

impl DaemonError {
    fn plugin(e: PluginError) -> DaemonError {
        DaemonError::Plugin(Box::new(e))
    }
    fn refused(e: PluginError) -> DaemonError {
        DaemonError::Refused(Box::new(e))
    }
}

impl From<StoreError> for DaemonError {
    fn from(e: StoreError) -> DaemonError {
        DaemonError::Store(e)
    }
}

/// An event as committed: its sequence number in the event log (the SSE id) and the event.
#[derive(Clone, Debug, PartialEq)]
pub struct CommittedEvent {
    /// The event log's sequence number.
    pub seq: u64,
    /// The event.
    pub event: Event,
}

/// What a committed step gave: its events, numbered, the operations to send now (recorded
/// as `intent`, not sent before) and the measurements to take now.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// The step's events, with their sequence numbers.
    pub events: Vec<CommittedEvent>,
    /// Operations to hand to their providers.
    pub operations: Vec<OperationRow>,
    /// Measurements the engine asked for (a repeated id is the same measurement).
    pub checks: Vec<CheckRequest>,
}

/// What the API writes in a command's step beside the engine's input.
#[derive(Clone, Debug, Default)]
pub struct StepWrites {
    /// The request's audit entry (its outcome is set to the refusal's code if refused).
    pub audit: Option<NewAudit>,
    /// Resource metadata written.
    pub resources: Vec<ResourceMeta>,
    /// Resources deleted: (kind, name).
    pub deleted_resources: Vec<(String, String)>,
}

/// One fleet's engine: the plugin in wasmtime over the fleet's store (any [`Store`] backend).
pub struct FleetEngine {
    instance: PluginInstance,
    store: Box<dyn Store>,
    pending: Pending,
    /// Measurements submitted during the current call.
    checks: PendingChecks,
    /// Measurements submitted in a step whose answer went nowhere (the start, a recovery, a
    /// refused input): they go out with the next step's, or through [`FleetEngine::take_checks`].
    unsent_checks: Vec<CheckRequest>,
    recoveries: u32,
    /// A commit failed since the worker last looked: it may have been written all the same
    /// (its acknowledgement lost — a network database, a timeout), with operations in it.
    unconfirmed: bool,
    /// Fault injection (crash tests): the guest traps after every this many steps.
    trap_every: Option<u64>,
    steps: u64,
    /// Operations a recovery committed (the guest submitted them again after its replay): they
    /// go out with the next step's.
    recovered: Vec<String>,
    metrics: Arc<Metrics>,
    /// Moves on with every committed step (and every rebuild): what the API's caches key on.
    version: Arc<AtomicU64>,
    /// Events of an input whose step trapped after journaling it, from the replay: they go in
    /// the next commit.
    replayed_events: Vec<Event>,
    /// The module's SHA-256, recorded for every run it executes.
    module_hash: String,
    /// Runs whose [`crate::store::RunModule`] row for this module is known to be written.
    stamped: std::collections::BTreeSet<String>,
    /// A follower's engine ([`FleetEngine::make_follower`]): it answers reads, and refuses
    /// every input.
    follower: bool,
}

/// The resource kind of update runs.
const RUNS: &str = "updateRuns";

/// The stored properties of a generated run: the fields of its spec the API shows.
fn generated_run_body(spec: &serde_json::Value) -> serde_json::Value {
    let mut body = serde_json::json!({ "managedClusterUpdate": spec["managedClusterUpdate"] });
    for key in ["updateStrategyName", "autoUpgradeProfileName"] {
        if let Some(v) = spec.get(key).filter(|v| !v.is_null()) {
            body[key] = v.clone();
        }
    }
    body
}

fn event_row(e: &Event) -> NewEvent {
    NewEvent {
        at_ms: e.at.timestamp_millis(),
        run: e.run.clone(),
        kind: serde_json::to_value(e.kind())
            .ok()
            .and_then(|k| k.as_str().map(str::to_string))
            .unwrap_or_default(),
        data: serde_json::to_string(e).expect("events serialise"),
    }
}

impl FleetEngine {
    /// Starts the fleet's engine: instantiates `module` over `store` (its persistence and its
    /// operations), restores the committed state (snapshot and journal) and commits whatever the
    /// start itself produced.
    pub fn start(
        module: &PluginModule,
        store: impl Store + 'static,
        clock: impl Clock + 'static,
        config: InstanceConfig,
        default_provider: &str,
    ) -> Result<(FleetEngine, Applied), DaemonError> {
        let pending = Pending::default();
        let checks = PendingChecks::default();
        let reader: SharedReader = Arc::new(Mutex::new(store.reader()?));
        let journal = StepJournal::new(pending.clone(), reader.clone(), module.sha256().into());
        let outbox = Outbox::new(
            pending.clone(),
            checks.clone(),
            reader,
            default_provider.to_string(),
        );
        let host = PluginHost::new(clock, outbox, journal);
        let instance = module
            .instantiate(host, config)
            .map_err(DaemonError::plugin)?;
        let mut engine = FleetEngine {
            instance,
            store: Box::new(store),
            pending,
            checks,
            unsent_checks: Vec::new(),
            recoveries: 0,
            unconfirmed: false,
            trap_every: None,
            steps: 0,
            recovered: Vec::new(),
            metrics: Arc::new(Metrics::new()),
            version: Arc::new(AtomicU64::new(0)),
            replayed_events: Vec::new(),
            module_hash: module.sha256().to_string(),
            stamped: Default::default(),
            follower: false,
        };
        let init = engine.instance.init().map_err(DaemonError::plugin)?;
        let mut applied = engine.commit(init.events, None, StepWrites::default())?;
        // The measurements the start submitted again wait for the engine thread
        // ([`FleetEngine::take_checks`]).
        engine.unsent_checks = std::mem::take(&mut applied.checks);
        Ok((engine, applied))
    }

    /// Measurements submitted but not handed out with a step's [`Applied`] (those the start
    /// submitted again after its replay, those of a refused input or of a step that did not
    /// commit): the engine thread takes them when it starts and after every message.
    pub fn take_checks(&mut self) -> Vec<CheckRequest> {
        let mut all = std::mem::take(&mut self.unsent_checks);
        all.extend(self.checks.take());
        all
    }

    /// The state's version: it moves on with every committed step, so anything computed from
    /// the engine at one version is still true while it has not moved.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// A handle on [`FleetEngine::version`] for other threads.
    pub fn version_handle(&self) -> Arc<AtomicU64> {
        self.version.clone()
    }

    /// The daemon's measurements (commit and plugin call latencies, recorded here).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Fault injection for crash tests: from now on, the guest traps right after journaling the
    /// input of every `n`th step (as a crash between journaling and answering would); each is
    /// recovered without losing the input.
    pub fn trap_every(&mut self, n: u64) {
        self.trap_every = Some(n.max(1));
    }

    /// From now on this engine only answers reads: every input and every write is refused as
    /// fenced (a follower's engine, over the leader's database; its start and its replays
    /// write nothing).
    pub fn make_follower(&mut self) {
        self.follower = true;
    }

    /// Whether it is a follower's engine.
    pub fn is_follower(&self) -> bool {
        self.follower
    }

    /// Takes over `old`'s counters (its metrics, and the version other threads read, moved on
    /// by one): the engine that replaces another, after a takeover or a refresh.
    pub fn carry_over(&mut self, old: &FleetEngine) {
        self.metrics = old.metrics.clone();
        self.version = old.version.clone();
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    fn refuse_if_follower(&self) -> Result<(), StoreError> {
        if self.follower {
            return Err(StoreError::Fenced(
                "this replica is a follower: the leader takes every change".to_string(),
            ));
        }
        Ok(())
    }

    /// The store writer (for metadata the API keeps beside the engine).
    pub fn store(&mut self) -> &mut dyn Store {
        self.store.as_mut()
    }

    /// The store, to read.
    pub fn stored(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The instance (status reads, the next wakeup, fault injection in tests).
    pub fn instance(&mut self) -> &mut PluginInstance {
        &mut self.instance
    }

    /// Whether a commit failed since the last call: the store may hold its step (and its
    /// operations) all the same; [`FleetEngine::unfinished_operations`] says what it holds.
    pub fn take_unconfirmed(&mut self) -> bool {
        std::mem::take(&mut self.unconfirmed)
    }

    /// How many times a trapped instance was rebuilt.
    pub fn recoveries(&self) -> u32 {
        self.recoveries
    }

    /// An operator command as one step, with its audit entry.
    pub fn command(
        &mut self,
        command: &Command,
        audit: Option<NewAudit>,
    ) -> Result<Applied, DaemonError> {
        self.command_step(
            command,
            StepWrites {
                audit,
                ..StepWrites::default()
            },
        )
    }

    /// An operator command as one step, with what the API writes beside it (its audit entry,
    /// the resource metadata it changes), all in the step's transaction. A refused command
    /// writes only its audit entry.
    pub fn command_step(
        &mut self,
        command: &Command,
        extras: StepWrites,
    ) -> Result<Applied, DaemonError> {
        let r = self.call("command", |i| i.command(command));
        self.finish_with(r, None, extras)
    }

    /// Several operator commands as one step: each goes to the engine in turn, and their
    /// journal records, events and writes (`writes`: the audit entry and resources of the
    /// whole batch) are committed in one transaction — one commit, one fsync, however many
    /// commands. If the engine refuses one, nothing of the batch is kept: the step is dropped
    /// and the engine rebuilt from the store (as if the batch had never come), and the error
    /// says which command (its index) and why. The one exception is a trap of the module
    /// itself midway (a bug): what the engine journaled before it is committed then, as after
    /// any trap, and the rest of the batch continues.
    pub fn command_batch(
        &mut self,
        commands: &[Command],
        writes: StepWrites,
    ) -> Result<Applied, (Option<usize>, DaemonError)> {
        // The batch's resources wait in the pending step from the start, so that a commit
        // after a trap (which takes the pending step) keeps them with the journal records.
        self.pending.lock().resources.extend(writes.resources);
        let mut events = Vec::new();
        for (i, command) in commands.iter().enumerate() {
            match self.call("command", |inst| inst.command(command)) {
                Ok(e) => {
                    // A trap's replay gave the events of the input it journaled: in order.
                    events.append(&mut self.replayed_events);
                    events.extend(e);
                }
                Err(e) => {
                    return Err(match self.rebuild() {
                        Ok(_) => (Some(i), e),
                        Err(again) => (None, again),
                    });
                }
            }
        }
        let writes = StepWrites {
            audit: writes.audit,
            resources: Vec::new(),
            deleted_resources: writes.deleted_resources,
        };
        self.commit(events, None, writes).map_err(|e| (None, e))
    }

    /// A step with no engine input: an audit entry for a request refused before it reached
    /// the engine (a failed precondition), or metadata alone.
    pub fn record(&mut self, extras: StepWrites) -> Result<(), DaemonError> {
        self.refuse_if_follower()?;
        let step = Step {
            audit: extras.audit.into_iter().collect(),
            resources: extras.resources,
            deleted_resources: extras.deleted_resources,
            ..Step::default()
        };
        self.store.commit(&step)?;
        Ok(())
    }

    /// An observation (an upgrade's result, a member observed) as one step. A result marks its
    /// operation `done` in the same transaction.
    pub fn deliver(&mut self, observation: &Observation) -> Result<Applied, DaemonError> {
        self.deliver_step(observation, StepWrites::default())
    }

    /// An observation with what the daemon writes beside it (a member's observed status), as
    /// one step.
    pub fn deliver_step(
        &mut self,
        observation: &Observation,
        extras: StepWrites,
    ) -> Result<Applied, DaemonError> {
        let done = match observation {
            Observation::UpgradeSucceeded { operation_id }
            | Observation::UpgradeFailed { operation_id, .. } => Some(OperationUpdate {
                id: operation_id.clone(),
                state: OperationState::Done,
                provider_operation_id: None,
                last_error: None,
                attempted: false,
            }),
            _ => None,
        };
        let r = self.call("deliver", |i| i.deliver(observation));
        self.finish_with(r, done, extras)
    }

    /// Time passed: the timers due now fire, as one step.
    pub fn wake(&mut self) -> Result<Applied, DaemonError> {
        let r = self.call("wake", |i| i.wake());
        self.finish_with(r, None, StepWrites::default())
    }

    /// When the engine next needs waking.
    pub fn next_wakeup(&mut self) -> Result<Option<Timestamp>, DaemonError> {
        let w = self.call("nextWakeup", |i| i.next_wakeup_detail())?;
        Ok(w.at)
    }

    /// A run's status tree.
    pub fn status(&mut self, run: &str) -> Result<RunStatus, DaemonError> {
        let status = self.call("status", |i| i.status(run).map(Some))?;
        // Not an input: a trap is retried, never answered by a replay.
        status.ok_or(DaemonError::plugin(PluginError::Poisoned))
    }

    /// A run's status without the members' nodes ([`PluginInstance::status_outline`]): its
    /// state, stages, groups and gates.
    pub fn status_outline(&mut self, run: &str) -> Result<RunStatus, DaemonError> {
        let status = self.call("status", |i| i.status_outline(run).map(Some))?;
        // Not an input: a trap is retried, never answered by a replay.
        status.ok_or(DaemonError::plugin(PluginError::Poisoned))
    }

    /// Each run's nodes counted by state and wait reason (`tallies`), in the runs' order.
    pub fn tallies(&mut self) -> Result<Vec<(String, NodeTally)>, DaemonError> {
        let tallies = self.call("tallies", |i| i.tallies().map(Some))?;
        // Not an input: a trap is retried, never answered by a replay.
        tallies.ok_or(DaemonError::plugin(PluginError::Poisoned))
    }

    /// A read-only request (`plan`, `catalog`, `freezes`, ...): its result.
    pub fn query(&mut self, request: &serde_json::Value) -> Result<serde_json::Value, DaemonError> {
        let answer = self.call("query", |i| i.request(request).map(Some))?;
        // Not an input: a trap is retried, never answered by a replay.
        answer.ok_or(DaemonError::plugin(PluginError::Poisoned))
    }

    /// [`FleetEngine::query`], the answer as the plugin wrote it (an engine state of 10,000
    /// members is about 8 MB: passed on, not parsed into a tree and written again).
    pub fn query_raw(
        &mut self,
        request: &serde_json::Value,
    ) -> Result<Box<serde_json::value::RawValue>, DaemonError> {
        let answer = self.call("query", |i| i.request_raw(request).map(Some))?;
        answer.ok_or(DaemonError::plugin(PluginError::Poisoned))
    }

    /// Marks operations sent (or uncertain) once their provider answered.
    pub fn record_sent(&mut self, updates: &[OperationUpdate]) -> Result<(), DaemonError> {
        Ok(self.store.update_operations(updates)?)
    }

    /// Operations recorded but not known to be finished: after a start, each is asked about
    /// (intent: not sent, or sent just before a crash; sent; uncertain).
    pub fn unfinished_operations(&self) -> Result<Vec<OperationRow>, DaemonError> {
        Ok(self.store.operations_in(&[
            OperationState::Intent,
            OperationState::Sent,
            OperationState::Uncertain,
        ])?)
    }

    /// Closes the store cleanly (the next start skips the integrity check).
    pub fn shutdown(&mut self) -> Result<(), DaemonError> {
        Ok(self.store.close()?)
    }

    /// Runs a guest call; a trap is recovered once. A guest error is a refusal.
    fn call<T: Default>(
        &mut self,
        kind: &'static str,
        mut f: impl FnMut(&mut PluginInstance) -> Result<T, PluginError>,
    ) -> Result<T, DaemonError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            if attempts == 1 && self.trap_every.is_some_and(|n| self.steps % n == n - 1) {
                self.instance.inject_trap_after_next_append();
            }
            let began = std::time::Instant::now();
            let r = f(&mut self.instance);
            self.metrics.plugin_call(kind, began.elapsed());
            let journaled = match &r {
                Ok(_) => return r.map_err(DaemonError::plugin),
                Err(PluginError::Guest(_)) => return r.map_err(DaemonError::refused),
                Err(PluginError::Trap(t)) => t.journaled,
                Err(PluginError::Poisoned) => false,
                Err(_) => return r.map_err(DaemonError::plugin),
            };
            if attempts > 1 {
                return r.map_err(DaemonError::plugin);
            }
            // What the guest appended before the trap was confirmed durable: keep it, then
            // rebuild the instance from the store (the replay applies it).
            let kept = self.pending.take();
            let ids = kept.operations.iter().map(|o| o.id.clone());
            let ids: Vec<String> = ids.collect();
            self.store.commit(&kept)?;
            self.recovered.extend(ids);
            let report = self.rebuild()?;
            if journaled {
                // The input's step never committed its events: the replay's are recorded with
                // the next commit (the one that answers this call).
                self.replayed_events = report.last_record_events;
            }
            if journaled {
                return Ok(T::default());
            }
        }
    }

    /// Rebuilds the instance from the committed state.
    fn rebuild(&mut self) -> Result<InitReport, DaemonError> {
        self.recoveries += 1;
        self.version.fetch_add(1, Ordering::SeqCst);
        self.pending.take();
        // The fresh instance submits every measurement it awaits again.
        self.checks.take();
        self.unsent_checks.clear();
        let report = self.instance.recover().map_err(DaemonError::plugin)?;
        let again = self.checks.take();
        self.unsent_checks.extend(again);
        let kept = self.pending.take();
        let extra = report.events.iter().map(event_row).collect();
        let ids = kept.operations.iter().map(|o| o.id.clone());
        let ids: Vec<String> = ids.collect();
        self.store.commit(&Step {
            events: extra,
            ..kept
        })?;
        self.recovered.extend(ids);
        Ok(report)
    }

    fn finish_with(
        &mut self,
        result: Result<Vec<Event>, DaemonError>,
        done: Option<OperationUpdate>,
        extras: StepWrites,
    ) -> Result<Applied, DaemonError> {
        match result {
            Ok(events) => self.commit(events, done, extras),
            Err(DaemonError::Refused(e)) => match *e {
                PluginError::Guest(mut g) => {
                    // A refused input can still have fired timers (journaled, with events).
                    let events = std::mem::take(&mut g.events);
                    let audit = extras.audit.map(|mut a| {
                        a.outcome = g.code.clone();
                        a.detail = Some(g.message.clone());
                        a
                    });
                    let extras = StepWrites {
                        audit,
                        ..StepWrites::default()
                    };
                    let applied = self.commit(events, None, extras)?;
                    self.unsent_checks.extend(applied.checks);
                    Err(DaemonError::refused(PluginError::Guest(g)))
                }
                other => {
                    self.pending.take();
                    self.keep_checks();
                    Err(DaemonError::refused(other))
                }
            },
            Err(e) => {
                self.pending.take();
                self.keep_checks();
                Err(e)
            }
        }
    }

    /// Keeps the measurements of a call whose step did not commit: a measurement the engine no
    /// longer awaits is ignored when its result comes, so sending one too many is harmless,
    /// and losing one would leave a check waiting.
    fn keep_checks(&mut self) {
        let kept = self.checks.take();
        self.unsent_checks.extend(kept);
    }

    /// Records in `step` which runs this module executes: the first step of each run in this
    /// process that does more than create, change or delete it; a deleted run's record goes.
    fn stamp_runs(&self, events: &[Event], step: &mut Step) {
        use waverun_core::EventKind as K;
        for e in events {
            match e.kind() {
                K::RunDeleted => step.deleted_runs.push(e.run.clone()),
                K::RunCreated | K::RunUpdated | K::ActionRejected => {}
                _ if self.stamped.contains(&e.run)
                    || step.run_modules.iter().any(|m| m.run == e.run) => {}
                _ => step.run_modules.push(crate::store::RunModule {
                    run: e.run.clone(),
                    module_hash: self.module_hash.clone(),
                    first_step_ms: e.at.timestamp_millis(),
                }),
            }
        }
    }

    /// Gives the runs an auto-upgrade profile generated in this step their resource, so the API
    /// lists and shows them like any run, in the same transaction; a generated run the engine
    /// deleted (superseded by a newer target) loses it. Its stored properties are the run as
    /// the engine created it: `managedClusterUpdate`, `updateStrategyName` and
    /// `autoUpgradeProfileName` (the API shows the last two as ids).
    fn record_generated(&mut self, events: &[Event], step: &mut Step) {
        use waverun_core::EventKind as K;
        for e in events {
            match e.kind() {
                K::RunGenerated => {
                    let known = step
                        .resources
                        .iter()
                        .any(|m| m.kind == RUNS && m.name == e.run)
                        || matches!(self.store.resource(RUNS, &e.run), Ok(Some(_)));
                    if known {
                        continue;
                    }
                    let request = serde_json::json!({ "type": "runSpec", "run": e.run });
                    let body = match self.instance.request(&request) {
                        Ok(spec) => generated_run_body(&spec),
                        Err(err) => {
                            tracing::warn!(run = %e.run, error = %err, "reading a generated run");
                            serde_json::json!({ "autoUpgradeProfileName": e.profile() })
                        }
                    };
                    let by = format!("autoUpgradeProfile:{}", e.profile().unwrap_or_default());
                    let now = crate::now_rfc3339();
                    step.resources.push(ResourceMeta {
                        kind: RUNS.to_string(),
                        name: e.run.clone(),
                        etag: String::new(),
                        created_by: by.clone(),
                        created_at: now.clone(),
                        last_modified_by: by,
                        last_modified_at: now,
                        body: Some(body.to_string()),
                    });
                }
                K::RunDeleted => {
                    let key = (RUNS.to_string(), e.run.clone());
                    if !step.deleted_resources.contains(&key) {
                        step.deleted_resources.push(key);
                    }
                }
                _ => {}
            }
        }
    }

    /// Commits the pending step with these events; on failure, rebuilds the instance so that
    /// its state is the store's again.
    fn commit(
        &mut self,
        events: Vec<Event>,
        done: Option<OperationUpdate>,
        extras: StepWrites,
    ) -> Result<Applied, DaemonError> {
        let mut step = self.pending.take();
        let mut events = events;
        if !self.replayed_events.is_empty() {
            let mut all = std::mem::take(&mut self.replayed_events);
            all.extend(events);
            events = all;
        }
        step.events = events.iter().map(event_row).collect();
        step.operation_updates.extend(done);
        step.audit.extend(extras.audit);
        step.resources.extend(extras.resources);
        step.deleted_resources.extend(extras.deleted_resources);
        self.stamp_runs(&events, &mut step);
        self.record_generated(&events, &mut step);
        let mut new_ids = std::mem::take(&mut self.recovered);
        new_ids.extend(step.operations.iter().map(|o| o.id.clone()));
        let began = std::time::Instant::now();
        let committed = match self.refuse_if_follower() {
            Ok(()) => self.store.commit(&step),
            Err(e) => Err(e),
        };
        self.metrics.committed(began.elapsed());
        match committed {
            Ok(c) => {
                self.stamped
                    .extend(step.run_modules.iter().map(|m| m.run.clone()));
                for run in &step.deleted_runs {
                    self.stamped.remove(run);
                }
                self.steps += 1;
                self.version.fetch_add(1, Ordering::SeqCst);
                let events = events
                    .into_iter()
                    .zip(c.first_event_seq.unwrap_or(0)..)
                    .map(|(event, seq)| CommittedEvent { seq, event })
                    .collect();
                let mut operations = Vec::new();
                for id in new_ids {
                    if let Some(op) = self.store.operation(&id)? {
                        if op.state == OperationState::Intent {
                            operations.push(op);
                        }
                    }
                }
                let mut checks = std::mem::take(&mut self.unsent_checks);
                checks.extend(self.checks.take());
                Ok(Applied {
                    events,
                    operations,
                    checks,
                })
            }
            Err(e) => {
                // Memory ran ahead of the disk: go back to what the store has (which may hold
                // the step after all: the worker looks for its operations).
                self.unconfirmed = true;
                self.rebuild()?;
                Err(DaemonError::Store(e))
            }
        }
    }
}
