//! Label selectors: this module owns the Kubernetes label-selector string syntax
//! (parsing into [`LabelSelector`] and matching a member's labels against it), the
//! Kubernetes rules for label keys and values ([`validate_label_key`],
//! [`validate_label_value`]), and [`LabelIndex`], an inverted index over a fleet's
//! labels that answers "which members match this selector" without scanning the
//! whole fleet.
//!
//! Syntax (as Kubernetes `labels.Parse`): terms separated by `,` are ANDed; each term
//! is `key=value`, `key==value`, `key!=value`, `key in (v1, v2)`, `key notin (v1, v2)`,
//! `key` (the key exists) or `!key` (the key does not exist). Spaces, tabs, carriage
//! returns and newlines are allowed around tokens (other white space, e.g. a no-break
//! space, is no separator: it lands inside a key or value and is refused there).
//! `!=` and `notin` also match members that lack the key.
//!
//! Empty values are accepted where Kubernetes accepts them, and mean the empty string
//! (a label value may be empty): `key=`, `key==` and `key!=` compare with the empty
//! value; inside a list an empty entry is the empty value, so `key in (a,)` matches `a`
//! or the empty value, and `key in ()` (like `key in (,)`) matches only the empty value,
//! `key notin ()` everything but it. As in Kubernetes, an even number of `,` right
//! before `)` (`key in (a,,)`) is refused.
//!
//! Differences from Kubernetes, on purpose: an empty selector is an error (an empty
//! `byLabel` is taken as a mistake, not as "everything"); the integer comparisons
//! `key>1` / `key<1` are not supported; a selector is at most [`MAX_SELECTOR_LEN`]
//! characters long.
//!
//! Everything here is pure and deterministic (no I/O, no clocks, no hashing).

pub use crate::labels::LabelSet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// Maximum length of a selector string, in characters.
pub const MAX_SELECTOR_LEN: usize = 512;

/// Maximum length of a label name (the part of a key after the optional prefix) and of a label value.
pub const MAX_LABEL_NAME_LEN: usize = 63;

/// Maximum length of a label key prefix (a DNS subdomain).
pub const MAX_LABEL_PREFIX_LEN: usize = 253;

// ---------------------------------------------------------------------------
// Requirements and selectors
// ---------------------------------------------------------------------------

/// One term of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`: the member has the key, with exactly this value.
    Equals {
        /// The label key.
        key: String,
        /// The required value.
        value: String,
    },
    /// `key!=value`: the member lacks the key, or has it with another value.
    NotEquals {
        /// The label key.
        key: String,
        /// The excluded value.
        value: String,
    },
    /// `key in (v1, v2)`: the member has the key, with one of these values.
    In {
        /// The label key.
        key: String,
        /// The allowed values (at least one, possibly the empty value; in written order,
        /// duplicates removed). `key in ()` has the one value `""`.
        values: Vec<String>,
    },
    /// `key notin (v1, v2)`: the member lacks the key, or has it with none of these values.
    NotIn {
        /// The label key.
        key: String,
        /// The excluded values (at least one, possibly the empty value; in written order,
        /// duplicates removed). `key notin ()` has the one value `""`.
        values: Vec<String>,
    },
    /// `key`: the member has the key (any value).
    Exists {
        /// The label key.
        key: String,
    },
    /// `!key`: the member does not have the key.
    NotExists {
        /// The label key.
        key: String,
    },
}

impl Requirement {
    /// The label key this requirement is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::Equals { key, .. }
            | Requirement::NotEquals { key, .. }
            | Requirement::In { key, .. }
            | Requirement::NotIn { key, .. }
            | Requirement::Exists { key }
            | Requirement::NotExists { key } => key,
        }
    }

    /// Whether the requirement selects members (`Equals`, `In`, `Exists`) rather than
    /// excluding them; a positive requirement never matches a member without the key.
    pub fn is_positive(&self) -> bool {
        matches!(
            self,
            Requirement::Equals { .. } | Requirement::In { .. } | Requirement::Exists { .. }
        )
    }

    /// Whether a member with these labels satisfies the requirement.
    pub fn matches(&self, labels: &(impl LabelSet + ?Sized)) -> bool {
        match self {
            Requirement::Equals { key, value } => labels.label(key) == Some(value.as_str()),
            Requirement::NotEquals { key, value } => labels.label(key) != Some(value.as_str()),
            Requirement::In { key, values } => labels
                .label(key)
                .is_some_and(|v| values.iter().any(|x| x == v)),
            Requirement::NotIn { key, values } => !labels
                .label(key)
                .is_some_and(|v| values.iter().any(|x| x == v)),
            Requirement::Exists { key } => labels.label(key).is_some(),
            Requirement::NotExists { key } => labels.label(key).is_none(),
        }
    }
}

/// Canonical text of the term, e.g. `env=dev`, `env in (a,b)`, `!env`; it parses back
/// to the same requirement.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Equals { key, value } => write!(f, "{key}={value}"),
            Requirement::NotEquals { key, value } => write!(f, "{key}!={value}"),
            Requirement::In { key, values } => write!(f, "{key} in ({})", values.join(",")),
            Requirement::NotIn { key, values } => {
                write!(f, "{key} notin ({})", values.join(","))
            }
            Requirement::Exists { key } => write!(f, "{key}"),
            Requirement::NotExists { key } => write!(f, "!{key}"),
        }
    }
}

/// A parsed Kubernetes label selector: the AND of its [`Requirement`]s.
///
/// Serializes as its original string; deserializing parses the string and fails with
/// the parse message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    source: String,
}

impl LabelSelector {
    /// Parses a selector string (see the module documentation for the syntax).
    ///
    /// The error is a message for humans naming the term and the rule it broke, e.g.
    /// `term 2 ("env in (a"): missing ")"`.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let len = s.chars().count();
        if len > MAX_SELECTOR_LEN {
            return Err(format!(
                "selector is {len} characters long; the limit is {MAX_SELECTOR_LEN}"
            ));
        }
        if s.trim_matches(is_space).is_empty() {
            return Err("empty selector".to_string());
        }
        let terms = split_terms(s);
        let count = terms.len();
        let mut requirements = Vec::with_capacity(count);
        for (i, term) in terms.iter().enumerate() {
            let text = term.trim_matches(is_space);
            let number = i + 1;
            let requirement = parse_term(text, number, count)
                .map_err(|rule| format!("term {number} ({text:?}): {rule}"))?;
            requirements.push(requirement);
        }
        Ok(LabelSelector {
            requirements,
            source: s.to_string(),
        })
    }

    /// The requirements, in written order (all must hold).
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// The original text, exactly as parsed.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether a member with these labels satisfies every requirement.
    pub fn matches(&self, labels: &(impl LabelSet + ?Sized)) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// The original text.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl FromStr for LabelSelector {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(s)
    }
}

impl Serialize for LabelSelector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for LabelSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        LabelSelector::parse(&s).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// Splits at commas outside parentheses (commas inside belong to a value list).
/// A stray `)` never makes the depth negative, so later terms still split normally.
fn split_terms(s: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(s.get(start..i).unwrap_or_default());
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(s.get(start..).unwrap_or_default());
    terms
}

/// The characters that separate tokens, exactly those of the Kubernetes lexer: space,
/// tab, carriage return and newline. Other white space (a no-break space, a vertical
/// tab, ...) is part of a word, so it makes the key or value invalid.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A key, a value, or the words `in` / `notin`.
    Word,
    Bang,
    Eq,
    EqEq,
    NotEq,
    Open,
    Close,
    Comma,
    /// A character that is no part of the syntax but looks like an operator (`<`, `>`,
    /// `|`, ...). Kubernetes reads `~ & | ;` as word characters, which no key or value
    /// allows, so refusing them here refuses the same selectors with a clearer message.
    Other,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
    /// Byte offset of `text` in the term.
    start: usize,
}

impl Token<'_> {
    fn end(&self) -> usize {
        self.start + self.text.len()
    }
}

/// Characters that end a word.
fn is_special(c: char) -> bool {
    matches!(
        c,
        '!' | '=' | '(' | ')' | ',' | '<' | '>' | '~' | '&' | '|' | ';'
    )
}

fn tokenize(s: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if is_space(c) {
            continue;
        }
        let next_is_eq = matches!(chars.peek(), Some(&(_, '=')));
        let (kind, end) = match c {
            '!' if next_is_eq => {
                chars.next();
                (Kind::NotEq, start + 2)
            }
            '=' if next_is_eq => {
                chars.next();
                (Kind::EqEq, start + 2)
            }
            '!' => (Kind::Bang, start + 1),
            '=' => (Kind::Eq, start + 1),
            '(' => (Kind::Open, start + 1),
            ')' => (Kind::Close, start + 1),
            ',' => (Kind::Comma, start + 1),
            c if is_special(c) => (Kind::Other, start + c.len_utf8()),
            c => {
                let mut end = start + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if is_space(d) || is_special(d) {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                (Kind::Word, end)
            }
        };
        out.push(Token {
            kind,
            text: s.get(start..end).unwrap_or_default(),
            start,
        });
    }
    out
}

