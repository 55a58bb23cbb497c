//! Maintenance windows (spec section 6): when a member may *start* an upgrade.
//!
//! A [`MaintenanceWindow`] is the user-facing shape, field for field the AKS planned-maintenance
//! `maintenanceWindow` JSON (camelCase). [`MaintenanceWindow::compile`] turns it into a
//! [`CompiledWindow`], which answers "is it open at `now`?", "when does it next open?" and the
//! section 6 ordering class ([`WindowPriority`]) without allocating. Time is always passed in;
//! nothing here reads a clock.
//!
//! # Semantics (decisions are marked)
//!
//! * **Local time.** Every date and time of a window (`startTime`, `startDate`, the schedule's
//!   days, `notAllowedDates`) is local time at the window's fixed `utcOffset` (default `+00:00`).
//!   There is no daylight saving: the offset is fixed. The local date of an instant can differ
//!   from its UTC date (e.g. at `+14:00` or `-05:00`).
//! * **Occurrence.** Each scheduled local date `D` yields one occurrence, the half-open interval
//!   `[D + startTime, D + startTime + durationHours)` at `utcOffset`. Occurrences may cross local
//!   midnight: a Sunday 22:00 window of 6 hours is open on Monday 00:00–04:00.
//! * **Schedules.**
//!   - `daily`: every `intervalDays` days.
//!   - `weekly`: on `dayOfWeek`, every `intervalWeeks` weeks. Weeks start on Monday (decision).
//!   - `absoluteMonthly`: on `dayOfMonth`, every `intervalMonths` months. **Decision:** in a month
//!     that does not have `dayOfMonth` (31 in April, 29–31 in February) the occurrence falls on
//!     the last day of that month (30 April, 28 or 29 February). The AKS documentation only says
//!     "the date of the month" (1–31) and does not say what happens in shorter months; skipping
//!     those months would silently leave a "monthly" window closed for two months, so waverun
//!     clamps to the month's last day.
//!   - `relativeMonthly`: the `First`/`Second`/`Third`/`Fourth`/`Last` `dayOfWeek` of the month,
//!     every `intervalMonths` months.
//! * **Intervals count from `startDate`** (decision, spec section 6): the day, the Monday-based
//!   week, or the calendar month that contains `startDate` is period 0, and occurrences happen in
//!   periods 0, n, 2n, … Without `startDate`, periods count from 1970-01-01: day 0 is 1970-01-01,
//!   week 0 is the Monday-based week containing it (Monday 1969-12-29), month 0 is January 1970.
//! * **`startDate`**: before local midnight of `startDate` the window is inactive. An occurrence
//!   that starts before that instant does not count at all (not even the part after it). So a
//!   weekly window whose `dayOfWeek` falls earlier in `startDate`'s week than `startDate` first
//!   opens `intervalWeeks` weeks later.
//! * **`notAllowedDates`**: whole local dates, both ends inclusive. The window is closed at every
//!   instant whose local date lies inside a span; an occurrence that overlaps such a date is cut
//!   to its allowed part. This matches the AKS documentation's example: with `+02:00` and the
//!   span 2022-12-23..2023-01-03, maintenance is blocked from 2022-12-22 22:00 UTC to
//!   2023-01-03 22:00 UTC.
//! * **Only the start is gated.** A window permits starting an upgrade; it never triggers one,
//!   and an upgrade that started inside may run past the end (that is the engine's business).
//! * **Search horizon**: [`CompiledWindow::next_opening`] looks [`HORIZON_DAYS`] days (10 years)
//!   ahead and answers `None` beyond that.
//! * **Touching occurrences.** Only `daily` with `intervalDays: 1` and `durationHours: 24` has
//!   occurrences that touch (one ends exactly when the next starts). [`CompiledWindow::current`]
//!   reports one occurrence at a time, so its end is that occurrence's end even though the next
//!   one keeps the window open.

use crate::error::Errors;
use chrono::{DateTime, FixedOffset, Offset, Utc, Weekday};
use serde::{Deserialize, Serialize};

const SECS_PER_DAY: i64 = 86_400;

/// How far ahead [`CompiledWindow::next_opening`] searches: 10 years of days (with leap days).
pub const HORIZON_DAYS: i64 = 3653;

/// How far ahead an opening still counts as [`WindowPriority::OpensSoon`]: 4 hours.
pub const OPENS_SOON_SECS: i64 = 4 * 3600;

/// A maintenance window as users write it (AKS planned-maintenance shape, camelCase).
///
/// ```json
/// {"schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Saturday"}}, "durationHours": 6,
///  "startTime": "01:00", "utcOffset": "+00:00", "startDate": "2026-12-01",
///  "notAllowedDates": [{"start": "2026-12-24", "end": "2026-12-26"}]}
/// ```
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaintenanceWindow {
    /// Which local dates have an occurrence.
    pub schedule: Schedule,
    /// Length of each occurrence in hours, 4..=24.
    pub duration_hours: u32,
    /// Local start time of each occurrence, `"HH:mm"`.
    pub start_time: String,
    /// Fixed offset of the window's local time, `"+hh:mm"` or `"-hh:mm"`; default `+00:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc_offset: Option<String>,
    /// Local date (`"YYYY-MM-DD"`) from which the window is active; intervals count from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_date: Option<String>,
    /// Local dates on which the window is closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_allowed_dates: Vec<DateSpan>,
}

/// The recurrence of a window; externally tagged, e.g. `{"daily": {"intervalDays": 1}}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Schedule {
    /// Every `interval_days` days.
    #[serde(rename_all = "camelCase")]
    Daily {
        /// Days between occurrences, 1..=7.
        interval_days: u32,
    },
    /// On `day_of_week` every `interval_weeks` (Monday-based) weeks.
    #[serde(rename_all = "camelCase")]
    Weekly {
        /// Weeks between occurrences, 1..=4.
        interval_weeks: u32,
        /// The weekday of each occurrence.
        day_of_week: DayOfWeek,
    },
    /// On `day_of_month` (clamped to the month's last day) every `interval_months` months.
    #[serde(rename_all = "camelCase")]
    AbsoluteMonthly {
        /// Months between occurrences, 1..=6.
        interval_months: u32,
        /// Day of the month, 1..=31; in shorter months the last day of the month.
        day_of_month: u32,
    },
    /// On the `week_index`-th `day_of_week` of the month every `interval_months` months.
    #[serde(rename_all = "camelCase")]
    RelativeMonthly {
        /// Months between occurrences, 1..=6.
        interval_months: u32,
        /// The weekday of each occurrence.
        day_of_week: DayOfWeek,
        /// Which such weekday of the month.
        week_index: WeekIndex,
    },
}

/// A day of the week, serialized as `"Monday"` … `"Sunday"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DayOfWeek {
    /// Monday.
    Monday,
    /// Tuesday.
    Tuesday,
    /// Wednesday.
    Wednesday,
    /// Thursday.
    Thursday,
    /// Friday.
    Friday,
    /// Saturday.
    Saturday,
    /// Sunday.
    Sunday,
}

impl DayOfWeek {
    /// The chrono weekday.
    pub fn to_weekday(self) -> Weekday {
        match self {
            DayOfWeek::Monday => Weekday::Mon,
            DayOfWeek::Tuesday => Weekday::Tue,
            DayOfWeek::Wednesday => Weekday::Wed,
            DayOfWeek::Thursday => Weekday::Thu,
            DayOfWeek::Friday => Weekday::Fri,
            DayOfWeek::Saturday => Weekday::Sat,
            DayOfWeek::Sunday => Weekday::Sun,
        }
    }

    /// The day for a chrono weekday.
    pub fn from_weekday(weekday: Weekday) -> Self {
        match weekday {
            Weekday::Mon => DayOfWeek::Monday,
            Weekday::Tue => DayOfWeek::Tuesday,
            Weekday::Wed => DayOfWeek::Wednesday,
            Weekday::Thu => DayOfWeek::Thursday,
            Weekday::Fri => DayOfWeek::Friday,
            Weekday::Sat => DayOfWeek::Saturday,
            Weekday::Sun => DayOfWeek::Sunday,
        }
    }

    /// Days since Monday: Monday 0 … Sunday 6.
    pub fn index_from_monday(self) -> u32 {
        self.to_weekday().num_days_from_monday()
    }
}

impl From<DayOfWeek> for Weekday {
    fn from(day: DayOfWeek) -> Weekday {
        day.to_weekday()
    }
}

/// Which occurrence of a weekday within a month.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WeekIndex {
    /// The first such weekday (day 1–7).
    First,
    /// The second (day 8–14).
    Second,
    /// The third (day 15–21).
    Third,
    /// The fourth (day 22–28).
    Fourth,
    /// The last such weekday of the month.
    Last,
}

