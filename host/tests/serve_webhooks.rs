//! Events out from the real binary: `waverun serve` with event subscriptions, delivering to
//! receivers on loopback (`tests/webhooks/receiver.py`, which verifies every delivery with
//! PyPI's `standardwebhooks` and `cloudevents`). A subscription posts pending gates signed with
//! the secret it showed once; the daemon killed with SIGKILL at 20 points of a run delivers
//! every event of it to each of two subscriptions at least once, in order, with stable ids; a
//! receiver that is down for a whole run changes nothing of the run's timing, its events are
//! dead-lettered after their maximum age and delivered again on request.

mod http_support;
mod process_support;
mod runtime_support;
mod webhook_support;

use http_support::{eventually, Client};
use process_support::{Life, Rng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use webhook_support::{add_secret, cut_short, deliveries, mode, receiver, Receiver};

/// A fleet file of `n` members in group `g`, each upgrading in exactly `minutes`.
fn fleet(dir: &Path, n: usize, minutes: u32) -> PathBuf {
    let names: Vec<String> = (0..n).map(|i| format!("m{i:02}")).collect();
    let members: Vec<(&str, &str, u32)> =
        names.iter().map(|m| (m.as_str(), "g", minutes)).collect();
    process_support::fleet_file(dir, &members)
}

/// `serve.yaml`: deliveries to loopback allowed, attempts of at most `timeout` seconds, and
/// the named secret `ops` (its value in `ops.secret`).
fn config(dir: &Path, timeout: f64, ops: &str) -> PathBuf {
    std::fs::write(dir.join("ops.secret"), format!("{ops}\n")).unwrap();
    let c = json!({"webhooks": {"allowLoopback": true, "timeoutSeconds": timeout,
                                "secrets": {"ops": {"fromFile": "ops.secret"}}}});
    let path = dir.join("serve.yaml");
    std::fs::write(&path, c.to_string()).unwrap();
    path
}

fn start(dir: &Path, data: &str, fleet: &Path, config: &Path, scale: &str, life: usize) -> Life {
    let data = dir.join(data);
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
        "--time-scale",
        scale,
    ];
    let l = Life::start(&args, &[], &dir.join(format!("life-{life}.log")));
    assert!(l.ready(60), "life {life} never got ready (see its log)");
    l
}

fn put(api: &Client, path: &str, body: &Value) -> Value {
    let r = api.call("PUT", path, None, &[], Some(&body.to_string()));
    assert!(
        r.status == 200 || r.status == 201,
        "PUT {path}: {} {}",
        r.status,
        r.body
    );
    r.body
}

fn post(api: &Client, path: &str) -> Value {
    let r = api.call("POST", path, None, &[], None);
    assert!(r.status < 300, "POST {path}: {} {}", r.status, r.body);
    r.body
}

fn subscription(url: &str, extra: Value) -> Value {
    let mut p = json!({"destination": {"endpointType": "WebHook",
                                       "properties": {"endpointUrl": url}}});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    json!({ "properties": p })
}

/// Creates the strategy `s` (one stage; an approval before it when `gate`) and the run `r1`,
/// and starts it.
fn start_run(api: &Client, concurrency: u32, gate: bool) {
    let mut stage =
        json!({"name": "all", "groups": [{"name": "g", "maxConcurrency": concurrency}]});
    if gate {
        stage["beforeGates"] = json!([{"type": "Approval", "displayName": "go"}]);
    }
    put(
        api,
        "/updateStrategies/s",
        &json!({"properties": {"strategy": {"stages": [stage]}}}),
    );
    let run = json!({"properties": {
        "updateStrategyId": "/fleets/default/updateStrategies/s",
        "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.34.1"},
                                 "nodeImageSelection": {"type": "Latest"}},
    }});
    put(api, "/updateRuns/r1", &run);
    post(api, "/updateRuns/r1/start");
}

fn run_state(api: &Client) -> Option<String> {
    let r = api.get("/updateRuns/r1", None);
    r.body["properties"]["status"]["status"]["state"]
        .as_str()
        .map(str::to_string)
}

fn wait_completed(api: &Client, secs: u64) {
    eventually(secs, "the run to complete", || {
        match run_state(api).as_deref() {
            Some("Completed") => Some(()),
            Some(s @ ("Failed" | "Stopped" | "Skipped")) => panic!("the run ended {s}"),
            _ => None,
        }
    });
}

