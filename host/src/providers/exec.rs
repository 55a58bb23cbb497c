//! The exec provider (`shared/spec/exec-provider.md`, `exec.waverun.dev/v1alpha1`): every call
//! runs the operator's command once, `command… <operation>`, with no shell, in a process group
//! of its own, the request JSON on stdin, exactly one JSON response on stdout and free text on
//! stderr. The environment is built from scratch (a private `HOME` and `TMPDIR`, an allow-list,
//! the operator's `env` and `secretEnv`); secrets are never in argv, the request or a log line.
//!
//! What it owns: turning one call into one process and its answer into a result or a
//! [`ProviderError`]: exit codes, the response envelope, the deadline (SIGTERM to the group, a
//! grace period, SIGKILL to the group), bounded stdout, the tail of stderr with secrets
//! redacted. A `start-upgrade` whose outcome is unknown (timed out, crashed, answered nonsense)
//! is reported `uncertain`; the daemon then asks `get-operation` under the same key.
//!
//! The command's pipes are served from the calling thread alone (`Pipes`, poll(2)), and its
//! answer is what it wrote until it exited, not until its pipes closed: a process it left
//! holding them open (in a session of its own, out of reach of the group kill) delays nothing,
//! and no thread or file descriptor outlives the call.
//!
//! At start it asks `capabilities`, picks the highest protocol version both sides speak and
//! holds the provider to what it declared: an operation it does not list, an upgrade type it
//! does not support or a node image pin without `node-image-pinning` is refused as
//! `Unsupported` without running the command; at most `maxConcurrency` calls run at once. At
//! most one mutating call is in flight per cluster.
//!
//! Checks: the pre-flight of a member is `describe`'s (stopped or busy fails), then, when the
//! command lists the optional `check` operation, its answer; health checks (`provider: {}`)
//! are `check`'s alone. `check` is read-only: `params: {purpose: "preflight" | "health",
//! upgrade?: {type, controlPlane?, nodePools?}}` → `result: {verdict: Pass | Fail |
//! Inconclusive, message?, values?: [{labels?, value}]}`; a failure, a timeout or a result
//! without a verdict is an `Error` measurement, never a pass.

use super::{measurement_error, preflight_of};
use super::{ClusterTarget, Described, OperationPhase, OperationReport, Provider};
use super::{ProviderError, ProviderErrorCode, Release, Releases, Started, UpgradeRequest};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use waverun_core::health::{Measurement, Sample, Verdict};
use waverun_core::{Maintenance, NodePool, OsType};

/// The protocol version this daemon speaks (the newest, when it speaks several).
pub const API_VERSION: &str = "exec.waverun.dev/v1alpha1";

/// Every protocol version this daemon speaks; `capabilities` picks the highest one the command
/// speaks too.
const SPOKEN: &[&str] = &[API_VERSION];

/// The operations the daemon cannot work without.
const REQUIRED_OPERATIONS: [&str; 3] = ["describe", "start-upgrade", "get-operation"];

/// The optional operation (waverun's addition to the protocol, negotiated by `capabilities`)
/// that answers a member's pre-flight and health checks.
const CHECK: &str = "check";

/// The feature a provider declares when it installs the node image version it is given
/// (`nodeImage: {version}`) rather than only the latest one.
const NODE_IMAGE_PINNING: &str = "node-image-pinning";

/// Where a secret's value comes from; it is read again at every call.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum SecretSource {
    /// The daemon's own environment variable of that name.
    FromEnv(String),
    /// The contents of a file (trailing newline removed).
    FromFile(PathBuf),
}

impl SecretSource {
    /// The secret's current value; the error says where it was looked for (never a value).
    pub fn resolve(&self) -> Result<String, String> {
        match self {
            SecretSource::FromEnv(v) => {
                std::env::var(v).map_err(|_| format!("the daemon's environment has no {v}"))
            }
            SecretSource::FromFile(f) => std::fs::read_to_string(f)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| format!("{}: {e}", f.display())),
        }
    }
}

/// Per-operation deadlines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecTimeouts {
    /// `capabilities`.
    pub capabilities: Duration,
    /// `describe`.
    pub describe: Duration,
    /// `start-upgrade`.
    pub start_upgrade: Duration,
    /// `get-operation`.
    pub get_operation: Duration,
    /// After SIGTERM, how long the group has before SIGKILL.
    pub grace: Duration,
}

impl Default for ExecTimeouts {
    fn default() -> ExecTimeouts {
        ExecTimeouts {
            capabilities: Duration::from_secs(10),
            describe: Duration::from_secs(30),
            start_upgrade: Duration::from_secs(120),
            get_operation: Duration::from_secs(30),
            grace: Duration::from_secs(5),
        }
    }
}

/// One exec provider, as configured.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// The name members use (`provider: NAME`).
    pub name: String,
    /// The program and its first arguments; the operation is appended.
    pub command: Vec<String>,
    /// Variables set as given.
    pub env: BTreeMap<String, String>,
    /// Variables of the daemon's environment passed through (an allow-list).
    pub pass_env: Vec<String>,
    /// Secret variables, resolved at every call and redacted from logs.
    pub secret_env: BTreeMap<String, SecretSource>,
    /// Deadlines.
    pub timeouts: ExecTimeouts,
    /// The largest stdout accepted (bytes).
    pub max_stdout: usize,
    /// A private directory for the calls' `HOME` and `TMPDIR`.
    pub state_dir: PathBuf,
}

/// Bytes of stderr kept (its tail) for logs and error messages.
const STDERR_TAIL: usize = 8 * 1024;
/// What replaces a secret's value in anything logged.
const REDACTED: &str = "[REDACTED]";

/// A provider whose every call is one run of the operator's command.
pub struct ExecProvider {
    config: ExecConfig,
    calls: AtomicU64,
    boot: u64,
    /// The protocol version negotiated at start.
    api_version: &'static str,
    /// What `capabilities` declared.
    caps: Capabilities,
    /// Calls running (`""`) and mutating calls in flight per cluster.
    limits: Limits,
}

