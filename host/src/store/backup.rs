//! Backups of the SQLite store and their restore (`waverun store backup|restore|check`).
//!
//! A backup is SQLite's online backup of the whole database, taken in one read transaction: a
//! consistent copy as of one commit, made beside a running daemon (WAL readers never block its
//! writer). It is written to a temporary file, checked whole (`integrity_check`, schema,
//! journal), synced, and only then renamed into place.
//!
//! A restore needs the data directory to itself (the caller holds its lock: no daemon runs).
//! The backup is checked before anything moves; the database it replaces, damaged or not, is
//! renamed aside (`waverun.db.replaced-<time>`, with its `-wal`), never deleted; the copy is
//! synced and renamed into place. A backup taken from a running daemon is marked as after an
//! unclean stop, so the next start checks it whole and asks the providers about every operation
//! that was in flight, as after a crash.

use super::check::{self, Depth, Report};
use super::StoreError;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// What a backup or a restore did.
#[derive(Clone, Debug)]
pub struct Copied {
    /// The file written.
    pub path: PathBuf,
    /// The check of the copy.
    pub report: Report,
    /// The file the restore put aside, if there was one.
    pub replaced: Option<PathBuf>,
}

fn io(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Database(format!("{}: {e}", path.display()))
}

fn sql(path: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Database(format!("{}: {e}", path.display()))
}

/// Opens `path` read-only, refusing a path where no file is.
fn read_only(path: &Path) -> Result<Connection, StoreError> {
    if !path.is_file() {
        return Err(StoreError::Database(format!(
            "{}: no such file",
            path.display()
        )));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sql(path, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| sql(path, e))?;
    Ok(conn)
}

/// Checks the database at `path` without writing to it.
pub fn check_file(path: &Path, depth: Depth) -> Result<Report, StoreError> {
    if check::found(path)? == check::Found::Nothing {
        return Err(StoreError::Database(format!(
            "{}: no such file",
            path.display()
        )));
    }
    let conn = read_only(path)?;
    check::check(&conn, depth).map_err(|e| match e {
        StoreError::Corrupt(m) => StoreError::Corrupt(format!("{}: {m}", path.display())),
        e => e,
    })
}

/// The temporary file beside `path` that becomes it.
fn temporary(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".partial-{}", std::process::id()));
    PathBuf::from(p)
}

/// Copies the database `from` (whole, as of one commit) into a new file `to`, checked and
/// synced. `to` must not exist.
fn copy(from: &Connection, to: &Path) -> Result<Report, StoreError> {
    let partial = temporary(to);
    let _ = std::fs::remove_file(&partial);
    let result = (|| {
        {
            let mut dst = Connection::open(&partial).map_err(|e| sql(&partial, e))?;
            let b = rusqlite::backup::Backup::new(from, &mut dst).map_err(|e| sql(to, e))?;
            // Every page in one step: one read transaction, so one consistent state.
            b.step(-1).map_err(|e| sql(to, e))?;
            drop(b);
            // A self-contained file: no WAL beside it.
            dst.pragma_update(None, "journal_mode", "DELETE")
                .map_err(|e| sql(&partial, e))?;
        }
        let report = check::check(&read_only(&partial)?, Depth::Full)?;
        std::fs::File::open(&partial)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(&partial, e))?;
        if to.exists() {
            return Err(StoreError::Database(format!(
                "{} exists; not overwriting it",
                to.display()
            )));
        }
        std::fs::rename(&partial, to).map_err(|e| io(to, e))?;
        sync_dir(to);
        Ok(report)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// Makes a rename durable: syncs the directory that holds `path`.
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// Backs up the database at `db` (a daemon may be running on it) to the new file `to`.
pub fn backup(db: &Path, to: &Path) -> Result<Copied, StoreError> {
    if to.exists() {
        return Err(StoreError::Database(format!(
            "{} exists; not overwriting it (name a new file)",
            to.display()
        )));
    }
    let from = read_only(db)?;
    // The source is checked by the copy's own check: a damaged page fails the backup step or
    // the check of the copy.
    let report = copy(&from, to)?;
    Ok(Copied {
        path: to.to_path_buf(),
        report,
        replaced: None,
    })
}

/// Puts the backup `from` in place of the database `db` (the caller holds the data
/// directory's lock). The backup is checked first; `db`, if there, is renamed aside.
pub fn restore(from: &Path, db: &Path, now: &str) -> Result<Copied, StoreError> {
    check_file(from, Depth::Full)?;
    let src = read_only(from)?;
    let staged = {
        let mut p = db.as_os_str().to_owned();
        p.push(".restoring");
        PathBuf::from(p)
    };
    let _ = std::fs::remove_file(&staged);
    let report = copy(&src, &staged)?;
    // As after an unclean stop: the next start checks the whole file and asks about every
    // operation the backup has in flight.
    {
        let conn = Connection::open(&staged).map_err(|e| sql(&staged, e))?;
        conn.execute(
            "UPDATE meta SET value = '0' WHERE key = 'clean_shutdown'",
            [],
        )
        .map_err(|e| sql(&staged, e))?;
    }
    let mut replaced = None;
    if db.exists() {
        let stamp: String = now.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        let aside = |suffix: &str| {
            let mut p = db.as_os_str().to_owned();
            p.push(suffix);
            PathBuf::from(p)
        };
        let kept = aside(&format!(".replaced-{stamp}"));
        std::fs::rename(db, &kept).map_err(|e| io(db, e))?;
        for side in ["-wal", "-shm"] {
            let s = aside(side);
            if s.exists() {
                let mut k = kept.as_os_str().to_owned();
                k.push(side);
                std::fs::rename(&s, PathBuf::from(k)).map_err(|e| io(&s, e))?;
            }
        }
        replaced = Some(kept);
    }
    std::fs::rename(&staged, db).map_err(|e| io(db, e))?;
    sync_dir(db);
    Ok(Copied {
        path: db.to_path_buf(),
        report,
        replaced,
    })
}