/// Every event of the log, in order.
fn all_events(api: &Client) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    loop {
        let after = out.last().map_or(0, |e| e["seq"].as_u64().unwrap());
        let page = api
            .get(&format!("/events?after={after}&$top=1000"), None)
            .body;
        let page = page["value"].as_array().cloned().unwrap_or_default();
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

/// Waits until the subscription has nothing left to deliver (its cursor at the log's end).
fn caught_up(api: &Client, name: &str, secs: u64) -> Value {
    eventually(secs, &format!("{name} to catch up with the log"), || {
        let s = api.get(&format!("/eventSubscriptions/{name}"), None).body;
        let st = &s["properties"]["status"];
        (st["cursor"] == st["logEnd"] && st["lag"] == 0).then(|| st.clone())
    })
}

/// Every delivery the receiver got checked out (signature and CloudEvent); their event ids.
fn verified_ids(r: &Receiver, secret_index: u64) -> Vec<(u64, Value)> {
    deliveries(r)
        .into_iter()
        .map(|d| {
            assert!(d["signatureError"].is_null(), "{d}");
            assert!(d["eventError"].is_null(), "{d}");
            assert!(
                d["verifiedWith"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(secret_index)),
                "{d}"
            );
            let id: u64 = d["event"]["id"].as_str().unwrap().parse().unwrap();
            assert_eq!(
                d["webhookId"],
                format!("default-{id}"),
                "a stable webhook-id: {d}"
            );
            (id, d)
        })
        .collect()
}

#[test]
fn a_subscription_posts_pending_gates_signed_with_the_secret_it_showed_once() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet(dir.path(), 3, 10);
    let ops = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let config = config(dir.path(), 2.0, ops);
    let life = start(dir.path(), "data", &fleet, &config, "600", 0);
    let api = &life.api;
    let root = api.base.split("/api/").next().unwrap().to_string();
    let r = receiver(dir.path(), &[]);

    // Created: the secret is in this answer, and nowhere else ever after.
    let body = subscription(
        &format!("{}/hooks", r.base),
        json!({"filter": {"includedEventTypes": [
            "Microsoft.ResourceNotifications.AKSResources.FleetGateCreated"]}}),
    );
    let created = api.call(
        "PUT",
        "/eventSubscriptions/pager",
        None,
        &[],
        Some(&body.to_string()),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.header("cache-control"),
        Some("no-store"),
        "an answer with a secret"
    );
    let secret = created.body["properties"]["signing"]["secret"]
        .as_str()
        .expect("the generated secret, shown once")
        .to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    add_secret(&r, &secret);
    let shown = api.get("/eventSubscriptions/pager", None);
    assert_eq!(shown.status, 200);
    assert!(
        !shown.body.to_string().contains(&secret[6..]),
        "{}",
        shown.body
    );
    assert_eq!(
        shown.body["properties"]["signing"]["secrets"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(shown.etag.as_deref(), shown.body["eTag"].as_str());

    // A test delivery now, verified by the receiver.
    let t = post(api, "/eventSubscriptions/pager/test");
    assert_eq!(t["outcome"], "delivered", "{t}");
    assert_eq!(t["status"], 204, "{t}");
    let got = deliveries(&r);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["verifiedWith"], json!([0]), "{}", got[0]);
    assert_eq!(got[0]["event"]["type"], "io.waverun.Test");

    // A run waits at its approval gate: the receiver hears of it, with the link to approve.
    start_run(api, 3, true);
    let gate = eventually(60, "the gate's delivery", || {
        deliveries(&r).into_iter().find(|d| {
            d["event"]["type"] == "Microsoft.ResourceNotifications.AKSResources.FleetGateCreated"
        })
    });
    assert_eq!(gate["verifiedWith"], json!([0]), "{gate}");
    let ev = &gate["event"];
    assert_eq!(ev["source"], "/api/v1/fleets/default");
    assert_eq!(ev["severity"], "warning", "a pending approval: {ev}");
    let name = ev["subject"]
        .as_str()
        .unwrap()
        .strip_prefix("/gates/")
        .unwrap();
    let approve = ev["data"]["links"]["approve"].as_str().unwrap();
    assert!(approve.ends_with(&format!("/gates/{name}/approve")), "{ev}");
    assert_eq!(ev["data"]["gateType"], "Approval");
    let pending = api.get(&format!("/gates/{name}"), None).body;
    assert_eq!(pending["properties"]["state"], "Pending", "{pending}");
    let url = if approve.starts_with("http") {
        approve.to_string()
    } else {
        format!("{root}{approve}")
    };
    let a = api.call("POST", &url, None, &[], None);
    assert_eq!(
        a.status, 200,
        "approving through the delivered link: {}",
        a.body
    );
    wait_completed(api, 120);

    // The delivery log and the metrics say what happened.
    let log = api.get("/eventSubscriptions/pager/deliveries", None).body;
    let entries = log["value"].as_array().unwrap();
    assert!(!entries.is_empty(), "{log}");
    assert!(
        entries
            .iter()
            .all(|e| e["outcome"] == "delivered" && e["status"] == 204),
        "{log}"
    );
    let metrics = api.get(&format!("{root}/metrics"), None).body;
    let metrics = metrics.as_str().unwrap();
    assert!(
        metrics.contains(
            "waverun_webhook_deliveries_total{subscription=\"pager\",outcome=\"delivered\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("waverun_webhook_dead_letters{subscription=\"pager\"} 0"),
        "{metrics}"
    );
    caught_up(api, "pager", 30);
    eventually(30, "no lag in the metrics", || {
        let m = api.get(&format!("{root}/metrics"), None).body;
        m.as_str()?
            .contains("waverun_webhook_lag_events{subscription=\"pager\"} 0")
            .then_some(())
    });

    // A rotation: a new secret, shown once; both sign for a day.
    let rotated = post(api, "/eventSubscriptions/pager/rotateSecret");
    let second = rotated["properties"]["signing"]["secret"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(second, secret);
    let secrets = rotated["properties"]["signing"]["secrets"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(secrets.len(), 2, "{rotated}");
    assert!(
        secrets[0]["expiresAt"].is_null() && secrets[1]["expiresAt"].is_string(),
        "{rotated}"
    );
    add_secret(&r, &second);
    let t = post(api, "/eventSubscriptions/pager/test");
    assert_eq!(t["outcome"], "delivered", "{t}");
    let last = deliveries(&r).pop().unwrap();
    assert_eq!(
        last["verifiedWith"],
        json!([0, 1]),
        "signed with both: {last}"
    );

    // One that names a configured secret signs with it and shows none.
    let named = subscription(
        &format!("{}/ops", r.base),
        json!({"signing": {"secretRef": "ops"}}),
    );
    let n = api.call(
        "PUT",
        "/eventSubscriptions/ops",
        None,
        &[],
        Some(&named.to_string()),
    );
    assert_eq!(n.status, 201, "{}", n.body);
    assert!(
        n.body["properties"]["signing"]["secret"].is_null(),
        "{}",
        n.body
    );
    assert_eq!(n.body["properties"]["signing"]["secretRef"], "ops");

    // An endpoint refused for what it carries is not repeated: viewers read the audit log.
    let leaky = subscription("https://user:s3cr3t-pw@hooks.example.com/in", json!({}));
    let r = api.call(
        "PUT",
        "/eventSubscriptions/leaky",
        None,
        &[],
        Some(&leaky.to_string()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["target"],
        "properties.destination.properties.endpointUrl"
    );
    assert!(!r.body.to_string().contains("s3cr3t-pw"), "{}", r.body);
    let audit = api.get("/audit?$top=1000", None).body.to_string();
    assert!(!audit.contains("s3cr3t-pw"), "{audit}");

    // The secrets are in no read, the audit log, or the daemon's log.
    let everything = [
        api.get("/eventSubscriptions", None).body.to_string(),
        api.get("/audit?$top=1000", None).body.to_string(),
        std::fs::read_to_string(dir.path().join("life-0.log")).unwrap(),
    ];
    for text in &everything {
        for s in [&secret, &second, &ops.to_string()] {
            assert!(!text.contains(&s[6..]), "a secret leaked: {text}");
        }
    }
    let audit = api.get("/audit?$top=1000", None).body;
    let actions: Vec<&str> = audit["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.starts_with("eventSubscriptions."))
        .collect();
    assert_eq!(
        actions,
        [
            "eventSubscriptions.put",
            "eventSubscriptions.test",
            "eventSubscriptions.rotateSecret",
            "eventSubscriptions.test",
            "eventSubscriptions.put"
        ],
        "{audit}"
    );

    // Deleted: gone, with its status; one made again under its name starts anew (its
    // cursor at the log's end, no delivery log, nothing counted).
    let d = api.call("DELETE", "/eventSubscriptions/pager", None, &[], None);
    assert_eq!(d.status, 204, "{}", d.body);
    assert_eq!(api.get("/eventSubscriptions/pager", None).status, 404);
    let again = put(api, "/eventSubscriptions/pager", &body);
    let st = &again["properties"]["status"];
    assert_eq!(st["cursor"], st["logEnd"], "{again}");
    assert_eq!(st["attemptsSinceStart"]["delivered"], 0, "{again}");
    let log = api.get("/eventSubscriptions/pager/deliveries", None).body;
    assert_eq!(log["value"], json!([]), "{log}");
    assert!(life.stop(), "SIGTERM stops it cleanly");
}

const KILLS: usize = 20;

#[test]
fn kill_9_at_20_points_delivers_every_event_to_two_subscriptions_in_order_with_stable_ids() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet(dir.path(), 60, 10);
    let ops = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let config = config(dir.path(), 2.0, ops);
    let generated = receiver(dir.path(), &[]);
    let named_dir = dir.path().join("named");
    std::fs::create_dir_all(&named_dir).unwrap();
    let named = receiver(&named_dir, &[ops]);

    let mut life = start(dir.path(), "data", &fleet, &config, "200", 0);
    let body = subscription(&format!("{}/in", generated.base), json!({}));
    let made = put(&life.api, "/eventSubscriptions/generated", &body);
    add_secret(
        &generated,
        made["properties"]["signing"]["secret"].as_str().unwrap(),
    );
    let body = subscription(
        &format!("{}/in", named.base),
        json!({"signing": {"secretRef": "ops"}}),
    );
    put(&life.api, "/eventSubscriptions/named", &body);
    // Each receives the events after its creation.
    let from: BTreeMap<&str, u64> = ["generated", "named"]
        .into_iter()
        .map(|n| {
            let s = life.api.get(&format!("/eventSubscriptions/{n}"), None).body;
            (n, s["properties"]["status"]["cursor"].as_u64().unwrap())
        })
        .collect();
    start_run(&life.api, 4, false);

    let mut rng = Rng(0x00c0_ffee_5eed_0024);
    let mut kills = 0;
    while kills < KILLS {
        std::thread::sleep(Duration::from_millis(200 + rng.below(1200)));
        if run_state(&life.api).as_deref() == Some("Completed") {
            break;
        }
        life.kill();
        kills += 1;
        life = start(dir.path(), "data", &fleet, &config, "200", kills);
    }
    assert!(
        kills >= KILLS,
        "the run ended after only {kills} kills: slow the fleet down"
    );
    wait_completed(&life.api, 300);
    let events = all_events(&life.api);
    let last = events.last().unwrap()["seq"].as_u64().unwrap();
    for (name, r, index) in [("generated", &generated, 0), ("named", &named, 0)] {
        let status = caught_up(&life.api, name, 120);
        assert_eq!(status["deadLetters"], 0, "{name}: {status}");
        let got = verified_ids(r, index);
        let expected: Vec<u64> = (from[name] + 1..=last).collect();
        // Every event at least once, first seen in the log's order.
        let mut first_seen = Vec::new();
        let mut seen = BTreeSet::new();
        let mut bodies: BTreeMap<u64, Value> = BTreeMap::new();
        for (id, d) in &got {
            if seen.insert(*id) {
                first_seen.push(*id);
                bodies.insert(*id, d["event"].clone());
            } else {
                assert_eq!(
                    &bodies[id], &d["event"],
                    "{name}: event {id} changed on redelivery"
                );
            }
        }
        assert_eq!(
            first_seen, expected,
            "{name}: every event once at least, in order"
        );
        // Duplicates only where a life ended: the deliveries go back at most once per kill.
        let back = got.windows(2).filter(|w| w[1].0 <= w[0].0).count();
        assert!(back <= kills, "{name}: {back} steps back for {kills} kills");
        let dups = got.len() - expected.len();
        eprintln!(
            "{name}: {} deliveries of {} events ({dups} again, {back} replays, {kills} kills, \
             {} requests cut short by a kill)",
            got.len(),
            expected.len(),
            cut_short(r)
        );
    }
    // The event log's seqs are the ids: the CloudEvent of seq N carries the event N.
    let by_seq: BTreeMap<u64, &Value> = events
        .iter()
        .map(|e| (e["seq"].as_u64().unwrap(), e))
        .collect();
    for (id, d) in verified_ids(&named, 0) {
        assert_eq!(
            d["event"]["data"]["kind"], by_seq[&id]["kind"],
            "event {id}"
        );
        assert_eq!(d["event"]["data"]["at"], by_seq[&id]["at"], "event {id}");
    }
    assert!(life.stop(), "SIGTERM stops it cleanly");
}

/// The fleet time from the run's start to its completion, in seconds, and each member's
/// (start, completion) offsets from the run's start.
fn timing(events: &[Value]) -> (f64, BTreeMap<String, (f64, f64)>) {
    let at = |e: &Value| {
        chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap())
            .unwrap()
            .timestamp_millis() as f64
            / 1000.0
    };
    let run: Vec<&Value> = events.iter().filter(|e| e["run"] == "r1").collect();
    let start = at(run.iter().find(|e| e["kind"] == "RunStarted").unwrap());
    let end = at(run.iter().find(|e| e["kind"] == "RunCompleted").unwrap());
    let mut members: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for e in &run {
        let Some(m) = e["member"].as_str() else {
            continue;
        };
        let entry = members.entry(m.to_string()).or_insert((f64::NAN, f64::NAN));
        match e["kind"].as_str() {
            Some("MemberStarted") => entry.0 = at(e) - start,
            Some("MemberCompleted") => entry.1 = at(e) - start,
            _ => {}
        }
    }
    (end - start, members)
}

#[test]
fn a_receiver_down_for_a_whole_run_changes_nothing_of_its_timing_then_gets_its_dead_letters_on_request(
) {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet(dir.path(), 12, 10);
    let config = config(dir.path(), 1.0, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    // 40 minutes of fleet time (four waves of three members, ten minutes each) in 20 s.
    let scale = "120";

    // Without subscriptions.
    let alone = start(dir.path(), "alone", &fleet, &config, scale, 0);
    start_run(&alone.api, 3, false);
    wait_completed(&alone.api, 120);
    let (alone_total, alone_members) = timing(&all_events(&alone.api));
    assert!(alone.stop());

    // With one receiver down (nothing listens on its port) and one that never answers.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let hung = receiver(dir.path(), &[]);
    mode(&hung, json!({"mode": "never", "seconds": 30}));
    let life = start(dir.path(), "with", &fleet, &config, scale, 1);
    let ttl = json!({"retryPolicy": {"eventTimeToLiveInMinutes": 1}});
    put(
        &life.api,
        "/eventSubscriptions/down",
        &subscription(&format!("http://127.0.0.1:{down}/in"), ttl.clone()),
    );
    let mut only_runs = ttl.clone();
    only_runs["filter"] =
        json!({"includedEventTypes": ["RunStarted", "RunCompleted", "MemberCompleted"]});
    put(
        &life.api,
        "/eventSubscriptions/hung",
        &subscription(&format!("{}/in", hung.base), only_runs),
    );
    let from = life.api.get("/eventSubscriptions/down", None).body["properties"]["status"]
        ["cursor"]
        .as_u64()
        .unwrap();
    start_run(&life.api, 3, false);
    wait_completed(&life.api, 120);
    let events = all_events(&life.api);
    let (total, members) = timing(&events);
    // The same rollout to within a few fleet seconds per wave (the engine's own scheduling at
    // 120x real time), where a delivery waited on would cost 120 fleet seconds per second.
    eprintln!("the run took {total} fleet seconds with the receivers down, {alone_total} without");
    assert!(
        (total - alone_total).abs() <= 60.0,
        "{total} vs {alone_total}"
    );
    assert_eq!(
        members.keys().collect::<Vec<_>>(),
        alone_members.keys().collect::<Vec<_>>()
    );
    for (m, (s, e)) in &members {
        let (s0, e0) = alone_members[m];
        assert!(
            (s - s0).abs() <= 60.0 && (e - e0).abs() <= 60.0,
            "{m}: {s},{e} vs {s0},{e0}"
        );
    }

    // Past the events' maximum age (a minute), every one of them is a dead letter.
    let last = events.last().unwrap()["seq"].as_u64().unwrap();
    let expected: Vec<u64> = (from + 1..=last).collect();
    let dead = eventually(240, "every event of the run dead-lettered", || {
        let page = life
            .api
            .get("/eventSubscriptions/down/deadLetters?$top=1000", None)
            .body;
        let ids: Vec<u64> = page["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["eventId"].as_u64().unwrap())
            .collect();
        (ids == expected).then_some(page)
    });
    let first = &dead["value"][0];
    assert!(first["attempts"].as_u64().unwrap() >= 1, "{dead}");
    assert!(!first["error"].as_str().unwrap().is_empty(), "{dead}");
    let st = caught_up(&life.api, "down", 60);
    assert_eq!(st["deadLetters"], expected.len(), "{st}");
    let log = life
        .api
        .get("/eventSubscriptions/down/deliveries?$top=1000", None)
        .body;
    assert!(
        log["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["outcome"] == "deadLettered"),
        "{log}"
    );

    // The receiver is back (somewhere else): the dead letters go to it, in order, on request.
    let back_dir = dir.path().join("back");
    std::fs::create_dir_all(&back_dir).unwrap();
    let back = receiver(&back_dir, &[]);
    let mut moved = subscription(&format!("{}/in", back.base), ttl.clone());
    let shown = life.api.get("/eventSubscriptions/down", None).body;
    moved["properties"]["signing"] = shown["properties"]["signing"].clone();
    put(&life.api, "/eventSubscriptions/down", &moved);
    let r = post(&life.api, "/eventSubscriptions/down/deadLetters/redeliver");
    assert_eq!(r["redelivering"], expected.len(), "{r}");
    let got = eventually(60, "the dead letters redelivered", || {
        let got = deliveries(&back);
        (got.len() >= expected.len()).then_some(got)
    });
    let ids: Vec<u64> = got
        .iter()
        .map(|d| d["event"]["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, expected, "redelivered in order");
    eventually(30, "the dead letters cleared", || {
        let n = life.api.get("/eventSubscriptions/down", None).body["properties"]["status"]
            ["deadLetters"]
            .clone();
        (n == 0).then_some(())
    });

    // Some of the hung receiver's, by id, once it answers again.
    let hung_dead = eventually(240, "the hung receiver's events dead-lettered", || {
        let st =
            life.api.get("/eventSubscriptions/hung", None).body["properties"]["status"].clone();
        (st["lag"] == 0 && st["cursor"] == st["logEnd"]).then_some(())?;
        let page = life
            .api
            .get("/eventSubscriptions/hung/deadLetters", None)
            .body;
        let ids: Vec<u64> = page["value"]
            .as_array()?
            .iter()
            .filter_map(|d| d["eventId"].as_u64())
            .collect();
        (!ids.is_empty()).then_some(ids)
    });
    mode(&hung, json!({"mode": "ok"}));
    let before = deliveries(&hung).len();
    let pick = json!({"eventIds": [hung_dead[0]]});
    let r = life.api.call(
        "POST",
        "/eventSubscriptions/hung/deadLetters/redeliver",
        None,
        &[],
        Some(&pick.to_string()),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let got = eventually(30, "the chosen dead letter", || {
        let got = deliveries(&hung);
        got.iter()
            .skip(before)
            .find(|d| d["answered"] == 204)
            .cloned()
    });
    assert_eq!(got["event"]["id"], hung_dead[0].to_string());
    eventually(30, "one dead letter fewer", || {
        let n = life
            .api
            .get("/eventSubscriptions/hung/deadLetters", None)
            .body["value"]
            .as_array()?
            .len();
        (n == hung_dead.len() - 1).then_some(())
    });
    // One that is not a dead letter is refused, naming it.
    let r = life.api.call(
        "POST",
        "/eventSubscriptions/hung/deadLetters/redeliver",
        None,
        &[],
        Some(&json!({"eventIds": [hung_dead[0]]}).to_string()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["target"], "eventIds[0]", "{}", r.body);
    assert!(life.stop());
}
