//! Failure thresholds and the end of a drain: a failure counted against the group, the stage
//! and the run; a threshold exceeded halts the whole run; when the drain after a stop or a
//! failure is over, the run is Stopped or Failed.

use super::tree::StopCause;
use super::Engine;
use crate::error::ErrorCode;
use crate::event::{Event, Fact, Reason};
use crate::state::{State, StatusError};

impl Engine {
    pub(super) fn count_failure(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        run.failure_count += 1;
        let stage = &mut run.stages[si];
        stage.tier.failure_count += 1;
        let stage_name = stage.tier.name.clone();
        let g = &mut stage.groups[gi];
        g.tier.failure_count += 1;
        let mut group_failed = None;
        if let Some(msg) = g.tier.budget_exceeded() {
            g.tier.fail(now, &msg);
            group_failed = Some(format!(
                "group \"{}\" of stage \"{stage_name}\" failed: {msg}",
                g.tier.name
            ));
            let fact = Fact::GroupFailed {
                stage: stage_name,
                group: g.tier.name.clone(),
                reason: Reason::FailureThresholdExceeded,
                message: msg,
            };
            self.emit(Event::new(now, name, fact));
        }
        if let Some(msg) = self.runs[name].stages[si].tier.budget_exceeded() {
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
    pub(super) fn fail_stage_for_group(&mut self, name: &str, si: usize) {
        let stage = &self.runs[name].stages[si];
        // A group failed by its health check fails the stage the same way.
        let code = match stage.groups.iter().find(|g| g.tier.failed) {
            Some(g)
                if g.tier.node.error.as_ref().map(|e| e.code.as_str())
                    == Some(ErrorCode::HealthCheckFailed.as_str()) =>
            {
                ErrorCode::HealthCheckFailed
            }
            _ => ErrorCode::FailureThresholdExceeded,
        };
        let why = match stage.groups.iter().find(|g| g.tier.failed) {
            Some(g) => format!(
                "group \"{}\" failed: {}",
                g.tier.name,
                g.tier
                    .node
                    .error
                    .as_ref()
                    .map(|e| e.message.as_str())
                    .unwrap_or("its failure threshold was exceeded")
            ),
            None => "a group of the stage failed".to_string(),
        };
        self.mark_stage_failed(name, si, code, &why);
    }

    /// Fails a stage at once (its threshold was exceeded) and stops the run.
    pub(super) fn fail_stage(&mut self, name: &str, si: usize, why: &str) {
        self.mark_stage_failed(name, si, ErrorCode::FailureThresholdExceeded, why);
        self.halt_for_failure(name);
    }

    /// Marks a stage Failed (event, stage and run errors) with `code` (a threshold exceeded, or
    /// a health check failed); does not stop the run by itself.
    pub(super) fn mark_stage_failed(&mut self, name: &str, si: usize, code: ErrorCode, why: &str) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let stage = &mut run.stages[si];
        stage.tier.fail_with(now, code, why);
        let reason = if code == ErrorCode::HealthCheckFailed {
            Reason::HealthCheckFailed
        } else {
            Reason::FailureThresholdExceeded
        };
        let fact = Fact::StageFailed {
            stage: stage.tier.name.clone(),
            reason,
            message: why.to_string(),
        };
        let ev = Event::new(now, name, fact);
        let msg = format!("stage \"{}\" failed: {why}", stage.tier.name);
        run.node.error = Some(StatusError {
            code: code.to_string(),
            message: msg,
        });
        self.emit(ev);
    }

    /// A member that can never take the run's target (an LTS-only minor without long-term
    /// support) fails the run, whatever its thresholds (spec section 8): its stage is Failed
    /// and the run drains, then is Failed with the member's error code.
    pub(super) fn fail_run_for_member(
        &mut self,
        name: &str,
        si: usize,
        code: ErrorCode,
        why: &str,
    ) {
        let run = &self.runs[name];
        if !run.active() || run.stopping == Some(StopCause::Failure) {
            return; // failing (or failed) already: a threshold was exceeded first
        }
        self.mark_stage_failed(name, si, ErrorCode::FailureThresholdExceeded, why);
        let run = self.runs.get_mut(name).expect("run");
        run.node.error = Some(StatusError {
            code: code.to_string(),
            message: why.to_string(),
        });
        self.halt_for_failure(name);
    }

    /// A threshold was exceeded: no new work anywhere in the run from now on; in-flight
    /// upgrades finish (the run is Stopping), then the run is Failed (see `finish_stop`).
    pub(super) fn halt_for_failure(&mut self, name: &str) {
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
        // Nothing to drain: the run fails now.
        let run = &self.runs[name];
        if run.active() && run.in_flight == 0 {
            self.finish_stop(name, StopCause::Failure);
        }
        self.touch(name);
    }

    /// The drain after a stop or a failure is over: the current stage's unfinished groups are
    /// Stopped; after a failure the stage is Failed (if a group's threshold, not its own, was
    /// exceeded, it fails now, naming the group), after a stop Stopped; then the run.
    pub(super) fn finish_stop(&mut self, name: &str, cause: StopCause) {
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
                if matches!(g.tier.node.state, State::Running | State::Pending) {
                    g.tier.node.state = State::Stopped;
                    let (stage, group) = (stage.tier.name.clone(), g.tier.name.clone());
                    events.push(Event::new(now, name, Fact::GroupStopped { stage, group }));
                }
            }
            if matches!(stage.tier.node.state, State::Running | State::Pending) {
                if cause == StopCause::Failure && stage.groups.iter().any(|g| g.tier.failed) {
                    fail_for_group = true;
                } else {
                    stage.tier.node.state = State::Stopped;
                    let stage = stage.tier.name.clone();
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
}
