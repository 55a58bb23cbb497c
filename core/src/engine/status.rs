//! The status tree a user sees: a run's runtime tree rendered as [`RunStatus`] at the engine's
//! `now` — every node's state and times, limits, gates, and what each member, group, stage and
//! the run are waiting on and until when. Built whole ([`Render::tree`]), or written member by
//! member as it serializes ([`RunStatusView`]), by the same functions.

use super::tree::{CheckRt, GateRt, GroupRt, MemberRt, Phase, Run, StageRt};
use crate::event::Reason;
use crate::model::{
    Freeze, GateTiming, GateType, NodeImageSelectionType, Timestamp, UpdateStrategy,
};
use crate::state::{
    CheckStatus, GateStatus, GroupStatus, MemberStatus, NodeImageSelectionStatus, NodeStatus,
    NodeTally, RunStatus, StageStatus, State, WaitStatus, WaitingOn,
};
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};

/// How a run's status tree is made, node by node: [`Render::tree`] builds it whole, and
/// [`RunStatusView`] writes it member by member with the same functions.
#[derive(Clone, Copy)]
pub(super) struct Render<'e> {
    run: &'e Run,
    freeze: Option<&'e Freeze>,
}

impl<'e> Render<'e> {
    /// `run` at `now`, under `freezes`.
    pub(super) fn new(run: &'e Run, freezes: &'e [Freeze], now: Timestamp) -> Render<'e> {
        Render {
            run,
            freeze: freezes.iter().find(|f| f.start <= now && now < f.end),
        }
    }

    /// The whole tree.
    pub(super) fn tree(&self) -> RunStatus {
        let mut stages: Vec<StageStatus> = (0..self.run.stages.len())
            .map(|si| self.stage(si))
            .collect();
        for (st, s) in stages.iter_mut().zip(&self.run.stages) {
            for (gs, g) in st.groups.iter_mut().zip(&s.groups) {
                gs.members = (0..g.members.len())
                    .map(|mi| self.member(s, g, mi))
                    .collect();
            }
        }
        let mut status = self.run_node(stages.get(self.run.current));
        status.stages = stages;
        status
    }

    /// The run without its stages.
    pub(super) fn head(&self) -> RunStatus {
        let current =
            (self.run.current < self.run.stages.len()).then(|| self.stage(self.run.current));
        self.run_node(current.as_ref())
    }

    /// The run with its stages and groups, without the members' nodes.
    pub(super) fn outline(&self) -> RunStatus {
        let stages: Vec<StageStatus> = (0..self.run.stages.len())
            .map(|si| self.stage(si))
            .collect();
        let mut run = self.run_node(stages.get(self.run.current));
        run.stages = stages;
        run
    }

    /// What member `mi` of group `g` waits on; without `detail`, the reason and time without the
    /// message, where the message would be written out for this member alone (a tally needs no
    /// message, and at 100,000 members waiting on their slots, writing them is its cost).
    fn member_wait(&self, s: &StageRt, g: &GroupRt, mi: usize, detail: bool) -> Option<WaitingOn> {
        let run = self.run;
        let m = &g.members[mi];
        match m.node.state {
            State::Pending => m.pending.map(|(reason, until)| WaitingOn {
                reason,
                until,
                message: detail.then(|| m.message.clone()).flatten(),
            }),
            State::NotStarted
                if g.tier.phase == Phase::Body
                    && !g.tier.failed
                    && (g.ready_open.contains(&(mi as u32))
                        || g.ready_free.contains(&(mi as u32))) =>
            {
                Some(if run.stopping.is_some() || !run.active() {
                    WaitingOn {
                        reason: Reason::Stop,
                        until: None,
                        message: None,
                    }
                } else if let Some(f) = self.freeze {
                    WaitingOn {
                        reason: Reason::Freeze,
                        until: Some(f.end),
                        message: detail.then(|| format!("fleet freeze \"{}\"", f.name)),
                    }
                } else {
                    WaitingOn {
                        reason: Reason::Concurrency,
                        until: None,
                        message: detail.then(|| {
                            format!(
                                "{} of {} group slots and {} of {} stage slots in use",
                                g.tier.in_flight,
                                g.tier.max_concurrency,
                                s.tier.in_flight,
                                s.tier.max_concurrency
                            )
                        }),
                    }
                })
            }
            State::Running => check_wait(m),
            _ => None,
        }
    }

    /// Member `mi` of group `g`.
    fn member(&self, s: &StageRt, g: &GroupRt, mi: usize) -> MemberStatus {
        let m = &g.members[mi];
        MemberStatus {
            name: m.name.clone(),
            cluster_resource_id: None,
            status: m.node.view(),
            message: m.message.clone(),
            operation_id: m.operation_id.clone(),
            kubernetes_version: m.kubernetes_version.clone(),
            node_images: m.node_images.clone(),
            waiting_on: self.member_wait(s, g, mi, true),
            checks: member_checks(self.run, m),
        }
    }

    /// Group `g` without its members.
    fn group(&self, s: &StageRt, g: &GroupRt) -> GroupStatus {
        let run = self.run;
        let mut status = g.tier.node.view();
        let gate_wait = pending_gate_wait(&g.tier.before_gates)
            .or_else(|| pending_gate_wait(&g.tier.after_gates));
        let all_pending = g.tier.phase == Phase::Body
            && g.tier.in_flight == 0
            && g.unfinished > 0
            && g.members
                .iter()
                .all(|m| m.node.state.is_terminal() || m.node.state == State::Pending);
        let waiting_on = if status.state == State::Running && gate_wait.is_some() {
            if gate_wait.as_ref().is_some_and(|w| w.reason == Reason::Gate) {
                status.state = State::Pending;
            }
            gate_wait
        } else if status.state == State::Running && all_pending {
            status.state = State::Pending;
            // Only their reasons and times count (`all_waiting`): no member's message written.
            let waits: Vec<WaitingOn> = (0..g.members.len())
                .filter_map(|mi| self.member_wait(s, g, mi, false))
                .collect();
            let message = "every remaining member is Pending".to_string();
            Some(all_waiting(waits.iter(), Some(message)))
        } else {
            None
        };
        GroupStatus {
            name: g.tier.name.clone(),
            status,
            failure_count: g.tier.failure_count,
            max_concurrency: g.tier.max_concurrency,
            max_allowed_failures: g.tier.max_allowed_failures,
            before_gates: gate_views(&run.strategy, &g.tier.before_gates, GateTiming::Before),
            after_gates: gate_views(&run.strategy, &g.tier.after_gates, GateTiming::After),
            members: Vec::new(),
            waiting_on,
        }
    }

    /// Stage `si` with its groups, without their members.
    fn stage(&self, si: usize) -> StageStatus {
        let run = self.run;
        let s = &run.stages[si];
        let groups: Vec<GroupStatus> = s.groups.iter().map(|g| self.group(s, g)).collect();
        let mut status = s.tier.node.view();
        let waiting_on = if status.state == State::Running {
            if let Some(w) = pending_gate_wait(&s.tier.before_gates) {
                if w.reason == Reason::Gate {
                    status.state = State::Pending;
                }
                Some(w)
            } else if s.tier.phase == Phase::After && s.wait.state == State::Running {
                Some(WaitingOn {
                    reason: Reason::AfterStageWait,
                    until: s.wait_until,
                    message: None,
                })
            } else if let Some(w) = pending_gate_wait(&s.tier.after_gates) {
                if w.reason == Reason::Gate {
                    status.state = State::Pending;
                }
                Some(w)
            } else if s.tier.phase == Phase::Body
                && s.tier.in_flight == 0
                && groups.iter().any(|g| g.status.state == State::Pending)
                && groups
                    .iter()
                    .all(|g| g.status.state.is_terminal() || g.status.state == State::Pending)
            {
                status.state = State::Pending;
                let waits = groups.iter().filter_map(|g| g.waiting_on.as_ref());
                Some(all_waiting(waits, None))
            } else {
                None
            }
        } else if s.tier.node.state == State::NotStarted && run.active() && si > run.current {
            Some(WaitingOn {
                reason: Reason::PreviousStage,
                until: None,
                message: None,
            })
        } else {
            None
        };
        StageStatus {
            name: s.tier.name.clone(),
            status,
            failure_count: s.tier.failure_count,
            max_concurrency: s.tier.max_concurrency,
            max_allowed_failures: s.tier.max_allowed_failures,
            before_gates: gate_views(&run.strategy, &s.tier.before_gates, GateTiming::Before),
            after_gates: gate_views(&run.strategy, &s.tier.after_gates, GateTiming::After),
            after_stage_wait_status: WaitStatus {
                status: s.wait.view(),
                wait_duration_in_seconds: s.wait_seconds,
            },
            groups,
            waiting_on,
        }
    }

    /// The run without its stages; `current` is its current stage's status, if it has one.
    fn run_node(&self, current: Option<&StageStatus>) -> RunStatus {
        let run = self.run;
        let mut status = run.node.view();
        let waiting_on = if status.state == State::Running {
            match current {
                Some(s) if s.status.state == State::Pending => {
                    status.state = State::Pending;
                    s.waiting_on.clone()
                }
                Some(s) => s.waiting_on.clone(),
                None => None,
            }
        } else if status.state == State::Stopping {
            Some(WaitingOn {
                reason: Reason::Members,
                until: None,
                message: Some(format!("{} member upgrades still in flight", run.in_flight)),
            })
        } else {
            None
        };
        RunStatus {
            status,
            failure_count: run.failure_count,
            node_image_selection: (run.target.selection == NodeImageSelectionType::Consistent)
                .then(|| NodeImageSelectionStatus {
                    selected_node_image_versions: run.target.images.clone(),
                }),
            stages: Vec::new(),
            waiting_on,
        }
    }

    /// Its nodes by state and wait reason, level by level, as [`RunStatus::node_tally`] counts
    /// them in [`Render::tree`]'s tree, but without the members' nodes (at 100,000 members, the
    /// tree is most of the work).
    fn node_tally(&self) -> NodeTally {
        let reason = |w: &Option<WaitingOn>| w.as_ref().map(|w| w.reason);
        let mut t = NodeTally {
            failure_count: self.run.failure_count,
            ..NodeTally::default()
        };
        let stages: Vec<StageStatus> = (0..self.run.stages.len())
            .map(|si| self.stage(si))
            .collect();
        for (st, s) in stages.iter().zip(&self.run.stages) {
            t.stages.count(st.status.state, reason(&st.waiting_on));
            for (gs, g) in st.groups.iter().zip(&s.groups) {
                t.groups.count(gs.status.state, reason(&gs.waiting_on));
                for (mi, m) in g.members.iter().enumerate() {
                    let wait = self.member_wait(s, g, mi, false).map(|w| w.reason);
                    t.members.count(m.node.view().state, wait);
                }
            }
        }
        let run = self.run_node(stages.get(self.run.current));
        t.run.count(run.status.state, reason(&run.waiting_on));
        t
    }

    /// How many members are in each end state, over the run: Completed, Failed, Skipped, and
    /// not finished (the members' states as the tree shows them).
    fn member_tally(&self) -> [u32; 4] {
        let groups = self.run.stages.iter().flat_map(|s| &s.groups);
        crate::state::tally(groups.flat_map(|g| &g.members).map(|m| m.node.view().state))
    }
}

