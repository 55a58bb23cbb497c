//! The plugin runtime: `waverun-core` compiled to a WebAssembly core module (the plugin,
//! `bindings/plugin`, contract in `bindings/ABI.md`), run in wasmtime.
//!
//! Names say which side of the boundary they are on: this side (the runtime, running the plugin)
//! says `Plugin…` — [`PluginRuntime`], [`PluginModule`], [`PluginInstance`], [`PluginHost`] (what
//! implements the imports), [`PluginLogLevel`] — and writes wasmtime's engine `WasmEngine`
//! (`wasmtime::Engine`; `Engine` alone is the core's); the guest side (`waverun_plugin`) calls
//! its driver `Guest`, the imports it calls `HostImports` and its log levels `GuestLogLevel`.
//!
//! - [`PluginRuntime`]: one [`wasmtime::Engine`] with epoch interruption (a background thread
//!   advances the epoch every [`RuntimeConfig::tick`] until the last user is dropped), the ABI v2
//!   imports in one [`Linker`], and an on-disk cache of precompiled modules keyed by content
//!   hash ([`cache`]).
//! - [`PluginModule`]: a loaded module with its `InstancePre` (imports resolved once, reused for every
//!   instantiation).
//! - [`PluginInstance`]: one store with a memory limit; every call gets an epoch deadline for its
//!   kind; typed errors tell guest refusals ([`PluginError::Guest`]) from traps
//!   ([`PluginError::Trap`]); after a trap, [`PluginInstance::recover`] rebuilds the instance
//!   around the same [`PluginHost`] and replays the journal.
//! - [`host`]: the traits the daemon implements ([`Clock`], [`ClusterProvider`],
//!   [`Persistence`]) and in-memory implementations.
//! - [`PluginDriver`]: the plugin as a [`waverun_core::sim::EngineDriver`], so the simulator can
//!   run a scenario through it and compare with the native engine ([`plugin_simulation`]); its
//!   cluster provider is the simulated fleet ([`SimulatedClusterCalls`]).

pub mod cache;
mod driver;
mod error;
pub mod host;
mod instance;

pub use cache::CacheStatus;
pub use driver::{core_error, plugin_simulation, plugin_simulation_with, simulate_plugin};
pub use driver::{PluginDriver, PluginSimulation, SimulateError, SimulatedClusterCalls};
pub use error::{CallKind, GuestError, PluginError, Trap, TrapKind};
pub use host::{
    timestamp_ms, Clock, ClusterProvider, LogSink, ManualClock, MemoryLog, MemoryPersistence,
    Persistence, PluginHost, PluginLogLevel, QueryOutcome, QueueProvider, StderrLog, SubmitOutcome,
    SystemClock,
};
pub use instance::{
    wire_observation, Deadlines, HostState, InitReport, InstanceConfig, NextWakeup, PluginInstance,
    RunEntry, ABI_VERSION, IMPORTS, IMPORT_MODULE,
};

use cache::ModuleCache;
use instance::describe;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::{Engine as WasmEngine, InstancePre, Linker};

/// The engine plugin built with this binary (`host/build.rs` embeds the release build of
/// `bindings/plugin`): what runs when no other module is named.
pub const EMBEDDED_PLUGIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/waverun_plugin.wasm"));

/// A module named in the environment instead of the embedded one: `$WAVERUN_PLUGIN`.
pub fn plugin_override() -> Option<PathBuf> {
    std::env::var_os("WAVERUN_PLUGIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The module cache a CLI uses: `$WAVERUN_CACHE_DIR`, else `$XDG_CACHE_HOME/waverun/modules`,
/// else `$HOME/.cache/waverun/modules`; `None` when none of them is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("WAVERUN_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("waverun/modules")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/waverun/modules")))
}

/// Settings of a [`PluginRuntime`].
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Where precompiled modules are cached; `None` compiles every load in memory.
    pub cache_dir: Option<PathBuf>,
    /// How often the epoch advances: the granularity of call deadlines.
    pub tick: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: None,
            tick: Duration::from_millis(5),
        }
    }
}

impl RuntimeConfig {
    /// The default settings with a cache directory.
    pub fn with_cache(dir: impl Into<PathBuf>) -> RuntimeConfig {
        RuntimeConfig {
            cache_dir: Some(dir.into()),
            ..RuntimeConfig::default()
        }
    }
}

