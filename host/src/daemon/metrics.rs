//! The daemon's measurements, for `GET /metrics` (Prometheus text format): what the engine
//! thread times as it goes (journal commits, plugin calls, upgrade durations in fleet time) and
//! what a scrape counts from the runs' status trees (runs, stages, groups and members by state,
//! failure counts, waits by reason). This room owns the metric names and their labels.

use crate::providers::ProviderMetric;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::time::Duration;
use waverun_core::NodeTally;

/// A run, by name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabel {
    /// The run.
    pub run: String,
}

/// A node kind and state within a run.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The run.
    pub run: String,
    /// `run`, `stage`, `group` or `member`.
    pub node: String,
    /// The state (`Running`, `Completed`, ...).
    pub state: String,
}

/// Waiting nodes by reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WaitLabels {
    /// The run.
    pub run: String,
    /// `stage`, `group` or `member`.
    pub node: String,
    /// Why it waits (`MaintenanceWindow`, `Gate`, ...).
    pub reason: String,
}

/// A plugin call kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabel {
    /// `command`, `deliver`, `wake`, `status`, `query`, `nextWakeup`.
    pub call: String,
}

/// An upgrade's outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// `succeeded` or `failed`.
    pub outcome: String,
}

/// One health-check measurement: which check, from where, why, and what it found.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MeasurementLabels {
    /// The check's name in its strategy.
    pub check: String,
    /// `prometheus`, `http`, `exec` or `provider`.
    pub source: String,
    /// `Gate`, `AfterMember` or `Preflight`.
    pub purpose: String,
    /// `Pass`, `Fail`, `Inconclusive` or `Error`.
    pub verdict: String,
}

/// A health check's source.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    /// `prometheus`, `http`, `exec` or `provider`.
    pub source: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency() -> Histogram {
    // 50 µs to ~3.3 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 17))
}

