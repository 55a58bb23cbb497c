//! The SQLite store on real files in a temp directory: the store's contract (`store_support`,
//! the suite PostgreSQL passes too) — a step is all or nothing, survives a reopen, compacts the
//! journal under a snapshot, numbers events for good, the webhooks' cursors, dead letters and
//! delivery logs — and what is SQLite's own: WAL, epoch 0, refusing databases it cannot read,
//! noticing an unclean shutdown.

mod store_support;

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use store_support::{contents, full_step, Backend};
use waverun_host::store::{SqliteStore, Store, StoreRead, SCHEMA_VERSION};

/// A database file in a temp directory.
struct Sqlite(tempfile::TempDir);

impl Backend for Sqlite {
    fn open(&mut self) -> Box<dyn Store> {
        Box::new(SqliteStore::open(&db_in(&self.0)).unwrap())
    }
}

fn sqlite() -> Sqlite {
    Sqlite(tempfile::tempdir().unwrap())
}

#[test]
fn a_committed_step_reads_back_whole_after_a_reopen() {
    store_support::a_committed_step_reads_back_whole_after_a_reopen(&mut sqlite());
}

#[test]
fn a_page_of_resources_is_those_after_its_token_in_byte_order() {
    store_support::a_page_of_resources_is_those_after_its_token_in_byte_order(&mut sqlite());
}

#[test]
fn a_step_that_breaks_a_rule_writes_nothing_of_itself() {
    store_support::a_step_that_breaks_a_rule_writes_nothing_of_itself(&mut sqlite());
}

#[test]
fn a_snapshot_replaces_the_last_one_and_compacts_the_journal_it_covers() {
    store_support::a_snapshot_replaces_the_last_one_and_compacts_the_journal_it_covers(
        &mut sqlite(),
    );
}

#[test]
fn event_numbers_keep_increasing_across_restarts_and_filter_by_run() {
    store_support::event_numbers_keep_increasing_across_restarts_and_filter_by_run(&mut sqlite());
}

#[test]
fn an_operation_goes_from_intent_to_sent_to_done_and_a_repeated_intent_changes_nothing() {
    store_support::an_operation_goes_from_intent_to_sent_to_done(&mut sqlite());
}

#[test]
fn webhook_cursors_dead_letters_and_delivery_logs_survive_a_reopen_and_never_go_back() {
    store_support::webhook_rows_survive_a_reopen_and_cursors_never_go_back(&mut sqlite());
}

#[test]
fn a_delivery_log_keeps_its_newest_attempts_and_a_forgotten_subscription_leaves_nothing() {
    store_support::a_delivery_log_keeps_its_newest_and_a_forgotten_subscription_leaves_nothing(
        &mut sqlite(),
    );
}

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("waverun.db")
}

#[test]
fn a_reader_sees_each_step_whole_and_every_row_carries_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let mut store = SqliteStore::open(&path).unwrap();
    let reader = store.read_connection().unwrap();
    assert_eq!(reader.last_event_seq().unwrap(), 0);
    store.commit(&full_step()).unwrap();
    assert_eq!(contents(&reader), contents(&store));
    assert_eq!(store.epoch(), 0);
    let raw = Connection::open(&path).unwrap();
    for table in [
        "meta",
        "journal",
        "operations",
        "events",
        "resources",
        "audit",
    ] {
        let (rows, zero): (i64, i64) = raw
            .query_row(
                &format!("SELECT COUNT(*), COUNT(*) FILTER (WHERE epoch = 0) FROM {table}"),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(rows > 0, "{table} has rows");
        assert_eq!(rows, zero, "{table}: every row has epoch 0");
    }
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

fn open_err(path: &Path) -> String {
    match SqliteStore::open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_database_written_by_a_newer_waverun_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let mut store = SqliteStore::open(&path).unwrap();
    store.commit(&full_step()).unwrap();
    store.close().unwrap();
    drop(store);
    let raw = Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    drop(raw);
    let e = open_err(&path);
    assert!(e.contains("newer waverun"), "{e}");
    assert!(e.contains("schema version 99"), "{e}");
    assert!(e.contains(&format!("up to {SCHEMA_VERSION}")), "{e}");
    let raw = Connection::open(&path).unwrap();
    let v: String = raw
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v, "99", "not downgraded");
}

#[test]
fn files_that_are_not_a_waverun_database_are_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    let e = open_err(&garbage);
    assert!(
        e.contains("damaged") && e.contains("not an SQLite database"),
        "{e}"
    );

    let other = dir.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE accounts (id INTEGER)")
        .unwrap();
    let e = open_err(&other);
    assert!(e.contains("not waverun's") && e.contains("accounts"), "{e}");
}

#[test]
fn an_unclean_shutdown_is_noticed_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = SqliteStore::open(&path).unwrap();
    assert!(!store.recovered_from_unclean_shutdown(), "a new database");
    drop(store); // not closed
    let mut store = SqliteStore::open(&path).unwrap();
    assert!(store.recovered_from_unclean_shutdown());
    store.close().unwrap();
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert!(!store.recovered_from_unclean_shutdown());
}
