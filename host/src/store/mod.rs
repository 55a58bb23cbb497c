//! The daemon's store (`shared/spec/store.md`): one contract, [`Store`], for everything the
//! daemon keeps — the plugin's journal and snapshot, the cluster operations it sent, the event
//! log the SSE stream resumes from, API metadata (eTags, `systemData`), the audit log, the
//! webhooks' cursors, dead letters and delivery logs ([`WebhookWrites`]) and a few facts about
//! the fleet ([`meta`]). SQLite ([`SqliteStore`]) is the embedded backend; PostgreSQL
//! ([`PgStore`]) is the backend of several replicas, whose one writer holds a leader lease.
//!
//! **A step is one transaction.** Whatever one engine step produced — its journal records, a
//! snapshot that replaces the last one, its events, the intents of the cluster operations it
//! asked for, the changed resource metadata, its audit rows — is handed over as one [`Step`]
//! and committed together, or not at all ([`Store::commit`]). Cluster calls go out only after
//! that commit. A crash at any point leaves the store before or after the whole step.
//!
//! **Fencing, shaped for HA now.** Every row carries the `epoch` of the writer that wrote it
//! ([`Store::epoch`]; always 0 on SQLite, a leader lease's epoch on PostgreSQL), and nothing
//! outside the store assumes one process.

pub mod backup;
pub mod check;
pub mod migrate;
pub mod pg_tls;
mod postgres;
mod schema;
mod sqlite;
mod view;

pub use postgres::{
    connect as pg_connect, ActingDeadline, Cell, LeaseConfig, LeaseState, PgReader, PgStore, Rows,
};
pub use schema::SCHEMA_VERSION;
pub use sqlite::{SqliteReader, SqliteStore};
pub use view::{FollowerView, OpenReader};

use std::fmt;

/// `meta` keys the daemon uses.
pub mod meta {
    /// The schema version of the database (written by the store itself).
    pub const SCHEMA_VERSION: &str = "schema_version";
    /// The name of the fleet the database belongs to.
    pub const FLEET: &str = "fleet";
    /// The fleet clock's origin (`--time-scale`): real and fleet milliseconds, `real:fleet`.
    pub const CLOCK_ORIGIN: &str = "clock_origin";
    /// The fleet clock's scale (`--time-scale`).
    pub const CLOCK_SCALE: &str = "clock_scale";
    /// The content hash of the plugin module executing the fleet's runs.
    pub const MODULE_HASH: &str = "module_hash";
    /// `0` while a process has the database open, `1` after a clean close.
    pub const CLEAN_SHUTDOWN: &str = "clean_shutdown";
}

/// One record of the plugin's journal (`bindings/ABI.md` §7): its sequence number, the time it
/// carries (milliseconds since the epoch; `None` when the record has none) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalRecord {
    /// `seq` of the record: 1, 2, 3, ...
    pub seq: u64,
    /// The record's `now`, in milliseconds since the Unix epoch.
    pub now_ms: Option<i64>,
    /// The record as the guest wrote it.
    pub record: Vec<u8>,
}

/// The plugin's snapshot: the journal sequence it covers, the module that wrote it, its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// Journal records with `seq <= journal_seq` are in the snapshot (and compacted away).
    pub journal_seq: u64,
    /// The content hash of the plugin module that wrote it.
    pub module_hash: String,
    /// The snapshot as the guest wrote it.
    pub bytes: Vec<u8>,
}

/// Where a cluster operation is: recorded before the call goes out (`Intent`), sent (`Sent`),
/// its result journaled (`Done`), or sent with an outcome nobody knows yet (`Uncertain`: the
/// provider is asked by operation id before anything is sent again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum OperationState {
    /// Recorded in the step that asked for it; not sent yet.
    Intent,
    /// The provider accepted it.
    Sent,
    /// Its result is journaled.
    Done,
    /// The call went out, but its outcome is unknown (a timeout, a crash of the provider).
    Uncertain,
}

impl OperationState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationState::Intent => "intent",
            OperationState::Sent => "sent",
            OperationState::Done => "done",
            OperationState::Uncertain => "uncertain",
        }
    }

    /// The state of a stored name.
    pub fn parse(s: &str) -> Option<OperationState> {
        Some(match s {
            "intent" => OperationState::Intent,
            "sent" => OperationState::Sent,
            "done" => OperationState::Done,
            "uncertain" => OperationState::Uncertain,
            _ => return None,
        })
    }
}