/// [`Engine::run_status_view`]: a run's status tree that is made as it is serialized.
pub struct RunStatusView<'e>(pub(super) View<'e>);

pub(super) enum View<'e> {
    Live(Render<'e>),
    Rendered(Box<RunStatus>),
}

impl RunStatusView<'_> {
    /// The run's own node (its state, times and what it waits on), without its stages.
    pub fn head(&self) -> RunStatus {
        match &self.0 {
            View::Live(r) => r.head(),
            View::Rendered(status) => RunStatus {
                stages: Vec::new(),
                ..(**status).clone()
            },
        }
    }

    /// The tree without the members' nodes: the run, its stages and groups with their states,
    /// gates and waits, each group's `members` empty — what a list of gates or a run's state
    /// needs, without building (and writing) 100,000 members.
    pub fn outline(&self) -> RunStatus {
        match &self.0 {
            View::Live(r) => r.outline(),
            View::Rendered(status) => {
                let mut run = (**status).clone();
                for group in run.stages.iter_mut().flat_map(|s| s.groups.iter_mut()) {
                    group.members.clear();
                }
                run
            }
        }
    }

    /// Its nodes by state and wait reason, level by level ([`RunStatus::node_tally`]).
    pub fn node_tally(&self) -> NodeTally {
        match &self.0 {
            View::Live(r) => r.node_tally(),
            View::Rendered(status) => status.node_tally(),
        }
    }

    /// Members Completed, Failed, Skipped and not finished.
    pub fn member_tally(&self) -> [u32; 4] {
        match &self.0 {
            View::Live(r) => r.member_tally(),
            View::Rendered(status) => status.member_tally(),
        }
    }
}

