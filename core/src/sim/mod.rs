//! The simulator: a scenario (fleet, releases, freezes, strategies, a run and/or auto-upgrade
//! profiles, operator actions) run through the real engine on a virtual clock, against a
//! simulated fleet that answers every upgrade after the member's `upgradeMinutes`, failing its
//! first `failAttempts` attempts. Runs the profiles generate run on the same clock, and the
//! report has them all.
//!
//! Pure and deterministic like the engine: the same scenario (and seed) gives the same report,
//! natively and in Wasm. The clock jumps from one instant to the next that matters: the
//! engine's next wakeup, the next upgrade completion, the next member joining or the next
//! operator action. At one instant, upgrade results are delivered first, then members join,
//! then operator actions, in file order; the engine fires its own due timers before each.
//! A scenario with a run and no profiles ends when its run ended and nothing is in flight; one
//! with profiles ends when nothing is left to happen (or at `until`).

mod fleet;
mod report;
mod scenario;
mod text;

pub use fleet::{Fleet, SharedFleet, SimulatedFleet};
pub use report::{RunFacts, RunReport, SimulationReport, Summary};
pub use scenario::{
    implicit_catalog, Action, ActionKind, Behavior, GateRef, NamedStrategy, Scenario,
};
pub use scenario::{ScenarioMember, ScenarioRun, ScriptedHealth};
pub use text::{render_text, timeline_line};

pub use crate::drive::EngineDriver;

use crate::drive::{deliver, Surroundings};
use crate::engine::{Command, Engine, GateSelector, Input, RunStatusView};
use crate::error::Error;
use crate::event::{Event, Fact, HostCommand, Output};
use crate::model::{GateType, Member, Timestamp};
use crate::state::State;
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::Serialize;
use std::cell::RefCell;

/// The plan of a scenario at its start (`waverun plan`): its run's plan (warnings named by their
/// path in the file, under `run`) and what each profile would generate now. Errors only when
/// the scenario is invalid.
pub fn plan_scenario(scenario: &Scenario) -> Result<crate::profile::ScenarioPlan, Error> {
    let sim = Simulation::new(scenario)?;
    let engine = sim.engine();
    let plan = match scenario.run_name() {
        Some(run) => {
            let mut plan = engine.plan(run)?;
            for w in &mut plan.warnings {
                w.path = crate::validate::join("run", &w.path);
            }
            Some(plan)
        }
        None => None,
    };
    let profiles = scenario
        .profiles
        .iter()
        .map(|p| engine.profile_plan(&p.name))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(crate::profile::ScenarioPlan { plan, profiles })
}

/// Runs a scenario to its end (the run finished and nothing in flight, nothing left to happen,
/// or `until`). Errors only when the scenario itself is invalid.
pub fn simulate(scenario: &Scenario) -> Result<SimulationReport, Error> {
    let mut sim = Simulation::new(scenario)?;
    sim.run_to_end();
    Ok(sim.into_report())
}

/// [`simulate`], the scenario consumed: its members move into the engine as it is set up
/// ([`Simulation::from_scenario`]), so that a large fleet is never held twice. The same report.
pub fn simulate_owned(scenario: Scenario) -> Result<SimulationReport, Error> {
    let mut sim = Simulation::from_scenario(scenario)?;
    sim.run_to_end();
    Ok(sim.into_report())
}

/// A simulation in progress; [`simulate`] runs one to the end. Tests use [`Simulation::step`]
/// to check invariants after every step.
///
/// `F` is where the upgrades run: the simulation's own [`SimulatedFleet`], or a [`SharedFleet`]
/// an engine behind a host ABI submits to itself ([`Simulation::with_fleet`]).
#[derive(Clone)]
pub struct Simulation<E: EngineDriver = Engine, F: Fleet = SimulatedFleet> {
    engine: E,
    world: World<F>,
    /// The scenario's own run.
    run: Option<String>,
    actions: Vec<Action>,
    next_action: usize,
    /// Members that join later, in time order.
    joins: Vec<(Timestamp, Member)>,
    next_join: usize,
    until: Timestamp,
    now: Timestamp,
    done: bool,
    /// The runs the report shows, as known from the timeline entries already handed out by
    /// [`Simulation::stream_report`] (`(run, profile)`); the entries still in the timeline add
    /// to it when the report is made.
    reported_runs: Vec<(String, Option<String>)>,
}

