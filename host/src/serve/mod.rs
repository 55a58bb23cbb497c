//! `waverun serve`: the daemon put together. The store in the data directory, the fleet clock,
//! the providers (the simulated fleet of `--fleet`), the engine thread, and the HTTP API on a
//! tokio runtime; a clean shutdown closes the store so the next start skips the integrity check.

mod config;
pub mod demo;
mod fleet_file;
mod listener;
mod lock;
mod observer;
mod tls;

pub use config::{
    ConfigFile, LimitsConfig, Overrides, PgChoice, ResolvedProvider, ServeConfig, StoreChoice,
    StoreFile, TlsConfig, TokenConfig,
};
pub use fleet_file::FleetFile;
pub use listener::Limits;
pub use lock::{DataDirLock, LOCK_FILE};
use observer::Observer;
pub use tls::{TlsAcceptor, TlsFiles};

use crate::api::{self, ApiState, Auth};
use crate::daemon::{
    BuildEngine, Daemon, FleetClock, FleetEngine, LeaseKeeper, LeaseTiming, Measurements,
    MemberBinding, OnLead, Providers, Replica, ReplicaStatus, Transition, LEADER_URL,
};
use crate::providers::aks::AksProvider;
use crate::providers::{ExecConfig, ExecProvider, Provider, SimulatedCluster, SimulatedProvider};
use crate::runtime::{InstanceConfig, PluginModule, PluginRuntime, RuntimeConfig};
use crate::store::{meta, SqliteStore, Store, StoreRead};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use waverun_core::Command;

/// The database file in a data directory.
pub const DB_FILE: &str = "waverun.db";

/// A running daemon.
pub struct Server {
    addr: SocketAddr,
    /// `https` with TLS, else `http`.
    scheme: &'static str,
    data_dir: PathBuf,
    fleet: String,
    module_hash: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
    observer: Option<Observer>,
    /// Held for the daemon's life: no other process uses the data directory meanwhile.
    _lock: DataDirLock,
}

/// Where the module comes from: the one built in, or a file.
pub enum ModuleSource {
    /// [`crate::runtime::EMBEDDED_PLUGIN`].
    Embedded,
    /// `--plugin PATH`.
    File(PathBuf),
}

fn load_module(source: &ModuleSource, cache: PathBuf) -> Result<PluginModule, String> {
    let rt = PluginRuntime::new(RuntimeConfig::with_cache(cache)).map_err(|e| e.to_string())?;
    let m = match source {
        ModuleSource::Embedded => rt.load(crate::runtime::EMBEDDED_PLUGIN),
        ModuleSource::File(p) => rt.load_file(p),
    };
    m.map_err(|e| format!("loading the engine plugin: {e}"))
}

