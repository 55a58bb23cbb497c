//! Operator commands: each is validated, then changes state and touches the runs it concerns;
//! a refused command changes nothing. Progress is [`super::Engine::settle`]'s.

use super::gates::{describe_gate, find_gate, gate_ref};
use super::input::{Command, GateSelector};
use super::tree::{GateLoc, MemberLoc, MemberRecord, Node, Run, RunIndex, StopCause};
use super::Engine;
use super::{invalid_state, not_found};
use crate::catalog::Catalog;
use crate::error::{Error, ErrorCode, Errors};
use crate::event::{Event, Fact, Reason};
use crate::model::{Member, NodeImageSelectionType, SkipTarget, UpdateRunSpec, UpdateStrategy};
use crate::plan::{default_strategy, RunTarget};
use crate::state::State;
use crate::validate;
use std::collections::{BTreeMap, BTreeSet};

impl Engine {
    pub(super) fn handle_command(&mut self, c: Command) -> Result<(), Error> {
        match c {
            Command::UpsertMember { member } => self.upsert_member(member),
            Command::DeleteMember { name } => self.delete_member(&name),
            Command::FailGate {
                run,
                gate,
                by,
                message,
            } => self.fail_gate_command(&run, &gate, by, message),
            Command::UpsertStrategy { name, strategy } => {
                let mut e = Errors::default();
                validate::check_name("name", &name, &mut e);
                validate::validate_strategy("strategy", &strategy, &mut e);
                e.into_result()?;
                self.strategies.insert(name, strategy);
                Ok(())
            }
            Command::DeleteStrategy { name } => self
                .strategies
                .remove(&name)
                .map(|_| ())
                .ok_or_else(|| not_found("strategy", &name)),
            Command::CreateRun { run } => {
                if run.auto_upgrade_profile_name.is_some() {
                    return Err(Error::invalid(vec![crate::error::FieldError::new(
                        "autoUpgradeProfileName",
                        "is set by waverun when an auto-upgrade profile generates a run; a run created by hand cannot claim a profile",
                    )]));
                }
                self.create_run(run, None)
            }
            Command::UpdateRun { run } => self.update_run(run),
            Command::DeleteRun { name } => self.delete_run(&name),
            Command::StartRun { name } => self.start_run(&name),
            Command::StopRun { name } => self.stop_run(&name),
            Command::Skip { run, targets } => self.skip(&run, &targets),
            Command::CompleteGate { run, gate, by } => self.approve(&run, &gate, by),
            Command::CreateRetryRun { name, from } => self.create_retry_run(&name, &from),
            Command::SetFreezes { freezes } => {
                let mut e = Errors::default();
                for (i, f) in freezes.iter().enumerate() {
                    if f.name.trim().is_empty() {
                        e.push(format!("freezes[{i}].name"), "is required");
                    }
                    if f.end <= f.start {
                        e.push(format!("freezes[{i}].end"), "must be after start");
                    }
                }
                e.into_result()?;
                self.freezes = freezes;
                self.freezes
                    .sort_by(|a, b| a.start.cmp(&b.start).then(a.name.cmp(&b.name)));
                self.touch_active();
                Ok(())
            }
            Command::SetCatalog { catalog } => {
                self.catalog = Catalog::new(catalog);
                self.catalog_changed();
                Ok(())
            }
            Command::UpsertProfile { profile } => self.upsert_profile(profile),
            Command::DeleteProfile { name } => self.delete_profile(&name),
            Command::GenerateUpdateRun { profile } => self.generate_update_run(&profile),
        }
    }

    pub(super) fn upsert_member(&mut self, member: Member) -> Result<(), Error> {
        validate::member(&member)?;
        let name = member.name.clone();
        let joined = !self.members.contains_key(&name);
        self.members.insert(name.clone(), MemberRecord::new(member));
        if joined {
            self.member_joined(&name);
        }
        // A changed window or region may unblock a waiting member.
        let locs: Vec<MemberLoc> = self
            .runs
            .iter()
            .filter(|(_, r)| r.active())
            .filter_map(|(rn, r)| {
                r.member_index.get(&name).map(|(s, g, m)| MemberLoc {
                    run: rn.clone(),
                    stage: *s,
                    group: *g,
                    member: *m,
                })
            })
            .collect();
        for loc in locs {
            self.requeue(&loc);
            self.touch(&loc.run);
        }
        Ok(())
    }

