//! The SQLite backend (the embedded default): one database file, WAL, `synchronous=FULL`, one
//! writer ([`SqliteStore`], `BEGIN IMMEDIATE` for every write), read-only connections for the
//! API ([`SqliteReader`]), an explicit busy timeout, `wal_checkpoint(TRUNCATE)` after each
//! snapshot and `integrity_check` after an unclean shutdown.

use super::check::{self, Depth};
use super::schema::{MIGRATIONS, SCHEMA_VERSION};
use super::{meta, AuditRow, Committed, EventRow, JournalRecord, NewAudit, NewEvent};
use super::{DeadLetter, DeliveryRecord, WebhookWrites, DELIVERY_LOG_KEEP};
use super::{OperationRow, OperationState, OperationUpdate, ResourceMeta, SnapshotRecord};
use super::{RunModule, Step, Store, StoreError, StoreRead};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a statement waits for a lock held by another connection before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

fn db(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
            StoreError::Corrupt(format!("not an SQLite database ({e})"))
        }
        _ => StoreError::Database(e.to_string()),
    }
}

/// The writer: owns the database file of one fleet.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// The previous process did not close the database (its integrity was checked at open).
    recovered: bool,
    /// Fault injection: the next commit writes everything, then rolls back and fails.
    fail_next_commit: bool,
}

/// A read-only connection to the same file, for API handlers and the SSE stream.
pub struct SqliteReader {
    conn: Connection,
}

/// Prepared statements kept per connection: every statement a step's commit and the reads
/// run, so that none is parsed again per row (rusqlite keeps 16 by default).
const STATEMENT_CACHE: usize = 64;

impl SqliteStore {
    /// Opens (creating it if needed) the database at `path`: migrates an older schema forward,
    /// refuses a newer one, and checks integrity if the last process did not close it.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let existed = check::found(path)? == check::Found::File;
        let conn = Connection::open(path).map_err(db)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // An existing file is checked as it was found, before anything is written to it (the
        // journal mode, the migrations): damage, an empty database, a foreign one are refused.
        let recovered = if existed {
            inspect(&conn).map_err(|e| at(path, e))?
        } else {
            false
        };
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(db)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Database(format!(
                "{}: cannot use write-ahead logging (journal_mode is {mode})",
                path.display()
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(db)?;
        let mut store = SqliteStore {
            conn,
            path: path.to_path_buf(),
            recovered,
            fail_next_commit: false,
        };
        store.migrate()?;
        store.set_meta(meta::CLEAN_SHUTDOWN, "0")?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the previous process left without closing the database.
    pub fn recovered_from_unclean_shutdown(&self) -> bool {
        self.recovered
    }

    /// Fault injection for crash tests: the next [`Store::commit`] runs every statement of
    /// A read-only connection to the same database.
    pub fn read_connection(&self) -> Result<SqliteReader, StoreError> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(db)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(SqliteReader { conn })
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let tables: Vec<String> = {
            let mut st = self
                .conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
                .map_err(db)?;
            let rows = st.query_map([], |r| r.get(0)).map_err(db)?;
            rows.collect::<Result<_, _>>().map_err(db)?
        };
        let version = if tables.iter().any(|t| t == "meta") {
            let v = read_meta(&self.conn, meta::SCHEMA_VERSION)?;
            let v = v.ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "{}: no schema_version in meta",
                    self.path.display()
                ))
            })?;
            v.parse::<u32>().map_err(|_| {
                StoreError::Corrupt(format!("{}: schema_version {v:?}", self.path.display()))
            })?
        } else if tables.iter().any(|t| !t.starts_with("sqlite_")) {
            return Err(StoreError::Corrupt(format!(
                "{}: an SQLite database, but not waverun's (tables: {})",
                self.path.display(),
                tables.join(", ")
            )));
        } else {
            0
        };
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        for (from, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db)?;
            tx.execute_batch(sql).map_err(db)?;
            upsert_meta(&tx, meta::SCHEMA_VERSION, &(from + 1).to_string(), 0)?;
            tx.commit().map_err(db)?;
        }
        Ok(())
    }
}

/// The same error, naming the file.
fn at(path: &Path, e: StoreError) -> StoreError {
    match e {
        StoreError::Corrupt(m) => StoreError::Corrupt(format!("{}: {m}", path.display())),
        e => e,
    }
}

