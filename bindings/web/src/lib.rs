//! # waverun-wasm: waverun-core for browsers and Node
//!
//! A thin wasm-bindgen layer over `waverun-core`; every decision is the core's. `build.sh`
//! generates the package (`pkg/node`, `pkg/web`); `README.md` shows its use.
//!
//! - **Values** cross as JSON: a JS argument goes through `JSON.stringify` and is read by the
//!   core's serde types (the forms of the scenario format and `waverun ... -o json`); a result
//!   is serialised by serde_json and given back through `JSON.parse`. A report is therefore
//!   byte-for-byte what the CLI prints (after `JSON.stringify(report, null, 2)`), timestamps are
//!   RFC 3339 strings, and a `Date` argument works wherever a timestamp is expected.
//! - **Errors** are JS `Error`s named `WaverunError` with a stable `code` (the core's
//!   `ErrorCode`, or `InvalidInput` for a value of the wrong shape), `path` (the first field
//!   path, when there is one) and `fields` (every field error).
//! - **Types**: `src/types.d.ts` declares the serde forms in TypeScript; the exports name them
//!   (`unchecked_param_type` / `unchecked_return_type`), so the generated `.d.ts` has no `any`.
#![warn(missing_docs)]

pub mod convert;

use convert::Failure;
use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use waverun_core::sim::{self, Scenario};
use waverun_core::{validate, Command, Engine, Input, Member, Observation, Output};
use waverun_core::{UpdateRunSpec, UpdateStrategy};
// Byte comparisons a word at a time on wasm32 (bindings/wasm-mem): linked for its `memcmp`.
use waverun_wasm_mem as _;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = include_str!("types.d.ts");

/// Checks an update strategy on its own; throws a `WaverunError` (code `InvalidField`, every
/// broken rule in `fields`) if anything is wrong.
#[wasm_bindgen(js_name = validateStrategy)]
pub fn validate_strategy(
    #[wasm_bindgen(unchecked_param_type = "UpdateStrategy")] strategy: JsValue,
) -> Result<(), JsValue> {
    let s: UpdateStrategy = from_js(&strategy)?;
    validate::strategy(&s).map_err(throw)
}

/// Checks a member (a cluster of the fleet); throws a `WaverunError` if anything is wrong.
#[wasm_bindgen(js_name = validateMember)]
pub fn validate_member(
    #[wasm_bindgen(unchecked_param_type = "Member")] member: JsValue,
) -> Result<(), JsValue> {
    let m: Member = from_js(&member)?;
    validate::member(&m).map_err(throw)
}

/// Checks an update run spec (with its inline strategy, if any); throws a `WaverunError` if
/// anything is wrong.
#[wasm_bindgen(js_name = validateRun)]
pub fn validate_run(
    #[wasm_bindgen(unchecked_param_type = "UpdateRunSpec")] run: JsValue,
) -> Result<(), JsValue> {
    let r: UpdateRunSpec = from_js(&run)?;
    validate::run_spec(&r).map_err(throw)
}

/// Checks a scenario as `waverun validate` does: its own rules, then what only the whole fleet
/// shows (a member matched by two groups). Throws a `WaverunError` if anything is wrong.
#[wasm_bindgen(js_name = validateScenario)]
pub fn validate_scenario(
    #[wasm_bindgen(unchecked_param_type = "Scenario")] scenario: JsValue,
) -> Result<(), JsValue> {
    let s: Scenario = from_js(&scenario)?;
    convert::validate_scenario(&s).map_err(throw)
}

/// The plan of the scenario's run at the scenario's start, as `waverun plan -o json` prints it:
/// members per stage and group, resolved limits, gates needing a human, selected images,
/// unassigned members, members that will fail.
#[wasm_bindgen(unchecked_return_type = "ScenarioPlan")]
pub fn plan(
    #[wasm_bindgen(unchecked_param_type = "Scenario")] scenario: JsValue,
) -> Result<JsValue, JsValue> {
    let s: Scenario = from_js(&scenario)?;
    convert::plan_scenario(&s).map(|p| to_js(&p)).map_err(throw)
}