fn hash_of(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Server {
    /// Starts the daemon: opens (or creates) the data directory, restores the engine, registers
    /// the fleet file's clusters, and listens. Returns once it is ready.
    pub fn start(config: &ServeConfig, source: &ModuleSource) -> Result<Server, String> {
        // The certificate first: a daemon never starts without the TLS it was told to serve.
        let tls = config.tls.as_ref().map(TlsAcceptor::load).transpose()?;
        if config.insecure_http && !config.listen.ip().is_loopback() && tls.is_none() {
            tracing::warn!(
                listen = %config.listen,
                "--insecure-http: serving plain HTTP on a non-loopback address; bearer tokens cross the network in clear unless a TLS-terminating proxy on this host is the only client"
            );
        }
        let lock = DataDirLock::acquire(
            &config.data_dir,
            &format!("waverun serve on {}", config.listen),
        )?;
        let std_listener = std::net::TcpListener::bind(config.listen)
            .map_err(|e| format!("listen on {}: {e}", config.listen))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| e.to_string())?;
        let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
        let core = match &config.store {
            StoreChoice::Sqlite => open_embedded(config, source)?,
            StoreChoice::Postgres(pg) => open_replica(config, pg, source, addr)?,
        };
        let Core {
            daemon,
            module,
            module_hash,
            providers,
            webhooks,
            driver,
            keeper,
            status,
        } = core;
        let observer = Observer::spawn(
            daemon.clone(),
            providers,
            config.members.clone(),
            config.observe_interval,
        );
        let mut auth = Auth::open();
        for t in &config.tokens {
            auth = auth.with_hash(&t.name, t.role, &t.sha256);
        }
        let mut state = ApiState::new(daemon.clone(), &config.fleet, auth)
            .with_sandbox(module)
            .with_public_url(config.public_url.as_deref())
            .with_stream_limits(config.stream_limits.0, config.stream_limits.1)
            .with_webhooks(webhooks);
        if let Some(s) = status {
            state = state.with_replica(s);
        }
        let state = Arc::new(state);
        let router = api::router(state.clone());
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let limits = config.limits.clone();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let thread = std::thread::Builder::new()
            .name("waverun-api".to_string())
            .spawn(move || -> Result<(), String> {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(std_listener)
                        .map_err(|e| e.to_string())?;
                    let (stopping, _) = tokio::sync::watch::channel(false);
                    if let Some(t) = &tls {
                        t.spawn_reloader(stopping.subscribe());
                    }
                    listener::serve(listener, router, tls, limits, async move {
                        let _ = stop.await;
                        // Event streams never end by themselves: end them, so that the
                        // connections the shutdown waits for close.
                        state.close();
                        stopping.send_replace(true);
                    })
                    .await;
                    Ok::<(), String>(())
                })?;
                // In-flight requests are done: a leader stops acting and gives its lease up,
                // the webhook driver hands over what it has pending, then the store closes.
                if let Some(k) = keeper {
                    k.stop();
                }
                if let Some(d) = driver.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    d.shutdown();
                }
                match Arc::try_unwrap(daemon) {
                    Ok(d) => d.shutdown().map_err(|e| e.to_string()),
                    Err(_) => Ok(()), // still shared: its last owner closes it
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Server {
            addr,
            scheme,
            data_dir: config.data_dir.clone(),
            fleet: config.fleet.clone(),
            module_hash,
            shutdown: Some(shutdown),
            thread: Some(thread),
            observer: Some(observer),
            _lock: lock,
        })
    }

    /// The address it listens on (the port, when it was 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://ADDR` with TLS, else `http://ADDR`.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// The fleet's name.
    pub fn fleet(&self) -> &str {
        &self.fleet
    }

    /// The SHA-256 of the engine module executing the fleet's runs.
    pub fn module_hash(&self) -> &str {
        &self.module_hash
    }

    /// Stops accepting requests, lets those in flight finish, closes the store.
    pub fn shutdown(mut self) -> Result<(), String> {
        drop(self.observer.take());
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("the API thread panicked".to_string()),
            None => Ok(()),
        }
    }

    /// Waits until the server stops by itself (it never does, unless it fails).
    pub fn wait(mut self) -> Result<(), String> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("the API thread panicked".to_string()),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.observer.take());
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the daemon is made of, over either store.
struct Core {
    daemon: Arc<Daemon>,
    module: PluginModule,
    module_hash: String,
    providers: Providers,
    webhooks: Arc<crate::webhooks::service::Webhooks>,
    /// The webhook driver, while this process runs one (always alone; while it leads among
    /// replicas).
    driver: DriverSlot,
    /// Among replicas: the lease keeper.
    keeper: Option<LeaseKeeper>,
    /// Among replicas: what the API shows of this one.
    status: Option<Arc<ReplicaStatus>>,
}

type DriverSlot = Arc<std::sync::Mutex<Option<crate::webhooks::driver::Driver>>>;

/// The providers the configuration names (the built-in `simulated` one aside).
fn configured_providers(config: &ServeConfig) -> Result<Providers, String> {
    let mut providers: Providers = Default::default();
    for (name, p) in &config.providers {
        let provider: Arc<dyn Provider> = match p {
            ResolvedProvider::Exec {
                config: p,
                timeouts,
            } => {
                let exec = ExecProvider::start(ExecConfig {
                    name: name.clone(),
                    command: p.command.clone(),
                    env: p.env.clone(),
                    pass_env: p.pass_env.clone(),
                    secret_env: p.secret_env.clone(),
                    timeouts: timeouts.clone(),
                    max_stdout: p.max_stdout_bytes.unwrap_or(1024 * 1024),
                    state_dir: config.data_dir.join("providers").join(name),
                })?;
                tracing::info!(provider = %name, "exec provider ready");
                Arc::new(exec)
            }
            ResolvedProvider::Aks(p) => {
                let aks = aks_provider(name, p)?;
                tracing::info!(provider = %name, arm = %aks.arm().endpoint(), "aks provider ready");
                Arc::new(aks)
            }
        };
        providers.insert(name.clone(), provider);
    }
    Ok(providers)
}

