//! The PostgreSQL backend: the same schema versions as SQLite in PostgreSQL's dialect, for
//! several daemon replicas with one acting leader (`shared/spec/store.md`, second half).
//!
//! **The lease.** One row, `leader_lease('leader', holder, epoch, expires_at)`, its expiry in
//! the database's clock. [`PgStore::acquire`] takes it when it is free, expired or already
//! ours (the epoch goes up by one on a change of holder) and renews it when it is ours;
//! whoever holds it is the one writer.
//!
//! **Fencing.** Every write transaction first reads the lease row `FOR SHARE` and aborts
//! ([`StoreError::Fenced`]) unless it still names this writer and its epoch, and every row it
//! writes carries that epoch. `FOR SHARE` makes a takeover wait for a transaction in flight,
//! so a deposed leader's late write either committed before the new leader took over or
//! changes nothing.
//!
//! **Numbering without gaps.** Events, audit entries and delivery-log rows are numbered in
//! the transaction that writes them (the greatest plus one), not by a sequence: a sequence
//! skips the numbers of a rolled-back transaction, and the SSE stream promises none is ever
//! skipped. The one writer makes this safe.

use super::schema::SCHEMA_VERSION;
use super::{meta, AuditRow, Committed, EventRow, JournalRecord, NewAudit, NewEvent};
use super::{DeadLetter, DeliveryRecord, WebhookWrites, DELIVERY_LOG_KEEP};
use super::{OperationRow, OperationState, OperationUpdate, ResourceMeta, SnapshotRecord};
use super::{RunModule, Step, Store, StoreError, StoreRead};
use postgres::types::ToSql;
use postgres::{Client, GenericClient, NoTls, Row, Statement, Transaction};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::time::Duration;

/// The lease row's name.
const LEASE: &str = "leader";
/// The advisory lock that keeps replicas starting together from migrating twice.
const MIGRATION_LOCK: i64 = 0x0077_6176_6572_756e; // "waverun"

/// PostgreSQL's dialect of [`super::schema::MIGRATIONS`]: the same versions, the same tables
/// and columns; `PG_MIGRATIONS[i]` takes a database from version `i` to `i + 1`. Version 1 also
/// makes the lease row's table.
const PG_MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE meta (
    key         TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    epoch       BIGINT NOT NULL
);
CREATE TABLE journal (
    seq         BIGINT PRIMARY KEY,
    now_ms      BIGINT,
    record      BYTEA NOT NULL,
    epoch       BIGINT NOT NULL
);
CREATE TABLE snapshots (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    journal_seq BIGINT NOT NULL,
    module_hash TEXT NOT NULL,
    bytes       BYTEA NOT NULL,
    epoch       BIGINT NOT NULL
);
CREATE TABLE operations (
    id                    TEXT PRIMARY KEY,
    member                TEXT NOT NULL,
    provider              TEXT NOT NULL,
    request               TEXT NOT NULL,
    state                 TEXT NOT NULL CHECK (state IN ('intent', 'sent', 'done', 'uncertain')),
    provider_operation_id TEXT,
    attempts              BIGINT NOT NULL DEFAULT 0,
    last_error            TEXT,
    epoch                 BIGINT NOT NULL
);
CREATE INDEX operations_by_state ON operations (state, id);
CREATE TABLE events (
    seq         BIGINT PRIMARY KEY,
    at_ms       BIGINT NOT NULL,
    run         TEXT NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL,
    epoch       BIGINT NOT NULL
);
CREATE INDEX events_by_run ON events (run, seq);
CREATE TABLE resources (
    kind             TEXT NOT NULL,
    name             TEXT NOT NULL,
    etag             TEXT NOT NULL,
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    last_modified_by TEXT NOT NULL,
    last_modified_at TEXT NOT NULL,
    body             TEXT,
    epoch            BIGINT NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE TABLE audit (
    seq         BIGINT PRIMARY KEY,
    at          TEXT NOT NULL,
    who         TEXT NOT NULL,
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    detail      TEXT,
    epoch       BIGINT NOT NULL
);
CREATE INDEX audit_by_request ON audit (request_id);
CREATE TABLE sim_operations (
    key           TEXT PRIMARY KEY,
    operation_id  TEXT NOT NULL UNIQUE,
    member        TEXT NOT NULL,
    attempt       BIGINT NOT NULL,
    accepted_ms   BIGINT NOT NULL,
    due_ms        BIGINT NOT NULL,
    succeeds      BIGINT NOT NULL,
    control_plane TEXT,
    node_images   TEXT NOT NULL,
    epoch         BIGINT NOT NULL
);
CREATE INDEX sim_operations_by_member ON sim_operations (member, due_ms);
CREATE TABLE leader_lease (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
"#,
    r#"
CREATE TABLE run_modules (
    run           TEXT NOT NULL,
    module_hash   TEXT NOT NULL,
    first_step_ms BIGINT NOT NULL,
    epoch         BIGINT NOT NULL,
    PRIMARY KEY (run, module_hash)
);
"#,
    r#"
ALTER TABLE audit ADD COLUMN request_key TEXT;
CREATE INDEX audit_by_key ON audit (request_key);
"#,
    r#"
CREATE TABLE webhook_cursors (
    subscription TEXT PRIMARY KEY,
    cursor       BIGINT NOT NULL,
    epoch        BIGINT NOT NULL
);
CREATE TABLE webhook_dead_letters (
    subscription TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    at           TEXT NOT NULL,
    attempts     BIGINT NOT NULL,
    error        TEXT NOT NULL,
    epoch        BIGINT NOT NULL,
    PRIMARY KEY (subscription, seq)
);
CREATE TABLE webhook_deliveries (
    id           BIGINT PRIMARY KEY,
    subscription TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    attempt      BIGINT NOT NULL,
    at           TEXT NOT NULL,
    status       INTEGER,
    latency_ms   BIGINT NOT NULL,
    outcome      TEXT NOT NULL
                 CHECK (outcome IN ('delivered', 'failed', 'deadLettered', 'redelivered')),
    error        TEXT,
    epoch        BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription, id);
"#,
];

fn db(e: postgres::Error) -> StoreError {
    // The server's message and its SQLSTATE, never the connection string (which can hold a
    // password).
    match e.as_db_error() {
        Some(d) => StoreError::Database(format!("{} ({})", d.message(), d.code().code())),
        None => StoreError::Database(e.to_string()),
    }
}

/// Who may write, and for how long a lease lasts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// This replica's name in the lease row (unique among the replicas).
    pub holder: String,
    /// How long a lease lasts after each renewal, in the database's clock.
    pub ttl: Duration,
}

