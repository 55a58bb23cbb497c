//! Delivery on a virtual clock: every rule, as inputs in and actions out.

use super::*;

const SEC: i64 = 1000;
const DAY: i64 = 86_400 * SEC;

fn policy() -> Policy {
    Policy {
        seed: 7,
        read_batch: 4,
        ..Policy::default()
    }
}

fn lane(cursor: u64) -> LaneConfig {
    LaneConfig {
        cursor,
        max_age_ms: DAY,
        enabled: true,
    }
}

fn drain(d: &mut Deliveries) -> Vec<Delivery> {
    std::iter::from_fn(|| d.poll_action()).collect()
}

fn logged(seqs: &[u64], at_ms: i64) -> Vec<Logged> {
    seqs.iter().map(|&seq| Logged { seq, at_ms }).collect()
}

fn send(lane: &str, seq: u64, attempt: u32) -> Delivery {
    Delivery::Send {
        lane: lane.into(),
        seq,
        attempt,
    }
}

fn cursor(lane: &str, cursor: u64) -> Delivery {
    Delivery::Cursor {
        lane: lane.into(),
        cursor,
    }
}

fn ok() -> Outcome {
    Outcome::Delivered { status: 204 }
}

fn failed(status: u16) -> Outcome {
    Outcome::Failed {
        status: Some(status),
        error: format!("HTTP {status}"),
        retry_after_ms: None,
    }
}

/// A lane `a` at cursor 0, the log at 6, events 2, 3 and 5 matching (logged at 0).
fn three_queued() -> Deliveries {
    let mut d = Deliveries::new(policy(), 6);
    d.subscribe("a", lane(0), 0);
    assert_eq!(
        drain(&mut d),
        [Delivery::Read {
            lane: "a".into(),
            after: 0,
            limit: 4
        }]
    );
    d.read("a", &logged(&[2, 3, 5], 0), 6, 0);
    assert_eq!(drain(&mut d), [cursor("a", 1), send("a", 2, 1)]);
    d
}

#[test]
fn events_go_one_at_a_time_in_order_and_the_cursor_follows_each_delivery() {
    let mut d = three_queued();
    d.sent("a", 2, 1, ok(), 10);
    assert_eq!(drain(&mut d), [cursor("a", 2), send("a", 3, 1)]);
    d.sent("a", 3, 1, ok(), 20);
    assert_eq!(drain(&mut d), [cursor("a", 4), send("a", 5, 1)]);
    d.sent("a", 5, 1, ok(), 30);
    // Event 6 did not match: the cursor moves past it too.
    assert_eq!(drain(&mut d), [cursor("a", 6)]);
    assert_eq!(d.lag()["a"], 0);
    assert_eq!(d.poll_timeout(), None);
}

#[test]
fn the_log_growing_asks_for_one_read_at_a_time() {
    let mut d = three_queued();
    d.logged(9, 5);
    assert_eq!(
        drain(&mut d),
        [Delivery::Read {
            lane: "a".into(),
            after: 6,
            limit: 4
        }]
    );
    d.logged(12, 6);
    assert_eq!(drain(&mut d), [], "a read is under way");
    // Four queued (2 in flight, 3, 5, 7): a full batch, so no read until one is delivered.
    d.read("a", &logged(&[7], 0), 9, 7);
    assert_eq!(drain(&mut d), []);
    assert_eq!(
        d.lag()["a"],
        11,
        "behind by every event after its cursor (1)"
    );
    d.sent("a", 2, 1, ok(), 8);
    assert_eq!(
        drain(&mut d),
        [
            cursor("a", 2),
            Delivery::Read {
                lane: "a".into(),
                after: 9,
                limit: 4
            },
            send("a", 3, 1)
        ]
    );
}

#[test]
fn a_failure_is_retried_after_a_doubling_jittered_back_off() {
    let mut d = three_queued();
    let mut now = 0;
    let mut waits = Vec::new();
    for attempt in 1..=8u32 {
        d.sent("a", 2, attempt, failed(503), now);
        assert_eq!(drain(&mut d), []);
        let due = d.poll_timeout().expect("a retry");
        let wait = due - now;
        let base = (2 * SEC * (1 << (attempt - 1))).min(600 * SEC);
        assert!(
            wait <= base && wait >= base * 8 / 10,
            "attempt {attempt}: {wait} ms, back-off {base} ms"
        );
        waits.push(wait);
        now = due;
        d.handle_timeout(now);
        assert_eq!(drain(&mut d), [send("a", 2, attempt + 1)]);
    }
    assert!(waits
        .iter()
        .enumerate()
        .any(|(i, w)| *w != ((2 * SEC) << i).min(600 * SEC)));
    d.sent("a", 2, 9, ok(), now);
    assert_eq!(drain(&mut d), [cursor("a", 2), send("a", 3, 1)]);
}

