//! The public scenario corpus (`tests/scenarios/`, copies of `shared/scenarios/`): one test per
//! file, asserting every "Must hold:" claim of the file's header comment against the simulation
//! report (timeline and final status tree), plus a test that every file here is covered.

use helpers::*;
use waverun_core::sim::{simulate, Scenario, Simulation};
use waverun_core::{EventKind, NodeImageSelectionType, Reason, State};

/// Every scenario file this test file covers. A new file in `tests/scenarios/` must be added
/// here (with its test), or `every_scenario_file_has_a_test` fails.
const COVERED: &[&str] = &[
    "concurrency-fixed.yaml",
    "concurrency-percent.yaml",
    "concurrency-stage-caps-groups.yaml",
    "failures-all-fail-still-completed.yaml",
    "failures-fail-fast.yaml",
    "gates-and-wait.yaml",
    "node-image-consistent.yaml",
    "windows-priority.yaml",
];

#[test]
fn every_scenario_file_has_a_test() {
    let mut on_disk: Vec<String> = std::fs::read_dir(scenarios_dir())
        .expect("tests/scenarios is readable")
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .into_string()
                .unwrap()
        })
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json"))
        .collect();
    on_disk.sort();
    let mut covered: Vec<String> = COVERED.iter().map(|s| s.to_string()).collect();
    covered.sort();
    assert_eq!(
        on_disk, covered,
        "tests/scenarios/ and the COVERED list of tests/tests/scenarios.rs differ: \
         give every scenario file a test and list it"
    );
}

#[test]
fn every_scenario_file_loads_validates_and_reaches_a_terminal_state() {
    for name in COVERED {
        let scenario = load(name);
        let report = simulate(&scenario).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(
            report.summary.state.is_terminal(),
            "{name}: run ended {:?}",
            report.summary.state
        );
    }
}

/// `waverun simulate -o json` writes the timeline while the simulation runs
/// (`Simulation::stream_report`): over every scenario file here, with and without profiles,
/// health checks or operator actions, the bytes are those of the finished report.
#[test]
fn a_streamed_report_is_byte_for_byte_the_finished_report() {
    for path in every_scenario_path() {
        let scenario = waverun_host::load_scenario(&path).expect("a valid scenario");
        let finished = serde_json::to_string_pretty(&simulate(&scenario).expect("simulates"))
            .expect("serialises");
        let mut sim = Simulation::from_scenario(scenario).expect("sets up");
        let streamed = serde_json::to_string_pretty(&sim.stream_report()).expect("serialises");
        assert!(
            streamed == finished,
            "{}: the streamed report differs from the finished one",
            path.display()
        );
    }
}

/// Every scenario file under `tests/scenarios/`, its subdirectories too.
fn every_scenario_path() -> Vec<std::path::PathBuf> {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("a readable directory") {
            let path = e.expect("directory entry").path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|x| x == "yaml") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    files(&scenarios_dir(), &mut paths);
    paths.sort();
    assert!(paths.len() >= 20, "only {} scenario files", paths.len());
    paths
}

/// JSON is read straight from its text into the model, and through a tree only when that
/// refuses it (the tree's error names the path): over every scenario file here, written as
/// JSON, both readings make the same scenario.
#[test]
fn json_read_straight_into_the_model_is_what_the_tree_reads() {
    use waverun_core::document::{from_json_str, from_json_str_through_tree};
    for path in every_scenario_path() {
        let scenario = waverun_host::load_scenario(&path).expect("a valid scenario");
        let json = serde_json::to_string(&scenario).expect("serialises");
        let straight: Scenario = from_json_str(&json).expect("reads straight");
        let tree: Scenario = from_json_str_through_tree(&json).expect("reads through the tree");
        assert_eq!(straight, tree, "{}", path.display());
        assert_eq!(straight, scenario, "{}", path.display());
    }
}

