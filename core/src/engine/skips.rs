//! Skips: checking skip targets against a run (before and after it starts) and applying them
//! to members, groups, stages and after-stage waits.

use super::gates::find_group;
use super::tree::{GateLoc, GateRt, MemberRt, Phase, Run, Tier};
use super::Engine;
use super::{invalid_state, member_skipped};
use crate::error::{Error, ErrorCode};
use crate::event::{Event, Fact, Output, Reason};
use crate::model::{GateTiming, SkipTarget, Timestamp};
use crate::plan::{group_name, SkipReason};
use crate::state::State;
use std::collections::BTreeSet;

pub(super) fn check_skip(run: &Run, t: &SkipTarget) -> Result<(), Error> {
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
            let st = run.stages[si].groups[gi].tier.node.state;
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
            if matches!(s.tier.node.state, State::Completed | State::Skipped) {
                return refuse(format!(
                    "skip target {t}: stage \"{n}\" is already {:?}",
                    s.tier.node.state
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

pub(super) fn target_kind(t: &SkipTarget) -> &'static str {
    match t {
        SkipTarget::Member(_) => "member",
        SkipTarget::Group(_) => "group",
        SkipTarget::Stage(_) | SkipTarget::AfterStageWait(_) => "stage",
    }
}

/// What checking the skip targets of a run not started yet has looked up so far.
#[derive(Default)]
pub(super) struct SkipNames<'a> {
    /// The members the run would take if started now (None: the preview failed).
    pub(super) members: Option<Option<BTreeSet<String>>>,
    pub(super) stages: Option<BTreeSet<&'a str>>,
    pub(super) groups: Option<BTreeSet<&'a str>>,
}

impl Engine {
    pub(super) fn skip(&mut self, name: &str, targets: &[SkipTarget]) -> Result<(), Error> {
        let run = self.get_run(name)?;
        match run.node.state {
            State::NotStarted => {
                let mut known = SkipNames::default();
                for t in targets {
                    self.check_skip_before_start(run, t, &mut known)?;
                }
                let now = self.now;
                let run = self.runs.get_mut(name).expect("checked");
                run.pending_skips.extend(targets.iter().cloned());
                run.pending_skip_times
                    .extend(std::iter::repeat_n(now, targets.len()));
                self.touch(name);
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
        self.touch(name);
        Ok(())
    }

    /// Checks a skip target of a run not started yet; `known` holds what earlier targets of the
    /// same command needed (the previewed member set, the strategy's names), so a command with
    /// many targets costs one preview, not one per target.
    pub(super) fn check_skip_before_start<'a>(
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

    pub(super) fn apply_skip(&mut self, name: &str, t: &SkipTarget) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        match t {
            SkipTarget::Member(n) => {
                let Some(&(si, gi, mi)) = run.member_index.get(n) else {
                    return;
                };
                let stage_name = run.stages[si as usize].tier.name.clone();
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
                    &g.tier.name.clone(),
                    &g.members[mi as usize],
                    Reason::SkippedByUser,
                );
                self.emit(ev);
            }
            SkipTarget::Group(n) => {
                let Some((si, gi)) = find_group(run, n) else {
                    return;
                };
                self.skip_group(name, si, gi);
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
                    stage: stage.tier.name.clone(),
                    reason: Reason::SkippedByUser,
                };
                self.emit(Event::new(now, name, fact));
            }
        }
    }

    pub(super) fn skip_group(&mut self, name: &str, si: usize, gi: usize) {
        let now = self.now;
        let Engine { runs, outputs, .. } = self;
        let run = runs.get_mut(name).expect("run");
        let Run { stages, index, .. } = run;
        let pending = &mut index.pending;
        let stage_name = stages[si].tier.name.clone();
        let g = &mut stages[si].groups[gi];
        if matches!(g.tier.node.state, State::Completed | State::Skipped) || g.tier.user_skipped {
            return;
        }
        // Skipping a failed group (of a Failed or Stopped run) lets a resume move past it.
        g.tier.user_skipped = true;
        g.tier.failed = false;
        g.tier.node.error = None;
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
                &g.tier.name,
                m,
                Reason::SkippedByUser,
            )));
        }
        let at = (si as u32, Some(gi as u32));
        outputs.extend(skip_gates(&mut g.tier, at, now, name, &stage_name, pending));
        g.tier.phase = Phase::Done;
        g.tier.node.state = State::Skipped;
        g.tier.node.completed = Some(now);
        let fact = Fact::GroupSkipped {
            stage: stage_name,
            group: g.tier.name.clone(),
            reason: Reason::SkippedByUser,
        };
        outputs.push_back(Output::Event(Event::new(now, name, fact)));
    }

    /// Marks a stage Skipped: its gates and wait too. `by_user` also covers a stage not reached.
    pub(super) fn skip_stage_rest(&mut self, name: &str, si: usize, by_user: bool) {
        let now = self.now;
        let Engine { runs, outputs, .. } = self;
        let run = runs.get_mut(name).expect("run");
        let Run { stages, index, .. } = run;
        let stage = &mut stages[si];
        if matches!(stage.tier.node.state, State::Completed | State::Skipped) {
            return;
        }
        stage.tier.user_skipped = true;
        stage.tier.failed = false;
        stage.tier.node.error = None;
        let sname = stage.tier.name.clone();
        let at = (si as u32, None);
        let skipped = skip_gates(&mut stage.tier, at, now, name, &sname, &mut index.pending);
        outputs.extend(skipped);
        if !matches!(stage.wait.state, State::Completed | State::Skipped) {
            stage.wait.state = State::Skipped;
            stage.wait.completed = Some(now);
        }
        stage.tier.phase = Phase::Done;
        stage.tier.node.state = State::Skipped;
        stage.tier.node.completed = Some(now);
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
}

