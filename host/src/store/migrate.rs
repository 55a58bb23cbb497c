//! `waverun store migrate`: a fleet's whole history copied from its SQLite database to an empty
//! PostgreSQL one — every table of the schema, row for row, the epochs that wrote them kept — in
//! one transaction under the leader lease, so no daemon can lead the target meanwhile and a
//! copy that fails leaves nothing behind. The source is only read (a daemon may still run on
//! it, but what it writes after the copy began is not copied: stop it first).

use super::backup;
use super::check::Depth;
use super::postgres::{Cell, LeaseConfig, LeaseState, PgStore};
use super::{StoreError, SCHEMA_VERSION};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::time::Duration;

/// The schema's tables, in the order they are copied.
pub const TABLES: &[&str] = &[
    "meta",
    "journal",
    "snapshots",
    "operations",
    "events",
    "resources",
    "audit",
    "sim_operations",
    "run_modules",
    "webhook_cursors",
    "webhook_dead_letters",
    "webhook_deliveries",
];

/// How a copy went: rows per table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Copied {
    /// (table, rows), in [`TABLES`]' order.
    pub tables: Vec<(String, u64)>,
}

/// Copies the SQLite database at `sqlite` (checked first, at this build's schema version) into
/// the empty PostgreSQL database at `url`.
pub fn sqlite_to_postgres(sqlite: &Path, url: &str) -> Result<Copied, StoreError> {
    let report = backup::check_file(sqlite, Depth::Quick)?;
    if report.schema_version != SCHEMA_VERSION {
        return Err(StoreError::Invalid(format!(
            "{}: schema version {} (this build writes {SCHEMA_VERSION}): start `waverun serve` \
             on it once with this build, which migrates it forward, then copy it",
            sqlite.display(),
            report.schema_version
        )));
    }
    let source = Connection::open_with_flags(
        sqlite,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::Database(format!("{}: {e}", sqlite.display())))?;
    let mut target = PgStore::open(
        url,
        LeaseConfig {
            holder: format!("waverun store migrate (pid {})", std::process::id()),
            ttl: Duration::from_secs(300),
        },
    )?;
    match target.acquire()? {
        LeaseState::Held { .. } => {}
        LeaseState::Other { holder, .. } => {
            return Err(StoreError::Invalid(format!(
                "the target database is led by {holder:?}: a fleet is copied only into an \
                 empty database no daemon uses"
            )))
        }
    }
    let copied = target.import(&mut |table: &str| read_table(&source, table), TABLES);
    target.release()?;
    copied
}

/// One table of the source: its columns and rows.
fn read_table(conn: &Connection, table: &str) -> Result<(Vec<String>, Vec<Vec<Cell>>), StoreError> {
    let e = |e: rusqlite::Error| StoreError::Database(format!("reading {table}: {e}"));
    let mut st = conn.prepare(&format!("SELECT * FROM {table}")).map_err(e)?;
    let columns: Vec<String> = st.column_names().map(str::to_string).collect();
    let n = columns.len();
    let mut rows = st.query([]).map_err(e)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(e)? {
        let mut row = Vec::with_capacity(n);
        for i in 0..n {
            row.push(match r.get_ref(i).map_err(e)? {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(v) => Cell::Int(v),
                ValueRef::Real(v) => Cell::Real(v),
                ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
            });
        }
        out.push(row);
    }
    Ok((columns, out))
}
