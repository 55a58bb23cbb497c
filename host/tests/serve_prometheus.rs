//! End to end with a real Prometheus (Debian's package) and the real binary: `waverun serve`
//! configured with `healthChecks.prometheus`, a run whose members are checked after their
//! upgrade by a PromQL query over a metric the test sets per cluster, and a HealthCheck gate
//! whose query finds nothing. One cluster is unhealthy (Prometheus has its bad value before the
//! run starts, so the first measurement after its upgrade fails whenever it comes): that
//! member fails with `HealthCheckFailed` and the group's `maxAllowedFailures` lets the stage go
//! on; the gate's empty result is inconclusive, so it waits for a person, whom the CLI's tree
//! shows how to approve or fail it; approved with `waverun gate approve`, the run completes. The
//! measurements are counted on `/metrics` by verdict. Nothing here mocks Prometheus's API.

mod http_support;
mod process_support;
mod prom_support;
mod runtime_support;

use http_support::{eventually, member, Client};
use process_support::{fleet_file, Life};
use prom_support::{Exporter, Prometheus};
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// Fleet time runs this many times faster: a 10-minute upgrade takes a second.
const TIME_SCALE: &str = "600";

/// The metric the exporter serves, by cluster.
const METRIC: &str = "waverun_test_error_ratio";

/// `waverun ARGS` against the daemon at `server`; its stdout, or the test fails with stderr.
fn cli(server: &str, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(args)
        .env("WAVERUN_SERVER", server)
        .env_remove("WAVERUN_TOKEN")
        .env_remove("WAVERUN_FLEET_NAME")
        .stdin(Stdio::null())
        .output()
        .expect("waverun runs");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    );
    assert!(o.status.success(), "waverun {args:?}: {out}{err}");
    out
}

fn status(api: &Client) -> Value {
    api.get("/updateRuns/r1", None).body["properties"]["status"].clone()
}

