//! The human-readable form of a simulation report: the timeline, the final tree of each run,
//! the summary.

use super::report::{RunReport, SimulationReport};
use crate::event::Event;
use crate::event::EventKind;
use crate::state::{GateStatus, NodeStatus};
use crate::time::fmt_time;
use std::fmt::Write;

/// Renders a report for a terminal.
pub fn render_text(r: &SimulationReport) -> String {
    let mut out = String::new();
    out.push_str("Timeline\n");
    // With profiles there are several runs: each line names its run first.
    let many = !r.runs.is_empty();
    for e in &r.timeline {
        let _ = writeln!(out, "  {}", render_line(e, many));
    }
    let runs = r.all_runs();
    if runs.is_empty() {
        out.push_str("\nNo run: no release moved a profile's target, and the scenario has no run of its own.\n");
    }
    for run in runs {
        render_run(&mut out, run);
    }
    let sm = &r.summary;
    let _ = writeln!(
        out,
        "\nSummary: {:?}; started {}, finished {}, makespan {}; members: {} completed, {} failed, {} skipped, {} pending",
        sm.state,
        sm.started_at.map(fmt_time).unwrap_or_else(|| "-".into()),
        sm.finished_at.map(fmt_time).unwrap_or_else(|| "-".into()),
        sm.makespan_seconds.map(duration).unwrap_or_else(|| "-".into()),
        sm.members_completed,
        sm.members_failed,
        sm.members_skipped,
        sm.members_pending
    );
    out
}

/// One run's final tree.
fn render_run(out: &mut String, run: &RunReport) {
    let s = &run.status;
    let by = run
        .auto_upgrade_profile_name
        .as_ref()
        .map(|p| format!(" (profile {p})"))
        .unwrap_or_default();
    let _ = writeln!(out, "\nRun {}{by}: {}", run.name, node(&s.status));
    let _ = writeln!(out, "  failures: {}", s.failure_count);
    if let Some(sel) = &s.node_image_selection {
        let _ = writeln!(
            out,
            "  selected node images: {}",
            sel.selected_node_image_versions.join(", ")
        );
    }
    if let Some(w) = &s.waiting_on {
        let _ = writeln!(out, "  waiting on: {}", waiting(w));
    }
    for st in &s.stages {
        let _ = writeln!(
            out,
            "  stage {}: {}  [maxConcurrency {}, maxAllowedFailures {}, failures {}]",
            st.name,
            node(&st.status),
            st.max_concurrency,
            st.max_allowed_failures,
            st.failure_count
        );
        if let Some(w) = &st.waiting_on {
            let _ = writeln!(out, "    waiting on: {}", waiting(w));
        }
        gates(out, "    ", &st.before_gates);
        for g in &st.groups {
            let _ = writeln!(
                out,
                "    group {}: {}  [maxConcurrency {}, maxAllowedFailures {}, failures {}]",
                g.name,
                node(&g.status),
                g.max_concurrency,
                g.max_allowed_failures,
                g.failure_count
            );
            if let Some(w) = &g.waiting_on {
                let _ = writeln!(out, "      waiting on: {}", waiting(w));
            }
            gates(out, "      ", &g.before_gates);
            for m in &g.members {
                let mut plain = m.status.clone();
                let error = plain.error.take();
                let mut line = format!("      {}: {}", m.name, node(&plain));
                if let Some(msg) = m
                    .message
                    .as_ref()
                    .filter(|msg| error.as_ref().is_none_or(|e| &e.message != *msg))
                {
                    let _ = write!(line, "  ({msg})");
                }
                if let Some(e) = &error {
                    let _ = write!(line, "  error {}: {}", e.code, e.message);
                }
                let _ = writeln!(out, "{line}");
            }
            gates(out, "      ", &g.after_gates);
        }
        gates(out, "    ", &st.after_gates);
        let w = &st.after_stage_wait_status;
        if w.wait_duration_in_seconds > 0 {
            let _ = writeln!(
                out,
                "    after-stage wait {}s: {}",
                w.wait_duration_in_seconds,
                node(&w.status)
            );
        }
    }
}

