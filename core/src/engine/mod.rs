//! The engine: one value owning the fleet (members, strategies, runs, gates, catalog, freezes).
//! This file is the hall: the [`Engine`] value, its getters, and the one way in and out.
//!
//! Method families, in the order a host uses them:
//! - getters: [`Engine::now`], [`Engine::run_status`], [`Engine::run_state`], [`Engine::member`], ...
//! - input: [`Engine::handle_input`] (commands, observations, timeouts): every due timer fires
//!   first, then the input is applied; each changes state and touches runs, and
//!   `settle` (in `progress`) drives the touched runs after each;
//! - output: [`Engine::poll_output`] (drain until `None` after every input) and
//!   [`Engine::poll_timeout`] (the next wakeup);
//! - [`Engine::snapshot`] / [`Engine::restore`].
//!
//! The rooms, one concept each: `input` (what comes in), `tree` (a run's runtime tree),
//! `timers` (the timer table), `commands` and `observations` (the handlers), `progress` (the run
//! loop), `schedule` (which member starts, and whether it may now), `gates`, `skips`,
//! `failures` (thresholds, the end of a drain) and `status` (the tree a user sees).

mod build;
mod checks;
mod commands;
mod failures;
mod gates;
mod input;
mod observations;
mod profiles;
mod progress;
mod schedule;
mod skips;
mod status;
mod timers;
mod tree;

pub use input::{Command, GateSelector, Input, Observation};
use status::Render;
pub use status::RunStatusView;
use timers::{Timer, Timers};
use tree::{MemberLoc, MemberRecord, MemberRt, Run, RunIndex};