/// `Engine::run_status_view` writes a run's status tree member by member, with the tree's
/// field order and rules written out again by hand: over every scenario file here, after every
/// step of its simulation (gates pending, members waiting on windows, freezes and checks, runs
/// stopping, generated and finished), every run's view writes the bytes of its tree, and counts
/// its nodes by state and wait reason as the tree counts them.
#[test]
fn a_status_view_writes_what_the_tree_serializes_to_at_every_step() {
    let mut compared = 0;
    for path in every_scenario_path() {
        let scenario = waverun_host::load_scenario(&path).expect("a valid scenario");
        let mut sim = Simulation::from_scenario(scenario).expect("sets up");
        loop {
            let engine = sim.engine();
            for run in engine.run_names() {
                let tree = engine.run_status(run).expect("a run's tree");
                let view = engine.run_status_view(run).expect("a run's view");
                assert_eq!(
                    serde_json::to_string(&view).expect("serialises"),
                    serde_json::to_string(&tree).expect("serialises"),
                    "{}: run {run} at {}",
                    path.display(),
                    engine.now()
                );
                assert_eq!(view.head().status, tree.status, "{}", path.display());
                let mut outline = tree.clone();
                for g in outline.stages.iter_mut().flat_map(|s| s.groups.iter_mut()) {
                    g.members.clear();
                }
                assert_eq!(
                    view.outline(),
                    outline,
                    "{}: run {run} at {}",
                    path.display(),
                    engine.now()
                );
                assert_eq!(
                    view.node_tally(),
                    tree.node_tally(),
                    "{}: run {run} at {}",
                    path.display(),
                    engine.now()
                );
                compared += 1;
            }
            if !sim.step() {
                break;
            }
        }
    }
    assert!(compared > 100, "only {compared} trees compared");
}

// ---------------------------------------------------------------------------------------------
// concurrency-fixed.yaml: stage "4", groups "2" and "2".

#[test]
fn stage_of_four_over_groups_of_two_keeps_two_per_group_and_four_in_the_stage() {
    let r = run("concurrency-fixed.yaml");

    // Never more than 2 members of a group in flight, never more than 4 in the stage, and the
    // limits are actually used (otherwise the bound proves nothing).
    let peaks = in_flight_peaks(&r.timeline);
    assert_eq!(peaks.group("group-a"), 2);
    assert_eq!(peaks.group("group-b"), 2);
    assert_eq!(peaks.stage("stage-1"), 4);

    // Resolved limits in status.
    let st = stage(&r, "stage-1");
    assert_eq!(st.max_concurrency, 4);
    assert_eq!(group(&r, "group-a").max_concurrency, 2);
    assert_eq!(group(&r, "group-b").max_concurrency, 2);

    // Every member Completed.
    let names = all_members(&r);
    assert_eq!(names.len(), 12);
    for m in &names {
        assert_eq!(member(&r, m).status.state, State::Completed, "{m}");
    }
    assert_eq!(r.summary.members_completed, 12);
    assert_eq!(count(&r, EventKind::MemberStarted), 12);
    assert_eq!(count(&r, EventKind::MemberCompleted), 12);

    // 12 members, 4 at a time, 30 minutes each: three waves, 90 minutes.
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.summary.makespan_seconds, Some(90 * 60));
    assert_eq!(time(r.summary.started_at), "2026-12-07T00:00:00Z");
    assert_eq!(time(r.summary.finished_at), "2026-12-07T01:30:00Z");
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("a-1", "2026-12-07T00:00:00Z"),
            ("a-2", "2026-12-07T00:00:00Z"),
            ("a-3", "2026-12-07T00:30:00Z"),
            ("a-4", "2026-12-07T00:30:00Z"),
            ("a-5", "2026-12-07T01:00:00Z"),
            ("a-6", "2026-12-07T01:00:00Z"),
            ("b-1", "2026-12-07T00:00:00Z"),
            ("b-2", "2026-12-07T00:00:00Z"),
            ("b-3", "2026-12-07T00:30:00Z"),
            ("b-4", "2026-12-07T00:30:00Z"),
            ("b-5", "2026-12-07T01:00:00Z"),
            ("b-6", "2026-12-07T01:00:00Z"),
        ])
    );
}

// ---------------------------------------------------------------------------------------------
// concurrency-percent.yaml: 20 members, ring-a 8, ring-b 12; stage 25%, ring-a 50%, ring-b 25%.

