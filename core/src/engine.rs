//! The engine: one value owning the fleet (members, strategies, runs, gates, catalog, freezes).
//!
//! Method families, in the order a host uses them:
//! - getters: [`Engine::now`], [`Engine::run_status`], [`Engine::run_state`], [`Engine::member`], ...
//! - input: [`Engine::handle_input`] (commands, observations, timeouts), which first brings the
//!   engine up to `now` by firing every due timer;
//! - output: [`Engine::poll_output`] (drain until `None` after every input) and
//!   [`Engine::poll_timeout`] (the next wakeup).

use crate::catalog::Catalog;
use crate::error::{Error, ErrorCode, Errors};
use crate::event::{
    Event, Fact, HostCommand, Output, Reason, UpgradeOperation, WakeReason, Wakeup,
};
use crate::model::{
    Freeze, GateConfig, GateTiming, GateType, Member, NodeImageSelectionType, NodePool, PoolImage,
    ReleaseCatalog, SkipTarget, Timestamp, UpdateRunSpec, UpdateStrategy, UpgradeType,
};
use crate::plan::{
    self, assign, decide, default_strategy, group_limits, group_name, select_consistent,
    stage_limits, Decision, RunTarget, SkipReason,
};
use crate::state::{
    GateStatus, GroupStatus, MemberStatus, NodeImageSelectionStatus, NodeStatus, RunStatus,
    StageStatus, State, StatusError, WaitStatus, WaitingOn,
};
use crate::validate;
use crate::window::{next_weekly_occurrence, parse_hh_mm, parse_utc_offset, CompiledWindow};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// An input: what a user asks, what the world reports, or that time has passed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::large_enum_variant)] // inputs are transient; boxing would only burden callers
pub enum Input {
    /// An operator / API command.
    Command(Command),
    /// Something observed in the world.
    Observation(Observation),
    /// Time has advanced to `now`; fire due timers.
    Timeout,
}

/// Operator / API commands. Each is validated; a refused command changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "type",
    deny_unknown_fields
)]
#[allow(clippy::large_enum_variant)] // commands are transient; boxing would only burden callers
pub enum Command {
    /// Create or replace a member.
    UpsertMember {
        /// The member.
        member: Member,
    },
    /// Delete a member (refused while a started, unfinished run includes it).
    DeleteMember {
        /// Member name.
        name: String,
    },
    /// Create or replace a stored strategy (existing runs keep their copy).
    UpsertStrategy {
        /// Strategy name.
        name: String,
        /// The strategy.
        strategy: UpdateStrategy,
    },
    /// Delete a stored strategy.
    DeleteStrategy {
        /// Strategy name.
        name: String,
    },
    /// Create a run (not started).
    CreateRun {
        /// The run.
        run: UpdateRunSpec,
    },
    /// Replace a run's spec; only before it starts.
    UpdateRun {
        /// The run.
        run: UpdateRunSpec,
    },
    /// Delete a run (NotStarted, Stopped, Failed, Completed or Skipped).
    DeleteRun {
        /// Run name.
        name: String,
    },
    /// Start a run, or resume a Stopped / Failed one.
    StartRun {
        /// Run name.
        name: String,
    },
    /// Stop a run: no new member upgrades; in-flight ones finish.
    StopRun {
        /// Run name.
        name: String,
    },
    /// Skip members, groups, stages or after-stage waits.
    Skip {
        /// Run name.
        run: String,
        /// Targets; all are checked before any is applied.
        targets: Vec<SkipTarget>,
    },
    /// Complete a Pending gate (approve it, or open a scheduled gate early).
    CompleteGate {
        /// Run name.
        run: String,
        /// Which gate.
        gate: GateSelector,
        /// Who (audit record).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// Create a retry run over the failed / skipped / pending members of a finished run,
    /// pinned to the same resolved versions.
    CreateRetryRun {
        /// New run name.
        name: String,
        /// The finished run.
        from: String,
    },
    /// Replace the fleet freeze calendar.
    SetFreezes {
        /// Dated exclusions.
        freezes: Vec<Freeze>,
    },
    /// Replace the release catalog.
    SetCatalog {
        /// The catalog.
        catalog: ReleaseCatalog,
    },
}

/// Which gate: by id, or by position (the first Pending gate there).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateSelector {
    /// Gate id (wins over position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Stage name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Group name, for group gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Before or After.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<GateTiming>,
}

