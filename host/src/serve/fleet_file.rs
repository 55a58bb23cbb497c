//! The simulated fleet file of `waverun serve --fleet FILE`: the scenario format's fleet part
//! (`members` with their `behavior`, `releases` — the simulated provider's release calendar,
//! releases dated in the future reach the catalog at their time —, `freezes`, `seed`, `start`).
//! A whole scenario file is accepted too: its `run`, `strategy`, `strategies`, `profiles`,
//! `actions`, `autoApprove` and `until` are not the fleet's and are ignored (create them through
//! the API), except that a scenario without `releases` gets the same implicit release calendar
//! as in `waverun simulate`.

use serde::de::IgnoredAny;
use serde::Deserialize;
use waverun_core::sim::{implicit_catalog, ScenarioMember};
use waverun_core::{Freeze, ReleaseCatalog, Timestamp};

/// A simulated fleet.
#[allow(dead_code)]
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetFile {
    /// The fleet clock's start for a new data directory (default: now).
    #[serde(default, deserialize_with = "waverun_core::time::de_opt_timestamp")]
    pub start: Option<Timestamp>,
    /// Seeds the simulated upgrades' jitter.
    #[serde(default)]
    pub seed: u64,
    /// The clusters.
    pub members: Vec<ScenarioMember>,
    /// The release calendar (default: every node image the fleet runs, everywhere).
    #[serde(default)]
    pub releases: Option<ReleaseCatalog>,
    /// Fleet freezes.
    #[serde(default)]
    pub freezes: Vec<Freeze>,
    /// A scenario's run: only its target version is read (see [`FleetFile::catalog`]).
    #[serde(default)]
    run: Option<serde_json::Value>,
    #[serde(default)]
    strategy: Option<IgnoredAny>,
    #[serde(default)]
    strategies: Option<IgnoredAny>,
    #[serde(default)]
    profiles: Option<IgnoredAny>,
    #[serde(default)]
    actions: Option<IgnoredAny>,
    #[serde(default)]
    auto_approve: Option<IgnoredAny>,
    #[serde(default)]
    until: Option<IgnoredAny>,
}

impl FleetFile {
    /// A fleet of these members and releases.
    pub fn new(members: Vec<ScenarioMember>, releases: ReleaseCatalog, seed: u64) -> FleetFile {
        FleetFile {
            start: None,
            seed,
            members,
            releases: Some(releases),
            freezes: Vec::new(),
            run: None,
            strategy: None,
            strategies: None,
            profiles: None,
            actions: None,
            auto_approve: None,
            until: None,
        }
    }

    /// The release catalog the engine gets: `releases`, or the scenario format's implicit one —
    /// every node image the fleet runs and, in a scenario file, its run's Kubernetes version,
    /// available everywhere from `now`.
    pub fn catalog(&self, now: Timestamp) -> ReleaseCatalog {
        if let Some(r) = &self.releases {
            return r.clone();
        }
        let version = self
            .run
            .as_ref()
            .and_then(|r| r["managedClusterUpdate"]["upgrade"]["kubernetesVersion"].as_str());
        implicit_catalog(&self.members, version, now)
    }
}
