//! The exec provider's conformance list (`shared/spec/exec-provider.md`), against real child
//! processes: the scripts in `tests/exec/` — a well-behaved fake cluster, and providers that
//! hang, crash, print garbage, exit 0 with nothing, echo a secret to stderr, answer by exit code
//! only, speak another protocol version, or leave a process holding their output open. The daemon's side of the protocol (retry classes,
//! `PreconditionFailed`, uncertain starts) runs the real engine thread over the fake cluster.

mod runtime_support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use waverun_core::state::MemberStatus;
use waverun_core::{Command, PoolImage, State, UpgradeType};
use waverun_host::daemon::{Daemon, FleetClock, FleetEngine, Providers};
use waverun_host::providers::{
    ClusterTarget, ExecConfig, ExecProvider, ExecTimeouts, OperationPhase, Provider,
    ProviderErrorCode, SecretSource, UpgradeRequest, API_VERSION,
};
use waverun_host::runtime::InstanceConfig;
use waverun_host::store::SqliteStore;

fn script(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/exec")
        .join(name);
    p.canonicalize().unwrap().to_string_lossy().into_owned()
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A provider running `command`, with the fake cluster's state in this fixture.
    fn config(&self, command: &str) -> ExecConfig {
        let mut env = BTreeMap::new();
        env.insert(
            "FAKE_CLUSTER_STATE".to_string(),
            self.path("clusters.json").to_string_lossy().into_owned(),
        );
        env.insert(
            "HANG_PIDS".to_string(),
            self.path("hang.pids").to_string_lossy().into_owned(),
        );
        ExecConfig {
            name: "fake".to_string(),
            command: vec![script(command)],
            env,
            pass_env: Vec::new(),
            secret_env: BTreeMap::new(),
            timeouts: ExecTimeouts {
                capabilities: Duration::from_secs(20),
                describe: Duration::from_secs(20),
                start_upgrade: Duration::from_secs(20),
                get_operation: Duration::from_secs(20),
                grace: Duration::from_millis(300),
            },
            max_stdout: 64 * 1024,
            state_dir: self.path("exec-state"),
        }
    }

    fn fake(&self) -> ExecProvider {
        ExecProvider::start(self.config("fake-cluster.py")).unwrap()
    }

    /// The fake cluster with `vars` set, logging every request.
    fn fake_config(&self, vars: &[(&str, &str)]) -> ExecConfig {
        let mut c = self.config("fake-cluster.py");
        c.env.insert(
            "FAKE_REQUEST_LOG".to_string(),
            self.path("requests.jsonl").to_string_lossy().into_owned(),
        );
        for (k, v) in vars {
            c.env.insert(k.to_string(), v.to_string());
        }
        c
    }

    /// The requests the fake cluster logged (`FAKE_REQUEST_LOG`), in order.
    fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path("requests.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The logged requests' operations (`capabilities` left out), in order.
    fn operations(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| r["operation"].as_str().unwrap().to_string())
            .filter(|o| o != "capabilities")
            .collect()
    }

    fn state(&self) -> Value {
        let text = std::fs::read_to_string(self.path("clusters.json")).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
}

fn cluster(id: &str) -> ClusterTarget {
    ClusterTarget {
        member: id.to_string(),
        cluster_ref: Some(r#"{"project":"p1","name":"c1"}"#.to_string()),
        region: Some("westeurope".to_string()),
    }
}

fn to_134(key: &str) -> UpgradeRequest {
    UpgradeRequest {
        idempotency_key: key.to_string(),
        upgrade_type: UpgradeType::Full,
        control_plane: Some("1.34.1".to_string()),
        node_images: vec![PoolImage {
            node_pool: "system".to_string(),
            image_version: "AKSUbuntu-2204-202612.01.0".to_string(),
        }],
    }
}

#[test]
fn capabilities_negotiates_the_protocol_version() {
    let f = Fixture::new();
    assert_eq!(f.fake().name(), "fake");
    let refused = ExecProvider::start(f.config("old-version.sh"))
        .err()
        .expect("a provider without a common version is refused");
    assert!(
        refused.contains("exec.waverun.dev/v2") && refused.contains("exec.waverun.dev/v1alpha1"),
        "{refused}"
    );
}

#[test]
fn a_command_that_cannot_run_is_refused_at_start_with_its_name() {
    let f = Fixture::new();
    let mut c = f.config("fake-cluster.py");
    c.command = vec!["/nonexistent/adapter".to_string()];
    let e = ExecProvider::start(c).err().unwrap();
    assert!(e.contains("/nonexistent/adapter"), "{e}");
}

#[test]
fn describe_twice_is_stable_and_changes_nothing() {
    let f = Fixture::new();
    let p = f.fake();
    let first = p.describe(&cluster("a")).unwrap();
    let state = f.state();
    let second = p.describe(&cluster("a")).unwrap();
    assert_eq!(first, second);
    assert_eq!(f.state(), state, "describe wrote nothing");
    assert_eq!(first.kubernetes_version, "1.33.2");
    assert_eq!(first.region, "westeurope");
    assert_eq!(first.node_pools[0].name, "system");
    assert!(!first.busy);
}

#[test]
fn start_upgrade_twice_with_one_key_is_one_operation_and_it_finishes() {
    let f = Fixture::new();
    let p = f.fake();
    let a = p.start_upgrade(&cluster("a"), &to_134("run/a")).unwrap();
    let b = p.start_upgrade(&cluster("a"), &to_134("run/a")).unwrap();
    assert_eq!(a.operation_id, b.operation_id);
    assert_eq!(f.state()["operations"].as_object().unwrap().len(), 1);
    assert!(!a.already_at_target);
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let r = p.get_operation(&cluster("a"), "run/a").unwrap();
        if r.phase.is_final() {
            assert_eq!(r.phase, OperationPhase::Succeeded);
            break;
        }
        assert!(Instant::now() < end, "the fake upgrade never finished");
        std::thread::sleep(Duration::from_millis(100));
    }
    let d = p.describe(&cluster("a")).unwrap();
    assert_eq!(d.kubernetes_version, "1.34.1");
    assert!(d.runs(&to_134("x").node_images[0]));
    let again = p.start_upgrade(&cluster("a"), &to_134("run2/a")).unwrap();
    assert!(again.already_at_target);
    assert_eq!(again.phase, OperationPhase::Succeeded);
}

#[test]
fn a_busy_cluster_answers_operation_in_progress_retryable() {
    let f = Fixture::new();
    let mut c = f.config("fake-cluster.py");
    c.env
        .insert("FAKE_UPGRADE_SECONDS".to_string(), "120".to_string());
    let p = ExecProvider::start(c).unwrap();
    p.start_upgrade(&cluster("a"), &to_134("one/a")).unwrap();
    let e = p
        .start_upgrade(&cluster("a"), &to_134("two/a"))
        .unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::OperationInProgress);
    assert!(e.retryable && !e.uncertain, "{e:?}");
    assert!(p.describe(&cluster("a")).unwrap().busy);
}

