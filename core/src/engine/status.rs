//! The status tree a user sees: a run's runtime tree rendered as [`RunStatus`] at the engine's
//! `now` — every node's state and times, limits, gates, and what each member, group, stage and
//! the run are waiting on and until when.

use super::tree::{CheckRt, GateRt, MemberRt, Phase, Run};
use super::Engine;
use crate::event::Reason;
use crate::model::{GateTiming, GateType, NodeImageSelectionType, UpdateStrategy};
use crate::state::{
    CheckStatus, GateStatus, GroupStatus, MemberStatus, NodeImageSelectionStatus, NodeStatus,
    RunStatus, StageStatus, State, WaitStatus, WaitingOn,
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
                            State::Running => check_wait(m),
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
                            checks: member_checks(run, m),
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
                    if gate_wait.as_ref().is_some_and(|w| w.reason == Reason::Gate) {
                        status.state = State::Pending;
                    }
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
                    before_gates: gate_views(
                        &run.strategy,
                        &g.tier.before_gates,
                        GateTiming::Before,
                    ),
                    after_gates: gate_views(&run.strategy, &g.tier.after_gates, GateTiming::After),
                    members,
                    waiting_on,
                });
            }
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
            stages.push(StageStatus {
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