/// The engine's surroundings in a simulation: the simulated fleet takes the upgrades, the
/// timeline records the events, and with `autoApprove` every Approval gate is approved as soon
/// as it is created.
#[derive(Clone)]
struct World<F> {
    fleet: F,
    auto_approve: bool,
    /// Several runs (profiles): timeline entries keep their run.
    many_runs: bool,
    timeline: Vec<Event>,
}

impl<F: Fleet> Surroundings for World<F> {
    fn output(&mut self, now: Timestamp, output: Output, answers: &mut Vec<Input>) {
        match output {
            Output::Event(mut ev) => {
                if ev.fact == Fact::RunCreated {
                    return;
                }
                if let (
                    true,
                    Fact::GateCreated {
                        gate_type: GateType::Approval,
                        gate_id,
                        ..
                    },
                ) = (self.auto_approve, &ev.fact)
                {
                    answers.push(Input::Command(Command::CompleteGate {
                        run: ev.run.clone(),
                        gate: GateSelector {
                            id: Some(gate_id.clone()),
                            stage: None,
                            group: None,
                            timing: None,
                        },
                        by: Some("autoApprove".to_string()),
                    }));
                }
                if !self.many_runs {
                    ev.run.clear();
                }
                self.timeline.push(ev);
            }
            Output::Command(HostCommand::StartUpgrade(op)) => self.fleet.submit(&op, now),
            // Measured at once, as the scenario scripts it (a pass where it says nothing).
            Output::Command(HostCommand::MeasureCheck(req)) => {
                let m = self.fleet.measure(&req, now);
                answers.push(Input::Observation(
                    crate::engine::Observation::CheckMeasured {
                        measurement_id: req.measurement_id,
                        values: m.values,
                        verdict: m.verdict,
                        message: m.message,
                    },
                ));
            }
        }
    }
}

impl Simulation<Engine> {
    /// Validates the scenario and sets up a native engine and the simulated fleet at `start`.
    pub fn new(scenario: &Scenario) -> Result<Simulation, Error> {
        Simulation::with_engine(scenario, Engine::new(scenario.start))
    }

    /// [`Simulation::new`], the scenario consumed: each member moves into the engine
    /// ([`Scenario::into_setup_commands`]) instead of being copied.
    pub fn from_scenario(scenario: Scenario) -> Result<Simulation, Error> {
        let (engine, fleet) = (Engine::new(scenario.start), SimulatedFleet::new(&scenario));
        Simulation::with_fleet_owned(scenario, engine, fleet)
    }

    /// The engine (for inspection).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Continues an engine that is already set up (a copy of a live one: the forecast) from
    /// `now` on `fleet`, following `run` until it ends or `until`. With `auto_approve`, every
    /// Approval gate, pending now or created later, is approved as soon as it is reached; with
    /// `start`, the run is started now.
    pub fn resume(
        mut engine: Engine,
        fleet: SimulatedFleet,
        run: &str,
        now: Timestamp,
        until: Timestamp,
        auto_approve: bool,
        start: bool,
    ) -> Simulation {
        // Events the copy had not handed out yet belong to the live engine, not to this run.
        while engine.poll_output().is_some() {}
        // Measurements the live engine awaits are answered now, as the fleet measures them.
        let awaited: Vec<String> = engine
            .measurements_in_flight()
            .map(|(id, _)| id.to_string())
            .collect();
        let mut actions = Vec::new();
        if start {
            actions.push(Action::new(now, ActionKind::Start));
        }
        if auto_approve {
            if let Ok(status) = engine.run_status(run) {
                for gate in pending_approvals(&status) {
                    actions.push(Action {
                        gate: Some(GateRef {
                            stage: None,
                            group: None,
                            timing: None,
                            id: Some(gate),
                        }),
                        by: Some("forecast".to_string()),
                        ..Action::new(now, ActionKind::Approve)
                    });
                }
            }
        }
        let mut sim = Simulation {
            engine,
            world: World {
                fleet,
                auto_approve,
                many_runs: false,
                timeline: Vec::new(),
            },
            run: Some(run.to_string()),
            actions,
            next_action: 0,
            joins: Vec::new(),
            next_join: 0,
            until,
            now,
            done: false,
            reported_runs: vec![(run.to_string(), None)],
        };
        for id in awaited {
            let answer = Input::Observation(crate::engine::Observation::CheckMeasured {
                measurement_id: id,
                values: None,
                verdict: Some(crate::health::Verdict::Pass),
                message: Some("assumed to pass (forecast)".to_string()),
            });
            let _ = deliver(&mut sim.engine, &mut sim.world, now, answer);
        }
        sim
    }
}

