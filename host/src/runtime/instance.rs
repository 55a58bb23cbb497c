//! One plugin instance: a `Store` with its memory limit, the ABI imports, and typed calls of the
//! exports with an epoch deadline set before every call.

use super::error::{CallKind, GuestError, HostTrap, PluginError, Trap, TrapKind};
use super::host::{PluginHost, PluginLogLevel, QueryOutcome, SubmitOutcome};
use super::PluginModule;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use wasmtime::{
    Caller, Linker, Memory, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, TypedFunc,
};
use waverun_core::sim::{Scenario, SimulationReport};
use waverun_core::{
    CheckRequest, Command, Event, FieldError, NodeTally, Observation, RunStatus, State, Timestamp,
    UpgradeOperation,
};

/// The ABI version this host implements (`waverun_abi_version`).
pub const ABI_VERSION: i32 = 2;
/// The import namespace of ABI version 2.
pub const IMPORT_MODULE: &str = "waverun_host_v2";
/// The imports of ABI version 2 (section 3), exactly these.
pub const IMPORTS: [&str; 8] = [
    "clock_now_ms",
    "cluster_submit",
    "cluster_query",
    "check_submit",
    "journal_append",
    "snapshot_write",
    "storage_read",
    "log",
];
/// Log lines longer than this are cut (a guest cannot flood the host's log).
const MAX_LOG_LINE: usize = 16 * 1024;

/// Epoch deadlines per call kind. A deadline of zero traps at the first epoch check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// `waverun_init`, and instantiation with the ABI version check.
    pub init: Duration,
    /// `waverun_request`.
    pub request: Duration,
    /// `waverun_deliver`.
    pub deliver: Duration,
    /// `waverun_wake`.
    pub wake: Duration,
    /// `waverun_status`, `waverun_next_wakeup`, `waverun_abi_version`.
    pub query: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            init: Duration::from_secs(30),
            request: Duration::from_secs(5),
            deliver: Duration::from_secs(5),
            wake: Duration::from_secs(5),
            query: Duration::from_secs(2),
        }
    }
}

impl Deadlines {
    /// The deadline of a call kind.
    pub fn get(&self, kind: CallKind) -> Duration {
        match kind {
            CallKind::Instantiate | CallKind::Init => self.init,
            CallKind::Request => self.request,
            CallKind::Deliver => self.deliver,
            CallKind::Wake => self.wake,
            CallKind::Query => self.query,
        }
    }

    /// Sets the deadline of a call kind.
    pub fn set(&mut self, kind: CallKind, deadline: Duration) {
        match kind {
            CallKind::Instantiate | CallKind::Init => self.init = deadline,
            CallKind::Request => self.request = deadline,
            CallKind::Deliver => self.deliver = deadline,
            CallKind::Wake => self.wake = deadline,
            CallKind::Query => self.query = deadline,
        }
    }
}

/// Limits of one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceConfig {
    /// The guest's linear memory may not grow beyond this many bytes (a grow beyond it traps).
    pub memory_limit: usize,
    /// Epoch deadlines per call kind.
    pub deadlines: Deadlines,
}

impl Default for InstanceConfig {
    fn default() -> Self {
        InstanceConfig {
            memory_limit: 512 << 20,
            deadlines: Deadlines::default(),
        }
    }
}

/// What `waverun_init` reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitReport {
    /// The last journal sequence number applied.
    #[serde(default)]
    pub journal_seq: u64,
    /// Journal records replayed.
    #[serde(default)]
    pub replayed: u64,
    /// Operations in flight (each was queried with `cluster_query`).
    #[serde(default)]
    pub in_flight: u64,
    /// Events of the start itself (e.g. an operation submitted again and refused); an
    /// additive field, empty when the guest sends none.
    #[serde(default)]
    pub events: Vec<Event>,
    /// The events the last replayed journal record caused: for a host whose step for that
    /// record never committed (a trap between journaling the input and answering); a host that
    /// committed them ignores these. Additive, empty from a guest that sends none.
    #[serde(default)]
    pub last_record_events: Vec<Event>,
}

/// The `nextWakeup` request's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextWakeup {
    /// When (exact), or `None` for never.
    #[serde(default)]
    pub at: Option<Timestamp>,
    /// Why.
    #[serde(default)]
    pub reason: Option<Value>,
    /// Which run.
    #[serde(default)]
    pub run: Option<String>,
}

