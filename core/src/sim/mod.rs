//! The simulator: a scenario (fleet, releases, freezes, strategy, one run, operator actions) run
//! through the real engine on a virtual clock, against a simulated fleet that answers every
//! upgrade after the member's `upgradeMinutes`, failing its first `failAttempts` attempts.
//!
//! Pure and deterministic like the engine: the same scenario (and seed) gives the same report,
//! natively and in Wasm. The clock jumps from one instant to the next that matters: the
//! engine's next wakeup, the next upgrade completion, or the next operator action. At one
//! instant, upgrade results are delivered first, then operator actions, in file order; the
//! engine fires its own due timers before each of them.

mod fleet;
mod scenario;
mod text;

pub use fleet::SimulatedFleet;
pub use scenario::{Action, ActionKind, Behavior, GateRef, Scenario, ScenarioMember, ScenarioRun};
pub use text::render_text;

use crate::engine::{Command, Engine, GateSelector, Input};
use crate::error::Error;
use crate::event::{Event, Fact, HostCommand, Output};
use crate::model::{GateType, Timestamp};
use crate::state::{RunStatus, State};
use serde::{Deserialize, Serialize};

/// The run in a report: its name and status tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// Run name.
    pub name: String,
    /// Final status tree.
    pub status: RunStatus,
}

/// The summary line of a simulation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The run's state at the end.
    pub state: State,
    /// When the run started.
    pub started_at: Option<Timestamp>,
    /// When the run finished.
    pub finished_at: Option<Timestamp>,
    /// `finishedAt - startedAt` in seconds, when both are known.
    pub makespan_seconds: Option<i64>,
    /// Members Completed.
    pub members_completed: u32,
    /// Members Failed.
    pub members_failed: u32,
    /// Members Skipped.
    pub members_skipped: u32,
    /// Members not finished (NotStarted, Pending or Running).
    pub members_pending: u32,
}

/// What `waverun simulate -o json` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulationReport {
    /// Every event, in time order (ties in the order the engine decided them).
    pub timeline: Vec<Event>,
    /// The run and its final status tree.
    pub run: RunReport,
    /// Totals.
    pub summary: Summary,
}

/// Runs a scenario to its end (the run finished and nothing in flight, nothing left to happen,
/// or `until`). Errors only when the scenario itself is invalid.
pub fn simulate(scenario: &Scenario) -> Result<SimulationReport, Error> {
    let mut sim = Simulation::new(scenario)?;
    sim.run_to_end();
    Ok(sim.report())
}

/// An engine as the simulator drives it: the native [`Engine`], or the same engine behind a
/// WebAssembly boundary (the plugin in wasmtime, the browser package), so every host can be
/// checked to make identical decisions.
pub trait EngineDriver {
    /// [`Engine::handle_input`].
    fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error>;
    /// [`Engine::poll_output`].
    fn poll_output(&mut self) -> Option<Output>;
    /// The time of [`Engine::poll_timeout`].
    fn next_wakeup(&mut self) -> Option<Timestamp>;
    /// [`Engine::run_state`].
    fn run_state(&mut self, run: &str) -> Option<State>;
    /// [`Engine::run_status`].
    fn run_status(&mut self, run: &str) -> Result<RunStatus, Error>;
}

impl EngineDriver for Engine {
    fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error> {
        Engine::handle_input(self, now, input)
    }
    fn poll_output(&mut self) -> Option<Output> {
        Engine::poll_output(self)
    }
    fn next_wakeup(&mut self) -> Option<Timestamp> {
        self.poll_timeout().map(|w| w.at)
    }
    fn run_state(&mut self, run: &str) -> Option<State> {
        Engine::run_state(self, run)
    }
    fn run_status(&mut self, run: &str) -> Result<RunStatus, Error> {
        Engine::run_status(self, run)
    }
}

/// A simulation in progress; [`simulate`] runs one to the end. Tests use [`Simulation::step`]
/// to check invariants after every step.
pub struct Simulation<E: EngineDriver = Engine> {
    engine: E,
    fleet: SimulatedFleet,
    actions: Vec<Action>,
    next_action: usize,
    auto_approve: bool,
    run: String,
    until: Timestamp,
    now: Timestamp,
    timeline: Vec<Event>,
    done: bool,
}

impl Simulation<Engine> {
    /// Validates the scenario and sets up a native engine and the simulated fleet at `start`.
    pub fn new(scenario: &Scenario) -> Result<Simulation, Error> {
        Simulation::with_engine(scenario, Engine::new(scenario.start))
    }

