//! Behaviour tests of the update-run engine (`waverun-core`), driven through its public input /
//! output interface on a virtual clock.
//!
//! Each test is named after the behaviour it shows and refers to the spec
//! (`shared/spec/update-runs.md`) or to a decision documented in `core/src/lib.rs`.
//! Events are compared as compact lines: `"HH:MM Kind subject [Reason] until HH:MM"`, where a
//! time on a later day reads `+Nd HH:MM` (day 0 is 2026-12-07, a Monday) and the subject is the
//! gate id, member, group, stage or run the event is about (the most specific one).
//! Helpers (the clock harness, fixtures, YAML / JSON helpers) are at the bottom of the file.

use chrono::{DateTime, Duration, Utc};
use serde::de::DeserializeOwned;
use waverun_core::plan::Plan;
use waverun_core::sim::{Scenario, Simulation};
use waverun_core::state::{GroupStatus, MemberStatus, StageStatus};
use waverun_core::PoolImage;
use waverun_core::{
    validate, Command, Engine, Error, ErrorCode, Event, Freeze, GateSelector, GateTiming,
    HostCommand, Input, ManagedClusterUpdate, Member, Observation, Output, Reason, ReleaseCatalog,
    RunStatus, SkipTarget, State, Timestamp, UpdateRunSpec, UpdateStrategy, UpgradeOperation,
    WakeReason,
};

// ==================================================================== allowed actions (spec §3)

#[test]
fn not_started_run_can_be_started_skipped_and_deleted_but_not_stopped() {
    let h = run_in("NotStarted");
    assert_eq!(h.state("r1"), State::NotStarted);

    let (mut c, r) = h.try_cmd(start_cmd("r1"));
    r.expect("start a NotStarted run");
    assert_eq!(c.state("r1"), State::Running);
    assert_eq!(c.take()[0], "00:00 RunStarted r1");

    let (_, r) = h.try_cmd(stop_cmd("r1"));
    assert_invalid_state(r, "NotStarted");

    let (_, r) = h.try_cmd(skip_cmd("r1", &["Member:m2"]));
    r.expect("skip in a NotStarted run");

    let (mut c, r) = h.try_cmd(delete_cmd("r1"));
    r.expect("delete a NotStarted run");
    assert_eq!(c.take(), ["00:00 RunDeleted r1"]);
    assert!(c.engine.run_state("r1").is_none());
}

#[test]
fn running_run_can_be_stopped_and_skipped_but_not_started_or_deleted() {
    let h = run_in("Running");
    assert_eq!(h.state("r1"), State::Running);

    let (_, r) = h.try_cmd(start_cmd("r1"));
    assert_invalid_state(r, "Running");

    let (c, r) = h.try_cmd(stop_cmd("r1"));
    r.expect("stop a Running run");
    assert_eq!(c.state("r1"), State::Stopping);

    let (_, r) = h.try_cmd(skip_cmd("r1", &["Member:m2"]));
    r.expect("skip in a Running run");

    let (c, r) = h.try_cmd(delete_cmd("r1"));
    let e = assert_invalid_state(r, "Running");
    assert!(e.message.contains("stop"), "{}", e.message);
    assert_eq!(c.state("r1"), State::Running);
}

#[test]
fn pending_run_can_be_stopped_and_skipped_but_not_started_or_deleted() {
    let h = run_in("Pending");
    assert_eq!(h.state("r1"), State::Pending);

    // The refusal names the state the user sees (the status says Pending).
    let (_, r) = h.try_cmd(start_cmd("r1"));
    assert_invalid_state(r, "Pending");

    let (c, r) = h.try_cmd(stop_cmd("r1"));
    r.expect("stop a Pending run");
    // Nothing in flight: the run is Stopped at once.
    assert_eq!(c.state("r1"), State::Stopped);

    let (_, r) = h.try_cmd(skip_cmd("r1", &["Member:m2"]));
    r.expect("skip in a Pending run");

    let (_, r) = h.try_cmd(delete_cmd("r1"));
    let e = assert_invalid_state(r, "Pending");
    assert!(e.message.contains("stop"), "{}", e.message);
}

#[test]
fn stopping_run_refuses_every_action() {
    let h = run_in("Stopping");
    assert_eq!(h.state("r1"), State::Stopping);
    assert_invalid_state(h.try_cmd(start_cmd("r1")).1, "Stopping");
    assert_invalid_state(h.try_cmd(stop_cmd("r1")).1, "Stopping");
    assert_invalid_state(h.try_cmd(skip_cmd("r1", &["Member:m2"])).1, "Stopping");
    assert_invalid_state(h.try_cmd(delete_cmd("r1")).1, "Stopping");
}

#[test]
fn stopped_run_can_be_resumed_skipped_and_deleted_but_not_stopped() {
    let h = run_in("Stopped");
    assert_eq!(h.state("r1"), State::Stopped);

    let (mut c, r) = h.try_cmd(start_cmd("r1"));
    r.expect("resume a Stopped run");
    assert_eq!(c.state("r1"), State::Running);
    assert_eq!(c.take(), ["00:30 RunResumed r1", "00:30 MemberStarted m2"]);

    assert_invalid_state(h.try_cmd(stop_cmd("r1")).1, "Stopped");

    let (_, r) = h.try_cmd(skip_cmd("r1", &["Member:m2"]));
    r.expect("skip in a Stopped run");

    let (c, r) = h.try_cmd(delete_cmd("r1"));
    r.expect("delete a Stopped run");
    assert!(c.engine.run_state("r1").is_none());
}

#[test]
fn failed_run_can_be_resumed_skipped_and_deleted_but_not_stopped() {
    let h = run_in("Failed");
    assert_eq!(h.state("r1"), State::Failed);

    let (c, r) = h.try_cmd(start_cmd("r1"));
    r.expect("resume a Failed run");
    assert_eq!(c.state("r1"), State::Running);

    assert_invalid_state(h.try_cmd(stop_cmd("r1")).1, "Failed");

    let (_, r) = h.try_cmd(skip_cmd("r1", &["Member:m2"]));
    r.expect("skip in a Failed run");

    let (c, r) = h.try_cmd(delete_cmd("r1"));
    r.expect("delete a Failed run");
    assert!(c.engine.run_state("r1").is_none());
}

#[test]
fn completed_run_can_only_be_deleted() {
    let h = run_in("Completed");
    assert_eq!(h.state("r1"), State::Completed);
    assert_invalid_state(h.try_cmd(start_cmd("r1")).1, "Completed");
    assert_invalid_state(h.try_cmd(stop_cmd("r1")).1, "Completed");
    assert_invalid_state(h.try_cmd(skip_cmd("r1", &["Member:m2"])).1, "Completed");
    let (c, r) = h.try_cmd(delete_cmd("r1"));
    r.expect("delete a Completed run");
    assert!(c.engine.run_state("r1").is_none());
}

#[test]
fn skipped_run_can_only_be_deleted() {
    let h = run_in("Skipped");
    assert_eq!(h.state("r1"), State::Skipped);
    assert_invalid_state(h.try_cmd(start_cmd("r1")).1, "Skipped");
    assert_invalid_state(h.try_cmd(stop_cmd("r1")).1, "Skipped");
    assert_invalid_state(h.try_cmd(skip_cmd("r1", &["Member:m2"])).1, "Skipped");
    let (c, r) = h.try_cmd(delete_cmd("r1"));
    r.expect("delete a Skipped run");
    assert!(c.engine.run_state("r1").is_none());
}

// ==================================================================== stop and resume (spec §3)

#[test]
fn stopping_run_drains_in_flight_members_then_stops_and_resume_continues_from_first_unprocessed_member(
) {
    let mut h = Harness::fleet(members(&["m1", "m2", "m3", "m4"], "g"), default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  groups:
  - {name: g, maxConcurrency: "2"}
"#,
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted g",
            "00:00 MemberStarted m1",
            "00:00 MemberStarted m2",
        ]
    );
    assert_eq!(h.take_started(), ["r1/m1", "r1/m2"]);

    h.advance_to("00:10");
    h.stop("r1");
    assert_eq!(h.take(), ["00:10 RunStopping r1 [Stop]"]);
    assert_eq!(h.state("r1"), State::Stopping);
    // Started cluster operations are never cancelled: both are still in flight.
    let in_flight: Vec<&str> = h.engine.operations_in_flight().map(|o| o.0).collect();
    assert_eq!(in_flight, ["r1/m1", "r1/m2"]);
    let st = h.status("r1");
    assert_eq!(
        st.waiting_on.as_ref().map(|w| w.reason),
        Some(Reason::Members)
    );

    h.advance_to("00:20");
    h.succeed("r1/m1");
    assert_eq!(h.take(), ["00:20 MemberCompleted m1"]);
    assert!(h.take_started().is_empty(), "no new work while stopping");
    assert_eq!(h.state("r1"), State::Stopping);

    h.advance_to("00:30");
    h.succeed("r1/m2");
    assert_eq!(
        h.take(),
        [
            "00:30 MemberCompleted m2",
            "00:30 GroupStopped g",
            "00:30 StageStopped s",
            "00:30 RunStopped r1",
        ]
    );
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Stopped);
    assert_eq!(stage(&st, "s").status.state, State::Stopped);
    assert_eq!(group(&st, "g").status.state, State::Stopped);
    assert_eq!(member(&st, "m1").status.state, State::Completed);
    assert_eq!(member(&st, "m3").status.state, State::NotStarted);
    assert_eq!(
        member(&st, "m3").waiting_on.as_ref().map(|w| w.reason),
        Some(Reason::Stop)
    );

    h.advance_to("01:00");
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "01:00 RunResumed r1",
            "01:00 MemberStarted m3",
            "01:00 MemberStarted m4",
        ]
    );
    assert_eq!(h.take_started(), ["r1/m3", "r1/m4"]);

    h.advance_to("01:30");
    h.succeed("r1/m3");
    h.advance_to("01:40");
    h.succeed("r1/m4");
    assert_eq!(
        h.take(),
        [
            "01:30 MemberCompleted m3",
            "01:40 MemberCompleted m4",
            "01:40 GroupCompleted g",
            "01:40 StageCompleted s",
            "01:40 RunCompleted r1",
        ]
    );
    // Finished members were never redone: one StartUpgrade per member over the whole run.
    let ops: Vec<String> = h.started.iter().map(|o| o.operation_id.clone()).collect();
    assert_eq!(ops, ["r1/m1", "r1/m2", "r1/m3", "r1/m4"]);
    assert_eq!(h.state("r1"), State::Completed);
}

#[test]
fn simulated_stop_and_resume_upgrades_every_member_exactly_once() {
    let scenario: Scenario = yaml(
        r#"
start: '2026-12-07T00:00:00Z'
members:
- {name: m1, group: g, region: eastus, kubernetesVersion: 1.30.4}
- {name: m2, group: g, region: eastus, kubernetesVersion: 1.30.4}
- {name: m3, group: g, region: eastus, kubernetesVersion: 1.30.4}
- {name: m4, group: g, region: eastus, kubernetesVersion: 1.30.4}
strategy:
  stages:
  - name: s
    groups:
    - {name: g, maxConcurrency: 2}
run:
  name: r1
  managedClusterUpdate:
    upgrade: {type: Full, kubernetesVersion: 1.31.2}
actions:
- {at: '2026-12-07T00:00:00Z', do: start}
- {at: '2026-12-07T00:10:00Z', do: stop}
- {at: '2026-12-07T02:00:00Z', do: start}
"#,
    );
    let mut sim = Simulation::new(&scenario).expect("valid scenario");
    while sim.step() {
        // The group's concurrency holds at every instant.
        assert!(sim.fleet().in_flight() <= 2, "at {}", sim.now());
    }
    let report = sim.report();
    assert_eq!(
        lines(&report.timeline, false),
        [
            "00:00 RunStarted ",
            "00:00 StageStarted s",
            "00:00 GroupStarted g",
            "00:00 MemberStarted m1",
            "00:00 MemberStarted m2",
            "00:10 RunStopping  [Stop]",
            "00:30 MemberCompleted m1",
            "00:30 MemberCompleted m2",
            "00:30 GroupStopped g",
            "00:30 StageStopped s",
            "00:30 RunStopped ",
            "02:00 RunResumed ",
            "02:00 MemberStarted m3",
            "02:00 MemberStarted m4",
            "02:30 MemberCompleted m3",
            "02:30 MemberCompleted m4",
            "02:30 GroupCompleted g",
            "02:30 StageCompleted s",
            "02:30 RunCompleted ",
        ]
    );
    for m in ["m1", "m2", "m3", "m4"] {
        assert_eq!(sim.fleet().attempts(m), 1, "{m} upgraded once");
    }
    assert_eq!(report.summary.state, State::Completed);
    assert_eq!(report.summary.members_completed, 4);
}

// ==================================================================== failures (spec §3, §5)

#[test]
fn exceeding_the_failure_threshold_drains_in_flight_members_then_fails_the_run() {
    let mut h = Harness::fleet(members(&["m1", "m2", "m3", "m4"], "g"), default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  groups:
  - {name: g, maxConcurrency: "2"}
"#,
    ));
    h.start("r1");
    h.take();
    assert_eq!(h.take_started(), ["r1/m1", "r1/m2"]);

    h.advance_to("00:10");
    h.fail("r1/m1");
    assert_eq!(
        h.take(),
        [
            "00:10 MemberFailed m1",
            "00:10 GroupFailed g [FailureThresholdExceeded]",
            "00:10 StageFailed s [FailureThresholdExceeded]",
            "00:10 RunStopping r1 [FailureThresholdExceeded]",
        ]
    );
    assert_eq!(h.state("r1"), State::Stopping);
    assert!(
        h.take_started().is_empty(),
        "no new work after the threshold"
    );

    h.advance_to("00:30");
    h.succeed("r1/m2");
    assert_eq!(h.take(), ["00:30 MemberCompleted m2", "00:30 RunFailed r1"]);
    assert!(h.take_started().is_empty());
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Failed);
    assert_eq!(st.status.completed_time, Some(t("00:30")));
    assert_eq!(
        st.status.error.as_ref().map(|e| e.code.as_str()),
        Some("FailureThresholdExceeded")
    );
    assert_eq!(st.failure_count, 1);
    assert_eq!(group(&st, "g").status.state, State::Failed);
    assert_eq!(member(&st, "m1").status.state, State::Failed);
    assert_eq!(
        member(&st, "m1")
            .status
            .error
            .as_ref()
            .map(|e| e.code.as_str()),
        Some("UpgradeFailed")
    );
    assert_eq!(member(&st, "m2").status.state, State::Completed);
    assert_eq!(member(&st, "m3").status.state, State::NotStarted);
    assert_eq!(member(&st, "m4").status.state, State::NotStarted);
}

#[test]
fn resuming_a_failed_run_accepts_failures_so_far_and_counts_new_ones_from_the_resume() {
    let mut h = Harness::fleet(
        members(&["m1", "m2", "m3", "m4", "m5"], "g"),
        default_catalog(),
    );
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  maxAllowedFailures: "1"
  groups:
  - {name: g, maxConcurrency: "2", maxAllowedFailures: "1"}
"#,
    ));
    h.start("r1");
    h.take();
    h.advance_to("00:10");
    h.fail("r1/m1");
    assert_eq!(
        h.take(),
        ["00:10 MemberFailed m1", "00:10 MemberStarted m3"]
    );
    h.advance_to("00:20");
    h.fail("r1/m2");
    assert_eq!(
        h.take(),
        [
            "00:20 MemberFailed m2",
            "00:20 GroupFailed g [FailureThresholdExceeded]",
            "00:20 StageFailed s [FailureThresholdExceeded]",
            "00:20 RunStopping r1 [FailureThresholdExceeded]",
        ]
    );
    h.advance_to("00:30");
    h.succeed("r1/m3");
    assert_eq!(h.take(), ["00:30 MemberCompleted m3", "00:30 RunFailed r1"]);
    assert_eq!(h.take_started(), ["r1/m1", "r1/m2", "r1/m3"]);

    // Resume (decision in lib.rs): the two failures so far are accepted.
    h.advance_to("01:00");
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "01:00 RunResumed r1",
            "01:00 MemberStarted m4",
            "01:00 MemberStarted m5",
        ]
    );
    assert_eq!(h.take_started(), ["r1/m4", "r1/m5"]);
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Running);
    assert_eq!(st.status.error, None);

    // One new failure is within "1" counted from the resume; failureCount keeps the total.
    h.advance_to("01:10");
    h.fail("r1/m4");
    h.advance_to("01:20");
    h.succeed("r1/m5");
    assert_eq!(
        h.take(),
        [
            "01:10 MemberFailed m4",
            "01:20 MemberCompleted m5",
            "01:20 GroupCompleted g",
            "01:20 StageCompleted s",
            "01:20 RunCompleted r1",
        ]
    );
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Completed);
    assert_eq!(st.failure_count, 3);
    assert_eq!(group(&st, "g").failure_count, 3);
    assert_eq!(stage(&st, "s").failure_count, 3);
}

