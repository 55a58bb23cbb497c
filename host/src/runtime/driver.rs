//! The plugin as an [`EngineDriver`]: the simulator drives the engine inside wasmtime exactly
//! as it drives the native one, so the two can be compared byte for byte. The plugin's cluster
//! provider is the simulated fleet itself ([`SimulatedClusterCalls`]): the guest submits its
//! upgrades there, and the simulation's clock takes their results from there.

use super::error::PluginError;
use super::host::{Clock, ClusterProvider, ManualClock, MemoryPersistence, PluginHost};
use super::host::{QueryOutcome, SubmitOutcome};
use super::instance::{InitReport, InstanceConfig, PluginInstance};
use super::PluginModule;
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use waverun_core::error::{Error, ErrorCode, FieldError};
use waverun_core::sim::{EngineDriver, Scenario, SharedFleet, Simulation, SimulationReport};
use waverun_core::{
    CheckRequest, Event, Input, Observation, Output, RunStatus, State, Timestamp, UpgradeOperation,
};

/// A simulation whose engine is the plugin in wasmtime.
pub type PluginSimulation = Simulation<PluginDriver, SharedFleet>;

/// The plugin's cluster provider in a simulation: the simulated fleet. An upgrade submitted
/// at the virtual clock's time is in flight on the fleet from that moment; a query asks the
/// fleet whether it ever took the operation. A measurement is taken at once, as the scenario
/// scripts it (a pass where it says nothing), and waits in [`SimulatedClusterCalls::take_measured`]
/// to be delivered. Clones share the fleet, the query log and the measurements.
#[derive(Clone, Debug)]
pub struct SimulatedClusterCalls {
    fleet: SharedFleet,
    clock: ManualClock,
    queries: Arc<Mutex<Vec<String>>>,
    measured: Arc<Mutex<(BTreeSet<String>, VecDeque<Observation>)>>,
}

impl SimulatedClusterCalls {
    /// The fleet, with submissions stamped by `clock`.
    pub fn new(fleet: SharedFleet, clock: ManualClock) -> SimulatedClusterCalls {
        SimulatedClusterCalls {
            fleet,
            clock,
            queries: Arc::default(),
            measured: Arc::default(),
        }
    }

    /// The measurements taken and not delivered yet, in order.
    pub fn take_measured(&self) -> Vec<Observation> {
        let mut m = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        m.1.drain(..).collect()
    }

    /// Operation ids queried so far (`cluster_query`), in order.
    pub fn queries(&self) -> Vec<String> {
        self.queries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_timestamp_millis(self.clock.now_ms()).unwrap_or(Timestamp::MIN_UTC)
    }
}

impl ClusterProvider for SimulatedClusterCalls {
    fn submit(&mut self, operation: &UpgradeOperation) -> SubmitOutcome {
        let now = self.now();
        self.fleet.lock().submit(operation, now);
        SubmitOutcome::Accepted
    }
    fn query(&mut self, operation_id: &str) -> QueryOutcome {
        let mut queries = self.queries.lock().unwrap_or_else(|e| e.into_inner());
        queries.push(operation_id.to_string());
        if self.fleet.lock().knows(operation_id) {
            QueryOutcome::Known
        } else {
            QueryOutcome::Unknown
        }
    }
    fn submit_check(&mut self, request: &CheckRequest) -> SubmitOutcome {
        let now = self.now();
        let mut measured = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        if !measured.0.insert(request.measurement_id.clone()) {
            return SubmitOutcome::Accepted;
        }
        // The fleet measures as its scenario's `health` scripts (a pass where it says nothing).
        let m = self.fleet.lock().measure(request, now);
        measured.1.push_back(Observation::CheckMeasured {
            measurement_id: request.measurement_id.clone(),
            values: m.values,
            verdict: m.verdict,
            message: m.message,
        });
        SubmitOutcome::Accepted
    }
}

/// A [`PluginInstance`] behind [`EngineDriver`], with a virtual clock set to each input's `now`,
/// in-memory persistence, and a [`SimulatedClusterCalls`] as its cluster provider. Its outputs are
/// the events each call returned; its upgrades are on the fleet, not in its outputs.
///
/// A trapped call is recovered transparently ([`PluginInstance::recover`]): an input that was
/// not journaled is sent again; one that was is applied by the replay, but the events of that
/// call are lost (the plugin returns them only in the trapped call's answer).
/// [`PluginDriver::recoveries`] counts recoveries. Errors that [`EngineDriver`] cannot return
/// (in `next_wakeup`, `run_state`) are kept in [`PluginDriver::failure`].
pub struct PluginDriver {
    instance: PluginInstance,
    clock: ManualClock,
    cluster: SimulatedClusterCalls,
    persistence: MemoryPersistence,
    outputs: VecDeque<Output>,
    recoveries: u32,
    lost_events: u32,
    failure: Option<PluginError>,
}

