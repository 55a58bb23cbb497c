//! The simulated provider over a real database file, in a fleet time the test moves: upgrades
//! take their minutes and fail as scripted, one key is one operation (across restarts too), a
//! busy cluster refuses a second upgrade, and `describe` shows what finished.

use waverun_core::sim::Behavior;
use waverun_core::{NodePool, OsType, PoolImage, UpgradeType};
use waverun_host::providers::{
    ClusterTarget, OperationPhase, Provider, ProviderErrorCode, SimulatedCluster,
    SimulatedProvider, UpgradeRequest,
};
use waverun_host::runtime::ManualClock;
use waverun_host::store::SqliteStore;

const MINUTE: i64 = 60_000;
/// A check's timeout, for the provider's checks.
const T: std::time::Duration = std::time::Duration::from_secs(5);

fn cluster(name: &str, upgrade_minutes: u32, fail_attempts: u32) -> SimulatedCluster {
    SimulatedCluster {
        name: name.to_string(),
        region: "eastus".to_string(),
        kubernetes_version: "1.33.2".to_string(),
        node_pools: vec![NodePool {
            name: "system".to_string(),
            os_type: OsType::Linux,
            image_version: "AKSUbuntu-2204-202611.01.0".to_string(),
            from_snapshot: false,
        }],
        maintenance: Default::default(),
        behavior: Behavior {
            upgrade_minutes,
            fail_attempts,
            jitter_minutes: 0,
        },
    }
}

fn target(name: &str) -> ClusterTarget {
    ClusterTarget {
        member: name.to_string(),
        cluster_ref: None,
        region: None,
    }
}

fn to_134(key: &str) -> UpgradeRequest {
    UpgradeRequest {
        idempotency_key: key.to_string(),
        upgrade_type: UpgradeType::Full,
        control_plane: Some("1.34.1".to_string()),
        node_images: vec![PoolImage {
            node_pool: "system".to_string(),
            image_version: "AKSUbuntu-2204-202612.01.0".to_string(),
        }],
    }
}

struct Fleet {
    _dir: tempfile::TempDir,
    db: std::path::PathBuf,
    clock: ManualClock,
}

impl Fleet {
    fn new() -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("waverun.db");
        SqliteStore::open(&db).unwrap(); // creates the schema
        Fleet {
            _dir: dir,
            db,
            clock: ManualClock::new(1_000 * MINUTE),
        }
    }

    fn provider(&self) -> SimulatedProvider {
        let clusters = [cluster("ok", 30, 0), cluster("flaky", 10, 1)];
        SimulatedProvider::open(&self.db, clusters, self.clock.clone(), 7).unwrap()
    }
}

#[test]
fn an_upgrade_takes_its_minutes_then_describe_shows_the_target() {
    let fleet = Fleet::new();
    let p = fleet.provider();
    let s = p.start_upgrade(&target("ok"), &to_134("r/ok")).unwrap();
    assert_eq!(s.phase, OperationPhase::Running);
    assert!(!s.already_at_target);
    assert_eq!(s.poll_after_seconds, 30 * 60);
    assert!(p.describe(&target("ok")).unwrap().busy);
    fleet.clock.advance_ms(29 * MINUTE);
    let r = p.get_operation(&target("ok"), "r/ok").unwrap();
    assert_eq!(
        (r.phase, r.poll_after_seconds),
        (OperationPhase::Running, 60)
    );
    assert_eq!(
        p.describe(&target("ok")).unwrap().kubernetes_version,
        "1.33.2"
    );
    fleet.clock.advance_ms(MINUTE);
    let r = p.get_operation(&target("ok"), "r/ok").unwrap();
    assert_eq!(r.phase, OperationPhase::Succeeded);
    let d = p.describe(&target("ok")).unwrap();
    assert_eq!(d.kubernetes_version, "1.34.1");
    assert_eq!(d.node_pools[0].image_version, "AKSUbuntu-2204-202612.01.0");
    assert!(!d.busy);
    // Now at target: a new key is answered at once.
    let again = p.start_upgrade(&target("ok"), &to_134("r2/ok")).unwrap();
    assert!(again.already_at_target);
    assert_eq!(again.phase, OperationPhase::Succeeded);
}

