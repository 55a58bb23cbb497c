//! Gates and the after-stage wait: creating a gate when the run reaches it (a scheduled one
//! with its opening time), completing it (approved, or opened by its schedule), ending a wait;
//! finding a gate by id or by position, naming it in messages, reaching it in the tree.

use super::input::GateSelector;
use super::timers::Timer;
use super::tree::{GateLoc, GateRt, Run, StageRt};
use super::Engine;
use crate::error::{Error, ErrorCode};
use crate::event::{Event, Fact};
use crate::model::{GateTiming, GateType};
use crate::state::State;
use crate::window::{next_weekly_occurrence, parse_hh_mm, parse_utc_offset};

pub(super) fn gate_mut<'a>(stages: &'a mut [StageRt], loc: &GateLoc) -> &'a mut GateRt {
    let tier = stages[loc.stage as usize].tier_mut(loc.group);
    &mut tier.gates_mut(loc.timing)[loc.index as usize]
}

pub(super) fn gate_ref<'a>(run: &'a Run, loc: &GateLoc) -> Option<&'a GateRt> {
    let tier = run.stages.get(loc.stage as usize)?.tier(loc.group)?;
    tier.gates(loc.timing).get(loc.index as usize)
}

pub(super) fn find_group(run: &Run, name: &str) -> Option<(usize, usize)> {
    run.index.group(name)
}

/// Whether the gate at `loc` is at the position `sel` names (stage, group, timing; any where
/// left out, except that no group means a stage's own gate).
fn at_position(run: &Run, loc: &GateLoc, sel: &GateSelector) -> bool {
    let s = &run.stages[loc.stage as usize];
    sel.stage.as_ref().is_none_or(|n| &s.tier.name == n)
        && match (&sel.group, loc.group) {
            (Some(n), Some(g)) => &s.groups[g as usize].tier.name == n,
            (None, None) => true,
            _ => false,
        }
        && sel.timing.is_none_or(|t| t == loc.timing)
}

/// The first gate (in tree order) of stage `si`'s own gates (`group` None) or of group `group`,
/// with timing `timing` (any if None).
fn first_gate_in(
    run: &Run,
    si: usize,
    group: Option<usize>,
    timing: Option<GateTiming>,
) -> Option<GateLoc> {
    let tier = run.stages[si].tier(group.map(|g| g as u32))?;
    [GateTiming::Before, GateTiming::After]
        .into_iter()
        .find(|t| timing.is_none_or(|x| x == *t) && !tier.gates(*t).is_empty())
        .map(|t| GateLoc {
            stage: si as u32,
            group: group.map(|g| g as u32),
            timing: t,
            index: 0,
        })
}

/// The gate `sel` names: by id, or at a position, preferring a Pending gate there, otherwise
/// the first there (its state explains a refusal). O(log n) in the run's stages and gates.
pub(super) fn find_gate(run: &Run, sel: &GateSelector) -> Result<GateLoc, Error> {
    let found = match &sel.id {
        Some(id) => run.index.gates.get(id).cloned(),
        None => {
            // Pending gates are those of the stage the run is at, so this scan is short.
            let pending = run
                .index
                .pending
                .iter()
                .find(|loc| at_position(run, loc, sel))
                .cloned();
            pending.or_else(|| match (&sel.stage, &sel.group) {
                (stage, Some(g)) => run.index.groups.get(g).and_then(|v| {
                    v.iter()
                        .filter(|(si, _)| {
                            stage
                                .as_ref()
                                .is_none_or(|n| &run.stages[*si as usize].tier.name == n)
                        })
                        .find_map(|(si, gi)| {
                            first_gate_in(run, *si as usize, Some(*gi as usize), sel.timing)
                        })
                }),
                (Some(n), None) => run.index.stages.get(n).and_then(|v| {
                    v.iter()
                        .find_map(|si| first_gate_in(run, *si as usize, None, sel.timing))
                }),
                (None, None) => {
                    let k = match sel.timing {
                        None => 0,
                        Some(GateTiming::Before) => 1,
                        Some(GateTiming::After) => 2,
                    };
                    run.index.first_stage_gate[k]
                        .and_then(|si| first_gate_in(run, si as usize, None, sel.timing))
                }
            })
        }
    };
    let Some(loc) = found else {
        let what = match (&sel.id, &sel.stage, &sel.group, sel.timing) {
            (Some(id), ..) => format!("id \"{id}\""),
            (None, s, g, t) => format!(
                "stage {}{}{}",
                s.as_deref().unwrap_or("(any)"),
                g.as_ref()
                    .map(|g| format!(", group {g}"))
                    .unwrap_or_default(),
                t.map(|t| format!(", timing {t:?}")).unwrap_or_default()
            ),
        };
        let hint = if run.started() {
            ""
        } else {
            " (the run has not started; gates exist once it reaches them)"
        };
        return Err(Error::new(
            ErrorCode::NotFound,
            format!("run \"{}\" has no gate at {what}{hint}", run.spec.name),
        ));
    };
    Ok(loc)
}

