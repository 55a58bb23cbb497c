//! Scheduling: which member starts next, and whether it may start now — and if not, why and
//! until when (a lease held by another run, the release not yet in its region, its maintenance
//! window, a fleet freeze), within the stage's and groups' concurrency and failure limits.

use super::skips::{settle_skip, skip_reason};
use super::timers::Timer;
use super::tree::{GroupRt, MemberLoc, Phase, StageRt};
use super::Engine;
use super::{member_failed, member_skipped};
use crate::decision::{freeze_hold, may_start, Hold, HoldEnds, Situation};
use crate::error::ErrorCode;
use crate::event::{Event, Fact, HostCommand, Output, Reason, UpgradeOperation};
use crate::health::preflight_plan;
use crate::model::{Freeze, Timestamp};
use crate::plan::{decide, Decision, SkipReason};
use crate::state::{State, StatusError};

impl Engine {
    /// Starts as many members of the current stage as the limits allow.
    pub(super) fn fill_stage(&mut self, name: &str, si: usize) {
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
            if stage.tier.phase != Phase::Body || !stage_has_slot(stage) {
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
            if !stage_has_slot(stage) || !run.active() || run.stopping.is_some() {
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
                    g.tier.phase == Phase::Body
                        && has_slot(None, g)
                        && bound.is_none_or(|inf| g.tier.in_flight < inf)
                }) else {
                    break;
                };
                let inf = groups[gi].tier.in_flight;
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

    pub(super) fn hold_for_freeze(&mut self, name: &str, si: usize, f: &Freeze) {
        let now = self.now;
        let Engine {
            runs,
            members,
            catalog,
            outputs,
            timers,
            ..
        } = self;
        let run = runs.get_mut(name).expect("run");
        let target = &run.target;
        let stage_name = run.stages[si].tier.name.clone();
        let mut any = false;
        for g in &mut run.stages[si].groups {
            if g.tier.phase != Phase::Body || !has_slot(None, g) {
                continue;
            }
            let head = g.ready_open.first().or(g.ready_free.first()).copied();
            if let Some(mi) = head {
                any = true;
                let m = &mut g.members[mi as usize];
                let message = match members.get(&m.name) {
                    Some(rec) => {
                        may_start(&Situation {
                            member: &rec.spec,
                            window: rec.window(target.upgrade_type),
                            target,
                            catalog,
                            now,
                            freeze: Some(f),
                            held_by: None,
                        })
                        .holds
                        .swap_remove(0)
                        .message
                    }
                    None => freeze_hold(f).message,
                };
                let wait = (Reason::Freeze, Some(f.end));
                m.node.state = State::Pending;
                if m.pending != Some(wait) {
                    m.pending = Some(wait);
                    m.message = Some(message);
                    let fact = Fact::MemberPending {
                        stage: stage_name.clone(),
                        group: g.tier.name.clone(),
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
    pub(super) fn next_candidate(
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
    pub(super) fn sweep_blocked(&mut self, name: &str, si: usize, gi: usize) {
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

    /// Whether queued member `mi` can start now ([`may_start`]); if not (`None`), it leaves
    /// the queue as Pending on its first hold, with a timer (window opening, release date) or a
    /// waiter (lease, catalog change). When it can, the decision taken for it comes along
    /// (`None` if none was): `start_member` reuses it, as nothing the decision depends on
    /// changes in between.
    pub(super) fn check_candidate(
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
        let stage_name = &stage.tier.name;
        let g = &mut stage.groups[gi];
        let m = &mut g.members[mi as usize];
        let Some(rec) = members.get(&m.name) else {
            // Deleted members cannot be part of a started run; treat as startable and let
            // start_member settle it.
            return Some(None);
        };
        let readiness = may_start(&Situation {
            member: &rec.spec,
            window: rec.window(target.upgrade_type),
            target,
            catalog,
            now,
            freeze: None,
            held_by: leases
                .get(&m.name)
                .map(String::as_str)
                .filter(|h| *h != name),
        });
        let Some(hold) = readiness.holds.into_iter().next() else {
            return Some(Some(readiness.decision));
        };
        let loc = MemberLoc {
            run: name.to_string(),
            stage: si as u32,
            group: gi as u32,
            member: mi,
        };
        match hold.ends {
            HoldEnds::At(t, reason) => timers.insert((t, Timer::Member { loc, reason })),
            HoldEnds::LeaseReleased => {
                lease_waiters.entry(m.name.clone()).or_default().insert(loc);
            }
            HoldEnds::CatalogChanged => {
                catalog_waiters.insert(loc);
            }
            HoldEnds::Never => {}
        }
        if from_open {
            g.ready_open.remove(&mi);
        } else {
            g.ready_free.remove(&mi);
        }
        let Hold {
            reason,
            until,
            message,
            ..
        } = hold;
        m.node.state = State::Pending;
        if m.pending != Some((reason, until)) {
            m.pending = Some((reason, until));
            m.message = Some(message.clone());
            let fact = Fact::MemberPending {
                stage: stage_name.clone(),
                group: g.tier.name.clone(),
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
    /// one, else it is decided here. A member to upgrade takes its slot and lease; its upgrade
    /// starts now, or once its pre-flight passes when its stage or group has one.
    pub(super) fn start_member(
        &mut self,
        name: &str,
        si: usize,
        gi: usize,
        mi: u32,
        decided: Option<Decision>,
    ) {
        let now = self.now;
        let loc = MemberLoc {
            run: name.to_string(),
            stage: si as u32,
            group: gi as u32,
            member: mi,
        };
        let run = &self.runs[name];
        let m = &run.stages[si].groups[gi].members[mi as usize];
        let decision = decided.unwrap_or_else(|| {
            decide(&self.members[&m.name].spec, &run.target, &self.catalog, now)
        });
        if !matches!(decision, Decision::Upgrade { .. }) {
            // Nothing to start: settled without a slot.
            self.settle_unstarted(&loc, decision);
            return;
        }
        let preflight = preflight_plan(&run.strategy, si, gi);
        self.hold_slot(&loc);
        match preflight {
            Some(plan) => self.begin_preflight(&loc, &plan.checks),
            None => self.launch(&loc, Some(decision)),
        }
    }

    /// A member takes a slot of its group, stage and run, and its lease: it is Running.
    fn hold_slot(&mut self, loc: &MemberLoc) {
        let now = self.now;
        let run = self.runs.get_mut(&loc.run).expect("run");
        let stage = &mut run.stages[loc.stage as usize];
        let g = &mut stage.groups[loc.group as usize];
        g.ready_open.remove(&loc.member);
        g.ready_free.remove(&loc.member);
        let m = &mut g.members[loc.member as usize];
        m.node.state = State::Running;
        m.node.start = Some(now);
        m.pending = None;
        m.message = None;
        self.leases.insert(m.name.clone(), loc.run.clone());
        g.tier.in_flight += 1;
        stage.tier.in_flight += 1;
        run.in_flight += 1;
    }

    /// A member holding its slot gives it back (its pre-flight failed or the run stops before
    /// its upgrade started), and its lease; whoever waits for the lease may go on.
    pub(super) fn release_slot(&mut self, loc: &MemberLoc) {
        let run = self.runs.get_mut(&loc.run).expect("run");
        run.in_flight -= 1;
        let stage = &mut run.stages[loc.stage as usize];
        stage.tier.in_flight -= 1;
        let g = &mut stage.groups[loc.group as usize];
        g.tier.in_flight -= 1;
        let member = g.members[loc.member as usize].name.clone();
        self.leases.remove(&member);
        self.wake_lease_waiters(&member);
    }

    /// Starts the upgrade of a member holding its slot (`decided`, or decided now): the
    /// operation, `MemberStarted` and the `StartUpgrade` command; a member with nothing to do
    /// any more, or that cannot take the target, gives its slot back and is settled.
    pub(super) fn launch(&mut self, loc: &MemberLoc, decided: Option<Decision>) {
        let now = self.now;
        let (name, si, gi, mi) = (
            loc.run.as_str(),
            loc.stage as usize,
            loc.group as usize,
            loc.member,
        );
        let Engine {
            runs,
            members,
            catalog,
            operations,
            outputs,
            ..
        } = self;
        let run = runs.get_mut(name).expect("run");
        let target = &run.target;
        let stage = &mut run.stages[si];
        let stage_name = &stage.tier.name;
        let g = &mut stage.groups[gi];
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
                m.message = message;
                m.operation_id = Some(op.clone());
                m.kubernetes_version = kubernetes_version.clone();
                m.node_images = node_images.clone();
                operations.insert(op.clone(), loc.clone());
                let fact = Fact::MemberStarted {
                    stage: stage_name.clone(),
                    group: g.tier.name.clone(),
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
            }
            skip_or_fail => {
                self.release_slot(loc);
                self.settle_unstarted(loc, skip_or_fail);
            }
        }
    }

    /// Settles a member that will not be upgraded (nothing to do, or it cannot take the
    /// target): Skipped or Failed without a cluster call.
    fn settle_unstarted(&mut self, loc: &MemberLoc, decision: Decision) {
        let now = self.now;
        let (name, si, gi, mi) = (
            loc.run.as_str(),
            loc.stage as usize,
            loc.group as usize,
            loc.member as usize,
        );
        let run = self.runs.get_mut(name).expect("run");
        let stage = &mut run.stages[si];
        let stage_name = stage.tier.name.clone();
        let g = &mut stage.groups[gi];
        g.ready_open.remove(&loc.member);
        g.ready_free.remove(&loc.member);
        match decision {
            Decision::Upgrade { .. } => {}
            Decision::Skip { reason, message } => {
                let skipped = skip_member(g, mi, now, name, &stage_name, reason, message);
                self.outputs.push_back(skipped);
                // A member settled instead of started: its group may be done now.
                self.settle_group(name, si, gi);
            }
            Decision::Fail { code, message } => {
                let why = format!("member \"{}\": {message}", g.members[mi].name);
                let failed = fail_member(g, mi, now, name, &stage_name, code, message);
                self.outputs.push_back(failed);
                self.count_failure(name, si, gi);
                if code.fails_the_run() {
                    self.fail_run_for_member(name, si, code, &why);
                }
                self.settle_group(name, si, gi);
            }
        }
    }

    /// A member whose pre-flight failed under `Skip` is Skipped, saying why.
    pub(super) fn skip_after_preflight(&mut self, loc: &MemberLoc, why: String) {
        let now = self.now;
        let (name, si, gi) = (loc.run.as_str(), loc.stage as usize, loc.group as usize);
        let run = self.runs.get_mut(name).expect("run");
        let stage = &mut run.stages[si];
        let g = &mut stage.groups[gi];
        let message = format!("pre-flight failed: {why}");
        let skipped = skip_member(
            g,
            loc.member as usize,
            now,
            name,
            &stage.tier.name,
            SkipReason::PreflightFailed,
            message,
        );
        self.outputs.push_back(skipped);
        self.touch(name);
    }
}

/// Whether a stage may start one more member: no failure threshold exceeded, a slot free.
fn stage_has_slot(stage: &StageRt) -> bool {
    !stage.tier.failed && stage.tier.in_flight < stage.tier.max_concurrency
}

/// Whether a group (within its stage, when given) may start one more member: no failure
/// threshold exceeded, a slot free.
pub(super) fn has_slot(stage: Option<&StageRt>, g: &GroupRt) -> bool {
    !g.tier.failed && g.tier.in_flight < g.tier.max_concurrency && stage.is_none_or(stage_has_slot)
}

/// Settles member `mi` of `g` as Skipped without an upgrade: the scheduling decision found
/// nothing to do (already at target, no consistent image). Returns its event.
pub(super) fn skip_member(
    g: &mut GroupRt,
    mi: usize,
    now: Timestamp,
    run: &str,
    stage: &str,
    reason: SkipReason,
    message: String,
) -> Output {
    let m = &mut g.members[mi];
    settle_skip(m, now, reason, message);
    g.unfinished -= 1;
    let event = member_skipped(now, run, stage, &g.tier.name, m, skip_reason(reason));
    Output::Event(event)
}

/// Settles member `mi` of `g` as Failed without a cluster call: the scheduling decision
/// refused the upgrade (for example, its version is not offered). Returns its event; the
/// caller counts the failure against the thresholds.
pub(super) fn fail_member(
    g: &mut GroupRt,
    mi: usize,
    now: Timestamp,
    run: &str,
    stage: &str,
    code: ErrorCode,
    message: String,
) -> Output {
    let m = &mut g.members[mi];
    m.node.state = State::Failed;
    m.node.start = Some(now);
    m.node.completed = Some(now);
    m.node.error = Some(StatusError {
        code: code.to_string(),
        message: message.clone(),
    });
    m.message = Some(message);
    g.unfinished -= 1;
    Output::Event(member_failed(now, run, stage, &g.tier.name, m, None))
}