impl PluginDriver {
    /// A fresh instance of `plugin` with default limits, initialised (empty storage), whose
    /// upgrades go to `fleet`.
    pub fn new(plugin: &PluginModule, fleet: SharedFleet) -> Result<PluginDriver, PluginError> {
        PluginDriver::with_config(plugin, fleet, InstanceConfig::default())
    }

    /// A fresh instance of `plugin` with these limits, initialised (empty storage), whose
    /// upgrades go to `fleet`.
    pub fn with_config(
        plugin: &PluginModule,
        fleet: SharedFleet,
        config: InstanceConfig,
    ) -> Result<PluginDriver, PluginError> {
        let clock = ManualClock::new(0);
        let cluster = SimulatedClusterCalls::new(fleet, clock.clone());
        let persistence = MemoryPersistence::new();
        let host = PluginHost::new(clock.clone(), cluster.clone(), persistence.clone());
        let mut instance = plugin.instantiate(host, config)?;
        instance.init()?;
        Ok(PluginDriver {
            instance,
            clock,
            cluster,
            persistence,
            outputs: VecDeque::new(),
            recoveries: 0,
            lost_events: 0,
            failure: None,
        })
    }

    /// The instance (to change deadlines, inspect, or force a trap in tests).
    pub fn instance(&mut self) -> &mut PluginInstance {
        &mut self.instance
    }

    /// The storage behind the instance.
    pub fn persistence(&self) -> &MemoryPersistence {
        &self.persistence
    }

    /// The cluster provider behind the instance.
    pub fn provider(&self) -> &SimulatedClusterCalls {
        &self.cluster
    }

    /// The virtual clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// How many times a trapped instance was recovered.
    pub fn recoveries(&self) -> u32 {
        self.recoveries
    }

    /// Inputs whose events were lost because the call trapped after journaling the input.
    pub fn lost_events(&self) -> u32 {
        self.lost_events
    }

    /// The first error that [`EngineDriver`] could not return, if any.
    pub fn failure(&self) -> Option<&PluginError> {
        self.failure.as_ref()
    }

    /// Recovers the instance now (after a trap, or to exercise the replay).
    pub fn recover(&mut self) -> Result<InitReport, PluginError> {
        self.recoveries += 1;
        let r = self.instance.recover();
        if let Ok(report) = &r {
            let events = report.events.iter().cloned().map(Output::Event);
            self.outputs.extend(events);
        }
        r
    }

    /// Runs `f`, recovering and retrying once after a trap. `input`: the call is a journaled
    /// input, which must not be sent again if the trapped call journaled it.
    fn retrying<T: Default>(
        &mut self,
        input: bool,
        mut f: impl FnMut(&mut PluginInstance) -> Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let r = f(&mut self.instance);
            let journaled = match &r {
                Err(PluginError::Trap(t)) => t.journaled,
                Err(PluginError::Poisoned) => false,
                _ => return r,
            };
            if attempts > 1 {
                return r;
            }
            self.recover()?;
            if input && journaled {
                self.lost_events += 1;
                return Ok(T::default());
            }
        }
    }

    fn keep_failure(&mut self, e: PluginError) {
        if self.failure.is_none() {
            self.failure = Some(e);
        }
    }
}

/// A plugin error as the engine's error type. Guest errors keep their code (ABI-only codes such
/// as `PersistenceFailed` become `InvalidState` with the code in the message), message and path.
pub fn core_error(e: PluginError) -> Error {
    match e {
        PluginError::Guest(g) => {
            let code =
                serde_json::from_value::<ErrorCode>(serde_json::Value::String(g.code.clone()));
            let (code, message) = match code {
                Ok(c) => (c, g.message),
                Err(_) => (
                    ErrorCode::InvalidState,
                    format!("{}: {}", g.code, g.message),
                ),
            };
            let fields = match g.path {
                _ if !g.fields.is_empty() => g.fields,
                Some(path) => {
                    let field_message = message
                        .strip_prefix(&format!("{path}: "))
                        .unwrap_or(&message)
                        .to_string();
                    vec![FieldError::new(path, field_message)]
                }
                None => Vec::new(),
            };
            Error {
                code,
                message,
                fields,
            }
        }
        other => Error::new(ErrorCode::InvalidState, other.to_string()),
    }
}