#[test]
fn after_a_group_fails_no_sibling_group_starts_a_member_enters_its_members_or_creates_a_gate() {
    // Spec section 5: once a group's threshold is exceeded, no new member upgrade starts anywhere
    // in the run. Sibling b's upgrades in flight finish; c's before-gate, approved during the
    // drain, lets nothing start; d, whose members finish during the drain, creates no
    // after-gate; b, with nothing left and no after-gate, completes. The stage's after-gate and
    // after-stage wait never start. On resume every group goes on (core/src/lib.rs decisions).
    let mut fleet = members(&["a1", "a2"], "a");
    fleet.extend(members(&["b1", "b2"], "b"));
    fleet.extend(members(&["c1"], "c"));
    fleet.extend(members(&["d1"], "d"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  maxAllowedFailures: "10"
  afterStageWaitInSeconds: 3600
  afterGates: [{type: Approval}]
  groups:
  - {name: a}
  - {name: b, maxConcurrency: "2"}
  - {name: c, beforeGates: [{type: Approval}]}
  - {name: d, afterGates: [{type: Approval}]}
"#,
    ));
    h.start("r1");
    h.take();
    assert_eq!(h.take_started(), ["r1/a1", "r1/b1", "r1/d1", "r1/b2"]);
    let gate = |group: &str, timing| GateSelector {
        id: None,
        stage: Some("s".into()),
        group: Some(group.into()),
        timing: Some(timing),
    };

    h.advance_to("00:10");
    h.fail("r1/a1");
    h.advance_to("00:15");
    h.approve("r1", gate("c", GateTiming::Before), "alice")
        .expect("a Pending gate can still be approved");
    h.advance_to("00:20");
    h.succeed("r1/d1");
    h.advance_to("00:25");
    h.succeed("r1/b1");
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Stopping);
    assert_eq!(group(&st, "a").status.state, State::Failed);
    for g in ["b", "c", "d"] {
        assert_eq!(group(&st, g).status.state, State::Running, "{g}");
    }
    assert_eq!(stage(&st, "s").status.state, State::Running);
    h.advance_to("00:30");
    h.succeed("r1/b2");
    assert_eq!(
        h.take(),
        [
            "00:10 MemberFailed a1",
            "00:10 GroupFailed a [FailureThresholdExceeded]",
            "00:10 RunStopping r1 [FailureThresholdExceeded]",
            "00:15 GateCompleted r1/group:c/before/0",
            "00:20 MemberCompleted d1",
            "00:25 MemberCompleted b1",
            "00:30 MemberCompleted b2",
            "00:30 GroupCompleted b",
            "00:30 GroupStopped c",
            "00:30 GroupStopped d",
            "00:30 StageFailed s [FailureThresholdExceeded]",
            "00:30 RunFailed r1",
        ]
    );
    assert!(h.take_started().is_empty(), "nothing started after 00:10");
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Failed);
    let s = stage(&st, "s");
    assert_eq!(s.status.state, State::Failed);
    assert_eq!(s.after_gates[0].status.state, State::NotStarted);
    assert_eq!(s.after_stage_wait_status.status.state, State::NotStarted);
    assert_eq!(group(&st, "b").status.state, State::Completed);
    assert_eq!(
        group(&st, "c").before_gates[0].status.state,
        State::Completed
    );
    assert_eq!(
        group(&st, "d").after_gates[0].status.state,
        State::NotStarted
    );
    assert_eq!(member(&st, "c1").status.state, State::NotStarted);

    // Resume: the failure is accepted; a and c go on, d creates its after-gate.
    h.advance_to("01:00");
    h.start("r1");
    h.advance_to("01:30");
    h.succeed("r1/a2");
    h.succeed("r1/c1");
    h.approve("r1", gate("d", GateTiming::After), "bob")
        .expect("d's after-gate");
    h.approve(
        "r1",
        GateSelector {
            id: None,
            stage: Some("s".into()),
            group: None,
            timing: Some(GateTiming::After),
        },
        "bob",
    )
    .expect("the stage's after-gate");
    h.advance_to("02:30");
    assert_eq!(
        h.take(),
        [
            "01:00 RunResumed r1",
            "01:00 GateCreated r1/group:d/after/0",
            "01:00 MemberStarted a2",
            "01:00 MemberStarted c1",
            "01:30 MemberCompleted a2",
            "01:30 GroupCompleted a",
            "01:30 MemberCompleted c1",
            "01:30 GroupCompleted c",
            "01:30 GateCompleted r1/group:d/after/0",
            "01:30 GroupCompleted d",
            "01:30 AfterStageWaitStarted s until 02:30",
            "01:30 GateCreated r1/stage:s/after/0",
            "01:30 GateCompleted r1/stage:s/after/0",
            "02:30 AfterStageWaitCompleted s",
            "02:30 StageCompleted s",
            "02:30 RunCompleted r1",
        ]
    );
    let st = h.status("r1");
    assert_eq!(st.failure_count, 1);
    assert_eq!(group(&st, "a").status.state, State::Completed);
}

#[test]
fn pending_member_of_a_sibling_group_does_not_start_when_its_window_opens_after_a_group_failed() {
    // w1 waits for its window (01:00). a1's failure at 00:30 stops the run; b1 is still in
    // flight until 02:00. The window opens during the drain and again after the run failed:
    // w1 never starts, and says it waits on the stop, until a resume.
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    fleet.push(with_window(member_of("w1", "w"), "01:00"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  maxAllowedFailures: "10"
  groups: [{name: a}, {name: b}, {name: w}]
"#,
    ));
    h.start("r1");
    assert_eq!(h.take_started(), ["r1/a1", "r1/b1"]);
    assert_eq!(member(&h.status("r1"), "w1").status.state, State::Pending);
    h.advance_to("00:30");
    h.fail("r1/a1");
    h.advance_to("01:30");
    assert!(h.take_started().is_empty(), "w1's window opened at 01:00");
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Stopping);
    let w1 = member(&st, "w1");
    assert_eq!(w1.status.state, State::NotStarted);
    assert_eq!(w1.waiting_on.as_ref().map(|w| w.reason), Some(Reason::Stop));
    h.advance_to("02:00");
    h.succeed("r1/b1");
    assert_eq!(h.state("r1"), State::Failed);
    assert_eq!(group(&h.status("r1"), "w").status.state, State::Stopped);
    h.advance_to("+1d 02:00");
    assert!(h.take_started().is_empty(), "nor the next day's opening");
    h.take();
    h.start("r1");
    assert_eq!(
        h.take_started(),
        ["r1/w1"],
        "the window is open at the resume"
    );
}

#[test]
fn groups_after_a_group_that_fails_on_entry_are_not_entered_until_a_resume() {
    // old is two minors behind (MinorVersionSkip, settled when a's members begin): a fails,
    // the run stops before b is entered: b shows NotStarted and its before-gate is not created.
    let mut fleet = vec![member_full(
        "old",
        "a",
        "eastus",
        "1.29.8",
        &[("system", "202411.03.0", false)],
    )];
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  maxAllowedFailures: "10"
  groups:
  - {name: a}
  - {name: b, beforeGates: [{type: Approval}]}
"#,
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted a",
            "00:00 MemberFailed old",
            "00:00 GroupFailed a [FailureThresholdExceeded]",
            "00:00 StageFailed s [FailureThresholdExceeded]",
            "00:00 RunFailed r1",
        ]
    );
    let st = h.status("r1");
    let b = group(&st, "b");
    assert_eq!(b.status.state, State::NotStarted);
    assert_eq!(b.before_gates[0].status.state, State::NotStarted);
    assert_eq!(stage(&st, "s").status.state, State::Failed);

    h.advance_to("01:00");
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "01:00 RunResumed r1",
            "01:00 GroupCompleted a",
            "01:00 GroupStarted b",
            "01:00 GateCreated r1/group:b/before/0",
        ]
    );
}

#[test]
fn group_failure_while_a_stopped_run_drains_fails_the_run() {
    // A stop is asked for; while the run drains, a's threshold is exceeded (the stage's, "10",
    // holds): the run ends Failed, not Stopped, and a resume accepts the failure.
    let mut fleet = members(&["a1", "a2", "a3"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  maxAllowedFailures: "10"
  groups: [{name: a, maxConcurrency: "2"}, {name: b}]
"#,
    ));
    h.start("r1");
    h.take();
    h.advance_to("00:05");
    h.stop("r1");
    h.advance_to("00:10");
    h.fail("r1/a1");
    h.advance_to("00:30");
    h.succeed("r1/a2");
    h.succeed("r1/b1");
    assert_eq!(
        h.take(),
        [
            "00:05 RunStopping r1 [Stop]",
            "00:10 MemberFailed a1",
            "00:10 GroupFailed a [FailureThresholdExceeded]",
            "00:10 RunStopping r1 [FailureThresholdExceeded]",
            "00:30 MemberCompleted a2",
            "00:30 MemberCompleted b1",
            "00:30 GroupCompleted b",
            "00:30 StageFailed s [FailureThresholdExceeded]",
            "00:30 RunFailed r1",
        ]
    );
    h.start("r1");
    assert_eq!(h.take_started(), ["r1/a1", "r1/b1", "r1/a2", "r1/a3"]);
    assert_eq!(h.state("r1"), State::Running);
}

#[test]
fn simulated_fail_fast_run_from_json_scenario_fails_after_the_first_failure() {
    let scenario: Scenario = json(
        r#"{
  "start": "2026-12-07T00:00:00Z",
  "members": [
    {"name": "a-1", "group": "g", "region": "eastus", "kubernetesVersion": "1.30.4",
     "behavior": {"failAttempts": 1}},
    {"name": "a-2", "group": "g", "region": "eastus", "kubernetesVersion": "1.30.4"}
  ],
  "strategy": {"stages": [{"name": "one", "groups": [{"name": "g"}]}]},
  "run": {"name": "r1",
          "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"}}},
  "actions": [{"at": "2026-12-07T00:00:00Z", "do": "start"}]
}"#,
    );
    let report = waverun_core::sim::simulate(&scenario).expect("valid scenario");
    assert_eq!(
        lines(&report.timeline, false),
        [
            "00:00 RunStarted ",
            "00:00 StageStarted one",
            "00:00 GroupStarted g",
            "00:00 MemberStarted a-1",
            "00:30 MemberFailed a-1",
            "00:30 GroupFailed g [FailureThresholdExceeded]",
            "00:30 StageFailed one [FailureThresholdExceeded]",
            "00:30 RunFailed ",
        ]
    );
    assert_eq!(report.summary.state, State::Failed);
    assert_eq!(report.summary.members_failed, 1);
    assert_eq!(report.summary.members_pending, 1);
}

// ==================================================================== skips (spec §3)

#[test]
fn skipping_members_accepts_not_started_and_pending_ones_and_rejects_in_flight_and_finished_ones() {
    let mut fleet = members(&["m1", "m2", "m3"], "g");
    fleet.push(with_window(member_of("w1", "g"), "06:00"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run("r1", "stages: [{name: s, groups: [{name: g}]}]"));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted g",
            "00:00 MemberPending w1 [MaintenanceWindow] until 06:00",
            "00:00 MemberStarted m1",
        ]
    );

    h.advance_to("00:05");
    // All targets are checked before any applies: m1 is in flight, so m3 is not skipped either.
    let e = assert_invalid_state(h.skip("r1", &["Member:m3", "Member:m1"]), "Running");
    assert!(e.message.contains("m1"), "{}", e.message);
    assert!(e.message.contains("in flight"), "{}", e.message);
    assert!(h.take().is_empty());
    assert_eq!(
        member(&h.status("r1"), "m3").status.state,
        State::NotStarted
    );

    h.skip("r1", &["Member:m3"])
        .expect("skip a NotStarted member");
    h.skip("r1", &["Member:w1"]).expect("skip a Pending member");
    assert_eq!(
        h.take(),
        [
            "00:05 MemberSkipped m3 [SkippedByUser]",
            "00:05 MemberSkipped w1 [SkippedByUser]",
        ]
    );
    assert_invalid_state(h.skip("r1", &["Member:m3"]), "Skipped");

    h.advance_to("00:30");
    h.succeed("r1/m1");
    assert_eq!(
        h.take(),
        ["00:30 MemberCompleted m1", "00:30 MemberStarted m2"]
    );
    assert_invalid_state(h.skip("r1", &["Member:m1"]), "Completed");

    h.advance_to("01:00");
    h.succeed("r1/m2");
    assert_eq!(
        h.take(),
        [
            "01:00 MemberCompleted m2",
            "01:00 GroupCompleted g",
            "01:00 StageCompleted s",
            "01:00 RunCompleted r1",
        ]
    );
    // The window opening of a skipped member starts nothing.
    h.advance_to("07:00");
    assert!(h.take().is_empty());
    assert_eq!(h.take_started(), ["r1/m1", "r1/m2"]);
    let st = h.status("r1");
    assert_eq!(member(&st, "m3").status.state, State::Skipped);
    assert_eq!(member(&st, "w1").status.state, State::Skipped);
    assert_eq!(
        member(&st, "w1").message.as_deref(),
        Some("skipped by user")
    );
}

#[test]
fn skipping_a_group_skips_its_members_and_gates_while_other_groups_go_on() {
    let mut fleet = members(&["a1", "a2"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  groups:
  - name: a
    beforeGates: [{type: Approval, displayName: a sign-off}]
    afterGates: [{type: Approval}]
  - name: b
"#,
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted a",
            "00:00 GateCreated r1/group:a/before/0",
            "00:00 GroupStarted b",
            "00:00 MemberStarted b1",
        ]
    );
    h.advance_to("00:05");
    h.skip("r1", &["Group:a"]).expect("skip a running group");
    assert_eq!(
        h.take(),
        [
            "00:05 MemberSkipped a1 [SkippedByUser]",
            "00:05 MemberSkipped a2 [SkippedByUser]",
            "00:05 GateSkipped r1/group:a/before/0",
            "00:05 GroupSkipped a [SkippedByUser]",
        ]
    );
    let st = h.status("r1");
    let a = group(&st, "a");
    assert_eq!(a.status.state, State::Skipped);
    assert_eq!(a.before_gates[0].status.state, State::Skipped);
    assert_eq!(a.after_gates[0].status.state, State::Skipped);
    assert_invalid_state(h.skip("r1", &["Group:a"]), "Skipped");
    // Approving a skipped gate is refused.
    let gate = GateSelector {
        id: Some("r1/group:a/before/0".into()),
        stage: None,
        group: None,
        timing: None,
    };
    assert_invalid_state(h.approve("r1", gate, "alice"), "Skipped");

    h.advance_to("00:30");
    h.succeed("r1/b1");
    assert_eq!(
        h.take(),
        [
            "00:30 MemberCompleted b1",
            "00:30 GroupCompleted b",
            "00:30 StageCompleted s",
            "00:30 RunCompleted r1",
        ]
    );
    assert_eq!(h.take_started(), ["r1/b1"]);
}

#[test]
fn skipping_a_stage_skips_its_groups_gates_and_wait_and_the_run_moves_on() {
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  afterStageWaitInSeconds: 3600
  beforeGates: [{type: Approval}]
  afterGates: [{type: Approval}]
  groups: [{name: a}]
- name: s2
  groups: [{name: b}]
"#,
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s1",
            "00:00 GateCreated r1/stage:s1/before/0",
        ]
    );
    assert_eq!(h.state("r1"), State::Pending);

    h.advance_to("00:05");
    h.skip("r1", &["Stage:s1"]).expect("skip the current stage");
    assert_eq!(
        h.take(),
        [
            "00:05 MemberSkipped a1 [SkippedByUser]",
            "00:05 GroupSkipped a [SkippedByUser]",
            "00:05 GateSkipped r1/stage:s1/before/0",
            "00:05 StageSkipped s1 [SkippedByUser]",
            "00:05 StageStarted s2",
            "00:05 GroupStarted b",
            "00:05 MemberStarted b1",
        ]
    );
    let st = h.status("r1");
    let s1 = stage(&st, "s1");
    assert_eq!(s1.status.state, State::Skipped);
    assert_eq!(s1.before_gates[0].status.state, State::Skipped);
    assert_eq!(s1.after_gates[0].status.state, State::Skipped);
    assert_eq!(s1.after_stage_wait_status.status.state, State::Skipped);
    assert_eq!(group(&st, "a").status.state, State::Skipped);

    h.advance_to("00:30");
    h.succeed("r1/b1");
    assert_eq!(
        h.take(),
        [
            "00:30 MemberCompleted b1",
            "00:30 GroupCompleted b",
            "00:30 StageCompleted s2",
            "00:30 RunCompleted r1",
        ]
    );
    assert_eq!(h.state("r1"), State::Completed);
    assert_eq!(h.take_started(), ["r1/b1"]);
}

