//! Health checks, as data and as pure rules: what a strategy's `healthChecks` say (the
//! [`HealthCheck`] model, waverun's addition beside Azure's fields), the conditions over a
//! Prometheus result ([`Condition`]: `result < 0.01`), what one measurement means
//! ([`Measurement`] → [`Verdict`]) and when a series of measurements is over ([`Analysis`]).
//!
//! The host *performs* a measurement (queries Prometheus, calls a URL, runs a command, asks the
//! provider) and reports what it got as an observation; everything decided from it — the
//! verdict of a query's samples, the count of failures against `failureLimit`, when the next
//! measurement is due — is decided here, so a replay of the journal decides the same without
//! measuring again, and the simulator decides the same from scripted results.
//!
//! Decisions where nothing said (spec: `docs` of `healthChecks` in the README):
//! - A Prometheus result with no sample is `Inconclusive` unless the check's `onEmpty` says
//!   `Pass` or `Fail`. A result passes when *every* sample meets `successCondition` and none
//!   meets `failureCondition`; it fails when *any* sample meets `failureCondition`, or (without
//!   a `failureCondition`) when one misses `successCondition`; with both conditions and neither
//!   met it is `Inconclusive`. A sample that is not a number (`NaN`) meets no condition.
//! - An **error** (a timeout, a 5xx, a query Prometheus refused, a command that could not run)
//!   is never a pass and never a failure of the cluster: the measurement is taken again at the
//!   next interval and does not count toward `count`; more than `consecutiveErrorLimit` errors
//!   in a row (default 4) fail the check, saying so.
//! - A check takes its first measurement at once (after the soak, for a member's checks), then
//!   one every `intervalSeconds`, until `count` measurements (not errors) were taken —
//!   `durationSeconds` instead of `count` means `durationSeconds / intervalSeconds + 1`. It fails
//!   as soon as failures exceed `failureLimit`, is inconclusive as soon as inconclusive
//!   measurements exceed `inconclusiveLimit`, and passes after the last measurement otherwise.

use crate::error::Errors;
use crate::model::{AfterMemberChecks, PreflightPolicy, UpdateStrategy};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One named, reusable health check of a strategy.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheck {
    /// Unique within the strategy; gates and `afterMemberChecks` name it.
    pub name: String,
    /// An instant PromQL query and conditions over its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusCheck>,
    /// A request to a URL: 2xx passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpCheck>,
    /// A command: exit 0 passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecCheck>,
    /// The cluster's own health as its provider reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderCheck>,
    /// Seconds between measurements (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<u64>,
    /// Measurements to take (default 1); exclusive with `durationSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Measure for this long instead of a `count` (`durationSeconds / intervalSeconds + 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u64>,
    /// Failed measurements tolerated (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_limit: Option<u32>,
    /// Inconclusive measurements tolerated (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive_limit: Option<u32>,
    /// Errors in a row tolerated before the check fails (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_error_limit: Option<u32>,
    /// Seconds one measurement may take before it is an error (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// `prometheus: {query, successCondition, failureCondition, onEmpty}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusCheck {
    /// An instant query; `{{run}}`, `{{stage}}`, `{{group}}`, `{{member}}` (and
    /// `{{members}}`, a regex alternation of a gate's members) are replaced before it is sent.
    pub query: String,
    /// Met by every sample for a pass, e.g. `result < 0.01`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    /// Met by any sample for a failure, e.g. `result >= 0.05`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
    /// The verdict of a result with no sample (default `Inconclusive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_empty: Option<Verdict>,
}

/// `http: {url, secret}`: a POST of the run, stage, group and members as JSON.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpCheck {
    /// `http://` or `https://`; the same template variables as a query.
    pub url: String,
    /// A secret reference of the daemon's config whose headers are sent (never the secret
    /// itself: strategies are shown to viewers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// `exec: {command}`: run under the exec provider's process rules.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecCheck {
    /// Program and arguments (template variables replaced in each); the program must be one the
    /// daemon's config allows.
    pub command: Vec<String>,
}

/// `provider: {}`: the member's provider says whether the cluster is healthy.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderCheck {}

