//! The daemon on the network (issue 20): HTTPS end to end with a test certificate authority
//! (the CLI trusts it with `--ca-file`, refuses the server without it, and follows a reloaded
//! certificate after SIGHUP); half-open connections are closed at the header deadline, a peer
//! over its cap cannot lock out another, a daemon out of file descriptors recovers, and a stop
//! with connections held open ends within its grace. The real binary, on loopback only.

mod http_support;
mod runtime_support;
mod tls_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tls_support::test_ca;

const TOKEN: &str = "a-test-token-that-is-long-enough-0123456789";

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_waverun")
}

/// Makes `NAME-server.pem` and `.key` the daemon's `tls.pem` and `tls.key`, each replaced in
/// one rename (as a certificate manager renews them).
fn use_pair(dir: &Path, name: &str) {
    for ext in ["key", "pem"] {
        let staged = dir.join(format!("tls.{ext}.new"));
        std::fs::copy(dir.join(format!("{name}-server.{ext}")), &staged).unwrap();
        std::fs::rename(&staged, dir.join(format!("tls.{ext}"))).unwrap();
    }
}

/// A daemon of `config` (YAML text, written beside its data), its stderr in `log`.
struct Daemon {
    child: Child,
    /// `https://ADDR` or `http://ADDR`.
    url: String,
    log: PathBuf,
}

