//! Reading the documents users write — strategies, runs, scenarios, API bodies — from YAML or
//! JSON text into the typed model (spec section 10).
//!
//! The rules, and how they are kept:
//! - **Closed schemas.** Every model struct refuses unknown fields (`deny_unknown_fields`);
//!   this module turns serde's "unknown field" into `stages[0].beforeGate: unknown field; did
//!   you mean beforeGates?`, so a typo never silently drops a gate, a limit or a window.
//! - **Mappings where the model has an object.** serde's derived structs also accept a
//!   sequence matched by field order; neither reader here ever offers one to a struct.
//! - **Typed YAML.** YAML is deserialised straight into the model (serde-saphyr), so a scalar
//!   takes the type of the field it fills: in a string field `y`, `no`, `1.30` and `010` stay
//!   strings. Booleans are YAML 1.2's `true`/`false` only.
//! - **Typed JSON.** JSON is read into a small tree that keeps every key in order (a key given
//!   twice is an error, never "last one wins"), then deserialised by a tree deserializer of its own: a
//!   number where the model wants a string is an error. A document that reads well is read
//!   first straight from its text into the model, under the same rules (no tree: a 34 MB
//!   scenario of 100,000 members is read in half the time); the tree is built only to name the
//!   path and the rule of a document that does not.
//! - **Errors name the path as it is in the file** (`members[3].nodePools[0].imageVersion`),
//!   then the rule; YAML errors add the line and column.
//!
//! Size limits are the caller's (a host refuses files over [`MAX_DOCUMENT_BYTES`] before
//! reading them); nesting is bounded by both parsers (YAML depth 64, JSON depth 128).

use crate::error::{Error, FieldError};
use crate::model::UpdateStrategy;
use crate::sim::Scenario;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess,
    SeqAccess, Visitor,
};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// The largest document a host reads (64 MiB).
pub const MAX_DOCUMENT_BYTES: u64 = 64 * 1024 * 1024;

/// The syntax of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// YAML 1.2 (also the default for files without a `.json` extension).
    Yaml,
    /// JSON.
    Json,
}

impl Format {
    /// The format a file name implies: `.json` (any case) is JSON, everything else YAML.
    pub fn for_file_name(name: &str) -> Format {
        let json = name
            .rsplit_once('.')
            .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("json"));
        if json {
            Format::Json
        } else {
            Format::Yaml
        }
    }
}

/// Deserialises `text` into `T` under the rules above. The error is [`Error::invalid`] with
/// one field error: the path in the file and what is wrong there.
pub fn from_str<T: DeserializeOwned>(text: &str, format: Format) -> Result<T, Error> {
    let result = match format {
        Format::Yaml => from_yaml(text),
        Format::Json => from_json(text),
    };
    result.map_err(|(path, message)| Error::invalid(vec![FieldError::new(path, message)]))
}

/// [`from_str`] for JSON only: what a Wasm host links when it never reads YAML.
pub fn from_json_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    from_json(text).map_err(|(path, message)| Error::invalid(vec![FieldError::new(path, message)]))
}

/// [`from_json_str`] through the tree alone, never straight from the text: what the tests
/// compare the straight reading with (the same model, or the same error).
#[doc(hidden)]
pub fn from_json_str_through_tree<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    through_tree(text)
        .map_err(|(path, message)| Error::invalid(vec![FieldError::new(path, message)]))
}

// Scenario parsing lives here (not in `sim`), so that `sim` does not import this module back.
impl Scenario {
    /// Parses a scenario from JSON text (closed schema, strict types: see [`crate::document`]).
    pub fn from_json(text: &str) -> Result<Scenario, Error> {
        from_json_str(text)
    }

    /// Parses a scenario from YAML or JSON text.
    pub fn from_text(text: &str, format: Format) -> Result<Scenario, Error> {
        from_str(text, format)
    }
}

/// What a file given to `waverun validate` holds.
#[derive(Debug)]
pub enum Document {
    /// A scenario.
    Scenario(Box<Scenario>),
    /// An update strategy, and the path of its object in the file (`""` for a bare strategy,
    /// `strategy` when wrapped or in the CLI's flattened view, `properties.strategy` in an
    /// Azure resource).
    Strategy {
        /// The strategy.
        strategy: UpdateStrategy,
        /// Where it sits in the file; validation errors are prefixed with it.
        path: &'static str,
    },
}