#[test]
fn retry_after_is_honoured_as_given_up_to_its_limit() {
    let mut d = three_queued();
    let after = |ms| Outcome::Failed {
        status: Some(429),
        error: "HTTP 429".into(),
        retry_after_ms: Some(ms),
    };
    d.sent("a", 2, 1, after(45 * SEC), 100);
    assert_eq!(d.poll_timeout(), Some(100 + 45 * SEC));
    d.handle_timeout(100 + 45 * SEC);
    assert_eq!(drain(&mut d), [send("a", 2, 2)]);
    d.sent("a", 2, 2, after(10 * 3_600 * SEC), 50 * SEC);
    assert_eq!(d.poll_timeout(), Some(50 * SEC + 3_600 * SEC));
}

#[test]
fn an_event_is_dead_lettered_after_its_maximum_age_and_the_lane_goes_on() {
    let mut d = Deliveries::new(policy(), 0);
    d.subscribe(
        "a",
        LaneConfig {
            max_age_ms: 60 * SEC,
            ..lane(0)
        },
        0,
    );
    d.logged(2, 0);
    drain(&mut d);
    d.read("a", &logged(&[1, 2], 0), 2, 0);
    assert_eq!(drain(&mut d), [send("a", 1, 1)]);
    let mut now = 0;
    let mut attempt = 1;
    loop {
        d.sent("a", 1, attempt, failed(500), now);
        let out = drain(&mut d);
        if !out.is_empty() {
            assert_eq!(
                out,
                [
                    Delivery::DeadLetter {
                        lane: "a".into(),
                        seq: 1,
                        attempts: attempt,
                        error: "HTTP 500".into()
                    },
                    cursor("a", 1),
                    send("a", 2, 1),
                ]
            );
            break;
        }
        let due = d.poll_timeout().unwrap();
        assert!(due <= 60 * SEC, "no retry after the event is too old");
        now = due;
        d.handle_timeout(now);
        attempt += 1;
        assert_eq!(drain(&mut d), [send("a", 1, attempt)]);
    }
    assert_eq!(
        now,
        60 * SEC,
        "the last attempt is made as it becomes too old"
    );
    // Event 2 is as old: its turn came late, it is tried once, then dead-lettered.
    d.sent("a", 2, 1, failed(500), now + 5);
    assert!(matches!(
        drain(&mut d)[0],
        Delivery::DeadLetter {
            seq: 2,
            attempts: 1,
            ..
        }
    ));
}

#[test]
fn dead_letters_asked_for_go_before_the_next_event_and_are_cleared_when_delivered() {
    let mut d = three_queued();
    d.sent("a", 2, 1, ok(), 10);
    assert_eq!(drain(&mut d), [cursor("a", 2), send("a", 3, 1)]);
    // While 3 is in flight, the dead letter 1 is asked for: it goes after 3, before 5.
    d.redeliver("a", &[1], 20);
    assert_eq!(drain(&mut d), []);
    d.sent("a", 3, 1, ok(), 30);
    assert_eq!(drain(&mut d), [cursor("a", 4), send("a", 1, 1)]);
    d.sent("a", 1, 1, ok(), 40);
    assert_eq!(
        drain(&mut d),
        [
            Delivery::Redelivered {
                lane: "a".into(),
                seq: 1
            },
            send("a", 5, 1)
        ]
    );
}

#[test]
fn a_failing_receiver_holds_only_its_own_lane() {
    let mut d = Deliveries::new(policy(), 0);
    d.subscribe("down", lane(0), 0);
    d.subscribe("up", lane(0), 0);
    d.logged(2, 0);
    drain(&mut d);
    d.read("down", &logged(&[1, 2], 0), 2, 0);
    d.read("up", &logged(&[1, 2], 0), 2, 0);
    assert_eq!(drain(&mut d), [send("down", 1, 1), send("up", 1, 1)]);
    d.sent("down", 1, 1, failed(500), 1);
    d.sent("up", 1, 1, ok(), 1);
    assert_eq!(drain(&mut d), [cursor("up", 1), send("up", 2, 1)]);
    d.sent("up", 2, 1, ok(), 2);
    assert_eq!(drain(&mut d), [cursor("up", 2)]);
    assert_eq!(d.lag()["down"], 2);
    assert_eq!(d.lag()["up"], 0);
}