/// A cluster operation the engine asked for, recorded in its step before it is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationIntent {
    /// The engine's operation id (`{run}/{member}`): the idempotency key.
    pub id: String,
    /// The member it upgrades.
    pub member: String,
    /// The provider that executes it.
    pub provider: String,
    /// The request (the operation as JSON).
    pub request: String,
}

/// A change to an operation's row: its new state, and what the provider said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationUpdate {
    /// The operation id.
    pub id: String,
    /// Its new state.
    pub state: OperationState,
    /// The provider's own id for it, once known.
    pub provider_operation_id: Option<String>,
    /// The last error (for `Uncertain`, or a refused call).
    pub last_error: Option<String>,
    /// Count this as another attempt to send it.
    pub attempted: bool,
}

/// A stored cluster operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRow {
    /// The operation id.
    pub id: String,
    /// The member it upgrades.
    pub member: String,
    /// The provider that executes it.
    pub provider: String,
    /// The request (JSON).
    pub request: String,
    /// Where it is.
    pub state: OperationState,
    /// The provider's own id for it.
    pub provider_operation_id: Option<String>,
    /// How many times it was sent.
    pub attempts: u32,
    /// The last error.
    pub last_error: Option<String>,
    /// The epoch of its last writer.
    pub epoch: u64,
}

/// An engine event to append to the event log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    /// When it happened, in milliseconds since the epoch (fleet time).
    pub at_ms: i64,
    /// The run it belongs to (empty for fleet events).
    pub run: String,
    /// Its `kind`.
    pub kind: String,
    /// The event as JSON.
    pub data: String,
}

/// A stored event: its global sequence number (the SSE id) and what was appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    /// Monotonically increasing across restarts; never reused.
    pub seq: u64,
    /// The event.
    pub event: NewEvent,
}

/// API metadata of one resource: its eTag and `systemData`, and for resources the daemon owns
/// (not the engine) their body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceMeta {
    /// The resource type (`members`, `updateRuns`, ...).
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its strong eTag.
    pub etag: String,
    /// `systemData.createdBy` / `createdAt` (RFC 3339).
    pub created_by: String,
    /// When it was created.
    pub created_at: String,
    /// `systemData.lastModifiedBy` / `lastModifiedAt`.
    pub last_modified_by: String,
    /// When it was last changed.
    pub last_modified_at: String,
    /// The resource's body, for those the daemon stores itself.
    pub body: Option<String>,
}

/// One audit entry: who did what, when, under which request, and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAudit {
    /// When (RFC 3339, real time).
    pub at: String,
    /// The token name (never the token).
    pub who: String,
    /// What (`updateRuns.start`, `gates.approve`, ...).
    pub action: String,
    /// On what (a resource id).
    pub target: String,
    /// The request id: the client's `x-request-id`, or the daemon's own when it sent none (a
    /// field: clients may send one id with many requests).
    pub request_id: String,
    /// The key of the request that made this entry, unique to it (the daemon's own, never the
    /// client's): tells whether a request has its entry already.
    pub key: String,
    /// `ok`, or the problem's code.
    pub outcome: String,
    /// More (an approval's gate, a problem's detail).
    pub detail: Option<String>,
}

/// A stored audit entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRow {
    /// Its sequence number.
    pub seq: u64,
    /// The entry.
    pub entry: NewAudit,
}

/// How many attempts each subscription's delivery log keeps (the newest).
pub const DELIVERY_LOG_KEEP: u64 = 1000;

/// An event a subscription gave up on: kept, listed, delivered again on request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// The subscription.
    pub subscription: String,
    /// The event's sequence number.
    pub seq: u64,
    /// When it was given up on (RFC 3339, real time).
    pub at: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last attempt's error.
    pub error: String,
}

/// One attempt at a delivery, for the subscription's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// The subscription.
    pub subscription: String,
    /// The event's sequence number.
    pub seq: u64,
    /// Which attempt at it (from 1).
    pub attempt: u32,
    /// When the attempt ended (RFC 3339, real time).
    pub at: String,
    /// The receiver's status, when it answered.
    pub status: Option<u16>,
    /// How long the attempt took.
    pub latency_ms: u64,
    /// `delivered`, `failed`, `deadLettered` or `redelivered`.
    pub outcome: String,
    /// What went wrong.
    pub error: Option<String>,
}