/// The samples of `family` on the daemon's `/metrics` (lines `family{...} value`).
fn samples(metrics: &str, family: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_prometheus_gated_run_fails_the_unhealthy_member_and_an_empty_result_waits_for_approval_from_the_cli(
) {
    let dir = tempfile::tempdir().unwrap();
    let exporter = Exporter::start();
    // `b` is unhealthy from the start: its first measurement (a second after it starts, at
    // 600×) fails. Set only once `b` was seen starting, a scrape that came late (every second,
    // later on a loaded machine) let that measurement pass.
    for m in ["a", "c", "d"] {
        exporter.set(m, 0.0);
    }
    exporter.set("b", 0.3);
    let mut prom = Prometheus::start(&exporter);
    // Prometheus starting up (and its first scrape) takes a while on a loaded machine.
    prom.wait_for(&format!("count({METRIC}) == 4"), 120);
    prom.wait_for(&format!("{METRIC}{{cluster=\"b\"}} == 0.3"), 120);

    let config = dir.path().join("waverun.yaml");
    std::fs::write(
        &config,
        format!(
            "healthChecks:\n  prometheus: {{url: \"{}\", timeoutSeconds: 10}}\n",
            prom.url
        ),
    )
    .unwrap();
    let fleet = fleet_file(
        dir.path(),
        &[
            ("a", "ring", 10),
            ("b", "ring", 10),
            ("c", "ring", 10),
            ("d", "tail", 10),
        ],
    );
    let data = dir.path().join("data");
    let life = Life::start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--fleet",
            fleet.to_str().unwrap(),
            "--time-scale",
            TIME_SCALE,
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &[],
        &dir.path().join("daemon.log"),
    );
    assert!(life.ready(60), "the daemon never got ready");
    let api = &life.api;
    let server = api.base.split("/api/").next().unwrap().to_string();

    // After each member: a one-minute soak (0.1 s here), then four measurements five fleet
    // minutes apart, none allowed to fail. After the stage: a query that matches nothing.
    let strategy = json!({
        "healthChecks": [
            {"name": "errors",
             "prometheus": {"query": format!("max({METRIC}{{cluster=\"{{{{member}}}}\"}})"),
                            "successCondition": "result < 0.01"},
             "intervalSeconds": 300, "count": 4, "timeoutSeconds": 10},
            {"name": "canary-slo",
             "prometheus": {"query": format!("{METRIC}{{cluster=\"canary\"}}"),
                            "successCondition": "result < 0.01"},
             "timeoutSeconds": 10},
        ],
        "stages": [
            {"name": "prod", "maxAllowedFailures": "1",
             "groups": [{"name": "ring", "maxConcurrency": "3", "maxAllowedFailures": "1",
                         "afterMemberChecks": {"soakSeconds": 60, "checks": ["errors"]}}],
             "afterGates": [{"type": "HealthCheck", "healthCheck": "canary-slo"}]},
            {"name": "last", "groups": [{"name": "tail"}]},
        ],
    });
    let r = api.call(
        "PUT",
        "/updateStrategies/gated",
        None,
        &[],
        Some(&json!({"properties": {"strategy": strategy}}).to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/gated",
        "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.34.1"}},
    }});
    let r = api.call("PUT", "/updateRuns/r1", None, &[], Some(&run.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    cli(&server, &["updaterun", "start", "-n", "r1"]);

    // The gate after `prod` is measured, finds nothing, and waits for a person.
    let gate = eventually(90, "the HealthCheck gate to be Pending", || {
        let gates = api.get("/gates?$filter=state%20eq%20Pending", None);
        gates.body["value"]
            .as_array()?
            .iter()
            .find(|g| g["properties"]["gateType"] == "HealthCheck")
            .cloned()
    });
    let s = status(api);
    for m in ["a", "c"] {
        let st = member(&s, m);
        assert_eq!(st["status"]["state"], "Completed", "{st:#}");
        let check = &st["checks"][0];
        assert_eq!(check["name"], "errors", "{st:#}");
        assert_eq!(check["taken"], 4, "{st:#}");
        assert_eq!(check["verdict"], "Pass", "{st:#}");
    }
    let b = member(&s, "b");
    assert_eq!(b["status"]["state"], "Failed", "{b:#}");
    assert_eq!(b["status"]["error"]["code"], "HealthCheckFailed", "{b:#}");
    let last = &b["checks"][0]["last"];
    assert_eq!(
        last["value"], "0.3",
        "the measurement Prometheus answered: {b:#}"
    );
    assert_eq!(last["verdict"], "Fail", "{b:#}");
    assert_eq!(member(&s, "d")["status"]["state"], "NotStarted", "{s:#}");
    let after = &s["stages"][0]["afterGates"][0];
    assert_eq!(after["check"]["verdict"], "Inconclusive", "{after:#}");
    let waiting = &s["stages"][0]["waitingOn"];
    assert_eq!(waiting["reason"], "Gate", "{waiting:#}");
    assert!(
        waiting["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"canary-slo\" was inconclusive: approve or fail it")),
        "{waiting:#}"
    );

    // The tree says why it waits and how to go on, either way.
    let id = gate["name"].as_str().unwrap().to_string();
    let tree = cli(&server, &["updaterun", "show", "-n", "r1", "-o", "table"]);
    assert!(tree.contains("check canary-slo"), "{tree}");
    assert!(
        tree.contains(&format!("gate approve --gate-name {id}")),
        "{tree}"
    );
    assert!(
        tree.contains(&format!("gate fail --gate-name {id}")),
        "{tree}"
    );

    // Approved from the CLI, the last stage runs and the run completes with `b` failed.
    cli(&server, &["gate", "approve", "--gate-name", &id]);
    let done = eventually(90, "the run to end", || {
        let s = status(api);
        (s["status"]["state"] != "Running").then_some(s)
    });
    assert_eq!(done["status"]["state"], "Completed", "{done:#}");
    assert_eq!(member(&done, "d")["status"]["state"], "Completed");
    assert_eq!(member(&done, "b")["status"]["state"], "Failed");

    // Every measurement on /metrics: a's and c's four passes, b's failure, the gate's one
    // inconclusive answer, each with its latency.
    let metrics = api.get(&format!("{server}/metrics"), None).body;
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    let counted = samples(&metrics, "waverun_health_measurements_total");
    let count = |check: &str, verdict: &str| -> f64 {
        counted
            .iter()
            .filter(|l| {
                l.contains(&format!("check=\"{check}\""))
                    && l.contains(&format!("verdict=\"{verdict}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(count("errors", "Pass"), 8.0, "{metrics}");
    assert_eq!(count("errors", "Fail"), 1.0, "{metrics}");
    assert_eq!(count("canary-slo", "Inconclusive"), 1.0, "{metrics}");
    assert!(
        metrics.contains("waverun_health_measurement_seconds_count{source=\"prometheus\"} 10"),
        "{metrics}"
    );
    assert!(life.stop(), "a clean shutdown");
}