#[test]
fn percentage_concurrency_resolves_to_five_four_three_and_bounds_in_flight() {
    let r = run("concurrency-percent.yaml");

    // Resolved values shown in status: 25% of 20 = 5, 50% of 8 = 4, 25% of 12 = 3.
    assert_eq!(stage(&r, "prod").max_concurrency, 5);
    assert_eq!(group(&r, "ring-a").max_concurrency, 4);
    assert_eq!(group(&r, "ring-b").max_concurrency, 3);
    assert_eq!(group(&r, "ring-a").members.len(), 8);
    assert_eq!(group(&r, "ring-b").members.len(), 12);

    // Never more than 5 in flight in total, 4 in ring-a, 3 in ring-b.
    let peaks = in_flight_peaks(&r.timeline);
    assert!(peaks.stage("prod") <= 5, "{peaks:?}");
    assert!(peaks.group("ring-a") <= 4, "{peaks:?}");
    assert!(peaks.group("ring-b") <= 3, "{peaks:?}");
    // The ceilings are reached: the stage fills its 5 slots; ring-b fills its 3. ring-a peaks at
    // 3 because the stage ceiling binds first and a freed slot goes to the group with the fewest
    // members in flight (core/src/lib.rs decision), so ring-b always takes its share.
    assert_eq!(peaks.stage("prod"), 5);
    assert_eq!(peaks.group("ring-b"), 3);
    assert_eq!(peaks.group("ring-a"), 3);

    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.summary.members_completed, 20);
    assert_eq!(r.summary.makespan_seconds, Some(150 * 60));
}

// ---------------------------------------------------------------------------------------------
// concurrency-stage-caps-groups.yaml: stage "2" over groups of "5".

#[test]
fn stage_ceiling_caps_groups_of_five_at_two_in_flight() {
    let scenario = load("concurrency-stage-caps-groups.yaml");
    // The group value above the stage value is accepted (clamped), not rejected.
    let r = simulate(&scenario).expect("a group value above the stage value is accepted");

    // Never more than 2 members in flight in the whole stage, and 2 is reached.
    let peaks = in_flight_peaks(&r.timeline);
    assert_eq!(peaks.stage("stage-1"), 2);
    // Fair sharing of the two stage slots: one per group at a time.
    assert_eq!(peaks.group("group-a"), 1);
    assert_eq!(peaks.group("group-b"), 1);

    // The stage reports resolved maxConcurrency 2; the groups show their "5" clamped to 2
    // (core/src/lib.rs: "A group's resolved maxConcurrency is shown clamped to the stage's").
    assert_eq!(stage(&r, "stage-1").max_concurrency, 2);
    assert_eq!(group(&r, "group-a").max_concurrency, 2);
    assert_eq!(group(&r, "group-b").max_concurrency, 2);

    // Every member Completed.
    for m in all_members(&r) {
        assert_eq!(member(&r, &m).status.state, State::Completed, "{m}");
    }
    assert_eq!(r.summary.members_completed, 12);
    assert_eq!(r.summary.state, State::Completed);
    // 12 members two at a time, 30 minutes each.
    assert_eq!(r.summary.makespan_seconds, Some(180 * 60));
}

// ---------------------------------------------------------------------------------------------
// failures-all-fail-still-completed.yaml: group of 4 allowing "4"; all 4 fail.

#[test]
fn four_failures_within_a_threshold_of_four_still_complete_the_group_and_run() {
    let r = run("failures-all-fail-still-completed.yaml");

    // Group flaky and stage canary Completed with failureCount 4 (4 does not exceed 4).
    let g = group(&r, "flaky");
    assert_eq!(g.status.state, State::Completed);
    assert_eq!(g.failure_count, 4);
    assert_eq!(g.max_allowed_failures, 4);
    let canary = stage(&r, "canary");
    assert_eq!(canary.status.state, State::Completed);
    assert_eq!(canary.failure_count, 4);
    assert_eq!(canary.max_allowed_failures, 4);
    assert_eq!(time(canary.status.completed_time), "2026-12-07T01:00:00Z");
    assert!(g.status.error.is_none() && canary.status.error.is_none());
    assert_eq!(count(&r, EventKind::GroupFailed), 0);
    assert_eq!(count(&r, EventKind::StageFailed), 0);

    // Every m-* member Failed.
    for m in ["m-1", "m-2", "m-3", "m-4"] {
        let ms = member(&r, m);
        assert_eq!(ms.status.state, State::Failed, "{m}");
        assert_eq!(
            ms.status.error.as_ref().map(|e| e.code.as_str()),
            Some("UpgradeFailed"),
            "{m}"
        );
        assert_eq!(member_events(&r, EventKind::MemberFailed, m).len(), 1);
    }

    // The run goes on to stage rest, and n-1 Completed.
    let rest = stage(&r, "rest");
    assert_eq!(rest.status.state, State::Completed);
    assert_eq!(time(rest.status.start_time), "2026-12-07T01:00:00Z");
    assert_eq!(
        at_of(&r, EventKind::StageStarted, |e| e.stage() == Some("rest")),
        "2026-12-07T01:00:00Z"
    );
    let n1 = member(&r, "n-1");
    assert_eq!(n1.status.state, State::Completed);
    assert_eq!(time(n1.status.start_time), "2026-12-07T01:00:00Z");
    assert_eq!(time(n1.status.completed_time), "2026-12-07T01:30:00Z");

    // Run Completed with failureCount 4.
    assert_eq!(
        r.run.as_ref().unwrap().status.status.state,
        State::Completed
    );
    assert_eq!(r.run.as_ref().unwrap().status.failure_count, 4);
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.summary.members_failed, 4);
    assert_eq!(r.summary.members_completed, 1);
    assert_eq!(kinds(&r).last(), Some(&EventKind::RunCompleted));
}

