//! Timestamps in documents: the one strict RFC 3339 reader (spec section 10) and the serde
//! adapters that put it on every timestamp field users write.
//!
//! A timestamp is `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`: a `T` between date and time (RFC
//! 3339 allows a lowercase `t` and `z` too), years 1970–9999, an offset within ±14:00, no leap
//! second and nothing before or after. chrono's own parser is more lenient (a space instead of
//! `T`, `UTC`, surrounding spaces, offsets up to ±23:59, six-digit years), and its errors do
//! not say which rule was broken; every timestamp field of the model reads through
//! [`parse_timestamp`] instead. Writing is unchanged (chrono's RFC 3339 with `Z`).
//!
//! Keeping years within 1970–9999 also keeps every sum the engine computes (a week of waiting,
//! ten years of window search) far inside chrono's range.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// The engine's notion of time: a UTC instant, always passed in, never read from a clock.
pub type Timestamp = DateTime<Utc>;

/// Formats a timestamp as RFC 3339 UTC with a `Z`, to the second when whole.
pub fn fmt_time(t: Timestamp) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// Earliest year a timestamp may have.
pub const MIN_YEAR: i32 = 1970;
/// Latest year a timestamp may have.
pub const MAX_YEAR: i32 = 9999;
/// Largest UTC offset of a timestamp, in minutes (14:00).
pub const MAX_OFFSET_MINUTES: i32 = 14 * 60;

/// An example shown with every timestamp error.
const EXAMPLE: &str = "e.g. 2026-12-07T08:00:00Z or 2026-12-07T09:00:00+01:00";

/// Parses a strict RFC 3339 timestamp; the error names the rule that was broken.
pub fn parse_timestamp(s: &str) -> Result<Timestamp, String> {
    parse(s.as_bytes()).map_err(|rule| {
        format!(
            "{} is not an RFC 3339 timestamp: {rule} ({EXAMPLE})",
            quote(s)
        )
    })
}

/// Quotes user text for a message, escaping control characters so they never reach a terminal.
fn quote(s: &str) -> String {
    let shown: String = s.chars().take(64).collect();
    let ellipsis = if shown.len() < s.len() { "…" } else { "" };
    format!("{:?}{ellipsis}", shown)
}

