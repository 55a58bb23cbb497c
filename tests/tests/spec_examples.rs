//! The worked examples of `shared/spec/update-runs.md` sections 5 (flow-control math) and 6
//! (maintenance windows and ordering), each as a scenario built in code and run through the
//! simulator. Where the spec is silent, the decisions of `core/src/lib.rs` apply.
//!
//! Every scenario starts on Monday 2026-12-07 00:00 UTC; members run 1.30.4 and are upgraded to
//! 1.31.2 (Full) unless a test says otherwise; upgrades take 30 minutes unless `behavior` says
//! otherwise; `failAttempts: 1` makes a member's (only) upgrade fail.

use helpers::*;
use serde_json::json;
use waverun_core::{EventKind, Reason, State};

// =============================================================================================
// Section 5: maxConcurrency

#[test]
fn concurrency_example_1_stage_four_groups_two_allow_four_in_flight_two_per_group() {
    // stage "4", groups A "2", B "2" -> at most 4 in flight, at most 2 per group.
    let mut members = group_members("a", 6, "group-a", json!({}));
    members.extend(group_members("b", 6, "group-b", json!({})));
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "maxConcurrency": "4", "groups": [
            {"name": "group-a", "maxConcurrency": "2"},
            {"name": "group-b", "maxConcurrency": "2"}]}]}),
    ));
    let peaks = in_flight_peaks(&r.timeline);
    assert_eq!(peaks.stage("s"), 4);
    assert_eq!(peaks.group("group-a"), 2);
    assert_eq!(peaks.group("group-b"), 2);
    assert_eq!(stage(&r, "s").max_concurrency, 4);
    assert_eq!(group(&r, "group-a").max_concurrency, 2);
    assert_eq!(group(&r, "group-b").max_concurrency, 2);
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.summary.members_completed, 12);
    assert_eq!(r.summary.makespan_seconds, Some(90 * 60));
}

#[test]
fn stage_ceiling_of_four_binds_over_three_groups_of_two() {
    // The stage value is a ceiling over all groups: three groups of "2" could run 6, the stage
    // allows 4.
    let mut members = group_members("a", 4, "group-a", json!({}));
    members.extend(group_members("b", 4, "group-b", json!({})));
    members.extend(group_members("c", 4, "group-c", json!({})));
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "maxConcurrency": "4", "groups": [
            {"name": "group-a", "maxConcurrency": "2"},
            {"name": "group-b", "maxConcurrency": "2"},
            {"name": "group-c", "maxConcurrency": "2"}]}]}),
    ));
    let peaks = in_flight_peaks(&r.timeline);
    assert_eq!(peaks.stage("s"), 4);
    for g in ["group-a", "group-b", "group-c"] {
        assert!(peaks.group(g) <= 2, "{g}: {peaks:?}");
    }
    // At the first instant, the four slots go fairly: 2 + 1 + 1 (fewest in flight first,
    // ties in strategy order).
    let first: Vec<&str> = events(&r, EventKind::MemberStarted)
        .into_iter()
        .filter(|e| fmt_time(e.at) == "2026-12-07T00:00:00Z")
        .map(|e| e.member().unwrap())
        .collect();
    assert_eq!(first, vec!["a-1", "b-1", "c-1", "a-2"]);
    assert_eq!(r.summary.members_completed, 12);
    assert_eq!(r.summary.makespan_seconds, Some(90 * 60));
}

#[test]
fn concurrency_example_2_stage_two_caps_groups_of_five_at_two_in_total() {
    // stage "2", groups A "5", B "5" -> at most 2 in flight in total. A group value above the
    // stage value is accepted and clamped at run time (decision).
    let mut members = group_members("a", 6, "group-a", json!({}));
    members.extend(group_members("b", 6, "group-b", json!({})));
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "maxConcurrency": "2", "groups": [
            {"name": "group-a", "maxConcurrency": "5"},
            {"name": "group-b", "maxConcurrency": "5"}]}]}),
    ));
    let peaks = in_flight_peaks(&r.timeline);
    assert_eq!(peaks.stage("s"), 2);
    assert_eq!(stage(&r, "s").max_concurrency, 2);
    // Shown clamped to the stage's value (core/src/lib.rs decision).
    assert_eq!(group(&r, "group-a").max_concurrency, 2);
    assert_eq!(group(&r, "group-b").max_concurrency, 2);
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.summary.members_completed, 12);
    assert_eq!(r.summary.makespan_seconds, Some(180 * 60));
}

#[test]
fn concurrency_example_3_percentages_resolve_against_stage_and_group_sizes() {
    // 20 members, A has 8, B has 12; stage "25%" -> 5, A "50%" -> 4, B "25%" -> 3.
    let mut members = labelled_members("a", 8, json!({"ring": "a"}));
    members.extend(labelled_members("b", 12, json!({"ring": "b"})));
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "maxConcurrency": "25%", "groups": [
            {"name": "ring-a", "memberSelector": {"byLabel": "ring=a"}, "maxConcurrency": "50%"},
            {"name": "ring-b", "memberSelector": {"byLabel": "ring=b"}, "maxConcurrency": "25%"}
        ]}]}),
    ));
    assert_eq!(stage(&r, "s").max_concurrency, 5);
    assert_eq!(group(&r, "ring-a").max_concurrency, 4);
    assert_eq!(group(&r, "ring-b").max_concurrency, 3);
    let peaks = in_flight_peaks(&r.timeline);
    assert_eq!(peaks.stage("s"), 5);
    assert!(peaks.group("ring-a") <= 4, "{peaks:?}");
    assert_eq!(peaks.group("ring-b"), 3);
    assert_eq!(r.summary.members_completed, 20);
}

#[test]
fn percentage_concurrency_never_resolves_below_one() {
    // max(1, floor(p/100 x base)): 10% of 3 is 0.3 -> 1, for the stage and the group.
    let r = sim(scenario(
        group_members("m", 3, "g", json!({})),
        json!({"stages": [{"name": "s", "maxConcurrency": "10%",
                           "groups": [{"name": "g", "maxConcurrency": "10%"}]}]}),
    ));
    assert_eq!(stage(&r, "s").max_concurrency, 1);
    assert_eq!(group(&r, "g").max_concurrency, 1);
    assert_eq!(in_flight_peaks(&r.timeline).stage("s"), 1);
    assert_eq!(r.summary.members_completed, 3);
    assert_eq!(r.summary.makespan_seconds, Some(90 * 60));
}

#[test]
fn concurrency_defaults_are_fifty_per_stage_and_one_per_group() {
    let r = sim(scenario(
        group_members("m", 3, "g", json!({})),
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]}]}),
    ));
    assert_eq!(stage(&r, "s").max_concurrency, 50);
    assert_eq!(group(&r, "g").max_concurrency, 1);
    assert_eq!(in_flight_peaks(&r.timeline).group("g"), 1);
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("m-1", "2026-12-07T00:00:00Z"),
            ("m-2", "2026-12-07T00:30:00Z"),
            ("m-3", "2026-12-07T01:00:00Z"),
        ])
    );
}

