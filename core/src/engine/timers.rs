//! The timer table: every instant the engine must be woken at, and what for. Inserting, popping
//! what is due and telling the next one; no callbacks — what a due timer means is decided where
//! timers fire ([`super::Engine::handle_input`]).

use super::tree::{CheckPlace, GateLoc, MemberLoc};
use crate::event::{WakeReason, Wakeup};
use crate::model::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What a timer is for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) enum Timer {
    Member {
        loc: MemberLoc,
        reason: WakeReason,
    },
    Gate {
        run: String,
        gate: GateLoc,
    },
    StageWait {
        run: String,
        stage: u32,
    },
    Freeze {
        run: String,
    },
    /// A release reaches the catalog: auto-upgrade profiles look again (fleet-wide: no run).
    Release,
    /// A health check's next measurement (or the end of a member's soak).
    Check {
        place: CheckPlace,
        index: u32,
    },
}

impl Timer {
    /// Why the engine wakes for it.
    fn reason(&self) -> WakeReason {
        match self {
            Timer::Member { reason, .. } => *reason,
            Timer::Gate { .. } => WakeReason::ScheduledGate,
            Timer::StageWait { .. } => WakeReason::AfterStageWait,
            Timer::Freeze { .. } => WakeReason::FreezeEnds,
            Timer::Release => WakeReason::VersionAvailable,
            Timer::Check { .. } => WakeReason::HealthCheck,
        }
    }

    /// The run it belongs to (empty for a fleet-wide timer).
    pub(super) fn run(&self) -> &str {
        match self {
            Timer::Member { loc, .. } => &loc.run,
            Timer::Gate { run, .. } | Timer::StageWait { run, .. } | Timer::Freeze { run } => run,
            Timer::Release => "",
            Timer::Check { place, .. } => place.run(),
        }
    }
}

/// The timers, in time order (ties: [`Timer`]'s order). A snapshot holds them as a list of
/// `[at, timer]` pairs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct Timers(BTreeSet<(Timestamp, Timer)>);

impl Timers {
    /// Wake at `at` for `timer` (once, however often it is inserted).
    pub(super) fn insert(&mut self, (at, timer): (Timestamp, Timer)) {
        self.0.insert((at, timer));
    }

    /// The first timer due at or before `now`, with its instant, taken out of the table.
    pub(super) fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, Timer)> {
        if self.0.first()?.0 > now {
            return None;
        }
        self.0.pop_first()
    }

    /// The next wakeup.
    pub(super) fn next(&self) -> Option<Wakeup> {
        self.0.first().map(|(at, t)| Wakeup {
            at: *at,
            reason: t.reason(),
            run: t.run().to_string(),
        })
    }

    /// Drops every timer of `run` (deleted).
    pub(super) fn forget_run(&mut self, run: &str) {
        self.0.retain(|(_, t)| t.run() != run);
    }
}
