//! `exec` checks: the check's command (template variables replaced in each argument; no
//! shell) under the exec provider's process rules (`providers::exec::run_in_session`: a
//! session and process group of its own, SIGTERM to the group at the deadline, SIGKILL after a
//! grace period), with an environment built from scratch: `PATH`, a private `HOME` and
//! `TMPDIR`, `LANG`, and `WAVERUN_RUN`, `WAVERUN_STAGE`, `WAVERUN_GROUP`, `WAVERUN_MEMBER`
//! (the first member), `WAVERUN_MEASUREMENT_ID`. The request ([`CheckRequest`] as JSON) is
//! on stdin.
//!
//! What it owns: which programs may run — only those of the daemon's `healthChecks.exec.allow`
//! (strategies come from API users: a program not listed never runs) — and the exit read as a
//! verdict: **0 passes, 1 fails, 3 is inconclusive**; any other code, a signal, the deadline or a
//! program that cannot start is an error. (2 is left out on purpose: shells and many tools exit
//! 2 for a usage error.) The message is the last non-empty line of stdout, or on an error the
//! last line of stderr.

use super::template::{self, Target};
use super::{error, verdict, Shared, EXEC_GRACE};
use crate::providers::exec::{exit_text, last_line, private, run_in_session, Ran, RunError};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;
use waverun_core::health::{ExecCheck, Measurement, Verdict};
use waverun_core::CheckRequest;

/// The most of stdout kept (bytes); only its last line is used.
const MAX_STDOUT: usize = 64 * 1024;

/// Runs `check`'s command for `req`, killed at `timeout`.
pub(super) fn measure(
    shared: &Shared,
    req: &CheckRequest,
    check: &ExecCheck,
    timeout: Duration,
) -> Measurement {
    let Some(program) = check.command.first() else {
        return error("exec.command: names no program");
    };
    if !shared
        .config
        .exec
        .allow
        .iter()
        .any(|allowed| allowed.as_path() == Path::new(program))
    {
        return error(format!(
            "exec.command[0]: {program:?} is not a program the daemon's config allows \
             (healthChecks.exec.allow)"
        ));
    }
    let mut args = Vec::with_capacity(check.command.len() - 1);
    for (i, a) in check.command.iter().enumerate().skip(1) {
        match template::render(a, req, Target::Argument) {
            Ok(a) => args.push(a),
            Err(e) => return error(format!("exec.command[{i}]: {e}")),
        }
    }
    let n = shared.runs.fetch_add(1, Ordering::Relaxed);
    let tmp = shared
        .state_dir
        .join("tmp")
        .join(format!("{}-{n}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&tmp) {
        return error(format!("exec: {}: {e}", tmp.display()));
    }
    private(&tmp);
    let mut cmd = Command::new(program);
    cmd.args(&args).env_clear();
    cmd.env(
        "PATH",
        std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_string()),
    )
    .env("HOME", shared.state_dir.join("home"))
    .env("TMPDIR", &tmp)
    .env("LANG", "C.UTF-8")
    .env("WAVERUN_RUN", &req.run)
    .env("WAVERUN_STAGE", &req.stage)
    .env("WAVERUN_GROUP", req.group.as_deref().unwrap_or(""))
    .env(
        "WAVERUN_MEMBER",
        req.members.first().map_or("", |m| m.name.as_str()),
    )
    .env("WAVERUN_MEASUREMENT_ID", &req.measurement_id)
    .env("WAVERUN_NONINTERACTIVE", "1")
    .current_dir(shared.state_dir.join("home"));
    let stdin = serde_json::to_vec(req).unwrap_or_default();
    let ran = run_in_session(&mut cmd, stdin, MAX_STDOUT, timeout, EXEC_GRACE);
    let _ = std::fs::remove_dir_all(&tmp);
    let (status, out) = match ran {
        Ok(Ran::Exited(status, out)) => (status, out),
        Ok(Ran::TimedOut) => {
            return error(format!(
                "{program}: no result within {} s; its process group was killed",
                timeout.as_secs()
            ))
        }
        Err(RunError::Spawn(e)) => return error(format!("{program}: cannot run: {e}")),
        Err(RunError::Pipes(e)) => return error(format!("{program}: its pipes: {e}")),
    };
    let said = last_line(&String::from_utf8_lossy(&out.stdout));
    let said = (!said.is_empty()).then_some(said);
    match status.code() {
        Some(0) => verdict(Verdict::Pass, said),
        Some(1) => verdict(Verdict::Fail, said),
        Some(3) => verdict(Verdict::Inconclusive, said),
        _ => {
            let stderr = last_line(&String::from_utf8_lossy(&out.stderr));
            let why = if !stderr.is_empty() {
                format!(" (stderr: {stderr})")
            } else {
                said.map(|s| format!(" ({s})")).unwrap_or_default()
            };
            error(format!("{program} {}{why}", exit_text(status)))
        }
    }
}