#[test]
fn one_key_is_one_operation_even_after_the_provider_restarts() {
    let fleet = Fleet::new();
    let p = fleet.provider();
    let first = p.start_upgrade(&target("ok"), &to_134("r/ok")).unwrap();
    fleet.clock.advance_ms(5 * MINUTE);
    drop(p);
    let p = fleet.provider();
    let second = p.start_upgrade(&target("ok"), &to_134("r/ok")).unwrap();
    assert_eq!(second.operation_id, first.operation_id);
    assert_eq!(
        second.poll_after_seconds,
        25 * 60,
        "the same upgrade, 5 minutes in"
    );
    assert_eq!(p.operations_of("ok").unwrap(), 1);
    // A different key while it runs: the cluster is busy.
    let e = p
        .start_upgrade(&target("ok"), &to_134("other/ok"))
        .unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::OperationInProgress);
    assert!(e.retryable);
    assert_eq!(p.operations_of("ok").unwrap(), 1);
}

#[test]
fn the_first_fail_attempts_fail_and_the_next_succeeds() {
    let fleet = Fleet::new();
    let p = fleet.provider();
    p.start_upgrade(&target("flaky"), &to_134("r/flaky"))
        .unwrap();
    fleet.clock.advance_ms(10 * MINUTE);
    let r = p.get_operation(&target("flaky"), "r/flaky").unwrap();
    assert_eq!(r.phase, OperationPhase::Failed);
    assert!(r.message.unwrap().contains("simulated"));
    assert_eq!(
        p.describe(&target("flaky")).unwrap().kubernetes_version,
        "1.33.2"
    );
    p.start_upgrade(&target("flaky"), &to_134("retry/flaky"))
        .unwrap();
    fleet.clock.advance_ms(10 * MINUTE);
    let r = p.get_operation(&target("flaky"), "retry/flaky").unwrap();
    assert_eq!(r.phase, OperationPhase::Succeeded);
    assert_eq!(p.operations_of("flaky").unwrap(), 2);
}

#[test]
fn unknown_clusters_and_operations_are_not_found() {
    let fleet = Fleet::new();
    let p = fleet.provider();
    let e = p.describe(&target("nope")).unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::NotFound);
    let e = p.get_operation(&target("ok"), "never/started").unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::NotFound);
    assert!(!e.retryable);
    let e = p
        .start_upgrade(&target("nope"), &to_134("r/nope"))
        .unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::NotFound);
}

#[test]
fn its_preflight_and_health_checks_pass_unless_the_cluster_is_busy() {
    use waverun_core::health::Verdict;
    let fleet = Fleet::new();
    let p = fleet.provider();
    let pre = p.preflight(&target("ok"), None, T);
    assert_eq!(pre.verdict, Some(Verdict::Pass), "{pre:?}");
    assert_eq!(p.health(&target("ok"), T).verdict, Some(Verdict::Pass));
    p.start_upgrade(&target("ok"), &to_134("r/ok")).unwrap();
    let busy = p.preflight(&target("ok"), None, T);
    assert_eq!(busy.verdict, Some(Verdict::Fail), "{busy:?}");
    assert!(busy.message.unwrap().contains("in progress"));
    assert_eq!(p.health(&target("ok"), T).verdict, Some(Verdict::Fail));
    fleet.clock.advance_ms(30 * MINUTE);
    let after = p.health(&target("ok"), T);
    assert_eq!(after.verdict, Some(Verdict::Pass));
    assert!(after.message.unwrap().contains("1.34.1"));
    // A cluster it does not have: an error, never a pass.
    assert_eq!(
        p.preflight(&target("nowhere"), None, T).verdict,
        Some(Verdict::Error)
    );
}