/// What [`PgStore::acquire`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// Ours, with this epoch, until the database's clock passes `ttl` from now.
    Held {
        /// The epoch every row we write carries.
        epoch: u64,
    },
    /// Another replica's, until it expires.
    Other {
        /// Who holds it.
        holder: String,
        /// Its epoch.
        epoch: u64,
        /// How long it has left, by the database's clock.
        remaining: Duration,
    },
}

/// The writer on PostgreSQL: the leader's connection.
pub struct PgStore {
    conn: Conn,
    lease: LeaseConfig,
    /// The epoch of the lease we hold (0: none yet).
    epoch: u64,
    /// The local deadline after which this writer writes nothing, whatever the lease row says
    /// (the leader's self-fencing; none: only the lease row decides).
    acting: Option<ActingDeadline>,
}

/// A read connection, for API handlers, the SSE stream and followers.
pub struct PgReader {
    conn: Conn,
}

/// Until when this process may act as the leader, on its monotonic clock: shared by the lease
/// keeper (which moves it with every renewal and clears it on stepping down), the writer
/// (which refuses to write past it) and the threads that call providers (which check it just
/// before each call). A process that wakes from a pause finds it passed before anything else.
#[derive(Clone, Debug)]
pub struct ActingDeadline {
    base: std::time::Instant,
    /// Milliseconds after `base`; 0: may not act.
    until_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl Default for ActingDeadline {
    fn default() -> Self {
        ActingDeadline {
            base: std::time::Instant::now(),
            until_ms: Default::default(),
        }
    }
}

impl ActingDeadline {
    /// The clock this deadline is kept on: milliseconds since it was made.
    pub fn now_ms(&self) -> i64 {
        self.base.elapsed().as_millis() as i64
    }

    /// May act until `until_ms` (of [`ActingDeadline::now_ms`]'s clock); 0: not at all.
    pub fn set(&self, until_ms: i64) {
        self.until_ms
            .store(until_ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether this process may act now.
    pub fn may_act(&self) -> bool {
        self.now_ms() < self.until_ms.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// How long connecting may take before it counts as a failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection that comes back by itself: one found closed (the server restarted, the
/// session terminated) is made again on next use, with the same session settings.
struct Conn {
    client: RefCell<Option<Client>>,
    url: String,
    /// Run on every new session (`SET ...`).
    session: String,
    /// The write path's statements, prepared on this session (forgotten with it).
    prepared: RefCell<HashMap<&'static str, Statement>>,
}

/// The synchronous client's drop runs a runtime of its own to close the connection, which
/// panics on a thread that drives a Tokio runtime (the API's, where the readers of the API
/// state end at shutdown): there the client is closed on a thread of its own.
impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.client.get_mut().take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::Builder::new()
                    .name("waverun-pg-close".to_string())
                    .spawn(move || drop(client));
            }
        }
    }
}

impl Conn {
    fn open(url: &str, session: String) -> Result<Conn, StoreError> {
        let c = Conn {
            client: RefCell::new(None),
            url: url.to_string(),
            session,
            prepared: RefCell::new(HashMap::new()),
        };
        drop(c.get()?);
        Ok(c)
    }

    /// The client, connected (again if it was closed).
    fn get(&self) -> Result<std::cell::RefMut<'_, Client>, StoreError> {
        let mut slot = self.client.borrow_mut();
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
            self.prepared.borrow_mut().clear();
            let mut client = connect(&self.url)?;
            if !self.session.is_empty() {
                client.batch_execute(&self.session).map_err(db)?;
            }
            *slot = Some(client);
        }
        Ok(std::cell::RefMut::map(slot, |c| {
            c.as_mut().expect("connected above")
        }))
    }
}

/// The parameters of a statement.
type Params<'p> = [&'p (dyn ToSql + Sync)];

/// What the store's statements run on: a connection, a transaction, or a write transaction
/// whose statements are prepared once per session ([`Tx`]).
trait Exec {
    fn execute(&mut self, sql: &'static str, params: &Params<'_>) -> Result<u64, postgres::Error>;
    fn query_one(&mut self, sql: &'static str, params: &Params<'_>)
        -> Result<Row, postgres::Error>;
    fn query_opt(
        &mut self,
        sql: &'static str,
        params: &Params<'_>,
    ) -> Result<Option<Row>, postgres::Error>;
}

macro_rules! exec_as_sent {
    ($t:ty) => {
        impl Exec for $t {
            fn execute(
                &mut self,
                sql: &'static str,
                params: &Params<'_>,
            ) -> Result<u64, postgres::Error> {
                GenericClient::execute(self, sql, params)
            }
            fn query_one(
                &mut self,
                sql: &'static str,
                params: &Params<'_>,
            ) -> Result<Row, postgres::Error> {
                GenericClient::query_one(self, sql, params)
            }
            fn query_opt(
                &mut self,
                sql: &'static str,
                params: &Params<'_>,
            ) -> Result<Option<Row>, postgres::Error> {
                GenericClient::query_opt(self, sql, params)
            }
        }
    };
}
exec_as_sent!(Client);
exec_as_sent!(Transaction<'_>);

/// A write transaction whose statements are prepared once per session: a statement sent as
/// text is parsed on every call, a round trip more for each of a step's statements.
struct Tx<'a, 'c> {
    tx: &'a mut Transaction<'c>,
    prepared: &'a mut HashMap<&'static str, Statement>,
}

impl Tx<'_, '_> {
    fn statement(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.tx.prepare(sql)?;
        self.prepared.insert(sql, s.clone());
        Ok(s)
    }

    /// A statement made for this call only (a table's name in it), sent as text.
    fn execute_text(&mut self, sql: &str, params: &Params<'_>) -> Result<u64, postgres::Error> {
        self.tx.execute(sql, params)
    }
}

impl Exec for Tx<'_, '_> {
    fn execute(&mut self, sql: &'static str, params: &Params<'_>) -> Result<u64, postgres::Error> {
        let s = self.statement(sql)?;
        self.tx.execute(&s, params)
    }
    fn query_one(
        &mut self,
        sql: &'static str,
        params: &Params<'_>,
    ) -> Result<Row, postgres::Error> {
        let s = self.statement(sql)?;
        self.tx.query_one(&s, params)
    }
    fn query_opt(
        &mut self,
        sql: &'static str,
        params: &Params<'_>,
    ) -> Result<Option<Row>, postgres::Error> {
        let s = self.statement(sql)?;
        self.tx.query_opt(&s, params)
    }
}

/// A client of the database at `url` (a URL or a libpq connection string, its TLS settings
/// read as [`super::pg_tls`] says), with a connect timeout and TCP keepalives.
pub fn connect(url: &str) -> Result<Client, StoreError> {
    let failed = |e: postgres::Error| {
        let mut why = e
            .as_db_error()
            .map_or_else(|| e.to_string(), |d| d.message().to_string());
        // The cause under a handshake or I/O error (an unknown issuer, a refused connection).
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            why = format!("{why}: {s}");
            source = s.source();
        }
        StoreError::Database(format!("connecting to PostgreSQL: {why}"))
    };
    let target = super::pg_tls::parse(url)
        .map_err(|e| StoreError::Database(format!("the connection string: {e}")))?;
    let mut config: postgres::Config = target.rest.parse().map_err(failed)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config.keepalives(true);
    config.keepalives_idle(Duration::from_secs(10));
    match super::pg_tls::client_config(&target)? {
        None => config.connect(NoTls).map_err(failed),
        Some(tls) => config
            .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
            .map_err(failed),
    }
}