/// Reads a scenario or a strategy. A strategy may be bare (`{stages: [...]}`), wrapped
/// (`{strategy: {...}}`, which is also the `az` CLI's flattened view of a resource) or an
/// Azure resource (`{properties: {strategy: {...}}}`); around a resource, Azure's read-only
/// envelope fields (`id`, `name`, `type`, `systemData`, `eTag`, `provisioningState`, `status`)
/// are accepted and ignored.
pub fn document(text: &str, format: Format) -> Result<Document, Error> {
    let keys: BTreeMap<String, IgnoredAny> = from_str(text, format).map_err(|e| {
        if e.path().is_some_and(str::is_empty) {
            Error::invalid(vec![FieldError::new(
                "",
                format!(
                    "the file must hold a mapping (a scenario or a strategy): {}",
                    e.message
                ),
            )])
        } else {
            e
        }
    })?;
    if keys.is_empty() {
        return Err(invalid("", "the document is empty: it holds no fields"));
    }
    let has = |k: &str| keys.contains_key(k);
    if has("members") || has("run") || has("start") {
        return from_str(text, format).map(|s| Document::Scenario(Box::new(s)));
    }
    if has("stages") {
        return from_str(text, format).map(|strategy| Document::Strategy { strategy, path: "" });
    }
    if has("properties") || has("strategy") {
        let r: StrategyResource = from_str(text, format)?;
        if let Some(name) = &r.name {
            let mut e = crate::error::Errors::default();
            crate::validate::check_name("name", name, &mut e);
            e.into_result()?;
        }
        return match (r.properties, r.strategy) {
            (Some(_), Some(_)) => Err(invalid(
                "strategy",
                "give the strategy under properties or at the top level, not both",
            )),
            (Some(p), None) => match p.strategy {
                Some(strategy) => Ok(Document::Strategy {
                    strategy,
                    path: "properties.strategy",
                }),
                None => Err(invalid(
                    "properties.strategy",
                    "is required: the strategy, {stages: [...]}",
                )),
            },
            (None, Some(strategy)) => Ok(Document::Strategy {
                strategy,
                path: "strategy",
            }),
            (None, None) => Err(invalid(
                "strategy",
                "is null; it must be a strategy, {stages: [...]}",
            )),
        };
    }
    Err(invalid(
        "",
        "neither a scenario (no `members` or `run`) nor a strategy (no `stages`, `strategy` or `properties.strategy`)",
    ))
}

impl Document {
    /// Checks the document as `waverun validate` does: a scenario by its own rules and the
    /// whole fleet's (with the warnings of its run), a strategy by the strategy rules, its paths
    /// prefixed with where it sits in the file. The same answer in the CLI and in every Wasm host.
    pub fn validate(&self) -> (Result<(), Error>, Vec<FieldError>) {
        match self {
            Document::Scenario(s) => {
                let warnings = match s.run_spec() {
                    Some(spec) => crate::validate::run_spec_warnings("run", &spec),
                    None => Vec::new(),
                };
                (s.validate(), warnings)
            }
            Document::Strategy { strategy, path } => {
                let mut e = crate::error::Errors::default();
                crate::validate::validate_strategy(path, strategy, &mut e);
                (e.into_result(), Vec::new())
            }
        }
    }
}

fn invalid(path: &str, message: &str) -> Error {
    Error::invalid(vec![FieldError::new(path, message)])
}

/// A strategy resource as Azure returns it, or as the `az` CLI prints it (flattened). The
/// envelope fields are read only to be accepted; their values are ignored.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StrategyResource {
    #[serde(default)]
    id: Option<IgnoredAny>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    _type: Option<IgnoredAny>,
    #[serde(default)]
    system_data: Option<IgnoredAny>,
    #[serde(default)]
    e_tag: Option<IgnoredAny>,
    #[serde(default)]
    provisioning_state: Option<IgnoredAny>,
    #[serde(default)]
    status: Option<IgnoredAny>,
    #[serde(default)]
    strategy: Option<UpdateStrategy>,
    #[serde(default)]
    properties: Option<StrategyProperties>,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StrategyProperties {
    #[serde(default)]
    strategy: Option<UpdateStrategy>,
    #[serde(default)]
    provisioning_state: Option<IgnoredAny>,
    #[serde(default)]
    status: Option<IgnoredAny>,
}

// ---------------------------------------------------------------------------------------------
// YAML

fn yaml_options() -> serde_saphyr::Options {
    // Large fleets are large documents: allow as many nodes as 64 MiB can hold, keep the
    // parser's depth and alias limits.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = 64 * 1024 * 1024;
    budget.max_nodes = 32 * 1024 * 1024;
    serde_saphyr::options! {
        with_snippet: false,
        strict_booleans: true,
        budget: Some(budget),
    }
}