/// The verdict of a measurement, or of a whole check.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Verdict {
    /// Healthy.
    Pass,
    /// Unhealthy.
    Fail,
    /// Neither: no data, or a source that says it cannot tell.
    Inconclusive,
    /// The measurement itself went wrong (timeout, 5xx, refused query): not about the cluster.
    Error,
}

/// What a host measured, as it reports it ([`crate::Observation::CheckMeasured`]).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Measurement {
    /// The samples of a Prometheus query, as Prometheus writes them (`"0.013"`, `"NaN"`);
    /// empty: the query returned nothing. The check's conditions decide the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<Sample>>,
    /// The verdict, for sources that give one (HTTP, exec, provider), and for an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// What the source said (a body's reason, a command's last line, an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One sample of a query result.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sample {
    /// The series' labels, `name="value"` joined by commas (empty for a scalar).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub labels: String,
    /// The value as Prometheus wrote it.
    pub value: String,
}

/// What a measurement meant: its verdict, the value that decided it, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    /// The verdict.
    pub verdict: Verdict,
    /// The sample that decided it (the first that failed, else the first).
    pub value: Option<String>,
    /// Why, in words.
    pub message: Option<String>,
}

impl HealthCheck {
    /// The interval between measurements, in seconds.
    pub fn interval(&self) -> u64 {
        self.interval_seconds.unwrap_or(60)
    }

    /// How many measurements make a pass.
    pub fn measurements(&self) -> u32 {
        match (self.count, self.duration_seconds) {
            (Some(c), _) => c.max(1),
            (None, Some(d)) => u32::try_from(d / self.interval().max(1) + 1).unwrap_or(u32::MAX),
            (None, None) => 1,
        }
    }

    /// Seconds one measurement may take.
    pub fn timeout(&self) -> u64 {
        self.timeout_seconds.unwrap_or(30)
    }

    /// The source's name: `prometheus`, `http`, `exec` or `provider`.
    pub fn source(&self) -> &'static str {
        if self.prometheus.is_some() {
            "prometheus"
        } else if self.http.is_some() {
            "http"
        } else if self.exec.is_some() {
            "exec"
        } else {
            "provider"
        }
    }

    /// The source, in a few words (`prometheus: <query>`), as events and the tree show it.
    pub fn describe(&self) -> String {
        if let Some(p) = &self.prometheus {
            format!("prometheus: {}", p.query)
        } else if let Some(h) = &self.http {
            format!("http: {}", h.url)
        } else if let Some(e) = &self.exec {
            format!("exec: {}", e.command.join(" "))
        } else {
            "provider".to_string()
        }
    }

    /// What one measurement means under this check.
    pub fn judge(&self, m: &Measurement) -> Judged {
        if let Some(values) = &m.values {
            if m.verdict != Some(Verdict::Error) {
                if let Some(p) = &self.prometheus {
                    return p.judge(values);
                }
            }
        }
        let verdict = m.verdict.unwrap_or(Verdict::Error);
        let message = match (&m.message, m.verdict) {
            (Some(msg), _) => Some(msg.clone()),
            (None, None) => Some("the measurement reported no verdict".to_string()),
            (None, Some(_)) => None,
        };
        Judged {
            verdict,
            value: None,
            message,
        }
    }
}

