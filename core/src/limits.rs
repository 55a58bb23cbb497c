//! Flow-control values: `maxConcurrency` and `maxAllowedFailures` as written (`"N"` or `"p%"`)
//! and as resolved against a member count (spec section 5).

use serde::{Deserialize, Serialize};

/// The largest literal stage `maxConcurrency` accepted.
pub const MAX_STAGE_CONCURRENCY: u32 = 50;
/// Default stage `maxConcurrency`.
pub const DEFAULT_STAGE_CONCURRENCY: Limit = Limit::Count(50);
/// Default group `maxConcurrency`.
pub const DEFAULT_GROUP_CONCURRENCY: Limit = Limit::Count(1);
/// Default `maxAllowedFailures` (fail fast).
pub const DEFAULT_ALLOWED_FAILURES: Limit = Limit::Count(0);

/// A limit as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Limit {
    /// A fixed number.
    Count(u32),
    /// A percentage of the members in scope.
    Percent(u32),
}

impl Limit {
    /// Parses `maxConcurrency`: `"N"` with N ≥ 1, or `"p%"` with p in 1..=100.
    pub fn parse_concurrency(s: &str) -> Result<Limit, String> {
        let limit = Self::parse(s)?;
        match limit {
            Limit::Count(0) => Err(format!("\"{s}\" must be at least 1")),
            Limit::Percent(0) => Err(format!("\"{s}\" must be at least 1%")),
            _ => Ok(limit),
        }
    }

    /// Parses `maxAllowedFailures`: `"N"` with N ≥ 0, or `"p%"` with p in 0..=100.
    pub fn parse_failures(s: &str) -> Result<Limit, String> {
        Self::parse(s)
    }

    fn parse(s: &str) -> Result<Limit, String> {
        let t = s.trim();
        let (digits, percent) = match t.strip_suffix('%') {
            Some(d) => (d.trim(), true),
            None => (t, false),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "\"{s}\" is not a whole number or a whole percentage (e.g. \"3\" or \"25%\")"
            ));
        }
        let n: u32 = digits
            .parse()
            .map_err(|_| format!("\"{s}\" is too large"))?;
        if percent {
            if n > 100 {
                return Err(format!("\"{s}\" is above 100%"));
            }
            Ok(Limit::Percent(n))
        } else {
            Ok(Limit::Count(n))
        }
    }

    /// Resolves a concurrency: a percentage is `max(1, floor(p/100 × base))`.
    pub fn resolve_concurrency(self, base: u32) -> u32 {
        match self {
            Limit::Count(n) => n.max(1),
            Limit::Percent(p) => ((p as u64 * base as u64) / 100).max(1) as u32,
        }
    }

    /// Resolves a failure threshold: a percentage is `ceil(p/100 × base)`.
    pub fn resolve_failures(self, base: u32) -> u32 {
        match self {
            Limit::Count(n) => n,
            Limit::Percent(p) => (p as u64 * base as u64).div_ceil(100) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_concurrency_floors_with_a_minimum_of_one() {
        let p = |s| Limit::parse_concurrency(s).unwrap();
        // spec section 5, example 3: 20 members, A has 8, B has 12.
        assert_eq!(p("25%").resolve_concurrency(20), 5);
        assert_eq!(p("50%").resolve_concurrency(8), 4);
        assert_eq!(p("25%").resolve_concurrency(12), 3);
        assert_eq!(p("10%").resolve_concurrency(5), 1);
        assert_eq!(p("1%").resolve_concurrency(0), 1);
        assert_eq!(p("100%").resolve_concurrency(7), 7);
        assert_eq!(p("4").resolve_concurrency(100), 4);
    }

    #[test]
    fn percent_failures_round_up() {
        let p = |s| Limit::parse_failures(s).unwrap();
        // spec section 5, failure example 3: 19 members, A has 7, B has 12; and 25% of 5.
        assert_eq!(p("25%").resolve_failures(19), 5);
        assert_eq!(p("25%").resolve_failures(7), 2);
        assert_eq!(p("25%").resolve_failures(12), 3);
        assert_eq!(p("25%").resolve_failures(5), 2);
        assert_eq!(p("0%").resolve_failures(50), 0);
        assert_eq!(p("100%").resolve_failures(9), 9);
        assert_eq!(p("0").resolve_failures(9), 0);
        assert_eq!(p("3").resolve_failures(2), 3);
    }

    #[test]
    fn bad_limits_name_the_rule() {
        assert_eq!(
            Limit::parse_concurrency("120%").unwrap_err(),
            "\"120%\" is above 100%"
        );
        assert_eq!(
            Limit::parse_concurrency("0").unwrap_err(),
            "\"0\" must be at least 1"
        );
        assert_eq!(
            Limit::parse_concurrency("0%").unwrap_err(),
            "\"0%\" must be at least 1%"
        );
        assert!(Limit::parse_failures("-1")
            .unwrap_err()
            .contains("whole number"));
        assert!(Limit::parse_failures("12.5%")
            .unwrap_err()
            .contains("whole"));
        assert!(Limit::parse_failures("").is_err());
        assert_eq!(Limit::parse_failures("0%").unwrap(), Limit::Percent(0));
        assert_eq!(Limit::parse_concurrency(" 7 ").unwrap(), Limit::Count(7));
    }
}