/// What a provider's `capabilities` declared; `None` where it said nothing (no restriction).
#[derive(Debug, Default)]
struct Capabilities {
    operations: Option<BTreeSet<String>>,
    upgrade_types: Option<BTreeSet<String>>,
    features: Option<BTreeSet<String>>,
    max_concurrency: Option<usize>,
}

/// Counting gates by key: at most `limit` holders of a key at once.
#[derive(Default)]
struct Limits {
    held: Mutex<BTreeMap<String, usize>>,
    freed: Condvar,
}

/// One place in a [`Limits`] gate, given back when dropped.
struct Held<'a> {
    limits: &'a Limits,
    key: String,
}

impl Limits {
    /// Waits until `key` has fewer than `limit` holders, then holds it.
    fn enter(&self, key: &str, limit: usize) -> Held<'_> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        while held.get(key).copied().unwrap_or(0) >= limit.max(1) {
            held = self.freed.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        *held.entry(key.to_string()).or_insert(0) += 1;
        Held {
            limits: self,
            key: key.to_string(),
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = self.limits.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.key);
            }
        }
        self.limits.freed.notify_all();
    }
}

/// How one call ended, before the operation decides what it means.
#[derive(Debug)]
enum CallError {
    /// The command answered `Failure` (or exited with a code that says what failed).
    Failed(ProviderError),
    /// It broke the protocol: no response, garbage, a `Success` with a non-zero exit, a crash.
    Protocol(String),
    /// It ran past its deadline and was killed with its group.
    Timeout(Duration),
    /// It exited with a non-zero code and no valid response; the code says what failed.
    Exited(i32, ProviderError),
}

impl ExecProvider {
    /// A provider over `config`. It checks the command can be run and negotiates the protocol
    /// version with `capabilities` (the highest both speak); a command that cannot, speaks no
    /// common version, declares malformed capabilities or lacks an operation the daemon needs
    /// is refused with the reason.
    pub fn start(config: ExecConfig) -> Result<ExecProvider, String> {
        if config.command.is_empty() || config.command[0].is_empty() {
            return Err(format!(
                "providers.{}.command: must name a program",
                config.name
            ));
        }
        std::fs::create_dir_all(config.state_dir.join("home"))
            .and_then(|()| std::fs::create_dir_all(config.state_dir.join("tmp")))
            .map_err(|e| format!("{}: {e}", config.state_dir.display()))?;
        private(&config.state_dir);
        let mut p = ExecProvider {
            config,
            calls: AtomicU64::new(0),
            boot: crate::clock::Clock::now_ms(&crate::clock::SystemClock) as u64,
            api_version: API_VERSION,
            caps: Capabilities::default(),
            limits: Limits::default(),
        };
        let caps = p
            .call(
                "capabilities",
                None,
                json!({}),
                p.config.timeouts.capabilities,
            )
            .map_err(|e| {
                format!(
                    "providers.{}: capabilities: {}",
                    p.config.name,
                    p.explain(&e)
                )
            })?;
        let versions: Vec<&str> = caps
            .get("apiVersions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(version) = negotiate(&versions) else {
            return Err(format!(
                "providers.{}: the command speaks {versions:?}, and this daemon speaks {SPOKEN:?}: no common version",
                p.config.name
            ));
        };
        p.api_version = version;
        p.caps = parse_capabilities(&caps)
            .map_err(|e| format!("providers.{}: capabilities: result.{e}", p.config.name))?;
        let adapter = caps.get("provider").map(|v| v.to_string());
        tracing::info!(
            provider = %p.config.name,
            adapter = %adapter.unwrap_or_default(),
            api_version = version,
            max_concurrency = ?p.caps.max_concurrency,
            "exec provider ready"
        );
        Ok(p)
    }

    /// The protocol version negotiated with the command.
    pub fn api_version(&self) -> &str {
        self.api_version
    }

    /// The most calls that run at once, when the command declared a `maxConcurrency`.
    pub fn max_concurrency(&self) -> Option<usize> {
        self.caps.max_concurrency
    }

    /// A refusal made here, without running the command: the provider declared it cannot.
    fn unsupported(&self, operation: &str, why: String) -> ProviderError {
        ProviderError::new(
            ProviderErrorCode::Unsupported,
            format!("{}: {operation}: {why}", self.config.name),
        )
    }

    fn explain(&self, e: &CallError) -> String {
        match e {
            CallError::Failed(p) | CallError::Exited(_, p) => p.to_string(),
            CallError::Protocol(m) => format!("protocol error: {m}"),
            CallError::Timeout(d) => format!("no answer within {} s; killed", d.as_secs_f64()),
        }
    }

    /// The secrets' current values, by variable.
    fn secrets(&self) -> Result<BTreeMap<String, String>, CallError> {
        let mut out = BTreeMap::new();
        for (var, source) in &self.config.secret_env {
            let value = source.resolve().map_err(|why| {
                CallError::Failed(ProviderError::new(
                    ProviderErrorCode::Unauthenticated,
                    format!("secretEnv.{var}: {why}"),
                ))
            })?;
            out.insert(var.clone(), value);
        }
        Ok(out)
    }

    /// `text` with every secret value replaced.
    fn redact(text: &str, secrets: &BTreeMap<String, String>) -> String {
        let mut out = text.to_string();
        for v in secrets.values().filter(|v| !v.is_empty()) {
            out = out.replace(v.as_str(), REDACTED);
        }
        out
    }

