//! An update run for people: its stages, groups and members with their states, progress bars
//! (done of total), resolved limits and failure counts, what each waiting node waits on and for
//! how long, and the gates that need a human with the command that approves them. `show -o
//! table` prints it once; `watch` redraws it on every event.

use serde_json::Value;
use std::fmt::Write;
use waverun_core::state::{CheckStatus, GateStatus, NodeStatus, RunStatus, State, WaitingOn};
use waverun_core::{GateType, Timestamp};

/// The fleet's clock as the daemon reported it: what "now" is in fleet time, and how fast it
/// runs (so a countdown in fleet time can be told in real time too).
#[derive(Clone, Copy, Debug)]
pub struct FleetNow {
    /// Fleet time now.
    pub now: Timestamp,
    /// Fleet seconds per real second.
    pub scale: f64,
}

/// What the tree needs besides the status: the run's name, what it upgrades to, and the
/// command prefix that approves a gate (`waverun gate approve ...`).
pub struct RunView<'a> {
    /// The run's name.
    pub name: &'a str,
    /// The flattened run resource (`managedClusterUpdate`, `status`, ...).
    pub run: &'a Value,
    /// The status tree.
    pub status: &'a RunStatus,
    /// Now, when known (countdowns).
    pub now: Option<FleetNow>,
    /// The approve command for a gate id (the CLI's global flags included).
    pub approve: &'a dyn Fn(&str) -> String,
    /// The forecast's expected finish of the run, when known.
    pub expected_finish: Option<String>,
    /// Groups that are not moving (not started, done) show their members as counts by
    /// state, not one line each: for a live view that must fit a terminal.
    pub compact: bool,
}

fn fmt_time(t: Timestamp) -> String {
    waverun_core::time::fmt_time(t)
}

/// `3d4h`, `2h05m`, `4m10s`, `12s`.
pub fn span(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// ` (in 2h05m)`, with the real time when the fleet clock is scaled: ` (in 2h05m; 4s real)`.
fn countdown(until: Timestamp, now: Option<FleetNow>) -> String {
    let Some(n) = now else {
        return String::new();
    };
    let secs = (until - n.now).num_seconds();
    if secs <= 0 {
        return " (due now)".to_string();
    }
    if (n.scale - 1.0).abs() < f64::EPSILON {
        format!(" (in {})", span(secs))
    } else {
        let real = (secs as f64 / n.scale).ceil() as i64;
        format!(" (in {} fleet time; {} real)", span(secs), span(real))
    }
}

/// `Freeze until 2026-12-24T00:00:00Z (in 3h) — fleet freeze "xmas"`.
pub fn waiting(w: &WaitingOn, now: Option<FleetNow>) -> String {
    let mut s = format!("{:?}", w.reason);
    if let Some(u) = w.until {
        let _ = write!(s, " until {}{}", fmt_time(u), countdown(u, now));
    }
    if let Some(m) = &w.message {
        let _ = write!(s, " — {m}");
    }
    s
}

fn state_mark(s: State) -> &'static str {
    match s {
        State::Completed => "✔",
        State::Failed => "✖",
        State::Skipped => "↷",
        State::Running => "▶",
        State::Pending => "…",
        State::Stopping | State::Stopped => "■",
        State::NotStarted => "·",
    }
}

fn node(n: &NodeStatus) -> String {
    let mut s = format!("{:?}", n.state);
    match (n.start_time, n.completed_time) {
        (Some(a), Some(b)) => {
            let _ = write!(s, " {} → {}", fmt_time(a), fmt_time(b));
        }
        (Some(a), None) => {
            let _ = write!(s, " since {}", fmt_time(a));
        }
        _ => {}
    }
    s
}

/// `▕██████░░░░▏ 6/10`.
pub fn bar(done: usize, total: usize) -> String {
    const WIDTH: usize = 10;
    let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH);
    format!(
        "▕{}{}▏ {done}/{total}",
        "█".repeat(filled),
        "░".repeat(WIDTH - filled)
    )
}