#[test]
fn literal_stage_concurrency_above_fifty_is_rejected_and_fifty_accepted() {
    let strategy = |mc: &str| json!({"stages": [{"name": "s", "maxConcurrency": mc, "groups": [{"name": "g"}]}]});
    let bad = build(scenario(
        group_members("m", 2, "g", json!({})),
        strategy("51"),
    ));
    let err = waverun_core::sim::simulate(&bad).expect_err("stage maxConcurrency 51 is rejected");
    let text = format!("{} {:?}", err.message, err.fields);
    assert!(
        text.contains("strategy.stages[0].maxConcurrency"),
        "the error names the field: {text}"
    );
    assert!(text.contains("51"), "{text}");

    let ok = sim(scenario(
        group_members("m", 2, "g", json!({})),
        strategy("50"),
    ));
    assert_eq!(stage(&ok, "s").max_concurrency, 50);
    assert_eq!(ok.summary.state, State::Completed);
}

// =============================================================================================
// Section 5: maxAllowedFailures

#[test]
fn group_of_four_allowing_four_completes_although_all_four_fail() {
    // group of 4, "4", all four fail -> group Completed, failureCount 4. The stage allows 4
    // too, or the stage's default of 0 would fail it on the first failure.
    let r = sim(scenario(
        group_members("m", 4, "g", json!({"behavior": {"failAttempts": 1}})),
        json!({"stages": [{"name": "s", "maxAllowedFailures": "4",
                           "groups": [{"name": "g", "maxAllowedFailures": "4"}]}]}),
    ));
    let g = group(&r, "g");
    assert_eq!(g.status.state, State::Completed);
    assert_eq!(g.failure_count, 4);
    assert_eq!(g.max_allowed_failures, 4);
    assert!(g.status.error.is_none());
    assert_eq!(count(&r, EventKind::MemberFailed), 4);
    assert_eq!(count(&r, EventKind::GroupFailed), 0);
    assert_eq!(count(&r, EventKind::StageFailed), 0);
    // Completed never means "all succeeded".
    assert_eq!(stage(&r, "s").status.state, State::Completed);
    assert_eq!(r.summary.state, State::Completed);
    assert_eq!(r.run.as_ref().unwrap().status.failure_count, 4);
    assert_eq!(r.summary.members_completed, 0);
    assert_eq!(r.summary.members_failed, 4);
}

#[test]
fn with_three_allowed_the_fourth_failure_fails_the_group() {
    // "A scope fails only when its failureCount exceeds the threshold (with "3", the fourth
    // failure fails it)".
    let r = sim(scenario(
        group_members("m", 5, "g", json!({"behavior": {"failAttempts": 1}})),
        json!({"stages": [{"name": "s", "maxAllowedFailures": "10",
                           "groups": [{"name": "g", "maxAllowedFailures": "3"}]}]}),
    ));
    let fails = failures(&r);
    assert_eq!(
        fails,
        pairs(&[
            ("m-1", "2026-12-07T00:30:00Z"),
            ("m-2", "2026-12-07T01:00:00Z"),
            ("m-3", "2026-12-07T01:30:00Z"),
            ("m-4", "2026-12-07T02:00:00Z"),
        ])
    );
    let gf = single(&r, EventKind::GroupFailed);
    assert_eq!(fmt_time(gf.at), "2026-12-07T02:00:00Z");
    assert_eq!(
        index_of(&r, |e| e.kind() == EventKind::GroupFailed),
        index_of(&r, |e| is_member_event(e, EventKind::MemberFailed, "m-4")) + 1,
        "the group fails right after its fourth failure"
    );
    let g = group(&r, "g");
    assert_eq!(g.status.state, State::Failed);
    assert_eq!(g.failure_count, 4);
    assert_eq!(member(&r, "m-5").status.state, State::NotStarted);
    assert!(member_events(&r, EventKind::MemberStarted, "m-5").is_empty());
}

#[test]
fn stage_five_group_a_two_group_b_three_a_fails_on_third_stage_on_sixth_failure() {
    // stage "5", A "2", B "3": A fails on its 3rd failure; the stage fails when its total
    // reaches 6. A's failure stops the run at once (nothing new starts, in B neither), so the
    // stage's 4th to 6th failures come from B's upgrades already in flight: B runs three at a
    // time, all three fail, late (100, 110, 120 minutes):
    //   a-1 00:30 (1), a-2 01:00 (2), a-3 01:30 (3: A fails, 3 > 2; the run is Stopping),
    //   b-1 01:40 (4), b-2 01:50 (5: the stage holds, 5 = 5), b-3 02:00 (6: the stage fails).
    // B's own threshold holds throughout (3 = 3).
    let fail = json!({"behavior": {"failAttempts": 1}});
    let b_fails = |name: &str, minutes: u32| {
        cluster(
            name,
            json!({"group": "group-b",
                   "behavior": {"failAttempts": 1, "upgradeMinutes": minutes}}),
        )
    };
    let mut members = group_members("a", 3, "group-a", fail);
    members.push(cluster("a-4", json!({"group": "group-a"})));
    members.push(b_fails("b-1", 100));
    members.push(b_fails("b-2", 110));
    members.push(b_fails("b-3", 120));
    members.push(cluster("b-4", json!({"group": "group-b"})));
    members.push(cluster("b-5", json!({"group": "group-b"})));
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "maxAllowedFailures": "5", "groups": [
            {"name": "group-a", "maxAllowedFailures": "2"},
            {"name": "group-b", "maxAllowedFailures": "3", "maxConcurrency": "3"}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();

    assert_eq!(
        failures(&r),
        pairs(&[
            ("a-1", "2026-12-07T00:30:00Z"),
            ("a-2", "2026-12-07T01:00:00Z"),
            ("a-3", "2026-12-07T01:30:00Z"),
            ("b-1", "2026-12-07T01:40:00Z"),
            ("b-2", "2026-12-07T01:50:00Z"),
            ("b-3", "2026-12-07T02:00:00Z"),
        ])
    );

    // A fails on its 3rd failure: GroupFailed right after a-3's failure, and the run stops
    // progressing at once.
    let gf = events(&r, EventKind::GroupFailed);
    assert_eq!(gf.len(), 1, "only A fails by its own threshold: {gf:?}");
    assert_eq!(gf[0].group(), Some("group-a"));
    assert_eq!(fmt_time(gf[0].at), "2026-12-07T01:30:00Z");
    let a3 = index_of(&r, |e| is_member_event(e, EventKind::MemberFailed, "a-3"));
    assert_eq!(index_of(&r, |e| e.kind() == EventKind::GroupFailed), a3 + 1);
    assert_eq!(index_of(&r, |e| e.kind() == EventKind::RunStopping), a3 + 2);
    let mid = status_after(&sc, "2026-12-07T01:45:00Z");
    assert_eq!(mid.status.state, State::Stopping);
    assert_eq!(stage(&r, "s").max_allowed_failures, 5);

    // The stage fails exactly at the 6th failure, by its own threshold, not before.
    let sf = single(&r, EventKind::StageFailed);
    assert_eq!(fmt_time(sf.at), "2026-12-07T02:00:00Z");
    assert_eq!(sf.message(), Some("6 failures exceed maxAllowedFailures 5"));
    assert_eq!(
        index_of(&r, |e| e.kind() == EventKind::StageFailed),
        index_of(&r, |e| is_member_event(e, EventKind::MemberFailed, "b-3")) + 1,
        "StageFailed comes right after the sixth failure"
    );

    // Counts and resolved thresholds in status.
    let s = stage(&r, "s");
    assert_eq!((s.failure_count, s.max_allowed_failures), (6, 5));
    assert_eq!(s.status.state, State::Failed);
    let a = group(&r, "group-a");
    assert_eq!((a.failure_count, a.max_allowed_failures), (3, 2));
    assert_eq!(a.status.state, State::Failed);
    let b = group(&r, "group-b");
    assert_eq!((b.failure_count, b.max_allowed_failures), (3, 3));
    assert_eq!(
        b.status.state,
        State::Stopped,
        "B's own threshold held; it was stopped"
    );

    // No new work after A's threshold: a-4, b-4, b-5 never start; the run Failed.
    for m in ["a-4", "b-4", "b-5"] {
        assert_eq!(member(&r, m).status.state, State::NotStarted, "{m}");
    }
    assert_eq!(r.run.as_ref().unwrap().status.failure_count, 6);
    assert_eq!(r.summary.state, State::Failed);
    assert_eq!(time(r.summary.finished_at), "2026-12-07T02:00:00Z");
}

#[test]
fn percentage_failure_thresholds_round_up_for_19_members() {
    // 19 members, A has 7, B has 12; stage "25%" -> 5, A "25%" -> 2, B "25%" -> 3.
    let mut members = group_members("a", 7, "group-a", json!({}));
    members.extend(group_members("b", 12, "group-b", json!({})));
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "maxAllowedFailures": "25%", "groups": [
            {"name": "group-a", "maxAllowedFailures": "25%", "maxConcurrency": "7"},
            {"name": "group-b", "maxAllowedFailures": "25%", "maxConcurrency": "12"}]}]}),
    ));
    assert_eq!(stage(&r, "s").max_allowed_failures, 5);
    assert_eq!(group(&r, "group-a").max_allowed_failures, 2);
    assert_eq!(group(&r, "group-b").max_allowed_failures, 3);
    assert_eq!(group(&r, "group-a").members.len(), 7);
    assert_eq!(group(&r, "group-b").members.len(), 12);
    assert_eq!(r.summary.members_completed, 19);
}