/// Writes an optional field as serde's derive does (`skip_serializing_if`).
fn field_if<S: SerializeStruct, T: Serialize>(
    st: &mut S,
    key: &'static str,
    value: &T,
    skip: bool,
) -> Result<(), S::Error> {
    if skip {
        st.skip_field(key)
    } else {
        st.serialize_field(key, value)
    }
}

/// The fields a stage and a group share, first in both (`StageStatus`, `GroupStatus`).
struct TierFields<'a> {
    name: &'a str,
    status: &'a NodeStatus,
    failure_count: u32,
    max_concurrency: u32,
    max_allowed_failures: u32,
    before_gates: &'a Vec<GateStatus>,
    after_gates: &'a Vec<GateStatus>,
}

impl TierFields<'_> {
    fn write<S: SerializeStruct>(&self, st: &mut S) -> Result<(), S::Error> {
        st.serialize_field("name", self.name)?;
        st.serialize_field("status", self.status)?;
        st.serialize_field("failureCount", &self.failure_count)?;
        st.serialize_field("maxConcurrency", &self.max_concurrency)?;
        st.serialize_field("maxAllowedFailures", &self.max_allowed_failures)?;
        let (before, after) = (self.before_gates, self.after_gates);
        field_if(st, "beforeGates", before, before.is_empty())?;
        field_if(st, "afterGates", after, after.is_empty())
    }
}