#[test]
fn a_disabled_subscription_sends_nothing_and_resumes_where_it_stopped() {
    let mut d = Deliveries::new(policy(), 3);
    d.subscribe(
        "a",
        LaneConfig {
            enabled: false,
            ..lane(1)
        },
        0,
    );
    assert_eq!(drain(&mut d), []);
    d.logged(5, 1);
    assert_eq!(drain(&mut d), []);
    d.subscribe("a", lane(0), 2);
    assert_eq!(
        drain(&mut d),
        [Delivery::Read {
            lane: "a".into(),
            after: 1,
            limit: 4
        }],
        "the stored cursor is kept, not the one given again"
    );
}

#[test]
fn answers_for_other_attempts_or_deleted_lanes_are_ignored() {
    let mut d = three_queued();
    d.sent("a", 2, 2, ok(), 1);
    d.sent("a", 3, 1, ok(), 1);
    d.sent("gone", 2, 1, ok(), 1);
    assert_eq!(drain(&mut d), []);
    d.unsubscribe("a");
    d.sent("a", 2, 1, ok(), 2);
    assert_eq!(drain(&mut d), []);
    assert!(d.lag().is_empty());
}

/// Which events of the random log lane `l` receives.
fn matches(l: &str, seq: u64) -> bool {
    !(seq + u64::from(l == "b")).is_multiple_of(3)
}

/// What the driver's read of the random log finds for lane `l`: its events and how far it read.
fn read_log(
    l: &str,
    after: u64,
    limit: u32,
    log_end: u64,
    at: &BTreeMap<u64, i64>,
) -> (Vec<Logged>, u64) {
    let upto = log_end.min(after + u64::from(limit));
    let found = (after + 1..=upto)
        .filter(|s| matches(l, *s))
        .map(|seq| Logged {
            seq,
            at_ms: at[&seq],
        })
        .collect();
    (found, upto)
}