/// What the world reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "type",
    deny_unknown_fields
)]
pub enum Observation {
    /// A member upgrade operation succeeded.
    UpgradeSucceeded {
        /// The operation.
        operation_id: String,
    },
    /// A member upgrade operation failed.
    UpgradeFailed {
        /// The operation.
        operation_id: String,
        /// What the cluster said.
        message: String,
    },
    /// A member's observed versions.
    MemberObserved {
        /// Member name.
        name: String,
        /// Control-plane version.
        kubernetes_version: String,
        /// Node pools as observed.
        node_pools: Vec<NodePool>,
    },
    /// A Kubernetes version became (or will become) available in a region.
    KubernetesReleased {
        /// Version.
        version: String,
        /// Region (`*` for all).
        region: String,
        /// Since when.
        #[serde(deserialize_with = "crate::time::de_timestamp")]
        since: Timestamp,
    },
    /// A node image became (or will become) available in a region.
    NodeImageReleased {
        /// Version.
        version: String,
        /// Region (`*` for all).
        region: String,
        /// Since when.
        #[serde(deserialize_with = "crate::time::de_timestamp")]
        since: Timestamp,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct MemberLoc {
    run: String,
    stage: u32,
    group: u32,
    member: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct GateLoc {
    stage: u32,
    group: Option<u32>,
    timing: GateTiming,
    index: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Timer {
    Member { loc: MemberLoc, reason: WakeReason },
    Gate { run: String, gate: GateLoc },
    StageWait { run: String, stage: u32 },
    Freeze { run: String },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct MemberRecord {
    spec: Member,
    kubernetes_window: Option<CompiledWindow>,
    node_os_window: Option<CompiledWindow>,
}

impl MemberRecord {
    fn new(spec: Member) -> MemberRecord {
        let kubernetes_window = spec
            .maintenance
            .kubernetes
            .as_ref()
            .and_then(|w| w.compile().ok());
        let node_os_window = spec
            .maintenance
            .node_os
            .as_ref()
            .and_then(|w| w.compile().ok());
        MemberRecord {
            spec,
            kubernetes_window,
            node_os_window,
        }
    }

    fn window(&self, t: UpgradeType) -> Option<&CompiledWindow> {
        match t {
            UpgradeType::NodeImageOnly => self.node_os_window.as_ref(),
            _ => self.kubernetes_window.as_ref(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Phase {
    NotReached,
    Before,
    Body,
    After,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum StopCause {
    User,
    Failure,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct GateRt {
    id: Option<String>,
    config: GateConfig,
    state: State,
    created: Option<Timestamp>,
    completed: Option<Timestamp>,
    by: Option<String>,
    absolute_start: Option<Timestamp>,
}

impl GateRt {
    fn new(config: &GateConfig) -> GateRt {
        GateRt {
            id: None,
            config: config.clone(),
            state: State::NotStarted,
            created: None,
            completed: None,
            by: None,
            absolute_start: None,
        }
    }
    fn done(&self) -> bool {
        matches!(self.state, State::Completed | State::Skipped)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Node {
    state: State,
    start: Option<Timestamp>,
    completed: Option<Timestamp>,
    error: Option<StatusError>,
}

impl Node {
    fn view(&self) -> NodeStatus {
        NodeStatus {
            state: self.state,
            start_time: self.start,
            completed_time: self.completed,
            error: self.error.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct MemberRt {
    name: String,
    node: Node,
    message: Option<String>,
    operation_id: Option<String>,
    kubernetes_version: Option<String>,
    node_images: Vec<PoolImage>,
    /// The last reported wait (dedupes MemberPending events).
    pending: Option<(Reason, Option<Timestamp>)>,
    has_window: bool,
    #[serde(default)]
    skip_reason: Option<SkipReason>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct GroupRt {
    name: String,
    node: Node,
    phase: Phase,
    failure_count: u32,
    accepted_failures: u32,
    failed: bool,
    user_skipped: bool,
    max_concurrency: u32,
    max_allowed_failures: u32,
    in_flight: u32,
    unfinished: u32,
    before_gates: Vec<GateRt>,
    after_gates: Vec<GateRt>,
    members: Vec<MemberRt>,
    /// Startable now, members with a maintenance window (considered first).
    ready_open: BTreeSet<u32>,
    /// Startable now, members without a window.
    ready_free: BTreeSet<u32>,
}

impl GroupRt {
    /// Whether a user skipped the group or any of its members.
    fn skipped_by_user(&self) -> bool {
        self.user_skipped
            || self
                .members
                .iter()
                .any(|m| m.skip_reason == Some(SkipReason::SkippedByUser))
    }

    fn done(&self) -> bool {
        self.in_flight == 0 && (self.phase == Phase::Done || self.failed)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct StageRt {
    name: String,
    node: Node,
    phase: Phase,
    failure_count: u32,
    accepted_failures: u32,
    failed: bool,
    user_skipped: bool,
    max_concurrency: u32,
    max_allowed_failures: u32,
    in_flight: u32,
    before_gates: Vec<GateRt>,
    after_gates: Vec<GateRt>,
    wait: Node,
    wait_seconds: u64,
    wait_until: Option<Timestamp>,
    groups: Vec<GroupRt>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Run {
    spec: UpdateRunSpec,
    strategy: UpdateStrategy,
    target: RunTarget,
    node: Node,
    failure_count: u32,
    accepted_failures: u32,
    stopping: Option<StopCause>,
    in_flight: u32,
    current: usize,
    stages: Vec<StageRt>,
    member_index: BTreeMap<String, (u32, u32, u32)>,
    pending_skips: Vec<SkipTarget>,
    member_filter: Option<BTreeSet<String>>,
    pinned_images: bool,
    retry_of: Option<String>,
    /// Lookups by name and gate id; derived from `stages`, so not part of a snapshot
    /// ([`Engine::restore`] rebuilds it).
    #[serde(skip)]
    index: RunIndex,
}

/// Lookups into a run's tree, kept in step with it: stage and group names, created gates by id,
/// Pending gates. Makes finding a gate (approvals) and a skip target O(log n) in the number of
/// stages and gates, instead of a scan of the whole tree per command.
#[derive(Clone, Debug, Default)]
struct RunIndex {
    /// Stage name → stage indices (one, in a valid strategy), in order.
    stages: BTreeMap<String, Vec<u32>>,
    /// Group name → (stage, group) indices (one, in a valid strategy), in order.
    groups: BTreeMap<String, Vec<(u32, u32)>>,
    /// Gate id → gate, for every created gate (ids are assigned when a gate is created).
    gates: BTreeMap<String, GateLoc>,
    /// Pending gates. `GateLoc`'s order (stage; its own gates before its groups'; Before
    /// before After; index) is the tree order in which positional lookups report.
    pending: BTreeSet<GateLoc>,
    /// The first stage with stage-level gates of any timing, Before, After.
    first_stage_gate: [Option<u32>; 3],
}

impl RunIndex {
    fn build(stages: &[StageRt]) -> RunIndex {
        let mut ix = RunIndex::default();
        for (si, s) in stages.iter().enumerate() {
            let si = si as u32;
            ix.stages.entry(s.name.clone()).or_default().push(si);
            for (k, has) in [
                !s.before_gates.is_empty() || !s.after_gates.is_empty(),
                !s.before_gates.is_empty(),
                !s.after_gates.is_empty(),
            ]
            .into_iter()
            .enumerate()
            {
                if has && ix.first_stage_gate[k].is_none() {
                    ix.first_stage_gate[k] = Some(si);
                }
            }
            for (gi, g) in s.groups.iter().enumerate() {
                ix.groups
                    .entry(g.name.clone())
                    .or_default()
                    .push((si, gi as u32));
            }
            let mut add = |group: Option<u32>, timing: GateTiming, gates: &[GateRt]| {
                for (i, gate) in gates.iter().enumerate() {
                    let loc = GateLoc {
                        stage: si,
                        group,
                        timing,
                        index: i as u32,
                    };
                    if let Some(id) = &gate.id {
                        ix.gates.entry(id.clone()).or_insert_with(|| loc.clone());
                    }
                    if gate.state == State::Pending {
                        ix.pending.insert(loc);
                    }
                }
            };
            add(None, GateTiming::Before, &s.before_gates);
            add(None, GateTiming::After, &s.after_gates);
            for (gi, g) in s.groups.iter().enumerate() {
                add(Some(gi as u32), GateTiming::Before, &g.before_gates);
                add(Some(gi as u32), GateTiming::After, &g.after_gates);
            }
        }
        ix
    }

    /// The first stage (in order) named `name`.
    fn stage(&self, name: &str) -> Option<usize> {
        self.stages
            .get(name)
            .and_then(|v| v.first())
            .map(|s| *s as usize)
    }

    /// The first group (in order) named `name`.
    fn group(&self, name: &str) -> Option<(usize, usize)> {
        self.groups
            .get(name)
            .and_then(|v| v.first())
            .map(|(s, g)| (*s as usize, *g as usize))
    }
}

impl Run {
    fn started(&self) -> bool {
        self.node.state != State::NotStarted
    }
    fn active(&self) -> bool {
        matches!(
            self.node.state,
            State::Running | State::Pending | State::Stopping
        )
    }
}

/// What checking the skip targets of a run not started yet has looked up so far.
#[derive(Default)]
struct SkipNames<'a> {
    /// The members the run would take if started now (None: the preview failed).
    members: Option<Option<BTreeSet<String>>>,
    stages: Option<BTreeSet<&'a str>>,
    groups: Option<BTreeSet<&'a str>>,
}

/// The update-run engine. See the crate docs for the run loop.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Engine {
    now: Timestamp,
    members: BTreeMap<String, MemberRecord>,
    strategies: BTreeMap<String, UpdateStrategy>,
    runs: BTreeMap<String, Run>,
    catalog: Catalog,
    freezes: Vec<Freeze>,
    /// member → run holding it (one upgrade authority).
    leases: BTreeMap<String, String>,
    lease_waiters: BTreeMap<String, BTreeSet<MemberLoc>>,
    catalog_waiters: BTreeSet<MemberLoc>,
    operations: BTreeMap<String, MemberLoc>,
    timers: BTreeSet<(Timestamp, Timer)>,
    outputs: VecDeque<Output>,
}

impl Engine {
    /// An empty engine whose clock starts at `now`.
    pub fn new(now: Timestamp) -> Engine {
        Engine {
            now,
            members: BTreeMap::new(),
            strategies: BTreeMap::new(),
            runs: BTreeMap::new(),
            catalog: Catalog::new(ReleaseCatalog::default()),
            freezes: Vec::new(),
            leases: BTreeMap::new(),
            lease_waiters: BTreeMap::new(),
            catalog_waiters: BTreeSet::new(),
            operations: BTreeMap::new(),
            timers: BTreeSet::new(),
            outputs: VecDeque::new(),
        }
    }

    // ---------------------------------------------------------------- getters

    /// The engine's clock: the latest `now` it was given.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// A member as stored.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.get(name).map(|r| &r.spec)
    }

    /// Every member, by name.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values().map(|r| &r.spec)
    }

    /// A stored strategy.
    pub fn strategy(&self, name: &str) -> Option<&UpdateStrategy> {
        self.strategies.get(name)
    }

    /// Run names.
    pub fn run_names(&self) -> impl Iterator<Item = &str> {
        self.runs.keys().map(String::as_str)
    }

    /// A run's spec.
    pub fn run_spec(&self, name: &str) -> Option<&UpdateRunSpec> {
        self.runs.get(name).map(|r| &r.spec)
    }

    /// A run's state as stored (the status tree derives Pending on top of Running).
    pub fn run_state(&self, name: &str) -> Option<State> {
        self.runs.get(name).map(|r| r.node.state)
    }

    /// Member upgrades in flight in a run.
    pub fn run_in_flight(&self, name: &str) -> Option<u32> {
        self.runs.get(name).map(|r| r.in_flight)
    }

    /// The release catalog.
    pub fn catalog(&self) -> &ReleaseCatalog {
        self.catalog.source()
    }

    /// The freeze calendar.
    pub fn freezes(&self) -> &[Freeze] {
        &self.freezes
    }

    /// Operations in flight: operation id → (run, member).
    pub fn operations_in_flight(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.operations.iter().map(|(op, loc)| {
            let run = &self.runs[&loc.run];
            let m = &run.stages[loc.stage as usize].groups[loc.group as usize].members
                [loc.member as usize];
            (op.as_str(), loc.run.as_str(), m.name.as_str())
        })
    }

    /// How many operations are in flight (O(1)).
    pub fn operations_in_flight_count(&self) -> usize {
        self.operations.len()
    }

    /// Whether the operation `operation_id` is in flight.
    pub fn is_operation_in_flight(&self, operation_id: &str) -> bool {
        self.operations.contains_key(operation_id)
    }

    /// The plan preview of a run: members per stage and group, unassigned members, resolved
    /// limits, gates needing a human, selected Consistent images.
    pub fn plan(&self, run: &str) -> Result<plan::Plan, Error> {
        let r = self.get_run(run)?;
        let members = self.run_members(r);
        plan::plan(&r.spec, &r.strategy, &members, &self.catalog, self.now)
    }

    /// The status tree of a run (for a run not started yet: a preview over the current fleet).
    pub fn run_status(&self, name: &str) -> Result<RunStatus, Error> {
        let run = self.get_run(name)?;
        if !run.started() {
            let mut preview = run.clone();
            let built = self.build_tree(&mut preview, self.now);
            let mut status = self.render(&preview);
            if let Err(e) = built {
                status.status.error = Some(StatusError {
                    code: e.code.to_string(),
                    message: e.message,
                });
            }
            return Ok(status);
        }
        Ok(self.render(run))
    }

    /// The whole engine state as JSON, `{"formatVersion": 1, "engine": {...}}` (see
    /// [`crate::snapshot`]); [`Engine::restore`] gives it back. Take it after draining outputs
    /// (undrained outputs are kept too, so nothing is lost either way).
    pub fn snapshot(&self) -> String {
        crate::snapshot::write(self)
    }

    /// Restores a [`Engine::snapshot`]. A snapshot without a `formatVersion`, or of a version
    /// other than [`crate::snapshot::FORMAT_VERSION`], is refused with `InvalidSnapshot`.
    pub fn restore(snapshot: &str) -> Result<Engine, Error> {
        let mut e: Engine = crate::snapshot::read(snapshot)?;
        e.catalog.ensure_index();
        for run in e.runs.values_mut() {
            run.index = RunIndex::build(&run.stages);
        }
        Ok(e)
    }

    // ---------------------------------------------------------------- outputs

    /// The next output; drain until `None` after every input.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the engine must next be woken with [`Input::Timeout`], and why.
    pub fn poll_timeout(&self) -> Option<Wakeup> {
        self.timers.iter().next().map(|(at, t)| Wakeup {
            at: *at,
            reason: match t {
                Timer::Member { reason, .. } => *reason,
                Timer::Gate { .. } => WakeReason::ScheduledGate,
                Timer::StageWait { .. } => WakeReason::AfterStageWait,
                Timer::Freeze { .. } => WakeReason::FreezeEnds,
            },
            run: match t {
                Timer::Member { loc, .. } => loc.run.clone(),
                Timer::Gate { run, .. } | Timer::StageWait { run, .. } | Timer::Freeze { run } => {
                    run.clone()
                }
            },
        })
    }

    // ---------------------------------------------------------------- input

    /// Handles one input at `now`. Time never goes backwards: an earlier `now` counts as the
    /// engine's current time. Due timers fire first, so the input sees an up-to-date engine.
    /// A refused command returns the error and changes nothing.
    pub fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error> {
        if now > self.now {
            self.now = now;
        }
        self.fire_timers();
        match input {
            Input::Timeout => Ok(()),
            Input::Command(c) => self.handle_command(c),
            Input::Observation(o) => self.handle_observation(o),
        }
    }

    /// Shorthand for `handle_input(now, Input::Timeout)`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let _ = self.handle_input(now, Input::Timeout);
    }

    /// Shorthand for `handle_input(now, Input::Command(command))`.
    pub fn handle_command_at(&mut self, now: Timestamp, command: Command) -> Result<(), Error> {
        self.handle_input(now, Input::Command(command))
    }

    fn fire_timers(&mut self) {
        while let Some(first) = self.timers.iter().next() {
            if first.0 > self.now {
                break;
            }
            let (_, timer) = self.timers.pop_first().expect("non-empty");
            match timer {
                Timer::Member { loc, .. } => {
                    let run = loc.run.clone();
                    let stage = loc.stage;
                    self.requeue(&loc);
                    self.fill_stage(&run, stage as usize);
                }
                Timer::Gate { run, gate } => {
                    let pending = self
                        .runs
                        .get(&run)
                        .and_then(|r| gate_ref(r, &gate))
                        .is_some_and(|g| g.state == State::Pending);
                    if pending {
                        self.complete_gate(&run, &gate, "schedule".to_string());
                    }
                }
                Timer::StageWait { run, stage } => self.end_wait(&run, stage as usize),
                Timer::Freeze { run } => {
                    let Some(r) = self.runs.get_mut(&run) else {
                        continue;
                    };
                    let cur = r.current;
                    let now = self.now;
                    if let Some(stage) = r.stages.get_mut(cur) {
                        for g in &mut stage.groups {
                            for m in &mut g.members {
                                let frozen = m.pending.is_some_and(|(reason, until)| {
                                    reason == Reason::Freeze && until.is_none_or(|u| u <= now)
                                });
                                if m.node.state == State::Pending && frozen {
                                    m.node.state = State::NotStarted;
                                    m.pending = None;
                                    m.message = None;
                                }
                            }
                        }
                    }
                    self.fill_stage(&run, cur);
                }
            }
        }
    }

    fn handle_command(&mut self, c: Command) -> Result<(), Error> {
        match c {
            Command::UpsertMember { member } => self.upsert_member(member),
            Command::DeleteMember { name } => self.delete_member(&name),
            Command::UpsertStrategy { name, strategy } => {
                let mut e = Errors::default();
                validate::check_name("name", &name, &mut e);
                validate::validate_strategy("strategy", &strategy, &mut e);
                e.into_result()?;
                self.strategies.insert(name, strategy);
                Ok(())
            }
            Command::DeleteStrategy { name } => self
                .strategies
                .remove(&name)
                .map(|_| ())
                .ok_or_else(|| not_found("strategy", &name)),
            Command::CreateRun { run } => self.create_run(run, None),
            Command::UpdateRun { run } => self.update_run(run),
            Command::DeleteRun { name } => self.delete_run(&name),
            Command::StartRun { name } => self.start_run(&name),
            Command::StopRun { name } => self.stop_run(&name),
            Command::Skip { run, targets } => self.skip(&run, &targets),
            Command::CompleteGate { run, gate, by } => self.approve(&run, &gate, by),
            Command::CreateRetryRun { name, from } => self.create_retry_run(&name, &from),
            Command::SetFreezes { freezes } => {
                let mut e = Errors::default();
                for (i, f) in freezes.iter().enumerate() {
                    if f.name.trim().is_empty() {
                        e.push(format!("freezes[{i}].name"), "is required");
                    }
                    if f.end <= f.start {
                        e.push(format!("freezes[{i}].end"), "must be after start");
                    }
                }
                e.into_result()?;
                self.freezes = freezes;
                self.freezes
                    .sort_by(|a, b| a.start.cmp(&b.start).then(a.name.cmp(&b.name)));
                self.refill_all();
                Ok(())
            }
            Command::SetCatalog { catalog } => {
                self.catalog = Catalog::new(catalog);
                self.catalog_changed();
                Ok(())
            }
        }
    }

    fn handle_observation(&mut self, o: Observation) -> Result<(), Error> {
        match o {
            Observation::UpgradeSucceeded { operation_id } => {
                self.finish_operation(&operation_id, None);
                Ok(())
            }
            Observation::UpgradeFailed {
                operation_id,
                message,
            } => {
                self.finish_operation(&operation_id, Some(message));
                Ok(())
            }
            Observation::MemberObserved {
                name,
                kubernetes_version,
                node_pools,
            } => {
                let Some(rec) = self.members.get(&name) else {
                    return Err(not_found("member", &name));
                };
                let mut spec = rec.spec.clone();
                spec.kubernetes_version = kubernetes_version;
                spec.node_pools = node_pools;
                validate::member(&spec)?;
                self.members.insert(name, MemberRecord::new(spec));
                Ok(())
            }
            Observation::KubernetesReleased {
                version,
                region,
                since,
            } => {
                crate::version::KubeVersion::parse(&version).map_err(|e| {
                    Error::invalid(vec![crate::error::FieldError::new("version", e)])
                })?;
                self.catalog.add_kubernetes(&version, &region, since);
                self.catalog_changed();
                Ok(())
            }
            Observation::NodeImageReleased {
                version,
                region,
                since,
            } => {
                crate::version::validate_image_version(&version).map_err(|e| {
                    Error::invalid(vec![crate::error::FieldError::new("version", e)])
                })?;
                self.catalog.add_node_image(&version, &region, since);
                self.catalog_changed();
                Ok(())
            }
        }
    }

    // ---------------------------------------------------------------- commands

    fn upsert_member(&mut self, member: Member) -> Result<(), Error> {
        validate::member(&member)?;
        let name = member.name.clone();
        self.members.insert(name.clone(), MemberRecord::new(member));
        // A changed window or region may unblock a waiting member.
        let locs: Vec<MemberLoc> = self
            .runs
            .iter()
            .filter(|(_, r)| r.active())
            .filter_map(|(rn, r)| {
                r.member_index.get(&name).map(|(s, g, m)| MemberLoc {
                    run: rn.clone(),
                    stage: *s,
                    group: *g,
                    member: *m,
                })
            })
            .collect();
        for loc in locs {
            self.requeue(&loc);
            self.fill_stage(&loc.run, loc.stage as usize);
        }
        Ok(())
    }

    fn delete_member(&mut self, name: &str) -> Result<(), Error> {
        if !self.members.contains_key(name) {
            return Err(not_found("member", name));
        }
        for (rn, r) in &self.runs {
            // A Stopped or Failed run can be resumed and would start its waiting members again.
            let may_resume = !matches!(r.node.state, State::Completed | State::Skipped);
            if r.started() && may_resume {
                if let Some((s, g, m)) = r.member_index.get(name) {
                    let st = r.stages[*s as usize].groups[*g as usize].members[*m as usize]
                        .node
                        .state;
                    if !st.is_terminal() {
                        return Err(Error::new(
                            ErrorCode::InvalidState,
                            format!(
                                "member \"{name}\" is part of run \"{rn}\" ({:?}) and is {:?} there; finish, skip it or delete the run first",
                                r.node.state, st
                            ),
                        ));
                    }
                }
            }
        }
        self.members.remove(name);
        Ok(())
    }

    fn create_run(
        &mut self,
        spec: UpdateRunSpec,
        retry: Option<(String, BTreeSet<String>, Vec<String>)>,
    ) -> Result<(), Error> {
        validate::run_spec(&spec)?;
        if self.runs.contains_key(&spec.name) {
            return Err(Error::new(
                ErrorCode::AlreadyExists,
                format!("run \"{}\" already exists", spec.name),
            ));
        }
        let strategy = self.resolve_strategy(&spec)?;
        let mut target = RunTarget::of(&spec);
        let (retry_of, member_filter, pinned) = match retry {
            Some((from, filter, images)) => {
                if !images.is_empty() {
                    target.images = images;
                }
                (Some(from), Some(filter), true)
            }
            None => (None, None, false),
        };
        let name = spec.name.clone();
        let run = Run {
            spec,
            strategy,
            target,
            node: Node::default(),
            failure_count: 0,
            accepted_failures: 0,
            stopping: None,
            in_flight: 0,
            current: 0,
            stages: Vec::new(),
            member_index: BTreeMap::new(),
            pending_skips: Vec::new(),
            member_filter,
            pinned_images: pinned,
            retry_of,
            index: RunIndex::default(),
        };
        self.runs.insert(name.clone(), run);
        self.emit(Event::new(self.now, &name, Fact::RunCreated));
        Ok(())
    }

    fn resolve_strategy(&self, spec: &UpdateRunSpec) -> Result<UpdateStrategy, Error> {
        Ok(match (&spec.strategy, &spec.update_strategy_name) {
            (Some(s), _) => s.clone(),
            (None, Some(n)) => self.strategies.get(n).cloned().ok_or_else(|| {
                let mut e = not_found("strategy", n);
                e.fields.push(crate::error::FieldError::new(
                    "updateStrategyName",
                    format!("no stored strategy is named \"{n}\""),
                ));
                e
            })?,
            (None, None) => default_strategy(),
        })
    }

    fn update_run(&mut self, spec: UpdateRunSpec) -> Result<(), Error> {
        validate::run_spec(&spec)?;
        let run = self.get_run(&spec.name)?;
        if run.started() {
            return Err(invalid_state(
                &spec.name,
                run.node.state,
                "update",
                "a run can be edited only before it starts",
            ));
        }
        let strategy = self.resolve_strategy(&spec)?;
        let run = self.runs.get_mut(&spec.name).expect("checked");
        run.target = RunTarget::of(&spec);
        run.strategy = strategy;
        let name = spec.name.clone();
        run.spec = spec;
        self.emit(Event::new(self.now, &name, Fact::RunUpdated));
        Ok(())
    }

    fn delete_run(&mut self, name: &str) -> Result<(), Error> {
        let run = self.get_run(name)?;
        match run.node.state {
            State::Running | State::Pending => {
                return Err(invalid_state(
                    name,
                    self.shown_state(run),
                    "delete",
                    "stop it first",
                ))
            }
            State::Stopping => {
                return Err(invalid_state(
                    name,
                    self.shown_state(run),
                    "delete",
                    "wait until it is Stopped",
                ))
            }
            _ => {}
        }
        self.runs.remove(name);
        self.timers.retain(|(_, t)| timer_run(t) != name);
        self.catalog_waiters.retain(|l| l.run != name);
        for w in self.lease_waiters.values_mut() {
            w.retain(|l| l.run != name);
        }
        self.emit(Event::new(self.now, name, Fact::RunDeleted));
        Ok(())
    }

    fn create_retry_run(&mut self, name: &str, from: &str) -> Result<(), Error> {
        let src = self.get_run(from)?;
        if !matches!(
            src.node.state,
            State::Completed | State::Failed | State::Stopped | State::Skipped
        ) {
            return Err(invalid_state(
                from,
                src.node.state,
                "retry",
                "a retry run needs a finished (Completed, Failed, Stopped or Skipped) run",
            ));
        }
        let mut filter = BTreeSet::new();
        for s in &src.stages {
            for g in &s.groups {
                for m in &g.members {
                    if m.node.state != State::Completed {
                        filter.insert(m.name.clone());
                    }
                }
            }
        }
        let mut spec = src.spec.clone();
        spec.name = name.to_string();
        spec.strategy = Some(src.strategy.clone());
        spec.update_strategy_name = None;
        let images = match src.target.selection {
            NodeImageSelectionType::Latest => Vec::new(),
            _ => src.target.images.clone(),
        };
        self.create_run(spec, Some((from.to_string(), filter, images)))
    }

    fn start_run(&mut self, name: &str) -> Result<(), Error> {
        let run = self.get_run(name)?;
        match run.node.state {
            State::NotStarted => {}
            State::Stopped | State::Failed => return self.resume_run(name),
            s => {
                return Err(invalid_state(
                    name,
                    self.shown_state(run),
                    "start",
                    match s {
                        State::Stopping => "wait until it is Stopped, then resume it",
                        State::Running | State::Pending => "it is already running",
                        _ => "a finished run cannot be started again; create a retry run",
                    },
                ))
            }
        }
        let mut run = self.runs.remove(name).expect("checked");
        if let Err(e) = self.build_tree(&mut run, self.now) {
            self.runs.insert(name.to_string(), run);
            return Err(e);
        }
        // Skips asked for before the start apply to the frozen tree now; a member skip whose
        // member left the run's selection since (labels or strategy changed) no longer applies.
        let mut pending = std::mem::take(&mut run.pending_skips);
        pending.retain(|t| match t {
            SkipTarget::Member(n) => run.member_index.contains_key(n),
            _ => true,
        });
        run.node.state = State::Running;
        run.node.start = Some(self.now);
        self.runs.insert(name.to_string(), run);
        let message = self.runs[name]
            .retry_of
            .as_ref()
            .map(|r| format!("retry of run {r}"));
        self.emit(Event::new(self.now, name, Fact::RunStarted { message }));
        for t in &pending {
            self.apply_skip(name, t);
        }
        self.drive(name);
        Ok(())
    }

    fn resume_run(&mut self, name: &str) -> Result<(), Error> {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("checked");
        let was_failed = run.node.state == State::Failed;
        run.node.state = State::Running;
        run.node.completed = None;
        run.node.error = None;
        run.stopping = None;
        if was_failed {
            // Resuming a failed run accepts the failures so far: thresholds count from here.
            run.accepted_failures = run.failure_count;
        }
        if let Some(stage) = run.stages.get_mut(run.current) {
            if was_failed {
                stage.accepted_failures = stage.failure_count;
                stage.failed = false;
            }
            if matches!(stage.node.state, State::Stopped | State::Failed) {
                stage.node.state = State::Running;
                stage.node.error = None;
                stage.node.completed = None;
            }
            for g in &mut stage.groups {
                if was_failed {
                    g.accepted_failures = g.failure_count;
                    g.failed = false;
                }
                if matches!(g.node.state, State::Stopped | State::Failed) {
                    g.node.state = State::Running;
                    g.node.error = None;
                    g.node.completed = None;
                }
            }
        }
        self.emit(Event::new(now, name, Fact::RunResumed));
        let cur = self.runs[name].current;
        if let Some(stage) = self.runs[name].stages.get(cur) {
            let in_body = stage.phase == Phase::Body;
            for gi in 0..stage.groups.len() {
                // Groups a failure kept from being entered are entered now.
                if in_body {
                    self.enter_group(name, cur, gi);
                }
                self.requeue_group(name, cur, gi);
                self.advance_group(name, cur, gi);
            }
        }
        self.fill_stage(name, cur);
        self.drive(name);
        Ok(())
    }

    fn stop_run(&mut self, name: &str) -> Result<(), Error> {
        let run = self.get_run(name)?;
        if !matches!(run.node.state, State::Running | State::Pending) {
            return Err(invalid_state(
                name,
                run.node.state,
                "stop",
                "only a Running or Pending run can be stopped",
            ));
        }
        let run = self.runs.get_mut(name).expect("checked");
        run.stopping = Some(StopCause::User);
        run.node.state = State::Stopping;
        let reason = Reason::Stop;
        self.emit(Event::new(self.now, name, Fact::RunStopping { reason }));
        self.drive(name);
        Ok(())
    }

    fn skip(&mut self, name: &str, targets: &[SkipTarget]) -> Result<(), Error> {
        let run = self.get_run(name)?;
        match run.node.state {
            State::NotStarted => {
                let mut known = SkipNames::default();
                for t in targets {
                    self.check_skip_before_start(run, t, &mut known)?;
                }
                let run = self.runs.get_mut(name).expect("checked");
                run.pending_skips.extend(targets.iter().cloned());
                return Ok(());
            }
            State::Running | State::Pending | State::Stopped | State::Failed => {}
            s => {
                return Err(invalid_state(
                    name,
                    s,
                    "skip",
                    "only a NotStarted, Running, Pending, Stopped or Failed run takes skips",
                ))
            }
        }
        for t in targets {
            check_skip(run, t)?;
        }
        for t in targets {
            self.apply_skip(name, t);
        }
        self.drive(name);
        Ok(())
    }

    /// Checks a skip target of a run not started yet; `known` holds what earlier targets of the
    /// same command needed (the previewed member set, the strategy's names), so a command with
    /// many targets costs one preview, not one per target.
    fn check_skip_before_start<'a>(
        &self,
        run: &'a Run,
        t: &SkipTarget,
        known: &mut SkipNames<'a>,
    ) -> Result<(), Error> {
        let s = &run.strategy;
        let ok = match t {
            SkipTarget::Member(n) => {
                // Checked against the run's selection as it would be if started now.
                let members = known.members.get_or_insert_with(|| {
                    let mut preview = run.clone();
                    self.build_tree(&mut preview, self.now)
                        .ok()
                        .map(|()| preview.member_index.into_keys().collect())
                });
                match members {
                    Some(m) => m.contains(n),
                    None => self.members.contains_key(n),
                }
            }
            SkipTarget::Stage(n) | SkipTarget::AfterStageWait(n) => known
                .stages
                .get_or_insert_with(|| s.stages.iter().map(|st| st.name.as_str()).collect())
                .contains(n.as_str()),
            SkipTarget::Group(n) => known
                .groups
                .get_or_insert_with(|| {
                    let mut names = BTreeSet::new();
                    for (si, st) in s.stages.iter().enumerate() {
                        for gi in 0..st.groups.len().max(1) {
                            names.insert(group_name(s, si, gi));
                        }
                    }
                    names
                })
                .contains(n.as_str()),
        };
        if ok {
            Ok(())
        } else {
            Err(Error::new(
                ErrorCode::NotFound,
                format!(
                    "skip target {t}: no such {} in run \"{}\"",
                    target_kind(t),
                    run.spec.name
                ),
            ))
        }
    }

    fn approve(&mut self, name: &str, sel: &GateSelector, by: Option<String>) -> Result<(), Error> {
        let run = self.get_run(name)?;
        let loc = find_gate(run, sel)?;
        let gate = gate_ref(run, &loc).expect("found");
        match gate.state {
            State::Pending => {}
            State::NotStarted => {
                return Err(Error::new(
                    ErrorCode::InvalidState,
                    format!(
                        "gate {} of run \"{name}\" is NotStarted: the run has not reached it yet",
                        describe_gate(run, &loc)
                    ),
                ))
            }
            s => {
                return Err(Error::new(
                    ErrorCode::InvalidState,
                    format!(
                        "gate {} of run \"{name}\" is already {s:?}",
                        describe_gate(run, &loc)
                    ),
                ))
            }
        }
        self.complete_gate(name, &loc, by.unwrap_or_else(|| "user".to_string()));
        Ok(())
    }

    // ---------------------------------------------------------------- the run tree

    fn run_members<'a>(&'a self, run: &Run) -> Vec<&'a Member> {
        self.members
            .values()
            .map(|r| &r.spec)
            .filter(|m| {
                run.member_filter
                    .as_ref()
                    .is_none_or(|f| f.contains(&m.name))
            })
            .collect()
    }

    /// Resolves the member set and builds the stage / group / member tree at `now`.
    fn build_tree(&self, run: &mut Run, now: Timestamp) -> Result<(), Error> {
        let members = self.run_members(run);
        let assignment = assign(&members, &run.strategy)?;
        if run.target.selection == NodeImageSelectionType::Consistent && !run.pinned_images {
            let in_run: Vec<&Member> = assignment
                .stages
                .iter()
                .flatten()
                .flatten()
                .map(|i| members[*i as usize])
                .collect();
            run.target.images = select_consistent(&in_run, &self.catalog, now);
        }
        let mut stages = Vec::with_capacity(run.strategy.stages.len());
        let mut index = BTreeMap::new();
        for (si, stage) in run.strategy.stages.iter().enumerate() {
            let count: u32 = assignment.stages[si].iter().map(|g| g.len() as u32).sum();
            let (mc, maf) = stage_limits(stage, count);
            let mut groups = Vec::new();
            for (gi, ms) in assignment.stages[si].iter().enumerate() {
                let (gmc, gmaf) = group_limits(stage, gi, ms.len() as u32, mc);
                let mut ordered: Vec<(crate::window::WindowPriority, &Member)> = ms
                    .iter()
                    .map(|i| {
                        let m = members[*i as usize];
                        let w = self.members[&m.name].window(run.target.upgrade_type);
                        (plan::priority(w, now), m)
                    })
                    .collect();
                ordered.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
                let rts: Vec<MemberRt> = ordered
                    .iter()
                    .map(|(_, m)| MemberRt {
                        name: m.name.clone(),
                        node: Node::default(),
                        message: None,
                        operation_id: None,
                        kubernetes_version: None,
                        node_images: Vec::new(),
                        pending: None,
                        skip_reason: None,
                        has_window: self.members[&m.name]
                            .window(run.target.upgrade_type)
                            .is_some(),
                    })
                    .collect();
                for (mi, m) in rts.iter().enumerate() {
                    index.insert(m.name.clone(), (si as u32, gi as u32, mi as u32));
                }
                let g = stage.groups.get(gi);
                groups.push(GroupRt {
                    name: group_name(&run.strategy, si, gi).to_string(),
                    node: Node::default(),
                    phase: Phase::NotReached,
                    failure_count: 0,
                    accepted_failures: 0,
                    failed: false,
                    user_skipped: false,
                    max_concurrency: gmc,
                    max_allowed_failures: gmaf,
                    in_flight: 0,
                    unfinished: rts.len() as u32,
                    before_gates: g
                        .map(|g| g.before_gates.iter().map(GateRt::new).collect())
                        .unwrap_or_default(),
                    after_gates: g
                        .map(|g| g.after_gates.iter().map(GateRt::new).collect())
                        .unwrap_or_default(),
                    members: rts,
                    ready_open: BTreeSet::new(),
                    ready_free: BTreeSet::new(),
                });
            }
            stages.push(StageRt {
                name: stage.name.clone(),
                node: Node::default(),
                phase: Phase::NotReached,
                failure_count: 0,
                accepted_failures: 0,
                failed: false,
                user_skipped: false,
                max_concurrency: mc,
                max_allowed_failures: maf,
                in_flight: 0,
                before_gates: stage.before_gates.iter().map(GateRt::new).collect(),
                after_gates: stage.after_gates.iter().map(GateRt::new).collect(),
                wait: Node::default(),
                wait_seconds: stage.after_stage_wait_in_seconds.unwrap_or(0),
                wait_until: None,
                groups,
            });
        }
        run.index = RunIndex::build(&stages);
        run.stages = stages;
        run.member_index = index;
        Ok(())
    }

    // ---------------------------------------------------------------- progression

    /// Moves a run through its stage phases as far as it can go at `now`.
    fn drive(&mut self, name: &str) {
        loop {
            let now = self.now;
            let Some(run) = self.runs.get_mut(name) else {
                return;
            };
            if !run.active() {
                return;
            }
            if let Some(cause) = run.stopping {
                if run.in_flight == 0 {
                    self.finish_stop(name, cause);
                }
                return;
            }
            let cur = run.current;
            if cur >= run.stages.len() {
                let all_skipped = run.stages.iter().all(|s| s.node.state == State::Skipped);
                run.node.state = if all_skipped {
                    State::Skipped
                } else {
                    State::Completed
                };
                run.node.completed = Some(now);
                let fact = if all_skipped {
                    Fact::RunSkipped
                } else {
                    Fact::RunCompleted
                };
                self.emit(Event::new(now, name, fact));
                return;
            }
            let stage = &mut run.stages[cur];
            if stage.user_skipped {
                if stage.in_flight > 0 {
                    return;
                }
                run.current += 1;
                continue;
            }
            match stage.phase {
                Phase::NotReached => {
                    stage.phase = Phase::Before;
                    stage.node.state = State::Running;
                    stage.node.start = Some(now);
                    let stage = stage.name.clone();
                    self.emit(Event::new(now, name, Fact::StageStarted { stage }));
                    let n = self.runs[name].stages[cur].before_gates.len();
                    for i in 0..n {
                        self.create_gate(
                            name,
                            GateLoc {
                                stage: cur as u32,
                                group: None,
                                timing: GateTiming::Before,
                                index: i as u32,
                            },
                        );
                    }
                }
                Phase::Before => {
                    if !stage.before_gates.iter().all(GateRt::done) {
                        return;
                    }
                    stage.phase = Phase::Body;
                    let groups = stage.groups.len();
                    for gi in 0..groups {
                        self.enter_group(name, cur, gi);
                    }
                    self.fill_stage(name, cur);
                }
                Phase::Body => {
                    if stage.in_flight > 0 || !stage.groups.iter().all(GroupRt::done) {
                        return;
                    }
                    if stage.groups.iter().any(|g| g.failed) && !stage.failed {
                        // Not reached: a group's failure stops the run at once (count_failure)
                        // and the drain fails the stage. Kept as a safety net.
                        self.fail_stage_for_group(name, cur);
                        self.halt_for_failure(name);
                        continue;
                    }
                    if stage.failed {
                        return;
                    }
                    if stage.groups.iter().all(|g| g.node.state == State::Skipped) {
                        let by_user = stage
                            .groups
                            .iter()
                            .any(|g| g.user_skipped || g.skipped_by_user());
                        self.skip_stage_rest(name, cur, by_user);
                        continue;
                    }
                    stage.phase = Phase::After;
                    let n = stage.after_gates.len();
                    let secs = stage.wait_seconds;
                    if secs > 0 && stage.wait.state == State::NotStarted {
                        let until = add_seconds(now, secs);
                        stage.wait.state = State::Running;
                        stage.wait.start = Some(now);
                        stage.wait_until = Some(until);
                        let stage = stage.name.clone();
                        let ev =
                            Event::new(now, name, Fact::AfterStageWaitStarted { stage, until });
                        self.timers.insert((
                            until,
                            Timer::StageWait {
                                run: name.to_string(),
                                stage: cur as u32,
                            },
                        ));
                        self.emit(ev);
                    } else if stage.wait.state == State::NotStarted {
                        stage.wait.state = State::Completed;
                        stage.wait.start = Some(now);
                        stage.wait.completed = Some(now);
                    }
                    for i in 0..n {
                        self.create_gate(
                            name,
                            GateLoc {
                                stage: cur as u32,
                                group: None,
                                timing: GateTiming::After,
                                index: i as u32,
                            },
                        );
                    }
                }
                Phase::After => {
                    let wait_done = matches!(stage.wait.state, State::Completed | State::Skipped);
                    if !wait_done || !stage.after_gates.iter().all(GateRt::done) {
                        return;
                    }
                    stage.phase = Phase::Done;
                    stage.node.state = State::Completed;
                    stage.node.completed = Some(now);
                    let stage = stage.name.clone();
                    let ev = Event::new(now, name, Fact::StageCompleted { stage });
                    run.current += 1;
                    self.emit(ev);
                }
                Phase::Done => {
                    run.current += 1;
                }
            }
        }
    }

    fn enter_group(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        if !run.active() || run.stopping.is_some() {
            return;
        }
        let stage_name = run.stages[si].name.clone();
        let g = &mut run.stages[si].groups[gi];
        if g.phase != Phase::NotReached {
            return;
        }
        if g.user_skipped {
            g.phase = Phase::Done;
            return;
        }
        g.phase = Phase::Before;
        g.node.state = State::Running;
        g.node.start = Some(now);
        let (stage, group) = (stage_name, g.name.clone());
        let ev = Event::new(now, name, Fact::GroupStarted { stage, group });
        let n = g.before_gates.len();
        self.emit(ev);
        for i in 0..n {
            self.create_gate(
                name,
                GateLoc {
                    stage: si as u32,
                    group: Some(gi as u32),
                    timing: GateTiming::Before,
                    index: i as u32,
                },
            );
        }
        self.advance_group(name, si, gi);
    }

    /// Moves a group through its phases; returns quickly when nothing changes.
    fn advance_group(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        loop {
            let run = self.runs.get_mut(name).expect("run");
            if !run.active() {
                return;
            }
            // While a run drains (stop or failure) nothing new starts, but a group whose
            // members are all done and that needs no new gate still completes.
            let draining = run.stopping.is_some();
            let stage = &mut run.stages[si];
            let stage_name = &stage.name;
            let g = &mut stage.groups[gi];
            match g.phase {
                Phase::NotReached | Phase::Done => return,
                Phase::Before => {
                    if draining || !g.before_gates.iter().all(GateRt::done) {
                        return;
                    }
                    g.phase = Phase::Body;
                    self.evaluate_members(name, si, gi);
                }
                Phase::Body => {
                    if g.failed || g.in_flight > 0 || g.unfinished > 0 {
                        return;
                    }
                    if draining && !g.after_gates.is_empty() {
                        return;
                    }
                    if g.members.iter().all(|m| m.node.state == State::Skipped) {
                        g.phase = Phase::Done;
                        g.node.state = State::Skipped;
                        g.node.completed = Some(now);
                        for gate in &mut g.after_gates {
                            gate.state = State::Skipped;
                        }
                        let fact = Fact::GroupSkipped {
                            stage: stage_name.clone(),
                            group: g.name.clone(),
                            reason: if g.skipped_by_user() {
                                Reason::SkippedByUser
                            } else {
                                Reason::AlreadyAtTarget
                            },
                        };
                        self.emit(Event::new(now, name, fact));
                        return;
                    }
                    g.phase = Phase::After;
                    let n = g.after_gates.len();
                    for i in 0..n {
                        self.create_gate(
                            name,
                            GateLoc {
                                stage: si as u32,
                                group: Some(gi as u32),
                                timing: GateTiming::After,
                                index: i as u32,
                            },
                        );
                    }
                }
                Phase::After => {
                    if !g.after_gates.iter().all(GateRt::done) {
                        return;
                    }
                    g.phase = Phase::Done;
                    g.node.state = State::Completed;
                    g.node.completed = Some(now);
                    let (stage, group) = (stage_name.clone(), g.name.clone());
                    self.emit(Event::new(now, name, Fact::GroupCompleted { stage, group }));
                    return;
                }
            }
        }
    }

    /// When a group's members begin: settle the members that need no slot (nothing to do,
    /// minor-version skips), queue the rest in priority order.
    fn evaluate_members(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        let Engine {
            runs,
            members,
            catalog,
            outputs,
            ..
        } = self;
        let run = runs.get_mut(name).expect("run");
        let target = run.target.clone();
        let stage_name = run.stages[si].name.clone();
        let mut failures = 0;
        let g = &mut run.stages[si].groups[gi];
        for mi in 0..g.members.len() {
            let m = &mut g.members[mi];
            if m.node.state.is_terminal() {
                continue;
            }
            let Some(rec) = members.get(&m.name) else {
                continue;
            };
            match decide(&rec.spec, &target, catalog, now) {
                Decision::Upgrade { .. } => {
                    if m.has_window {
                        g.ready_open.insert(mi as u32);
                    } else {
                        g.ready_free.insert(mi as u32);
                    }
                }
                Decision::Skip { reason, message } => {
                    settle_skip(m, now, reason, message);
                    g.unfinished -= 1;
                    outputs.push_back(Output::Event(member_skipped(
                        now,
                        name,
                        &stage_name,
                        &g.name,
                        m,
                        skip_reason(reason),
                    )));
                }
                Decision::Fail { code, message } => {
                    m.node.state = State::Failed;
                    m.node.start = Some(now);
                    m.node.completed = Some(now);
                    m.node.error = Some(StatusError {
                        code: code.to_string(),
                        message: message.clone(),
                    });
                    m.message = Some(message);
                    g.unfinished -= 1;
                    failures += 1;
                    outputs.push_back(Output::Event(member_failed(
                        now,
                        name,
                        &stage_name,
                        &g.name,
                        m,
                        None,
                    )));
                }
            }
        }
        for _ in 0..failures {
            self.count_failure(name, si, gi);
        }
        self.sweep_blocked(name, si, gi);
    }

    /// Starts as many members of the current stage as the limits allow.
    fn fill_stage(&mut self, name: &str, si: usize) {
        let now = self.now;
        {
            let Some(run) = self.runs.get(name) else {
                return;
            };
            if !run.active() || run.stopping.is_some() || run.current != si {
                return;
            }
            let Some(stage) = run.stages.get(si) else {
                return;
            };
            if stage.phase != Phase::Body
                || stage.failed
                || stage.in_flight >= stage.max_concurrency
            {
                return;
            }
        }
        if let Some(f) = self
            .freezes
            .iter()
            .find(|f| f.start <= now && now < f.end)
            .cloned()
        {
            self.hold_for_freeze(name, si, &f);
            return;
        }
        loop {
            let run = &self.runs[name];
            let stage = &run.stages[si];
            if stage.in_flight >= stage.max_concurrency
                || !run.active()
                || run.stopping.is_some()
                || stage.failed
            {
                return;
            }
            // The group with the fewest members in flight gets the slot (ties: strategy order).
            let mut best: Option<(u32, usize, u32, Option<Decision>)> = None;
            let mut from = 0;
            loop {
                // The next group that could beat `best`: one run lookup per candidate check,
                // not one per group.
                let bound = best.as_ref().map(|(inf, ..)| *inf);
                let groups = &self.runs[name].stages[si].groups;
                let Some(gi) = (from..groups.len()).find(|&gi| {
                    let g = &groups[gi];
                    g.phase == Phase::Body
                        && !g.failed
                        && g.in_flight < g.max_concurrency
                        && bound.is_none_or(|inf| g.in_flight < inf)
                }) else {
                    break;
                };
                let inf = groups[gi].in_flight;
                from = gi + 1;
                if let Some((mi, decided)) = self.next_candidate(name, si, gi) {
                    best = Some((inf, gi, mi, decided));
                }
            }
            let Some((_, gi, mi, decided)) = best else {
                return;
            };
            self.start_member(name, si, gi, mi, decided);
        }
    }

    fn hold_for_freeze(&mut self, name: &str, si: usize, f: &Freeze) {
        let now = self.now;
        let Engine {
            runs,
            outputs,
            timers,
            ..
        } = self;
        let run = runs.get_mut(name).expect("run");
        let stage_name = run.stages[si].name.clone();
        let mut any = false;
        for g in &mut run.stages[si].groups {
            if g.phase != Phase::Body || g.failed || g.in_flight >= g.max_concurrency {
                continue;
            }
            let head = g.ready_open.first().or(g.ready_free.first()).copied();
            if let Some(mi) = head {
                any = true;
                let m = &mut g.members[mi as usize];
                let wait = (Reason::Freeze, Some(f.end));
                m.node.state = State::Pending;
                if m.pending != Some(wait) {
                    m.pending = Some(wait);
                    m.message = Some(format!(
                        "fleet freeze \"{}\" until {}",
                        f.name,
                        crate::time::fmt_time(f.end)
                    ));
                    let fact = Fact::MemberPending {
                        stage: stage_name.clone(),
                        group: g.name.clone(),
                        member: m.name.clone(),
                        reason: Reason::Freeze,
                        until: Some(f.end),
                        message: None,
                    };
                    outputs.push_back(Output::Event(Event::new(now, name, fact)));
                }
            }
        }
        if any {
            timers.insert((
                f.end,
                Timer::Freeze {
                    run: name.to_string(),
                },
            ));
        }
    }

    /// The next startable member of a group in priority order; members found blocked on the
    /// way become Pending (with a timer or a waiter) and leave the ready queues. Comes with the
    /// decision taken for it, if any (see [`Engine::check_candidate`]).
    fn next_candidate(
        &mut self,
        name: &str,
        si: usize,
        gi: usize,
    ) -> Option<(u32, Option<Decision>)> {
        loop {
            let g = &self.runs[name].stages[si].groups[gi];
            let (mi, from_open) = match g.ready_open.first() {
                Some(mi) => (*mi, true),
                None => (*g.ready_free.first()?, false),
            };
            if let Some(decided) = self.check_candidate(name, si, gi, mi, from_open) {
                return Some((mi, decided));
            }
        }
    }

    /// Moves every queued member that cannot start now out of the queues (Pending, with its
    /// reason and until), so waits are reported as soon as a group's members begin.
    fn sweep_blocked(&mut self, name: &str, si: usize, gi: usize) {
        let g = &self.runs[name].stages[si].groups[gi];
        let queued: Vec<(u32, bool)> = g
            .ready_open
            .iter()
            .map(|m| (*m, true))
            .chain(g.ready_free.iter().map(|m| (*m, false)))
            .collect();
        for (mi, from_open) in queued {
            self.check_candidate(name, si, gi, mi, from_open);
        }
    }

    /// Whether queued member `mi` can start now; if not (`None`), it leaves the queue as Pending
    /// with a timer (window opening, release date) or a waiter (lease, catalog change). When it
    /// can, the decision taken for it comes along (`None` if none was): `start_member` reuses
    /// it, as nothing the decision depends on changes in between.
    fn check_candidate(
        &mut self,
        name: &str,
        si: usize,
        gi: usize,
        mi: u32,
        from_open: bool,
    ) -> Option<Option<Decision>> {
        let now = self.now;
        let Engine {
            runs,
            members,
            catalog,
            leases,
            lease_waiters,
            catalog_waiters,
            timers,
            outputs,
            ..
        } = self;
        let run = runs.get_mut(name).expect("run");
        let target = &run.target;
        let stage = &mut run.stages[si];
        let stage_name = &stage.name;
        let g = &mut stage.groups[gi];
        let m = &mut g.members[mi as usize];
        let loc = || MemberLoc {
            run: name.to_string(),
            stage: si as u32,
            group: gi as u32,
            member: mi,
        };
        let Some(rec) = members.get(&m.name) else {
            // Deleted members cannot be part of a started run; treat as startable and let
            // start_member settle it.
            return Some(None);
        };
        let mut block: Option<(Reason, Option<Timestamp>, String)> = None;
        if let Some(holder) = leases.get(&m.name) {
            if holder != name {
                block = Some((
                    Reason::Lease,
                    None,
                    format!("in flight in run \"{holder}\"; waits for it to finish"),
                ));
                lease_waiters
                    .entry(m.name.clone())
                    .or_default()
                    .insert(loc());
            }
        }
        let mut decided = None;
        if block.is_none() {
            let decision = decide(&rec.spec, target, catalog, now);
            match &decision {
                Decision::Upgrade {
                    kubernetes_version,
                    node_images,
                    ..
                } => {
                    if let Some((what, until)) = plan::unavailable(
                        &rec.spec,
                        kubernetes_version.as_deref(),
                        node_images,
                        target,
                        catalog,
                        now,
                    ) {
                        match until {
                            Some(t) => {
                                timers.insert((
                                    t,
                                    Timer::Member {
                                        loc: loc(),
                                        reason: WakeReason::VersionAvailable,
                                    },
                                ));
                            }
                            None => {
                                catalog_waiters.insert(loc());
                            }
                        }
                        block = Some((Reason::VersionNotInRegion, until, what));
                    }
                }
                // Settled by start_member.
                Decision::Skip { .. } | Decision::Fail { .. } => return Some(Some(decision)),
            }
            decided = Some(decision);
        }
        if block.is_none() {
            if let Some(w) = rec.window(target.upgrade_type) {
                if !w.is_open(now) {
                    let next = w.next_opening(now);
                    if let Some(t) = next {
                        timers.insert((
                            t,
                            Timer::Member {
                                loc: loc(),
                                reason: WakeReason::MaintenanceWindow,
                            },
                        ));
                    }
                    let msg = match next {
                        Some(t) => {
                            format!(
                                "maintenance window closed; opens {}",
                                crate::time::fmt_time(t)
                            )
                        }
                        None => "maintenance window never opens again".to_string(),
                    };
                    block = Some((Reason::MaintenanceWindow, next, msg));
                }
            }
        }
        let Some((reason, until, message)) = block else {
            return Some(decided);
        };
        if from_open {
            g.ready_open.remove(&mi);
        } else {
            g.ready_free.remove(&mi);
        }
        m.node.state = State::Pending;
        if m.pending != Some((reason, until)) {
            m.pending = Some((reason, until));
            m.message = Some(message.clone());
            let fact = Fact::MemberPending {
                stage: stage_name.clone(),
                group: g.name.clone(),
                member: m.name.clone(),
                reason,
                until,
                message: Some(message),
            };
            outputs.push_back(Output::Event(Event::new(now, name, fact)));
        }
        None
    }

    /// Starts (or settles) member `mi`; `decided` is its decision if `check_candidate` just took
    /// one, else it is decided here.
    fn start_member(
        &mut self,
        name: &str,
        si: usize,
        gi: usize,
        mi: u32,
        decided: Option<Decision>,
    ) {
        let now = self.now;
        let Engine {
            runs,
            members,
            catalog,
            leases,
            operations,
            outputs,
            ..
        } = self;
        let run = runs.get_mut(name).expect("run");
        let target = &run.target;
        let stage = &mut run.stages[si];
        let stage_name = &stage.name;
        let g = &mut stage.groups[gi];
        g.ready_open.remove(&mi);
        g.ready_free.remove(&mi);
        let m = &mut g.members[mi as usize];
        let rec = &members[&m.name];
        let decision = decided.unwrap_or_else(|| decide(&rec.spec, target, catalog, now));
        match decision {
            Decision::Upgrade {
                kubernetes_version,
                node_images,
                message,
            } => {
                let op = format!("{name}/{}", m.name);
                m.node.state = State::Running;
                m.node.start = Some(now);
                m.pending = None;
                m.message = message;
                m.operation_id = Some(op.clone());
                m.kubernetes_version = kubernetes_version.clone();
                m.node_images = node_images.clone();
                leases.insert(m.name.clone(), name.to_string());
                operations.insert(
                    op.clone(),
                    MemberLoc {
                        run: name.to_string(),
                        stage: si as u32,
                        group: gi as u32,
                        member: mi,
                    },
                );
                let fact = Fact::MemberStarted {
                    stage: stage_name.clone(),
                    group: g.name.clone(),
                    member: m.name.clone(),
                    kubernetes_version: kubernetes_version.clone(),
                    node_images: node_images.clone(),
                    operation_id: op.clone(),
                    message: m.message.clone(),
                };
                outputs.push_back(Output::Event(Event::new(now, name, fact)));
                outputs.push_back(Output::Command(HostCommand::StartUpgrade(
                    UpgradeOperation {
                        operation_id: op,
                        run: name.to_string(),
                        member: m.name.clone(),
                        region: rec.spec.region.clone(),
                        provider: rec.spec.provider.clone(),
                        upgrade_type: target.upgrade_type,
                        kubernetes_version,
                        node_images,
                    },
                )));
                g.in_flight += 1;
                stage.in_flight += 1;
                run.in_flight += 1;
            }
            Decision::Skip { reason, message } => {
                settle_skip(m, now, reason, message);
                g.unfinished -= 1;
                outputs.push_back(Output::Event(member_skipped(
                    now,
                    name,
                    stage_name,
                    &g.name,
                    m,
                    skip_reason(reason),
                )));
                self.advance_group(name, si, gi);
            }
            Decision::Fail { code, message } => {
                m.node.state = State::Failed;
                m.node.start = Some(now);
                m.node.completed = Some(now);
                m.node.error = Some(StatusError {
                    code: code.to_string(),
                    message: message.clone(),
                });
                m.message = Some(message);
                g.unfinished -= 1;
                outputs.push_back(Output::Event(member_failed(
                    now, name, stage_name, &g.name, m, None,
                )));
                self.count_failure(name, si, gi);
                self.advance_group(name, si, gi);
            }
        }
    }

    fn finish_operation(&mut self, op: &str, failure: Option<String>) {
        // Unknown or already finished operations are ignored: results may be delivered twice.
        let Some(loc) = self.operations.remove(op) else {
            return;
        };
        let now = self.now;
        let (si, gi, mi) = (loc.stage as usize, loc.group as usize, loc.member as usize);
        let run_name = loc.run;
        let Engine {
            runs,
            members,
            leases,
            outputs,
            ..
        } = self;
        let run = runs.get_mut(&run_name).expect("run of operation");
        run.in_flight -= 1;
        let stage = &mut run.stages[si];
        stage.in_flight -= 1;
        let stage_name = &stage.name;
        let g = &mut stage.groups[gi];
        g.in_flight -= 1;
        g.unfinished -= 1;
        let m = &mut g.members[mi];
        m.node.completed = Some(now);
        leases.remove(&m.name);
        let failed = failure.is_some();
        match failure {
            None => {
                m.node.state = State::Completed;
                if let Some(rec) = members.get_mut(&m.name) {
                    // In place: the record's windows do not depend on versions.
                    let spec = &mut rec.spec;
                    if let Some(v) = &m.kubernetes_version {
                        spec.kubernetes_version.clone_from(v);
                    }
                    for p in &m.node_images {
                        if let Some(pool) =
                            spec.node_pools.iter_mut().find(|x| x.name == p.node_pool)
                        {
                            pool.image_version.clone_from(&p.image_version);
                        }
                    }
                }
                let fact = Fact::MemberCompleted {
                    stage: stage_name.clone(),
                    group: g.name.clone(),
                    member: m.name.clone(),
                    operation_id: op.to_string(),
                };
                outputs.push_back(Output::Event(Event::new(now, &run_name, fact)));
            }
            Some(message) => {
                m.node.state = State::Failed;
                m.node.error = Some(StatusError {
                    code: ErrorCode::UpgradeFailed.to_string(),
                    message: message.clone(),
                });
                outputs.push_back(Output::Event(member_failed(
                    now,
                    &run_name,
                    stage_name,
                    &g.name,
                    m,
                    Some(op.to_string()),
                )));
            }
        }
        let member_name = m.name.clone();
        if failed {
            self.count_failure(&run_name, si, gi);
        }
        self.wake_lease_waiters(&member_name);
        self.advance_group(&run_name, si, gi);
        self.fill_stage(&run_name, si);
        self.drive(&run_name);
    }

    fn count_failure(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        run.failure_count += 1;
        let stage = &mut run.stages[si];
        stage.failure_count += 1;
        let stage_name = stage.name.clone();
        let g = &mut stage.groups[gi];
        g.failure_count += 1;
        let mut group_failed = None;
        if !g.failed
            && !g.user_skipped
            && g.failure_count.saturating_sub(g.accepted_failures) > g.max_allowed_failures
        {
            g.failed = true;
            g.node.state = State::Failed;
            g.node.completed = Some(now);
            let msg = format!(
                "{} failures exceed maxAllowedFailures {}",
                g.failure_count.saturating_sub(g.accepted_failures),
                g.max_allowed_failures
            );
            g.node.error = Some(StatusError {
                code: ErrorCode::FailureThresholdExceeded.to_string(),
                message: msg.clone(),
            });
            group_failed = Some(format!(
                "group \"{}\" of stage \"{stage_name}\" failed: {msg}",
                g.name
            ));
            let fact = Fact::GroupFailed {
                stage: stage_name,
                group: g.name.clone(),
                reason: Reason::FailureThresholdExceeded,
                message: msg,
            };
            self.emit(Event::new(now, name, fact));
        }
        let stage = &self.runs[name].stages[si];
        if !stage.failed
            && !stage.user_skipped
            && stage.failure_count.saturating_sub(stage.accepted_failures)
                > stage.max_allowed_failures
        {
            let msg = format!(
                "{} failures exceed maxAllowedFailures {}",
                stage.failure_count.saturating_sub(stage.accepted_failures),
                stage.max_allowed_failures
            );
            self.fail_stage(name, si, &msg);
        } else if let Some(why) = group_failed {
            // A group's threshold stops the whole run at once, like the stage's: nothing new
            // starts in any group; the stage is Failed when the in-flight upgrades have drained.
            let run = self.runs.get_mut(name).expect("run");
            if run.stopping != Some(StopCause::Failure) {
                run.node.error = Some(StatusError {
                    code: ErrorCode::FailureThresholdExceeded.to_string(),
                    message: why,
                });
            }
            self.halt_for_failure(name);
        }
    }

    /// The stage's failure once a group of it failed (its own threshold held): names the first
    /// failed group of the stage (strategy order) and its error.
    fn fail_stage_for_group(&mut self, name: &str, si: usize) {
        let stage = &self.runs[name].stages[si];
        let why = match stage.groups.iter().find(|g| g.failed) {
            Some(g) => format!(
                "group \"{}\" failed: {}",
                g.name,
                g.node
                    .error
                    .as_ref()
                    .map(|e| e.message.as_str())
                    .unwrap_or("its failure threshold was exceeded")
            ),
            None => "a group of the stage failed".to_string(),
        };
        self.mark_stage_failed(name, si, &why);
    }

    /// Fails a stage at once (its threshold was exceeded) and stops the run.
    fn fail_stage(&mut self, name: &str, si: usize, why: &str) {
        self.mark_stage_failed(name, si, why);
        self.halt_for_failure(name);
    }

    /// Marks a stage Failed (event, stage and run errors); does not stop the run by itself.
    fn mark_stage_failed(&mut self, name: &str, si: usize, why: &str) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let stage = &mut run.stages[si];
        stage.failed = true;
        stage.node.state = State::Failed;
        stage.node.completed = Some(now);
        stage.node.error = Some(StatusError {
            code: ErrorCode::FailureThresholdExceeded.to_string(),
            message: why.to_string(),
        });
        let fact = Fact::StageFailed {
            stage: stage.name.clone(),
            reason: Reason::FailureThresholdExceeded,
            message: why.to_string(),
        };
        let ev = Event::new(now, name, fact);
        let msg = format!("stage \"{}\" failed: {why}", stage.name);
        run.node.error = Some(StatusError {
            code: ErrorCode::FailureThresholdExceeded.to_string(),
            message: msg,
        });
        self.emit(ev);
    }

    /// A threshold was exceeded: no new work anywhere in the run from now on; in-flight
    /// upgrades finish (the run is Stopping), then the run is Failed (see `finish_stop`).
    fn halt_for_failure(&mut self, name: &str) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        if run.stopping != Some(StopCause::Failure) {
            run.stopping = Some(StopCause::Failure);
            if run.in_flight > 0 {
                run.node.state = State::Stopping;
                let reason = Reason::FailureThresholdExceeded;
                self.emit(Event::new(now, name, Fact::RunStopping { reason }));
            }
        }
        self.drive(name);
    }

    /// The drain after a stop or a failure is over: the current stage's unfinished groups are
    /// Stopped; after a failure the stage is Failed (if a group's threshold, not its own, was
    /// exceeded, it fails now, naming the group), after a stop Stopped; then the run.
    fn finish_stop(&mut self, name: &str, cause: StopCause) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let run_state = match cause {
            StopCause::User => State::Stopped,
            StopCause::Failure => State::Failed,
        };
        let cur = run.current;
        let mut events = Vec::new();
        let mut fail_for_group = false;
        if let Some(stage) = run.stages.get_mut(cur) {
            for g in &mut stage.groups {
                if matches!(g.node.state, State::Running | State::Pending) {
                    g.node.state = State::Stopped;
                    let (stage, group) = (stage.name.clone(), g.name.clone());
                    events.push(Event::new(now, name, Fact::GroupStopped { stage, group }));
                }
            }
            if matches!(stage.node.state, State::Running | State::Pending) {
                if cause == StopCause::Failure && stage.groups.iter().any(|g| g.failed) {
                    fail_for_group = true;
                } else {
                    stage.node.state = State::Stopped;
                    let stage = stage.name.clone();
                    events.push(Event::new(now, name, Fact::StageStopped { stage }));
                }
            }
        }
        for e in events {
            self.emit(e);
        }
        if fail_for_group {
            self.fail_stage_for_group(name, cur);
        }
        let run = self.runs.get_mut(name).expect("run");
        run.node.state = run_state;
        run.node.completed = Some(now);
        run.stopping = None;
        let error = run.node.error.clone();
        let fact = match cause {
            StopCause::User => Fact::RunStopped { error },
            StopCause::Failure => Fact::RunFailed { error },
        };
        self.emit(Event::new(now, name, fact));
    }

    fn create_gate(&mut self, name: &str, loc: GateLoc) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let stage_name = run.stages[loc.stage as usize].name.clone();
        let group_name = loc.group.map(|g| {
            run.stages[loc.stage as usize].groups[g as usize]
                .name
                .clone()
        });
        let id = format!(
            "{name}/{}/{}/{}",
            match &group_name {
                Some(g) => format!("group:{g}"),
                None => format!("stage:{stage_name}"),
            },
            match loc.timing {
                GateTiming::Before => "before",
                GateTiming::After => "after",
            },
            loc.index
        );
        let gate = gate_mut(&mut run.stages, &loc);
        if gate.state != State::NotStarted {
            return;
        }
        gate.id = Some(id.clone());
        gate.state = State::Pending;
        gate.created = Some(now);
        run.index
            .gates
            .entry(id.clone())
            .or_insert_with(|| loc.clone());
        run.index.pending.insert(loc.clone());
        let gate = gate_mut(&mut run.stages, &loc);
        let mut open_at = None;
        if let (GateType::ScheduledStart, Some(c)) = (
            gate.config.gate_type,
            &gate.config.scheduled_start_configuration,
        ) {
            let (hh, mm) = parse_hh_mm(&c.start_time).unwrap_or((0, 0));
            let offset = c
                .utc_offset
                .as_deref()
                .map(parse_utc_offset)
                .and_then(Result::ok)
                .unwrap_or(chrono::FixedOffset::east_opt(0).expect("zero"));
            let at = next_weekly_occurrence(c.start_day, hh, mm, offset, now);
            gate.absolute_start = Some(at);
            open_at = Some(at);
        }
        let fact = Fact::GateCreated {
            stage: stage_name,
            group: group_name,
            until: open_at,
            gate_type: gate.config.gate_type,
            timing: loc.timing,
            gate_id: id,
            message: gate.config.display_name.clone(),
        };
        self.emit(Event::new(now, name, fact));
        if let Some(at) = open_at {
            if at <= now {
                self.complete_gate(name, &loc, "schedule".to_string());
            } else {
                self.timers.insert((
                    at,
                    Timer::Gate {
                        run: name.to_string(),
                        gate: loc,
                    },
                ));
            }
        }
    }

    fn complete_gate(&mut self, name: &str, loc: &GateLoc, by: String) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let stage_name = run.stages[loc.stage as usize].name.clone();
        let group_name = loc.group.map(|g| {
            run.stages[loc.stage as usize].groups[g as usize]
                .name
                .clone()
        });
        run.index.pending.remove(loc);
        let gate = gate_mut(&mut run.stages, loc);
        gate.state = State::Completed;
        gate.completed = Some(now);
        gate.by = Some(by.clone());
        let fact = Fact::GateCompleted {
            stage: stage_name,
            group: group_name,
            gate_type: gate.config.gate_type,
            timing: loc.timing,
            // Only a Pending gate completes, and a gate is Pending once created with its id.
            gate_id: gate.id.clone().unwrap_or_default(),
            by,
        };
        self.emit(Event::new(now, name, fact));
        if let Some(gi) = loc.group {
            self.advance_group(name, loc.stage as usize, gi as usize);
            self.fill_stage(name, loc.stage as usize);
        }
        self.drive(name);
    }

    fn end_wait(&mut self, name: &str, si: usize) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(name) else {
            return;
        };
        let Some(stage) = run.stages.get_mut(si) else {
            return;
        };
        if stage.wait.state != State::Running || stage.wait_until.is_some_and(|u| u > now) {
            return;
        }
        stage.wait.state = State::Completed;
        stage.wait.completed = Some(now);
        let stage = stage.name.clone();
        self.emit(Event::new(
            now,
            name,
            Fact::AfterStageWaitCompleted { stage },
        ));
        self.drive(name);
    }

    /// Puts a blocked member back in its group's ready queue (if it can still start).
    fn requeue(&mut self, loc: &MemberLoc) {
        let Some(run) = self.runs.get_mut(&loc.run) else {
            return;
        };
        let Some(stage) = run.stages.get_mut(loc.stage as usize) else {
            return;
        };
        let Some(g) = stage.groups.get_mut(loc.group as usize) else {
            return;
        };
        if g.phase != Phase::Body || g.failed || g.user_skipped {
            return;
        }
        let m = &mut g.members[loc.member as usize];
        if !matches!(m.node.state, State::NotStarted | State::Pending) {
            return;
        }
        m.node.state = State::NotStarted;
        if m.has_window {
            g.ready_open.insert(loc.member);
        } else {
            g.ready_free.insert(loc.member);
        }
    }

    /// Puts every member of a group that has not started back in the queue (after a resume:
    /// timers that fired while the run was stopped or failed found it closed).
    fn requeue_group(&mut self, name: &str, si: usize, gi: usize) {
        let n = self.runs[name].stages[si].groups[gi].members.len();
        for mi in 0..n {
            self.requeue(&MemberLoc {
                run: name.to_string(),
                stage: si as u32,
                group: gi as u32,
                member: mi as u32,
            });
        }
    }

    fn wake_lease_waiters(&mut self, member: &str) {
        let Some(waiters) = self.lease_waiters.remove(member) else {
            return;
        };
        for loc in waiters {
            self.requeue(&loc);
            let cur = self.runs.get(&loc.run).map(|r| r.current);
            if cur == Some(loc.stage as usize) {
                self.fill_stage(&loc.run, loc.stage as usize);
            }
        }
    }

    fn catalog_changed(&mut self) {
        let waiters = std::mem::take(&mut self.catalog_waiters);
        for loc in &waiters {
            self.requeue(loc);
        }
        self.refill_all();
    }

    fn refill_all(&mut self) {
        let active: Vec<(String, usize)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.active())
            .map(|(n, r)| (n.clone(), r.current))
            .collect();
        for (n, cur) in active {
            self.fill_stage(&n, cur);
        }
    }

    // ---------------------------------------------------------------- skips

    fn apply_skip(&mut self, name: &str, t: &SkipTarget) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        match t {
            SkipTarget::Member(n) => {
                let Some(&(si, gi, mi)) = run.member_index.get(n) else {
                    return;
                };
                let stage_name = run.stages[si as usize].name.clone();
                let g = &mut run.stages[si as usize].groups[gi as usize];
                let m = &mut g.members[mi as usize];
                if m.node.state.is_terminal() || m.node.state == State::Running {
                    return;
                }
                settle_skip(
                    m,
                    now,
                    SkipReason::SkippedByUser,
                    "skipped by user".to_string(),
                );
                g.unfinished -= 1;
                g.ready_open.remove(&mi);
                g.ready_free.remove(&mi);
                let ev = member_skipped(
                    now,
                    name,
                    &stage_name,
                    &g.name.clone(),
                    &g.members[mi as usize],
                    Reason::SkippedByUser,
                );
                self.emit(ev);
                self.advance_group(name, si as usize, gi as usize);
                self.fill_stage(name, si as usize);
            }
            SkipTarget::Group(n) => {
                let Some((si, gi)) = find_group(run, n) else {
                    return;
                };
                self.skip_group(name, si, gi);
                self.fill_stage(name, si);
            }
            SkipTarget::Stage(n) => {
                let Some(si) = run.index.stage(n) else {
                    return;
                };
                for gi in 0..run.stages[si].groups.len() {
                    self.skip_group(name, si, gi);
                }
                self.skip_stage_rest(name, si, true);
            }
            SkipTarget::AfterStageWait(n) => {
                let Some(stage) = run.index.stage(n).map(|si| &mut run.stages[si]) else {
                    return;
                };
                if matches!(stage.wait.state, State::Completed | State::Skipped) {
                    return;
                }
                stage.wait.state = State::Skipped;
                stage.wait.completed = Some(now);
                let fact = Fact::AfterStageWaitSkipped {
                    stage: stage.name.clone(),
                    reason: Reason::SkippedByUser,
                };
                self.emit(Event::new(now, name, fact));
            }
        }
    }

    fn skip_group(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        let Engine { runs, outputs, .. } = self;
        let run = runs.get_mut(name).expect("run");
        let Run { stages, index, .. } = run;
        let pending = &mut index.pending;
        let stage_name = stages[si].name.clone();
        let g = &mut stages[si].groups[gi];
        if matches!(g.node.state, State::Completed | State::Skipped) || g.user_skipped {
            return;
        }
        // Skipping a failed group (of a Failed or Stopped run) lets a resume move past it.
        g.user_skipped = true;
        g.failed = false;
        g.node.error = None;
        g.ready_open.clear();
        g.ready_free.clear();
        for m in &mut g.members {
            if m.node.state.is_terminal() || m.node.state == State::Running {
                continue;
            }
            settle_skip(
                m,
                now,
                SkipReason::SkippedByUser,
                "group skipped by user".to_string(),
            );
            g.unfinished -= 1;
            outputs.push_back(Output::Event(member_skipped(
                now,
                name,
                &stage_name,
                &g.name,
                m,
                Reason::SkippedByUser,
            )));
        }
        for (timing, gates) in [
            (GateTiming::Before, &mut g.before_gates),
            (GateTiming::After, &mut g.after_gates),
        ] {
            for (i, gate) in gates.iter_mut().enumerate() {
                let at = GateLoc {
                    stage: si as u32,
                    group: Some(gi as u32),
                    timing,
                    index: i as u32,
                };
                let ev = skip_gate(gate, now, name, &stage_name, Some(&g.name), timing);
                if let Some(ev) = ev {
                    pending.remove(&at);
                    outputs.push_back(Output::Event(ev));
                }
            }
        }
        g.phase = Phase::Done;
        g.node.state = State::Skipped;
        g.node.completed = Some(now);
        let fact = Fact::GroupSkipped {
            stage: stage_name,
            group: g.name.clone(),
            reason: Reason::SkippedByUser,
        };
        outputs.push_back(Output::Event(Event::new(now, name, fact)));
    }

    /// Marks a stage Skipped: its gates and wait too. `by_user` also covers a stage not reached.
    fn skip_stage_rest(&mut self, name: &str, si: usize, by_user: bool) {
        let now = self.now;
        let Engine { runs, outputs, .. } = self;
        let run = runs.get_mut(name).expect("run");
        let Run { stages, index, .. } = run;
        let stage = &mut stages[si];
        if matches!(stage.node.state, State::Completed | State::Skipped) {
            return;
        }
        stage.user_skipped = true;
        stage.failed = false;
        stage.node.error = None;
        let sname = stage.name.clone();
        for (timing, gates) in [
            (GateTiming::Before, &mut stage.before_gates),
            (GateTiming::After, &mut stage.after_gates),
        ] {
            for (i, gate) in gates.iter_mut().enumerate() {
                let at = GateLoc {
                    stage: si as u32,
                    group: None,
                    timing,
                    index: i as u32,
                };
                if let Some(ev) = skip_gate(gate, now, name, &sname, None, timing) {
                    index.pending.remove(&at);
                    outputs.push_back(Output::Event(ev));
                }
            }
        }
        if !matches!(stage.wait.state, State::Completed | State::Skipped) {
            stage.wait.state = State::Skipped;
            stage.wait.completed = Some(now);
        }
        stage.phase = Phase::Done;
        stage.node.state = State::Skipped;
        stage.node.completed = Some(now);
        let fact = Fact::StageSkipped {
            stage: sname,
            reason: if by_user {
                Reason::SkippedByUser
            } else {
                Reason::AlreadyAtTarget
            },
        };
        outputs.push_back(Output::Event(Event::new(now, name, fact)));
    }

    // ---------------------------------------------------------------- status

    fn render(&self, run: &Run) -> RunStatus {
        let now = self.now;
        let freeze = self.freezes.iter().find(|f| f.start <= now && now < f.end);
        let mut stages = Vec::with_capacity(run.stages.len());
        for (si, s) in run.stages.iter().enumerate() {
            let mut groups = Vec::with_capacity(s.groups.len());
            for g in &s.groups {
                let members: Vec<MemberStatus> = g
                    .members
                    .iter()
                    .enumerate()
                    .map(|(mi, m)| {
                        let waiting_on = match m.node.state {
                            State::Pending => m.pending.map(|(reason, until)| WaitingOn {
                                reason,
                                until,
                                message: m.message.clone(),
                            }),
                            State::NotStarted
                                if g.phase == Phase::Body
                                    && !g.failed
                                    && (g.ready_open.contains(&(mi as u32))
                                        || g.ready_free.contains(&(mi as u32))) =>
                            {
                                Some(if run.stopping.is_some() || !run.active() {
                                    WaitingOn {
                                        reason: Reason::Stop,
                                        until: None,
                                        message: None,
                                    }
                                } else if let Some(f) = freeze {
                                    WaitingOn {
                                        reason: Reason::Freeze,
                                        until: Some(f.end),
                                        message: Some(format!("fleet freeze \"{}\"", f.name)),
                                    }
                                } else {
                                    WaitingOn {
                                        reason: Reason::Concurrency,
                                        until: None,
                                        message: Some(format!(
                                            "{} of {} group slots and {} of {} stage slots in use",
                                            g.in_flight,
                                            g.max_concurrency,
                                            s.in_flight,
                                            s.max_concurrency
                                        )),
                                    }
                                })
                            }
                            _ => None,
                        };
                        MemberStatus {
                            name: m.name.clone(),
                            status: m.node.view(),
                            message: m.message.clone(),
                            operation_id: m.operation_id.clone(),
                            kubernetes_version: m.kubernetes_version.clone(),
                            node_images: m.node_images.clone(),
                            waiting_on,
                        }
                    })
                    .collect();
                let mut status = g.node.view();
                let gate_wait = pending_gate_wait(&g.before_gates)
                    .or_else(|| pending_gate_wait(&g.after_gates));
                let all_pending = g.phase == Phase::Body
                    && g.in_flight == 0
                    && g.unfinished > 0
                    && g.members
                        .iter()
                        .all(|m| m.node.state.is_terminal() || m.node.state == State::Pending);
                let waiting_on = if status.state == State::Running && gate_wait.is_some() {
                    status.state = State::Pending;
                    gate_wait
                } else if status.state == State::Running && all_pending {
                    status.state = State::Pending;
                    let until = members
                        .iter()
                        .filter_map(|m| m.waiting_on.as_ref().and_then(|w| w.until))
                        .min();
                    let reason = members
                        .iter()
                        .filter_map(|m| m.waiting_on.as_ref())
                        .map(|w| w.reason)
                        .next()
                        .unwrap_or(Reason::Members);
                    Some(WaitingOn {
                        reason,
                        until,
                        message: Some("every remaining member is Pending".to_string()),
                    })
                } else {
                    None
                };
                groups.push(GroupStatus {
                    name: g.name.clone(),
                    status,
                    failure_count: g.failure_count,
                    max_concurrency: g.max_concurrency,
                    max_allowed_failures: g.max_allowed_failures,
                    before_gates: gate_views(&g.before_gates, GateTiming::Before),
                    after_gates: gate_views(&g.after_gates, GateTiming::After),
                    members,
                    waiting_on,
                });
            }
            let mut status = s.node.view();
            let waiting_on = if status.state == State::Running {
                if let Some(w) = pending_gate_wait(&s.before_gates) {
                    status.state = State::Pending;
                    Some(w)
                } else if s.phase == Phase::After && s.wait.state == State::Running {
                    Some(WaitingOn {
                        reason: Reason::AfterStageWait,
                        until: s.wait_until,
                        message: None,
                    })
                } else if let Some(w) = pending_gate_wait(&s.after_gates) {
                    status.state = State::Pending;
                    Some(w)
                } else if s.phase == Phase::Body
                    && s.in_flight == 0
                    && groups.iter().any(|g| g.status.state == State::Pending)
                    && groups
                        .iter()
                        .all(|g| g.status.state.is_terminal() || g.status.state == State::Pending)
                {
                    status.state = State::Pending;
                    let until = groups
                        .iter()
                        .filter_map(|g| g.waiting_on.as_ref().and_then(|w| w.until))
                        .min();
                    let reason = groups
                        .iter()
                        .filter_map(|g| g.waiting_on.as_ref())
                        .map(|w| w.reason)
                        .next()
                        .unwrap_or(Reason::Members);
                    Some(WaitingOn {
                        reason,
                        until,
                        message: None,
                    })
                } else {
                    None
                }
            } else if s.node.state == State::NotStarted && run.active() && si > run.current {
                Some(WaitingOn {
                    reason: Reason::PreviousStage,
                    until: None,
                    message: None,
                })
            } else {
                None
            };
            stages.push(StageStatus {
                name: s.name.clone(),
                status,
                failure_count: s.failure_count,
                max_concurrency: s.max_concurrency,
                max_allowed_failures: s.max_allowed_failures,
                before_gates: gate_views(&s.before_gates, GateTiming::Before),
                after_gates: gate_views(&s.after_gates, GateTiming::After),
                after_stage_wait_status: WaitStatus {
                    status: s.wait.view(),
                    wait_duration_in_seconds: s.wait_seconds,
                },
                groups,
                waiting_on,
            });
        }
        let mut status = run.node.view();
        let waiting_on = if status.state == State::Running {
            match stages.get(run.current) {
                Some(s) if s.status.state == State::Pending => {
                    status.state = State::Pending;
                    s.waiting_on.clone()
                }
                Some(s) => s.waiting_on.clone(),
                None => None,
            }
        } else if status.state == State::Stopping {
            Some(WaitingOn {
                reason: Reason::Members,
                until: None,
                message: Some(format!("{} member upgrades still in flight", run.in_flight)),
            })
        } else {
            None
        };
        let _ = now;
        RunStatus {
            status,
            failure_count: run.failure_count,
            node_image_selection: (run.target.selection == NodeImageSelectionType::Consistent)
                .then(|| NodeImageSelectionStatus {
                    selected_node_image_versions: run.target.images.clone(),
                }),
            stages,
            waiting_on,
        }
    }

    // ---------------------------------------------------------------- helpers

    /// The state a user sees (Running shows as Pending while the current stage waits).
    fn shown_state(&self, run: &Run) -> State {
        if run.node.state == State::Running {
            self.render(run).status.state
        } else {
            run.node.state
        }
    }

    fn get_run(&self, name: &str) -> Result<&Run, Error> {
        self.runs.get(name).ok_or_else(|| not_found("run", name))
    }

    fn emit(&mut self, e: Event) {
        self.outputs.push_back(Output::Event(e));
    }
}

/// `t + secs`, saturating at the last representable instant: an after-stage wait too long to
/// end within the calendar ends never (a user can still skip it); it never panics.
fn add_seconds(t: Timestamp, secs: u64) -> Timestamp {
    i64::try_from(secs)
        .ok()
        .and_then(chrono::TimeDelta::try_seconds)
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(Timestamp::MAX_UTC)
}

fn settle_skip(m: &mut MemberRt, now: Timestamp, reason: SkipReason, message: String) {
    m.node.state = State::Skipped;
    m.node.completed = Some(now);
    m.pending = None;
    m.message = Some(message);
    m.skip_reason = Some(reason);
}

fn skip_reason(r: SkipReason) -> Reason {
    match r {
        SkipReason::AlreadyAtTarget => Reason::AlreadyAtTarget,
        SkipReason::NoConsistentImage => Reason::NoConsistentImage,
        SkipReason::SkippedByUser => Reason::SkippedByUser,
    }
}

/// `MemberSkipped` for a member just settled (its message says why).
fn member_skipped(
    now: Timestamp,
    run: &str,
    stage: &str,
    group: &str,
    m: &MemberRt,
    reason: Reason,
) -> Event {
    let fact = Fact::MemberSkipped {
        stage: stage.to_string(),
        group: group.to_string(),
        member: m.name.clone(),
        reason,
        message: m.message.clone(),
    };
    Event::new(now, run, fact)
}

/// `MemberFailed` for a member whose error was just set.
fn member_failed(
    now: Timestamp,
    run: &str,
    stage: &str,
    group: &str,
    m: &MemberRt,
    operation_id: Option<String>,
) -> Event {
    let fact = Fact::MemberFailed {
        stage: stage.to_string(),
        group: group.to_string(),
        member: m.name.clone(),
        operation_id,
        // Every caller has just set it.
        error: m.node.error.clone().unwrap_or_else(|| StatusError {
            code: ErrorCode::UpgradeFailed.to_string(),
            message: String::new(),
        }),
    };
    Event::new(now, run, fact)
}

/// Skips a gate not yet passed; the `GateSkipped` event if it was Pending (it was created).
fn skip_gate(
    gate: &mut GateRt,
    now: Timestamp,
    run: &str,
    stage: &str,
    group: Option<&str>,
    timing: GateTiming,
) -> Option<Event> {
    if gate.done() {
        return None;
    }
    let was_pending = gate.state == State::Pending;
    gate.state = State::Skipped;
    gate.completed = Some(now);
    was_pending.then(|| {
        let fact = Fact::GateSkipped {
            stage: stage.to_string(),
            group: group.map(str::to_string),
            gate_type: gate.config.gate_type,
            timing,
            // A Pending gate was created, with its id.
            gate_id: gate.id.clone().unwrap_or_default(),
        };
        Event::new(now, run, fact)
    })
}

fn pending_gate_wait(gates: &[GateRt]) -> Option<WaitingOn> {
    gates
        .iter()
        .find(|g| g.state == State::Pending)
        .map(|g| WaitingOn {
            reason: Reason::Gate,
            until: g.absolute_start,
            message: Some(match (g.config.gate_type, &g.config.display_name) {
                (GateType::Approval, Some(d)) => {
                    format!("approval \"{d}\" ({})", g.id.clone().unwrap_or_default())
                }
                (GateType::Approval, None) => {
                    format!("approval ({})", g.id.clone().unwrap_or_default())
                }
                (GateType::ScheduledStart, _) => {
                    format!("scheduled start ({})", g.id.clone().unwrap_or_default())
                }
            }),
        })
}

fn gate_views(gates: &[GateRt], timing: GateTiming) -> Vec<GateStatus> {
    gates
        .iter()
        .map(|g| GateStatus {
            gate_id: g.id.clone(),
            display_name: g.config.display_name.clone(),
            gate_type: g.config.gate_type,
            timing,
            status: NodeStatus {
                state: g.state,
                start_time: g.created,
                completed_time: g.completed,
                error: None,
            },
            absolute_start_time: g.absolute_start,
            completed_by: g.by.clone(),
        })
        .collect()
}

fn gate_mut<'a>(stages: &'a mut [StageRt], loc: &GateLoc) -> &'a mut GateRt {
    let stage = &mut stages[loc.stage as usize];
    let list = match (loc.group, loc.timing) {
        (None, GateTiming::Before) => &mut stage.before_gates,
        (None, GateTiming::After) => &mut stage.after_gates,
        (Some(g), GateTiming::Before) => &mut stage.groups[g as usize].before_gates,
        (Some(g), GateTiming::After) => &mut stage.groups[g as usize].after_gates,
    };
    &mut list[loc.index as usize]
}

fn gate_ref<'a>(run: &'a Run, loc: &GateLoc) -> Option<&'a GateRt> {
    let stage = run.stages.get(loc.stage as usize)?;
    let list = match (loc.group, loc.timing) {
        (None, GateTiming::Before) => &stage.before_gates,
        (None, GateTiming::After) => &stage.after_gates,
        (Some(g), GateTiming::Before) => &stage.groups.get(g as usize)?.before_gates,
        (Some(g), GateTiming::After) => &stage.groups.get(g as usize)?.after_gates,
    };
    list.get(loc.index as usize)
}

