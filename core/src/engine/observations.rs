//! What the world reports: upgrade results (the member's outcome, its failure counted, the lease
//! released to whoever waits for it), observed members and releases.

use super::input::Observation;
use super::tree::{MemberLoc, MemberRecord};
use super::Engine;
use super::{member_failed, not_found};
use crate::error::{Error, ErrorCode};
use crate::event::{Event, Fact, Output};
use crate::state::{State, StatusError};
use crate::validate;

impl Engine {
    pub(super) fn handle_observation(&mut self, o: Observation) -> Result<(), Error> {
        match o {
            Observation::CheckMeasured {
                measurement_id,
                values,
                verdict,
                message,
            } => {
                let m = crate::health::Measurement {
                    values,
                    verdict,
                    message,
                };
                self.check_measured(&measurement_id, m);
                Ok(())
            }
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
        match failure {
            None => {
                self.record_upgraded(&loc);
                // Checks after the upgrade, if any, decide the member's outcome.
                if !self.begin_member_checks(&loc) {
                    self.finish_member(&loc, None);
                }
            }
            Some(message) => {
                let error = StatusError {
                    code: ErrorCode::UpgradeFailed.to_string(),
                    message,
                };
                self.finish_member(&loc, Some(error));
            }
        }
    }

    /// The member's record takes the versions its upgrade reached.
    fn record_upgraded(&mut self, loc: &MemberLoc) {
        let run = &self.runs[&loc.run];
        let m =
            &run.stages[loc.stage as usize].groups[loc.group as usize].members[loc.member as usize];
        if let Some(rec) = self.members.get_mut(&m.name) {
            // In place: the record's windows do not depend on versions.
            let spec = &mut rec.spec;
            if let Some(v) = &m.kubernetes_version {
                spec.kubernetes_version.clone_from(v);
            }
            for p in &m.node_images {
                if let Some(pool) = spec.node_pools.iter_mut().find(|x| x.name == p.node_pool) {
                    pool.image_version.clone_from(&p.image_version);
                }
            }
        }
    }

    /// A member holding its slot is done: Completed (`error` None) or Failed with `error`
    /// (its upgrade, its checks or its pre-flight); its slot and lease are given back and a
    /// failure counts against the thresholds.
    pub(super) fn finish_member(&mut self, loc: &MemberLoc, error: Option<StatusError>) {
        let now = self.now;
        let (si, gi, mi) = (loc.stage as usize, loc.group as usize, loc.member as usize);
        let run_name = loc.run.clone();
        let Engine {
            runs,
            leases,
            outputs,
            ..
        } = self;
        let run = runs.get_mut(&run_name).expect("run of member");
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
        let failed = error.is_some();
        match error {
            None => {
                m.node.state = State::Completed;
                let fact = Fact::MemberCompleted {
                    stage: stage_name.clone(),
                    group: g.tier.name.clone(),
                    member: m.name.clone(),
                    operation_id: m.operation_id.clone().unwrap_or_default(),
                };
                outputs.push_back(Output::Event(Event::new(now, &run_name, fact)));
            }
            Some(error) => {
                m.node.state = State::Failed;
                m.node.error = Some(error);
                outputs.push_back(Output::Event(member_failed(
                    now,
                    &run_name,
                    stage_name,
                    &g.tier.name,
                    m,
                    m.operation_id.clone(),
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
