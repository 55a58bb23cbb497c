//! Building a run's tree when it starts (or for a preview): the members it takes, resolved
//! against the strategy, ordered by maintenance priority, with their limits and gates.

use super::tree::{GroupRt, MemberRecord, MemberRt, Node, Run, RunIndex, StageRt, Tier};
use super::Engine;
use crate::error::Error;
use crate::model::{Member, NodeImageSelectionType, Timestamp};
use crate::plan::{self, assign, group_limits, group_name, select_consistent, stage_limits};
use std::collections::{BTreeMap, BTreeSet};

impl Engine {
    pub(super) fn run_members<'a>(&'a self, run: &Run) -> Vec<&'a Member> {
        self.run_member_records(run.member_filter.as_ref())
            .map(|r| &r.spec)
            .collect()
    }

    /// The members a run with the member filter `filter` takes, by name.
    fn run_member_records<'a, 'f>(
        &'a self,
        filter: Option<&'f BTreeSet<String>>,
    ) -> impl Iterator<Item = &'a MemberRecord> + use<'a, 'f> {
        self.members
            .values()
            .filter(move |r| filter.is_none_or(|f| f.contains(&r.spec.name)))
    }

    /// Resolves the member set and builds the stage / group / member tree at `now`.
    pub(super) fn build_tree(&self, run: &mut Run, now: Timestamp) -> Result<(), Error> {
        let records: Vec<&MemberRecord> = self
            .run_member_records(run.member_filter.as_ref())
            .collect();
        let members: Vec<&Member> = records.iter().map(|r| &r.spec).collect();
        let assignment = assign(&members, &run.strategy)?;
        // Where each member (by its position in `members`, which is name order) lands.
        let mut places: Vec<Option<(u32, u32, u32)>> = vec![None; members.len()];
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
        for (si, stage) in run.strategy.stages.iter().enumerate() {
            let count: u32 = assignment.stages[si].iter().map(|g| g.len() as u32).sum();
            let (mc, maf) = stage_limits(stage, count);
            let mut groups = Vec::new();
            for (gi, ms) in assignment.stages[si].iter().enumerate() {
                let (gmc, gmaf) = group_limits(stage, gi, ms.len() as u32, mc);
                // (priority, position: name order, has a window)
                let mut ordered: Vec<(crate::window::WindowPriority, u32, bool)> = ms
                    .iter()
                    .map(|&i| {
                        let w = records[i as usize].window(run.target.upgrade_type);
                        (plan::priority(w, now), i, w.is_some())
                    })
                    .collect();
                ordered.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                let rts: Vec<MemberRt> = ordered
                    .iter()
                    .enumerate()
                    .map(|(mi, &(_, i, has_window))| {
                        places[i as usize] = Some((si as u32, gi as u32, mi as u32));
                        MemberRt {
                            name: members[i as usize].name.clone(),
                            node: Node::default(),
                            message: None,
                            operation_id: None,
                            kubernetes_version: None,
                            node_images: Vec::new(),
                            pending: None,
                            skip_reason: None,
                            preflight: None,
                            checks: Vec::new(),
                            has_window,
                        }
                    })
                    .collect();
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
        // Built in name order: one bulk build instead of a search per member.
        run.member_index = members
            .iter()
            .zip(places)
            .filter_map(|(m, place)| place.map(|p| (m.name.clone(), p)))
            .collect::<BTreeMap<_, _>>();
        Ok(())
    }
}