impl Daemon {
    fn start(dir: &Path, config: &str, nofile: Option<u64>) -> Daemon {
        let path = dir.join("waverun.yaml");
        std::fs::write(&path, config).unwrap();
        let log = dir.join("daemon.log");
        let mut cmd = Command::new(bin());
        cmd.args(["serve", "--config", path.to_str().unwrap()])
            .env("WAVERUN_CACHE_DIR", runtime_support::shared_cache())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(n) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit(2) in the child before exec; it touches no memory of ours.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.split(" on ").nth(1) {
                    if rest.starts_with("http") {
                        let _ = tx.send(rest.split_whitespace().next().unwrap().to_string());
                    }
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no address: {}", std::fs::read_to_string(&log).unwrap()));
        Daemon { child, url, log }
    }

    fn addr(&self) -> String {
        self.url.split("://").nth(1).unwrap().to_string()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM: whether it exited cleanly within `secs`.
    fn stop_within(mut self, secs: u64) -> bool {
        // SAFETY: kill(2) on the child this test started.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `waverun ARGS` (at most 60 s): (exit code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(bin())
        .args(args)
        .env_remove("WAVERUN_CA_FILE")
        .env_remove("WAVERUN_SERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "waverun {args:?} hangs");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn token_sha() -> String {
    waverun_host::api::token_hash(TOKEN)
}

#[test]
fn the_cli_talks_to_the_daemon_over_https_with_a_test_ca_and_follows_a_reloaded_certificate() {
    let dir = tempfile::tempdir().unwrap();
    test_ca(dir.path(), "one");
    test_ca(dir.path(), "two");
    let config = format!(
        "listen: 127.0.0.1:0\ndataDir: data\nfleetFile: {}\ntls: {{certFile: tls.pem, keyFile: tls.key}}\n\
         tokens: [{{name: ci, role: admin, sha256: {}}}]\n",
        runtime_support::workspace()
            .join("tests/scenarios/gates-and-wait.yaml")
            .display(),
        token_sha()
    );
    use_pair(dir.path(), "one");
    let d = Daemon::start(dir.path(), &config, None);
    assert!(d.url.starts_with("https://127.0.0.1:"), "{}", d.url);
    let ca = |name: &str| dir.path().join(format!("{name}-ca.pem"));
    let list = |ca_file: Option<&Path>| {
        let mut args = vec![
            "member".to_string(),
            "list".to_string(),
            "--server".to_string(),
            d.url.clone(),
            "--token".to_string(),
            TOKEN.to_string(),
            "-o".to_string(),
            "json".to_string(),
        ];
        if let Some(f) = ca_file {
            args.push("--ca-file".to_string());
            args.push(f.to_str().unwrap().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&args)
    };
    let (code, out, err) = list(Some(&ca("one")));
    assert_eq!(code, 0, "{err}");
    let members: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(!members.as_array().unwrap().is_empty(), "{out}");
    // Without the test CA (the system's bundle does not have it) the server is not trusted.
    let (code, _, err) = list(None);
    assert_ne!(code, 0);
    assert!(
        err.to_lowercase().contains("certificate") || err.contains("UnknownIssuer"),
        "{err}"
    );
    // Plain HTTP to the TLS port gets no answer.
    let mut s = TcpStream::connect(d.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    assert!(!String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // A renewed certificate (another CA) is taken on SIGHUP without a restart.
    use_pair(dir.path(), "two");
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(d.child.id() as i32, libc::SIGHUP);
    }
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _, _) = list(Some(&ca("two")));
        if code == 0 {
            break;
        }
        assert!(
            Instant::now() < end,
            "the new certificate was not taken: {}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_ne!(list(Some(&ca("one"))).0, 0, "the old certificate is gone");
    assert!(d.log().contains("TLS certificate reloaded"), "{}", d.log());
    // A broken renewal is refused and the pair in use kept.
    std::fs::write(dir.path().join("tls.pem"), "not a certificate").unwrap();
    // SAFETY: as above.
    unsafe {
        libc::kill(d.child.id() as i32, libc::SIGHUP);
    }
    let end = Instant::now() + Duration::from_secs(30);
    while !d.log().contains("the one in use is kept") {
        assert!(Instant::now() < end, "{}", d.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        list(Some(&ca("two"))).0,
        0,
        "still served with the pair in use"
    );
    assert!(d.stop_within(30));
}

#[test]
fn a_daemon_with_a_certificate_it_cannot_use_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    test_ca(dir.path(), "one");
    test_ca(dir.path(), "two");
    // The key of another certificate.
    let config = "listen: 127.0.0.1:0\ndataDir: data\ntls: {certFile: one-server.pem, keyFile: two-server.key}\n";
    std::fs::write(dir.path().join("waverun.yaml"), config).unwrap();
    let (code, _, err) = cli(&[
        "serve",
        "--config",
        dir.path().join("waverun.yaml").to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("does not belong to the certificate"), "{err}");
}

/// Opens `n` connections from `local` that send half a request line and never finish it.
fn half_open(addr: &str, from: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .filter_map(|_| {
            let sock = socket2_connect(from, addr)?;
            let mut s = sock;
            let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHo");
            Some(s)
        })
        .collect()
}

/// An IPv4 socket address as the C calls take it.
fn sockaddr_in(ip: std::net::Ipv4Addr, port: u16) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value of it.
    let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    a.sin_family = libc::AF_INET as u16;
    a.sin_port = port.to_be();
    a.sin_addr.s_addr = u32::from(ip).to_be();
    a
}

/// A TCP connection to `addr` bound to the loopback address `from` first.
fn socket2_connect(from: &str, addr: &str) -> Option<TcpStream> {
    use std::os::fd::FromRawFd;
    let to: std::net::SocketAddrV4 = addr.parse().ok()?;
    let from: std::net::Ipv4Addr = from.parse().ok()?;
    // SAFETY: plain socket(2)/bind(2)/connect(2) on a descriptor owned by the TcpStream made
    // from it; the sockaddr structures live on this stack frame for the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd < 0 {
            return None;
        }
        let stream = TcpStream::from_raw_fd(fd);
        let (local, remote) = (sockaddr_in(from, 0), sockaddr_in(*to.ip(), to.port()));
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        if libc::bind(fd, &local as *const _ as *const libc::sockaddr, len) != 0
            || libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len) != 0
        {
            return None;
        }
        Some(stream)
    }
}

/// Whether the server closes `s` (EOF or reset, after whatever it sends) within `wait`.
fn closed_by_server(s: &mut TcpStream, wait: Duration) -> bool {
    let end = Instant::now() + wait;
    let mut buf = [0u8; 256];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn healthz(addr: &str, from: &str) -> Option<String> {
    let mut s = socket2_connect(from, addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    Some(out)
}

#[test]
fn half_open_connections_are_closed_at_the_deadline_and_cannot_lock_another_peer_out() {
    let dir = tempfile::tempdir().unwrap();
    let config = "listen: 127.0.0.1:0\ndataDir: data\n\
                  limits: {connections: 300, connectionsPerPeer: 100, headerReadSeconds: 2, shutdownGraceSeconds: 3}\n";
    let d = Daemon::start(dir.path(), config, None);
    let addr = d.addr();
    // 100 half-open connections from 127.0.0.1: its cap.
    let mut held = half_open(&addr, "127.0.0.1", 100);
    assert_eq!(held.len(), 100);
    // The 101st from it is closed at once, and the refusal is logged.
    let mut over = socket2_connect("127.0.0.1", &addr).unwrap();
    assert!(closed_by_server(&mut over, Duration::from_secs(5)));
    let end = Instant::now() + Duration::from_secs(10);
    while !d.log().contains("connection refused") {
        assert!(Instant::now() < end, "{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Another peer is served meanwhile.
    let answer = healthz(&addr, "127.0.0.2").expect("127.0.0.2 connects");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    // At the header deadline every half-open connection is closed by the server.
    for s in &mut held {
        assert!(closed_by_server(s, Duration::from_secs(10)));
    }
    let answer = healthz(&addr, "127.0.0.1").unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    // A stop with connections held open (half-open, and an idle keep-alive one) ends within
    // the grace, not when the clients let go.
    let _more = half_open(&addr, "127.0.0.3", 50);
    assert!(d.stop_within(20), "the stop waited for the clients");
}

#[test]
fn a_daemon_out_of_file_descriptors_recovers_when_half_open_connections_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let config = "listen: 127.0.0.1:0\ndataDir: data\n\
                  limits: {connections: 5000, connectionsPerPeer: 5000, headerReadSeconds: 2}\n";
    // 256 descriptors: the store, the engine and the runtime take some; 300 sockets exhaust it.
    let d = Daemon::start(dir.path(), config, Some(256));
    let addr = d.addr();
    let mut held = half_open(&addr, "127.0.0.1", 300);
    let end = Instant::now() + Duration::from_secs(10);
    while !d.log().contains("accepting a connection failed") {
        assert!(
            Instant::now() < end,
            "descriptors not exhausted: {}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Once the half-open ones time out, the daemon serves again.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(a) = healthz(&addr, "127.0.0.2") {
            if a.starts_with("HTTP/1.1 200") {
                break;
            }
        }
        assert!(Instant::now() < end, "never served again: {}", d.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    for s in held.iter_mut().take(20) {
        let _ = closed_by_server(s, Duration::from_secs(10));
    }
    drop(held);
    assert!(d.stop_within(20));
}
