//! The daemon safe to expose (issue 20): a caller's token and role are checked before its body
//! is read; every mutation, refused or accepted, is its own audit row whatever `x-request-id`
//! it reuses; links come from the configured public URL, never the `Host` header; labels per
//! member are bounded; one daemon per data directory; a damaged, empty or foreign database is
//! refused at start with what is wrong and how to restore, and `waverun store
//! backup|restore|check` restore it. In-process daemons and the real binary, on loopback.

mod daemon_support;
mod http_support;
mod process_support;
mod runtime_support;

use daemon_support::{scenario, Daemon, FLEET_FILE};
use process_support::Life;
use runtime_support::workspace;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use waverun_host::api::Role;

const TOKENS: &[(&str, Role, &str)] = &[
    ("vera", Role::Viewer, "viewer-token-0123456789"),
    ("otto", Role::Operator, "operator-token-0123456789"),
    ("anna", Role::Approver, "approver-token-0123456789"),
    ("adam", Role::Admin, "admin-token-0123456789"),
];

fn token(role: Role) -> &'static str {
    TOKENS.iter().find(|t| t.1 == role).unwrap().2
}

/// Sends `head` (a request's line and headers, no body) on a raw connection and returns what
/// the server answers within `wait` (empty when nothing came).
fn raw_head(addr: &str, head: &str, wait: Duration) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    match s.read(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).to_string(),
        Err(_) => String::new(),
    }
}

#[test]
fn a_body_is_not_read_before_the_token_and_the_role_are_checked() {
    let d = Daemon::start(TOKENS);
    let addr = d.root.trim_start_matches("http://").to_string();
    // 4 MB announced, none sent: the answer comes at once, without waiting for the body.
    let put = |auth: &str| {
        format!(
            "PUT /api/v1/fleets/default/updateStrategies/big HTTP/1.1\r\nHost: {addr}\r\n\
             Content-Type: application/json\r\nContent-Length: 4000000\r\n{auth}\r\n"
        )
    };
    let answer = raw_head(&addr, &put(""), Duration::from_secs(10));
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer:?}");
    let viewer = format!("Authorization: Bearer {}\r\n", token(Role::Viewer));
    let answer = raw_head(&addr, &put(&viewer), Duration::from_secs(10));
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer:?}");
    // An operator may: the daemon waits for the body (no answer while it does not come).
    let operator = format!("Authorization: Bearer {}\r\n", token(Role::Operator));
    let answer = raw_head(&addr, &put(&operator), Duration::from_millis(500));
    assert_eq!(answer, "", "the body is awaited, not refused");
    // Both refusals are audited, as unauthenticated and as the viewer.
    let audit = d.get("/audit", Some(token(Role::Admin)));
    let rows = audit.body["value"].as_array().unwrap();
    let outcomes: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["who"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert!(
        outcomes.contains(&("unauthenticated", "Unauthorized")),
        "{outcomes:?}"
    );
    assert!(outcomes.contains(&("vera", "Forbidden")), "{outcomes:?}");
}

#[test]
fn every_mutating_route_asks_no_more_of_a_role_than_its_handler_does() {
    let d = Daemon::start(TOKENS);
    // (method, path, the roles the handler lets through)
    use Role::*;
    let routes: &[(&str, &str, &[Role])] = &[
        ("PUT", "/members/m", &[Operator, Admin]),
        ("PATCH", "/members/m", &[Operator, Admin]),
        ("DELETE", "/members/m", &[Operator, Admin]),
        ("PUT", "/updateStrategies/s", &[Operator, Admin]),
        ("DELETE", "/updateStrategies/s", &[Operator, Admin]),
        ("PUT", "/updateRuns/r", &[Operator, Admin]),
        ("DELETE", "/updateRuns/r", &[Operator, Admin]),
        ("POST", "/updateRuns/r/start", &[Operator, Admin]),
        ("POST", "/updateRuns/r/stop", &[Operator, Admin]),
        ("POST", "/updateRuns/r/skip", &[Operator, Admin]),
        ("POST", "/updateRuns/r/retry", &[Operator, Admin]),
        ("PUT", "/autoUpgradeProfiles/p", &[Admin]),
        ("DELETE", "/autoUpgradeProfiles/p", &[Admin]),
        ("POST", "/autoUpgradeProfiles/p/generateUpdateRun", &[Admin]),
        ("PUT", "/freezes", &[Admin]),
        ("PATCH", "/gates/g", &[Approver, Admin]),
        ("POST", "/gates/g/approve", &[Approver, Admin]),
        ("POST", "/simulate", &[Viewer, Operator, Approver, Admin]),
    ];
    for (method, path, allowed) in routes {
        for (name, role, tok) in TOKENS {
            // A body that is refused after the role check (or a resource that is not there).
            let r = d.call(method, path, Some(tok), &[], Some("{\"nope\": 1}"));
            if allowed.contains(role) {
                assert_ne!(r.status, 403, "{method} {path} as {name}: {}", r.body);
            } else {
                assert_eq!(r.status, 403, "{method} {path} as {name}: {}", r.body);
            }
        }
    }
}