    /// Runs `command… operation` once and returns the response's `result`.
    fn call(
        &self,
        operation: &str,
        cluster: Option<&ClusterTarget>,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        if let Some(ops) = &self.caps.operations {
            if !ops.contains(operation) {
                return Err(CallError::Failed(ProviderError::new(
                    ProviderErrorCode::Unsupported,
                    format!("the provider's capabilities do not list {operation:?}"),
                )));
            }
        }
        // At most `maxConcurrency` calls at once; the deadline counts from the call's start.
        let _slot = self.caps.max_concurrency.map(|n| self.limits.enter("", n));
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("{:x}-{n}", self.boot);
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let deadline_ms = now.saturating_add(timeout.as_millis().min(i64::MAX as u128) as i64);
        let deadline_text = chrono::DateTime::from_timestamp_millis(deadline_ms)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut request = json!({
            "apiVersion": self.api_version,
            "kind": "ProviderRequest",
            "operation": operation,
            "requestId": request_id,
            "deadline": deadline_text,
            "params": params,
        });
        if let Some(c) = cluster {
            request["cluster"] = cluster_json(c);
        }
        let secrets = self.secrets()?;
        let tmp = self.config.state_dir.join("tmp").join(&request_id);
        std::fs::create_dir_all(&tmp)
            .map_err(|e| CallError::Protocol(format!("{}: {e}", tmp.display())))?;
        private(&tmp);
        let result = self.run(
            operation,
            &request,
            &request_id,
            &deadline_text,
            &tmp,
            &secrets,
            timeout,
        );
        let _ = std::fs::remove_dir_all(&tmp);
        let (status, stdout, stderr) = result?;
        let stderr = Self::redact(&String::from_utf8_lossy(&stderr), &secrets);
        if !stderr.trim().is_empty() {
            tracing::info!(provider = %self.config.name, operation, request_id = %request_id, stderr = %stderr.trim_end(), "provider stderr");
        }
        let tail = |msg: String| {
            if stderr.trim().is_empty() {
                msg
            } else {
                format!("{msg} (stderr: {})", last_line(&stderr))
            }
        };
        let response = parse_response(&stdout, self.api_version, operation, &request_id, &secrets)
            .map_err(tail);
        let code = status.code();
        match (response, code) {
            (Ok(r), Some(0)) if r.success => Ok(r.result),
            (Ok(r), _) if r.success => Err(CallError::Protocol(tail(format!(
                "it answered Success but {}",
                exit_text(status)
            )))),
            (Ok(r), _) => Err(CallError::Failed(r.error)),
            (Err(why), Some(0)) => Err(CallError::Protocol(why)),
            (Err(why), Some(c)) => Err(exit_error(c, operation).map_or(
                CallError::Protocol(format!("{why}; {}", exit_text(status))),
                |code| {
                    CallError::Exited(
                        c,
                        ProviderError::new(
                            code,
                            tail(format!("{operation}: {}", exit_text(status))),
                        ),
                    )
                },
            )),
            (Err(why), None) => Err(CallError::Protocol(format!("{why}; {}", exit_text(status)))),
        }
    }

    /// Spawns the process, feeds it, collects its output within `timeout`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        operation: &str,
        request: &Value,
        request_id: &str,
        deadline: &str,
        tmp: &std::path::Path,
        secrets: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>), CallError> {
        let c = &self.config;
        let mut cmd = Command::new(&c.command[0]);
        cmd.args(&c.command[1..]).arg(operation);
        cmd.env_clear();
        cmd.env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_string()),
        );
        for var in &c.pass_env {
            if let Ok(v) = std::env::var(var) {
                cmd.env(var, v);
            }
        }
        cmd.env("HOME", c.state_dir.join("home"))
            .env("TMPDIR", tmp)
            .env("LANG", "C.UTF-8");
        cmd.envs(&c.env);
        cmd.envs(secrets);
        cmd.env("WAVERUN_API_VERSION", self.api_version)
            .env("WAVERUN_OPERATION", operation)
            .env("WAVERUN_REQUEST_ID", request_id)
            .env("WAVERUN_DEADLINE", deadline)
            .env("WAVERUN_PROVIDER_NAME", &c.name)
            .env("WAVERUN_NONINTERACTIVE", "1");
        cmd.current_dir(c.state_dir.join("home"));
        let body = serde_json::to_vec(request).expect("a request serialises");
        let (status, out) = match run_in_session(
            &mut cmd,
            body,
            c.max_stdout,
            timeout,
            c.timeouts.grace,
        ) {
            Ok(Ran::Exited(status, out)) => (status, out),
            Ok(Ran::TimedOut) => {
                tracing::warn!(provider = %c.name, operation, request_id, "the command ran past its deadline; its process group was killed");
                return Err(CallError::Timeout(timeout));
            }
            Err(RunError::Spawn(e)) => {
                return Err(CallError::Failed(ProviderError::new(
                    ProviderErrorCode::Internal,
                    format!("{}: cannot run {:?}: {e}", c.name, c.command[0]),
                )))
            }
            Err(RunError::Pipes(e)) => {
                return Err(CallError::Protocol(format!(
                    "the command's pipes cannot be set up: {e}"
                )))
            }
        };
        if out.held_open {
            tracing::warn!(
                provider = %c.name,
                operation,
                request_id,
                "the command exited, but a process it started still held its stdout or stderr open; the answer is what the command wrote before it exited, and that process may outlive the call (the group kill reaches only the command's process group)"
            );
        }
        if out.stdout.len() > c.max_stdout {
            return Err(CallError::Protocol(format!(
                "stdout is over {} bytes",
                c.max_stdout
            )));
        }
        if out.read_failed {
            return Err(CallError::Protocol("stdout could not be read".to_string()));
        }
        Ok((status, out.stdout, out.stderr))
    }

    /// Whether `capabilities` listed the optional `check` operation.
    fn checks(&self) -> bool {
        self.caps
            .operations
            .as_ref()
            .is_some_and(|ops| ops.contains(CHECK))
    }

    /// One `check` call for `purpose`, as a measurement.
    fn check(
        &self,
        cluster: &ClusterTarget,
        purpose: &str,
        upgrade: Option<&waverun_core::UpgradeOperation>,
        timeout: Duration,
    ) -> Measurement {
        let mut params = json!({ "purpose": purpose });
        if let Some(u) = upgrade {
            params["upgrade"] = upgrade_params(
                u.upgrade_type,
                u.kubernetes_version.as_deref(),
                &u.node_images,
            );
        }
        match self.call(CHECK, Some(cluster), params, timeout) {
            Ok(r) => check_measurement(&self.config.name, &r),
            Err(e) => measurement_error(self.failure(CHECK, e).message),
        }
    }

    fn failure(&self, operation: &str, e: CallError) -> ProviderError {
        let name = &self.config.name;
        match e {
            CallError::Failed(mut p) | CallError::Exited(_, mut p) => {
                p.message = format!("{name}: {operation}: {}", p.message);
                p
            }
            CallError::Protocol(m) => ProviderError::new(
                ProviderErrorCode::Internal,
                format!("{name}: {operation}: protocol error: {m}"),
            ),
            CallError::Timeout(d) => ProviderError::new(
                ProviderErrorCode::Unavailable,
                format!(
                    "{name}: {operation}: no answer within {} s; the command was killed",
                    d.as_secs_f64()
                ),
            ),
        }
    }

    /// A mutating call's failure: a refusal stays what it is (a `Failure` response, or an exit
    /// code saying the call was refused: unsupported, permission, configuration); anything else
    /// (a timeout, a crash, a protocol error, another exit code without a response) leaves its
    /// outcome unknown.
    fn uncertain(&self, operation: &str, e: CallError) -> ProviderError {
        let certain = matches!(&e, CallError::Failed(_) | CallError::Exited(3 | 77 | 78, _));
        let mut p = self.failure(operation, e);
        if !certain {
            p.uncertain = true;
            p.retryable = true;
            p.message
                .push_str(" (the outcome is unknown: asking get-operation under the same key)");
        }
        p
    }
}

