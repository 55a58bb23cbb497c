//! Shared by the webhook tests: the receiver (`tests/webhooks/receiver.py`, a child process on
//! loopback that verifies each delivery with PyPI's `standardwebhooks` and `cloudevents`).
#![allow(dead_code)] // each test file uses a part

use crate::http_support::{agent, eventually};
use crate::runtime_support::workspace;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The receiver, a child process; killed when dropped.
pub struct Receiver {
    child: Child,
    pub base: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> PathBuf {
    let py = workspace().join("target/webhook-receivers/bin/python");
    assert!(
        py.exists(),
        "{} is missing: these tests need the receivers' Python with standardwebhooks and \
         cloudevents (tests/run.sh makes it: python3 -m venv target/webhook-receivers && \
         target/webhook-receivers/bin/python -m pip install -r tests/webhooks/requirements.txt)",
        py.display()
    );
    py
}

pub fn receiver(dir: &Path, secrets: &[&str]) -> Receiver {
    let port_file = dir.join("receiver.port");
    let mut cmd = Command::new(python());
    cmd.arg(workspace().join("tests/webhooks/receiver.py"))
        .args(["--port", "0", "--max-seconds", "300", "--port-file"])
        .arg(&port_file)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(Stdio::null());
    for s in secrets {
        cmd.args(["--secret", s]);
    }
    let child = cmd.spawn().expect("the receiver starts");
    let mut r = Receiver {
        child,
        base: String::new(),
    };
    let port = eventually(30, "the receiver's port", || {
        std::fs::read_to_string(&port_file)
            .ok()?
            .trim()
            .parse::<u16>()
            .ok()
    });
    r.base = format!("http://127.0.0.1:{port}");
    r
}

/// Every delivery the receiver got, in order, with what it checked.
pub fn deliveries(r: &Receiver) -> Vec<Value> {
    let mut resp = agent()
        .get(format!("{}/_deliveries", r.base))
        .call()
        .expect("the receiver's log");
    serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
}

/// How many requests the receiver saw cut short (the sender gone before the whole body came):
/// no deliveries, only counted.
pub fn cut_short(r: &Receiver) -> u64 {
    let mut resp = agent()
        .get(format!("{}/_cutShort", r.base))
        .call()
        .expect("the receiver's count of requests cut short");
    let v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    v["cutShort"].as_u64().unwrap()
}

/// Sets the receiver's answer.
pub fn mode(r: &Receiver, mode: Value) {
    let resp = agent()
        .post(format!("{}/_mode", r.base))
        .send(mode.to_string())
        .expect("the receiver takes its mode");
    assert_eq!(resp.status().as_u16(), 204);
}

/// Adds a secret the receiver verifies with (index: how many it had).
pub fn add_secret(r: &Receiver, secret: &str) {
    let resp = agent()
        .post(format!("{}/_secrets", r.base))
        .send(serde_json::json!({ "secret": secret }).to_string())
        .expect("the receiver takes the secret");
    assert_eq!(resp.status().as_u16(), 204);
}
