//! Skips: checking a skip target against a run.

use super::gates::find_group;
use super::tree::Run;
use crate::error::{Error, ErrorCode};
use crate::model::SkipTarget;
use crate::state::State;

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
            let st = run.stages[si].groups[gi].node.state;
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
            if matches!(s.node.state, State::Completed | State::Skipped) {
                return refuse(format!(
                    "skip target {t}: stage \"{n}\" is already {:?}",
                    s.node.state
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
