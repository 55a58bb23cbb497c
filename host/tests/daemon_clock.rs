//! The fleet clock on a real store: it continues the same fleet time after a restart, a new
//! scale continues from where the old one had got to, and a bad scale is refused by name.

use std::time::Duration;
use waverun_host::daemon::FleetClock;
use waverun_host::runtime::Clock;
use waverun_host::store::{meta, SqliteStore, Store, StoreRead};

const T: i64 = 1_796_601_600_000; // 2026-12-07T00:00:00Z

#[test]
fn fleet_time_continues_across_restarts_and_scale_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("waverun.db");
    let mut store = SqliteStore::open(&db).unwrap();
    let clock = FleetClock::resume(&mut store, 1000.0, Some(T)).unwrap();
    let first = clock.now_ms();
    assert!(first >= T, "starts at the given fleet time");
    std::thread::sleep(Duration::from_millis(20));
    let before_restart = clock.now_ms();
    assert!(
        before_restart >= T + 20_000,
        "20 ms real are 20 s fleet at scale 1000"
    );
    drop(store);

    let mut store = SqliteStore::open(&db).unwrap();
    // The start time is only for a fleet without a clock: it is ignored now.
    let clock = FleetClock::resume(&mut store, 1000.0, Some(0)).unwrap();
    assert!(
        clock.now_ms() >= before_restart,
        "no step back after a restart"
    );

    let at_change = clock.now_ms();
    let slow = FleetClock::resume(&mut store, 1.0, None).unwrap();
    assert!(
        slow.now_ms() >= at_change,
        "a new scale continues from there"
    );
    assert_eq!(store.meta(meta::CLOCK_SCALE).unwrap().as_deref(), Some("1"));
    assert_eq!(slow.scale(), 1.0);
    assert!(slow.real_until(slow.now_ms() + 5_000) <= Duration::from_secs(5));
    assert_eq!(slow.real_span(60), Duration::from_secs(60));
    store.close().unwrap();
}

#[test]
fn a_scale_that_is_not_a_positive_number_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("waverun.db")).unwrap();
    for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        let e = FleetClock::resume(&mut store, bad, None).unwrap_err();
        assert!(e.to_string().contains("time scale"), "{e}");
    }
    assert_eq!(
        store.meta(meta::CLOCK_ORIGIN).unwrap(),
        None,
        "nothing stored"
    );
}