#[test]
fn a_reused_request_id_still_gives_every_mutation_its_own_audit_row() {
    let d = Daemon::start(TOKENS);
    let op = token(Role::Operator);
    let id = [("x-request-id", "same-id-every-time")];
    for _ in 0..15 {
        let r = d.call("PUT", "/updateStrategies/s", Some(op), &id, Some("{}"));
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.header("x-request-id"), Some("same-id-every-time"));
    }
    let body = json!({ "properties": { "strategy": scenario().strategy } }).to_string();
    let r = d.call("PUT", "/updateStrategies/s", Some(op), &id, Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    for _ in 0..3 {
        // Refused in the engine job (a failed precondition) under the same id.
        let r = d.call(
            "PUT",
            "/updateStrategies/s",
            Some(op),
            &[
                ("x-request-id", "same-id-every-time"),
                ("if-match", "\"x\""),
            ],
            Some(&body),
        );
        assert_eq!(r.status, 412, "{}", r.body);
    }
    // A client cannot pass a refusal off as audited with the daemon's internal key header.
    let r = d.call(
        "PUT",
        "/updateStrategies/s",
        Some(op),
        &[
            ("x-request-id", "same-id-every-time"),
            ("x-waverun-request-key", "0-0"),
        ],
        Some("{}"),
    );
    assert_eq!(r.status, 400);
    let audit = d.get("/audit?$top=1000", Some(op));
    let rows: Vec<&Value> = audit.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["requestId"] == "same-id-every-time")
        .collect();
    let outcomes: Vec<&str> = rows
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(rows.len(), 20, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| **o == "ok").count(), 1);
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == "PreconditionFailed")
            .count(),
        3
    );
}

#[test]
fn next_links_come_from_the_public_url_never_from_the_host_header() {
    let fleet = workspace().join(FLEET_FILE);
    let evil = [("host", "evil.example:8080")];
    let body = json!({ "properties": { "strategy": scenario().strategy } }).to_string();
    let two = |d: &Daemon| {
        for name in ["a", "b"] {
            let path = format!("/updateStrategies/{name}");
            assert_eq!(d.call("PUT", &path, None, &[], Some(&body)).status, 201);
        }
    };
    let d = Daemon::start(&[]);
    two(&d);
    for path in ["/updateStrategies?$top=1", "/audit?$top=1"] {
        let r = d.call("GET", path, None, &evil, None);
        let link = r.body["nextLink"].as_str().unwrap_or_default().to_string();
        assert!(
            link.starts_with("/api/v1/fleets/default/"),
            "{path}: {link}"
        );
    }
    let d = Daemon::start_with(&fleet, 200_000.0, &[], |c| {
        c.public_url = Some("https://waverun.example.com".to_string());
    });
    two(&d);
    for path in ["/updateStrategies?$top=1", "/audit?$top=1"] {
        let r = d.call("GET", path, None, &evil, None);
        let link = r.body["nextLink"].as_str().unwrap_or_default().to_string();
        assert!(
            link.starts_with("https://waverun.example.com/api/v1/fleets/default/"),
            "{path}: {link}"
        );
    }
}