#[test]
fn an_unknown_operation_is_not_found() {
    let f = Fixture::new();
    let e = f
        .fake()
        .get_operation(&cluster("a"), "never/started")
        .unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::NotFound);
    assert!(!e.retryable);
}

fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie waiting for a reaper is dead too.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_start_past_its_deadline_is_killed_with_its_children_and_is_uncertain() {
    let f = Fixture::new();
    let mut c = f.config("hang.sh");
    c.timeouts.start_upgrade = Duration::from_millis(700);
    let p = ExecProvider::start(c).unwrap();
    let e = p
        .start_upgrade(&cluster("a"), &to_134("run/a"))
        .unwrap_err();
    assert!(e.uncertain && e.retryable, "{e:?}");
    assert!(e.message.contains("no answer within"), "{}", e.message);
    let pids = std::fs::read_to_string(f.path("hang.pids")).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    for pid in pids.split_whitespace() {
        while !gone(pid) {
            assert!(Instant::now() < end, "process {pid} outlived the deadline");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_read_past_its_deadline_is_a_retryable_unavailable() {
    let f = Fixture::new();
    let mut c = f.config("hang.sh");
    c.timeouts.describe = Duration::from_millis(500);
    let p = ExecProvider::start(c).unwrap();
    let e = p.describe(&cluster("a")).unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::Unavailable);
    assert!(e.retryable && !e.uncertain, "{e:?}");
}

#[test]
fn a_crash_mid_start_is_uncertain_never_a_failure() {
    let f = Fixture::new();
    let p = ExecProvider::start(f.config("crash.sh")).unwrap();
    let e = p
        .start_upgrade(&cluster("a"), &to_134("run/a"))
        .unwrap_err();
    assert!(e.uncertain, "{e:?}");
    assert!(e.message.contains("signal 9"), "{}", e.message);
}

#[test]
fn garbage_on_stdout_is_a_protocol_error() {
    let f = Fixture::new();
    let p = ExecProvider::start(f.config("garbage.sh")).unwrap();
    let e = p.describe(&cluster("a")).unwrap_err();
    assert!(e.message.contains("protocol error"), "{}", e.message);
    assert!(e.message.contains("not one JSON object"), "{}", e.message);
    let s = p
        .start_upgrade(&cluster("a"), &to_134("run/a"))
        .unwrap_err();
    assert!(s.uncertain, "{s:?}");
}

#[test]
fn empty_stdout_with_exit_0_is_a_protocol_error() {
    let f = Fixture::new();
    let p = ExecProvider::start(f.config("empty.sh")).unwrap();
    let e = p.get_operation(&cluster("a"), "run/a").unwrap_err();
    assert!(e.message.contains("stdout is empty"), "{}", e.message);
}

#[test]
fn oversized_stdout_is_a_protocol_error() {
    let f = Fixture::new();
    let mut c = f.config("fake-cluster.py");
    c.max_stdout = 64;
    // `capabilities` itself is over 64 bytes: the provider is refused at start.
    let e = ExecProvider::start(c).err().unwrap();
    assert!(e.contains("stdout is over 64 bytes"), "{e}");
}

/// Collects what the code under test logs.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_secret_printed_on_stderr_is_redacted_from_logs_and_errors() {
    let f = Fixture::new();
    let secret = "s3cr3t-platform-token-8812";
    std::fs::write(f.path("token"), format!("{secret}\n")).unwrap();
    let mut c = f.config("secret-stderr.sh");
    c.secret_env.insert(
        "PLATFORM_TOKEN".to_string(),
        SecretSource::FromFile(f.path("token")),
    );
    let p = ExecProvider::start(c).unwrap();
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let e = tracing::subscriber::with_default(subscriber, || {
        p.start_upgrade(&cluster("a"), &to_134("run/a"))
            .unwrap_err()
    });
    // The Failure response wins over the exit code, and it is certain: not an uncertain start.
    assert_eq!(e.code, ProviderErrorCode::Unavailable);
    assert_eq!(e.retry_after_seconds, Some(7));
    assert!(!e.uncertain);
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("Authorization: Bearer [REDACTED]"),
        "{logged}"
    );
    assert!(!logged.contains(secret), "{logged}");
    assert!(!format!("{e:?}").contains(secret));
}

