//! What the host gives the plugin through its imports: a clock, a cluster provider, persistence
//! and a log. The daemon implements these traits over the real world; this module also has
//! in-memory implementations for tests and the simulator.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use waverun_core::{CheckRequest, UpgradeOperation};

pub use crate::clock::{timestamp_ms, Clock, ManualClock, SystemClock};

/// The answer to `cluster_submit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// The upgrade started (or was already known under this id); its result will be delivered.
    Accepted,
    /// The upgrade could not be started; the guest records the member as failed with
    /// `ClusterSubmitFailed`.
    Refused(String),
}

/// The answer to `cluster_query`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryOutcome {
    /// The host knows the operation; its result will be delivered (again).
    Known,
    /// The host does not know it; the guest submits it again.
    Unknown,
}

/// The cluster imports (`cluster_submit`, `cluster_query`) and the health-check import
/// (`check_submit`, ABI v2). None may block on the upgrade or the measurement itself: results
/// come back later through [`super::PluginInstance::deliver`].
pub trait ClusterProvider: Send {
    /// Start a member upgrade; a known `operation_id` is the same operation.
    fn submit(&mut self, operation: &UpgradeOperation) -> SubmitOutcome;
    /// Whether the host knows an operation (asked for every operation in flight after a start).
    fn query(&mut self, operation_id: &str) -> QueryOutcome;
    /// Start one measurement of a health check; its result is delivered later as a
    /// `checkMeasured` observation. A known `measurement_id` is the same measurement (the guest
    /// submits every awaited one again after a start): it is not measured twice. A refusal
    /// becomes an `Error` measurement. By default a host measures nothing: it refuses.
    fn submit_check(&mut self, request: &CheckRequest) -> SubmitOutcome {
        SubmitOutcome::Refused(format!(
            "this host measures no health checks ({})",
            request.measurement_id
        ))
    }
}

/// The persistence imports (`journal_append`, `snapshot_write`, `storage_read`). Records and
/// snapshots are opaque JSON bytes; the runtime reads their sequence numbers for the host.
pub trait Persistence: Send {
    /// Appends journal record `seq` durably (written and flushed) before returning `Ok`.
    fn append(&mut self, seq: u64, record: &[u8]) -> io::Result<()>;
    /// Replaces the snapshot atomically and durably. Records with `seq <= journal_seq` may be
    /// dropped afterwards.
    fn write_snapshot(&mut self, journal_seq: u64, snapshot: &[u8]) -> io::Result<()>;
    /// The stored snapshot, if any.
    fn read_snapshot(&mut self) -> io::Result<Option<Vec<u8>>>;
    /// Every journal record after the snapshot, in append order.
    fn read_journal(&mut self) -> io::Result<Vec<Vec<u8>>>;
}

/// Guest log levels (the `log` import).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PluginLogLevel {
    /// 0
    Trace,
    /// 1
    Debug,
    /// 2
    Info,
    /// 3
    Warn,
    /// 4 (and anything above)
    Error,
}

impl PluginLogLevel {
    /// The level of an ABI level number.
    pub fn from_abi(level: i32) -> PluginLogLevel {
        match level {
            i32::MIN..=0 => PluginLogLevel::Trace,
            1 => PluginLogLevel::Debug,
            2 => PluginLogLevel::Info,
            3 => PluginLogLevel::Warn,
            _ => PluginLogLevel::Error,
        }
    }
}

/// Where the guest's log lines go (the `log` import). Never control flow.
pub trait LogSink: Send {
    /// One line.
    fn log(&mut self, level: PluginLogLevel, message: &str);
}

/// Writes guest log lines at or above a level to standard error.
#[derive(Clone, Copy, Debug)]
pub struct StderrLog(pub PluginLogLevel);

impl Default for StderrLog {
    fn default() -> Self {
        StderrLog(PluginLogLevel::Warn)
    }
}

impl LogSink for StderrLog {
    fn log(&mut self, level: PluginLogLevel, message: &str) {
        if level >= self.0 {
            eprintln!("plugin {level:?}: {message}");
        }
    }
}

/// Keeps guest log lines in memory (shared between clones).
#[derive(Clone, Debug, Default)]
pub struct MemoryLog(Arc<Mutex<Vec<(PluginLogLevel, String)>>>);

impl MemoryLog {
    /// The lines so far.
    pub fn lines(&self) -> Vec<(PluginLogLevel, String)> {
        lock(&self.0).clone()
    }
}

impl LogSink for MemoryLog {
    fn log(&mut self, level: PluginLogLevel, message: &str) {
        lock(&self.0).push((level, message.to_string()));
    }
}