fn gate_lines(out: &mut String, indent: &str, gates: &[GateStatus], view: &RunView<'_>) {
    for g in gates {
        let name = g
            .display_name
            .as_deref()
            .map(|d| format!(" \"{d}\""))
            .unwrap_or_default();
        let _ = write!(
            out,
            "{indent}{} {:?} gate ({:?}){name}: {:?}",
            state_mark(g.status.state),
            g.gate_type,
            g.timing,
            g.status.state
        );
        if let Some(t) = g.absolute_start_time {
            let _ = write!(out, ", opens {}{}", fmt_time(t), countdown(t, view.now));
        }
        if let Some(b) = &g.completed_by {
            let _ = write!(out, ", by {b}");
        }
        out.push('\n');
        if let Some(c) = &g.check {
            let _ = writeln!(out, "{indent}    {}", check_line(c));
        }
        let for_person = g.gate_type == GateType::Approval
            || (g.gate_type == GateType::HealthCheck && g.check.is_some());
        if for_person && g.status.state == State::Pending {
            // The daemon gives the gate resource's id (`/fleets/F/gates/GUID`): its name is
            // the last segment.
            if let Some(name) = g.gate_id.as_deref().and_then(|id| id.rsplit('/').next()) {
                let approve = (view.approve)(name);
                let _ = writeln!(out, "{indent}    approve: {approve}");
                if g.gate_type == GateType::HealthCheck {
                    let fail = approve.replacen("gate approve", "gate fail", 1);
                    let _ = writeln!(out, "{indent}    fail:    {fail} --message WHY");
                }
            }
        }
    }
}

/// A check on one line: its name, source, progress, verdict and last measurement.
fn check_line(c: &CheckStatus) -> String {
    let mut line = format!(
        "check {}: {} ({} of {} measured",
        c.name, c.source, c.taken, c.count
    );
    if c.failed > 0 || c.inconclusive > 0 {
        let _ = write!(
            line,
            ", {} failed, {} inconclusive",
            c.failed, c.inconclusive
        );
    }
    line.push(')');
    if let Some(v) = c.verdict {
        let _ = write!(line, " → {v:?}");
    } else if let Some(t) = c.next_at {
        let _ = write!(line, ", next {}", fmt_time(t));
    }
    if let Some(m) = &c.last {
        let value = m
            .value
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let _ = write!(line, "; last {:?}{value} at {}", m.verdict, fmt_time(m.at));
        if let Some(msg) = &m.message {
            let _ = write!(line, ": {msg}");
        }
    }
    line
}

