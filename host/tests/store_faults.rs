//! The fleet engine over PostgreSQL when the database misbehaves, through the fault-injecting
//! wrapper `store_support::Faulty` (playing a fault on any step) around the real store (a
//! private server, `pg_support`): a commit that succeeds but answers a timeout (the connection
//! lost after COMMIT), a serialization failure (nothing written), and a lease lost in the
//! middle of the work (real fencing: another replica takes it). Each time nothing is applied
//! twice and nothing accepted is lost.

mod pg_support;
mod runtime_support;
mod store_support;

use pg_support::{leader, Postgres};
use runtime_support::{plugin, workspace};
use std::time::Duration;
use store_support::{Fault, Faults, Faulty};
use waverun_core::sim::Scenario;
use waverun_core::{Command, State};
use waverun_host::daemon::{DaemonError, FleetEngine};
use waverun_host::load_scenario;
use waverun_host::runtime::{InstanceConfig, ManualClock, PluginModule};
use waverun_host::store::{OperationState, PgStore, StoreError};

fn example() -> Scenario {
    load_scenario(&workspace().join("host/examples/fleet-rollout.yaml")).expect("the example")
}

/// The engine over the faulty store, the example's fleet set up but for the run's creation
/// (returned, to be sent by the test).
fn engine_but_the_run(
    plugin: &PluginModule,
    store: PgStore,
    clock: &ManualClock,
) -> (FleetEngine, Faults, Command) {
    let (faulty, faults) = Faulty::on_every_step(store);
    let (mut engine, _) = FleetEngine::start(
        plugin,
        faulty,
        clock.clone(),
        InstanceConfig::default(),
        "simulated",
    )
    .unwrap();
    let mut setup = example().setup_commands();
    let (_, last) = setup.pop().unwrap();
    for (_, cmd) in setup {
        engine.command(&cmd, None).unwrap();
    }
    (engine, faults, last)
}

/// The operations the store holds, by id: none twice.
fn operation_ids(engine: &mut FleetEngine) -> Vec<String> {
    let ops = engine
        .store()
        .operations_in(&[
            OperationState::Intent,
            OperationState::Sent,
            OperationState::Uncertain,
            OperationState::Done,
        ])
        .unwrap();
    let ids: Vec<String> = ops.iter().map(|o| o.id.clone()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        ids.len(),
        "an operation recorded twice: {ids:?}"
    );
    ids
}

#[test]
fn a_commit_that_succeeds_but_answers_a_timeout_is_found_in_the_store_and_never_applied_twice() {
    let (_rt, plugin) = plugin();
    let pg = Postgres::start();
    let url = pg.create_db("timeout");
    let s = example();
    let clock = ManualClock::at(s.start);
    let store = leader(&url, "a", Duration::from_secs(30));
    let (mut engine, faults, create) = engine_but_the_run(&plugin, store, &clock);
    let journal = engine.store().last_journal_seq().unwrap();

    faults.lock().unwrap().push_back(Fault::AckLost);
    match engine.command(&create, None) {
        Err(DaemonError::Store(e)) => assert!(e.to_string().contains("COMMIT"), "{e}"),
        other => panic!("expected the timeout, got {other:?}"),
    }
    // The step is in the store after all, and the engine, rebuilt from it, has the run.
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal + 1);
    assert_eq!(engine.recoveries(), 1);
    let runs = engine.instance().runs().unwrap();
    assert_eq!(runs.len(), 1, "the run the store holds");
    let run = runs[0].name.clone();
    assert_eq!(runs[0].state, State::NotStarted);

    // The start answers a timeout too: its upgrades were recorded with it, once.
    faults.lock().unwrap().push_back(Fault::AckLost);
    let _ = engine.command(&Command::StartRun { name: run.clone() }, None);
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal + 2);
    let runs = engine.instance().runs().unwrap();
    assert_eq!(runs[0].state, State::Running);
    let ids = operation_ids(&mut engine);
    assert!(!ids.is_empty(), "the start asked for upgrades");
    // What the worker does next: it adopts the unconfirmed step's operations (asks about
    // them) instead of starting them again — the engine hands out each once.
    let unfinished = engine.unfinished_operations().unwrap();
    let mut seen: Vec<String> = unfinished.iter().map(|o| o.id.clone()).collect();
    seen.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(seen, expected);

    // A second engine over the same database agrees with this one.
    drop(engine);
    let store = leader(&url, "a", Duration::from_secs(30));
    let (mut again, _) = FleetEngine::start(
        &plugin,
        store,
        clock.clone(),
        InstanceConfig::default(),
        "simulated",
    )
    .unwrap();
    let runs = again.instance().runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, State::Running);
    assert_eq!(operation_ids(&mut again), ids);
}

#[test]
fn a_serialization_failure_writes_nothing_and_the_same_input_is_then_applied_once() {
    let (_rt, plugin) = plugin();
    let pg = Postgres::start();
    let url = pg.create_db("serial");
    let s = example();
    let clock = ManualClock::at(s.start);
    let store = leader(&url, "a", Duration::from_secs(30));
    let (mut engine, faults, create) = engine_but_the_run(&plugin, store, &clock);
    let journal = engine.store().last_journal_seq().unwrap();
    let events = engine.store().last_event_seq().unwrap();

    faults.lock().unwrap().push_back(Fault::Failed);
    match engine.command(&create, None) {
        Err(DaemonError::Store(e)) => assert!(e.to_string().contains("40001"), "{e}"),
        other => panic!("expected the serialization failure, got {other:?}"),
    }
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal);
    assert_eq!(engine.store().last_event_seq().unwrap(), events);
    assert!(
        engine.instance().runs().unwrap().is_empty(),
        "nothing of the refused step stays in memory"
    );
    engine.command(&create, None).expect("taken again");
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal + 1);
    assert_eq!(engine.instance().runs().unwrap().len(), 1);
}

#[test]
fn a_lease_lost_in_the_middle_of_the_work_writes_nothing_and_the_next_leader_applies_the_input() {
    let (_rt, plugin) = plugin();
    let pg = Postgres::start();
    let url = pg.create_db("fenced");
    let s = example();
    let clock = ManualClock::at(s.start);
    let ttl = Duration::from_millis(400);
    let store = leader(&url, "a", ttl);
    let (mut engine, _faults, create) = engine_but_the_run(&plugin, store, &clock);
    let journal = engine.store().last_journal_seq().unwrap();

    // The lease lapses (a stalled leader) and another replica takes it: real fencing.
    std::thread::sleep(ttl + Duration::from_millis(200));
    let b = leader(&url, "b", Duration::from_secs(30));
    match engine.command(&create, None) {
        Err(DaemonError::Store(StoreError::Fenced(e))) => assert!(!e.is_empty()),
        other => panic!("expected the deposed leader to be fenced, got {other:?}"),
    }
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal);
    drop(engine);

    // The next leader replays what the first wrote and takes the input once.
    let (mut next, _) = FleetEngine::start(
        &plugin,
        b,
        clock.clone(),
        InstanceConfig::default(),
        "simulated",
    )
    .unwrap();
    assert!(next.instance().runs().unwrap().is_empty());
    next.command(&create, None)
        .expect("the new leader applies it");
    assert_eq!(next.store().last_journal_seq().unwrap(), journal + 1);
    assert_eq!(next.instance().runs().unwrap().len(), 1);
}
