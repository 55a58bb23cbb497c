//! The template variables of a check's query, URL and command: `{{run}}`, `{{stage}}`,
//! `{{group}}`, `{{member}}` (the first member: the only one of a member's check) and
//! `{{members}}` (every member's name, each regex-escaped, joined by `|`: for PromQL's `=~`).
//!
//! What it owns: where each value goes and how it is escaped there ([`Target`]): inside a
//! PromQL double-quoted string (backslash and double quote escaped), in a URL (percent-encoded)
//! or as a command's argument (as it is: no shell ever reads it). An unknown variable, or one
//! without a value in this measurement (`{{group}}` of a stage's gate), is an error naming it;
//! a `{{` without its `}}` is text.

use waverun_core::CheckRequest;

/// Where a rendered text goes, which decides how values are escaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A PromQL query: values are escaped for a double-quoted string literal.
    PromQl,
    /// A URL: values are percent-encoded (every byte but `A-Z a-z 0-9 - . _ ~`).
    Url,
    /// One argument of a command: values as they are.
    Argument,
}

/// The variables a template may name.
pub const VARIABLES: [&str; 5] = ["run", "stage", "group", "member", "members"];

/// `text` with every `{{variable}}` replaced by its value for `req`, escaped for `target`.
/// The error names the variable (and why it has no value).
pub fn render(text: &str, req: &CheckRequest, target: Target) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = rest[open + 2..open + 2 + close].trim();
        let value = value_of(name, req)?;
        out.push_str(&escape(&value, target));
        rest = &rest[open + 2 + close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A variable's value for `req`, unescaped.
fn value_of(name: &str, req: &CheckRequest) -> Result<String, String> {
    match name {
        "run" => Ok(req.run.clone()),
        "stage" => Ok(req.stage.clone()),
        "group" => req.group.clone().ok_or_else(|| {
            "{{group}} has no value: this measurement is for a stage's gate, which has no group"
                .to_string()
        }),
        "member" => {
            req.members.first().map(|m| m.name.clone()).ok_or_else(|| {
                "{{member}} has no value: this measurement has no member".to_string()
            })
        }
        "members" => {
            if req.members.is_empty() {
                return Err("{{members}} has no value: this measurement has no member".to_string());
            }
            Ok(req
                .members
                .iter()
                .map(|m| regex_escape(&m.name))
                .collect::<Vec<_>>()
                .join("|"))
        }
        other => Err(format!(
            "{{{{{other}}}}} is not a template variable (known: {})",
            VARIABLES.map(|v| format!("{{{{{v}}}}}")).join(", ")
        )),
    }
}

fn escape(value: &str, target: Target) -> String {
    match target {
        Target::PromQl => promql_string(value),
        Target::Url => percent_encode(value),
        Target::Argument => value.to_string(),
    }
}

/// `value` escaped for the inside of a PromQL double-quoted string.
pub fn promql_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out
}

/// `value` with every regular-expression metacharacter of RE2 (Prometheus's regex syntax)
/// escaped, as Go's `regexp.QuoteMeta` does.
pub fn regex_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `value` percent-encoded for any part of a URL: every byte but the unreserved ones.
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use waverun_core::health::{HealthCheck, ProviderCheck};
    use waverun_core::{CheckPurpose, CheckTarget};

    fn request(members: &[&str], group: Option<&str>) -> CheckRequest {
        CheckRequest {
            measurement_id: "r1/g/c#1".to_string(),
            run: "r1".to_string(),
            stage: "canary".to_string(),
            group: group.map(str::to_string),
            gate_id: None,
            purpose: CheckPurpose::Gate,
            members: members
                .iter()
                .map(|n| CheckTarget {
                    name: n.to_string(),
                    region: "westeurope".to_string(),
                    provider: None,
                })
                .collect(),
            check: HealthCheck {
                name: "c".to_string(),
                prometheus: None,
                http: None,
                exec: None,
                provider: Some(ProviderCheck {}),
                interval_seconds: None,
                count: None,
                duration_seconds: None,
                failure_limit: None,
                inconclusive_limit: None,
                consecutive_error_limit: None,
                timeout_seconds: None,
            },
            upgrade: None,
        }
    }

    #[test]
    fn health_template_values_are_escaped_for_where_they_go() {
        let req = request(&["a.b", "c\"d"], Some("g 1"));
        let q = "x{cluster=~\"{{members}}\",m=\"{{member}}\",g=\"{{ group }}\"}";
        assert_eq!(
            render(q, &req, Target::PromQl).unwrap(),
            "x{cluster=~\"a\\\\.b|c\\\"d\",m=\"a.b\",g=\"g 1\"}"
        );
        assert_eq!(
            render(
                "http://h/x?run={{run}}&g={{group}}&m={{members}}",
                &req,
                Target::Url
            )
            .unwrap(),
            "http://h/x?run=r1&g=g%201&m=a%5C.b%7Cc%22d"
        );
        assert_eq!(
            render("--stage={{stage}}/{{group}}", &req, Target::Argument).unwrap(),
            "--stage=canary/g 1"
        );
    }

    #[test]
    fn health_template_unknown_or_missing_variables_are_named() {
        let req = request(&[], None);
        let e = render("up{{x}}", &req, Target::PromQl).unwrap_err();
        assert!(e.starts_with("{{x}} is not a template variable"), "{e}");
        let e = render("{{group}}", &req, Target::Argument).unwrap_err();
        assert!(e.contains("{{group}} has no value"), "{e}");
        let e = render("{{members}}", &req, Target::Argument).unwrap_err();
        assert!(e.contains("{{members}} has no value"), "{e}");
        // A `{{` that is never closed is text.
        assert_eq!(render("a {{ b", &req, Target::Argument).unwrap(), "a {{ b");
    }
}