/// An existing file, before it is used: waverun's (not empty, not foreign), its pages whole
/// (`quick_check`; the full `integrity_check` when the last process did not close it), and, at
/// this build's schema version, its schema and journal. Returns whether the last process left
/// without closing it.
fn inspect(conn: &Connection) -> Result<bool, StoreError> {
    let tables: Vec<String> = {
        let mut st = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            )
            .map_err(db)?;
        let rows = st.query_map([], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)?
    };
    if tables.is_empty() {
        return Err(StoreError::Corrupt(
            "an SQLite database without any table: a new fleet is never made over an existing file"
                .to_string(),
        ));
    }
    if !tables.iter().any(|t| t == "meta") {
        return Err(StoreError::Corrupt(format!(
            "an SQLite database, but not waverun's (tables: {})",
            tables.join(", ")
        )));
    }
    let unclean = read_meta(conn, meta::CLEAN_SHUTDOWN)?.as_deref() != Some("1");
    let depth = if unclean { Depth::Full } else { Depth::Quick };
    let version = read_meta(conn, meta::SCHEMA_VERSION)?;
    if version.as_deref() == Some(SCHEMA_VERSION.to_string().as_str()) {
        check::check(conn, depth)?;
    } else {
        // Older: migrated after this, checked whole at the next start. Newer: refused by the
        // migration step, untouched.
        pages_only(conn, depth)?;
    }
    Ok(unclean)
}

/// SQLite's page check alone, for a database of an older schema (its schema and journal are
/// checked once it is migrated, at the next start).
fn pages_only(conn: &Connection, depth: Depth) -> Result<(), StoreError> {
    let pragma = match depth {
        Depth::Quick => "quick_check",
        Depth::Full => "integrity_check",
    };
    let r: String = conn
        .query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
        .map_err(db)?;
    if r != "ok" {
        return Err(StoreError::Corrupt(format!(
            "{pragma} found damaged pages: {r}"
        )));
    }
    Ok(())
}

fn read_meta(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
        .map_err(db)
}

fn upsert_meta(conn: &Connection, key: &str, value: &str, epoch: u64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO meta (key, value, epoch) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, epoch = excluded.epoch",
        params![key, value, epoch as i64],
    )
    .map_err(db)?;
    Ok(())
}

fn last_journal_seq(conn: &Connection) -> Result<u64, StoreError> {
    let seq: i64 = conn
        .query_row(
            "SELECT MAX(COALESCE((SELECT MAX(seq) FROM journal), 0),
                        COALESCE((SELECT journal_seq FROM snapshots WHERE id = 1), 0))",
            [],
            |r| r.get(0),
        )
        .map_err(db)?;
    Ok(seq as u64)
}

fn update_operation(conn: &Connection, u: &OperationUpdate, epoch: u64) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE operations SET state = ?2,
             provider_operation_id = COALESCE(?3, provider_operation_id),
             last_error = ?4, attempts = attempts + ?5, epoch = ?6
         WHERE id = ?1",
        params![
            u.id,
            u.state.as_str(),
            u.provider_operation_id,
            u.last_error,
            i64::from(u.attempted),
            epoch as i64
        ],
    )
    .map_err(db)?;
    Ok(())
}

impl Store for SqliteStore {
    fn epoch(&self) -> u64 {
        0
    }