#[test]
fn a_member_with_too_many_labels_is_refused_naming_the_field() {
    let d = Daemon::start(&[]);
    let labels: serde_json::Map<String, Value> =
        (0..101).map(|i| (format!("k{i}"), json!("v"))).collect();
    let body = json!({ "properties": { "provider": "simulated", "clusterRef": "dev-1", "labels": labels } });
    let r = d.call("PUT", "/members/many", None, &[], Some(&body.to_string()));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["target"], "properties.labels", "{}", r.body);
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("101 labels; at most 100"),
        "{}",
        r.body
    );
}

// --- the real binary: the data directory's lock, damage at start, backup and restore

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_waverun")
}

/// Runs `waverun ARGS` to its end (at most 120 s): (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(bin())
        .args(args)
        .env("WAVERUN_CACHE_DIR", runtime_support::shared_cache())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("waverun {args:?} did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code().unwrap_or(-1),
        std::fs::read_to_string(out).unwrap(),
        std::fs::read_to_string(err).unwrap(),
    )
}

/// A daemon on `data` (tokenless, on loopback).
fn serve(data: &Path, log: &Path) -> Life {
    let life = Life::start(&["--data-dir", data.to_str().unwrap()], &[], log);
    assert!(life.ready(60), "{}", std::fs::read_to_string(log).unwrap());
    life
}

fn strategies(life: &Life) -> usize {
    let mut n = 0;
    let mut path = "/updateStrategies?$top=1000".to_string();
    loop {
        let r = life.api.get(&path, None);
        assert_eq!(r.status, 200, "{}", r.body);
        n += r.body["value"].as_array().unwrap().len();
        match r.body["nextLink"].as_str() {
            Some(next) => path = format!("{}{next}", life.api.base.split("/api/").next().unwrap()),
            None => return n,
        }
    }
}

/// A data directory whose database holds `n` strategies, closed cleanly.
fn populated(dir: &Path, n: usize) -> PathBuf {
    let data = dir.join("data");
    let life = serve(&data, &dir.join("populate.log"));
    let body = json!({ "properties": { "strategy": scenario().strategy } }).to_string();
    for i in 0..n {
        let r = life.api.call(
            "PUT",
            &format!("/updateStrategies/s{i:04}"),
            None,
            &[],
            Some(&body),
        );
        assert_eq!(r.status, 201, "{}", r.body);
    }
    assert!(life.stop(), "a clean stop");
    data
}

/// Starting on `data` is refused: the start's stderr.
fn refused_start(data: &Path) -> String {
    let (code, _, err) = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "the daemon started: {err}");
    err
}