#[test]
fn skipping_a_group_with_a_member_in_flight_lets_it_finish_before_the_stage_moves_on() {
    let mut fleet = members(&["a1", "a2"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  groups: [{name: a}]
- name: s2
  groups: [{name: b}]
"#,
    ));
    h.start("r1");
    h.take();
    h.advance_to("00:10");
    h.skip("r1", &["Group:a"])
        .expect("skip a group with a member in flight");
    assert_eq!(
        h.take(),
        [
            "00:10 MemberSkipped a2 [SkippedByUser]",
            "00:10 GroupSkipped a [SkippedByUser]",
        ]
    );
    // a1 is still in flight: the stage does not move on.
    let in_flight: Vec<&str> = h.engine.operations_in_flight().map(|o| o.0).collect();
    assert_eq!(in_flight, ["r1/a1"]);
    assert_eq!(stage(&h.status("r1"), "s2").status.state, State::NotStarted);

    h.advance_to("00:30");
    h.succeed("r1/a1");
    let got = h.take();
    assert_eq!(got[0], "00:30 MemberCompleted a1");
    assert_eq!(
        &got[2..],
        [
            "00:30 StageStarted s2",
            "00:30 GroupStarted b",
            "00:30 MemberStarted b1",
        ]
    );
    // The stage ends because the user skipped its only group, not because there was nothing to
    // do: it must not be reported as AlreadyAtTarget.
    assert!(
        got[1].starts_with("00:30 Stage") && got[1].contains(" s1"),
        "{got:?}"
    );
    assert!(!got[1].contains("AlreadyAtTarget"), "{got:?}");
    assert_eq!(h.take_started(), ["r1/a1", "r1/b1"]);
}

#[test]
fn skipping_the_after_stage_wait_ends_it_early() {
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  afterStageWaitInSeconds: 3600
  groups: [{name: a}]
- name: s2
  groups: [{name: b}]
"#,
    ));
    h.start("r1");
    h.take();
    h.advance_to("00:30");
    h.succeed("r1/a1");
    assert_eq!(
        h.take(),
        [
            "00:30 MemberCompleted a1",
            "00:30 GroupCompleted a",
            "00:30 AfterStageWaitStarted s1 until 01:30",
        ]
    );
    assert_eq!(
        stage(&h.status("r1"), "s1")
            .after_stage_wait_status
            .status
            .state,
        State::Running
    );

    h.advance_to("00:45");
    h.skip("r1", &["AfterStageWait:s1"])
        .expect("skip a running wait");
    assert_eq!(
        h.take(),
        [
            "00:45 AfterStageWaitSkipped s1 [SkippedByUser]",
            "00:45 StageCompleted s1",
            "00:45 StageStarted s2",
            "00:45 GroupStarted b",
            "00:45 MemberStarted b1",
        ]
    );
    let st = h.status("r1");
    let wait = &stage(&st, "s1").after_stage_wait_status;
    assert_eq!(wait.status.state, State::Skipped);
    assert_eq!(wait.status.completed_time, Some(t("00:45")));
    assert_eq!(wait.wait_duration_in_seconds, 3600);
    assert_invalid_state(h.skip("r1", &["AfterStageWait:s1"]), "Skipped");

    // The wait's original end changes nothing.
    h.advance_to("01:30");
    assert!(h.take().is_empty());
}

#[test]
fn skips_sent_before_the_start_show_at_once_and_apply_when_the_run_starts() {
    let mut fleet = members(&["a1", "a2"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  groups: [{name: a}]
- name: s2
  groups: [{name: b}]
"#,
    ));
    h.take();
    h.advance_to("00:10");
    h.skip("r1", &["Member:a2", "Stage:s2"])
        .expect("skips before the start are accepted");
    assert!(h.take().is_empty(), "nothing happens before the start");
    // The status shows them Skipped at once, as of when they were asked for (as Azure's does);
    // the run stays NotStarted and the rest is untouched.
    let st = h.status("r1");
    assert_eq!(st.status.state, State::NotStarted);
    let s1 = &st.stages[0];
    let a2 = s1.groups[0]
        .members
        .iter()
        .find(|m| m.name == "a2")
        .unwrap();
    assert_eq!(a2.status.state, State::Skipped);
    assert_eq!(a2.status.completed_time, Some(t("00:10")));
    let a1 = s1.groups[0]
        .members
        .iter()
        .find(|m| m.name == "a1")
        .unwrap();
    assert_eq!(a1.status.state, State::NotStarted);
    assert_eq!(s1.status.state, State::NotStarted);
    assert_eq!(st.stages[1].status.state, State::Skipped);
    assert_eq!(
        st.stages[1].groups[0].members[0].status.state,
        State::Skipped
    );
    h.advance_to("00:20");
    assert_eq!(
        h.status("r1").stages[0].groups[0].members[1]
            .status
            .completed_time,
        Some(t("00:10"))
    );
    let e = h.skip("r1", &["Member:nobody"]).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);

    h.advance_to("01:00");
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "01:00 RunStarted r1",
            "01:00 MemberSkipped a2 [SkippedByUser]",
            "01:00 MemberSkipped b1 [SkippedByUser]",
            "01:00 GroupSkipped b [SkippedByUser]",
            "01:00 StageSkipped s2 [SkippedByUser]",
            "01:00 StageStarted s1",
            "01:00 GroupStarted a",
            "01:00 MemberStarted a1",
        ]
    );
    h.advance_to("01:30");
    h.succeed("r1/a1");
    assert_eq!(
        h.take(),
        [
            "01:30 MemberCompleted a1",
            "01:30 GroupCompleted a",
            "01:30 StageCompleted s1",
            "01:30 RunCompleted r1",
        ]
    );
    assert_eq!(h.take_started(), ["r1/a1"]);
}

#[test]
fn skipping_every_stage_skips_the_run() {
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  groups: [{name: a}]
- name: s2
  groups: [{name: b}]
"#,
    ));
    h.take();
    h.skip("r1", &["Stage:s1", "Stage:s2"]).expect("skip");
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 MemberSkipped a1 [SkippedByUser]",
            "00:00 GroupSkipped a [SkippedByUser]",
            "00:00 StageSkipped s1 [SkippedByUser]",
            "00:00 MemberSkipped b1 [SkippedByUser]",
            "00:00 GroupSkipped b [SkippedByUser]",
            "00:00 StageSkipped s2 [SkippedByUser]",
            "00:00 RunSkipped r1",
        ]
    );
    assert!(h.take_started().is_empty());
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Skipped);
    assert_eq!(st.status.completed_time, Some(t("00:00")));
}

// ==================================================================== member assignment (spec §2)

#[test]
fn groups_without_a_selector_take_the_members_whose_group_property_names_them() {
    let mut fleet = members(&["a2", "a1"], "alpha");
    fleet.extend(members(&["b1"], "beta"));
    fleet.extend(members(&["x1"], "gamma"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        "stages: [{name: s, groups: [{name: alpha}, {name: beta}]}]",
    ));
    let plan = h.plan("r1");
    assert_eq!(
        plan_groups(&plan),
        [("alpha", vec!["a1", "a2"]), ("beta", vec!["b1"])]
    );
    assert_eq!(plan.unassigned, ["x1"]);
}

#[test]
fn label_selectors_support_every_operator() {
    let h = Harness::fleet(labelled_fleet(), default_catalog());
    let cases: &[(&str, &[&str])] = &[
        ("env=prod", &["api-prod", "db-prod"]),
        ("env==dev", &["web-dev"]),
        ("env!=prod", &["tools-test", "web-dev"]),
        // `!=` and `notin` also match members without the key.
        ("tier!=web", &["db-prod", "tools-test"]),
        ("env in (dev,test)", &["tools-test", "web-dev"]),
        ("tier notin (web)", &["db-prod", "tools-test"]),
        ("canary", &["api-prod"]),
        ("!canary", &["db-prod", "tools-test", "web-dev"]),
        ("env=prod,tier=web", &["api-prod"]),
        ("waverun.dev/region=westeurope", &["db-prod"]),
    ];
    for (sel, want) in cases {
        let mut c = h.clone();
        let strategy = format!(
            "stages: [{{name: s, groups: [{{name: g, memberSelector: {{byLabel: '{sel}'}}}}]}}]"
        );
        c.create(full_run("r1", &strategy));
        let plan = c.plan("r1");
        let got = &plan_groups(&plan)[0].1;
        assert_eq!(got, want, "selector {sel}");
        let mut unassigned: Vec<&str> = ["api-prod", "db-prod", "tools-test", "web-dev"]
            .into_iter()
            .filter(|m| !want.contains(m))
            .collect();
        unassigned.sort();
        assert_eq!(plan.unassigned, unassigned, "unassigned for {sel}");
    }
}

#[test]
fn stage_selector_pre_filters_the_members_of_its_groups() {
    let mut fleet = labelled_fleet();
    for m in &mut fleet {
        if m.name == "db-prod" || m.name == "web-dev" {
            m.group = Some("byname".into());
        }
    }
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: prod
  memberSelector: {byLabel: env=prod}
  groups:
  - {name: web, memberSelector: {byLabel: tier=web}}
  - {name: byname}
"#,
    ));
    let plan = h.plan("r1");
    assert_eq!(
        plan_groups(&plan),
        [("web", vec!["api-prod"]), ("byname", vec!["db-prod"])]
    );
    assert_eq!(plan.unassigned, ["tools-test", "web-dev"]);
    h.start("r1");
    assert_eq!(h.take_started(), ["r1/api-prod", "r1/db-prod"]);
}

#[test]
fn stage_with_a_selector_and_no_groups_forms_one_implicit_group_named_after_it() {
    let mut h = Harness::fleet(labelled_fleet(), default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: dev
  memberSelector: {byLabel: 'env in (dev,test)'}
"#,
    ));
    let plan = h.plan("r1");
    assert_eq!(plan_groups(&plan), [("dev", vec!["tools-test", "web-dev"])]);
    assert_eq!(plan.unassigned, ["api-prod", "db-prod"]);
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted dev",
            "00:00 GroupStarted dev",
            "00:00 MemberStarted tools-test",
            "00:00 MemberStarted web-dev",
        ]
    );
    assert_eq!(h.events[4].group(), Some("dev"));
}

#[test]
fn member_matching_two_groups_is_refused_at_start_naming_the_member_and_both_groups() {
    let mut h = Harness::fleet(labelled_fleet(), default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  groups:
  - {name: prod, memberSelector: {byLabel: env=prod}}
  - {name: web, memberSelector: {byLabel: tier=web}}
"#,
    ));
    h.take();
    let e = h.cmd(start_cmd("r1")).unwrap_err();
    assert_eq!(e.code, ErrorCode::MemberInTwoGroups);
    for part in ["\"api-prod\"", "\"prod\"", "\"web\""] {
        assert!(e.message.contains(part), "{part} in {}", e.message);
    }
    assert_eq!(h.state("r1"), State::NotStarted);
    assert!(h.take().is_empty());
    assert!(h.take_started().is_empty());
    assert_eq!(
        h.engine.plan("r1").unwrap_err().code,
        ErrorCode::MemberInTwoGroups
    );

    // The same across stages: a member is in at most one group of the whole strategy.
    let mut h2 = Harness::fleet(labelled_fleet(), default_catalog());
    h2.create(full_run(
        "r2",
        r#"
stages:
- name: one
  groups: [{name: canaries, memberSelector: {byLabel: canary}}]
- name: two
  groups: [{name: prod, memberSelector: {byLabel: env=prod}}]
"#,
    ));
    let e = h2.cmd(start_cmd("r2")).unwrap_err();
    assert_eq!(e.code, ErrorCode::MemberInTwoGroups);
    for part in ["\"api-prod\"", "\"canaries\"", "\"prod\""] {
        assert!(e.message.contains(part), "{part} in {}", e.message);
    }
}

#[test]
fn unassigned_members_are_listed_in_the_plan_and_left_out_of_the_run() {
    let mut h = Harness::fleet(labelled_fleet(), default_catalog());
    h.create(full_run(
        "r1",
        "stages: [{name: s, groups: [{name: prod, maxConcurrency: '5', memberSelector: {byLabel: env=prod}}]}]",
    ));
    let plan = h.plan("r1");
    assert_eq!(plan.unassigned, ["tools-test", "web-dev"]);
    assert_eq!(plan.members_to_upgrade, 2);
    h.start("r1");
    assert_eq!(h.take_started(), ["r1/api-prod", "r1/db-prod"]);
    let st = h.status("r1");
    let names: Vec<&str> = st.stages[0].groups[0]
        .members
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(names, ["api-prod", "db-prod"]);
}

#[test]
fn run_without_a_strategy_upgrades_every_member_one_by_one() {
    let mut fleet = members(&["c", "a", "b"], "");
    fleet[0].group = Some("whatever".into());
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(UpdateRunSpec {
        strategy: None,
        ..full_run("r1", "stages: [{name: s, groups: [{name: g}]}]")
    });
    let plan = h.plan("r1");
    assert_eq!(plan_groups(&plan), [("default", vec!["a", "b", "c"])]);
    assert_eq!(plan.stages[0].max_concurrency, 1);
    assert_eq!(plan.stages[0].groups[0].max_concurrency, 1);
    assert!(plan.unassigned.is_empty());
    h.take();
    h.start("r1");
    h.advance_to("00:30");
    h.succeed("r1/a");
    h.advance_to("01:00");
    h.succeed("r1/b");
    h.advance_to("01:30");
    h.succeed("r1/c");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberStarted a",
            "00:30 MemberCompleted a",
            "00:30 MemberStarted b",
            "01:00 MemberCompleted b",
            "01:00 MemberStarted c",
            "01:30 MemberCompleted c",
            "01:30 GroupCompleted default",
            "01:30 StageCompleted default",
            "01:30 RunCompleted r1",
        ]
    );
}

// ==================================================================== nothing to do (spec §3)

#[test]
fn control_plane_only_skips_members_at_or_ahead_of_the_target() {
    let fleet = vec![
        member_full(
            "ahead",
            "",
            "eastus",
            "1.32.0",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "at-target",
            "",
            "eastus",
            "1.31.2",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "behind",
            "",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
    ];
    let mut h = Harness::fleet(fleet, newer_image_catalog());
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: ControlPlaneOnly, kubernetesVersion: 1.31.2}",
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberSkipped ahead [AlreadyAtTarget]",
            "00:00 MemberSkipped at-target [AlreadyAtTarget]",
            "00:00 MemberStarted behind",
        ]
    );
    assert_eq!(h.started.len(), 1);
    assert_eq!(h.started[0].kubernetes_version.as_deref(), Some("1.31.2"));
    assert!(
        h.started[0].node_images.is_empty(),
        "ControlPlaneOnly moves no image"
    );
    let st = h.status("r1");
    let ahead = member(&st, "ahead").message.clone().unwrap_or_default();
    assert!(ahead.contains("ahead of target"), "{ahead}");
    assert!(ahead.contains("no downgrade"), "{ahead}");
    let at = member(&st, "at-target").message.clone().unwrap_or_default();
    assert!(at.contains("control plane already at target"), "{at}");
}

#[test]
fn full_upgrade_skips_current_members_and_runs_partially_current_ones_listing_pools_left_alone() {
    let fleet = vec![
        member_full(
            "cp-ahead",
            "",
            "eastus",
            "1.32.0",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "current",
            "",
            "eastus",
            "1.31.2",
            &[("system", "202412.01.0", false)],
        ),
        member_full(
            "partial",
            "",
            "eastus",
            "1.31.2",
            &[
                ("system", "202412.01.0", false),
                ("user", "202411.03.0", false),
            ],
        ),
    ];
    let mut h = Harness::fleet(fleet, newer_image_catalog());
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: Full, kubernetesVersion: 1.31.2}",
    ));
    h.take();
    h.start("r1");
    h.advance_to("00:30");
    h.succeed("r1/cp-ahead");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberSkipped current [AlreadyAtTarget]",
            "00:00 MemberStarted cp-ahead",
            "00:30 MemberCompleted cp-ahead",
            "00:30 MemberStarted partial",
        ]
    );
    // Control plane ahead of target: no downgrade, the pool still moves, with a message.
    let cp = &h.started[0];
    assert_eq!(cp.member, "cp-ahead");
    assert_eq!(cp.kubernetes_version, None);
    assert_eq!(cp.node_images, [pool_image("system", "202412.01.0")]);
    let partial = &h.started[1];
    assert_eq!(partial.kubernetes_version, None);
    assert_eq!(partial.node_images, [pool_image("user", "202412.01.0")]);
    let st = h.status("r1");
    let msg = member(&st, "cp-ahead").message.clone().unwrap_or_default();
    assert!(msg.contains("ahead of target"), "{msg}");
    let msg = member(&st, "partial").message.clone().unwrap_or_default();
    assert!(msg.contains("pools left alone: system"), "{msg}");
    let msg = member(&st, "current").message.clone().unwrap_or_default();
    assert!(msg.contains("already at target"), "{msg}");
}