/// A run as the `runs` request lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEntry {
    /// Run name.
    pub name: String,
    /// Its state.
    pub state: State,
}

/// The memory limiter: [`StoreLimits`] (which traps a grow beyond the limit), remembering that
/// the limit was hit so the trap can be told apart from others.
struct GuestLimiter {
    limits: StoreLimits,
    max: usize,
    hit: bool,
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.hit = true;
        }
        self.limits.memory_growing(current, desired, maximum)
    }
    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }
    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }
    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }
    fn instances(&self) -> usize {
        self.limits.instances()
    }
    fn tables(&self) -> usize {
        self.limits.tables()
    }
    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

/// The data of a plugin's store.
pub struct HostState {
    host: PluginHost,
    limiter: GuestLimiter,
    memory: Option<Memory>,
    /// `storage_read` results being copied out (snapshot, journal), kept until the guest has
    /// read them whole.
    reads: [Option<Vec<u8>>; 2],
    /// Whether `journal_append` confirmed a record during the current call.
    journaled: bool,
    /// Fault injection: trap right after the next durable `journal_append`.
    trap_after_append: bool,
}

fn host_trap(message: impl Into<String>) -> wasmtime::Error {
    wasmtime::Error::new(HostTrap(message.into()))
}

fn guest_memory(caller: &mut Caller<'_, HostState>) -> wasmtime::Result<Memory> {
    if let Some(m) = caller.data().memory {
        return Ok(m);
    }
    caller
        .get_export("memory")
        .and_then(|e| e.into_memory())
        .ok_or_else(|| host_trap("the module exports no memory"))
}

fn range(ptr: i32, len: i32, size: usize) -> wasmtime::Result<std::ops::Range<usize>> {
    let start = ptr as u32 as usize;
    let end = start.checked_add(len as u32 as usize);
    match end {
        Some(end) if end <= size => Ok(start..end),
        _ => Err(host_trap(format!(
            "buffer {start}+{} is outside the guest's memory ({size} bytes)",
            len as u32
        ))),
    }
}

/// Runs `f` over the guest bytes `ptr..ptr+len` and the host state.
fn with_bytes<R>(
    caller: &mut Caller<'_, HostState>,
    ptr: i32,
    len: i32,
    f: impl FnOnce(&[u8], &mut HostState) -> R,
) -> wasmtime::Result<R> {
    let memory = guest_memory(caller)?;
    let (data, state) = memory.data_and_store_mut(caller);
    let r = range(ptr, len, data.len())?;
    Ok(f(&data[r], state))
}

#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotHeader {
    journal_seq: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryArg {
    operation_id: String,
}