impl PgStore {
    /// Connects to the database at `url` (a libpq connection string or URL), migrates an older
    /// schema forward (one replica at a time) and refuses a newer one. It holds no lease yet:
    /// [`PgStore::acquire`] before the first write.
    pub fn open(url: &str, lease: LeaseConfig) -> Result<PgStore, StoreError> {
        migrate(&mut connect(url)?)?;
        PgStore::connect(url, lease)
    }

    /// Another writer connection to an open (migrated) database, holding no lease yet.
    ///
    /// Its sessions end a transaction left idle for a third of the TTL: a writer paused in
    /// the middle of one (`SIGSTOP`, a stalled VM) holds the lease row `FOR SHARE`, and would
    /// otherwise keep every other replica from taking over until it woke.
    ///
    /// Its sessions are named `waverun:HOLDER` (`application_name`, in `pg_stat_activity`): an
    /// operator sees which replica holds which session.
    pub fn connect(url: &str, lease: LeaseConfig) -> Result<PgStore, StoreError> {
        let idle_ms = (lease.ttl.as_millis() / 3).max(100);
        let name = format!("waverun:{}", lease.holder).replace('\'', "''");
        let session = format!(
            "SET idle_in_transaction_session_timeout = {idle_ms}; SET application_name = '{name}'"
        );
        Ok(PgStore {
            conn: Conn::open(url, session)?,
            lease,
            epoch: 0,
            acting: None,
        })
    }

    /// This writer refuses to write once `deadline` has passed (the leader's self-fencing).
    pub fn with_acting(mut self, deadline: ActingDeadline) -> PgStore {
        self.acting = Some(deadline);
        self
    }