    fn commit(&mut self, step: &Step) -> Result<Committed, StoreError> {
        let epoch = self.epoch() as i64;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        let mut last = last_journal_seq(&tx)?;
        for r in &step.journal {
            if r.seq != last + 1 {
                return Err(StoreError::Invalid(format!(
                    "journal record {} does not follow {last}",
                    r.seq
                )));
            }
            tx.prepare_cached(
                "INSERT INTO journal (seq, now_ms, record, epoch) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(db)?
            .execute(params![r.seq as i64, r.now_ms, r.record, epoch])
            .map_err(db)?;
            last = r.seq;
        }
        if let Some(s) = &step.snapshot {
            let stored: Option<i64> = tx
                .query_row("SELECT journal_seq FROM snapshots WHERE id = 1", [], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(db)?;
            if stored.is_some_and(|j| j as u64 > s.journal_seq) || s.journal_seq > last {
                return Err(StoreError::Invalid(format!(
                    "snapshot at journal seq {} (stored snapshot {:?}, last record {last})",
                    s.journal_seq, stored
                )));
            }
            tx.prepare_cached(
                "INSERT INTO snapshots (id, journal_seq, module_hash, bytes, epoch)
                 VALUES (1, ?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET journal_seq = excluded.journal_seq,
                     module_hash = excluded.module_hash, bytes = excluded.bytes,
                     epoch = excluded.epoch",
            )
            .map_err(db)?
            .execute(params![s.journal_seq as i64, s.module_hash, s.bytes, epoch])
            .map_err(db)?;
            tx.prepare_cached("DELETE FROM journal WHERE seq <= ?1")
                .map_err(db)?
                .execute([s.journal_seq as i64])
                .map_err(db)?;
        }
        let mut committed = Committed::default();
        for e in &step.events {
            tx.prepare_cached(
                "INSERT INTO events (at_ms, run, kind, data, epoch) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(db)?
            .execute(params![e.at_ms, e.run, e.kind, e.data, epoch])
            .map_err(db)?;
            let seq = tx.last_insert_rowid() as u64;
            committed.first_event_seq.get_or_insert(seq);
            committed.last_event_seq = Some(seq);
        }
        for o in &step.operations {
            tx.prepare_cached(
                "INSERT INTO operations (id, member, provider, request, state, epoch)
                 VALUES (?1, ?2, ?3, ?4, 'intent', ?5) ON CONFLICT (id) DO NOTHING",
            )
            .map_err(db)?
            .execute(params![o.id, o.member, o.provider, o.request, epoch])
            .map_err(db)?;
        }
        for u in &step.operation_updates {
            update_operation(&tx, u, epoch as u64)?;
        }
        for r in &step.resources {
            tx.prepare_cached(
                "INSERT INTO resources (kind, name, etag, created_by, created_at,
                     last_modified_by, last_modified_at, body, epoch)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (kind, name) DO UPDATE SET etag = excluded.etag,
                     created_by = excluded.created_by, created_at = excluded.created_at,
                     last_modified_by = excluded.last_modified_by,
                     last_modified_at = excluded.last_modified_at, body = excluded.body,
                     epoch = excluded.epoch",
            )
            .map_err(db)?
            .execute(params![
                r.kind,
                r.name,
                r.etag,
                r.created_by,
                r.created_at,
                r.last_modified_by,
                r.last_modified_at,
                r.body,
                epoch
            ])
            .map_err(db)?;
        }
        for (kind, name) in &step.deleted_resources {
            tx.prepare_cached("DELETE FROM resources WHERE kind = ?1 AND name = ?2")
                .map_err(db)?
                .execute(params![kind, name])
                .map_err(db)?;
        }
        for a in &step.audit {
            tx.prepare_cached("INSERT INTO audit (at, who, action, target, request_id, request_key, outcome, detail, epoch)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")
                .map_err(db)?
                .execute(
                params![
                    a.at,
                    a.who,
                    a.action,
                    a.target,
                    a.request_id,
                    a.key,
                    a.outcome,
                    a.detail,
                    epoch
                ],
            )
            .map_err(db)?;
        }
        for run in &step.deleted_runs {
            tx.prepare_cached("DELETE FROM run_modules WHERE run = ?1")
                .map_err(db)?
                .execute([run])
                .map_err(db)?;
        }
        for m in &step.run_modules {
            tx.prepare_cached(
                "INSERT INTO run_modules (run, module_hash, first_step_ms, epoch)
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run, module_hash) DO NOTHING",
            )
            .map_err(db)?
            .execute(params![m.run, m.module_hash, m.first_step_ms, epoch])
            .map_err(db)?;
        }
        if std::mem::take(&mut self.fail_next_commit) {
            tx.rollback().map_err(db)?;
            return Err(StoreError::Database(
                "injected fault: the commit failed (disk full)".to_string(),
            ));
        }
        tx.commit().map_err(db)?;
        if step.snapshot.is_some() {
            // The journal shrank: give the WAL back. A reader in the way only delays it.
            let _ = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
        Ok(committed)
    }

    fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        let epoch = self.epoch();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        upsert_meta(&tx, key, value, epoch)?;
        tx.commit().map_err(db)
    }

    fn update_operations(&mut self, updates: &[OperationUpdate]) -> Result<(), StoreError> {
        let epoch = self.epoch();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        for u in updates {
            update_operation(&tx, u, epoch)?;
        }
        tx.commit().map_err(db)
    }

    fn record_webhooks(&mut self, w: &WebhookWrites) -> Result<(), StoreError> {
        if w.is_empty() {
            return Ok(());
        }
        let epoch = self.epoch() as i64;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        // Forgotten first: a subscription made again under the name writes after it.
        for sub in &w.forgotten {
            for table in [
                "webhook_cursors",
                "webhook_dead_letters",
                "webhook_deliveries",
            ] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE subscription = ?1"),
                    [sub],
                )
                .map_err(db)?;
            }
        }
        for (sub, cursor) in &w.cursors {
            tx.execute(
                "INSERT INTO webhook_cursors (subscription, cursor, epoch) VALUES (?1, ?2, ?3)
                 ON CONFLICT (subscription) DO UPDATE SET cursor = MAX(cursor, excluded.cursor),
                 epoch = excluded.epoch",
                params![sub, *cursor as i64, epoch],
            )
            .map_err(db)?;
        }
        for d in &w.dead_letters {
            tx.execute(
                "INSERT OR REPLACE INTO webhook_dead_letters
                 (subscription, seq, at, attempts, error, epoch) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    d.subscription,
                    d.seq as i64,
                    d.at,
                    d.attempts,
                    d.error,
                    epoch
                ],
            )
            .map_err(db)?;
        }
        for (sub, seq) in &w.redelivered {
            tx.execute(
                "DELETE FROM webhook_dead_letters WHERE subscription = ?1 AND seq = ?2",
                params![sub, *seq as i64],
            )
            .map_err(db)?;
        }
        let mut logged = std::collections::BTreeSet::new();
        for d in &w.deliveries {
            tx.execute(
                "INSERT INTO webhook_deliveries
                 (subscription, seq, attempt, at, status, latency_ms, outcome, error, epoch)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    d.subscription,
                    d.seq as i64,
                    d.attempt,
                    d.at,
                    d.status,
                    d.latency_ms as i64,
                    d.outcome,
                    d.error,
                    epoch
                ],
            )
            .map_err(db)?;
            logged.insert(d.subscription.as_str());
        }
        for sub in logged {
            tx.execute(
                "DELETE FROM webhook_deliveries WHERE subscription = ?1 AND id <= (
                     SELECT id FROM webhook_deliveries WHERE subscription = ?1
                     ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                params![sub, DELIVERY_LOG_KEEP as i64],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    fn close(&mut self) -> Result<(), StoreError> {
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        self.set_meta(meta::CLEAN_SHUTDOWN, "1")
    }

    fn reader(&self) -> Result<Box<dyn StoreRead + Send>, StoreError> {
        Ok(Box::new(self.read_connection()?))
    }

    fn fail_next_commit(&mut self) {
        self.fail_next_commit = true;
    }
}

macro_rules! reads_on_conn {
    ($t:ty) => {
        impl StoreRead for $t {
            fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
                read_meta(&self.conn, key)
            }
            fn snapshot(&self) -> Result<Option<SnapshotRecord>, StoreError> {
                reads::snapshot(&self.conn)
            }
            fn journal_after(&self, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
                reads::journal_after(&self.conn, after)
            }
            fn last_journal_seq(&self) -> Result<u64, StoreError> {
                last_journal_seq(&self.conn)
            }
            fn journal_len(&self) -> Result<u64, StoreError> {
                reads::count(&self.conn, "SELECT COUNT(*) FROM journal")
            }
            fn operation(&self, id: &str) -> Result<Option<OperationRow>, StoreError> {
                reads::operation(&self.conn, id)
            }
            fn operations_in(
                &self,
                states: &[OperationState],
            ) -> Result<Vec<OperationRow>, StoreError> {
                reads::operations_in(&self.conn, states)
            }
            fn events_after(
                &self,
                after: u64,
                run: Option<&str>,
                limit: u32,
            ) -> Result<Vec<EventRow>, StoreError> {
                reads::events_after(&self.conn, after, run, limit)
            }
            fn last_event_seq(&self) -> Result<u64, StoreError> {
                reads::count(&self.conn, "SELECT COALESCE(MAX(seq), 0) FROM events")
            }
            fn resource(&self, kind: &str, name: &str) -> Result<Option<ResourceMeta>, StoreError> {
                reads::resource(&self.conn, kind, name)
            }
            fn resources(&self, kind: &str) -> Result<Vec<ResourceMeta>, StoreError> {
                reads::resources(&self.conn, kind)
            }
            fn resources_containing(
                &self,
                kind: &str,
                text: &str,
            ) -> Result<Vec<ResourceMeta>, StoreError> {
                reads::resources_containing(&self.conn, kind, text)
            }
            fn resources_after(
                &self,
                kind: &str,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<ResourceMeta>, StoreError> {
                reads::resources_after(&self.conn, kind, after, limit)
            }
            fn audit_after(&self, after: u64, limit: u32) -> Result<Vec<AuditRow>, StoreError> {
                reads::audit_after(&self.conn, after, limit)
            }

            fn audited(&self, key: &str) -> Result<bool, StoreError> {
                let n: i64 = self
                    .conn
                    .query_row(
                        "SELECT COUNT(*) FROM audit WHERE request_key = ?1",
                        [key],
                        |r| r.get(0),
                    )
                    .map_err(db)?;
                Ok(n > 0)
            }

            fn run_modules(&self, run: &str) -> Result<Vec<RunModule>, StoreError> {
                let mut st = self
                    .conn
                    .prepare_cached(
                        "SELECT module_hash, first_step_ms FROM run_modules WHERE run = ?1
                         ORDER BY first_step_ms, module_hash",
                    )
                    .map_err(db)?;
                let rows = st
                    .query_map([run], |r| {
                        Ok(RunModule {
                            run: run.to_string(),
                            module_hash: r.get(0)?,
                            first_step_ms: r.get(1)?,
                        })
                    })
                    .map_err(db)?;
                rows.collect::<Result<_, _>>().map_err(db)
            }

            fn webhook_cursors(
                &self,
            ) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
                let mut st = self
                    .conn
                    .prepare_cached("SELECT subscription, cursor FROM webhook_cursors")
                    .map_err(db)?;
                let rows = st
                    .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
                    .map_err(db)?;
                rows.collect::<Result<_, _>>().map_err(db)
            }

            fn dead_letters(
                &self,
                subscription: &str,
                after: u64,
                limit: u32,
            ) -> Result<Vec<DeadLetter>, StoreError> {
                let mut st = self
                    .conn
                    .prepare_cached(
                        "SELECT seq, at, attempts, error FROM webhook_dead_letters
                         WHERE subscription = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                    )
                    .map_err(db)?;
                let rows = st
                    .query_map(params![subscription, after as i64, limit], |r| {
                        Ok(DeadLetter {
                            subscription: subscription.to_string(),
                            seq: r.get::<_, i64>(0)? as u64,
                            at: r.get(1)?,
                            attempts: r.get(2)?,
                            error: r.get(3)?,
                        })
                    })
                    .map_err(db)?;
                rows.collect::<Result<_, _>>().map_err(db)
            }

            fn dead_letter_count(&self, subscription: &str) -> Result<u64, StoreError> {
                let n: i64 = self
                    .conn
                    .query_row(
                        "SELECT COUNT(*) FROM webhook_dead_letters WHERE subscription = ?1",
                        [subscription],
                        |r| r.get(0),
                    )
                    .map_err(db)?;
                Ok(n as u64)
            }

            fn deliveries(
                &self,
                subscription: &str,
                before: Option<u64>,
                limit: u32,
            ) -> Result<Vec<(u64, DeliveryRecord)>, StoreError> {
                let mut st = self
                    .conn
                    .prepare_cached(
                        "SELECT id, seq, attempt, at, status, latency_ms, outcome, error
                         FROM webhook_deliveries WHERE subscription = ?1 AND id < ?2
                         ORDER BY id DESC LIMIT ?3",
                    )
                    .map_err(db)?;
                let before = before.map_or(i64::MAX, |b| b as i64);
                let rows = st
                    .query_map(params![subscription, before, limit], |r| {
                        Ok((
                            r.get::<_, i64>(0)? as u64,
                            DeliveryRecord {
                                subscription: subscription.to_string(),
                                seq: r.get::<_, i64>(1)? as u64,
                                attempt: r.get(2)?,
                                at: r.get(3)?,
                                status: r.get(4)?,
                                latency_ms: r.get::<_, i64>(5)? as u64,
                                outcome: r.get(6)?,
                                error: r.get(7)?,
                            },
                        ))
                    })
                    .map_err(db)?;
                rows.collect::<Result<_, _>>().map_err(db)
            }
        }
    };
}

