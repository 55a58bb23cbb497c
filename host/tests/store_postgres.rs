//! The store on a real PostgreSQL (Debian's package, a private server per test file: see
//! `pg_support`): the store's contract (`store_support`, the suite SQLite passes too), then
//! what is PostgreSQL's own — the leader lease (one holder; a second replica takes it only
//! once it expires, with the next epoch), fencing (a deposed leader's write is refused and
//! changes nothing, and stamps its epoch on nothing), migrations run once when replicas start
//! together, and a database of another application refused.

mod pg_support;
mod store_support;
mod tls_support;

use pg_support::Postgres;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use store_support::{contents, event, full_step, Backend};
use waverun_host::store::{
    meta, LeaseConfig, LeaseState, PgStore, Step, Store, StoreError, StoreRead, SCHEMA_VERSION,
};

/// A private server for one test (stopped when the test ends, passed or not).
fn server() -> Postgres {
    Postgres::start()
}

/// A new database on `pg`.
fn database(pg: &Postgres) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    pg.create_db(&format!("t{n}"))
}

fn lease(holder: &str, ttl_ms: u64) -> LeaseConfig {
    LeaseConfig {
        holder: holder.to_string(),
        ttl: Duration::from_millis(ttl_ms),
    }
}

/// Opens and takes the lease, waiting (bounded) for one left by a writer that did not close.
fn leader(url: &str, holder: &str, ttl_ms: u64) -> PgStore {
    pg_support::leader(url, holder, Duration::from_millis(ttl_ms))
}

/// One database; each open is a writer that takes the lease (after a kill, once it expires).
struct Pg {
    url: String,
    _server: Postgres,
}

impl Backend for Pg {
    fn open(&mut self) -> Box<dyn Store> {
        Box::new(leader(&self.url, "replica-a", 500))
    }
}

fn pg() -> Pg {
    let server = server();
    Pg {
        url: database(&server),
        _server: server,
    }
}

#[test]
fn a_committed_step_reads_back_whole_after_a_reopen() {
    store_support::a_committed_step_reads_back_whole_after_a_reopen(&mut pg());
}

#[test]
fn a_page_of_resources_is_those_after_its_token_in_byte_order() {
    store_support::a_page_of_resources_is_those_after_its_token_in_byte_order(&mut pg());
}

#[test]
fn a_step_that_breaks_a_rule_writes_nothing_of_itself() {
    store_support::a_step_that_breaks_a_rule_writes_nothing_of_itself(&mut pg());
}

#[test]
fn a_snapshot_replaces_the_last_one_and_compacts_the_journal_it_covers() {
    store_support::a_snapshot_replaces_the_last_one_and_compacts_the_journal_it_covers(&mut pg());
}

#[test]
fn event_numbers_keep_increasing_across_restarts_and_filter_by_run() {
    store_support::event_numbers_keep_increasing_across_restarts_and_filter_by_run(&mut pg());
}

#[test]
fn an_operation_goes_from_intent_to_sent_to_done_and_a_repeated_intent_changes_nothing() {
    store_support::an_operation_goes_from_intent_to_sent_to_done(&mut pg());
}

#[test]
fn webhook_cursors_dead_letters_and_delivery_logs_survive_a_reopen_and_never_go_back() {
    store_support::webhook_rows_survive_a_reopen_and_cursors_never_go_back(&mut pg());
}

#[test]
fn a_delivery_log_keeps_its_newest_attempts_and_a_forgotten_subscription_leaves_nothing() {
    store_support::a_delivery_log_keeps_its_newest_and_a_forgotten_subscription_leaves_nothing(
        &mut pg(),
    );
}