/// Defines the ABI v2 imports.
pub(crate) fn add_imports(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(IMPORT_MODULE, "clock_now_ms", |c: Caller<'_, HostState>| {
        c.data().host.clock.now_ms()
    })?;
    linker.func_wrap(
        IMPORT_MODULE,
        "cluster_submit",
        |mut c: Caller<'_, HostState>, ptr: i32, len: i32| {
            with_bytes(&mut c, ptr, len, |bytes, s| {
                match serde_json::from_slice::<UpgradeOperation>(bytes) {
                    Ok(op) => match s.host.cluster.submit(&op) {
                        SubmitOutcome::Accepted => 0,
                        SubmitOutcome::Refused(m) => {
                            s.host.log.log(
                                PluginLogLevel::Warn,
                                &format!("cluster refused {}: {m}", op.operation_id),
                            );
                            1
                        }
                    },
                    Err(e) => {
                        s.host.log.log(
                            PluginLogLevel::Error,
                            &format!("cluster_submit: not an UpgradeOperation: {e}"),
                        );
                        2
                    }
                }
            })
        },
    )?;
    linker.func_wrap(
        IMPORT_MODULE,
        "cluster_query",
        |mut c: Caller<'_, HostState>, ptr: i32, len: i32| {
            with_bytes(&mut c, ptr, len, |bytes, s| {
                match serde_json::from_slice::<QueryArg>(bytes) {
                    Ok(q) => match s.host.cluster.query(&q.operation_id) {
                        QueryOutcome::Known => 0,
                        QueryOutcome::Unknown => 1,
                    },
                    Err(e) => {
                        s.host
                            .log
                            .log(PluginLogLevel::Error, &format!("cluster_query: {e}"));
                        2
                    }
                }
            })
        },
    )?;
    linker.func_wrap(
        IMPORT_MODULE,
        "check_submit",
        |mut c: Caller<'_, HostState>, ptr: i32, len: i32| {
            with_bytes(&mut c, ptr, len, |bytes, s| {
                match serde_json::from_slice::<CheckRequest>(bytes) {
                    Ok(req) => match s.host.cluster.submit_check(&req) {
                        SubmitOutcome::Accepted => 0,
                        SubmitOutcome::Refused(m) => {
                            s.host.log.log(
                                PluginLogLevel::Warn,
                                &format!("measurement {} refused: {m}", req.measurement_id),
                            );
                            1
                        }
                    },
                    Err(e) => {
                        s.host.log.log(
                            PluginLogLevel::Error,
                            &format!("check_submit: not a CheckRequest: {e}"),
                        );
                        2
                    }
                }
            })
        },
    )?;
    linker.func_wrap(
        IMPORT_MODULE,
        "journal_append",
        |mut c: Caller<'_, HostState>, ptr: i32, len: i32| {
            let code = with_bytes(&mut c, ptr, len, |bytes, s| {
                let seq = match serde_json::from_slice::<SeqOnly>(bytes) {
                    Ok(r) => r.seq,
                    Err(e) => {
                        s.host.log.log(
                            PluginLogLevel::Error,
                            &format!("journal_append: not a journal record: {e}"),
                        );
                        return 2;
                    }
                };
                match s.host.persistence.append(seq, bytes) {
                    Ok(()) => {
                        s.journaled = true;
                        0
                    }
                    Err(e) => {
                        s.host.log.log(
                            PluginLogLevel::Error,
                            &format!("journal_append {seq} not durable: {e}"),
                        );
                        1
                    }
                }
            })?;
            let s = c.data_mut();
            if code == 0 && s.trap_after_append {
                s.trap_after_append = false;
                return Err(host_trap(
                    "injected fault: trap after a durable journal_append",
                ));
            }
            Ok(code)
        },
    )?;
    linker.func_wrap(
        IMPORT_MODULE,
        "snapshot_write",
        |mut c: Caller<'_, HostState>, ptr: i32, len: i32| {
            with_bytes(&mut c, ptr, len, |bytes, s| {
                let seq = match serde_json::from_slice::<SnapshotHeader>(bytes) {
                    Ok(h) => h.journal_seq,
                    Err(e) => {
                        s.host.log.log(
                            PluginLogLevel::Error,
                            &format!("snapshot_write: not a snapshot: {e}"),
                        );
                        return 2;
                    }
                };
                match s.host.persistence.write_snapshot(seq, bytes) {
                    Ok(()) => 0,
                    Err(e) => {
                        s.host
                            .log
                            .log(PluginLogLevel::Warn, &format!("snapshot_write failed: {e}"));
                        1
                    }
                }
            })
        },
    )?;
    linker.func_wrap(
        IMPORT_MODULE,
        "storage_read",
        |mut c: Caller<'_, HostState>, kind: i32, ptr: i32, cap: i32| -> wasmtime::Result<i32> {
            let k = match kind {
                0 | 1 => kind as usize,
                _ => return Ok(-1),
            };
            if c.data().reads[k].is_none() {
                let p = &mut c.data_mut().host.persistence;
                let loaded = if k == 0 {
                    p.read_snapshot()
                        .map_err(|e| host_trap(format!("cannot read the snapshot: {e}")))?
                } else {
                    let records = p
                        .read_journal()
                        .map_err(|e| host_trap(format!("cannot read the journal: {e}")))?;
                    (!records.is_empty()).then(|| records.join(&b'\n'))
                };
                match loaded {
                    Some(b) => c.data_mut().reads[k] = Some(b),
                    None => return Ok(-1),
                }
            }
            let memory = guest_memory(&mut c)?;
            let (data, state) = memory.data_and_store_mut(&mut c);
            let bytes = state.reads[k].as_ref().expect("loaded above");
            let full = i32::try_from(bytes.len())
                .map_err(|_| host_trap("stored data larger than 2 GiB"))?;
            let n = full.min(cap.max(0));
            let r = range(ptr, n, data.len())?;
            data[r].copy_from_slice(&bytes[..n as usize]);
            if n == full {
                state.reads[k] = None;
            }
            Ok(full)
        },
    )?;
    linker.func_wrap(
        IMPORT_MODULE,
        "log",
        |mut c: Caller<'_, HostState>, level: i32, ptr: i32, len: i32| {
            with_bytes(&mut c, ptr, len, |bytes, s| {
                let bytes = &bytes[..bytes.len().min(MAX_LOG_LINE)];
                s.host.log.log(
                    PluginLogLevel::from_abi(level),
                    &String::from_utf8_lossy(bytes),
                );
            })
        },
    )?;
    Ok(())
}