impl PrometheusCheck {
    /// The verdict of a query's samples (see the module docs).
    pub fn judge(&self, values: &[Sample]) -> Judged {
        let parse = |c: &Option<String>| c.as_deref().map(Condition::parse).transpose();
        let (Ok(success), Ok(failure)) = (
            parse(&self.success_condition),
            parse(&self.failure_condition),
        ) else {
            // Validated when the strategy was stored; a restored one is read the same way.
            return Judged {
                verdict: Verdict::Error,
                value: None,
                message: Some("the check's condition does not parse".to_string()),
            };
        };
        let Some(first) = values.first() else {
            let verdict = self.on_empty.unwrap_or(Verdict::Inconclusive);
            return Judged {
                verdict,
                value: None,
                message: Some("the query returned no sample".to_string()),
            };
        };
        let series = |s: &Sample| {
            if s.labels.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.labels)
            }
        };
        let n = values.len();
        let of = if n == 1 {
            String::new()
        } else {
            format!(" ({n} samples)")
        };
        if let Some(f) = &failure {
            if let Some(bad) = values.iter().find(|s| f.holds(&s.value)) {
                return Judged {
                    verdict: Verdict::Fail,
                    value: Some(bad.value.clone()),
                    message: Some(format!("{}{} meets {f}{of}", bad.value, series(bad))),
                };
            }
        }
        if let Some(c) = &success {
            if let Some(miss) = values.iter().find(|s| !c.holds(&s.value)) {
                let verdict = if failure.is_some() {
                    Verdict::Inconclusive
                } else {
                    Verdict::Fail
                };
                return Judged {
                    verdict,
                    value: Some(miss.value.clone()),
                    message: Some(format!(
                        "{}{} does not meet {c}{of}",
                        miss.value,
                        series(miss)
                    )),
                };
            }
        }
        let how = match (&success, &failure) {
            (Some(c), _) => format!("meets {c}"),
            (None, Some(f)) => format!("does not meet {f}"),
            (None, None) => "is a result".to_string(),
        };
        Judged {
            verdict: Verdict::Pass,
            value: Some(first.value.clone()),
            message: Some(format!("{}{} {how}{of}", first.value, series(first))),
        }
    }
}

/// A condition over a query's result: comparisons of `result` with a number, joined by `&&`
/// and `||`, with parentheses (`result >= 0.95 && result <= 1`).
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    /// `result <op> number`.
    Compare(Op, f64),
    /// Both hold.
    And(Box<Condition>, Box<Condition>),
    /// Either holds.
    Or(Box<Condition>, Box<Condition>),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Compare(op, n) => write!(f, "result {} {n}", op.as_str()),
            Condition::And(a, b) => write!(f, "({a} && {b})"),
            Condition::Or(a, b) => write!(f, "({a} || {b})"),
        }
    }
}

impl Condition {
    /// Reads a condition; the error says what was expected where.
    pub fn parse(text: &str) -> Result<Condition, String> {
        let tokens = tokenize(text)?;
        let mut p = Parser { tokens, at: 0 };
        let c = p.or()?;
        match p.tokens.get(p.at) {
            None => Ok(c),
            Some(t) => Err(format!(
                "{text:?}: unexpected {} after a complete condition",
                t.show()
            )),
        }
    }

    /// Whether a sample (as Prometheus writes it: `"0.5"`, `"NaN"`, `"+Inf"`) meets it; a value
    /// that is not a number meets nothing.
    pub fn holds(&self, value: &str) -> bool {
        let Some(v) = sample_value(value) else {
            return false;
        };
        self.holds_f64(v)
    }

    fn holds_f64(&self, v: f64) -> bool {
        match self {
            Condition::Compare(op, n) => match op {
                Op::Lt => v < *n,
                Op::Le => v <= *n,
                Op::Gt => v > *n,
                Op::Ge => v >= *n,
                Op::Eq => v == *n,
                Op::Ne => v != *n && !v.is_nan(),
            },
            Condition::And(a, b) => a.holds_f64(v) && b.holds_f64(v),
            Condition::Or(a, b) => a.holds_f64(v) || b.holds_f64(v),
        }
    }
}

