//! Events out as the daemon runs them: the driver started over the daemon's store, and the
//! handle the API keeps ([`Webhooks`]) — what the configuration allows (addresses, named
//! secrets), how to tell the driver that subscriptions changed or dead letters are wanted
//! again, the driver's counters, and a test delivery made at once (outside the log).

use super::cloudevent::{Origin, WAVERUN_TYPE_PREFIX};
use super::delivery::Policy;
use super::destination::AddressPolicy;
use super::driver::{Driver, DriverMsg, DriverStats, LoadSubscriptions, Writes, KIND};
use super::sender::{Attempt, Sender, SenderConfig};
use super::signature::{self, SigningKey};
use super::stored;
use crate::clock::{Clock, SystemClock};
use crate::daemon::FleetClock;
use crate::providers::ProviderMetric;
use crate::store::StoreRead;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the configuration says of events out (`webhooks:`).
#[derive(Clone, Debug, Default)]
pub struct WebhooksSettings {
    /// How attempts are made, and where they may go.
    pub sender: SenderConfig,
    /// The secrets subscriptions may name in `signing.secretRef`, read at start.
    pub secrets: BTreeMap<String, SigningKey>,
}

/// The API's handle on events out. Among replicas, only the leader runs a driver: the handle
/// is attached to each new one ([`Webhooks::attach`]) and tells nobody while there is none.
pub struct Webhooks {
    tx: std::sync::Mutex<std::sync::mpsc::Sender<DriverMsg>>,
    stats: std::sync::Mutex<Arc<DriverStats>>,
    policy: AddressPolicy,
    secrets: BTreeMap<String, SigningKey>,
    sender: Arc<Sender>,
    origin: Origin,
}

/// Starts the driver over the store `reader` reads, its writes going to `writes`; returns it
/// (its owner shuts it down) and the API's handle.
pub fn start(
    reader: Box<dyn StoreRead + Send>,
    writes: Writes,
    settings: &WebhooksSettings,
    origin: Origin,
    clock: FleetClock,
) -> Result<(Driver, Webhooks), String> {
    let driver = start_driver(reader, writes, settings, origin.clone(), clock)?;
    let handle = handle(settings, origin)?;
    handle.attach(&driver);
    Ok((driver, handle))
}

/// The API's handle, attached to no driver yet (a follower's).
pub fn handle(settings: &WebhooksSettings, origin: Origin) -> Result<Webhooks, String> {
    let (nowhere, _) = std::sync::mpsc::channel();
    Ok(Webhooks {
        tx: std::sync::Mutex::new(nowhere),
        stats: Default::default(),
        policy: settings.sender.policy,
        secrets: settings.secrets.clone(),
        sender: Arc::new(Sender::new(settings.sender.clone())?),
        origin,
    })
}

/// Starts a driver over the store `reader` reads, its writes going to `writes`.
pub fn start_driver(
    reader: Box<dyn StoreRead + Send>,
    writes: Writes,
    settings: &WebhooksSettings,
    origin: Origin,
    clock: FleetClock,
) -> Result<Driver, String> {
    let policy = settings.sender.policy;
    let secrets = settings.secrets.clone();
    let load: LoadSubscriptions = Box::new(move |r: &dyn StoreRead| {
        let bodies: Vec<(String, Option<String>)> = r
            .resources(KIND)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|m| (m.name, m.body))
            .collect();
        Ok(stored::active(
            &bodies,
            policy,
            &secrets,
            SystemClock.now_ms(),
        ))
    });
    Driver::start(
        reader,
        load,
        writes,
        Sender::new(settings.sender.clone())?,
        origin,
        clock,
        Policy::default(),
    )
}

impl Webhooks {
    /// From now on, `driver` is the one told, and the one whose counters are shown.
    pub fn attach(&self, driver: &Driver) {
        *self.tx.lock().unwrap_or_else(|e| e.into_inner()) = driver.handle();
        *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = driver.stats();
    }

    fn send(&self, msg: DriverMsg) {
        let _ = self.tx.lock().unwrap_or_else(|e| e.into_inner()).send(msg);
    }

    /// Subscriptions were written: the driver reads them again.
    pub fn changed(&self) {
        self.send(DriverMsg::Changed);
    }

    /// The driver delivers these dead letters of `lane` again.
    pub fn redeliver(&self, lane: &str, seqs: Vec<u64>) {
        self.send(DriverMsg::Redeliver {
            lane: lane.to_string(),
            seqs,
        });
    }

    /// Which endpoints a subscription may name.
    pub fn policy(&self) -> AddressPolicy {
        self.policy
    }

    /// The names of the configured secrets.
    pub fn secret_names(&self) -> Vec<&str> {
        self.secrets.keys().map(String::as_str).collect()
    }

    /// The configured secrets.
    pub fn secrets(&self) -> &BTreeMap<String, SigningKey> {
        &self.secrets
    }

    /// The driver's counters (the current driver's: a new leader's start at zero).
    pub fn stats(&self) -> Arc<DriverStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sends `url` one `io.waverun.Test` event now, signed with `keys`, and says how it went
    /// (blocks for at most the attempt's deadline). Not logged, not retried.
    pub fn test(&self, subscription: &str, url: &str, keys: &[SigningKey]) -> (Value, Attempt) {
        let now = SystemClock.now_ms();
        let at = chrono::DateTime::from_timestamp_millis(now)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default();
        let id = format!("{}-test-{now}", self.origin.fleet);
        let event = json!({
            "specversion": "1.0",
            "id": id,
            "source": self.origin.source(),
            "type": format!("{WAVERUN_TYPE_PREFIX}Test"),
            "subject": format!("/eventSubscriptions/{subscription}"),
            "time": at,
            "datacontenttype": "application/json",
            "severity": "info",
            "data": {"kind": "Test", "at": at, "subscription": subscription,
                     "message": "a test delivery, asked for by hand"},
        });
        let body = serde_json::to_vec(&event).unwrap_or_default();
        let headers = signature::sign(keys, &id, now / 1000, &body);
        (event, self.sender.send(url, &headers, &body))
    }

    /// `/metrics`' samples of events out, for the subscriptions `names` (with their dead
    /// letters): attempts by outcome, events behind, dead letters kept.
    pub fn metrics(&self, subscriptions: &[(String, u64)]) -> Vec<ProviderMetric> {
        let stats = self.stats();
        let outcomes = stats.outcomes();
        let lag = stats.lag();
        let mut out = Vec::new();
        for (name, dead) in subscriptions {
            for outcome in ["delivered", "failed", "deadLettered"] {
                let value = outcomes.get(&(name.clone(), outcome)).copied().unwrap_or(0);
                out.push(ProviderMetric {
                    name: "waverun_webhook_deliveries_total",
                    counter: true,
                    labels: vec![("subscription", name.clone()), ("outcome", outcome.into())],
                    value,
                });
            }
            out.push(ProviderMetric {
                name: "waverun_webhook_lag_events",
                counter: false,
                labels: vec![("subscription", name.clone())],
                value: lag.get(name).copied().unwrap_or(0),
            });
            out.push(ProviderMetric {
                name: "waverun_webhook_dead_letters",
                counter: false,
                labels: vec![("subscription", name.clone())],
                value: *dead,
            });
        }
        out
    }
}