/// The exports, typed once per instantiation.
struct Exports {
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    free: TypedFunc<(i32, i32), ()>,
    init: TypedFunc<(), i64>,
    request: TypedFunc<(i32, i32), i64>,
    deliver: TypedFunc<(i32, i32), i64>,
    wake: TypedFunc<(), i64>,
    status: TypedFunc<(i32, i32), i64>,
    next_wakeup: TypedFunc<(), i64>,
}

/// Which export a call goes to.
#[derive(Clone, Copy)]
enum Export {
    Init,
    Request,
    Deliver,
    Wake,
    Status,
    NextWakeup,
}

impl Export {
    fn kind(self) -> CallKind {
        match self {
            Export::Init => CallKind::Init,
            Export::Request => CallKind::Request,
            Export::Deliver => CallKind::Deliver,
            Export::Wake => CallKind::Wake,
            Export::Status | Export::NextWakeup => CallKind::Query,
        }
    }
}

/// What failed inside a call, before it becomes a [`PluginError`].
enum Failure {
    Wasm(wasmtime::Error),
    Protocol(String),
}

impl From<wasmtime::Error> for Failure {
    fn from(e: wasmtime::Error) -> Self {
        Failure::Wasm(e)
    }
}

/// A running plugin: one store, one instance. Calls are sequential (`&mut self`); an instance is
/// `Send`, so it can live on a worker thread.
///
/// After a trap the instance is *poisoned*: every call returns [`PluginError::Poisoned`] until
/// [`PluginInstance::recover`] has built a fresh store and instance around the same host
/// implementations and replayed the journal.
pub struct PluginInstance {
    plugin: PluginModule,
    store: Store<HostState>,
    exports: Option<Exports>,
    config: InstanceConfig,
    next_deadline: Option<Duration>,
}

impl PluginInstance {
    pub(crate) fn new(
        plugin: &PluginModule,
        host: PluginHost,
        config: InstanceConfig,
    ) -> Result<PluginInstance, PluginError> {
        let store = new_store(plugin, host, &config);
        let mut inst = PluginInstance {
            plugin: plugin.clone(),
            store,
            exports: None,
            config,
            next_deadline: None,
        };
        inst.start()?;
        Ok(inst)
    }