#[test]
fn node_image_only_skips_members_whose_pools_are_at_or_ahead_of_the_target_image() {
    let fleet = vec![
        member_full(
            "ahead",
            "",
            "eastus",
            "1.30.4",
            &[
                ("system", "202412.01.0", false),
                ("user", "202501.01.0", false),
            ],
        ),
        member_full(
            "behind",
            "",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
    ];
    let mut h = Harness::fleet(fleet, newer_image_catalog());
    h.create(spec("r1", None, "upgrade: {type: NodeImageOnly}"));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberSkipped ahead [AlreadyAtTarget]",
            "00:00 MemberStarted behind",
        ]
    );
    assert_eq!(
        h.started[0].node_images,
        [pool_image("system", "202412.01.0")]
    );
    let msg = member(&h.status("r1"), "ahead")
        .message
        .clone()
        .unwrap_or_default();
    assert!(msg.contains("at or ahead of its target image"), "{msg}");
}

#[test]
fn consistent_selection_skips_a_member_with_a_pool_of_a_family_without_a_common_image() {
    let mut win = member_full(
        "win",
        "",
        "eastus",
        "1.30.4",
        &[("system", "202411.03.0", false)],
    );
    win.node_pools.push(yaml(
        "{name: win, osType: Windows, imageVersion: AKSWindows-2022-containerd-20348.2700.240911}",
    ));
    let fleet = vec![
        member_full(
            "linux",
            "",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
        win,
    ];
    let mut h = Harness::fleet(fleet, newer_image_catalog());
    h.create(spec(
        "r1",
        None,
        "{upgrade: {type: NodeImageOnly}, nodeImageSelection: {type: Consistent}}",
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberSkipped win [NoConsistentImage]",
            "00:00 MemberStarted linux",
        ]
    );
    assert_eq!(
        h.started[0].node_images,
        [pool_image("system", "202412.01.0")]
    );
    let msg = member(&h.status("r1"), "win")
        .message
        .clone()
        .unwrap_or_default();
    assert!(msg.contains("AKSWindows-2022-containerd"), "{msg}");
}

#[test]
fn member_more_than_one_minor_behind_fails_with_minor_version_skip_without_a_cluster_call() {
    let fleet = vec![
        member_full(
            "ok",
            "g",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "old",
            "g",
            "eastus",
            "1.29.8",
            &[("system", "202411.03.0", false)],
        ),
    ];
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  maxAllowedFailures: "1"
  groups: [{name: g, maxAllowedFailures: "1"}]
"#,
    ));
    // The plan flags it in advance.
    let plan = h.plan("r1");
    assert_eq!(plan.will_fail, ["old"]);
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted g",
            "00:00 MemberFailed old",
            "00:00 MemberStarted ok",
        ]
    );
    assert_eq!(h.take_started(), ["r1/ok"], "no cluster call for old");
    let failed = h.events.iter().find(|e| e.member() == Some("old"));
    assert_eq!(
        failed.and_then(|e| e.error()).map(|e| e.code.as_str()),
        Some("MinorVersionSkip")
    );
    let st = h.status("r1");
    let old = member(&st, "old");
    assert_eq!(old.status.state, State::Failed);
    assert_eq!(old.operation_id, None);
    let err = old.status.error.clone().expect("error on the member");
    assert_eq!(err.code, ErrorCode::MinorVersionSkip.as_str());
    assert!(err.message.contains("1.29.8"), "{}", err.message);

    h.advance_to("00:30");
    h.succeed("r1/ok");
    assert_eq!(h.state("r1"), State::Completed);
    assert_eq!(h.status("r1").failure_count, 1);
}

#[test]
fn minor_version_skip_with_fail_fast_fails_the_run_without_any_cluster_call() {
    let fleet = vec![member_full(
        "old",
        "",
        "eastus",
        "1.29.8",
        &[("system", "202411.03.0", false)],
    )];
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: Full, kubernetesVersion: 1.31.2}",
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberFailed old",
            "00:00 GroupFailed default [FailureThresholdExceeded]",
            "00:00 StageFailed default [FailureThresholdExceeded]",
            "00:00 RunFailed r1",
        ]
    );
    assert!(h.take_started().is_empty());
}

// ==================================================================== node images (spec §7)

#[test]
fn latest_selection_takes_the_newest_image_in_the_members_region_when_the_member_starts() {
    let fleet = vec![
        member_full(
            "e1",
            "g",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "e2",
            "g",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "w1",
            "g",
            "westeurope",
            "1.30.4",
            &[("system", "202410.01.0", false)],
        ),
    ];
    let catalog: ReleaseCatalog = yaml(
        r#"
kubernetes:
- {version: 1.31.2, available: {'*': '2026-11-01T00:00:00Z'}}
nodeImages:
- {version: AKSUbuntu-2204gen2containerd-202410.01.0, available: {'*': '2026-10-01T00:00:00Z'}}
- {version: AKSUbuntu-2204gen2containerd-202411.03.0, available: {'*': '2026-11-05T00:00:00Z'}}
- {version: AKSUbuntu-2204gen2containerd-202411.20.0, available: {eastus: '2026-11-22T00:00:00Z'}}
"#,
    );
    let mut h = Harness::fleet(fleet, catalog);
    h.create(spec(
        "r1",
        Some("stages: [{name: s, groups: [{name: g}]}]"),
        "upgrade: {type: NodeImageOnly}",
    ));
    h.start("r1");
    h.take();
    assert_eq!(h.started[0].member, "e1");
    assert_eq!(
        h.started[0].node_images,
        [pool_image("system", "202411.20.0")]
    );

    // A release appearing mid-run is used by members that start after it.
    h.advance_to("00:15");
    h.observe(Observation::NodeImageReleased {
        version: img("202412.01.0"),
        region: "eastus".into(),
        since: t("00:15"),
        security_patch: false,
    });
    assert!(h.take().is_empty());
    h.advance_to("00:30");
    h.succeed("r1/e1");
    assert_eq!(
        h.take(),
        ["00:30 MemberCompleted e1", "00:30 MemberStarted e2"]
    );
    assert_eq!(
        h.started[1].node_images,
        [pool_image("system", "202412.01.0")]
    );
    let started = h.events.last().expect("MemberStarted e2");
    assert_eq!(started.node_images(), [pool_image("system", "202412.01.0")]);

    // westeurope has neither 202411.20.0 nor 202412.01.0.
    h.advance_to("01:00");
    h.succeed("r1/e2");
    assert_eq!(h.started[2].member, "w1");
    assert_eq!(
        h.started[2].node_images,
        [pool_image("system", "202411.03.0")]
    );
    let st = h.status("r1");
    assert!(
        st.node_image_selection.is_none(),
        "Latest publishes no selection"
    );
    assert_eq!(
        member(&st, "e2").node_images,
        [pool_image("system", "202412.01.0")]
    );
}

#[test]
fn consistent_selection_is_chosen_at_run_start_and_visible_in_status_before_it() {
    let fleet = vec![
        member_full(
            "eus-1",
            "g",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "weu-1",
            "g",
            "westeurope",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
    ];
    let mut h = Harness::fleet(fleet, two_region_catalog());
    h.create(spec(
        "r1",
        Some("stages: [{name: s, groups: [{name: g}]}]"),
        "{upgrade: {type: NodeImageOnly}, nodeImageSelection: {type: Consistent}}",
    ));
    let selected = |h: &Harness| {
        h.status("r1")
            .node_image_selection
            .map(|s| s.selected_node_image_versions)
            .unwrap_or_default()
    };
    // 202412.01.0 is only in eastus: the newest image in every region is 202411.20.0.
    assert_eq!(selected(&h), [img("202411.20.0")]);
    assert_eq!(
        h.plan("r1").selected_node_image_versions,
        [img("202411.20.0")]
    );

    h.start("r1");
    assert_eq!(selected(&h), [img("202411.20.0")]);
    assert_eq!(
        h.started[0].node_images,
        [pool_image("system", "202411.20.0")]
    );

    // Once started, the selection is frozen: a later release everywhere changes nothing.
    h.advance_to("00:10");
    h.observe(Observation::NodeImageReleased {
        version: img("202412.01.0"),
        region: "westeurope".into(),
        since: t("00:10"),
        security_patch: false,
    });
    assert_eq!(selected(&h), [img("202411.20.0")]);
    h.advance_to("00:30");
    h.succeed("r1/eus-1");
    assert_eq!(h.started[1].member, "weu-1");
    assert_eq!(
        h.started[1].node_images,
        [pool_image("system", "202411.20.0")]
    );
}

#[test]
fn consistent_selection_preview_follows_the_catalog_until_the_run_starts() {
    let fleet = vec![
        member_full(
            "eus-1",
            "g",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "weu-1",
            "g",
            "westeurope",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
    ];
    let mut h = Harness::fleet(fleet, two_region_catalog());
    h.create(spec(
        "r1",
        Some("stages: [{name: s, groups: [{name: g}]}]"),
        "{upgrade: {type: NodeImageOnly}, nodeImageSelection: {type: Consistent}}",
    ));
    h.advance_to("00:10");
    h.observe(Observation::NodeImageReleased {
        version: img("202412.01.0"),
        region: "westeurope".into(),
        since: t("00:10"),
        security_patch: false,
    });
    let st = h.status("r1");
    assert_eq!(
        st.node_image_selection
            .map(|s| s.selected_node_image_versions),
        Some(vec![img("202412.01.0")])
    );
    h.start("r1");
    assert_eq!(
        h.started[0].node_images,
        [pool_image("system", "202412.01.0")]
    );
}

#[test]
fn consistent_scenario_file_upgrades_both_members_to_the_common_image() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join("node-image-consistent.yaml");
    let scenario = waverun_host::load_scenario(&path).expect("scenario file parses");
    let report = waverun_core::sim::simulate(&scenario).expect("valid scenario");
    let started: Vec<(String, Vec<PoolImage>)> = report
        .timeline
        .iter()
        .filter(|e| e.kind() == waverun_core::EventKind::MemberStarted)
        .map(|e| {
            (
                e.member().map(str::to_string).unwrap_or_default(),
                e.node_images().to_vec(),
            )
        })
        .collect();
    assert_eq!(
        started,
        [
            (
                "eus-1".to_string(),
                vec![pool_image("system", "202411.20.0")]
            ),
            (
                "weu-1".to_string(),
                vec![pool_image("system", "202411.20.0")]
            ),
        ]
    );
    assert_eq!(
        report
            .run
            .unwrap()
            .status
            .node_image_selection
            .map(|s| s.selected_node_image_versions),
        Some(vec![img("202411.20.0")])
    );
    assert_eq!(report.summary.state, State::Completed);
}

#[test]
fn custom_selection_moves_only_the_listed_families() {
    let mut m = member_full(
        "m1",
        "",
        "eastus",
        "1.30.4",
        &[("system", "202411.03.0", false)],
    );
    m.node_pools.push(yaml(
        "{name: win, osType: Windows, imageVersion: AKSWindows-2022-containerd-20348.2700.240911}",
    ));
    let mut catalog = newer_image_catalog();
    catalog.node_images.push(yaml(
        "{version: AKSWindows-2022-containerd-20348.2800.241010, available: {'*': '2026-11-01T00:00:00Z'}}",
    ));
    let mut h = Harness::fleet(vec![m], catalog);
    h.create(spec(
        "r1",
        None,
        r#"
upgrade: {type: NodeImageOnly}
nodeImageSelection:
  type: Custom
  customNodeImageVersions:
  - {version: AKSUbuntu-2204gen2containerd-202412.01.0}
"#,
    ));
    h.start("r1");
    assert_eq!(h.started.len(), 1);
    assert_eq!(
        h.started[0].node_images,
        [pool_image("system", "202412.01.0")]
    );
    let msg = member(&h.status("r1"), "m1")
        .message
        .clone()
        .unwrap_or_default();
    assert!(msg.contains("pools left alone: win"), "{msg}");
}

#[test]
fn snapshot_pools_keep_their_image_under_latest_but_move_under_consistent() {
    let m = member_full(
        "m1",
        "",
        "eastus",
        "1.30.4",
        &[
            ("system", "202411.03.0", false),
            ("snap", "202411.03.0", true),
        ],
    );
    let mut latest = Harness::fleet(vec![m.clone()], newer_image_catalog());
    latest.create(spec("r1", None, "upgrade: {type: NodeImageOnly}"));
    latest.start("r1");
    assert_eq!(
        latest.started[0].node_images,
        [pool_image("system", "202412.01.0")]
    );
    let msg = member(&latest.status("r1"), "m1")
        .message
        .clone()
        .unwrap_or_default();
    assert!(msg.contains("snap (from snapshot)"), "{msg}");

    let mut consistent = Harness::fleet(vec![m], newer_image_catalog());
    consistent.create(spec(
        "r1",
        None,
        "{upgrade: {type: NodeImageOnly}, nodeImageSelection: {type: Consistent}}",
    ));
    consistent.start("r1");
    assert_eq!(
        consistent.started[0].node_images,
        [
            pool_image("system", "202412.01.0"),
            pool_image("snap", "202412.01.0"),
        ]
    );
}

// ==================================================================== region availability

#[test]
fn member_waits_for_its_region_and_starts_exactly_when_the_version_arrives() {
    let fleet = vec![
        member_full(
            "e1",
            "g",
            "eastus",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
        member_full(
            "w1",
            "g",
            "westeurope",
            "1.30.4",
            &[("system", "202411.03.0", false)],
        ),
    ];
    let catalog: ReleaseCatalog = yaml(
        r#"
kubernetes:
- {version: 1.31.2, available: {eastus: '2026-11-01T00:00:00Z', westeurope: '2026-12-07T06:00:00Z'}}
nodeImages:
- {version: AKSUbuntu-2204gen2containerd-202411.03.0, available: {'*': '2026-11-05T00:00:00Z'}}
"#,
    );
    let mut h = Harness::fleet(fleet, catalog);
    h.create(full_run(
        "r1",
        "stages: [{name: s, groups: [{name: g, maxConcurrency: '2'}]}]",
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted g",
            "00:00 MemberPending w1 [VersionNotInRegion] until 06:00",
            "00:00 MemberStarted e1",
        ]
    );
    let pending = h.events.iter().find(|e| e.member() == Some("w1"));
    let msg = pending
        .and_then(|e| e.message().map(str::to_string))
        .unwrap_or_default();
    assert!(
        msg.contains("1.31.2") && msg.contains("westeurope"),
        "{msg}"
    );
    let w = h.engine.poll_timeout().expect("a wakeup");
    assert_eq!((w.at, w.reason), (t("06:00"), WakeReason::VersionAvailable));

    h.advance_to("00:30");
    h.succeed("r1/e1");
    assert_eq!(h.take(), ["00:30 MemberCompleted e1"]);
    h.advance_to("05:59");
    assert!(h.take().is_empty());
    h.advance_to("07:00");
    assert_eq!(h.take(), ["06:00 MemberStarted w1"]);
    assert_eq!(h.take_started(), ["r1/e1", "r1/w1"]);
}

#[test]
fn version_missing_from_the_catalog_waits_without_a_time_until_a_release_is_observed() {
    let fleet = vec![member_full(
        "w1",
        "",
        "westeurope",
        "1.30.4",
        &[("system", "202411.03.0", false)],
    )];
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: Full, kubernetesVersion: 1.31.3}",
    ));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberPending w1 [VersionNotInRegion]",
        ]
    );
    assert_eq!(h.engine.poll_timeout(), None);
    let st = h.status("r1");
    let wait = member(&st, "w1").waiting_on.clone().expect("waits");
    assert_eq!(
        (wait.reason, wait.until),
        (Reason::VersionNotInRegion, None)
    );

    // A release in another region does not help.
    h.advance_to("02:00");
    h.observe(Observation::KubernetesReleased {
        version: "1.31.3".into(),
        region: "eastus".into(),
        since: t("02:00"),
        preview: false,
    });
    assert!(h.take().is_empty());
    assert!(h.take_started().is_empty());

    h.advance_to("03:00");
    h.observe(Observation::KubernetesReleased {
        version: "1.31.3".into(),
        region: "westeurope".into(),
        since: t("03:00"),
        preview: false,
    });
    assert_eq!(h.take(), ["03:00 MemberStarted w1"]);
    assert_eq!(h.take_started(), ["r1/w1"]);
    assert_eq!(h.started[0].kubernetes_version.as_deref(), Some("1.31.3"));
}

// ==================================================================== one upgrade authority

#[test]
fn a_member_another_run_brought_to_target_while_it_waited_on_the_lease_is_skipped_and_the_run_ends()
{
    // Regression (found by the engine trace digests when the settle loop replaced the
    // per-handler progress calls): the waiting run's group was skipped, but nothing drove the
    // run on, so it stayed Running with nothing left to wait for.
    let mut h = Harness::fleet(vec![member_of("m1", "")], default_catalog());
    h.with_run = true;
    let update = "upgrade: {type: ControlPlaneOnly, kubernetesVersion: 1.31.2}";
    h.create(spec("r1", None, update));
    h.create(spec("r2", None, update));
    h.start("r1");
    h.start("r2");
    h.take();
    h.advance_to("00:30");
    h.succeed("r1/m1");
    assert_eq!(
        h.take(),
        [
            "00:30 r1 MemberCompleted m1",
            "00:30 r2 MemberSkipped m1 [AlreadyAtTarget]",
            "00:30 r2 GroupSkipped default [AlreadyAtTarget]",
            "00:30 r2 StageSkipped default [AlreadyAtTarget]",
            "00:30 r2 RunSkipped r2",
            "00:30 r1 GroupCompleted default",
            "00:30 r1 StageCompleted default",
            "00:30 r1 RunCompleted r1",
        ]
    );
    assert_eq!(h.state("r2"), State::Skipped);
}

