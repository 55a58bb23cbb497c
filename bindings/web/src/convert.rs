//! What crosses the JS boundary, without JS: values arrive as JSON text (the caller's
//! `JSON.stringify`) and are read with their field path tracked; refusals become a [`Failure`]
//! (code, message, field errors) that `lib.rs` turns into a JS `Error`. Pure Rust, so the
//! behaviour is tested natively.

use serde::de::DeserializeOwned;
use waverun_core::profile::ScenarioPlan;
use waverun_core::sim::{Scenario, Simulation};
use waverun_core::{Error, FieldError, Timestamp};

/// The code of a value that does not have the expected shape (the core's codes cover the rest).
pub const INVALID_INPUT: &str = "InvalidInput";

/// Why a call was refused: the core's [`Error`], or a JS value that is not the expected type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// A core [`waverun_core::ErrorCode`] string, or [`INVALID_INPUT`].
    pub code: &'static str,
    /// For humans: every field error, one per line, as the CLI prints them.
    pub message: String,
    /// Field errors; the first one's path is the error's `path`.
    pub fields: Vec<FieldError>,
}

impl Failure {
    /// A value that could not be read; `path` is empty at the root.
    pub fn input(path: &str, message: impl Into<String>) -> Failure {
        let message = message.into();
        if path.is_empty() {
            return Failure {
                code: INVALID_INPUT,
                message,
                fields: Vec::new(),
            };
        }
        let field = FieldError::new(path, message);
        Failure {
            code: INVALID_INPUT,
            message: field.to_string(),
            fields: vec![field],
        }
    }

    /// The field path of the first field error, when there is one.
    pub fn path(&self) -> Option<&str> {
        self.fields
            .first()
            .map(|f| f.path.as_str())
            .filter(|p| !p.is_empty())
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure {
            code: e.code.as_str(),
            message: e.to_string(),
            fields: e.fields,
        }
    }
}

/// Reads JSON text as `T`; an error names the field (`members[0].nodePools[1].osType`).
///
/// The text is one line (the caller's `JSON.stringify`), so serde_json's error column is the
/// byte offset where reading stopped, and the path is where that offset lies in the text. (A
/// path-tracking deserializer would instantiate every core type's `Deserialize` a second time,
/// adding about 8% to the gzipped module.)
pub fn parse_json<T: DeserializeOwned>(text: &str) -> Result<T, Failure> {
    serde_json::from_str(text).map_err(|e| {
        let path = if e.line() == 1 {
            path_at(text, e.column())
        } else {
            String::new()
        };
        Failure::input(&path, without_position(&e))
    })
}

/// serde_json's message without " at line 1 column 73": the text is ours, not the caller's.
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    if e.line() == 0 {
        return message;
    }
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    message
        .strip_suffix(&suffix)
        .map(str::to_string)
        .unwrap_or(message)
}

enum Frame {
    /// In an object: the key whose value is being read (none before the first key or after a
    /// comma).
    Object { key: Option<String>, want_key: bool },
    /// In an array: the element being read, once it has begun.
    Array { index: usize, started: bool },
}

/// The field path (`a.b[2].c`) of the value being read at byte `offset` of valid JSON `text`:
/// the keys and indices of the containers open there. A container already closed is the value
/// being read in its parent (serde reports a missing field after the object's `}`).
fn path_at(text: &str, offset: usize) -> String {
    let bytes = &text.as_bytes()[..offset.min(text.len())];
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(Frame::Array { started, .. }) = stack.last_mut() {
            if !matches!(c, b']' | b',' | b' ' | b'\t' | b'\n' | b'\r') {
                *started = true;
            }
        }
        match c {
            b'{' => stack.push(Frame::Object {
                key: None,
                want_key: true,
            }),
            b'[' => stack.push(Frame::Array {
                index: 0,
                started: false,
            }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { key, want_key }) => (*key, *want_key) = (None, true),
                Some(Frame::Array { index, started }) => (*index, *started) = (*index + 1, false),
                None => {}
            },
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(Frame::Object { key, want_key }) = stack.last_mut() {
                    if *want_key && i < bytes.len() {
                        let raw = &text[start..=i];
                        *key = serde_json::from_str(raw).ok();
                        *want_key = false;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object { key: Some(k), .. } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Frame::Array {
                index,
                started: true,
            } => path.push_str(&format!("[{index}]")),
            _ => break,
        }
    }
    path
}

/// Reads a timestamp argument (RFC 3339, e.g. `2026-12-07T08:00:00Z`) the way the scenario
/// format reads one.
pub fn parse_time(name: &str, text: &str) -> Result<Timestamp, Failure> {
    text.parse::<Timestamp>().map_err(|e| {
        Failure::input(
            name,
            format!("\"{text}\" is not an RFC 3339 timestamp (e.g. 2026-12-07T08:00:00Z): {e}"),
        )
    })
}