/// The fleet file, read (with its text, whose hash says whether it was registered).
fn read_fleet_file(config: &ServeConfig) -> Result<Option<(FleetFile, String)>, String> {
    match &config.fleet_file {
        Some(p) => Ok(Some((
            crate::load_file::<FleetFile>(p)?,
            crate::read_document(p)?,
        ))),
        None => Ok(None),
    }
}

fn measurements(config: &ServeConfig) -> Result<Measurements, String> {
    let checker = crate::health::Checker::new(config.health_checks.clone())?;
    Measurements::new(checker).map_err(|e| format!("starting the health checks' runtime: {e}"))
}

fn origin(config: &ServeConfig) -> crate::webhooks::cloudevent::Origin {
    crate::webhooks::cloudevent::Origin {
        fleet: config.fleet.clone(),
        base_url: config.public_url.clone(),
    }
}

/// One daemon on SQLite in its data directory: it always acts.
fn open_embedded(config: &ServeConfig, source: &ModuleSource) -> Result<Core, String> {
    let db = config.data_dir.join(DB_FILE);
    let mut store = SqliteStore::open(&db).map_err(|e| match e {
        crate::store::StoreError::Corrupt(_) => damaged(&config.data_dir, &e),
        e => format!("{}: {e}", db.display()),
    })?;
    match store.meta(meta::FLEET).map_err(|e| e.to_string())? {
        Some(f) if f != config.fleet => {
            return Err(format!(
                "data dir {} holds fleet {f:?}, not {:?}: name it with --fleet-name {f}, or use another --data-dir",
                config.data_dir.display(),
                config.fleet
            ))
        }
        Some(_) => {}
        None => store
            .set_meta(meta::FLEET, &config.fleet)
            .map_err(|e| e.to_string())?,
    }
    let fleet_file = read_fleet_file(config)?;
    let start_ms = fleet_file
        .as_ref()
        .and_then(|(f, _)| f.start)
        .map(|t| t.timestamp_millis());
    let clock =
        FleetClock::resume(&mut store, config.time_scale, start_ms).map_err(|e| e.to_string())?;
    let module = load_module(source, module_cache(config))?;
    let module_hash = module.sha256().to_string();
    store
        .set_meta(meta::MODULE_HASH, &module_hash)
        .map_err(|e| e.to_string())?;
    let clusters: Vec<SimulatedCluster> = fleet_file
        .as_ref()
        .map(|(f, _)| f.members.iter().map(SimulatedCluster::from).collect())
        .unwrap_or_default();
    let seed = fleet_file.as_ref().map_or(0, |(f, _)| f.seed);
    let simulated =
        Arc::new(SimulatedProvider::open(&db, clusters, clock, seed).map_err(|e| e.to_string())?);
    let mut providers = configured_providers(config)?;
    providers.insert(
        "simulated".to_string(),
        simulated.clone() as Arc<dyn Provider>,
    );
    let (engine, _) = FleetEngine::start(
        &module,
        store,
        clock,
        InstanceConfig::default(),
        "simulated",
    )
    .map_err(|e| format!("starting the engine: {e}"))?;
    let mut engine = engine;
    if let Some(n) = std::env::var("WAVERUN_FAULT_TRAP_EVERY")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        tracing::warn!(
            every = n,
            "fault injection: the engine traps after every {n} steps (WAVERUN_FAULT_TRAP_EVERY)"
        );
        engine.trap_every(n);
    }
    let daemon = Arc::new(Daemon::spawn_with(
        engine,
        clock,
        providers.clone(),
        measurements(config)?,
    ));
    if let Some((file, text)) = fleet_file {
        daemon
            .call(move |w| register_fleet(w, &file, &text, &simulated))
            .map_err(|e| e.to_string())??;
    }
    // Events out: the driver reads the log beside the engine and hands its writes to it.
    let reader = daemon
        .call(|w| w.engine().stored().reader())
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("a reader of the store for the webhooks: {e}"))?;
    let (driver, webhooks) = crate::webhooks::service::start(
        reader,
        daemon.webhook_writes(),
        &config.webhooks,
        origin(config),
        clock,
    )?;
    let told = driver.handle();
    daemon
        .call(move |w| w.set_webhooks(told))
        .map_err(|e| e.to_string())?;
    Ok(Core {
        daemon,
        module,
        module_hash,
        providers,
        webhooks: Arc::new(webhooks),
        driver: Arc::new(std::sync::Mutex::new(Some(driver))),
        keeper: None,
        status: None,
    })
}