// ---------------------------------------------------------------------------------------------
// failures-fail-fast.yaml: default maxAllowedFailures 0.

#[test]
fn first_failure_fails_group_stage_and_run_under_the_default_threshold() {
    let r = run("failures-fail-fast.yaml");

    // a-1 (first by name, one at a time) Failed; it is the only member that ever starts.
    let started = member_names(&r, EventKind::MemberStarted);
    assert_eq!(started, vec!["a-1"]);
    assert_eq!(
        at_of(&r, EventKind::MemberStarted, |_| true),
        "2026-12-07T00:00:00Z"
    );
    let a1 = member(&r, "a-1");
    assert_eq!(a1.status.state, State::Failed);
    assert_eq!(time(a1.status.completed_time), "2026-12-07T00:30:00Z");

    // a-2, a-3 and b-1 never start.
    for m in ["a-2", "a-3", "b-1"] {
        let ms = member(&r, m);
        assert_eq!(ms.status.state, State::NotStarted, "{m}");
        assert!(ms.status.start_time.is_none(), "{m}");
        assert!(ms.operation_id.is_none(), "{m}");
    }

    // Group g, stage one and the run Failed with failureCount 1 (default thresholds are 0).
    let g = group(&r, "g");
    assert_eq!(g.status.state, State::Failed);
    assert_eq!(g.failure_count, 1);
    assert_eq!(g.max_allowed_failures, 0);
    let one = stage(&r, "one");
    assert_eq!(one.status.state, State::Failed);
    assert_eq!(one.failure_count, 1);
    assert_eq!(one.max_allowed_failures, 0);
    assert_eq!(r.run.as_ref().unwrap().status.status.state, State::Failed);
    assert_eq!(r.run.as_ref().unwrap().status.failure_count, 1);
    for (node, err) in [
        ("group g", &g.status.error),
        ("stage one", &one.status.error),
        ("run", &r.run.as_ref().unwrap().status.status.error),
    ] {
        assert_eq!(
            err.as_ref().map(|e| e.code.as_str()),
            Some("FailureThresholdExceeded"),
            "{node}"
        );
    }

    // The failure fails group, stage and run at once, in that order, at 00:30.
    let tail: Vec<(EventKind, String)> = r
        .timeline
        .iter()
        .skip_while(|e| e.kind() != EventKind::MemberFailed)
        .map(|e| (e.kind(), fmt_time(e.at)))
        .collect();
    let t = "2026-12-07T00:30:00Z".to_string();
    assert_eq!(
        tail,
        vec![
            (EventKind::MemberFailed, t.clone()),
            (EventKind::GroupFailed, t.clone()),
            (EventKind::StageFailed, t.clone()),
            (EventKind::RunFailed, t),
        ]
    );

    // Stage two never starts.
    let two = stage(&r, "two");
    assert_eq!(two.status.state, State::NotStarted);
    assert!(two.status.start_time.is_none());
    assert_eq!(group(&r, "later").status.state, State::NotStarted);
    assert!(!r.timeline.iter().any(|e| e.stage() == Some("two")));
    assert_eq!(r.summary.state, State::Failed);
    assert_eq!(r.summary.makespan_seconds, Some(30 * 60));
}