fn parse(b: &[u8]) -> Result<Timestamp, &'static str> {
    if b.first().is_some_and(u8::is_ascii_whitespace)
        || b.last().is_some_and(u8::is_ascii_whitespace)
    {
        return Err("no spaces are allowed before or after it");
    }
    if b.len() < 20 {
        return Err("it is too short; it needs a date, 'T', a time and an offset");
    }
    let year = digits(b, 0, 4).ok_or("the year must be four digits")?;
    if b[4] != b'-' || b.get(7) != Some(&b'-') {
        return Err("the date must be YYYY-MM-DD");
    }
    let month = digits(b, 5, 2).ok_or("the date must be YYYY-MM-DD")?;
    let day = digits(b, 8, 2).ok_or("the date must be YYYY-MM-DD")?;
    match b[10] {
        b'T' | b't' => {}
        b' ' => return Err("the date and the time must be separated by 'T', not a space"),
        _ => return Err("the date and the time must be separated by 'T'"),
    }
    let hour = digits(b, 11, 2).ok_or("the time must be HH:MM:SS")?;
    if b[13] != b':' || b[16] != b':' {
        return Err("the time must be HH:MM:SS");
    }
    let minute = digits(b, 14, 2).ok_or("the time must be HH:MM:SS")?;
    let second = digits(b, 17, 2).ok_or("the time must be HH:MM:SS")?;
    let mut i = 19;
    let mut nanos = 0u32;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return Err("a '.' must be followed by the fraction of a second");
        }
        if n > 9 {
            return Err("fractions of a second have at most 9 digits");
        }
        let frac =
            digits(b, start, n).ok_or("a '.' must be followed by the fraction of a second")?;
        nanos = frac * 10u32.pow((9 - n) as u32);
    }
    let offset_minutes: i32 = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let h = digits(&[*h1, *h2], 0, 2).ok_or("the offset must be Z or ±HH:MM")?;
            let m = digits(&[*m1, *m2], 0, 2).ok_or("the offset must be Z or ±HH:MM")?;
            if m > 59 {
                return Err("the offset's minutes must be 00 to 59");
            }
            let total = (h * 60 + m) as i32;
            if total > MAX_OFFSET_MINUTES {
                return Err("the offset must lie within -14:00 and +14:00");
            }
            if *sign == b'-' {
                -total
            } else {
                total
            }
        }
        [] => return Err("it needs an offset: Z or ±HH:MM"),
        _ => return Err("the offset must be Z or ±HH:MM, and nothing may follow it"),
    };
    let year = year as i32;
    if !(MIN_YEAR..=MAX_YEAR).contains(&year) {
        return Err("the year must be between 1970 and 9999");
    }
    let date = NaiveDate::from_ymd_opt(year, month, day).ok_or("no such date in the calendar")?;
    if second == 60 {
        return Err("leap seconds (:60) are not accepted");
    }
    let time = NaiveTime::from_hms_nano_opt(hour, minute, second, nanos)
        .ok_or("the time must be 00:00:00 to 23:59:59")?;
    let local = NaiveDateTime::new(date, time);
    let utc = local
        .checked_sub_signed(chrono::TimeDelta::minutes(offset_minutes.into()))
        .ok_or("it is out of range")?;
    let t = Utc.from_utc_datetime(&utc);
    // 1970-01-01T00:30:00+01:00 is still 1969 in UTC; keep the instant itself in range too.
    if t.timestamp() < 0 {
        return Err("it is before 1970-01-01T00:00:00Z");
    }
    Ok(t)
}

/// `n` ASCII digits at `at` as a number.
fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(n)?)?;
    s.iter().try_fold(0u32, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// `deserialize_with` for a required timestamp field.
pub fn de_timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    let s = std::borrow::Cow::<str>::deserialize(d)?;
    parse_timestamp(&s).map_err(serde::de::Error::custom)
}

/// `deserialize_with` for an optional timestamp field (use with `default`).
pub fn de_opt_timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
    let s = Option::<std::borrow::Cow<str>>::deserialize(d)?;
    s.map(|s| parse_timestamp(&s).map_err(serde::de::Error::custom))
        .transpose()
}