fn check_key(key: &str) -> Result<(), String> {
    validate_label_key(key)
}

fn check_value(value: &str) -> Result<(), String> {
    validate_label_value(value)
}

/// Parses one trimmed term; the error is the rule only (the caller names the term).
fn parse_term(text: &str, number: usize, count: usize) -> Result<Requirement, String> {
    let empty_term = || {
        if number == count {
            "trailing comma: nothing follows the last \",\"".to_string()
        } else if number == 1 {
            "empty term: nothing before the first \",\"".to_string()
        } else {
            "empty term: nothing between two \",\"".to_string()
        }
    };
    if text.is_empty() {
        return Err(empty_term());
    }

    // Parentheses first: an unclosed list is the likeliest cause of anything odd after it.
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Err("unexpected \")\" (unbalanced parentheses)".into()),
            ')' => depth -= 1,
            _ => {}
        }
    }
    if depth > 0 {
        return Err("missing \")\"".into());
    }

    let toks = tokenize(text);
    let Some(&first) = toks.first() else {
        return Err(empty_term());
    };
    let rest = toks.get(2..).unwrap_or_default();
    match first.kind {
        Kind::Bang => {
            let Some(k) = toks.get(1) else {
                return Err("missing key after \"!\"".into());
            };
            if k.kind != Kind::Word {
                return Err(format!("missing key after \"!\": found {:?}", k.text));
            }
            check_key(k.text)?;
            if let Some(extra) = rest.first() {
                return Err(format!(
                    "unexpected {:?} after \"!{}\" (a not-exists term takes no operator or value)",
                    extra.text, k.text
                ));
            }
            Ok(Requirement::NotExists {
                key: k.text.to_string(),
            })
        }
        Kind::Word => {
            let key = first.text;
            check_key(key)?;
            let Some(op) = toks.get(1) else {
                return Ok(Requirement::Exists {
                    key: key.to_string(),
                });
            };
            match op.kind {
                Kind::Eq | Kind::EqEq | Kind::NotEq => {
                    let value = parse_single_value(rest, op.text)?;
                    let (key, value) = (key.to_string(), value.to_string());
                    Ok(if op.kind == Kind::NotEq {
                        Requirement::NotEquals { key, value }
                    } else {
                        Requirement::Equals { key, value }
                    })
                }
                Kind::Word if op.text == "in" || op.text == "notin" => {
                    let values = parse_value_list(rest, op.text)?;
                    let key = key.to_string();
                    Ok(if op.text == "in" {
                        Requirement::In { key, values }
                    } else {
                        Requirement::NotIn { key, values }
                    })
                }
                _ => Err(unknown_operator(key, op, rest)),
            }
        }
        Kind::Eq | Kind::EqEq | Kind::NotEq => Err(format!(
            "missing key: the term starts with the operator {:?}",
            first.text
        )),
        _ => Err(format!(
            "missing key: the term starts with {:?} (expected a key or \"!key\")",
            first.text
        )),
    }
}

/// The message for a term whose second token is no operator waverun knows.
fn unknown_operator(key: &str, op: &Token<'_>, rest: &[Token<'_>]) -> String {
    // Name the whole operator-looking run written without spaces, e.g. ">=" rather than ">".
    let mut name = op.text.to_string();
    if op.kind != Kind::Word {
        let mut end = op.end();
        for t in rest {
            let operator_like = matches!(
                t.kind,
                Kind::Bang | Kind::Eq | Kind::EqEq | Kind::NotEq | Kind::Other
            );
            if !operator_like || t.start != end {
                break;
            }
            name.push_str(t.text);
            end = t.end();
        }
    }
    if name.starts_with('>') || name.starts_with('<') {
        format!(
            "unsupported operator {name:?} after key {key:?}: waverun supports =, ==, !=, in and \
             notin, not the Kubernetes integer comparisons \">\" and \"<\""
        )
    } else {
        format!("unknown operator {name:?} after key {key:?} (expected =, ==, !=, in or notin)")
    }
}

/// `toks` are the tokens after `=`, `==` or `!=`; none at all is the empty value (as in
/// Kubernetes, `key=` means "the value is the empty string").
fn parse_single_value<'a>(toks: &[Token<'a>], op: &str) -> Result<&'a str, String> {
    let Some(v) = toks.first() else {
        return Ok("");
    };
    if v.kind != Kind::Word {
        return Err(format!(
            "expected a value (or nothing, for the empty value) after {op:?}, found {:?}",
            v.text
        ));
    }
    check_value(v.text)?;
    if let Some(extra) = toks.get(1) {
        let hint = if matches!(extra.text, "|" | "&") {
            "a selector has no \"||\" or \"&&\": its terms are separated by \",\" and must all hold"
        } else {
            "separate terms with \",\""
        };
        return Err(format!(
            "unexpected {:?} after the value {:?} ({hint})",
            extra.text, v.text
        ));
    }
    Ok(v.text)
}