fn module_cache(config: &ServeConfig) -> PathBuf {
    config
        .module_cache
        .clone()
        .unwrap_or_else(|| config.data_dir.join("modules"))
}

/// One of several replicas over PostgreSQL: it follows — answering reads from the database —
/// until the lease keeper says it leads; then it replays the fleet, adopts the operations in
/// flight, registers the fleet file if it changed and delivers events, until it steps down.
fn open_replica(
    config: &ServeConfig,
    pg: &config::PgChoice,
    source: &ModuleSource,
    addr: SocketAddr,
) -> Result<Core, String> {
    use crate::store::{ActingDeadline, FollowerView, LeaseConfig, PgReader, PgStore};
    let holder = pg
        .holder
        .clone()
        .unwrap_or_else(|| format!("{}:{}", config::host_name(), addr.port()));
    let lease = LeaseConfig {
        holder: holder.clone(),
        ttl: pg.lease,
    };
    let pg_error = |e: crate::store::StoreError| format!("store (PostgreSQL): {e}");
    let mut store = PgStore::open(&pg.url, lease.clone()).map_err(pg_error)?;
    let fleet = store
        .settle_meta(meta::FLEET, &config.fleet)
        .map_err(pg_error)?;
    if fleet != config.fleet {
        return Err(format!(
            "the database holds fleet {fleet:?}, not {:?}: name it with --fleet-name {fleet}, or use another database",
            config.fleet
        ));
    }
    let fleet_file = read_fleet_file(config)?;
    let start_ms = fleet_file
        .as_ref()
        .and_then(|(f, _)| f.start)
        .map(|t| t.timestamp_millis());
    let clock = FleetClock::shared(&mut store, config.time_scale, start_ms).map_err(pg_error)?;
    drop(store);
    let module = load_module(source, module_cache(config))?;
    let module_hash = module.sha256().to_string();
    let clusters: Vec<SimulatedCluster> = fleet_file
        .as_ref()
        .map(|(f, _)| f.members.iter().map(SimulatedCluster::from).collect())
        .unwrap_or_default();
    let seed = fleet_file.as_ref().map_or(0, |(f, _)| f.seed);
    let simulated = Arc::new(
        SimulatedProvider::open_postgres(&pg.url, clusters, clock, seed).map_err(pg_error)?,
    );
    let mut providers = configured_providers(config)?;
    providers.insert(
        "simulated".to_string(),
        simulated.clone() as Arc<dyn Provider>,
    );
    let deadline = ActingDeadline::default();
    let build: BuildEngine = {
        let (module, url, lease, deadline) = (
            module.clone(),
            pg.url.clone(),
            lease.clone(),
            deadline.clone(),
        );
        Box::new(move |epoch| {
            let engine = match epoch {
                Some(epoch) => {
                    let mut writer =
                        PgStore::connect(&url, lease.clone())?.with_acting(deadline.clone());
                    writer.lead(epoch);
                    FleetEngine::start(
                        &module,
                        writer,
                        clock,
                        InstanceConfig::default(),
                        "simulated",
                    )?
                    .0
                }
                None => {
                    let url = url.clone();
                    let open: crate::store::OpenReader = Arc::new(move || {
                        Ok(Box::new(PgReader::open(&url)?) as Box<dyn StoreRead + Send>)
                    });
                    let mut e = FleetEngine::start(
                        &module,
                        FollowerView::open(open)?,
                        clock,
                        InstanceConfig::default(),
                        "simulated",
                    )?
                    .0;
                    e.make_follower();
                    e
                }
            };
            Ok(engine)
        })
    };
    let engine = build(None).map_err(|e| format!("following the fleet in the database: {e}"))?;
    let url = config.public_url.clone().unwrap_or_else(|| {
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{addr}")
    });
    // Each time it takes the lead: where clients reach it, the module it runs, and the fleet
    // file's clusters (registered once per version of the file).
    let on_lead: OnLead = {
        let (file, simulated) = (fleet_file.clone(), simulated.clone());
        let (module_hash, holder, url) = (module_hash.clone(), holder.clone(), url.clone());
        Box::new(move |w, epoch| {
            if !w.acting() {
                return;
            }
            let leader = serde_json::json!({"holder": holder, "epoch": epoch, "url": url});
            let store = w.engine().store();
            let wrote = store
                .set_meta(meta::MODULE_HASH, &module_hash)
                .and_then(|()| store.set_meta(LEADER_URL, &leader.to_string()));
            if let Err(e) = wrote {
                tracing::warn!(error = %e, "recording the leader");
            }
            if let Some((file, text)) = &file {
                if let Err(e) = register_fleet(w, file, text, &simulated) {
                    tracing::error!(error = %e, "registering the fleet file");
                }
            }
        })
    };
    let daemon = Arc::new(Daemon::spawn_replica(
        engine,
        clock,
        providers.clone(),
        measurements(config)?,
        Some(Replica::new(deadline.clone(), build).on_lead(on_lead)),
    ));
    let status = Arc::new(ReplicaStatus::new(&holder, Some(url.clone())));
    let webhooks = Arc::new(crate::webhooks::service::handle(
        &config.webhooks,
        origin(config),
    )?);
    let driver: DriverSlot = Default::default();
    let on_change: Box<dyn FnMut(Transition) + Send> = {
        let daemon = daemon.clone();
        let (driver, webhooks) = (driver.clone(), webhooks.clone());
        let settings = config.webhooks.clone();
        let origin = origin(config);
        let pg_url = pg.url.clone();
        Box::new(move |t| match t {
            Transition::Lead { epoch } => {
                let _ = daemon.post(move |w| w.lead(epoch));
                // Events out, from this leader: a driver of its own over the database.
                let started =
                    PgReader::open(&pg_url)
                        .map_err(|e| e.to_string())
                        .and_then(|reader| {
                            crate::webhooks::service::start_driver(
                                Box::new(reader),
                                daemon.webhook_writes(),
                                &settings,
                                origin.clone(),
                                clock,
                            )
                        });
                match started {
                    Ok(d) => {
                        webhooks.attach(&d);
                        let told = d.handle();
                        let _ = daemon.post(move |w| w.set_webhooks(told));
                        if let Some(old) =
                            driver.lock().unwrap_or_else(|e| e.into_inner()).replace(d)
                        {
                            old.shutdown();
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "starting the webhook driver"),
                }
            }
            Transition::StepDown { .. } => {
                let _ = daemon.post(|w| w.follow_leader());
                if let Some(d) = driver.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    d.shutdown();
                }
            }
        })
    };
    let keeper_store = PgStore::connect(&pg.url, lease).map_err(pg_error)?;
    let keeper = LeaseKeeper::start(
        keeper_store,
        LeaseTiming::for_ttl(pg.lease.as_millis() as i64),
        deadline,
        status.clone(),
        on_change,
    )?;
    tracing::info!(holder = %holder, lease_seconds = pg.lease.as_secs_f64(), "a replica over PostgreSQL: following until it leads");
    Ok(Core {
        daemon,
        module,
        module_hash,
        providers,
        webhooks,
        driver,
        keeper: Some(keeper),
        status: Some(status),
    })
}