#[test]
fn a_member_observed_at_target_while_it_waited_for_its_window_is_skipped_and_the_run_ends() {
    // Regression (as above): when the window opened the member was skipped and its group with
    // it, but the stage and the run were never moved on.
    let m1 = with_window(member_of("m1", ""), "02:00");
    let pools = m1.node_pools.clone();
    let mut h = Harness::fleet(vec![m1], default_catalog());
    let update = "upgrade: {type: ControlPlaneOnly, kubernetesVersion: 1.31.2}";
    h.create(spec("r1", None, update));
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunCreated r1",
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberPending m1 [MaintenanceWindow] until 02:00",
        ]
    );
    h.observe(Observation::MemberObserved {
        name: "m1".into(),
        kubernetes_version: "1.31.2".into(),
        node_pools: pools,
    });
    h.advance_to("02:00");
    assert_eq!(
        h.take(),
        [
            "02:00 MemberSkipped m1 [AlreadyAtTarget]",
            "02:00 GroupSkipped default [AlreadyAtTarget]",
            "02:00 StageSkipped default [AlreadyAtTarget]",
            "02:00 RunSkipped r1",
        ]
    );
    assert_eq!(h.state("r1"), State::Skipped);
}

#[test]
fn second_run_reaching_a_member_in_flight_in_another_run_waits_on_the_lease_then_proceeds() {
    let fleet = vec![member_full(
        "m1",
        "",
        "eastus",
        "1.30.4",
        &[("system", "202411.03.0", false)],
    )];
    let mut h = Harness::fleet(fleet, newer_image_catalog());
    h.with_run = true;
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: ControlPlaneOnly, kubernetesVersion: 1.31.2}",
    ));
    h.create(spec("r2", None, "upgrade: {type: NodeImageOnly}"));
    h.take();
    h.start("r1");
    h.advance_to("00:05");
    h.start("r2");
    assert_eq!(
        h.take(),
        [
            "00:00 r1 RunStarted r1",
            "00:00 r1 StageStarted default",
            "00:00 r1 GroupStarted default",
            "00:00 r1 MemberStarted m1",
            "00:05 r2 RunStarted r2",
            "00:05 r2 StageStarted default",
            "00:05 r2 GroupStarted default",
            "00:05 r2 MemberPending m1 [Lease]",
        ]
    );
    assert_eq!(h.take_started(), ["r1/m1"]);
    let st = h.status("r2");
    let wait = member(&st, "m1").waiting_on.clone().expect("waits");
    assert_eq!(wait.reason, Reason::Lease);
    assert!(wait.message.unwrap_or_default().contains("r1"));

    h.advance_to("00:30");
    h.succeed("r1/m1");
    assert_eq!(
        h.take(),
        [
            "00:30 r1 MemberCompleted m1",
            "00:30 r2 MemberStarted m1",
            "00:30 r1 GroupCompleted default",
            "00:30 r1 StageCompleted default",
            "00:30 r1 RunCompleted r1",
        ]
    );
    assert_eq!(h.take_started(), ["r2/m1"]);
    assert_eq!(
        h.started[1].node_images,
        [pool_image("system", "202412.01.0")]
    );
}

// ==================================================================== freeze calendar

#[test]
fn no_member_starts_inside_a_freeze_and_the_next_one_starts_when_it_ends() {
    let mut h = Harness::fleet(members(&["m1", "m2"], ""), default_catalog());
    h.cmd(Command::SetFreezes {
        freezes: vec![Freeze {
            name: "year-end".into(),
            start: t("02:00"),
            end: t("08:00"),
        }],
    })
    .expect("freezes");
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: Full, kubernetesVersion: 1.31.2}",
    ));
    h.take();
    h.start("r1");
    h.advance_to("03:00");
    h.succeed("r1/m1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted default",
            "00:00 GroupStarted default",
            "00:00 MemberStarted m1",
            "03:00 MemberCompleted m1",
            "03:00 MemberPending m2 [Freeze] until 08:00",
        ]
    );
    let w = h.engine.poll_timeout().expect("a wakeup");
    assert_eq!((w.at, w.reason), (t("08:00"), WakeReason::FreezeEnds));
    h.advance_to("04:00");
    let st = h.status("r1");
    let wait = member(&st, "m2").waiting_on.clone().expect("waits");
    assert_eq!(
        (wait.reason, wait.until),
        (Reason::Freeze, Some(t("08:00")))
    );
    assert!(wait.message.unwrap_or_default().contains("year-end"));

    h.advance_to("09:00");
    assert_eq!(h.take(), ["08:00 MemberStarted m2"]);
    assert_eq!(h.take_started(), ["r1/m1", "r1/m2"]);
}

#[test]
fn run_started_inside_a_freeze_starts_its_first_member_when_the_freeze_ends() {
    let mut h = Harness::fleet(members(&["m1", "m2"], ""), default_catalog());
    h.cmd(Command::SetFreezes {
        freezes: vec![Freeze {
            name: "year-end".into(),
            start: t("02:00"),
            end: t("08:00"),
        }],
    })
    .expect("freezes");
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: Full, kubernetesVersion: 1.31.2}",
    ));
    h.take();
    h.advance_to("03:00");
    h.start("r1");
    h.advance_to("08:30");
    h.succeed("r1/m1");
    assert_eq!(
        h.take(),
        [
            "03:00 RunStarted r1",
            "03:00 StageStarted default",
            "03:00 GroupStarted default",
            "03:00 MemberPending m1 [Freeze] until 08:00",
            "08:00 MemberStarted m1",
            "08:30 MemberCompleted m1",
            "08:30 MemberStarted m2",
        ]
    );
}

// ==================================================================== retry run (spec §9)

#[test]
fn retry_run_covers_only_unfinished_members_of_a_finished_run_with_the_same_consistent_images() {
    // m4 runs in westeurope, where 202412.01.0 is missing: the common image is 202411.20.0.
    let mut fleet = members(&["m1", "m2", "m3"], "g");
    fleet.push(member_full(
        "m4",
        "g",
        "westeurope",
        "1.30.4",
        &[("system", "202411.03.0", false)],
    ));
    // w5's window opens at 06:00: it is Pending when the run stops.
    fleet.push(with_window(member_of("w5", "g"), "06:00"));
    let mut h = Harness::fleet(fleet, two_region_catalog());
    h.create(UpdateRunSpec {
        managed_cluster_update: yaml(
            "{upgrade: {type: Full, kubernetesVersion: 1.31.2}, nodeImageSelection: {type: Consistent}}",
        ),
        ..full_run(
            "r1",
            r#"
stages:
- name: s
  maxAllowedFailures: "1"
  groups: [{name: g, maxAllowedFailures: "1"}]
"#,
        )
    });
    h.skip("r1", &["Member:m3"]).expect("skip before start");
    h.take();
    h.start("r1");
    assert_eq!(
        h.started[0].node_images,
        [pool_image("system", "202411.20.0")]
    );

    // Refused while the run is not finished.
    let e = h
        .cmd(Command::CreateRetryRun {
            name: "r2".into(),
            from: "r1".into(),
        })
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidState);
    assert!(e.message.contains("Running"), "{}", e.message);

    h.advance_to("00:30");
    h.succeed("r1/m1");
    h.advance_to("00:40");
    h.stop("r1");
    h.advance_to("01:00");
    h.fail("r1/m2");
    assert_eq!(h.state("r1"), State::Stopped);
    let st = h.status("r1");
    let states: Vec<State> = ["m1", "m2", "m3", "m4", "w5"]
        .iter()
        .map(|m| member(&st, m).status.state)
        .collect();
    assert_eq!(
        states,
        [
            State::Completed,
            State::Failed,
            State::Skipped,
            State::NotStarted,
            State::Pending,
        ]
    );

    // A newer image everywhere: the retry still uses the image r1 resolved.
    h.advance_to("01:10");
    h.observe(Observation::NodeImageReleased {
        version: img("202412.01.0"),
        region: "*".into(),
        since: t("01:10"),
        security_patch: false,
    });
    h.take();
    h.cmd(Command::CreateRetryRun {
        name: "r2".into(),
        from: "r1".into(),
    })
    .expect("retry of a finished run");
    assert_eq!(h.take(), ["01:10 RunCreated r2"]);
    let plan = h.plan("r2");
    assert_eq!(plan_groups(&plan), [("g", vec!["m2", "m3", "m4", "w5"])]);
    assert!(plan.unassigned.is_empty());
    assert_eq!(
        h.status("r2")
            .node_image_selection
            .map(|s| s.selected_node_image_versions),
        Some(vec![img("202411.20.0")])
    );

    h.advance_to("01:20");
    h.take_started();
    h.start("r2");
    let started = h
        .events
        .iter()
        .find(|e| e.kind() == waverun_core::EventKind::RunStarted && e.run == "r2");
    assert_eq!(
        started
            .and_then(|e| e.message().map(str::to_string))
            .as_deref(),
        Some("retry of run r1")
    );
    assert_eq!(h.take_started(), ["r2/m2"]);
    let op = h.started.last().expect("r2/m2");
    assert_eq!(op.kubernetes_version.as_deref(), Some("1.31.2"));
    assert_eq!(op.node_images, [pool_image("system", "202411.20.0")]);
}

// ==================================================================== gates (spec §1, §4)

#[test]
fn approval_gates_refuse_early_and_repeated_approval_and_record_who_approved() {
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  groups: [{name: a}]
- name: s2
  beforeGates: [{type: Approval, displayName: prod sign-off}]
  groups: [{name: b}]
"#,
    ));
    h.take();
    h.start("r1");
    let s2_before = || GateSelector {
        id: None,
        stage: Some("s2".into()),
        group: None,
        timing: Some(GateTiming::Before),
    };
    h.advance_to("00:05");
    let e = assert_invalid_state(h.approve("r1", s2_before(), "alice"), "NotStarted");
    assert!(e.message.contains("s2"), "{}", e.message);
    assert_eq!(
        stage(&h.status("r1"), "s2").before_gates[0].status.state,
        State::NotStarted
    );
    assert_eq!(stage(&h.status("r1"), "s2").before_gates[0].gate_id, None);

    h.advance_to("00:30");
    h.succeed("r1/a1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s1",
            "00:00 GroupStarted a",
            "00:00 MemberStarted a1",
            "00:30 MemberCompleted a1",
            "00:30 GroupCompleted a",
            "00:30 StageCompleted s1",
            "00:30 StageStarted s2",
            "00:30 GateCreated r1/stage:s2/before/0",
        ]
    );
    let st = h.status("r1");
    assert_eq!(st.status.state, State::Pending);
    let s2 = stage(&st, "s2");
    assert_eq!(s2.status.state, State::Pending);
    let wait = s2.waiting_on.clone().expect("waits on the gate");
    assert_eq!(wait.reason, Reason::Gate);
    assert!(wait.message.unwrap_or_default().contains("prod sign-off"));

    h.advance_to("01:00");
    h.approve("r1", s2_before(), "alice")
        .expect("approve a Pending gate");
    assert_eq!(
        h.take(),
        [
            "01:00 GateCompleted r1/stage:s2/before/0",
            "01:00 GroupStarted b",
            "01:00 MemberStarted b1",
        ]
    );
    assert_eq!(h.events[h.events.len() - 3].by(), Some("alice"));
    let gate = stage(&h.status("r1"), "s2").before_gates[0].clone();
    assert_eq!(gate.status.state, State::Completed);
    assert_eq!(gate.completed_by.as_deref(), Some("alice"));
    assert_eq!(gate.status.start_time, Some(t("00:30")));
    assert_eq!(gate.status.completed_time, Some(t("01:00")));
    assert_eq!(gate.gate_id.as_deref(), Some("r1/stage:s2/before/0"));

    h.advance_to("01:05");
    let e = assert_invalid_state(h.approve("r1", s2_before(), "bob"), "Completed");
    assert!(e.message.contains("already"), "{}", e.message);
    assert_eq!(
        stage(&h.status("r1"), "s2").before_gates[0]
            .completed_by
            .as_deref(),
        Some("alice")
    );
}

#[test]
fn approving_by_position_takes_the_first_pending_gate_there_and_by_id_that_gate() {
    // A position leaves out what it does not name: no stage means any stage, no group means a
    // stage's own gates, no timing either timing. The first Pending gate there (in strategy
    // order) is approved; with none Pending the first gate there explains the refusal.
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    fleet.extend(members(&["c1"], "c"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  groups: [{name: a, afterGates: [{type: Approval}]}]
- name: s2
  beforeGates: [{type: Approval}, {type: Approval}]
  afterGates: [{type: Approval}]
  groups:
  - {name: b, beforeGates: [{type: Approval}]}
  - {name: c, beforeGates: [{type: Approval}]}
"#,
    ));
    h.take();
    let at = |stage: Option<&str>, group: Option<&str>, timing: Option<GateTiming>| GateSelector {
        id: None,
        stage: stage.map(str::to_string),
        group: group.map(str::to_string),
        timing,
    };
    let by_id = |id: &str| GateSelector {
        id: Some(id.to_string()),
        stage: None,
        group: None,
        timing: None,
    };
    let e = h.approve("r1", at(None, None, None), "x").unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{e}");
    assert!(e.message.contains("not started"), "{}", e.message);

    h.start("r1");
    h.take();
    // No stage gate is Pending: the first After stage gate (s2's) is NotStarted.
    let e = assert_invalid_state(
        h.approve("r1", at(None, None, Some(GateTiming::After)), "x"),
        "NotStarted",
    );
    assert!(e.message.contains("After stage \"s2\""), "{}", e.message);
    // Group a's after-gate is not created before a1 finishes.
    assert_invalid_state(
        h.approve("r1", at(None, Some("a"), None), "x"),
        "NotStarted",
    );
    let e = h
        .approve("r1", at(Some("s2"), Some("a"), None), "x")
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "a is not a group of s2: {e}");
    h.advance_to("00:30");
    h.succeed("r1/a1");
    h.approve("r1", at(None, Some("a"), None), "x")
        .expect("a's after-gate");
    assert_eq!(
        h.take(),
        [
            "00:30 MemberCompleted a1",
            "00:30 GateCreated r1/group:a/after/0",
            "00:30 GateCompleted r1/group:a/after/0",
            "00:30 GroupCompleted a",
            "00:30 StageCompleted s1",
            "00:30 StageStarted s2",
            "00:30 GateCreated r1/stage:s2/before/0",
            "00:30 GateCreated r1/stage:s2/before/1",
        ]
    );
    // Nothing named: the first Pending stage gate, one after the other.
    h.approve("r1", at(None, None, None), "x")
        .expect("before/0");
    h.approve("r1", at(None, None, None), "x")
        .expect("before/1");
    let e = assert_invalid_state(
        h.approve("r1", at(None, None, Some(GateTiming::Before)), "x"),
        "Completed",
    );
    assert!(e.message.contains("Before stage \"s2\""), "{}", e.message);
    h.approve("r1", at(None, Some("c"), None), "x")
        .expect("c's gate");
    h.approve("r1", by_id("r1/group:b/before/0"), "x")
        .expect("b's gate by id");
    let e = h
        .approve("r1", by_id("r1/group:b/before/1"), "x")
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{e}");
    assert_eq!(
        h.take(),
        [
            "00:30 GateCompleted r1/stage:s2/before/0",
            "00:30 GateCompleted r1/stage:s2/before/1",
            "00:30 GroupStarted b",
            "00:30 GateCreated r1/group:b/before/0",
            "00:30 GroupStarted c",
            "00:30 GateCreated r1/group:c/before/0",
            "00:30 GateCompleted r1/group:c/before/0",
            "00:30 MemberStarted c1",
            "00:30 GateCompleted r1/group:b/before/0",
            "00:30 MemberStarted b1",
        ]
    );
}

#[test]
fn scheduled_start_gate_completes_at_its_absolute_start_time() {
    let mut h = Harness::fleet(members(&["b1"], "b"), default_catalog());
    h.create(full_run("r1", SCHEDULED_GATE_STRATEGY));
    h.take();
    h.start("r1");
    // Tuesday 09:00 at +01:00 after Monday 2026-12-07 00:00Z is 2026-12-08T08:00Z.
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted b",
            "00:00 GateCreated r1/group:b/before/0 until +1d 08:00",
        ]
    );
    let st = h.status("r1");
    let g = group(&st, "b");
    assert_eq!(g.before_gates[0].absolute_start_time, Some(t("+1d 08:00")));
    assert_eq!(g.status.state, State::Pending);
    let wait = g.waiting_on.clone().expect("waits");
    assert_eq!(
        (wait.reason, wait.until),
        (Reason::Gate, Some(t("+1d 08:00")))
    );
    let w = h.engine.poll_timeout().expect("a wakeup");
    assert_eq!(
        (w.at, w.reason),
        (t("+1d 08:00"), WakeReason::ScheduledGate)
    );

    h.advance_to("+1d 07:59");
    assert!(h.take().is_empty());
    h.advance_to("+1d 09:00");
    assert_eq!(
        h.take(),
        [
            "+1d 08:00 GateCompleted r1/group:b/before/0",
            "+1d 08:00 MemberStarted b1",
        ]
    );
    assert_eq!(
        group(&h.status("r1"), "b").before_gates[0]
            .status
            .completed_time,
        Some(t("+1d 08:00"))
    );
}