// ---------------------------------------------------------------------------------------------
// gates-and-wait.yaml: an after-stage wait, a stage approval gate, a group scheduled gate.

#[test]
fn after_stage_wait_approval_and_scheduled_gate_sequence_the_stages() {
    let r = run("gates-and-wait.yaml");

    // dev-1 runs 00:00-00:30.
    let dev1 = member(&r, "dev-1");
    assert_eq!(dev1.status.state, State::Completed);
    assert_eq!(time(dev1.status.start_time), "2026-12-07T00:00:00Z");
    assert_eq!(time(dev1.status.completed_time), "2026-12-07T00:30:00Z");
    assert_eq!(
        member_at(&r, EventKind::MemberStarted, "dev-1"),
        "2026-12-07T00:00:00Z"
    );
    assert_eq!(
        member_at(&r, EventKind::MemberCompleted, "dev-1"),
        "2026-12-07T00:30:00Z"
    );

    // The wait runs 00:30-01:30.
    let test = stage(&r, "test");
    let wait = &test.after_stage_wait_status;
    assert_eq!(wait.wait_duration_in_seconds, 3600);
    assert_eq!(wait.status.state, State::Completed);
    assert_eq!(time(wait.status.start_time), "2026-12-07T00:30:00Z");
    assert_eq!(time(wait.status.completed_time), "2026-12-07T01:30:00Z");
    let started = single(&r, EventKind::AfterStageWaitStarted);
    assert_eq!(fmt_time(started.at), "2026-12-07T00:30:00Z");
    assert_eq!(started.stage(), Some("test"));
    assert_eq!(time(started.until()), "2026-12-07T01:30:00Z");
    let done = single(&r, EventKind::AfterStageWaitCompleted);
    assert_eq!(fmt_time(done.at), "2026-12-07T01:30:00Z");
    assert_eq!(test.status.state, State::Completed);
    assert_eq!(time(test.status.completed_time), "2026-12-07T01:30:00Z");

    // The production Before approval gate is created at 01:30 and completed at 05:00.
    let production = stage(&r, "production");
    assert_eq!(time(production.status.start_time), "2026-12-07T01:30:00Z");
    assert_eq!(production.before_gates.len(), 1);
    let approval = &production.before_gates[0];
    assert_eq!(approval.gate_type, waverun_core::GateType::Approval);
    assert_eq!(approval.timing, waverun_core::GateTiming::Before);
    assert_eq!(approval.display_name.as_deref(), Some("prod sign-off"));
    assert_eq!(approval.status.state, State::Completed);
    assert_eq!(time(approval.status.start_time), "2026-12-07T01:30:00Z");
    assert_eq!(time(approval.status.completed_time), "2026-12-07T05:00:00Z");
    assert!(approval.gate_id.is_some());
    let gate_events = |kind| -> Vec<(String, Option<String>, waverun_core::GateType)> {
        events(&r, kind)
            .into_iter()
            .map(|e| {
                (
                    fmt_time(e.at),
                    e.group().map(str::to_string),
                    e.gate_type().unwrap(),
                )
            })
            .collect()
    };
    use waverun_core::GateType::{Approval, ScheduledStart};
    assert_eq!(
        gate_events(EventKind::GateCreated),
        vec![
            ("2026-12-07T01:30:00Z".into(), None, Approval),
            (
                "2026-12-07T05:00:00Z".into(),
                Some("prod".into()),
                ScheduledStart
            ),
        ]
    );
    assert_eq!(
        gate_events(EventKind::GateCompleted),
        vec![
            ("2026-12-07T05:00:00Z".into(), None, Approval),
            (
                "2026-12-08T08:00:00Z".into(),
                Some("prod".into()),
                ScheduledStart
            ),
        ]
    );
    assert_eq!(count(&r, EventKind::ActionRejected), 0);

    // The prod group's ScheduledStart gate resolves to Tuesday 09:00 at +01:00 = 08:00Z and
    // completes then.
    let prod = group(&r, "prod");
    assert_eq!(time(prod.status.start_time), "2026-12-07T05:00:00Z");
    assert_eq!(prod.before_gates.len(), 1);
    let scheduled = &prod.before_gates[0];
    assert_eq!(scheduled.gate_type, ScheduledStart);
    assert_eq!(time(scheduled.absolute_start_time), "2026-12-08T08:00:00Z");
    assert_eq!(scheduled.status.state, State::Completed);
    assert_eq!(
        time(scheduled.status.completed_time),
        "2026-12-08T08:00:00Z"
    );
    let created = events(&r, EventKind::GateCreated)[1];
    assert_eq!(time(created.until()), "2026-12-08T08:00:00Z");

    // prod-1 starts at 08:00, prod-2 at 08:30.
    assert_eq!(
        start_times(&r)
            .into_iter()
            .filter(|(m, _)| m.starts_with("prod"))
            .collect::<Vec<_>>(),
        pairs(&[
            ("prod-1", "2026-12-08T08:00:00Z"),
            ("prod-2", "2026-12-08T08:30:00Z")
        ])
    );
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(time(r.summary.finished_at), "2026-12-08T09:00:00Z");
}

