//! Who leads, as a pure state machine on the daemon's monotonic clock: when to ask the
//! store for the leader lease, when this replica becomes the leader, and when it must stop
//! acting as one (`shared/spec/store.md`: self-fencing). No thread, no store, no clock here: the
//! edge asks the store ([`crate::store::PgStore::acquire`]) when [`LeaseAction::Ask`] comes
//! out, gives back what it answered with the time it asked, and calls
//! [`Leadership::handle_timeout`] at [`Leadership::poll_timeout`].
//!
//! **The safety rule.** A lease taken or renewed by a request *sent* at `t` (this clock) lasts,
//! in the database's clock, `ttl` from a moment after `t`; another replica can take it only once
//! it has expired. So this replica may act — call providers, write — only before
//! `t + fence_after`, with `fence_after` shorter than `ttl` by a margin for clock-rate
//! differences and for stopping. Renewals go out every `renew_every` (a third of the TTL), so a
//! healthy leader renews twice before it would have to stop. A leader that has not renewed by
//! its deadline — the database unreachable, the process paused past it — steps down at once,
//! before anyone else can take over; one told another replica holds the lease steps down too.

/// The lease's timing, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a lease lasts after each renewal (the database's clock).
    pub ttl_ms: i64,
    /// How often a leader renews, and a follower asks.
    pub renew_every_ms: i64,
    /// How long after sending a successful renewal the leader may still act.
    pub fence_after_ms: i64,
    /// How soon a request that failed is tried again.
    pub retry_ms: i64,
}

impl LeaseTiming {
    /// The timing of a lease of `ttl_ms`: renewals every third of it, acting until two thirds
    /// after a renewal was sent, a failed request tried again after a tenth.
    pub fn for_ttl(ttl_ms: i64) -> LeaseTiming {
        LeaseTiming {
            ttl_ms,
            renew_every_ms: (ttl_ms / 3).max(1),
            fence_after_ms: ttl_ms * 2 / 3,
            retry_ms: (ttl_ms / 10).max(1),
        }
    }
}

/// What the store answered to a request for the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseAnswer {
    /// Ours, with this epoch.
    Held {
        /// The epoch.
        epoch: u64,
    },
    /// Another replica's, for `remaining_ms` more (the database's clock).
    Other {
        /// Who holds it.
        holder: String,
        /// Its epoch.
        epoch: u64,
        /// How long it has left.
        remaining_ms: i64,
    },
    /// The request failed (the database unreachable, a timeout): nothing is known.
    Failed,
}

/// What this replica is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not the leader; the leader as last seen, if known.
    Follower {
        /// The holder and epoch last seen.
        leader: Option<(String, u64)>,
    },
    /// The leader, with this epoch, until `act_until_ms` unless it renews first.
    Leader {
        /// The lease's epoch.
        epoch: u64,
        /// When it must stop acting without a renewal.
        act_until_ms: i64,
    },
}

/// What the edge does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseAction {
    /// Ask the store for the lease now (take or renew it); answer with [`Leadership::answered`]
    /// and the time the request was sent.
    Ask,
    /// Become the leader: start the engine (replay, then ask providers about operations in
    /// flight before anything is sent again).
    Lead {
        /// The epoch every write carries.
        epoch: u64,
    },
    /// Stop acting as the leader at once: no provider call, no write; drop the engine.
    StepDown {
        /// Why, for the log.
        why: String,
    },
}

/// The state machine.
#[derive(Clone, Debug)]
pub struct Leadership {
    timing: LeaseTiming,
    role: Role,
    /// When the next request goes out.
    next_ask_ms: i64,
    /// A request is out (sent at this time).
    asking: Option<i64>,
    actions: std::collections::VecDeque<LeaseAction>,
    /// Times it stepped down since it started.
    step_downs: u64,
}

impl Leadership {
    /// A replica that starts as a follower and asks at once.
    pub fn new(timing: LeaseTiming, now_ms: i64) -> Leadership {
        Leadership {
            timing,
            role: Role::Follower { leader: None },
            next_ask_ms: now_ms,
            asking: None,
            actions: Default::default(),
            step_downs: 0,
        }
    }