/// The background thread that advances the engine's epoch; stops when dropped (it is shared by
/// the runtime, its plugins and their instances, so deadlines work as long as any of them
/// lives).
struct Ticker {
    tick: Duration,
    stop: Mutex<Option<mpsc::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Ticker {
    fn start(wasm_engine: WasmEngine, tick: Duration) -> Result<Ticker, PluginError> {
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("waverun-epoch".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(tick) {
                    wasm_engine.increment_epoch();
                }
            })?;
        Ok(Ticker {
            tick,
            stop: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        let stop = self.stop.get_mut().unwrap_or_else(|e| e.into_inner());
        drop(stop.take()); // disconnects the channel: the thread ends at its next wait
        let thread = self.thread.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = thread.take() {
            let _ = t.join();
        }
    }
}

/// One wasmtime engine for every plugin of the process.
pub struct PluginRuntime {
    wasm_engine: WasmEngine,
    linker: Arc<Linker<HostState>>,
    ticker: Arc<Ticker>,
    cache: Option<ModuleCache>,
}

impl PluginRuntime {
    /// An engine with epoch interruption, its ticker thread and (optionally) a module cache.
    pub fn new(config: RuntimeConfig) -> Result<PluginRuntime, PluginError> {
        let mut c = wasmtime::Config::new();
        c.epoch_interruption(true);
        let wasm_engine = WasmEngine::new(&c).map_err(|e| PluginError::Load(describe(&e)))?;
        let mut linker = Linker::new(&wasm_engine);
        instance::add_imports(&mut linker).map_err(|e| PluginError::Load(describe(&e)))?;
        let cache = match &config.cache_dir {
            Some(dir) => Some(ModuleCache::new(dir, &wasm_engine)?),
            None => None,
        };
        let ticker = Arc::new(Ticker::start(wasm_engine.clone(), config.tick)?);
        Ok(PluginRuntime {
            wasm_engine,
            linker: Arc::new(linker),
            ticker,
            cache,
        })
    }

    /// The wasmtime engine.
    pub fn wasm_engine(&self) -> &WasmEngine {
        &self.wasm_engine
    }

    /// The cache file a module with these bytes would use, when caching is on.
    pub fn cache_path(&self, wasm: &[u8]) -> Option<PathBuf> {
        self.cache
            .as_ref()
            .map(|c| c.entry_path(&cache::sha256_hex(wasm)))
    }

    /// Compiles (or loads from the cache) a module, checks that it imports nothing outside
    /// ABI v2, and resolves its imports once.
    pub fn load(&self, wasm: &[u8]) -> Result<PluginModule, PluginError> {
        let sha = cache::sha256_hex(wasm);
        let (module, status) = match &self.cache {
            Some(c) => c.load(&self.wasm_engine, wasm, &sha)?,
            None => (
                wasmtime::Module::from_binary(&self.wasm_engine, wasm)
                    .map_err(|e| PluginError::Load(describe(&e)))?,
                CacheStatus::Disabled,
            ),
        };
        let foreign: Vec<String> = module
            .imports()
            .filter(|i| i.module() != IMPORT_MODULE || !IMPORTS.contains(&i.name()))
            .map(|i| format!("`{}::{}`", i.module(), i.name()))
            .collect();
        if !foreign.is_empty() {
            return Err(PluginError::Incompatible(format!(
                "the module imports {}, which waverun ABI v{ABI_VERSION} does not provide (its \
                 imports are `{IMPORT_MODULE}`::{{{}}})",
                foreign.join(", "),
                IMPORTS.join(", ")
            )));
        }
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| PluginError::Incompatible(describe(&e)))?;
        Ok(PluginModule {
            inner: Arc::new(PluginInner {
                wasm_engine: self.wasm_engine.clone(),
                pre,
                sha256: sha,
                cache_status: status,
                ticker: self.ticker.clone(),
            }),
        })
    }

    /// [`PluginRuntime::load`] of a file.
    pub fn load_file(&self, path: &Path) -> Result<PluginModule, PluginError> {
        let wasm = std::fs::read(path).map_err(|e| {
            PluginError::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", path.display()),
            ))
        })?;
        self.load(&wasm)
    }
}

struct PluginInner {
    wasm_engine: WasmEngine,
    pre: InstancePre<HostState>,
    sha256: String,
    cache_status: CacheStatus,
    ticker: Arc<Ticker>,
}

/// A loaded plugin module (cheap to clone).
#[derive(Clone)]
pub struct PluginModule {
    inner: Arc<PluginInner>,
}

impl PluginModule {
    /// Instantiates the module around `host` and checks `waverun_abi_version() == 2`. Call
    /// [`PluginInstance::init`] next.
    pub fn instantiate(
        &self,
        host: PluginHost,
        config: InstanceConfig,
    ) -> Result<PluginInstance, PluginError> {
        PluginInstance::new(self, host, config)
    }

    /// Hex SHA-256 of the wasm bytes.
    pub fn sha256(&self) -> &str {
        &self.inner.sha256
    }

    /// How the module was obtained (compiled, cache hit, ...).
    pub fn cache_status(&self) -> &CacheStatus {
        &self.inner.cache_status
    }

    pub(crate) fn wasm_engine(&self) -> &WasmEngine {
        &self.inner.wasm_engine
    }

    pub(crate) fn pre(&self) -> &InstancePre<HostState> {
        &self.inner.pre
    }

    /// Epoch ticks for a deadline: rounded up, plus one for the tick in progress; zero stays
    /// zero (trap at the first check).
    pub(crate) fn ticks(&self, d: Duration) -> u64 {
        if d.is_zero() {
            return 0;
        }
        let tick = self.inner.ticker.tick.as_nanos().max(1);
        (d.as_nanos().div_ceil(tick) as u64).saturating_add(1)
    }
}