/// Whole local dates `"YYYY-MM-DD"`, both inclusive, in the window's `utcOffset`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DateSpan {
    /// First closed date.
    pub start: String,
    /// Last closed date (inclusive).
    pub end: String,
}

/// Ordering class of a waiting member (spec section 6); lower sorts first.
///
/// The order is: (1) [`OpenNow`](WindowPriority::OpenNow), (2) [`OpensSoon`](WindowPriority::OpensSoon)
/// (opens within the next 4 hours), (3) [`NoWindow`](WindowPriority::NoWindow) (the member has no
/// window; callers assign it), (4) [`Closed`](WindowPriority::Closed). Ties are broken by member
/// name by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WindowPriority {
    /// The window is open now.
    OpenNow = 0,
    /// The window is closed now and opens at most 4 hours from now (4 hours included).
    OpensSoon = 1,
    /// The member has no window (never returned by [`CompiledWindow::priority`]).
    NoWindow = 2,
    /// The window is closed now and does not open within 4 hours.
    Closed = 3,
}

/// Parses a fixed UTC offset `"+hh:mm"` or `"-hh:mm"` in the range -14:00..=+14:00.
pub fn parse_utc_offset(s: &str) -> Result<FixedOffset, String> {
    let b = s.as_bytes();
    let shape_ok = b.len() == 6
        && (b[0] == b'+' || b[0] == b'-')
        && b[1].is_ascii_digit()
        && b[2].is_ascii_digit()
        && b[3] == b':'
        && b[4].is_ascii_digit()
        && b[5].is_ascii_digit();
    if !shape_ok {
        return Err(format!("{s:?} must look like +hh:mm or -hh:mm"));
    }
    let hours = i32::from(b[1] - b'0') * 10 + i32::from(b[2] - b'0');
    let minutes = i32::from(b[4] - b'0') * 10 + i32::from(b[5] - b'0');
    if minutes > 59 {
        return Err(format!("{s:?}: minutes must be 00..59"));
    }
    let total = hours * 60 + minutes;
    if total > 14 * 60 {
        return Err(format!("{s:?} is outside -14:00..=+14:00"));
    }
    let secs = if b[0] == b'-' {
        -total * 60
    } else {
        total * 60
    };
    FixedOffset::east_opt(secs).ok_or_else(|| format!("{s:?} is outside -14:00..=+14:00"))
}

/// Parses a local time `"HH:mm"` (00:00..=23:59) into `(hours, minutes)`.
pub fn parse_hh_mm(s: &str) -> Result<(u32, u32), String> {
    let b = s.as_bytes();
    let shape_ok = b.len() == 5
        && b[0].is_ascii_digit()
        && b[1].is_ascii_digit()
        && b[2] == b':'
        && b[3].is_ascii_digit()
        && b[4].is_ascii_digit();
    if !shape_ok {
        return Err(format!("{s:?} must look like HH:mm"));
    }
    let hours = u32::from(b[0] - b'0') * 10 + u32::from(b[1] - b'0');
    let minutes = u32::from(b[3] - b'0') * 10 + u32::from(b[4] - b'0');
    if hours > 23 {
        return Err(format!("{s:?}: hours must be 00..23"));
    }
    if minutes > 59 {
        return Err(format!("{s:?}: minutes must be 00..59"));
    }
    Ok((hours, minutes))
}

/// Parses a date `"YYYY-MM-DD"` into days since 1970-01-01.
fn parse_date(s: &str) -> Result<i64, String> {
    let b = s.as_bytes();
    let shape_ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shape_ok {
        return Err(format!("{s:?} must be a date YYYY-MM-DD"));
    }
    let num = |r: std::ops::Range<usize>| {
        b[r].iter()
            .fold(0i64, |acc, c| acc * 10 + i64::from(c - b'0'))
    };
    let (y, m, d) = (num(0..4), num(5..7), num(8..10));
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return Err(format!("{s:?} is not a valid date"));
    }
    Ok(days_from_civil(y, m, d))
}

/// The first instant `>= at_or_after` that is `day` at local time `hh:mm` at `offset`.
///
/// Used for ScheduledStart gates (`startDay`, `startTime`, `utcOffset`). If `at_or_after` is
/// exactly such an instant it is returned. Saturates at the largest representable instant.
pub fn next_weekly_occurrence(
    day: DayOfWeek,
    hh: u32,
    mm: u32,
    offset: FixedOffset,
    at_or_after: DateTime<Utc>,
) -> DateTime<Utc> {
    let off = i64::from(offset.local_minus_utc());
    let local = at_or_after.timestamp() + off;
    let today = local.div_euclid(SECS_PER_DAY);
    let target = i64::from(day.index_from_monday());
    let mut d = today + (target - weekday_index(today)).rem_euclid(7);
    let tod = i64::from(hh) * 3600 + i64::from(mm) * 60;
    loop {
        let utc = d * SECS_PER_DAY + tod - off;
        match DateTime::from_timestamp(utc, 0) {
            Some(t) if t >= at_or_after => return t,
            Some(_) => d += 7,
            None => return DateTime::<Utc>::MAX_UTC,
        }
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn check_range(errors: &mut Errors, path: String, value: u32, lo: u32, hi: u32) {
    if value < lo || value > hi {
        errors.push(path, format!("{value} is outside {lo}..={hi}"));
    }
}

impl MaintenanceWindow {
    /// Records every broken rule under `path` (e.g. `members[2].maintenance.kubernetes`).
    ///
    /// Paths look like `{path}.schedule.weekly.intervalWeeks`, `{path}.durationHours`,
    /// `{path}.notAllowedDates[1].end`.
    pub fn validate(&self, path: &str, errors: &mut Errors) {
        let sched = join(path, "schedule");
        match &self.schedule {
            Schedule::Daily { interval_days } => check_range(
                errors,
                format!("{sched}.daily.intervalDays"),
                *interval_days,
                1,
                7,
            ),
            Schedule::Weekly { interval_weeks, .. } => check_range(
                errors,
                format!("{sched}.weekly.intervalWeeks"),
                *interval_weeks,
                1,
                4,
            ),
            Schedule::AbsoluteMonthly {
                interval_months,
                day_of_month,
            } => {
                check_range(
                    errors,
                    format!("{sched}.absoluteMonthly.intervalMonths"),
                    *interval_months,
                    1,
                    6,
                );
                check_range(
                    errors,
                    format!("{sched}.absoluteMonthly.dayOfMonth"),
                    *day_of_month,
                    1,
                    31,
                );
            }
            Schedule::RelativeMonthly {
                interval_months, ..
            } => check_range(
                errors,
                format!("{sched}.relativeMonthly.intervalMonths"),
                *interval_months,
                1,
                6,
            ),
        }
        check_range(
            errors,
            join(path, "durationHours"),
            self.duration_hours,
            4,
            24,
        );
        if let Err(e) = parse_hh_mm(&self.start_time) {
            errors.push(join(path, "startTime"), e);
        }
        if let Some(offset) = &self.utc_offset {
            if let Err(e) = parse_utc_offset(offset) {
                errors.push(join(path, "utcOffset"), e);
            }
        }
        if let Some(date) = &self.start_date {
            if let Err(e) = parse_date(date) {
                errors.push(join(path, "startDate"), e);
            }
        }
        for (i, span) in self.not_allowed_dates.iter().enumerate() {
            let base = join(path, &format!("notAllowedDates[{i}]"));
            let start = parse_date(&span.start);
            let end = parse_date(&span.end);
            if let Err(e) = &start {
                errors.push(format!("{base}.start"), e.clone());
            }
            if let Err(e) = &end {
                errors.push(format!("{base}.end"), e.clone());
            }
            if let (Ok(s), Ok(e)) = (start, end) {
                if e < s {
                    errors.push(
                        format!("{base}.end"),
                        format!("{} is before start {}", span.end, span.start),
                    );
                }
            }
        }
    }

    /// Precomputes everything a query needs. `Err` (all broken rules, `; `-joined) only if
    /// [`validate`](Self::validate) would report something.
    pub fn compile(&self) -> Result<CompiledWindow, String> {
        let mut errors = Errors::default();
        self.validate("", &mut errors);
        if !errors.0.is_empty() {
            let msgs: Vec<String> = errors.0.iter().map(|e| e.to_string()).collect();
            return Err(msgs.join("; "));
        }
        // Validated above: the parses below cannot fail.
        let (hh, mm) = parse_hh_mm(&self.start_time)?;
        let offset_secs = match &self.utc_offset {
            Some(s) => i64::from(parse_utc_offset(s)?.local_minus_utc()),
            None => 0,
        };
        let active_day = self.start_date.as_deref().map(parse_date).transpose()?;
        let anchor_day = active_day.unwrap_or(0);
        let rule = match &self.schedule {
            Schedule::Daily { interval_days } => Rule::Daily {
                interval: i64::from(*interval_days),
                anchor_day,
            },
            Schedule::Weekly {
                interval_weeks,
                day_of_week,
            } => Rule::Weekly {
                interval: i64::from(*interval_weeks),
                anchor_week: week_index(anchor_day),
                weekday: i64::from(day_of_week.index_from_monday()),
            },
            Schedule::AbsoluteMonthly {
                interval_months,
                day_of_month,
            } => Rule::AbsoluteMonthly {
                interval: i64::from(*interval_months),
                anchor_month: month_index(anchor_day),
                day_of_month: i64::from(*day_of_month),
            },
            Schedule::RelativeMonthly {
                interval_months,
                day_of_week,
                week_index,
            } => Rule::RelativeMonthly {
                interval: i64::from(*interval_months),
                anchor_month: month_index(anchor_day),
                weekday: i64::from(day_of_week.index_from_monday()),
                nth: match week_index {
                    WeekIndex::First => 0,
                    WeekIndex::Second => 1,
                    WeekIndex::Third => 2,
                    WeekIndex::Fourth => 3,
                    WeekIndex::Last => -1,
                },
            },
        };
        let mut spans: Vec<(i64, i64)> = Vec::with_capacity(self.not_allowed_dates.len());
        for span in &self.not_allowed_dates {
            spans.push((parse_date(&span.start)?, parse_date(&span.end)?));
        }
        spans.sort_unstable();
        let mut blocked: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match blocked.last_mut() {
                // Overlapping or adjacent: merge, so the day after a span is never blocked.
                Some(last) if s <= last.1 + 1 => last.1 = last.1.max(e),
                _ => blocked.push((s, e)),
            }
        }
        Ok(CompiledWindow {
            source: self.clone(),
            rule,
            start_secs: i64::from(hh) * 3600 + i64::from(mm) * 60,
            duration_secs: i64::from(self.duration_hours) * 3600,
            offset_secs,
            active_day,
            blocked,
        })
    }
}

/// Which local days carry an occurrence, with all periods counted from an anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    Daily {
        interval: i64,
        anchor_day: i64,
    },
    Weekly {
        interval: i64,
        anchor_week: i64,
        weekday: i64,
    },
    AbsoluteMonthly {
        interval: i64,
        anchor_month: i64,
        day_of_month: i64,
    },
    RelativeMonthly {
        interval: i64,
        anchor_month: i64,
        weekday: i64,
        /// 0..=3 for First..Fourth, -1 for Last.
        nth: i64,
    },
}