    /// Instantiates the module in the current store, types the exports and checks the ABI
    /// version.
    fn start(&mut self) -> Result<(), PluginError> {
        self.arm(CallKind::Instantiate);
        let instance = match self.plugin.pre().instantiate(&mut self.store) {
            Ok(i) => i,
            Err(e) => {
                return Err(
                    if self.store.data().limiter.hit || e.is::<wasmtime::Trap>() {
                        self.trap(CallKind::Instantiate, e)
                    } else {
                        PluginError::Load(describe(&e))
                    },
                )
            }
        };
        let s = &mut self.store;
        let memory = instance
            .get_memory(&mut *s, "memory")
            .ok_or_else(|| PluginError::Incompatible("the module exports no `memory`".into()))?;
        fn typed<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
            instance: &wasmtime::Instance,
            store: &mut Store<HostState>,
            name: &str,
        ) -> Result<TypedFunc<P, R>, PluginError> {
            instance.get_typed_func::<P, R>(store, name).map_err(|e| {
                PluginError::Incompatible(format!("export `{name}`: {}", describe(&e)))
            })
        }
        let version: TypedFunc<(), i32> = typed(&instance, s, "waverun_abi_version")?;
        let exports = Exports {
            memory,
            alloc: typed(&instance, s, "waverun_alloc")?,
            free: typed(&instance, s, "waverun_free")?,
            init: typed(&instance, s, "waverun_init")?,
            request: typed(&instance, s, "waverun_request")?,
            deliver: typed(&instance, s, "waverun_deliver")?,
            wake: typed(&instance, s, "waverun_wake")?,
            status: typed(&instance, s, "waverun_status")?,
            next_wakeup: typed(&instance, s, "waverun_next_wakeup")?,
        };
        self.arm(CallKind::Instantiate);
        let v = version
            .call(&mut self.store, ())
            .map_err(|e| self.trap(CallKind::Instantiate, e))?;
        if v != ABI_VERSION {
            return Err(PluginError::Incompatible(format!(
                "the module implements waverun ABI version {v}; this host implements version \
                 {ABI_VERSION}"
            )));
        }
        self.store.data_mut().memory = Some(memory);
        self.exports = Some(exports);
        Ok(())
    }

    /// Sets the epoch deadline (and clears per-call flags) before a call into the guest.
    fn arm(&mut self, kind: CallKind) {
        let d = self
            .next_deadline
            .take()
            .unwrap_or_else(|| self.config.deadlines.get(kind));
        let ticks = self.plugin.ticks(d);
        self.store.set_epoch_deadline(ticks);
        let s = self.store.data_mut();
        s.journaled = false;
        s.limiter.hit = false;
        s.reads = [None, None];
    }

    /// Turns a wasmtime error into a trap and poisons the instance.
    fn trap(&mut self, call: CallKind, e: wasmtime::Error) -> PluginError {
        self.exports = None;
        let s = self.store.data();
        let kind = if s.limiter.hit {
            TrapKind::MemoryLimit
        } else if e.is::<HostTrap>() {
            TrapKind::Host
        } else {
            match e.downcast_ref::<wasmtime::Trap>() {
                Some(wasmtime::Trap::Interrupt) => TrapKind::Deadline,
                Some(wasmtime::Trap::UnreachableCodeReached) => TrapKind::Unreachable,
                Some(wasmtime::Trap::StackOverflow) => TrapKind::StackOverflow,
                _ => TrapKind::Other,
            }
        };
        PluginError::Trap(Trap {
            kind,
            call,
            journaled: s.journaled,
            message: describe(&e),
        })
    }

    /// One call: copies `arg` into a guest buffer (if any), calls the export, copies the result
    /// out and frees it.
    fn call(&mut self, export: Export, arg: Option<&[u8]>) -> Result<Vec<u8>, PluginError> {
        if self.exports.is_none() {
            return Err(PluginError::Poisoned);
        }
        let kind = export.kind();
        self.arm(kind);
        let ex = self.exports.as_ref().expect("checked above");
        let store = &mut self.store;
        let result = (|| -> Result<Vec<u8>, Failure> {
            let packed = match arg {
                Some(arg) => {
                    let len = i32::try_from(arg.len())
                        .map_err(|_| Failure::Protocol("argument larger than 2 GiB".into()))?;
                    let ptr = ex.alloc.call(&mut *store, len)?;
                    if ptr == 0 {
                        return Err(Failure::Protocol(format!(
                            "waverun_alloc({len}) returned 0"
                        )));
                    }
                    ex.memory
                        .write(&mut *store, ptr as u32 as usize, arg)
                        .map_err(|_| {
                            Failure::Protocol(format!(
                                "waverun_alloc({len}) returned {ptr}, outside the memory"
                            ))
                        })?;
                    let f = match export {
                        Export::Request => &ex.request,
                        Export::Deliver => &ex.deliver,
                        _ => &ex.status,
                    };
                    f.call(&mut *store, (ptr, len))?
                }
                None => {
                    let f = match export {
                        Export::Init => &ex.init,
                        Export::Wake => &ex.wake,
                        _ => &ex.next_wakeup,
                    };
                    let r = f.call(&mut *store, ())?;
                    if matches!(export, Export::NextWakeup) {
                        return Ok(r.to_le_bytes().to_vec());
                    }
                    r
                }
            };
            let ptr = (packed as u64 >> 32) as u32;
            let len = packed as u32;
            let data = ex.memory.data(&*store);
            let bytes = (ptr as usize)
                .checked_add(len as usize)
                .and_then(|end| data.get(ptr as usize..end))
                .ok_or_else(|| {
                    Failure::Protocol(format!(
                        "result {ptr}+{len} is outside the guest's memory ({} bytes)",
                        data.len()
                    ))
                })?
                .to_vec();
            ex.free.call(&mut *store, (ptr as i32, len as i32))?;
            Ok(bytes)
        })();
        match result {
            Ok(b) => Ok(b),
            Err(Failure::Wasm(e)) => Err(self.trap(kind, e)),
            Err(Failure::Protocol(m)) => {
                // The guest's allocator or result handling is broken: do not trust it further.
                self.exports = None;
                Err(PluginError::Protocol(m))
            }
        }
    }

    /// Parses a result envelope straight into `T` (one pass, no intermediate JSON tree).
    fn envelope_as<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, PluginError> {
        #[derive(Deserialize)]
        struct ErrorBody {
            code: String,
            #[serde(default)]
            message: String,
            #[serde(default)]
            path: Option<String>,
            #[serde(default)]
            fields: Vec<FieldError>,
        }
        #[derive(Deserialize)]
        struct Envelope<T> {
            v: Option<i64>,
            ok: bool,
            #[serde(default = "Option::default")]
            result: Option<T>,
            #[serde(default)]
            error: Option<ErrorBody>,
            #[serde(default)]
            events: Vec<Event>,
        }
        let env: Envelope<T> = match serde_json::from_slice(bytes) {
            Ok(env) => env,
            // Say precisely what is wrong: not an envelope, or an unexpected result.
            Err(e) => {
                let detail = match serde_json::from_slice::<Envelope<Value>>(bytes) {
                    Ok(_) => format!("{what}: unexpected result: {e}"),
                    Err(_) => format!(
                        "result is not an envelope ({e}): {}",
                        String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                    ),
                };
                return Err(PluginError::Protocol(detail));
            }
        };
        if env.v != Some(1) {
            return Err(PluginError::Protocol(format!(
                "envelope version {:?}, expected 1",
                env.v
            )));
        }
        if env.ok {
            return match env.result {
                Some(r) => Ok(r),
                // `"result"` absent or `null`: whatever `T` makes of `null`.
                None => serde_json::from_value(Value::Null)
                    .map_err(|e| PluginError::Protocol(format!("{what}: unexpected result: {e}"))),
            };
        }
        let e = env
            .error
            .ok_or_else(|| PluginError::Protocol("`ok: false` without `error`".into()))?;
        Err(PluginError::Guest(GuestError {
            code: e.code,
            message: e.message,
            path: e.path,
            fields: e.fields,
            events: env.events,
        }))
    }

    fn events(bytes: &[u8], what: &str) -> Result<Vec<Event>, PluginError> {
        Ok(Self::envelope_as::<Events>(bytes, what)?.events)
    }

    /// `waverun_request` with a typed request; the envelope's result as `T`.
    fn request_as<R: Serialize, T: DeserializeOwned>(
        &mut self,
        request: &R,
        what: &str,
    ) -> Result<T, PluginError> {
        #[derive(Serialize)]
        struct Req<'a, R> {
            v: u32,
            request: &'a R,
        }
        let arg = serde_json::to_vec(&Req { v: 1, request }).expect("JSON serialises");
        let b = self.call(Export::Request, Some(&arg))?;
        Self::envelope_as(&b, what)
    }

    /// `waverun_init`: restores the snapshot, replays the journal and queries the operations in
    /// flight. Call once, first (instantiation has checked the ABI version).
    pub fn init(&mut self) -> Result<InitReport, PluginError> {
        let b = self.call(Export::Init, None)?;
        Self::envelope_as(&b, "waverun_init")
    }

    /// `waverun_request` with `request` (`{"type": "ping"}`, `{"type": "status", "run": ..}`,
    /// ...), wrapped in the `{"v": 1, "request": ..}` envelope. Returns the envelope's result.
    pub fn request(&mut self, request: &Value) -> Result<Value, PluginError> {
        self.request_as(request, "waverun_request")
    }

    /// [`Instance::request`], the result as the guest wrote it (checked to be JSON, never
    /// parsed into a tree): for large answers passed on as they are.
    pub fn request_raw(
        &mut self,
        request: &Value,
    ) -> Result<Box<serde_json::value::RawValue>, PluginError> {
        self.request_as(request, "waverun_request")
    }

    /// A `command` request; returns the events it caused.
    pub fn command(&mut self, command: &Command) -> Result<Vec<Event>, PluginError> {
        #[derive(Serialize)]
        struct CommandRequest<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            command: &'a Command,
        }
        let request = CommandRequest {
            kind: "command",
            command,
        };
        Ok(self.request_as::<_, Events>(&request, "command")?.events)
    }

    /// `waverun_deliver`: a cluster result or another observation; returns the events.
    pub fn deliver(&mut self, observation: &Observation) -> Result<Vec<Event>, PluginError> {
        #[derive(Serialize)]
        struct Arg<'a> {
            v: u32,
            observation: &'a Observation,
        }
        let arg = serde_json::to_vec(&Arg { v: 1, observation }).expect("JSON serialises");
        let b = self.call(Export::Deliver, Some(&arg))?;
        Self::events(&b, "waverun_deliver")
    }

    /// `waverun_wake`: fires the timers due at the clock's time; returns the events.
    pub fn wake(&mut self) -> Result<Vec<Event>, PluginError> {
        let b = self.call(Export::Wake, None)?;
        Self::events(&b, "waverun_wake")
    }

    /// `waverun_status`: the run's status tree.
    pub fn status(&mut self, run: &str) -> Result<RunStatus, PluginError> {
        #[derive(Serialize)]
        struct Arg<'a> {
            v: u32,
            run: &'a str,
        }
        let arg = serde_json::to_vec(&Arg { v: 1, run }).expect("JSON serialises");
        let b = self.call(Export::Status, Some(&arg))?;
        Self::envelope_as(&b, "waverun_status")
    }

    /// `waverun_next_wakeup`: when to call [`PluginInstance::wake`] next (ms since the epoch),
    /// `None` for never.
    pub fn next_wakeup(&mut self) -> Result<Option<i64>, PluginError> {
        let b = self.call(Export::NextWakeup, None)?;
        let ms = i64::from_le_bytes(b.try_into().expect("8 bytes"));
        Ok((ms >= 0).then_some(ms))
    }

    /// The `nextWakeup` request: the exact instant, why and which run.
    pub fn next_wakeup_detail(&mut self) -> Result<NextWakeup, PluginError> {
        self.request_as(&serde_json::json!({"type": "nextWakeup"}), "nextWakeup")
    }

    /// The `runs` request.
    pub fn runs(&mut self) -> Result<Vec<RunEntry>, PluginError> {
        #[derive(Deserialize)]
        struct Runs {
            runs: Vec<RunEntry>,
        }
        let r: Runs = self.request_as(&serde_json::json!({"type": "runs"}), "runs")?;
        Ok(r.runs)
    }

    /// The `status` request with `"members": false`: the run's tree without the members'
    /// nodes (stages, groups, gates, waits), which the guest builds without them.
    pub fn status_outline(&mut self, run: &str) -> Result<RunStatus, PluginError> {
        let request = serde_json::json!({"type": "status", "run": run, "members": false});
        self.request_as(&request, "status")
    }

    /// The `tallies` request: each run's nodes counted by state and wait reason.
    pub fn tallies(&mut self) -> Result<Vec<(String, NodeTally)>, PluginError> {
        #[derive(Deserialize)]
        struct Run {
            name: String,
            tally: NodeTally,
        }
        #[derive(Deserialize)]
        struct Tallies {
            runs: Vec<Run>,
        }
        let t: Tallies = self.request_as(&serde_json::json!({"type": "tallies"}), "tallies")?;
        Ok(t.runs.into_iter().map(|r| (r.name, r.tally)).collect())
    }

    /// The `simulate` request, a pure function (answered before `waverun_init`, nothing
    /// journaled, no cluster calls): `scenario_json` (a scenario as JSON text) through the
    /// engine and the simulated fleet inside the guest. Returns the report's JSON text as the
    /// guest wrote it, which is byte for byte what `waverun simulate -o json` prints.
    pub fn simulate_json(&mut self, scenario_json: &str) -> Result<String, PluginError> {
        serde_json::from_str::<&serde_json::value::RawValue>(scenario_json)
            .map_err(|e| PluginError::Protocol(format!("the scenario is not JSON: {e}")))?;
        let mut arg = Vec::with_capacity(scenario_json.len() + 64);
        arg.extend_from_slice(br#"{"v":1,"request":{"type":"simulate","scenario":"#);
        arg.extend_from_slice(scenario_json.as_bytes());
        arg.extend_from_slice(b"}}");
        let b = self.call(Export::Request, Some(&arg))?;
        let report: Box<serde_json::value::RawValue> = Self::envelope_as(&b, "simulate")?;
        Ok(Box::<str>::from(report).into_string())
    }

    /// [`PluginInstance::simulate_json`] with typed values.
    pub fn simulate(&mut self, scenario: &Scenario) -> Result<SimulationReport, PluginError> {
        let text = serde_json::to_string(scenario).expect("scenarios serialise");
        let report = self.simulate_json(&text)?;
        serde_json::from_str(&report)
            .map_err(|e| PluginError::Protocol(format!("simulate: unexpected result: {e}")))
    }

    /// The `ping` request (measures the call overhead).
    pub fn ping(&mut self) -> Result<(), PluginError> {
        self.request(&serde_json::json!({"type": "ping"}))
            .map(|_| ())
    }

    /// Whether a trap has poisoned the instance.
    pub fn is_poisoned(&self) -> bool {
        self.exports.is_none()
    }

    /// Discards the store and instance (after a trap, or any time), instantiates the module
    /// afresh around the same host implementations and calls `waverun_init`, which restores the
    /// snapshot and replays the journal: every input `journal_append` confirmed is applied
    /// again. On error the instance stays poisoned and `recover` may be called again.
    pub fn recover(&mut self) -> Result<InitReport, PluginError> {
        let host = self.store.data_mut().host.take();
        self.exports = None;
        self.store = new_store(&self.plugin, host, &self.config);
        self.start()?;
        self.init()
    }

    /// Takes the host implementations back (e.g. to run them under a newer plugin).
    pub fn into_host(self) -> PluginHost {
        self.store.into_data().host
    }

    /// The limits.
    pub fn config(&self) -> &InstanceConfig {
        &self.config
    }

    /// Sets the deadline of one call kind for the calls to come.
    pub fn set_deadline(&mut self, kind: CallKind, deadline: Duration) {
        self.config.deadlines.set(kind, deadline);
    }

    /// Overrides the deadline of the next call only (zero: trap at once).
    pub fn set_next_deadline(&mut self, deadline: Duration) {
        self.next_deadline = Some(deadline);
    }

    /// Fault injection for crash tests: the next `journal_append` that succeeds traps the guest
    /// right after the record is durable, like a crash between journaling an input and
    /// answering. The replay after [`PluginInstance::recover`] applies that input.
    pub fn inject_trap_after_next_append(&mut self) {
        self.store.data_mut().trap_after_append = true;
    }

    /// The plugin this instance runs.
    pub fn plugin(&self) -> &PluginModule {
        &self.plugin
    }
}