    /// Writes under the lease of `epoch`, taken for this holder by another connection (the
    /// lease keeper's).
    pub fn lead(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// The `meta` value of `key`, set to `value` first if it has none: for facts the first
    /// replica to start settles (the fleet's name, its clock's origin), written outside the
    /// lease because whoever writes first writes what every other replica then reads.
    pub fn settle_meta(&mut self, key: &str, value: &str) -> Result<String, StoreError> {
        let mut c = self.conn.get()?;
        c.execute(
            "INSERT INTO meta (key, value, epoch) VALUES ($1, $2, 0) ON CONFLICT (key) DO NOTHING",
            &[&key, &value],
        )
        .map_err(db)?;
        read_meta(&mut *c, key)?
            .ok_or_else(|| StoreError::Database(format!("meta {key:?} vanished")))
    }

    /// Writes the `meta` `entries` if no replica leads (the lease is free, released or
    /// expired), holding the lease row meanwhile so that none takes it; says whether it did.
    /// For what every replica must agree on and only a fleet with nobody running may change
    /// (the clock's scale).
    pub fn set_meta_while_nobody_leads(
        &mut self,
        entries: &[(&str, &str)],
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn.get()?;
        let mut tx = conn.transaction().map_err(db)?;
        let live = tx
            .query_opt(
                "SELECT 1 FROM leader_lease WHERE name = $1 AND expires_at >= now() FOR UPDATE",
                &[&LEASE],
            )
            .map_err(db)?
            .is_some();
        if live {
            return Ok(false);
        }
        for (key, value) in entries {
            tx.execute(
                "INSERT INTO meta (key, value, epoch) VALUES ($1, $2, 0)
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[key, value],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(true)
    }

    /// Takes the lease when it is free or expired (a new epoch), renews it when it is ours
    /// (the same epoch), or says whose it is. A lease we held and lost is not ours any more:
    /// the epoch moved on, and this store writes nothing until it acquires again.
    ///
    /// A lease held under this holder's name by an epoch this store did not take — the same
    /// replica restarted (a StatefulSet's pod, a service manager's restart) — is taken back
    /// at once with the next epoch, instead of after its TTL: whatever the earlier process
    /// might still write is fenced by the epoch. Two live replicas must never share a name.
    pub fn acquire(&mut self) -> Result<LeaseState, StoreError> {
        let ttl_ms = self.lease.ttl.as_millis() as i64;
        let mut conn = self.conn.get()?;
        let mut tx = conn.transaction().map_err(db)?;
        let row = tx
            .query_opt(
                "INSERT INTO leader_lease (name, holder, epoch, expires_at)
                 VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
                 ON CONFLICT (name) DO UPDATE SET
                     holder = EXCLUDED.holder,
                     epoch = CASE WHEN leader_lease.holder = EXCLUDED.holder
                                  AND leader_lease.epoch = $4
                                  THEN leader_lease.epoch ELSE leader_lease.epoch + 1 END,
                     expires_at = EXCLUDED.expires_at
                 WHERE leader_lease.holder = EXCLUDED.holder
                    OR leader_lease.expires_at < now()
                 RETURNING epoch",
                &[
                    &LEASE,
                    &self.lease.holder,
                    &(ttl_ms as f64),
                    &(self.epoch as i64),
                ],
            )
            .map_err(db)?;
        let state = match row {
            Some(r) => {
                let epoch = r.get::<_, i64>(0) as u64;
                LeaseState::Held { epoch }
            }
            None => {
                let r = tx
                    .query_one(
                        "SELECT holder, epoch,
                             GREATEST(0, EXTRACT(EPOCH FROM (expires_at - now())) * 1000)::BIGINT
                         FROM leader_lease WHERE name = $1",
                        &[&LEASE],
                    )
                    .map_err(db)?;
                LeaseState::Other {
                    holder: r.get(0),
                    epoch: r.get::<_, i64>(1) as u64,
                    remaining: Duration::from_millis(r.get::<_, i64>(2).max(0) as u64),
                }
            }
        };
        tx.commit().map_err(db)?;
        drop(conn);
        self.epoch = match &state {
            LeaseState::Held { epoch } => *epoch,
            LeaseState::Other { .. } => 0,
        };
        Ok(state)
    }

    /// Gives the lease up (a clean shutdown): another replica takes it at once.
    pub fn release(&mut self) -> Result<(), StoreError> {
        if self.epoch == 0 {
            return Ok(());
        }
        self.conn
            .get()?
            .execute(
                "UPDATE leader_lease SET expires_at = now() - interval '1 second'
                 WHERE name = $1 AND holder = $2 AND epoch = $3",
                &[&LEASE, &self.lease.holder, &(self.epoch as i64)],
            )
            .map_err(db)?;
        self.epoch = 0;
        Ok(())
    }

    /// The lease's settings.
    pub fn lease(&self) -> &LeaseConfig {
        &self.lease
    }

    /// A write transaction, fenced: it begins by reading the lease `FOR SHARE` and aborts
    /// unless the lease still names us and our epoch.
    fn fenced<T>(
        &self,
        f: impl FnOnce(&mut Tx<'_, '_>, i64) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.epoch == 0 {
            return Err(StoreError::Fenced(format!(
                "{} holds no lease: only the leader writes",
                self.lease.holder
            )));
        }
        if self.acting.as_ref().is_some_and(|d| !d.may_act()) {
            return Err(StoreError::Fenced(format!(
                "{}'s lease (epoch {}) was not renewed in time: it writes nothing more",
                self.lease.holder, self.epoch
            )));
        }
        let mut conn = self.conn.get()?;
        let mut prepared = self.conn.prepared.borrow_mut();
        let mut tx = conn.transaction().map_err(db)?;
        let mut w = Tx {
            tx: &mut tx,
            prepared: &mut prepared,
        };
        let lease = w
            .query_opt(
                "SELECT holder, epoch FROM leader_lease WHERE name = $1 FOR SHARE",
                &[&LEASE],
            )
            .map_err(db)?;
        let (holder, epoch): (String, i64) = match lease {
            Some(r) => (r.get(0), r.get(1)),
            None => (String::new(), 0),
        };
        if holder != self.lease.holder || epoch as u64 != self.epoch {
            return Err(StoreError::Fenced(format!(
                "the lease is {holder:?}'s at epoch {epoch}, not ours ({:?} at epoch {}): this \
                 replica is no longer the leader, and wrote nothing",
                self.lease.holder, self.epoch
            )));
        }
        let out = f(&mut w, self.epoch as i64)?;
        tx.commit().map_err(db)?;
        Ok(out)
    }
}

/// One value of a row copied from another backend ([`PgStore::import`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A real number.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A table's columns and rows, as another backend holds them.
pub type Rows = (Vec<String>, Vec<Vec<Cell>>);

impl PgStore {
    /// Copies whole tables into this database, which must hold no fleet yet: `read(table)` gives
    /// each of `tables` (its columns, named as here, and its rows). One fenced transaction: all
    /// of it, or nothing. The rows keep the epochs they carry.
    pub fn import(
        &mut self,
        read: &mut dyn FnMut(&str) -> Result<Rows, StoreError>,
        tables: &[&str],
    ) -> Result<super::migrate::Copied, StoreError> {
        self.fenced(|tx, _epoch| {
            let held: i64 = tx
                .query_one(
                    "SELECT (SELECT COUNT(*) FROM journal) + (SELECT COUNT(*) FROM snapshots)
                          + (SELECT COUNT(*) FROM events) + (SELECT COUNT(*) FROM resources)
                          + (SELECT COUNT(*) FROM meta WHERE key <> 'schema_version')",
                    &[],
                )
                .map_err(db)?
                .get(0);
            if held > 0 {
                return Err(StoreError::Invalid(
                    "the target database already holds a fleet: a copy goes only into an empty                      one"
                    .to_string(),
                ));
            }
            let mut copied = super::migrate::Copied::default();
            for table in tables {
                let (columns, rows) = read(table)?;
                // The schema version is this database's own (the same: checked by the caller).
                let skip_version = *table == "meta";
                let list = columns.join(", ");
                let params: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
                let sql = format!(
                    "INSERT INTO {table} ({list}) VALUES ({})",
                    params.join(", ")
                );
                let st = tx.tx.prepare(&sql).map_err(db)?;
                let types = st.params().to_vec();
                let mut n = 0u64;
                for row in &rows {
                    if skip_version && row.first() == Some(&Cell::Text(meta::SCHEMA_VERSION.into()))
                    {
                        continue;
                    }
                    let values: Vec<Box<dyn postgres::types::ToSql + Sync>> = row
                        .iter()
                        .zip(&types)
                        .map(|(c, t)| to_sql(c, t, table))
                        .collect::<Result<_, _>>()?;
                    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        values.iter().map(|b| b.as_ref()).collect();
                    tx.tx.execute(&st, &refs).map_err(db)?;
                    n += 1;
                }
                copied.tables.push((table.to_string(), n));
            }
            Ok(copied)
        })
    }
}

/// A copied value as the column's type takes it.
fn to_sql(
    c: &Cell,
    t: &postgres::types::Type,
    table: &str,
) -> Result<Box<dyn postgres::types::ToSql + Sync>, StoreError> {
    use postgres::types::Type;
    let wrong = || StoreError::Invalid(format!("{table}: a {c:?} for a column of type {t}"));
    Ok(match (c, t) {
        (Cell::Null, &Type::INT8) => Box::new(None::<i64>),
        (Cell::Null, &Type::INT4) => Box::new(None::<i32>),
        (Cell::Null, &Type::BYTEA) => Box::new(None::<Vec<u8>>),
        (Cell::Null, _) => Box::new(None::<String>),
        (Cell::Int(v), &Type::INT8) => Box::new(*v),
        (Cell::Int(v), &Type::INT4) => Box::new(i32::try_from(*v).map_err(|_| wrong())?),
        (Cell::Text(v), &Type::TEXT) => Box::new(v.clone()),
        (Cell::Blob(v), &Type::BYTEA) => Box::new(v.clone()),
        (Cell::Text(v), &Type::BYTEA) => Box::new(v.clone().into_bytes()),
        _ => return Err(wrong()),
    })
}

impl PgReader {
    /// A read connection to the database at `url`.
    pub fn open(url: &str) -> Result<PgReader, StoreError> {
        Ok(PgReader {
            conn: Conn::open(url, "SET application_name = 'waverun reader'".to_string())?,
        })
    }
}

fn table_exists(c: &mut impl GenericClient, name: &str) -> Result<bool, StoreError> {
    let r = c
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])
        .map_err(db)?;
    Ok(r.get(0))
}

fn read_meta(c: &mut impl GenericClient, key: &str) -> Result<Option<String>, StoreError> {
    Ok(
        c.query_opt("SELECT value FROM meta WHERE key = $1", &[&key])
            .map_err(db)?
            .map(|r| r.get(0)),
    )
}

fn upsert_meta(c: &mut impl Exec, key: &str, value: &str, epoch: i64) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO meta (key, value, epoch) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, epoch = EXCLUDED.epoch",
        &[&key, &value, &epoch],
    )
    .map_err(db)?;
    Ok(())
}