    pub(super) fn delete_member(&mut self, name: &str) -> Result<(), Error> {
        if !self.members.contains_key(name) {
            return Err(not_found("member", name));
        }
        for (rn, r) in &self.runs {
            // A Stopped or Failed run can be resumed and would start its waiting members again.
            let may_resume = !matches!(r.node.state, State::Completed | State::Skipped);
            if r.started() && may_resume {
                if let Some((s, g, m)) = r.member_index.get(name) {
                    let st = r.stages[*s as usize].groups[*g as usize].members[*m as usize]
                        .node
                        .state;
                    if !st.is_terminal() {
                        return Err(Error::new(
                            ErrorCode::InvalidState,
                            format!(
                                "member \"{name}\" is part of run \"{rn}\" ({:?}) and is {:?} there; finish, skip it or delete the run first",
                                r.node.state, st
                            ),
                        ));
                    }
                }
            }
        }
        self.members.remove(name);
        Ok(())
    }

    pub(super) fn create_run(
        &mut self,
        spec: UpdateRunSpec,
        retry: Option<(String, BTreeSet<String>, Vec<String>)>,
    ) -> Result<(), Error> {
        validate::run_spec(&spec)?;
        if self.runs.contains_key(&spec.name) {
            return Err(Error::new(
                ErrorCode::AlreadyExists,
                format!("run \"{}\" already exists", spec.name),
            ));
        }
        let strategy = self.resolve_strategy(&spec)?;
        let mut target = RunTarget::of(&spec);
        let (retry_of, member_filter, pinned) = match retry {
            Some((from, filter, images)) => {
                if !images.is_empty() {
                    target.images = images;
                }
                (Some(from), Some(filter), true)
            }
            None => (None, None, false),
        };
        let name = spec.name.clone();
        let run = Run {
            spec,
            strategy,
            target,
            node: Node::default(),
            failure_count: 0,
            accepted_failures: 0,
            stopping: None,
            in_flight: 0,
            current: 0,
            stages: Vec::new(),
            member_index: BTreeMap::new(),
            pending_skips: Vec::new(),
            pending_skip_times: Vec::new(),
            member_filter,
            pinned_images: pinned,
            retry_of,
            generated: None,
            index: RunIndex::default(),
        };
        self.runs.insert(name.clone(), run);
        self.emit(Event::new(self.now, &name, Fact::RunCreated));
        Ok(())
    }

    pub(super) fn resolve_strategy(&self, spec: &UpdateRunSpec) -> Result<UpdateStrategy, Error> {
        Ok(match (&spec.strategy, &spec.update_strategy_name) {
            (Some(s), _) => s.clone(),
            (None, Some(n)) => self.strategies.get(n).cloned().ok_or_else(|| {
                let mut e = not_found("strategy", n);
                e.fields.push(crate::error::FieldError::new(
                    "updateStrategyName",
                    format!("no stored strategy is named \"{n}\""),
                ));
                e
            })?,
            (None, None) => default_strategy(),
        })
    }

    pub(super) fn update_run(&mut self, spec: UpdateRunSpec) -> Result<(), Error> {
        validate::run_spec(&spec)?;
        let run = self.get_run(&spec.name)?;
        if run.started() {
            return Err(invalid_state(
                &spec.name,
                run.node.state,
                "update",
                "a run can be edited only before it starts",
            ));
        }
        if spec.auto_upgrade_profile_name != run.spec.auto_upgrade_profile_name {
            return Err(Error::invalid(vec![crate::error::FieldError::new(
                "autoUpgradeProfileName",
                "is set by waverun when an auto-upgrade profile generates a run and cannot be changed",
            )]));
        }
        let strategy = self.resolve_strategy(&spec)?;
        let run = self.runs.get_mut(&spec.name).expect("checked");
        let channel = run.target.channel;
        run.target = RunTarget::of(&spec);
        run.target.channel = channel;
        run.strategy = strategy;
        let name = spec.name.clone();
        run.spec = spec;
        self.emit(Event::new(self.now, &name, Fact::RunUpdated));
        Ok(())
    }