/// Kills, when dropped, the processes `pipe-holder.sh` left behind (their pids, one a line, in
/// `file`): they sleep for minutes in sessions of their own, out of reach of any group kill.
struct Holders(PathBuf);

impl Drop for Holders {
    fn drop(&mut self) {
        let pids = std::fs::read_to_string(&self.0).unwrap_or_default();
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // SAFETY: kill(2) sends a signal; it touches no memory.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// `pipe-holder.sh` as a provider, recording its leftovers in this fixture.
fn pipe_holder(f: &Fixture) -> (ExecConfig, Holders) {
    let mut c = f.config("pipe-holder.sh");
    let pids = f.path("holder.pids");
    c.env.insert(
        "PIPE_HOLDER_PIDS".to_string(),
        pids.to_string_lossy().into_owned(),
    );
    (c, Holders(pids))
}

#[test]
fn an_answer_is_taken_when_the_command_exits_though_a_process_it_left_holds_its_output() {
    let f = Fixture::new();
    let (mut c, _holders) = pipe_holder(&f);
    c.timeouts.describe = Duration::from_secs(10);
    let p = ExecProvider::start(c).unwrap();
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let started = Instant::now();
    let described = tracing::subscriber::with_default(subscriber, || p.describe(&cluster("a")));
    let took = started.elapsed();
    let d = described.unwrap_or_else(|e| panic!("no answer: {e}"));
    assert_eq!(d.kubernetes_version, "1.33.2");
    assert_eq!(d.region, "westeurope");
    assert!(took < Duration::from_secs(10), "it took {took:?}");
    // What the command printed on stderr before it exited is kept, and the operator is told
    // which provider's command leaves its output held open.
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("left a process holding stdout and stderr"),
        "{logged}"
    );
    let warning = logged
        .lines()
        .find(|l| l.contains("WARN"))
        .unwrap_or_else(|| panic!("no warning: {logged}"));
    assert!(
        warning.contains("provider=fake") && warning.contains("operation=\"describe\""),
        "{warning}"
    );
}

/// Whether this process runs the test `name` alone; if not, runs it again in a process of its
/// own (this test binary, that test only) and asserts it passed there. Counting a process's
/// threads and open files needs no other test running beside it.
fn alone(name: &str) -> bool {
    const ALONE: &str = "WAVERUN_TEST_ALONE";
    if std::env::var(ALONE).as_deref() == Ok(name) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1"])
        .env(ALONE, name)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{name}, run alone:\n{text}"
    );
    false
}

/// This process's threads and open file descriptors.
fn threads_and_fds() -> (usize, usize) {
    let count = |dir: &str| std::fs::read_dir(dir).unwrap().count();
    (count("/proc/self/task"), count("/proc/self/fd"))
}

#[test]
fn calls_whose_output_is_held_open_leave_no_thread_or_file_descriptor_behind() {
    if !alone("calls_whose_output_is_held_open_leave_no_thread_or_file_descriptor_behind") {
        return;
    }
    let f = Fixture::new();
    let (mut c, _holders) = pipe_holder(&f);
    c.timeouts.describe = Duration::from_secs(10);
    let p = ExecProvider::start(c).unwrap();
    let before = threads_and_fds();
    for i in 0..20 {
        let d = p.describe(&cluster("a"));
        let d = d.unwrap_or_else(|e| panic!("call {i}: no answer: {e}"));
        assert_eq!(d.kubernetes_version, "1.33.2");
    }
    drop(p);
    // A thread that has returned may take a moment to leave /proc/self/task.
    let end = Instant::now() + Duration::from_secs(5);
    let mut after = threads_and_fds();
    while (after.0 > before.0 || after.1 > before.1) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
        after = threads_and_fds();
    }
    assert!(
        after.0 <= before.0 && after.1 <= before.1,
        "(threads, fds) were {before:?} before 20 calls and are {after:?} after"
    );
    let holders = std::fs::read_to_string(f.path("holder.pids")).unwrap();
    assert_eq!(holders.lines().count(), 20, "every call left a holder");
}

