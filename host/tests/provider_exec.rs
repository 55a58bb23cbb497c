//! The exec provider's conformance list (`shared/spec/exec-provider.md`), against real child
//! processes: the scripts in `tests/exec/` — a well-behaved fake cluster, and providers that
//! hang, crash, print garbage, exit 0 with nothing, echo a secret to stderr, answer by exit code
//! only, or speak another protocol version.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use waverun_core::{PoolImage, UpgradeType};
use waverun_host::providers::{
    ClusterTarget, ExecConfig, ExecProvider, ExecTimeouts, OperationPhase, Provider,
    ProviderErrorCode, SecretSource, UpgradeRequest,
};

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
