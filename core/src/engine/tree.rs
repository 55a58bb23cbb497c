//! A run's runtime tree: the run, its stages, their groups, their members and gates, as the
//! engine keeps them between inputs (and in a snapshot), with the lookups kept in step with it
//! ([`RunIndex`]) and the places that name a member or gate in it ([`MemberLoc`], [`GateLoc`]).
//! Plain data: what changes it lives in the engine's other rooms.

use crate::error::ErrorCode;
use crate::event::Reason;
use crate::health::{Analysis, Verdict};
use crate::model::{GateConfig, PoolImage, UpgradeType};
use crate::model::{GateTiming, Member, SkipTarget, Timestamp, UpdateRunSpec, UpdateStrategy};
use crate::plan::{RunTarget, SkipReason};
use crate::state::NodeStatus;
use crate::state::{MeasurementStatus, State, StatusError};
use crate::window::CompiledWindow;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) struct MemberLoc {
    pub(super) run: String,
    pub(super) stage: u32,
    pub(super) group: u32,
    pub(super) member: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) struct GateLoc {
    pub(super) stage: u32,
    pub(super) group: Option<u32>,
    pub(super) timing: GateTiming,
    pub(super) index: u32,
}

/// Where a check is measured.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) enum CheckPlace {
    /// A HealthCheck gate.
    Gate { run: String, gate: GateLoc },
    /// A member's checks after its upgrade (the index is the check's among them).
    After(MemberLoc),
    /// A member's pre-flight (index 0 is the provider's own).
    Preflight(MemberLoc),
}