/// A sample's value as a number (`+Inf`, `-Inf` included); `None` for `NaN` or a non-number.
fn sample_value(s: &str) -> Option<f64> {
    let v = match s {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.trim().parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Result,
    Number(f64),
    Op(Op),
    And,
    Or,
    Open,
    Close,
}

impl Token {
    fn show(&self) -> String {
        match self {
            Token::Result => "`result`".to_string(),
            Token::Number(n) => format!("the number {n}"),
            Token::Op(op) => format!("`{}`", op.as_str()),
            Token::And => "`&&`".to_string(),
            Token::Or => "`||`".to_string(),
            Token::Open => "`(`".to_string(),
            Token::Close => "`)`".to_string(),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let two = b.get(i..i + 2);
        let (tok, len) = match c {
            b' ' | b'\t' => {
                i += 1;
                continue;
            }
            b'(' => (Token::Open, 1),
            b')' => (Token::Close, 1),
            b'<' | b'>' | b'=' | b'!' | b'&' | b'|' => match two {
                Some(b"<=") => (Token::Op(Op::Le), 2),
                Some(b">=") => (Token::Op(Op::Ge), 2),
                Some(b"==") => (Token::Op(Op::Eq), 2),
                Some(b"!=") => (Token::Op(Op::Ne), 2),
                Some(b"&&") => (Token::And, 2),
                Some(b"||") => (Token::Or, 2),
                _ if c == b'<' => (Token::Op(Op::Lt), 1),
                _ if c == b'>' => (Token::Op(Op::Gt), 1),
                _ => {
                    return Err(format!(
                        "{text:?}: `{}` at column {} is not an operator (use <, <=, >, >=, ==, !=, &&, ||)",
                        c as char,
                        i + 1
                    ))
                }
            },
            b'0'..=b'9' | b'.' | b'-' | b'+' => {
                let start = i;
                let mut j = i + 1;
                while j < b.len()
                    && (b[j].is_ascii_digit()
                        || b[j] == b'.'
                        || b[j] == b'e'
                        || b[j] == b'E'
                        || ((b[j] == b'-' || b[j] == b'+') && matches!(b[j - 1], b'e' | b'E')))
                {
                    j += 1;
                }
                let s = &text[start..j];
                let n: f64 = s
                    .parse()
                    .map_err(|_| format!("{text:?}: {s:?} at column {} is not a number", start + 1))?;
                if !n.is_finite() {
                    return Err(format!("{text:?}: {s:?} is not a finite number"));
                }
                (Token::Number(n), j - start)
            }
            _ if text[i..].starts_with("result")
                && !text[i + 6..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                (Token::Result, 6)
            }
            _ => {
                let word: String = text[i..]
                    .chars()
                    .take_while(|c| !c.is_whitespace() && !"()<>=!&|".contains(*c))
                    .collect();
                let word = if word.is_empty() {
                    text[i..].chars().next().map(String::from).unwrap_or_default()
                } else {
                    word
                };
                return Err(format!(
                    "{text:?}: {word:?} at column {} is not `result`, a number or an operator",
                    i + 1
                ));
            }
        };
        out.push(tok);
        i += len;
    }
    if out.is_empty() {
        return Err("a condition is empty (write e.g. `result < 0.01`)".to_string());
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn or(&mut self) -> Result<Condition, String> {
        let mut left = self.and()?;
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            let right = self.and()?;
            left = Condition::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Condition, String> {
        let mut left = self.atom()?;
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            let right = self.atom()?;
            left = Condition::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn atom(&mut self) -> Result<Condition, String> {
        let got = |t: Option<&Token>| t.map(Token::show).unwrap_or("the end".to_string());
        match self.peek().cloned() {
            Some(Token::Open) => {
                self.at += 1;
                let c = self.or()?;
                if self.peek() != Some(&Token::Close) {
                    return Err(format!("expected `)`, found {}", got(self.peek())));
                }
                self.at += 1;
                Ok(c)
            }
            Some(Token::Result) => {
                self.at += 1;
                let Some(Token::Op(op)) = self.peek().cloned() else {
                    return Err(format!(
                        "expected a comparison after `result`, found {}",
                        got(self.peek())
                    ));
                };
                self.at += 1;
                let Some(Token::Number(n)) = self.peek().cloned() else {
                    return Err(format!(
                        "expected a number after `result {}`, found {}",
                        op.as_str(),
                        got(self.peek())
                    ));
                };
                self.at += 1;
                Ok(Condition::Compare(op, n))
            }
            other => Err(format!(
                "expected `result` or `(`, found {}",
                got(other.as_ref())
            )),
        }
    }
}

/// Where a series of measurements stands after one more (see the module docs for the rules).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Analysis {
    /// Measurements taken that were not errors.
    pub taken: u32,
    /// Of those, failed.
    pub failed: u32,
    /// Of those, inconclusive.
    pub inconclusive: u32,
    /// Errors in a row so far.
    pub consecutive_errors: u32,
}

/// What comes after a measurement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Measure again after the check's interval.
    Again,
    /// The check is over with this verdict (never `Error`), and why.
    Done(Verdict, String),
}

impl Analysis {
    /// Counts one measurement's verdict under `check`'s limits and says what comes next.
    pub fn record(&mut self, check: &HealthCheck, verdict: Verdict) -> Next {
        if verdict == Verdict::Error {
            self.consecutive_errors += 1;
            let limit = check.consecutive_error_limit.unwrap_or(4);
            if self.consecutive_errors > limit {
                let n = self.consecutive_errors;
                return Next::Done(
                    Verdict::Fail,
                    format!(
                        "{n} measurements in a row were errors (consecutiveErrorLimit {limit})"
                    ),
                );
            }
            return Next::Again;
        }
        self.consecutive_errors = 0;
        self.taken += 1;
        match verdict {
            Verdict::Fail => self.failed += 1,
            Verdict::Inconclusive => self.inconclusive += 1,
            Verdict::Pass | Verdict::Error => {}
        }
        let failure_limit = check.failure_limit.unwrap_or(0);
        if self.failed > failure_limit {
            let n = self.failed;
            return Next::Done(
                Verdict::Fail,
                format!("{n} failed measurements exceed failureLimit {failure_limit}"),
            );
        }
        let inconclusive_limit = check.inconclusive_limit.unwrap_or(0);
        if self.inconclusive > inconclusive_limit {
            let n = self.inconclusive;
            return Next::Done(
                Verdict::Inconclusive,
                format!(
                    "{n} inconclusive measurements exceed inconclusiveLimit {inconclusive_limit}"
                ),
            );
        }
        let want = check.measurements();
        if self.taken >= want {
            return Next::Done(
                Verdict::Pass,
                format!(
                    "{} of {want} measurements passed",
                    self.taken - self.failed - self.inconclusive
                ),
            );
        }
        Next::Again
    }
}

/// Seconds between attempts of a `Wait` pre-flight, unless the strategy says.
pub const DEFAULT_PREFLIGHT_RETRY_SECONDS: u64 = 300;
/// How long a `Wait` pre-flight may keep a member waiting, unless the strategy says.
pub const DEFAULT_PREFLIGHT_MAX_WAIT_SECONDS: u64 = 86_400;

/// A stage's or group's pre-flight, when it has one: the policy and the checks.
pub struct PreflightPlan {
    /// What a failure does.
    pub policy: PreflightPolicy,
    /// Configured checks, beside the provider's own.
    pub checks: Vec<String>,
    /// Under `Wait`: seconds between attempts.
    pub retry_seconds: u64,
    /// Under `Wait`: how long a member may wait.
    pub max_wait_seconds: u64,
}

/// The `afterMemberChecks` that apply to group `gi` of stage `si` (the group's own, else the
/// stage's).
pub fn after_member_checks(s: &UpdateStrategy, si: usize, gi: usize) -> Option<&AfterMemberChecks> {
    let stage = s.stages.get(si)?;
    stage
        .groups
        .get(gi)
        .and_then(|g| g.after_member_checks.as_ref())
        .or(stage.after_member_checks.as_ref())
}

/// The pre-flight that applies to group `gi` of stage `si`, if pre-flight is on there (the
/// group's settings win over the stage's, field by field).
pub fn preflight_plan(s: &UpdateStrategy, si: usize, gi: usize) -> Option<PreflightPlan> {
    let stage = s.stages.get(si)?;
    let group = stage.groups.get(gi);
    let policy = group
        .and_then(|g| g.on_preflight_failure)
        .or(stage.on_preflight_failure);
    let pre = group
        .and_then(|g| g.preflight.as_ref())
        .or(stage.preflight.as_ref());
    if policy.is_none() && pre.is_none() {
        return None;
    }
    Some(PreflightPlan {
        policy: policy.unwrap_or_default(),
        checks: pre.map(|p| p.checks.clone()).unwrap_or_default(),
        retry_seconds: pre
            .and_then(|p| p.retry_interval_seconds)
            .unwrap_or(DEFAULT_PREFLIGHT_RETRY_SECONDS),
        max_wait_seconds: pre
            .and_then(|p| p.max_wait_seconds)
            .unwrap_or(DEFAULT_PREFLIGHT_MAX_WAIT_SECONDS),
    })
}

/// Validates a strategy's checks (names, one source each, conditions, limits); `path` is the
/// list's (`strategy.healthChecks`).
pub fn validate_checks(checks: &[HealthCheck], path: &str, errors: &mut Errors) {
    for (i, c) in checks.iter().enumerate() {
        let at = format!("{path}[{i}]");
        crate::validate::check_name(&format!("{at}.name"), &c.name, errors);
        if let Some(j) = checks[..i].iter().position(|o| o.name == c.name) {
            errors.push(
                format!("{at}.name"),
                format!("\"{}\" is already the name of {path}[{j}]", c.name),
            );
        }
        let sources = [
            c.prometheus.is_some(),
            c.http.is_some(),
            c.exec.is_some(),
            c.provider.is_some(),
        ];
        match sources.iter().filter(|s| **s).count() {
            1 => {}
            0 => errors.push(
                at.clone(),
                "a check needs one source: prometheus, http, exec or provider",
            ),
            _ => errors.push(
                at.clone(),
                "a check has exactly one source: prometheus, http, exec or provider",
            ),
        }
        if let Some(p) = &c.prometheus {
            if p.query.trim().is_empty() {
                errors.push(format!("{at}.prometheus.query"), "is empty");
            }
            if p.success_condition.is_none() && p.failure_condition.is_none() {
                errors.push(
                    format!("{at}.prometheus"),
                    "needs successCondition or failureCondition (e.g. `result < 0.01`)",
                );
            }
            for (field, cond) in [
                ("successCondition", &p.success_condition),
                ("failureCondition", &p.failure_condition),
            ] {
                if let Some(text) = cond {
                    if let Err(e) = Condition::parse(text) {
                        errors.push(format!("{at}.prometheus.{field}"), e);
                    }
                }
            }
            if p.on_empty == Some(Verdict::Error) {
                errors.push(
                    format!("{at}.prometheus.onEmpty"),
                    "\"Error\" is not allowed (Pass, Fail or Inconclusive)",
                );
            }
        }
        if let Some(h) = &c.http {
            if !(h.url.starts_with("http://") || h.url.starts_with("https://")) {
                errors.push(
                    format!("{at}.http.url"),
                    format!("{:?} is not an http:// or https:// URL", h.url),
                );
            }
        }
        if let Some(e) = &c.exec {
            if e.command.first().is_none_or(|p| p.trim().is_empty()) {
                errors.push(
                    format!("{at}.exec.command"),
                    "needs a program (the first item)",
                );
            }
        }
        let mut bound = |field: &str, v: Option<u64>, lo: u64, hi: u64| {
            if let Some(v) = v {
                if v < lo || v > hi {
                    errors.push(
                        format!("{at}.{field}"),
                        format!("{v} is outside {lo}..={hi}"),
                    );
                }
            }
        };
        bound("intervalSeconds", c.interval_seconds, 1, 86_400);
        bound("durationSeconds", c.duration_seconds, 0, 7 * 86_400);
        bound("timeoutSeconds", c.timeout_seconds, 1, 3_600);
        bound("count", c.count.map(u64::from), 1, 1_000);
        bound("failureLimit", c.failure_limit.map(u64::from), 0, 1_000);
        bound(
            "inconclusiveLimit",
            c.inconclusive_limit.map(u64::from),
            0,
            1_000,
        );
        bound(
            "consecutiveErrorLimit",
            c.consecutive_error_limit.map(u64::from),
            0,
            1_000,
        );
        if c.count.is_some() && c.duration_seconds.is_some() {
            errors.push(format!("{at}.durationSeconds"), "is exclusive with count");
        }
        if c.measurements() > 1_000 {
            errors.push(
                format!("{at}.durationSeconds"),
                "makes more than 1000 measurements at this interval",
            );
        }
    }
}

#[cfg(test)]
mod tests;