fn find_group(run: &Run, name: &str) -> Option<(usize, usize)> {
    run.index.group(name)
}

/// Whether the gate at `loc` is at the position `sel` names (stage, group, timing; any where
/// left out, except that no group means a stage's own gate).
fn at_position(run: &Run, loc: &GateLoc, sel: &GateSelector) -> bool {
    let s = &run.stages[loc.stage as usize];
    sel.stage.as_ref().is_none_or(|n| &s.name == n)
        && match (&sel.group, loc.group) {
            (Some(n), Some(g)) => &s.groups[g as usize].name == n,
            (None, None) => true,
            _ => false,
        }
        && sel.timing.is_none_or(|t| t == loc.timing)
}

/// The first gate (in tree order) of stage `si`'s own gates (`group` None) or of group `group`,
/// with timing `timing` (any if None).
fn first_gate_in(
    run: &Run,
    si: usize,
    group: Option<usize>,
    timing: Option<GateTiming>,
) -> Option<GateLoc> {
    let s = &run.stages[si];
    let (before, after) = match group {
        None => (&s.before_gates, &s.after_gates),
        Some(gi) => (&s.groups[gi].before_gates, &s.groups[gi].after_gates),
    };
    [(GateTiming::Before, before), (GateTiming::After, after)]
        .into_iter()
        .find(|(t, gates)| timing.is_none_or(|x| x == *t) && !gates.is_empty())
        .map(|(t, _)| GateLoc {
            stage: si as u32,
            group: group.map(|g| g as u32),
            timing: t,
            index: 0,
        })
}

