//! A follower's store: the leader's database seen read-only. A follower runs the fleet's
//! engine over it to answer reads (runs, gates, members) exactly as the leader would, but never
//! acts: what that engine would write — the steps of its own start and replay — is the
//! leader's to write, and is dropped here. Every write the daemon makes outside the engine
//! (metadata, operation states, the webhooks' cursors) is refused as [`StoreError::Fenced`].

use super::{Committed, OperationUpdate, Step, Store, StoreError, StoreRead, WebhookWrites};
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

crate::delegate_store_reads!(impl for FollowerView => reads);

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
