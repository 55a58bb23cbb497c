//! The lifecycle on a virtual clock: every branch, as inputs in and actions out.

use super::*;
use waverun_core::{PoolImage, UpgradeType};

const SEC: i64 = 1000;

fn policy() -> Policy {
    Policy {
        seed: 7,
        ..Policy::default()
    }
}

fn request(id: &str) -> UpgradeRequest {
    UpgradeRequest {
        idempotency_key: id.to_string(),
        upgrade_type: UpgradeType::Full,
        control_plane: Some("1.34.1".to_string()),
        node_images: vec![PoolImage {
            node_pool: "system".to_string(),
            image_version: "img-2".to_string(),
        }],
    }
}

fn tracked(id: &str, state: OperationState) -> Tracked {
    Tracked {
        id: id.to_string(),
        member: format!("m-{id}"),
        provider: "exec".to_string(),
        target: ClusterTarget {
            member: format!("m-{id}"),
            cluster_ref: Some(format!("c-{id}")),
            region: Some("eastus".to_string()),
        },
        request: request(id),
        state,
        provider_operation_id: None,
    }
}

fn drain(lc: &mut Lifecycle) -> Vec<Action> {
    std::iter::from_fn(|| lc.poll_action()).collect()
}

/// The kinds of the actions, for compact assertions.
fn kinds(actions: &[Action]) -> Vec<&'static str> {
    actions
        .iter()
        .map(|a| match a {
            Action::Start { .. } => "start",
            Action::Poll { .. } => "poll",
            Action::Describe { .. } => "describe",
            Action::Refresh { .. } => "refresh",
            Action::Observe { .. } => "observe",
            Action::Record(_) => "record",
            Action::Succeeded { .. } => "succeeded",
            Action::Failed { .. } => "failed",
        })
        .collect()
}

fn failed_message(actions: &[Action]) -> String {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Failed { message, .. } => Some(message.clone()),
            _ => None,
        })
        .expect("a Failed action")
}

fn records(actions: &[Action]) -> Vec<OperationUpdate> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Record(u) => Some(u.clone()),
            _ => None,
        })
        .collect()
}

fn err(code: ProviderErrorCode) -> ProviderError {
    ProviderError::new(code, format!("{code:?} said the platform"))
}

fn uncertain() -> ProviderError {
    ProviderError {
        uncertain: true,
        ..err(ProviderErrorCode::Unavailable)
    }
}

fn started(phase: OperationPhase) -> Started {
    Started {
        operation_id: "prov-1".to_string(),
        phase,
        already_at_target: false,
        poll_after_seconds: 10,
    }
}

fn report(phase: OperationPhase) -> OperationReport {
    OperationReport {
        operation_id: "prov-1".to_string(),
        phase,
        message: None,
        poll_after_seconds: 10,
    }
}

fn described(version: &str, image: &str) -> Box<Described> {
    Box::new(Described {
        kubernetes_version: version.to_string(),
        node_pools: vec![waverun_core::NodePool {
            name: "system".to_string(),
            os_type: waverun_core::OsType::Linux,
            image_version: image.to_string(),
            from_snapshot: false,
        }],
        region: "eastus".to_string(),
        busy: false,
        power_state: None,
        maintenance: None,
        labels: Default::default(),
    })
}

/// Fires the next timer: the clock moves to it.
fn next_timer(lc: &mut Lifecycle, now: &mut i64) -> Vec<Action> {
    *now = lc.poll_timeout().expect("a timer");
    lc.handle_timeout(*now);
    drain(lc)
}

/// A lifecycle with operation "op" submitted at 0 and its start-upgrade under way.
fn sent() -> Lifecycle {
    let mut lc = Lifecycle::new(policy());
    lc.submit(tracked("op", OperationState::Intent), 0);
    assert_eq!(kinds(&drain(&mut lc)), ["start"]);
    lc
}