/// The gate `sel` names: by id, or at a position, preferring a Pending gate there, otherwise
/// the first there (its state explains a refusal). O(log n) in the run's stages and gates.
fn find_gate(run: &Run, sel: &GateSelector) -> Result<GateLoc, Error> {
    let found = match &sel.id {
        Some(id) => run.index.gates.get(id).cloned(),
        None => {
            // Pending gates are those of the stage the run is at, so this scan is short.
            let pending = run
                .index
                .pending
                .iter()
                .find(|loc| at_position(run, loc, sel))
                .cloned();
            pending.or_else(|| match (&sel.stage, &sel.group) {
                (stage, Some(g)) => run.index.groups.get(g).and_then(|v| {
                    v.iter()
                        .filter(|(si, _)| {
                            stage
                                .as_ref()
                                .is_none_or(|n| &run.stages[*si as usize].name == n)
                        })
                        .find_map(|(si, gi)| {
                            first_gate_in(run, *si as usize, Some(*gi as usize), sel.timing)
                        })
                }),
                (Some(n), None) => run.index.stages.get(n).and_then(|v| {
                    v.iter()
                        .find_map(|si| first_gate_in(run, *si as usize, None, sel.timing))
                }),
                (None, None) => {
                    let k = match sel.timing {
                        None => 0,
                        Some(GateTiming::Before) => 1,
                        Some(GateTiming::After) => 2,
                    };
                    run.index.first_stage_gate[k]
                        .and_then(|si| first_gate_in(run, si as usize, None, sel.timing))
                }
            })
        }
    };
    let Some(loc) = found else {
        let what = match (&sel.id, &sel.stage, &sel.group, sel.timing) {
            (Some(id), ..) => format!("id \"{id}\""),
            (None, s, g, t) => format!(
                "stage {}{}{}",
                s.as_deref().unwrap_or("(any)"),
                g.as_ref()
                    .map(|g| format!(", group {g}"))
                    .unwrap_or_default(),
                t.map(|t| format!(", timing {t:?}")).unwrap_or_default()
            ),
        };
        let hint = if run.started() {
            ""
        } else {
            " (the run has not started; gates exist once it reaches them)"
        };
        return Err(Error::new(
            ErrorCode::NotFound,
            format!("run \"{}\" has no gate at {what}{hint}", run.spec.name),
        ));
    };
    Ok(loc)
}