    pub(super) fn delete_run(&mut self, name: &str) -> Result<(), Error> {
        let run = self.get_run(name)?;
        match run.node.state {
            State::Running | State::Pending => {
                return Err(invalid_state(
                    name,
                    self.shown_state(run),
                    "delete",
                    "stop it first",
                ))
            }
            State::Stopping => {
                return Err(invalid_state(
                    name,
                    self.shown_state(run),
                    "delete",
                    "wait until it is Stopped",
                ))
            }
            _ => {}
        }
        self.runs.remove(name);
        self.timers.forget_run(name);
        self.catalog_waiters.retain(|l| l.run != name);
        for w in self.lease_waiters.values_mut() {
            w.retain(|l| l.run != name);
        }
        self.emit(Event::new(self.now, name, Fact::RunDeleted));
        Ok(())
    }

    pub(super) fn create_retry_run(&mut self, name: &str, from: &str) -> Result<(), Error> {
        let src = self.get_run(from)?;
        if !matches!(
            src.node.state,
            State::Completed | State::Failed | State::Stopped | State::Skipped
        ) {
            return Err(invalid_state(
                from,
                src.node.state,
                "retry",
                "a retry run needs a finished (Completed, Failed, Stopped or Skipped) run",
            ));
        }
        let mut filter = BTreeSet::new();
        for s in &src.stages {
            for g in &s.groups {
                for m in &g.members {
                    if m.node.state != State::Completed {
                        filter.insert(m.name.clone());
                    }
                }
            }
        }
        let mut spec = src.spec.clone();
        spec.name = name.to_string();
        spec.strategy = Some(src.strategy.clone());
        spec.update_strategy_name = None;
        let images = match src.target.selection {
            NodeImageSelectionType::Latest => Vec::new(),
            _ => src.target.images.clone(),
        };
        self.create_run(spec, Some((from.to_string(), filter, images)))
    }

    pub(super) fn start_run(&mut self, name: &str) -> Result<(), Error> {
        let run = self.get_run(name)?;
        if let Some(g) = &run.generated {
            // One run per profile at a time (spec section 8).
            let other = self
                .runs
                .iter()
                .find(|(n, r)| n.as_str() != name && r.generated_by(&g.profile) && r.active());
            if let Some((other, _)) = other {
                return Err(Error::new(
                    ErrorCode::InvalidState,
                    format!(
                        "cannot start run \"{name}\": run \"{other}\" of auto-upgrade profile \"{}\" is running; a profile runs one update run at a time",
                        g.profile
                    ),
                ));
            }
        }
        match run.node.state {
            State::NotStarted => {}
            State::Stopped | State::Failed => return self.resume_run(name),
            s => {
                return Err(invalid_state(
                    name,
                    self.shown_state(run),
                    "start",
                    match s {
                        State::Stopping => "wait until it is Stopped, then resume it",
                        State::Running | State::Pending => "it is already running",
                        _ => "a finished run cannot be started again; create a retry run",
                    },
                ))
            }
        }
        let mut run = self.runs.remove(name).expect("checked");
        if let Err(e) = self.build_tree(&mut run, self.now) {
            self.runs.insert(name.to_string(), run);
            return Err(e);
        }
        // Skips asked for before the start apply to the frozen tree now; a member skip whose
        // member left the run's selection since (labels or strategy changed) no longer applies.
        let mut pending = std::mem::take(&mut run.pending_skips);
        run.pending_skip_times.clear();
        pending.retain(|t| match t {
            SkipTarget::Member(n) => run.member_index.contains_key(n),
            _ => true,
        });
        run.node.state = State::Running;
        run.node.start = Some(self.now);
        self.runs.insert(name.to_string(), run);
        let message = self.runs[name]
            .retry_of
            .as_ref()
            .map(|r| format!("retry of run {r}"));
        self.emit(Event::new(self.now, name, Fact::RunStarted { message }));
        for t in &pending {
            self.apply_skip(name, t);
        }
        self.touch(name);
        Ok(())
    }

