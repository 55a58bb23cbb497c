//! `waverun store check|backup|restore|migrate`: the data directory's database, without a
//! daemon's API. `check` and `backup` only read, and run beside a daemon; `restore` needs the
//! directory to itself (it takes the lock a daemon holds); `migrate` copies a fleet to
//! PostgreSQL.

use super::client::CliError;
use crate::serve::{DataDirLock, DB_FILE};
use crate::store::backup;
use crate::store::check::{Depth, Report};
use anyhow::{bail, Result};
use clap::Subcommand;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `--data-dir`, as `serve` takes it.
#[derive(clap::Args)]
pub struct DataDir {
    /// The data directory (default ./waverun-data; $WAVERUN_DATA_DIR).
    #[arg(
        long = "data-dir",
        value_name = "DIR",
        env = "WAVERUN_DATA_DIR",
        default_value = "waverun-data"
    )]
    path: PathBuf,
}

/// The store commands.
#[derive(Subcommand)]
pub enum StoreCmd {
    /// Check the database whole: every page (`integrity_check`), the schema against this
    /// version's, the journal's continuity. Exit 0 when it is undamaged, 1 when it is damaged.
    /// Runs beside a daemon.
    #[command(after_help = "Example:\n  waverun store check --data-dir /var/lib/waverun")]
    Check {
        #[command(flatten)]
        dir: DataDir,
        /// Only `quick_check` (what every start runs): faster, indexes not compared with tables.
        #[arg(long)]
        quick: bool,
    },
    /// Copy the database to a new file, consistent as of one commit (SQLite's online backup),
    /// and check the copy whole. Runs beside a daemon.
    #[command(
        after_help = "Example:\n  waverun store backup --data-dir /var/lib/waverun /backups/waverun-$(date +%F).db"
    )]
    Backup {
        #[command(flatten)]
        dir: DataDir,
        /// The backup file to write (it must not exist).
        file: PathBuf,
    },
    /// Put a backup in place of the data directory's database. The daemon must be stopped; the
    /// backup is checked first, and the database it replaces is kept beside it
    /// (`waverun.db.replaced-TIME`). The next start asks the providers about every operation
    /// the backup had in flight.
    #[command(
        after_help = "Example:\n  waverun store restore --data-dir /var/lib/waverun /backups/waverun-2026-12-01.db"
    )]
    Restore {
        #[command(flatten)]
        dir: DataDir,
        /// The backup file to restore.
        file: PathBuf,
    },
    /// Copy a fleet's whole history from its SQLite database to an empty PostgreSQL database
    /// (every table, row for row, in one transaction under the leader lease). Stop the daemon
    /// first: what it writes after the copy began is not copied.
    #[command(after_help = "Example:
  waverun store migrate --from sqlite:/var/lib/waverun \\
    --to 'postgres:host=db.internal user=waverun dbname=fleet sslmode=disable'")]
    Migrate {
        /// `sqlite:DIR` (a data directory) or `sqlite:FILE` (its waverun.db).
        #[arg(long, value_name = "sqlite:PATH")]
        from: String,
        /// `postgres:CONNECTION` — a libpq connection string or a postgresql:// URL.
        #[arg(long, value_name = "postgres:URL")]
        to: String,
    },
}

fn describe(r: &Report) -> String {
    format!(
        "{} ok, schema version {}, journal: snapshot at record {} and {} records after it, {} events, {} audit entries, {} bytes",
        r.pages, r.schema_version, r.journal.1, r.journal.0, r.events, r.audit, r.bytes
    )
}

fn db_in(dir: &Path) -> Result<PathBuf> {
    let db = dir.join(DB_FILE);
    if !db.exists() {
        bail!(
            "{}: no database here ({} is missing)",
            dir.display(),
            db.display()
        );
    }
    Ok(db)
}

/// Runs a store command.
pub fn store(cmd: StoreCmd, out: &mut impl Write) -> Result<()> {
    match cmd {
        StoreCmd::Check { dir, quick } => {
            let data_dir = dir.path;
            let db = db_in(&data_dir)?;
            let depth = if quick { Depth::Quick } else { Depth::Full };
            let began = std::time::Instant::now();
            match backup::check_file(&db, depth) {
                Ok(r) => {
                    writeln!(
                        out,
                        "{}: undamaged ({}; {:.1} s)",
                        db.display(),
                        describe(&r),
                        began.elapsed().as_secs_f64()
                    )?;
                }
                Err(e) => {
                    return Err(CliError::Other(format!(
                    "{e}\nrestore the last backup with: waverun store restore --data-dir {} BACKUP",
                    data_dir.display()
                ))
                    .into())
                }
            }
        }
        StoreCmd::Backup { dir, file } => {
            let data_dir = dir.path;
            let db = db_in(&data_dir)?;
            let began = std::time::Instant::now();
            let copied =
                backup::backup(&db, &file).map_err(|e| CliError::Other(format!("backup: {e}")))?;
            writeln!(
                out,
                "backed up {} to {} in {:.1} s ({})",
                db.display(),
                copied.path.display(),
                began.elapsed().as_secs_f64(),
                describe(&copied.report)
            )?;
        }
        StoreCmd::Restore { dir, file } => {
            let data_dir = dir.path;
            let _lock = DataDirLock::acquire(&data_dir, "waverun store restore")
                .map_err(|e| CliError::Other(format!("restore: {e}")))?;
            let db = data_dir.join(DB_FILE);
            let copied = backup::restore(&file, &db, &crate::now_rfc3339())
                .map_err(|e| CliError::Other(format!("restore: {e}")))?;
            writeln!(
                out,
                "restored {} from {} ({})",
                db.display(),
                file.display(),
                describe(&copied.report)
            )?;
            if let Some(kept) = &copied.replaced {
                writeln!(
                    out,
                    "the database it replaced is kept as {}",
                    kept.display()
                )?;
            }
            writeln!(
                out,
                "start the daemon: it checks the whole file and asks the providers about every operation in flight"
            )?;
        }
        StoreCmd::Migrate { from, to } => {
            let Some(source) = from.strip_prefix("sqlite:") else {
                return Err(CliError::Usage(format!(
                    "--from {from:?}: give sqlite:DIR (a data directory) or sqlite:FILE"
                ))
                .into());
            };
            let Some(url) = to.strip_prefix("postgres:") else {
                return Err(CliError::Usage(
                    "--to: give postgres:CONNECTION (a libpq connection string or a \
                     postgresql:// URL)"
                        .to_string(),
                )
                .into());
            };
            let source = Path::new(source);
            let db = if source.is_dir() {
                db_in(source)?
            } else {
                source.to_path_buf()
            };
            let began = std::time::Instant::now();
            let copied = crate::store::migrate::sqlite_to_postgres(&db, url)
                .map_err(|e| CliError::Other(format!("migrate: {e}")))?;
            let rows: u64 = copied.tables.iter().map(|(_, n)| n).sum();
            let detail: Vec<String> = copied
                .tables
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(t, n)| format!("{t} {n}"))
                .collect();
            // Never the connection string: it can hold a password.
            writeln!(
                out,
                "copied {} to PostgreSQL in {:.1} s: {rows} rows ({})",
                db.display(),
                began.elapsed().as_secs_f64(),
                detail.join(", ")
            )?;
        }
    }
    Ok(())
}