// The views below write the fields of `RunStatus`, `StageStatus` and `GroupStatus` in their
// order and with their rules (`state.rs`); `a_status_view_writes_what_the_tree_serializes_to`
// (tests/tests/scenarios.rs) holds them to it over the scenario corpus.

impl Serialize for RunStatusView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = match &self.0 {
            View::Live(r) => r,
            View::Rendered(status) => return status.serialize(serializer),
        };
        let head = r.head();
        let mut st = serializer.serialize_struct("RunStatus", 5)?;
        st.serialize_field("status", &head.status)?;
        st.serialize_field("failureCount", &head.failure_count)?;
        let selection = &head.node_image_selection;
        field_if(
            &mut st,
            "nodeImageSelection",
            selection,
            selection.is_none(),
        )?;
        st.serialize_field("stages", &StagesView(*r))?;
        field_if(
            &mut st,
            "waitingOn",
            &head.waiting_on,
            head.waiting_on.is_none(),
        )?;
        st.end()
    }
}

struct StagesView<'e>(Render<'e>);

impl Serialize for StagesView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let stages = &self.0.run.stages;
        let mut seq = serializer.serialize_seq(Some(stages.len()))?;
        for si in 0..stages.len() {
            seq.serialize_element(&StageView(self.0, si))?;
        }
        seq.end()
    }
}

struct StageView<'e>(Render<'e>, usize);