    /// The engine (for inspection).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl<E: EngineDriver> Simulation<E> {
    /// Validates the scenario and sets up `engine` (empty, its clock at `start`) and the
    /// simulated fleet.
    pub fn with_engine(scenario: &Scenario, mut engine: E) -> Result<Simulation<E>, Error> {
        scenario.validate()?;
        let start = scenario.start;
        let setup = scenario.setup_commands();
        for (path, cmd) in setup {
            engine
                .handle_input(start, Input::Command(cmd))
                .map_err(|e| prefix(e, &path))?;
        }
        let mut sim = Simulation {
            engine,
            fleet: SimulatedFleet::new(scenario),
            actions: scenario.actions.clone(),
            next_action: 0,
            auto_approve: scenario.auto_approve,
            run: scenario.run.name.clone(),
            until: scenario.horizon(),
            now: start,
            timeline: Vec::new(),
            done: false,
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
    pub fn fleet(&self) -> &SimulatedFleet {
        &self.fleet
    }

    /// The virtual clock.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Events so far.
    pub fn timeline(&self) -> &[Event] {
        &self.timeline
    }

    /// Whether the simulation has ended.
    pub fn is_done(&self) -> bool {
        self.done
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
        for obs in self.fleet.take_due(now) {
            let r = self.engine.handle_input(now, Input::Observation(obs));
            debug_assert!(r.is_ok());
            self.drain();
        }
        // 2. Operator actions due now.
        while let Some(a) = self.actions.get(self.next_action) {
            if a.at > now {
                break;
            }
            let a = a.clone();
            self.next_action += 1;
            let command = a.command(&self.run);
            let result = self.engine.handle_input(now, Input::Command(command));
            // What the input's due timers did comes first: it may be why the action is refused.
            self.drain();
            if let Err(e) = result {
                let fact = Fact::ActionRejected {
                    action: serde_json::to_value(&a).expect("action serialises"),
                    error: crate::state::StatusError {
                        code: e.code.to_string(),
                        message: e.message.clone(),
                    },
                };
                self.timeline.push(Event::new(now, "", fact));
            }
            self.drain();
        }
        // 3. Engine timers due now.
        let _ = self.engine.handle_input(now, Input::Timeout);
        self.drain();

        let finished = self.engine.run_state(&self.run).is_some_and(|s| {
            matches!(
                s,
                State::Completed | State::Failed | State::Skipped | State::Stopped
            )
        }) && self.fleet.idle();
        let actions_left = self.next_action < self.actions.len();
        if finished && !actions_left {
            self.done = true;
            return false;
        }
        let next = [
            self.engine.next_wakeup(),
            self.fleet.next_completion(),
            self.actions.get(self.next_action).map(|a| a.at),
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

    fn drain(&mut self) {
        loop {
            let mut approvals = Vec::new();
            while let Some(out) = self.engine.poll_output() {
                match out {
                    Output::Event(mut ev) => {
                        if ev.fact == Fact::RunCreated {
                            continue;
                        }
                        if let Fact::GateCreated {
                            gate_type: GateType::Approval,
                            gate_id,
                            ..
                        } = &ev.fact
                        {
                            if self.auto_approve {
                                approvals.push(Some(gate_id.clone()));
                            }
                        }
                        ev.run.clear();
                        self.timeline.push(ev);
                    }
                    Output::Command(HostCommand::StartUpgrade(op)) => {
                        self.fleet.submit(&op, self.now)
                    }
                }
            }
            if approvals.is_empty() {
                return;
            }
            for id in approvals {
                let cmd = Command::CompleteGate {
                    run: self.run.clone(),
                    gate: GateSelector {
                        id,
                        stage: None,
                        group: None,
                        timing: None,
                    },
                    by: Some("autoApprove".to_string()),
                };
                let _ = self.engine.handle_input(self.now, Input::Command(cmd));
            }
        }
    }

    /// The report as it stands.
    pub fn report(&mut self) -> SimulationReport {
        let status = self
            .engine
            .run_status(&self.run)
            .expect("the scenario's run exists");
        let (mut c, mut f, mut s, mut p) = (0, 0, 0, 0);
        for st in &status.stages {
            for g in &st.groups {
                for m in &g.members {
                    match m.status.state {
                        State::Completed => c += 1,
                        State::Failed => f += 1,
                        State::Skipped => s += 1,
                        _ => p += 1,
                    }
                }
            }
        }
        let started = status.status.start_time;
        let finished = status.status.completed_time;
        SimulationReport {
            timeline: self.timeline.clone(),
            summary: Summary {
                state: status.status.state,
                started_at: started,
                finished_at: finished,
                makespan_seconds: match (started, finished) {
                    (Some(a), Some(b)) => Some((b - a).num_seconds()),
                    _ => None,
                },
                members_completed: c,
                members_failed: f,
                members_skipped: s,
                members_pending: p,
            },
            run: RunReport {
                name: self.run.clone(),
                status,
            },
        }
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