/// The gate ids of a run's Approval gates that are Pending now.
fn pending_approvals(status: &crate::state::RunStatus) -> Vec<String> {
    let mut out = Vec::new();
    let mut take = |gates: &[crate::state::GateStatus]| {
        for g in gates {
            // An inconclusive HealthCheck gate waits for a person too.
            let for_person = matches!(g.gate_type, GateType::Approval | GateType::HealthCheck);
            if for_person && g.status.state == State::Pending {
                out.extend(g.gate_id.clone());
            }
        }
    };
    for s in &status.stages {
        take(&s.before_gates);
        for g in &s.groups {
            take(&g.before_gates);
            take(&g.after_gates);
        }
        take(&s.after_gates);
    }
    out
}

impl<F: Fleet> Simulation<Engine, F> {
    /// The report as a value that runs the simulation to its end while it is serialized: the
    /// timeline is written entry by entry as the simulation steps, never held whole (a
    /// 100,000-member rollout's is over 200,000 events), then each run's status tree member
    /// by member ([`Engine::run_status_view`]), then the summary. Serializes exactly as the
    /// report of [`Simulation::into_report`] after [`Simulation::run_to_end`].
    pub fn stream_report(&mut self) -> StreamedReport<'_, F> {
        StreamedReport(RefCell::new(self))
    }
}

impl<E: EngineDriver> Simulation<E> {
    /// Validates the scenario and sets up `engine` (empty, its clock at `start`) and the
    /// simulated fleet, which takes the engine's `StartUpgrade` outputs.
    pub fn with_engine(scenario: &Scenario, engine: E) -> Result<Simulation<E>, Error> {
        Simulation::with_fleet(scenario, engine, SimulatedFleet::new(scenario))
    }
}

impl<E: EngineDriver, F: Fleet> Simulation<E, F> {
    /// Validates the scenario and sets up `engine` (empty, its clock at `start`) on `fleet`,
    /// which should behave as the scenario says ([`SharedFleet::new`]): the engine's host may
    /// submit to it directly, the simulation takes results from it as its clock moves.
    pub fn with_fleet(scenario: &Scenario, engine: E, fleet: F) -> Result<Simulation<E, F>, Error> {
        Simulation::with_fleet_owned(scenario.clone(), engine, fleet)
    }

    /// [`Simulation::with_fleet`], the scenario consumed: its members move into the engine.
    pub fn with_fleet_owned(
        mut scenario: Scenario,
        mut engine: E,
        fleet: F,
    ) -> Result<Simulation<E, F>, Error> {
        scenario.validate()?;
        let start = scenario.start;
        let joins = scenario
            .joins()
            .into_iter()
            .map(|(at, i)| (at, scenario.members[i].member()))
            .collect();
        let world = World {
            fleet,
            auto_approve: scenario.auto_approve,
            many_runs: !scenario.profiles.is_empty(),
            timeline: Vec::new(),
        };
        let run = scenario.run_name().map(str::to_string);
        let actions = std::mem::take(&mut scenario.actions);
        let until = scenario.horizon();
        for (path, cmd) in scenario.into_setup_commands() {
            engine
                .handle_input(start, Input::Command(cmd))
                .map_err(|e| prefix(e, &path))?;
        }
        let reported_runs = run.iter().map(|r| (r.clone(), None)).collect();
        let mut sim = Simulation {
            engine,
            world,
            run,
            actions,
            next_action: 0,
            joins,
            next_join: 0,
            until,
            now: start,
            done: false,
            reported_runs,
        };
        // Creation events are bookkeeping, not part of the run's timeline.
        while sim.engine.poll_output().is_some() {}
        Ok(sim)
    }

    /// The engine driver.
    pub fn driver(&mut self) -> &mut E {
        &mut self.engine
    }

    /// The simulated fleet (for inspection).
    pub fn fleet(&self) -> &F {
        &self.world.fleet
    }

    /// The virtual clock.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Events so far.
    pub fn timeline(&self) -> &[Event] {
        &self.world.timeline
    }

    /// Whether the simulation has ended.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Hands the engine's pending outputs to the simulated world (and delivers its answers),
    /// as after every input; for a driver whose engine was swapped between inputs.
    pub fn drain(&mut self) {
        crate::drive::drain(&mut self.engine, &mut self.world, self.now);
    }

    /// Runs until the end.
    pub fn run_to_end(&mut self) {
        while self.step() {}
    }

