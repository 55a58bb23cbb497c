//! The release catalog as the engine reads it: which Kubernetes versions and node images are
//! available in which region since when (and which are previews, security patches, or of a
//! minor out of community support), indexed for the questions the scheduler and the
//! auto-upgrade channels ask.

use crate::model::{Release, ReleaseCatalog, Support, Timestamp};
use crate::version::{compare_image_versions, image_family, KubeVersion};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The region key that stands for every region.
pub const ANY_REGION: &str = "*";

/// A release catalog with per-family indexes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    source: ReleaseCatalog,
    #[serde(skip)]
    index: Option<Index>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Index {
    kubernetes: BTreeMap<String, usize>,
    /// family → indexes into `node_images`, newest first.
    families: BTreeMap<String, Vec<usize>>,
}

impl Catalog {
    /// Builds the indexes over a catalog.
    pub fn new(source: ReleaseCatalog) -> Catalog {
        let mut c = Catalog {
            source,
            index: None,
        };
        c.reindex();
        c
    }

    /// The catalog as given.
    pub fn source(&self) -> &ReleaseCatalog {
        &self.source
    }

    /// Adds or extends one Kubernetes release's availability; `preview` is the newest word on
    /// it (a preview that reaches GA is observed again without the flag).
    pub fn add_kubernetes(&mut self, version: &str, region: &str, since: Timestamp, preview: bool) {
        add(&mut self.source.kubernetes, version, region, since).preview = preview;
        self.reindex();
    }

    /// Adds or extends one node image's availability; `security_patch` is the newest word on it.
    pub fn add_node_image(
        &mut self,
        version: &str,
        region: &str,
        since: Timestamp,
        security_patch: bool,
    ) {
        add(&mut self.source.node_images, version, region, since).security_patch = security_patch;
        self.reindex();
    }

    /// Who supports the minor of `v` (a minor the catalog does not list is `Community`).
    pub fn minor_support(&self, v: &KubeVersion) -> Support {
        let key = format!("{}.{}", v.major, v.minor);
        self.source
            .minors
            .iter()
            .find(|m| m.minor == key)
            .map_or(Support::Community, |m| m.support)
    }

    /// Every GA Kubernetes version available somewhere at `now` (previews and versions that do
    /// not parse are left out), newest first.
    pub fn ga_kubernetes(&self, now: Timestamp) -> Vec<KubeVersion> {
        let mut out: Vec<KubeVersion> = self
            .source
            .kubernetes
            .iter()
            .filter(|r| !r.preview && first_available(r).is_some_and(|t| t <= now))
            .filter_map(|r| KubeVersion::parse(&r.version).ok())
            .collect();
        out.sort_by(|a, b| b.cmp(a));
        out.dedup();
        out
    }

    /// The newest image of `family` available somewhere at `now`; with `security_only`, the
    /// newest security-patch image that is not a Windows image.
    pub fn newest_image_anywhere(
        &self,
        family: &str,
        now: Timestamp,
        security_only: bool,
    ) -> Option<&str> {
        let list = self.index().families.get(family)?;
        list.iter()
            .map(|i| &self.source.node_images[*i])
            .filter(|r| {
                !security_only
                    || (r.security_patch && r.os_type != Some(crate::model::OsType::Windows))
            })
            .find(|r| first_available(r).is_some_and(|t| t <= now))
            .map(|r| r.version.as_str())
    }

    /// The first instant after `now` at which some release first reaches the catalog (becomes
    /// available in its first region): when an auto-upgrade profile must look again.
    pub fn next_release_after(&self, now: Timestamp) -> Option<Timestamp> {
        self.source
            .kubernetes
            .iter()
            .chain(&self.source.node_images)
            .filter_map(first_available)
            .filter(|t| *t > now)
            .min()
    }

    fn reindex(&mut self) {
        let mut index = Index::default();
        for (i, r) in self.source.kubernetes.iter().enumerate() {
            index.kubernetes.insert(r.version.clone(), i);
        }
        for (i, r) in self.source.node_images.iter().enumerate() {
            if let Some(f) = image_family(&r.version) {
                index.families.entry(f.to_string()).or_default().push(i);
            }
        }
        let images = &self.source.node_images;
        for list in index.families.values_mut() {
            list.sort_by(|a, b| compare_image_versions(&images[*b].version, &images[*a].version));
        }
        self.index = Some(index);
    }

    fn index(&self) -> &Index {
        // The index is rebuilt after deserialisation by `ensure_index`; a missing one is a bug.
        self.index.as_ref().expect("catalog index built")
    }

    /// Rebuilds the indexes after a restore.
    pub fn ensure_index(&mut self) {
        if self.index.is_none() {
            self.reindex();
        }
    }

    /// Since when `version` is available in `region`, if ever.
    pub fn kubernetes_since(&self, version: &str, region: &str) -> Option<Timestamp> {
        let i = *self.index().kubernetes.get(version)?;
        since(&self.source.kubernetes[i], region)
    }

    /// Since when a node image is available in `region`, if ever.
    pub fn image_since(&self, version: &str, region: &str) -> Option<Timestamp> {
        let family = image_family(version)?;
        let list = self.index().families.get(family)?;
        list.iter()
            .map(|i| &self.source.node_images[*i])
            .find(|r| r.version == version)
            .and_then(|r| since(r, region))
    }

    /// The newest image of `family` available in `region` at `now`.
    pub fn newest_image(&self, family: &str, region: &str, now: Timestamp) -> Option<&str> {
        let list = self.index().families.get(family)?;
        list.iter()
            .map(|i| &self.source.node_images[*i])
            .find(|r| since(r, region).is_some_and(|t| t <= now))
            .map(|r| r.version.as_str())
    }

    /// The newest image of `family` available in every one of `regions` at `now`.
    pub fn newest_image_everywhere<'a>(
        &self,
        family: &str,
        regions: impl Iterator<Item = &'a str> + Clone,
        now: Timestamp,
    ) -> Option<&str> {
        let list = self.index().families.get(family)?;
        list.iter()
            .map(|i| &self.source.node_images[*i])
            .find(|r| {
                regions
                    .clone()
                    .all(|region| since(r, region).is_some_and(|t| t <= now))
            })
            .map(|r| r.version.as_str())
    }
}

fn since(r: &Release, region: &str) -> Option<Timestamp> {
    match (r.available.get(region), r.available.get(ANY_REGION)) {
        (Some(a), Some(b)) => Some(*a.min(b)),
        (Some(a), None) | (None, Some(a)) => Some(*a),
        (None, None) => None,
    }
}

/// When a release is first available anywhere.
fn first_available(r: &Release) -> Option<Timestamp> {
    r.available.values().min().copied()
}

fn add<'a>(
    list: &'a mut Vec<Release>,
    version: &str,
    region: &str,
    at: Timestamp,
) -> &'a mut Release {
    let i = match list.iter().position(|r| r.version == version) {
        Some(i) => {
            let e = list[i].available.entry(region.to_string()).or_insert(at);
            if at < *e {
                *e = at;
            }
            i
        }
        None => {
            let mut available = BTreeMap::new();
            available.insert(region.to_string(), at);
            list.push(Release {
                version: version.to_string(),
                available,
                ..Release::default()
            });
            list.len() - 1
        }
    };
    &mut list[i]
}