/// One timeline line: time, kind, `stage/group/member`, and what the event says (gate, versions,
/// reason and until, error, action).
pub fn timeline_line(e: &Event) -> String {
    render_line(e, false)
}

fn render_line(e: &Event, with_run: bool) -> String {
    let run = (with_run && !e.run.is_empty()).then_some(e.run.as_str());
    let path: Vec<&str> = [run, e.stage(), e.group(), e.member()]
        .into_iter()
        .flatten()
        .collect();
    let mut line = format!(
        "{}  {:<24}{}",
        fmt_time(e.at),
        format!("{:?}", e.kind()),
        path.join("/")
    )
    .trim_end()
    .to_string();
    if let (Some(t), Some(g)) = (e.gate_type(), e.timing()) {
        let _ = write!(line, "  {t:?} gate ({g:?})");
    }
    if let Some(c) = e.check() {
        let _ = write!(line, "  check {c}");
        if let Some(v) = e.verdict() {
            let _ = write!(line, " {v:?}");
        }
        if let Some(v) = e.value() {
            let _ = write!(line, " ({v})");
        }
        if let (EventKind::CheckCompleted, Some(m)) = (e.kind(), e.message()) {
            let _ = write!(line, ": {m}");
        }
    }
    if let (EventKind::GateFailed, Some(m)) = (e.kind(), e.message()) {
        let _ = write!(line, " by {}: {m}", e.by().unwrap_or_default());
    }
    if let Some(v) = e.kubernetes_version() {
        let _ = write!(line, "  kubernetes {v}");
    }
    for p in e.node_images() {
        let _ = write!(line, "  {}={}", p.node_pool, p.image_version);
    }
    if let Some(r) = e.reason() {
        let _ = write!(line, "  {r:?}");
    }
    if let Some(u) = e.until() {
        let _ = write!(line, " until {}", fmt_time(u));
    }
    if let Some(err) = e.error() {
        let _ = write!(line, "  {}: {}", err.code, err.message);
    }
    if let Some(a) = e.action() {
        let _ = write!(line, "  {a}");
    }
    if let Some(p) = e.profile() {
        let _ = write!(line, "  profile {p}: {}", e.versions().join(", "));
        if let Some(m) = e.message() {
            let _ = write!(line, " ({m})");
        }
    }
    line
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
    if let Some(e) = &n.error {
        let _ = write!(s, " [{}: {}]", e.code, e.message);
    }
    s
}

fn gates(out: &mut String, indent: &str, gs: &[GateStatus]) {
    for g in gs {
        let _ = write!(
            out,
            "{indent}{:?} gate {:?}{}: {}",
            g.timing,
            g.gate_type,
            g.display_name
                .as_ref()
                .map(|d| format!(" \"{d}\""))
                .unwrap_or_default(),
            node(&g.status)
        );
        if let Some(t) = g.absolute_start_time {
            let _ = write!(out, " (opens {})", fmt_time(t));
        }
        if let Some(c) = &g.check {
            let _ = write!(
                out,
                " (check \"{}\": {} of {} measured",
                c.name, c.taken, c.count
            );
            if let Some(v) = c.verdict {
                let _ = write!(out, ", {v:?}");
            }
            let _ = write!(out, ")");
        }
        if let Some(b) = &g.completed_by {
            let _ = write!(out, " by {b}");
        }
        out.push('\n');
    }
}

fn waiting(w: &crate::state::WaitingOn) -> String {
    let mut s = format!("{:?}", w.reason);
    if let Some(u) = w.until {
        let _ = write!(s, " until {}", fmt_time(u));
    }
    if let Some(m) = &w.message {
        let _ = write!(s, " ({m})");
    }
    s
}

fn duration(secs: i64) -> String {
    let (d, h, m, s) = (
        secs / 86400,
        secs % 86400 / 3600,
        secs % 3600 / 60,
        secs % 60,
    );
    let mut out = String::new();
    if d > 0 {
        let _ = write!(out, "{d}d");
    }
    if h > 0 || d > 0 {
        let _ = write!(out, "{h}h");
    }
    let _ = write!(out, "{m}m");
    if s > 0 {
        let _ = write!(out, "{s}s");
    }
    out
}