pub(super) fn describe_gate(run: &Run, loc: &GateLoc) -> String {
    let s = &run.stages[loc.stage as usize];
    match loc.group {
        Some(g) => format!(
            "{:?} group \"{}\" (stage \"{}\")",
            loc.timing, s.groups[g as usize].tier.name, s.tier.name
        ),
        None => format!("{:?} stage \"{}\"", loc.timing, s.tier.name),
    }
}

impl Engine {
    /// Creates the first `count` gates of a stage (`group: None`) or of one of its groups, of
    /// one timing, in order.
    pub(super) fn create_gates(
        &mut self,
        name: &str,
        stage: usize,
        group: Option<usize>,
        timing: GateTiming,
        count: usize,
    ) {
        for i in 0..count {
            let loc = GateLoc {
                stage: stage as u32,
                group: group.map(|g| g as u32),
                timing,
                index: i as u32,
            };
            self.create_gate(name, loc);
        }
    }

    /// A scheduled gate's time has come: it opens, if it is still Pending.
    pub(super) fn open_scheduled_gate(&mut self, name: &str, loc: &GateLoc) {
        let pending = self
            .runs
            .get(name)
            .and_then(|r| gate_ref(r, loc))
            .is_some_and(|g| g.state == State::Pending);
        if pending {
            self.complete_gate(name, loc, "schedule".to_string());
        }
    }

    pub(super) fn create_gate(&mut self, name: &str, loc: GateLoc) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let stage_name = run.stages[loc.stage as usize].tier.name.clone();
        let group_name = loc.group.map(|g| {
            run.stages[loc.stage as usize].groups[g as usize]
                .tier
                .name
                .clone()
        });
        let id = format!(
            "{name}/{}/{}/{}",
            match &group_name {
                Some(g) => format!("group:{g}"),
                None => format!("stage:{stage_name}"),
            },
            match loc.timing {
                GateTiming::Before => "before",
                GateTiming::After => "after",
            },
            loc.index
        );
        let gate = gate_mut(&mut run.stages, &loc);
        if gate.state != State::NotStarted {
            return;
        }
        gate.id = Some(id.clone());
        gate.state = State::Pending;
        gate.created = Some(now);
        run.index
            .gates
            .entry(id.clone())
            .or_insert_with(|| loc.clone());
        run.index.pending.insert(loc.clone());
        let gate = gate_mut(&mut run.stages, &loc);
        let mut open_at = None;
        if let (GateType::ScheduledStart, Some(c)) = (
            gate.config.gate_type,
            &gate.config.scheduled_start_configuration,
        ) {
            let (hh, mm) = parse_hh_mm(&c.start_time).unwrap_or((0, 0));
            let offset = c
                .utc_offset
                .as_deref()
                .map(parse_utc_offset)
                .and_then(Result::ok)
                .unwrap_or(chrono::FixedOffset::east_opt(0).expect("zero"));
            let at = next_weekly_occurrence(c.start_day, hh, mm, offset, now);
            gate.absolute_start = Some(at);
            open_at = Some(at);
        }
        let fact = Fact::GateCreated {
            stage: stage_name,
            group: group_name,
            until: open_at,
            gate_type: gate.config.gate_type,
            timing: loc.timing,
            gate_id: id,
            message: gate.config.display_name.clone(),
        };
        let health = gate.config.gate_type == GateType::HealthCheck;
        self.emit(Event::new(now, name, fact));
        if health {
            self.begin_gate_check(name, &loc);
        }
        if let Some(at) = open_at {
            if at <= now {
                self.complete_gate(name, &loc, "schedule".to_string());
            } else {
                self.timers.insert((
                    at,
                    Timer::Gate {
                        run: name.to_string(),
                        gate: loc,
                    },
                ));
            }
        }
    }

    pub(super) fn complete_gate(&mut self, name: &str, loc: &GateLoc, by: String) {
        let now = self.now;
        let run = self.runs.get_mut(name).expect("run");
        let stage_name = run.stages[loc.stage as usize].tier.name.clone();
        let group_name = loc.group.map(|g| {
            run.stages[loc.stage as usize].groups[g as usize]
                .tier
                .name
                .clone()
        });
        run.index.pending.remove(loc);
        let gate = gate_mut(&mut run.stages, loc);
        gate.state = State::Completed;
        gate.completed = Some(now);
        gate.by = Some(by.clone());
        let fact = Fact::GateCompleted {
            stage: stage_name,
            group: group_name,
            gate_type: gate.config.gate_type,
            timing: loc.timing,
            // Only a Pending gate completes, and a gate is Pending once created with its id.
            gate_id: gate.id.clone().unwrap_or_default(),
            by,
        };
        self.emit(Event::new(now, name, fact));
        self.touch(name);
    }

    pub(super) fn end_wait(&mut self, name: &str, si: usize) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(name) else {
            return;
        };
        let Some(stage) = run.stages.get_mut(si) else {
            return;
        };
        if stage.wait.state != State::Running || stage.wait_until.is_some_and(|u| u > now) {
            return;
        }
        stage.wait.state = State::Completed;
        stage.wait.completed = Some(now);
        let stage = stage.tier.name.clone();
        self.emit(Event::new(
            now,
            name,
            Fact::AfterStageWaitCompleted { stage },
        ));
        self.touch(name);
    }
}