/// How a command run by [`run_in_session`] ended.
pub(crate) enum Ran {
    /// It exited before its deadline: its status and what it wrote until then.
    Exited(ExitStatus, Output),
    /// It ran past its deadline: its group got SIGTERM, the grace period, then SIGKILL.
    TimedOut,
}

/// Why [`run_in_session`] could not run a command.
pub(crate) enum RunError {
    /// The program could not be started.
    Spawn(std::io::Error),
    /// Its pipes could not be made non-blocking (it was killed).
    Pipes(std::io::Error),
}

/// The process rules of every command the daemon runs (the exec provider's calls, exec health
/// checks): `cmd` (program, arguments, environment and directory already set) runs in a session
/// of its own (its own process group, no controlling terminal), `stdin` is fed to it, stdout is
/// kept up to `max_stdout` bytes (one more says it was over) and the tail of stderr; at
/// `timeout` from the start its group gets SIGTERM, then SIGKILL after `grace`. Whatever it
/// left in its group when it exited is killed too. Blocking: call it off the async runtime.
pub(crate) fn run_in_session(
    cmd: &mut Command,
    stdin: Vec<u8>,
    max_stdout: usize,
    timeout: Duration,
    grace: Duration,
) -> Result<Ran, RunError> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent. The
    // command leads a session of its own: its own process group (signalled as a whole)
    // and no controlling terminal (it cannot prompt: "no TTY").
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let group = child.id() as i32;
    let mut pipes = match Pipes::take(&mut child, stdin, max_stdout) {
        Ok(p) => p,
        Err(e) => {
            signal_group(group, libc::SIGKILL);
            let _ = child.wait();
            return Err(RunError::Pipes(e));
        }
    };
    let end = started + timeout;
    let Some(status) = pipes.serve(&mut child, end) else {
        kill_group(group, &mut child, grace, &mut pipes);
        return Ok(Ran::TimedOut);
    };
    // The command exited; whatever it left behind in its group goes too. Its answer is what
    // it wrote before it exited: the pipes are drained without waiting for them to close.
    signal_group(group, libc::SIGKILL);
    Ok(Ran::Exited(status, pipes.drain()))
}

/// The request's `cluster`: `id` (the member), `region`, and `ref` (the operator's
/// identifiers: a JSON object `clusterRef`, or a plain one as `{"name": ...}`).
fn cluster_json(c: &ClusterTarget) -> Value {
    let r = match c.cluster_ref.as_deref() {
        None => json!({}),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({ "name": text }),
        },
    };
    json!({ "id": c.member, "region": c.region, "ref": r })
}

/// A response that parsed.
struct Response {
    success: bool,
    result: Value,
    error: ProviderError,
}

fn parse_response(
    stdout: &[u8],
    api_version: &str,
    operation: &str,
    request_id: &str,
    secrets: &BTreeMap<String, String>,
) -> Result<Response, String> {
    let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_string())?;
    if text.trim().is_empty() {
        return Err("stdout is empty (one JSON response is required)".to_string());
    }
    let mut v: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("stdout is not one JSON object: {e}"))?;
    // A secret is never in stdout; one that is anyway goes no further (errors are logged).
    redact_value(&mut v, secrets);
    let o = v
        .as_object()
        .ok_or_else(|| "stdout is JSON but not an object".to_string())?;
    let field = |k: &str| o.get(k).and_then(Value::as_str);
    if field("kind") != Some("ProviderResponse") {
        return Err("kind: must be \"ProviderResponse\"".to_string());
    }
    if field("apiVersion") != Some(api_version) {
        return Err(format!(
            "apiVersion: {:?} does not echo the request's {api_version:?}",
            o.get("apiVersion")
        ));
    }
    if field("operation") != Some(operation) {
        return Err(format!("operation: must echo {operation:?}"));
    }
    if field("requestId") != Some(request_id) {
        return Err(format!("requestId: must echo {request_id:?}"));
    }
    match field("status") {
        Some("Success") => Ok(Response {
            success: true,
            result: o.get("result").cloned().unwrap_or_else(|| json!({})),
            error: ProviderError::new(ProviderErrorCode::Internal, ""),
        }),
        Some("Failure") => {
            let e = o.get("error").and_then(Value::as_object);
            let e = e.ok_or_else(|| "error: a Failure must say what failed".to_string())?;
            let code = e.get("code").and_then(Value::as_str).unwrap_or("Internal");
            let message = e.get("message").and_then(Value::as_str).unwrap_or("");
            // The code's retry class decides (exec-provider.md, "Error codes"), whatever
            // `retryable` says.
            let mut p = ProviderError::new(ProviderError::code_named(code), message);
            p.retry_after_seconds = e.get("retryAfterSeconds").and_then(Value::as_u64);
            if let Some(pc) = e
                .get("details")
                .and_then(|d| d.get("providerCode"))
                .and_then(Value::as_str)
            {
                p.message = format!("{} [{pc}]", p.message);
            }
            Ok(Response {
                success: false,
                result: Value::Null,
                error: p,
            })
        }
        other => Err(format!("status: {other:?} is not Success or Failure")),
    }
}