use crate::catalog::Catalog;
use crate::error::{Error, ErrorCode};
use crate::event::{Event, Fact, Output, Reason, Wakeup};
use crate::model::{
    AutoUpgradeProfile, Freeze, Member, ReleaseCatalog, SkipTarget, Timestamp, UpdateRunSpec,
    UpdateStrategy,
};
use crate::plan;
use crate::profile::{Generation, ProfilePlan, ProfileRt, ProfileStatus};
use crate::state::{RunStatus, State, StatusError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

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
    /// Measurements asked of the host and not reported yet: id → where, which check.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    measurements: BTreeMap<String, (tree::CheckPlace, u32)>,
    timers: Timers,
    outputs: VecDeque<Output>,
    /// Auto-upgrade profiles, by name.
    #[serde(default)]
    profiles: BTreeMap<String, ProfileRt>,
    /// Something a profile follows changed (a release, a member joined, a generated run ended,
    /// a profile changed): the profiles look again after the input ([`Engine::settle_profiles`]).
    #[serde(default)]
    profiles_dirty: bool,
    /// Runs an input touched, in the order touched: what [`Engine::settle`] drives next.
    /// Empty between inputs, so not part of a snapshot.
    #[serde(skip)]
    touched: Vec<String>,
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
            measurements: BTreeMap::new(),
            timers: Timers::default(),
            profiles: BTreeMap::new(),
            profiles_dirty: false,
            touched: Vec::new(),
            outputs: VecDeque::new(),
        }
    }

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

    /// An auto-upgrade profile and its status.
    pub fn profile(&self, name: &str) -> Option<(&AutoUpgradeProfile, &ProfileStatus)> {
        self.profiles.get(name).map(|p| (&p.spec, &p.status))
    }

    /// Every auto-upgrade profile with its status, by name.
    pub fn profiles(&self) -> impl Iterator<Item = (&AutoUpgradeProfile, &ProfileStatus)> {
        self.profiles.values().map(|p| (&p.spec, &p.status))
    }

    /// What [`crate::Command::GenerateUpdateRun`] would do for `profile` now: return the run
    /// that exists for the current target, create a new one (and its name), or nothing (also for
    /// a disabled profile: asked, it generates, as Azure's does). Refused for a profile that does
    /// not exist.
    pub fn generation_preview(&self, profile: &str) -> Result<Generation, Error> {
        self.preview_generation(profile)
    }

    /// What auto-upgrade profile `profile` would generate now, and that run's plan (nothing
    /// changes). A disabled profile shows what it would generate once enabled.
    pub fn profile_plan(&self, profile: &str) -> Result<ProfilePlan, Error> {
        self.plan_profile(profile)
    }

    /// The profile that generated `run`, and the versions it targets.
    pub fn run_generated_by(&self, run: &str) -> Option<(&str, &[String])> {
        let g = self.runs.get(run)?.generated.as_ref()?;
        Some((g.profile.as_str(), g.versions.as_slice()))
    }

    /// Member leases: member → the run that holds it (one upgrade authority, spec section 9).
    pub fn leases(&self) -> &BTreeMap<String, String> {
        &self.leases
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
        let channel = r.target.channel;
        plan::plan_generated(
            &r.spec,
            channel,
            &r.strategy,
            &members,
            &self.catalog,
            self.now,
        )
    }

    /// The status tree of a run (for a run not started yet: a preview over the current fleet).
    pub fn run_status(&self, name: &str) -> Result<RunStatus, Error> {
        let run = self.get_run(name)?;
        if !run.started() {
            let mut preview = run.clone();
            let built = self.build_tree(&mut preview, self.now);
            if built.is_ok() && !preview.pending_skips.is_empty() {
                return Ok(self.preview_with_skips(name, preview));
            }
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

    fn render(&self, run: &Run) -> RunStatus {
        Render::new(run, &self.freezes, self.now).tree()
    }

    /// The state a user sees (Running shows as Pending while the current stage waits).
    fn shown_state(&self, run: &Run) -> State {
        if run.node.state == State::Running {
            Render::new(run, &self.freezes, self.now)
                .head()
                .status
                .state
        } else {
            run.node.state
        }
    }

    /// The status tree of a started run as it serializes, without building it: each member's
    /// status is made as it is written (a run of 100,000 members is not held twice). Writes
    /// exactly what [`Engine::run_status`] serializes to; a run not started yet (a preview) is
    /// rendered whole.
    pub fn run_status_view(&self, name: &str) -> Result<RunStatusView<'_>, Error> {
        let run = self.get_run(name)?;
        Ok(if run.started() {
            RunStatusView(status::View::Live(Render::new(
                run,
                &self.freezes,
                self.now,
            )))
        } else {
            RunStatusView(status::View::Rendered(Box::new(self.run_status(name)?)))
        })
    }

    /// A run not started yet, its tree built, with the skips asked for so far shown as done
    /// (Skipped, at the time each was asked for), as Azure shows them; the run stays
    /// NotStarted and nothing here changes (the skips are applied to a copy).
    fn preview_with_skips(&self, name: &str, preview: Run) -> RunStatus {
        let mut copy = self.clone();
        let skips: Vec<(SkipTarget, Timestamp)> = preview
            .pending_skips
            .iter()
            .cloned()
            .zip(
                preview
                    .pending_skip_times
                    .iter()
                    .copied()
                    .chain(std::iter::repeat(self.now)),
            )
            .collect();
        copy.runs.insert(name.to_string(), preview);
        for (t, at) in &skips {
            copy.now = *at;
            copy.apply_skip(name, t);
        }
        copy.render(&copy.runs[name])
    }

    /// The whole engine state as JSON, `{"formatVersion": 1, "engine": {...}}` (see
    /// [`crate::snapshot`]); [`Engine::restore`] gives it back. Take it after draining outputs
    /// (undrained outputs are kept too, so nothing is lost either way).
    pub fn snapshot(&self) -> String {
        crate::snapshot::write(self)
    }

    /// [`Engine::snapshot`] appended to `out` (the same text): give `out` the capacity the
    /// state needs and it is written without growing its buffer.
    pub fn snapshot_into(&self, out: &mut String) {
        crate::snapshot::write_into(self, out)
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

    /// The next output; drain until `None` after every input.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the engine must next be woken with [`Input::Timeout`], and why.
    pub fn poll_timeout(&self) -> Option<Wakeup> {
        self.timers.next()
    }

    /// Handles one input at `now`. Time never goes backwards: an earlier `now` counts as the
    /// engine's current time. Due timers fire first, so the input sees an up-to-date engine.
    /// A refused command returns the error and changes nothing.
    pub fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error> {
        let now = now.max(self.now);
        // Each due timer fires at its own instant (a host that wakes late still decides as of
        // the instant asked for), in time order; then the clock is the input's.
        while let Some((at, timer)) = self.timers.pop_due(now) {
            self.now = at.max(self.now);
            self.fire(timer);
            self.settle();
            self.settle_profiles();
        }
        self.now = now;
        let result = match input {
            Input::Timeout => Ok(()),
            Input::Command(c) => self.handle_command(c),
            Input::Observation(o) => self.handle_observation(o),
        };
        self.settle();
        self.settle_profiles();
        result
    }

    /// After the runs settle: while something a profile follows changed, the profiles look
    /// again (generating, starting or superseding runs) and the runs they touched settle.
    /// Ends: a profile generates a run only for a target it has not acted on, or once per
    /// catch-up, so a second look finds nothing new.
    fn settle_profiles(&mut self) {
        while std::mem::take(&mut self.profiles_dirty) {
            self.reconcile_profiles();
            self.settle();
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

    /// What a due timer means: a state change, like an input's (settled after it).
    fn fire(&mut self, timer: Timer) {
        match timer {
            Timer::Member { loc, .. } => {
                self.requeue(&loc);
                self.touch(&loc.run);
            }
            Timer::Gate { run, gate } => self.open_scheduled_gate(&run, &gate),
            Timer::StageWait { run, stage } => self.end_wait(&run, stage as usize),
            Timer::Freeze { run } => {
                let Some(r) = self.runs.get_mut(&run) else {
                    return;
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
                self.touch(&run);
            }
            Timer::Release => self.profiles_dirty = true,
            Timer::Check { place, index } => {
                self.check_due(&place, index);
                self.touch(place.run());
            }
        }
    }

    fn get_run(&self, name: &str) -> Result<&Run, Error> {
        self.runs.get(name).ok_or_else(|| not_found("run", name))
    }

    fn emit(&mut self, e: Event) {
        let ended = matches!(
            e.fact,
            Fact::RunCompleted
                | Fact::RunSkipped
                | Fact::RunStopped { .. }
                | Fact::RunFailed { .. }
        );
        // A generated run that ends frees its profile for the target that waited on it.
        if ended && self.runs.get(&e.run).is_some_and(|r| r.generated.is_some()) {
            self.profiles_dirty = true;
        }
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

fn invalid_state(run: &str, state: State, action: &str, hint: &str) -> Error {
    Error::new(
        ErrorCode::InvalidState,
        format!("cannot {action} run \"{run}\": it is {state:?}; {hint}"),
    )
}

fn not_found(kind: &str, name: &str) -> Error {
    Error::new(
        ErrorCode::NotFound,
        format!("{kind} \"{name}\" does not exist"),
    )
}