#[test]
fn exit_codes_without_a_response_follow_the_table() {
    let f = Fixture::new();
    let cases = [
        ("3", ProviderErrorCode::Unsupported, false),
        ("75", ProviderErrorCode::Unavailable, true),
        ("77", ProviderErrorCode::PermissionDenied, false),
        ("78", ProviderErrorCode::InvalidRequest, false),
        ("9", ProviderErrorCode::Internal, true),
    ];
    for (code, want, retryable) in cases {
        let mut c = f.config("exit-codes.sh");
        c.env.insert("EXIT_CODE".to_string(), code.to_string());
        let p = ExecProvider::start(c).unwrap();
        let e = p.describe(&cluster("a")).unwrap_err();
        assert_eq!(e.code, want, "exit {code}: {e}");
        assert_eq!(e.retryable, retryable, "exit {code}: {e}");
    }
    let mut c = f.config("exit-codes.sh");
    c.env.insert("EXIT_CODE".to_string(), "4".to_string());
    c.env.insert("SAY_SUCCESS".to_string(), "1".to_string());
    let p = ExecProvider::start(c).unwrap();
    let e = p.describe(&cluster("a")).unwrap_err();
    assert!(
        e.message.contains("answered Success but exited 4"),
        "{}",
        e.message
    );
}

#[test]
fn the_environment_is_built_from_scratch() {
    let f = Fixture::new();
    let mut c = f.config("fake-cluster.py");
    c.env.insert(
        "FAKE_ENV_LOG".to_string(),
        f.path("env.jsonl").to_string_lossy().into_owned(),
    );
    c.pass_env = vec!["CARGO_PKG_NAME".to_string()];
    let p = ExecProvider::start(c).unwrap();
    p.describe(&cluster("a")).unwrap();
    let text = std::fs::read_to_string(f.path("env.jsonl")).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let env = last.as_object().unwrap();
    let home = env["HOME"].as_str().unwrap();
    assert!(
        home.starts_with(f.path("exec-state").to_str().unwrap()),
        "{home}"
    );
    assert_ne!(env["TMPDIR"], env["HOME"]);
    assert_eq!(env["LANG"], "C.UTF-8");
    assert_eq!(env["WAVERUN_OPERATION"], "describe");
    assert_eq!(env["WAVERUN_API_VERSION"], "exec.waverun.dev/v1alpha1");
    assert_eq!(env["WAVERUN_PROVIDER_NAME"], "fake");
    assert_eq!(env["WAVERUN_NONINTERACTIVE"], "1");
    assert!(env.contains_key("WAVERUN_DEADLINE") && env.contains_key("WAVERUN_REQUEST_ID"));
    // Only the allow-list passes: cargo's variables reach this test, not the command.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert!(!env.contains_key("CARGO_MANIFEST_DIR"));
    assert_eq!(env["CARGO_PKG_NAME"], "waverun");
}

#[test]
fn capabilities_picks_the_highest_common_version_among_those_offered() {
    let f = Fixture::new();
    let offered = json!({"apiVersions": [
        "exec.waverun.dev/v0", API_VERSION, "exec.waverun.dev/v2", "other.example/v1"
    ]});
    let c = f.fake_config(&[("FAKE_CAPABILITIES", &offered.to_string())]);
    let p = ExecProvider::start(c).unwrap();
    assert_eq!(p.api_version(), API_VERSION);
    p.describe(&cluster("a")).unwrap();
}

#[test]
fn malformed_capabilities_or_missing_required_operations_are_refused_at_start() {
    let f = Fixture::new();
    let cases = [
        (json!({"maxConcurrency": 0}), "maxConcurrency"),
        (json!({"maxConcurrency": "ten"}), "maxConcurrency"),
        (json!({"upgradeTypes": "Full"}), "upgradeTypes"),
        (json!({"operations": ["describe"]}), "start-upgrade"),
    ];
    for (caps, field) in cases {
        let c = f.fake_config(&[("FAKE_CAPABILITIES", &caps.to_string())]);
        let e = ExecProvider::start(c).err().expect("refused");
        assert!(
            e.contains("capabilities") && e.contains(field),
            "{caps}: {e}"
        );
    }
}

#[test]
fn an_operation_the_capabilities_do_not_list_is_unsupported_without_running_the_command() {
    let f = Fixture::new();
    let caps = json!({"operations": ["describe", "start-upgrade", "get-operation"]});
    let p =
        ExecProvider::start(f.fake_config(&[("FAKE_CAPABILITIES", &caps.to_string())])).unwrap();
    let e = p.list_releases("westeurope").unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::Unsupported, "{e}");
    assert!(e.message.contains("list-releases"), "{e}");
    assert!(f.operations().is_empty(), "{:?}", f.operations());
}

#[test]
fn an_upgrade_type_the_provider_does_not_support_is_refused_as_unsupported() {
    let f = Fixture::new();
    let caps = json!({"upgradeTypes": ["NodeImageOnly"]});
    let p =
        ExecProvider::start(f.fake_config(&[("FAKE_CAPABILITIES", &caps.to_string())])).unwrap();
    let e = p
        .start_upgrade(&cluster("a"), &to_134("run/a"))
        .unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::Unsupported, "{e}");
    assert!(!e.retryable && !e.uncertain, "{e:?}");
    assert!(
        e.message.contains("upgrade type Full") && e.message.contains("NodeImageOnly"),
        "{e}"
    );
    assert!(f.operations().is_empty(), "{:?}", f.operations());
}