reads_on_conn!(SqliteStore);
reads_on_conn!(SqliteReader);

/// The queries behind [`StoreRead`], shared by the writer and the readers.
mod reads {
    use super::*;
    use rusqlite::Row;

    pub(super) fn count(conn: &Connection, sql: &str) -> Result<u64, StoreError> {
        let n: i64 = conn.query_row(sql, [], |r| r.get(0)).map_err(db)?;
        Ok(n as u64)
    }

    pub(super) fn snapshot(conn: &Connection) -> Result<Option<SnapshotRecord>, StoreError> {
        conn.query_row(
            "SELECT journal_seq, module_hash, bytes FROM snapshots WHERE id = 1",
            [],
            |r| {
                Ok(SnapshotRecord {
                    journal_seq: r.get::<_, i64>(0)? as u64,
                    module_hash: r.get(1)?,
                    bytes: r.get(2)?,
                })
            },
        )
        .optional()
        .map_err(db)
    }

    pub(super) fn journal_after(
        conn: &Connection,
        after: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        let mut st = conn
            .prepare_cached("SELECT seq, now_ms, record FROM journal WHERE seq > ?1 ORDER BY seq")
            .map_err(db)?;
        let rows = st
            .query_map([after as i64], |r| {
                Ok(JournalRecord {
                    seq: r.get::<_, i64>(0)? as u64,
                    now_ms: r.get(1)?,
                    record: r.get(2)?,
                })
            })
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn operation_row(r: &Row<'_>) -> rusqlite::Result<(OperationRow, String)> {
        let state: String = r.get(4)?;
        Ok((
            OperationRow {
                id: r.get(0)?,
                member: r.get(1)?,
                provider: r.get(2)?,
                request: r.get(3)?,
                state: OperationState::Intent,
                provider_operation_id: r.get(5)?,
                attempts: r.get::<_, i64>(6)? as u32,
                last_error: r.get(7)?,
                epoch: r.get::<_, i64>(8)? as u64,
            },
            state,
        ))
    }

    fn with_state((mut row, state): (OperationRow, String)) -> Result<OperationRow, StoreError> {
        row.state = OperationState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("operation {}: state {state:?}", row.id)))?;
        Ok(row)
    }

    const OPERATION_COLUMNS: &str = "id, member, provider, request, state, \
        provider_operation_id, attempts, last_error, epoch";

    pub(super) fn operation(
        conn: &Connection,
        id: &str,
    ) -> Result<Option<OperationRow>, StoreError> {
        let sql = format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE id = ?1");
        let row = conn
            .query_row(&sql, [id], operation_row)
            .optional()
            .map_err(db)?;
        row.map(with_state).transpose()
    }

    pub(super) fn operations_in(
        conn: &Connection,
        states: &[OperationState],
    ) -> Result<Vec<OperationRow>, StoreError> {
        let sql =
            format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE state = ?1 ORDER BY id");
        let mut st = conn.prepare_cached(&sql).map_err(db)?;
        let mut out = Vec::new();
        for s in states {
            let rows = st.query_map([s.as_str()], operation_row).map_err(db)?;
            for r in rows {
                out.push(with_state(r.map_err(db)?)?);
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    pub(super) fn events_after(
        conn: &Connection,
        after: u64,
        run: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventRow>, StoreError> {
        let map = |r: &Row<'_>| {
            Ok(EventRow {
                seq: r.get::<_, i64>(0)? as u64,
                event: NewEvent {
                    at_ms: r.get(1)?,
                    run: r.get(2)?,
                    kind: r.get(3)?,
                    data: r.get(4)?,
                },
            })
        };
        let rows = match run {
            Some(run) => {
                let mut st = conn
                    .prepare_cached(
                        "SELECT seq, at_ms, run, kind, data FROM events
                         WHERE run = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                    )
                    .map_err(db)?;
                let rows = st
                    .query_map(params![run, after as i64, limit], map)
                    .map_err(db)?;
                rows.collect::<Result<Vec<_>, _>>()
            }
            None => {
                let mut st = conn
                    .prepare_cached(
                        "SELECT seq, at_ms, run, kind, data FROM events
                         WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                    )
                    .map_err(db)?;
                let rows = st
                    .query_map(params![after as i64, limit], map)
                    .map_err(db)?;
                rows.collect::<Result<Vec<_>, _>>()
            }
        };
        rows.map_err(db)
    }

    const RESOURCE_COLUMNS: &str = "kind, name, etag, created_by, created_at, \
        last_modified_by, last_modified_at, body";

    fn resource_row(r: &Row<'_>) -> rusqlite::Result<ResourceMeta> {
        Ok(ResourceMeta {
            kind: r.get(0)?,
            name: r.get(1)?,
            etag: r.get(2)?,
            created_by: r.get(3)?,
            created_at: r.get(4)?,
            last_modified_by: r.get(5)?,
            last_modified_at: r.get(6)?,
            body: r.get(7)?,
        })
    }

    pub(super) fn resource(
        conn: &Connection,
        kind: &str,
        name: &str,
    ) -> Result<Option<ResourceMeta>, StoreError> {
        let sql = format!("SELECT {RESOURCE_COLUMNS} FROM resources WHERE kind = ?1 AND name = ?2");
        // Cached: a bulk registration reads every member's resource in turn.
        conn.prepare_cached(&sql)
            .map_err(db)?
            .query_row(params![kind, name], resource_row)
            .optional()
            .map_err(db)
    }

    pub(super) fn resources(
        conn: &Connection,
        kind: &str,
    ) -> Result<Vec<ResourceMeta>, StoreError> {
        let sql = format!("SELECT {RESOURCE_COLUMNS} FROM resources WHERE kind = ?1 ORDER BY name");
        let mut st = conn.prepare_cached(&sql).map_err(db)?;
        let rows = st.query_map([kind], resource_row).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    pub(super) fn resources_containing(
        conn: &Connection,
        kind: &str,
        text: &str,
    ) -> Result<Vec<ResourceMeta>, StoreError> {
        let sql = format!(
            "SELECT {RESOURCE_COLUMNS} FROM resources WHERE kind = ?1 AND instr(body, ?2) > 0
             ORDER BY name"
        );
        let mut st = conn.prepare_cached(&sql).map_err(db)?;
        let rows = st.query_map([kind, text], resource_row).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    pub(super) fn resources_after(
        conn: &Connection,
        kind: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ResourceMeta>, StoreError> {
        // SQLite compares TEXT bytewise (BINARY): the primary key's order, read from the index.
        let sql = format!(
            "SELECT {RESOURCE_COLUMNS} FROM resources
             WHERE kind = ?1 AND (?2 IS NULL OR name > ?2) ORDER BY name LIMIT ?3"
        );
        let mut st = conn.prepare_cached(&sql).map_err(db)?;
        let rows = st
            .query_map(rusqlite::params![kind, after, limit], resource_row)
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    pub(super) fn audit_after(
        conn: &Connection,
        after: u64,
        limit: u32,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let mut st = conn
            .prepare_cached(
                "SELECT seq, at, who, action, target, request_id, outcome, detail,
                     COALESCE(request_key, '') FROM audit
                 WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )
            .map_err(db)?;
        let rows = st
            .query_map(params![after as i64, limit], |r| {
                Ok(AuditRow {
                    seq: r.get::<_, i64>(0)? as u64,
                    entry: NewAudit {
                        at: r.get(1)?,
                        who: r.get(2)?,
                        action: r.get(3)?,
                        target: r.get(4)?,
                        request_id: r.get(5)?,
                        key: r.get(8)?,
                        outcome: r.get(6)?,
                        detail: r.get(7)?,
                    },
                })
            })
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }
}