impl Serialize for StageView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (r, si) = (self.0, self.1);
        let stage = r.stage(si);
        let mut st = serializer.serialize_struct("StageStatus", 10)?;
        TierFields {
            name: &stage.name,
            status: &stage.status,
            failure_count: stage.failure_count,
            max_concurrency: stage.max_concurrency,
            max_allowed_failures: stage.max_allowed_failures,
            before_gates: &stage.before_gates,
            after_gates: &stage.after_gates,
        }
        .write(&mut st)?;
        st.serialize_field("afterStageWaitStatus", &stage.after_stage_wait_status)?;
        st.serialize_field("groups", &GroupsView(r, si, &stage.groups))?;
        let waiting_on = &stage.waiting_on;
        field_if(&mut st, "waitingOn", waiting_on, waiting_on.is_none())?;
        st.end()
    }
}

struct GroupsView<'e, 'g>(Render<'e>, usize, &'g [GroupStatus]);

impl Serialize for GroupsView<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (r, si, groups) = (self.0, self.1, self.2);
        let mut seq = serializer.serialize_seq(Some(groups.len()))?;
        for (gi, group) in groups.iter().enumerate() {
            seq.serialize_element(&GroupView(r, si, gi, group))?;
        }
        seq.end()
    }
}

struct GroupView<'e, 'g>(Render<'e>, usize, usize, &'g GroupStatus);

impl Serialize for GroupView<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (r, si, gi, group) = (self.0, self.1, self.2, self.3);
        let mut st = serializer.serialize_struct("GroupStatus", 9)?;
        TierFields {
            name: &group.name,
            status: &group.status,
            failure_count: group.failure_count,
            max_concurrency: group.max_concurrency,
            max_allowed_failures: group.max_allowed_failures,
            before_gates: &group.before_gates,
            after_gates: &group.after_gates,
        }
        .write(&mut st)?;
        st.serialize_field("members", &MembersView(r, si, gi))?;
        let waiting_on = &group.waiting_on;
        field_if(&mut st, "waitingOn", waiting_on, waiting_on.is_none())?;
        st.end()
    }
}

struct MembersView<'e>(Render<'e>, usize, usize);

impl Serialize for MembersView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (r, si, gi) = (self.0, self.1, self.2);
        let s = &r.run.stages[si];
        let g = &s.groups[gi];
        let mut seq = serializer.serialize_seq(Some(g.members.len()))?;
        for mi in 0..g.members.len() {
            seq.serialize_element(&r.member(s, g, mi))?;
        }
        seq.end()
    }
}

/// What a tier waits on at its gates: a Pending gate (a person, or a schedule), else a
/// HealthCheck gate measuring (reason `HealthCheck`, until its next measurement).
fn pending_gate_wait(gates: &[GateRt]) -> Option<WaitingOn> {
    let pending = gates
        .iter()
        .find(|g| g.state == State::Pending)
        .map(|g| WaitingOn {
            reason: Reason::Gate,
            until: g.absolute_start,
            message: Some(match (g.config.gate_type, &g.config.display_name) {
                (GateType::Approval, Some(d)) => {
                    format!("approval \"{d}\" ({})", g.id.clone().unwrap_or_default())
                }
                (GateType::Approval, None) => {
                    format!("approval ({})", g.id.clone().unwrap_or_default())
                }
                (GateType::ScheduledStart, _) => {
                    format!("scheduled start ({})", g.id.clone().unwrap_or_default())
                }
                (GateType::HealthCheck, _) => format!(
                    "health check \"{}\" was inconclusive: approve or fail it ({})",
                    g.config.health_check.as_deref().unwrap_or_default(),
                    g.id.clone().unwrap_or_default()
                ),
            }),
        });
    pending.or_else(|| {
        gates
            .iter()
            .filter(|g| g.state == State::Running)
            .find_map(|g| g.check.as_ref())
            .map(|c| WaitingOn {
                reason: Reason::HealthCheck,
                until: c.due,
                message: Some(format!(
                    "health check \"{}\": {} measurement(s) passed so far",
                    c.name,
                    c.analysis.taken - c.analysis.failed - c.analysis.inconclusive
                )),
            })
    })
}