impl Rule {
    /// The first local day `>= x` that carries an occurrence (ignoring `startDate` activation).
    fn next_day(&self, x: i64) -> i64 {
        match *self {
            Rule::Daily {
                interval,
                anchor_day,
            } => x + (anchor_day - x).rem_euclid(interval),
            Rule::Weekly {
                interval,
                anchor_week,
                weekday,
            } => {
                let y = x + (weekday - weekday_index(x)).rem_euclid(7);
                y + 7 * (anchor_week - week_index(y)).rem_euclid(interval)
            }
            Rule::AbsoluteMonthly {
                interval,
                anchor_month,
                ..
            }
            | Rule::RelativeMonthly {
                interval,
                anchor_month,
                ..
            } => {
                let mut m = month_index(x);
                m += (anchor_month - m).rem_euclid(interval);
                let d = self.day_in_month(m);
                if d >= x {
                    d
                } else {
                    self.day_in_month(m + interval)
                }
            }
        }
    }

    /// The occurrence day in month index `m` (year * 12 + month0) for the monthly rules.
    fn day_in_month(&self, m: i64) -> i64 {
        let (y, mo) = (m.div_euclid(12), m.rem_euclid(12) + 1);
        match *self {
            Rule::AbsoluteMonthly { day_of_month, .. } => {
                days_from_civil(y, mo, day_of_month.clamp(1, days_in_month(y, mo)))
            }
            Rule::RelativeMonthly { weekday, nth, .. } => {
                if nth < 0 {
                    let last = days_from_civil(y, mo, days_in_month(y, mo));
                    last - (weekday_index(last) - weekday).rem_euclid(7)
                } else {
                    let first = days_from_civil(y, mo, 1);
                    first + (weekday - weekday_index(first)).rem_euclid(7) + 7 * nth
                }
            }
            // Not monthly: unreachable by construction; the day itself is a safe answer.
            _ => days_from_civil(y, mo, 1),
        }
    }
}

/// A validated window, ready for cheap queries (no allocation per query).
///
/// Serializes as the source [`MaintenanceWindow`]; deserializing recompiles (and re-validates)
/// it, so a snapshot holds only the user's shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MaintenanceWindow", into = "MaintenanceWindow")]
pub struct CompiledWindow {
    source: MaintenanceWindow,
    rule: Rule,
    /// Local seconds after midnight at which occurrences start.
    start_secs: i64,
    duration_secs: i64,
    /// Local minus UTC, seconds.
    offset_secs: i64,
    /// Local day number of `startDate`, if any.
    active_day: Option<i64>,
    /// Blocked local day numbers, inclusive, sorted, merged (never overlapping or adjacent).
    blocked: Vec<(i64, i64)>,
}

impl TryFrom<MaintenanceWindow> for CompiledWindow {
    type Error = String;
    fn try_from(window: MaintenanceWindow) -> Result<Self, String> {
        window.compile()
    }
}

impl From<CompiledWindow> for MaintenanceWindow {
    fn from(compiled: CompiledWindow) -> Self {
        compiled.source
    }
}

impl CompiledWindow {
    /// The window this was compiled from.
    pub fn source(&self) -> &MaintenanceWindow {
        &self.source
    }

    /// The window's fixed UTC offset.
    pub fn utc_offset(&self) -> FixedOffset {
        // Validated to lie within ±14:00.
        i32::try_from(self.offset_secs)
            .ok()
            .and_then(FixedOffset::east_opt)
            .unwrap_or(Utc.fix())
    }

    /// Whether the window is open at `now`.
    pub fn is_open(&self, now: DateTime<Utc>) -> bool {
        let local = now.timestamp() + self.offset_secs;
        let day = local.div_euclid(SECS_PER_DAY);
        self.blocked_span_end(day).is_none() && self.occurrence_containing(local).is_some()
    }

    /// The open interval `[start, end)` containing `now`, if the window is open now: the
    /// occurrence containing `now`, cut to its allowed part by `notAllowedDates`.
    pub fn current(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let local = now.timestamp() + self.offset_secs;
        let day = local.div_euclid(SECS_PER_DAY);
        if self.blocked_span_end(day).is_some() {
            return None;
        }
        let (mut start, mut end) = self.occurrence_containing(local)?;
        // An occurrence covers at most two local days: `day` (allowed) and one neighbour.
        if start < day * SECS_PER_DAY && self.blocked_span_end(day - 1).is_some() {
            start = day * SECS_PER_DAY;
        }
        let tomorrow = (day + 1) * SECS_PER_DAY;
        if end > tomorrow && self.blocked_span_end(day + 1).is_some() {
            end = tomorrow;
        }
        Some((self.to_utc(start)?, self.to_utc(end)?))
    }

    /// The earliest instant `>= now` at which the window is open (`now` itself if open now);
    /// `None` if it does not open within [`HORIZON_DAYS`] days.
    pub fn next_opening(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_opening_within(now, HORIZON_DAYS * SECS_PER_DAY)
    }

    /// Section 6 ordering class at `now`: [`WindowPriority::OpenNow`], [`WindowPriority::OpensSoon`]
    /// (opens at most 4 hours after `now`) or [`WindowPriority::Closed`].
    pub fn priority(&self, now: DateTime<Utc>) -> WindowPriority {
        match self.next_opening_within(now, OPENS_SOON_SECS) {
            Some(t) if t == now => WindowPriority::OpenNow,
            Some(_) => WindowPriority::OpensSoon,
            None => WindowPriority::Closed,
        }
    }

    /// Like [`next_opening`](Self::next_opening) but gives up after `limit_secs` seconds
    /// (an opening exactly `limit_secs` after `now`, in whole seconds, still counts).
    fn next_opening_within(&self, now: DateTime<Utc>, limit_secs: i64) -> Option<DateTime<Utc>> {
        let local = now.timestamp() + self.offset_secs;
        let limit = local.saturating_add(limit_secs);
        // An occurrence that started yesterday may still be open now.
        let mut from_day = local.div_euclid(SECS_PER_DAY) - 1;
        loop {
            let day = self.next_occurrence_day(from_day);
            let start = day * SECS_PER_DAY + self.start_secs;
            if start > limit {
                return None;
            }
            let end = start + self.duration_secs;
            let mut t = start.max(local);
            if t < end {
                match self.blocked_span_end(t.div_euclid(SECS_PER_DAY)) {
                    None => return self.instant(t, local, now, limit),
                    Some(span_end) => {
                        // The day after a merged span is never blocked.
                        t = (span_end + 1) * SECS_PER_DAY;
                        if t < end {
                            return self.instant(t, local, now, limit);
                        }
                        // Occurrences starting before the span's last day lie wholly inside it.
                        from_day = (day + 1).max(span_end);
                        continue;
                    }
                }
            }
            from_day = day + 1;
        }
    }