#[test]
fn completing_a_scheduled_gate_opens_it_early() {
    let mut h = Harness::fleet(members(&["b1"], "b"), default_catalog());
    h.create(full_run("r1", SCHEDULED_GATE_STRATEGY));
    h.start("r1");
    h.take();
    h.advance_to("03:00");
    let sel = GateSelector {
        id: None,
        stage: Some("s".into()),
        group: Some("b".into()),
        timing: Some(GateTiming::Before),
    };
    h.approve("r1", sel, "bob")
        .expect("complete a scheduled gate early");
    assert_eq!(
        h.take(),
        [
            "03:00 GateCompleted r1/group:b/before/0",
            "03:00 MemberStarted b1",
        ]
    );
    assert_eq!(
        group(&h.status("r1"), "b").before_gates[0]
            .completed_by
            .as_deref(),
        Some("bob")
    );
    // The schedule passing later changes nothing.
    h.advance_to("+1d 09:00");
    assert!(h.take().is_empty());
    assert_eq!(h.take_started(), ["r1/b1"]);
}

#[test]
fn approving_a_gate_before_the_run_starts_is_refused_and_the_gate_shows_not_started() {
    let mut h = Harness::fleet(members(&["a1"], "a"), default_catalog());
    h.create(full_run(
        "r1",
        "stages: [{name: s, beforeGates: [{type: Approval}], groups: [{name: a}]}]",
    ));
    h.take();
    let gate = stage(&h.status("r1"), "s").before_gates[0].clone();
    assert_eq!(gate.status.state, State::NotStarted);
    assert_eq!(gate.gate_id, None);
    let sel = GateSelector {
        id: None,
        stage: Some("s".into()),
        group: None,
        timing: Some(GateTiming::Before),
    };
    let e = h.approve("r1", sel, "alice").unwrap_err();
    assert!(e.message.contains("not started"), "{}", e.message);
    assert!(h.take().is_empty());
    // Once the run reaches it, the gate is Pending and must still be approved.
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GateCreated r1/stage:s/before/0",
        ]
    );
}

#[test]
fn after_gates_and_the_after_stage_wait_run_together_and_both_must_finish() {
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  afterStageWaitInSeconds: 3600
  afterGates: [{type: Approval}]
  groups:
  - name: a
    afterGates: [{type: Approval}]
- name: s2
  groups: [{name: b}]
"#,
    ));
    h.take();
    h.start("r1");
    h.advance_to("00:30");
    h.succeed("r1/a1");
    let group_after = GateSelector {
        id: Some("r1/group:a/after/0".into()),
        stage: None,
        group: None,
        timing: None,
    };
    h.advance_to("00:40");
    h.approve("r1", group_after, "carol")
        .expect("approve group after-gate");
    // The stage after-gate is approved before the wait ends: the stage waits for the timer.
    let stage_after = GateSelector {
        id: None,
        stage: Some("s1".into()),
        group: None,
        timing: Some(GateTiming::After),
    };
    h.advance_to("00:50");
    h.approve("r1", stage_after, "carol")
        .expect("approve stage after-gate");
    h.advance_to("02:00");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s1",
            "00:00 GroupStarted a",
            "00:00 MemberStarted a1",
            "00:30 MemberCompleted a1",
            "00:30 GateCreated r1/group:a/after/0",
            "00:40 GateCompleted r1/group:a/after/0",
            "00:40 GroupCompleted a",
            "00:40 AfterStageWaitStarted s1 until 01:40",
            "00:40 GateCreated r1/stage:s1/after/0",
            "00:50 GateCompleted r1/stage:s1/after/0",
            "01:40 AfterStageWaitCompleted s1",
            "01:40 StageCompleted s1",
            "01:40 StageStarted s2",
            "01:40 GroupStarted b",
            "01:40 MemberStarted b1",
        ]
    );
}

// ==================================================================== idempotency

#[test]
fn operation_ids_are_run_slash_member_and_duplicate_results_are_ignored() {
    let mut h = Harness::fleet(members(&["m1", "m2"], ""), default_catalog());
    h.create(spec(
        "r1",
        None,
        "upgrade: {type: Full, kubernetesVersion: 1.31.2}",
    ));
    h.start("r1");
    h.take();
    let op = h.started[0].clone();
    assert_eq!(op.operation_id, "r1/m1");
    assert_eq!((op.run.as_str(), op.member.as_str()), ("r1", "m1"));
    assert_eq!(op.region, "eastus");
    assert_eq!(
        member(&h.status("r1"), "m1").operation_id.as_deref(),
        Some("r1/m1")
    );

    h.advance_to("00:30");
    h.succeed("r1/m1");
    assert_eq!(
        h.take(),
        ["00:30 MemberCompleted m1", "00:30 MemberStarted m2"]
    );
    let before = h.engine.snapshot();
    h.succeed("r1/m1");
    h.fail("r1/m1");
    h.succeed("r1/unknown");
    assert!(h.take().is_empty(), "repeated results are ignored");
    assert_eq!(h.take_started(), ["r1/m1", "r1/m2"]);
    assert_eq!(h.engine.snapshot(), before, "nothing changed");
    let st = h.status("r1");
    assert_eq!(member(&st, "m1").status.state, State::Completed);
    assert_eq!(st.failure_count, 0);

    h.advance_to("01:00");
    h.succeed("r1/m2");
    h.succeed("r1/m2");
    assert_eq!(
        h.take(),
        [
            "01:00 MemberCompleted m2",
            "01:00 GroupCompleted default",
            "01:00 StageCompleted default",
            "01:00 RunCompleted r1",
        ]
    );
}

// ==================================================================== durability

#[test]
fn restored_snapshot_gives_identical_outputs_for_the_same_subsequent_inputs() {
    let mut fleet = members(&["m1", "m2"], "a");
    fleet.push(with_window(member_of("m3", "b"), "06:00"));
    fleet.extend(members(&["m5"], "c"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  afterStageWaitInSeconds: 600
  maxAllowedFailures: "1"
  groups:
  - {name: a, maxAllowedFailures: "1"}
  - {name: b}
- name: s2
  beforeGates: [{type: Approval}]
  groups: [{name: c}]
"#,
    ));
    h.start("r1");
    h.advance_to("00:10");
    let snapshot = h.engine.snapshot();
    let restored = Engine::restore(&snapshot).expect("restore");
    assert_eq!(restored.snapshot(), snapshot, "restore is lossless");

    let journal: Vec<(Timestamp, Input)> = vec![
        (t("00:30"), obs_ok("r1/m1")),
        (
            t("01:00"),
            Input::Observation(Observation::UpgradeFailed {
                operation_id: "r1/m2".into(),
                message: "node drain timed out".into(),
            }),
        ),
        (t("06:30"), obs_ok("r1/m3")),
        (
            t("07:00"),
            Input::Command(Command::CompleteGate {
                run: "r1".into(),
                gate: GateSelector {
                    id: None,
                    stage: Some("s2".into()),
                    group: None,
                    timing: Some(GateTiming::Before),
                },
                by: Some("ops".into()),
            }),
        ),
        (t("07:30"), obs_ok("r1/m5")),
        (t("08:00"), Input::Timeout),
    ];
    let mut original = h.engine.clone();
    let a = replay(&mut original, &journal);
    let mut copy = restored;
    let b = replay(&mut copy, &journal);
    assert_eq!(a, b, "identical serialized outputs");
    assert_eq!(original.snapshot(), copy.snapshot());
    // The journal really exercised the run: window timer, wait timer, gate, completion.
    let all = a.join("\n");
    for needle in [
        "\"member\":\"m3\"",
        "\"kind\":\"AfterStageWaitCompleted\"",
        "\"by\":\"ops\"",
        "\"kind\":\"RunCompleted\"",
    ] {
        assert!(all.contains(needle), "{needle} in replay");
    }
    assert_eq!(original.run_state("r1"), Some(State::Completed));
}

/// An engine with a run in progress (members in flight, a window timer, a wait, a gate ahead).
fn engine_mid_run() -> Engine {
    let mut fleet = members(&["m1", "m2"], "a");
    fleet.push(with_window(member_of("m3", "b"), "06:00"));
    fleet.extend(members(&["m5"], "c"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  afterStageWaitInSeconds: 600
  groups: [{name: a}, {name: b}]
- name: s2
  beforeGates: [{type: Approval}]
  groups: [{name: c}]
"#,
    ));
    h.start("r1");
    h.advance_to("00:10");
    h.engine
}

fn restore_err(snapshot: &str) -> Error {
    match Engine::restore(snapshot) {
        Ok(_) => panic!("restored: {snapshot}"),
        Err(e) => e,
    }
}

