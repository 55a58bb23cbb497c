//! Shared by the tests of the `aks` provider against the fake Azure Resource Manager
//! (`tests/aks/fake_arm.py`, a child process on loopback): the fake, its seed of 12 clusters in
//! 3 regions, and the `waverun.yaml` that points the daemon at it.
#![allow(dead_code)] // each test file uses a part

pub use crate::http_support::eventually;
use crate::http_support::Client;
use crate::runtime_support::workspace;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub const SUB: &str = "6a8c1b7e-0000-4000-8000-000000000001";
pub const OLD_IMAGE: &str = "AKSUbuntu-2204gen2containerd-202611.01.0";
pub const NEW_IMAGE: &str = "AKSUbuntu-2204gen2containerd-202612.01.0";
pub const REGIONS: [&str; 3] = ["eastus", "westeurope", "japaneast"];

/// The fake ARM, a child process; killed when dropped.
pub struct FakeArm {
    child: Child,
    pub base: String,
}

impl FakeArm {
    pub fn start(dir: &Path, seed: &Value, args: &[&str]) -> FakeArm {
        let state = dir.join("seed.json");
        std::fs::write(&state, seed.to_string()).unwrap();
        let port_file = dir.join("fake.port");
        let child = Command::new("python3")
            .arg(workspace().join("tests/aks/fake_arm.py"))
            .args(["--port", "0", "--state"])
            .arg(&state)
            .arg("--port-file")
            .arg(&port_file)
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs the fake ARM");
        let mut fake = FakeArm {
            child,
            base: String::new(),
        };
        let port = eventually(20, "the fake ARM's port", || {
            std::fs::read_to_string(&port_file)
                .ok()?
                .trim()
                .parse::<u16>()
                .ok()
        });
        fake.base = format!("http://127.0.0.1:{port}");
        fake
    }

    pub fn admin(&self) -> Client {
        Client::new(&self.base)
    }

    /// How many upgrade-starting writes each cluster received, per target.
    pub fn upgrade_requests(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        let r = self.requests(0);
        serde_json::from_value(r["upgradeRequests"].clone()).unwrap()
    }

    /// The request log after `since` (`requests`), and the upgrade counts (`upgradeRequests`).
    pub fn requests(&self, since: u64) -> Value {
        let r = self
            .admin()
            .get(&format!("{}/_fake/requests?since={since}", self.base), None);
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// The clusters (their ARM bodies), the operations, fake time.
    pub fn state(&self) -> Value {
        let r = self
            .admin()
            .get(&format!("{}/_fake/state", self.base), None);
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    pub fn inject(&self, injection: &Value) {
        let r = self.admin().call(
            "POST",
            &format!("{}/_fake/inject", self.base),
            None,
            &[],
            Some(&injection.to_string()),
        );
        assert!(r.status < 300, "{}", r.body);
    }
}

impl Drop for FakeArm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn cluster_id(name: &str) -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/fleet-rg/providers/Microsoft.ContainerService/managedClusters/{name}"
    )
}

/// The 12 clusters: four per region, a system and a user pool each, on 1.33.2 and the older
/// image; half of them with both AKS-managed maintenance schedules (open every day, all day).
pub fn clusters() -> Vec<(String, &'static str)> {
    REGIONS
        .iter()
        .flat_map(|r| (1..=4).map(move |i| (format!("aks-{r}-{i}"), *r)))
        .collect()
}

/// The fake's seed: the 12 clusters, 1.33.2 and 1.34.1 in every region, the new image in
/// japaneast `image_reaches_japan_after` fake seconds after the fake starts (at once elsewhere).
pub fn seed(image_reaches_japan_after: u64) -> Value {
    let window = json!({"maintenanceWindow": {
        "schedule": {"daily": {"intervalDays": 1}},
        "durationHours": 24, "utcOffset": "+00:00", "startTime": "00:00",
    }});
    let mut managed = serde_json::Map::new();
    for (i, (name, region)) in clusters().into_iter().enumerate() {
        let pool = |name: &str, mode: &str| {
            json!({"name": name, "mode": mode, "osType": "Linux", "osSKU": "Ubuntu",
                   "type": "VirtualMachineScaleSets", "count": 3, "vmSize": "Standard_D4s_v5",
                   "orchestratorVersion": "1.33.2", "nodeImageVersion": OLD_IMAGE})
        };
        let mut c = json!({
            "location": region, "kubernetesVersion": "1.33.2", "maxAgentPools": 100,
            "dnsPrefix": format!("{name}-dns"),
            "agentPools": [pool("system", "System"), pool("user", "User")],
            "properties": {"networkProfile": {"networkPlugin": "azure", "podCidr": "10.244.0.0/16"}},
        });
        if i % 2 == 0 {
            c["maintenanceConfigurations"] = json!({
                "aksManagedAutoUpgradeSchedule": window,
                "aksManagedNodeOSUpgradeSchedule": window,
            });
        }
        managed.insert(name, c);
    }
    let mut locations = serde_json::Map::new();
    for r in REGIONS {
        let new_image = if r == "japaneast" {
            json!({"fullName": NEW_IMAGE, "availableFrom": image_reaches_japan_after})
        } else {
            json!(NEW_IMAGE)
        };
        locations.insert(
            r.to_string(),
            json!({
                "kubernetesVersions": [
                    {"version": "1.33", "patchVersions": ["1.33.2"], "isDefault": true},
                    {"version": "1.34", "patchVersions": ["1.34.1"]},
                ],
                "nodeImageVersions": [OLD_IMAGE, new_image],
            }),
        );
    }
    json!({
        "settings": {"operationSeconds": 60, "retryAfterSeconds": 1},
        "identity": {
            "tenantId": "72f988bf-0000-4000-8000-000000000047",
            "resourceManager": "self",
            "clients": [{"clientId": "waverun-app", "clientSecret": "s3cr3t-value-never-logged"}],
        },
        "locations": locations,
        "subscriptions": {SUB: {"resourceGroups": {"fleet-rg": {"managedClusters": managed}}}},
    })
}

/// `waverun.yaml`: the `aks` provider pointed at the fake, the 12 members by
/// `clusterResourceId`, each in the group of its region.
pub fn config_yaml(dir: &Path, fake: &FakeArm) -> PathBuf {
    let secret = dir.join("client-secret");
    std::fs::write(&secret, "s3cr3t-value-never-logged\n").unwrap();
    let members: Vec<Value> = clusters()
        .into_iter()
        .map(|(name, region)| {
            json!({"name": name, "provider": "azure", "clusterResourceId": cluster_id(&name),
                   "group": region})
        })
        .collect();
    let yaml = format!(
        r#"
providers:
  azure:
    type: aks
    auth:
      method: clientSecret
      tenantId: 72f988bf-0000-4000-8000-000000000047
      clientId: waverun-app
      clientSecretFile: client-secret
      authorityHost: {base}
      resourceManager: {base}
    pollIntervalSeconds: 1
members: {members}
observeIntervalSeconds: 2
"#,
        base = fake.base,
        members = serde_json::to_string(&members).unwrap(),
    );
    let file = dir.join("waverun.yaml");
    std::fs::write(&file, yaml).unwrap();
    file
}