/// What a daemon that refuses a damaged database says: what is wrong, and how to restore.
fn damaged(data_dir: &std::path::Path, e: &crate::store::StoreError) -> String {
    let dir = data_dir.display();
    format!(
        "{e}\nwaverun does not start on a damaged database, and writes nothing to it. \
         `waverun store check --data-dir {dir}` reports what is wrong; \
         `waverun store restore --data-dir {dir} BACKUP` puts the last backup in its place \
         (the damaged file is kept beside it); backups are made with \
         `waverun store backup --data-dir {dir} FILE`, also while the daemon runs."
    )
}

/// Registers the fleet file's clusters (as their provider describes them now), its releases
/// and its freezes — once per version of the file (`meta.fleet_file_hash`). On the engine
/// thread.
fn register_fleet(
    w: &mut crate::daemon::Worker,
    file: &FleetFile,
    text: &str,
    simulated: &SimulatedProvider,
) -> Result<(), String> {
    let hash = hash_of(text.as_bytes());
    let now =
        waverun_core::Timestamp::from_timestamp_millis(crate::clock::Clock::now_ms(w.clock()))
            .unwrap_or_default();
    let known = w
        .engine()
        .stored()
        .meta("fleet_file_hash")
        .map_err(|e| e.to_string())?;
    if known.as_deref() == Some(hash.as_str()) {
        return Ok(());
    }
    let mut bindings = Vec::with_capacity(file.members.len());
    for m in &file.members {
        bindings.push(MemberBinding {
            name: m.name.clone(),
            provider: m
                .provider
                .as_ref()
                .map_or_else(|| "simulated".to_string(), |p| p.name.clone()),
            cluster_ref: m
                .provider
                .as_ref()
                .and_then(|p| p.id.clone())
                .map(Value::String),
            cluster_resource_id: None,
            group: m.group.clone(),
            labels: m.labels.clone(),
            long_term_support: m.long_term_support,
        });
    }
    let targets: Vec<_> = bindings
        .iter()
        .zip(&file.members)
        .map(|(b, m)| b.target(Some(m.region.clone())))
        .collect();
    let mut described = Vec::with_capacity(bindings.len());
    for ((binding, d), m) in bindings
        .into_iter()
        .zip(simulated.describe_many(&targets))
        .zip(&file.members)
    {
        let d = d.map_err(|e| format!("members: {}: {e}", m.name))?;
        described.push((binding, d));
    }
    // One step for the whole file: a 100,000-member fleet registers in one transaction.
    w.register_members(&described, "fleet-file", None)
        .map_err(|(i, e)| match i {
            Some(i) => format!("members[{i}] ({}): {e}", file.members[i].name),
            None => format!("members: {e}"),
        })?;
    let catalog = file.catalog(file.start.unwrap_or(now));
    w.command(&Command::SetCatalog { catalog }, None)
        .map_err(|e| format!("releases: {e}"))?;
    w.command(
        &Command::SetFreezes {
            freezes: file.freezes.clone(),
        },
        None,
    )
    .map_err(|e| format!("freezes: {e}"))?;
    w.engine()
        .store()
        .set_meta("fleet_file_hash", &hash)
        .map_err(|e| e.to_string())
}