#[test]
fn a_second_daemon_on_the_same_data_directory_exits_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let first = serve(&data, &dir.path().join("first.log"));
    let err = refused_start(&data);
    assert!(err.contains("is in use by another process"), "{err}");
    assert!(
        err.contains(&format!("pid {}", first.child.id())),
        "names the holder: {err}"
    );
    // A restore may not replace the file under it either.
    let backup = dir.path().join("b.db");
    let (code, _, err) = run(&[
        "store",
        "backup",
        "--data-dir",
        data.to_str().unwrap(),
        backup.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "a backup runs beside the daemon: {err}");
    let (code, _, err) = run(&[
        "store",
        "restore",
        "--data-dir",
        data.to_str().unwrap(),
        backup.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is in use by another process"), "{err}");
    assert!(first.stop());
    // Once it is gone (even killed: the kernel lets go of the lock), the next one starts.
    let again = serve(&data, &dir.path().join("again.log"));
    again.kill();
    let after_kill = serve(&data, &dir.path().join("after-kill.log"));
    assert!(after_kill.stop());
}

/// Each kind of damage to a cleanly stopped database is refused at start with what is wrong
/// and how to restore; `store check` says so too; `store restore` of a backup brings back every
/// strategy, and the replaced file is kept.
fn damaged_then_restored(damage: impl FnOnce(&Path), expect: &str) {
    const N: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let data = populated(dir.path(), N);
    let backup = dir.path().join("backup.db");
    let (code, out, err) = run(&[
        "store",
        "backup",
        "--data-dir",
        data.to_str().unwrap(),
        backup.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("integrity_check ok"), "{out}");
    let db = data.join("waverun.db");
    damage(&db);
    let err = refused_start(&data);
    assert!(err.contains(expect), "{err}");
    assert!(err.contains("waverun store restore --data-dir"), "{err}");
    if db.metadata().map(|m| m.len() > 0).unwrap_or(false) {
        let (code, _, err) = run(&["store", "check", "--data-dir", data.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("waverun store restore"), "{err}");
    }
    // Refused again: the refusal wrote nothing.
    let again = refused_start(&data);
    assert!(again.contains(expect), "{again}");
    let (code, out, err) = run(&[
        "store",
        "restore",
        "--data-dir",
        data.to_str().unwrap(),
        backup.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("kept as"), "{out}");
    let kept = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("waverun.db.replaced-")
        });
    assert!(kept, "the replaced file is kept");
    let (code, out, err) = run(&["store", "check", "--data-dir", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let life = serve(&data, &dir.path().join("restored.log"));
    assert_eq!(strategies(&life), N);
    assert!(life.stop());
}

fn page_size() -> u64 {
    4096
}

#[test]
fn flipped_bytes_in_the_middle_of_the_database_are_refused_and_restorable() {
    damaged_then_restored(
        |db| {
            let mut bytes = std::fs::read(db).unwrap();
            // The first 64 bytes of the page in the middle of the file: its header and first
            // cell pointers.
            let pages = bytes.len() as u64 / page_size();
            let at = (pages / 2 * page_size()) as usize;
            for b in &mut bytes[at..at + 64] {
                *b ^= 0xA5;
            }
            std::fs::write(db, bytes).unwrap();
        },
        "the database is damaged",
    );
}

#[test]
fn zeroed_pages_are_refused_and_restorable() {
    damaged_then_restored(
        |db| {
            let mut bytes = std::fs::read(db).unwrap();
            let pages = bytes.len() as u64 / page_size();
            let at = ((pages / 3) * page_size()) as usize;
            bytes[at..at + 16 * 1024].fill(0);
            std::fs::write(db, bytes).unwrap();
        },
        "the database is damaged",
    );
}

#[test]
fn an_emptied_database_file_is_never_taken_for_a_new_fleet() {
    damaged_then_restored(
        |db| {
            std::fs::write(db, b"").unwrap();
        },
        "exists but is empty (0 bytes)",
    );
}

#[test]
fn a_foreign_sqlite_file_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let db = data.join("waverun.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT); INSERT INTO accounts VALUES (1, 'x');")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let err = refused_start(&data);
    assert!(
        err.contains("not waverun's") && err.contains("accounts"),
        "{err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "left as it was");
    let c = rusqlite::Connection::open(&db).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "its journal mode was not changed");
}

#[test]
fn live_streams_are_capped_per_token_and_a_closed_one_gives_its_place_back() {
    let fleet = workspace().join(FLEET_FILE);
    let d = Daemon::start_with(&fleet, 200_000.0, TOKENS, |c| c.stream_limits = (2, 100));
    let addr = d.root.trim_start_matches("http://").to_string();
    let open = |token: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET /api/v1/fleets/default/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
        .unwrap();
        let mut buf = vec![0u8; 2048];
        let n = s.read(&mut buf).unwrap();
        (s, String::from_utf8_lossy(&buf[..n]).to_string())
    };
    let viewer = token(Role::Viewer);
    let (first, a) = open(viewer);
    let (_second, b) = open(viewer);
    assert!(
        a.starts_with("HTTP/1.1 200") && b.starts_with("HTTP/1.1 200"),
        "{a}{b}"
    );
    let (_, c) = open(viewer);
    assert!(c.starts_with("HTTP/1.1 429"), "{c}");
    assert!(c.contains("streamsPerToken"), "{c}");
    // Another token has its own places.
    let (_other, o) = open(token(Role::Operator));
    assert!(o.starts_with("HTTP/1.1 200"), "{o}");
    drop(first);
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let (_s, again) = open(viewer);
        if again.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            Instant::now() < end,
            "the closed stream's place never came back: {again}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