#[test]
fn twenty_five_percent_of_five_allows_two_failures_and_the_third_fails() {
    // 25% of 5 -> 2 (ceil(1.25)): two failures hold, the third fails group and stage.
    let fail = json!({"behavior": {"failAttempts": 1}});
    let mut members = group_members("m", 3, "g", fail);
    members.push(cluster("m-4", json!({"group": "g"})));
    members.push(cluster("m-5", json!({"group": "g"})));
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "maxAllowedFailures": "25%",
                           "groups": [{"name": "g", "maxAllowedFailures": "25%"}]}]}),
    ));
    assert_eq!(stage(&r, "s").max_allowed_failures, 2);
    assert_eq!(group(&r, "g").max_allowed_failures, 2);
    // The third member still starts after two failures...
    assert_eq!(
        member_at(&r, EventKind::MemberStarted, "m-3"),
        "2026-12-07T01:00:00Z"
    );
    // ...and its failure, the third, fails the group and the stage at once.
    let third = index_of(&r, |e| is_member_event(e, EventKind::MemberFailed, "m-3"));
    assert_eq!(
        index_of(&r, |e| e.kind() == EventKind::GroupFailed),
        third + 1
    );
    assert_eq!(
        index_of(&r, |e| e.kind() == EventKind::StageFailed),
        third + 2
    );
    assert_eq!(
        fmt_time(single(&r, EventKind::StageFailed).at),
        "2026-12-07T01:30:00Z"
    );
    assert_eq!(group(&r, "g").failure_count, 3);
    for m in ["m-4", "m-5"] {
        assert_eq!(member(&r, m).status.state, State::NotStarted, "{m}");
    }
    assert_eq!(r.summary.state, State::Failed);
}

#[test]
fn default_max_allowed_failures_of_zero_fails_fast() {
    let fail = json!({"behavior": {"failAttempts": 1}});
    let mut members = vec![cluster("m-1", json!({"group": "g"}))];
    members.push(cluster("m-2", merge(json!({"group": "g"}), fail)));
    members.push(cluster("m-3", json!({"group": "g"})));
    members.push(cluster("n-1", json!({"group": "later"})));
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]},
                          {"name": "t", "groups": [{"name": "later"}]}]}),
    ));
    assert_eq!(stage(&r, "s").max_allowed_failures, 0);
    assert_eq!(group(&r, "g").max_allowed_failures, 0);
    // m-1 succeeds; m-2's failure is the first, and it ends the run.
    let tail: Vec<EventKind> = r
        .timeline
        .iter()
        .skip_while(|e| e.kind() != EventKind::MemberFailed)
        .map(|e| e.kind())
        .collect();
    assert_eq!(
        tail,
        vec![
            EventKind::MemberFailed,
            EventKind::GroupFailed,
            EventKind::StageFailed,
            EventKind::RunFailed
        ]
    );
    assert_eq!(
        fmt_time(single(&r, EventKind::RunFailed).at),
        "2026-12-07T01:00:00Z"
    );
    assert_eq!(member(&r, "m-1").status.state, State::Completed);
    assert_eq!(member(&r, "m-3").status.state, State::NotStarted);
    assert_eq!(member(&r, "n-1").status.state, State::NotStarted);
    assert_eq!(stage(&r, "t").status.state, State::NotStarted);
    assert_eq!(r.run.as_ref().unwrap().status.failure_count, 1);
    assert_eq!(r.summary.state, State::Failed);
}