/// What a stage or group whose every unfinished child waits is waiting on: the first child's
/// reason, until the earliest time any child names.
fn all_waiting<'a>(
    children: impl Iterator<Item = &'a WaitingOn> + Clone,
    message: Option<String>,
) -> WaitingOn {
    WaitingOn {
        reason: children
            .clone()
            .next()
            .map_or(Reason::Members, |w| w.reason),
        until: children.filter_map(|w| w.until).min(),
        message,
    }
}

/// What a Running member waits on while its pre-flight or its checks after the upgrade
/// measure (none while its upgrade runs).
fn check_wait(m: &MemberRt) -> Option<WaitingOn> {
    if let Some(p) = m.preflight.as_ref().filter(|_| m.operation_id.is_none()) {
        let live: Vec<&str> = p
            .checks
            .iter()
            .filter(|c| c.live())
            .map(|c| c.name.as_str())
            .collect();
        if !live.is_empty() {
            return Some(WaitingOn {
                reason: Reason::Preflight,
                until: p.checks.iter().filter_map(|c| c.due).min(),
                message: Some(format!("pre-flight: {}", live.join(", "))),
            });
        }
    }
    let live: Vec<&CheckRt> = m.checks.iter().filter(|c| c.live()).collect();
    if live.is_empty() {
        return None;
    }
    let soaking = live.iter().all(|c| c.state == State::NotStarted);
    let names: Vec<&str> = live.iter().map(|c| c.name.as_str()).collect();
    Some(WaitingOn {
        reason: Reason::HealthCheck,
        until: live.iter().filter_map(|c| c.due).min(),
        message: Some(if soaking {
            format!("upgraded; soaking before checks {}", names.join(", "))
        } else {
            format!("upgraded; checks {}", names.join(", "))
        }),
    })
}

/// A member's pre-flight (its last attempt) and checks after its upgrade, as the tree shows them.
fn member_checks(run: &Run, m: &MemberRt) -> Vec<CheckStatus> {
    let pre = m.preflight.iter().flat_map(|p| p.checks.iter());
    pre.chain(m.checks.iter())
        .map(|c| check_view(&run.strategy, c))
        .collect()
}

/// A check as the tree shows it, with its source and conditions from the strategy.
fn check_view(strategy: &UpdateStrategy, c: &CheckRt) -> CheckStatus {
    let spec = if c.name == super::checks::PREFLIGHT_CHECK {
        None
    } else {
        strategy.health_checks.iter().find(|h| h.name == c.name)
    };
    let condition = spec.and_then(|h| h.prometheus.as_ref()).map(|p| {
        match (&p.success_condition, &p.failure_condition) {
            (Some(s), Some(f)) => format!("success: {s}; failure: {f}"),
            (Some(s), None) => format!("success: {s}"),
            (None, Some(f)) => format!("failure: {f}"),
            (None, None) => String::new(),
        }
    });
    CheckStatus {
        name: c.name.clone(),
        state: c.state,
        source: spec.map_or_else(|| "provider pre-flight".to_string(), |h| h.describe()),
        condition,
        taken: c.analysis.taken,
        count: spec.map_or(1, |h| h.measurements()),
        failed: c.analysis.failed,
        inconclusive: c.analysis.inconclusive,
        consecutive_errors: c.analysis.consecutive_errors,
        next_at: c.due,
        last: c.last.clone(),
        verdict: c.verdict,
        message: c.message.clone(),
    }
}

fn gate_views(strategy: &UpdateStrategy, gates: &[GateRt], timing: GateTiming) -> Vec<GateStatus> {
    gates
        .iter()
        .map(|g| GateStatus {
            gate_id: g.id.clone(),
            display_name: g.config.display_name.clone(),
            gate_type: g.config.gate_type,
            timing,
            status: NodeStatus {
                state: g.state,
                start_time: g.created,
                completed_time: g.completed,
                error: None,
            },
            absolute_start_time: g.absolute_start,
            completed_by: g.by.clone(),
            health_check: g.config.health_check.clone(),
            check: g.check.as_ref().map(|c| check_view(strategy, c)),
        })
        .collect()
}
