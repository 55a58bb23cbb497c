//! The observer: a thread that keeps the engine's view of members true. At start, and every
//! `observeIntervalSeconds` after, it registers the configured members not registered yet (as
//! their provider describes them) and describes every registered member again
//! ([`observe_members`]), then asks providers for the releases in their members' regions
//! ([`observe_releases`]) — among replicas, only while this one leads. Provider calls run on this thread, never on the engine's.

use crate::daemon::{observe_members, observe_releases, Daemon, MemberBinding, Providers, MEMBERS};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

/// The running observer; dropping it stops the thread.
pub(super) struct Observer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Observer {
    pub(super) fn spawn(
        daemon: Arc<Daemon>,
        providers: Providers,
        members: Vec<MemberBinding>,
        interval: Duration,
    ) -> Observer {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("waverun-observer".to_string())
            .spawn(move || {
                let mut seen = Default::default();
                loop {
                    // Among replicas only the leader observes (a follower writes nothing);
                    // one that follows looks again soon, so a new leader observes at once.
                    if !daemon.call(|w| w.acting()).unwrap_or(false) {
                        match stopped.recv_timeout(interval.min(Duration::from_secs(1))) {
                            Err(RecvTimeoutError::Timeout) => continue,
                            _ => return,
                        }
                    }
                    register(&daemon, &providers, &members);
                    let n = observe_members(&daemon, &providers);
                    tracing::debug!(members = n, "members described");
                    observe_releases(&daemon, &providers, &mut seen);
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        _ => return,
                    }
                }
            })
            .expect("spawn the observer thread");
        Observer {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Registers each configured member whose stored binding is missing or different.
fn register(daemon: &Daemon, providers: &Providers, members: &[MemberBinding]) {
    for binding in members {
        let name = binding.name.clone();
        let stored = daemon.call(move |w| w.engine().stored().resource(MEMBERS, &name));
        let stored = match stored {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!(member = %binding.name, error = %e, "reading a member failed");
                continue;
            }
            Err(_) => return,
        };
        if stored.as_ref().and_then(MemberBinding::of_stored).as_ref() == Some(binding) {
            continue;
        }
        let Some(provider) = providers.get(&binding.provider) else {
            continue; // the config check names the provider; nothing to do here
        };
        let d = match provider.describe(&binding.target(None)) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(member = %binding.name, error = %e, "a configured member could not be described; it is registered once it can be");
                continue;
            }
        };
        let b = binding.clone();
        let done = daemon.call(move |w| w.register_member(&b, &d, "config", Default::default()));
        match done {
            Ok(Ok(_)) => {
                tracing::info!(member = %binding.name, provider = %binding.provider, "member registered")
            }
            Ok(Err(e)) => {
                tracing::warn!(member = %binding.name, error = %e, "registering a configured member failed")
            }
            Err(_) => return,
        }
    }
}
