//! The simulated fleet: answers each upgrade command after the member's `upgradeMinutes`
//! (plus seeded jitter), failing the member's first `failAttempts` attempts; measures health
//! checks as the scenario's `health:` scripts them.

use super::scenario::{Behavior, Scenario, ScriptedHealth};
use crate::engine::Observation;
use crate::event::CheckRequest;
use crate::event::UpgradeOperation;
use crate::health::{Measurement, Verdict};
use crate::model::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// The clusters a simulation's upgrades run on, as its clock sees them: upgrades submitted to
/// them, the time the next result is due, the results due now.
///
/// A native engine's upgrades reach the fleet as [`crate::HostCommand::StartUpgrade`] outputs
/// (the simulation submits them). An engine behind a host ABI calls its cluster provider
/// itself: that provider is a [`SharedFleet`], and the simulation steps the same fleet.
pub trait Fleet {
    /// Accepts an upgrade at `now`; a repeated operation id is the same operation.
    fn submit(&mut self, op: &UpgradeOperation, now: Timestamp);
    /// The time the next result is due.
    fn next_completion(&self) -> Option<Timestamp>;
    /// Results due at or before `now`, in due order.
    fn take_due(&mut self, now: Timestamp) -> Vec<Observation>;
    /// Nothing in flight.
    fn idle(&self) -> bool;
    /// One measurement of a health check at `now`, as the scenario's `health:` scripts it (a
    /// measurement nothing scripts passes). Measured at once: the simulation delivers it at
    /// the same instant.
    fn measure(&mut self, req: &CheckRequest, now: Timestamp) -> Measurement;
}

/// A deterministic fleet of simulated clusters.
#[derive(Clone, Debug)]
pub struct SimulatedFleet {
    behaviors: BTreeMap<String, Behavior>,
    attempts: BTreeMap<String, u32>,
    /// (due, submission order) → (operation, succeeds).
    in_flight: BTreeMap<(Timestamp, u64), (String, bool)>,
    known: BTreeSet<String>,
    seq: u64,
    rng: u64,
    max_in_flight: usize,
    /// Scripted health results, first match wins.
    health: Vec<ScriptedHealth>,
}

impl SimulatedFleet {
    /// A fleet behaving as the scenario says.
    pub fn new(scenario: &Scenario) -> SimulatedFleet {
        let behaviors = scenario
            .members
            .iter()
            .map(|m| (m.name.clone(), m.behavior.clone()))
            .collect();
        let mut fleet = SimulatedFleet::with_behaviors(behaviors, scenario.seed);
        fleet.health = scenario.health.clone();
        fleet
    }

    /// One measurement as the scripted health says (see [`Fleet::measure`]).
    pub fn measure(&self, req: &CheckRequest, now: Timestamp) -> Measurement {
        self.health
            .iter()
            .find(|h| h.matches(req, now))
            .map(|h| h.measurement(req))
            .unwrap_or(Measurement {
                values: None,
                verdict: Some(Verdict::Pass),
                message: None,
            })
    }

    /// A fleet whose members behave as given (by name; others take the default behaviour).
    pub fn with_behaviors(behaviors: BTreeMap<String, Behavior>, seed: u64) -> SimulatedFleet {
        SimulatedFleet {
            behaviors,
            attempts: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            known: BTreeSet::new(),
            seq: 0,
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
            max_in_flight: 0,
            health: Vec::new(),
        }
    }

    /// Whether an operation id was ever submitted.
    pub fn knows(&self, operation_id: &str) -> bool {
        self.known.contains(operation_id)
    }

    /// Accepts an upgrade command at `now`. A repeated operation id is the same operation.
    pub fn submit(&mut self, op: &UpgradeOperation, now: Timestamp) {
        if !self.known.insert(op.operation_id.clone()) {
            return;
        }
        let b = self.behaviors.get(&op.member).cloned().unwrap_or_default();
        let attempt = self.attempts.entry(op.member.clone()).or_insert(0);
        *attempt += 1;
        let succeeds = *attempt > b.fail_attempts;
        let jitter = if b.jitter_minutes > 0 {
            self.next_random() % (u64::from(b.jitter_minutes) + 1)
        } else {
            0
        };
        let due = add_minutes(now, u64::from(b.upgrade_minutes) + jitter);
        self.seq += 1;
        self.in_flight
            .insert((due, self.seq), (op.operation_id.clone(), succeeds));
        self.max_in_flight = self.max_in_flight.max(self.in_flight.len());
    }