/// Every string in `v` with the secrets' values replaced.
fn redact_value(v: &mut Value, secrets: &BTreeMap<String, String>) {
    match v {
        Value::String(s) => {
            if secrets
                .values()
                .any(|x| !x.is_empty() && s.contains(x.as_str()))
            {
                *s = ExecProvider::redact(s, secrets);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact_value(x, secrets)),
        Value::Object(o) => o.values_mut().for_each(|x| redact_value(x, secrets)),
        _ => {}
    }
}

/// Where `v` (`exec.waverun.dev/vN[alphaM|betaM]`) sorts among versions: major, then GA over
/// beta over alpha, then the pre-release's number.
fn version_rank(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix("exec.waverun.dev/v")?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major = rest[..end].parse().ok()?;
    let tail = &rest[end..];
    let (stability, n) = if tail.is_empty() {
        (2, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (1, n.parse().ok()?)
    } else {
        (0, tail.strip_prefix("alpha")?.parse().ok()?)
    };
    Some((major, stability, n))
}

/// The highest version both this daemon and the command speak.
fn negotiate(offered: &[&str]) -> Option<&'static str> {
    SPOKEN
        .iter()
        .copied()
        .filter(|v| offered.contains(v))
        .max_by_key(|v| version_rank(v))
}

/// `capabilities`' result: the operations, upgrade types and features declared, and
/// `maxConcurrency`. A field left out restricts nothing; a malformed one is an error (its
/// path and why).
fn parse_capabilities(caps: &Value) -> Result<Capabilities, String> {
    let set = |key: &str| -> Result<Option<BTreeSet<String>>, String> {
        match caps.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<BTreeSet<String>>>()
                .map(Some)
                .ok_or_else(|| format!("{key}: must be a list of strings")),
            Some(_) => Err(format!("{key}: must be a list of strings")),
        }
    };
    let max_concurrency = match caps.get("maxConcurrency") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return Err(format!("maxConcurrency: {v} is not a positive integer")),
        },
    };
    let operations = set("operations")?;
    if let Some(ops) = &operations {
        let missing: Vec<&str> = REQUIRED_OPERATIONS
            .into_iter()
            .filter(|o| !ops.contains(*o))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "operations: {missing:?} missing; the daemon needs {REQUIRED_OPERATIONS:?}"
            ));
        }
    }
    Ok(Capabilities {
        operations,
        upgrade_types: set("upgradeTypes")?,
        features: set("features")?,
        max_concurrency,
    })
}

/// What a non-zero exit without a response means (`None`: a protocol error).
fn exit_error(code: i32, _operation: &str) -> Option<ProviderErrorCode> {
    match code {
        1 => Some(ProviderErrorCode::Internal),
        2 => None,
        3 => Some(ProviderErrorCode::Unsupported),
        75 => Some(ProviderErrorCode::Unavailable),
        77 => Some(ProviderErrorCode::PermissionDenied),
        78 => Some(ProviderErrorCode::InvalidRequest),
        _ => Some(ProviderErrorCode::Internal),
    }
}

pub(crate) fn exit_text(s: std::process::ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited {c}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "ended".to_string(),
    }
}

pub(crate) fn last_line(text: &str) -> String {
    let line = text.trim_end().lines().last().unwrap_or("").trim();
    line.chars().take(300).collect()
}

/// One call's pipes to its command, served from the calling thread alone with poll(2) (no
/// helper threads, which a command could leave blocked forever): the request is fed to stdin as
/// fast as the command reads it, stdout is kept up to the limit and read on past it (so the
/// command is never blocked on a full pipe), and the tail of stderr is kept. Every pipe is
/// closed when this is dropped.
struct Pipes {
    stdin: Option<File>,
    request: Vec<u8>,
    sent: usize,
    stdout: Option<File>,
    out: Vec<u8>,
    limit: usize,
    read_failed: bool,
    stderr: Option<File>,
    tail: Vec<u8>,
}

/// What a command wrote before it exited.
pub(crate) struct Output {
    /// Stdout, cut one byte past the limit (longer than the limit: over it).
    pub(crate) stdout: Vec<u8>,
    /// Reading stdout failed.
    pub(crate) read_failed: bool,
    /// The last [`STDERR_TAIL`] bytes of stderr.
    pub(crate) stderr: Vec<u8>,
    /// After the command exited, a process still held stdout or stderr open.
    pub(crate) held_open: bool,
}

/// Bytes read from one pipe per wake-up, so that a command writing without pause cannot keep
/// the call from checking whether it exited.
const READ_BUDGET: usize = 64 * 1024;

impl Pipes {
    /// Takes the child's piped stdin, stdout and stderr, made non-blocking.
    fn take(child: &mut Child, request: Vec<u8>, limit: usize) -> std::io::Result<Pipes> {
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        Ok(Pipes {
            stdin: Some(nonblocking(stdin.into())?),
            request,
            sent: 0,
            stdout: Some(nonblocking(stdout.into())?),
            out: Vec::new(),
            limit,
            read_failed: false,
            stderr: Some(nonblocking(stderr.into())?),
            tail: Vec::new(),
        })
    }