    /// What it is now.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// Times it stopped leading since it started.
    pub fn step_downs(&self) -> u64 {
        self.step_downs
    }

    /// Whether it may act as the leader at `now_ms` (call providers, write). False once its
    /// deadline passed, even before [`Leadership::handle_timeout`] ran: a process that wakes
    /// from a pause checks this before anything else.
    pub fn may_act(&self, now_ms: i64) -> bool {
        matches!(self.role, Role::Leader { act_until_ms, .. } if now_ms < act_until_ms)
    }

    /// The store answered the request sent at `asked_at_ms`; it is now `now_ms`.
    pub fn answered(&mut self, answer: LeaseAnswer, asked_at_ms: i64, now_ms: i64) {
        self.asking = None;
        match answer {
            LeaseAnswer::Held { epoch } => {
                let act_until_ms = asked_at_ms + self.timing.fence_after_ms;
                let same = matches!(self.role, Role::Leader { epoch: e, .. } if e == epoch);
                if now_ms >= act_until_ms {
                    // The answer came too late to act on: as good as a failure.
                    self.lost("the lease was renewed too late to act on", now_ms);
                    self.next_ask_ms = now_ms;
                    return;
                }
                if !same {
                    if matches!(self.role, Role::Leader { .. }) {
                        // Another epoch is another term: what was done under the old one is
                        // not carried on as if nothing happened.
                        self.lost("the lease came back with another epoch", now_ms);
                    }
                    self.actions.push_back(LeaseAction::Lead { epoch });
                }
                self.role = Role::Leader {
                    epoch,
                    act_until_ms,
                };
                self.next_ask_ms = asked_at_ms + self.timing.renew_every_ms;
            }
            LeaseAnswer::Other {
                holder,
                epoch,
                remaining_ms,
            } => {
                if matches!(self.role, Role::Leader { .. }) {
                    self.lost(&format!("{holder} holds the lease (epoch {epoch})"), now_ms);
                }
                self.role = Role::Follower {
                    leader: Some((holder, epoch)),
                };
                // Ask again when it would expire, and at least every renewal period.
                self.next_ask_ms = now_ms + remaining_ms.clamp(1, self.timing.renew_every_ms);
            }
            LeaseAnswer::Failed => {
                // Nothing known: the deadline stands; try again soon.
                self.next_ask_ms = now_ms + self.timing.retry_ms;
                self.fence_if_due(now_ms);
            }
        }
    }

    /// Time passed: a leader past its deadline steps down; a request goes out when due.
    pub fn handle_timeout(&mut self, now_ms: i64) {
        self.fence_if_due(now_ms);
        if self.asking.is_none() && now_ms >= self.next_ask_ms {
            self.asking = Some(now_ms);
            self.actions.push_back(LeaseAction::Ask);
        }
    }

    /// A request that never came back (the edge gave up on it at `now_ms`).
    pub fn abandoned(&mut self, now_ms: i64) {
        if let Some(asked) = self.asking {
            self.answered(LeaseAnswer::Failed, asked, now_ms);
        }
    }

    /// The next action for the edge.
    pub fn poll_action(&mut self) -> Option<LeaseAction> {
        self.actions.pop_front()
    }

    /// When [`Leadership::handle_timeout`] must run next.
    pub fn poll_timeout(&self) -> i64 {
        let ask = if self.asking.is_some() {
            i64::MAX
        } else {
            self.next_ask_ms
        };
        match self.role {
            Role::Leader { act_until_ms, .. } => ask.min(act_until_ms),
            Role::Follower { .. } => ask,
        }
    }

    fn fence_if_due(&mut self, now_ms: i64) {
        if let Role::Leader { act_until_ms, .. } = self.role {
            if now_ms >= act_until_ms {
                self.lost(
                    "the lease was not renewed in time (the database unreachable, or this \
                     process paused): stopping before another replica can take over",
                    now_ms,
                );
                self.role = Role::Follower { leader: None };
            }
        }
    }