/// What `waverun validate` checks of a scenario: its own rules, then what only the engine sees
/// with the whole fleet loaded (a member in two groups).
pub fn validate_scenario(s: &Scenario) -> Result<(), Error> {
    let sim = Simulation::new(s)?;
    match s.run_name() {
        Some(run) => sim.engine().plan(run).map(|_| ()),
        None => Ok(()),
    }
}

/// The plan of the scenario at its start, as `waverun plan -o json` prints it: its run's plan
/// and what each profile would generate now.
pub fn plan_scenario(s: &Scenario) -> Result<ScenarioPlan, Error> {
    waverun_core::sim::plan_scenario(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use waverun_core::UpdateStrategy;

    #[test]
    fn wrong_type_names_the_field_path() {
        let f = parse_json::<UpdateStrategy>(
            r#"{"stages":[{"name":"a","groups":[{"name":"g","beforeGates":[{"type":"Later"}]}]}]}"#,
        )
        .unwrap_err();
        assert_eq!(f.code, "InvalidInput");
        assert_eq!(f.path(), Some("stages[0].groups[0].beforeGates[0].type"));
        assert!(!f.message.contains("line 1"), "{}", f.message);
        assert!(f
            .message
            .starts_with("stages[0].groups[0].beforeGates[0].type: unknown variant `Later`"));
    }

    #[test]
    fn missing_field_names_the_containing_object() {
        let f = parse_json::<Scenario>(
            r#"{"start":"2026-12-07T00:00:00Z","members":[{"name":"a","kubernetesVersion":"1.30.4"}],"run":{"name":"r","managedClusterUpdate":{"upgrade":{"type":"Full","kubernetesVersion":"1.31.2"}}}}"#,
        )
        .unwrap_err();
        assert_eq!(f.path(), Some("members[0]"));
        assert_eq!(f.message, "members[0]: missing field `region`");
    }

    #[test]
    fn unknown_field_and_wrong_element_are_named() {
        let scenario = |member: &str| {
            format!(
                r#"{{"start":"2026-12-07T00:00:00Z","members":[{{"name":"a","region":"x","kubernetesVersion":"1.30.4"}},{member}],"run":{{"name":"r","managedClusterUpdate":{{"upgrade":{{"type":"Full","kubernetesVersion":"1.31.2"}}}}}}}}"#
            )
        };
        let f = parse_json::<Scenario>(&scenario(
            r#"{"name":"b","region":"x","kubernetesVersion":"1.30.4","colour":"red"}"#,
        ))
        .unwrap_err();
        assert_eq!(f.path(), Some("members[1].colour"), "{}", f.message);
        let f = parse_json::<Scenario>(&scenario(
            r#"{"name":"b","region":"x","kubernetesVersion":"1.30.4","nodePools":[{"name":"p","osType":"Linux","imageVersion":"i-1"},{"name":"q","osType":"Linux","imageVersion":7}]}"#,
        ))
        .unwrap_err();
        assert_eq!(
            f.path(),
            Some("members[1].nodePools[1].imageVersion"),
            "{}",
            f.message
        );
        let f = parse_json::<Scenario>(&scenario(
            r#"{"name":"b\"]}{","region":"x","kubernetesVersion":"1.30.4","labels":{"a,b":"c"},"behavior":{"upgradeMinutes":-1}}"#,
        ))
        .unwrap_err();
        assert_eq!(
            f.path(),
            Some("members[1].behavior.upgradeMinutes"),
            "{}",
            f.message
        );
    }

    #[test]
    fn wrong_root_has_no_path() {
        let f = parse_json::<UpdateStrategy>(r#""stages""#).unwrap_err();
        assert_eq!(f.path(), None);
        assert!(f.fields.is_empty());
        assert_eq!(f.code, INVALID_INPUT);
    }

    #[test]
    fn core_error_keeps_code_fields_and_every_message() {
        let s: UpdateStrategy = parse_json(
            r#"{"stages":[{"name":"A","groups":[{"name":"g","maxConcurrency":"120%"}]}]}"#,
        )
        .unwrap();
        let f = Failure::from(waverun_core::validate::strategy(&s).unwrap_err());
        assert_eq!(f.code, "InvalidField");
        assert_eq!(f.path(), Some("stages[0].name"));
        assert_eq!(f.fields.len(), 2);
        assert_eq!(f.message.lines().count(), 2, "{}", f.message);
    }

    #[test]
    fn timestamps_read_like_the_scenario_format() {
        let t = parse_time("now", "2026-12-07T09:00:00+01:00").unwrap();
        assert_eq!(waverun_core::fmt_time(t), "2026-12-07T08:00:00Z");
        let f = parse_time("now", "yesterday").unwrap_err();
        assert_eq!((f.code, f.path()), (INVALID_INPUT, Some("now")));
    }
}