#[test]
fn a_submitted_operation_is_sent_polled_after_the_providers_wait_and_succeeds() {
    let mut lc = sent();
    lc.started("op", Ok(started(OperationPhase::Running)), 0);
    let out = drain(&mut lc);
    assert_eq!(
        records(&out),
        [OperationUpdate {
            id: "op".to_string(),
            state: OperationState::Sent,
            provider_operation_id: Some("prov-1".to_string()),
            last_error: None,
            attempted: true,
        }]
    );
    assert_eq!(lc.poll_timeout(), Some(10 * SEC));
    let mut now = 0;
    let out = next_timer(&mut lc, &mut now);
    assert_eq!(
        out,
        [Action::Poll {
            id: "op".to_string(),
            to: lc.call_to("op"),
            provider_operation_id: Some("prov-1".to_string()),
            request: request("op"),
        }]
    );
    lc.polled("op", Ok(report(OperationPhase::Succeeded)), now);
    assert_eq!(kinds(&drain(&mut lc)), ["refresh", "succeeded"]);
    assert!(lc.is_empty());
    assert_eq!(lc.poll_timeout(), None);
}

#[test]
fn a_platform_failure_fails_the_member_with_the_platforms_message() {
    let mut lc = sent();
    lc.started("op", Ok(started(OperationPhase::Pending)), 0);
    drain(&mut lc);
    let mut now = 0;
    next_timer(&mut lc, &mut now);
    let mut r = report(OperationPhase::Failed);
    r.message = Some("UpgradeFailed: node drain timed out".to_string());
    lc.polled("op", Ok(r), now);
    let out = drain(&mut lc);
    assert_eq!(kinds(&out), ["refresh", "failed"]);
    assert_eq!(failed_message(&out), "UpgradeFailed: node drain timed out");
    // A cancel with no message says how it ended.
    let mut lc = sent();
    lc.started("op", Ok(started(OperationPhase::Canceled)), 0);
    assert_eq!(
        failed_message(&drain(&mut lc)),
        "the upgrade ended Canceled"
    );
}

#[test]
fn a_permanent_refusal_fails_the_member_at_once_with_code_and_message() {
    use ProviderErrorCode::*;
    for code in [
        InvalidRequest,
        Unsupported,
        NotFound,
        Unauthenticated,
        PermissionDenied,
        NotAllowed,
    ] {
        let mut lc = sent();
        lc.started("op", Err(err(code)), 0);
        let out = drain(&mut lc);
        assert_eq!(kinds(&out), ["failed"], "{code:?}");
        assert_eq!(
            failed_message(&out),
            format!("the provider refused the upgrade: {code:?}: {code:?} said the platform")
        );
        assert!(lc.is_empty() && lc.poll_timeout().is_none());
    }
}

#[test]
fn a_busy_cluster_is_asked_again_with_a_doubling_jittered_back_off_and_says_why() {
    let mut lc = sent();
    let mut now = 0;
    let mut waits = Vec::new();
    for round in 1..=6u32 {
        lc.started("op", Err(err(ProviderErrorCode::OperationInProgress)), now);
        let out = drain(&mut lc);
        assert_eq!(records(&out)[0].state, OperationState::Intent);
        assert!(records(&out)[0].attempted);
        let at = lc.poll_timeout().expect("a retry");
        let wait = at - now;
        let backoff = (30 * SEC * (1 << (round - 1))).min(600 * SEC);
        assert!(
            wait <= backoff && wait >= backoff * 8 / 10,
            "round {round}: {wait} ms, back-off {backoff} ms"
        );
        waits.push(wait);
        let w = &lc.waits()["op"];
        assert_eq!(w.since_ms, 0);
        assert_eq!(w.until_ms, Some(at));
        assert!(w
            .message
            .starts_with("start-upgrade: OperationInProgress: OperationInProgress said"));
        if round > 1 {
            assert!(w.message.contains(&format!(
                "({round} refusals in a row since 1970-01-01T00:00:00Z)"
            )));
        }
        assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["start"]);
    }
    // The jitter moved at least one wait off its exact back-off.
    assert!(waits
        .iter()
        .enumerate()
        .any(|(i, w)| *w != ((30 * SEC) << i).min(600 * SEC)));
    lc.started("op", Ok(started(OperationPhase::Running)), now);
    drain(&mut lc);
    assert!(lc.waits().is_empty(), "an accepted start waits on nothing");
}

#[test]
fn the_jitter_is_the_same_for_the_same_seed_and_differs_for_another() {
    let waits = |seed: u64| {
        let mut lc = Lifecycle::new(Policy { seed, ..policy() });
        let mut out = Vec::new();
        for i in 0..8 {
            let id = format!("op{i}");
            lc.submit(tracked(&id, OperationState::Intent), 0);
            lc.started(&id, Err(err(ProviderErrorCode::Unavailable)), 0);
            out.push(lc.ops[&id].timer.unwrap().0);
        }
        out
    };
    assert_eq!(waits(1), waits(1));
    assert_ne!(waits(1), waits(2));
    let w = waits(1);
    assert!(
        w.iter().any(|a| *a != w[0]),
        "operations refused together come back apart"
    );
}