    pub(super) fn resume_run(&mut self, name: &str) -> Result<(), Error> {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("checked");
        let was_failed = run.node.state == State::Failed;
        run.node.state = State::Running;
        run.node.completed = None;
        run.node.error = None;
        run.stopping = None;
        if was_failed {
            // Resuming a failed run accepts the failures so far: thresholds count from here.
            run.accepted_failures = run.failure_count;
        }
        if let Some(stage) = run.stages.get_mut(run.current) {
            stage.tier.resume(was_failed);
            for g in &mut stage.groups {
                g.tier.resume(was_failed);
            }
        }
        self.emit(Event::new(now, name, Fact::RunResumed));
        // A gate that failed (its check, or a person) is measured (or waits for a person) anew.
        self.remeasure_failed_gates(name);
        // Groups a failure kept from being entered are entered by `settle`; members whose
        // timers fired while the run was stopped or failed go back in their queues.
        let cur = self.runs[name].current;
        let groups = self.runs[name]
            .stages
            .get(cur)
            .map_or(0, |s| s.groups.len());
        for gi in 0..groups {
            self.requeue_group(name, cur, gi);
        }
        self.touch(name);
        Ok(())
    }

    pub(super) fn stop_run(&mut self, name: &str) -> Result<(), Error> {
        let run = self.get_run(name)?;
        if !matches!(run.node.state, State::Running | State::Pending) {
            return Err(invalid_state(
                name,
                run.node.state,
                "stop",
                "only a Running or Pending run can be stopped",
            ));
        }
        let run = self.runs.get_mut(name).expect("checked");
        run.stopping = Some(StopCause::User);
        run.node.state = State::Stopping;
        let reason = Reason::Stop;
        self.emit(Event::new(self.now, name, Fact::RunStopping { reason }));
        self.touch(name);
        Ok(())
    }

    pub(super) fn approve(
        &mut self,
        name: &str,
        sel: &GateSelector,
        by: Option<String>,
    ) -> Result<(), Error> {
        let loc = self.pending_gate(name, sel, "approve")?;
        self.complete_gate(name, &loc, by.unwrap_or_else(|| "user".to_string()));
        Ok(())
    }

    /// `FailGate`: a person fails a Pending gate (an inconclusive health check, an approval
    /// refused); its stage or group fails and the run stops.
    pub(super) fn fail_gate_command(
        &mut self,
        name: &str,
        sel: &GateSelector,
        by: Option<String>,
        message: Option<String>,
    ) -> Result<(), Error> {
        if let Some(m) = &message {
            let mut e = Errors::default();
            validate::check_text("message", m, 1000, &mut e);
            e.into_result()?;
        }
        let loc = self.pending_gate(name, sel, "fail")?;
        let by = by.unwrap_or_else(|| "user".to_string());
        let why = message.unwrap_or_else(|| format!("failed by {by}"));
        self.fail_gate(name, &loc, by, why);
        Ok(())
    }

    /// The Pending gate `sel` names, or why it cannot be approved or failed (`action`) now.
    fn pending_gate(&self, name: &str, sel: &GateSelector, action: &str) -> Result<GateLoc, Error> {
        let run = self.get_run(name)?;
        let loc = find_gate(run, sel)?;
        let gate = gate_ref(run, &loc).expect("found");
        let what = describe_gate(run, &loc);
        let refuse = |why: String| Err(Error::new(ErrorCode::InvalidState, why));
        match gate.state {
            State::Pending => Ok(loc),
            State::NotStarted => refuse(format!(
                "gate {what} of run \"{name}\" is NotStarted: the run has not reached it yet"
            )),
            State::Running => refuse(format!(
                "gate {what} of run \"{name}\" is measuring its health check \"{}\": it can be {action}d by a person only once inconclusive (or skip its group or stage)",
                gate.config.health_check.as_deref().unwrap_or_default()
            )),
            s => refuse(format!("gate {what} of run \"{name}\" is already {s:?}")),
        }
    }
}
