//! Reads that never wait for the engine thread: a small pool of the store's read connections
//! ([`Readers`]) for the event and audit logs, and one fan-out of new events to every live
//! stream ([`Feed`]). A stream catches up from the store and then follows the fan-out; however
//! many clients listen, the engine thread only steps, and the store is read once per commit
//! for all of them.
//!
//! No event is skipped or repeated: a stream subscribes to the fan-out *before* it reads the
//! store, reads until it has seen every event up to the store's newest at that read (and at
//! least up to where the fan-out began), then takes from the fan-out only the events after
//! that. One that falls behind the fan-out's buffer goes back to reading the store from the
//! last event it sent.

use super::problem::Problem;
use crate::store::{EventRow, StoreError, StoreRead};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, watch, Semaphore};

/// Read connections kept for the API.
pub const READERS: usize = 4;

/// Events the fan-out holds for streams that are behind (one that falls further behind reads
/// the store instead).
const FAN_OUT_BUFFER: usize = 4096;

/// How many events one read of the store takes.
pub const BATCH: u32 = 500;

/// A pool of read connections, used on the blocking threads.
pub struct Readers {
    idle: Mutex<Vec<Box<dyn StoreRead + Send>>>,
    permits: Semaphore,
}

impl Readers {
    /// A pool of these connections.
    pub fn new(readers: Vec<Box<dyn StoreRead + Send>>) -> Readers {
        let n = readers.len();
        Readers {
            idle: Mutex::new(readers),
            permits: Semaphore::new(n),
        }
    }

    /// Runs `f` on a connection of the pool, off the async threads.
    pub async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&dyn StoreRead) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Problem> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| Problem::unavailable("the store's readers are closed"))?;
        let reader = self
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .ok_or_else(|| Problem::unavailable("no store reader is free"))?;
        let pool = self.clone();
        let done = tokio::task::spawn_blocking(move || {
            let r = f(reader.as_ref());
            pool.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(reader);
            r
        })
        .await
        .map_err(|_| Problem::unavailable("a store read was cancelled"))?;
        done.map_err(|e| Problem::unavailable(&e.to_string()))
    }
}

/// The fan-out of new events: one task reads each commit's events once and hands them to every
/// stream.
pub struct Feed {
    tx: broadcast::Sender<Arc<EventRow>>,
    /// The sequence number the fan-out started after (`None` until it has begun): events up to
    /// it are read from the store by each stream.
    floor: watch::Sender<Option<u64>>,
    started: std::sync::Once,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            tx: broadcast::channel(FAN_OUT_BUFFER).0,
            floor: watch::Sender::new(None),
            started: std::sync::Once::new(),
        }
    }
}

impl Feed {
    /// Starts the fan-out task on the current runtime, once: it follows `commits` (the last
    /// committed event's sequence number) until the engine stops or `closing` turns true.
    pub fn start(
        self: &Arc<Self>,
        readers: Arc<Readers>,
        mut commits: watch::Receiver<u64>,
        mut closing: watch::Receiver<bool>,
    ) {
        let feed = self.clone();
        self.started.call_once(move || {
            tokio::spawn(async move {
                commits.borrow_and_update();
                let Ok(mut last) = readers.read(|r| r.last_event_seq()).await else {
                    return;
                };
                feed.floor.send_replace(Some(last));
                loop {
                    loop {
                        let after = last;
                        let rows = readers
                            .read(move |r| r.events_after(after, None, BATCH))
                            .await;
                        let Ok(rows) = rows else { break };
                        let full = rows.len() == BATCH as usize;
                        for row in rows {
                            last = row.seq;
                            // No receiver is fine: nobody listens now.
                            let _ = feed.tx.send(Arc::new(row));
                        }
                        if !full {
                            break;
                        }
                    }
                    tokio::select! {
                        changed = commits.changed() => if changed.is_err() { return },
                        _ = closing.changed() => if *closing.borrow() { return },
                    }
                }
            });
        });
    }

    /// A new listener of the fan-out.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<EventRow>> {
        self.tx.subscribe()
    }

    /// Where the fan-out began, once it has.
    pub async fn floor(&self) -> Option<u64> {
        let mut rx = self.floor.subscribe();
        let v = rx.wait_for(Option::is_some).await.ok()?;
        *v
    }
}

/// Live streams per token and in all, bounded: a stream over the limit is refused (429), and
/// a stream's place is given back when it ends.
pub struct StreamLimits {
    per_token: usize,
    total: usize,
    open: Mutex<HashMap<String, usize>>,
}

/// A stream's place, given back when dropped.
pub struct StreamSlot {
    limits: Arc<StreamLimits>,
    who: String,
}

impl StreamLimits {
    /// At most `per_token` streams per token and `total` in all.
    pub fn new(per_token: usize, total: usize) -> StreamLimits {
        StreamLimits {
            per_token,
            total,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// A place for a stream of `who`, or the 429 that says which limit it hit.
    pub fn take(self: &Arc<Self>, who: &str) -> Result<StreamSlot, Problem> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = open.values().sum();
        let mine = open.get(who).copied().unwrap_or(0);
        let refuse = |what: String| {
            tracing::warn!(who, "event stream refused: {what}");
            Err(Problem::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "TooManyStreams",
                what,
            ))
        };
        if mine >= self.per_token {
            return refuse(format!(
                "token {who:?} has {mine} event streams open, the most one token may have \
                 (limits.streamsPerToken); close one, or share one stream"
            ));
        }
        if total >= self.total {
            return refuse(format!(
                "{total} event streams are open, the most this daemon serves (limits.streams)"
            ));
        }
        *open.entry(who.to_string()).or_default() += 1;
        Ok(StreamSlot {
            limits: self.clone(),
            who: who.to_string(),
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.who) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.who);
            }
        }
    }
}