#[test]
fn a_snapshot_names_its_format_version_first_and_round_trips_byte_for_byte() {
    let engine = engine_mid_run();
    let snapshot = engine.snapshot();
    assert!(
        snapshot.starts_with(r#"{"formatVersion":1,"engine":{"#),
        "{}",
        &snapshot[..80]
    );
    let doc: serde_json::Value = serde_json::from_str(&snapshot).unwrap();
    assert_eq!(doc["formatVersion"], waverun_core::snapshot::FORMAT_VERSION);
    assert_eq!(
        doc.as_object().unwrap().len(),
        2,
        "formatVersion and engine only"
    );
    let restored = Engine::restore(&snapshot).expect("restore");
    assert_eq!(restored.snapshot(), snapshot);
    // The version may come after the state (another writer's key order): the same engine.
    let engine_part = serde_json::to_string(&doc["engine"]).unwrap();
    let swapped = format!(r#"{{"engine":{engine_part},"formatVersion":1}}"#);
    assert_eq!(
        Engine::restore(&swapped).expect("restore").snapshot(),
        snapshot
    );
}

#[test]
fn restore_refuses_a_snapshot_of_another_format_version_naming_both() {
    let snapshot = engine_mid_run().snapshot();
    let future = snapshot.replacen(r#""formatVersion":1"#, r#""formatVersion":999"#, 1);
    let e = restore_err(&future);
    assert_eq!(e.code, ErrorCode::InvalidSnapshot);
    assert_eq!(
        e.message,
        "snapshot: formatVersion 999 is not supported (this build reads formatVersion 1)"
    );
    // Checked before the state is read: a future state of any shape gets the same answer.
    let e = restore_err(r#"{"formatVersion":2,"engine":{"shards":[]}}"#);
    assert_eq!(e.code, ErrorCode::InvalidSnapshot);
    assert!(
        e.message.contains("formatVersion 2 is not supported"),
        "{e}"
    );
    let e = restore_err(r#"{"formatVersion":"1","engine":{}}"#);
    assert!(
        e.message.contains(r#"formatVersion "1" is not supported"#),
        "{e}"
    );
}

#[test]
fn restore_refuses_a_snapshot_without_a_format_version() {
    let snapshot = engine_mid_run().snapshot();
    let doc: serde_json::Value = serde_json::from_str(&snapshot).unwrap();
    // The unversioned form earlier builds wrote: the bare engine state.
    let bare = serde_json::to_string(&doc["engine"]).unwrap();
    let wrapped_only = format!(r#"{{"engine":{bare}}}"#);
    for text in [bare.as_str(), wrapped_only.as_str(), "{}"] {
        let e = restore_err(text);
        assert_eq!(e.code, ErrorCode::InvalidSnapshot, "{e}");
        assert_eq!(
            e.message,
            "snapshot: no formatVersion found (this build reads formatVersion 1)"
        );
    }
    // Not a snapshot at all, or a versioned one that is broken: InvalidSnapshot still.
    for text in [
        "not json",
        "[]",
        r#"{"formatVersion":1}"#,
        r#"{"formatVersion":1,"engine":{"now":"2026-12-07T00:00:00Z"}}"#,
        r#"{"formatVersion":1,"engine":{},"extra":true}"#,
    ] {
        let e = restore_err(text);
        assert_eq!(e.code, ErrorCode::InvalidSnapshot, "{text}: {e}");
        assert!(e.message.starts_with("snapshot: "), "{e}");
    }
}

// ==================================================================== explainable waits (spec §9)

#[test]
fn pending_member_explains_its_maintenance_window_and_until_when() {
    let mut h = Harness::fleet(
        vec![with_window(member_of("w1", "g"), "06:00")],
        default_catalog(),
    );
    h.create(full_run("r1", "stages: [{name: s, groups: [{name: g}]}]"));
    h.take();
    h.start("r1");
    assert_eq!(
        h.take(),
        [
            "00:00 RunStarted r1",
            "00:00 StageStarted s",
            "00:00 GroupStarted g",
            "00:00 MemberPending w1 [MaintenanceWindow] until 06:00",
        ]
    );
    let st = h.status("r1");
    let wait = member(&st, "w1").waiting_on.clone().expect("member waits");
    assert_eq!(
        (wait.reason, wait.until),
        (Reason::MaintenanceWindow, Some(t("06:00")))
    );
    assert!(
        wait.message
            .unwrap_or_default()
            .contains("2026-12-07T06:00:00Z"),
        "message gives the next opening"
    );
    assert_eq!(member(&st, "w1").status.state, State::Pending);
    let g = group(&st, "g");
    assert_eq!(g.status.state, State::Pending);
    let gw = g.waiting_on.clone().expect("group waits");
    assert_eq!(
        (gw.reason, gw.until),
        (Reason::MaintenanceWindow, Some(t("06:00")))
    );
    assert_eq!(stage(&st, "s").status.state, State::Pending);
    assert_eq!(st.status.state, State::Pending);
    assert_eq!(
        st.waiting_on.as_ref().and_then(|w| w.until),
        Some(t("06:00"))
    );

    h.advance_to("07:00");
    assert_eq!(h.take(), ["06:00 MemberStarted w1"]);
    assert_eq!(h.state("r1"), State::Running);
}

#[test]
fn group_waiting_on_an_approval_gate_says_so() {
    let mut h = Harness::fleet(members(&["a1"], "a"), default_catalog());
    h.create(full_run(
        "r1",
        "stages: [{name: s, groups: [{name: a, beforeGates: [{type: Approval, displayName: db owner}]}]}]",
    ));
    h.start("r1");
    let st = h.status("r1");
    let g = group(&st, "a");
    assert_eq!(g.status.state, State::Pending);
    let wait = g.waiting_on.clone().expect("group waits");
    assert_eq!((wait.reason, wait.until), (Reason::Gate, None));
    let msg = wait.message.unwrap_or_default();
    assert!(
        msg.contains("db owner") && msg.contains("r1/group:a/before/0"),
        "{msg}"
    );
    assert_eq!(stage(&st, "s").status.state, State::Pending);
    assert_eq!(st.status.state, State::Pending);
    assert_eq!(st.waiting_on.map(|w| w.reason), Some(Reason::Gate));
}

#[test]
fn stage_in_its_after_stage_wait_says_until_when() {
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = Harness::fleet(fleet, default_catalog());
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s1
  afterStageWaitInSeconds: 3600
  groups: [{name: a}]
- name: s2
  groups: [{name: b}]
"#,
    ));
    h.start("r1");
    h.advance_to("00:30");
    h.succeed("r1/a1");
    h.take();
    let st = h.status("r1");
    let wait = stage(&st, "s1").waiting_on.clone().expect("stage waits");
    assert_eq!(
        (wait.reason, wait.until),
        (Reason::AfterStageWait, Some(t("01:30")))
    );
    assert_eq!(
        st.waiting_on.map(|w| (w.reason, w.until)),
        Some((Reason::AfterStageWait, Some(t("01:30"))))
    );
    let w = h.engine.poll_timeout().expect("a wakeup");
    assert_eq!((w.at, w.reason), (t("01:30"), WakeReason::AfterStageWait));
    h.advance_to("02:00");
    assert_eq!(
        h.take(),
        [
            "01:30 AfterStageWaitCompleted s1",
            "01:30 StageCompleted s1",
            "01:30 StageStarted s2",
            "01:30 GroupStarted b",
            "01:30 MemberStarted b1",
        ]
    );
}

// ==================================================================== validation

#[test]
fn stage_concurrency_above_100_percent_is_rejected_naming_the_field() {
    let mut h = Harness::fleet(vec![], default_catalog());
    let e = h
        .cmd(create_cmd(full_run(
            "r1",
            "stages: [{name: s, maxConcurrency: '120%', groups: [{name: g}]}]",
        )))
        .unwrap_err();
    assert_invalid_field(&e, "strategy.stages[0].maxConcurrency", "is above 100%");
    assert_eq!(
        h.engine.run_status("r1").unwrap_err().code,
        ErrorCode::NotFound
    );

    let s: UpdateStrategy =
        yaml("stages: [{name: s, maxConcurrency: '120%', groups: [{name: g}]}]");
    let e = validate::strategy(&s).unwrap_err();
    assert_invalid_field(&e, "stages[0].maxConcurrency", "is above 100%");

    let e = h
        .cmd(create_cmd(full_run(
            "r1",
            "stages: [{name: s, groups: [{name: g, maxConcurrency: '120%'}]}]",
        )))
        .unwrap_err();
    assert_invalid_field(
        &e,
        "strategy.stages[0].groups[0].maxConcurrency",
        "is above 100%",
    );
}

#[test]
fn literal_stage_concurrency_above_50_is_rejected() {
    let mut h = Harness::fleet(vec![], default_catalog());
    let e = h
        .cmd(create_cmd(full_run(
            "r1",
            "stages: [{name: s, maxConcurrency: '51', groups: [{name: g}]}]",
        )))
        .unwrap_err();
    assert_invalid_field(&e, "strategy.stages[0].maxConcurrency", "50");
    h.cmd(create_cmd(full_run(
        "r1",
        "stages: [{name: s, maxConcurrency: '50', groups: [{name: g}]}]",
    )))
    .expect("50 is the maximum and allowed");
}

#[test]
fn group_concurrency_above_the_stage_value_is_accepted_and_clamped() {
    let mut h = Harness::fleet(members(&["m1", "m2", "m3"], "g"), default_catalog());
    h.create(full_run(
        "r1",
        "stages: [{name: s, maxConcurrency: '2', groups: [{name: g, maxConcurrency: '10'}]}]",
    ));
    let plan = h.plan("r1");
    assert_eq!(plan.stages[0].max_concurrency, 2);
    assert_eq!(plan.stages[0].groups[0].max_concurrency, 2);
    h.start("r1");
    assert_eq!(h.take_started(), ["r1/m1", "r1/m2"]);
    let st = h.status("r1");
    assert_eq!(stage(&st, "s").max_concurrency, 2);
    assert_eq!(group(&st, "g").max_concurrency, 2);
}

#[test]
fn scheduled_start_gate_after_a_stage_or_group_is_rejected() {
    let mut h = Harness::fleet(vec![], default_catalog());
    let e = h
        .cmd(create_cmd(full_run(
            "r1",
            r#"
stages:
- name: s
  groups: [{name: g}]
  afterGates:
  - type: ScheduledStart
    scheduledStartConfiguration: {startDay: Monday, startTime: '09:00'}
"#,
        )))
        .unwrap_err();
    assert_invalid_field(&e, "strategy.stages[0].afterGates[0].type", "before gate");
    let e = h
        .cmd(create_cmd(full_run(
            "r1",
            r#"
stages:
- name: s
  groups:
  - name: g
    afterGates:
    - type: ScheduledStart
      scheduledStartConfiguration: {startDay: Monday, startTime: '09:00'}
"#,
        )))
        .unwrap_err();
    assert_invalid_field(
        &e,
        "strategy.stages[0].groups[0].afterGates[0].type",
        "before gate",
    );
}

#[test]
fn run_with_both_an_inline_strategy_and_a_strategy_name_is_rejected() {
    let mut h = Harness::fleet(vec![], default_catalog());
    h.cmd(Command::UpsertStrategy {
        name: "stored".into(),
        strategy: yaml("stages: [{name: s, groups: [{name: g}]}]"),
    })
    .expect("store a strategy");
    let e = h
        .cmd(create_cmd(UpdateRunSpec {
            update_strategy_name: Some("stored".into()),
            ..full_run("r1", "stages: [{name: s, groups: [{name: g}]}]")
        }))
        .unwrap_err();
    assert_invalid_field(&e, "updateStrategyName", "not both");
    let e = validate::run_spec(&UpdateRunSpec {
        update_strategy_name: Some("stored".into()),
        ..full_run("r1", "stages: [{name: s, groups: [{name: g}]}]")
    })
    .unwrap_err();
    assert_invalid_field(&e, "updateStrategyName", "not both");
}

#[test]
fn kubernetes_version_with_a_node_image_only_upgrade_is_rejected() {
    let mut h = Harness::fleet(vec![], default_catalog());
    let e = h
        .cmd(create_cmd(spec(
            "r1",
            None,
            "upgrade: {type: NodeImageOnly, kubernetesVersion: 1.31.2}",
        )))
        .unwrap_err();
    assert_invalid_field(
        &e,
        "managedClusterUpdate.upgrade.kubernetesVersion",
        "not allowed",
    );
    let e = h
        .cmd(create_cmd(spec("r1", None, "upgrade: {type: Full}")))
        .unwrap_err();
    assert_invalid_field(
        &e,
        "managedClusterUpdate.upgrade.kubernetesVersion",
        "required",
    );
}

// ==================================================================== no arithmetic panic (spec §10)
//
// "No arithmetic on a valid input can overflow or panic": validation bounds what users send
// (after-stage waits at most 7 days), but the engine does not rely on it. A time too late for the
// calendar saturates at its last instant (`DateTime::<Utc>::MAX_UTC`): what would end there
// never ends by itself, and a user can still skip or approve it.

/// The last representable instant minus `minutes`.
fn end_of_time_minus(minutes: i64) -> Timestamp {
    Timestamp::MAX_UTC
        .checked_sub_signed(Duration::minutes(minutes))
        .expect("representable")
}

/// An engine at `now` with the default catalog and `members`, clock harness around it.
fn harness_at(now: Timestamp, fleet: Vec<Member>) -> Harness {
    let mut h = Harness::new();
    h.engine = Engine::new(now);
    h.now = now;
    h.cmd(Command::SetCatalog {
        catalog: default_catalog(),
    })
    .expect("catalog");
    for member in fleet {
        h.cmd(Command::UpsertMember { member }).expect("member");
    }
    h.take();
    h
}

fn after_stage_wait_events(h: &Harness) -> Vec<&Event> {
    h.events
        .iter()
        .filter(|e| e.kind() == waverun_core::EventKind::AfterStageWaitStarted)
        .collect()
}

#[test]
fn after_stage_wait_ending_beyond_the_calendar_saturates_and_can_be_skipped() {
    // A valid 7-day wait, started one day before the end of time.
    let start = end_of_time_minus(24 * 60);
    let mut fleet = members(&["a1"], "a");
    fleet.extend(members(&["b1"], "b"));
    let mut h = harness_at(start, fleet);
    h.create(full_run(
        "r1",
        "stages: [{name: s, afterStageWaitInSeconds: 604800, groups: [{name: a}]}, {name: t, groups: [{name: b}]}]",
    ));
    h.start("r1");
    h.now = start + Duration::minutes(30);
    h.succeed("r1/a1");
    let waits = after_stage_wait_events(&h);
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0].until(), Some(Timestamp::MAX_UTC));
    let w = h.engine.poll_timeout().expect("the wait's wakeup");
    assert_eq!(
        (w.at, w.reason),
        (Timestamp::MAX_UTC, WakeReason::AfterStageWait)
    );
    let st = h.status("r1");
    let s = stage(&st, "s");
    assert_eq!(s.after_stage_wait_status.status.state, State::Running);
    assert_eq!(s.after_stage_wait_status.wait_duration_in_seconds, 604_800);
    assert_eq!(
        s.waiting_on.as_ref().and_then(|w| w.until),
        Some(Timestamp::MAX_UTC)
    );
    // The saturated timer survives a snapshot.
    let restored = Engine::restore(&h.engine.snapshot()).expect("restore");
    assert_eq!(restored.poll_timeout(), h.engine.poll_timeout());
    // The user skips the wait; the run goes on.
    h.take();
    h.skip("r1", &["AfterStageWait:s"]).expect("skip the wait");
    assert_eq!(h.take_started(), ["r1/a1", "r1/b1"]);
    assert_eq!(
        h.engine.poll_timeout().map(|w| w.at),
        Some(Timestamp::MAX_UTC)
    );
}

#[test]
fn after_stage_wait_of_u64_max_seconds_is_refused_naming_the_field() {
    let mut h = Harness::fleet(members(&["a1"], "a"), default_catalog());
    let strategy = format!(
        "stages: [{{name: s, afterStageWaitInSeconds: {}, groups: [{{name: a}}]}}]",
        u64::MAX
    );
    let e = h.cmd(create_cmd(full_run("r1", &strategy))).unwrap_err();
    assert_invalid_field(&e, "strategy.stages[0].afterStageWaitInSeconds", "maximum");
    let e = h
        .cmd(Command::UpsertStrategy {
            name: "long".into(),
            strategy: yaml(&strategy),
        })
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidField, "{e}");
    assert!(h.engine.run_state("r1").is_none());
}

#[test]
fn after_stage_wait_beyond_i64_seconds_in_a_restored_snapshot_never_ends_and_never_panics() {
    // Validation refuses such waits; a snapshot is not validated. The wait saturates (it does
    // not wrap to a negative duration or panic).
    for secs in [i64::MAX as u64, u64::MAX] {
        let mut h = Harness::fleet(members(&["a1"], "a"), default_catalog());
        h.create(full_run(
            "r1",
            "stages: [{name: s, afterStageWaitInSeconds: 1234, groups: [{name: a}]}]",
        ));
        let snapshot = h.engine.snapshot().replace(
            "\"afterStageWaitInSeconds\":1234",
            &format!("\"afterStageWaitInSeconds\":{secs}"),
        );
        assert!(snapshot.contains(&secs.to_string()));
        h.engine = Engine::restore(&snapshot).expect("restore");
        h.start("r1");
        h.advance_to("00:30");
        h.succeed("r1/a1");
        let waits = after_stage_wait_events(&h);
        assert_eq!(waits.len(), 1, "{secs}");
        assert_eq!(waits[0].until(), Some(Timestamp::MAX_UTC), "{secs}");
        let st = h.status("r1");
        assert_eq!(
            stage(&st, "s")
                .after_stage_wait_status
                .wait_duration_in_seconds,
            secs
        );
        h.advance_to("+400d 00:00");
        assert_eq!(h.state("r1"), State::Running, "{secs}: the wait goes on");
        h.skip("r1", &["AfterStageWait:s"]).expect("skip the wait");
        assert_eq!(h.state("r1"), State::Completed, "{secs}");
    }
}

#[test]
fn scheduled_gates_windows_and_freezes_at_the_end_of_time_never_panic() {
    // One hour before the end of time: the scheduled gate's next Monday 00:00 is beyond it
    // (saturated), the member's window never opens again, a freeze ends at the last instant.
    let start = end_of_time_minus(60);
    let windowed = with_window(member_of("w1", "w"), "02:00");
    let mut h = harness_at(start, vec![member_of("g1", "g"), windowed]);
    h.cmd(Command::SetFreezes {
        freezes: vec![Freeze {
            name: "forever".into(),
            start: end_of_time_minus(10),
            end: Timestamp::MAX_UTC,
        }],
    })
    .expect("freezes");
    h.create(full_run(
        "r1",
        r#"
stages:
- name: s
  groups:
  - name: g
    beforeGates: [{type: ScheduledStart, scheduledStartConfiguration: {startDay: Monday, startTime: "00:00"}}]
  - name: w
"#,
    ));
    h.start("r1");
    let st = h.status("r1");
    let gate = &group(&st, "g").before_gates[0];
    assert_eq!(gate.status.state, State::Pending);
    assert_eq!(gate.absolute_start_time, Some(Timestamp::MAX_UTC));
    let w1 = member(&st, "w1");
    assert_eq!(w1.status.state, State::Pending, "{w1:?}");
    let wait = w1.waiting_on.clone().expect("w1 says why");
    assert_eq!((wait.reason, wait.until), (Reason::MaintenanceWindow, None));
    // Up to the last instant the freeze holds; at it, the freeze is over and the saturated
    // gate opens; the window still never opens.
    h.advance_to_instant(end_of_time_minus(1));
    assert!(h.take_started().is_empty());
    h.advance_to_instant(Timestamp::MAX_UTC);
    assert_eq!(h.take_started(), ["r1/g1"]);
    assert_eq!(member(&h.status("r1"), "w1").status.state, State::Pending);
}

#[test]
fn simulated_fleet_with_upgrade_minutes_u32_max_never_panics() {
    use waverun_core::sim::SimulatedFleet;
    let sc = Scenario::from_json(
        &serde_json::json!({
            "start": "2026-12-07T00:00:00Z",
            "members": [
                {"name": "slow", "region": "eastus", "kubernetesVersion": "1.30.4",
                 "behavior": {"upgradeMinutes": u32::MAX, "jitterMinutes": u32::MAX}},
                {"name": "slower", "region": "eastus", "kubernetesVersion": "1.30.4",
                 "behavior": {"upgradeMinutes": u32::MAX}}
            ],
            "releases": {"kubernetes": [
                {"version": "1.31.2", "available": {"*": "2026-11-01T00:00:00Z"}}]},
            "run": {"name": "r1", "managedClusterUpdate":
                {"upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"}}},
            "actions": [{"at": "2026-12-07T00:00:00Z", "do": "start"}]
        })
        .to_string(),
    )
    .expect("scenario parses");
    let op = |member: &str| UpgradeOperation {
        operation_id: format!("r1/{member}"),
        run: "r1".into(),
        member: member.into(),
        region: "eastus".into(),
        provider: None,
        upgrade_type: waverun_core::UpgradeType::Full,
        kubernetes_version: Some("1.31.2".into()),
        node_images: Vec::new(),
    };
    // From 2026, u32::MAX minutes (about 8,166 years) is still a date.
    let mut fleet = SimulatedFleet::new(&sc);
    fleet.submit(&op("slower"), sc.start);
    assert_eq!(
        fleet.next_completion(),
        Some(sc.start + Duration::minutes(i64::from(u32::MAX)))
    );
    // Near the end of time, it saturates: the upgrade never completes.
    let late = end_of_time_minus(1);
    let mut fleet = SimulatedFleet::new(&sc);
    fleet.submit(&op("slow"), late);
    fleet.submit(&op("slower"), late);
    assert_eq!(fleet.next_completion(), Some(Timestamp::MAX_UTC));
    assert!(fleet.take_due(late).is_empty());
    assert_eq!(fleet.take_due(Timestamp::MAX_UTC).len(), 2);
    // Simulated end to end (if the scenario is accepted): the run is cut at the horizon with
    // the slow member still in flight.
    match Simulation::new(&sc) {
        Ok(mut sim) => {
            sim.run_to_end();
            let r = sim.report();
            assert_eq!(r.summary.state, State::Running);
            assert_eq!(
                member(&r.run.as_ref().unwrap().status, "slow").status.state,
                State::Running
            );
        }
        Err(e) => assert_eq!(e.code, ErrorCode::InvalidField, "{e}"),
    }
}

#[test]
fn a_member_waiting_in_a_stopped_or_failed_run_cannot_be_deleted_so_a_resume_finds_it() {
    // Found by the fuzzer: deleting a member a Failed run had not reached, then resuming the
    // run, panicked when the engine went to start it.
    for state in ["Failed", "Stopped"] {
        let mut h = run_in(state);
        let e = h
            .cmd(Command::DeleteMember {
                name: "m2".to_string(),
            })
            .expect_err(state);
        assert_eq!(e.code, ErrorCode::InvalidState, "{state}: {e}");
        assert!(e.message.contains("is part of run \"r1\""), "{state}: {e}");
        h.start("r1");
        assert_eq!(h.take_started(), ["r1/m2"], "{state}");
    }
    // A member the run has finished with may go.
    let mut h = run_in("Failed");
    h.cmd(Command::DeleteMember {
        name: "m1".to_string(),
    })
    .expect("m1 failed and will not be redone");
}

// ==================================================================== helpers: clock harness

/// Day 0 of every test: Monday 2026-12-07.
const DAY0: &str = "2026-12-07";

/// `"HH:MM"` on day 0, `"+Nd HH:MM"` N days later, or a full RFC 3339 time.
fn t(s: &str) -> Timestamp {
    if s.contains('T') {
        return DateTime::parse_from_rfc3339(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .with_timezone(&Utc);
    }
    let (days, hm) = match s.strip_prefix('+') {
        Some(rest) => {
            let (d, hm) = rest.split_once("d ").expect("+Nd HH:MM");
            (d.parse::<i64>().expect("days"), hm)
        }
        None => (0, s),
    };
    DateTime::parse_from_rfc3339(&format!("{DAY0}T{hm}:00Z"))
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .with_timezone(&Utc)
        + Duration::days(days)
}

/// The inverse of [`t`] for times on or after day 0.
fn show(at: Timestamp) -> String {
    let base = t("00:00");
    if at < base {
        return waverun_core::fmt_time(at);
    }
    let days = (at - base).num_days();
    let hm = at.format("%H:%M").to_string();
    if days == 0 {
        hm
    } else {
        format!("+{days}d {hm}")
    }
}

/// One event as a compact line (see the file's doc comment).
fn line(e: &Event, with_run: bool) -> String {
    let subject = e
        .gate_id()
        .or_else(|| e.member())
        .or_else(|| e.group())
        .or_else(|| e.stage())
        .unwrap_or(&e.run);
    let mut s = if with_run {
        format!("{} {} {:?} {}", show(e.at), e.run, e.kind(), subject)
    } else {
        format!("{} {:?} {}", show(e.at), e.kind(), subject)
    };
    if let Some(r) = e.reason() {
        s.push_str(&format!(" [{r:?}]"));
    }
    if let Some(u) = e.until() {
        s.push_str(&format!(" until {}", show(u)));
    }
    s
}

fn lines(events: &[Event], with_run: bool) -> Vec<String> {
    events.iter().map(|e| line(e, with_run)).collect()
}

/// The engine on a virtual clock: every input is given at `now`; outputs are drained into
/// `events` / `started` (and all of them into `outputs`).
#[derive(Clone)]
struct Harness {
    engine: Engine,
    now: Timestamp,
    /// Every event so far.
    events: Vec<Event>,
    /// Every StartUpgrade command so far.
    started: Vec<UpgradeOperation>,
    /// Every MeasureCheck command so far.
    measured: Vec<waverun_core::CheckRequest>,
    /// Every output so far, in order.
    outputs: Vec<Output>,
    /// How far [`Harness::take`] / [`Harness::take_started`] have read.
    seen_events: usize,
    seen_started: usize,
    /// Prefix event lines with the run name.
    with_run: bool,
}

impl Harness {
    fn new() -> Harness {
        let now = t("00:00");
        Harness {
            engine: Engine::new(now),
            now,
            events: Vec::new(),
            started: Vec::new(),
            measured: Vec::new(),
            outputs: Vec::new(),
            seen_events: 0,
            seen_started: 0,
            with_run: false,
        }
    }

    /// An engine with a catalog and members, setup events already read.
    fn fleet(members: Vec<Member>, catalog: ReleaseCatalog) -> Harness {
        let mut h = Harness::new();
        h.cmd(Command::SetCatalog { catalog }).expect("catalog");
        for member in members {
            h.cmd(Command::UpsertMember { member }).expect("member");
        }
        h.take();
        h
    }

    fn input(&mut self, input: Input) -> Result<(), Error> {
        let r = self.engine.handle_input(self.now, input);
        self.drain();
        r
    }

    fn drain(&mut self) {
        while let Some(out) = self.engine.poll_output() {
            match &out {
                Output::Event(e) => self.events.push(e.clone()),
                Output::Command(HostCommand::StartUpgrade(op)) => self.started.push(op.clone()),
                Output::Command(HostCommand::MeasureCheck(req)) => self.measured.push(req.clone()),
            }
            self.outputs.push(out);
        }
    }

    fn cmd(&mut self, c: Command) -> Result<(), Error> {
        self.input(Input::Command(c))
    }

    /// Runs a command on a copy, leaving `self` as it was.
    fn try_cmd(&self, c: Command) -> (Harness, Result<(), Error>) {
        let mut copy = self.clone();
        copy.take();
        copy.take_started();
        let r = copy.cmd(c);
        (copy, r)
    }

    fn observe(&mut self, o: Observation) {
        self.input(Input::Observation(o))
            .expect("observation accepted");
    }

    fn succeed(&mut self, op: &str) {
        self.observe(Observation::UpgradeSucceeded {
            operation_id: op.to_string(),
        });
    }

    fn fail(&mut self, op: &str) {
        self.observe(Observation::UpgradeFailed {
            operation_id: op.to_string(),
            message: "upgrade failed".to_string(),
        });
    }

    /// Moves the clock to `when`, waking the engine at every wakeup it asks for on the way
    /// (each at its own instant), then once at `when`.
    fn advance_to(&mut self, when: &str) {
        self.advance_to_instant(t(when));
    }

    /// [`Harness::advance_to`] with an absolute instant.
    fn advance_to_instant(&mut self, target: Timestamp) {
        assert!(target >= self.now, "time goes forward");
        for _ in 0..10_000 {
            match self.engine.poll_timeout() {
                Some(w) if w.at <= target => {
                    self.now = self.now.max(w.at);
                    self.input(Input::Timeout).expect("timeout");
                }
                _ => break,
            }
        }
        self.now = target;
        self.input(Input::Timeout).expect("timeout");
    }

    fn create(&mut self, spec: UpdateRunSpec) {
        let name = spec.name.clone();
        self.cmd(create_cmd(spec))
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
    }

    fn start(&mut self, run: &str) {
        self.cmd(start_cmd(run))
            .unwrap_or_else(|e| panic!("start {run}: {e}"));
    }

    fn stop(&mut self, run: &str) {
        self.cmd(stop_cmd(run))
            .unwrap_or_else(|e| panic!("stop {run}: {e}"));
    }

    fn skip(&mut self, run: &str, targets: &[&str]) -> Result<(), Error> {
        self.cmd(skip_cmd(run, targets))
    }

    fn approve(&mut self, run: &str, gate: GateSelector, by: &str) -> Result<(), Error> {
        self.cmd(Command::CompleteGate {
            run: run.to_string(),
            gate,
            by: Some(by.to_string()),
        })
    }

    /// Event lines since the last call.
    fn take(&mut self) -> Vec<String> {
        let out = lines(&self.events[self.seen_events..], self.with_run);
        self.seen_events = self.events.len();
        out
    }

    /// Operation ids of StartUpgrade commands since the last call.
    fn take_started(&mut self) -> Vec<String> {
        let out = self.started[self.seen_started..]
            .iter()
            .map(|o| o.operation_id.clone())
            .collect();
        self.seen_started = self.started.len();
        out
    }

    fn status(&self, run: &str) -> RunStatus {
        self.engine
            .run_status(run)
            .unwrap_or_else(|e| panic!("status {run}: {e}"))
    }

    /// The run's state as its status shows it (Pending derived on top of Running).
    fn state(&self, run: &str) -> State {
        self.status(run).status.state
    }

    fn plan(&self, run: &str) -> Plan {
        self.engine
            .plan(run)
            .unwrap_or_else(|e| panic!("plan {run}: {e}"))
    }
}

/// Feeds a journal to an engine, waking it at every wakeup due before each input; returns every
/// output (and the next wakeup after each input) serialized.
fn replay(engine: &mut Engine, journal: &[(Timestamp, Input)]) -> Vec<String> {
    let mut out = Vec::new();
    let record = |engine: &mut Engine, out: &mut Vec<String>| {
        while let Some(o) = engine.poll_output() {
            out.push(serde_json::to_string(&o).expect("output serialises"));
        }
        out.push(serde_json::to_string(&engine.poll_timeout()).expect("wakeup serialises"));
    };
    for (at, input) in journal {
        while let Some(w) = engine.poll_timeout() {
            if w.at > *at {
                break;
            }
            engine.handle_timeout(w.at);
            record(engine, &mut out);
        }
        let r = engine.handle_input(*at, input.clone());
        out.push(format!("{r:?}"));
        record(engine, &mut out);
    }
    out
}

// ==================================================================== helpers: assertions

/// Asserts an InvalidState refusal whose message names `state`; returns the error.
fn assert_invalid_state(r: Result<(), Error>, state: &str) -> Error {
    let e = r.expect_err("the action must be refused");
    assert_eq!(e.code, ErrorCode::InvalidState, "{e}");
    assert!(
        e.message.contains(state),
        "the refusal names the state {state}: {}",
        e.message
    );
    e
}

/// Asserts an InvalidField error whose first field has `path` and a message containing `rule`.
fn assert_invalid_field(e: &Error, path: &str, rule: &str) {
    assert_eq!(e.code, ErrorCode::InvalidField, "{e}");
    assert_eq!(e.path(), Some(path), "{e}");
    assert!(e.fields[0].message.contains(rule), "{rule} in {e}");
    assert!(e.message.contains(path), "message names the path: {e}");
}

fn stage<'a>(st: &'a RunStatus, name: &str) -> &'a StageStatus {
    st.stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

fn group<'a>(st: &'a RunStatus, name: &str) -> &'a GroupStatus {
    st.stages
        .iter()
        .flat_map(|s| &s.groups)
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no group {name}"))
}

