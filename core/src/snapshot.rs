//! The snapshot envelope: `{"formatVersion": 1, "engine": <engine state>}`.
//!
//! The engine state inside is private and may change shape between releases; the version says
//! which shape it has, so that a build refuses (with [`ErrorCode::InvalidSnapshot`], naming both
//! versions) a snapshot it cannot read instead of misreading it. Bump [`FORMAT_VERSION`]
//! whenever the engine state's serialised form changes incompatibly.

use crate::error::{Error, ErrorCode};
use serde::de::{self, DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

/// The snapshot format this build writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<'a, T> {
    format_version: u32,
    engine: &'a T,
}

/// `state` in the envelope, as JSON.
pub(crate) fn write<T: Serialize>(state: &T) -> String {
    serde_json::to_string(&Envelope {
        format_version: FORMAT_VERSION,
        engine: state,
    })
    .expect("engine state serialises")
}

/// [`write`], appended to `out`: a caller that knows about how long the state is (the last
/// one written) gives a buffer of that capacity, and the state is written once, into it —
/// never grown by doubling (at 100,000 members the state is about 77 MB: doubling up to it
/// holds 64 MB and 128 MB at once, which a Wasm guest's memory limit feels).
pub(crate) fn write_into<T: Serialize>(state: &T, out: &mut String) {
    let mut bytes = std::mem::take(out).into_bytes();
    serde_json::to_writer(
        &mut bytes,
        &Envelope {
            format_version: FORMAT_VERSION,
            engine: state,
        },
    )
    .expect("engine state serialises");
    *out = String::from_utf8(bytes).expect("serde_json writes UTF-8");
}

/// The engine state of a snapshot of this build's format.
pub(crate) fn read<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let invalid = |m: String| Error::new(ErrorCode::InvalidSnapshot, m);
    match serde_json::from_str::<Read<T>>(text) {
        Ok(Read::State(state)) => Ok(state),
        // Read again, the version known: the same deserialiser as the first pass (reading the
        // state from a `serde_json::Value` instead would compile a second copy of its reader).
        Ok(Read::StateBeforeVersion) => serde_json::from_str::<Second<T>>(text)
            .map(|s| s.engine)
            .map_err(|e| invalid(format!("snapshot: {e}"))),
        Ok(Read::Unsupported(Some(found))) => Err(invalid(format!(
            "snapshot: formatVersion {found} is not supported (this build reads formatVersion \
             {FORMAT_VERSION})"
        ))),
        Ok(Read::Unsupported(None)) => Err(invalid(format!(
            "snapshot: no formatVersion found (this build reads formatVersion {FORMAT_VERSION})"
        ))),
        Err(e) => Err(invalid(format!("snapshot: {e}"))),
    }
}

/// What a snapshot holds: the state, or a version this build does not read (`None`: none).
enum Read<T> {
    State(T),
    /// A supported version after the state, which was skipped.
    StateBeforeVersion,
    Unsupported(Option<Value>),
}

/// The second pass of a snapshot whose state came before its version.
#[derive(Deserialize)]
struct Second<T> {
    engine: T,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Read<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ReadVisitor(PhantomData))
    }
}

struct ReadVisitor<T>(PhantomData<T>);

const FIELDS: &[&str] = &["formatVersion", "engine"];

impl<'de, T: DeserializeOwned> Visitor<'de> for ReadVisitor<T> {
    type Value = Read<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a snapshot object {\"formatVersion\", \"engine\"}")
    }

    /// One pass: the version is checked as soon as it is read (this build writes it first), so
    /// the state is read only under a supported version; a state met before the version is
    /// skipped (and read in a second pass). Other keys before the version are ignored (a
    /// snapshot without a version is refused for that, whatever else it holds).
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read<T>, A::Error> {
        let mut version = false;
        let mut state: Option<T> = None;
        let mut early = false;
        let mut unknown: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "formatVersion" => {
                    if version {
                        return Err(de::Error::duplicate_field("formatVersion"));
                    }
                    let found: Value = map.next_value()?;
                    if found.as_u64() != Some(u64::from(FORMAT_VERSION)) {
                        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                        return Ok(Read::Unsupported(Some(found)));
                    }
                    version = true;
                    if let Some(k) = unknown.take() {
                        return Err(de::Error::unknown_field(&k, FIELDS));
                    }
                }
                "engine" => {
                    if state.is_some() || early {
                        return Err(de::Error::duplicate_field("engine"));
                    }
                    if version {
                        state = Some(map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                        early = true;
                    }
                }
                _ if version => return Err(de::Error::unknown_field(&key, FIELDS)),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    unknown.get_or_insert(key);
                }
            }
        }
        if !version {
            return Ok(Read::Unsupported(None));
        }
        match (state, early) {
            (Some(s), _) => Ok(Read::State(s)),
            (None, true) => Ok(Read::StateBeforeVersion),
            (None, false) => Err(de::Error::missing_field("engine")),
        }
    }
}