#[test]
fn node_images_are_not_pinned_on_a_provider_without_node_image_pinning() {
    let f = Fixture::new();
    let caps = json!({"features": []});
    let p =
        ExecProvider::start(f.fake_config(&[("FAKE_CAPABILITIES", &caps.to_string())])).unwrap();
    let e = p
        .start_upgrade(&cluster("a"), &to_134("run/a"))
        .unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::Unsupported, "{e}");
    assert!(e.message.contains("node-image-pinning"), "{e}");
    assert!(f.operations().is_empty(), "{:?}", f.operations());
    // Without node images the upgrade goes out.
    let mut cp = to_134("run/a");
    cp.upgrade_type = UpgradeType::ControlPlaneOnly;
    cp.node_images.clear();
    p.start_upgrade(&cluster("a"), &cp).unwrap();
    assert_eq!(f.operations(), ["start-upgrade"]);
}

/// The logged calls' `key` values, once every call ended.
fn logged_max(f: &Fixture, key: &str, operation: &str) -> u64 {
    f.requests()
        .iter()
        .filter(|r| r["operation"] == operation)
        .map(|r| r[key].as_u64().unwrap())
        .max()
        .unwrap()
}

#[test]
fn at_most_max_concurrency_calls_run_at_once() {
    let f = Fixture::new();
    let caps = json!({"maxConcurrency": 2});
    let inflight = f.path("inflight").to_string_lossy().into_owned();
    let c = f.fake_config(&[
        ("FAKE_CAPABILITIES", &caps.to_string()),
        ("FAKE_INFLIGHT_DIR", &inflight),
        ("FAKE_CALL_SECONDS", "0.2"),
    ]);
    let p = Arc::new(ExecProvider::start(c).unwrap());
    assert_eq!(p.max_concurrency(), Some(2));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || p.describe(&cluster(&format!("c{i}"))).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(f.operations().len(), 6);
    let most = logged_max(&f, "inflight", "describe");
    assert!(most <= 2, "{most} calls ran at once");
}

#[test]
fn at_most_one_start_upgrade_is_in_flight_per_cluster() {
    let f = Fixture::new();
    let inflight = f.path("inflight").to_string_lossy().into_owned();
    let c = f.fake_config(&[
        ("FAKE_INFLIGHT_DIR", &inflight),
        ("FAKE_CALL_SECONDS", "0.2"),
        ("FAKE_UPGRADE_SECONDS", "120"),
    ]);
    let p = Arc::new(ExecProvider::start(c).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || p.start_upgrade(&cluster("a"), &to_134(&format!("k{i}/a"))))
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.code, ProviderErrorCode::OperationInProgress, "{e}");
    }
    assert_eq!(f.operations().len(), 4);
    let most = logged_max(&f, "startsOfCluster", "start-upgrade");
    assert_eq!(most, 1, "{most} start-upgrades of one cluster ran at once");
}

#[test]
fn get_operation_sends_the_provider_operation_id_and_the_key() {
    let f = Fixture::new();
    let p = ExecProvider::start(f.fake_config(&[])).unwrap();
    let started = p.start_upgrade(&cluster("a"), &to_134("run/a")).unwrap();
    let r = p
        .get_operation_by_id(&cluster("a"), "run/a", Some(&started.operation_id))
        .unwrap();
    assert_eq!(r.operation_id, started.operation_id);
    let sent = f.requests().last().unwrap()["params"].clone();
    assert_eq!(
        sent,
        json!({"operationId": started.operation_id, "idempotencyKey": "run/a"})
    );
    // The fake platform checks the id against the key.
    let e = p
        .get_operation_by_id(&cluster("a"), "run/a", Some("op-999"))
        .unwrap_err();
    assert_eq!(e.code, ProviderErrorCode::NotFound, "{e}");
}

#[test]
fn the_code_s_retry_class_wins_over_the_response_s_retryable() {
    let f = Fixture::new();
    // Every injected failure says `retryable: true`.
    let codes = [
        ("PermissionDenied", false),
        ("Unauthenticated", false),
        ("InvalidRequest", false),
        ("NotAllowed", false),
        ("Unavailable", true),
        ("PreconditionFailed", true),
        ("Internal", true),
    ];
    let list: Vec<&str> = codes.iter().map(|(c, _)| *c).collect();
    let p = ExecProvider::start(f.fake_config(&[("FAKE_GET_OPERATION_ERRORS", &list.join(","))]))
        .unwrap();
    for (code, retryable) in codes {
        let e = p.get_operation(&cluster("a"), "run/a").unwrap_err();
        assert_eq!(format!("{:?}", e.code), code, "{e}");
        assert_eq!(e.retryable, retryable, "{e}");
    }
    assert_eq!(ProviderErrorCode::PreconditionFailed.retries(), Some(1));
    assert_eq!(ProviderErrorCode::Internal.retries(), Some(2));
    assert_eq!(ProviderErrorCode::Throttled.retries(), None);
    assert_eq!(ProviderErrorCode::PermissionDenied.retries(), Some(0));
}