#[test]
fn retry_after_is_honoured_exactly_and_a_throttle_is_waited_out() {
    let mut lc = sent();
    let mut now = 0;
    for _ in 0..5 {
        let mut e = err(ProviderErrorCode::Throttled);
        e.retry_after_seconds = Some(7);
        lc.started("op", Err(e), now);
        drain(&mut lc);
        assert_eq!(lc.poll_timeout(), Some(now + 7 * SEC));
        assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["start"]);
    }
    lc.started("op", Ok(started(OperationPhase::Running)), now);
    assert_eq!(kinds(&drain(&mut lc)), ["record"]);
    assert_eq!(lc.poll_timeout(), Some(now + 10 * SEC));
}

#[test]
fn the_shortest_retry_is_the_policys_minimum() {
    let mut lc = Lifecycle::new(Policy {
        min_retry_ms: 45 * SEC,
        ..policy()
    });
    lc.submit(tracked("op", OperationState::Intent), 0);
    drain(&mut lc);
    let mut e = err(ProviderErrorCode::Throttled);
    e.retry_after_seconds = Some(1);
    lc.started("op", Err(e), 0);
    assert_eq!(lc.poll_timeout(), Some(45 * SEC));
}

#[test]
fn a_stale_start_describes_the_cluster_again_then_sends_once_more_then_fails() {
    let mut lc = sent();
    lc.started("op", Err(err(ProviderErrorCode::PreconditionFailed)), 0);
    let out = drain(&mut lc);
    assert_eq!(kinds(&out), ["record", "describe"]);
    assert!(lc.waits()["op"]
        .message
        .ends_with("(describing the cluster again)"));
    assert_eq!(lc.waits()["op"].until_ms, None);
    lc.described("op", Ok(described("1.33.2", "img-1")), 0);
    assert_eq!(kinds(&drain(&mut lc)), ["observe", "start"]);
    lc.started("op", Err(err(ProviderErrorCode::PreconditionFailed)), 0);
    let out = drain(&mut lc);
    assert_eq!(kinds(&out), ["failed"]);
    assert!(failed_message(&out)
        .ends_with("(again after describing the cluster anew and retrying once)"));
}

#[test]
fn a_stale_start_whose_describe_fails_is_still_sent_once_more() {
    let mut lc = sent();
    lc.started("op", Err(err(ProviderErrorCode::PreconditionFailed)), 0);
    drain(&mut lc);
    lc.described("op", Err(err(ProviderErrorCode::Unavailable)), 0);
    assert_eq!(kinds(&drain(&mut lc)), ["start"]);
}

#[test]
fn an_internal_error_is_retried_twice_then_fails() {
    let mut lc = sent();
    let mut now = 0;
    for _ in 0..2 {
        lc.started("op", Err(err(ProviderErrorCode::Internal)), now);
        drain(&mut lc);
        assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["start"]);
    }
    lc.started("op", Err(err(ProviderErrorCode::Internal)), now);
    let out = drain(&mut lc);
    assert_eq!(kinds(&out), ["failed"]);
    assert!(failed_message(&out).ends_with("(after 2 retries)"));
}

#[test]
fn refusals_in_a_row_past_the_deadline_fail_the_member() {
    let mut lc = Lifecycle::new(Policy {
        give_up_after_ms: 3_600 * SEC,
        ..policy()
    });
    lc.submit(tracked("op", OperationState::Intent), 0);
    drain(&mut lc);
    let mut now = 0;
    let mut rounds = 0;
    loop {
        lc.started("op", Err(err(ProviderErrorCode::OperationInProgress)), now);
        let out = drain(&mut lc);
        if kinds(&out).contains(&"failed") {
            let m = failed_message(&out);
            assert!(
                m.contains("refused in a row for")
                    && m.contains("longer than the 60m the daemon waits"),
                "{m}"
            );
            assert!(!m.contains("may still be running"), "never sent: {m}");
            break;
        }
        rounds += 1;
        assert!(rounds < 50, "the deadline never came");
        next_timer(&mut lc, &mut now);
    }
    assert!(now >= 3_600 * SEC);
    assert!(lc.is_empty());
}