    fn lost(&mut self, why: &str, _now_ms: i64) {
        if matches!(self.role, Role::Leader { .. }) {
            self.step_downs += 1;
            self.actions.push_back(LeaseAction::StepDown {
                why: why.to_string(),
            });
            self.role = Role::Follower { leader: None };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: i64 = 9_000;

    fn timing() -> LeaseTiming {
        LeaseTiming::for_ttl(TTL)
    }

    fn drain(l: &mut Leadership) -> Vec<LeaseAction> {
        std::iter::from_fn(|| l.poll_action()).collect()
    }

    #[test]
    fn a_follower_takes_a_free_lease_at_once_and_renews_every_third_of_the_ttl() {
        let mut l = Leadership::new(timing(), 0);
        l.handle_timeout(0);
        assert_eq!(drain(&mut l), [LeaseAction::Ask]);
        l.answered(LeaseAnswer::Held { epoch: 1 }, 0, 20);
        assert_eq!(drain(&mut l), [LeaseAction::Lead { epoch: 1 }]);
        assert!(l.may_act(20));
        assert_eq!(l.poll_timeout(), 3_000, "the next renewal");
        l.handle_timeout(3_000);
        assert_eq!(drain(&mut l), [LeaseAction::Ask]);
        l.answered(LeaseAnswer::Held { epoch: 1 }, 3_000, 3_010);
        assert!(drain(&mut l).is_empty(), "a renewal changes nothing");
        assert_eq!(
            l.role(),
            &Role::Leader {
                epoch: 1,
                act_until_ms: 9_000
            }
        );
    }

    #[test]
    fn a_leader_whose_renewals_fail_stops_before_its_lease_can_expire() {
        let mut l = Leadership::new(timing(), 0);
        l.handle_timeout(0);
        l.answered(LeaseAnswer::Held { epoch: 4 }, 0, 5);
        drain(&mut l);
        let mut now = 3_000;
        let mut stepped_down_at = None;
        while now < TTL {
            l.handle_timeout(now);
            for a in drain(&mut l) {
                match a {
                    LeaseAction::Ask => l.answered(LeaseAnswer::Failed, now, now + 1),
                    LeaseAction::StepDown { .. } => stepped_down_at = stepped_down_at.or(Some(now)),
                    LeaseAction::Lead { .. } => panic!("led again on failures"),
                }
            }
            now += 100;
        }
        // At two thirds of the TTL after its last successful request (sent at 0): a third of
        // the TTL before anyone else could take over.
        assert_eq!(stepped_down_at, Some(6_000));
        assert!(!l.may_act(6_000));
        assert_eq!(l.step_downs(), 1);
    }

    #[test]
    fn a_process_paused_past_its_deadline_may_not_act_before_anything_else_runs() {
        let mut l = Leadership::new(timing(), 0);
        l.handle_timeout(0);
        l.answered(LeaseAnswer::Held { epoch: 2 }, 0, 1);
        drain(&mut l);
        // SIGSTOP for a minute, then SIGCONT: the first question is whether it may act.
        assert!(!l.may_act(60_000));
        l.handle_timeout(60_000);
        let acts = drain(&mut l);
        assert!(
            matches!(&acts[0], LeaseAction::StepDown { why } if why.contains("not renewed in time")),
            "{acts:?}"
        );
        assert_eq!(acts[1], LeaseAction::Ask, "then it asks as a follower");
        // Another replica took over meanwhile.
        l.answered(
            LeaseAnswer::Other {
                holder: "b".into(),
                epoch: 3,
                remaining_ms: 8_000,
            },
            60_000,
            60_002,
        );
        assert_eq!(
            l.role(),
            &Role::Follower {
                leader: Some(("b".into(), 3))
            }
        );
        assert!(drain(&mut l).is_empty(), "it stepped down once");
    }

    #[test]
    fn a_leader_told_another_holds_the_lease_steps_down_at_once() {
        let mut l = Leadership::new(timing(), 0);
        l.handle_timeout(0);
        l.answered(LeaseAnswer::Held { epoch: 1 }, 0, 1);
        drain(&mut l);
        l.handle_timeout(3_000);
        drain(&mut l);
        l.answered(
            LeaseAnswer::Other {
                holder: "b".into(),
                epoch: 2,
                remaining_ms: 9_000,
            },
            3_000,
            3_001,
        );
        let acts = drain(&mut l);
        assert!(matches!(&acts[..], [LeaseAction::StepDown { why }] if why.contains("b holds")));
        assert!(!l.may_act(3_001));
    }

    #[test]
    fn a_follower_asks_again_when_the_other_lease_would_expire() {
        let mut l = Leadership::new(timing(), 0);
        l.handle_timeout(0);
        drain(&mut l);
        l.answered(
            LeaseAnswer::Other {
                holder: "a".into(),
                epoch: 1,
                remaining_ms: 1_200,
            },
            0,
            10,
        );
        assert_eq!(l.poll_timeout(), 1_210);
        l.handle_timeout(1_210);
        assert_eq!(drain(&mut l), [LeaseAction::Ask]);
        l.answered(LeaseAnswer::Held { epoch: 2 }, 1_210, 1_220);
        assert_eq!(drain(&mut l), [LeaseAction::Lead { epoch: 2 }]);
    }

    #[test]
    fn an_answer_that_comes_back_after_the_deadline_is_not_acted_on() {
        let mut l = Leadership::new(timing(), 0);
        l.handle_timeout(0);
        drain(&mut l);
        // The request took longer than the fence allows (a pause mid-request).
        l.answered(LeaseAnswer::Held { epoch: 1 }, 0, 7_000);
        assert!(!l.may_act(7_000));
        assert!(drain(&mut l).is_empty(), "never led");
    }

    /// The safety rule over random lives: whenever it may act, a request that took or renewed
    /// the lease was sent less than `fence_after` before — so the lease it holds cannot have
    /// expired (the database's clock is at or after the sending) — and every Lead is followed
    /// by a StepDown before the next Lead.
    #[test]
    fn it_never_acts_on_a_lease_that_may_have_expired_over_random_lives() {
        let t = timing();
        let mut seed: u64 = 0x1ead_e25b_1b0c_0001;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let mut l = Leadership::new(t, 0);
            let mut now = 0i64;
            let mut last_held_ask: Option<i64> = None;
            let mut leading = false;
            for _ in 0..200 {
                now += next(4_000) as i64;
                if next(10) == 0 {
                    now += next(30_000) as i64; // a pause
                }
                if l.may_act(now) {
                    let asked = last_held_ask.expect("it acts only after a Held answer");
                    assert!(
                        now < asked + t.ttl_ms,
                        "acting at {now} on a lease asked at {asked}"
                    );
                }
                l.handle_timeout(now);
                while let Some(a) = l.poll_action() {
                    match a {
                        LeaseAction::Ask => {
                            let latency = next(2_000) as i64;
                            let answer = match next(4) {
                                0 => LeaseAnswer::Failed,
                                1 => LeaseAnswer::Other {
                                    holder: "b".into(),
                                    epoch: next(5) + 1,
                                    remaining_ms: next(9_000) as i64,
                                },
                                _ => LeaseAnswer::Held { epoch: next(2) + 1 },
                            };
                            if matches!(answer, LeaseAnswer::Held { .. }) {
                                last_held_ask = Some(now);
                            }
                            l.answered(answer, now, now + latency);
                            now += latency;
                        }
                        LeaseAction::Lead { .. } => {
                            assert!(!leading, "Lead twice without a StepDown");
                            leading = true;
                        }
                        LeaseAction::StepDown { .. } => {
                            assert!(leading, "StepDown without a Lead");
                            leading = false;
                        }
                    }
                }
                assert_eq!(leading, matches!(l.role(), Role::Leader { .. }));
            }
        }
    }
}
