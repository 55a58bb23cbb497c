//! `waverun demo`: the daemon with a simulated fleet of 40 clusters in 4 regions, a 3-stage
//! strategy with an approval gate before production, a run started at a time scale where the
//! whole rollout takes a few minutes, and an auto-upgrade profile that follows 1.33 patches:
//! a patch is released on the fourth fleet day, and the profile rolls it out through the same
//! strategy. What it creates goes through the HTTP API, as any client's requests would.

use serde_json::{json, Value};

/// The demo fleet's regions: (region, `geo` label, UTC offset of its maintenance windows).
const REGIONS: [(&str, &str, &str); 4] = [
    ("eastus", "us", "-05:00"),
    ("westeurope", "eu", "+01:00"),
    ("southeastasia", "asia", "+08:00"),
    ("australiaeast", "au", "+10:00"),
];

/// The version the fleet runs, and the one the demo run upgrades it to.
pub const FROM_VERSION: &str = "1.32.7";
/// The target.
pub const TO_VERSION: &str = "1.33.3";
/// The patch released during the demo, which the profile rolls out.
pub const PATCH_VERSION: &str = "1.33.4";
/// The fleet day (from the start) the patch is released, everywhere.
pub const PATCH_DAY: i64 = 3;
/// The auto-upgrade profile the demo creates.
pub const PROFILE: &str = "demo-patches";
const FROM_IMAGE: &str = "AKSUbuntu-2204gen2containerd-202611.01.0";
const TO_IMAGE: &str = "AKSUbuntu-2204gen2containerd-202612.01.0";

/// The strategy the demo creates.
pub const STRATEGY: &str = "demo-rollout";
/// The run the demo creates and starts.
pub const RUN: &str = "demo-k8s-1-33";

/// Fleet time runs this much faster than real time: the rollout (four days of fleet time, as
/// the release reaches the regions one day apart) takes about three minutes.
pub const TIME_SCALE: f64 = 2_000.0;

fn day(start: &chrono::DateTime<chrono::Utc>, n: i64) -> String {
    (*start + chrono::TimeDelta::days(n)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The simulated fleet file (JSON), starting at `start` (midnight UTC of the first day).
pub fn fleet_file(start: chrono::DateTime<chrono::Utc>) -> Value {
    let mut members = Vec::new();
    for (region, geo, offset) in REGIONS {
        for (env, count) in [("dev", 2), ("staging", 2), ("prod", 6)] {
            for n in 1..=count {
                let name = format!("{env}-{geo}-{n}");
                // Two flaky clusters: their first upgrade attempt fails.
                let flaky = name == "staging-eu-2" || name == "prod-asia-4";
                let mut m = json!({
                    "name": name,
                    "region": region,
                    "labels": { "env": env, "geo": geo },
                    "kubernetesVersion": FROM_VERSION,
                    "nodePools": [
                        { "name": "system", "osType": "Linux", "imageVersion": FROM_IMAGE },
                    ],
                    "behavior": {
                        "upgradeMinutes": 25 + 5 * (n % 3),
                        "failAttempts": u32::from(flaky),
                        "jitterMinutes": 10,
                    },
                });
                if env == "prod" {
                    // Production upgrades only in a nightly window, local time.
                    m["maintenance"] = json!({ "kubernetes": {
                        "schedule": { "daily": { "intervalDays": 1 } },
                        "durationHours": 8,
                        "startTime": "20:00",
                        "utcOffset": offset,
                    }});
                }
                members.push(m);
            }
        }
    }
    // The new release reaches one region a day.
    let available = |offset_days: [i64; 4]| {
        let mut m = serde_json::Map::new();
        for ((region, _, _), d) in REGIONS.iter().zip(offset_days) {
            m.insert(region.to_string(), json!(day(&start, d)));
        }
        Value::Object(m)
    };
    let everywhere_before = available([-30, -30, -30, -30]);
    json!({
        "start": day(&start, 0),
        "seed": 7,
        "members": members,
        "releases": {
            "kubernetes": [
                { "version": FROM_VERSION, "available": everywhere_before },
                { "version": TO_VERSION, "available": available([0, 1, 2, 3]) },
                { "version": PATCH_VERSION, "available": { "*": day(&start, PATCH_DAY) } },
            ],
            "nodeImages": [
                { "version": FROM_IMAGE, "available": everywhere_before },
                { "version": TO_IMAGE, "available": available([0, 1, 2, 3]) },
            ],
        },
    })
}

/// The strategy resource the demo creates: dev, then staging (half at a time), then
/// production per geography after an approval.
pub fn strategy() -> Value {
    let geo_group = |geo: &str| {
        json!({
            "name": format!("prod-{geo}"),
            "memberSelector": { "byLabel": format!("geo={geo}") },
            "maxConcurrency": "50%",
            "maxAllowedFailures": "1",
        })
    };
    json!({ "properties": { "strategy": { "stages": [
        {
            "name": "dev",
            "memberSelector": { "byLabel": "env=dev" },
            "maxConcurrency": "4",
            "afterStageWaitInSeconds": 3600,
        },
        {
            "name": "staging",
            "memberSelector": { "byLabel": "env=staging" },
            "maxConcurrency": "50%",
            "maxAllowedFailures": "1",
            "afterStageWaitInSeconds": 3600,
        },
        {
            "name": "production",
            "memberSelector": { "byLabel": "env=prod" },
            "beforeGates": [ { "type": "Approval", "displayName": "production sign-off" } ],
            "maxAllowedFailures": "2",
            "groups": REGIONS.iter().map(|(_, geo, _)| geo_group(geo)).collect::<Vec<_>>(),
        },
    ]}}})
}

/// The auto-upgrade profile the demo creates: 1.33's patches, through the demo's strategy.
pub fn profile(fleet: &str) -> Value {
    json!({ "properties": {
        "channel": "TargetKubernetesVersion",
        "targetKubernetesVersion": "1.33",
        "updateStrategyId": format!("/fleets/{fleet}/updateStrategies/{STRATEGY}"),
        "nodeImageSelection": { "type": "Latest" },
    }})
}

/// The run resource the demo creates.
pub fn run(fleet: &str) -> Value {
    json!({ "properties": {
        "updateStrategyId": format!("/fleets/{fleet}/updateStrategies/{STRATEGY}"),
        "managedClusterUpdate": {
            "upgrade": { "type": "Full", "kubernetesVersion": TO_VERSION },
            "nodeImageSelection": { "type": "Latest" },
        },
    }})
}
