//! The fleet clock. In real time it is the system clock. With `--time-scale N` (demos, tests) it
//! runs N times faster than real time from an origin kept in the store (`meta.clock_origin`,
//! `meta.clock_scale`), so a restarted daemon continues the same fleet time, and a changed scale
//! continues from where the old one had got to. It never goes backwards within a process (it is
//! read from a monotonic clock after the start).
//!
//! The origin's real instant is kept to the nanosecond (`REAL_MS.NNNNNN:FLEET_MS`; an origin
//! written as whole milliseconds is read too). At scale 1000 a millisecond of real time is a
//! second of fleet time, so an origin rounded to the millisecond would let a resumed clock start
//! up to a fleet second behind where the previous one had got to.

use crate::clock::{Clock, SystemClock};
use crate::store::{meta, Store, StoreError};
use std::time::{Duration, Instant};

/// Fleet time: `fleet_at_start + (monotonic elapsed) × scale`.
#[derive(Clone, Copy, Debug)]
pub struct FleetClock {
    start: Instant,
    fleet_at_start_ms: i64,
    scale: f64,
}

fn system_ms() -> i64 {
    SystemClock.now_ms()
}

/// The system clock in nanoseconds since the epoch.
fn system_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Fleet time `elapsed_ns` of real time after fleet instant `fleet_ms`, at `scale` (rounded
/// down, so two spans one after the other never add up to more than the whole).
fn fleet_after(fleet_ms: i64, elapsed_ns: i64, scale: f64) -> i64 {
    fleet_ms.saturating_add((elapsed_ns.max(0) as f64 * scale / 1e6) as i64)
}

/// `meta.clock_origin`: the real instant (milliseconds with a six-digit fraction) and the
/// fleet instant it stands for.
fn format_origin(real_ns: i64, fleet_ms: i64) -> String {
    format!(
        "{}.{:06}:{fleet_ms}",
        real_ns.div_euclid(1_000_000),
        real_ns.rem_euclid(1_000_000)
    )
}

impl FleetClock {
    /// Real time: the system clock's reading now, moving at scale 1.
    pub fn real_time() -> FleetClock {
        FleetClock {
            start: Instant::now(),
            fleet_at_start_ms: system_ms(),
            scale: 1.0,
        }
    }

    /// The fleet clock several replicas share (PostgreSQL): the first to start settles its
    /// origin and scale ([`crate::store::PgStore::settle_meta`]), every other reads them. A
    /// replica started at another scale than the fleet's is refused: replicas whose clocks
    /// disagreed would disagree on when everything is due — unless none runs (no replica
    /// leads): then, as [`FleetClock::resume`] does, the clock goes on from where it had got
    /// to at the new scale.
    pub fn shared(
        store: &mut crate::store::PgStore,
        scale: f64,
        start_ms: Option<i64>,
    ) -> Result<FleetClock, StoreError> {
        let real_now = system_ns();
        let origin = store.settle_meta(
            meta::CLOCK_ORIGIN,
            &format_origin(real_now, start_ms.unwrap_or(real_now.div_euclid(1_000_000))),
        )?;
        let stored_scale = parse_scale(&store.settle_meta(meta::CLOCK_SCALE, &scale.to_string())?)?;
        let (mut real, mut fleet) = parse_origin(&origin)?;
        if stored_scale != scale {
            // Another scale: as on SQLite, the clock goes on from where the old one had got
            // to — but only while no replica leads, since one running at the old scale would
            // disagree on when everything is due.
            let now = system_ns();
            let fleet_now = fleet_after(fleet, now - real, stored_scale);
            let origin = format_origin(now, fleet_now);
            let rebased = store.set_meta_while_nobody_leads(&[
                (meta::CLOCK_ORIGIN, &origin),
                (meta::CLOCK_SCALE, &scale.to_string()),
            ])?;
            if !rebased {
                return Err(StoreError::Invalid(format!(
                    "the fleet's clock runs at time scale {stored_scale}, and this replica was \
                     started at {scale}: start every replica with --time-scale {stored_scale} \
                     (another scale takes effect when no replica is running)"
                )));
            }
            (real, fleet) = (now, fleet_now);
        }
        let (real_now, start) = (system_ns(), Instant::now());
        Ok(FleetClock {
            start,
            fleet_at_start_ms: fleet_after(fleet, real_now - real, scale),
            scale,
        })
    }

    /// The fleet clock of `store`'s fleet at `scale`: it continues from the stored origin. A
    /// fleet without one starts at `start_ms` (or now); a stored origin of another scale is
    /// re-anchored where it had got to. The origin is written to the store.
    pub fn resume(
        store: &mut dyn Store,
        scale: f64,
        start_ms: Option<i64>,
    ) -> Result<FleetClock, StoreError> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(StoreError::Invalid(format!(
                "time scale {scale}: must be a positive number"
            )));
        }
        let (real_now, start) = (system_ns(), Instant::now());
        let stored = match (
            store.meta(meta::CLOCK_ORIGIN)?,
            store.meta(meta::CLOCK_SCALE)?,
        ) {
            (Some(origin), Some(s)) => Some((parse_origin(&origin)?, parse_scale(&s)?)),
            _ => None,
        };
        let fleet_now = match stored {
            Some(((real, fleet), old_scale)) => fleet_after(fleet, real_now - real, old_scale),
            None => start_ms.unwrap_or(real_now.div_euclid(1_000_000)),
        };
        let unchanged = stored.is_some_and(|(_, s)| s == scale);
        if !unchanged {
            store.set_meta(meta::CLOCK_ORIGIN, &format_origin(real_now, fleet_now))?;
            store.set_meta(meta::CLOCK_SCALE, &scale.to_string())?;
        }
        Ok(FleetClock {
            start,
            fleet_at_start_ms: fleet_now,
            scale,
        })
    }

    /// How many times faster than real time it runs.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The real time until fleet instant `fleet_ms` (zero if it has passed).
    pub fn real_until(&self, fleet_ms: i64) -> Duration {
        let left = (fleet_ms - self.now_ms()).max(0) as f64;
        Duration::from_secs_f64(left / self.scale / 1000.0)
    }

    /// A fleet-time span in real time.
    pub fn real_span(&self, fleet_seconds: u64) -> Duration {
        Duration::from_secs_f64(fleet_seconds as f64 / self.scale)
    }
}

