//! The daemon (`waverun serve`): one engine per fleet, run as the plugin in wasmtime, durable on
//! the store, driving clusters through providers. This room owns the engine side of it:
//!
//! - [`FleetEngine`]: the plugin instance and the store writer together. Every input is one
//!   *step*: the guest journals it and applies it, asking for cluster operations as it goes;
//!   the step's journal records, snapshot, events, operation intents and audit rows are then
//!   committed to the store in one transaction, and only then do its operations go out
//!   ([`Applied::operations`]). A commit that fails leaves nothing behind: the instance is
//!   rebuilt from the store, so memory never runs ahead of the disk.
//! - [`StepJournal`] and [`Outbox`]: the plugin host's persistence and cluster provider in the
//!   daemon. They do not write or call anything themselves: they collect the step.
//! - [`Daemon`]: the engine thread ([`Worker`]) that runs the fleet in real (or scaled,
//!   [`FleetClock`]) time: the mailbox of API jobs and provider answers, the engine's steps,
//!   and its timers.
//! - [`Lifecycle`]: what happens to each operation the engine asked for — sent, polled, retried,
//!   adopted after a restart, ended — as a pure state machine on fleet time; the worker carries
//!   out its actions through the [`crate::providers`].
//! - [`MemberBinding`]: a member as config or the API binds it to a cluster, joined with what
//!   its provider describes; [`observe_members`] describes them again so versions stay true.
//! - [`Leadership`]: which of several replicas leads (PostgreSQL's leader lease) and when a
//!   leader must stop acting, as a pure state machine on the monotonic clock.
//!
//! Imports point one way: `daemon` → `runtime`, `store` and `providers`; none imports `daemon`.

mod clock;
mod fleet_engine;
mod leadership;
mod members;
mod metrics;
mod operations;
mod replica;
mod step;
mod worker;

pub use clock::FleetClock;
pub use fleet_engine::{Applied, CommittedEvent, DaemonError, FleetEngine, StepWrites};
pub use leadership::{Leadership, LeaseAction, LeaseAnswer, LeaseTiming, Role};
pub use members::{
    describe_all, member_resource, observe_members, observe_releases, MemberBinding, MEMBERS,
};
pub use metrics::Metrics;
pub(crate) use operations::jitter;
pub use operations::{Action, CallTo, Lifecycle, Policy, ProviderWait, Tracked};
pub use replica::{
    BuildEngine, LeaseKeeper, OnLead, Replica, ReplicaStatus, Transition, FOLLOW_EVERY, LEADER_URL,
};
pub use step::{Outbox, StepJournal};
pub use worker::{Daemon, Gone, Measurements, Providers, Worker, DELETE_REQUESTED};