fn member<'a>(st: &'a RunStatus, name: &str) -> &'a MemberStatus {
    st.stages
        .iter()
        .flat_map(|s| &s.groups)
        .flat_map(|g| &g.members)
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no member {name}"))
}

/// `(group, members)` of every group of every stage of a plan.
fn plan_groups(plan: &Plan) -> Vec<(&str, Vec<&str>)> {
    plan.stages
        .iter()
        .flat_map(|s| &s.groups)
        .map(|g| {
            (
                g.name.as_str(),
                g.members.iter().map(|m| m.name.as_str()).collect(),
            )
        })
        .collect()
}

// ==================================================================== helpers: commands

fn create_cmd(run: UpdateRunSpec) -> Command {
    Command::CreateRun { run }
}

fn start_cmd(run: &str) -> Command {
    Command::StartRun { name: run.into() }
}

fn stop_cmd(run: &str) -> Command {
    Command::StopRun { name: run.into() }
}

fn delete_cmd(run: &str) -> Command {
    Command::DeleteRun { name: run.into() }
}

fn skip_cmd(run: &str, targets: &[&str]) -> Command {
    Command::Skip {
        run: run.into(),
        targets: targets
            .iter()
            .map(|s| SkipTarget::parse(s).expect("skip target"))
            .collect(),
    }
}

fn obs_ok(op: &str) -> Input {
    Input::Observation(Observation::UpgradeSucceeded {
        operation_id: op.into(),
    })
}

// ==================================================================== helpers: fixtures

/// Parses YAML with the host's parser (errors name the field path).
fn yaml<T: DeserializeOwned>(text: &str) -> T {
    waverun_host::parse_text(text, false).unwrap_or_else(|e| panic!("YAML: {e}\n{text}"))
}

/// Parses JSON with the host's parser.
fn json<T: DeserializeOwned>(text: &str) -> T {
    waverun_host::parse_text(text, true).unwrap_or_else(|e| panic!("JSON: {e}\n{text}"))
}

fn img(v: &str) -> String {
    format!("AKSUbuntu-2204gen2containerd-{v}")
}

fn pool_image(pool: &str, v: &str) -> PoolImage {
    PoolImage {
        node_pool: pool.into(),
        image_version: img(v),
    }
}

/// A member with Ubuntu pools `(name, image version suffix, fromSnapshot)`; group "" = none.
fn member_full(
    name: &str,
    group: &str,
    region: &str,
    kube: &str,
    pools: &[(&str, &str, bool)],
) -> Member {
    let pools: Vec<String> = pools
        .iter()
        .map(|(p, v, snap)| {
            format!(
                "{{name: {p}, osType: Linux, imageVersion: {}, fromSnapshot: {snap}}}",
                img(v)
            )
        })
        .collect();
    let mut m: Member = yaml(&format!(
        "{{name: {name}, region: {region}, kubernetesVersion: {kube}, nodePools: [{}]}}",
        pools.join(", ")
    ));
    if !group.is_empty() {
        m.group = Some(group.into());
    }
    m
}

/// An eastus member at 1.30.4 whose one pool runs the current image.
fn member_of(name: &str, group: &str) -> Member {
    member_full(
        name,
        group,
        "eastus",
        "1.30.4",
        &[("system", "202411.03.0", false)],
    )
}

fn members(names: &[&str], group: &str) -> Vec<Member> {
    names.iter().map(|n| member_of(n, group)).collect()
}

/// Gives a member a daily 4-hour Kubernetes maintenance window starting at `start` (UTC).
fn with_window(mut m: Member, start: &str) -> Member {
    m.maintenance = yaml(&format!(
        "kubernetes: {{schedule: {{daily: {{intervalDays: 1}}}}, durationHours: 4, startTime: '{start}'}}"
    ));
    m
}

/// Four members with labels: env, tier, canary; db-prod runs in westeurope.
fn labelled_fleet() -> Vec<Member> {
    yaml(
        r#"
- name: api-prod
  region: eastus
  kubernetesVersion: 1.30.4
  labels: {env: prod, tier: web, canary: "true"}
  nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]
- name: db-prod
  region: westeurope
  kubernetesVersion: 1.30.4
  labels: {env: prod, tier: db}
  nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]
- name: web-dev
  region: eastus
  kubernetesVersion: 1.30.4
  labels: {env: dev, tier: web}
  nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]
- name: tools-test
  region: eastus
  kubernetesVersion: 1.30.4
  labels: {env: test}
  nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]
"#,
    )
}

/// 1.31.2 everywhere; the pools' image 202411.03.0 is the newest image.
fn default_catalog() -> ReleaseCatalog {
    yaml(
        r#"
kubernetes:
- {version: 1.31.2, available: {'*': '2026-11-01T00:00:00Z'}}
nodeImages:
- {version: AKSUbuntu-2204gen2containerd-202411.03.0, available: {'*': '2026-11-05T00:00:00Z'}}
"#,
    )
}

/// 1.31.2 everywhere; 202412.01.0 is newer than the pools' 202411.03.0, everywhere.
fn newer_image_catalog() -> ReleaseCatalog {
    yaml(
        r#"
kubernetes:
- {version: 1.31.2, available: {'*': '2026-11-01T00:00:00Z'}}
nodeImages:
- {version: AKSUbuntu-2204gen2containerd-202411.03.0, available: {'*': '2026-11-05T00:00:00Z'}}
- {version: AKSUbuntu-2204gen2containerd-202412.01.0, available: {'*': '2026-12-03T00:00:00Z'}}
"#,
    )
}

/// As `tests/scenarios/node-image-consistent.yaml`: 202412.01.0 only in eastus.
fn two_region_catalog() -> ReleaseCatalog {
    yaml(
        r#"
kubernetes:
- {version: 1.31.2, available: {eastus: '2026-11-01T00:00:00Z', westeurope: '2026-11-01T00:00:00Z'}}
nodeImages:
- {version: AKSUbuntu-2204gen2containerd-202411.03.0, available: {eastus: '2026-11-05T00:00:00Z', westeurope: '2026-11-06T00:00:00Z'}}
- {version: AKSUbuntu-2204gen2containerd-202411.20.0, available: {eastus: '2026-11-22T00:00:00Z', westeurope: '2026-11-25T00:00:00Z'}}
- {version: AKSUbuntu-2204gen2containerd-202412.01.0, available: {eastus: '2026-12-03T00:00:00Z'}}
"#,
    )
}

/// One stage, group `b` behind a ScheduledStart gate (Tuesday 09:00 at +01:00).
const SCHEDULED_GATE_STRATEGY: &str = r#"
stages:
- name: s
  groups:
  - name: b
    beforeGates:
    - type: ScheduledStart
      scheduledStartConfiguration: {startDay: Tuesday, startTime: '09:00', utcOffset: '+01:00'}
"#;

/// A run spec; `strategy` is inline YAML (None = no strategy); `update` is the YAML of
/// `managedClusterUpdate`.
fn spec(name: &str, strategy: Option<&str>, update: &str) -> UpdateRunSpec {
    UpdateRunSpec {
        name: name.into(),
        strategy: strategy.map(yaml::<UpdateStrategy>),
        update_strategy_name: None,
        managed_cluster_update: yaml::<ManagedClusterUpdate>(update),
        auto_upgrade_profile_name: None,
    }
}

/// A Full upgrade to 1.31.2 (Latest images) with an inline strategy.
fn full_run(name: &str, strategy: &str) -> UpdateRunSpec {
    spec(
        name,
        Some(strategy),
        "upgrade: {type: Full, kubernetesVersion: 1.31.2}",
    )
}

/// Run `r1` over members m1, m2 (group g, one at a time) brought into a given state of the
/// allowed-actions table. "Pending" puts an approval gate before the stage.
fn run_in(state: &str) -> Harness {
    let mut h = Harness::fleet(members(&["m1", "m2"], "g"), default_catalog());
    let strategy = if state == "Pending" {
        "stages: [{name: s, beforeGates: [{type: Approval}], groups: [{name: g}]}]"
    } else {
        "stages: [{name: s, groups: [{name: g}]}]"
    };
    h.create(full_run("r1", strategy));
    match state {
        "NotStarted" => {}
        "Running" | "Pending" => h.start("r1"),
        "Stopping" => {
            h.start("r1");
            h.stop("r1");
        }
        "Stopped" => {
            h.start("r1");
            h.stop("r1");
            h.advance_to("00:30");
            h.succeed("r1/m1");
        }
        "Failed" => {
            h.start("r1");
            h.advance_to("00:30");
            h.fail("r1/m1");
        }
        "Completed" => {
            h.start("r1");
            h.advance_to("00:30");
            h.succeed("r1/m1");
            h.advance_to("01:00");
            h.succeed("r1/m2");
        }
        "Skipped" => {
            h.skip("r1", &["Stage:s"]).expect("skip");
            h.start("r1");
        }
        other => panic!("no setup for {other}"),
    }
    h.take();
    h.take_started();
    h
}
