//! Gates: finding one (by id or by position), naming it in messages, reaching it in the tree.

use super::input::GateSelector;
use super::tree::{GateLoc, GateRt, Run, StageRt};
use crate::error::{Error, ErrorCode};
use crate::model::GateTiming;

pub(super) fn gate_mut<'a>(stages: &'a mut [StageRt], loc: &GateLoc) -> &'a mut GateRt {
    let stage = &mut stages[loc.stage as usize];
    let list = match (loc.group, loc.timing) {
        (None, GateTiming::Before) => &mut stage.before_gates,
        (None, GateTiming::After) => &mut stage.after_gates,
        (Some(g), GateTiming::Before) => &mut stage.groups[g as usize].before_gates,
        (Some(g), GateTiming::After) => &mut stage.groups[g as usize].after_gates,
    };
    &mut list[loc.index as usize]
}

pub(super) fn gate_ref<'a>(run: &'a Run, loc: &GateLoc) -> Option<&'a GateRt> {
    let stage = run.stages.get(loc.stage as usize)?;
    let list = match (loc.group, loc.timing) {
        (None, GateTiming::Before) => &stage.before_gates,
        (None, GateTiming::After) => &stage.after_gates,
        (Some(g), GateTiming::Before) => &stage.groups.get(g as usize)?.before_gates,
        (Some(g), GateTiming::After) => &stage.groups.get(g as usize)?.after_gates,
    };
    list.get(loc.index as usize)
}

pub(super) fn find_group(run: &Run, name: &str) -> Option<(usize, usize)> {
    run.index.group(name)
}

/// Whether the gate at `loc` is at the position `sel` names (stage, group, timing; any where
/// left out, except that no group means a stage's own gate).
fn at_position(run: &Run, loc: &GateLoc, sel: &GateSelector) -> bool {
    let s = &run.stages[loc.stage as usize];
    sel.stage.as_ref().is_none_or(|n| &s.name == n)
        && match (&sel.group, loc.group) {
            (Some(n), Some(g)) => &s.groups[g as usize].name == n,
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
    let s = &run.stages[si];
    let (before, after) = match group {
        None => (&s.before_gates, &s.after_gates),
        Some(gi) => (&s.groups[gi].before_gates, &s.groups[gi].after_gates),
    };
    [(GateTiming::Before, before), (GateTiming::After, after)]
        .into_iter()
        .find(|(t, gates)| timing.is_none_or(|x| x == *t) && !gates.is_empty())
        .map(|(t, _)| GateLoc {
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
                                .is_none_or(|n| &run.stages[*si as usize].name == n)
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
            loc.timing, s.groups[g as usize].name, s.name
        ),
        None => format!("{:?} stage \"{}\"", loc.timing, s.name),
    }
}
