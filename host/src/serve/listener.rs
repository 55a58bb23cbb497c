//! The daemon's connections: accepted over TCP, with TLS when configured, each served by hyper
//! under deadlines and caps, so that no client can hold the daemon's sockets or its shutdown.
//!
//! - A connection over the total cap, or over the cap for its peer address, is closed at once
//!   (logged, at most once a second, with the count).
//! - A TLS handshake has [`Limits::handshake`] to finish; request headers have
//!   [`Limits::header_read`] from the moment the connection waits for them, which is also how
//!   long an idle keep-alive connection is kept (hyper's header-read timer runs while it
//!   waits for the next request). A body's deadline is the API's (`BODY_READ_TIMEOUT`).
//! - Shutdown stops accepting, asks every connection to finish its request and close, and
//!   after [`Limits::shutdown_grace`] drops those still open.
//! - An accept error (out of file descriptors) is logged and retried after a pause, never a
//!   busy loop.

use super::tls::TlsAcceptor;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

/// Connection limits and deadlines.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Connections open at once, in all.
    pub connections: usize,
    /// Connections open at once from one peer address.
    pub connections_per_peer: usize,
    /// Time for a request's headers once the connection waits for them (also the idle limit).
    pub header_read: Duration,
    /// Time for a TLS handshake.
    pub handshake: Duration,
    /// How long a shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 1024,
            connections_per_peer: 256,
            header_read: Duration::from_secs(10),
            handshake: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Open connections per peer, and when a refusal was last logged.
struct Counts {
    per_peer: HashMap<IpAddr, usize>,
    total: usize,
    refused: u64,
    logged: Option<Instant>,
}

/// A connection's place, given back when it closes.
struct Place {
    counts: Arc<Mutex<Counts>>,
    peer: IpAddr,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.total -= 1;
        if let Some(n) = c.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                c.per_peer.remove(&self.peer);
            }
        }
    }
}

/// Takes a place for a connection from `peer`, or says which cap it hit.
fn admit(counts: &Arc<Mutex<Counts>>, limits: &Limits, peer: IpAddr) -> Result<Place, String> {
    let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
    let mine = c.per_peer.get(&peer).copied().unwrap_or(0);
    let why = if c.total >= limits.connections {
        Some(format!(
            "{} connections are open, the most this daemon keeps (limits.connections)",
            c.total
        ))
    } else if mine >= limits.connections_per_peer {
        Some(format!(
            "{peer} has {mine} connections open, the most one peer may (limits.connectionsPerPeer)"
        ))
    } else {
        None
    };
    if let Some(why) = why {
        c.refused += 1;
        let now = Instant::now();
        if c.logged.is_none_or(|t| now - t >= Duration::from_secs(1)) {
            tracing::warn!(
                peer = %peer,
                refused = c.refused,
                "connection refused: {why}"
            );
            c.logged = Some(now);
        }
        return Err(why);
    }
    c.total += 1;
    *c.per_peer.entry(peer).or_default() += 1;
    Ok(Place {
        counts: counts.clone(),
        peer,
    })
}

/// Serves `router` on `listener` until `stop` resolves, then shuts down within the grace.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) {
    let counts = Arc::new(Mutex::new(Counts {
        per_peer: HashMap::new(),
        total: 0,
        refused: 0,
        logged: None,
    }));
    let (closing, _) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
            // Reap finished connections as they go, so the set stays small.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and the like: the sockets free up as connections close.
                tracing::warn!(error = %e, "accepting a connection failed; retrying in 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(place) = admit(&counts, &limits, peer.ip()) else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        let limits = limits.clone();
        let closing = closing.subscribe();
        tasks.spawn(async move {
            let _place = place;
            match tls {
                None => connection(stream, router, &limits, closing).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.handshake, acceptor.accept(stream)).await {
                        Ok(Ok(tls_stream)) => {
                            connection(tls_stream, router, &limits, closing).await
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(peer = %peer, error = %e, "TLS handshake failed")
                        }
                        Err(_) => {
                            tracing::debug!(peer = %peer, "TLS handshake timed out")
                        }
                    }
                }
            }
        });
    }
    drop(listener);
    closing.send_replace(true);
    let drained = tokio::time::timeout(limits.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = tasks.len(),
            grace_s = limits.shutdown_grace.as_secs_f64(),
            "connections still open after the shutdown grace are closed"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

/// One connection: HTTP/1.1 under the header-read (and idle) deadline, finished gracefully
/// when the daemon stops.
async fn connection<I>(
    io: I,
    router: Router,
    limits: &Limits,
    mut closing: tokio::sync::watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper_util::service::TowerToHyperService::new(router);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let stopping = async move {
        // The guard `wait_for` returns is dropped here, before the shutdown awaits.
        let _ = closing.wait_for(|c| *c).await.map(|_| ());
    };
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stopping => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