#[test]
fn in_flight_upgrades_finish_after_a_threshold_is_exceeded() {
    // Group "3" wide, default thresholds (0). m-1 fails at 00:30 (threshold exceeded), m-2
    // fails at 00:40 and m-3 succeeds at 00:50: both were in flight and finish; m-4 never
    // starts; failureCount ends at 2, above the threshold of 0; the run is Stopping until the
    // drain ends, then Failed.
    let members = vec![
        cluster(
            "m-1",
            json!({"group": "g", "behavior": {"failAttempts": 1, "upgradeMinutes": 30}}),
        ),
        cluster(
            "m-2",
            json!({"group": "g", "behavior": {"failAttempts": 1, "upgradeMinutes": 40}}),
        ),
        cluster(
            "m-3",
            json!({"group": "g", "behavior": {"upgradeMinutes": 50}}),
        ),
        cluster("m-4", json!({"group": "g"})),
    ];
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [{"name": "g", "maxConcurrency": "3"}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();
    let seq: Vec<(EventKind, Option<&str>, String)> = r
        .timeline
        .iter()
        .skip_while(|e| e.kind() != EventKind::MemberFailed)
        .map(|e| (e.kind(), e.member(), fmt_time(e.at)))
        .collect();
    let (t30, t40, t50) = (
        "2026-12-07T00:30:00Z".to_string(),
        "2026-12-07T00:40:00Z".to_string(),
        "2026-12-07T00:50:00Z".to_string(),
    );
    assert_eq!(
        seq,
        vec![
            (EventKind::MemberFailed, Some("m-1"), t30.clone()),
            (EventKind::GroupFailed, None, t30.clone()),
            (EventKind::StageFailed, None, t30.clone()),
            (EventKind::RunStopping, None, t30),
            (EventKind::MemberFailed, Some("m-2"), t40),
            (EventKind::MemberCompleted, Some("m-3"), t50.clone()),
            (EventKind::RunFailed, None, t50),
        ]
    );
    // Meanwhile (00:45) the run drains: Stopping, one upgrade still in flight.
    let mid = status_after(&sc, "2026-12-07T00:45:00Z");
    assert_eq!(mid.status.state, State::Stopping);
    let g = group(&r, "g");
    assert_eq!((g.failure_count, g.max_allowed_failures), (2, 0));
    assert_eq!(stage(&r, "s").failure_count, 2);
    assert_eq!(r.run.as_ref().unwrap().status.failure_count, 2);
    assert_eq!(member(&r, "m-3").status.state, State::Completed);
    assert_eq!(member(&r, "m-4").status.state, State::NotStarted);
    assert_eq!(r.summary.state, State::Failed);
    assert_eq!(
        time(r.run.as_ref().unwrap().status.status.completed_time),
        "2026-12-07T00:50:00Z"
    );
}

#[test]
fn stage_threshold_can_fail_the_stage_while_every_group_threshold_holds() {
    // Group and stage are checked independently: stage "1", A "5", B "5"; one failure in each
    // group fails the stage (2 > 1) though neither group exceeds its own threshold.
    let r = sim(stage_one_over_groups_of_five());
    // a-1's failure (the first) holds: a-2 starts after it.
    assert_eq!(
        member_at(&r, EventKind::MemberStarted, "a-2"),
        "2026-12-07T00:30:00Z"
    );
    // b-1's failure (the second in the stage) fails the stage at once.
    let sf = single(&r, EventKind::StageFailed);
    assert_eq!(fmt_time(sf.at), "2026-12-07T00:40:00Z");
    assert_eq!(
        index_of(&r, |e| e.kind() == EventKind::StageFailed),
        index_of(&r, |e| is_member_event(e, EventKind::MemberFailed, "b-1")) + 1
    );
    assert_eq!(count(&r, EventKind::GroupFailed), 0);
    for g in ["group-a", "group-b"] {
        let gs = group(&r, g);
        assert_eq!(gs.failure_count, 1, "{g}");
        assert_ne!(gs.status.state, State::Failed, "{g}");
    }
    assert_eq!(stage(&r, "s").failure_count, 2);
    // a-2 was in flight and finishes; b-2 never starts.
    assert_eq!(member(&r, "a-2").status.state, State::Completed);
    assert_eq!(member(&r, "b-2").status.state, State::NotStarted);
    assert_eq!(r.summary.state, State::Failed);
    assert_eq!(time(r.summary.finished_at), "2026-12-07T01:00:00Z");
}

#[test]
fn sibling_group_starts_nothing_after_a_group_fails() {
    // stage "10", A "0" (default), B "10" two at a time. A's first failure (a-1, 00:30) exceeds
    // A's threshold: A is Failed and the run stops progressing at once, in B too (spec section 5:
    // "no new member upgrade starts anywhere in the run, not in sibling groups either"). B's
    // upgrades in flight (b-1 until 01:00, b-2 until 01:30) finish while the run is Stopping;
    // b-3 and b-4 never start, though B's slots free up and its threshold holds. Then B is
    // Stopped, the stage Failed (because A failed: its own threshold held, 1 <= 10) and the run
    // Failed, all at 01:30.
    let members = vec![
        cluster(
            "a-1",
            json!({"group": "group-a", "behavior": {"failAttempts": 1}}),
        ),
        cluster("a-2", json!({"group": "group-a"})),
        cluster(
            "b-1",
            json!({"group": "group-b", "behavior": {"upgradeMinutes": 60}}),
        ),
        cluster(
            "b-2",
            json!({"group": "group-b", "behavior": {"upgradeMinutes": 90}}),
        ),
        cluster("b-3", json!({"group": "group-b"})),
        cluster("b-4", json!({"group": "group-b"})),
    ];
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "maxAllowedFailures": "10", "groups": [
            {"name": "group-a"},
            {"name": "group-b", "maxAllowedFailures": "10", "maxConcurrency": "2"}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("a-1", "2026-12-07T00:00:00Z"),
            ("b-1", "2026-12-07T00:00:00Z"),
            ("b-2", "2026-12-07T00:00:00Z"),
        ]),
        "nothing starts after 00:30"
    );
    let tail: Vec<(EventKind, String, String)> = r
        .timeline
        .iter()
        .skip_while(|e| e.kind() != EventKind::MemberFailed)
        .map(|e| {
            let who = e
                .member()
                .map(str::to_string)
                .or(e.group().map(str::to_string))
                .unwrap_or_default();
            (e.kind(), who, fmt_time(e.at)[11..16].to_string())
        })
        .collect();
    let row = |k, who: &str, at: &str| (k, who.to_string(), at.to_string());
    assert_eq!(
        tail,
        vec![
            row(EventKind::MemberFailed, "a-1", "00:30"),
            row(EventKind::GroupFailed, "group-a", "00:30"),
            row(EventKind::RunStopping, "", "00:30"),
            row(EventKind::MemberCompleted, "b-1", "01:00"),
            row(EventKind::MemberCompleted, "b-2", "01:30"),
            row(EventKind::GroupStopped, "group-b", "01:30"),
            row(EventKind::StageFailed, "", "01:30"),
            row(EventKind::RunFailed, "", "01:30"),
        ]
    );

    // Meanwhile (01:15) the run drains: Stopping with the threshold error; A Failed; B still
    // Running its last upgrade, its queued members waiting on the stop, not on concurrency.
    let mid = status_after(&sc, "2026-12-07T01:15:00Z");
    assert_eq!(mid.status.state, State::Stopping);
    let err = mid.status.error.clone().expect("the run says why it stops");
    assert_eq!(err.code, "FailureThresholdExceeded");
    assert!(err.message.contains("group \"group-a\""), "{}", err.message);
    let gs = |name: &str| {
        mid.stages[0]
            .groups
            .iter()
            .find(|g| g.name == name)
            .unwrap()
            .clone()
    };
    assert_eq!(gs("group-a").status.state, State::Failed);
    assert_eq!(gs("group-b").status.state, State::Running);
    assert_eq!(mid.stages[0].status.state, State::Running);
    for m in ["b-3", "b-4"] {
        let ms = gs("group-b")
            .members
            .into_iter()
            .find(|x| x.name == m)
            .unwrap();
        assert_eq!(ms.status.state, State::NotStarted, "{m}");
        assert_eq!(ms.waiting_on.map(|w| w.reason), Some(Reason::Stop), "{m}");
    }

    // At the end: A Failed, B Stopped, the stage Failed naming A, the run Failed.
    assert_eq!(group(&r, "group-a").status.state, State::Failed);
    let b = group(&r, "group-b");
    assert_eq!(b.status.state, State::Stopped);
    assert!(b.status.error.is_none());
    let s = stage(&r, "s");
    assert_eq!(s.status.state, State::Failed);
    assert_eq!((s.failure_count, s.max_allowed_failures), (1, 10));
    let serr = s.status.error.clone().expect("stage error");
    assert_eq!(serr.code, "FailureThresholdExceeded");
    assert_eq!(
        serr.message,
        "group \"group-a\" failed: 1 failures exceed maxAllowedFailures 0"
    );
    assert_eq!(
        r.run
            .as_ref()
            .unwrap()
            .status
            .status
            .error
            .as_ref()
            .map(|e| e.message.as_str()),
        Some(
            "stage \"s\" failed: group \"group-a\" failed: 1 failures exceed maxAllowedFailures 0"
        )
    );
    for m in ["a-2", "b-3", "b-4"] {
        assert_eq!(member(&r, m).status.state, State::NotStarted, "{m}");
    }
    assert_eq!(r.run.as_ref().unwrap().status.failure_count, 1);
    assert_eq!(r.summary.state, State::Failed);
    assert_eq!(time(r.summary.finished_at), "2026-12-07T01:30:00Z");
}

