//! Collecting one step while the guest runs: [`StepJournal`] is the plugin host's persistence,
//! [`Outbox`] its cluster provider. Both write into the same pending [`Step`]; the
//! [`super::FleetEngine`] commits it after the call. Measurements the guest asks for
//! (`check_submit`) are collected beside it ([`PendingChecks`]): they are not stored (the guest
//! submits every awaited one again after a start) and go out once the step committed. Reads at start and recovery come from the
//! store's committed state.

use crate::runtime::host::{ClusterProvider, Persistence, QueryOutcome, SubmitOutcome};
use crate::store::{JournalRecord, OperationIntent, SnapshotRecord, Step, StoreRead};
use serde::Deserialize;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use waverun_core::{CheckRequest, UpgradeOperation};

/// The step being collected, shared by the journal and the outbox of one instance.
#[derive(Clone, Default)]
pub(super) struct Pending(Arc<Mutex<Step>>);

impl Pending {
    pub(super) fn lock(&self) -> MutexGuard<'_, Step> {
        // Plain data: a panic elsewhere leaves it consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the step collected so far, leaving an empty one.
    pub(super) fn take(&self) -> Step {
        std::mem::take(&mut *self.lock())
    }
}

/// The measurements submitted during the current call, shared by the outbox and the engine.
#[derive(Clone, Default)]
pub(super) struct PendingChecks(Arc<Mutex<Vec<CheckRequest>>>);

impl PendingChecks {
    /// Takes the measurements collected so far.
    pub(super) fn take(&self) -> Vec<CheckRequest> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn push(&self, request: CheckRequest) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request);
    }
}

/// A store reader shared by the journal and the outbox (one connection, used in turn: the
/// guest's calls are not concurrent).
pub(super) type SharedReader = Arc<Mutex<Box<dyn StoreRead + Send>>>;

fn read<T>(
    reader: &SharedReader,
    f: impl FnOnce(&dyn StoreRead) -> Result<T, crate::store::StoreError>,
) -> io::Result<T> {
    let r = reader.lock().unwrap_or_else(|e| e.into_inner());
    f(r.as_ref()).map_err(io::Error::other)
}

/// The plugin's persistence in the daemon: `journal_append` and `snapshot_write` add to the
/// pending step (durable when the engine commits it, before any of its effects is visible);
/// `storage_read` reads the committed snapshot and journal.
pub struct StepJournal {
    pending: Pending,
    reader: SharedReader,
    module_hash: String,
}

impl StepJournal {
    pub(super) fn new(pending: Pending, reader: SharedReader, module_hash: String) -> StepJournal {
        StepJournal {
            pending,
            reader,
            module_hash,
        }
    }
}

#[derive(Deserialize)]
struct RecordHeader {
    now: Option<waverun_core::Timestamp>,
}

impl Persistence for StepJournal {
    fn append(&mut self, seq: u64, record: &[u8]) -> io::Result<()> {
        let now_ms = serde_json::from_slice::<RecordHeader>(record)
            .ok()
            .and_then(|h| h.now)
            .map(|t| t.timestamp_millis());
        self.pending.lock().journal.push(JournalRecord {
            seq,
            now_ms,
            record: record.to_vec(),
        });
        Ok(())
    }

    fn write_snapshot(&mut self, journal_seq: u64, snapshot: &[u8]) -> io::Result<()> {
        self.pending.lock().snapshot = Some(SnapshotRecord {
            journal_seq,
            module_hash: self.module_hash.clone(),
            bytes: snapshot.to_vec(),
        });
        Ok(())
    }

    fn read_snapshot(&mut self) -> io::Result<Option<Vec<u8>>> {
        read(&self.reader, |r| r.snapshot()).map(|s| s.map(|s| s.bytes))
    }

    fn read_journal(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let after = read(&self.reader, |r| r.snapshot())?.map_or(0, |s| s.journal_seq);
        let records = read(&self.reader, |r| r.journal_after(after))?;
        Ok(records.into_iter().map(|r| r.record).collect())
    }
}

/// The plugin's cluster provider in the daemon: a submitted operation becomes an `intent` row
/// of the pending step (sent by the engine after the commit); a query is answered from the
/// operations the store knows, so after a crash nothing it recorded is sent twice. A submitted
/// measurement waits in [`PendingChecks`] until the step commits; the worker measures it then.
pub struct Outbox {
    pending: Pending,
    checks: PendingChecks,
    reader: SharedReader,
    default_provider: String,
}

impl Outbox {
    pub(super) fn new(
        pending: Pending,
        checks: PendingChecks,
        reader: SharedReader,
        default_provider: String,
    ) -> Outbox {
        Outbox {
            pending,
            checks,
            reader,
            default_provider,
        }
    }
}

impl ClusterProvider for Outbox {
    fn submit(&mut self, operation: &UpgradeOperation) -> SubmitOutcome {
        let request = match serde_json::to_string(operation) {
            Ok(r) => r,
            Err(e) => return SubmitOutcome::Refused(format!("the operation does not encode: {e}")),
        };
        let provider = operation
            .provider
            .as_ref()
            .map_or_else(|| self.default_provider.clone(), |p| p.name.clone());
        self.pending.lock().operations.push(OperationIntent {
            id: operation.operation_id.clone(),
            member: operation.member.clone(),
            provider,
            request,
        });
        SubmitOutcome::Accepted
    }

    fn query(&mut self, operation_id: &str) -> QueryOutcome {
        let pending = self
            .pending
            .lock()
            .operations
            .iter()
            .any(|o| o.id == operation_id);
        let stored = read(&self.reader, |r| r.operation(operation_id))
            .ok()
            .flatten();
        if pending || stored.is_some() {
            QueryOutcome::Known
        } else {
            QueryOutcome::Unknown
        }
    }

    fn submit_check(&mut self, request: &CheckRequest) -> SubmitOutcome {
        self.checks.push(request.clone());
        SubmitOutcome::Accepted
    }
}
