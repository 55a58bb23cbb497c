//! # waverun-core: the update-run engine
//!
//! waverun upgrades Kubernetes (control plane and node images) across a fleet of clusters
//! through *update runs*: an upgrade applied through a *strategy* of ordered stages, each with
//! up to 50 parallel groups of members, honouring concurrency and failure limits, approval and
//! scheduled-start gates, after-stage waits, maintenance windows, fleet freezes and
//! region-by-region release availability. This crate is the whole of that logic and nothing
//! else: a deterministic state machine with **no I/O**. It reads no clock, spawns no thread,
//! draws no random number, touches no file or network, and iterates no hash map (see
//! `core/clippy.toml`). It compiles to `wasm32-unknown-unknown` with no imports, so the browser
//! portal, plugin hosts and the native daemon all run the same decisions.
//!
//! ## The run loop
//! One [`Engine`] value owns the fleet: members, stored strategies, runs (with their gates),
//! the release catalog and the freeze calendar. A host drives it like this:
//!
//! 1. Feed one input with [`Engine::handle_input`]`(now, input)`: an operator [`Command`]
//!    (create a run, start, stop, skip, approve a gate, ...), an [`Observation`] from the world
//!    (an upgrade operation succeeded or failed, a member's observed versions, a release became
//!    available), or [`Input::Timeout`] because a wakeup is due.
//! 2. Drain [`Engine::poll_output`] until it returns `None`. Each [`Output`] is either an
//!    [`Event`] (a state change, in the vocabulary of the scenario format) or a
//!    [`HostCommand`] (a cluster call to make, e.g. start this member upgrade).
//! 3. Ask [`Engine::poll_timeout`] for the next [`Wakeup`] (when, and why) and sleep until then
//!    or until the next input, whichever comes first. Then go to 1.
//!
//! A refused command returns an [`Error`] (stable [`ErrorCode`], message naming the field or
//! the state that forbids it) and changes nothing. [`drive`] is this loop written once (deliver,
//! hand every output to the host's surroundings, deliver what they answer at once); the
//! simulator, the plugin and the tests use it. The simulator's clock steps the engine and its
//! [`sim::Fleet`] together; an engine behind a host ABI submits its upgrades to that same fleet
//! through its cluster provider ([`sim::SharedFleet`]), so no upgrade turns back into an output.
//!
//! The run tree keeps what a stage and a group share — status, phase, gates, concurrency cap
//! and failure budget — once, in one `Tier` (`engine/tree.rs`).
//!
//! ## Inside: handlers change state, one `settle` drives progress
//! Inside `handle_input`, every due timer fires first, then the input is applied. A timer, a
//! command or an observation only *changes state*: it validates, updates the run tree (a member
//! finished, a gate completed, a skip applied, a member back in its queue), emits the events
//! of what it changed, and touches the runs it changed. After each of them, one function —
//! `settle` (`engine/progress.rs`) — drives every touched run, in the order touched, as far as
//! it can go at `now`. It is the only code that moves a run on, always in this phase order:
//!
//! 1. **Drain.** A run that is stopping (a user's stop, or a failure threshold exceeded)
//!    starts nothing new; groups of its current stage whose members all finished (and that need
//!    no new gate) complete; when nothing is in flight it is `Stopped` or `Failed`.
//! 2. **Stage, before.** The current stage starts (`StageStarted`) and creates its before gates
//!    (a scheduled gate whose time has come opens at once); it waits while one is Pending.
//! 3. **Stage, body.** Every group, in strategy order, moves through its own phases: entered
//!    (`GroupStarted`, its before gates), then its members begin (members with nothing to do
//!    are settled, the rest queued in priority order; those that cannot start now are Pending
//!    on their reason), then its after gates, then `Completed` (or `Skipped`). Then members
//!    start, one slot at a time, up to the stage's and groups' limits: the group with the
//!    fewest in flight first; for each candidate the one scheduling decision,
//!    [`decision::may_start`], says whether it may start now or why and until when it waits
//!    (freeze, another run's lease, release not in its region, closed window).
//! 4. **Stage, after.** Once every group is done: the after-stage wait, then the after gates;
//!    then `StageCompleted` (or `StageSkipped` when all its groups were skipped, or `Failed`
//!    when a threshold was exceeded) — and the next stage, from 2.
//! 5. **Run.** After the last stage the run is `Completed` (`Skipped` if every stage was).
//!
//! A run waits when a phase cannot complete: a Pending gate, a running wait, members in flight
//! or waiting. Whatever can end the wait — a timer, an upgrade result, an approval, a release,
//! a lease freed — is an input that touches the run again.
//!
//! ## Auto-upgrade profiles
//! A profile ([`AutoUpgradeProfile`]) follows a channel: `Rapid`, `Stable`,
//! `TargetKubernetesVersion` (with or without long-term support), `NodeImage` or
//! `SecurityPatch`. What a channel targets is a pure answer over the release catalog
//! ([`profile::resolve`]: GA versions only, each minor's support state, security-patch images);
//! *when* a profile acts is decided in one place, `reconcile_profiles` (`engine/profiles.rs`),
//! which runs after the runs settle whenever something a profile follows changed (a release
//! reached the catalog — the engine asks to be woken at each known release time —, a member
//! joined, a generated run ended, a profile changed), and settles the runs it touched again. A
//! profile remembers the target it last acted on: a new target generates a run named after the
//! profile and the target ([`profile::generated_run_name`], so generating twice finds the same
//! run) and starts it; a generated run still running makes the new target wait; a generated
//! run never started is superseded. Members behind the target that missed a run are caught up
//! by the next one; a member joining behind the target triggers one at once.
//!
//! ## Health checks
//! A strategy may name checks (`healthChecks`: a Prometheus query with conditions, an HTTP
//! endpoint, a command, or the provider's own view; [`health`]) and use them in three places:
//! a **HealthCheck gate** before or after a stage or group, **`afterMemberChecks`** (a soak,
//! then measurements, after each member's upgrade) and a member's **pre-flight**
//! (`preflight` checks beside the provider's own, under `onPreflightFailure: Fail | Skip |
//! Wait`). The engine asks for each measurement ([`HostCommand::MeasureCheck`], a deterministic
//! `measurementId`) and takes what the host measured as an observation
//! ([`Observation::CheckMeasured`]): samples of a query, or a verdict. What a measurement means
//! (the conditions), when the next is due (a timer), and when a check is over (`count`,
//! `failureLimit`, `inconclusiveLimit`, `consecutiveErrorLimit`) is decided here
//! (`engine/checks.rs` over [`health::Analysis`]), so a replay of the journal decides the same
//! without measuring again and the simulator decides from scripted results (`health:` in a
//! scenario; a measurement nothing scripts passes), which is how `simulate` and the forecast
//! show check points, soaks and their cost in time.
//!
//! - A HealthCheck gate is `Running` while it measures (nobody can approve it then), completes
//!   `by: healthCheck` when its check passes, and fails when it fails: `GateFailed`, its group
//!   or stage `Failed` with `HealthCheckFailed`, and the run stops as for a failure threshold.
//!   An **inconclusive** check leaves the gate `Pending` for a person: `completeGate` goes on,
//!   `failGate` fails it as above. Resuming the run measures a failed gate anew (a refused
//!   approval waits for a person again).
//! - After a member's upgrade succeeds, its checks start (`CheckStarted`, measured from the end
//!   of `soakSeconds`); the member keeps its concurrency slot and its lease until they end
//!   (so `maxConcurrency` bounds how many unverified clusters exist at once). All pass: the
//!   member is `Completed`. One fails or is inconclusive: the member is `Failed` with
//!   `HealthCheckFailed` (its new versions are recorded: the upgrade happened) and counts
//!   toward `maxAllowedFailures`; the others are abandoned. A member is counted as succeeded
//!   only when proven healthy, so an inconclusive member check fails it (a person decides at
//!   gates, not per member).
//! - Pre-flight is on for a stage or group that sets `onPreflightFailure` or `preflight`
//!   (without them nothing changes: the upgrade itself fails as Azure's does). The member takes
//!   its slot and lease, each pre-flight check is measured once (`count` 1), and when all pass
//!   its upgrade starts (decided again: the catalog may have moved); if the run began stopping
//!   meanwhile the member goes back to its queue. On a failure: `Fail` fails the member
//!   (`PreflightFailed`, no upgrade), `Skip` skips it (reason `PreflightFailed`), `Wait` frees
//!   the slot and makes it `Pending` (reason `Preflight`) until `retryIntervalSeconds` (default
//!   300), then tries again, up to `maxWaitSeconds` (default one day) after its first failure,
//!   then fails it. A group's settings win over its stage's.
//! - Errors (timeouts, 5xx, refused queries) are never passes: the measurement is taken again
//!   at the next interval and does not count toward `count`; more than `consecutiveErrorLimit`
//!   (default 4) in a row fail the check. The verdict rules for a query's samples and for empty
//!   results are in [`health`].
//!
//! ## Time
//! Time is a value: every input carries `now` (a UTC [`Timestamp`]). Before handling an input
//! the engine fires every timer due at `now`, so an input always meets an up-to-date engine;
//! each fires at its own instant, in time order (a host that wakes a little late — a daemon
//! whose clock runs thousands of times real time — still decides, and stamps its events, as of
//! the instant the engine asked for).
//! Time never goes backwards: an older `now` counts as the engine's current time. Timers are a
//! small ordered table (member unblocks at a window opening or a release date, scheduled gates,
//! after-stage waits, freeze ends); waking early or twice is harmless because every timer
//! re-checks the state it guards. Decisions are immediate: a member whose window opens at T is
//! started at T, because the engine asks to be woken at exactly T.
//!
//! ## Commands and idempotency
//! A member upgrade leaves the engine as [`HostCommand::StartUpgrade`] with a deterministic
//! operation id, `{run}/{member}`: a member is upgraded at most once per run, so the id names
//! the operation uniquely, and a host that re-sends a command after a crash sends the same id
//! (providers must treat a repeated id as the same operation). Results come back as
//! [`Observation::UpgradeSucceeded`] / [`Observation::UpgradeFailed`] with that id; a result
//! for an unknown or already-finished operation is ignored, so at-least-once delivery is safe.
//! Started cluster operations are never cancelled: stopping a run or exceeding a failure
//! threshold only stops *new* work, and the run drains (`Stopping`) before it is `Stopped` or
//! `Failed`.
//!
//! ## Persistence and replay
//! [`Engine::snapshot`] serialises the whole state (JSON, versioned: [`snapshot`]) and
//! [`Engine::restore`] gives it back (refusing a format version it does not read). Because the engine is deterministic, `restore(snapshot)` followed by the same inputs
//! yields byte-identical outputs; a host therefore persists a snapshot plus a journal of the
//! inputs (with their `now`) after it, and after a crash restores the snapshot and replays the
//! journal. Outputs regenerated by the replay that were already acted on are recognisable by
//! their operation ids.
//!
//! ## Documents
//! Strategies, runs, scenarios and API bodies are read by [`document`] under the rules of spec
//! section 10: closed schemas (every model struct refuses unknown fields; errors suggest the
//! closest field), a mapping wherever the model has an object, YAML scalars typed by their
//! field (never YAML 1.1's `yes`/`no`/`1.30`-as-a-number), a key given once, and strict RFC
//! 3339 timestamps ([`time`]: years 1970–9999, offsets within ±14:00, no leap second). Paths
//! in errors are the file's own (`members[3].nodePools[0].imageVersion`). What is accepted but
//! has no effect is a warning, never a silent drop: [`validate::run_spec_warnings`] (a
//! `ControlPlaneOnly` run's node-image selection counts as `Latest`, see [`plan::RunTarget`]).
//!
//! ## Decisions where the spec is silent
//! - Weekly / daily / monthly window intervals count from `startDate` (or from 1970-01-01
//!   without one); weeks start on Monday; `dayOfMonth` beyond a month's end means its last day.
//! - Within a group, members are ordered once, when the run starts, by maintenance priority
//!   then name. When a slot frees, a member whose window is open now is preferred over a member
//!   without a window; blocked members are Pending, hold no slot, and return to the queue when
//!   their blocker lifts (a timer, a lease release or a catalog change).
//! - When the stage ceiling binds, a freed slot goes to the group with the fewest members in
//!   flight (ties: strategy order): groups of one stage progress fairly.
//! - A group's resolved `maxConcurrency` is shown clamped to the stage's resolved value.
//! - A stage without groups forms one implicit group named after the stage that runs at the
//!   stage's concurrency; the name must not collide with a group name.
//! - "Nothing to do" and `MinorVersionSkip` are settled when a group's members begin (after its
//!   before-gates), without a slot; `Latest` images are re-evaluated when a member starts.
//! - A group whose every member is Skipped (including an empty group) is Skipped and its
//!   after-gates are skipped; a stage whose groups are all Skipped is Skipped likewise.
//! - The moment any failure threshold is exceeded, a group's or the stage's, that group (or
//!   stage) is `Failed` and nothing new starts anywhere in the run until a resume: no member
//!   upgrade in any group (members whose window opens, release arrives, lease frees or freeze
//!   ends meanwhile stay queued, waiting on the stop), no group entered, no gate created, no
//!   after-stage wait. A Pending gate can still be approved (or open on schedule) but lets
//!   nothing start. Upgrades in flight in every group finish while the run is `Stopping`, and
//!   their failures count: a sibling group or the stage may still fail by its own threshold
//!   meanwhile. When the drain is over the stage is `Failed` (with its own threshold's error if
//!   that was exceeded, else naming the group that failed), then the run, both with
//!   `FailureThresholdExceeded`. A threshold exceeded while a stopped run drains makes it
//!   `Failed`, not `Stopped`.
//! - While the run drains, sibling groups keep their state (`Running` with upgrades in flight).
//!   At the end, one whose members all finished and that has no after-gates is `Completed`;
//!   one with members left, a before-gate not passed or after-gates (created on resume) is
//!   `Stopped`; one never entered stays `NotStarted`.
//! - Resuming a `Failed` run accepts the failures so far: thresholds count failures after the
//!   resume; `failureCount` keeps the total.
//! - A stopped run's active stage and unfinished groups show `Stopped` (a failed run's stage
//!   shows `Failed`); they return to Running on resume.
//! - Skipping a group or stage with members in flight is allowed: the others are skipped and the
//!   in-flight ones finish (the stage does not move on before they do). Skipping a member in
//!   flight is refused. Skips sent before a run starts are applied when it starts.
//! - A member that is part of a started, unfinished run cannot be deleted.
//! - Resuming after a freeze: a member due during a freeze is Pending with reason `Freeze`
//!   until its end. The lease of a member is held by the run whose upgrade is in flight; another
//!   run reaching it waits with reason `Lease`.
//! - A retry run copies the finished run's strategy, upgrade and resolved images (Consistent
//!   or Custom) and includes only the members that did not complete.
//! - After-stage waits are at most 7 days; gates' display names at most 100 characters.
//! - Profiles: creating one, or changing its channel, `targetKubernetesVersion` or
//!   `longTermSupport`, sets its baseline at the current target and starts nothing (the next
//!   release that moves the target does; `generateUpdateRun` acts now). Re-enabling one catches
//!   up on releases it missed while disabled, and on members that joined behind its target
//!   meanwhile. `generateUpdateRun` on a disabled profile is refused (`InvalidState`); it
//!   returns the run that exists for the current target and has not ended for good (not
//!   started, running, or Stopped / Failed: resume it) as it is, and supersedes the profile's
//!   older runs never started. A run it creates for a target that waits for the profile's
//!   running run is started when that run ends, as the release would have.
//! - A generated run is one per profile at a time while it is Running or Stopping: Stopped,
//!   Failed, Completed and Skipped runs have ended, and the newest waiting target then runs. A
//!   user cannot start (or resume) a generated run while another of the same profile runs.
//! - A generated run's name is Azure's `auto-{profile}-{channel}-{key}`, the channel in lower
//!   case, the key `x-y-z` for a Kubernetes target and 8 hex digits (a hash of the images) for
//!   node images; catch-up runs of the same target add `-2`, `-3`, ...; a name over 50
//!   characters keeps its head and hashes the rest. A run never started that a newer target supersedes is deleted
//!   (`RunDeleted`, and the new run's `RunGenerated` says which it supersedes).
//! - Catch-up triggers are a member joining behind the target and re-enabling: a run that ends
//!   with members behind does not generate another run for the same target (a member that
//!   always fails would otherwise generate runs forever); the next release includes them.
//! - In a generated run a member more than one minor behind is `Skipped` with
//!   `MinorVersionSkip` (a manual run must bring it closer); in a manual run it fails as before.
//!   A member is "behind" (and can trigger a run) only if the target would move it.
//! - A run whose target minor is `LTSOnly` fails each member without long-term support with
//!   `LongTermSupportRequired`, whoever created the run, and that fails the run whatever its
//!   thresholds (spec section 8: such a member "fails the run"; when a threshold was exceeded
//!   first, the run's error says so). Rapid and Stable follow minors in community support only;
//!   `TargetKubernetesVersion` targets an `LTSOnly` minor only with `longTermSupport`, and
//!   never an `EndOfSupport` minor.
//! - Kubernetes channels generate `Full` runs with the profile's node image selection. The
//!   `NodeImage` and `SecurityPatch` channels generate `NodeImageOnly` runs pinned to exactly
//!   the channel's images (the newest of each family; the newest security patch of each Linux
//!   family), so a member whose region has not got its image yet waits for it
//!   (`VersionNotInRegion`) instead of being settled with what its region has; they take no
//!   `nodeImageSelection` (refused, as Azure's CLI refuses it for NodeImage). Pools made from
//!   snapshots move; under SecurityPatch, Windows pools are left alone and the member's message
//!   says why.
//! - A closed maintenance window never ends a run by itself: the member waits, Pending, saying
//!   when it opens. A member outside its windows for a whole run is one the operator finished
//!   the run without (skipped, or the run stopped): the profile's next run includes it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod catalog;
pub mod decision;
pub mod document;
pub mod drive;
pub mod engine;
pub mod error;
pub mod event;
pub mod forecast;
pub mod health;
pub mod labels;
pub mod limits;
pub mod model;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod plan;
pub mod plan_text;
pub mod profile;
pub mod selector;
pub mod sim;
pub mod snapshot;
pub mod state;
pub mod time;
pub mod validate;
pub mod version;
pub mod window;

pub use engine::{Command, Engine, GateSelector, Input, Observation};
pub use error::{Error, ErrorCode, FieldError};
pub use event::{
    CheckPurpose, CheckRequest, CheckTarget, Event, EventKind, Fact, HostCommand, Output,
    UpgradeOperation, WakeReason, Wakeup,
};
pub use model::*;
pub use state::{LevelTally, NodeTally, Reason, RunStatus, State};
pub use time::fmt_time;
