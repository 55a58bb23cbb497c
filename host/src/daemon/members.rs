//! Members as the daemon knows them: a [`MemberBinding`] (what config or the API says: the
//! provider, the cluster's reference, the update group, labels) joined with what the provider
//! [`Described`] (versions, node pools, region, maintenance windows). This room owns that join,
//! the member resource it is stored as, and [`observe_members`], which describes every member
//! again (at start and periodically) so the engine's view of versions stays true.

use super::{Daemon, StepWrites, Worker};
use crate::providers::{ClusterTarget, Described, Provider, ProviderError, ProviderErrorCode};
use crate::store::ResourceMeta;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use waverun_core::{Command, Labels, Member, Observation, ProviderRef};

/// The resource kind members are stored under.
pub const MEMBERS: &str = "members";

/// How a member is bound to its cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberBinding {
    /// The member's name.
    pub name: String,
    /// The provider that reaches it.
    pub provider: String,
    /// The provider's reference of the cluster: a string, or an object of identifiers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ref: Option<Value>,
    /// Azure's `clusterResourceId`, kept as given (the reference, when `clusterRef` is not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_resource_id: Option<String>,
    /// Its update group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Its labels (over those the provider reports).
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Long-term support is enabled on the cluster.
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "waverun_core::document::strict_bool"
    )]
    pub long_term_support: bool,
}

impl MemberBinding {
    /// `clusterRef` as the engine and providers carry it (an object as its JSON text).
    fn cluster_ref_text(&self) -> Option<String> {
        match &self.cluster_ref {
            None | Some(Value::Null) => self.cluster_resource_id.clone(),
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => Some(v.to_string()),
        }
    }

    /// The cluster, as its provider is asked about it.
    pub fn target(&self, region: Option<String>) -> ClusterTarget {
        ClusterTarget {
            member: self.name.clone(),
            cluster_ref: self.cluster_ref_text(),
            region,
        }
    }

    /// The engine's member: this binding over what the provider described.
    pub fn member(&self, d: &Described) -> Member {
        let provider_labels = d.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        // Later pairs win: the binding's own labels over the provider's.
        let labels = provider_labels.chain(self.labels.iter()).collect();
        Member {
            name: self.name.clone(),
            group: self.group.clone(),
            labels,
            region: d.region.clone(),
            kubernetes_version: d.kubernetes_version.clone(),
            node_pools: d.node_pools.clone(),
            maintenance: d.maintenance.clone().unwrap_or_default(),
            long_term_support: self.long_term_support,
            provider: Some(ProviderRef {
                name: self.provider.clone(),
                id: self.cluster_ref_text(),
            }),
        }
    }

    /// The member resource's properties: the binding, and the provider's view under `status`.
    pub fn properties(&self, d: &Described) -> Value {
        let m = self.member(d);
        let mut p = json!({
            "provider": self.provider,
            "labels": self.labels,
            "longTermSupport": self.long_term_support,
            "status": {
                "kubernetesVersion": m.kubernetes_version,
                "nodePools": m.node_pools,
                "region": m.region,
                "maintenance": m.maintenance,
                "labels": m.labels,
                "busy": d.busy,
            },
        });
        if let Some(s) = &d.power_state {
            p["status"]["powerState"] = json!(s);
        }
        if let Some(id) = &self.cluster_resource_id {
            p["clusterResourceId"] = json!(id);
        }
        // Unset, as Azure shows it: absent (not null).
        if let Some(r) = &self.cluster_ref {
            p["clusterRef"] = r.clone();
        }
        if let Some(g) = &self.group {
            p["group"] = json!(g);
        }
        p
    }

