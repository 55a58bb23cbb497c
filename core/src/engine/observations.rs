//! What the world reports: upgrade results (the member's outcome, its failure counted, the lease
//! released to whoever waits for it), observed members and releases.

use super::input::Observation;
use super::tree::MemberRecord;
use super::Engine;
use super::{member_failed, not_found};
use crate::error::{Error, ErrorCode};
use crate::event::{Event, Fact, Output};
use crate::state::{State, StatusError};
use crate::validate;

impl Engine {
    pub(super) fn handle_observation(&mut self, o: Observation) -> Result<(), Error> {
        match o {
            Observation::UpgradeSucceeded { operation_id } => {
                self.finish_operation(&operation_id, None);
                Ok(())
            }
            Observation::UpgradeFailed {
                operation_id,
                message,
            } => {
                self.finish_operation(&operation_id, Some(message));
                Ok(())
            }
            Observation::MemberObserved {
                name,
                kubernetes_version,
                node_pools,
            } => {
                let Some(rec) = self.members.get(&name) else {
                    return Err(not_found("member", &name));
                };
                let mut spec = rec.spec.clone();
                spec.kubernetes_version = kubernetes_version;
                spec.node_pools = node_pools;
                validate::member(&spec)?;
                self.members.insert(name, MemberRecord::new(spec));
                Ok(())
            }
            Observation::KubernetesReleased {
                version,
                region,
                since,
                preview,
            } => {
                crate::version::KubeVersion::parse(&version).map_err(|e| {
                    Error::invalid(vec![crate::error::FieldError::new("version", e)])
                })?;
                self.catalog
                    .add_kubernetes(&version, &region, since, preview);
                self.catalog_changed();
                Ok(())
            }
            Observation::NodeImageReleased {
                version,
                region,
                since,
                security_patch,
            } => {
                crate::version::validate_image_version(&version).map_err(|e| {
                    Error::invalid(vec![crate::error::FieldError::new("version", e)])
                })?;
                self.catalog
                    .add_node_image(&version, &region, since, security_patch);
                self.catalog_changed();
                Ok(())
            }
        }
    }

    pub(super) fn finish_operation(&mut self, op: &str, failure: Option<String>) {
        // Unknown or already finished operations are ignored: results may be delivered twice.
        let Some(loc) = self.operations.remove(op) else {
            return;
        };
        let now = self.now;
        let (si, gi, mi) = (loc.stage as usize, loc.group as usize, loc.member as usize);
        let run_name = loc.run;
        let Engine {
            runs,
            members,
            leases,
            outputs,
            ..
        } = self;
        let run = runs.get_mut(&run_name).expect("run of operation");
        run.in_flight -= 1;
        let stage = &mut run.stages[si];
        stage.tier.in_flight -= 1;
        let stage_name = &stage.tier.name;
        let g = &mut stage.groups[gi];
        g.tier.in_flight -= 1;
        g.unfinished -= 1;
        let m = &mut g.members[mi];
        m.node.completed = Some(now);
        leases.remove(&m.name);
        let failed = failure.is_some();
        match failure {
            None => {
                m.node.state = State::Completed;
                if let Some(rec) = members.get_mut(&m.name) {
                    // In place: the record's windows do not depend on versions.
                    let spec = &mut rec.spec;
                    if let Some(v) = &m.kubernetes_version {
                        spec.kubernetes_version.clone_from(v);
                    }
                    for p in &m.node_images {
                        if let Some(pool) =
                            spec.node_pools.iter_mut().find(|x| x.name == p.node_pool)
                        {
                            pool.image_version.clone_from(&p.image_version);
                        }
                    }
                }
                let fact = Fact::MemberCompleted {
                    stage: stage_name.clone(),
                    group: g.tier.name.clone(),
                    member: m.name.clone(),
                    operation_id: op.to_string(),
                };
                outputs.push_back(Output::Event(Event::new(now, &run_name, fact)));
            }
            Some(message) => {
                m.node.state = State::Failed;
                m.node.error = Some(StatusError {
                    code: ErrorCode::UpgradeFailed.to_string(),
                    message: message.clone(),
                });
                outputs.push_back(Output::Event(member_failed(
                    now,
                    &run_name,
                    stage_name,
                    &g.tier.name,
                    m,
                    Some(op.to_string()),
                )));
            }
        }
        let member_name = m.name.clone();
        if failed {
            self.count_failure(&run_name, si, gi);
        }
        self.wake_lease_waiters(&member_name);
        self.touch(&run_name);
    }

    pub(super) fn wake_lease_waiters(&mut self, member: &str) {
        let Some(waiters) = self.lease_waiters.remove(member) else {
            return;
        };
        for loc in waiters {
            self.requeue(&loc);
            let cur = self.runs.get(&loc.run).map(|r| r.current);
            if cur == Some(loc.stage as usize) {
                self.touch(&loc.run);
            }
        }
    }

    pub(super) fn catalog_changed(&mut self) {
        self.profiles_dirty = true;
        let waiters = std::mem::take(&mut self.catalog_waiters);
        for loc in &waiters {
            self.requeue(loc);
        }
        self.touch_active();
    }
}