/// `toks` are the tokens after `in` / `notin`. Parentheses are known to be balanced.
///
/// As in Kubernetes, the list is split at its commas and an empty entry is the empty
/// value: `()` and `(,)` are the empty value alone, `(a,)` and `(,a)` are `a` and the
/// empty value. Kubernetes refuses an even number of commas right before `)` (`(a,,)`,
/// `(,,)`), but not an odd one (`(a,)`, `(a,,,)`) nor any number between values
/// (`(a,,b)`); so does this.
fn parse_value_list(toks: &[Token<'_>], op: &str) -> Result<Vec<String>, String> {
    let Some(open) = toks.first() else {
        return Err(format!("missing value list after {op:?}: expected \"(\""));
    };
    if open.kind != Kind::Open {
        return Err(format!("missing \"(\" after {op:?}: found {:?}", open.text));
    }
    let mut values: Vec<&str> = Vec::new();
    let mut current: Option<&str> = None;
    // Commas since the last value (or since "(").
    let mut commas = 0usize;
    let mut rest = toks.get(1..).unwrap_or_default().iter();
    loop {
        let Some(t) = rest.next() else {
            return Err("missing \")\"".into());
        };
        match t.kind {
            Kind::Word => {
                if let Some(prev) = current {
                    return Err(format!(
                        "missing \",\" between the values {prev:?} and {:?}",
                        t.text
                    ));
                }
                current = Some(t.text);
                commas = 0;
            }
            Kind::Comma => {
                values.push(current.take().unwrap_or(""));
                commas += 1;
            }
            Kind::Close => {
                if commas >= 2 && commas.is_multiple_of(2) {
                    return Err(format!(
                        "{commas} commas right before \")\": Kubernetes refuses an even number of \
                         \",\" there (one \",\" before \")\" already adds the empty value)"
                    ));
                }
                values.push(current.take().unwrap_or(""));
                break;
            }
            Kind::Open => {
                return Err("unexpected \"(\" inside the value list (nested parentheses)".into())
            }
            _ => {
                return Err(format!(
                    "unexpected {:?} inside the value list (values are separated by \",\")",
                    t.text
                ))
            }
        }
    }
    if let Some(extra) = rest.next() {
        return Err(format!(
            "unexpected {:?} after \")\" (separate terms with \",\")",
            extra.text
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for v in values {
        check_value(v)?;
        if seen.insert(v) {
            out.push(v.to_string());
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Key and value validation
// ---------------------------------------------------------------------------

/// Checks a label key against the Kubernetes rules: an optional prefix, which must be a
/// DNS subdomain (at most 253 characters of lowercase letters, digits, `-` and `.`,
/// each dot-separated part starting and ending with a letter or digit), then `/`, then a
/// name of 1 to 63 characters matching `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
///
/// The error names the key and the rule, e.g.
/// `invalid label key "-env": the name must start and end with a letter or digit`.
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let rule = |rule: String| format!("invalid label key {key:?}: {rule}");
    if key.is_empty() {
        return Err(rule("must not be empty".into()));
    }
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if name.contains('/') {
                return Err(rule("must contain at most one \"/\"".into()));
            }
            check_prefix(prefix).map_err(rule)?;
            name
        }
        None => key,
    };
    if name.is_empty() {
        return Err(rule("the name after \"/\" must not be empty".into()));
    }
    check_name(name, "the name").map_err(rule)
}

/// Checks a label value against the Kubernetes rules: empty, or 1 to 63 characters
/// matching `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
///
/// The error names the value and the rule, e.g.
/// `invalid label value "a b": it contains ' '; only letters, digits, '-', '_' and '.' are allowed`.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_name(value, "it").map_err(|rule| format!("invalid label value {value:?}: {rule}"))
}

/// The shared name/value rule; `subject` starts the message ("the name", "it").
fn check_name(s: &str, subject: &str) -> Result<(), String> {
    let len = s.chars().count();
    if len > MAX_LABEL_NAME_LEN {
        return Err(format!(
            "{subject} is {len} characters long; the limit is {MAX_LABEL_NAME_LEN}"
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "{subject} contains {c:?}; only letters, digits, '-', '_' and '.' are allowed"
        ));
    }
    let alnum = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    if !alnum(s.as_bytes().first()) || !alnum(s.as_bytes().last()) {
        return Err(format!(
            "{subject} must start and end with a letter or digit"
        ));
    }
    Ok(())
}

fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("the prefix before \"/\" must not be empty".into());
    }
    let len = prefix.chars().count();
    if len > MAX_LABEL_PREFIX_LEN {
        return Err(format!(
            "the prefix is {len} characters long; the limit is {MAX_LABEL_PREFIX_LEN}"
        ));
    }
    if let Some(c) = prefix
        .chars()
        .find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.')))
    {
        return Err(format!(
            "the prefix contains {c:?}; a DNS subdomain allows only lowercase letters, digits, '-' and '.'"
        ));
    }
    let alnum = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    let part_ok = |p: &str| alnum(p.as_bytes().first()) && alnum(p.as_bytes().last());
    if !prefix.split('.').all(part_ok) {
        return Err(
            "the prefix must be a DNS subdomain: each dot-separated part non-empty, starting and ending with a letter or digit"
                .into(),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Index
// ---------------------------------------------------------------------------

/// An inverted index over a fleet's labels, built once; member `i` is the `i`-th label
/// map given to [`LabelIndex::new`].
///
/// Keys and values are interned to small ids; per key the index keeps the ascending
/// list of members having it and, per value, the ascending list of members having that
/// value; per member it keeps its `(key id, value id)` pairs sorted by key id.
#[derive(Clone, Debug, Default)]
pub struct LabelIndex<'a> {
    /// Key → key id (index into `keys`).
    key_ids: BTreeMap<&'a str, u32>,
    /// Per key id.
    keys: Vec<KeyPostings<'a>>,
    /// Member `m`'s pairs are `pairs[starts[m]..starts[m + 1]]`.
    starts: Vec<usize>,
    /// `(key id, value id)`, sorted by key id within each member.
    pairs: Vec<(u32, u32)>,
}

#[derive(Clone, Debug, Default)]
struct KeyPostings<'a> {
    /// Value → value id (index into `by_value`), per key.
    value_ids: BTreeMap<&'a str, u32>,
    /// Members (ascending) per value id.
    by_value: Vec<Vec<u32>>,
    /// Members (ascending) having the key.
    with_key: Vec<u32>,
}

/// A requirement resolved against the index's ids.
enum Check {
    /// Key id, sorted value ids (non-empty).
    In(u32, Vec<u32>),
    /// Key id, sorted value ids (non-empty).
    NotIn(u32, Vec<u32>),
    Exists(u32),
    NotExists(u32),
}

impl Check {
    fn is_positive(&self) -> bool {
        matches!(self, Check::In(..) | Check::Exists(_))
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).expect("label index holds at most u32::MAX members, keys and values")
}

impl<'a> LabelIndex<'a> {
    /// Builds the index; member `i` has the `i`-th label map.
    ///
    /// # Panics
    /// With more than `u32::MAX` members.
    pub fn new(labels: impl IntoIterator<Item = &'a crate::labels::Labels>) -> LabelIndex<'a> {
        LabelIndex::from_pairs(labels.into_iter().map(|l| l.iter()))
    }

    /// Builds the index from each member's `(key, value)` pairs (keys distinct within a
    /// member, in any order): member `i` has the `i`-th list. The index borrows the keys and
    /// values: nothing is copied.
    ///
    /// # Panics
    /// With more than `u32::MAX` members.
    pub fn from_pairs<P>(labels: impl IntoIterator<Item = P>) -> LabelIndex<'a>
    where
        P: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut index = LabelIndex {
            starts: vec![0],
            ..LabelIndex::default()
        };
        // Members next to each other (in name order) mostly have the same keys in the same
        // order, and often the same values: the previous member's ids, by position, are tried
        // before the maps (a fleet of 100,000 spent a quarter of its StartRun in those maps).
        let mut previous: Vec<(&'a str, u32, &'a str, u32)> = Vec::new();
        for (m, member_labels) in labels.into_iter().enumerate() {
            let m = to_u32(m);
            let first = index.pairs.len();
            for (j, (k, v)) in member_labels.into_iter().enumerate() {
                let seen = previous.get(j).filter(|p| p.0 == k);
                let kid = match seen.map(|p| p.1).or_else(|| index.key_ids.get(k).copied()) {
                    Some(id) => id,
                    None => {
                        let id = to_u32(index.keys.len());
                        index.key_ids.insert(k, id);
                        index.keys.push(KeyPostings::default());
                        id
                    }
                };
                let postings = &mut index.keys[kid as usize];
                let same_value = seen.filter(|p| p.2 == v).map(|p| p.3);
                let vid = match same_value.or_else(|| postings.value_ids.get(v).copied()) {
                    Some(id) => id,
                    None => {
                        let id = to_u32(postings.by_value.len());
                        postings.value_ids.insert(v, id);
                        postings.by_value.push(Vec::new());
                        id
                    }
                };
                let here = (k, kid, v, vid);
                match previous.get_mut(j) {
                    Some(p) => *p = here,
                    None => previous.push(here),
                }
                postings.by_value[vid as usize].push(m);
                postings.with_key.push(m);
                index.pairs.push((kid, vid));
            }
            index.pairs[first..].sort_unstable();
            index.starts.push(index.pairs.len());
        }
        index
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Whether the index has no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Members (indices, ascending, no duplicates) that match the selector.
    ///
    /// Uses the most selective positive requirement (`Equals` / `In` / `Exists`) to get
    /// candidates from the index, then checks the remaining requirements only on those
    /// candidates. When that would be slower than working on whole posting lists (many
    /// candidates, e.g. `env in (dev,prod),team!=x`), or when the selector has no
    /// positive requirement, it instead works on a bitset over the fleet: start from the
    /// best candidates (or everyone), intersect with the other positive requirements'
    /// members and strike out the members each negative requirement excludes.
    pub fn matching(&self, selector: &LabelSelector) -> Vec<u32> {
        let Some(checks) = self.compile(selector) else {
            return Vec::new();
        };
        let best = checks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_positive())
            .map(|(i, c)| (self.postings_len(c), i))
            .min();
        if let Some((best_len, best)) = best {
            // Rough costs in "touches": a per-candidate check is a binary search
            // (weighted 4); the bitset way touches every posting and every word.
            let rest = checks.len() - 1;
            let per_candidate = best_len.saturating_mul(rest).saturating_mul(4);
            let bitset = self.len() / 32
                + checks
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != best)
                    .map(|(_, c)| self.postings_len(c))
                    .sum::<usize>();
            if per_candidate <= bitset {
                return self.by_candidates(&checks, best);
            }
        }
        self.by_bitset(&checks, best.map(|(_, i)| i))
    }

    /// Takes the members of the positive `checks[best]` and keeps those passing the
    /// other checks.
    fn by_candidates(&self, checks: &[Check], best: usize) -> Vec<u32> {
        let mut candidates = self.candidates(&checks[best]);
        if checks.len() > 1 {
            candidates.retain(|&m| {
                checks
                    .iter()
                    .enumerate()
                    .all(|(i, c)| i == best || self.check(m, c))
            });
        }
        candidates
    }

    /// Resolves the selector's requirements to ids; `None` when no member can match
    /// (a positive requirement names a key or values no member has). Negative
    /// requirements that no member can violate are dropped.
    fn compile(&self, selector: &LabelSelector) -> Option<Vec<Check>> {
        let mut checks = Vec::with_capacity(selector.requirements().len());
        for r in selector.requirements() {
            let kid = self.key_ids.get(r.key()).copied();
            let value_ids = |kid: u32, values: &[String]| -> Vec<u32> {
                let ids = &self.keys[kid as usize].value_ids;
                let mut out: Vec<u32> = values
                    .iter()
                    .filter_map(|v| ids.get(v.as_str()).copied())
                    .collect();
                out.sort_unstable();
                out.dedup();
                out
            };
            match r {
                Requirement::Equals { value, .. } => {
                    let vids = value_ids(kid?, std::slice::from_ref(value));
                    if vids.is_empty() {
                        return None;
                    }
                    checks.push(Check::In(kid?, vids));
                }
                Requirement::In { values, .. } => {
                    let vids = value_ids(kid?, values);
                    if vids.is_empty() {
                        return None;
                    }
                    checks.push(Check::In(kid?, vids));
                }
                Requirement::Exists { .. } => checks.push(Check::Exists(kid?)),
                Requirement::NotEquals { value, .. } => {
                    if let Some(kid) = kid {
                        let vids = value_ids(kid, std::slice::from_ref(value));
                        if !vids.is_empty() {
                            checks.push(Check::NotIn(kid, vids));
                        }
                    }
                }
                Requirement::NotIn { values, .. } => {
                    if let Some(kid) = kid {
                        let vids = value_ids(kid, values);
                        if !vids.is_empty() {
                            checks.push(Check::NotIn(kid, vids));
                        }
                    }
                }
                Requirement::NotExists { .. } => {
                    if let Some(kid) = kid {
                        checks.push(Check::NotExists(kid));
                    }
                }
            }
        }
        Some(checks)
    }

    /// The posting lists (each ascending, pairwise disjoint) of the members that a
    /// positive check selects or a negative check excludes.
    fn postings<'s>(&'s self, check: &'s Check) -> impl Iterator<Item = &'s [u32]> + 's {
        let (k, vids): (u32, &[u32]) = match check {
            Check::In(k, vids) | Check::NotIn(k, vids) => (*k, vids),
            Check::Exists(k) | Check::NotExists(k) => (*k, &[]),
        };
        let postings = &self.keys[k as usize];
        let with_key = match check {
            Check::Exists(_) | Check::NotExists(_) => Some(postings.with_key.as_slice()),
            Check::In(..) | Check::NotIn(..) => None,
        };
        with_key.into_iter().chain(
            vids.iter()
                .map(move |&v| postings.by_value[v as usize].as_slice()),
        )
    }

    fn postings_len(&self, check: &Check) -> usize {
        self.postings(check).map(<[u32]>::len).sum()
    }

    /// Members (ascending) satisfying a positive check.
    fn candidates(&self, check: &Check) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::with_capacity(self.postings_len(check));
        let mut lists = 0;
        for list in self.postings(check) {
            out.extend_from_slice(list);
            lists += 1;
        }
        if lists > 1 {
            // A member has one value per key, so the lists are disjoint: no dedup needed.
            out.sort_unstable();
        }
        out
    }

    /// Member `m`'s value id for key id `k`.
    fn value_of(&self, m: u32, k: u32) -> Option<u32> {
        let m = m as usize;
        let pairs = &self.pairs[self.starts[m]..self.starts[m + 1]];
        pairs
            .binary_search_by_key(&k, |&(key, _)| key)
            .ok()
            .map(|i| pairs[i].1)
    }

    fn check(&self, m: u32, check: &Check) -> bool {
        match check {
            Check::In(k, vids) => self
                .value_of(m, *k)
                .is_some_and(|v| vids.binary_search(&v).is_ok()),
            Check::NotIn(k, vids) => self
                .value_of(m, *k)
                .is_none_or(|v| vids.binary_search(&v).is_err()),
            Check::Exists(k) => self.value_of(m, *k).is_some(),
            Check::NotExists(k) => self.value_of(m, *k).is_none(),
        }
    }

    /// Evaluates all checks on a bitset over the fleet, starting from the members of
    /// `checks[start]` (or from everyone).
    fn by_bitset(&self, checks: &[Check], start: Option<usize>) -> Vec<u32> {
        let n = self.len();
        let words = n.div_ceil(64);
        let set = |bits: &mut [u64], list: &[u32]| {
            for &m in list {
                bits[m as usize / 64] |= 1u64 << (m % 64);
            }
        };
        let mut keep = match start {
            Some(i) => {
                let mut keep = vec![0u64; words];
                for list in self.postings(&checks[i]) {
                    set(&mut keep, list);
                }
                keep
            }
            None => vec![u64::MAX; words],
        };
        let mut mask = Vec::new();
        for (i, check) in checks.iter().enumerate() {
            if Some(i) == start {
                continue;
            }
            if check.is_positive() {
                mask.clear();
                mask.resize(words, 0u64);
                for list in self.postings(check) {
                    set(&mut mask, list);
                }
                for (k, m) in keep.iter_mut().zip(&mask) {
                    *k &= m;
                }
            } else {
                for list in self.postings(check) {
                    for &m in list {
                        keep[m as usize / 64] &= !(1u64 << (m % 64));
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(keep.iter().map(|w| w.count_ones() as usize).sum());
        for (w, &word) in keep.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let m = w * 64 + bits.trailing_zeros() as usize;
                if m >= n {
                    break;
                }
                out.push(to_u32(m));
                bits &= bits - 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::Labels;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().copied().collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn err(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(parsed) => panic!("{s:?} should not parse, got {parsed:?}"),
            Err(e) => e,
        }
    }

    fn assert_err(s: &str, needles: &[&str]) {
        let e = err(s);
        for needle in needles {
            assert!(
                e.contains(needle),
                "error for {s:?} is {e:?}, missing {needle:?}"
            );
        }
    }

    // --- operators ---------------------------------------------------------------

    #[test]
    fn equals_matches_only_that_value() {
        for s in ["env=dev", "env==dev"] {
            let s = sel(s);
            assert!(s.matches(&labels(&[("env", "dev")])));
            assert!(!s.matches(&labels(&[("env", "prod")])));
            assert!(!s.matches(&labels(&[])));
        }
        assert_eq!(
            sel("env==dev").requirements(),
            &[Requirement::Equals {
                key: "env".into(),
                value: "dev".into()
            }]
        );
    }

    #[test]
    fn not_equals_matches_other_values_and_members_without_the_key() {
        let s = sel("env!=dev");
        assert!(!s.matches(&labels(&[("env", "dev")])));
        assert!(s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[("team", "a")])));
    }

    #[test]
    fn in_matches_any_listed_value() {
        let s = sel("env in (dev,staging)");
        assert!(s.matches(&labels(&[("env", "dev")])));
        assert!(s.matches(&labels(&[("env", "staging")])));
        assert!(!s.matches(&labels(&[("env", "prod")])));
        assert!(!s.matches(&labels(&[])));
    }

    #[test]
    fn notin_matches_members_without_the_key() {
        let s = sel("env notin (dev,staging)");
        assert!(!s.matches(&labels(&[("env", "dev")])));
        assert!(!s.matches(&labels(&[("env", "staging")])));
        assert!(s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[])));
    }

    #[test]
    fn exists_matches_any_value_of_the_key() {
        let s = sel("gpu");
        assert!(s.matches(&labels(&[("gpu", "")])));
        assert!(s.matches(&labels(&[("gpu", "a100")])));
        assert!(!s.matches(&labels(&[("cpu", "x")])));
    }

    #[test]
    fn not_exists_matches_only_members_without_the_key() {
        let s = sel("!gpu");
        assert!(!s.matches(&labels(&[("gpu", "")])));
        assert!(s.matches(&labels(&[("cpu", "x")])));
        assert_eq!(
            s.requirements(),
            &[Requirement::NotExists { key: "gpu".into() }]
        );
    }

    #[test]
    fn empty_values_are_allowed_inside_lists() {
        let s = sel("env in (dev,)");
        assert_eq!(
            s.requirements(),
            &[Requirement::In {
                key: "env".into(),
                values: vec!["dev".into(), "".into()]
            }]
        );
        assert!(s.matches(&labels(&[("env", "")])));
        assert!(!s.matches(&labels(&[])));
        let only_empty = sel("env in (,)");
        assert_eq!(
            only_empty.requirements(),
            &[Requirement::In {
                key: "env".into(),
                values: vec!["".into()]
            }]
        );
    }

    // --- empty values ------------------------------------------------------------

    #[test]
    fn empty_value_after_equals_matches_label_with_empty_value() {
        for text in ["x=", "x==", "x= ", " x == "] {
            let s = sel(text);
            assert_eq!(
                s.requirements(),
                &[Requirement::Equals {
                    key: "x".into(),
                    value: "".into()
                }],
                "{text:?}"
            );
            assert!(s.matches(&labels(&[("x", "")])), "{text:?}");
            assert!(!s.matches(&labels(&[("x", "a")])), "{text:?}");
            assert!(!s.matches(&labels(&[("y", "")])), "{text:?}");
        }
    }

    #[test]
    fn empty_value_after_not_equals_matches_other_values_and_missing_key() {
        let s = sel("x!=");
        assert_eq!(
            s.requirements(),
            &[Requirement::NotEquals {
                key: "x".into(),
                value: "".into()
            }]
        );
        assert!(!s.matches(&labels(&[("x", "")])));
        assert!(s.matches(&labels(&[("x", "a")])));
        assert!(s.matches(&labels(&[])));
    }

    #[test]
    fn empty_values_in_several_terms_each_compare_with_the_empty_value() {
        // Kubernetes TestSelectorParse: "x=,z= " and "x= ,z= ".
        for text in ["x=,z= ", "x= ,z= "] {
            let s = sel(text);
            assert!(s.matches(&labels(&[("x", ""), ("z", "")])), "{text:?}");
            assert!(!s.matches(&labels(&[("x", ""), ("z", "1")])), "{text:?}");
        }
    }

    #[test]
    fn in_with_empty_list_matches_only_the_empty_value() {
        // Kubernetes parses "x in ()" as the set {""} (TestSetSelectorParser).
        for text in ["x in ()", "x in ( )", "x in (,)", "x in(,,,)"] {
            let s = sel(text);
            assert_eq!(
                s.requirements(),
                &[Requirement::In {
                    key: "x".into(),
                    values: vec!["".into()]
                }],
                "{text:?}"
            );
            assert!(s.matches(&labels(&[("x", "")])), "{text:?}");
            assert!(!s.matches(&labels(&[("x", "a")])), "{text:?}");
            assert!(!s.matches(&labels(&[])), "{text:?}");
        }
    }

    #[test]
    fn notin_with_empty_list_excludes_only_the_empty_value() {
        for text in ["x notin ()", "x notin ( )"] {
            let s = sel(text);
            assert_eq!(
                s.requirements(),
                &[Requirement::NotIn {
                    key: "x".into(),
                    values: vec!["".into()]
                }],
                "{text:?}"
            );
            assert!(!s.matches(&labels(&[("x", "")])), "{text:?}");
            assert!(s.matches(&labels(&[("x", "a")])), "{text:?}");
            assert!(s.matches(&labels(&[])), "{text:?}");
        }
    }

    #[test]
    fn empty_list_entries_add_the_empty_value() {
        let values = |text: &str| match sel(text).requirements() {
            [Requirement::In { values, .. } | Requirement::NotIn { values, .. }] => values.clone(),
            other => panic!("{text:?}: {other:?}"),
        };
        assert_eq!(values("x in (abc,)"), ["abc", ""]);
        assert_eq!(values("x notin (, a)"), ["", "a"]);
        assert_eq!(values("x notin (abc,,def)"), ["abc", "", "def"]);
        assert_eq!(values("x in (a,,,b)"), ["a", "", "b"]);
        assert_eq!(values("x in (,,a)"), ["", "a"]);
        assert_eq!(values("x in (a,,,)"), ["a", ""]);
        let s = sel("x notin (abc,,def)");
        assert!(!s.matches(&labels(&[("x", "")])));
        assert!(s.matches(&labels(&[("x", "zzz")])));
    }

    #[test]
    fn even_number_of_commas_before_close_paren_is_refused_like_kubernetes() {
        // Kubernetes' parseIdentifiersList takes the commas of a run two at a time and
        // then wants a value or ",": "(a,,)" ends on ")" there and is refused.
        assert_err(
            "x in (a,,)",
            &["term 1", "2 commas right before \")\"", "even number"],
        );
        assert_err("a=b, x notin (,,)", &["term 2", "2 commas"]);
        assert_err("x in (a,,,,)", &["4 commas"]);
        assert_err("x in ( , , )", &["2 commas"]);
    }

    #[test]
    fn index_matches_empty_values() {
        let members = vec![
            labels(&[("team", "")]),
            labels(&[("team", "web")]),
            labels(&[]),
        ];
        let index = LabelIndex::new(&members);
        assert_eq!(index.matching(&sel("team=")), vec![0]);
        assert_eq!(index.matching(&sel("team in ()")), vec![0]);
        assert_eq!(index.matching(&sel("team!=")), vec![1, 2]);
        assert_eq!(index.matching(&sel("team notin ()")), vec![1, 2]);
        assert_eq!(index.matching(&sel("team in (web,)")), vec![0, 1]);
    }

    // --- Kubernetes compatibility ------------------------------------------------
    //
    // The cases below come from Kubernetes' own tests of its parser
    // (k8s.io/apimachinery pkg/labels/selector_test.go) and from its lexer and
    // validation rules (pkg/labels/selector.go, pkg/util/validation/validation.go).
    // Cases using ">" / "<" are left out (see
    // `kubernetes_gt_and_lt_are_refused_with_a_clear_message`), and so is "" (an empty
    // selector is refused on purpose, see `empty_selector_is_an_error`).

    /// The requirements of `text` written canonically, joined by ",".
    fn canonical(text: &str) -> String {
        sel(text)
            .requirements()
            .iter()
            .map(Requirement::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    #[test]
    fn selectors_kubernetes_accepts_parse() {
        let long_key = format!("{}/{}", "p".repeat(253), "n".repeat(63));
        let cases: &[(&str, &str)] = &[
            // TestSelectorParse, testGoodStrings.
            ("x=a,y=b,z=c", "x=a,y=b,z=c"),
            ("x!=a,y=b", "x!=a,y=b"),
            ("x=", "x="),
            ("x= ", "x="),
            ("x=,z= ", "x=,z="),
            ("x= ,z= ", "x=,z="),
            ("!x", "!x"),
            // TestDeterministicParse.
            ("x=a,a=x", "x=a,a=x"),
            ("a=x,x=a", "a=x,x=a"),
            // TestSelectorMatches.
            ("x=y", "x=y"),
            ("x=y,z=w", "x=y,z=w"),
            ("x!=y,z!=w", "x!=y,z!=w"),
            ("notin=in", "notin=in"),
            ("x", "x"),
            ("x=z", "x=z"),
            ("foo=bar", "foo=bar"),
            ("baz=blah", "baz=blah"),
            ("foo=bar,baz=blah", "foo=bar,baz=blah"),
            ("foo=blah", "foo=blah"),
            ("baz=bar", "baz=bar"),
            ("foo=bar,foobar=bar,baz=blah", "foo=bar,foobar=bar,baz=blah"),
            // TestLexerSequence / TestParserLookahead (the sequences that are selectors).
            ("key in ( value )", "key in (value)"),
            ("key notin ( value )", "key notin (value)"),
            ("key in ( value1, value2 )", "key in (value1,value2)"),
            ("key", "key"),
            ("!key", "!key"),
            ("x in (),y", "x in (),y"),
            // TestRequirementConstructor, the successes, written as selectors.
            ("x in (foo)", "x in (foo)"),
            ("x notin (foo)", "x notin (foo)"),
            ("1foo in (bar)", "1foo in (bar)"),
            ("1234 in (bar)", "1234 in (bar)"),
            // TestToString, the valid outputs.
            (
                "x in (abc,def),y notin (jkl),z",
                "x in (abc,def),y notin (jkl),z",
            ),
            ("x notin (abc,def),y!=jkl,!z", "x notin (abc,def),y!=jkl,!z"),
            (
                "x notin (abc),y in (jkl,mno),z notin ()",
                "x notin (abc),y in (jkl,mno),z notin ()",
            ),
            ("x=abc,y==jkl,z!=a,z", "x=abc,y=jkl,z!=a,z"),
            // TestSetSelectorParser, the valid ones.
            ("\rx", "x"),
            (
                "this-is-a-dns.domain.com/key-with-dash",
                "this-is-a-dns.domain.com/key-with-dash",
            ),
            (
                "this-is-another-dns.domain.com/key-with-dash in (so,what)",
                "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            ),
            (
                "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
            ),
            ("foo  in\t (abc)", "foo in (abc)"),
            ("x notin\n (abc)", "x notin (abc)"),
            ("x  notin\t\t\t(abc,def)", "x notin (abc,def)"),
            ("x in (abc,def)", "x in (abc,def)"),
            ("x in (abc,)", "x in (abc,)"),
            ("x in ()", "x in ()"),
            (
                "x notin (abc,,def),bar,z in (),w",
                "x notin (abc,,def),bar,z in (),w",
            ),
            ("x,y in (a)", "x,y in (a)"),
            ("x=a", "x=a"),
            ("x=a,y!=b", "x=a,y!=b"),
            ("x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
            ("x notin ( )", "x notin ()"),
            ("x notin (, a)", "x notin (,a)"),
            ("a ", "a"),
            ("a in (x,y,notin, z,in)", "a in (x,y,notin,z,in)"),
            // TestRequirementSelectorMatching, its requirements written as selectors.
            ("x in (foo),y notin (alpha)", "x in (foo),y notin (alpha)"),
            ("x notin (),y", "x notin (),y"),
            ("!x,y", "!x,y"),
            ("x notin (),!y", "x notin (),!y"),
            // From the parser (selector.go) rather than its tests: parseExactValue takes
            // the end of the string or a "," as the empty value, for "==" and "!=" too.
            ("x==", "x="),
            ("x!=", "x!="),
            ("x != , y", "x!=,y"),
            // parseIdentifiersList: any run of commas between values, an odd one before ")".
            ("x in (,)", "x in ()"),
            ("x in (,,a)", "x in (,a)"),
            ("x in (a,,,b)", "x in (a,,b)"),
            ("x in (a,,,)", "x in (a,)"),
            // "in" and "notin" are words wherever a key or a value is expected.
            ("in in (in)", "in in (in)"),
            ("notin notin (notin)", "notin notin (notin)"),
            ("!in", "!in"),
            ("x=in", "x=in"),
            // validation.go IsQualifiedName: a 253-character prefix and a 63-character name.
            (long_key.as_str(), long_key.as_str()),
        ];
        for (text, want) in cases {
            assert_eq!(canonical(text), *want, "{text:?}");
        }
    }

    #[test]
    fn selectors_match_labels_as_kubernetes_tests_expect() {
        // TestSelectorMatches and TestRequirementSelectorMatching, without ">" / "<".
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case] = &[
            ("x=y", &[("x", "y")], true),
            ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
            ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
            ("notin=in", &[("notin", "in")], true),
            ("x", &[("x", "z")], true),
            ("!x", &[("y", "z")], true),
            ("x=z", &[], false),
            ("x=y", &[("x", "z")], false),
            ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
            ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
            ("x", &[("y", "z")], false),
            ("!x", &[("x", "z")], false),
            ("foo=bar,baz=blah", &[("foo", "bar"), ("baz", "blah")], true),
            ("foo=blah", &[("foo", "bar"), ("baz", "blah")], false),
            (
                "foo=bar,foobar=bar,baz=blah",
                &[("foo", "bar"), ("baz", "blah")],
                false,
            ),
            (
                "x in (foo),y notin (alpha)",
                &[("x", "foo"), ("y", "baz")],
                true,
            ),
            (
                "x in (foo),y in (alpha)",
                &[("x", "foo"), ("y", "baz")],
                false,
            ),
            ("x notin (),y", &[("y", "")], true),
            ("!x,y", &[("y", "")], true),
            ("x notin (),!y", &[("y", "")], false),
            ("x in ()", &[("y", "baz")], false),
        ];
        for (text, pairs, want) in cases {
            assert_eq!(
                sel(text).matches(&labels(pairs)),
                *want,
                "{text:?} on {pairs:?}"
            );
        }
    }

    #[test]
    fn selectors_kubernetes_refuses_are_errors() {
        let a254 = "a".repeat(254);
        let long_prefix = format!("{}/x", "p".repeat(254));
        let long_name = format!("example.com/{}", "n".repeat(64));
        let cases: &[(&str, &str)] = &[
            // TestSelectorParse, testBadStrings ("x<a" is with the ">" / "<" cases).
            ("x=a||y=b", "a selector has no \"||\""),
            ("x==a==b", "unexpected \"==\" after the value \"a\""),
            ("!x=a", "unexpected \"=\" after \"!x\""),
            // TestSetSelectorParser, the invalid ones.
            ("x,,y", "term 2 (\"\"): empty term"),
            (",x,y", "term 1 (\"\"): empty term"),
            ("x nott in (y)", "unknown operator \"nott\""),
            ("a in (xyz),", "trailing comma"),
            ("a in (xyz)b notin ()", "unexpected \"b\" after \")\""),
            (
                "a in (xyz abc)",
                "missing \",\" between the values \"xyz\" and \"abc\"",
            ),
            ("a notin(", "missing \")\""),
            ("a (", "missing \")\""),
            ("(", "missing \")\""),
            // TestToString, the invalid one.
            ("x in (abc,def),", "trailing comma"),
            // TestRequirementConstructor: a 254-character key.
            (a254.as_str(), "254 characters long; the limit is 63"),
            // TestValidatedSelectorFromSet: a 64-character value.
            (
                "Key=axahm2EJ8Phiephe2eixohbee9eGeiyees1thuozi1xoh0GiuH3diewi8iem7Nui",
                "64 characters long; the limit is 63",
            ),
            // validation.go IsQualifiedName / IsDNS1123Subdomain.
            (
                long_prefix.as_str(),
                "the prefix is 254 characters long; the limit is 253",
            ),
            (
                long_name.as_str(),
                "the name is 64 characters long; the limit is 63",
            ),
            ("Example.com/x", "the prefix contains 'E'"),
            ("/x", "the prefix before \"/\" must not be empty"),
            ("x/", "the name after \"/\" must not be empty"),
            ("a/b/c", "at most one \"/\""),
            ("x=a b", "unexpected \"b\" after the value \"a\""),
            ("x in (a_)", "invalid label value \"a_\""),
            // From the parser (selector.go): an even run of commas before ")".
            ("x in (a,,)", "2 commas right before \")\""),
            ("x in (,,)", "2 commas right before \")\""),
            // parse: a "," must be followed by a term.
            ("x=a,", "trailing comma"),
            ("x=,", "trailing comma"),
            // parseExactValue: a value or nothing, not an operator or "(".
            ("x===a", "found \"=\""),
            ("x=(a)", "found \"(\""),
            ("x!=!a", "found \"!\""),
            // parseKeyAndInferOperator / parseOperator / parseValues.
            ("!x in (a)", "unexpected \"in\" after \"!x\""),
            ("!!x", "missing key after \"!\""),
            ("x !", "unknown operator \"!\""),
            ("x in a", "missing \"(\" after \"in\""),
            ("x in ((a))", "nested parentheses"),
            ("x in (a=b)", "unexpected \"=\" inside the value list"),
            ("x in (a)(b)", "unexpected \"(\" after \")\""),
            // The lexer's white space is space, tab, CR and LF only: anything else is
            // part of a key or value, which no key or value allows.
            ("x=a\u{a0}", "invalid label value \"a\\u{a0}\""),
            ("x\u{b}", "invalid label key \"x\\u{b}\""),
            ("x=\u{c}a", "invalid label value \"\\u{c}a\""),
            ("x\u{3000}in (a)", "invalid label key"),
            // Kubernetes' lexer reads "~", "|", "&" and ";" as word characters, which no
            // key or value allows (TestLexer: "~" and "||" are identifiers).
            ("x=a~", "unexpected \"~\""),
            ("x;y", "unknown operator \";\""),
            ("x=a&&y=b", "a selector has no \"||\" or \"&&\""),
        ];
        for (text, needle) in cases {
            assert_err(text, &[needle]);
        }
    }

    #[test]
    fn only_space_tab_cr_and_lf_separate_tokens() {
        assert_eq!(
            sel(" \t\r\nx \t\r\n= \t\r\na \t\r\n, \t\r\ny \t\r\nin \t\r\n( \t\r\nb \t\r\n)\n")
                .requirements(),
            sel("x=a,y in (b)").requirements()
        );
        for text in ["\u{a0}x", "x\u{85}", "x =\u{2003}", "x in (a\u{b})"] {
            let e = err(text);
            assert!(e.contains("invalid label"), "{text:?}: {e}");
        }
        // Only such characters: not an empty selector, an invalid key.
        assert_err("\u{a0}", &["invalid label key"]);
    }

    #[test]
    fn arbitrary_input_gives_a_selector_or_an_error_never_a_panic() {
        // Pieces that meet the parser's edges: operators, parentheses, commas, every kind
        // of white space, multi-byte characters next to specials. Accepted selectors
        // must print back to the same requirements.
        let pieces = [
            "x",
            "a",
            "in",
            "notin",
            " ",
            "\t",
            "\r",
            "\n",
            "\u{a0}",
            "\u{b}",
            "(",
            ")",
            ",",
            "=",
            "!",
            "<",
            ">",
            "|",
            "~",
            "é",
            "😀",
            "/",
            ".",
            "-",
            "_",
            "example.com/",
            "x=",
            "!x",
            "x in (",
            " notin (",
            "a,",
            ",a",
            "a)",
        ];
        let mut rng = Lcg(17);
        for _ in 0..20_000 {
            let len = rng.below(24);
            let text: String = (0..len)
                .map(|_| pieces[rng.below(pieces.len() as u64) as usize])
                .collect();
            if let Ok(s) = LabelSelector::parse(&text) {
                for r in s.requirements() {
                    assert_eq!(
                        sel(&r.to_string()).requirements(),
                        std::slice::from_ref(r),
                        "{text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn duplicate_list_values_are_removed_in_written_order() {
        assert_eq!(
            sel("k in (b, a, b)").requirements(),
            &[Requirement::In {
                key: "k".into(),
                values: vec!["b".into(), "a".into()]
            }]
        );
    }

    #[test]
    fn terms_are_anded() {
        let s = sel("env=prod,region in (eu,us),!canary,tier,team!=infra");
        assert_eq!(s.requirements().len(), 5);
        let good = labels(&[("env", "prod"), ("region", "eu"), ("tier", "1")]);
        assert!(s.matches(&good));
        let mut with_canary = good.clone();
        with_canary.insert("canary", "true");
        assert!(!s.matches(&with_canary));
        let mut infra = good.clone();
        infra.insert("team", "infra");
        assert!(!s.matches(&infra));
        let mut ap = good.clone();
        ap.insert("region", "ap");
        assert!(!s.matches(&ap));
        let mut no_tier = good;
        no_tier.remove("tier");
        assert!(!s.matches(&no_tier));
    }

    #[test]
    fn whitespace_around_tokens_is_ignored() {
        assert_eq!(
            sel("env = dev").requirements(),
            sel("env=dev").requirements()
        );
        assert_eq!(
            sel(" env == dev ").requirements(),
            sel("env=dev").requirements()
        );
        assert_eq!(
            sel("env != dev").requirements(),
            sel("env!=dev").requirements()
        );
        assert_eq!(
            sel("env in ( a , b )").requirements(),
            sel("env in (a,b)").requirements()
        );
        assert_eq!(
            sel("env notin(a)").requirements(),
            sel("env notin (a)").requirements()
        );
        assert_eq!(sel(" !key ").requirements(), sel("!key").requirements());
        assert_eq!(sel("! key").requirements(), sel("!key").requirements());
        assert_eq!(
            sel("\ta = b ,\n c in (d) , e ").requirements(),
            sel("a=b,c in (d),e").requirements()
        );
    }

    #[test]
    fn as_str_and_display_keep_the_original_text() {
        let text = " env = dev , !canary ";
        let s = sel(text);
        assert_eq!(s.as_str(), text);
        assert_eq!(s.to_string(), text);
        assert_eq!(text.parse::<LabelSelector>(), Ok(s));
    }

    #[test]
    fn requirement_display_parses_back_to_the_same_requirement() {
        let s = sel(
            "a=b, c==d, e!=f, g in (h, i,), j notin (k), l, !m, example.com/n=o, \
             p=, q!=, r in (), s notin (,t), u in (v,,w)",
        );
        for r in s.requirements() {
            assert_eq!(sel(&r.to_string()).requirements(), std::slice::from_ref(r));
        }
    }

    #[test]
    fn prefixed_keys_are_accepted() {
        let s = sel("example.com/ring in (0,1), !kubernetes.io/os");
        assert!(s.matches(&labels(&[("example.com/ring", "1")])));
        assert!(!s.matches(&labels(&[
            ("example.com/ring", "1"),
            ("kubernetes.io/os", "linux")
        ])));
    }

    // --- parse errors ------------------------------------------------------------

    /// Kubernetes takes "" as "everything"; waverun refuses it on purpose.
    #[test]
    fn empty_selector_is_an_error() {
        assert_eq!(err(""), "empty selector");
        assert_eq!(err("  \t "), "empty selector");
    }

    #[test]
    fn selector_longer_than_512_characters_is_an_error() {
        let ok = format!("k in ({})", vec!["a"; 250].join(","));
        assert_eq!(ok.chars().count(), 506);
        let exactly = format!("{ok}, abcd");
        assert_eq!(exactly.chars().count(), 512);
        sel(&exactly);
        let long = format!("{exactly}d");
        assert_err(&long, &["513", "512"]);
    }

    #[test]
    fn unknown_operator_is_an_error() {
        assert_err(
            "env dev",
            &["term 1", "unknown operator \"dev\"", "\"env\""],
        );
        assert_err("a=b, env IN (dev)", &["term 2", "unknown operator \"IN\""]);
        assert_err("envin(a)", &["unknown operator \"(\""]);
        assert_err("env~=dev", &["unknown operator \"~=\""]);
        // Only the operator-looking run written without spaces is named.
        assert_err("env! =dev", &["unknown operator \"!\""]);
    }

    #[test]
    fn kubernetes_gt_and_lt_are_refused_with_a_clear_message() {
        // Kubernetes' own parser accepts these (TestSelectorParse, TestSetSelectorParser,
        // TestToString); waverun supports no integer comparisons.
        for (s, op) in [
            ("x>1", ">"),
            ("x>1,z<5", ">"),
            ("x<7", "<"),
            ("x>2,y<8,z", ">"),
            ("version >= 3", ">="),
            ("version<3", "<"),
        ] {
            assert_err(
                s,
                &[
                    "term 1",
                    &format!("unsupported operator {op:?}"),
                    "not the Kubernetes integer comparisons \">\" and \"<\"",
                ],
            );
        }
    }

    #[test]
    fn missing_value_list_or_key_is_an_error() {
        assert_err(
            "env==(a)",
            &["expected a value (or nothing, for the empty value) after \"==\", found \"(\""],
        );
        assert_err("env in", &["missing value list after \"in\""]);
        assert_err("env in a", &["missing \"(\" after \"in\""]);
        assert_err("!", &["missing key after \"!\""]);
        assert_err("=dev", &["missing key"]);
    }

    #[test]
    fn unbalanced_parentheses_are_an_error() {
        assert_eq!(
            err("a=b, env in (a"),
            "term 2 (\"env in (a\"): missing \")\""
        );
        assert_err("env in (a, b=c", &["term 1", "missing \")\""]);
        assert_err(
            "env in (a))",
            &["unexpected \")\"", "unbalanced parentheses"],
        );
        assert_err("env), b=c", &["term 1", "unbalanced parentheses"]);
        assert_err("env in ((a))", &["nested parentheses"]);
    }

    #[test]
    fn trailing_comma_is_an_error() {
        assert_err("env=dev,", &["term 2", "trailing comma"]);
        assert_err("env=dev , ", &["trailing comma"]);
    }

    #[test]
    fn empty_term_is_an_error() {
        assert_err("a=b,,c=d", &["term 2", "empty term"]);
        assert_err(",a=b", &["term 1", "empty term"]);
        assert_err("a=b, ,c", &["term 2", "empty term"]);
    }

    #[test]
    fn bad_key_is_an_error_naming_the_term() {
        assert_err(
            "a=b, -env=dev",
            &["term 2", "invalid label key \"-env\"", "start and end"],
        );
        assert_err("Example.com/env=dev", &["invalid label key", "prefix"]);
        assert_err("a/b/c", &["at most one \"/\""]);
        assert_err("!bad key", &["unexpected \"key\""]);
        assert_err("!-x", &["invalid label key \"-x\""]);
        assert_err("env@x in (a)", &["invalid label key \"env@x\"", "'@'"]);
    }

    #[test]
    fn bad_value_is_an_error_naming_the_term() {
        assert_err("env=-dev", &["term 1", "invalid label value \"-dev\""]);
        assert_err(
            "a, env in (ok, bad_)",
            &["term 2", "invalid label value \"bad_\""],
        );
        let long = "v".repeat(64);
        assert_err(
            &format!("env!={long}"),
            &["invalid label value", "64", "63"],
        );
        assert_err("env=\"dev\"", &["invalid label value", "'\"'"]);
    }

    #[test]
    fn other_syntax_errors_name_the_problem() {
        assert_err(
            "env = dev prod",
            &["unexpected \"prod\" after the value \"dev\""],
        );
        assert_err(
            "env in (a b)",
            &["missing \",\" between the values \"a\" and \"b\""],
        );
        assert_err("env in (a) x", &["unexpected \"x\" after \")\""]);
        assert_err("env in (a=b)", &["unexpected \"=\" inside the value list"]);
        assert_err("(env)", &["missing key"]);
    }

    // --- key and value validation -------------------------------------------------

    #[test]
    fn label_keys_follow_kubernetes_rules() {
        for ok in [
            "env",
            "a",
            "A_b.c-D9",
            "example.com/env",
            "kubernetes.io/os",
            "a-b.c-d/x",
            "1.2/x",
            &"n".repeat(63),
            &format!("{}/{}", "p".repeat(253), "n".repeat(63)),
        ] {
            assert_eq!(validate_label_key(ok), Ok(()), "{ok}");
        }
        let cases: &[(&str, &str)] = &[
            ("", "must not be empty"),
            (&"n".repeat(64), "64 characters long; the limit is 63"),
            ("-a", "start and end"),
            ("a_", "start and end"),
            ("a b", "contains ' '"),
            ("a:b", "contains ':'"),
            ("é", "contains 'é'"),
            ("/a", "prefix before \"/\" must not be empty"),
            ("example.com/", "name after \"/\" must not be empty"),
            ("a/b/c", "at most one \"/\""),
            ("Example.com/a", "prefix contains 'E'"),
            ("ex_ample.com/a", "prefix contains '_'"),
            ("example..com/a", "DNS subdomain"),
            ("-example.com/a", "DNS subdomain"),
            ("example.com-/a", "DNS subdomain"),
        ];
        for (key, needle) in cases {
            let e = validate_label_key(key).expect_err(key);
            assert!(
                e.contains(needle),
                "{key:?}: {e:?} should contain {needle:?}"
            );
            assert!(e.starts_with("invalid label key"), "{e}");
        }
        let long_prefix = format!("{}/a", "p".repeat(254));
        let e = validate_label_key(&long_prefix).unwrap_err();
        assert!(e.contains("254 characters long; the limit is 253"), "{e}");
    }

    #[test]
    fn label_values_follow_kubernetes_rules() {
        for ok in ["", "a", "v1.2.3", "A-b_c.9", &"v".repeat(63)] {
            assert_eq!(validate_label_value(ok), Ok(()), "{ok}");
        }
        let cases: &[(&str, &str)] = &[
            (&"v".repeat(64), "64 characters long; the limit is 63"),
            ("-a", "start and end"),
            ("a.", "start and end"),
            ("a/b", "contains '/'"),
            ("a b", "contains ' '"),
        ];
        for (value, needle) in cases {
            let e = validate_label_value(value).expect_err(value);
            assert!(
                e.contains(needle),
                "{value:?}: {e:?} should contain {needle:?}"
            );
            assert!(e.starts_with("invalid label value"), "{e}");
        }
    }

    // --- serde -------------------------------------------------------------------

    #[test]
    fn serde_round_trips_as_the_original_string() {
        let s = sel("env in (dev, staging), !canary");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"env in (dev, staging), !canary\"");
        let back: LabelSelector = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        let in_list: Vec<LabelSelector> = serde_json::from_str(r#"["a=b", "c"]"#).unwrap();
        assert_eq!(in_list, vec![sel("a=b"), sel("c")]);
    }

    #[test]
    fn deserializing_a_bad_selector_fails_with_the_parse_message() {
        let e = serde_json::from_str::<LabelSelector>(r#""env in (a""#).unwrap_err();
        assert!(
            e.to_string()
                .contains(r#"term 1 ("env in (a"): missing ")""#),
            "{e}"
        );
        let e = serde_json::from_str::<LabelSelector>("\"\"").unwrap_err();
        assert!(e.to_string().contains("empty selector"), "{e}");
        assert!(serde_json::from_str::<LabelSelector>("3").is_err());
    }

    // --- index -------------------------------------------------------------------

    /// Deterministic pseudo-random numbers (no dependency, no clock).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn fleet(n: usize, seed: u64) -> Vec<Labels> {
        let mut rng = Lcg(seed);
        let envs = ["dev", "staging", "prod"];
        let regions = ["eu", "us", "ap", "sa"];
        let teams = ["infra", "web", "data", "ml", ""];
        (0..n)
            .map(|i| {
                let mut l = BTreeMap::new();
                if rng.below(10) > 0 {
                    l.insert("env".into(), envs[rng.below(3) as usize].into());
                }
                if rng.below(10) > 1 {
                    l.insert("region".into(), regions[rng.below(4) as usize].into());
                }
                if rng.below(2) == 0 {
                    l.insert("team".into(), teams[rng.below(5) as usize].into());
                }
                if rng.below(5) == 0 {
                    l.insert("canary".into(), "true".into());
                }
                if rng.below(3) == 0 {
                    l.insert("example.com/ring".into(), rng.below(5).to_string());
                }
                l.insert("name".into(), format!("member-{i}"));
                Labels::from(l)
            })
            .collect()
    }

    fn selectors(count: usize, seed: u64) -> Vec<LabelSelector> {
        let mut fixed: Vec<LabelSelector> = [
            "env=prod",
            "env==dev,region=eu",
            "env in (dev,staging)",
            "env notin (prod)",
            "env!=prod",
            "!canary",
            "canary",
            "!canary,!team",
            "team notin (infra, web), region != us",
            "team in (,ml)",
            "team=",
            "team!=",
            "team in ()",
            "team notin ()",
            "env=nonexistent",
            "missingkey",
            "!missingkey",
            "missingkey!=x",
            "env!=nonexistent",
            "name=member-7",
            "name in (member-1, member-2, member-300, nobody)",
            "example.com/ring in (0,1), env=prod, !canary",
            "example.com/ring, region notin (eu, us), team",
        ]
        .iter()
        .filter_map(|s| LabelSelector::parse(s).ok())
        .collect();
        assert_eq!(fixed.len(), 23, "all fixed selectors parse");
        let mut rng = Lcg(seed);
        let keys = [
            "env",
            "region",
            "team",
            "canary",
            "example.com/ring",
            "nokey",
        ];
        let values = [
            "dev", "prod", "staging", "eu", "us", "ml", "", "true", "0", "3", "zzz",
        ];
        while fixed.len() < count {
            let terms = 1 + rng.below(3);
            let mut parts = Vec::new();
            for _ in 0..terms {
                let key = keys[rng.below(keys.len() as u64) as usize];
                let v1 = values[rng.below(values.len() as u64) as usize];
                let v2 = values[rng.below(values.len() as u64) as usize];
                parts.push(match rng.below(6) {
                    0 => format!("{key}={v1}"),
                    1 => format!("{key}!={v1}"),
                    2 => format!("{key} in ({v1},{v2})"),
                    3 => format!("{key} notin ({v1}, {v2})"),
                    4 => key.to_string(),
                    _ => format!("!{key}"),
                });
            }
            fixed.push(sel(&parts.join(",")));
        }
        fixed
    }

    #[test]
    fn index_matching_agrees_with_brute_force() {
        let members = fleet(400, 7);
        let index = LabelIndex::new(&members);
        assert_eq!(index.len(), 400);
        let mut only_negative = 0;
        for s in selectors(300, 11) {
            if !s.requirements().iter().any(Requirement::is_positive) {
                only_negative += 1;
            }
            let expected: Vec<u32> = (0..members.len() as u32)
                .filter(|&m| s.matches(&members[m as usize]))
                .collect();
            assert_eq!(index.matching(&s), expected, "selector {:?}", s.as_str());
            // Every evaluation strategy agrees, whichever one `matching` picked.
            if let Some(checks) = index.compile(&s) {
                let positives: Vec<usize> = (0..checks.len())
                    .filter(|&i| checks[i].is_positive())
                    .collect();
                if positives.is_empty() {
                    assert_eq!(index.by_bitset(&checks, None), expected, "{:?}", s.as_str());
                }
                for &p in &positives {
                    assert_eq!(
                        index.by_candidates(&checks, p),
                        expected,
                        "{:?}",
                        s.as_str()
                    );
                    assert_eq!(
                        index.by_bitset(&checks, Some(p)),
                        expected,
                        "{:?}",
                        s.as_str()
                    );
                }
            } else {
                assert!(expected.is_empty(), "{:?}", s.as_str());
            }
        }
        assert!(
            only_negative >= 20,
            "only {only_negative} negative-only selectors"
        );
    }

    #[test]
    fn index_results_are_ascending_without_duplicates() {
        let members = fleet(300, 3);
        let index = LabelIndex::new(members.iter());
        for s in selectors(100, 5) {
            let got = index.matching(&s);
            assert!(got.windows(2).all(|w| w[0] < w[1]), "{:?}", s.as_str());
        }
    }

    #[test]
    fn empty_index_matches_nothing() {
        let index = LabelIndex::new(&[]);
        assert!(index.is_empty());
        assert_eq!(index.len(), 0);
        assert!(index.matching(&sel("!a")).is_empty());
        assert!(index.matching(&sel("a=b")).is_empty());
    }

    #[test]
    fn members_without_labels_match_only_negative_selectors() {
        let members = vec![Labels::new(), labels(&[("env", "dev")]), Labels::new()];
        let index = LabelIndex::new(&members);
        assert_eq!(index.matching(&sel("!env")), vec![0, 2]);
        assert_eq!(index.matching(&sel("env!=dev")), vec![0, 2]);
        assert_eq!(index.matching(&sel("env notin (x)")), vec![0, 1, 2]);
        assert_eq!(index.matching(&sel("env")), vec![1]);
    }
}
