//! Shared by the tests on PostgreSQL: a private server from Debian's packages — `initdb` into a
//! temporary directory, listening on 127.0.0.1 at a free port and on a socket in that
//! directory, trust authentication for the `waverun` role — stopped (immediately) when
//! dropped. As root, the server runs as the `postgres` user (PostgreSQL refuses root).
#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use waverun_host::store::{LeaseConfig, LeaseState, PgStore};

/// A writer of the database at `url` that holds the leader lease as `holder` (waiting,
/// bounded, for a lease another left behind to expire).
pub fn leader(url: &str, holder: &str, ttl: Duration) -> PgStore {
    let lease = LeaseConfig {
        holder: holder.to_string(),
        ttl,
    };
    let mut store = PgStore::open(url, lease).unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match store.acquire().unwrap() {
            LeaseState::Held { .. } => return store,
            LeaseState::Other { remaining, .. } => {
                assert!(Instant::now() < end, "the lease was never free");
                std::thread::sleep(remaining.min(Duration::from_millis(100)));
            }
        }
    }
}

/// A running server.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    /// Serves TLS (`ssl=on`) with the certificate and key in its directory.
    tls: bool,
}

/// The directory of `initdb`, `pg_ctl` and `postgres`: on the PATH, else Debian's newest.
fn bindir() -> PathBuf {
    if let Ok(out) = Command::new("sh")
        .args(["-c", "command -v pg_ctl"])
        .output()
    {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !p.is_empty() {
            let real = std::fs::canonicalize(&p).unwrap_or_else(|_| PathBuf::from(&p));
            return real.parent().unwrap().to_path_buf();
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    found.retain(|b| b.join("initdb").exists());
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL is not installed (no pg_ctl on the PATH, nothing under \
             /usr/lib/postgresql): apt-get install -y postgresql (tests/run.sh does as root)"
        )
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) reads the process's effective user id; no memory is involved.
    unsafe { libc::geteuid() == 0 }
}

/// `bin/prog args…`, as the `postgres` user when this process is root.
fn run(bin: &Path, prog: &str, args: &[&str]) -> std::process::Output {
    let exe = bin.join(prog);
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    cmd.args(args)
        .env_remove("PGDATA")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Postgres {
    /// initdb, then start and wait until it accepts connections.
    pub fn start() -> Postgres {
        Postgres::start_with(None)
    }

    /// As [`Postgres::start`], serving TLS too (plain connections are still accepted) with
    /// the certificate `cert` and its key `key` (PEM files, copied).
    pub fn start_tls(cert: &Path, key: &Path) -> Postgres {
        Postgres::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(&Path, &Path)>) -> Postgres {
        let bin = bindir();
        let dir = tempfile::Builder::new()
            .prefix("waverun-pg-")
            .tempdir()
            .unwrap();
        if is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap()
                .success();
            assert!(ok, "chown of {} to postgres", dir.path().display());
        }
        if let Some((cert, key)) = tls {
            for (from, to) in [(cert, "server.crt"), (key, "server.key")] {
                let to = dir.path().join(to);
                std::fs::copy(from, &to).unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
                if is_root() {
                    let ok = Command::new("chown")
                        .arg("postgres:postgres")
                        .arg(&to)
                        .status()
                        .unwrap()
                        .success();
                    assert!(ok, "chown of {} to postgres", to.display());
                }
            }
        }
        let data = dir.path().join("data");
        let data_s = data.to_str().unwrap().to_string();
        let out = run(
            &bin,
            "initdb",
            &[
                "-D",
                &data_s,
                "-U",
                "waverun",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-instructions",
            ],
        );
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let pg = Postgres {
            dir,
            bin,
            port,
            tls: tls.is_some(),
        };
        pg.pg_ctl_start();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_str().unwrap().to_string()
    }

    fn pg_ctl_start(&self) {
        let mut opts = format!(
            "-p {} -h 127.0.0.1 -k {} -c fsync=on -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        if self.tls {
            let d = self.dir.path().display();
            opts += &format!(
                " -c ssl=on -c ssl_cert_file={d}/server.crt -c ssl_key_file={d}/server.key"
            );
        }
        let log = self.dir.path().join("server.log");
        let out = run(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stops it at once (as a crash would), then starts it again on the same data.
    pub fn restart(&self) {
        let _ = run(
            &self.bin,
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "stop"],
        );
        self.pg_ctl_start();
    }

    /// A connection string for database `db` (made by [`Postgres::create_db`]).
    pub fn url(&self, db: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=waverun dbname={db} connect_timeout=10",
            self.port
        )
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Creates database `db`.
    pub fn create_db(&self, db: &str) -> String {
        let mut c = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .expect("connect to the test server");
        c.batch_execute(&format!("CREATE DATABASE \"{db}\""))
            .unwrap();
        self.url(db)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = run(
            &self.bin,
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "stop"],
        );
    }
}
