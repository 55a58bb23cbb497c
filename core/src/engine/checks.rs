//! Health checks at run time: where they are measured (a HealthCheck gate, a member after its
//! upgrade, a member's pre-flight), asking the host for each measurement
//! ([`HostCommand::MeasureCheck`]), counting what it reports ([`crate::health::Analysis`]),
//! the timer of the next measurement, and what a check's verdict does at its place — a gate
//! completes, fails its stage or group, or waits for a person; a member completes or fails; a
//! pre-flight starts the upgrade, or fails, skips or defers the member by its policy.
//!
//! The host measures; this module decides. A measurement's result is an input
//! ([`crate::Observation::CheckMeasured`]) like an upgrade's, journaled by the host, so a replay
//! decides the same without measuring again. A result for a measurement nobody waits for any
//! more (an unknown id, a check already over, a gate skipped meanwhile) is ignored.

use super::gates::{describe_gate, gate_mut, gate_ref};
use super::timers::Timer;
use super::tree::{CheckPlace, CheckRt, GateLoc, MemberLoc, PreflightRt, Run, StopCause};
use super::{add_seconds, Engine};
use crate::error::ErrorCode;
use crate::event::{
    CheckPurpose, CheckRequest, CheckTarget, Event, Fact, HostCommand, Output, Reason,
    UpgradeOperation,
};
use crate::health::{after_member_checks, preflight_plan};
use crate::health::{HealthCheck, Measurement, Next, ProviderCheck, Verdict};
use crate::model::PreflightPolicy;
use crate::plan::{decide, Decision};
use crate::state::{MeasurementStatus, State, StatusError};

/// The name of the provider's own pre-flight among a member's pre-flight checks.
pub const PREFLIGHT_CHECK: &str = "preflight";

/// The provider's own pre-flight, as a check: one measurement, errors retried every 30 s.
pub fn provider_preflight() -> HealthCheck {
    HealthCheck {
        name: PREFLIGHT_CHECK.to_string(),
        prometheus: None,
        http: None,
        exec: None,
        provider: Some(ProviderCheck {}),
        interval_seconds: Some(30),
        count: Some(1),
        duration_seconds: None,
        failure_limit: None,
        inconclusive_limit: None,
        consecutive_error_limit: None,
        timeout_seconds: Some(60),
    }
}

/// The check `name` of a run's strategy as measured at `place`: a pre-flight takes one
/// measurement of each (`count` 1, whatever the strategy says).
fn spec_at(run: &Run, place: &CheckPlace, name: &str) -> Option<HealthCheck> {
    let mut spec = if matches!(place, CheckPlace::Preflight(_)) && name == PREFLIGHT_CHECK {
        provider_preflight()
    } else {
        run.strategy
            .health_checks
            .iter()
            .find(|c| c.name == name)?
            .clone()
    };
    if matches!(place, CheckPlace::Preflight(_)) {
        spec.count = Some(1);
        spec.duration_seconds = None;
    }
    Some(spec)
}

fn checks_at_mut<'a>(run: &'a mut Run, place: &CheckPlace) -> Option<&'a mut Vec<CheckRt>> {
    match place {
        CheckPlace::Gate { .. } => None,
        CheckPlace::After(loc) => Some(&mut member_of_mut(run, loc)?.checks),
        CheckPlace::Preflight(loc) => {
            Some(&mut member_of_mut(run, loc)?.preflight.as_mut()?.checks)
        }
    }
}

fn check_mut<'a>(run: &'a mut Run, place: &CheckPlace, index: u32) -> Option<&'a mut CheckRt> {
    match place {
        CheckPlace::Gate { gate, .. } => {
            run.stages.get(gate.stage as usize)?;
            gate_mut(&mut run.stages, gate).check.as_mut()
        }
        _ => checks_at_mut(run, place)?.get_mut(index as usize),
    }
}

fn member_of<'a>(run: &'a Run, loc: &MemberLoc) -> Option<&'a super::tree::MemberRt> {
    run.stages
        .get(loc.stage as usize)?
        .groups
        .get(loc.group as usize)?
        .members
        .get(loc.member as usize)
}

fn member_of_mut<'a>(run: &'a mut Run, loc: &MemberLoc) -> Option<&'a mut super::tree::MemberRt> {
    run.stages
        .get_mut(loc.stage as usize)?
        .groups
        .get_mut(loc.group as usize)?
        .members
        .get_mut(loc.member as usize)
}

