//! Auto-upgrade profiles in the engine: their commands, and the one place that decides when a
//! profile acts ([`Engine::reconcile_profiles`]). What a channel targets and what a generated
//! run is called are pure answers of [`crate::profile`]; this room acts on them.
//!
//! A profile remembers the target it last acted on (`seen`). It acts when:
//! - **a release moves its target** (the catalog changed, or a release reached it at its time):
//!   a run is generated for the new target and started. A generated run of the profile that is
//!   still running makes the new target wait (`nextTarget` says so) until it ends; then the
//!   newest target runs. A generated run not started yet is superseded: deleted, and the new one
//!   generated and started in its place;
//! - **a member joins behind its target** (catch-up): once no generated run of the profile runs,
//!   a catch-up run for the same target goes through the same strategy. It takes every member
//!   still behind, so members that were stopped, skipped, failed or outside their windows in an
//!   earlier run are included too;
//! - **it is re-enabled** after missing releases while disabled.
//!
//! Nothing else makes it act: creating a profile or changing its channel sets its baseline at
//! the current target (`generateUpdateRun` acts now), and a run that ends with members behind
//! does not trigger another run for the same target, so a member that always fails cannot make
//! runs forever. A disabled profile acts on nothing and leaves its runs alone. A target with no
//! member behind it is noted and no run is generated.

use super::tree::Generated;
use super::{not_found, Engine};
use crate::error::{Error, ErrorCode, Errors};
use crate::event::{Event, Fact};
use crate::model::{
    AutoUpgradeProfile, Member, OsType, UpdateRunSpec, UpdateStrategy, UpgradeChannel,
};
use crate::plan::{assign, default_strategy};
use crate::profile::{
    generated_run_name, resolve, ChannelTarget, Generation, NextTarget, ProfilePlan, ProfileRt,
    ProfileStatus, TriggerStatus,
};
use crate::state::{State, StatusError};
use crate::validate;
use crate::version::{compare_image_versions, image_family, KubeVersion};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Why a profile generates a run.
enum Trigger {
    /// A release moved the target.
    Release,
    /// Members behind the target it already acted on.
    CatchUp,
    /// `generateUpdateRun`.
    Manual,
}

impl Engine {
    pub(super) fn upsert_profile(&mut self, p: AutoUpgradeProfile) -> Result<(), Error> {
        validate::profile(&p)?;
        let baseline = self.target_of(&p).ok().map(|t| t.versions);
        let name = p.name.clone();
        match self.profiles.get_mut(&name) {
            None => {
                self.profiles.insert(
                    name,
                    ProfileRt {
                        spec: p,
                        status: ProfileStatus::default(),
                        seen: baseline,
                        catch_up: false,
                    },
                );
            }
            Some(rt) => {
                let old = &rt.spec;
                let retargeted = old.channel != p.channel
                    || old.target_kubernetes_version != p.target_kubernetes_version
                    || old.long_term_support != p.long_term_support;
                if retargeted {
                    rt.seen = baseline;
                    rt.catch_up = false;
                }
                rt.spec = p;
            }
        }
        self.profiles_dirty = true;
        Ok(())
    }