impl EngineDriver for PluginDriver {
    fn handle_input(&mut self, now: Timestamp, input: Input) -> Result<(), Error> {
        self.clock.set(now);
        let r = self.retrying(true, |i| match &input {
            Input::Command(c) => i.command(c),
            Input::Observation(o) => i.deliver(o),
            Input::Timeout => i.wake(),
        });
        let events: Vec<Event> = match r {
            Ok(events) => events,
            Err(PluginError::Guest(mut g)) => {
                // A refused input can still have fired timers: their events come with the error.
                let events = std::mem::take(&mut g.events);
                self.outputs.extend(events.into_iter().map(Output::Event));
                return Err(core_error(PluginError::Guest(g)));
            }
            Err(e) => return Err(core_error(e)),
        };
        self.outputs.extend(events.into_iter().map(Output::Event));
        // The measurements the input submitted, delivered at the same instant (the native
        // simulator answers them at once too).
        loop {
            let measured = self.cluster.take_measured();
            if measured.is_empty() {
                break;
            }
            for o in measured {
                match self.retrying(true, |i| i.deliver(&o)) {
                    Ok(events) => self.outputs.extend(events.into_iter().map(Output::Event)),
                    Err(e) => self.keep_failure(e),
                }
            }
        }
        Ok(())
    }

    fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    fn next_wakeup(&mut self) -> Option<Timestamp> {
        match self.retrying(false, |i| i.next_wakeup_detail()) {
            Ok(w) => w.at,
            Err(e) => {
                self.keep_failure(e);
                None
            }
        }
    }

    fn run_state(&mut self, run: &str) -> Option<State> {
        match self.retrying(false, |i| i.runs()) {
            Ok(runs) => runs.into_iter().find(|r| r.name == run).map(|r| r.state),
            Err(e) => {
                self.keep_failure(e);
                None
            }
        }
    }

    fn run_status(&mut self, run: &str) -> Result<RunStatus, Error> {
        self.retrying(false, |i| i.status(run).map(Some))
            .map(|s| s.expect("not an input: never defaulted"))
            .map_err(core_error)
    }
}

/// Why [`simulate_plugin`] failed.
#[derive(Debug)]
pub enum SimulateError {
    /// The scenario is invalid (the same error the native simulator gives).
    Scenario(Error),
    /// The plugin failed.
    Plugin(PluginError),
}

impl std::fmt::Display for SimulateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimulateError::Scenario(e) => e.fmt(f),
            SimulateError::Plugin(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SimulateError {}

/// A simulation of `scenario` with the engine running as `plugin` in wasmtime (default limits),
/// its upgrades on the simulation's fleet.
pub fn plugin_simulation(
    plugin: &PluginModule,
    scenario: &Scenario,
) -> Result<PluginSimulation, SimulateError> {
    plugin_simulation_with(plugin, scenario, InstanceConfig::default())
}

/// [`plugin_simulation`] with these instance limits.
pub fn plugin_simulation_with(
    plugin: &PluginModule,
    scenario: &Scenario,
    config: InstanceConfig,
) -> Result<PluginSimulation, SimulateError> {
    let fleet = SharedFleet::new(scenario);
    let driver =
        PluginDriver::with_config(plugin, fleet.clone(), config).map_err(SimulateError::Plugin)?;
    Simulation::with_fleet(scenario, driver, fleet).map_err(SimulateError::Scenario)
}

/// [`waverun_core::sim::simulate`] with the engine running as `plugin` in wasmtime.
pub fn simulate_plugin(
    plugin: &PluginModule,
    scenario: &Scenario,
) -> Result<SimulationReport, SimulateError> {
    let mut sim = plugin_simulation(plugin, scenario)?;
    sim.run_to_end();
    if let Some(e) = sim.driver().failure.take() {
        return Err(SimulateError::Plugin(e));
    }
    // The run exists (the setup created it), so only a plugin failure can make this fail.
    if let Some(run) = scenario.run_name() {
        if let Err(e) = sim.driver().run_status(run) {
            return Err(SimulateError::Plugin(PluginError::Protocol(format!(
                "status of run {run}: {e}"
            ))));
        }
    }
    Ok(sim.report())
}
