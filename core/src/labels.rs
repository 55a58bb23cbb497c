//! A member's Kubernetes labels: a small map of strings, ordered by key, kept compact. Every
//! member has some, so a fleet of 100,000 holds 100,000 of them: a `BTreeMap<String, String>`
//! costs a 544-byte leaf and two allocations per label; [`Labels`] keeps all keys and values in
//! one string and their ends in one slice (two allocations in all, none when empty). In JSON
//! and YAML it is the same object of strings, in key order. Also here: [`LabelSet`], what a
//! selector reads of labels (a `Labels` or a `BTreeMap`).

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// Labels: keys unique, in ascending byte order (as a `BTreeMap<String, String>` orders them).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Labels {
    /// Each key then its value, one after another, in key order.
    text: Box<str>,
    /// Where each key and each value ends in `text`: two per label.
    ends: Box<[u32]>,
}

/// What a label selector reads of a member's labels.
pub trait LabelSet {
    /// The value of label `key`, if the member has it.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

impl LabelSet for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels {
    /// No labels.
    pub fn new() -> Labels {
        Labels::default()
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.ends.len() / 2
    }

    /// Whether there are no labels.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn span(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    fn key_at(&self, i: usize) -> &str {
        self.span(2 * i)
    }

    fn value_at(&self, i: usize) -> &str {
        self.span(2 * i + 1)
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            match self.key_at(mid).cmp(key) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).ok().map(|i| self.value_at(i))
    }

    /// Whether there is a label `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// The labels in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            labels: self,
            at: 0..self.len(),
        }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + DoubleEndedIterator {
        (0..self.len()).map(|i| self.key_at(i))
    }

    /// Sets `key` to `value`; returns the value it replaced. Rebuilds the labels: for a
    /// member's few labels, not a loop over many.
    pub fn insert(&mut self, key: &str, value: &str) -> Option<String> {
        let old = self.get(key).map(str::to_owned);
        let pairs = self.iter().filter(|(k, _)| *k != key).chain([(key, value)]);
        *self = Labels::from_distinct(pairs);
        old
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let old = self.get(key).map(str::to_owned)?;
        *self = Labels::from_distinct(self.iter().filter(|(k, _)| *k != key));
        Some(old)
    }

    /// The labels as a `BTreeMap`.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// Packs pairs whose keys are distinct (in any order).
    fn from_distinct<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Labels {
        let mut pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut text = String::with_capacity(pairs.iter().map(|(k, v)| k.len() + v.len()).sum());
        let mut ends = Vec::with_capacity(2 * pairs.len());
        for (k, v) in pairs {
            for part in [k, v] {
                text.push_str(part);
                ends.push(u32::try_from(text.len()).expect("labels are under 4 GiB"));
            }
        }
        Labels {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }
}

/// The labels of a [`Labels`] in key order: `(key, value)`.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    labels: &'a Labels,
    at: std::ops::Range<usize>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.at.next()?;
        Some((self.labels.key_at(i), self.labels.value_at(i)))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.at.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let i = self.at.next_back()?;
        Some((self.labels.key_at(i), self.labels.value_at(i)))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Later pairs replace earlier ones with the same key, as inserting into a map does.
impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Labels {
        let pairs: Vec<(K, V)> = iter.into_iter().collect();
        let mut last: Vec<usize> = (0..pairs.len()).collect();
        // Stable: among equal keys the last one comes last.
        last.sort_by(|&a, &b| pairs[a].0.as_ref().cmp(pairs[b].0.as_ref()));
        let kept = last.iter().enumerate().filter(|&(n, &i)| {
            last.get(n + 1)
                .is_none_or(|&next| pairs[next].0.as_ref() != pairs[i].0.as_ref())
        });
        Labels::from_distinct(
            kept.map(|(_, &i)| (pairs[i].0.as_ref(), pairs[i].1.as_ref()))
                .collect::<Vec<_>>(),
        )
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> From<[(K, V); N]> for Labels {
    fn from(pairs: [(K, V); N]) -> Labels {
        pairs.into_iter().collect()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Labels {
        Labels::from_distinct(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

impl From<&Labels> for BTreeMap<String, String> {
    fn from(labels: &Labels) -> BTreeMap<String, String> {
        labels.to_map()
    }
}

/// As a map: `{"tier": "web"}`.
impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Labels, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                // As for a `BTreeMap`: error messages stay as they were.
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
                let mut pairs: Vec<(String, String)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(pairs.into_iter().collect())
            }
        }
        deserializer.deserialize_map(LabelsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_read_in_key_order_whatever_order_they_came_in() {
        let l = Labels::from([("tier", "web"), ("cell", "c01"), ("ring", "r0")]);
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            [("cell", "c01"), ("ring", "r0"), ("tier", "web")]
        );
        assert_eq!(l.len(), 3);
        assert_eq!(l.get("ring"), Some("r0"));
        assert_eq!(l.get("rin"), None);
        assert_eq!(l.get("rings"), None);
        assert!(l.contains_key("cell") && !l.contains_key(""));
        assert_eq!(l.keys().rev().collect::<Vec<_>>(), ["tier", "ring", "cell"]);
    }

    #[test]
    fn a_later_label_replaces_an_earlier_one_with_the_same_key() {
        let l: Labels = [("a", "1"), ("b", "2"), ("a", "3"), ("a", "4")]
            .into_iter()
            .collect();
        assert_eq!(l.iter().collect::<Vec<_>>(), [("a", "4"), ("b", "2")]);
        let from_json: Labels = serde_json::from_str(r#"{"a":"1","b":"2","a":"5"}"#).unwrap();
        let as_map: BTreeMap<String, String> =
            serde_json::from_str(r#"{"a":"1","b":"2","a":"5"}"#).unwrap();
        assert_eq!(from_json, Labels::from(as_map));
    }

    #[test]
    fn labels_serialize_exactly_as_the_map_they_stand_for() {
        let map: BTreeMap<String, String> =
            [("zone", "1"), ("", "empty key"), ("é", ""), ("Z", "x")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let labels = Labels::from(map.clone());
        assert_eq!(
            serde_json::to_string(&labels).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert_eq!(labels.to_map(), map);
        assert_eq!(format!("{labels:?}"), format!("{map:?}"));
        let back: Labels = serde_json::from_str(&serde_json::to_string(&map).unwrap()).unwrap();
        assert_eq!(back, labels);
    }

    #[test]
    fn labels_that_are_not_strings_are_refused() {
        let e = serde_json::from_str::<Labels>(r#"{"a": 1}"#).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
        let e = serde_json::from_str::<Labels>(r#"["a"]"#).unwrap_err();
        assert!(e.to_string().contains("expected a map"), "{e}");
    }

    #[test]
    fn inserting_and_removing_keep_the_order() {
        let mut l = Labels::new();
        assert!(l.is_empty());
        assert_eq!(l.insert("b", "2"), None);
        assert_eq!(l.insert("a", "1"), None);
        assert_eq!(l.insert("b", "3"), Some("2".to_owned()));
        assert_eq!(l.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "3")]);
        assert_eq!(l.remove("a"), Some("1".to_owned()));
        assert_eq!(l.remove("a"), None);
        assert_eq!(l, Labels::from([("b", "3")]));
    }

    #[test]
    fn a_selector_reads_labels_and_maps_alike() {
        let l = Labels::from([("tier", "web")]);
        let m = l.to_map();
        assert_eq!(l.label("tier"), m.label("tier"));
        assert_eq!(l.label("x"), m.label("x"));
    }
}