    /// Processes everything due at the current instant, then moves the clock to the next
    /// instant that matters. Returns `false` once the simulation has ended.
    pub fn step(&mut self) -> bool {
        if self.done {
            return false;
        }
        let now = self.now;
        // 1. Upgrade results due now.
        for obs in self.world.fleet.take_due(now) {
            let r = deliver(
                &mut self.engine,
                &mut self.world,
                now,
                Input::Observation(obs),
            );
            debug_assert!(r.is_ok());
        }
        // 2. Members joining now.
        while let Some((at, member)) = self.joins.get(self.next_join) {
            if *at > now {
                break;
            }
            let member = member.clone();
            self.next_join += 1;
            let command = Command::UpsertMember { member };
            let r = deliver(
                &mut self.engine,
                &mut self.world,
                now,
                Input::Command(command),
            );
            debug_assert!(r.is_ok());
        }
        // 3. Operator actions due now.
        while let Some(a) = self.actions.get(self.next_action) {
            if a.at > now {
                break;
            }
            let a = a.clone();
            self.next_action += 1;
            let command = a.command(self.run.as_deref().unwrap_or_default());
            // What the input's due timers did comes first: it may be why the action is refused.
            let result = deliver(
                &mut self.engine,
                &mut self.world,
                now,
                Input::Command(command),
            );
            if let Err(e) = result {
                let fact = Fact::ActionRejected {
                    action: serde_json::to_value(&a).expect("action serialises"),
                    error: crate::state::StatusError {
                        code: e.code.to_string(),
                        message: e.message.clone(),
                    },
                };
                // With profiles, the entry names the run the action was for.
                let run = match (self.world.many_runs, a.kind) {
                    (true, ActionKind::GenerateUpdateRun) | (false, _) => "",
                    (true, _) => a.run.as_deref().or(self.run.as_deref()).unwrap_or_default(),
                };
                self.world.timeline.push(Event::new(now, run, fact));
            }
        }
        // 4. Engine timers due now.
        let _ = deliver(&mut self.engine, &mut self.world, now, Input::Timeout);

        // With profiles, runs may still be generated: the simulation goes on while anything is
        // left to happen.
        let finished = !self.world.many_runs
            && self.run.as_deref().is_some_and(|run| {
                self.engine.run_state(run).is_some_and(|s| {
                    matches!(
                        s,
                        State::Completed | State::Failed | State::Skipped | State::Stopped
                    )
                })
            })
            && self.world.fleet.idle();
        let actions_left = self.next_action < self.actions.len();
        if finished && !actions_left {
            self.done = true;
            return false;
        }
        let next = [
            self.engine.next_wakeup(),
            self.world.fleet.next_completion(),
            self.actions.get(self.next_action).map(|a| a.at),
            self.joins.get(self.next_join).map(|(at, _)| *at),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) if t <= self.until => {
                self.now = t.max(now);
                true
            }
            _ => {
                self.done = true;
                false
            }
        }
    }

    /// The report as it stands: the scenario's run, and with profiles every run (the scenario's
    /// first, then the generated ones in the order they were generated; superseded ones are
    /// gone), with the summary over all of them.
    pub fn report(&mut self) -> SimulationReport {
        self.report_with(self.world.timeline.clone())
    }

    /// The report, the simulation consumed: its timeline moves into the report instead of
    /// being copied (a 100,000-member rollout has some 200,000 events).
    pub fn into_report(mut self) -> SimulationReport {
        self.take_report()
    }

    /// [`Simulation::into_report`], the simulation kept (its timeline is left empty): for a
    /// caller that decides itself when, or whether, the engine is dropped.
    pub fn take_report(&mut self) -> SimulationReport {
        let timeline = std::mem::take(&mut self.world.timeline);
        self.report_with(timeline)
    }

    /// Takes the timeline's entries so far out of the simulation (for [`StreamedReport`]),
    /// remembering the runs they generated or deleted.
    fn hand_out_timeline(&mut self) -> Vec<Event> {
        let entries = std::mem::take(&mut self.world.timeline);
        self.note_runs(&entries);
        entries
    }

    fn note_runs(&mut self, entries: &[Event]) {
        if !self.world.many_runs {
            return;
        }
        let names = &mut self.reported_runs;
        for e in entries {
            match &e.fact {
                Fact::RunGenerated { profile, .. } if !names.iter().any(|n| n.0 == e.run) => {
                    names.push((e.run.clone(), Some(profile.clone())));
                }
                Fact::RunDeleted => names.retain(|n| n.0 != e.run),
                _ => {}
            }
        }
    }

    fn report_with(&mut self, timeline: Vec<Event>) -> SimulationReport {
        let handed_out = self.reported_runs.clone();
        self.note_runs(&timeline);
        let names = std::mem::replace(&mut self.reported_runs, handed_out);
        let mut runs = Vec::new();
        for (name, profile) in names {
            if let Ok(status) = self.engine.run_status(&name) {
                runs.push(RunReport {
                    name,
                    auto_upgrade_profile_name: profile,
                    status,
                });
            }
        }
        let summary = Summary::of(&runs, self.run.as_deref());
        let (run, runs) = match &self.run {
            // With profiles the scenario's run is in both places.
            Some(r) if self.world.many_runs => (runs.iter().find(|x| &x.name == r).cloned(), runs),
            Some(r) => (runs.into_iter().find(|x| &x.name == r), Vec::new()),
            None if self.world.many_runs => (None, runs),
            None => (None, Vec::new()),
        };
        SimulationReport {
            timeline,
            run,
            runs,
            summary,
        }
    }
}