/// Forward migrations, one transaction each, under an advisory lock.
fn migrate(conn: &mut Client) -> Result<(), StoreError> {
    loop {
        let mut tx = conn.transaction().map_err(db)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(db)?;
        let version = if table_exists(&mut tx, "meta")? {
            let v = read_meta(&mut tx, meta::SCHEMA_VERSION)?
                .ok_or_else(|| StoreError::Corrupt("no schema_version in meta".to_string()))?;
            v.parse::<u32>()
                .map_err(|_| StoreError::Corrupt(format!("schema_version {v:?}")))?
        } else {
            let n: i64 = tx
                .query_one(
                    "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()",
                    &[],
                )
                .map_err(db)?
                .get(0);
            if n > 0 {
                return Err(StoreError::Corrupt(format!(
                    "the database's schema holds {n} tables, but not waverun's: a new fleet is \
                     never made over another application's tables"
                )));
            }
            0
        };
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if version == SCHEMA_VERSION {
            return tx.commit().map_err(db);
        }
        tx.batch_execute(PG_MIGRATIONS[version as usize])
            .map_err(db)?;
        upsert_meta(&mut tx, meta::SCHEMA_VERSION, &(version + 1).to_string(), 0)?;
        tx.commit().map_err(db)?;
    }
}

fn last_journal_seq(c: &mut impl Exec) -> Result<u64, StoreError> {
    let r = c
        .query_one(
            "SELECT GREATEST(COALESCE((SELECT MAX(seq) FROM journal), 0),
                             COALESCE((SELECT journal_seq FROM snapshots WHERE id = 1), 0))",
            &[],
        )
        .map_err(db)?;
    Ok(r.get::<_, i64>(0) as u64)
}

fn next_number(c: &mut impl Exec, sql: &'static str) -> Result<i64, StoreError> {
    Ok(c.query_one(sql, &[]).map_err(db)?.get::<_, i64>(0) + 1)
}

fn update_operation(c: &mut impl Exec, u: &OperationUpdate, epoch: i64) -> Result<(), StoreError> {
    c.execute(
        "UPDATE operations SET state = $2,
             provider_operation_id = COALESCE($3, provider_operation_id),
             last_error = $4, attempts = attempts + $5, epoch = $6
         WHERE id = $1",
        &[
            &u.id,
            &u.state.as_str(),
            &u.provider_operation_id,
            &u.last_error,
            &i64::from(u.attempted),
            &epoch,
        ],
    )
    .map_err(db)?;
    Ok(())
}

fn commit_step(tx: &mut Tx<'_, '_>, step: &Step, epoch: i64) -> Result<Committed, StoreError> {
    let mut last = last_journal_seq(tx)?;
    for r in &step.journal {
        if r.seq != last + 1 {
            return Err(StoreError::Invalid(format!(
                "journal record {} does not follow {last}",
                r.seq
            )));
        }
        tx.execute(
            "INSERT INTO journal (seq, now_ms, record, epoch) VALUES ($1, $2, $3, $4)",
            &[&(r.seq as i64), &r.now_ms, &r.record, &epoch],
        )
        .map_err(db)?;
        last = r.seq;
    }
    if let Some(s) = &step.snapshot {
        let stored: Option<i64> = tx
            .query_opt("SELECT journal_seq FROM snapshots WHERE id = 1", &[])
            .map_err(db)?
            .map(|r| r.get(0));
        if stored.is_some_and(|j| j as u64 > s.journal_seq) || s.journal_seq > last {
            return Err(StoreError::Invalid(format!(
                "snapshot at journal seq {} (stored snapshot {:?}, last record {last})",
                s.journal_seq, stored
            )));
        }
        tx.execute(
            "INSERT INTO snapshots (id, journal_seq, module_hash, bytes, epoch)
             VALUES (1, $1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET journal_seq = EXCLUDED.journal_seq,
                 module_hash = EXCLUDED.module_hash, bytes = EXCLUDED.bytes,
                 epoch = EXCLUDED.epoch",
            &[&(s.journal_seq as i64), &s.module_hash, &s.bytes, &epoch],
        )
        .map_err(db)?;
        tx.execute(
            "DELETE FROM journal WHERE seq <= $1",
            &[&(s.journal_seq as i64)],
        )
        .map_err(db)?;
    }
    let mut committed = Committed::default();
    if !step.events.is_empty() {
        let first = next_number(tx, "SELECT COALESCE(MAX(seq), 0) FROM events")?;
        for (seq, e) in (first..).zip(&step.events) {
            tx.execute(
                "INSERT INTO events (seq, at_ms, run, kind, data, epoch)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[&seq, &e.at_ms, &e.run, &e.kind, &e.data, &epoch],
            )
            .map_err(db)?;
            committed.first_event_seq.get_or_insert(seq as u64);
            committed.last_event_seq = Some(seq as u64);
        }
    }
    for o in &step.operations {
        tx.execute(
            "INSERT INTO operations (id, member, provider, request, state, epoch)
             VALUES ($1, $2, $3, $4, 'intent', $5) ON CONFLICT (id) DO NOTHING",
            &[&o.id, &o.member, &o.provider, &o.request, &epoch],
        )
        .map_err(db)?;
    }
    for u in &step.operation_updates {
        update_operation(tx, u, epoch)?;
    }
    for r in &step.resources {
        tx.execute(
            "INSERT INTO resources (kind, name, etag, created_by, created_at,
                 last_modified_by, last_modified_at, body, epoch)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (kind, name) DO UPDATE SET etag = EXCLUDED.etag,
                 created_by = EXCLUDED.created_by, created_at = EXCLUDED.created_at,
                 last_modified_by = EXCLUDED.last_modified_by,
                 last_modified_at = EXCLUDED.last_modified_at, body = EXCLUDED.body,
                 epoch = EXCLUDED.epoch",
            &[
                &r.kind,
                &r.name,
                &r.etag,
                &r.created_by,
                &r.created_at,
                &r.last_modified_by,
                &r.last_modified_at,
                &r.body,
                &epoch,
            ],
        )
        .map_err(db)?;
    }
    for (kind, name) in &step.deleted_resources {
        tx.execute(
            "DELETE FROM resources WHERE kind = $1 AND name = $2",
            &[kind, name],
        )
        .map_err(db)?;
    }
    if !step.audit.is_empty() {
        let first = next_number(tx, "SELECT COALESCE(MAX(seq), 0) FROM audit")?;
        for (seq, a) in (first..).zip(&step.audit) {
            tx.execute(
                "INSERT INTO audit (seq, at, who, action, target, request_id, request_key,
                     outcome, detail, epoch)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &seq,
                    &a.at,
                    &a.who,
                    &a.action,
                    &a.target,
                    &a.request_id,
                    &a.key,
                    &a.outcome,
                    &a.detail,
                    &epoch,
                ],
            )
            .map_err(db)?;
        }
    }
    for run in &step.deleted_runs {
        tx.execute("DELETE FROM run_modules WHERE run = $1", &[run])
            .map_err(db)?;
    }
    for m in &step.run_modules {
        tx.execute(
            "INSERT INTO run_modules (run, module_hash, first_step_ms, epoch)
             VALUES ($1, $2, $3, $4) ON CONFLICT (run, module_hash) DO NOTHING",
            &[&m.run, &m.module_hash, &m.first_step_ms, &epoch],
        )
        .map_err(db)?;
    }
    Ok(committed)
}