    pub(super) fn delete_profile(&mut self, name: &str) -> Result<(), Error> {
        self.profiles
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| not_found("auto-upgrade profile", name))
    }

    pub(super) fn generate_update_run(&mut self, profile: &str) -> Result<(), Error> {
        let Generation::New { versions, .. } = self.preview_generation(profile)? else {
            return Ok(());
        };
        let spec = self.profiles[profile].spec.clone();
        let target = self.target_of(&spec).map_err(|m| {
            Error::new(ErrorCode::InvalidState, m) // unreachable: the preview resolved it
        })?;
        debug_assert_eq!(target.versions, versions);
        // A new target that waits for the profile's running run stays a new target: when that
        // run ends, the run created here is started (a release generates and starts its run).
        let waiting = self
            .runs
            .values()
            .any(|r| r.generated_by(profile) && r.active());
        let result = self.generate(&spec, &target, Trigger::Manual);
        if let (false, Some(rt)) = (waiting, self.profiles.get_mut(profile)) {
            rt.seen = Some(target.versions);
            rt.catch_up = false;
        }
        result.map(|_| ())
    }

    /// What `generateUpdateRun` does for `profile` now.
    pub(super) fn preview_generation(&self, profile: &str) -> Result<Generation, Error> {
        let rt = self
            .profiles
            .get(profile)
            .ok_or_else(|| not_found("auto-upgrade profile", profile))?;
        // A disabled profile generates nothing by itself, but a person asking for its run gets
        // it, as Azure answers `generateUpdateRun` on a disabled profile.
        let scope = self.scope(&rt.spec)?;
        let target = match self.target_of(&rt.spec) {
            Ok(t) => t,
            Err(message) => return Ok(Generation::Nothing { message }),
        };
        // The run for this target that has not ended for good: not started, running, or
        // Stopped / Failed (it can be resumed).
        let existing = self.runs.iter().find(|(_, r)| {
            r.generated
                .as_ref()
                .is_some_and(|g| g.profile == profile && g.versions == target.versions)
                && !matches!(r.node.state, State::Completed | State::Skipped)
        });
        if let Some((run, _)) = existing {
            return Ok(Generation::Existing { run: run.clone() });
        }
        if !scope.iter().any(|m| behind(m, &rt.spec, &target)) {
            return Ok(Generation::Nothing {
                message: format!(
                    "every member the profile covers is at or ahead of {}",
                    target.versions.join(", ")
                ),
            });
        }
        Ok(Generation::New {
            run: self.free_run_name(profile, rt.spec.channel, &target.versions),
            versions: target.versions,
        })
    }

    /// What `profile` would generate now, and that run's plan (on a copy of the engine: nothing
    /// here changes). A disabled profile shows what it would generate once enabled.
    pub(super) fn plan_profile(&self, profile: &str) -> Result<ProfilePlan, Error> {
        let rt = self
            .profiles
            .get(profile)
            .ok_or_else(|| not_found("auto-upgrade profile", profile))?;
        let mut out = ProfilePlan {
            profile: profile.to_string(),
            channel: rt.spec.channel,
            disabled: rt.spec.disabled,
            versions: self
                .target_of(&rt.spec)
                .map(|t| t.versions)
                .unwrap_or_default(),
            message: String::new(),
            run: None,
            plan: None,
        };
        let mut copy = self.clone();
        while copy.poll_output().is_some() {}
        if let Some(rt) = copy.profiles.get_mut(profile) {
            rt.spec.disabled = false;
        }
        match copy.preview_generation(profile) {
            Err(e) => out.message = e.message,
            Ok(Generation::Nothing { message }) => out.message = message,
            Ok(Generation::Existing { run }) => {
                out.message = format!("update run {run} exists for this target already");
                out.plan = copy.plan(&run).ok();
                out.run = Some(run);
            }
            Ok(Generation::New { run, .. }) => {
                out.message = match copy.generate_update_run(profile) {
                    Ok(()) => format!("would generate update run {run}"),
                    Err(e) => format!("would fail to generate update run {run}: {}", e.message),
                };
                out.plan = copy.plan(&run).ok();
                out.run = Some(run);
            }
        }
        Ok(out)
    }

    /// A member joined the fleet: every profile it is behind owes a catch-up run (disabled
    /// ones too: re-enabled, they catch up on it). Costs O(profiles), not O(fleet): whether a
    /// strategy takes a member depends on that member alone, and so does whether it is behind
    /// (for node images, the targets of its own pools' families).
    pub(super) fn member_joined(&mut self, member: &str) {
        let Some(rec) = self.members.get(member) else {
            return;
        };
        let m = &rec.spec;
        let mut due = Vec::new();
        for (name, rt) in &self.profiles {
            let Ok(strategy) = self.strategy_of(&rt.spec) else {
                continue;
            };
            let in_scope = assign(&[m], &strategy)
                .is_ok_and(|a| a.stages.iter().flatten().any(|g| !g.is_empty()));
            if !in_scope {
                continue;
            }
            let target = if rt.spec.channel.is_kubernetes() {
                self.target_of(&rt.spec)
            } else {
                resolve(&rt.spec, &self.catalog, &families(&[m]), self.now)
            };
            if target.is_ok_and(|t| behind(m, &rt.spec, &t)) {
                due.push(name.clone());
            }
        }
        for name in due {
            if let Some(rt) = self.profiles.get_mut(&name) {
                rt.catch_up = true;
            }
            self.profiles_dirty = true;
        }
    }

    /// Every profile looks at its target and acts (see the module docs), in name order; then
    /// the engine asks to be woken when the next release reaches the catalog.
    pub(super) fn reconcile_profiles(&mut self) {
        let names: Vec<String> = self.profiles.keys().cloned().collect();
        for name in names {
            self.reconcile_profile(&name);
        }
        if self.profiles.values().any(|p| !p.spec.disabled) {
            if let Some(at) = self.catalog.next_release_after(self.now) {
                self.timers.insert((at, super::timers::Timer::Release));
            }
        }
    }

    fn reconcile_profile(&mut self, name: &str) {
        let rt = &self.profiles[name];
        let spec = rt.spec.clone();
        let target = match self.target_of(&spec) {
            Ok(t) => t,
            Err(message) => {
                self.set_next(name, Vec::new(), message);
                return;
            }
        };
        if spec.disabled {
            let message = "the profile is disabled: it generates nothing".to_string();
            self.set_next(name, target.versions, message);
            return;
        }
        let new_target = rt.seen.as_ref() != Some(&target.versions);
        if !new_target && !rt.catch_up {
            self.profiles
                .get_mut(name)
                .expect("listed")
                .status
                .next_target = None;
            return;
        }
        let running = self
            .runs
            .iter()
            .find(|(_, r)| r.generated_by(name) && r.active())
            .map(|(n, _)| n.clone());
        if let Some(running) = running {
            let message = format!(
                "waits for update run \"{running}\" to end: a profile runs one update run at a time"
            );
            self.set_next(name, target.versions, message);
            return;
        }
        // The strategy's members behind the target (all of them when the scope cannot be
        // resolved: generating then fails and says why).
        let any_behind = match self.scope(&spec) {
            Ok(scope) => scope.iter().any(|m| behind(m, &spec, &target)),
            Err(_) => true,
        };
        if !any_behind {
            let rt = self.profiles.get_mut(name).expect("listed");
            rt.seen = Some(target.versions);
            rt.catch_up = false;
            rt.status.next_target = None;
            return;
        }
        let trigger = if new_target {
            Trigger::Release
        } else {
            Trigger::CatchUp
        };
        let _ = self.generate(&spec, &target, trigger);
        let rt = self.profiles.get_mut(name).expect("listed");
        rt.seen = Some(target.versions);
        rt.catch_up = false;
    }

    /// Generates (and, unless `generateUpdateRun` asked, starts) the run for `target`, after
    /// superseding the profile's runs that were never started; records the trigger in the
    /// profile's status. Returns the run's name.
    fn generate(
        &mut self,
        p: &AutoUpgradeProfile,
        target: &ChannelTarget,
        trigger: Trigger,
    ) -> Result<String, Error> {
        let start = !matches!(trigger, Trigger::Manual);
        let mut notes = vec![match trigger {
            Trigger::Release => "a release moved the target",
            Trigger::CatchUp => "catch-up: members behind the target after the profile's last run",
            Trigger::Manual => "generateUpdateRun",
        }
        .to_string()];
        // A run generated before and never started: the same target is started as it is; an
        // older one is superseded (deleted once the new one exists).
        let unstarted: Vec<(String, bool)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.generated_by(&p.name) && r.node.state == State::NotStarted)
            .map(|(n, r)| {
                let same = r
                    .generated
                    .as_ref()
                    .is_some_and(|g| g.versions == target.versions);
                (n.clone(), same)
            })
            .collect();
        let mut reuse = None;
        let mut superseded = Vec::new();
        for (run, same) in unstarted {
            if same {
                reuse = Some(run);
            } else {
                notes.push(format!("supersedes run {run}, never started"));
                superseded.push(run);
            }
        }
        let result = match reuse {
            Some(run) if start => self.start_run(&run).map(|()| run),
            Some(run) => Ok(run),
            None => self.create_generated(p, target, start, notes.join("; ")),
        };
        if result.is_ok() {
            for run in superseded {
                // Never started: nothing refuses its deletion.
                let _ = self.delete_run(&run);
            }
        }
        let now = self.now;
        let rt = self.profiles.get_mut(&p.name).expect("exists");
        let s = &mut rt.status;
        s.last_triggered_at = Some(now);
        s.last_trigger_upgrade_versions.clone_from(&target.versions);
        s.next_target = None;
        match &result {
            Ok(run) => {
                s.last_trigger_status = Some(TriggerStatus::Succeeded);
                s.last_trigger_error = None;
                s.last_update_run_name = Some(run.clone());
                let what = if start {
                    "generated and started"
                } else {
                    "generated (not started)"
                };
                s.last_trigger_message = Some(format!(
                    "{what} update run {run} for {} ({})",
                    target.versions.join(", "),
                    notes.join("; ")
                ));
            }
            Err(e) => {
                s.last_trigger_status = Some(TriggerStatus::Failed);
                s.last_trigger_error = Some(StatusError {
                    code: e.code.to_string(),
                    message: e.message.clone(),
                });
                s.last_trigger_message = Some(format!(
                    "could not generate an update run for {}: {}",
                    target.versions.join(", "),
                    e.message
                ));
            }
        }
        result
    }

    fn create_generated(
        &mut self,
        p: &AutoUpgradeProfile,
        target: &ChannelTarget,
        start: bool,
        message: String,
    ) -> Result<String, Error> {
        let name = self.free_run_name(&p.name, p.channel, &target.versions);
        let spec = UpdateRunSpec {
            name: name.clone(),
            strategy: None,
            update_strategy_name: p.update_strategy_name.clone(),
            managed_cluster_update: target.update.clone(),
            auto_upgrade_profile_name: Some(p.name.clone()),
        };
        self.create_run(spec, None)?;
        let run = self.runs.get_mut(&name).expect("just created");
        run.generated = Some(Generated {
            profile: p.name.clone(),
            versions: target.versions.clone(),
        });
        run.target.channel = Some(p.channel);
        let fact = Fact::RunGenerated {
            profile: p.name.clone(),
            versions: target.versions.clone(),
            message: Some(message),
        };
        self.emit(Event::new(self.now, &name, fact));
        if start {
            self.start_run(&name)?;
        }
        Ok(name)
    }

    /// The first of `auto-profile-channel-key`, `...-2`, ... that no run has.
    fn free_run_name(&self, profile: &str, channel: UpgradeChannel, versions: &[String]) -> String {
        (1..)
            .map(|attempt| generated_run_name(profile, channel, versions, attempt))
            .find(|n| !self.runs.contains_key(n))
            .expect("an unused name")
    }

    fn set_next(&mut self, name: &str, versions: Vec<String>, message: String) {
        let rt = self.profiles.get_mut(name).expect("listed");
        rt.status.next_target = Some(NextTarget { versions, message });
    }

    /// The members a profile covers: those its strategy (or the default one-by-one strategy)
    /// assigns, by name.
    fn scope(&self, p: &AutoUpgradeProfile) -> Result<Vec<&Member>, Error> {
        let strategy = self.strategy_of(p)?;
        let members: Vec<&Member> = self.members.values().map(|r| &r.spec).collect();
        let a = assign(&members, &strategy)?;
        let mut idx: Vec<u32> = a.stages.iter().flatten().flatten().copied().collect();
        idx.sort_unstable();
        Ok(idx.into_iter().map(|i| members[i as usize]).collect())
    }

    /// The strategy a profile's runs go through (the default one-by-one strategy without one).
    fn strategy_of(&self, p: &AutoUpgradeProfile) -> Result<UpdateStrategy, Error> {
        match &p.update_strategy_name {
            Some(n) => self.strategies.get(n).cloned().ok_or_else(|| {
                let mut e = Errors::default();
                e.push(
                    "updateStrategyName",
                    format!("no stored strategy is named \"{n}\""),
                );
                let mut err = e.into_result().expect_err("one error");
                err.code = ErrorCode::NotFound;
                err
            }),
            None => Ok(default_strategy()),
        }
    }

    /// What `p` targets now (the families its pools run come from the members it covers, or
    /// from every member when its strategy cannot be resolved).
    fn target_of(&self, p: &AutoUpgradeProfile) -> Result<ChannelTarget, String> {
        if p.channel.is_kubernetes() {
            return resolve(p, &self.catalog, &BTreeMap::new(), self.now);
        }
        let families = match self.scope(p) {
            Ok(scope) => families(&scope),
            Err(_) => families(&self.members.values().map(|r| &r.spec).collect::<Vec<_>>()),
        };
        resolve(p, &self.catalog, &families, self.now)
    }
}