/// Runs a scenario through the engine on a virtual clock: the same report as
/// `waverun simulate -o json` (timeline, final status tree, summary). Throws a `WaverunError`
/// only when the scenario is invalid.
#[wasm_bindgen(unchecked_return_type = "SimulationReport")]
pub fn simulate(
    #[wasm_bindgen(unchecked_param_type = "Scenario")] scenario: JsValue,
) -> Result<JsValue, JsValue> {
    let s: Scenario = from_js(&scenario)?;
    sim::simulate_owned(s).map(|r| to_js(&r)).map_err(throw)
}

/// Whether `value` is an error thrown by this package (`name === "WaverunError"`).
#[wasm_bindgen(js_name = isWaverunError, unchecked_return_type = "value is WaverunError")]
pub fn is_waverun_error(#[wasm_bindgen(unchecked_param_type = "unknown")] value: JsValue) -> bool {
    value.is_instance_of::<js_sys::Error>()
        && js_sys::Reflect::get(&value, &JsValue::from_str("name"))
            .ok()
            .and_then(|n| n.as_string())
            .is_some_and(|n| n == "WaverunError")
}

/// The update-run engine: one value owning the fleet (members, strategies, runs, gates,
/// catalog, freezes). Feed it one input at a time with its `now`, then drain its outputs and
/// ask for the next wakeup; see `waverun-core`'s run loop. Refused commands throw a
/// `WaverunError` and change nothing.
#[wasm_bindgen]
pub struct WaverunEngine {
    engine: Engine,
}

#[wasm_bindgen]
impl WaverunEngine {
    /// An empty engine whose clock starts at `nowIso` (RFC 3339, e.g. `2026-12-07T08:00:00Z`).
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(js_name = nowIso)] now_iso: &str) -> Result<WaverunEngine, JsValue> {
        let now = convert::parse_time("now", now_iso).map_err(throw_failure)?;
        Ok(WaverunEngine {
            engine: Engine::new(now),
        })
    }

    /// Handles one input at `nowIso`: due timers fire first; time never goes backwards.
    #[wasm_bindgen(js_name = handleInput)]
    pub fn handle_input(
        &mut self,
        #[wasm_bindgen(js_name = nowIso)] now_iso: &str,
        #[wasm_bindgen(unchecked_param_type = "Input")] input: JsValue,
    ) -> Result<(), JsValue> {
        let input: Input = from_js(&input)?;
        self.input(now_iso, input)
    }

    /// Shorthand for `handleInput(nowIso, {command})`: an operator / API command.
    pub fn command(
        &mut self,
        #[wasm_bindgen(js_name = nowIso)] now_iso: &str,
        #[wasm_bindgen(unchecked_param_type = "Command")] command: JsValue,
    ) -> Result<(), JsValue> {
        let command: Command = from_js(&command)?;
        self.input(now_iso, Input::Command(command))
    }

    /// Shorthand for `handleInput(nowIso, {observation})`: what the world reports.
    pub fn observe(
        &mut self,
        #[wasm_bindgen(js_name = nowIso)] now_iso: &str,
        #[wasm_bindgen(unchecked_param_type = "Observation")] observation: JsValue,
    ) -> Result<(), JsValue> {
        let observation: Observation = from_js(&observation)?;
        self.input(now_iso, Input::Observation(observation))
    }

    /// Shorthand for `handleInput(nowIso, "timeout")`: time has advanced; fire due timers.
    pub fn timeout(
        &mut self,
        #[wasm_bindgen(js_name = nowIso)] now_iso: &str,
    ) -> Result<(), JsValue> {
        self.input(now_iso, Input::Timeout)
    }

    /// Every output since the last drain, in order: events and commands for the host (start
    /// this member upgrade). Drain after every input.
    #[wasm_bindgen(js_name = drainOutputs, unchecked_return_type = "Output[]")]
    pub fn drain_outputs(&mut self) -> JsValue {
        let outputs: Vec<Output> = std::iter::from_fn(|| self.engine.poll_output()).collect();
        to_js(&outputs)
    }

    /// When the engine must next be woken with `timeout`, and why; `undefined` when nothing
    /// is scheduled.
    #[wasm_bindgen(js_name = nextWakeup, unchecked_return_type = "Wakeup | undefined")]
    pub fn next_wakeup(&self) -> JsValue {
        match self.engine.poll_timeout() {
            Some(w) => to_js(&w),
            None => JsValue::UNDEFINED,
        }
    }

    /// The status tree of a run (before it starts: a preview over the current fleet). Throws
    /// `NotFound` for an unknown run.
    #[wasm_bindgen(unchecked_return_type = "RunStatus")]
    pub fn status(&self, run: &str) -> Result<JsValue, JsValue> {
        self.engine
            .run_status(run)
            .map(|s| to_js(&s))
            .map_err(throw)
    }

    /// The plan preview of a run (as `waverun plan` shows it). Throws `NotFound` for an
    /// unknown run.
    #[wasm_bindgen(unchecked_return_type = "Plan")]
    pub fn plan(&self, run: &str) -> Result<JsValue, JsValue> {
        self.engine.plan(run).map(|p| to_js(&p)).map_err(throw)
    }

    /// The engine's clock: the latest `now` it was given (RFC 3339).
    #[wasm_bindgen(getter)]
    pub fn now(&self) -> String {
        waverun_core::fmt_time(self.engine.now())
    }

    /// The whole engine state as a JSON string; `WaverunEngine.restore` gives it back. Restored
    /// and fed the same inputs, it produces identical outputs.
    pub fn snapshot(&self) -> String {
        self.engine.snapshot()
    }

    /// An engine from a `snapshot()`; throws `InvalidSnapshot` if the text is not one.
    pub fn restore(snapshot: &str) -> Result<WaverunEngine, JsValue> {
        Engine::restore(snapshot)
            .map(|engine| WaverunEngine { engine })
            .map_err(throw)
    }
}