    /// Feeds and reads the pipes until the child exits (its status) or `end` (`None`).
    fn serve(&mut self, child: &mut Child, end: Instant) -> Option<ExitStatus> {
        let mut pause = Duration::from_millis(1);
        loop {
            if let Ok(Some(s)) = child.try_wait() {
                return Some(s);
            }
            let now = Instant::now();
            if now >= end {
                return None;
            }
            // poll(2) wakes on the pipes, not on the child's exit: its timeout is also how often
            // the child is looked at (from 1 ms, doubling to 20 ms while nothing happens).
            let wait = pause.min(end - now);
            let ms =
                libc::c_int::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
            let mut fds = [
                poll_fd(&self.stdin, libc::POLLOUT),
                poll_fd(&self.stdout, libc::POLLIN),
                poll_fd(&self.stderr, libc::POLLIN),
            ];
            // SAFETY: `fds` is a live array of that many pollfds; a closed pipe's fd is -1,
            // which poll(2) skips.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if ready <= 0 {
                if ready < 0 && std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                    // Never spin on a poll that fails at once.
                    std::thread::sleep(wait);
                }
                pause = (pause * 2).min(Duration::from_millis(20));
                continue;
            }
            pause = Duration::from_millis(1);
            if fds[0].revents != 0 {
                self.feed();
            }
            if fds[1].revents != 0 {
                self.read_stdout(READ_BUDGET);
            }
            if fds[2].revents != 0 {
                self.read_stderr(READ_BUDGET);
            }
        }
    }

    /// Writes as much of the request as stdin takes now; closes stdin once it is all written
    /// (the command reads to EOF) or the command closed its end.
    fn feed(&mut self) {
        let Some(stdin) = &mut self.stdin else {
            return;
        };
        while self.sent < self.request.len() {
            match stdin.write(&self.request[self.sent..]) {
                Ok(0) => break,
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // EPIPE: the command reads no more.
                Err(_) => break,
            }
        }
        self.stdin = None;
    }

    fn read_stdout(&mut self, budget: usize) {
        let (out, limit) = (&mut self.out, self.limit);
        let read = read_ready(&mut self.stdout, budget, &mut |bytes| {
            // One byte past the limit says it is over; the rest is read and dropped.
            let room = (limit + 1).saturating_sub(out.len());
            out.extend_from_slice(&bytes[..bytes.len().min(room)]);
        });
        self.read_failed |= read.is_err();
    }

    fn read_stderr(&mut self, budget: usize) {
        let tail = &mut self.tail;
        let _ = read_ready(&mut self.stderr, budget, &mut |bytes| {
            tail.extend_from_slice(bytes);
            if tail.len() > 2 * STDERR_TAIL {
                tail.drain(..tail.len() - STDERR_TAIL);
            }
        });
    }

    /// Once the command has exited (and its group was killed): takes what stdout and stderr
    /// hold at this moment, without waiting for them to close, and closes every pipe. A pipe
    /// whose write end is still open was kept by a process that outlives the command; anything
    /// it writes later is not part of the answer.
    fn drain(mut self) -> Output {
        self.stdin = None;
        let budget = self.stdout.as_ref().map_or(0, pending);
        self.read_stdout(budget);
        let budget = self.stderr.as_ref().map_or(0, pending);
        self.read_stderr(budget);
        if self.stdout.as_ref().is_some_and(hung_up) {
            // No writer is left: what remains (written since) is finite, and ends at EOF.
            self.read_stdout(usize::MAX);
        }
        if self.stderr.as_ref().is_some_and(hung_up) {
            self.read_stderr(usize::MAX);
        }
        let held_open = self.stdout.is_some() || self.stderr.is_some();
        let mut stderr = std::mem::take(&mut self.tail);
        if stderr.len() > STDERR_TAIL {
            stderr.drain(..stderr.len() - STDERR_TAIL);
        }
        Output {
            stdout: std::mem::take(&mut self.out),
            read_failed: self.read_failed,
            stderr,
            held_open,
        }
    }
}

/// `fd` as a file whose reads and writes never block (they fail with `WouldBlock`).
fn nonblocking(fd: OwnedFd) -> std::io::Result<File> {
    // SAFETY: fcntl(2) on a descriptor this process owns; it touches no memory.
    let set = unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        flags != -1 && libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) != -1
    };
    if set {
        Ok(File::from(fd))
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reads what `pipe` holds now without waiting, at most `budget` bytes, handing them to `keep`;
/// closes it at EOF, or on an error (returned).
fn read_ready(
    pipe: &mut Option<File>,
    budget: usize,
    keep: &mut dyn FnMut(&[u8]),
) -> std::io::Result<()> {
    let Some(file) = pipe else {
        return Ok(());
    };
    let mut chunk = [0u8; 8192];
    let mut taken = 0;
    while taken < budget {
        let want = chunk.len().min(budget - taken);
        match file.read(&mut chunk[..want]) {
            Ok(0) => {
                *pipe = None;
                return Ok(());
            }
            Ok(n) => {
                taken += n;
                keep(&chunk[..n]);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) => {
                *pipe = None;
                return Err(e);
            }
        }
    }
    Ok(())
}

fn poll_fd(pipe: &Option<File>, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd: pipe.as_ref().map_or(-1, |f| f.as_raw_fd()),
        events,
        revents: 0,
    }
}

/// The bytes `pipe` holds now (FIONREAD); when that cannot be asked, the most an unprivileged
/// process can make a pipe hold (Linux's default `pipe-max-size`, 1 MiB).
fn pending(pipe: &File) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int, to `n`.
    let asked =
        unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut n as *mut libc::c_int) };
    if asked == -1 {
        1 << 20
    } else {
        usize::try_from(n).unwrap_or(0)
    }
}

/// Whether no process holds the write end of `pipe` any more.
fn hung_up(pipe: &File) -> bool {
    let mut p = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    // SAFETY: one live pollfd; a zero timeout never waits. POLLHUP is reported unasked.
    let ready = unsafe { libc::poll(&mut p, 1, 0) };
    ready == 1 && p.revents & libc::POLLHUP != 0
}