/// What the webhook driver hands the writer, committed in one transaction
/// ([`Store::record_webhooks`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebhookWrites {
    /// Subscriptions' cursors: (subscription, cursor).
    pub cursors: Vec<(String, u64)>,
    /// New dead letters.
    pub dead_letters: Vec<DeadLetter>,
    /// Dead letters delivered on request: (subscription, seq).
    pub redelivered: Vec<(String, u64)>,
    /// Attempts, for the delivery logs (each log keeps the newest [`DELIVERY_LOG_KEEP`]).
    pub deliveries: Vec<DeliveryRecord>,
    /// Subscriptions deleted: their cursor, dead letters and log go.
    pub forgotten: Vec<String>,
}

impl WebhookWrites {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        *self == WebhookWrites::default()
    }
}

/// Everything one engine step writes. [`Store::commit`] writes all of it in one transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Journal records, in order; each `seq` one more than the last stored.
    pub journal: Vec<JournalRecord>,
    /// A snapshot that replaces the stored one; journal records it covers are compacted.
    pub snapshot: Option<SnapshotRecord>,
    /// Events, in order.
    pub events: Vec<NewEvent>,
    /// Operations asked for (recorded as `intent`; a known id is left as it is).
    pub operations: Vec<OperationIntent>,
    /// Operation state changes (a result journaled in this step marks its operation `done`).
    pub operation_updates: Vec<OperationUpdate>,
    /// Resource metadata written (created or replaced).
    pub resources: Vec<ResourceMeta>,
    /// Resources deleted: (kind, name).
    pub deleted_resources: Vec<(String, String)>,
    /// Audit entries.
    pub audit: Vec<NewAudit>,
    /// Runs this step's module executed (kept once per run and module).
    pub run_modules: Vec<RunModule>,
    /// Runs deleted in this step: their [`RunModule`] rows go.
    pub deleted_runs: Vec<String>,
}

/// An engine module that executed a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunModule {
    /// The run.
    pub run: String,
    /// The module's SHA-256 (hex).
    pub module_hash: String,
    /// When (fleet time, ms since the epoch) it first executed a step of the run.
    pub first_step_ms: i64,
}

impl Step {
    /// Whether the step writes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Step::default()
    }
}

/// What a commit assigned: the sequence numbers of the step's events (`first..=last`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// The first event's sequence number (none when the step had no event).
    pub first_event_seq: Option<u64>,
    /// The last event's sequence number.
    pub last_event_seq: Option<u64>,
}