/// Everything the host side of one plugin instance owns. It survives a trapped instance:
/// [`super::PluginInstance::recover`] moves it into the fresh one.
pub struct PluginHost {
    /// `clock_now_ms`.
    pub clock: Box<dyn Clock>,
    /// `cluster_submit`, `cluster_query`, `check_submit`.
    pub cluster: Box<dyn ClusterProvider>,
    /// `journal_append`, `snapshot_write`, `storage_read`.
    pub persistence: Box<dyn Persistence>,
    /// `log`.
    pub log: Box<dyn LogSink>,
}

impl PluginHost {
    /// A host over these implementations; guest warnings and errors go to standard error.
    pub fn new(
        clock: impl Clock + 'static,
        cluster: impl ClusterProvider + 'static,
        persistence: impl Persistence + 'static,
    ) -> PluginHost {
        PluginHost {
            clock: Box::new(clock),
            cluster: Box::new(cluster),
            persistence: Box::new(persistence),
            log: Box::new(StderrLog::default()),
        }
    }

    /// A host whose imports refuse everything (a clock at 0, no clusters, no storage): for an
    /// instance that only answers pure requests (`ping`, `simulate`).
    pub fn inert() -> PluginHost {
        PluginHost {
            clock: Box::new(ManualClock::new(0)),
            cluster: Box::new(Inert),
            persistence: Box::new(Inert),
            log: Box::new(Inert),
        }
    }

    /// Replaces the log sink.
    pub fn with_log(mut self, log: impl LogSink + 'static) -> PluginHost {
        self.log = Box::new(log);
        self
    }

    /// Takes the implementations out, leaving inert ones (a clock at 0, a provider that
    /// refuses, storage that fails).
    pub(crate) fn take(&mut self) -> PluginHost {
        std::mem::replace(self, PluginHost::inert())
    }
}

struct Inert;

impl ClusterProvider for Inert {
    fn submit(&mut self, _: &UpgradeOperation) -> SubmitOutcome {
        SubmitOutcome::Refused("no cluster provider".into())
    }
    fn query(&mut self, _: &str) -> QueryOutcome {
        QueryOutcome::Unknown
    }
}

impl Persistence for Inert {
    fn append(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
        Err(io::Error::other("no persistence"))
    }
    fn write_snapshot(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
        Err(io::Error::other("no persistence"))
    }
    fn read_snapshot(&mut self) -> io::Result<Option<Vec<u8>>> {
        Err(io::Error::other("no persistence"))
    }
    fn read_journal(&mut self) -> io::Result<Vec<Vec<u8>>> {
        Err(io::Error::other("no persistence"))
    }
}

impl LogSink for Inert {
    fn log(&mut self, _: PluginLogLevel, _: &str) {}
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind: keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug, Default)]
struct MemoryStore {
    snapshot: Option<(u64, Vec<u8>)>,
    journal: Vec<(u64, Vec<u8>)>,
    appends: u64,
    fail_appends: bool,
}

/// Persistence in memory (shared between clones, so a test can hand the same storage to a
/// "restarted" instance, look inside, or make appends fail).
#[derive(Clone, Debug, Default)]
pub struct MemoryPersistence(Arc<Mutex<MemoryStore>>);

impl MemoryPersistence {
    /// Empty storage.
    pub fn new() -> MemoryPersistence {
        MemoryPersistence::default()
    }
    /// The snapshot, if one was written: its journal `seq` and bytes.
    pub fn snapshot(&self) -> Option<(u64, Vec<u8>)> {
        lock(&self.0).snapshot.clone()
    }

    /// Journal records kept (those after the snapshot).
    pub fn journal_len(&self) -> usize {
        lock(&self.0).journal.len()
    }
    /// The `seq` of the last record appended, 0 when none.
    pub fn last_seq(&self) -> u64 {
        let s = lock(&self.0);
        s.journal
            .last()
            .map(|r| r.0)
            .or(s.snapshot.as_ref().map(|s| s.0))
            .unwrap_or(0)
    }
    /// Records appended since creation (including those a snapshot made droppable).
    pub fn appends(&self) -> u64 {
        lock(&self.0).appends
    }
    /// The snapshot's `journalSeq`, if there is a snapshot.
    pub fn snapshot_seq(&self) -> Option<u64> {
        lock(&self.0).snapshot.as_ref().map(|s| s.0)
    }
    /// The kept journal records as text.
    pub fn records(&self) -> Vec<String> {
        lock(&self.0)
            .journal
            .iter()
            .map(|r| String::from_utf8_lossy(&r.1).into_owned())
            .collect()
    }
    /// The journal records kept, with their `seq`.
    pub fn journal(&self) -> Vec<(u64, Vec<u8>)> {
        lock(&self.0).journal.clone()
    }
    /// Makes every append fail (a full disk) until called with `false`.
    pub fn fail_appends(&self, fail: bool) {
        lock(&self.0).fail_appends = fail;
    }
}

