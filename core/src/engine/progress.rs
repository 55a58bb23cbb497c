//! The run loop: [`Engine::settle`] and the phases it moves a run through — the only code that
//! drives progress. Handlers change state and [`Engine::touch`] the runs they changed; after
//! every input (and every timer that fires) `settle` drives each touched run as far as it goes:
//!
//! 1. a run that drains (stopped, or a threshold exceeded) completes its finished groups, and
//!    stops or fails when nothing is in flight;
//! 2. otherwise its current stage: started (StageStarted, before gates); once they are done,
//!    its body — every group settled in strategy order ([`Engine::settle_group`]: entered, its
//!    before gates, its members begun, after gates, completed or skipped), then members started
//!    up to the limits ([`Engine::fill_stage`]); once every group is done, the after-stage wait
//!    and after gates; then completed (or skipped, or failed) — and on to the next stage;
//! 3. after the last stage the run is Completed (or Skipped).

use super::add_seconds;
use super::schedule::{fail_member, skip_member};
use super::timers::Timer;
use super::tree::{GateRt, GroupRt, MemberLoc, Phase, StageRt};
use super::Engine;
use crate::event::{Event, Fact, Reason};
use crate::model::GateTiming;
use crate::plan::{decide, Decision};
use crate::state::State;

impl Engine {
    /// Marks a run as touched by an input: [`Engine::settle`] drives it next.
    pub(super) fn touch(&mut self, run: &str) {
        if !self.touched.iter().any(|r| r == run) {
            self.touched.push(run.to_string());
        }
    }

    /// The run loop, and the only code that drives progress: every run an input touched, in
    /// the order touched, is moved through its phases as far as it can go at `now` (see the
    /// crate docs for the phase order).
    pub(super) fn settle(&mut self) {
        while !self.touched.is_empty() {
            let run = self.touched.remove(0);
            self.settle_run(&run);
        }
    }