/// A reference model of what a lane promises, checked against random logs, outcomes and
/// redeliveries: every matching event ends delivered or dead-lettered, once; sends of logged
/// events go in order, one at a time; the cursor never goes back and ends at the log's end.
#[test]
fn random_receivers_keep_the_lanes_promises() {
    // Across the seeds, the rare paths were taken: dead letters, and redeliveries delivered.
    let (mut dead_letters, mut redelivered) = (0, 0);
    for seed in 0..200u64 {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut d = Deliveries::new(Policy { seed, ..policy() }, 0);
        let lanes = ["a", "b"];
        for l in lanes {
            d.subscribe(
                l,
                LaneConfig {
                    max_age_ms: 30 * SEC,
                    ..lane(0)
                },
                0,
            );
        }
        let mut now = 0i64;
        let mut log_end = 0u64;
        let mut at: BTreeMap<u64, i64> = BTreeMap::new();
        let mut done: BTreeMap<(String, u64), u32> = BTreeMap::new();
        let mut dead: BTreeMap<(String, u64), u32> = BTreeMap::new();
        let mut last_sent: BTreeMap<String, u64> = BTreeMap::new();
        let mut cursors: BTreeMap<String, u64> = BTreeMap::new();
        let mut in_flight: BTreeMap<String, (u64, u32)> = BTreeMap::new();
        let mut reads: Vec<(String, u64, u32)> = Vec::new();
        let mut requested: std::collections::BTreeSet<(String, u64)> = Default::default();
        for _step in 0..400 {
            for a in std::iter::from_fn(|| d.poll_action()) {
                match a {
                    Delivery::Read { lane, after, limit } => reads.push((lane, after, limit)),
                    Delivery::Send { lane, seq, attempt } => {
                        assert!(
                            in_flight.insert(lane.clone(), (seq, attempt)).is_none(),
                            "seed {seed}: two in flight on {lane}"
                        );
                    }
                    Delivery::Cursor { lane, cursor } => {
                        let c = cursors.entry(lane.clone()).or_insert(0);
                        assert!(cursor >= *c, "seed {seed}: {lane}'s cursor went back");
                        *c = cursor;
                    }
                    Delivery::DeadLetter { lane, seq, .. } => {
                        dead_letters += 1;
                        let key = (lane, seq);
                        // Only a redelivery asked for may end in a dead letter again.
                        assert!(
                            !dead.contains_key(&key) || requested.remove(&key),
                            "seed {seed}: {key:?} dead-lettered twice"
                        );
                        *dead.entry(key).or_insert(0) += 1;
                    }
                    Delivery::Redelivered { lane, seq } => {
                        redelivered += 1;
                        let key = (lane, seq);
                        requested.remove(&key);
                        assert!(dead.remove(&key).is_some(), "seed {seed}");
                    }
                }
            }
            match next(6) {
                0 if log_end < 60 => {
                    log_end += 1 + next(3);
                    for s in at.len() as u64 + 1..=log_end {
                        at.insert(s, now);
                    }
                    d.logged(log_end, now);
                }
                1 if !reads.is_empty() => {
                    let (l, after, limit) = reads.remove(0);
                    let (found, upto) = read_log(&l, after, limit, log_end, &at);
                    d.read(&l, &found, upto, now);
                }
                2 | 3 => {
                    let l = lanes[next(2) as usize];
                    if let Some((seq, attempt)) = in_flight.remove(l) {
                        let outcome = if next(3) == 0 { ok() } else { failed(500) };
                        if outcome == ok() {
                            let key = (l.to_string(), seq);
                            if !dead.contains_key(&key) {
                                // Logged events in order (redeliveries are older).
                                let last = last_sent.entry(l.to_string()).or_insert(0);
                                assert!(seq > *last, "seed {seed}: {l} sent {seq} after {last}");
                                *last = seq;
                            }
                            *done.entry(key).or_insert(0) += 1;
                        }
                        d.sent(l, seq, attempt, outcome, now);
                    }
                }
                4 => {
                    let l = lanes[next(2) as usize];
                    let letters: Vec<u64> = dead
                        .keys()
                        .filter(|(n, _)| n == l)
                        .map(|(_, s)| *s)
                        .take(2)
                        .collect();
                    requested.extend(letters.iter().map(|s| (l.to_string(), *s)));
                    d.redeliver(l, &letters, now);
                }
                _ => {
                    now += 1 + next(4_000) as i64;
                    d.handle_timeout(now);
                }
            }
        }
        // Let every lane finish: receivers come back.
        for _ in 0..10_000 {
            let mut moved = false;
            for a in std::iter::from_fn(|| d.poll_action()) {
                moved = true;
                match a {
                    Delivery::Read { lane, after, limit } => reads.push((lane, after, limit)),
                    Delivery::Send { lane, seq, attempt } => {
                        in_flight.insert(lane, (seq, attempt));
                    }
                    Delivery::Cursor { lane, cursor } => {
                        cursors.insert(lane, cursor);
                    }
                    Delivery::DeadLetter { lane, seq, .. } => {
                        *dead.entry((lane, seq)).or_insert(0) += 1;
                    }
                    Delivery::Redelivered { lane, seq } => {
                        dead.remove(&(lane, seq));
                    }
                }
            }
            if let Some((l, after, limit)) = (!reads.is_empty()).then(|| reads.remove(0)) {
                moved = true;
                let (found, upto) = read_log(&l, after, limit, log_end, &at);
                d.read(&l, &found, upto, now);
            }
            let flying: Vec<(String, (u64, u32))> =
                std::mem::take(&mut in_flight).into_iter().collect();
            for (l, (seq, attempt)) in flying {
                moved = true;
                *done.entry((l.clone(), seq)).or_insert(0) += 1;
                d.sent(&l, seq, attempt, ok(), now);
            }
            if let Some(t) = d.poll_timeout() {
                moved = true;
                now = now.max(t);
                d.handle_timeout(now);
            }
            if !moved {
                break;
            }
        }
        for l in lanes {
            assert_eq!(
                cursors.get(l).copied().unwrap_or(0),
                log_end,
                "seed {seed}: {l}"
            );
            for s in (1..=log_end).filter(|s| matches(l, *s)) {
                let key = (l.to_string(), s);
                let delivered = done.get(&key).copied().unwrap_or(0);
                let lettered = dead.contains_key(&key);
                assert!(
                    delivered >= 1 || lettered,
                    "seed {seed}: {l} event {s} neither delivered nor dead-lettered"
                );
            }
            for s in (1..=log_end).filter(|s| !matches(l, *s)) {
                assert!(!done.contains_key(&(l.to_string(), s)), "seed {seed}");
            }
        }
    }
    assert!(
        dead_letters > 50 && redelivered > 10,
        "{dead_letters} dead letters, {redelivered} redelivered"
    );
}