fn new_store(plugin: &PluginModule, host: PluginHost, config: &InstanceConfig) -> Store<HostState> {
    let limits = StoreLimitsBuilder::new()
        .memory_size(config.memory_limit)
        .instances(1)
        .trap_on_grow_failure(true)
        .build();
    let mut store = Store::new(
        plugin.wasm_engine(),
        HostState {
            host,
            limiter: GuestLimiter {
                limits,
                max: config.memory_limit,
                hit: false,
            },
            memory: None,
            reads: [None, None],
            journaled: false,
            trap_after_append: false,
        },
    );
    store.limiter(|s| &mut s.limiter);
    store.epoch_deadline_trap();
    store
}

/// The result of an input: the events it caused.
#[derive(Deserialize)]
struct Events {
    #[serde(default)]
    events: Vec<Event>,
}

/// An observation in the ABI's JSON form (section 6: `{"type": "upgradeSucceeded",
/// "operationId": ...}`), which is the core's serde form.
pub fn wire_observation(observation: &Observation) -> Value {
    serde_json::to_value(observation).expect("observations serialise")
}

/// An error with its causes, on one line.
pub(crate) fn describe(e: &wasmtime::Error) -> String {
    let mut out = String::new();
    for (i, cause) in e.chain().enumerate() {
        if i > 0 {
            out.push_str(": ");
        }
        out.push_str(&cause.to_string());
    }
    out
}
