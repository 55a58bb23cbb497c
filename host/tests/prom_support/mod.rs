//! Shared by the health-check tests: a real Prometheus (Debian's `/usr/bin/prometheus`) on a
//! loopback port, scraping an exporter in the test process whose values the test sets, and the
//! tiny HTTP/1.1 server both the exporter and the tests' receivers run on.
#![allow(dead_code)] // each test file uses a part

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where Debian's package installs Prometheus.
pub const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A request as a [`Loopback`] server read it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

/// An answer: status, content type, body.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    pub fn new(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain",
            body: body.into(),
        }
    }

    pub fn json(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: body.into(),
        }
    }
}

type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// A plain HTTP/1.1 server on `127.0.0.1:0`, one thread per connection, one request per
/// connection (`Connection: close`). It stops accepting when dropped.
pub struct Loopback {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Loopback {
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Loopback {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let handler = handler.clone();
                std::thread::spawn(move || serve_one(conn, &*handler));
            }
        });
        Loopback { addr, stop }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn serve_one(conn: TcpStream, handler: &Handler) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&conn);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return;
    };
    let (method, target) = (method.to_string(), target.to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let req = Request {
        method,
        target,
        headers,
        body,
    };
    let resp = handler(&req);
    let reason = match resp.status {
        200 => "OK",
        403 => "Forbidden",
        500 => "Internal Server Error",
        _ => "Status",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        resp.status,
        resp.content_type,
        resp.body.len()
    );
    let mut conn = conn;
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(resp.body.as_bytes());
    let _ = conn.flush();
}

/// `/metrics` in the Prometheus text format: `waverun_test_error_ratio{cluster="C"} V` for
/// every cluster the test set.
pub struct Exporter {
    pub server: Loopback,
    values: Arc<Mutex<BTreeMap<String, f64>>>,
}

impl Exporter {
    pub fn start() -> Exporter {
        let values: Arc<Mutex<BTreeMap<String, f64>>> = Arc::default();
        let shown = values.clone();
        let server = Loopback::start(move |_req| {
            let mut text = String::from(
                "# HELP waverun_test_error_ratio Errors per request, as the test sets them.\n\
                 # TYPE waverun_test_error_ratio gauge\n",
            );
            for (cluster, v) in shown.lock().unwrap().iter() {
                text.push_str(&format!(
                    "waverun_test_error_ratio{{cluster=\"{cluster}\"}} {v}\n"
                ));
            }
            let mut r = Response::new(200, text);
            r.content_type = "text/plain; version=0.0.4";
            r
        });
        Exporter { server, values }
    }

    /// Sets the value of `cluster`'s series.
    pub fn set(&self, cluster: &str, value: f64) {
        self.values
            .lock()
            .unwrap()
            .insert(cluster.to_string(), value);
    }
}

/// A Prometheus child process scraping one exporter every second, its data and log in a
/// temporary directory; killed when dropped.
pub struct Prometheus {
    pub url: String,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus on a free loopback port scraping `exporter` (job `waverun-test`).
    /// Fails the test, saying what to install, when Prometheus is missing.
    pub fn start(exporter: &Exporter) -> Prometheus {
        assert!(
            Path::new(PROMETHEUS).is_file(),
            "{PROMETHEUS} is missing: these tests need a real Prometheus \
             (run `apt-get install -y prometheus`; tests/run.sh does it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 scrape_configs:\n\
                 - job_name: waverun-test\n  \
                   scrape_interval: 1s\n  \
                   scrape_timeout: 1s\n  \
                   static_configs: [{{targets: [\"{}\"]}}]\n",
                exporter.server.addr
            ),
        )
        .unwrap();
        let port = free_port();
        let log = dir.path().join("prometheus.log");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus starts");
        Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            child,
            log,
            _dir: dir,
        }
    }

    /// The samples of an instant query, `(labels, value)`; `None` until Prometheus answers.
    pub fn query(&self, promql: &str) -> Option<Vec<(serde_json::Value, String)>> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        let v: serde_json::Value = agent
            .get(format!("{}/api/v1/query", self.url))
            .query("query", promql)
            .call()
            .ok()?
            .body_mut()
            .read_json()
            .ok()?;
        let result = v["data"]["result"].as_array()?;
        Some(
            result
                .iter()
                .map(|s| {
                    (
                        s["metric"].clone(),
                        s["value"][1].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect(),
        )
    }

    /// Waits (at most `secs`) until `promql` returns a sample; fails the test with
    /// Prometheus's log otherwise, or when it exited.
    pub fn wait_for(&mut self, promql: &str, secs: u64) {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "prometheus exited ({status}): {}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            if self.query(promql).is_some_and(|s| !s.is_empty()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "prometheus had no sample of {promql} within {secs} s: {}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on now (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