    /// `now` itself when `t` is `now`'s whole second, else the UTC instant of local `t`.
    fn instant(
        &self,
        t: i64,
        local_now: i64,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Option<DateTime<Utc>> {
        if t > limit {
            None
        } else if t == local_now {
            Some(now)
        } else {
            self.to_utc(t)
        }
    }

    /// The first local day `>= x` with an active occurrence.
    fn next_occurrence_day(&self, x: i64) -> i64 {
        let x = match self.active_day {
            Some(a) => x.max(a),
            None => x,
        };
        self.rule.next_day(x)
    }

    /// The (uncut) occurrence `[start, end)` in local seconds containing local second `t`.
    fn occurrence_containing(&self, t: i64) -> Option<(i64, i64)> {
        let today = t.div_euclid(SECS_PER_DAY);
        // Occurrences are at most 24 h long, so only today's or yesterday's can contain `t`.
        let mut day = self.next_occurrence_day(today - 1);
        for _ in 0..2 {
            let start = day * SECS_PER_DAY + self.start_secs;
            if start > t {
                return None;
            }
            let end = start + self.duration_secs;
            if t < end {
                return Some((start, end));
            }
            day = self.next_occurrence_day(day + 1);
        }
        None
    }

    /// The last day of the `notAllowedDates` span containing local day `day`, if any.
    fn blocked_span_end(&self, day: i64) -> Option<i64> {
        let i = self.blocked.partition_point(|&(_, end)| end < day);
        match self.blocked.get(i) {
            Some(&(start, end)) if start <= day => Some(end),
            _ => None,
        }
    }

    fn to_utc(&self, local: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(local - self.offset_secs, 0)
    }
}

// ---- civil-date arithmetic on day numbers (days since 1970-01-01) ----

/// Monday 0 … Sunday 6; 1970-01-01 was a Thursday.
fn weekday_index(day: i64) -> i64 {
    (day + 3).rem_euclid(7)
}

/// Monday-based week number; week 0 runs Monday 1969-12-29 .. Sunday 1970-01-04.
fn week_index(day: i64) -> i64 {
    (day + 3).div_euclid(7)
}

/// Month number `year * 12 + (month - 1)` of a day.
fn month_index(day: i64) -> i64 {
    let (y, m, _) = civil_from_days(day);
    y * 12 + m - 1
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(year, month 1..=12, day 1..=31)` of a day number (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime};
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .with_timezone(&Utc)
    }

    fn window(v: serde_json::Value) -> MaintenanceWindow {
        serde_json::from_value(v).expect("window JSON")
    }

    fn compiled(v: serde_json::Value) -> CompiledWindow {
        window(v).compile().expect("valid window")
    }

    fn weekly(day: &str, start: &str, hours: u32, offset: &str) -> CompiledWindow {
        compiled(json!({
            "schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": day}},
            "durationHours": hours, "startTime": start, "utcOffset": offset
        }))
    }

    fn errors_of(w: &MaintenanceWindow, path: &str) -> Vec<(String, String)> {
        let mut errors = Errors::default();
        w.validate(path, &mut errors);
        errors.0.into_iter().map(|e| (e.path, e.message)).collect()
    }

    // ---- schedule kinds ----

    #[test]
    fn weekly_window_crossing_midnight_is_open_monday_morning() {
        let w = weekly("Sunday", "22:00", 6, "+00:00");
        assert!(!w.is_open(t("2026-12-06T21:59:59Z")));
        assert!(w.is_open(t("2026-12-06T22:00:00Z")));
        assert!(w.is_open(t("2026-12-07T00:00:00Z")));
        assert!(w.is_open(t("2026-12-07T03:59:59Z")));
        assert!(!w.is_open(t("2026-12-07T04:00:00Z")));
        assert_eq!(
            w.current(t("2026-12-07T01:00:00Z")),
            Some((t("2026-12-06T22:00:00Z"), t("2026-12-07T04:00:00Z")))
        );
        assert_eq!(w.current(t("2026-12-07T04:00:00Z")), None);
        assert_eq!(
            w.next_opening(t("2026-12-07T04:00:00Z")),
            Some(t("2026-12-13T22:00:00Z"))
        );
    }

    #[test]
    fn windows_priority_scenario_facts_hold_at_monday_midnight() {
        let now = t("2026-12-07T00:00:00Z");
        let open = weekly("Sunday", "22:00", 6, "+00:00");
        let soon = weekly("Monday", "02:00", 4, "+00:00");
        let closed = weekly("Wednesday", "00:00", 4, "+00:00");
        assert_eq!(open.priority(now), WindowPriority::OpenNow);
        assert_eq!(soon.priority(now), WindowPriority::OpensSoon);
        assert_eq!(closed.priority(now), WindowPriority::Closed);
        assert_eq!(open.next_opening(now), Some(now));
        assert_eq!(soon.next_opening(now), Some(t("2026-12-07T02:00:00Z")));
        assert_eq!(closed.next_opening(now), Some(t("2026-12-09T00:00:00Z")));
        assert!(closed.is_open(t("2026-12-09T00:00:00Z")));
    }

    #[test]
    fn priority_classes_are_ordered_as_in_spec_section_6() {
        let mut classes = vec![
            WindowPriority::Closed,
            WindowPriority::NoWindow,
            WindowPriority::OpensSoon,
            WindowPriority::OpenNow,
        ];
        classes.sort();
        assert_eq!(
            classes,
            vec![
                WindowPriority::OpenNow,
                WindowPriority::OpensSoon,
                WindowPriority::NoWindow,
                WindowPriority::Closed
            ]
        );
    }

    #[test]
    fn priority_opens_soon_includes_exactly_four_hours_ahead() {
        let w = weekly("Monday", "02:00", 4, "+00:00");
        assert_eq!(
            w.priority(t("2026-12-06T21:59:59Z")),
            WindowPriority::Closed
        );
        assert_eq!(
            w.priority(t("2026-12-06T22:00:00Z")),
            WindowPriority::OpensSoon
        );
        assert_eq!(
            w.priority(t("2026-12-07T01:59:59Z")),
            WindowPriority::OpensSoon
        );
        assert_eq!(
            w.priority(t("2026-12-07T02:00:00Z")),
            WindowPriority::OpenNow
        );
        assert_eq!(
            w.priority(t("2026-12-07T06:00:00Z")),
            WindowPriority::Closed
        );
        // Sub-second: 4 h 0.5 s ahead is no longer "within 4 hours".
        let almost = t("2026-12-06T21:59:59.500Z");
        assert_eq!(w.priority(almost), WindowPriority::Closed);
    }

    #[test]
    fn daily_window_at_minus_five_opens_each_local_evening() {
        // The scenario-format nodeOS example: daily 22:00 for 4 h at -05:00 = 03:00Z..07:00Z.
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 4, "startTime": "22:00", "utcOffset": "-05:00"
        }));
        assert!(!w.is_open(t("2026-12-07T02:59:59Z")));
        assert!(w.is_open(t("2026-12-07T03:00:00Z")));
        assert!(w.is_open(t("2026-12-07T06:59:59Z")));
        assert!(!w.is_open(t("2026-12-07T07:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-07T02:00:00Z")),
            Some(t("2026-12-07T03:00:00Z"))
        );
        assert_eq!(
            w.next_opening(t("2026-12-07T07:00:00Z")),
            Some(t("2026-12-08T03:00:00Z"))
        );
        assert_eq!(
            w.current(t("2026-12-07T05:00:00Z")),
            Some((t("2026-12-07T03:00:00Z"), t("2026-12-07T07:00:00Z")))
        );
    }

    #[test]
    fn daily_24_hour_window_is_always_open_and_reports_one_occurrence() {
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 24, "startTime": "06:00"
        }));
        for s in [
            "2026-12-07T00:00:00Z",
            "2026-12-07T05:59:59Z",
            "2026-12-07T06:00:00Z",
        ] {
            assert!(w.is_open(t(s)), "{s}");
            assert_eq!(w.next_opening(t(s)), Some(t(s)));
        }
        assert_eq!(
            w.current(t("2026-12-07T06:00:00Z")),
            Some((t("2026-12-07T06:00:00Z"), t("2026-12-08T06:00:00Z")))
        );
    }

    #[test]
    fn absolute_monthly_window_opens_on_its_day_of_month() {
        let w = compiled(json!({
            "schedule": {"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 15}},
            "durationHours": 4, "startTime": "01:00"
        }));
        assert!(w.is_open(t("2026-12-15T01:00:00Z")));
        assert!(!w.is_open(t("2026-12-15T05:00:00Z")));
        assert!(!w.is_open(t("2026-12-16T01:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-15T05:00:00Z")),
            Some(t("2027-01-15T01:00:00Z"))
        );
    }

    #[test]
    fn relative_monthly_window_opens_on_first_monday() {
        let w = compiled(json!({
            "schedule": {"relativeMonthly": {"intervalMonths": 1, "dayOfWeek": "Monday", "weekIndex": "First"}},
            "durationHours": 4, "startTime": "01:00"
        }));
        assert!(w.is_open(t("2026-12-07T02:00:00Z")));
        assert!(!w.is_open(t("2026-12-14T02:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-08T00:00:00Z")),
            Some(t("2027-01-04T01:00:00Z"))
        );
    }

    #[test]
    fn relative_monthly_fourth_and_last_differ_in_a_month_with_five_fridays() {
        let mk = |idx: &str| {
            compiled(json!({
                "schedule": {"relativeMonthly": {"intervalMonths": 1, "dayOfWeek": "Friday", "weekIndex": idx}},
                "durationHours": 4, "startTime": "01:00"
            }))
        };
        let (fourth, last) = (mk("Fourth"), mk("Last"));
        let jan1 = t("2027-01-01T00:00:00Z");
        assert_eq!(fourth.next_opening(jan1), Some(t("2027-01-22T01:00:00Z")));
        assert_eq!(last.next_opening(jan1), Some(t("2027-01-29T01:00:00Z")));
        // December 2026 has four Fridays: both land on the 25th.
        let dec1 = t("2026-12-01T00:00:00Z");
        assert_eq!(fourth.next_opening(dec1), Some(t("2026-12-25T01:00:00Z")));
        assert_eq!(last.next_opening(dec1), Some(t("2026-12-25T01:00:00Z")));
        // Last Tuesday of February 2028 is the leap day.
        let w = compiled(json!({
            "schedule": {"relativeMonthly": {"intervalMonths": 1, "dayOfWeek": "Tuesday", "weekIndex": "Last"}},
            "durationHours": 4, "startTime": "01:00"
        }));
        assert_eq!(
            w.next_opening(t("2028-02-01T00:00:00Z")),
            Some(t("2028-02-29T01:00:00Z"))
        );
    }

    // ---- intervals and startDate ----

    #[test]
    fn daily_interval_3_counts_from_start_date() {
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 3}},
            "durationHours": 4, "startTime": "01:00", "startDate": "2026-12-02"
        }));
        assert!(w.is_open(t("2026-12-02T02:00:00Z")));
        assert!(!w.is_open(t("2026-12-03T02:00:00Z")));
        assert!(!w.is_open(t("2026-12-04T02:00:00Z")));
        assert!(w.is_open(t("2026-12-05T02:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-02T05:00:00Z")),
            Some(t("2026-12-05T01:00:00Z"))
        );
    }

    #[test]
    fn window_is_inactive_before_start_date() {
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 3}},
            "durationHours": 4, "startTime": "01:00", "startDate": "2026-12-02"
        }));
        // 2026-11-29 is three days before the start date: it would be period -1.
        assert!(!w.is_open(t("2026-11-29T02:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-11-01T00:00:00Z")),
            Some(t("2026-12-02T01:00:00Z"))
        );
        // An occurrence that starts before startDate does not count even after midnight.
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 6, "startTime": "22:00", "startDate": "2026-12-02"
        }));
        assert!(!w.is_open(t("2026-12-02T01:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-02T00:00:00Z")),
            Some(t("2026-12-02T22:00:00Z"))
        );
    }

    #[test]
    fn weekly_interval_2_counts_from_the_monday_week_of_start_date() {
        // startDate Tuesday 2026-12-01 lies in the week of Monday 2026-11-30 (period 0).
        let w = compiled(json!({
            "schedule": {"weekly": {"intervalWeeks": 2, "dayOfWeek": "Wednesday"}},
            "durationHours": 4, "startTime": "00:00", "startDate": "2026-12-01"
        }));
        assert!(w.is_open(t("2026-12-02T01:00:00Z")));
        assert!(!w.is_open(t("2026-12-09T01:00:00Z")));
        assert!(w.is_open(t("2026-12-16T01:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-03T00:00:00Z")),
            Some(t("2026-12-16T00:00:00Z"))
        );
        assert_eq!(
            w.next_opening(t("2026-12-17T00:00:00Z")),
            Some(t("2026-12-30T00:00:00Z"))
        );
    }

    #[test]
    fn weekly_day_before_start_date_in_its_week_waits_a_full_interval() {
        // startDate Thursday 2026-12-03: Wednesday 12-02 is before it, so period 0 has no
        // occurrence and the first one is in period 2 (Wednesday 12-16).
        let w = compiled(json!({
            "schedule": {"weekly": {"intervalWeeks": 2, "dayOfWeek": "Wednesday"}},
            "durationHours": 4, "startTime": "00:00", "startDate": "2026-12-03"
        }));
        assert_eq!(
            w.next_opening(t("2026-11-01T00:00:00Z")),
            Some(t("2026-12-16T00:00:00Z"))
        );
    }

    #[test]
    fn absolute_monthly_intervals_2_and_3_count_from_start_date_month() {
        // Period 0 is November 2026, but the 15th is before startDate: first is January 2027.
        let w2 = compiled(json!({
            "schedule": {"absoluteMonthly": {"intervalMonths": 2, "dayOfMonth": 15}},
            "durationHours": 4, "startTime": "01:00", "startDate": "2026-11-20"
        }));
        assert_eq!(
            w2.next_opening(t("2026-11-01T00:00:00Z")),
            Some(t("2027-01-15T01:00:00Z"))
        );
        assert!(!w2.is_open(t("2026-12-15T02:00:00Z")));
        assert_eq!(
            w2.next_opening(t("2027-01-15T05:00:00Z")),
            Some(t("2027-03-15T01:00:00Z"))
        );
        let w3 = compiled(json!({
            "schedule": {"absoluteMonthly": {"intervalMonths": 3, "dayOfMonth": 15}},
            "durationHours": 4, "startTime": "01:00", "startDate": "2026-12-01"
        }));
        assert!(w3.is_open(t("2026-12-15T02:00:00Z")));
        assert!(!w3.is_open(t("2027-01-15T02:00:00Z")));
        assert!(!w3.is_open(t("2027-02-15T02:00:00Z")));
        assert_eq!(
            w3.next_opening(t("2026-12-16T00:00:00Z")),
            Some(t("2027-03-15T01:00:00Z"))
        );
    }

    #[test]
    fn relative_monthly_interval_2_counts_from_start_date_month() {
        let w = compiled(json!({
            "schedule": {"relativeMonthly": {"intervalMonths": 2, "dayOfWeek": "Monday", "weekIndex": "First"}},
            "durationHours": 4, "startTime": "01:00", "startDate": "2026-12-01"
        }));
        assert!(w.is_open(t("2026-12-07T02:00:00Z")));
        assert!(!w.is_open(t("2027-01-04T02:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-08T00:00:00Z")),
            Some(t("2027-02-01T01:00:00Z"))
        );
    }

    // ---- month ends, leap years, year boundaries ----

    #[test]
    fn absolute_monthly_31_falls_on_the_last_day_of_shorter_months() {
        let w = compiled(json!({
            "schedule": {"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 31}},
            "durationHours": 4, "startTime": "01:00"
        }));
        let cases = [
            ("2027-01-01T00:00:00Z", "2027-01-31T01:00:00Z"),
            ("2027-02-01T00:00:00Z", "2027-02-28T01:00:00Z"),
            ("2027-04-01T00:00:00Z", "2027-04-30T01:00:00Z"),
            ("2028-02-01T00:00:00Z", "2028-02-29T01:00:00Z"),
            ("2027-01-31T05:00:00Z", "2027-02-28T01:00:00Z"),
        ];
        for (from, want) in cases {
            assert_eq!(w.next_opening(t(from)), Some(t(want)), "from {from}");
        }
        assert!(!w.is_open(t("2027-04-29T02:00:00Z")));
    }

    #[test]
    fn absolute_monthly_30_in_february_uses_28th_or_leap_day_29th() {
        let w = compiled(json!({
            "schedule": {"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 30}},
            "durationHours": 4, "startTime": "01:00"
        }));
        assert!(w.is_open(t("2027-02-28T02:00:00Z")));
        assert!(w.is_open(t("2028-02-29T02:00:00Z")));
        assert!(!w.is_open(t("2028-02-28T02:00:00Z")));
        assert_eq!(
            w.next_opening(t("2028-02-29T05:00:00Z")),
            Some(t("2028-03-30T01:00:00Z"))
        );
    }

    #[test]
    fn leap_day_2028_hosts_weekly_and_daily_occurrences() {
        let w = weekly("Tuesday", "23:00", 4, "+00:00");
        assert!(w.is_open(t("2028-02-29T23:30:00Z")));
        assert!(w.is_open(t("2028-03-01T02:59:59Z")));
        assert_eq!(
            w.next_opening(t("2028-02-23T03:00:00Z")),
            Some(t("2028-02-29T23:00:00Z"))
        );
        // Daily every 2 days from 2028-02-27: 27th, 29th, March 2nd.
        let d = compiled(json!({
            "schedule": {"daily": {"intervalDays": 2}},
            "durationHours": 4, "startTime": "00:00", "startDate": "2028-02-27"
        }));
        assert!(d.is_open(t("2028-02-29T01:00:00Z")));
        assert!(!d.is_open(t("2028-03-01T01:00:00Z")));
        assert!(d.is_open(t("2028-03-02T01:00:00Z")));
    }

    #[test]
    fn occurrences_cross_the_year_boundary() {
        let w = weekly("Thursday", "23:00", 6, "+00:00");
        assert!(w.is_open(t("2027-01-01T04:59:59Z")));
        assert_eq!(
            w.current(t("2027-01-01T00:00:00Z")),
            Some((t("2026-12-31T23:00:00Z"), t("2027-01-01T05:00:00Z")))
        );
        let d = compiled(json!({
            "schedule": {"daily": {"intervalDays": 3}},
            "durationHours": 4, "startTime": "01:00", "startDate": "2026-12-30"
        }));
        assert_eq!(
            d.next_opening(t("2026-12-31T00:00:00Z")),
            Some(t("2027-01-02T01:00:00Z"))
        );
        let m = compiled(json!({
            "schedule": {"absoluteMonthly": {"intervalMonths": 2, "dayOfMonth": 1}},
            "durationHours": 4, "startTime": "01:00", "startDate": "2026-11-01"
        }));
        assert_eq!(
            m.next_opening(t("2026-11-02T00:00:00Z")),
            Some(t("2027-01-01T01:00:00Z"))
        );
    }

    // ---- offsets ----

    #[test]
    fn plus_fourteen_monday_window_opens_on_sunday_utc() {
        let w = weekly("Monday", "00:00", 4, "+14:00");
        assert_eq!(
            w.next_opening(t("2026-12-06T00:00:00Z")),
            Some(t("2026-12-06T10:00:00Z"))
        );
        assert!(w.is_open(t("2026-12-06T13:59:59Z")));
        assert!(!w.is_open(t("2026-12-07T01:00:00Z")));
    }

    #[test]
    fn minus_fourteen_sunday_window_opens_on_monday_utc() {
        let w = weekly("Sunday", "20:00", 4, "-14:00");
        assert_eq!(
            w.next_opening(t("2026-12-07T00:00:00Z")),
            Some(t("2026-12-07T10:00:00Z"))
        );
        assert!(w.is_open(t("2026-12-07T13:00:00Z")));
        assert!(!w.is_open(t("2026-12-06T21:00:00Z")));
    }

    #[test]
    fn plus_five_thirty_daily_window_opens_the_previous_utc_evening() {
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 4, "startTime": "01:00", "utcOffset": "+05:30"
        }));
        assert!(!w.is_open(t("2026-12-06T19:29:59Z")));
        assert_eq!(
            w.current(t("2026-12-06T20:00:00Z")),
            Some((t("2026-12-06T19:30:00Z"), t("2026-12-06T23:30:00Z")))
        );
    }

    #[test]
    fn minus_five_not_allowed_date_is_a_local_date() {
        // Local 2026-12-24 at -05:00 is 2026-12-24T05:00Z .. 2026-12-25T05:00Z.
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 4, "startTime": "22:00", "utcOffset": "-05:00",
            "notAllowedDates": [{"start": "2026-12-24", "end": "2026-12-24"}]
        }));
        // The 12-23 local occurrence (03:00Z..07:00Z on 12-24) is cut at local midnight.
        assert_eq!(
            w.current(t("2026-12-24T04:00:00Z")),
            Some((t("2026-12-24T03:00:00Z"), t("2026-12-24T05:00:00Z")))
        );
        assert!(!w.is_open(t("2026-12-24T05:00:00Z")));
        // The 12-24 local occurrence keeps only its 12-25 part.
        assert_eq!(
            w.next_opening(t("2026-12-24T05:00:00Z")),
            Some(t("2026-12-25T05:00:00Z"))
        );
        assert_eq!(
            w.current(t("2026-12-25T06:00:00Z")),
            Some((t("2026-12-25T05:00:00Z"), t("2026-12-25T07:00:00Z")))
        );
    }

    // ---- notAllowedDates ----

    #[test]
    fn not_allowed_dates_skip_a_whole_occurrence() {
        let w = compiled(json!({
            "schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Saturday"}},
            "durationHours": 6, "startTime": "01:00", "utcOffset": "+00:00",
            "startDate": "2026-12-01",
            "notAllowedDates": [{"start": "2026-12-24", "end": "2026-12-26"}]
        }));
        assert!(w.is_open(t("2026-12-19T02:00:00Z")));
        assert!(!w.is_open(t("2026-12-26T02:00:00Z")));
        assert_eq!(
            w.next_opening(t("2026-12-20T00:00:00Z")),
            Some(t("2027-01-02T01:00:00Z"))
        );
        assert_eq!(
            w.priority(t("2026-12-26T00:00:00Z")),
            WindowPriority::Closed
        );
    }

    #[test]
    fn not_allowed_dates_cut_an_overlapping_occurrence() {
        // The day after the occurrence start is blocked: only Sunday 22:00..24:00 remains.
        let end_cut = compiled(json!({
            "schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Sunday"}},
            "durationHours": 6, "startTime": "22:00",
            "notAllowedDates": [{"start": "2026-12-07", "end": "2026-12-07"}]
        }));
        assert_eq!(
            end_cut.current(t("2026-12-06T23:00:00Z")),
            Some((t("2026-12-06T22:00:00Z"), t("2026-12-07T00:00:00Z")))
        );
        assert!(!end_cut.is_open(t("2026-12-07T01:00:00Z")));
        // The start day is blocked: only Monday 00:00..04:00 remains.
        let start_cut = compiled(json!({
            "schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Sunday"}},
            "durationHours": 6, "startTime": "22:00",
            "notAllowedDates": [{"start": "2026-12-06", "end": "2026-12-06"}]
        }));
        assert!(!start_cut.is_open(t("2026-12-06T23:00:00Z")));
        assert_eq!(
            start_cut.next_opening(t("2026-12-06T21:00:00Z")),
            Some(t("2026-12-07T00:00:00Z"))
        );
        assert_eq!(
            start_cut.current(t("2026-12-07T01:00:00Z")),
            Some((t("2026-12-07T00:00:00Z"), t("2026-12-07T04:00:00Z")))
        );
    }

    #[test]
    fn next_opening_jumps_past_a_long_not_allowed_span() {
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 6, "startTime": "22:00",
            "notAllowedDates": [
                {"start": "2026-12-27", "end": "2027-01-03"},
                {"start": "2026-12-20", "end": "2026-12-26"},
                {"start": "2027-01-02", "end": "2027-01-02"}
            ]
        }));
        // Jan 3's occurrence (22:00..04:00) keeps its Jan 4 part.
        assert_eq!(
            w.next_opening(t("2026-12-20T00:00:00Z")),
            Some(t("2027-01-04T00:00:00Z"))
        );
        assert_eq!(
            w.next_opening(t("2026-12-19T23:00:00Z")),
            Some(t("2026-12-19T23:00:00Z"))
        );
        assert_eq!(
            w.current(t("2026-12-19T23:00:00Z")),
            Some((t("2026-12-19T22:00:00Z"), t("2026-12-20T00:00:00Z")))
        );
    }

    #[test]
    fn not_allowed_dates_follow_the_aks_documentation_example() {
        // AKS: with +02:00 and 2022-12-23..2023-01-03, maintenance is blocked from
        // 2022-12-22 22:00 UTC to 2023-01-03 22:00 UTC.
        let w = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 24, "startTime": "00:00", "utcOffset": "+02:00",
            "notAllowedDates": [{"start": "2022-12-23", "end": "2023-01-03"}]
        }));
        assert!(w.is_open(t("2022-12-22T21:59:59Z")));
        assert!(!w.is_open(t("2022-12-22T22:00:00Z")));
        assert!(!w.is_open(t("2023-01-03T21:59:59Z")));
        assert!(w.is_open(t("2023-01-03T22:00:00Z")));
        assert_eq!(
            w.next_opening(t("2022-12-25T00:00:00Z")),
            Some(t("2023-01-03T22:00:00Z"))
        );
        assert_eq!(
            w.current(t("2022-12-22T12:00:00Z")),
            Some((t("2022-12-21T22:00:00Z"), t("2022-12-22T22:00:00Z")))
        );
    }

    // ---- horizon, sub-second instants ----

    #[test]
    fn next_opening_gives_up_after_ten_years() {
        let far = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 4, "startTime": "00:00", "startDate": "2040-01-01"
        }));
        assert_eq!(far.next_opening(t("2026-12-07T00:00:00Z")), None);
        assert_eq!(
            far.priority(t("2026-12-07T00:00:00Z")),
            WindowPriority::Closed
        );
        let near = compiled(json!({
            "schedule": {"daily": {"intervalDays": 1}},
            "durationHours": 4, "startTime": "00:00", "startDate": "2035-01-01"
        }));
        assert_eq!(
            near.next_opening(t("2026-12-07T00:00:00Z")),
            Some(t("2035-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn next_opening_returns_now_itself_inside_an_occurrence() {
        let w = weekly("Monday", "02:00", 4, "+00:00");
        let now = t("2026-12-07T03:00:00.123456789Z");
        assert!(w.is_open(now));
        assert_eq!(w.next_opening(now), Some(now));
        let before = t("2026-12-07T01:59:59.999Z");
        assert!(!w.is_open(before));
        assert_eq!(w.next_opening(before), Some(t("2026-12-07T02:00:00Z")));
    }

    // ---- ScheduledStart helper ----

    #[test]
    fn next_weekly_occurrence_finds_tuesday_nine_at_plus_one() {
        let plus_one = parse_utc_offset("+01:00").unwrap();
        let created = t("2026-12-07T05:00:00Z");
        let at = next_weekly_occurrence(DayOfWeek::Tuesday, 9, 0, plus_one, created);
        assert_eq!(at, t("2026-12-08T08:00:00Z"));
        // Exactly an occurrence: that instant.
        assert_eq!(
            next_weekly_occurrence(DayOfWeek::Tuesday, 9, 0, plus_one, at),
            at
        );
        // One second later: a week later.
        assert_eq!(
            next_weekly_occurrence(
                DayOfWeek::Tuesday,
                9,
                0,
                plus_one,
                at + Duration::seconds(1)
            ),
            t("2026-12-15T08:00:00Z")
        );
        // Same weekday, later time today.
        assert_eq!(
            next_weekly_occurrence(DayOfWeek::Monday, 9, 0, plus_one, created),
            t("2026-12-07T08:00:00Z")
        );
        // Local date differs from UTC date: Monday 05:00Z is Monday 19:00 at +14:00.
        let plus_14 = parse_utc_offset("+14:00").unwrap();
        assert_eq!(
            next_weekly_occurrence(DayOfWeek::Tuesday, 0, 30, plus_14, created),
            t("2026-12-07T10:30:00Z")
        );
    }

    // ---- parsing and validation ----

    #[test]
    fn utc_offsets_parse_within_fourteen_hours() {
        assert_eq!(
            parse_utc_offset("+05:30").unwrap().local_minus_utc(),
            5 * 3600 + 1800
        );
        assert_eq!(
            parse_utc_offset("-14:00").unwrap().local_minus_utc(),
            -14 * 3600
        );
        assert_eq!(
            parse_utc_offset("+14:00").unwrap().local_minus_utc(),
            14 * 3600
        );
        assert_eq!(parse_utc_offset("-00:00").unwrap().local_minus_utc(), 0);
        for bad in [
            "+14:30", "-15:00", "+5:30", "05:30", "+05:60", "+0530", "", "+05:3x",
        ] {
            assert!(parse_utc_offset(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_utc_offset("+15:00").unwrap_err(),
            "\"+15:00\" is outside -14:00..=+14:00"
        );
    }

    #[test]
    fn start_times_parse_as_hh_mm() {
        assert_eq!(parse_hh_mm("00:00"), Ok((0, 0)));
        assert_eq!(parse_hh_mm("23:59"), Ok((23, 59)));
        for bad in ["24:00", "1:00", "12:60", "12-00", "12:00:00", ""] {
            assert!(parse_hh_mm(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation_reports_every_broken_rule_with_its_path() {
        let w = window(json!({
            "schedule": {"weekly": {"intervalWeeks": 5, "dayOfWeek": "Monday"}},
            "durationHours": 3, "startTime": "25:00", "utcOffset": "+15:00",
            "startDate": "2026-02-30",
            "notAllowedDates": [
                {"start": "2026-12-24", "end": "2026-12-26"},
                {"start": "2026-12-26", "end": "2026-12-24"},
                {"start": "20261224", "end": "2026-13-01"}
            ]
        }));
        let p = "members[2].maintenance.kubernetes";
        let got = errors_of(&w, p);
        let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "members[2].maintenance.kubernetes.schedule.weekly.intervalWeeks",
                "members[2].maintenance.kubernetes.durationHours",
                "members[2].maintenance.kubernetes.startTime",
                "members[2].maintenance.kubernetes.utcOffset",
                "members[2].maintenance.kubernetes.startDate",
                "members[2].maintenance.kubernetes.notAllowedDates[1].end",
                "members[2].maintenance.kubernetes.notAllowedDates[2].start",
                "members[2].maintenance.kubernetes.notAllowedDates[2].end",
            ]
        );
        assert_eq!(got[0].1, "5 is outside 1..=4");
        assert_eq!(got[1].1, "3 is outside 4..=24");
        assert_eq!(got[5].1, "2026-12-24 is before start 2026-12-26");
        assert!(w.compile().is_err());
    }

    #[test]
    fn validation_checks_each_schedule_kind_ranges() {
        let cases = [
            (
                json!({"daily": {"intervalDays": 8}}),
                "w.schedule.daily.intervalDays",
                "8 is outside 1..=7",
            ),
            (
                json!({"daily": {"intervalDays": 0}}),
                "w.schedule.daily.intervalDays",
                "0 is outside 1..=7",
            ),
            (
                json!({"absoluteMonthly": {"intervalMonths": 7, "dayOfMonth": 1}}),
                "w.schedule.absoluteMonthly.intervalMonths",
                "7 is outside 1..=6",
            ),
            (
                json!({"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 32}}),
                "w.schedule.absoluteMonthly.dayOfMonth",
                "32 is outside 1..=31",
            ),
            (
                json!({"relativeMonthly": {"intervalMonths": 0, "dayOfWeek": "Friday", "weekIndex": "Last"}}),
                "w.schedule.relativeMonthly.intervalMonths",
                "0 is outside 1..=6",
            ),
        ];
        for (schedule, path, message) in cases {
            let w = window(json!({"schedule": schedule, "durationHours": 4, "startTime": "00:00"}));
            assert_eq!(
                errors_of(&w, "w"),
                vec![(path.to_string(), message.to_string())]
            );
        }
        let w = window(json!({
            "schedule": {"daily": {"intervalDays": 1}}, "durationHours": 25, "startTime": "00:00"
        }));
        assert_eq!(
            errors_of(&w, ""),
            vec![(
                "durationHours".to_string(),
                "25 is outside 4..=24".to_string()
            )]
        );
        assert_eq!(
            w.compile().unwrap_err(),
            "durationHours: 25 is outside 4..=24"
        );
    }

    // ---- serde ----

    #[test]
    fn serde_round_trips_the_yaml_shaped_window() {
        let v = json!({
            "schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Saturday"}},
            "durationHours": 6, "startTime": "01:00", "utcOffset": "+00:00",
            "startDate": "2026-12-01",
            "notAllowedDates": [{"start": "2026-12-24", "end": "2026-12-26"}]
        });
        let w = window(v.clone());
        assert_eq!(
            w.schedule,
            Schedule::Weekly {
                interval_weeks: 1,
                day_of_week: DayOfWeek::Saturday
            }
        );
        assert_eq!(serde_json::to_value(&w).unwrap(), v);
        // Optional fields are omitted when absent.
        let minimal = json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": 4, "startTime": "22:00"});
        assert_eq!(
            serde_json::to_value(window(minimal.clone())).unwrap(),
            minimal
        );
        for s in [
            json!({"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 31}}),
            json!({"relativeMonthly": {"intervalMonths": 2, "dayOfWeek": "Sunday", "weekIndex": "Fourth"}}),
        ] {
            let sched: Schedule = serde_json::from_value(s.clone()).unwrap();
            assert_eq!(serde_json::to_value(sched).unwrap(), s);
        }
    }

    #[test]
    fn compiled_window_serializes_as_its_source_and_recompiles() {
        let w = weekly("Sunday", "22:00", 6, "+00:00");
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["startTime"], "22:00");
        let back: CompiledWindow = serde_json::from_value(v).unwrap();
        assert_eq!(back, w);
        let bad = json!({"schedule": {"daily": {"intervalDays": 9}}, "durationHours": 4, "startTime": "22:00"});
        let err = serde_json::from_value::<CompiledWindow>(bad).unwrap_err();
        assert!(err.to_string().contains("intervalDays"), "{err}");
    }

    #[test]
    fn day_of_week_converts_to_chrono_weekday() {
        assert_eq!(DayOfWeek::Monday.to_weekday(), Weekday::Mon);
        assert_eq!(Weekday::from(DayOfWeek::Sunday), Weekday::Sun);
        assert_eq!(DayOfWeek::from_weekday(Weekday::Wed), DayOfWeek::Wednesday);
    }

    #[test]
    fn civil_day_arithmetic_matches_chrono() {
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for day in (-800_000..800_000).step_by(97) {
            let date = epoch + Duration::days(day);
            let (y, m, d) = civil_from_days(day);
            assert_eq!(
                (y, m, d),
                (
                    i64::from(date.year()),
                    i64::from(date.month()),
                    i64::from(date.day())
                )
            );
            assert_eq!(days_from_civil(y, m, d), day);
            assert_eq!(
                weekday_index(day),
                i64::from(date.weekday().num_days_from_monday())
            );
        }
    }

    // ---- brute-force cross-check against an independent chrono-based oracle ----

    /// Whether `w` is open at `at`, computed naively with chrono's calendar.
    fn oracle_open(w: &MaintenanceWindow, at: DateTime<Utc>) -> bool {
        let offset = parse_utc_offset(w.utc_offset.as_deref().unwrap_or("+00:00")).unwrap();
        let local: NaiveDateTime = at.with_timezone(&offset).naive_local();
        let date = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let today = local.date();
        if w.not_allowed_dates
            .iter()
            .any(|s| date(&s.start) <= today && today <= date(&s.end))
        {
            return false;
        }
        let start = w.start_date.as_deref().map(date);
        let anchor = start.unwrap_or(NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
        let (hh, mm) = parse_hh_mm(&w.start_time).unwrap();
        let tod = NaiveTime::from_hms_opt(hh, mm, 0).unwrap();
        let monday =
            |d: NaiveDate| d - Duration::days(i64::from(d.weekday().num_days_from_monday()));
        let months = |d: NaiveDate| i64::from(d.year()) * 12 + i64::from(d.month0());
        let months_ok =
            |d: NaiveDate, n: u32| (months(d) - months(anchor)).rem_euclid(i64::from(n)) == 0;
        let occurs = |d: NaiveDate| -> bool {
            if start.is_some_and(|s| d < s) {
                return false;
            }
            match &w.schedule {
                Schedule::Daily { interval_days } => {
                    (d - anchor)
                        .num_days()
                        .rem_euclid(i64::from(*interval_days))
                        == 0
                }
                Schedule::Weekly {
                    interval_weeks,
                    day_of_week,
                } => {
                    d.weekday() == day_of_week.to_weekday()
                        && ((monday(d) - monday(anchor)).num_days() / 7)
                            .rem_euclid(i64::from(*interval_weeks))
                            == 0
                }
                Schedule::AbsoluteMonthly {
                    interval_months,
                    day_of_month,
                } => {
                    let mut dom = *day_of_month;
                    while NaiveDate::from_ymd_opt(d.year(), d.month(), dom).is_none() {
                        dom -= 1;
                    }
                    months_ok(d, *interval_months) && d.day() == dom
                }
                Schedule::RelativeMonthly {
                    interval_months,
                    day_of_week,
                    week_index,
                } => {
                    let nth_ok = match week_index {
                        WeekIndex::First => d.day() <= 7,
                        WeekIndex::Second => (8..=14).contains(&d.day()),
                        WeekIndex::Third => (15..=21).contains(&d.day()),
                        WeekIndex::Fourth => (22..=28).contains(&d.day()),
                        WeekIndex::Last => (d + Duration::days(7)).month() != d.month(),
                    };
                    months_ok(d, *interval_months)
                        && d.weekday() == day_of_week.to_weekday()
                        && nth_ok
                }
            }
        };
        [today.pred_opt().unwrap(), today].into_iter().any(|d| {
            let s = d.and_time(tod);
            let e = s + Duration::hours(i64::from(w.duration_hours));
            occurs(d) && s <= local && local < e
        })
    }

    #[test]
    fn queries_agree_with_minute_by_minute_brute_force() {
        let windows = [
            json!({"schedule": {"weekly": {"intervalWeeks": 2, "dayOfWeek": "Sunday"}},
                   "durationHours": 6, "startTime": "22:00", "utcOffset": "+05:30", "startDate": "2026-12-03",
                   "notAllowedDates": [{"start": "2026-12-28", "end": "2027-01-04"}]}),
            json!({"schedule": {"daily": {"intervalDays": 3}},
                   "durationHours": 24, "startTime": "13:45", "utcOffset": "-14:00",
                   "notAllowedDates": [{"start": "2026-12-10", "end": "2026-12-11"}, {"start": "2028-02-28", "end": "2028-02-28"}]}),
            json!({"schedule": {"daily": {"intervalDays": 1}},
                   "durationHours": 24, "startTime": "00:00", "utcOffset": "+14:00",
                   "notAllowedDates": [{"start": "2026-12-24", "end": "2026-12-26"}, {"start": "2028-02-29", "end": "2028-03-01"}]}),
            json!({"schedule": {"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 31}},
                   "durationHours": 8, "startTime": "20:00", "utcOffset": "-05:00"}),
            json!({"schedule": {"absoluteMonthly": {"intervalMonths": 1, "dayOfMonth": 29}},
                   "durationHours": 12, "startTime": "23:59", "utcOffset": "+09:00"}),
            json!({"schedule": {"relativeMonthly": {"intervalMonths": 1, "dayOfWeek": "Tuesday", "weekIndex": "Last"}},
                   "durationHours": 5, "startTime": "21:00", "utcOffset": "+14:00",
                   "notAllowedDates": [{"start": "2027-01-27", "end": "2027-01-27"}]}),
            json!({"schedule": {"relativeMonthly": {"intervalMonths": 1, "dayOfWeek": "Friday", "weekIndex": "Fourth"}},
                   "durationHours": 4, "startTime": "00:30", "utcOffset": "-09:30", "startDate": "2026-12-10"}),
            json!({"schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Monday"}},
                   "durationHours": 4, "startTime": "02:00"}),
        ];
        let ranges = [t("2026-11-20T00:00:00Z"), t("2028-01-20T00:00:00Z")];
        let minutes: i64 = 60 * 24 * 60;
        for v in &windows {
            let w = window(v.clone());
            let c = w.compile().unwrap();
            let touching = matches!(w.schedule, Schedule::Daily { interval_days: 1 })
                && w.duration_hours == 24;
            for &from in &ranges {
                let at = |i: i64| from + Duration::minutes(i);
                let open: Vec<bool> = (0..minutes).map(|i| oracle_open(&w, at(i))).collect();
                assert!(open.iter().any(|&o| o), "{v} never opens from {from}");
                assert!(open.iter().any(|&o| !o) || touching, "{v} never closes");
                // next_open[i]: first open minute >= i, if within the range.
                let mut next_open = vec![None; minutes as usize];
                let mut next = None;
                for i in (0..minutes as usize).rev() {
                    if open[i] {
                        next = Some(i as i64);
                    }
                    next_open[i] = next;
                }
                for i in 0..minutes {
                    let now = at(i);
                    let o = open[i as usize];
                    assert_eq!(c.is_open(now), o, "{v} is_open at {now}");
                    let got = c.next_opening(now);
                    match next_open[i as usize] {
                        Some(j) => assert_eq!(got, Some(at(j)), "{v} next_opening at {now}"),
                        None => assert!(got.is_some_and(|g| g >= at(minutes)), "{v} at {now}"),
                    }
                    let want_priority = match next_open[i as usize] {
                        Some(j) if j == i => WindowPriority::OpenNow,
                        Some(j) if j - i <= 240 => WindowPriority::OpensSoon,
                        _ => WindowPriority::Closed,
                    };
                    // Near the end of the range the oracle cannot see a later opening.
                    if next_open[i as usize].is_some() || i + 240 < minutes {
                        assert_eq!(c.priority(now), want_priority, "{v} priority at {now}");
                    }
                    if o && !touching {
                        // current() is the maximal run of open minutes around now.
                        let (s, e) = c.current(now).expect("open");
                        let mut lo = i;
                        while lo > 0 && open[lo as usize - 1] {
                            lo -= 1;
                        }
                        let mut hi = i;
                        while hi < minutes && open[hi as usize] {
                            hi += 1;
                        }
                        if lo > 0 {
                            assert_eq!(s, at(lo), "{v} current start at {now}");
                        }
                        if hi < minutes {
                            assert_eq!(e, at(hi), "{v} current end at {now}");
                        }
                    } else if !o {
                        assert_eq!(c.current(now), None);
                    }
                }
            }
        }
    }
}