#[test]
fn group_whose_members_all_finished_within_its_threshold_is_completed_when_the_stage_fails() {
    // Same run as above. Once the stage has failed (00:40), group-a's last in-flight upgrade
    // finishes (a-2, 01:00): every member of group-a is terminal and its threshold held (1 <= 5),
    // and it has no after-gates, so by section 3 the group is Completed ("Completed when every
    // member is terminal and its threshold held and its after-gates are done"; "Completed never
    // means all succeeded"). group-b still has b-2 NotStarted, so it is not Completed.
    let r = sim(stage_one_over_groups_of_five());
    assert_eq!(r.summary.state, State::Failed);
    let a = group(&r, "group-a");
    assert_eq!(
        a.status.state,
        State::Completed,
        "group-a: every member terminal, 1 failure <= 5 allowed"
    );
    assert_eq!(time(a.status.completed_time), "2026-12-07T01:00:00Z");
    let done: Vec<Option<&str>> = events(&r, EventKind::GroupCompleted)
        .into_iter()
        .map(|e| e.group())
        .collect();
    assert_eq!(done, vec![Some("group-a")]);
    assert_ne!(group(&r, "group-b").status.state, State::Completed);
}

// =============================================================================================
// Section 6: maintenance windows and ordering

#[test]
fn waiting_members_are_ordered_open_now_opens_soon_no_window_closed_then_by_name() {
    // At Monday 00:00: *-open windows (Sunday 22:00, 6 h) are open; *-soon windows open at
    // 02:00 (within 4 h); *-none have no window; *-closed windows open on Wednesday.
    let open = weekly("Sunday", "22:00", 6);
    let soon = weekly("Monday", "02:00", 4);
    let closed = weekly("Wednesday", "00:00", 4);
    let mut members = Vec::new();
    for p in ["b", "a"] {
        members.push(cluster(&format!("{p}-closed"), windowed(&closed)));
        members.push(cluster(&format!("{p}-none"), json!({"group": "g"})));
        members.push(cluster(&format!("{p}-soon"), windowed(&soon)));
        members.push(cluster(&format!("{p}-open"), windowed(&open)));
    }
    let r = sim(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]}]}),
    ));
    // Processing order: priority class, then name.
    let order: Vec<&str> = group(&r, "g")
        .members
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(
        order,
        vec!["a-open", "b-open", "a-soon", "b-soon", "a-none", "b-none", "a-closed", "b-closed"]
    );
    // One at a time: the open windows first; the soon ones are Pending (holding no slot) so the
    // windowless members go next; the soon ones at 02:00; the closed ones on Wednesday.
    assert_eq!(
        member_names(&r, EventKind::MemberStarted),
        vec!["a-open", "b-open", "a-none", "b-none", "a-soon", "b-soon", "a-closed", "b-closed"]
    );
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("a-closed", "2026-12-09T00:00:00Z"),
            ("a-none", "2026-12-07T01:00:00Z"),
            ("a-open", "2026-12-07T00:00:00Z"),
            ("a-soon", "2026-12-07T02:00:00Z"),
            ("b-closed", "2026-12-09T00:30:00Z"),
            ("b-none", "2026-12-07T01:30:00Z"),
            ("b-open", "2026-12-07T00:30:00Z"),
            ("b-soon", "2026-12-07T02:30:00Z"),
        ])
    );
    let pending: Vec<(String, String)> = events(&r, EventKind::MemberPending)
        .into_iter()
        .map(|e| (e.member().map(str::to_string).unwrap(), time(e.until())))
        .collect();
    assert_eq!(
        sorted(pending),
        pairs(&[
            ("a-closed", "2026-12-09T00:00:00Z"),
            ("a-soon", "2026-12-07T02:00:00Z"),
            ("b-closed", "2026-12-09T00:00:00Z"),
            ("b-soon", "2026-12-07T02:00:00Z"),
        ])
    );
    assert_eq!(r.summary.members_completed, 8);
}

#[test]
fn pending_member_is_reported_with_its_next_opening_time() {
    let members = vec![
        cluster("m-wed", windowed(&weekly("Wednesday", "00:00", 4))),
        cluster("m-free", json!({"group": "g"})),
    ];
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();
    let p = member_events(&r, EventKind::MemberPending, "m-wed");
    assert_eq!(p.len(), 1);
    assert_eq!(fmt_time(p[0].at), "2026-12-07T00:00:00Z");
    assert_eq!(p[0].reason(), Some(Reason::MaintenanceWindow));
    assert_eq!(time(p[0].until()), "2026-12-09T00:00:00Z");
    // A Pending member holds no slot: the group moves on to m-free at once.
    assert_eq!(
        member_at(&r, EventKind::MemberStarted, "m-free"),
        "2026-12-07T00:00:00Z"
    );
    assert_eq!(
        member_at(&r, EventKind::MemberStarted, "m-wed"),
        "2026-12-09T00:00:00Z"
    );

    // Tuesday noon: the status tree says who waits on what, until when.
    let mid = status_after(&sc, "2026-12-08T12:00:00Z");
    let m = &mid.stages[0].groups[0]
        .members
        .iter()
        .find(|m| m.name == "m-wed")
        .unwrap();
    assert_eq!(m.status.state, State::Pending);
    assert!(
        m.message
            .as_deref()
            .is_some_and(|s| s.contains("2026-12-09T00:00:00Z")),
        "the message gives the next opening time: {:?}",
        m.message
    );
    let w = m.waiting_on.as_ref().expect("waitingOn");
    assert_eq!(w.reason, Reason::MaintenanceWindow);
    assert_eq!(time(w.until), "2026-12-09T00:00:00Z");
    // Spec section 3: every remaining member Pending -> group Pending -> stage -> run.
    assert_eq!(mid.stages[0].groups[0].status.state, State::Pending);
    assert_eq!(mid.stages[0].status.state, State::Pending);
    assert_eq!(mid.status.state, State::Pending);
}