/// `deserialize_with` for a map whose values are timestamps (`available: {eastus: ...}`).
pub fn de_timestamp_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Timestamp>, D::Error> {
    struct Strict(Timestamp);
    impl<'de> Deserialize<'de> for Strict {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            de_timestamp(d).map(Strict)
        }
    }
    let m = BTreeMap::<String, Strict>::deserialize(d)?;
    Ok(m.into_iter().map(|(k, v)| (k, v.0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> String {
        fmt_time(parse_timestamp(s).unwrap_or_else(|e| panic!("{s}: {e}")))
    }

    fn rule(s: &str) -> String {
        parse_timestamp(s).expect_err(s)
    }

    #[test]
    fn rfc3339_timestamps_with_t_and_an_offset_are_accepted() {
        assert_eq!(ok("2026-12-07T00:00:00Z"), "2026-12-07T00:00:00Z");
        assert_eq!(ok("2026-12-07t00:00:00z"), "2026-12-07T00:00:00Z");
        assert_eq!(ok("2026-12-07T09:30:00+01:30"), "2026-12-07T08:00:00Z");
        assert_eq!(ok("2026-12-07T00:00:00-14:00"), "2026-12-07T14:00:00Z");
        assert_eq!(ok("2026-12-07T00:00:00.5Z"), "2026-12-07T00:00:00.500Z");
        assert_eq!(
            ok("2026-12-07T00:00:00.123456789Z"),
            "2026-12-07T00:00:00.123456789Z"
        );
        assert_eq!(ok("1970-01-01T00:00:00Z"), "1970-01-01T00:00:00Z");
        assert_eq!(ok("9999-12-31T23:59:59Z"), "9999-12-31T23:59:59Z");
        assert_eq!(ok("2028-02-29T12:00:00Z"), "2028-02-29T12:00:00Z");
    }

    #[test]
    fn a_space_instead_of_t_is_refused_with_the_rule() {
        assert!(rule("2026-12-07 00:00:00Z").contains("separated by 'T', not a space"));
    }

    #[test]
    fn utc_spelled_out_is_refused() {
        assert!(rule("2026-12-07T00:00:00UTC").contains("offset must be Z or ±HH:MM"));
        assert!(rule("2026-12-07T00:00:00 UTC").contains("offset"));
    }

    #[test]
    fn surrounding_spaces_are_refused() {
        assert!(rule(" 2026-12-07T00:00:00Z").contains("no spaces"));
        assert!(rule("2026-12-07T00:00:00Z ").contains("no spaces"));
    }

    #[test]
    fn offsets_beyond_fourteen_hours_are_refused() {
        assert!(rule("2026-12-07T00:00:00+23:59").contains("within -14:00 and +14:00"));
        assert!(rule("2026-12-07T00:00:00+14:01").contains("within -14:00 and +14:00"));
        assert!(rule("2026-12-07T00:00:00+01:60").contains("minutes"));
    }

    #[test]
    fn years_outside_1970_to_9999_are_refused() {
        assert!(rule("+262142-01-01T00:00:00Z").contains("year must be four digits"));
        assert!(rule("-262143-01-01T00:00:00Z").contains("year must be four digits"));
        assert!(rule("1969-12-31T23:59:59Z").contains("between 1970 and 9999"));
        assert!(rule("0000-01-01T00:00:00Z").contains("between 1970 and 9999"));
        assert!(rule("1970-01-01T00:30:00+01:00").contains("before 1970"));
    }

    #[test]
    fn leap_seconds_and_impossible_dates_are_refused() {
        assert!(rule("2026-12-31T23:59:60Z").contains("leap second"));
        assert!(rule("2026-02-29T00:00:00Z").contains("no such date"));
        assert!(rule("2026-13-01T00:00:00Z").contains("no such date"));
        assert!(rule("2026-12-07T24:00:00Z").contains("00:00:00 to 23:59:59"));
    }

    #[test]
    fn truncated_or_trailing_text_is_refused_with_the_rule_not_premature_end() {
        for s in [
            "",
            "2026",
            "2026-12-07",
            "2026-12-07T00:00",
            "2026-12-07T00:00:00",
        ] {
            let e = rule(s);
            assert!(!e.contains("premature"), "{s}: {e}");
            assert!(e.contains("RFC 3339"), "{s}: {e}");
        }
        assert!(rule("2026-12-07T00:00:00Zjunk").contains("nothing may follow"));
        assert!(rule("2026-12-07T00:00:00.Z").contains("fraction"));
        assert!(rule("2026-12-07T00:00:00.1234567890Z").contains("9 digits"));
    }

    #[test]
    fn control_characters_in_a_bad_timestamp_are_escaped_in_the_message() {
        let e = rule("2026-12-07T00:00:00Z\u{1b}]0;owned\u{7}");
        assert!(!e.contains('\u{1b}') && !e.contains('\u{7}'), "{e}");
    }

    #[test]
    fn non_ascii_input_never_panics() {
        for s in [
            "２０２６-12-07T00:00:00Z",
            "2026-12-07T00:00:00＋01:00",
            "é",
            "2026-12-07T00:00:00+0é:00",
        ] {
            assert!(parse_timestamp(s).is_err(), "{s}");
        }
    }
}