/// `Ok(T)` or the `(path, message)` of the first problem.
fn from_yaml<T: DeserializeOwned>(text: &str) -> Result<T, (String, String)> {
    let mut path = None;
    let result =
        serde_saphyr::with_deserializer_from_str_with_options(text, yaml_options(), |de| {
            serde_path_to_error::deserialize(de).map_err(|e| {
                path = Some(e.path().to_string());
                e.into_inner()
            })
        });
    result.map_err(|e| {
        let text = e.to_string();
        let message = match text.rsplit_once(" at line ") {
            Some((m, _)) => m.to_string(),
            None => text,
        };
        let (path, mut message) = explain(path.as_deref().unwrap_or("."), &message);
        if let Some(loc) = e.location().filter(|l| l.line() > 0) {
            message = format!("{message} (line {}, column {})", loc.line(), loc.column());
        }
        (path, message)
    })
}

// ---------------------------------------------------------------------------------------------
// JSON

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, (String, String)> {
    if text.trim().is_empty() {
        return Err((String::new(), "the document is empty".into()));
    }
    // Straight from the text, refusing all the tree refuses (`Strict`); whatever it refuses is
    // read again through the tree, whose error names the path and the rule.
    let mut de = serde_json::Deserializer::from_str(text);
    if let Ok(value) = T::deserialize(Strict(&mut de)) {
        if de.end().is_ok() {
            return Ok(value);
        }
    }
    through_tree(text)
}

/// JSON through the tree: the document's first problem, its path and rule.
fn through_tree<T: DeserializeOwned>(text: &str) -> Result<T, (String, String)> {
    if text.trim().is_empty() {
        return Err((String::new(), "the document is empty".into()));
    }
    let node: Node = serde_json::from_str(text).map_err(|e| {
        let shown = e.to_string();
        let message = match shown.rsplit_once(" at line ") {
            Some((m, _)) => m,
            None => &shown,
        };
        let message = format!(
            "not valid JSON: {message} (line {}, column {})",
            e.line(),
            e.column()
        );
        (String::new(), message)
    })?;
    // The tree is consumed as the model is built: each member's subtree is freed once its
    // member is made, so that a large fleet's tree and model are never both whole.
    serde_path_to_error::deserialize(NodeDeserializer(node))
        .map_err(|e| explain(&e.path().to_string(), &e.inner().0))
}

/// A JSON value that keeps its keys in document order (and so can tell a key given twice).
/// Strings and keys borrow from the text where it holds them unescaped: a large file is not
/// copied twice on its way to the model.
#[derive(Debug)]
enum Node<'t> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(Cow<'t, str>),
    Seq(Vec<Node<'t>>),
    Map(Vec<(Cow<'t, str>, Node<'t>)>),
}

/// A string of the text: borrowed where it has no escapes.
struct Text<'t>(Cow<'t, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Objects with more keys than this find a key given twice through a set, smaller ones by a
/// scan of the keys so far.
const SCANNED_KEYS: usize = 16;

/// The keys of one object so far, to refuse one given twice.
#[derive(Default)]
struct SeenKeys<'t> {
    list: Vec<Cow<'t, str>>,
    set: Option<std::collections::BTreeSet<Cow<'t, str>>>,
}