fn signal_group(group: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group; it touches no memory.
    unsafe {
        libc::kill(-group, signal);
    }
}

/// SIGTERM to the group, `grace` to leave (its pipes still served, so it is not stuck writing
/// to a full one), then SIGKILL to the group; reaps the child.
fn kill_group(group: i32, child: &mut Child, grace: Duration, pipes: &mut Pipes) {
    signal_group(group, libc::SIGTERM);
    let _ = pipes.serve(child, Instant::now() + grace);
    signal_group(group, libc::SIGKILL);
    let _ = child.wait();
}

/// Makes `dir` readable by its owner only.
pub(crate) fn private(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
}

/// An upgrade as `start-upgrade` and `check` take it: `{type, controlPlane?: {version},
/// nodePools?: [{name, nodeImage: {version}}]}`.
fn upgrade_params(
    upgrade_type: waverun_core::UpgradeType,
    control_plane: Option<&str>,
    node_images: &[waverun_core::PoolImage],
) -> Value {
    let mut params = json!({ "type": upgrade_type });
    if let Some(v) = control_plane {
        params["controlPlane"] = json!({ "version": v });
    }
    if !node_images.is_empty() {
        params["nodePools"] = node_images
            .iter()
            .map(|i| json!({"name": i.node_pool, "nodeImage": {"version": i.image_version}}))
            .collect();
    }
    params
}

/// `check`'s result as a measurement: its verdict, message and values, or an `Error` naming
/// what is wrong with it.
fn check_measurement(name: &str, r: &Value) -> Measurement {
    let bad = |why: String| measurement_error(format!("{name}: check: result.{why}"));
    let Some(o) = r.as_object() else {
        return bad(" is not an object".to_string());
    };
    let verdict = match o.get("verdict").and_then(Value::as_str) {
        Some("Pass") => Verdict::Pass,
        Some("Fail") => Verdict::Fail,
        Some("Inconclusive") => Verdict::Inconclusive,
        Some(other) => {
            return bad(format!(
                "verdict: {other:?} is not Pass, Fail or Inconclusive"
            ))
        }
        None => return bad("verdict: is required (Pass, Fail or Inconclusive)".to_string()),
    };
    let values = match o.get("values") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, v) in items.iter().enumerate() {
                let value = match v.get("value") {
                    Some(Value::String(t)) => t.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => {
                        return bad(format!(
                            "values[{i}].value: is required (a number or a string)"
                        ))
                    }
                };
                let labels = text_at(v.as_object().unwrap_or(&Map::new()), "labels")
                    .unwrap_or_default()
                    .to_string();
                out.push(Sample { labels, value });
            }
            Some(out)
        }
        Some(_) => return bad("values: is not a list".to_string()),
    };
    Measurement {
        values,
        verdict: Some(verdict),
        message: Some(match text_at(o, "message") {
            Some(m) => format!("{name}: {m}"),
            None => format!("{name}: check: {verdict:?}"),
        }),
    }
}

fn phase_named(s: &str) -> OperationPhase {
    match s {
        "Pending" => OperationPhase::Pending,
        "Running" => OperationPhase::Running,
        "Succeeded" => OperationPhase::Succeeded,
        "Failed" => OperationPhase::Failed,
        "Canceled" | "Cancelled" => OperationPhase::Canceled,
        _ => OperationPhase::Unknown,
    }
}

fn bad_result(name: &str, operation: &str, why: String) -> ProviderError {
    ProviderError::new(
        ProviderErrorCode::Internal,
        format!("{name}: {operation}: result.{why}"),
    )
}

fn text_at<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