#[test]
fn a_poll_refused_past_the_deadline_says_the_upgrade_may_still_run() {
    let mut lc = Lifecycle::new(Policy {
        give_up_after_ms: 600 * SEC,
        ..policy()
    });
    lc.resume(tracked("op", OperationState::Sent), 0);
    drain(&mut lc);
    let mut now = 0;
    loop {
        lc.polled("op", Err(err(ProviderErrorCode::Unavailable)), now);
        let out = drain(&mut lc);
        if kinds(&out).contains(&"failed") {
            let m = failed_message(&out);
            assert!(m.starts_with("get-operation failed: Unavailable"), "{m}");
            assert!(
                m.ends_with("the upgrade may still be running on the platform)"),
                "{m}"
            );
            break;
        }
        assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["poll"]);
    }
}

#[test]
fn an_uncertain_start_found_running_is_adopted_with_the_providers_id_and_followed() {
    let mut lc = sent();
    lc.started("op", Err(uncertain()), 0);
    let out = drain(&mut lc);
    assert_eq!(records(&out)[0].state, OperationState::Uncertain);
    assert!(lc.waits()["op"]
        .message
        .starts_with("start-upgrade: Unavailable"));
    let mut now = 0;
    assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["poll"]);
    lc.polled("op", Ok(report(OperationPhase::Running)), now);
    let out = drain(&mut lc);
    assert_eq!(
        records(&out),
        [OperationUpdate {
            id: "op".to_string(),
            state: OperationState::Sent,
            provider_operation_id: Some("prov-1".to_string()),
            last_error: None,
            attempted: false,
        }]
    );
    assert!(lc.waits().is_empty());
    assert_eq!(lc.poll_timeout(), Some(now + 10 * SEC));
    // Never sent again.
    next_timer(&mut lc, &mut now);
    lc.polled("op", Ok(report(OperationPhase::Succeeded)), now);
    assert_eq!(kinds(&drain(&mut lc)), ["refresh", "succeeded"]);
}

#[test]
fn an_uncertain_start_after_throttling_is_asked_about_after_the_first_back_off() {
    let mut lc = sent();
    let mut now = 0;
    for _ in 0..4 {
        let mut e = err(ProviderErrorCode::Throttled);
        e.retry_after_seconds = Some(2);
        lc.started("op", Err(e), now);
        drain(&mut lc);
        assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["start"]);
    }
    // The fifth write may have been taken: the question comes within the first back-off
    // (30 s less its jitter), not after 30 s doubled four times.
    lc.started("op", Err(uncertain()), now);
    drain(&mut lc);
    let wait = lc.poll_timeout().expect("a poll") - now;
    assert!((24 * SEC..=30 * SEC).contains(&wait), "{wait} ms");
    assert!(
        !lc.waits()["op"].message.contains("refusals in a row"),
        "{}",
        lc.waits()["op"].message
    );
    assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["poll"]);
}

#[test]
fn an_uncertain_start_not_found_with_the_cluster_at_its_target_succeeded() {
    let mut lc = sent();
    lc.started("op", Err(uncertain()), 0);
    drain(&mut lc);
    let mut now = 0;
    next_timer(&mut lc, &mut now);
    lc.polled("op", Err(err(ProviderErrorCode::NotFound)), now);
    assert_eq!(kinds(&drain(&mut lc)), ["describe"]);
    lc.described("op", Ok(described("1.34.1", "img-2")), now);
    assert_eq!(kinds(&drain(&mut lc)), ["observe", "succeeded"]);
    assert!(lc.is_empty());
}

#[test]
fn an_uncertain_start_with_no_trace_is_sent_again_under_its_key_after_the_grace_period() {
    let mut lc = sent();
    lc.started("op", Err(uncertain()), 0);
    drain(&mut lc);
    let mut now = 0;
    next_timer(&mut lc, &mut now);
    let first = now;
    let mut rounds = 0;
    loop {
        lc.polled("op", Err(err(ProviderErrorCode::NotFound)), now);
        assert_eq!(kinds(&drain(&mut lc)), ["describe"]);
        // Not at the target: the image has not moved.
        lc.described("op", Ok(described("1.34.1", "img-1")), now);
        let out = drain(&mut lc);
        if let [Action::Start { id, request, .. }] = &out[..] {
            assert_eq!(id, "op");
            assert_eq!(request.idempotency_key, "op", "the same key");
            assert!(now - first >= 60 * SEC);
            break;
        }
        assert!(out.is_empty(), "{out:?}");
        assert!(lc.waits()["op"].message.contains("no trace of a start"));
        rounds += 1;
        assert!(rounds < 10);
        assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["poll"]);
    }
}