#[test]
fn a_window_only_permits_it_never_triggers() {
    let daily_midnight = daily("00:00", 4, "+00:00");
    // Without a start action nothing happens, although the window opens daily.
    let mut v = scenario(
        vec![cluster("m-1", windowed(&daily_midnight))],
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]}]}),
    );
    v["actions"] = json!([]);
    v["until"] = json!("2026-12-14T00:00:00Z");
    let r = sim(v);
    assert!(r.timeline.is_empty(), "{:?}", r.timeline);
    assert_eq!(r.summary.state, State::NotStarted);
    assert_eq!(member(&r, "m-1").status.state, State::NotStarted);

    // Started at 10:00, after the day's window (00:00-04:00) closed: the member waits for the
    // next opening instead of starting.
    let mut v = scenario(
        vec![cluster("m-1", windowed(&daily_midnight))],
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]}]}),
    );
    v["actions"] = json!([{"at": "2026-12-07T10:00:00Z", "do": "start"}]);
    let r = sim(v);
    let p = single(&r, EventKind::MemberPending);
    assert_eq!(fmt_time(p.at), "2026-12-07T10:00:00Z");
    assert_eq!(time(p.until()), "2026-12-08T00:00:00Z");
    assert_eq!(
        member_at(&r, EventKind::MemberStarted, "m-1"),
        "2026-12-08T00:00:00Z"
    );
}

#[test]
fn upgrade_started_inside_its_window_may_run_past_the_end() {
    // Window 00:00-04:00; the upgrade takes 5 hours.
    let r = sim(scenario(
        vec![cluster(
            "m-1",
            merge(
                windowed(&daily("00:00", 4, "+00:00")),
                json!({"behavior": {"upgradeMinutes": 300}}),
            ),
        )],
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]}]}),
    ));
    let m = member(&r, "m-1");
    assert_eq!(m.status.state, State::Completed);
    assert_eq!(time(m.status.start_time), "2026-12-07T00:00:00Z");
    assert_eq!(time(m.status.completed_time), "2026-12-07T05:00:00Z");
    assert!(m.status.error.is_none());
    assert_eq!(r.summary.state, State::Completed);
}

#[test]
fn no_member_upgrade_starts_outside_its_window() {
    // Daily 00:00-04:00; 90-minute upgrades one at a time: w-1 00:00, w-2 01:30, w-3 03:00
    // (runs past 04:00), w-4 would be due at 04:30 but waits for the next day's opening.
    let window = daily("00:00", 4, "+00:00");
    let members: Vec<_> = (1..=4)
        .map(|i| {
            cluster(
                &format!("w-{i}"),
                merge(
                    windowed(&window),
                    json!({"behavior": {"upgradeMinutes": 90}}),
                ),
            )
        })
        .collect();
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [{"name": "g"}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("w-1", "2026-12-07T00:00:00Z"),
            ("w-2", "2026-12-07T01:30:00Z"),
            ("w-3", "2026-12-07T03:00:00Z"),
            ("w-4", "2026-12-08T00:00:00Z"),
        ])
    );
    let p = single(&r, EventKind::MemberPending);
    assert_eq!(p.member(), Some("w-4"));
    assert_eq!(fmt_time(p.at), "2026-12-07T04:30:00Z");
    assert_eq!(time(p.until()), "2026-12-08T00:00:00Z");
    assert_every_start_inside_its_window(&sc, &r);
    assert_eq!(r.summary.members_completed, 4);
}

#[test]
fn utc_offset_windows_open_at_local_time() {
    // m-west: daily 22:00 at -05:00 = 03:00Z. m-east: Monday 01:00 at +09:00 = Sunday 16:00Z,
    // so on Monday 00:00Z (Monday 09:00 local) this week's occurrence is over and the next is
    // Sunday 2026-12-13T16:00Z. Written as YAML to exercise the host's parser too.
    let yaml = r#"
start: '2026-12-07T00:00:00Z'
members:
- name: m-west
  region: eastus
  kubernetesVersion: 1.30.4
  nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]
  maintenance:
    kubernetes: {schedule: {daily: {intervalDays: 1}}, durationHours: 4, startTime: '22:00', utcOffset: '-05:00'}
- name: m-east
  region: eastus
  kubernetesVersion: 1.30.4
  nodePools: [{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}]
  maintenance:
    kubernetes:
      schedule: {weekly: {intervalWeeks: 1, dayOfWeek: Monday}}
      durationHours: 4
      startTime: '01:00'
      utcOffset: '+09:00'
run:
  name: r1
  managedClusterUpdate:
    upgrade: {type: Full, kubernetesVersion: 1.31.2}
actions:
- {at: '2026-12-07T00:00:00Z', do: start}
"#;
    let sc = parse_yaml(yaml);
    let r = waverun_core::sim::simulate(&sc).unwrap();
    let until: Vec<(String, String)> = events(&r, EventKind::MemberPending)
        .into_iter()
        .map(|e| (e.member().map(str::to_string).unwrap(), time(e.until())))
        .collect();
    assert_eq!(
        sorted(until),
        pairs(&[
            ("m-east", "2026-12-13T16:00:00Z"),
            ("m-west", "2026-12-07T03:00:00Z"),
        ])
    );
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("m-east", "2026-12-13T16:00:00Z"),
            ("m-west", "2026-12-07T03:00:00Z"),
        ])
    );
    assert_every_start_inside_its_window(&sc, &r);
    assert_eq!(r.summary.state, State::Completed);
}

#[test]
fn not_allowed_dates_block_a_window_on_whole_local_dates() {
    // n-utc: daily 00:00 UTC, closed on 2026-12-07 and 2026-12-08 -> first opening Dec 9.
    // n-plus2: daily 00:00 at +02:00 (22:00Z the day before), closed on local 2026-12-07: at
    // 00:00Z it is 02:00 local on the 7th, blocked; next local midnight (Dec 8) is 22:00Z Dec 7.
    // control: the same +02:00 window without exclusions is open at 00:00Z.
    let with_dates = |w: serde_json::Value, dates: serde_json::Value| {
        let mut w = w;
        w["notAllowedDates"] = dates;
        w
    };
    let members = vec![
        cluster(
            "n-utc",
            json!({"group": "a", "maintenance": {"kubernetes": with_dates(
                daily("00:00", 4, "+00:00"),
                json!([{"start": "2026-12-07", "end": "2026-12-08"}]))}}),
        ),
        cluster(
            "n-plus2",
            json!({"group": "b", "maintenance": {"kubernetes": with_dates(
                daily("00:00", 4, "+02:00"),
                json!([{"start": "2026-12-07", "end": "2026-12-07"}]))}}),
        ),
        cluster(
            "control",
            json!({"group": "c", "maintenance": {"kubernetes": daily("00:00", 4, "+02:00")}}),
        ),
    ];
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();
    let until: Vec<(String, String)> = events(&r, EventKind::MemberPending)
        .into_iter()
        .map(|e| (e.member().map(str::to_string).unwrap(), time(e.until())))
        .collect();
    assert_eq!(
        sorted(until),
        pairs(&[
            ("n-plus2", "2026-12-07T22:00:00Z"),
            ("n-utc", "2026-12-09T00:00:00Z"),
        ])
    );
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("control", "2026-12-07T00:00:00Z"),
            ("n-plus2", "2026-12-07T22:00:00Z"),
            ("n-utc", "2026-12-09T00:00:00Z"),
        ])
    );
    assert_every_start_inside_its_window(&sc, &r);
}