fn record_webhooks(tx: &mut Tx<'_, '_>, w: &WebhookWrites, epoch: i64) -> Result<(), StoreError> {
    // Forgotten first: a subscription made again under the name writes after it.
    for sub in &w.forgotten {
        for table in [
            "webhook_cursors",
            "webhook_dead_letters",
            "webhook_deliveries",
        ] {
            tx.execute_text(
                &format!("DELETE FROM {table} WHERE subscription = $1"),
                &[sub],
            )
            .map_err(db)?;
        }
    }
    for (sub, cursor) in &w.cursors {
        tx.execute(
            "INSERT INTO webhook_cursors (subscription, cursor, epoch) VALUES ($1, $2, $3)
             ON CONFLICT (subscription) DO UPDATE SET
                 cursor = GREATEST(webhook_cursors.cursor, EXCLUDED.cursor),
                 epoch = EXCLUDED.epoch",
            &[sub, &(*cursor as i64), &epoch],
        )
        .map_err(db)?;
    }
    for d in &w.dead_letters {
        tx.execute(
            "INSERT INTO webhook_dead_letters (subscription, seq, at, attempts, error, epoch)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (subscription, seq) DO UPDATE SET at = EXCLUDED.at,
                 attempts = EXCLUDED.attempts, error = EXCLUDED.error, epoch = EXCLUDED.epoch",
            &[
                &d.subscription,
                &(d.seq as i64),
                &d.at,
                &i64::from(d.attempts),
                &d.error,
                &epoch,
            ],
        )
        .map_err(db)?;
    }
    for (sub, seq) in &w.redelivered {
        tx.execute(
            "DELETE FROM webhook_dead_letters WHERE subscription = $1 AND seq = $2",
            &[sub, &(*seq as i64)],
        )
        .map_err(db)?;
    }
    let mut logged = std::collections::BTreeSet::new();
    if !w.deliveries.is_empty() {
        let first = next_number(tx, "SELECT COALESCE(MAX(id), 0) FROM webhook_deliveries")?;
        for (id, d) in (first..).zip(&w.deliveries) {
            tx.execute(
                "INSERT INTO webhook_deliveries
                 (id, subscription, seq, attempt, at, status, latency_ms, outcome, error, epoch)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &id,
                    &d.subscription,
                    &(d.seq as i64),
                    &i64::from(d.attempt),
                    &d.at,
                    &d.status.map(i32::from),
                    &(d.latency_ms as i64),
                    &d.outcome,
                    &d.error,
                    &epoch,
                ],
            )
            .map_err(db)?;
            logged.insert(d.subscription.as_str());
        }
    }
    for sub in logged {
        tx.execute(
            "DELETE FROM webhook_deliveries WHERE subscription = $1 AND id <= (
                 SELECT id FROM webhook_deliveries WHERE subscription = $1
                 ORDER BY id DESC LIMIT 1 OFFSET $2)",
            &[&sub, &(DELIVERY_LOG_KEEP as i64)],
        )
        .map_err(db)?;
    }
    Ok(())
}

impl Store for PgStore {
    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn commit(&mut self, step: &Step) -> Result<Committed, StoreError> {
        self.fenced(|tx, epoch| commit_step(tx, step, epoch))
    }

    fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.fenced(|tx, epoch| upsert_meta(tx, key, value, epoch))
    }

    fn update_operations(&mut self, updates: &[OperationUpdate]) -> Result<(), StoreError> {
        self.fenced(|tx, epoch| {
            for u in updates {
                update_operation(tx, u, epoch)?;
            }
            Ok(())
        })
    }

    fn record_webhooks(&mut self, writes: &WebhookWrites) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        self.fenced(|tx, epoch| record_webhooks(tx, writes, epoch))
    }

    fn close(&mut self) -> Result<(), StoreError> {
        self.release()
    }

    fn reader(&self) -> Result<Box<dyn StoreRead + Send>, StoreError> {
        Ok(Box::new(PgReader::open(&self.conn.url)?))
    }
}

