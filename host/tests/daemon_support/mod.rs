//! Shared by the in-process API tests: a daemon (`Server`) on an ephemeral loopback port over
//! the fleet of `tests/scenarios/gates-and-wait.yaml`, in a fresh data directory, with the
//! given tokens (none: every caller is an anonymous admin); shut down cleanly when dropped.
#![allow(dead_code)] // each test file uses a part

use crate::http_support::Client;
use crate::runtime_support::{shared_cache, workspace};
use waverun_core::sim::Scenario;
use waverun_host::api::{token_hash, Role};
use waverun_host::load_scenario;
use waverun_host::serve::{ModuleSource, ServeConfig, Server, TokenConfig};

/// The fleet the daemon serves (and whose strategy and run the tests create).
pub const FLEET_FILE: &str = "tests/scenarios/gates-and-wait.yaml";

/// That fleet's scenario.
pub fn scenario() -> Scenario {
    load_scenario(&workspace().join(FLEET_FILE)).unwrap()
}

/// A running daemon and a client of its fleet (`Deref`s to the client).
pub struct Daemon {
    pub server: Option<Server>,
    pub client: Client,
    /// `http://ADDR`, for the paths outside the fleet.
    pub root: String,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Daemon {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().expect("a clean shutdown");
        }
    }
}

impl Daemon {
    /// A daemon with these (name, role, token) bearer tokens.
    pub fn start(tokens: &[(&str, Role, &str)]) -> Daemon {
        Daemon::start_fleet(&workspace().join(FLEET_FILE), 200_000.0, tokens)
    }

    /// A daemon over the fleet file `fleet_file` whose clock runs `time_scale` times real time.
    pub fn start_fleet(
        fleet_file: &std::path::Path,
        time_scale: f64,
        tokens: &[(&str, Role, &str)],
    ) -> Daemon {
        Daemon::start_with(fleet_file, time_scale, tokens, |_| {})
    }

    /// The same, with `tweak` applied to the configuration before it starts.
    pub fn start_with(
        fleet_file: &std::path::Path,
        time_scale: f64,
        tokens: &[(&str, Role, &str)],
        tweak: impl FnOnce(&mut ServeConfig),
    ) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.path().join("data"),
            fleet: "default".to_string(),
            time_scale,
            fleet_file: Some(fleet_file.to_path_buf()),
            tokens: tokens
                .iter()
                .map(|(name, role, token)| TokenConfig {
                    name: name.to_string(),
                    role: *role,
                    sha256: token_hash(token),
                })
                .collect(),
            module_cache: Some(shared_cache()),
            ..ServeConfig::defaults()
        };
        if let Some(url) = crate::runtime_support::postgres_for(&config.data_dir) {
            config.store =
                waverun_host::serve::StoreChoice::Postgres(waverun_host::serve::PgChoice {
                    url,
                    holder: Some("test".to_string()),
                    lease: std::time::Duration::from_secs(15),
                });
        }
        tweak(&mut config);
        let server = Server::start(&config, &ModuleSource::Embedded).expect("the daemon starts");
        let root = format!("http://{}", server.addr());
        // On PostgreSQL the replica follows until it has taken the lease.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let probe = Client::new(&root);
        while !crate::runtime_support::takes_changes(
            probe
                .get(&format!("{root}/readyz"), None)
                .body
                .as_str()
                .unwrap_or_default(),
        ) {
            assert!(std::time::Instant::now() < end, "the daemon never led");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Daemon {
            client: Client::new(&format!("{root}/api/v1/fleets/default")),
            server: Some(server),
            root,
            _dir: dir,
        }
    }
}
