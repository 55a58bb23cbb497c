//! The human-readable form of a run's plan (`waverun plan`): stages, groups and members with
//! their actions, the gates needing a human, the members that will fail, warnings and
//! unassigned members. The plan's counterpart of [`crate::sim::render_text`]; no I/O, it
//! returns the text.

use crate::plan::Plan;
use crate::profile::ProfilePlan;
use std::fmt::Write;

/// Renders a plan for a terminal (what `waverun plan FILE` prints).
pub fn render_text(p: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan of run {}: {} members to upgrade, {} to skip",
        p.run, p.members_to_upgrade, p.members_to_skip
    );
    if !p.selected_node_image_versions.is_empty() {
        let _ = writeln!(
            out,
            "Selected node images (Consistent): {}",
            p.selected_node_image_versions.join(", ")
        );
    }
    for s in &p.stages {
        let _ = writeln!(
            out,
            "stage {}  [maxConcurrency {}, maxAllowedFailures {}, after-stage wait {}s]",
            s.name, s.max_concurrency, s.max_allowed_failures, s.after_stage_wait_in_seconds
        );
        for g in &s.groups {
            let _ = writeln!(
                out,
                "  group {}  [maxConcurrency {}, maxAllowedFailures {}] {} members",
                g.name,
                g.max_concurrency,
                g.max_allowed_failures,
                g.members.len()
            );
            if let Some(p) = &g.preflight {
                let extra = if p.checks.is_empty() {
                    String::new()
                } else {
                    format!(" and {}", p.checks.join(", "))
                };
                let _ = writeln!(
                    out,
                    "    pre-flight: the provider's{extra}; on failure {:?}",
                    p.policy
                );
            }
            if let Some(c) = &g.after_member_checks {
                let _ = writeln!(
                    out,
                    "    after each member: soak {}s, then {} (at least {}s per member)",
                    c.soak_seconds,
                    c.checks.join(", "),
                    c.added_seconds
                );
            }
            for m in &g.members {
                let mut line = format!("    {} ({}): {}", m.name, m.region, m.action);
                if let Some(v) = &m.kubernetes_version {
                    let _ = write!(line, " kubernetes {v}");
                }
                for i in &m.node_images {
                    let _ = write!(line, " {}={}", i.node_pool, i.image_version);
                }
                if let Some(msg) = &m.message {
                    let _ = write!(line, "  ({msg})");
                }
                let _ = writeln!(out, "{line}");
            }
        }
    }
    let checked: Vec<_> = p
        .gates
        .iter()
        .filter(|g| g.health_check.is_some())
        .collect();
    if !checked.is_empty() {
        let _ = writeln!(
            out,
            "Health-check gates (a person decides when inconclusive):"
        );
        for g in checked {
            let _ = writeln!(
                out,
                "  {:?} {}{}: check {}",
                g.timing,
                g.stage,
                g.group
                    .as_ref()
                    .map(|x| format!("/{x}"))
                    .unwrap_or_default(),
                g.health_check.as_deref().unwrap_or_default()
            );
        }
    }
    let human: Vec<_> = p.gates.iter().filter(|g| g.needs_human).collect();
    if !human.is_empty() {
        let _ = writeln!(out, "Gates needing a human:");
        for g in human {
            let _ = writeln!(
                out,
                "  {:?} {}{}{}",
                g.timing,
                g.stage,
                g.group
                    .as_ref()
                    .map(|x| format!("/{x}"))
                    .unwrap_or_default(),
                g.display_name
                    .as_ref()
                    .map(|d| format!(" \"{d}\""))
                    .unwrap_or_default()
            );
        }
    }
    if !p.will_fail.is_empty() {
        let _ = writeln!(
            out,
            "Will fail without a cluster call (minor version skip): {}",
            p.will_fail.join(", ")
        );
    }
    for w in &p.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if p.unassigned.is_empty() {
        let _ = writeln!(out, "Unassigned members: none");
    } else {
        let _ = writeln!(
            out,
            "Unassigned members (not in the run): {}",
            p.unassigned.join(", ")
        );
    }
    out
}

/// Renders what an auto-upgrade profile would generate now, with that run's plan.
pub fn render_profile_plan(p: &ProfilePlan) -> String {
    let mut out = String::new();
    let disabled = if p.disabled { ", disabled" } else { "" };
    let target = if p.versions.is_empty() {
        "no target".to_string()
    } else {
        format!("targets {}", p.versions.join(", "))
    };
    let _ = writeln!(
        out,
        "Profile {} ({:?}{disabled}): {target}; {}",
        p.profile, p.channel, p.message
    );
    if let Some(plan) = &p.plan {
        for line in render_text(plan).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}