#[test]
fn an_operation_resumed_after_a_restart_is_asked_about_before_anything_is_sent() {
    // Sent before the restart, still running: followed, never sent again.
    let mut lc = Lifecycle::new(policy());
    let mut t = tracked("op", OperationState::Sent);
    t.provider_operation_id = Some("prov-1".to_string());
    lc.resume(t, 0);
    let out = drain(&mut lc);
    assert_eq!(kinds(&out), ["poll"]);
    assert!(
        matches!(&out[0], Action::Poll { provider_operation_id: Some(p), .. } if p == "prov-1")
    );
    lc.polled("op", Ok(report(OperationPhase::Running)), 0);
    assert!(
        records(&drain(&mut lc)).is_empty(),
        "already known: nothing to record"
    );
    // An intent the provider knows (sent just before a crash): adopted.
    let mut lc = Lifecycle::new(policy());
    lc.resume(tracked("op", OperationState::Intent), 0);
    drain(&mut lc);
    lc.polled("op", Ok(report(OperationPhase::Running)), 0);
    assert_eq!(records(&drain(&mut lc))[0].state, OperationState::Sent);
    // An intent the provider has no trace of (never sent): sent now.
    let mut lc = Lifecycle::new(policy());
    lc.resume(tracked("op", OperationState::Intent), 0);
    drain(&mut lc);
    lc.polled("op", Err(err(ProviderErrorCode::NotFound)), 0);
    assert_eq!(kinds(&drain(&mut lc)), ["start"]);
}

#[test]
fn an_operation_the_provider_lost_is_sent_again_twice_then_fails() {
    let mut lc = sent();
    lc.started("op", Ok(started(OperationPhase::Running)), 0);
    drain(&mut lc);
    let mut now = 0;
    for _ in 0..2 {
        assert_eq!(kinds(&next_timer(&mut lc, &mut now)), ["poll"]);
        lc.polled("op", Err(err(ProviderErrorCode::NotFound)), now);
        assert_eq!(kinds(&drain(&mut lc)), ["start"]);
        lc.started("op", Ok(started(OperationPhase::Running)), now);
        drain(&mut lc);
    }
    next_timer(&mut lc, &mut now);
    lc.polled("op", Err(err(ProviderErrorCode::NotFound)), now);
    let out = drain(&mut lc);
    assert_eq!(kinds(&out), ["failed"]);
    assert!(failed_message(&out)
        .ends_with("(the provider lost the operation it accepted, and it was sent again 2 times)"));
}

#[test]
fn an_operation_submitted_again_is_not_sent_twice() {
    let mut lc = sent();
    lc.submit(tracked("op", OperationState::Intent), 0);
    lc.resume(tracked("op", OperationState::Intent), 0);
    assert!(drain(&mut lc).is_empty());
}

#[test]
fn answers_nobody_waits_for_are_ignored() {
    let mut lc = sent();
    // A poll answer while a start is under way, a describe nobody asked for, an unknown id.
    lc.polled("op", Ok(report(OperationPhase::Succeeded)), 0);
    lc.described("op", Ok(described("1.34.1", "img-2")), 0);
    lc.started("other", Ok(started(OperationPhase::Succeeded)), 0);
    assert!(drain(&mut lc).is_empty());
    assert!(lc.follows("op"));
    // After it ended, a late answer changes nothing.
    lc.started("op", Ok(started(OperationPhase::Succeeded)), 0);
    assert_eq!(kinds(&drain(&mut lc)), ["record", "refresh", "succeeded"]);
    lc.started("op", Err(err(ProviderErrorCode::NotAllowed)), 0);
    assert!(drain(&mut lc).is_empty());
}

#[test]
fn a_provider_wait_moves_the_waits_version_and_ends_with_the_operation() {
    let mut lc = sent();
    let v0 = lc.waits_version();
    lc.started("op", Err(err(ProviderErrorCode::Unavailable)), 0);
    assert!(lc.waits_version() > v0);
    let v1 = lc.waits_version();
    let mut now = 0;
    next_timer(&mut lc, &mut now);
    lc.started("op", Err(err(ProviderErrorCode::NotAllowed)), now);
    assert!(lc.waits().is_empty());
    assert!(lc.waits_version() > v1);
}