impl CheckPlace {
    pub(super) fn run(&self) -> &str {
        match self {
            CheckPlace::Gate { run, .. } => run,
            CheckPlace::After(loc) | CheckPlace::Preflight(loc) => &loc.run,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct MemberRecord {
    pub(super) spec: Member,
    /// Boxed: most members have no window, and a record is kept per member (216 bytes each
    /// inline, 8 boxed).
    pub(super) kubernetes_window: Option<Box<CompiledWindow>>,
    pub(super) node_os_window: Option<Box<CompiledWindow>>,
}

impl MemberRecord {
    pub(super) fn new(spec: Member) -> MemberRecord {
        let kubernetes_window = spec
            .maintenance
            .kubernetes
            .as_ref()
            .and_then(|w| w.compile().ok())
            .map(Box::new);
        let node_os_window = spec
            .maintenance
            .node_os
            .as_ref()
            .and_then(|w| w.compile().ok())
            .map(Box::new);
        MemberRecord {
            spec,
            kubernetes_window,
            node_os_window,
        }
    }

    pub(super) fn window(&self, t: UpgradeType) -> Option<&CompiledWindow> {
        match t {
            UpgradeType::NodeImageOnly => self.node_os_window.as_deref(),
            _ => self.kubernetes_window.as_deref(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Phase {
    NotReached,
    Before,
    Body,
    After,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum StopCause {
    User,
    Failure,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct GateRt {
    pub(super) id: Option<String>,
    pub(super) config: GateConfig,
    pub(super) state: State,
    pub(super) created: Option<Timestamp>,
    pub(super) completed: Option<Timestamp>,
    pub(super) by: Option<String>,
    pub(super) absolute_start: Option<Timestamp>,
    /// A HealthCheck gate's check (kept across a resume, which measures it anew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) check: Option<CheckRt>,
}

/// One health check under way (or over) at one place: a gate, a member after its upgrade, a
/// member's pre-flight. The measurements themselves are the host's; this is the count.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct CheckRt {
    /// The check's name in the strategy (`preflight`: the provider's own pre-flight).
    pub(super) name: String,
    /// NotStarted (soaking), Running, Completed (passed), Failed, Pending (inconclusive, for a
    /// person), Skipped (abandoned).
    pub(super) state: State,
    pub(super) analysis: Analysis,
    /// Measurements asked for so far at this place (ids stay unique across resumes).
    pub(super) seq: u32,
    /// The measurement awaited, if any.
    pub(super) outstanding: Option<String>,
    /// When the next measurement is due (the soak's end, the next interval).
    pub(super) due: Option<Timestamp>,
    pub(super) last: Option<MeasurementStatus>,
    pub(super) verdict: Option<Verdict>,
    pub(super) message: Option<String>,
}

impl CheckRt {
    pub(super) fn new(name: &str) -> CheckRt {
        CheckRt {
            name: name.to_string(),
            state: State::NotStarted,
            analysis: Analysis::default(),
            seq: 0,
            outstanding: None,
            due: None,
            last: None,
            verdict: None,
            message: None,
        }
    }

    /// Whether measurements are still wanted.
    pub(super) fn live(&self) -> bool {
        matches!(self.state, State::NotStarted | State::Running)
    }
}

/// A member's pre-flight: its attempts, when it first failed (for `Wait`'s limit), the
/// checks of the attempt under way (or the last).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct PreflightRt {
    pub(super) attempt: u32,
    pub(super) first_failed: Option<Timestamp>,
    pub(super) checks: Vec<CheckRt>,
}

impl GateRt {
    pub(super) fn new(config: &GateConfig) -> GateRt {
        GateRt {
            id: None,
            config: config.clone(),
            state: State::NotStarted,
            created: None,
            completed: None,
            by: None,
            absolute_start: None,
            check: None,
        }
    }
    pub(super) fn done(&self) -> bool {
        matches!(self.state, State::Completed | State::Skipped)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Node {
    pub(super) state: State,
    pub(super) start: Option<Timestamp>,
    pub(super) completed: Option<Timestamp>,
    pub(super) error: Option<StatusError>,
}

impl Node {
    pub(super) fn view(&self) -> NodeStatus {
        NodeStatus {
            state: self.state,
            start_time: self.start,
            completed_time: self.completed,
            error: self.error.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct MemberRt {
    pub(super) name: String,
    pub(super) node: Node,
    pub(super) message: Option<String>,
    pub(super) operation_id: Option<String>,
    pub(super) kubernetes_version: Option<String>,
    pub(super) node_images: Vec<PoolImage>,
    /// The last reported wait (dedupes MemberPending events).
    pub(super) pending: Option<(Reason, Option<Timestamp>)>,
    pub(super) has_window: bool,
    #[serde(default)]
    pub(super) skip_reason: Option<SkipReason>,
    /// Its pre-flight, once it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) preflight: Option<PreflightRt>,
    /// Its checks after the upgrade, once it succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) checks: Vec<CheckRt>,
}

/// What a stage and a group both are: a named step of the run with a status, a phase, gates
/// before and after its body, a concurrency cap and a failure budget over the members under it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Tier {
    pub(super) name: String,
    pub(super) node: Node,
    pub(super) phase: Phase,
    /// Members under it that failed, and how many of those a resume accepted.
    pub(super) failure_count: u32,
    pub(super) accepted_failures: u32,
    /// Its failure threshold was exceeded.
    pub(super) failed: bool,
    pub(super) user_skipped: bool,
    pub(super) max_concurrency: u32,
    pub(super) max_allowed_failures: u32,
    /// Member upgrades under it that are running now.
    pub(super) in_flight: u32,
    pub(super) before_gates: Vec<GateRt>,
    pub(super) after_gates: Vec<GateRt>,
}

impl Tier {
    pub(super) fn new(
        name: String,
        limits: (u32, u32),
        before: &[GateConfig],
        after: &[GateConfig],
    ) -> Tier {
        Tier {
            name,
            node: Node::default(),
            phase: Phase::NotReached,
            failure_count: 0,
            accepted_failures: 0,
            failed: false,
            user_skipped: false,
            max_concurrency: limits.0,
            max_allowed_failures: limits.1,
            in_flight: 0,
            before_gates: before.iter().map(GateRt::new).collect(),
            after_gates: after.iter().map(GateRt::new).collect(),
        }
    }

    /// If a failure just counted exceeded its budget (it was neither failed nor skipped before),
    /// the message that says so.
    pub(super) fn budget_exceeded(&self) -> Option<String> {
        let open = self.failure_count.saturating_sub(self.accepted_failures);
        (!self.failed && !self.user_skipped && open > self.max_allowed_failures).then(|| {
            let cap = self.max_allowed_failures;
            format!("{open} failures exceed maxAllowedFailures {cap}")
        })
    }

    /// Marks it Failed because its threshold (or a group's) was exceeded.
    pub(super) fn fail(&mut self, now: Timestamp, why: &str) {
        self.fail_with(now, ErrorCode::FailureThresholdExceeded, why);
    }

    /// Marks it Failed with `code` (a threshold, or a failed HealthCheck gate).
    pub(super) fn fail_with(&mut self, now: Timestamp, code: ErrorCode, why: &str) {
        self.failed = true;
        self.node.state = State::Failed;
        self.node.completed = Some(now);
        self.node.error = Some(StatusError {
            code: code.to_string(),
            message: why.to_string(),
        });
    }

    /// A resume: a Stopped or Failed tier runs again; after a failure, the failures so far are
    /// accepted (its threshold counts from here).
    pub(super) fn resume(&mut self, was_failed: bool) {
        if was_failed {
            self.accepted_failures = self.failure_count;
            self.failed = false;
        }
        if matches!(self.node.state, State::Stopped | State::Failed) {
            self.node.state = State::Running;
            self.node.error = None;
            self.node.completed = None;
        }
    }

    /// Its gates of one timing.
    pub(super) fn gates(&self, timing: GateTiming) -> &[GateRt] {
        match timing {
            GateTiming::Before => &self.before_gates,
            GateTiming::After => &self.after_gates,
        }
    }

    pub(super) fn gates_mut(&mut self, timing: GateTiming) -> &mut Vec<GateRt> {
        match timing {
            GateTiming::Before => &mut self.before_gates,
            GateTiming::After => &mut self.after_gates,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct GroupRt {
    pub(super) tier: Tier,
    pub(super) unfinished: u32,
    pub(super) members: Vec<MemberRt>,
    /// Startable now, members with a maintenance window (considered first).
    pub(super) ready_open: BTreeSet<u32>,
    /// Startable now, members without a window.
    pub(super) ready_free: BTreeSet<u32>,
}

impl GroupRt {
    /// Whether a user skipped the group or any of its members.
    pub(super) fn skipped_by_user(&self) -> bool {
        self.tier.user_skipped
            || self
                .members
                .iter()
                .any(|m| m.skip_reason == Some(SkipReason::SkippedByUser))
    }

    pub(super) fn done(&self) -> bool {
        self.tier.in_flight == 0 && (self.tier.phase == Phase::Done || self.tier.failed)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct StageRt {
    pub(super) tier: Tier,
    pub(super) wait: Node,
    pub(super) wait_seconds: u64,
    pub(super) wait_until: Option<Timestamp>,
    pub(super) groups: Vec<GroupRt>,
}

impl StageRt {
    /// The stage's own tier (`group` None) or one of its groups'.
    pub(super) fn tier(&self, group: Option<u32>) -> Option<&Tier> {
        match group {
            None => Some(&self.tier),
            Some(g) => self.groups.get(g as usize).map(|g| &g.tier),
        }
    }

    pub(super) fn tier_mut(&mut self, group: Option<u32>) -> &mut Tier {
        match group {
            None => &mut self.tier,
            Some(g) => &mut self.groups[g as usize].tier,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Run {
    pub(super) spec: UpdateRunSpec,
    pub(super) strategy: UpdateStrategy,
    pub(super) target: RunTarget,
    pub(super) node: Node,
    pub(super) failure_count: u32,
    pub(super) accepted_failures: u32,
    pub(super) stopping: Option<StopCause>,
    pub(super) in_flight: u32,
    pub(super) current: usize,
    pub(super) stages: Vec<StageRt>,
    pub(super) member_index: BTreeMap<String, (u32, u32, u32)>,
    pub(super) pending_skips: Vec<SkipTarget>,
    /// When each of `pending_skips` was asked for: what a run not started yet shows as their
    /// completion time (Azure marks them Skipped at once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) pending_skip_times: Vec<Timestamp>,
    pub(super) member_filter: Option<BTreeSet<String>>,
    pub(super) pinned_images: bool,
    pub(super) retry_of: Option<String>,
    /// Set when an auto-upgrade profile generated the run: which, and for which versions.
    #[serde(default)]
    pub(super) generated: Option<Generated>,
    /// Lookups by name and gate id; derived from `stages`, so not part of a snapshot
    /// ([`Engine::restore`] rebuilds it).
    #[serde(skip)]
    pub(super) index: RunIndex,
}

/// Lookups into a run's tree, kept in step with it: stage and group names, created gates by id,
/// Pending gates. Makes finding a gate (approvals) and a skip target O(log n) in the number of
/// stages and gates, instead of a scan of the whole tree per command.
#[derive(Clone, Debug, Default)]
pub(super) struct RunIndex {
    /// Stage name → stage indices (one, in a valid strategy), in order.
    pub(super) stages: BTreeMap<String, Vec<u32>>,
    /// Group name → (stage, group) indices (one, in a valid strategy), in order.
    pub(super) groups: BTreeMap<String, Vec<(u32, u32)>>,
    /// Gate id → gate, for every created gate (ids are assigned when a gate is created).
    pub(super) gates: BTreeMap<String, GateLoc>,
    /// Pending gates. `GateLoc`'s order (stage; its own gates before its groups'; Before
    /// before After; index) is the tree order in which positional lookups report.
    pub(super) pending: BTreeSet<GateLoc>,
    /// The first stage with stage-level gates of any timing, Before, After.
    pub(super) first_stage_gate: [Option<u32>; 3],
}

impl RunIndex {
    pub(super) fn build(stages: &[StageRt]) -> RunIndex {
        let mut ix = RunIndex::default();
        for (si, s) in stages.iter().enumerate() {
            let si = si as u32;
            ix.stages.entry(s.tier.name.clone()).or_default().push(si);
            for (k, has) in [
                !s.tier.before_gates.is_empty() || !s.tier.after_gates.is_empty(),
                !s.tier.before_gates.is_empty(),
                !s.tier.after_gates.is_empty(),
            ]
            .into_iter()
            .enumerate()
            {
                if has && ix.first_stage_gate[k].is_none() {
                    ix.first_stage_gate[k] = Some(si);
                }
            }
            for (gi, g) in s.groups.iter().enumerate() {
                ix.groups
                    .entry(g.tier.name.clone())
                    .or_default()
                    .push((si, gi as u32));
            }
            let mut add = |group: Option<u32>, timing: GateTiming, gates: &[GateRt]| {
                for (i, gate) in gates.iter().enumerate() {
                    let loc = GateLoc {
                        stage: si,
                        group,
                        timing,
                        index: i as u32,
                    };
                    if let Some(id) = &gate.id {
                        ix.gates.entry(id.clone()).or_insert_with(|| loc.clone());
                    }
                    if gate.state == State::Pending {
                        ix.pending.insert(loc);
                    }
                }
            };
            add(None, GateTiming::Before, &s.tier.before_gates);
            add(None, GateTiming::After, &s.tier.after_gates);
            for (gi, g) in s.groups.iter().enumerate() {
                add(Some(gi as u32), GateTiming::Before, &g.tier.before_gates);
                add(Some(gi as u32), GateTiming::After, &g.tier.after_gates);
            }
        }
        ix
    }

    /// The first stage (in order) named `name`.
    pub(super) fn stage(&self, name: &str) -> Option<usize> {
        self.stages
            .get(name)
            .and_then(|v| v.first())
            .map(|s| *s as usize)
    }

    /// The first group (in order) named `name`.
    pub(super) fn group(&self, name: &str) -> Option<(usize, usize)> {
        self.groups
            .get(name)
            .and_then(|v| v.first())
            .map(|(s, g)| (*s as usize, *g as usize))
    }
}

/// What an auto-upgrade profile generated a run for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Generated {
    pub(super) profile: String,
    pub(super) versions: Vec<String>,
}

impl Run {
    /// Whether it is a run `profile` generated.
    pub(super) fn generated_by(&self, profile: &str) -> bool {
        self.generated
            .as_ref()
            .is_some_and(|g| g.profile == profile)
    }
    pub(super) fn started(&self) -> bool {
        self.node.state != State::NotStarted
    }
    pub(super) fn active(&self) -> bool {
        matches!(
            self.node.state,
            State::Running | State::Pending | State::Stopping
        )
    }
}