impl<'t> SeenKeys<'t> {
    /// `Ok` the first time `k` is seen in the object, an error the second.
    fn first_time<E: de::Error>(&mut self, k: Cow<'t, str>) -> Result<(), E> {
        let twice = match &self.set {
            Some(set) => set.contains(&k),
            None => self.list.contains(&k),
        };
        if twice {
            return Err(E::custom(format!(
                "the key {k:?} is given twice in one object"
            )));
        }
        match &mut self.set {
            Some(set) => {
                set.insert(k);
            }
            None => {
                self.list.push(k);
                if self.list.len() > SCANNED_KEYS {
                    self.set = Some(self.list.drain(..).collect());
                }
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Node<'de>, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
                Ok(Node::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
                Ok(Node::Number(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
                Ok(Node::Number(v.into()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node<'de>, E> {
                serde_json::Number::from_f64(v)
                    .map(Node::Number)
                    .ok_or_else(|| E::custom("a number must be finite"))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
                Ok(Node::String(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
                Ok(Node::String(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
                Ok(Node::String(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node<'de>, A::Error> {
                let mut items = Vec::new();
                while let Some(n) = a.next_element()? {
                    items.push(n);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Node<'de>, A::Error> {
                let mut entries: Vec<(Cow<'de, str>, Node<'de>)> = Vec::new();
                let mut seen = SeenKeys::default();
                while let Some(Text(k)) = a.next_key::<Text<'de>>()? {
                    seen.first_time(k.clone())?;
                    let v = a.next_value()?;
                    entries.push((k, v));
                }
                Ok(Node::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

/// An error while deserialising a [`Node`]: just the message (the path is tracked around it).
#[derive(Debug)]
struct NodeError(String);

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NodeError {}

impl de::Error for NodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        NodeError(msg.to_string())
    }
}

/// Deserialises the typed model from a [`Node`], consuming it; a struct accepts only a mapping.
struct NodeDeserializer<'t>(Node<'t>);

impl NodeDeserializer<'_> {
    fn unexpected(&self) -> de::Unexpected<'_> {
        match &self.0 {
            Node::Null => de::Unexpected::Unit,
            Node::Bool(b) => de::Unexpected::Bool(*b),
            Node::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => de::Unexpected::Unsigned(u),
                (_, Some(i)) => de::Unexpected::Signed(i),
                _ => de::Unexpected::Float(n.as_f64().unwrap_or(0.0)),
            },
            Node::String(s) => de::Unexpected::Str(s),
            Node::Seq(_) => de::Unexpected::Seq,
            Node::Map(_) => de::Unexpected::Map,
        }
    }
}

impl<'de> Deserializer<'de> for NodeDeserializer<'_> {
    type Error = NodeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, NodeError> {
        match self.0 {
            Node::Null => v.visit_unit(),
            Node::Bool(b) => v.visit_bool(b),
            Node::Number(n) => {
                if let Some(u) = n.as_u64() {
                    v.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    v.visit_i64(i)
                } else {
                    v.visit_f64(n.as_f64().unwrap_or(0.0))
                }
            }
            Node::String(Cow::Borrowed(s)) => v.visit_str(s),
            Node::String(Cow::Owned(s)) => v.visit_string(s),
            Node::Seq(items) => v.visit_seq(SeqDe(items.into_iter())),
            Node::Map(entries) => v.visit_map(MapDe {
                entries: entries.into_iter(),
                value: None,
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, NodeError> {
        match &self.0 {
            Node::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, NodeError> {
        match &self.0 {
            Node::Null => v.visit_unit(),
            _ => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, NodeError> {
        self.deserialize_unit(v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, NodeError> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, NodeError> {
        match self.0 {
            Node::Seq(items) => v.visit_seq(SeqDe(items.into_iter())),
            _ => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, NodeError> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value, NodeError> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, NodeError> {
        match self.0 {
            Node::Map(entries) => v.visit_map(MapDe {
                entries: entries.into_iter(),
                value: None,
            }),
            _ => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, NodeError> {
        match &self.0 {
            Node::Map(_) => self.deserialize_map(v),
            other => Err(NodeError(format!(
                "must be a mapping (an object with named fields), not {}",
                what(other)
            ))),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, NodeError> {
        match self.0 {
            Node::String(s) => v.visit_enum(s.as_ref().into_deserializer()),
            Node::Map(entries) if entries.len() == 1 => {
                v.visit_enum(EnumDe(entries.into_iter().next().expect("one entry")))
            }
            other => Err(NodeError(format!(
                "must be a name or a mapping with exactly one key, not {}",
                what(&other)
            ))),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, NodeError> {
        v.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf identifier
    }
}

fn what(n: &Node<'_>) -> &'static str {
    match n {
        Node::Null => "null",
        Node::Bool(_) => "a boolean",
        Node::Number(_) => "a number",
        Node::String(_) => "a string",
        Node::Seq(_) => "a sequence",
        Node::Map(_) => "a mapping",
    }
}

struct SeqDe<'t>(std::vec::IntoIter<Node<'t>>);

impl<'de> SeqAccess<'de> for SeqDe<'_> {
    type Error = NodeError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, NodeError> {
        self.0
            .next()
            .map(|n| seed.deserialize(NodeDeserializer(n)))
            .transpose()
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct MapDe<'t> {
    entries: std::vec::IntoIter<(Cow<'t, str>, Node<'t>)>,
    value: Option<Node<'t>>,
}

impl<'de> MapAccess<'de> for MapDe<'_> {
    type Error = NodeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, NodeError> {
        match self.entries.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(k.as_ref().into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, NodeError> {
        match self.value.take() {
            Some(v) => seed.deserialize(NodeDeserializer(v)),
            None => Err(NodeError("a value was asked for before its key".into())),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct EnumDe<'t>((Cow<'t, str>, Node<'t>));

impl<'de, 't> de::EnumAccess<'de> for EnumDe<'t> {
    type Error = NodeError;
    type Variant = NodeDeserializer<'t>;
    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, NodeDeserializer<'t>), NodeError> {
        let (k, v) = self.0;
        let variant = seed.deserialize(k.as_ref().into_deserializer())?;
        Ok((variant, NodeDeserializer(v)))
    }
}

impl<'de> de::VariantAccess<'de> for NodeDeserializer<'_> {
    type Error = NodeError;
    fn unit_variant(self) -> Result<(), NodeError> {
        match self.0 {
            Node::Null => Ok(()),
            other => Err(NodeError(format!("takes no value, not {}", what(&other)))),
        }
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, NodeError> {
        seed.deserialize(self)
    }
    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, NodeError> {
        self.deserialize_seq(v)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, NodeError> {
        self.deserialize_struct("", fields, v)
    }
}

// ---------------------------------------------------------------------------------------------
// JSON straight into the model

/// A deserializer read straight from the text under the tree's rules: a struct (or a struct
/// variant) only from a mapping, never from a sequence; a key given twice in any object (an
/// ignored one too) refused; map keys given to the model as strings, bytes read as any value —
/// as [`NodeDeserializer`] does. It may refuse more than the tree (then the tree reads the
/// document and says why), never less, and what it reads is what the tree would have made.
struct Strict<D>(D);

/// `Strict` around every deserializer a seed is given.
struct StrictSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrictSeed<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

/// A visitor whose sequences, mappings, enums and nested values stay `Strict`; with
/// `mapping_only`, a sequence is refused (a struct is being read).
struct StrictVisitor<V> {
    v: V,
    mapping_only: bool,
}

impl<V> StrictVisitor<V> {
    fn any(v: V) -> Self {
        StrictVisitor {
            v,
            mapping_only: false,
        }
    }
    fn mapping(v: V) -> Self {
        StrictVisitor {
            v,
            mapping_only: true,
        }
    }
}

macro_rules! forward_deserialize {
    ($($method:ident),*) => {$(
        fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
            self.0.$method(StrictVisitor::any(v))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier
    );

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(StrictVisitor::any(v))
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(StrictVisitor::any(v))
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        // Visited, not skipped: a key given twice in an ignored value is refused too.
        self.0.deserialize_any(StrictVisitor::any(v))
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, StrictVisitor::any(v))
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_newtype_struct(name, StrictVisitor::any(v))
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, StrictVisitor::any(v))
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_tuple_struct(name, len, StrictVisitor::any(v))
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(StrictVisitor::mapping(v))
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_enum(name, variants, StrictVisitor::any(v))
    }
    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),*) => {$(
        fn $method<E: de::Error>(self, x: $ty) -> Result<V::Value, E> {
            self.v.$method(x)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for StrictVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.v.expecting(f)
    }
    forward_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>)
    );
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.v.visit_some(Strict(d))
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.v.visit_newtype_struct(Strict(d))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<V::Value, A::Error> {
        if self.mapping_only {
            return Err(de::Error::custom("a sequence where a mapping is expected"));
        }
        self.v.visit_seq(StrictSeq(a))
    }
    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<V::Value, A::Error> {
        self.v.visit_map(StrictMap {
            a,
            seen: SeenKeys::default(),
        })
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, a: A) -> Result<V::Value, A::Error> {
        self.v.visit_enum(StrictEnum(a))
    }
}

struct StrictSeq<A>(A);

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for StrictSeq<A> {
    type Error = A::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(StrictSeed(seed))
    }
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

struct StrictMap<'de, A> {
    a: A,
    seen: SeenKeys<'de>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StrictMap<'de, A> {
    type Error = A::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        // The key as text, then to the model as a string (as the tree gives it).
        let Some(Text(k)) = self.a.next_key::<Text<'de>>()? else {
            return Ok(None);
        };
        self.seen.first_time::<A::Error>(k.clone())?;
        let key: de::value::StrDeserializer<'_, A::Error> = k.as_ref().into_deserializer();
        seed.deserialize(key).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.a.next_value_seed(StrictSeed(seed))
    }
    fn size_hint(&self) -> Option<usize> {
        self.a.size_hint()
    }
}

struct StrictEnum<A>(A);

impl<'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for StrictEnum<A> {
    type Error = A::Error;
    type Variant = StrictVariant<A::Variant>;
    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, StrictVariant<A::Variant>), A::Error> {
        let (value, variant) = self.0.variant_seed(StrictSeed(seed))?;
        Ok((value, StrictVariant(variant)))
    }
}

struct StrictVariant<A>(A);

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for StrictVariant<A> {
    type Error = A::Error;
    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(StrictSeed(seed))
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, StrictVisitor::any(v))
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, StrictVisitor::mapping(v))
    }
}

// ---------------------------------------------------------------------------------------------
// Messages

/// Turns a reader's `(path, message)` into the path as users see it and a message that names
/// the rule, with a "did you mean" hint for unknown fields and names.
fn explain(path: &str, message: &str) -> (String, String) {
    let mut path = match path {
        "." => String::new(),
        p => p.to_string(),
    };
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((field, expected)) = rest.split_once('`') {
            let known = names(expected);
            if !path.ends_with(field) {
                path = join(&path, field);
            }
            return (
                path,
                unknown("unknown field", field, &known, "the fields here are"),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        if let Some((variant, expected)) = rest.split_once('`') {
            let known = names(expected);
            let what = format!("{} is not a known value", quote(variant));
            return (path, unknown(&what, variant, &known, "use one of"));
        }
    }
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        if let Some(p) = path.strip_suffix('?') {
            path = format!("{p}{key}");
        } else {
            path = join(&path, key);
        }
        return (path, "is given twice; each key may appear once".to_string());
    }
    if let Some(field) = message
        .strip_prefix("duplicate field `")
        .and_then(|r| r.split_once('`'))
        .map(|(f, _)| f)
    {
        if !path.ends_with(field) {
            path = join(&path, field);
        }
        return (path, "is given twice; each key may appear once".to_string());
    }
    if message.starts_with("expected mapping start") {
        return (
            path,
            "must be a mapping (an object with named fields), not a sequence or a scalar".into(),
        );
    }
    if message.starts_with("unexpected end of input") && path.is_empty() {
        return (path, "the document is empty".into());
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|r| r.split_once('`'))
        .map(|(f, _)| f)
    {
        return (join(&path, field), "is required".into());
    }
    (path, message.to_string())
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() || path == "?" {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// The names listed after "expected" in a serde message (`one of a, b`, `` `a` or `b` ``).
fn names(expected: &str) -> Vec<String> {
    let list = expected
        .trim_start_matches(',')
        .trim()
        .trim_start_matches("expected")
        .trim()
        .trim_start_matches("one of")
        .trim();
    if list.starts_with("there are no") {
        return Vec::new();
    }
    list.split(", ")
        .flat_map(|s| s.split(" or "))
        .map(|s| s.trim().trim_matches('`').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn unknown(what: &str, given: &str, known: &[String], list: &str) -> String {
    match closest(given, known) {
        Some(best) => format!("{what}; did you mean {best}?"),
        None if known.is_empty() => format!("{what}; nothing is allowed here"),
        None => format!("{what}; {list} {}", known.join(", ")),
    }
}

/// The known name closest to `given`, if it is close enough to be a likely typo.
pub fn closest<'a>(given: &str, known: &'a [String]) -> Option<&'a str> {
    let g = given.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&g, &k.to_ascii_lowercase()), k))
        .filter(|(d, k)| *d <= (k.chars().count() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// Levenshtein distance (two rows; names are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

// ---------------------------------------------------------------------------------------------
// Booleans

/// A boolean field of a document: `true` or `false` as a boolean, never a string that reads
/// like one (`'true'` in quotes, `"false"` in JSON) — a typo'd flag is an error, not silently
/// taken. In a binary format (a snapshot) the value is read as it was written.
pub fn strict_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    if d.is_human_readable() {
        d.deserialize_any(StrictBool)
    } else {
        bool::deserialize(d)
    }
}

struct StrictBool;

impl<'de> Visitor<'de> for StrictBool {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a boolean (true or false, without quotes)")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
}

/// [`strict_bool`] for an optional field (`null` is `None`).
pub fn strict_opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    if !d.is_human_readable() {
        return Option::<bool>::deserialize(d);
    }
    struct Opt;
    impl<'de> Visitor<'de> for Opt {
        type Value = Option<bool>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a boolean (true or false, without quotes)")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<bool>, E> {
            Ok(Some(v))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<bool>, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<bool>, E> {
            Ok(None)
        }
    }
    d.deserialize_any(Opt)
}