/// A reference model of the lifecycle's promises, checked over many seeded random walks of
/// provider answers: one call at a time per operation; an accepted operation is only sent again
/// after the provider lost it; an uncertain start is never failed for being uncertain; every
/// operation ends at most once; a timer exists for every operation with nothing under way.
#[test]
fn random_provider_answers_keep_the_lifecycles_promises() {
    use ProviderErrorCode::*;
    let codes = [
        OperationInProgress,
        Throttled,
        Unavailable,
        Internal,
        PreconditionFailed,
        NotFound,
        NotAllowed,
    ];
    for seed in 0..300u64 {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut lc = Lifecycle::new(Policy {
            seed,
            give_up_after_ms: 6 * 3_600 * SEC,
            ..Policy::default()
        });
        let ids: Vec<String> = (0..3).map(|i| format!("op{i}")).collect();
        for (i, id) in ids.iter().enumerate() {
            if i == 0 {
                lc.resume(tracked(id, OperationState::Sent), 0);
            } else {
                lc.submit(tracked(id, OperationState::Intent), 0);
            }
        }
        let mut now = 0;
        let mut in_call: BTreeMap<String, &'static str> = BTreeMap::new();
        let mut ended: BTreeSet<String> = BTreeSet::new();
        let mut accepted: BTreeSet<String> = BTreeSet::new();
        let mut lost_pending: BTreeSet<String> = BTreeSet::new();
        for _ in 0..400 {
            for a in drain(&mut lc) {
                match a {
                    Action::Start { id, .. } => {
                        assert!(
                            in_call.insert(id.clone(), "start").is_none(),
                            "two calls: {id}"
                        );
                        assert!(!ended.contains(&id));
                        assert!(
                            !accepted.contains(&id) || lost_pending.remove(&id),
                            "seed {seed}: {id} sent again while the provider had it"
                        );
                    }
                    Action::Poll { id, .. } => {
                        assert!(
                            in_call.insert(id.clone(), "poll").is_none(),
                            "two calls: {id}"
                        );
                    }
                    Action::Describe { id, .. } => {
                        assert!(in_call.insert(id.clone(), "describe").is_none());
                    }
                    Action::Succeeded { id } | Action::Failed { id, .. } => {
                        assert!(ended.insert(id.clone()), "{id} ended twice");
                        assert!(!lc.follows(&id));
                    }
                    // Accepted: the last state recorded is `Sent`.
                    Action::Record(u) => {
                        if u.state == OperationState::Sent {
                            accepted.insert(u.id.clone());
                        } else {
                            accepted.remove(&u.id);
                        }
                    }
                    Action::Refresh { .. } | Action::Observe { .. } => {}
                }
            }
            for id in &ids {
                if lc.follows(id) && !in_call.contains_key(id) {
                    assert!(lc.ops[id].timer.is_some(), "seed {seed}: {id} is stuck");
                }
            }
            // Answer one call under way, or let time pass.
            if let Some(id) = in_call.keys().nth(next(4) as usize).cloned() {
                let call = in_call.remove(&id).unwrap();
                let refuse = next(3) == 0;
                let code = codes[next(codes.len() as u64) as usize];
                let mut e = err(code);
                if next(4) == 0 {
                    e.retry_after_seconds = Some(next(120));
                }
                match call {
                    "start" if next(10) == 0 => lc.started(&id, Err(uncertain()), now),
                    "start" if refuse => lc.started(&id, Err(e), now),
                    "start" => lc.started(&id, Ok(started(OperationPhase::Running)), now),
                    "poll" if refuse => {
                        if code == NotFound && accepted.contains(&id) {
                            lost_pending.insert(id.clone());
                        }
                        lc.polled(&id, Err(e), now)
                    }
                    "poll" => {
                        let phase = [
                            OperationPhase::Running,
                            OperationPhase::Succeeded,
                            OperationPhase::Failed,
                        ][next(3) as usize];
                        lc.polled(&id, Ok(report(phase)), now)
                    }
                    _ => lc.described(&id, Ok(described("1.33.2", "img-1")), now),
                }
            } else if let Some(at) = lc.poll_timeout() {
                now = now.max(at);
                lc.handle_timeout(now);
            }
        }
    }
}
