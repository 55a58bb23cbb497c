//! Following a run's events: the daemon's Server-Sent Events stream (`GET /events?run=NAME`),
//! read on a thread of its own and handed over a channel, so a command can wake on an event
//! *or* on its own timer (a countdown to redraw, a deadline). A broken connection is reopened
//! with `Last-Event-ID`, so nothing is missed or seen twice; a daemon that is away is retried
//! with a growing pause (at most 5 s).

use super::client::Client;
use std::io::BufRead;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::Duration;

/// What the stream thread reports.
#[derive(Debug)]
pub enum StreamNote {
    /// An event (as the engine wrote it).
    Event(waverun_core::Event),
    /// Connected (again).
    Connected,
    /// The connection broke or could not be made; it is tried again.
    Lost(String),
}

/// A followed stream.
pub struct Follow {
    notes: Receiver<StreamNote>,
}

impl Follow {
    /// Starts following `run`'s events after `after` (0: from the first).
    pub fn start(client: &Client, run: &str, after: u64) -> Follow {
        let (tx, notes) = channel();
        let url = format!("{}?run={run}", client.url("/events"));
        let token = client.token().map(str::to_string);
        let tls = client.tls();
        std::thread::Builder::new()
            .name("waverun-events".to_string())
            .spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_connect(Some(Duration::from_secs(5)))
                    .tls_config(tls)
                    .build()
                    .into();
                let mut last = after;
                let mut pause = Duration::from_millis(200);
                loop {
                    let mut req = agent
                        .get(&url)
                        .header("accept", "text/event-stream")
                        .header("last-event-id", last.to_string());
                    if let Some(t) = &token {
                        req = req.header("authorization", format!("Bearer {t}"));
                    }
                    let reason = match req.call() {
                        Ok(r) if r.status() == 200 => {
                            if tx.send(StreamNote::Connected).is_err() {
                                return;
                            }
                            pause = Duration::from_millis(200);
                            let reader = std::io::BufReader::new(r.into_body().into_reader());
                            let mut id = None;
                            for line in reader.lines() {
                                let Ok(line) = line else { break };
                                if let Some(v) = line.strip_prefix("id:") {
                                    id = v.trim().parse::<u64>().ok();
                                } else if let Some(v) = line.strip_prefix("data:") {
                                    let (Some(seq), Ok(e)) =
                                        (id.take(), serde_json::from_str(v.trim()))
                                    else {
                                        continue;
                                    };
                                    last = seq;
                                    if tx.send(StreamNote::Event(e)).is_err() {
                                        return;
                                    }
                                }
                            }
                            "the daemon closed the stream".to_string()
                        }
                        Ok(r) => format!("HTTP {}", r.status()),
                        Err(e) => e.to_string(),
                    };
                    if tx.send(StreamNote::Lost(reason)).is_err() {
                        return;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            })
            .expect("spawning a thread");
        Follow { notes }
    }

    /// The next note, or `None` after `timeout` without one.
    pub fn next(&self, timeout: Duration) -> Option<StreamNote> {
        match self.notes.recv_timeout(timeout) {
            Ok(n) => Some(n),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }
}