/// Why the store refused.
#[derive(Debug)]
pub enum StoreError {
    /// The database was written by a newer waverun.
    NewerSchema {
        /// The database's schema version.
        found: u32,
        /// The newest this build knows.
        known: u32,
    },
    /// The database failed its integrity check, or holds something this build cannot read.
    Corrupt(String),
    /// A step broke a rule of the store (a journal gap, a snapshot going backwards).
    Invalid(String),
    /// The database itself failed (disk full, locked past the busy timeout, I/O).
    Database(String),
    /// This writer no longer holds the leader lease (another replica took it): it wrote
    /// nothing, and must not act as the leader.
    Fenced(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NewerSchema { found, known } => write!(
                f,
                "the database was written by a newer waverun (schema version {found}; this build \
                 reads up to {known}): upgrade waverun, or point --data-dir elsewhere"
            ),
            StoreError::Corrupt(m) => write!(f, "the database is damaged: {m}"),
            StoreError::Invalid(m) => write!(f, "store: {m}"),
            StoreError::Database(m) => write!(f, "database error: {m}"),
            StoreError::Fenced(m) => write!(f, "fenced: {m}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// Reads: what the API, the SSE stream and recovery need. Implemented by the writer and by
/// read-only connections ([`SqliteReader`]).
pub trait StoreRead {
    /// A `meta` value.
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// The stored snapshot.
    fn snapshot(&self) -> Result<Option<SnapshotRecord>, StoreError>;
    /// Journal records with `seq > after`, in order.
    fn journal_after(&self, after: u64) -> Result<Vec<JournalRecord>, StoreError>;
    /// The last journal `seq` (or the snapshot's when the journal is compacted; 0 when empty).
    fn last_journal_seq(&self) -> Result<u64, StoreError>;
    /// Journal records kept (not compacted).
    fn journal_len(&self) -> Result<u64, StoreError>;
    /// One operation.
    fn operation(&self, id: &str) -> Result<Option<OperationRow>, StoreError>;
    /// Operations in any of `states`, by id.
    fn operations_in(&self, states: &[OperationState]) -> Result<Vec<OperationRow>, StoreError>;
    /// Up to `limit` events with `seq > after`, of `run` if given, in order.
    fn events_after(
        &self,
        after: u64,
        run: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventRow>, StoreError>;
    /// The last event's sequence number (0 when there is none).
    fn last_event_seq(&self) -> Result<u64, StoreError>;
    /// One resource's metadata.
    fn resource(&self, kind: &str, name: &str) -> Result<Option<ResourceMeta>, StoreError>;
    /// Every resource of a kind, by name.
    fn resources(&self, kind: &str) -> Result<Vec<ResourceMeta>, StoreError>;
    /// The resources of a kind whose stored body contains `text`, by name: the few that can
    /// have a field, found without reading every body out (a member's `clusterResourceId`
    /// among 100,000).
    fn resources_containing(&self, kind: &str, text: &str)
        -> Result<Vec<ResourceMeta>, StoreError>;
    /// Up to `limit` resources of a kind whose names sort after `after` (byte order; all of
    /// them without it), by name: one page of a list, read without the others (a page of
    /// 100,000 members).
    fn resources_after(
        &self,
        kind: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ResourceMeta>, StoreError>;
    /// Up to `limit` audit entries with `seq > after`, in order.
    fn audit_after(&self, after: u64, limit: u32) -> Result<Vec<AuditRow>, StoreError>;
    /// Whether the request whose key is `key` ([`NewAudit::key`]) has an audit entry.
    fn audited(&self, key: &str) -> Result<bool, StoreError>;
    /// The engine modules that executed `run`, in the order they first did.
    fn run_modules(&self, run: &str) -> Result<Vec<RunModule>, StoreError>;
    /// Every subscription's stored cursor.
    fn webhook_cursors(&self) -> Result<std::collections::BTreeMap<String, u64>, StoreError>;
    /// Up to `limit` dead letters of `subscription` with `seq > after`, in order.
    fn dead_letters(
        &self,
        subscription: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<DeadLetter>, StoreError>;
    /// How many dead letters `subscription` has.
    fn dead_letter_count(&self, subscription: &str) -> Result<u64, StoreError>;
    /// Up to `limit` of `subscription`'s logged attempts, newest first, with their log ids,
    /// older than the id `before` if given.
    fn deliveries(
        &self,
        subscription: &str,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<(u64, DeliveryRecord)>, StoreError>;
}

/// Implements [`StoreRead`] for a wrapper by handing every read to one of its fields (a
/// follower's view, a test's fault-injecting store): the list of reads is written once, here.
///
/// ```ignore
/// waverun_host::delegate_store_reads!(impl<S: Store> for Faulty<S> => inner);
/// ```
#[macro_export]
macro_rules! delegate_store_reads {
    (impl $(<$g:ident : $bound:path>)? for $t:ty => $field:ident) => {
        impl $(<$g: $bound>)? $crate::store::StoreRead for $t {
            fn meta(&self, key: &str) -> Result<Option<String>, $crate::store::StoreError> {
                self.$field.meta(key)
            }
            fn snapshot(
                &self,
            ) -> Result<Option<$crate::store::SnapshotRecord>, $crate::store::StoreError> {
                self.$field.snapshot()
            }
            fn journal_after(
                &self,
                after: u64,
            ) -> Result<Vec<$crate::store::JournalRecord>, $crate::store::StoreError> {
                self.$field.journal_after(after)
            }
            fn last_journal_seq(&self) -> Result<u64, $crate::store::StoreError> {
                self.$field.last_journal_seq()
            }
            fn journal_len(&self) -> Result<u64, $crate::store::StoreError> {
                self.$field.journal_len()
            }
            fn operation(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::OperationRow>, $crate::store::StoreError> {
                self.$field.operation(id)
            }
            fn operations_in(
                &self,
                states: &[$crate::store::OperationState],
            ) -> Result<Vec<$crate::store::OperationRow>, $crate::store::StoreError> {
                self.$field.operations_in(states)
            }
            fn events_after(
                &self,
                after: u64,
                run: Option<&str>,
                limit: u32,
            ) -> Result<Vec<$crate::store::EventRow>, $crate::store::StoreError> {
                self.$field.events_after(after, run, limit)
            }
            fn last_event_seq(&self) -> Result<u64, $crate::store::StoreError> {
                self.$field.last_event_seq()
            }
            fn resource(
                &self,
                kind: &str,
                name: &str,
            ) -> Result<Option<$crate::store::ResourceMeta>, $crate::store::StoreError> {
                self.$field.resource(kind, name)
            }
            fn resources(
                &self,
                kind: &str,
            ) -> Result<Vec<$crate::store::ResourceMeta>, $crate::store::StoreError> {
                self.$field.resources(kind)
            }
            fn resources_containing(
                &self,
                kind: &str,
                text: &str,
            ) -> Result<Vec<$crate::store::ResourceMeta>, $crate::store::StoreError> {
                self.$field.resources_containing(kind, text)
            }
            fn resources_after(
                &self,
                kind: &str,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<$crate::store::ResourceMeta>, $crate::store::StoreError> {
                self.$field.resources_after(kind, after, limit)
            }
            fn audit_after(
                &self,
                after: u64,
                limit: u32,
            ) -> Result<Vec<$crate::store::AuditRow>, $crate::store::StoreError> {
                self.$field.audit_after(after, limit)
            }
            fn audited(&self, key: &str) -> Result<bool, $crate::store::StoreError> {
                self.$field.audited(key)
            }
            fn run_modules(
                &self,
                run: &str,
            ) -> Result<Vec<$crate::store::RunModule>, $crate::store::StoreError> {
                self.$field.run_modules(run)
            }
            fn webhook_cursors(
                &self,
            ) -> Result<std::collections::BTreeMap<String, u64>, $crate::store::StoreError> {
                self.$field.webhook_cursors()
            }
            fn dead_letters(
                &self,
                subscription: &str,
                after: u64,
                limit: u32,
            ) -> Result<Vec<$crate::store::DeadLetter>, $crate::store::StoreError> {
                self.$field.dead_letters(subscription, after, limit)
            }
            fn dead_letter_count(&self, subscription: &str) -> Result<u64, $crate::store::StoreError> {
                self.$field.dead_letter_count(subscription)
            }
            fn deliveries(
                &self,
                subscription: &str,
                before: Option<u64>,
                limit: u32,
            ) -> Result<Vec<(u64, $crate::store::DeliveryRecord)>, $crate::store::StoreError> {
                self.$field.deliveries(subscription, before, limit)
            }
        }
    };
}

/// The writer: one per fleet (one thread; on PostgreSQL, the leader).
pub trait Store: StoreRead + Send {
    /// The epoch this writer stamps on every row (0 on SQLite).
    fn epoch(&self) -> u64;
    /// Writes a whole step in one transaction, or nothing.
    fn commit(&mut self, step: &Step) -> Result<Committed, StoreError>;
    /// Sets a `meta` value.
    fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError>;
    /// Updates operations outside a step (sent, uncertain), in one transaction.
    fn update_operations(&mut self, updates: &[OperationUpdate]) -> Result<(), StoreError>;
    /// Writes what the webhook driver did (cursors, dead letters, the delivery logs), in one
    /// transaction.
    fn record_webhooks(&mut self, writes: &WebhookWrites) -> Result<(), StoreError>;
    /// Marks a clean shutdown (the next open skips the integrity check).
    fn close(&mut self) -> Result<(), StoreError>;
    /// Another connection to the same store, for reads off the writer's thread (the plugin's
    /// journal and cluster queries during a step, the API).
    fn reader(&self) -> Result<Box<dyn StoreRead + Send>, StoreError>;
    /// Fault injection for tests: the next commit writes its step, then rolls back and fails
    /// as a full disk would. A backend without the hook ignores it.
    fn fail_next_commit(&mut self) {}
}