pub(super) fn settle_skip(m: &mut MemberRt, now: Timestamp, reason: SkipReason, message: String) {
    m.node.state = State::Skipped;
    m.node.completed = Some(now);
    m.pending = None;
    m.message = Some(message);
    m.skip_reason = Some(reason);
}

pub(super) fn skip_reason(r: SkipReason) -> Reason {
    match r {
        SkipReason::AlreadyAtTarget => Reason::AlreadyAtTarget,
        SkipReason::NoConsistentImage => Reason::NoConsistentImage,
        SkipReason::SkippedByUser => Reason::SkippedByUser,
        SkipReason::MinorVersionSkip => Reason::MinorVersionSkip,
        SkipReason::PreflightFailed => Reason::PreflightFailed,
    }
}

/// Skips a gate not yet passed; the `GateSkipped` event if it was Pending (it was created).
/// Skips every gate of `tier` (stage `at.0`'s own, or its group `at.1`'s) not done yet; the
/// Pending ones leave the pending index and are reported.
fn skip_gates(
    tier: &mut Tier,
    at: (u32, Option<u32>),
    now: Timestamp,
    run: &str,
    stage: &str,
    pending: &mut BTreeSet<GateLoc>,
) -> Vec<Output> {
    let group = at.1.map(|_| tier.name.clone());
    let mut events = Vec::new();
    for timing in [GateTiming::Before, GateTiming::After] {
        for (i, gate) in tier.gates_mut(timing).iter_mut().enumerate() {
            if let Some(ev) = skip_gate(gate, now, run, stage, group.as_deref(), timing) {
                pending.remove(&GateLoc {
                    stage: at.0,
                    group: at.1,
                    timing,
                    index: i as u32,
                });
                events.push(Output::Event(ev));
            }
        }
    }
    events
}

pub(super) fn skip_gate(
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
    // A HealthCheck gate measuring was created too: its skip is reported, its check abandoned.
    let was_pending = matches!(gate.state, State::Pending | State::Running);
    gate.state = State::Skipped;
    gate.completed = Some(now);
    if let Some(c) = gate.check.as_mut().filter(|c| c.live()) {
        c.state = State::Skipped;
        c.outstanding = None;
        c.due = None;
    }
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