/// Names for events and requests: stage, group, member, gate id.
struct Names {
    stage: String,
    group: Option<String>,
    member: Option<String>,
    gate_id: Option<String>,
}

fn names(run: &Run, place: &CheckPlace) -> Names {
    match place {
        CheckPlace::Gate { gate, .. } => {
            let s = &run.stages[gate.stage as usize];
            Names {
                stage: s.tier.name.clone(),
                group: gate.group.map(|g| s.groups[g as usize].tier.name.clone()),
                member: None,
                gate_id: gate_ref(run, gate).and_then(|g| g.id.clone()),
            }
        }
        CheckPlace::After(loc) | CheckPlace::Preflight(loc) => {
            let s = &run.stages[loc.stage as usize];
            let g = &s.groups[loc.group as usize];
            Names {
                stage: s.tier.name.clone(),
                group: Some(g.tier.name.clone()),
                member: Some(g.members[loc.member as usize].name.clone()),
                gate_id: None,
            }
        }
    }
}

impl Engine {
    /// A HealthCheck gate the run just reached: it is Running (not Pending: nobody need act)
    /// while its check measures, from now.
    pub(super) fn begin_gate_check(&mut self, name: &str, loc: &GateLoc) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let gate = gate_mut(&mut run.stages, loc);
        let check_name = gate.config.health_check.clone().unwrap_or_default();
        gate.state = State::Running;
        // A resume measures a failed gate anew: its measurement ids go on from the last.
        let seq = gate.check.as_ref().map_or(0, |c| c.seq);
        let mut check = CheckRt::new(&check_name);
        check.seq = seq;
        check.state = State::Running;
        gate.check = Some(check);
        run.index.pending.remove(loc);
        let place = CheckPlace::Gate {
            run: name.to_string(),
            gate: loc.clone(),
        };
        let n = names(run, &place);
        let message = spec_at(run, &place, &check_name).map(|c| c.describe());
        self.emit(Event::new(
            now,
            name,
            Fact::CheckStarted {
                stage: n.stage,
                group: n.group,
                member: None,
                until: None,
                gate_id: n.gate_id,
                check: check_name,
                message,
            },
        ));
        self.measure(&place, 0);
    }

    /// A member's upgrade succeeded: if checks follow it (`afterMemberChecks`), they start —
    /// measured once its soak is over — and the member keeps its slot and lease until they
    /// end. `false` when none apply (the member completes now).
    pub(super) fn begin_member_checks(&mut self, loc: &MemberLoc) -> bool {
        let now = self.now;
        let run = self.runs.get_mut(&loc.run).expect("run");
        let Some(after) =
            after_member_checks(&run.strategy, loc.stage as usize, loc.group as usize).cloned()
        else {
            return false;
        };
        let start = add_seconds(now, after.soak_seconds.unwrap_or(0));
        let place = CheckPlace::After(loc.clone());
        let Some(m) = member_of_mut(run, loc) else {
            return false;
        };
        m.checks = after
            .checks
            .iter()
            .map(|c| {
                let mut rt = CheckRt::new(c);
                rt.due = Some(start);
                rt
            })
            .collect();
        let n = names(run, &place);
        let facts: Vec<Fact> = after
            .checks
            .iter()
            .map(|c| Fact::CheckStarted {
                stage: n.stage.clone(),
                group: n.group.clone(),
                member: n.member.clone(),
                until: Some(start),
                gate_id: None,
                check: c.clone(),
                message: spec_at(run, &place, c).map(|s| s.describe()),
            })
            .collect();
        for fact in facts {
            self.emit(Event::new(now, &loc.run, fact));
        }
        for index in 0..after.checks.len() as u32 {
            if start <= now {
                self.measure(&place, index);
            } else {
                self.timers.insert((
                    start,
                    Timer::Check {
                        place: place.clone(),
                        index,
                    },
                ));
            }
        }
        true
    }

    /// A member about to start whose stage or group has a pre-flight: it holds its slot (and
    /// lease) while the provider's pre-flight and the configured checks are measured, once each.
    pub(super) fn begin_preflight(&mut self, loc: &MemberLoc, checks: &[String]) {
        let run = self.runs.get_mut(&loc.run).expect("run");
        let place = CheckPlace::Preflight(loc.clone());
        let Some(m) = member_of_mut(run, loc) else {
            return;
        };
        let pre = m.preflight.get_or_insert_with(PreflightRt::default);
        pre.attempt += 1;
        let seq = pre.checks.iter().map(|c| c.seq).max().unwrap_or(0);
        pre.checks = std::iter::once(PREFLIGHT_CHECK)
            .chain(checks.iter().map(String::as_str))
            .map(|c| {
                let mut rt = CheckRt::new(c);
                rt.state = State::Running;
                rt.seq = seq;
                rt
            })
            .collect();
        for index in 0..=checks.len() as u32 {
            self.measure(&place, index);
        }
    }

    /// Asks the host for the next measurement of check `index` at `place`.
    fn measure(&mut self, place: &CheckPlace, index: u32) {
        let now = self.now;
        let Engine {
            runs,
            members,
            catalog,
            measurements,
            outputs,
            ..
        } = self;
        let Some(run) = runs.get_mut(place.run()) else {
            return;
        };
        let n = names(run, place);
        let targets: Vec<String> = match place {
            CheckPlace::Gate { gate, .. } => {
                let s = &run.stages[gate.stage as usize];
                let groups: Vec<&super::tree::GroupRt> = match gate.group {
                    Some(g) => vec![&s.groups[g as usize]],
                    None => s.groups.iter().collect(),
                };
                groups
                    .iter()
                    .flat_map(|g| g.members.iter().map(|m| m.name.clone()))
                    .collect()
            }
            CheckPlace::After(_) | CheckPlace::Preflight(_) => n.member.iter().cloned().collect(),
        };
        let upgrade = match place {
            CheckPlace::Preflight(loc) => {
                let m = member_of(run, loc)
                    .map(|m| m.name.clone())
                    .unwrap_or_default();
                members
                    .get(&m)
                    .and_then(|rec| match decide(&rec.spec, &run.target, catalog, now) {
                        Decision::Upgrade {
                            kubernetes_version,
                            node_images,
                            ..
                        } => Some(UpgradeOperation {
                            operation_id: format!("{}/{m}", run.spec.name),
                            run: run.spec.name.clone(),
                            member: m.clone(),
                            region: rec.spec.region.clone(),
                            provider: rec.spec.provider.clone(),
                            upgrade_type: run.target.upgrade_type,
                            kubernetes_version,
                            node_images,
                        }),
                        _ => None,
                    })
            }
            _ => None,
        };
        let purpose = match place {
            CheckPlace::Gate { .. } => CheckPurpose::Gate,
            CheckPlace::After(_) => CheckPurpose::AfterMember,
            CheckPlace::Preflight(_) => CheckPurpose::Preflight,
        };
        let run_name = run.spec.name.clone();
        let Some(rt) = check_mut(run, place, index) else {
            return;
        };
        let name = rt.name.clone();
        rt.seq += 1;
        rt.state = State::Running;
        rt.due = None;
        let id = match (place, &n.gate_id) {
            (CheckPlace::Gate { .. }, Some(gate)) => format!("{gate}/{name}#{}", rt.seq),
            (CheckPlace::Preflight(_), _) => format!(
                "{run_name}/{}/preflight/{name}#{}",
                n.member.as_deref().unwrap_or_default(),
                rt.seq
            ),
            _ => format!(
                "{run_name}/{}/after/{name}#{}",
                n.member.as_deref().unwrap_or_default(),
                rt.seq
            ),
        };
        rt.outstanding = Some(id.clone());
        let Some(check) = spec_at(run, place, &name) else {
            return;
        };
        measurements.insert(id.clone(), (place.clone(), index));
        let members_of = targets
            .iter()
            .filter_map(|t| members.get(t))
            .map(|rec| CheckTarget {
                name: rec.spec.name.clone(),
                region: rec.spec.region.clone(),
                provider: rec.spec.provider.clone(),
            })
            .collect();
        outputs.push_back(Output::Command(HostCommand::MeasureCheck(CheckRequest {
            measurement_id: id,
            run: place.run().to_string(),
            stage: n.stage,
            group: n.group,
            gate_id: n.gate_id,
            purpose,
            members: members_of,
            check,
            upgrade,
        })));
    }

    /// A check's next measurement is due (or a soak is over).
    pub(super) fn check_due(&mut self, place: &CheckPlace, index: u32) {
        let now = self.now;
        let due = self
            .runs
            .get_mut(place.run())
            .and_then(|r| check_mut(r, place, index))
            .is_some_and(|c| {
                c.live() && c.outstanding.is_none() && c.due.is_some_and(|d| d <= now)
            });
        if due {
            self.measure(place, index);
        }
    }

    /// The host reports a measurement: counted, and the check goes on or is over.
    pub(super) fn check_measured(&mut self, id: &str, m: Measurement) {
        let Some((place, index)) = self.measurements.remove(id) else {
            return;
        };
        let now = self.now;
        let run_name = place.run().to_string();
        let Some(run) = self.runs.get_mut(&run_name) else {
            return;
        };
        if !place_active(run, &place) {
            return;
        }
        let n = names(run, &place);
        let Some(rt) = check_mut(run, &place, index) else {
            return;
        };
        if !rt.live() || rt.outstanding.as_deref() != Some(id) {
            return;
        }
        let name = rt.name.clone();
        let Some(spec) = spec_at(run, &place, &name) else {
            return;
        };
        let judged = spec.judge(&m);
        let rt = check_mut(run, &place, index).expect("found above");
        rt.outstanding = None;
        rt.last = Some(MeasurementStatus {
            at: now,
            verdict: judged.verdict,
            value: judged.value.clone(),
            message: judged.message.clone(),
        });
        let next = rt.analysis.record(&spec, judged.verdict);
        let preflight = matches!(place, CheckPlace::Preflight(_));
        let measured = Fact::CheckMeasured {
            stage: n.stage.clone(),
            group: n.group.clone(),
            member: n.member.clone(),
            reason: preflight.then_some(Reason::Preflight),
            gate_id: n.gate_id.clone(),
            check: name.clone(),
            verdict: judged.verdict,
            value: judged.value,
            message: judged.message.clone(),
        };
        match next {
            Next::Again => {
                let at = add_seconds(now, spec.interval());
                rt.due = Some(at);
                self.timers.insert((at, Timer::Check { place, index }));
                self.emit(Event::new(now, &run_name, measured));
            }
            Next::Done(verdict, why) => {
                rt.state = match verdict {
                    Verdict::Pass => State::Completed,
                    Verdict::Inconclusive => State::Pending,
                    Verdict::Fail | Verdict::Error => State::Failed,
                };
                let why = match (&judged.message, verdict) {
                    // One measurement decides a pre-flight: what it said is the reason.
                    (Some(last), Verdict::Fail | Verdict::Inconclusive) if preflight => {
                        last.clone()
                    }
                    (Some(last), Verdict::Fail | Verdict::Inconclusive) => {
                        format!("{why}; last: {last}")
                    }
                    _ => why,
                };
                rt.verdict = Some(verdict);
                rt.message = Some(why.clone());
                self.emit(Event::new(now, &run_name, measured));
                if !preflight {
                    let fact = Fact::CheckCompleted {
                        stage: n.stage,
                        group: n.group,
                        member: n.member,
                        gate_id: n.gate_id,
                        check: name.clone(),
                        verdict,
                        message: why.clone(),
                    };
                    self.emit(Event::new(now, &run_name, fact));
                }
                let why = format!("check \"{name}\": {why}");
                self.check_concluded(&place, verdict, why);
            }
        }
    }

    /// What a check's verdict does at its place.
    fn check_concluded(&mut self, place: &CheckPlace, verdict: Verdict, why: String) {
        match place {
            CheckPlace::Gate { run, gate } => match verdict {
                Verdict::Pass => self.complete_gate(run, gate, "healthCheck".to_string()),
                Verdict::Inconclusive => {
                    // For a person: approve (go on) or fail it; `waitingOn` says so.
                    let r = self.runs.get_mut(run).expect("run");
                    let g = gate_mut(&mut r.stages, gate);
                    g.state = State::Pending;
                    r.index.pending.insert(gate.clone());
                    self.touch(run);
                }
                Verdict::Fail | Verdict::Error => {
                    self.fail_gate(run, gate, "healthCheck".to_string(), why)
                }
            },
            CheckPlace::After(loc) => {
                let run = self.runs.get_mut(&loc.run).expect("run");
                let Some(checks) = checks_at_mut(run, place) else {
                    return;
                };
                if verdict == Verdict::Pass {
                    if checks.iter().all(|c| c.state == State::Completed) {
                        self.finish_member(loc, None);
                    }
                    return;
                }
                abandon(checks);
                let error = StatusError {
                    code: ErrorCode::HealthCheckFailed.to_string(),
                    message: why,
                };
                self.finish_member(loc, Some(error));
            }
            CheckPlace::Preflight(loc) => {
                let run = self.runs.get_mut(&loc.run).expect("run");
                let Some(checks) = checks_at_mut(run, place) else {
                    return;
                };
                if verdict == Verdict::Pass {
                    if checks.iter().all(|c| c.state == State::Completed) {
                        self.launch_after_preflight(loc);
                    }
                    return;
                }
                abandon(checks);
                self.preflight_failed(loc, why);
            }
        }
    }

    /// A Pending or Running gate fails (its check failed, or a person failed it): its group or
    /// stage fails with `HealthCheckFailed` and the run stops, as for a failure threshold.
    pub(super) fn fail_gate(&mut self, name: &str, loc: &GateLoc, by: String, why: String) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        run.index.pending.remove(loc);
        let what = describe_gate(run, loc);
        let stage_name = run.stages[loc.stage as usize].tier.name.clone();
        let group_name = loc.group.map(|g| {
            run.stages[loc.stage as usize].groups[g as usize]
                .tier
                .name
                .clone()
        });
        let gate = gate_mut(&mut run.stages, loc);
        gate.state = State::Failed;
        gate.completed = Some(now);
        gate.by = Some(by.clone());
        if let Some(c) = gate.check.as_mut() {
            if c.live() || c.state == State::Pending {
                c.state = State::Failed;
                c.verdict = Some(Verdict::Fail);
                c.message = Some(why.clone());
                c.outstanding = None;
                c.due = None;
            }
        }
        let fact = Fact::GateFailed {
            stage: stage_name.clone(),
            group: group_name.clone(),
            gate_type: gate.config.gate_type,
            timing: loc.timing,
            gate_id: gate.id.clone().unwrap_or_default(),
            by,
            message: why.clone(),
        };
        self.emit(Event::new(now, name, fact));
        let why = format!("gate {what} failed: {why}");
        let si = loc.stage as usize;
        match loc.group {
            Some(gi) => {
                let run = self.runs.get_mut(name).expect("run");
                let g = &mut run.stages[si].groups[gi as usize];
                g.tier.fail_with(now, ErrorCode::HealthCheckFailed, &why);
                let fact = Fact::GroupFailed {
                    stage: stage_name,
                    group: g.tier.name.clone(),
                    reason: Reason::HealthCheckFailed,
                    message: why.clone(),
                };
                if run.stopping != Some(StopCause::Failure) {
                    run.node.error = Some(StatusError {
                        code: ErrorCode::HealthCheckFailed.to_string(),
                        message: why,
                    });
                }
                self.emit(Event::new(now, name, fact));
                self.halt_for_failure(name);
            }
            None => {
                self.mark_stage_failed(name, si, ErrorCode::HealthCheckFailed, &why);
                self.halt_for_failure(name);
            }
        }
    }

    /// Every check of a member passed its pre-flight: the upgrade starts (decided again: the
    /// catalog may have moved), unless the run stops meanwhile (then the member goes back to
    /// its queue and the slot is freed: stopping starts nothing new).
    fn launch_after_preflight(&mut self, loc: &MemberLoc) {
        let run = &self.runs[&loc.run];
        if run.stopping.is_some() || !run.active() {
            self.release_slot(loc);
            let run = self.runs.get_mut(&loc.run).expect("run");
            if let Some(m) = member_of_mut(run, loc) {
                m.node.state = State::NotStarted;
                m.node.start = None;
            }
            self.touch(&loc.run);
            return;
        }
        self.launch(loc, None);
    }

    /// A member's pre-flight failed: its policy decides.
    fn preflight_failed(&mut self, loc: &MemberLoc, why: String) {
        let now = self.now;
        let run = &self.runs[&loc.run];
        let Some(plan) = preflight_plan(&run.strategy, loc.stage as usize, loc.group as usize)
        else {
            return;
        };
        let first_failed = member_of(run, loc)
            .and_then(|m| m.preflight.as_ref())
            .and_then(|p| p.first_failed)
            .unwrap_or(now);
        let waited = (now - first_failed).num_seconds().max(0) as u64;
        match plan.policy {
            PreflightPolicy::Wait if waited < plan.max_wait_seconds => {
                self.release_slot(loc);
                let until = add_seconds(now, plan.retry_seconds);
                let run = self.runs.get_mut(&loc.run).expect("run");
                let stage = run.stages[loc.stage as usize].tier.name.clone();
                let g = &mut run.stages[loc.stage as usize].groups[loc.group as usize];
                let group = g.tier.name.clone();
                let m = &mut g.members[loc.member as usize];
                if let Some(p) = m.preflight.as_mut() {
                    p.first_failed = Some(first_failed);
                }
                m.node.state = State::Pending;
                m.node.start = None;
                let message = format!("pre-flight failed, tried again at the next interval: {why}");
                m.pending = Some((Reason::Preflight, Some(until)));
                m.message = Some(message.clone());
                let fact = Fact::MemberPending {
                    stage,
                    group,
                    member: m.name.clone(),
                    reason: Reason::Preflight,
                    until: Some(until),
                    message: Some(message),
                };
                self.timers.insert((
                    until,
                    Timer::Member {
                        loc: loc.clone(),
                        reason: crate::event::WakeReason::Preflight,
                    },
                ));
                self.emit(Event::new(now, &loc.run, fact));
                self.touch(&loc.run);
            }
            PreflightPolicy::Skip => {
                self.release_slot(loc);
                self.skip_after_preflight(loc, why);
            }
            PreflightPolicy::Fail | PreflightPolicy::Wait => {
                let why = if plan.policy == PreflightPolicy::Wait {
                    format!(
                        "pre-flight still failing after {waited} s (maxWaitSeconds {}): {why}",
                        plan.max_wait_seconds
                    )
                } else {
                    format!("pre-flight failed: {why}")
                };
                let error = StatusError {
                    code: ErrorCode::PreflightFailed.to_string(),
                    message: why,
                };
                self.finish_member(loc, Some(error));
            }
        }
    }

    /// Re-creates the run's Failed HealthCheck gates of its current stage (a resume measures
    /// them anew).
    pub(super) fn remeasure_failed_gates(&mut self, name: &str) {
        let Some(run) = self.runs.get(name) else {
            return;
        };
        let si = run.current;
        let Some(stage) = run.stages.get(si) else {
            return;
        };
        let mut failed = Vec::new();
        let tiers = std::iter::once((None, &stage.tier)).chain(
            stage
                .groups
                .iter()
                .enumerate()
                .map(|(gi, g)| (Some(gi as u32), &g.tier)),
        );
        for (group, tier) in tiers {
            for timing in [
                crate::model::GateTiming::Before,
                crate::model::GateTiming::After,
            ] {
                for (i, g) in tier.gates(timing).iter().enumerate() {
                    if g.state == State::Failed {
                        failed.push(GateLoc {
                            stage: si as u32,
                            group,
                            timing,
                            index: i as u32,
                        });
                    }
                }
            }
        }
        for loc in failed {
            let run = self.runs.get_mut(name).expect("run");
            let gate = gate_mut(&mut run.stages, &loc);
            gate.completed = None;
            gate.by = None;
            if gate.config.gate_type == crate::model::GateType::HealthCheck {
                self.begin_gate_check(name, &loc);
            } else {
                // A person failed an approval: it waits for one again.
                gate.state = State::Pending;
                run.index.pending.insert(loc);
            }
        }
    }

    /// Measurements awaited now: measurement id → run (what a host re-asks after a restart).
    pub fn measurements_in_flight(&self) -> impl Iterator<Item = (&str, &str)> {
        self.measurements
            .iter()
            .map(|(id, (place, _))| (id.as_str(), place.run()))
    }
}

/// Whether the place still waits on its checks: a gate measuring (not skipped meanwhile), a
/// member in its checks or its pre-flight.
fn place_active(run: &Run, place: &CheckPlace) -> bool {
    match place {
        CheckPlace::Gate { gate, .. } => {
            gate_ref(run, gate).is_some_and(|g| g.state == State::Running)
        }
        CheckPlace::After(loc) => {
            member_of(run, loc).is_some_and(|m| m.node.state == State::Running)
        }
        CheckPlace::Preflight(loc) => member_of(run, loc)
            .is_some_and(|m| m.node.state == State::Running && m.operation_id.is_none()),
    }
}

/// Marks the checks of a place still measuring as abandoned: another check decided.
fn abandon(checks: &mut [CheckRt]) {
    for c in checks.iter_mut().filter(|c| c.live()) {
        c.state = State::Skipped;
        c.outstanding = None;
        c.due = None;
    }
}