macro_rules! reads_on_pg {
    ($t:ty) => {
        impl StoreRead for $t {
            fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
                read_meta(&mut *self.conn.get()?, key)
            }
            fn snapshot(&self) -> Result<Option<SnapshotRecord>, StoreError> {
                reads::snapshot(&mut *self.conn.get()?)
            }
            fn journal_after(&self, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
                reads::journal_after(&mut *self.conn.get()?, after)
            }
            fn last_journal_seq(&self) -> Result<u64, StoreError> {
                last_journal_seq(&mut *self.conn.get()?)
            }
            fn journal_len(&self) -> Result<u64, StoreError> {
                reads::count(&mut *self.conn.get()?, "SELECT COUNT(*) FROM journal", &[])
            }
            fn operation(&self, id: &str) -> Result<Option<OperationRow>, StoreError> {
                reads::operation(&mut *self.conn.get()?, id)
            }
            fn operations_in(
                &self,
                states: &[OperationState],
            ) -> Result<Vec<OperationRow>, StoreError> {
                reads::operations_in(&mut *self.conn.get()?, states)
            }
            fn events_after(
                &self,
                after: u64,
                run: Option<&str>,
                limit: u32,
            ) -> Result<Vec<EventRow>, StoreError> {
                reads::events_after(&mut *self.conn.get()?, after, run, limit)
            }
            fn last_event_seq(&self) -> Result<u64, StoreError> {
                reads::count(
                    &mut *self.conn.get()?,
                    "SELECT COALESCE(MAX(seq), 0) FROM events",
                    &[],
                )
            }
            fn resource(&self, kind: &str, name: &str) -> Result<Option<ResourceMeta>, StoreError> {
                reads::resource(&mut *self.conn.get()?, kind, name)
            }
            fn resources(&self, kind: &str) -> Result<Vec<ResourceMeta>, StoreError> {
                reads::resources(&mut *self.conn.get()?, kind)
            }
            fn resources_containing(
                &self,
                kind: &str,
                text: &str,
            ) -> Result<Vec<ResourceMeta>, StoreError> {
                reads::resources_containing(&mut *self.conn.get()?, kind, text)
            }
            fn resources_after(
                &self,
                kind: &str,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<ResourceMeta>, StoreError> {
                reads::resources_after(&mut *self.conn.get()?, kind, after, limit)
            }
            fn audit_after(&self, after: u64, limit: u32) -> Result<Vec<AuditRow>, StoreError> {
                reads::audit_after(&mut *self.conn.get()?, after, limit)
            }
            fn audited(&self, key: &str) -> Result<bool, StoreError> {
                let n = reads::count(
                    &mut *self.conn.get()?,
                    "SELECT COUNT(*) FROM audit WHERE request_key = $1",
                    &[&key],
                )?;
                Ok(n > 0)
            }
            fn run_modules(&self, run: &str) -> Result<Vec<RunModule>, StoreError> {
                reads::run_modules(&mut *self.conn.get()?, run)
            }
            fn webhook_cursors(&self) -> Result<BTreeMap<String, u64>, StoreError> {
                reads::webhook_cursors(&mut *self.conn.get()?)
            }
            fn dead_letters(
                &self,
                subscription: &str,
                after: u64,
                limit: u32,
            ) -> Result<Vec<DeadLetter>, StoreError> {
                reads::dead_letters(&mut *self.conn.get()?, subscription, after, limit)
            }
            fn dead_letter_count(&self, subscription: &str) -> Result<u64, StoreError> {
                reads::count(
                    &mut *self.conn.get()?,
                    "SELECT COUNT(*) FROM webhook_dead_letters WHERE subscription = $1",
                    &[&subscription],
                )
            }
            fn deliveries(
                &self,
                subscription: &str,
                before: Option<u64>,
                limit: u32,
            ) -> Result<Vec<(u64, DeliveryRecord)>, StoreError> {
                reads::deliveries(&mut *self.conn.get()?, subscription, before, limit)
            }
        }
    };
}

reads_on_pg!(PgStore);
reads_on_pg!(PgReader);

/// The queries behind [`StoreRead`], shared by the writer and the readers.
mod reads {
    use super::*;
    use postgres::types::ToSql;

    pub(super) fn count(
        c: &mut Client,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        Ok(c.query_one(sql, params).map_err(db)?.get::<_, i64>(0) as u64)
    }

    pub(super) fn snapshot(c: &mut Client) -> Result<Option<SnapshotRecord>, StoreError> {
        Ok(c.query_opt(
            "SELECT journal_seq, module_hash, bytes FROM snapshots WHERE id = 1",
            &[],
        )
        .map_err(db)?
        .map(|r| SnapshotRecord {
            journal_seq: r.get::<_, i64>(0) as u64,
            module_hash: r.get(1),
            bytes: r.get(2),
        }))
    }