/// An `aks` provider from its config: its credential (the config, then the Azure SDKs'
/// environment variables) and its ARM client.
fn aks_provider(name: &str, c: &config::AksProviderConfig) -> Result<AksProvider, String> {
    use crate::providers::aks::arm::{ArmClient, ArmOptions, ArmTimeouts, RateLimits};
    use crate::providers::aks::auth::{AuthOptions, Credential, DEFAULT_AUTHORITY_HOST};
    let path = format!("providers.{name}");
    let endpoint = c
        .auth
        .resource_manager
        .clone()
        .unwrap_or_else(|| crate::providers::aks::auth::DEFAULT_RESOURCE_MANAGER.to_string());
    let setting = format!("{path}.caFile");
    let hint = format!("name one with {setting}");
    let tls = |url: &str| crate::outbound::tls_config(url, c.ca_file.as_deref(), &setting, &hint);
    let authority = c
        .auth
        .authority_host
        .clone()
        .or_else(|| std::env::var("AZURE_AUTHORITY_HOST").ok())
        .unwrap_or_else(|| DEFAULT_AUTHORITY_HOST.to_string());
    let credential = Credential::new(
        &c.auth,
        AuthOptions {
            tls: tls(&authority)?,
            ..AuthOptions::default()
        },
    )
    .map_err(|e| format!("{path}.auth: {e}"))?;
    let mut limits = RateLimits::default();
    let l = &c.limits;
    limits.reads.per_second = l.reads_per_second.unwrap_or(limits.reads.per_second);
    limits.reads.burst = l.read_burst.unwrap_or(limits.reads.burst);
    limits.writes.per_second = l.writes_per_second.unwrap_or(limits.writes.per_second);
    limits.writes.burst = l.write_burst.unwrap_or(limits.writes.burst);
    let mut timeouts = ArmTimeouts::default();
    if let Some(s) = c.request_timeout_seconds {
        timeouts.request = std::time::Duration::from_secs_f64(s);
    }
    let arm = ArmClient::new(
        &endpoint,
        Arc::new(credential),
        ArmOptions {
            tls: tls(&endpoint)?,
            timeouts,
            limits,
            ..ArmOptions::default()
        },
    )
    .map_err(|e| format!("{path}.auth.resourceManager: {e}"))?;
    let provider = AksProvider::new(name, arm, c.releases_subscription.clone());
    Ok(match c.poll_interval_seconds {
        Some(s) => provider.with_poll_seconds(s),
        None => provider,
    })
}
