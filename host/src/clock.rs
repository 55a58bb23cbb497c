//! Time as the host reads it: the [`Clock`] trait (the plugin's clock import, a provider's and
//! the daemon's reading of now), the system clock, and a virtual clock that moves only when told
//! (tests, the simulator). The daemon's fleet clock, which can run faster than real time, is
//! `daemon::FleetClock`. Depends on nothing else in the crate.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use waverun_core::Timestamp;

/// A reading of now (the plugin's clock import, `clock_now_ms`).
pub trait Clock: Send {
    /// Current UTC time in milliseconds since the Unix epoch. Should never go backwards.
    fn now_ms(&self) -> i64;
}

/// Milliseconds since the epoch of a timestamp, rounded up to the next millisecond (the ABI's
/// clock has millisecond precision; rounding up never lets a host wake the guest before a due
/// timer).
pub fn timestamp_ms(t: Timestamp) -> i64 {
    let ms = t.timestamp_millis();
    if t.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        ms
    } else {
        ms + 1
    }
}

/// The timestamp of a millisecond count, if representable.
pub fn ms_timestamp(ms: i64) -> Option<Timestamp> {
    chrono::DateTime::from_timestamp_millis(ms)
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A virtual clock that only moves when told (shared between clones).
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock at `ms`.
    pub fn new(ms: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(ms)))
    }
    /// A clock at `t` (rounded up to the millisecond).
    pub fn at(t: Timestamp) -> ManualClock {
        ManualClock::new(timestamp_ms(t))
    }
    /// Sets the time.
    pub fn set_ms(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
    /// Sets the time (rounded up to the millisecond).
    pub fn set(&self, t: Timestamp) {
        self.set_ms(timestamp_ms(t));
    }
    /// Moves the time forward.
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