impl Persistence for MemoryPersistence {
    fn append(&mut self, seq: u64, record: &[u8]) -> io::Result<()> {
        let mut s = lock(&self.0);
        if s.fail_appends {
            return Err(io::Error::other("append refused (test)"));
        }
        s.journal.push((seq, record.to_vec()));
        s.appends += 1;
        Ok(())
    }
    fn write_snapshot(&mut self, journal_seq: u64, snapshot: &[u8]) -> io::Result<()> {
        let mut s = lock(&self.0);
        s.snapshot = Some((journal_seq, snapshot.to_vec()));
        s.journal.retain(|r| r.0 > journal_seq);
        Ok(())
    }
    fn read_snapshot(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(lock(&self.0).snapshot.as_ref().map(|s| s.1.clone()))
    }
    fn read_journal(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let s = lock(&self.0);
        let after = s.snapshot.as_ref().map_or(0, |s| s.0);
        Ok(s.journal
            .iter()
            .filter(|r| r.0 > after)
            .map(|r| r.1.clone())
            .collect())
    }
}

#[derive(Debug, Default)]
struct Queue {
    submitted: VecDeque<UpgradeOperation>,
    known: BTreeSet<String>,
    refuse: Option<String>,
    queries: Vec<String>,
    checks: VecDeque<CheckRequest>,
    checks_known: BTreeSet<String>,
    check_calls: Vec<String>,
    refuse_checks: Option<String>,
}

/// A cluster provider that accepts every operation and every measurement and queues it for the
/// caller, who answers later through [`super::PluginInstance::deliver`] (shared between
/// clones). It knows every operation and measurement it ever accepted; re-submitting a known id
/// queues nothing.
#[derive(Clone, Debug, Default)]
pub struct QueueProvider(Arc<Mutex<Queue>>);

impl QueueProvider {
    /// An empty queue.
    pub fn new() -> QueueProvider {
        QueueProvider::default()
    }
    /// Takes the operations submitted since the last call, in submission order.
    pub fn take(&self) -> Vec<UpgradeOperation> {
        lock(&self.0).submitted.drain(..).collect()
    }
    /// Whether an operation id was ever accepted.
    pub fn knows(&self, operation_id: &str) -> bool {
        lock(&self.0).known.contains(operation_id)
    }
    /// Operation ids queried so far (`cluster_query`), in order.
    pub fn queries(&self) -> Vec<String> {
        lock(&self.0).queries.clone()
    }
    /// Refuses every submission with this message until called with `None`.
    pub fn refuse(&self, message: Option<String>) {
        lock(&self.0).refuse = message;
    }
    /// Takes the measurements submitted since the last call (each id once), in order.
    pub fn take_checks(&self) -> Vec<CheckRequest> {
        lock(&self.0).checks.drain(..).collect()
    }
    /// Every `check_submit` call's measurement id, repeats included, in order.
    pub fn check_calls(&self) -> Vec<String> {
        lock(&self.0).check_calls.clone()
    }
    /// Refuses every measurement with this message until called with `None`.
    pub fn refuse_checks(&self, message: Option<String>) {
        lock(&self.0).refuse_checks = message;
    }
}

impl ClusterProvider for QueueProvider {
    fn submit(&mut self, operation: &UpgradeOperation) -> SubmitOutcome {
        let mut q = lock(&self.0);
        if let Some(m) = &q.refuse {
            return SubmitOutcome::Refused(m.clone());
        }
        if q.known.insert(operation.operation_id.clone()) {
            q.submitted.push_back(operation.clone());
        }
        SubmitOutcome::Accepted
    }
    fn query(&mut self, operation_id: &str) -> QueryOutcome {
        let mut q = lock(&self.0);
        q.queries.push(operation_id.to_string());
        if q.known.contains(operation_id) {
            QueryOutcome::Known
        } else {
            QueryOutcome::Unknown
        }
    }
    fn submit_check(&mut self, request: &CheckRequest) -> SubmitOutcome {
        let mut q = lock(&self.0);
        q.check_calls.push(request.measurement_id.clone());
        if let Some(m) = &q.refuse_checks {
            return SubmitOutcome::Refused(m.clone());
        }
        if q.checks_known.insert(request.measurement_id.clone()) {
            q.checks.push_back(request.clone());
        }
        SubmitOutcome::Accepted
    }
}