// ---------------------------------------------------------------------------------------------
// node-image-consistent.yaml: 202412.01.0 is only in eastus.

const IMG_1120: &str = "AKSUbuntu-2204gen2containerd-202411.20.0";
const IMG_1201: &str = "AKSUbuntu-2204gen2containerd-202412.01.0";

#[test]
fn consistent_selection_picks_the_newest_image_in_every_region_before_and_after_start() {
    let scenario = load("node-image-consistent.yaml");

    // Before start: the selection is already published.
    let sim = Simulation::new(&scenario).expect("valid scenario");
    let before = sim.engine().run_status("r1").expect("run exists");
    assert_eq!(before.status.state, State::NotStarted);
    assert_eq!(
        before
            .node_image_selection
            .as_ref()
            .expect("Consistent runs publish their selection before start")
            .selected_node_image_versions,
        vec![IMG_1120.to_string()]
    );

    // After: the same.
    let r = simulate(&scenario).unwrap();
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(
        r.run
            .as_ref()
            .unwrap()
            .status
            .node_image_selection
            .as_ref()
            .expect("selection in the final status")
            .selected_node_image_versions,
        vec![IMG_1120.to_string()]
    );

    // Both members upgrade their system pool to it (and only it; NodeImageOnly moves no
    // control plane).
    for m in ["eus-1", "weu-1"] {
        let ev = member_events(&r, EventKind::MemberStarted, m);
        assert_eq!(ev.len(), 1, "{m}");
        assert_eq!(pool_images(ev[0].node_images()), vec![("system", IMG_1120)]);
        assert_eq!(ev[0].kubernetes_version(), None, "{m}");
        let ms = member(&r, m);
        assert_eq!(ms.status.state, State::Completed, "{m}");
        assert_eq!(pool_images(&ms.node_images), vec![("system", IMG_1120)]);
    }
}

#[test]
fn latest_selection_instead_gives_eastus_the_image_only_it_has() {
    let mut scenario = load("node-image-consistent.yaml");
    scenario
        .run
        .as_mut()
        .unwrap()
        .managed_cluster_update
        .node_image_selection
        .selection_type = NodeImageSelectionType::Latest;
    let r = simulate(&scenario).unwrap();

    // With Latest, eus-1 gets 202412.01.0; weu-1 gets the newest image of its own region.
    let eus = member_events(&r, EventKind::MemberStarted, "eus-1");
    assert_eq!(
        pool_images(eus[0].node_images()),
        vec![("system", IMG_1201)]
    );
    let weu = member_events(&r, EventKind::MemberStarted, "weu-1");
    assert_eq!(
        pool_images(weu[0].node_images()),
        vec![("system", IMG_1120)]
    );
    // Latest publishes no run-wide selection.
    assert!(r
        .run
        .as_ref()
        .unwrap()
        .status
        .node_image_selection
        .as_ref()
        .is_none_or(|s| s.selected_node_image_versions.is_empty()));
    assert_eq!(r.summary.state, State::Completed);
}

// ---------------------------------------------------------------------------------------------
// windows-priority.yaml: open now, opens within 4 h, no window, closed; one at a time.

