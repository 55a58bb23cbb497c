//! Building a run's tree when it starts (or for a preview): the members it takes, resolved
//! against the strategy, ordered by maintenance priority, with their limits and gates.

use super::tree::{GroupRt, MemberRt, Node, Run, RunIndex, StageRt, Tier};
use super::Engine;
use crate::error::Error;
use crate::model::{Member, NodeImageSelectionType, Timestamp};
use crate::plan::{self, assign, group_limits, group_name, select_consistent, stage_limits};
use std::collections::{BTreeMap, BTreeSet};

impl Engine {
    pub(super) fn run_members<'a>(&'a self, run: &Run) -> Vec<&'a Member> {
        self.members
            .values()
            .map(|r| &r.spec)
            .filter(|m| {
                run.member_filter
                    .as_ref()
                    .is_none_or(|f| f.contains(&m.name))
            })
            .collect()
    }

    /// Resolves the member set and builds the stage / group / member tree at `now`.
    pub(super) fn build_tree(&self, run: &mut Run, now: Timestamp) -> Result<(), Error> {
        let members = self.run_members(run);
        let assignment = assign(&members, &run.strategy)?;
        if run.target.selection == NodeImageSelectionType::Consistent && !run.pinned_images {
            let in_run: Vec<&Member> = assignment
                .stages
                .iter()
                .flatten()
                .flatten()
                .map(|i| members[*i as usize])
                .collect();
            run.target.images = select_consistent(&in_run, &self.catalog, now);
        }
        let mut stages = Vec::with_capacity(run.strategy.stages.len());
        let mut index = BTreeMap::new();
        for (si, stage) in run.strategy.stages.iter().enumerate() {
            let count: u32 = assignment.stages[si].iter().map(|g| g.len() as u32).sum();
            let (mc, maf) = stage_limits(stage, count);
            let mut groups = Vec::new();
            for (gi, ms) in assignment.stages[si].iter().enumerate() {
                let (gmc, gmaf) = group_limits(stage, gi, ms.len() as u32, mc);
                let mut ordered: Vec<(crate::window::WindowPriority, &Member)> = ms
                    .iter()
                    .map(|i| {
                        let m = members[*i as usize];
                        let w = self.members[&m.name].window(run.target.upgrade_type);
                        (plan::priority(w, now), m)
                    })
                    .collect();
                ordered.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
                let rts: Vec<MemberRt> = ordered
                    .iter()
                    .map(|(_, m)| MemberRt {
                        name: m.name.clone(),
                        node: Node::default(),
                        message: None,
                        operation_id: None,
                        kubernetes_version: None,
                        node_images: Vec::new(),
                        pending: None,
                        skip_reason: None,
                        preflight: None,
                        checks: Vec::new(),
                        has_window: self.members[&m.name]
                            .window(run.target.upgrade_type)
                            .is_some(),
                    })
                    .collect();
                for (mi, m) in rts.iter().enumerate() {
                    index.insert(m.name.clone(), (si as u32, gi as u32, mi as u32));
                }
                let g = stage.groups.get(gi);
                let no_gates = Vec::new();
                groups.push(GroupRt {
                    tier: Tier::new(
                        group_name(&run.strategy, si, gi).to_string(),
                        (gmc, gmaf),
                        g.map_or(&no_gates, |g| &g.before_gates),
                        g.map_or(&no_gates, |g| &g.after_gates),
                    ),
                    unfinished: rts.len() as u32,
                    members: rts,
                    ready_open: BTreeSet::new(),
                    ready_free: BTreeSet::new(),
                });
            }
            stages.push(StageRt {
                tier: Tier::new(
                    stage.name.clone(),
                    (mc, maf),
                    &stage.before_gates,
                    &stage.after_gates,
                ),
                wait: Node::default(),
                wait_seconds: stage.after_stage_wait_in_seconds.unwrap_or(0),
                wait_until: None,
                groups,
            });
        }
        run.index = RunIndex::build(&stages);
        run.stages = stages;
        run.member_index = index;
        Ok(())
    }
}