#[test]
fn one_replica_holds_the_lease_and_another_takes_it_only_once_it_expires_with_the_next_epoch() {
    let server = server();
    let url = database(&server);
    let mut a = PgStore::open(&url, lease("a", 1_500)).unwrap();
    let mut b = PgStore::open(&url, lease("b", 1_500)).unwrap();
    assert_eq!(a.acquire().unwrap(), LeaseState::Held { epoch: 1 });
    assert_eq!(a.epoch(), 1);
    match b.acquire().unwrap() {
        LeaseState::Other {
            holder,
            epoch,
            remaining,
        } => {
            assert_eq!((holder.as_str(), epoch), ("a", 1));
            assert!(remaining <= Duration::from_millis(1_500), "{remaining:?}");
        }
        other => panic!("b took a held lease: {other:?}"),
    }
    // Renewing keeps the epoch; b still waits.
    assert_eq!(a.acquire().unwrap(), LeaseState::Held { epoch: 1 });
    assert!(matches!(b.acquire().unwrap(), LeaseState::Other { .. }));
    // a stops renewing (as when it is stopped): once the lease expires, b takes it.
    let end = Instant::now() + Duration::from_secs(10);
    let epoch = loop {
        if let LeaseState::Held { epoch } = b.acquire().unwrap() {
            break epoch;
        }
        assert!(Instant::now() < end, "b never took the expired lease");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(epoch, 2, "a change of holder is a new epoch");
    // a wakes up: it cannot renew a lease that moved on.
    match a.acquire().unwrap() {
        LeaseState::Other { holder, epoch, .. } => assert_eq!((holder.as_str(), epoch), ("b", 2)),
        other => panic!("a renewed a lease it lost: {other:?}"),
    }
    // A clean stop gives it up at once.
    b.close().unwrap();
    assert_eq!(a.acquire().unwrap(), LeaseState::Held { epoch: 3 });
}

#[test]
fn a_deposed_leader_writes_nothing_and_the_new_leader_stamps_its_epoch() {
    let server = server();
    let url = database(&server);
    let mut old = leader(&url, "old", 300);
    old.commit(&full_step()).unwrap();
    let before = contents(&old);
    // The new leader takes over once the old one's lease expires (it did not renew).
    let mut new = leader(&url, "new", 300);
    assert_eq!(new.epoch(), 2);
    // The old leader wakes up and goes on as if it still led: every write is refused.
    let late = Step {
        events: vec![event("MemberCompleted", "r1")],
        ..Step::default()
    };
    match old.commit(&late) {
        Err(StoreError::Fenced(m)) => {
            assert!(m.contains("\"new\"") && m.contains("epoch 2"), "{m}")
        }
        other => panic!("a deposed leader's commit: {other:?}"),
    }
    assert!(matches!(old.set_meta("x", "y"), Err(StoreError::Fenced(_))));
    assert!(matches!(
        old.update_operations(&[]),
        Err(StoreError::Fenced(_))
    ));
    assert_eq!(contents(&new), before, "nothing of the late step");
    // The new leader's rows carry its epoch; the old ones keep theirs.
    let c = new.commit(&late).unwrap();
    assert_eq!(
        c.first_event_seq,
        Some(3),
        "numbered after the old leader's events"
    );
    let raw_epoch = |table: &str, filter: &str| -> Vec<i64> {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        c.query(
            &format!("SELECT epoch FROM {table} {filter} ORDER BY 1"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    };
    assert_eq!(raw_epoch("events", ""), [1, 1, 2]);
    assert_eq!(raw_epoch("journal", ""), [1, 1]);
    assert_eq!(raw_epoch("meta", "WHERE key = 'x'"), Vec::<i64>::new());
    // A store that never took the lease writes nothing either.
    let mut follower = PgStore::open(&url, lease("follower", 300)).unwrap();
    assert!(matches!(follower.commit(&late), Err(StoreError::Fenced(_))));
}

#[test]
fn replicas_starting_together_migrate_once_and_a_newer_schema_or_a_foreign_database_is_refused() {
    let server = server();
    let url = database(&server);
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                PgStore::open(&url, lease(&format!("r{i}"), 1_000)).map(|_| ())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let store = PgStore::open(&url, lease("r0", 1_000)).unwrap();
    assert_eq!(
        store.meta(meta::SCHEMA_VERSION).unwrap(),
        Some(SCHEMA_VERSION.to_string())
    );
    // A newer waverun wrote it: refused, untouched.
    let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    raw.execute(
        "UPDATE meta SET value = $1 WHERE key = 'schema_version'",
        &[&(SCHEMA_VERSION + 1).to_string()],
    )
    .unwrap();
    match PgStore::open(&url, lease("r0", 1_000)) {
        Err(StoreError::NewerSchema { found, known }) => {
            assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION))
        }
        Err(e) => panic!("expected NewerSchema, got {e}"),
        Ok(_) => panic!("a newer schema was opened"),
    }
    // Another application's database: refused, untouched.
    let other = database(&server);
    let mut raw = postgres::Client::connect(&other, postgres::NoTls).unwrap();
    raw.batch_execute("CREATE TABLE invoices (id INTEGER)")
        .unwrap();
    match PgStore::open(&other, lease("r0", 1_000)) {
        Err(StoreError::Corrupt(m)) => assert!(m.contains("not waverun's"), "{m}"),
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("a foreign database was opened"),
    }
    let n: i64 = raw
        .query_one(
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "nothing was created beside it");
}

#[test]
fn store_migrate_copies_a_sqlite_fleet_whole_and_refuses_a_database_that_holds_one() {
    use waverun_host::store::{RunModule, SqliteStore, WebhookWrites};
    let server = server();
    let url = database(&server);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("waverun.db");
    {
        let mut s = SqliteStore::open(&db).unwrap();
        s.set_meta(meta::FLEET, "prod").unwrap();
        let mut step = full_step();
        step.run_modules = vec![RunModule {
            run: "r1".into(),
            module_hash: "abc".into(),
            first_step_ms: 5,
        }];
        s.commit(&step).unwrap();
        s.commit(&Step {
            journal: vec![store_support::record(3)],
            snapshot: Some(waverun_host::store::SnapshotRecord {
                journal_seq: 3,
                module_hash: "abc".into(),
                bytes: vec![0, 159, 146, 150, 255],
            }),
            events: vec![event("RunCompleted", "r1")],
            ..Step::default()
        })
        .unwrap();
        s.record_webhooks(&WebhookWrites {
            cursors: vec![("pager".into(), 3)],
            dead_letters: vec![store_support::dead("pager", 2)],
            deliveries: vec![store_support::delivery("pager", 3, 1, "delivered")],
            ..WebhookWrites::default()
        })
        .unwrap();
        s.close().unwrap();
    }
    let sqlite = SqliteStore::open(&db).unwrap();
    let migrate = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_waverun"))
            .args(["store", "migrate", "--from"])
            .arg(format!("sqlite:{}", dir.path().display()))
            .arg("--to")
            .arg(format!("postgres:{url}"))
            .output()
            .unwrap()
    };
    let out = migrate();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("events 3") && stdout.contains("webhook_deliveries 1"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(&url),
        "the connection string is never printed: {stdout}"
    );

    let pg = leader(&url, "replica-a", 1_000);
    assert_eq!(contents(&pg), contents(&sqlite), "the same history");
    assert_eq!(pg.meta(meta::FLEET).unwrap().as_deref(), Some("prod"));
    assert_eq!(
        pg.run_modules("r1").unwrap(),
        sqlite.run_modules("r1").unwrap()
    );
    assert_eq!(
        pg.webhook_cursors().unwrap(),
        sqlite.webhook_cursors().unwrap()
    );
    assert_eq!(
        pg.dead_letters("pager", 0, 10).unwrap(),
        sqlite.dead_letters("pager", 0, 10).unwrap()
    );
    assert_eq!(
        pg.deliveries("pager", None, 10).unwrap(),
        sqlite.deliveries("pager", None, 10).unwrap()
    );
    let op = pg.operation("r1/m1").unwrap().unwrap();
    assert_eq!(
        op.epoch, 0,
        "rows keep the epoch that wrote them (SQLite's)"
    );
    // The new leader goes on from there: the next event is numbered after the copied ones.
    let mut pg = pg;
    let c = pg
        .commit(&Step {
            events: vec![event("RunCreated", "r2")],
            ..Step::default()
        })
        .unwrap();
    assert_eq!(c.first_event_seq, Some(4));
    drop(pg);

    // Again, into what is now a fleet's database: refused, nothing changed.
    let out = migrate();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already holds a fleet") || stderr.contains("is led by"),
        "{stderr}"
    );
}