#[test]
fn members_start_by_window_priority_and_never_outside_their_window() {
    let scenario = load("windows-priority.yaml");
    let r = simulate(&scenario).unwrap();

    // Processing order in status: open now, opens soon, no window, closed.
    let order: Vec<&str> = group(&r, "g")
        .members
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(order, vec!["m-open", "m-soon", "m-none", "m-closed"]);

    // m-open starts first, at 00:00.
    let first = events(&r, EventKind::MemberStarted)[0];
    assert_eq!(first.member(), Some("m-open"));
    assert_eq!(fmt_time(first.at), "2026-12-07T00:00:00Z");

    // m-closed is reported Pending (window) with until Wednesday 00:00.
    let pending = member_events(&r, EventKind::MemberPending, "m-closed");
    assert_eq!(pending.len(), 1);
    assert_eq!(fmt_time(pending[0].at), "2026-12-07T00:00:00Z");
    assert_eq!(pending[0].reason(), Some(Reason::MaintenanceWindow));
    assert_eq!(time(pending[0].until()), "2026-12-09T00:00:00Z");

    // No member starts outside its window.
    for e in events(&r, EventKind::MemberStarted) {
        let name = e.member().unwrap();
        let sm = scenario.members.iter().find(|m| m.name == name).unwrap();
        if let Some(w) = &sm.maintenance.kubernetes {
            let w = w.compile().expect("valid window");
            assert!(
                w.is_open(e.at),
                "{name} started at {} outside its window",
                fmt_time(e.at)
            );
        }
    }

    // The whole sequence: m-soon waits for 02:00 while m-none takes the slot; m-closed starts
    // at 2026-12-09T00:00:00Z.
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("m-closed", "2026-12-09T00:00:00Z"),
            ("m-none", "2026-12-07T00:30:00Z"),
            ("m-open", "2026-12-07T00:00:00Z"),
            ("m-soon", "2026-12-07T02:00:00Z"),
        ])
    );
    assert_eq!(
        member_names(&r, EventKind::MemberStarted),
        vec!["m-open", "m-none", "m-soon", "m-closed"]
    );

    // The run Completed.
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.summary.members_completed, 4);
    assert_eq!(time(r.summary.finished_at), "2026-12-09T00:30:00Z");
}

// ---------------------------------------------------------------------------------------------

mod helpers {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use waverun_core::sim::{simulate, Scenario, SimulationReport};
    use waverun_core::state::{GroupStatus, MemberStatus, StageStatus};
    use waverun_core::PoolImage;
    use waverun_core::{Event, EventKind, Timestamp};

    pub use waverun_core::fmt_time;