fn describe_gate(run: &Run, loc: &GateLoc) -> String {
    let s = &run.stages[loc.stage as usize];
    match loc.group {
        Some(g) => format!(
            "{:?} group \"{}\" (stage \"{}\")",
            loc.timing, s.groups[g as usize].name, s.name
        ),
        None => format!("{:?} stage \"{}\"", loc.timing, s.name),
    }
}

fn check_skip(run: &Run, t: &SkipTarget) -> Result<(), Error> {
    let rn = &run.spec.name;
    let refuse = |what: String| Err(Error::new(ErrorCode::InvalidState, what));
    match t {
        SkipTarget::Member(n) => {
            let Some(&(si, gi, mi)) = run.member_index.get(n) else {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!("skip target {t}: member \"{n}\" is not in run \"{rn}\""),
                ));
            };
            let st = run.stages[si as usize].groups[gi as usize].members[mi as usize]
                .node
                .state;
            match st {
                State::Running => refuse(format!("skip target {t}: member \"{n}\" is Running (its upgrade is in flight); a member in flight cannot be skipped")),
                s if s.is_terminal() => refuse(format!("skip target {t}: member \"{n}\" is already {s:?}")),
                _ => Ok(()),
            }
        }
        SkipTarget::Group(n) => {
            let Some((si, gi)) = find_group(run, n) else {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!("skip target {t}: group \"{n}\" is not in run \"{rn}\""),
                ));
            };
            let st = run.stages[si].groups[gi].node.state;
            if matches!(st, State::Completed | State::Skipped) {
                return refuse(format!("skip target {t}: group \"{n}\" is already {st:?}"));
            }
            Ok(())
        }
        SkipTarget::Stage(n) => {
            let Some(s) = run.index.stage(n).map(|si| &run.stages[si]) else {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!("skip target {t}: stage \"{n}\" is not in run \"{rn}\""),
                ));
            };
            if matches!(s.node.state, State::Completed | State::Skipped) {
                return refuse(format!(
                    "skip target {t}: stage \"{n}\" is already {:?}",
                    s.node.state
                ));
            }
            Ok(())
        }
        SkipTarget::AfterStageWait(n) => {
            let Some(s) = run.index.stage(n).map(|si| &run.stages[si]) else {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!("skip target {t}: stage \"{n}\" is not in run \"{rn}\""),
                ));
            };
            if matches!(s.wait.state, State::Completed | State::Skipped) {
                return refuse(format!(
                    "skip target {t}: the after-stage wait of stage \"{n}\" is already {:?}",
                    s.wait.state
                ));
            }
            Ok(())
        }
    }
}

fn target_kind(t: &SkipTarget) -> &'static str {
    match t {
        SkipTarget::Member(_) => "member",
        SkipTarget::Group(_) => "group",
        SkipTarget::Stage(_) | SkipTarget::AfterStageWait(_) => "stage",
    }
}

fn timer_run(t: &Timer) -> &str {
    match t {
        Timer::Member { loc, .. } => &loc.run,
        Timer::Gate { run, .. } | Timer::StageWait { run, .. } | Timer::Freeze { run } => run,
    }
}

fn not_found(kind: &str, name: &str) -> Error {
    Error::new(
        ErrorCode::NotFound,
        format!("{kind} \"{name}\" does not exist"),
    )
}

fn invalid_state(run: &str, state: State, action: &str, hint: &str) -> Error {
    Error::new(
        ErrorCode::InvalidState,
        format!("cannot {action} run \"{run}\": it is {state:?}; {hint}"),
    )
}
