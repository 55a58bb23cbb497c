//! Driving an engine: the one loop every host writes around [`Engine`], written once.
//!
//! A host delivers an input at `now` ([`deliver`]); the engine's outputs go to the host's
//! [`Surroundings`] one by one, in order; whatever the surroundings answer at once (an
//! auto-approval of a gate just created, the failure of an upgrade the cluster refused to
//! take) is delivered at the same `now`, in the order it was answered, each followed by the
//! outputs it causes, until the engine is quiet. [`drain`] is the same without a first input.
//!
//! The engine behind [`EngineDriver`] may be the native [`Engine`] or the same engine across a
//! WebAssembly boundary (the plugin in wasmtime, the browser package): the simulator, the
//! plugin's guest side, the host's plugin driver and the property tests all run this loop, so
//! they answer an engine's outputs the same way.
//!
//! What the loop does not do is decide *when*: a simulator jumps its virtual clock to the next
//! instant that matters, a daemon sleeps until [`Engine::poll_timeout`] or the next input.

use crate::engine::{Engine, Input};
use crate::error::Error;
use crate::event::Output;
use crate::model::Timestamp;
use crate::state::{RunStatus, State};

/// An engine as a host drives it: the native [`Engine`], or the same engine behind a
/// WebAssembly boundary, so every host can be checked to make identical decisions.
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

/// What is around an engine: where its outputs go, and what answers them at once.
pub trait Surroundings {
    /// One output of the engine, in order. Inputs pushed to `answers` are delivered at the
    /// same `now` once the outputs drained so far are handed over.
    fn output(&mut self, now: Timestamp, output: Output, answers: &mut Vec<Input>);

    /// Called before an answer is delivered; `false` keeps it from the engine (a plugin that
    /// journals every input before applying it refuses an answer its journal refused).
    fn admit(&mut self, _now: Timestamp, _answer: &Input) -> bool {
        true
    }

    /// The result of delivering one of the answers (refusals are normal: a gate approved by
    /// the surroundings may have been completed by its schedule meanwhile).
    fn answered(&mut self, _now: Timestamp, _answer: &Input, _result: &Result<(), Error>) {}
}

/// Delivers `input` at `now`, then [`drain`]s. Returns what the engine answered to `input`
/// itself; its outputs (and those of a refused input's due timers) are handed over either way.
pub fn deliver<E, S>(
    engine: &mut E,
    around: &mut S,
    now: Timestamp,
    input: Input,
) -> Result<(), Error>
where
    E: EngineDriver + ?Sized,
    S: Surroundings + ?Sized,
{
    let result = engine.handle_input(now, input);
    drain(engine, around, now);
    result
}

/// Hands every pending output to `around`, and delivers its answers at `now` (each answer's
/// outputs handed over before the next answer is delivered), until the engine is quiet.
pub fn drain<E, S>(engine: &mut E, around: &mut S, now: Timestamp)
where
    E: EngineDriver + ?Sized,
    S: Surroundings + ?Sized,
{
    let mut answers = Vec::new();
    while let Some(out) = engine.poll_output() {
        around.output(now, out, &mut answers);
    }
    answer(engine, around, now, answers);
}

/// Delivers `answers` at `now` as [`drain`] delivers the surroundings' answers: in order, each
/// admitted first and followed by the outputs it causes (whose answers come next), until none
/// is left.
pub fn answer<E, S>(engine: &mut E, around: &mut S, now: Timestamp, mut answers: Vec<Input>)
where
    E: EngineDriver + ?Sized,
    S: Surroundings + ?Sized,
{
    while !answers.is_empty() {
        let mut next = Vec::new();
        for input in answers {
            if !around.admit(now, &input) {
                continue;
            }
            let result = engine.handle_input(now, input.clone());
            around.answered(now, &input, &result);
            while let Some(out) = engine.poll_output() {
                around.output(now, out, &mut next);
            }
        }
        answers = next;
    }
}
