//! The status tree a user sees: a run's runtime tree rendered as [`RunStatus`] at the engine's
//! `now` — every node's state and times, limits, gates, and what each member, group, stage and
//! the run are waiting on and until when.

use super::tree::{GateRt, Phase, Run};
use super::Engine;
use crate::event::Reason;
use crate::model::{GateTiming, GateType, NodeImageSelectionType};
use crate::state::{
    GateStatus, GroupStatus, MemberStatus, NodeImageSelectionStatus, NodeStatus, RunStatus,
    StageStatus, State, WaitStatus, WaitingOn,
};

impl Engine {
    pub(super) fn render(&self, run: &Run) -> RunStatus {
        let now = self.now;
        let freeze = self.freezes.iter().find(|f| f.start <= now && now < f.end);
        let mut stages = Vec::with_capacity(run.stages.len());
        for (si, s) in run.stages.iter().enumerate() {
            let mut groups = Vec::with_capacity(s.groups.len());
            for g in &s.groups {
                let members: Vec<MemberStatus> = g
                    .members
                    .iter()
                    .enumerate()
                    .map(|(mi, m)| {
                        let waiting_on = match m.node.state {
                            State::Pending => m.pending.map(|(reason, until)| WaitingOn {
                                reason,
                                until,
                                message: m.message.clone(),
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
                                } else if let Some(f) = freeze {
                                    WaitingOn {
                                        reason: Reason::Freeze,
                                        until: Some(f.end),
                                        message: Some(format!("fleet freeze \"{}\"", f.name)),
                                    }
                                } else {
                                    WaitingOn {
                                        reason: Reason::Concurrency,
                                        until: None,
                                        message: Some(format!(
                                            "{} of {} group slots and {} of {} stage slots in use",
                                            g.tier.in_flight,
                                            g.tier.max_concurrency,
                                            s.tier.in_flight,
                                            s.tier.max_concurrency
                                        )),
                                    }
                                })
                            }
                            _ => None,
                        };
                        MemberStatus {
                            name: m.name.clone(),
                            status: m.node.view(),
                            message: m.message.clone(),
                            operation_id: m.operation_id.clone(),
                            kubernetes_version: m.kubernetes_version.clone(),
                            node_images: m.node_images.clone(),
                            waiting_on,
                        }
                    })
                    .collect();
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
                    status.state = State::Pending;
                    gate_wait
                } else if status.state == State::Running && all_pending {
                    status.state = State::Pending;
                    let waits = members.iter().filter_map(|m| m.waiting_on.as_ref());
                    let message = "every remaining member is Pending".to_string();
                    Some(all_waiting(waits, Some(message)))
                } else {
                    None
                };
                groups.push(GroupStatus {
                    name: g.tier.name.clone(),
                    status,
                    failure_count: g.tier.failure_count,
                    max_concurrency: g.tier.max_concurrency,
                    max_allowed_failures: g.tier.max_allowed_failures,
                    before_gates: gate_views(&g.tier.before_gates, GateTiming::Before),
                    after_gates: gate_views(&g.tier.after_gates, GateTiming::After),
                    members,
                    waiting_on,
                });
            }
            let mut status = s.tier.node.view();
            let waiting_on = if status.state == State::Running {
                if let Some(w) = pending_gate_wait(&s.tier.before_gates) {
                    status.state = State::Pending;
                    Some(w)
                } else if s.tier.phase == Phase::After && s.wait.state == State::Running {
                    Some(WaitingOn {
                        reason: Reason::AfterStageWait,
                        until: s.wait_until,
                        message: None,
                    })
                } else if let Some(w) = pending_gate_wait(&s.tier.after_gates) {
                    status.state = State::Pending;
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
            stages.push(StageStatus {
                name: s.tier.name.clone(),
                status,
                failure_count: s.tier.failure_count,
                max_concurrency: s.tier.max_concurrency,
                max_allowed_failures: s.tier.max_allowed_failures,
                before_gates: gate_views(&s.tier.before_gates, GateTiming::Before),
                after_gates: gate_views(&s.tier.after_gates, GateTiming::After),
                after_stage_wait_status: WaitStatus {
                    status: s.wait.view(),
                    wait_duration_in_seconds: s.wait_seconds,
                },
                groups,
                waiting_on,
            });
        }
        let mut status = run.node.view();
        let waiting_on = if status.state == State::Running {
            match stages.get(run.current) {
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
        let _ = now;
        RunStatus {
            status,
            failure_count: run.failure_count,
            node_image_selection: (run.target.selection == NodeImageSelectionType::Consistent)
                .then(|| NodeImageSelectionStatus {
                    selected_node_image_versions: run.target.images.clone(),
                }),
            stages,
            waiting_on,
        }
    }

    /// The state a user sees (Running shows as Pending while the current stage waits).
    pub(super) fn shown_state(&self, run: &Run) -> State {
        if run.node.state == State::Running {
            self.render(run).status.state
        } else {
            run.node.state
        }
    }
}

fn pending_gate_wait(gates: &[GateRt]) -> Option<WaitingOn> {
    gates
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
            }),
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

fn gate_views(gates: &[GateRt], timing: GateTiming) -> Vec<GateStatus> {
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
        })
        .collect()
}
