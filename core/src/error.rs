//! Errors: every rejected input names the field (or object) and the rule it broke.
//!
//! Messages are for humans; [`ErrorCode`]s are for machines and stay stable across releases.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A stable, machine-readable error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// A field failed validation (see [`FieldError::path`]).
    InvalidField,
    /// The named object does not exist.
    NotFound,
    /// An object of that name exists already.
    AlreadyExists,
    /// The object's current state forbids the action (the message names the state).
    InvalidState,
    /// A member matches two groups of one strategy.
    MemberInTwoGroups,
    /// A member is more than one minor version behind the target.
    MinorVersionSkip,
    /// The target minor is LTS-only and the member does not have long-term support.
    LongTermSupportRequired,
    /// A member upgrade operation failed in the cluster.
    UpgradeFailed,
    /// A failure threshold was exceeded.
    FailureThresholdExceeded,
    /// The engine could not read a snapshot.
    InvalidSnapshot,
    /// A health check failed (a member's after its upgrade, or a gate's), or a person failed an
    /// inconclusive one.
    HealthCheckFailed,
    /// A member's pre-flight failed (`onPreflightFailure: Fail`, or `Wait` past its limit).
    PreflightFailed,
}

impl ErrorCode {
    /// Whether a member failing with this code fails its whole run, whatever the thresholds
    /// (a member without long-term support reached by a run to an LTS-only minor).
    pub fn fails_the_run(self) -> bool {
        self == ErrorCode::LongTermSupportRequired
    }

    /// The code as it appears in JSON and in JS errors.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidField => "InvalidField",
            ErrorCode::NotFound => "NotFound",
            ErrorCode::AlreadyExists => "AlreadyExists",
            ErrorCode::InvalidState => "InvalidState",
            ErrorCode::MemberInTwoGroups => "MemberInTwoGroups",
            ErrorCode::MinorVersionSkip => "MinorVersionSkip",
            ErrorCode::LongTermSupportRequired => "LongTermSupportRequired",
            ErrorCode::UpgradeFailed => "UpgradeFailed",
            ErrorCode::FailureThresholdExceeded => "FailureThresholdExceeded",
            ErrorCode::InvalidSnapshot => "InvalidSnapshot",
            ErrorCode::HealthCheckFailed => "HealthCheckFailed",
            ErrorCode::PreflightFailed => "PreflightFailed",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule at one field path, e.g. `stages[1].groups[0].maxConcurrency: "120%" is above 100%`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// JSON-ish path of the field, e.g. `stages[1].groups[0].maxConcurrency`.
    pub path: String,
    /// What is wrong, for humans.
    pub message: String,
}

impl FieldError {
    /// A new field error.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why the engine refused an input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    /// Stable machine-readable code.
    pub code: ErrorCode,
    /// Human-readable summary.
    pub message: String,
    /// Field errors (for [`ErrorCode::InvalidField`]); the first one is the summary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldError>,
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// An [`ErrorCode::InvalidField`] error from a non-empty list of field errors.
    pub fn invalid(fields: Vec<FieldError>) -> Self {
        let message = match fields.len() {
            0 => "invalid input".to_string(),
            1 => fields[0].to_string(),
            n => format!("{} (and {} more)", fields[0], n - 1),
        };
        Error {
            code: ErrorCode::InvalidField,
            message,
            fields,
        }
    }

    /// The field path of the first field error, if any.
    pub fn path(&self) -> Option<&str> {
        self.fields.first().map(|f| f.path.as_str())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fields.len() > 1 {
            for (i, field) in self.fields.iter().enumerate() {
                if i > 0 {
                    f.write_str("\n")?;
                }
                write!(f, "{field}")?;
            }
            Ok(())
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Error {}

/// Collects field errors under a path prefix.
#[derive(Default, Debug)]
pub struct Errors(pub Vec<FieldError>);

impl Errors {
    /// Records one error.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(path, message));
    }

    /// `Ok(())` when nothing was recorded.
    pub fn into_result(self) -> Result<(), Error> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(self.0))
        }
    }
}