#[test]
fn a_start_that_exits_without_a_response_is_uncertain_unless_its_code_says_refused() {
    let f = Fixture::new();
    let cases = [
        ("1", true),
        ("75", true),
        ("9", true),
        ("3", false),
        ("77", false),
        ("78", false),
    ];
    for (code, uncertain) in cases {
        let mut c = f.config("exit-codes.sh");
        c.env.insert("EXIT_CODE".to_string(), code.to_string());
        let p = ExecProvider::start(c).unwrap();
        let e = p
            .start_upgrade(&cluster("a"), &to_134("run/a"))
            .unwrap_err();
        assert_eq!(e.uncertain, uncertain, "exit {code}: {e:?}");
        if !uncertain {
            assert!(!e.retryable, "exit {code}: {e:?}");
        }
    }
}

#[test]
fn a_secret_in_a_failure_response_is_redacted() {
    let f = Fixture::new();
    let secret = "s3cr3t-platform-token-4471";
    std::fs::write(f.path("token"), secret).unwrap();
    let mut c = f.config("secret-stderr.sh");
    c.env
        .insert("SECRET_IN_MESSAGE".to_string(), "1".to_string());
    c.secret_env.insert(
        "PLATFORM_TOKEN".to_string(),
        SecretSource::FromFile(f.path("token")),
    );
    let p = ExecProvider::start(c).unwrap();
    let e = p.describe(&cluster("a")).unwrap_err();
    assert!(e.message.contains("refused token [REDACTED]"), "{e}");
    assert!(!format!("{e:?}").contains(secret));
}

#[test]
fn the_command_leads_a_session_of_its_own_without_a_terminal() {
    let f = Fixture::new();
    let p = ExecProvider::start(f.fake_config(&[])).unwrap();
    p.describe(&cluster("a")).unwrap();
    for r in f.requests() {
        assert_eq!(r["sessionLeader"], true, "{r}");
        assert_eq!(r["tty"], false, "{r}");
    }
}

// The daemon's side: one member on the fake cluster, upgraded by the real engine thread in
// fleet time (20,000 times real time: a minute of fleet time is 3 ms).

const SCENARIO: &str = r#"
start: '2026-12-07T00:00:00Z'
members:
- name: a
  region: westeurope
  kubernetesVersion: 1.33.2
  nodePools:
  - {name: system, osType: Linux, imageVersion: AKSUbuntu-2204-202611.01.0}
run:
  name: r1
  managedClusterUpdate:
    upgrade: {type: ControlPlaneOnly, kubernetesVersion: 1.34.1}
"#;

