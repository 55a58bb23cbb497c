//! Whether a database file is a whole, undamaged waverun store: SQLite's own page check
//! (`quick_check` at every start, the full `integrity_check` after an unclean stop and for
//! `waverun store check`), the schema compared with the one this build's migrations make, and
//! the journal's continuity (no record missing between the snapshot and the newest record).
//! Also what a file that is not a store yet is: absent, empty or foreign. Read-only: nothing
//! here writes to the file.

use super::schema::{MIGRATIONS, SCHEMA_VERSION};
use super::StoreError;
use rusqlite::Connection;
use std::path::Path;

/// How thoroughly to look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// `PRAGMA quick_check`: every page and b-tree, not the indexes against their tables.
    Quick,
    /// `PRAGMA integrity_check`: also every index against its table, and the constraints.
    Full,
}

impl Depth {
    fn pragma(self) -> &'static str {
        match self {
            Depth::Quick => "quick_check",
            Depth::Full => "integrity_check",
        }
    }
}

/// What a check found fine: for the report of `waverun store check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The check that ran (`quick_check` or `integrity_check`).
    pub pages: &'static str,
    /// The schema version.
    pub schema_version: u32,
    /// Journal records after the snapshot, and the snapshot's sequence number.
    pub journal: (u64, u64),
    /// Rows of the event and audit logs.
    pub events: u64,
    /// Rows of the audit log.
    pub audit: u64,
    /// The file's size in bytes.
    pub bytes: u64,
}

/// Checks an open database: its pages at `depth`, its schema against this build's, the
/// journal's continuity. Each failure says what is wrong.
pub fn check(conn: &Connection, depth: Depth) -> Result<Report, StoreError> {
    let corrupt = |what: &str, e: rusqlite::Error| StoreError::Corrupt(format!("{what}: {e}"));
    // Every problem SQLite finds is a row (at most 100 here); `ok` alone when there is none.
    let findings: Vec<String> = {
        let sql = format!("PRAGMA {}(100)", depth.pragma());
        let mut st = conn.prepare(&sql).map_err(|e| corrupt(depth.pragma(), e))?;
        let rows = st
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| corrupt(depth.pragma(), e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| corrupt(depth.pragma(), e))?
    };
    if findings != ["ok"] {
        let shown: Vec<&str> = findings.iter().take(5).map(String::as_str).collect();
        let more = findings.len().saturating_sub(shown.len());
        return Err(StoreError::Corrupt(format!(
            "{} found damaged pages: {}{}",
            depth.pragma(),
            shown.join("; "),
            if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            }
        )));
    }
    let schema_version = check_schema(conn)?;
    let journal = check_journal(conn)?;
    let count = |table: &str| -> Result<u64, StoreError> {
        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|n| n as u64)
        .map_err(|e| corrupt(table, e))
    };
    let page = |p: &str| -> Result<u64, StoreError> {
        conn.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| corrupt(p, e))
    };
    Ok(Report {
        pages: depth.pragma(),
        schema_version,
        journal,
        events: count("events")?,
        audit: count("audit")?,
        bytes: page("page_count")? * page("page_size")?,
    })
}

/// Every table, index and trigger is the one this build's migrations make, with the same
/// definition: a table dropped, a column lost, a definition rewritten by hand is damage.
fn check_schema(conn: &Connection) -> Result<u32, StoreError> {
    let version: u32 = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get::<_, String>(0),
        )
        .map_err(|e| StoreError::Corrupt(format!("the schema version cannot be read: {e}")))?
        .parse()
        .map_err(|_| StoreError::Corrupt("the schema version is not a number".to_string()))?;
    if version != SCHEMA_VERSION {
        // Older ones are migrated before the check; newer ones are refused before it.
        return Err(StoreError::Corrupt(format!(
            "schema version {version}, expected {SCHEMA_VERSION}"
        )));
    }
    let expected = Connection::open_in_memory()
        .and_then(|c| {
            for sql in MIGRATIONS {
                c.execute_batch(sql)?;
            }
            Ok(c)
        })
        .map_err(|e| StoreError::Database(format!("the expected schema: {e}")))?;
    let objects = |c: &Connection| -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
        let mut st = c.prepare(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
        )?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    };
    let want = objects(&expected).map_err(|e| StoreError::Database(e.to_string()))?;
    let have = objects(conn)
        .map_err(|e| StoreError::Corrupt(format!("the schema cannot be read: {e}")))?;
    for (kind, name, sql) in &want {
        match have.iter().find(|(k, n, _)| k == kind && n == name) {
            None => {
                return Err(StoreError::Corrupt(format!(
                    "the schema has no {kind} {name:?}"
                )))
            }
            Some((_, _, s)) if s != sql => {
                return Err(StoreError::Corrupt(format!(
                    "the {kind} {name:?} is not defined as this version defines it"
                )))
            }
            Some(_) => {}
        }
    }
    if let Some((kind, name, _)) = have
        .iter()
        .find(|(k, n, _)| !want.iter().any(|(wk, wn, _)| wk == k && wn == n))
    {
        return Err(StoreError::Corrupt(format!(
            "the schema has a {kind} {name:?} this version does not know"
        )));
    }
    Ok(version)
}

/// The journal holds every record after the snapshot's, with no gap: (records, snapshot seq).
fn check_journal(conn: &Connection) -> Result<(u64, u64), StoreError> {
    let read = |e: rusqlite::Error| StoreError::Corrupt(format!("the journal cannot be read: {e}"));
    let snapshot: i64 = conn
        .query_row(
            "SELECT COALESCE((SELECT journal_seq FROM snapshots WHERE id = 1), 0)",
            [],
            |r| r.get(0),
        )
        .map_err(read)?;
    let (count, first, last): (i64, Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT COUNT(*), MIN(seq), MAX(seq) FROM journal WHERE seq > ?1",
            [snapshot],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(read)?;
    if let (Some(first), Some(last)) = (first, last) {
        if first != snapshot + 1 {
            return Err(StoreError::Corrupt(format!(
                "the journal is not continuous: the snapshot covers records up to {snapshot}, \
                 and the next record is {first}"
            )));
        }
        if last - snapshot != count {
            return Err(StoreError::Corrupt(format!(
                "the journal is not continuous: {} of the records {first}..={last} are missing",
                last - snapshot - count
            )));
        }
    }
    Ok((count as u64, snapshot as u64))
}

/// What is at `path` before it is opened as a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing: a new store may be made there.
    Nothing,
    /// A file with bytes in it (whether it is a store is for the open to tell).
    File,
}

/// Refuses what must never become a new, empty fleet: a file that exists but is empty (a
/// database that lost its content), or a path that is not a regular file.
pub fn found(path: &Path) -> Result<Found, StoreError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(e) => return Err(StoreError::Database(format!("{}: {e}", path.display()))),
    };
    if !meta.is_file() {
        return Err(StoreError::Corrupt(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let wal = {
        let mut p = path.as_os_str().to_owned();
        p.push("-wal");
        std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
    };
    if meta.len() == 0 && wal == 0 {
        return Err(StoreError::Corrupt(format!(
            "{} exists but is empty (0 bytes): a new fleet is never made over an existing file",
            path.display()
        )));
    }
    Ok(Found::File)
}