#[test]
fn scheduled_start_gate_and_window_must_both_allow() {
    // Each group has a ScheduledStart gate opening Tuesday 2026-12-08 09:00Z.
    //  late:   window daily 10:00-14:00 -> the gate opens first; starts at the window, 10:00.
    //  early:  window daily 08:00-12:00 -> open on Monday too, but waits for the gate: 09:00.
    //  closed: window daily 02:00-06:00 -> closed when the gate opens: Wednesday 02:00.
    let gate = json!([{"type": "ScheduledStart", "scheduledStartConfiguration":
        {"startDay": "Tuesday", "startTime": "09:00", "utcOffset": "+00:00"}}]);
    let members = vec![
        cluster(
            "late",
            json!({"group": "g-late", "maintenance": {"kubernetes": daily("10:00", 4, "+00:00")}}),
        ),
        cluster(
            "early",
            json!({"group": "g-early", "maintenance": {"kubernetes": daily("08:00", 4, "+00:00")}}),
        ),
        cluster(
            "closed",
            json!({"group": "g-closed", "maintenance": {"kubernetes": daily("02:00", 4, "+00:00")}}),
        ),
    ];
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [
            {"name": "g-late", "beforeGates": gate},
            {"name": "g-early", "beforeGates": gate},
            {"name": "g-closed", "beforeGates": gate}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();
    let gates: Vec<String> = events(&r, EventKind::GateCompleted)
        .into_iter()
        .map(|e| fmt_time(e.at))
        .collect();
    assert_eq!(gates, vec!["2026-12-08T09:00:00Z"; 3]);
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("closed", "2026-12-09T02:00:00Z"),
            ("early", "2026-12-08T09:00:00Z"),
            ("late", "2026-12-08T10:00:00Z"),
        ])
    );
    assert_every_start_inside_its_window(&sc, &r);
    assert_eq!(r.summary.state, State::Completed);
}

#[test]
fn node_os_window_governs_node_image_only_and_kubernetes_window_governs_full() {
    // k-open: kubernetes window open now (daily 00:00), nodeOS window on Wednesday.
    // n-open: nodeOS window open now (daily 00:00), kubernetes window on Wednesday.
    let now_open = daily("00:00", 4, "+00:00");
    let wednesday = weekly("Wednesday", "00:00", 4);
    let members = vec![
        cluster(
            "k-open",
            json!({"maintenance": {"kubernetes": now_open, "nodeOS": wednesday}}),
        ),
        cluster(
            "n-open",
            json!({"maintenance": {"kubernetes": wednesday, "nodeOS": now_open}}),
        ),
    ];
    let releases = json!({
        "kubernetes": [{"version": "1.31.2", "available": {"eastus": "2026-11-01T00:00:00Z"}}],
        "nodeImages": [
            {"version": IMG, "available": {"eastus": "2026-11-01T00:00:00Z"}},
            {"version": IMG_NEW, "available": {"eastus": "2026-11-20T00:00:00Z"}}]});
    let run = |upgrade: serde_json::Value| {
        let mut v = scenario(members.clone(), serde_json::Value::Null);
        v["releases"] = releases.clone();
        v["run"]["managedClusterUpdate"]["upgrade"] = upgrade;
        sim(v)
    };

    // No strategy: every member one by one (one stage, one group, concurrency 1).
    let node_image = run(json!({"type": "NodeImageOnly"}));
    assert_eq!(
        start_times(&node_image),
        pairs(&[
            ("k-open", "2026-12-09T00:00:00Z"),
            ("n-open", "2026-12-07T00:00:00Z"),
        ])
    );
    assert_eq!(
        pool_images(&member(&node_image, "n-open").node_images),
        vec![("system", IMG_NEW)]
    );

    for kind in ["Full", "ControlPlaneOnly"] {
        let r = run(json!({"type": kind, "kubernetesVersion": "1.31.2"}));
        assert_eq!(
            start_times(&r),
            pairs(&[
                ("k-open", "2026-12-07T00:00:00Z"),
                ("n-open", "2026-12-09T00:00:00Z"),
            ]),
            "{kind}"
        );
        assert_eq!(r.summary.members_completed, 2, "{kind}");
    }
}

#[test]
fn window_is_inactive_before_its_start_date_and_intervals_count_from_it() {
    // d-later: daily, startDate Thursday 2026-12-10 -> inactive until then although it would
    // be open every day at 00:00.
    // d-every3: every 3 days from startDate Saturday 2026-12-05 -> Dec 5, 8, 11...: closed on
    // Monday the 7th, opens Tuesday the 8th (decision: intervals count from startDate).
    let with_start = |days: u32, start_date: &str| {
        let mut w = daily("00:00", 4, "+00:00");
        w["schedule"]["daily"]["intervalDays"] = json!(days);
        w["startDate"] = json!(start_date);
        w
    };
    let members = vec![
        cluster(
            "d-later",
            json!({"group": "a", "maintenance": {"kubernetes": with_start(1, "2026-12-10")}}),
        ),
        cluster(
            "d-every3",
            json!({"group": "b", "maintenance": {"kubernetes": with_start(3, "2026-12-05")}}),
        ),
    ];
    let sc = build(scenario(
        members,
        json!({"stages": [{"name": "s", "groups": [{"name": "a"}, {"name": "b"}]}]}),
    ));
    let r = waverun_core::sim::simulate(&sc).unwrap();
    assert_eq!(
        start_times(&r),
        pairs(&[
            ("d-every3", "2026-12-08T00:00:00Z"),
            ("d-later", "2026-12-10T00:00:00Z"),
        ])
    );
    assert_every_start_inside_its_window(&sc, &r);
}

// =============================================================================================

mod helpers {
    use serde_json::{json, Value};
    use std::collections::BTreeMap;
    use waverun_core::sim::{simulate, Scenario, Simulation, SimulationReport};
    use waverun_core::state::{GroupStatus, MemberStatus, StageStatus};
    use waverun_core::PoolImage;
    use waverun_core::{Event, EventKind, RunStatus, Timestamp};

    pub use waverun_core::fmt_time;

    pub const START: &str = "2026-12-07T00:00:00Z";
    pub const IMG: &str = "AKSUbuntu-2204gen2containerd-202411.03.0";
    pub const IMG_NEW: &str = "AKSUbuntu-2204gen2containerd-202411.20.0";

    /// stage "1" over group-a "5" (a-1 fails at 00:30, a-2 succeeds at 01:00) and group-b "5"
    /// (b-1 fails at 00:40, b-2 would succeed).
    pub fn stage_one_over_groups_of_five() -> serde_json::Value {
        let members = vec![
            cluster(
                "a-1",
                json!({"group": "group-a", "behavior": {"failAttempts": 1}}),
            ),
            cluster("a-2", json!({"group": "group-a"})),
            cluster(
                "b-1",
                json!({"group": "group-b", "behavior": {"failAttempts": 1, "upgradeMinutes": 40}}),
            ),
            cluster("b-2", json!({"group": "group-b"})),
        ];
        scenario(
            members,
            json!({"stages": [{"name": "s", "maxAllowedFailures": "1", "groups": [
                {"name": "group-a", "maxAllowedFailures": "5"},
                {"name": "group-b", "maxAllowedFailures": "5"}]}]}),
        )
    }