impl Provider for ExecProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn describe(&self, cluster: &ClusterTarget) -> Result<Described, ProviderError> {
        let name = &self.config.name;
        let r = self
            .call(
                "describe",
                Some(cluster),
                json!({}),
                self.config.timeouts.describe,
            )
            .map_err(|e| self.failure("describe", e))?;
        let bad = |why: &str| bad_result(name, "describe", why.to_string());
        let o = r.as_object().ok_or_else(|| bad(": must be an object"))?;
        let kubernetes_version = o
            .get("controlPlane")
            .and_then(|c| c.get("version"))
            .and_then(Value::as_str)
            .ok_or_else(|| bad("controlPlane.version: is required"))?
            .to_string();
        let region = text_at(o, "region")
            .map(str::to_string)
            .or_else(|| cluster.region.clone())
            .ok_or_else(|| bad("region: is required"))?;
        let mut node_pools = Vec::new();
        let pools = o
            .get("nodePools")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, p) in pools.iter().enumerate() {
            let pool_name = p.get("name").and_then(Value::as_str);
            let pool_name =
                pool_name.ok_or_else(|| bad(&format!("nodePools[{i}].name: is required")))?;
            let os_type = match p
                .get("os")
                .or_else(|| p.get("osType"))
                .and_then(Value::as_str)
            {
                Some("Windows") => OsType::Windows,
                Some("Linux") | None => OsType::Linux,
                Some(other) => {
                    return Err(bad(&format!(
                        "nodePools[{i}].os: {other:?} is not Linux or Windows"
                    )))
                }
            };
            let image = p.pointer("/nodeImage/version").and_then(Value::as_str);
            let image = image
                .ok_or_else(|| bad(&format!("nodePools[{i}].nodeImage.version: is required")))?;
            node_pools.push(NodePool {
                name: pool_name.to_string(),
                os_type,
                image_version: image.to_string(),
                from_snapshot: p
                    .get("fromSnapshot")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
        }
        let maintenance = match o.get("maintenance") {
            None | Some(Value::Null) => None,
            Some(m) => Some(
                serde_json::from_value::<Maintenance>(m.clone())
                    .map_err(|e| bad(&format!("maintenance: {e}")))?,
            ),
        };
        let labels = match o.get("labels") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(l) => {
                serde_json::from_value(l.clone()).map_err(|e| bad(&format!("labels: {e}")))?
            }
        };
        Ok(Described {
            kubernetes_version,
            node_pools,
            region,
            busy: o.get("busy").and_then(Value::as_bool).unwrap_or(false),
            power_state: text_at(o, "powerState").map(str::to_string),
            maintenance,
            labels,
        })
    }

    fn start_upgrade(
        &self,
        cluster: &ClusterTarget,
        request: &UpgradeRequest,
    ) -> Result<Started, ProviderError> {
        let upgrade_type = json!(request.upgrade_type);
        let type_name = upgrade_type.as_str().unwrap_or_default();
        if let Some(types) = &self.caps.upgrade_types {
            if !types.contains(type_name) {
                return Err(self.unsupported(
                    "start-upgrade",
                    format!("upgrade type {type_name} is not supported (the provider's capabilities declare {types:?})"),
                ));
            }
        }
        if let (false, Some(features)) = (request.node_images.is_empty(), &self.caps.features) {
            if !features.contains(NODE_IMAGE_PINNING) {
                let images: Vec<&str> = request
                    .node_images
                    .iter()
                    .map(|i| i.image_version.as_str())
                    .collect();
                return Err(self.unsupported(
                    "start-upgrade",
                    format!("node images {images:?} cannot be pinned: the provider's capabilities do not declare {NODE_IMAGE_PINNING:?}"),
                ));
            }
        }
        let mut params = upgrade_params(
            request.upgrade_type,
            request.control_plane.as_deref(),
            &request.node_images,
        );
        params["idempotencyKey"] = json!(request.idempotency_key);
        // At most one mutating call in flight per cluster.
        let _mutating = self
            .limits
            .enter(&format!("start-upgrade {}", cluster.member), 1);
        let r = self
            .call(
                "start-upgrade",
                Some(cluster),
                params,
                self.config.timeouts.start_upgrade,
            )
            .map_err(|e| self.uncertain("start-upgrade", e))?;
        let o = r.as_object().cloned().unwrap_or_default();
        let operation_id = text_at(&o, "operationId").map(str::to_string);
        let Some(operation_id) = operation_id else {
            // It said Success but not which operation: as unknown as a crash.
            let mut p = bad_result(
                &self.config.name,
                "start-upgrade",
                "operationId: is required".to_string(),
            );
            p.uncertain = true;
            p.retryable = true;
            return Err(p);
        };
        let already = o
            .get("alreadyAtTarget")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let phase = if already {
            OperationPhase::Succeeded
        } else {
            text_at(&o, "state").map_or(OperationPhase::Pending, phase_named)
        };
        Ok(Started {
            operation_id,
            phase,
            already_at_target: already,
            poll_after_seconds: o
                .get("pollAfterSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(30),
        })
    }

    fn list_releases(&self, region: &str) -> Result<Releases, ProviderError> {
        let params = json!({ "region": region });
        let r = self
            .call("list-releases", None, params, self.config.timeouts.describe)
            .map_err(|e| self.failure("list-releases", e))?;
        let list = |key: &str| -> Vec<Release> {
            let items = r
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let flag = |v: &Value, k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
            let mut out: Vec<Release> = items
                .iter()
                .filter_map(|v| {
                    Some(Release {
                        version: v.get("version")?.as_str()?.to_string(),
                        since: v
                            .get("availableSince")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        preview: flag(v, "preview"),
                        security_patch: flag(v, "securityPatch"),
                    })
                })
                .collect();
            out.sort();
            out
        };
        Ok(Releases {
            kubernetes: list("kubernetesVersions"),
            node_images: list("nodeImages"),
        })
    }

    fn get_operation(
        &self,
        cluster: &ClusterTarget,
        idempotency_key: &str,
    ) -> Result<OperationReport, ProviderError> {
        self.get_operation_by_id(cluster, idempotency_key, None)
    }

    /// `describe`'s pre-flight (stopped or busy fails), then `check`'s when the command has it.
    fn preflight(
        &self,
        cluster: &ClusterTarget,
        upgrade: Option<&waverun_core::UpgradeOperation>,
        timeout: Duration,
    ) -> Measurement {
        let started = Instant::now();
        let described = match self.describe(cluster) {
            Ok(d) => preflight_of(&cluster.member, &d),
            Err(e) => return measurement_error(format!("pre-flight: {e}")),
        };
        if described.verdict != Some(Verdict::Pass) || !self.checks() {
            return described;
        }
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return measurement_error(format!(
                "{}: pre-flight: describe took the check's whole timeout ({} s)",
                self.config.name,
                timeout.as_secs()
            ));
        }
        self.check(cluster, "preflight", upgrade, left)
    }

    /// `check`'s answer; a command without `check` has no health check (an `Error`).
    fn health(&self, cluster: &ClusterTarget, timeout: Duration) -> Measurement {
        if !self.checks() {
            return measurement_error(format!(
                "provider {} has no health check: its capabilities do not list {CHECK:?}",
                self.config.name
            ));
        }
        self.check(cluster, "health", None, timeout)
    }

    fn get_operation_by_id(
        &self,
        cluster: &ClusterTarget,
        idempotency_key: &str,
        operation_id: Option<&str>,
    ) -> Result<OperationReport, ProviderError> {
        let mut params = json!({ "idempotencyKey": idempotency_key });
        if let Some(id) = operation_id {
            params["operationId"] = json!(id);
        }
        let r = self
            .call(
                "get-operation",
                Some(cluster),
                params,
                self.config.timeouts.get_operation,
            )
            .map_err(|e| self.failure("get-operation", e))?;
        let o = r.as_object().cloned().unwrap_or_default();
        let message = text_at(&o, "message").map(str::to_string).or_else(|| {
            o.get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        Ok(OperationReport {
            operation_id: text_at(&o, "operationId")
                .or(operation_id)
                .unwrap_or(idempotency_key)
                .to_string(),
            phase: text_at(&o, "state").map_or(OperationPhase::Unknown, phase_named),
            message,
            poll_after_seconds: o
                .get("pollAfterSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(30),
        })
    }
}
