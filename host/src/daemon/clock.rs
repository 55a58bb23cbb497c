//! The fleet clock. In real time it is the system clock. With `--time-scale N` (demos, tests) it
//! runs N times faster than real time from an origin kept in the store (`meta.clock_origin`,
//! `meta.clock_scale`), so a restarted daemon continues the same fleet time, and a changed scale
//! continues from where the old one had got to. It never goes backwards within a process (it is
//! read from a monotonic clock after the start).

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
        let real_now = system_ms();
        let origin = store.settle_meta(
            meta::CLOCK_ORIGIN,
            &format!("{real_now}:{}", start_ms.unwrap_or(real_now)),
        )?;
        let stored_scale = parse_scale(&store.settle_meta(meta::CLOCK_SCALE, &scale.to_string())?)?;
        let (mut real, mut fleet) = parse_origin(&origin)?;
        if stored_scale != scale {
            // Another scale: as on SQLite, the clock goes on from where the old one had got
            // to — but only while no replica leads, since one running at the old scale would
            // disagree on when everything is due.
            let now = system_ms();
            let fleet_now = fleet + ((now - real).max(0) as f64 * stored_scale) as i64;
            let origin = format!("{now}:{fleet_now}");
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
        let elapsed = (system_ms() - real).max(0) as f64;
        Ok(FleetClock {
            start: Instant::now(),
            fleet_at_start_ms: fleet + (elapsed * scale) as i64,
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
        let real_now = system_ms();
        let stored = match (
            store.meta(meta::CLOCK_ORIGIN)?,
            store.meta(meta::CLOCK_SCALE)?,
        ) {
            (Some(origin), Some(s)) => Some((parse_origin(&origin)?, parse_scale(&s)?)),
            _ => None,
        };
        let fleet_now = match stored {
            Some(((real, fleet), old_scale)) => {
                let elapsed = (real_now - real).max(0) as f64;
                fleet + (elapsed * old_scale) as i64
            }
            None => start_ms.unwrap_or(real_now),
        };
        let unchanged = stored.is_some_and(|(_, s)| s == scale);
        if !unchanged {
            store.set_meta(meta::CLOCK_ORIGIN, &format!("{real_now}:{fleet_now}"))?;
            store.set_meta(meta::CLOCK_SCALE, &scale.to_string())?;
        }
        Ok(FleetClock {
            start: Instant::now(),
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

fn parse_origin(s: &str) -> Result<(i64, i64), StoreError> {
    let bad = || {
        StoreError::Corrupt(format!(
            "meta.clock_origin {s:?}: expected REAL_MS:FLEET_MS"
        ))
    };
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?))
}

fn parse_scale(s: &str) -> Result<f64, StoreError> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| StoreError::Corrupt(format!("meta.clock_scale {s:?}")))
}

impl Clock for FleetClock {
    fn now_ms(&self) -> i64 {
        let elapsed = self.start.elapsed().as_secs_f64() * 1000.0 * self.scale;
        self.fleet_at_start_ms.saturating_add(elapsed as i64)
    }
}
