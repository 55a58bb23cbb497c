//! A document tree for structure-aware mutation: like a JSON value, but numbers keep their
//! text (`1e309`, `18446744073709551616`, `-0`) and mappings are lists of pairs, so a key can
//! appear twice. Written back as JSON (compact or pretty) or as block-style YAML.

use crate::mutate::{EXTREME_NUMBERS, INTERESTING_DATES, INTERESTING_STRINGS};
use crate::rng::Rng;
use serde_json::Value;

/// One node.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as written.
    Num(String),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping (keys may repeat).
    Map(Vec<(String, Node)>),
}

impl Node {
    /// The tree of a JSON value.
    pub fn from_value(v: &Value) -> Node {
        match v {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Num(n.to_string()),
            Value::String(s) => Node::Str(s.clone()),
            Value::Array(a) => Node::Seq(a.iter().map(Node::from_value).collect()),
            Value::Object(o) => Node::Map(
                o.iter()
                    .map(|(k, v)| (k.clone(), Node::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// Parses JSON, or else YAML (through the host's reader), into a tree. `None` when neither
    /// parses. Panics of the YAML reader propagate: call it under `catch_unwind`.
    pub fn parse(bytes: &[u8]) -> Option<(Node, bool)> {
        if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
            return Some((Node::from_value(&v), true));
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let v: Value = waverun_host::parse_text(text, false).ok()?;
        Some((Node::from_value(&v), false))
    }

    /// Number of nodes in the tree.
    pub fn count(&self) -> usize {
        1 + match self {
            Node::Seq(items) => items.iter().map(Node::count).sum(),
            Node::Map(pairs) => pairs.iter().map(|(_, v)| v.count()).sum(),
            _ => 0,
        }
    }

    /// The `k`-th node in pre-order (0 is the root).
    pub fn nth_mut(&mut self, k: usize) -> Option<&mut Node> {
        let path = self.path_to(k)?;
        let mut cur = self;
        for i in path {
            cur = match cur {
                Node::Seq(items) => &mut items[i],
                Node::Map(pairs) => &mut pairs[i].1,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// Removes the `k`-th node (pre-order, `k >= 1`) from its parent; false if there is none.
    pub fn remove_nth(&mut self, k: usize) -> bool {
        let Some(mut path) = self.path_to(k) else {
            return false;
        };
        let Some(last) = path.pop() else {
            return false;
        };
        let mut cur = &mut *self;
        for i in path {
            cur = match cur {
                Node::Seq(items) => &mut items[i],
                Node::Map(pairs) => &mut pairs[i].1,
                _ => return false,
            };
        }
        match cur {
            Node::Seq(items) => {
                items.remove(last);
            }
            Node::Map(pairs) => {
                pairs.remove(last);
            }
            _ => return false,
        }
        true
    }

    /// Child indices from the root to the `k`-th node in pre-order.
    fn path_to(&self, k: usize) -> Option<Vec<usize>> {
        fn go(n: &Node, k: &mut usize, path: &mut Vec<usize>) -> bool {
            if *k == 0 {
                return true;
            }
            *k -= 1;
            let children: Vec<&Node> = match n {
                Node::Seq(items) => items.iter().collect(),
                Node::Map(pairs) => pairs.iter().map(|(_, v)| v).collect(),
                _ => return false,
            };
            for (i, c) in children.into_iter().enumerate() {
                path.push(i);
                if go(c, k, path) {
                    return true;
                }
                path.pop();
            }
            false
        }
        let mut k = k;
        let mut path = Vec::new();
        go(self, &mut k, &mut path).then_some(path)
    }

    /// The `k`-th node in pre-order, read-only (for splicing from another document).
    pub fn nth(&self, k: usize) -> Option<&Node> {
        let path = self.path_to(k)?;
        let mut cur = self;
        for i in path {
            cur = match cur {
                Node::Seq(items) => &items[i],
                Node::Map(pairs) => &pairs[i].1,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// JSON text (duplicate keys are written as they are).
    pub fn to_json(&self, pretty: bool) -> String {
        let mut out = String::new();
        self.write_json(&mut out, pretty, 0);
        out
    }

    fn write_json(&self, out: &mut String, pretty: bool, depth: usize) {
        let nl = |out: &mut String, d: usize| {
            if pretty {
                out.push('\n');
                for _ in 0..d {
                    out.push_str("  ");
                }
            }
        };
        match self {
            Node::Null => out.push_str("null"),
            Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Node::Num(n) => out.push_str(n),
            Node::Str(s) => out.push_str(&json_string(s)),
            Node::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    nl(out, depth + 1);
                    item.write_json(out, pretty, depth + 1);
                }
                if !items.is_empty() {
                    nl(out, depth);
                }
                out.push(']');
            }
            Node::Map(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    nl(out, depth + 1);
                    out.push_str(&json_string(k));
                    out.push(':');
                    if pretty {
                        out.push(' ');
                    }
                    v.write_json(out, pretty, depth + 1);
                }
                if !pairs.is_empty() {
                    nl(out, depth);
                }
                out.push('}');
            }
        }
    }

    /// Block-style YAML (scalars double-quoted where plain text would change their meaning).
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        match self {
            Node::Seq(items) if !items.is_empty() => write_yaml_seq(items, &mut out, 0),
            Node::Map(pairs) if !pairs.is_empty() => write_yaml_map(pairs, &mut out, 0),
            other => {
                out.push_str(&yaml_scalar(other));
                out.push('\n');
            }
        }
        out
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn yaml_scalar(n: &Node) -> String {
    match n {
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Num(s) => s.clone(),
        Node::Str(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n"
                );
            if plain {
                s.clone()
            } else {
                json_string(s)
            }
        }
        Node::Seq(_) => "[]".into(),
        Node::Map(_) => "{}".into(),
    }
}

fn is_block(n: &Node) -> bool {
    matches!(n, Node::Seq(v) if !v.is_empty()) || matches!(n, Node::Map(v) if !v.is_empty())
}

fn indent(out: &mut String, d: usize) {
    for _ in 0..d {
        out.push_str("  ");
    }
}

fn write_yaml_map(pairs: &[(String, Node)], out: &mut String, d: usize) {
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            indent(out, d);
        }
        out.push_str(&yaml_scalar(&Node::Str(k.clone())));
        out.push(':');
        write_yaml_value(v, out, d);
    }
}

fn write_yaml_seq(items: &[Node], out: &mut String, d: usize) {
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            indent(out, d);
        }
        out.push('-');
        match v {
            Node::Map(pairs) if !pairs.is_empty() => {
                out.push(' ');
                write_yaml_map(pairs, out, d + 1);
            }
            Node::Seq(inner) if !inner.is_empty() => {
                out.push(' ');
                write_yaml_seq(inner, out, d + 1);
            }
            other => {
                out.push(' ');
                out.push_str(&yaml_scalar(other));
                out.push('\n');
            }
        }
    }
}

fn write_yaml_value(v: &Node, out: &mut String, d: usize) {
    if is_block(v) {
        out.push('\n');
        indent(out, d + 1);
        match v {
            Node::Map(pairs) => write_yaml_map(pairs, out, d + 1),
            Node::Seq(items) => write_yaml_seq(items, out, d + 1),
            _ => unreachable!(),
        }
    } else {
        out.push(' ');
        out.push_str(&yaml_scalar(v));
        out.push('\n');
    }
}

/// Field names of the documents and envelopes, for keys added by mutation.
pub const FIELD_NAMES: &[&str] = &[
    "start",
    "until",
    "autoApprove",
    "seed",
    "members",
    "releases",
    "freezes",
    "strategy",
    "run",
    "actions",
    "name",
    "group",
    "labels",
    "region",
    "kubernetesVersion",
    "nodePools",
    "osType",
    "imageVersion",
    "fromSnapshot",
    "maintenance",
    "kubernetes",
    "nodeOS",
    "schedule",
    "daily",
    "intervalDays",
    "weekly",
    "intervalWeeks",
    "dayOfWeek",
    "absoluteMonthly",
    "intervalMonths",
    "dayOfMonth",
    "relativeMonthly",
    "weekIndex",
    "durationHours",
    "startTime",
    "utcOffset",
    "startDate",
    "notAllowedDates",
    "end",
    "longTermSupport",
    "provider",
    "id",
    "behavior",
    "upgradeMinutes",
    "failAttempts",
    "jitterMinutes",
    "stages",
    "groups",
    "memberSelector",
    "byLabel",
    "afterStageWaitInSeconds",
    "maxConcurrency",
    "maxAllowedFailures",
    "beforeGates",
    "afterGates",
    "type",
    "displayName",
    "scheduledStartConfiguration",
    "startDay",
    "managedClusterUpdate",
    "upgrade",
    "nodeImageSelection",
    "customNodeImageVersions",
    "version",
    "updateStrategyName",
    "autoUpgradeProfileName",
    "nodeImages",
    "available",
    "at",
    "do",
    "gate",
    "stage",
    "timing",
    "targets",
    "by",
    "v",
    "request",
    "command",
    "observation",
    "scenario",
    "operationId",
    "message",
    "since",
    "member",
    "catalog",
    "from",
    "properties",
];

/// A random scalar or small container, biased to values that break parsers and validators.
pub fn random_node(rng: &mut Rng) -> Node {
    match rng.below(10) {
        0 => Node::Null,
        1 => Node::Bool(rng.chance(1, 2)),
        2 | 3 => Node::Num(rng.pick(EXTREME_NUMBERS).to_string()),
        4 => Node::Str(rng.pick(INTERESTING_DATES).to_string()),
        5 => Node::Str(rng.pick(INTERESTING_STRINGS).to_string()),
        6 => Node::Str(
            "x".repeat(
                rng.pick(&[63, 64, 100, 101, 253, 254, 512, 513, 5000])
                    .to_owned(),
            ),
        ),
        7 => Node::Seq(Vec::new()),
        8 => Node::Map(Vec::new()),
        _ => Node::Str(rng.pick(FIELD_NAMES).to_string()),
    }
}

/// Changes one node of `root` (or the root itself). `donors` are other documents' trees to
/// splice from.
pub fn mutate_tree(rng: &mut Rng, root: &mut Node, donors: &[&Node]) {
    let total = root.count();
    let k = rng.below(total);
    // A donor node is picked before `root` is borrowed mutably.
    let donor: Option<Node> = if !donors.is_empty() && rng.chance(1, 6) {
        let d = donors[rng.below(donors.len())];
        d.nth(rng.below(d.count())).cloned()
    } else {
        None
    };
    let Some(node) = root.nth_mut(k) else {
        return;
    };
    if let Some(d) = donor {
        *node = d;
        return;
    }
    match node {
        Node::Map(pairs) if !pairs.is_empty() && rng.chance(2, 3) => {
            let i = rng.below(pairs.len());
            match rng.below(6) {
                0 | 1 => {
                    pairs.remove(i);
                }
                2 => {
                    // A duplicate key, with the same or a different value.
                    let mut dup = pairs[i].clone();
                    if rng.chance(1, 2) {
                        dup.1 = random_node(rng);
                    }
                    let at = rng.below(pairs.len() + 1);
                    pairs.insert(at, dup);
                }
                3 => {
                    let at = rng.below(pairs.len() + 1);
                    pairs.insert(at, (rng.pick(FIELD_NAMES).to_string(), random_node(rng)));
                }
                4 => pairs[i].0 = rng.pick(FIELD_NAMES).to_string(),
                _ => pairs[i].1 = random_node(rng),
            }
        }
        Node::Seq(items) if !items.is_empty() && rng.chance(2, 3) => {
            let i = rng.below(items.len());
            match rng.below(5) {
                0 => {
                    items.remove(i);
                }
                1 => {
                    let n = rng.pick(&[1usize, 1, 2, 10, 49, 60]);
                    for _ in 0..n {
                        items.insert(i, items[i].clone());
                    }
                }
                2 => items.truncate(i),
                3 => {
                    let k = rng.below(items.len());
                    items.swap(i, k);
                }
                _ => items[i] = random_node(rng),
            }
        }
        _ => mutate_scalar(rng, node),
    }
}

/// Swaps a node's type or replaces it with an extreme value of the same type.
fn mutate_scalar(rng: &mut Rng, node: &mut Node) {
    let replacement = match (rng.below(8), &*node) {
        (0, Node::Num(n)) => Node::Str(n.clone()),
        (0, Node::Str(s)) => Node::Num(if s.parse::<f64>().is_ok() {
            s.clone()
        } else {
            rng.pick(EXTREME_NUMBERS).to_string()
        }),
        (0, other) => Node::Seq(vec![other.clone()]),
        (1, other) => Node::Map(vec![(rng.pick(FIELD_NAMES).to_string(), other.clone())]),
        (2, _) => Node::Num(rng.pick(EXTREME_NUMBERS).to_string()),
        (3, _) => Node::Str(rng.pick(INTERESTING_DATES).to_string()),
        (4, Node::Str(s)) => {
            let n = rng.pick(&[2usize, 10, 100, 1000, 10_000]);
            Node::Str(s.repeat(n).chars().take(20_000).collect())
        }
        (5, Node::Str(s)) => {
            let mut s = s.clone();
            let at = rng.below(s.chars().count() + 1);
            let byte = s.char_indices().nth(at).map_or(s.len(), |(b, _)| b);
            s.insert_str(
                byte,
                rng.pick(&[
                    "\u{0}", "\n", "\t", "\u{7f}", " ", "\u{feff}", "é", "%", "/", ":", ",",
                ]),
            );
            Node::Str(s)
        }
        (6, other) => {
            // Deep nesting.
            let depth = rng.pick(&[16usize, 100, 200, 1000]);
            let mut n = other.clone();
            for _ in 0..depth {
                n = if rng.chance(1, 2) {
                    Node::Seq(vec![n])
                } else {
                    Node::Map(vec![("a".into(), n)])
                };
            }
            n
        }
        _ => random_node(rng),
    };
    *node = replacement;
}