/// [`Simulation::stream_report`]: a report that runs its simulation as it is serialized.
pub struct StreamedReport<'s, F: Fleet>(RefCell<&'s mut Simulation<Engine, F>>);

impl<F: Fleet> Serialize for StreamedReport<'_, F> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The fields of `SimulationReport`, in its order and with its rules.
        let mut report = serializer.serialize_struct("SimulationReport", 4)?;
        report.serialize_field("timeline", &StreamedTimeline(&self.0))?;
        let sim = self.0.borrow();
        // As `report_with` after the whole timeline was handed out: the runs noted so far.
        let runs: Vec<(&str, Option<&str>, RunStatusView)> = sim
            .reported_runs
            .iter()
            .filter_map(|(name, profile)| {
                let view = sim.engine.run_status_view(name).ok()?;
                Some((name.as_str(), profile.as_deref(), view))
            })
            .collect();
        let heads: Vec<_> = runs
            .iter()
            .map(|(_, _, v)| (v.head(), v.member_tally()))
            .collect();
        let facts: Vec<RunFacts> = runs
            .iter()
            .zip(&heads)
            .map(|((name, _, _), (head, tally))| RunFacts {
                name,
                status: &head.status,
                tally: *tally,
            })
            .collect();
        let summary = Summary::over(&facts, sim.run.as_deref());
        type Entry<'a> = (&'a str, Option<&'a str>, RunStatusView<'a>);
        fn as_report<'a>(
            (name, profile, view): &'a Entry<'a>,
        ) -> report::RunReportView<'a, RunStatusView<'a>> {
            report::RunReportView {
                name,
                auto_upgrade_profile_name: *profile,
                status: view,
            }
        }
        let own = sim
            .run
            .as_deref()
            .and_then(|r| runs.iter().find(|x| x.0 == r))
            .map(as_report);
        match &own {
            Some(run) => report.serialize_field("run", run)?,
            None => report.skip_field("run")?,
        }
        // With profiles every run is listed (the scenario's too); without, none.
        if sim.world.many_runs && !runs.is_empty() {
            let all: Vec<_> = runs.iter().map(as_report).collect();
            report.serialize_field("runs", &all)?;
        } else {
            report.skip_field("runs")?;
        }
        report.serialize_field("summary", &summary)?;
        report.end()
    }
}

/// The timeline of a [`StreamedReport`]: the simulation steps to its end as it is written.
struct StreamedTimeline<'r, 's, F: Fleet>(&'r RefCell<&'s mut Simulation<Engine, F>>);

impl<F: Fleet> Serialize for StreamedTimeline<'_, '_, F> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut sim = self.0.borrow_mut();
        let mut seq = serializer.serialize_seq(None)?;
        loop {
            for entry in sim.hand_out_timeline() {
                seq.serialize_element(&entry)?;
            }
            if !sim.step() {
                break;
            }
        }
        for entry in sim.hand_out_timeline() {
            seq.serialize_element(&entry)?;
        }
        seq.end()
    }
}

fn prefix(mut e: Error, path: &str) -> Error {
    if e.fields.is_empty() {
        e.message = format!("{path}: {}", e.message);
    } else {
        for f in &mut e.fields {
            f.path = if f.path.is_empty() {
                path.to_string()
            } else {
                format!("{path}.{}", f.path)
            };
        }
        e.message = e.fields[0].to_string();
    }
    e
}