impl WaverunEngine {
    fn input(&mut self, now_iso: &str, input: Input) -> Result<(), JsValue> {
        let now = convert::parse_time("now", now_iso).map_err(throw_failure)?;
        self.engine.handle_input(now, input).map_err(throw)
    }
}

/// Reads a JS value as `T` through `JSON.stringify`.
fn from_js<T: DeserializeOwned>(value: &JsValue) -> Result<T, JsValue> {
    let text = js_sys::JSON::stringify(value).map_err(|e| {
        let why = js_sys::Error::from(e).message();
        throw_failure(Failure::input("", format!("not a JSON value: {why}")))
    })?;
    let Some(text) = JsValue::from(text).as_string() else {
        // JSON.stringify gives undefined for undefined, functions and symbols.
        let kind = value.js_typeof().as_string().unwrap_or_default();
        return Err(throw_failure(Failure::input(
            "",
            format!("expected an object, got {kind}"),
        )));
    };
    convert::parse_json(&text).map_err(throw_failure)
}

/// Gives a value to JS through `JSON.parse`: exactly the serde_json form.
fn to_js<T: Serialize>(value: &T) -> JsValue {
    let text = serde_json::to_string(value).expect("core values serialise to JSON");
    js_sys::JSON::parse(&text).expect("serde_json writes valid JSON")
}

fn throw(e: waverun_core::Error) -> JsValue {
    throw_failure(e.into())
}

/// A JS `Error` named `WaverunError` with `code`, `path` (if any) and `fields`.
fn throw_failure(f: Failure) -> JsValue {
    let err = js_sys::Error::new(&f.message);
    err.set_name("WaverunError");
    let set = |key: &str, value: &JsValue| {
        // Defining a property on a fresh Error cannot fail.
        let _ = js_sys::Reflect::set(&err, &JsValue::from_str(key), value);
    };
    set("code", &JsValue::from_str(f.code));
    if let Some(path) = f.path() {
        set("path", &JsValue::from_str(path));
    }
    set("fields", &to_js(&f.fields));
    err.into()
}
