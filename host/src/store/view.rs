//! A follower's store: the leader's database seen read-only. A follower runs the fleet's
//! engine over it to answer reads (runs, gates, members) exactly as the leader would, but never
//! acts: what that engine would write — the steps of its own start and replay — is the
//! leader's to write, and is dropped here. Every write the daemon makes outside the engine
//! (metadata, operation states, the webhooks' cursors) is refused as [`StoreError::Fenced`].

use super::{AuditRow, Committed, DeadLetter, DeliveryRecord, EventRow, JournalRecord};
use super::{OperationRow, OperationState, OperationUpdate, ResourceMeta, RunModule};
use super::{SnapshotRecord, Step, Store, StoreError, StoreRead, WebhookWrites};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Opens another read connection to the same database.
pub type OpenReader = Arc<dyn Fn() -> Result<Box<dyn StoreRead + Send>, StoreError> + Send + Sync>;

/// The leader's database, read-only.
pub struct FollowerView {
    reads: Box<dyn StoreRead + Send>,
    open: OpenReader,
}

impl FollowerView {
    /// A view through a connection `open` makes (and every [`Store::reader`] another).
    pub fn open(open: OpenReader) -> Result<FollowerView, StoreError> {
        Ok(FollowerView {
            reads: open()?,
            open,
        })
    }
}

fn refused(what: &str) -> StoreError {
    StoreError::Fenced(format!(
        "this replica is a follower: it does not {what} (the leader does)"
    ))
}

macro_rules! delegate_reads {
    ($($name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty;)*) => {
        impl StoreRead for FollowerView {
            $(fn $name(&self, $($arg: $ty),*) -> $ret { self.reads.$name($($arg),*) })*
        }
    };
}

delegate_reads! {
    meta(key: &str) -> Result<Option<String>, StoreError>;
    snapshot() -> Result<Option<SnapshotRecord>, StoreError>;
    journal_after(after: u64) -> Result<Vec<JournalRecord>, StoreError>;
    last_journal_seq() -> Result<u64, StoreError>;
    journal_len() -> Result<u64, StoreError>;
    operation(id: &str) -> Result<Option<OperationRow>, StoreError>;
    operations_in(states: &[OperationState]) -> Result<Vec<OperationRow>, StoreError>;
    events_after(after: u64, run: Option<&str>, limit: u32) -> Result<Vec<EventRow>, StoreError>;
    last_event_seq() -> Result<u64, StoreError>;
    resource(kind: &str, name: &str) -> Result<Option<ResourceMeta>, StoreError>;
    resources(kind: &str) -> Result<Vec<ResourceMeta>, StoreError>;
    audit_after(after: u64, limit: u32) -> Result<Vec<AuditRow>, StoreError>;
    audited(key: &str) -> Result<bool, StoreError>;
    run_modules(run: &str) -> Result<Vec<RunModule>, StoreError>;
    webhook_cursors() -> Result<BTreeMap<String, u64>, StoreError>;
    dead_letters(subscription: &str, after: u64, limit: u32) -> Result<Vec<DeadLetter>, StoreError>;
    dead_letter_count(subscription: &str) -> Result<u64, StoreError>;
    deliveries(subscription: &str, before: Option<u64>, limit: u32) -> Result<Vec<(u64, DeliveryRecord)>, StoreError>;
}

impl Store for FollowerView {
    fn epoch(&self) -> u64 {
        0
    }

    /// Dropped: the steps a follower's engine makes replaying the leader's journal are the
    /// leader's to write (it made, or will make, the same ones).
    fn commit(&mut self, _step: &Step) -> Result<Committed, StoreError> {
        Ok(Committed::default())
    }

    fn set_meta(&mut self, _key: &str, _value: &str) -> Result<(), StoreError> {
        Err(refused("write metadata"))
    }

    fn update_operations(&mut self, _updates: &[OperationUpdate]) -> Result<(), StoreError> {
        Err(refused("record cluster operations"))
    }

    fn record_webhooks(&mut self, _writes: &WebhookWrites) -> Result<(), StoreError> {
        Err(refused("deliver events"))
    }

    fn close(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn reader(&self) -> Result<Box<dyn StoreRead + Send>, StoreError> {
        (self.open)()
    }
}