    /// The binding a stored member resource was written from.
    pub fn of_stored(meta: &ResourceMeta) -> Option<MemberBinding> {
        let p: Value = serde_json::from_str(meta.body.as_deref()?).ok()?;
        Some(MemberBinding {
            name: meta.name.clone(),
            provider: p.get("provider")?.as_str()?.to_string(),
            cluster_ref: p.get("clusterRef").cloned().filter(|v| !v.is_null()),
            cluster_resource_id: p
                .get("clusterResourceId")
                .and_then(Value::as_str)
                .map(str::to_string),
            group: p.get("group").and_then(Value::as_str).map(str::to_string),
            labels: p
                .get("labels")
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default(),
            long_term_support: p
                .get("longTermSupport")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

/// A member [`Worker::register_members`] registered: its resource, and whether it is new (not
/// a re-registration).
pub type Registered = (ResourceMeta, bool);

/// From how many members [`Worker::stored_members`] reads every member once rather than each.
pub const READ_ALL_FROM: usize = 256;

/// The resource of a member written by `by`, keeping its creation record from `existing`.
pub fn member_resource(
    binding: &MemberBinding,
    d: &Described,
    by: &str,
    existing: Option<&ResourceMeta>,
) -> ResourceMeta {
    let now = crate::now_rfc3339();
    let properties = binding.properties(d);
    ResourceMeta {
        kind: MEMBERS.to_string(),
        name: binding.name.clone(),
        etag: String::new(),
        created_by: existing.map_or_else(|| by.to_string(), |m| m.created_by.clone()),
        created_at: existing.map_or_else(|| now.clone(), |m| m.created_at.clone()),
        last_modified_by: by.to_string(),
        last_modified_at: now,
        body: Some(properties.to_string()),
    }
}

impl Worker {
    /// Registers (or re-registers) a member as `by`: the engine's member and its resource, in
    /// one step.
    pub fn register_member(
        &mut self,
        binding: &MemberBinding,
        d: &Described,
        by: &str,
        extras: StepWrites,
    ) -> Result<ResourceMeta, super::DaemonError> {
        let existing = self.engine().stored().resource(MEMBERS, &binding.name)?;
        let meta = member_resource(binding, d, by, existing.as_ref());
        let mut extras = extras;
        extras.resources.push(meta.clone());
        let command = Command::UpsertMember {
            member: binding.member(d),
        };
        self.command_step(&command, extras)?;
        Ok(meta)
    }

    /// Registers (or re-registers) many members as `by`, in one step: every engine member and
    /// resource, and `audit`, in one transaction ([`super::FleetEngine::command_batch`]).
    /// Nothing is registered if the engine refuses one; the error then gives its index.
    /// Returns each member's resource, and whether it is new (not a re-registration).
    pub fn register_members(
        &mut self,
        members: &[(MemberBinding, Described)],
        by: &str,
        audit: Option<crate::store::NewAudit>,
    ) -> Result<Vec<Registered>, (Option<usize>, super::DaemonError)> {
        if members.is_empty() && audit.is_none() {
            return Ok(Vec::new()); // no step to commit
        }
        let mut metas = Vec::with_capacity(members.len());
        let mut new = Vec::with_capacity(members.len());
        let mut commands = Vec::with_capacity(members.len());
        let names: Vec<&str> = members.iter().map(|(b, _)| b.name.as_str()).collect();
        let mut stored = self.stored_members(&names).map_err(|e| (None, e))?;
        for (binding, d) in members {
            let existing = stored.remove(&binding.name);
            metas.push(member_resource(binding, d, by, existing.as_ref()));
            new.push(existing.is_none());
            commands.push(Command::UpsertMember {
                member: binding.member(d),
            });
        }
        let writes = StepWrites {
            audit,
            resources: metas.clone(),
            ..StepWrites::default()
        };
        let applied = self.engine().command_batch(&commands, writes)?;
        self.dispatched(&applied);
        Ok(metas.into_iter().zip(new).collect())
    }

    /// The stored resources of the members named (those that exist), by name: a read of each
    /// for a few, one read of every member for [`READ_ALL_FROM`] or more.
    pub fn stored_members(
        &mut self,
        names: &[&str],
    ) -> Result<HashMap<String, ResourceMeta>, super::DaemonError> {
        let stored = self.engine().stored();
        if names.len() >= READ_ALL_FROM {
            let wanted: HashSet<&str> = names.iter().copied().collect();
            let all = stored.resources(MEMBERS)?;
            return Ok(all
                .into_iter()
                .filter(|m| wanted.contains(m.name.as_str()))
                .map(|m| (m.name.clone(), m))
                .collect());
        }
        let mut found = HashMap::with_capacity(names.len());
        for name in names {
            if let Some(m) = stored.resource(MEMBERS, name)? {
                found.insert(m.name.clone(), m);
            }
        }
        Ok(found)
    }

    /// What the provider says a registered member is now, in one step with its resource's new
    /// status: a changed window, region or label replaces the engine's member; changed versions
    /// are observed; a change of `busy` alone is only written.
    pub fn observed(&mut self, binding: &MemberBinding, d: &Described) -> Result<(), String> {
        let existing = self
            .engine()
            .stored()
            .resource(MEMBERS, &binding.name)
            .map_err(|e| e.to_string())?;
        let Some(change) = existing.and_then(|e| Change::of(binding, d, &e)) else {
            return Ok(()); // deleted meanwhile, or nothing changed
        };
        self.apply_change(change)
    }

    /// [`Worker::observed`] for many members (the observer's batch): the changes of windows,
    /// regions, labels and `busy` of all of them in one step, so that a pass over a large fleet
    /// is a step per batch, not one per member; changed versions are observed one member at a
    /// time, as they are rare. If the engine refuses the batch, each member is tried alone.
    pub fn observed_many(&mut self, described: &[(MemberBinding, Described)]) {
        let mut commands = Vec::new();
        let mut resources = Vec::new();
        let mut singles = Vec::new();
        for (binding, d) in described {
            let existing = self.engine().stored().resource(MEMBERS, &binding.name);
            let change = match existing {
                Ok(existing) => existing.and_then(|e| Change::of(binding, d, &e)),
                Err(e) => {
                    tracing::warn!(member = %binding.name, error = %e, "reading a member failed");
                    None
                }
            };
            match change {
                Some(Change::Scheduling(command, meta)) => {
                    commands.push(command);
                    resources.push(meta);
                }
                Some(Change::Status(meta)) => resources.push(meta),
                Some(c @ Change::Versions(..)) => singles.push(c),
                None => {}
            }
        }
        if !resources.is_empty() {
            let writes = StepWrites {
                resources: resources.clone(),
                ..StepWrites::default()
            };
            let batch = if commands.is_empty() {
                self.engine().record(writes).map(|()| None)
            } else {
                let applied = self.engine().command_batch(&commands, writes);
                applied.map(Some).map_err(|(_, e)| e)
            };
            match batch {
                Ok(Some(applied)) => self.dispatched(&applied),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "recording a batch of observed members failed: each is tried alone");
                    let mut commands = commands.into_iter().peekable();
                    for meta in resources {
                        let change = match commands.next_if(|c| {
                            matches!(c, Command::UpsertMember { member } if member.name == meta.name)
                        }) {
                            Some(c) => Change::Scheduling(c, meta),
                            None => Change::Status(meta),
                        };
                        singles.push(change);
                    }
                }
            }
        }
        for change in singles {
            let name = change.member().to_string();
            if let Err(e) = self.apply_change(change) {
                tracing::warn!(member = %name, error = %e, "recording what a member runs failed");
            }
        }
    }

    /// One observed change, as one step.
    fn apply_change(&mut self, change: Change) -> Result<(), String> {
        let extras = |meta| StepWrites {
            resources: vec![meta],
            ..StepWrites::default()
        };
        match change {
            Change::Scheduling(command, meta) => self
                .command_step(&command, extras(meta))
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Change::Status(meta) => self
                .engine()
                .record(extras(meta))
                .map_err(|e| e.to_string()),
            Change::Versions(observation, meta) => {
                let applied = self
                    .engine()
                    .deliver_step(&observation, extras(meta))
                    .map_err(|e| e.to_string())?;
                self.dispatched(&applied);
                Ok(())
            }
        }
    }
}

/// What changed in a member, as its provider describes it, against its stored resource (with
/// the resource's new status).
enum Change {
    /// Its windows, region or labels: the engine's member is replaced (a changed window may
    /// unblock, or hold, a waiting member).
    Scheduling(Command, ResourceMeta),
    /// Its `busy` alone: only written.
    Status(ResourceMeta),
    /// Its versions: observed.
    Versions(Observation, ResourceMeta),
}

impl Change {
    /// The change of `binding`'s member now described as `d`, against `existing`; `None` if
    /// its status is the same.
    /// The binding is the stored one, not `binding` (what the description was asked with): a
    /// pass over a large fleet takes seconds, and a member written meanwhile (new labels, a new
    /// window) keeps what was written. One bound to another cluster meanwhile is left to the
    /// next pass.
    fn of(binding: &MemberBinding, d: &Described, existing: &ResourceMeta) -> Option<Change> {
        let current = MemberBinding::of_stored(existing)?;
        let same_cluster = current.provider == binding.provider
            && current.cluster_ref == binding.cluster_ref
            && current.cluster_resource_id == binding.cluster_resource_id;
        if !same_cluster {
            return None;
        }
        let binding = &current;
        let mut meta = member_resource(binding, d, &existing.last_modified_by, Some(existing));
        let before = stored_status(existing);
        let after = stored_status(&meta);
        if before == after {
            return None;
        }
        let versions = |s: &Value| (s["kubernetesVersion"].clone(), s["nodePools"].clone());
        let scheduling = |s: &Value| {
            let keys = ["region", "maintenance", "labels"];
            keys.map(|k| s[k].clone())
        };
        meta.last_modified_at = existing.last_modified_at.clone();
        Some(if scheduling(&before) != scheduling(&after) {
            let command = Command::UpsertMember {
                member: binding.member(d),
            };
            Change::Scheduling(command, meta)
        } else if versions(&before) == versions(&after) {
            Change::Status(meta)
        } else {
            let observation = Observation::MemberObserved {
                name: binding.name.clone(),
                kubernetes_version: d.kubernetes_version.clone(),
                node_pools: d.node_pools.clone(),
            };
            Change::Versions(observation, meta)
        })
    }

    /// The member changed.
    fn member(&self) -> &str {
        match self {
            Change::Scheduling(_, m) | Change::Status(m) | Change::Versions(_, m) => &m.name,
        }
    }
}

fn stored_status(meta: &ResourceMeta) -> Value {
    meta.body
        .as_deref()
        .and_then(|b| serde_json::from_str::<Value>(b).ok())
        .map(|v| v["status"].clone())
        .unwrap_or(Value::Null)
}

/// Describes every registered member through its provider and tells the engine what changed.
/// Provider calls run here, off the engine thread, [`OBSERVE_BATCH`] members at a time (each
/// provider's share in one [`Provider::describe_many`]); each batch's changes then reach the
/// engine in one call. A member whose provider fails is logged and left as it was. Returns how
/// many members were described.
pub fn observe_members(daemon: &Daemon, providers: &BTreeMap<String, Arc<dyn Provider>>) -> usize {
    let stored = daemon.call(|w| w.engine().stored().resources(MEMBERS).ok());
    let Ok(Some(metas)) = stored else {
        return 0;
    };
    let bindings: Vec<(MemberBinding, Option<String>)> = metas
        .iter()
        .filter_map(|meta| {
            let binding = MemberBinding::of_stored(meta)?;
            providers.contains_key(&binding.provider).then(|| {
                let region = stored_status(meta)["region"].as_str().map(str::to_string);
                (binding, region)
            })
        })
        .collect();
    drop(metas);
    let mut n = 0;
    for batch in bindings.chunks(OBSERVE_BATCH) {
        let asked: Vec<(&str, ClusterTarget)> = batch
            .iter()
            .map(|(b, region)| (b.provider.as_str(), b.target(region.clone())))
            .collect();
        let mut described = Vec::with_capacity(batch.len());
        for ((binding, _), d) in batch.iter().zip(describe_all(providers, &asked)) {
            match d {
                Ok(d) => described.push((binding.clone(), d)),
                Err(e) => {
                    tracing::warn!(member = %binding.name, provider = %binding.provider, error = %e, "describing a member failed")
                }
            }
        }
        n += described.len();
        let recorded = daemon.call(move |w| w.observed_many(&described));
        if recorded.is_err() {
            return n;
        }
    }
    n
}

/// Describes clusters, each through its provider (`asked`: the provider's name and the
/// cluster): each provider's share in one [`Provider::describe_many`], the providers one after
/// another; the answers in the order asked. A provider not in `providers` answers Unavailable.
pub fn describe_all(
    providers: &BTreeMap<String, Arc<dyn Provider>>,
    asked: &[(&str, ClusterTarget)],
) -> Vec<Result<Described, ProviderError>> {
    let mut shares: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (provider, _)) in asked.iter().enumerate() {
        shares.entry(provider).or_default().push(i);
    }
    let mut answers: Vec<Option<Result<Described, ProviderError>>> = vec![None; asked.len()];
    for (name, share) in shares {
        let Some(provider) = providers.get(name) else {
            continue;
        };
        let targets: Vec<ClusterTarget> = share.iter().map(|&i| asked[i].1.clone()).collect();
        for (i, d) in share.into_iter().zip(provider.describe_many(&targets)) {
            answers[i] = Some(d);
        }
    }
    answers
        .into_iter()
        .map(|a| {
            a.unwrap_or_else(|| {
                Err(ProviderError::new(
                    ProviderErrorCode::Unavailable,
                    "no provider of this daemon answered for this cluster",
                ))
            })
        })
        .collect()
}

/// How many members [`observe_members`] describes, and records, at a time.
pub const OBSERVE_BATCH: usize = 500;

/// A release already delivered: (Kubernetes or node image, version, region, its flag —
/// preview or security patch —), so that a preview that reaches GA is delivered again.
pub type SeenRelease = (bool, String, String, bool);

/// Asks every provider for the releases in the regions of its members, and delivers those the
/// engine has not been told about (`seen`, kept by the caller) as observations. Providers
/// without a release calendar (`Unsupported`) are skipped quietly.
pub fn observe_releases(
    daemon: &Daemon,
    providers: &BTreeMap<String, Arc<dyn Provider>>,
    seen: &mut std::collections::BTreeSet<SeenRelease>,
) {
    let stored = daemon.call(|w| w.engine().stored().resources(MEMBERS).ok());
    let Ok(Some(metas)) = stored else {
        return;
    };
    let mut regions: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for meta in &metas {
        let (Some(b), Some(region)) = (
            MemberBinding::of_stored(meta),
            stored_status(meta)["region"].as_str().map(str::to_string),
        ) else {
            continue;
        };
        regions.entry(b.provider).or_default().insert(region);
    }
    for (name, regions) in regions {
        let Some(provider) = providers.get(&name) else {
            continue;
        };
        for region in regions {
            let releases = match provider.list_releases(&region) {
                Ok(r) => r,
                Err(e) if e.code == crate::providers::ProviderErrorCode::Unsupported => break,
                Err(e) => {
                    tracing::warn!(provider = %name, %region, error = %e, "listing releases failed");
                    continue;
                }
            };
            // Node images first: a run waiting for a Kubernetes version then starts with the
            // newest images already known.
            let new: Vec<(bool, crate::providers::Release)> = releases
                .node_images
                .into_iter()
                .map(|r| (false, r))
                .chain(releases.kubernetes.into_iter().map(|r| (true, r)))
                .filter(|(k, r)| {
                    !seen.contains(&(
                        *k,
                        r.version.clone(),
                        region.clone(),
                        r.preview || r.security_patch,
                    ))
                })
                .collect();
            if new.is_empty() {
                continue;
            }
            let r = region.clone();
            let delivered = daemon.call(move |w| {
                let now = crate::clock::Clock::now_ms(w.clock());
                let mut ok = Vec::new();
                for (kubernetes, rel) in new {
                    let since = rel
                        .since
                        .as_deref()
                        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                        .map(|t| t.with_timezone(&chrono::Utc))
                        .or_else(|| waverun_core::Timestamp::from_timestamp_millis(now))
                        .unwrap_or_default();
                    let observation = if kubernetes {
                        Observation::KubernetesReleased {
                            version: rel.version.clone(),
                            region: r.clone(),
                            since,
                            preview: rel.preview,
                        }
                    } else {
                        Observation::NodeImageReleased {
                            version: rel.version.clone(),
                            region: r.clone(),
                            since,
                            security_patch: rel.security_patch,
                        }
                    };
                    match w.engine().deliver(&observation) {
                        Ok(applied) => {
                            w.dispatched(&applied);
                            let flag = rel.preview || rel.security_patch;
                            ok.push((kubernetes, rel.version, r.clone(), flag));
                        }
                        Err(e) => {
                            tracing::warn!(version = %rel.version, region = %r, error = %e, "the engine refused a release")
                        }
                    }
                }
                ok
            });
            match delivered {
                Ok(ok) => seen.extend(ok),
                Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(labels: &[(&str, &str)]) -> Described {
        Described {
            kubernetes_version: "1.33.2".into(),
            node_pools: Vec::new(),
            region: "eastus".into(),
            busy: false,
            power_state: None,
            maintenance: None,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn binding(labels: &[(&str, &str)], provider: &str) -> MemberBinding {
        MemberBinding {
            name: "m1".into(),
            provider: provider.into(),
            cluster_ref: None,
            cluster_resource_id: None,
            group: None,
            labels: labels.iter().copied().collect(),
            long_term_support: false,
        }
    }

    #[test]
    fn an_observation_keeps_what_was_written_to_the_member_since_it_was_asked_for() {
        let asked = binding(&[("env", "prod")], "simulated");
        let d = described(&[]);
        let stored = member_resource(&asked, &d, "fleet-file", None);
        // Relabelled while the pass was describing it; the provider now says it is busy.
        let relabelled = binding(&[("env", "prod"), ("ring", "7")], "simulated");
        let written = member_resource(&relabelled, &d, "ops", Some(&stored));
        let busy = Described {
            busy: true,
            ..described(&[])
        };
        let Some(Change::Status(meta)) = Change::of(&asked, &busy, &written) else {
            panic!("a change of busy alone");
        };
        let status = stored_status(&meta);
        assert_eq!(status["busy"], true);
        assert_eq!(
            status["labels"]["ring"], "7",
            "the new label is kept: {status}"
        );
        // Bound to another provider meanwhile: this description is not its cluster's.
        let moved = member_resource(&binding(&[], "aks"), &d, "ops", Some(&stored));
        assert!(Change::of(&asked, &busy, &moved).is_none());
    }
}