/// Runs the scenario's run over the fake cluster (configured by `vars`) until it ends; the
/// member's status.
fn upgrade_through_daemon(f: &Fixture, vars: &[(&str, &str)]) -> MemberStatus {
    let (_rt, plugin) = runtime_support::plugin();
    let file = f.path("scenario.yaml");
    std::fs::write(&file, SCENARIO).unwrap();
    let s = waverun_host::load_scenario(&file).unwrap();
    let mut store = SqliteStore::open(&f.path("waverun.db")).unwrap();
    let clock = FleetClock::resume(&mut store, 20_000.0, Some(s.start.timestamp_millis())).unwrap();
    let (engine, _) =
        FleetEngine::start(&plugin, store, clock, InstanceConfig::default(), "fake").unwrap();
    let mut vars = vars.to_vec();
    vars.push(("FAKE_UPGRADE_SECONDS", "0"));
    let provider = ExecProvider::start(f.fake_config(&vars)).unwrap();
    let mut providers: Providers = BTreeMap::new();
    providers.insert("fake".to_string(), Arc::new(provider) as Arc<dyn Provider>);
    let daemon = Daemon::spawn(engine, clock, providers);
    let mut commands: Vec<Command> = s.setup_commands().into_iter().map(|(_, c)| c).collect();
    commands.push(Command::StartRun {
        name: "r1".to_string(),
    });
    for c in commands {
        daemon
            .call(move |w| w.command(&c, None).map(|_| ()))
            .unwrap()
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let end = Instant::now() + Duration::from_secs(60);
    let member = loop {
        let st = daemon.call(|w| w.engine().status("r1")).unwrap().unwrap();
        if st.status.state.is_terminal() {
            break st.stages[0].groups[0].members[0].clone();
        }
        assert!(
            Instant::now() < end,
            "the run has not ended: {:?}",
            st.status
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    daemon.shutdown().unwrap();
    member
}

/// The logged requests of `operation`'s params.
fn params_of(f: &Fixture, operation: &str) -> Vec<Value> {
    f.requests()
        .into_iter()
        .filter(|r| r["operation"] == operation)
        .map(|r| r["params"].clone())
        .collect()
}

#[test]
fn retryable_get_operation_failures_are_retried_and_polls_carry_the_operation_id() {
    let f = Fixture::new();
    let errors = "Unavailable,Throttled,OperationInProgress,Internal,Internal";
    let m = upgrade_through_daemon(&f, &[("FAKE_GET_OPERATION_ERRORS", errors)]);
    assert_eq!(m.status.state, State::Completed, "{m:?}");
    let polls = params_of(&f, "get-operation");
    assert_eq!(polls.len(), 6, "{polls:?}");
    for p in polls {
        assert_eq!(p, json!({"operationId": "op-1", "idempotencyKey": "r1/a"}));
    }
    assert_eq!(params_of(&f, "start-upgrade").len(), 1);
}

#[test]
fn a_permanent_get_operation_failure_fails_the_member_with_its_code_and_message() {
    let f = Fixture::new();
    let m = upgrade_through_daemon(&f, &[("FAKE_GET_OPERATION_ERRORS", "PermissionDenied")]);
    assert_eq!(m.status.state, State::Failed, "{m:?}");
    let message = &m.status.error.as_ref().unwrap().message;
    assert!(
        message.contains("PermissionDenied") && message.contains("injected failure 1"),
        "{message}"
    );
    assert_eq!(params_of(&f, "get-operation").len(), 1, "asked once only");
}

#[test]
fn internal_get_operation_failures_fail_the_member_after_two_retries() {
    let f = Fixture::new();
    let m = upgrade_through_daemon(
        &f,
        &[("FAKE_GET_OPERATION_ERRORS", "Internal,Internal,Internal")],
    );
    assert_eq!(m.status.state, State::Failed, "{m:?}");
    let message = &m.status.error.as_ref().unwrap().message;
    assert!(
        message.contains("Internal") && message.contains("after 2 retries"),
        "{message}"
    );
    assert_eq!(params_of(&f, "get-operation").len(), 3);
}

#[test]
fn precondition_failed_describes_the_cluster_again_and_retries_once() {
    let f = Fixture::new();
    let m = upgrade_through_daemon(&f, &[("FAKE_PRECONDITION_FAILURES", "1")]);
    assert_eq!(m.status.state, State::Completed, "{m:?}");
    let ops = f.operations();
    assert_eq!(
        ops[..3],
        ["start-upgrade", "describe", "start-upgrade"],
        "{ops:?}"
    );
    assert_eq!(params_of(&f, "start-upgrade").len(), 2);
}

#[test]
fn precondition_failed_twice_fails_the_member() {
    let f = Fixture::new();
    let m = upgrade_through_daemon(&f, &[("FAKE_PRECONDITION_FAILURES", "99")]);
    assert_eq!(m.status.state, State::Failed, "{m:?}");
    let message = &m.status.error.as_ref().unwrap().message;
    assert!(
        message.contains("PreconditionFailed") && message.contains("retrying once"),
        "{message}"
    );
    assert_eq!(
        f.operations(),
        ["start-upgrade", "describe", "start-upgrade"]
    );
}

#[test]
fn an_uncertain_start_of_a_cluster_found_at_its_target_succeeds_without_resending() {
    let f = Fixture::new();
    // The start is killed after the platform accepted it (and finished at once); get-operation
    // has no trace of it; describe shows the cluster at the target.
    let m = upgrade_through_daemon(
        &f,
        &[
            ("FAKE_CRASH_START", "after"),
            ("FAKE_FORGET_OPERATIONS", "1"),
        ],
    );
    assert_eq!(m.status.state, State::Completed, "{m:?}");
    let ops = f.operations();
    assert_eq!(
        ops,
        ["start-upgrade", "get-operation", "describe"],
        "{ops:?}"
    );
}

#[test]
fn an_uncertain_start_without_trace_is_sent_again_under_the_same_key_after_the_grace() {
    let f = Fixture::new();
    // The start is killed before the platform accepted it.
    let m = upgrade_through_daemon(&f, &[("FAKE_CRASH_START", "before")]);
    assert_eq!(m.status.state, State::Completed, "{m:?}");
    let ops = f.operations();
    assert_eq!(
        ops[..3],
        ["start-upgrade", "get-operation", "describe"],
        "{ops:?}"
    );
    let starts = params_of(&f, "start-upgrade");
    assert_eq!(starts.len(), 2, "{ops:?}");
    assert_eq!(starts[0]["idempotencyKey"], "r1/a");
    assert_eq!(starts[1]["idempotencyKey"], "r1/a");
}

/// Writes the fake platform's clusters (`clusters.json`): `(id, powerState, health)`.
fn clusters(f: &Fixture, list: &[(&str, &str, &str)]) {
    let mut clusters = serde_json::Map::new();
    for (id, power, health) in list {
        clusters.insert(
            id.to_string(),
            json!({"region": "westeurope", "version": "1.33.2", "powerState": power,
                   "health": health, "healthMessage": format!("{id}: {health} by its own probe"),
                   "nodePools": [{"name": "system", "os": "Linux",
                                  "nodeImage": {"version": "AKSUbuntu-2204-202611.01.0"}}]}),
        );
    }
    let state = json!({"clusters": clusters, "operations": {}});
    std::fs::write(f.path("clusters.json"), state.to_string()).unwrap();
}

/// An upgrade to `version`, as the engine asks a pre-flight about it.
fn upgrade_to(member: &str, version: &str) -> waverun_core::UpgradeOperation {
    waverun_core::UpgradeOperation {
        operation_id: format!("r1/{member}"),
        run: "r1".to_string(),
        member: member.to_string(),
        region: "westeurope".to_string(),
        provider: None,
        upgrade_type: UpgradeType::ControlPlaneOnly,
        kubernetes_version: Some(version.to_string()),
        node_images: Vec::new(),
    }
}

const CHECK_TIMEOUT: Duration = Duration::from_secs(20);

#[test]
fn preflight_fails_a_stopped_or_busy_cluster_from_describe_and_asks_check_for_the_rest() {
    use waverun_core::health::Verdict;
    let f = Fixture::new();
    clusters(
        &f,
        &[
            ("ok", "Running", "Pass"),
            ("off", "Stopped", "Pass"),
            ("sick", "Running", "Fail"),
        ],
    );
    let p = ExecProvider::start(f.fake_config(&[])).unwrap();
    let pre = |id: &str, version: &str| {
        p.preflight(&cluster(id), Some(&upgrade_to(id, version)), CHECK_TIMEOUT)
    };

    let ok = pre("ok", "1.34.1");
    assert_eq!(ok.verdict, Some(Verdict::Pass), "{ok:?}");
    // The check's values come back as samples.
    let values = ok.values.clone().unwrap();
    assert_eq!(
        (values[0].labels.as_str(), values[0].value.as_str()),
        ("cluster=\"ok\"", "1.33.2")
    );
    // A stopped cluster fails on describe's answer; check is not asked.
    let before = f.operations().len();
    let off = pre("off", "1.34.1");
    assert_eq!(off.verdict, Some(Verdict::Fail), "{off:?}");
    assert!(off.message.unwrap().contains("off: the cluster is stopped"));
    assert_eq!(f.operations()[before..], ["describe"]);
    // A target the region does not offer fails in the command's own words.
    let far = pre("ok", "1.36.0");
    assert_eq!(far.verdict, Some(Verdict::Fail), "{far:?}");
    assert!(
        far.message
            .unwrap()
            .contains("Kubernetes 1.36.0 is not available in westeurope"),
        "the command's message"
    );
    // The request said what the pre-flight is about.
    let asked = params_of(&f, "check");
    assert_eq!(
        asked.last().unwrap(),
        &json!({"purpose": "preflight",
                "upgrade": {"type": "ControlPlaneOnly", "controlPlane": {"version": "1.36.0"}}})
    );
    // A busy cluster (an upgrade running) fails on describe's answer.
    p.start_upgrade(&cluster("ok"), &to_134("k1")).unwrap();
    let busy = pre("ok", "1.34.1");
    assert_eq!(busy.verdict, Some(Verdict::Fail), "{busy:?}");
    assert!(busy
        .message
        .unwrap()
        .contains("another operation is in progress"));

    // Health is check's answer alone: the cluster's own verdict and message.
    let sick = p.health(&cluster("sick"), CHECK_TIMEOUT);
    assert_eq!(sick.verdict, Some(Verdict::Fail), "{sick:?}");
    assert_eq!(
        sick.message.as_deref(),
        Some("fake: sick: Fail by its own probe")
    );
    assert_eq!(
        params_of(&f, "check").last().unwrap(),
        &json!({"purpose": "health"})
    );
}

#[test]
fn a_command_without_check_has_describe_s_preflight_and_no_health_check() {
    use waverun_core::health::Verdict;
    let f = Fixture::new();
    clusters(
        &f,
        &[("sick", "Running", "Fail"), ("off", "Stopped", "Pass")],
    );
    let caps =
        json!({"operations": ["capabilities", "describe", "start-upgrade", "get-operation"]});
    let p =
        ExecProvider::start(f.fake_config(&[("FAKE_CAPABILITIES", &caps.to_string())])).unwrap();
    // Without `check`, the cluster's own verdict is never asked: describe says it runs.
    let pre = p.preflight(&cluster("sick"), None, CHECK_TIMEOUT);
    assert_eq!(pre.verdict, Some(Verdict::Pass), "{pre:?}");
    let off = p.preflight(&cluster("off"), None, CHECK_TIMEOUT);
    assert_eq!(off.verdict, Some(Verdict::Fail), "{off:?}");
    // No health check: an error naming the missing operation, never a pass.
    let h = p.health(&cluster("sick"), CHECK_TIMEOUT);
    assert_eq!(h.verdict, Some(Verdict::Error), "{h:?}");
    assert!(h.message.unwrap().contains("do not list \"check\""));
    assert!(!f.operations().contains(&"check".to_string()));
}

#[test]
fn a_check_answer_without_a_verdict_or_past_its_timeout_is_an_error_never_a_pass() {
    use waverun_core::health::Verdict;
    let f = Fixture::new();
    clusters(
        &f,
        &[("odd", "Running", "Maybe"), ("slow", "Running", "Pass")],
    );
    let p = ExecProvider::start(f.fake_config(&[])).unwrap();
    let odd = p.health(&cluster("odd"), CHECK_TIMEOUT);
    assert_eq!(odd.verdict, Some(Verdict::Error), "{odd:?}");
    assert_eq!(
        odd.message.as_deref(),
        Some("fake: check: result.verdict: \"Maybe\" is not Pass, Fail or Inconclusive")
    );
    // Every call takes 2 s; the check allows one.
    let inflight = f.path("inflight");
    let slow = ExecProvider::start(f.fake_config(&[
        ("FAKE_CALL_SECONDS", "2"),
        ("FAKE_INFLIGHT_DIR", inflight.to_str().unwrap()),
    ]))
    .unwrap();
    let late = slow.health(&cluster("slow"), Duration::from_secs(1));
    assert_eq!(late.verdict, Some(Verdict::Error), "{late:?}");
    assert!(late.message.unwrap().contains("no answer within 1 s"));
}