    /// The next completion time.
    pub fn next_completion(&self) -> Option<Timestamp> {
        self.in_flight.keys().next().map(|(t, _)| *t)
    }

    /// Results due at or before `now`, in due order.
    pub fn take_due(&mut self, now: Timestamp) -> Vec<Observation> {
        let mut out = Vec::new();
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (op, ok) = entry.remove();
            out.push(if ok {
                Observation::UpgradeSucceeded { operation_id: op }
            } else {
                Observation::UpgradeFailed {
                    operation_id: op,
                    message: "simulated upgrade failure".to_string(),
                }
            });
        }
        out
    }

    /// Nothing in flight.
    pub fn idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Upgrades in flight right now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The most upgrades ever in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// Upgrade attempts per member so far.
    pub fn attempts(&self, member: &str) -> u32 {
        self.attempts.get(member).copied().unwrap_or(0)
    }

    fn next_random(&mut self) -> u64 {
        // splitmix64: small, fast, and the same on every platform.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Fleet for SimulatedFleet {
    fn submit(&mut self, op: &UpgradeOperation, now: Timestamp) {
        SimulatedFleet::submit(self, op, now);
    }
    fn next_completion(&self) -> Option<Timestamp> {
        SimulatedFleet::next_completion(self)
    }
    fn take_due(&mut self, now: Timestamp) -> Vec<Observation> {
        SimulatedFleet::take_due(self, now)
    }
    fn idle(&self) -> bool {
        SimulatedFleet::idle(self)
    }
    fn measure(&mut self, req: &CheckRequest, now: Timestamp) -> Measurement {
        SimulatedFleet::measure(self, req, now)
    }
}

/// A handle on one [`SimulatedFleet`], for a host that submits upgrades to it directly (a
/// plugin host's cluster provider) while a [`super::Simulation`] steps it. Clones share the
/// fleet.
#[derive(Clone, Debug)]
pub struct SharedFleet(Arc<Mutex<SimulatedFleet>>);

impl SharedFleet {
    /// A fleet behaving as the scenario says.
    pub fn new(scenario: &Scenario) -> SharedFleet {
        SharedFleet(Arc::new(Mutex::new(SimulatedFleet::new(scenario))))
    }

    /// The fleet, for as long as the guard lives.
    pub fn lock(&self) -> MutexGuard<'_, SimulatedFleet> {
        // A panic while it was held leaves plain data behind, still consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`SimulatedFleet::next_completion`].
    pub fn next_completion(&self) -> Option<Timestamp> {
        self.lock().next_completion()
    }

    /// [`SimulatedFleet::in_flight`].
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight()
    }
}

impl Fleet for SharedFleet {
    fn submit(&mut self, op: &UpgradeOperation, now: Timestamp) {
        self.lock().submit(op, now);
    }
    fn next_completion(&self) -> Option<Timestamp> {
        self.lock().next_completion()
    }
    fn take_due(&mut self, now: Timestamp) -> Vec<Observation> {
        self.lock().take_due(now)
    }
    fn idle(&self) -> bool {
        self.lock().idle()
    }
    fn measure(&mut self, req: &CheckRequest, now: Timestamp) -> Measurement {
        self.lock().measure(req, now)
    }
}

/// `t + minutes`, saturating at the last representable instant (an upgrade that would end
/// beyond the calendar never completes); never panics.
fn add_minutes(t: Timestamp, minutes: u64) -> Timestamp {
    minutes
        .checked_mul(60)
        .and_then(|secs| i64::try_from(secs).ok())
        .and_then(chrono::TimeDelta::try_seconds)
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(Timestamp::MAX_UTC)
}