/// The image families the pools of `members` run, with their OS (the first pool's).
fn families(members: &[&Member]) -> BTreeMap<String, OsType> {
    let mut out = BTreeMap::new();
    for m in members {
        for pool in &m.node_pools {
            if let Some(f) = image_family(&pool.image_version) {
                out.entry(f.to_string()).or_insert(pool.os_type);
            }
        }
    }
    out
}

/// Whether `target` would move `m`: its control plane is behind the target by at most one
/// minor (Kubernetes channels; a member further behind is not moved by a profile), or one of
/// its pools runs an older image of a target family (node image channels; Linux pools only for
/// `SecurityPatch`).
fn behind(m: &Member, p: &AutoUpgradeProfile, target: &ChannelTarget) -> bool {
    if p.channel.is_kubernetes() {
        let (Some(t), Ok(cur)) = (
            target
                .versions
                .first()
                .and_then(|v| KubeVersion::parse(v).ok()),
            KubeVersion::parse(&m.kubernetes_version),
        ) else {
            return false;
        };
        return cur < t && cur.minors_until(&t) <= 1;
    }
    m.node_pools.iter().any(|pool| {
        if p.channel == UpgradeChannel::SecurityPatch && pool.os_type == OsType::Windows {
            return false;
        }
        let Some(family) = image_family(&pool.image_version) else {
            return false;
        };
        target.versions.iter().any(|v| {
            image_family(v) == Some(family)
                && compare_image_versions(v, &pool.image_version) == Ordering::Greater
        })
    })
}