/// Whether the session of `url` is encrypted, as the server sees it.
fn encrypted(url: &str) -> bool {
    let mut c = waverun_host::store::pg_connect(url).unwrap();
    c.query_one(
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        &[],
    )
    .unwrap()
    .get(0)
}

#[test]
fn the_store_speaks_tls_to_postgresql_and_refuses_a_certificate_it_cannot_check() {
    let certs = tempfile::tempdir().unwrap();
    tls_support::test_ca(certs.path(), "db");
    tls_support::test_ca(certs.path(), "other");
    let pg = Postgres::start_tls(
        &certs.path().join("db-server.pem"),
        &certs.path().join("db-server.key"),
    );
    let url = database(&pg);
    let ca = certs.path().join("db-ca.pem");
    let other = certs.path().join("other-ca.pem");

    // verify-full with the server's authority: the store opens (migrates, takes the lease)
    // over TLS.
    let verified = format!("{url} sslmode=verify-full sslrootcert='{}'", ca.display());
    let mut store = PgStore::open(&verified, lease("a", 5_000)).unwrap();
    assert!(matches!(store.acquire().unwrap(), LeaseState::Held { .. }));
    assert!(encrypted(&verified), "verify-full is encrypted");
    // prefer (the default) with an authority: TLS; without one: plain, never unchecked.
    assert!(encrypted(&format!("{url} sslrootcert='{}'", ca.display())));
    assert!(!encrypted(&url), "no authority named: plain");

    // Another authority: no connection, and the error says why.
    let wrong = format!("{url} sslmode=require sslrootcert='{}'", other.display());
    let e = PgStore::open(&wrong, lease("b", 5_000))
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("connecting to PostgreSQL"), "{e}");
    assert!(e.to_lowercase().contains("certificate"), "{e}");

    // A server without TLS: require refuses it.
    let plain = server();
    let plain_url = format!(
        "{} sslmode=require sslrootcert='{}'",
        database(&plain),
        ca.display()
    );
    let e = PgStore::open(&plain_url, lease("c", 5_000))
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("connecting to PostgreSQL"), "{e}");
}
