//! Shared by the tests of the real binary: `waverun serve` as a child process on an ephemeral
//! loopback port, its stderr in a log file.
#![allow(dead_code)] // each test file uses a part

use crate::http_support::Client;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One life of the daemon.
pub struct Life {
    pub child: Child,
    pub api: Client,
    /// Started on the harness's PostgreSQL (`runtime_support::postgres_for`): ready once it
    /// leads.
    switched: bool,
}

impl Life {
    /// Starts `waverun serve ARGS --listen 127.0.0.1:0` with `env`, its stderr in `log`, and
    /// waits until it says where it listens.
    pub fn start(args: &[&str], env: &[(&str, &str)], log: &Path) -> Life {
        let log_file = std::fs::File::create(log).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_waverun"));
        cmd.arg("serve").args(args);
        // The harness's store switch (runtime_support::postgres_for), for a daemon whose test
        // gives no configuration of its own.
        let data_dir = args
            .iter()
            .position(|a| *a == "--data-dir")
            .and_then(|i| args.get(i + 1));
        let mut switched = false;
        if let (Some(dir), false) = (data_dir, args.contains(&"--config")) {
            if let Some(url) = crate::runtime_support::postgres_for(Path::new(dir)) {
                let config = PathBuf::from(format!("{dir}.store.json"));
                let store = json!({"store": {"type": "postgres", "url": url, "holder": "test"}});
                std::fs::write(&config, store.to_string()).unwrap();
                cmd.arg("--config").arg(config);
                switched = true;
            }
        }
        cmd.args(["--listen", "127.0.0.1:0"])
            .env("WAVERUN_CACHE_DIR", crate::runtime_support::shared_cache())
            .env_remove("WAVERUN_FAULT_TRAP_EVERY")
            .stdout(Stdio::piped())
            .stderr(log_file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("the binary runs");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "the daemon did not say where it listens: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            });
        Life {
            child,
            api: Client::new(&format!("http://{addr}/api/v1/fleets/default")),
            switched,
        }
    }

    /// Whether `/readyz` answers 200 within `secs` (and, on the harness's PostgreSQL, says
    /// it leads).
    pub fn ready(&self, secs: u64) -> bool {
        let end = Instant::now() + Duration::from_secs(secs);
        let url = self.api.base.split("/api/").next().unwrap().to_string() + "/readyz";
        while Instant::now() < end {
            let r = self.api.get(&url, None);
            if r.status == 200
                && (!self.switched
                    || crate::runtime_support::takes_changes(r.body.as_str().unwrap_or_default()))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// SIGTERM, then waits: whether it exited cleanly.
    pub fn stop(mut self) -> bool {
        // SAFETY: kill(2) signals the child this test started; no memory is involved.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        self.child.wait().unwrap().success()
    }

    /// SIGKILL, then waits.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// A life that ends with its test, whatever way the test ends (a passed assertion or a
/// panic): the daemon is killed and reaped, so no test leaves a daemon running behind it.
impl Drop for Life {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A small deterministic generator (xorshift: the kill points of a crash test are reproducible).
pub struct Rng(pub u64);

impl Rng {
    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A simulated fleet file (`--fleet`) in `dir`: members `(name, group, upgrade minutes)` in
/// eastus on 1.33.2 and one Linux pool, with 1.34.1 and the pool's image released everywhere.
pub fn fleet_file(dir: &Path, members: &[(&str, &str, u32)]) -> PathBuf {
    let members: Vec<Value> = members
        .iter()
        .map(|(name, group, minutes)| {
            json!({
                "name": name, "group": group, "region": "eastus", "kubernetesVersion": "1.33.2",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
                "behavior": {"upgradeMinutes": minutes},
            })
        })
        .collect();
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "members": members,
        "releases": {
            "kubernetes": [{"version": "1.34.1", "available": since}],
            "nodeImages": [{"version": "AKSUbuntu-2204-202611.01.0", "available": since}],
        },
    });
    let path = dir.join("fleet.json");
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    path
}