fn check_latency() -> Histogram {
    // 1 ms to ~65 s (a check's timeout is 30 s unless it says otherwise).
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn upgrade_buckets() -> Histogram {
    // 1 minute to ~34 hours, in fleet seconds.
    Histogram::new(exponential_buckets(60.0, 2.0, 12))
}

/// Every metric of the daemon.
pub struct Metrics {
    registry: Registry,
    commit: Histogram,
    plugin_calls: Histograms<CallLabel>,
    upgrades: Histograms<OutcomeLabel>,
    nodes: Family<StateLabels, Gauge>,
    failures: Family<RunLabel, Gauge>,
    waits: Family<WaitLabels, Gauge>,
    measurements: Family<MeasurementLabels, Counter>,
    measurement_seconds: Histograms<SourceLabel>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// The metrics, registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("waverun");
        let commit = latency();
        registry.register(
            "journal_commit_seconds",
            "Time to commit one engine step (journal, snapshot, events, operations) durably",
            commit.clone(),
        );
        let plugin_calls: Histograms<CallLabel> = Family::new_with_constructor(latency);
        registry.register(
            "plugin_call_seconds",
            "Time of one call into the engine plugin, by call",
            plugin_calls.clone(),
        );
        let upgrades: Histograms<OutcomeLabel> = Family::new_with_constructor(upgrade_buckets);
        registry.register(
            "upgrade_duration_fleet_seconds",
            "Member upgrade durations in fleet time, by outcome",
            upgrades.clone(),
        );
        let nodes = Family::<StateLabels, Gauge>::default();
        registry.register(
            "nodes",
            "Runs, stages, groups and members by state",
            nodes.clone(),
        );
        let failures = Family::<RunLabel, Gauge>::default();
        registry.register("run_failures", "A run's failure count", failures.clone());
        let waits = Family::<WaitLabels, Gauge>::default();
        registry.register(
            "waiting_nodes",
            "Stages, groups and members waiting, by reason",
            waits.clone(),
        );
        let measurements = Family::<MeasurementLabels, Counter>::default();
        registry.register(
            "health_measurements",
            "Health-check measurements taken, by check, source, purpose and verdict",
            measurements.clone(),
        );
        let measurement_seconds: Histograms<SourceLabel> =
            Family::new_with_constructor(check_latency);
        registry.register(
            "health_measurement_seconds",
            "Wall-clock time of one health-check measurement, by source",
            measurement_seconds.clone(),
        );
        Metrics {
            registry,
            commit,
            plugin_calls,
            upgrades,
            nodes,
            failures,
            waits,
            measurements,
            measurement_seconds,
        }
    }

    /// One step committed in `d`.
    pub fn committed(&self, d: Duration) {
        self.commit.observe(d.as_secs_f64());
    }

    /// One plugin call of kind `call` took `d`.
    pub fn plugin_call(&self, call: &str, d: Duration) {
        self.plugin_calls
            .get_or_create(&CallLabel {
                call: call.to_string(),
            })
            .observe(d.as_secs_f64());
    }

    /// A member upgrade ended after `fleet_seconds`.
    pub fn upgrade_ended(&self, succeeded: bool, fleet_seconds: f64) {
        let outcome = if succeeded { "succeeded" } else { "failed" };
        self.upgrades
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_string(),
            })
            .observe(fleet_seconds.max(0.0));
    }

    /// One health-check measurement ended with `labels.verdict` after `took`.
    pub fn measured(&self, labels: MeasurementLabels, took: Duration) {
        self.measurement_seconds
            .get_or_create(&SourceLabel {
                source: labels.source.clone(),
            })
            .observe(took.as_secs_f64());
        self.measurements.get_or_create(&labels).inc();
    }

    /// Replaces the counts with those of `runs` (at a scrape), each run's nodes counted by
    /// state and wait reason (the plugin's `tallies`).
    pub fn set_runs(&self, runs: &[(String, NodeTally)]) {
        self.nodes.clear();
        self.failures.clear();
        self.waits.clear();
        let name = |v: &dyn erased::Named| v.name();
        for (run, t) in runs {
            let levels = [
                ("run", &t.run),
                ("stage", &t.stages),
                ("group", &t.groups),
                ("member", &t.members),
            ];
            for (node, level) in levels {
                for (state, n) in &level.states {
                    let l = StateLabels {
                        run: run.clone(),
                        node: node.to_string(),
                        state: name(state),
                    };
                    self.nodes.get_or_create(&l).set(i64::from(*n));
                }
                // The run's own wait is its current stage's, counted there.
                if node == "run" {
                    continue;
                }
                for (reason, n) in &level.waits {
                    let l = WaitLabels {
                        run: run.clone(),
                        node: node.to_string(),
                        reason: name(reason),
                    };
                    self.waits.get_or_create(&l).set(i64::from(*n));
                }
            }
            self.failures
                .get_or_create(&RunLabel { run: run.clone() })
                .set(i64::from(t.failure_count));
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        self.encode_with(&[])
    }

    /// The text exposition, with the samples measured outside the registry (each provider's,
    /// a `provider` label first; events out's) before its end.
    pub fn encode_with(&self, samples: &[ProviderMetric]) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        if samples.is_empty() {
            return out;
        }
        let body = out.strip_suffix("# EOF\n").unwrap_or(&out).to_string();
        let mut families: BTreeMap<(&str, bool), Vec<String>> = BTreeMap::new();
        for m in samples {
            let labels = m
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect::<Vec<_>>()
                .join(",");
            families
                .entry((m.name, m.counter))
                .or_default()
                .push(format!("{}{{{labels}}} {}", m.name, m.value));
        }
        let mut text = body;
        for ((name, counter), samples) in families {
            let family = if counter {
                name.strip_suffix("_total").unwrap_or(name)
            } else {
                name
            };
            let kind = if counter { "counter" } else { "gauge" };
            text.push_str(&format!("# TYPE {family} {kind}\n"));
            for s in samples {
                text.push_str(&s);
                text.push('\n');
            }
        }
        text.push_str("# EOF\n");
        text
    }
}

/// A label value as the exposition format writes it.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Enum names as they are serialised (`Running`, `MaintenanceWindow`).
mod erased {
    /// A value whose serde name labels a metric.
    pub trait Named {
        fn name(&self) -> String;
    }

    impl<T: serde::Serialize> Named for T {
        fn name(&self) -> String {
            match serde_json::to_value(self) {
                Ok(serde_json::Value::String(s)) => s,
                Ok(v) => v.to_string(),
                Err(_) => String::new(),
            }
        }
    }
}