/// `meta.clock_origin` as (real nanoseconds, fleet milliseconds).
fn parse_origin(s: &str) -> Result<(i64, i64), StoreError> {
    let bad = || {
        StoreError::Corrupt(format!(
            "meta.clock_origin {s:?}: expected REAL_MS[.NNNNNN]:FLEET_MS"
        ))
    };
    let (real, fleet) = s.split_once(':').ok_or_else(bad)?;
    let (ms, fraction) = real.split_once('.').unwrap_or((real, "0"));
    let fraction_ns = match fraction.len() {
        1..=6 if fraction.bytes().all(|b| b.is_ascii_digit()) => {
            fraction.parse::<i64>().map_err(|_| bad())? * 10i64.pow(6 - fraction.len() as u32)
        }
        _ => return Err(bad()),
    };
    let real_ns = ms
        .parse::<i64>()
        .ok()
        .and_then(|ms| ms.checked_mul(1_000_000))
        .and_then(|ns| ns.checked_add(fraction_ns))
        .ok_or_else(bad)?;
    Ok((real_ns, fleet.parse().map_err(|_| bad())?))
}

fn parse_scale(s: &str) -> Result<f64, StoreError> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| StoreError::Corrupt(format!("meta.clock_scale {s:?}")))
}

impl Clock for FleetClock {
    fn now_ms(&self) -> i64 {
        let elapsed_ns = i64::try_from(self.start.elapsed().as_nanos()).unwrap_or(i64::MAX);
        fleet_after(self.fleet_at_start_ms, elapsed_ns, self.scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_keeps_its_real_instant_to_the_nanosecond() {
        for (real_ns, fleet) in [
            (1_796_601_600_123_456_789 / 1000 * 1000, 7),
            (1_796_601_600_000_000_000, -3),
            (-4_999_900, 0),
        ] {
            let text = format_origin(real_ns, fleet);
            assert_eq!(parse_origin(&text).unwrap(), (real_ns, fleet), "{text}");
        }
        assert_eq!(
            format_origin(1_796_601_600_123_456_000, 9),
            "1796601600123.456000:9"
        );
    }

    #[test]
    fn an_origin_in_whole_milliseconds_is_still_read() {
        assert_eq!(
            parse_origin("1796601600123:42").unwrap(),
            (1_796_601_600_123_000_000, 42)
        );
        assert_eq!(
            parse_origin("1796601600123.5:42").unwrap(),
            (1_796_601_600_123_500_000, 42)
        );
    }

    #[test]
    fn a_malformed_origin_is_refused_by_name() {
        for bad in [
            "",
            "12",
            "12:x",
            "x:12",
            "12.:3",
            "12.1234567:3",
            "12.-5:3",
            "12.a:3",
        ] {
            let e = parse_origin(bad).unwrap_err().to_string();
            assert!(e.contains("meta.clock_origin"), "{bad}: {e}");
        }
    }

    #[test]
    fn two_spans_one_after_the_other_never_outrun_the_whole() {
        for scale in [1.0, 3.7, 1000.0, 60_000.0] {
            for (a, b) in [(1, 1), (999_999, 1), (123_456, 876_544), (7, 13)] {
                let step = fleet_after(fleet_after(0, a, scale), b, scale);
                assert!(step <= fleet_after(0, a + b, scale), "{scale} {a} {b}");
            }
        }
    }
}