/// The whole tree.
pub fn render(view: &RunView<'_>) -> String {
    let s = view.status;
    let mut out = String::new();
    let upgrade = &view.run["managedClusterUpdate"]["upgrade"];
    let target = match upgrade["kubernetesVersion"].as_str() {
        Some(v) => format!(" → {v}"),
        None => String::new(),
    };
    let images = view.run["managedClusterUpdate"]["nodeImageSelection"]["type"]
        .as_str()
        .map(|t| format!(", node images {t}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Run {}: {}  [{}{target}{images}; failures {}]",
        view.name,
        node(&s.status),
        upgrade["type"].as_str().unwrap_or("?"),
        s.failure_count
    );
    if let Some(e) = &s.status.error {
        let _ = writeln!(out, "  error {}: {}", e.code, e.message);
    }
    if let Some(w) = &s.waiting_on {
        let _ = writeln!(out, "  waiting on: {}", waiting(w, view.now));
    }
    if let Some(f) = &view.expected_finish {
        let _ = writeln!(out, "  expected finish: {f} (forecast)");
    }
    if let Some(sel) = &s.node_image_selection {
        let _ = writeln!(
            out,
            "  selected node images: {}",
            sel.selected_node_image_versions.join(", ")
        );
    }
    for st in &s.stages {
        let members: Vec<_> = st.groups.iter().flat_map(|g| &g.members).collect();
        let done = members
            .iter()
            .filter(|m| m.status.state.is_terminal())
            .count();
        let _ = writeln!(
            out,
            "{} stage {}: {}  {}  [maxConcurrency {}, maxAllowedFailures {}, failures {}]",
            state_mark(st.status.state),
            st.name,
            node(&st.status),
            bar(done, members.len()),
            st.max_concurrency,
            st.max_allowed_failures,
            st.failure_count
        );
        if let Some(w) = &st.waiting_on {
            let _ = writeln!(out, "    waiting on: {}", waiting(w, view.now));
        }
        gate_lines(&mut out, "    ", &st.before_gates, view);
        for g in &st.groups {
            let done = g
                .members
                .iter()
                .filter(|m| m.status.state.is_terminal())
                .count();
            let _ = writeln!(
                out,
                "    {} group {}: {}  {}  [maxConcurrency {}, maxAllowedFailures {}, failures {}]",
                state_mark(g.status.state),
                g.name,
                node(&g.status),
                bar(done, g.members.len()),
                g.max_concurrency,
                g.max_allowed_failures,
                g.failure_count
            );
            if let Some(w) = &g.waiting_on {
                let _ = writeln!(out, "        waiting on: {}", waiting(w, view.now));
            }
            gate_lines(&mut out, "        ", &g.before_gates, view);
            let width = g.members.iter().map(|m| m.name.len()).max().unwrap_or(0);
            let active = matches!(
                g.status.state,
                State::Running | State::Pending | State::Stopping
            );
            if view.compact && !active && !g.members.is_empty() {
                // One line for a group that is not moving: its members counted by state, and
                // those that failed by name (they are what someone has to look at).
                let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
                for m in &g.members {
                    *counts.entry(format!("{:?}", m.status.state)).or_default() += 1;
                }
                let failed: Vec<&str> = g
                    .members
                    .iter()
                    .filter(|m| m.status.state == State::Failed)
                    .map(|m| m.name.as_str())
                    .collect();
                let mut line = format!(
                    "        members: {}",
                    counts
                        .iter()
                        .map(|(s, n)| format!("{n} {s}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if !failed.is_empty() {
                    let _ = write!(line, " (failed: {})", failed.join(", "));
                }
                let _ = writeln!(out, "{line}");
            }
            let listed = if view.compact && !active {
                &g.members[..0]
            } else {
                &g.members[..]
            };
            for m in listed {
                let mut line = format!(
                    "        {} {:<width$}  {}",
                    state_mark(m.status.state),
                    m.name,
                    node(&m.status)
                );
                if let Some(w) = &m.waiting_on {
                    let _ = write!(line, "  waiting on: {}", waiting(w, view.now));
                }
                if let Some(e) = &m.status.error {
                    let _ = write!(line, "  error {}: {}", e.code, e.message);
                } else if let Some(msg) = m.message.as_ref().filter(|_| m.waiting_on.is_none()) {
                    let _ = write!(line, "  ({msg})");
                }
                let _ = writeln!(out, "{}", line.trim_end());
                for c in &m.checks {
                    let _ = writeln!(out, "            {}", check_line(c));
                }
            }
            gate_lines(&mut out, "        ", &g.after_gates, view);
        }
        gate_lines(&mut out, "    ", &st.after_gates, view);
        let w = &st.after_stage_wait_status;
        if w.wait_duration_in_seconds > 0 {
            let mut line = format!(
                "    {} after-stage wait {}: {}",
                state_mark(w.status.state),
                span(w.wait_duration_in_seconds as i64),
                node(&w.status)
            );
            if let (State::Running, Some(start)) = (w.status.state, w.status.start_time) {
                let end = start + chrono::TimeDelta::seconds(w.wait_duration_in_seconds as i64);
                let _ = write!(line, ", ends {}{}", fmt_time(end), countdown(end, view.now));
            }
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