    /// `a` with every key of `b` set (objects merge recursively).
    pub fn merge(mut a: Value, b: Value) -> Value {
        match (a.as_object_mut(), b) {
            (Some(ao), Value::Object(bo)) => {
                for (k, v) in bo {
                    let merged = match ao.remove(&k) {
                        Some(old) if old.is_object() && v.is_object() => merge(old, v),
                        _ => v,
                    };
                    ao.insert(k, merged);
                }
                a
            }
            (_, b) => b,
        }
    }

    /// A member in eastus on 1.30.4 with one Linux pool, plus `extra`.
    pub fn cluster(name: &str, extra: Value) -> Value {
        merge(
            json!({"name": name, "region": "eastus", "kubernetesVersion": "1.30.4",
                   "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": IMG}]}),
            extra,
        )
    }

    /// `{prefix}-1` .. `{prefix}-{n}` in `group`, each with `extra`.
    pub fn group_members(prefix: &str, n: usize, group: &str, extra: Value) -> Vec<Value> {
        (1..=n)
            .map(|i| {
                cluster(
                    &format!("{prefix}-{i}"),
                    merge(json!({"group": group}), extra.clone()),
                )
            })
            .collect()
    }

    /// `{prefix}-01` .. `{prefix}-{n}` with `labels`.
    pub fn labelled_members(prefix: &str, n: usize, labels: Value) -> Vec<Value> {
        (1..=n)
            .map(|i| cluster(&format!("{prefix}-{i:02}"), json!({"labels": labels})))
            .collect()
    }

    pub fn daily(start: &str, hours: u32, offset: &str) -> Value {
        json!({"schedule": {"daily": {"intervalDays": 1}}, "durationHours": hours,
               "startTime": start, "utcOffset": offset})
    }

    pub fn weekly(day: &str, start: &str, hours: u32) -> Value {
        json!({"schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": day}},
               "durationHours": hours, "startTime": start, "utcOffset": "+00:00"})
    }

    /// Group `g` and a kubernetes window.
    pub fn windowed(window: &Value) -> Value {
        json!({"group": "g", "maintenance": {"kubernetes": window}})
    }

    /// A scenario starting Monday 2026-12-07 00:00Z, Full to 1.31.2, started at once.
    /// `strategy` null means none (every member one by one).
    pub fn scenario(members: Vec<Value>, strategy: Value) -> Value {
        let mut v = json!({
            "start": START,
            "members": members,
            "run": {"name": "r1", "managedClusterUpdate":
                {"upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"}}},
            "actions": [{"at": START, "do": "start"}]
        });
        if !strategy.is_null() {
            v["strategy"] = strategy;
        }
        v
    }

    pub fn build(v: Value) -> Scenario {
        serde_json::from_value(v).expect("scenario JSON matches the format")
    }

    pub fn sim(v: Value) -> SimulationReport {
        simulate(&build(v)).unwrap_or_else(|e| panic!("invalid scenario: {e:?}"))
    }

    pub fn parse_yaml(yaml: &str) -> Scenario {
        waverun_host::parse_text(yaml, false).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The run's status after everything at instants up to `at` has been processed.
    pub fn status_after(sc: &Scenario, at: &str) -> RunStatus {
        let t: Timestamp = at.parse().expect("RFC 3339");
        let mut sim = Simulation::new(sc).expect("valid scenario");
        while sim.now() <= t && sim.step() {}
        sim.engine().run_status("r1").expect("run exists")
    }

    pub fn time(t: Option<Timestamp>) -> String {
        t.map(fmt_time).unwrap_or_else(|| "-".to_string())
    }

    pub fn events(r: &SimulationReport, kind: EventKind) -> Vec<&Event> {
        r.timeline.iter().filter(|e| e.kind() == kind).collect()
    }

    pub fn count(r: &SimulationReport, kind: EventKind) -> usize {
        events(r, kind).len()
    }

    pub fn single(r: &SimulationReport, kind: EventKind) -> &Event {
        let e = events(r, kind);
        assert_eq!(e.len(), 1, "expected one {kind:?}, got {e:?}");
        e[0]
    }

    pub fn is_member_event(e: &Event, kind: EventKind, m: &str) -> bool {
        e.kind() == kind && e.member() == Some(m)
    }

    pub fn member_events<'a>(r: &'a SimulationReport, kind: EventKind, m: &str) -> Vec<&'a Event> {
        r.timeline
            .iter()
            .filter(|e| is_member_event(e, kind, m))
            .collect()
    }

    pub fn member_at(r: &SimulationReport, kind: EventKind, m: &str) -> String {
        let e = member_events(r, kind, m);
        assert_eq!(e.len(), 1, "{kind:?} of {m}: {e:?}");
        fmt_time(e[0].at)
    }

    /// Position in the timeline of the first event matching `pred`.
    pub fn index_of(r: &SimulationReport, pred: impl Fn(&Event) -> bool) -> usize {
        r.timeline
            .iter()
            .position(pred)
            .expect("a matching event in the timeline")
    }

    pub fn member_names(r: &SimulationReport, kind: EventKind) -> Vec<&str> {
        events(r, kind)
            .into_iter()
            .filter_map(|e| e.member())
            .collect()
    }

    /// (member, time) of every MemberStarted, sorted by member.
    pub fn start_times(r: &SimulationReport) -> Vec<(String, String)> {
        sorted(
            events(r, EventKind::MemberStarted)
                .into_iter()
                .map(|e| (e.member().map(str::to_string).unwrap(), fmt_time(e.at)))
                .collect(),
        )
    }

    /// (member, time) of every MemberFailed, in timeline order.
    pub fn failures(r: &SimulationReport) -> Vec<(String, String)> {
        events(r, EventKind::MemberFailed)
            .into_iter()
            .map(|e| (e.member().map(str::to_string).unwrap(), fmt_time(e.at)))
            .collect()
    }

    pub fn sorted(mut v: Vec<(String, String)>) -> Vec<(String, String)> {
        v.sort();
        v
    }

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

    /// Every MemberStarted lies inside the member's governing window, if it has one.
    pub fn assert_every_start_inside_its_window(sc: &Scenario, r: &SimulationReport) {
        let upgrade = sc
            .run
            .as_ref()
            .unwrap()
            .managed_cluster_update
            .upgrade
            .upgrade_type;
        for e in events(r, EventKind::MemberStarted) {
            let name = e.member().unwrap();
            let m = sc.members.iter().find(|m| m.name == name).unwrap();
            if let Some(w) = waverun_core::plan::governing_window(&m.member(), upgrade) {
                assert!(
                    w.compile().expect("valid window").is_open(e.at),
                    "{name} started at {} outside its window",
                    fmt_time(e.at)
                );
            }
        }
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