    /// Moves a run through its phases as far as it can go at `now`: the drain after a stop or
    /// a failure; then its current stage — started (before gates), its groups
    /// ([`Engine::settle_group`]) and members ([`Engine::fill_stage`]), the after-stage wait and
    /// after gates, completed — and the next stage, until something must wait.
    pub(super) fn settle_run(&mut self, name: &str) {
        loop {
            let now = self.now;
            let Some(run) = self.runs.get_mut(name) else {
                return;
            };
            if !run.active() {
                return;
            }
            if let Some(cause) = run.stopping {
                // While a run drains nothing new starts, but a group whose members are all done
                // and that needs no new gate still completes; when the drain is over, the run
                // stops or fails.
                let (cur, in_flight) = (run.current, run.in_flight);
                for gi in movable_groups(run.stages.get(cur), true) {
                    self.settle_group(name, cur, gi);
                }
                if in_flight == 0 {
                    self.finish_stop(name, cause);
                }
                return;
            }
            let cur = run.current;
            if cur >= run.stages.len() {
                let all_skipped = run
                    .stages
                    .iter()
                    .all(|s| s.tier.node.state == State::Skipped);
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
            if stage.tier.user_skipped {
                if stage.tier.in_flight > 0 {
                    return;
                }
                run.current += 1;
                continue;
            }
            match stage.tier.phase {
                Phase::NotReached => {
                    stage.tier.phase = Phase::Before;
                    stage.tier.node.state = State::Running;
                    stage.tier.node.start = Some(now);
                    let stage = stage.tier.name.clone();
                    self.emit(Event::new(now, name, Fact::StageStarted { stage }));
                    let n = self.runs[name].stages[cur].tier.before_gates.len();
                    self.create_gates(name, cur, None, GateTiming::Before, n);
                }
                Phase::Before => {
                    if !stage.tier.before_gates.iter().all(GateRt::done) {
                        return;
                    }
                    stage.tier.phase = Phase::Body;
                }
                Phase::Body => {
                    for gi in movable_groups(Some(stage), false) {
                        self.settle_group(name, cur, gi);
                    }
                    self.fill_stage(name, cur);
                    let run = self.runs.get_mut(name).expect("run");
                    if !run.active() || run.stopping.is_some() {
                        continue;
                    }
                    let stage = &mut run.stages[cur];
                    if stage.tier.in_flight > 0 || !stage.groups.iter().all(GroupRt::done) {
                        return;
                    }
                    if stage.groups.iter().any(|g| g.tier.failed) && !stage.tier.failed {
                        // Not reached: a group's failure stops the run at once (count_failure)
                        // and the drain fails the stage. Kept as a safety net.
                        self.fail_stage_for_group(name, cur);
                        self.halt_for_failure(name);
                        continue;
                    }
                    if stage.tier.failed {
                        return;
                    }
                    if stage
                        .groups
                        .iter()
                        .all(|g| g.tier.node.state == State::Skipped)
                    {
                        let by_user = stage
                            .groups
                            .iter()
                            .any(|g| g.tier.user_skipped || g.skipped_by_user());
                        self.skip_stage_rest(name, cur, by_user);
                        continue;
                    }
                    stage.tier.phase = Phase::After;
                    let n = stage.tier.after_gates.len();
                    let secs = stage.wait_seconds;
                    if secs > 0 && stage.wait.state == State::NotStarted {
                        let until = add_seconds(now, secs);
                        stage.wait.state = State::Running;
                        stage.wait.start = Some(now);
                        stage.wait_until = Some(until);
                        let stage = stage.tier.name.clone();
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
                    self.create_gates(name, cur, None, GateTiming::After, n);
                }
                Phase::After => {
                    let wait_done = matches!(stage.wait.state, State::Completed | State::Skipped);
                    if !wait_done || !stage.tier.after_gates.iter().all(GateRt::done) {
                        return;
                    }
                    stage.tier.phase = Phase::Done;
                    stage.tier.node.state = State::Completed;
                    stage.tier.node.completed = Some(now);
                    let stage = stage.tier.name.clone();
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

    /// Moves a group of the current stage (in its body) through its phases: entered (before
    /// gates), its members begun ([`Engine::evaluate_members`]), after gates, completed or
    /// skipped. Returns quickly when nothing changes.
    pub(super) fn settle_group(&mut self, name: &str, si: usize, gi: usize) {
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
            let stage_name = &stage.tier.name;
            let g = &mut stage.groups[gi];
            match g.tier.phase {
                Phase::Done => return,
                Phase::NotReached => {
                    if draining {
                        return;
                    }
                    self.enter_group(name, si, gi);
                    let g = &self.runs[name].stages[si].groups[gi];
                    if g.tier.phase == Phase::Done {
                        return;
                    }
                }
                Phase::Before => {
                    if draining || !g.tier.before_gates.iter().all(GateRt::done) {
                        return;
                    }
                    g.tier.phase = Phase::Body;
                    self.evaluate_members(name, si, gi);
                }
                Phase::Body => {
                    if g.tier.failed || g.tier.in_flight > 0 || g.unfinished > 0 {
                        return;
                    }
                    if draining && !g.tier.after_gates.is_empty() {
                        return;
                    }
                    if g.members.iter().all(|m| m.node.state == State::Skipped) {
                        g.tier.phase = Phase::Done;
                        g.tier.node.state = State::Skipped;
                        g.tier.node.completed = Some(now);
                        for gate in &mut g.tier.after_gates {
                            gate.state = State::Skipped;
                        }
                        let fact = Fact::GroupSkipped {
                            stage: stage_name.clone(),
                            group: g.tier.name.clone(),
                            reason: if g.skipped_by_user() {
                                Reason::SkippedByUser
                            } else {
                                Reason::AlreadyAtTarget
                            },
                        };
                        self.emit(Event::new(now, name, fact));
                        return;
                    }
                    g.tier.phase = Phase::After;
                    let n = g.tier.after_gates.len();
                    self.create_gates(name, si, Some(gi), GateTiming::After, n);
                }
                Phase::After => {
                    if !g.tier.after_gates.iter().all(GateRt::done) {
                        return;
                    }
                    g.tier.phase = Phase::Done;
                    g.tier.node.state = State::Completed;
                    g.tier.node.completed = Some(now);
                    let (stage, group) = (stage_name.clone(), g.tier.name.clone());
                    self.emit(Event::new(now, name, Fact::GroupCompleted { stage, group }));
                    return;
                }
            }
        }
    }

    /// A group starts: `GroupStarted` and its before gates (a user-skipped group is done).
    pub(super) fn enter_group(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        if !run.active() || run.stopping.is_some() {
            return;
        }
        let stage_name = run.stages[si].tier.name.clone();
        let g = &mut run.stages[si].groups[gi];
        if g.tier.phase != Phase::NotReached {
            return;
        }
        if g.tier.user_skipped {
            g.tier.phase = Phase::Done;
            return;
        }
        g.tier.phase = Phase::Before;
        g.tier.node.state = State::Running;
        g.tier.node.start = Some(now);
        let (stage, group) = (stage_name, g.tier.name.clone());
        let ev = Event::new(now, name, Fact::GroupStarted { stage, group });
        let n = g.tier.before_gates.len();
        self.emit(ev);
        self.create_gates(name, si, Some(gi), GateTiming::Before, n);
    }

    /// When a group's members begin: settle the members that need no slot (nothing to do,
    /// minor-version skips), queue the rest in priority order.
    pub(super) fn evaluate_members(&mut self, name: &str, si: usize, gi: usize) {
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
        let stage_name = run.stages[si].tier.name.clone();
        let mut failures = 0;
        let mut fatal = None;
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
                    let skipped = skip_member(g, mi, now, name, &stage_name, reason, message);
                    outputs.push_back(skipped);
                }
                Decision::Fail { code, message } => {
                    if code.fails_the_run() && fatal.is_none() {
                        fatal = Some((code, format!("member \"{}\": {message}", m.name)));
                    }
                    let failed = fail_member(g, mi, now, name, &stage_name, code, message);
                    outputs.push_back(failed);
                    failures += 1;
                }
            }
        }
        for _ in 0..failures {
            self.count_failure(name, si, gi);
        }
        if let Some((code, why)) = fatal {
            self.fail_run_for_member(name, si, code, &why);
        }
        self.sweep_blocked(name, si, gi);
    }

    /// Puts a blocked member back in its group's ready queue (if it can still start).
    pub(super) fn requeue(&mut self, loc: &MemberLoc) {
        let Some(run) = self.runs.get_mut(&loc.run) else {
            return;
        };
        let Some(stage) = run.stages.get_mut(loc.stage as usize) else {
            return;
        };
        let Some(g) = stage.groups.get_mut(loc.group as usize) else {
            return;
        };
        if g.tier.phase != Phase::Body || g.tier.failed || g.tier.user_skipped {
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
    pub(super) fn requeue_group(&mut self, name: &str, si: usize, gi: usize) {
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

    /// Every active run may start members now (the freeze calendar or the catalog changed).
    pub(super) fn touch_active(&mut self) {
        let active: Vec<String> = self
            .runs
            .iter()
            .filter(|(_, r)| r.active())
            .map(|(n, _)| n.clone())
            .collect();
        for n in active {
            self.touch(&n);
        }
    }
}

/// The groups of a stage that [`Engine::settle_group`] would move now, in strategy order: a
/// cheap look at each group's phase and counters, so that an input which changes one group
/// of fifty settles one. (Settling a group never lets a sibling move: it can only stop the
/// run, which `settle_group` checks.)
fn movable_groups(stage: Option<&StageRt>, draining: bool) -> Vec<usize> {
    let Some(stage) = stage else {
        return Vec::new();
    };
    stage
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| match g.tier.phase {
            Phase::Done => false,
            Phase::NotReached => !draining,
            Phase::Before => !draining && g.tier.before_gates.iter().all(GateRt::done),
            Phase::Body => {
                !g.tier.failed
                    && g.tier.in_flight == 0
                    && g.unfinished == 0
                    && !(draining && !g.tier.after_gates.is_empty())
            }
            Phase::After => g.tier.after_gates.iter().all(GateRt::done),
        })
        .map(|(gi, _)| gi)
        .collect()
}