    pub(super) fn journal_after(
        c: &mut Client,
        after: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        let rows = c
            .query(
                "SELECT seq, now_ms, record FROM journal WHERE seq > $1 ORDER BY seq",
                &[&(after as i64)],
            )
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| JournalRecord {
                seq: r.get::<_, i64>(0) as u64,
                now_ms: r.get(1),
                record: r.get(2),
            })
            .collect())
    }

    const OPERATION_COLUMNS: &str = "id, member, provider, request, state, \
        provider_operation_id, attempts, last_error, epoch";

    fn operation_row(r: &Row) -> Result<OperationRow, StoreError> {
        let id: String = r.get(0);
        let state: String = r.get(4);
        let state = OperationState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("operation {id}: state {state:?}")))?;
        Ok(OperationRow {
            id,
            member: r.get(1),
            provider: r.get(2),
            request: r.get(3),
            state,
            provider_operation_id: r.get(5),
            attempts: r.get::<_, i64>(6) as u32,
            last_error: r.get(7),
            epoch: r.get::<_, i64>(8) as u64,
        })
    }

    pub(super) fn operation(c: &mut Client, id: &str) -> Result<Option<OperationRow>, StoreError> {
        let sql = format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE id = $1");
        c.query_opt(&sql, &[&id])
            .map_err(db)?
            .as_ref()
            .map(operation_row)
            .transpose()
    }

    pub(super) fn operations_in(
        c: &mut Client,
        states: &[OperationState],
    ) -> Result<Vec<OperationRow>, StoreError> {
        let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        let sql =
            format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE state = ANY($1) ORDER BY id");
        c.query(&sql, &[&names])
            .map_err(db)?
            .iter()
            .map(operation_row)
            .collect()
    }

    pub(super) fn events_after(
        c: &mut Client,
        after: u64,
        run: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventRow>, StoreError> {
        let rows = match run {
            Some(run) => c.query(
                "SELECT seq, at_ms, run, kind, data FROM events
                 WHERE run = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[&run, &(after as i64), &i64::from(limit)],
            ),
            None => c.query(
                "SELECT seq, at_ms, run, kind, data FROM events
                 WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&(after as i64), &i64::from(limit)],
            ),
        }
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| EventRow {
                seq: r.get::<_, i64>(0) as u64,
                event: NewEvent {
                    at_ms: r.get(1),
                    run: r.get(2),
                    kind: r.get(3),
                    data: r.get(4),
                },
            })
            .collect())
    }

    const RESOURCE_COLUMNS: &str = "kind, name, etag, created_by, created_at, \
        last_modified_by, last_modified_at, body";

    fn resource_row(r: &Row) -> ResourceMeta {
        ResourceMeta {
            kind: r.get(0),
            name: r.get(1),
            etag: r.get(2),
            created_by: r.get(3),
            created_at: r.get(4),
            last_modified_by: r.get(5),
            last_modified_at: r.get(6),
            body: r.get(7),
        }
    }

    pub(super) fn resource(
        c: &mut Client,
        kind: &str,
        name: &str,
    ) -> Result<Option<ResourceMeta>, StoreError> {
        let sql = format!("SELECT {RESOURCE_COLUMNS} FROM resources WHERE kind = $1 AND name = $2");
        Ok(c.query_opt(&sql, &[&kind, &name])
            .map_err(db)?
            .as_ref()
            .map(resource_row))
    }

    pub(super) fn resources(c: &mut Client, kind: &str) -> Result<Vec<ResourceMeta>, StoreError> {
        let sql = format!("SELECT {RESOURCE_COLUMNS} FROM resources WHERE kind = $1 ORDER BY name");
        Ok(c.query(&sql, &[&kind])
            .map_err(db)?
            .iter()
            .map(resource_row)
            .collect())
    }

    pub(super) fn resources_containing(
        c: &mut Client,
        kind: &str,
        text: &str,
    ) -> Result<Vec<ResourceMeta>, StoreError> {
        let sql = format!(
            "SELECT {RESOURCE_COLUMNS} FROM resources WHERE kind = $1 AND strpos(body, $2) > 0
             ORDER BY name"
        );
        Ok(c.query(&sql, &[&kind, &text])
            .map_err(db)?
            .iter()
            .map(resource_row)
            .collect())
    }

    pub(super) fn resources_after(
        c: &mut Client,
        kind: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ResourceMeta>, StoreError> {
        // Byte order (`COLLATE "C"`), whatever the database's locale: the order of the names
        // the page token compares with, and SQLite's.
        let sql = format!(
            "SELECT {RESOURCE_COLUMNS} FROM resources
             WHERE kind = $1 AND ($2::TEXT IS NULL OR name COLLATE \"C\" > $2)
             ORDER BY name COLLATE \"C\" LIMIT $3"
        );
        Ok(c.query(&sql, &[&kind, &after, &i64::from(limit)])
            .map_err(db)?
            .iter()
            .map(resource_row)
            .collect())
    }

    pub(super) fn audit_after(
        c: &mut Client,
        after: u64,
        limit: u32,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let rows = c
            .query(
                "SELECT seq, at, who, action, target, request_id, outcome, detail,
                     COALESCE(request_key, '') FROM audit
                 WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&(after as i64), &i64::from(limit)],
            )
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| AuditRow {
                seq: r.get::<_, i64>(0) as u64,
                entry: NewAudit {
                    at: r.get(1),
                    who: r.get(2),
                    action: r.get(3),
                    target: r.get(4),
                    request_id: r.get(5),
                    key: r.get(8),
                    outcome: r.get(6),
                    detail: r.get(7),
                },
            })
            .collect())
    }

    pub(super) fn run_modules(c: &mut Client, run: &str) -> Result<Vec<RunModule>, StoreError> {
        Ok(c.query(
            "SELECT module_hash, first_step_ms FROM run_modules WHERE run = $1
                 ORDER BY first_step_ms, module_hash",
            &[&run],
        )
        .map_err(db)?
        .iter()
        .map(|r| RunModule {
            run: run.to_string(),
            module_hash: r.get(0),
            first_step_ms: r.get(1),
        })
        .collect())
    }

    pub(super) fn webhook_cursors(c: &mut Client) -> Result<BTreeMap<String, u64>, StoreError> {
        Ok(
            c.query("SELECT subscription, cursor FROM webhook_cursors", &[])
                .map_err(db)?
                .iter()
                .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
                .collect(),
        )
    }

    pub(super) fn dead_letters(
        c: &mut Client,
        subscription: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<DeadLetter>, StoreError> {
        Ok(c.query(
            "SELECT seq, at, attempts, error FROM webhook_dead_letters
                 WHERE subscription = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            &[&subscription, &(after as i64), &i64::from(limit)],
        )
        .map_err(db)?
        .iter()
        .map(|r| DeadLetter {
            subscription: subscription.to_string(),
            seq: r.get::<_, i64>(0) as u64,
            at: r.get(1),
            attempts: r.get::<_, i64>(2) as u32,
            error: r.get(3),
        })
        .collect())
    }

    pub(super) fn deliveries(
        c: &mut Client,
        subscription: &str,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<(u64, DeliveryRecord)>, StoreError> {
        let before = before.map_or(i64::MAX, |b| b.min(i64::MAX as u64) as i64);
        Ok(c.query(
            "SELECT id, seq, attempt, at, status, latency_ms, outcome, error
                 FROM webhook_deliveries WHERE subscription = $1 AND id < $2
                 ORDER BY id DESC LIMIT $3",
            &[&subscription, &before, &i64::from(limit)],
        )
        .map_err(db)?
        .iter()
        .map(|r| {
            (
                r.get::<_, i64>(0) as u64,
                DeliveryRecord {
                    subscription: subscription.to_string(),
                    seq: r.get::<_, i64>(1) as u64,
                    attempt: r.get::<_, i64>(2) as u32,
                    at: r.get(3),
                    status: r.get::<_, Option<i32>>(4).map(|s| s as u16),
                    latency_ms: r.get::<_, i64>(5) as u64,
                    outcome: r.get(6),
                    error: r.get(7),
                },
            )
        })
        .collect())
    }
}
