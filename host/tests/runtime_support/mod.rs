//! Shared by the runtime tests: where the real plugin is (built on demand), and runtimes with a
//! private cache directory.
#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;
use waverun_host::runtime::{PluginModule, PluginRuntime, RuntimeConfig};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(t);
    }
    newest
}

/// The plugin module: `$WAVERUN_PLUGIN`, or the release build in the target directory, built
/// with `cargo build --release --target wasm32-unknown-unknown -p waverun-plugin` when it is
/// missing or older than the plugin's or the core's sources.
pub fn plugin_wasm() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(p) = std::env::var_os("WAVERUN_PLUGIN") {
            return PathBuf::from(p);
        }
        let root = workspace();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let wasm = target.join("wasm32-unknown-unknown/release/waverun_plugin.wasm");
        let built = wasm.metadata().and_then(|m| m.modified()).ok();
        let sources = [
            "bindings/plugin/src",
            "bindings/plugin/Cargo.toml",
            "core/src",
        ]
        .iter()
        .filter_map(|d| {
            let p = root.join(d);
            if p.is_dir() {
                newest_mtime(&p)
            } else {
                p.metadata().and_then(|m| m.modified()).ok()
            }
        })
        .max();
        if built.is_none() || sources > built {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .current_dir(&root)
                .args([
                    "build",
                    "--release",
                    "--target",
                    "wasm32-unknown-unknown",
                    "-p",
                    "waverun-plugin",
                ])
                .status()
                .expect("run cargo");
            assert!(status.success(), "building the plugin failed");
        }
        assert!(wasm.exists(), "{} was not built", wasm.display());
        wasm
    })
    .clone()
}

/// A runtime with a private cache directory (kept alive by the returned guard).
pub fn runtime() -> (PluginRuntime, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let rt =
        PluginRuntime::new(RuntimeConfig::with_cache(dir.path().join("modules"))).expect("runtime");
    (rt, dir)
}

/// The module cache shared by the tests that run the real plugin (compiling it takes seconds;
/// the cache tests in `runtime.rs` use private directories).
pub fn shared_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("waverun-test-modules")
}

/// The real plugin, loaded into a runtime over the shared cache.
pub fn plugin() -> (PluginRuntime, PluginModule) {
    let rt = PluginRuntime::new(RuntimeConfig::with_cache(shared_cache())).expect("runtime");
    let plugin = rt.load_file(&plugin_wasm()).expect("load the plugin");
    (rt, plugin)
}

/// Every scenario file: `tests/scenarios/**/*.yaml` and `host/examples/*.yaml` but the daemon's
/// config example, `host/examples/waverun.yaml`.
pub fn scenario_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml")
                && !p.ends_with("host/examples/waverun.yaml")
            {
                out.push(p);
            }
        }
    }
    let root = workspace();
    let mut files = Vec::new();
    walk(&root.join("tests/scenarios"), &mut files);
    walk(&root.join("host/examples"), &mut files);
    files.sort();
    files
}

/// The test harness's store switch: with `WAVERUN_TEST_POSTGRES` set (a libpq connection
/// string to a PostgreSQL server's `postgres` database, as `tests/run.sh` sets it for the
/// daemon suite's second pass), each daemon a test starts keeps its state on that server — in
/// a database of its data directory's own, made on first use, so a daemon started again on
/// the same directory finds its fleet — instead of SQLite. `None` when it is not set.
pub fn postgres_for(data_dir: &Path) -> Option<String> {
    let server = std::env::var("WAVERUN_TEST_POSTGRES")
        .ok()
        .filter(|s| !s.trim().is_empty())?;
    // FNV-1a of the path: a stable name, the same for every life of one directory.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data_dir.to_string_lossy().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let name = format!("wt_{h:016x}");
    let mut c = postgres::Client::connect(&server, postgres::NoTls).unwrap_or_else(|e| {
        panic!("WAVERUN_TEST_POSTGRES={server:?}: the test server does not answer: {e}")
    });
    let exists = c
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .unwrap()
        .is_some();
    if !exists {
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
    }
    Some(format!("{server} dbname={name}"))
}

/// Whether a daemon's `/readyz` answer says it may take changes: always on SQLite; on
/// PostgreSQL once it leads (a lone replica takes the lease within moments of starting).
pub fn takes_changes(readyz: &str) -> bool {
    !readyz.lines().any(|l| l.starts_with("follower "))
}