    pub fn scenarios_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }

    /// Loads `tests/scenarios/<name>` through the host's loader.
    pub fn load(name: &str) -> Scenario {
        waverun_host::load_scenario(&scenarios_dir().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Loads and simulates `tests/scenarios/<name>`.
    pub fn run(name: &str) -> SimulationReport {
        simulate(&load(name)).unwrap_or_else(|e| panic!("{name}: {e:?}"))
    }

    /// An optional time as RFC 3339, or "-" when absent.
    pub fn time(t: Option<Timestamp>) -> String {
        t.map(fmt_time).unwrap_or_else(|| "-".to_string())
    }

    pub fn events(r: &SimulationReport, kind: EventKind) -> Vec<&Event> {
        r.timeline.iter().filter(|e| e.kind() == kind).collect()
    }

    pub fn count(r: &SimulationReport, kind: EventKind) -> usize {
        events(r, kind).len()
    }

    pub fn kinds(r: &SimulationReport) -> Vec<EventKind> {
        r.timeline.iter().map(|e| e.kind()).collect()
    }

    /// The one event of `kind` (panics if there are none or several).
    pub fn single(r: &SimulationReport, kind: EventKind) -> &Event {
        let e = events(r, kind);
        assert_eq!(e.len(), 1, "expected one {kind:?}, got {e:?}");
        e[0]
    }

    pub fn member_events<'a>(r: &'a SimulationReport, kind: EventKind, m: &str) -> Vec<&'a Event> {
        r.timeline
            .iter()
            .filter(|e| e.kind() == kind && e.member() == Some(m))
            .collect()
    }

    /// When the only `kind` event of member `m` happened.
    pub fn member_at(r: &SimulationReport, kind: EventKind, m: &str) -> String {
        let e = member_events(r, kind, m);
        assert_eq!(e.len(), 1, "{kind:?} of {m}: {e:?}");
        fmt_time(e[0].at)
    }

    /// When the first `kind` event matching `pred` happened.
    pub fn at_of(r: &SimulationReport, kind: EventKind, pred: impl Fn(&Event) -> bool) -> String {
        let e = r
            .timeline
            .iter()
            .find(|e| e.kind() == kind && pred(e))
            .unwrap_or_else(|| panic!("no {kind:?} event"));
        fmt_time(e.at)
    }

    /// Member names of the `kind` events, in timeline order.
    pub fn member_names(r: &SimulationReport, kind: EventKind) -> Vec<&str> {
        events(r, kind)
            .into_iter()
            .filter_map(|e| e.member())
            .collect()
    }

    /// (member, start time) of every MemberStarted, sorted by member name.
    pub fn start_times(r: &SimulationReport) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = events(r, EventKind::MemberStarted)
            .into_iter()
            .map(|e| (e.member().map(str::to_string).unwrap(), fmt_time(e.at)))
            .collect();
        v.sort();
        v
    }

    /// Owned pairs, to compare with [`start_times`].
    pub fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    pub fn pool_images(p: &[PoolImage]) -> Vec<(&str, &str)> {
        p.iter()
            .map(|p| (p.node_pool.as_str(), p.image_version.as_str()))
            .collect()
    }

    pub fn stage<'a>(r: &'a SimulationReport, name: &str) -> &'a StageStatus {
        r.run
            .as_ref()
            .unwrap()
            .status
            .stages
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no stage {name}"))
    }

    pub fn group<'a>(r: &'a SimulationReport, name: &str) -> &'a GroupStatus {
        r.run
            .as_ref()
            .unwrap()
            .status
            .stages
            .iter()
            .flat_map(|s| &s.groups)
            .find(|g| g.name == name)
            .unwrap_or_else(|| panic!("no group {name}"))
    }

    pub fn member<'a>(r: &'a SimulationReport, name: &str) -> &'a MemberStatus {
        r.run
            .as_ref()
            .unwrap()
            .status
            .stages
            .iter()
            .flat_map(|s| &s.groups)
            .flat_map(|g| &g.members)
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no member {name}"))
    }

    pub fn all_members(r: &SimulationReport) -> Vec<String> {
        r.run
            .as_ref()
            .unwrap()
            .status
            .stages
            .iter()
            .flat_map(|s| &s.groups)
            .flat_map(|g| &g.members)
            .map(|m| m.name.clone())
            .collect()
    }

    /// The most members ever in flight per group and per stage, counting over the timeline in
    /// event order: MemberStarted +1, MemberCompleted / MemberFailed -1.
    #[derive(Debug, Default)]
    pub struct Peaks {
        pub groups: BTreeMap<String, u32>,
        pub stages: BTreeMap<String, u32>,
    }

    impl Peaks {
        pub fn group(&self, g: &str) -> u32 {
            self.groups.get(g).copied().unwrap_or(0)
        }
        pub fn stage(&self, s: &str) -> u32 {
            self.stages.get(s).copied().unwrap_or(0)
        }
    }

    pub fn in_flight_peaks(timeline: &[Event]) -> Peaks {
        let mut flying: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut peaks = Peaks::default();
        for e in timeline {
            let m = e.member().map(str::to_string).unwrap_or_default();
            match e.kind() {
                EventKind::MemberStarted => {
                    let g = e
                        .group()
                        .map(str::to_string)
                        .expect("member events name their group");
                    let s = e
                        .stage()
                        .map(str::to_string)
                        .expect("member events name their stage");
                    let again = flying.insert(m, (s, g));
                    assert!(again.is_none(), "started while in flight: {e:?}");
                }
                // A member failed without a start (e.g. MinorVersionSkip) held no slot.
                EventKind::MemberCompleted | EventKind::MemberFailed => {
                    flying.remove(&m);
                }
                _ => continue,
            }
            for (s, g) in flying.values() {
                let gv = flying.values().filter(|(_, g2)| g2 == g).count() as u32;
                let sv = flying.values().filter(|(s2, _)| s2 == s).count() as u32;
                let gp = peaks.groups.entry(g.clone()).or_insert(0);
                *gp = (*gp).max(gv);
                let sp = peaks.stages.entry(s.clone()).or_insert(0);
                *sp = (*sp).max(sv);
            }
        }
        peaks
    }
}
