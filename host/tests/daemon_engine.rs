//! The fleet engine: the real plugin in wasmtime over a real SQLite file. Each input is one
//! committed step; operations go out only once recorded; a restart (the process gone without
//! closing) continues from the file and sends nothing twice; a failed commit or a trap loses
//! nothing accepted and keeps nothing refused.

mod runtime_support;

use runtime_support::{plugin, workspace};
use std::time::Duration;
use waverun_core::sim::Scenario;
use waverun_core::{Command, Observation, State};
use waverun_host::daemon::{Applied, DaemonError, FleetEngine};
use waverun_host::load_scenario;
use waverun_host::runtime::{InstanceConfig, ManualClock, PluginModule};
use waverun_host::store::{NewAudit, OperationState, OperationUpdate, SqliteStore};

fn example() -> Scenario {
    load_scenario(&workspace().join("host/examples/fleet-rollout.yaml")).expect("the example")
}

fn start(
    plugin: &PluginModule,
    db: &std::path::Path,
    clock: &ManualClock,
) -> (FleetEngine, Applied) {
    let store = SqliteStore::open(db).expect("open the store");
    FleetEngine::start(
        plugin,
        store,
        clock.clone(),
        InstanceConfig::default(),
        "simulated",
    )
    .expect("start the fleet engine")
}

fn audit(action: &str) -> NewAudit {
    NewAudit {
        at: "2026-12-01T00:00:00Z".to_string(),
        who: "ops".to_string(),
        action: action.to_string(),
        target: "/fleets/default/updateRuns/r".to_string(),
        request_id: "req".to_string(),
        key: "key".to_string(),
        outcome: "ok".to_string(),
        detail: None,
    }
}

/// Creates the example's fleet and run, and starts it; returns the operations to send.
fn set_up_and_start(engine: &mut FleetEngine, s: &Scenario) -> Vec<String> {
    for (path, cmd) in s.setup_commands() {
        let applied = engine
            .command(&cmd, None)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(applied.operations.is_empty(), "{path} sends nothing");
    }
    let start = Command::StartRun {
        name: s.run_name().unwrap().to_string(),
    };
    let applied = engine
        .command(&start, Some(audit("updateRuns.start")))
        .unwrap();
    assert!(
        applied
            .events
            .iter()
            .any(|e| e.event.kind().eq(&waverun_core::EventKind::RunStarted)),
        "RunStarted among {:?}",
        applied.events
    );
    applied.operations.iter().map(|o| o.id.clone()).collect()
}

#[test]
fn operations_are_recorded_before_they_go_out_and_a_restart_sends_none_twice() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("waverun.db");
    let s = example();
    let clock = ManualClock::at(s.start);
    let (mut engine, _) = start(&plugin, &db, &clock);
    let sent = set_up_and_start(&mut engine, &s);
    assert!(!sent.is_empty(), "the run starts members");
    for id in &sent {
        let op = engine.store().operation(id).unwrap().expect("recorded");
        assert_eq!(op.state, OperationState::Intent);
        assert!(op.request.contains(id.as_str()), "{}", op.request);
    }
    // The first is sent; the process dies before the others are.
    engine
        .record_sent(&[OperationUpdate {
            id: sent[0].clone(),
            state: OperationState::Sent,
            provider_operation_id: Some("sim-1".to_string()),
            last_error: None,
            attempted: true,
        }])
        .unwrap();
    let before = serde_json::to_value(engine.status(s.run_name().unwrap()).unwrap()).unwrap();
    let events_before = engine.store().last_event_seq().unwrap();
    drop(engine); // no shutdown: as after kill -9

    let (mut engine, restarted) = start(&plugin, &db, &clock);
    assert!(
        restarted.operations.is_empty(),
        "the guest asked about every operation in flight and the store knew each: {:?}",
        restarted.operations
    );
    let unfinished: Vec<String> = engine
        .unfinished_operations()
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect();
    let mut expected = sent.clone();
    expected.sort();
    assert_eq!(
        unfinished, expected,
        "every operation is still to be resolved"
    );
    let after = serde_json::to_value(engine.status(s.run_name().unwrap()).unwrap()).unwrap();
    assert_eq!(before, after, "the same run tree after the restart");
    assert_eq!(engine.store().last_event_seq().unwrap(), events_before);

    // A result: its operation is done in the same step, and the next member is recorded.
    let first = sent[0].clone();
    let applied = engine
        .deliver(&Observation::UpgradeSucceeded {
            operation_id: first.clone(),
        })
        .unwrap();
    assert_eq!(
        engine.store().operation(&first).unwrap().unwrap().state,
        OperationState::Done
    );
    assert!(applied.events.iter().all(|e| e.seq > events_before));
    let seqs: Vec<u64> = applied.events.iter().map(|e| e.seq).collect();
    let stored: Vec<u64> = engine
        .store()
        .events_after(events_before, None, 1000)
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(seqs, stored, "the step's events are the log's next entries");
    engine.shutdown().unwrap();
    assert!(!SqliteStore::open(&db)
        .unwrap()
        .recovered_from_unclean_shutdown());
}

#[test]
fn a_refused_command_is_audited_with_its_code_and_changes_no_run() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("waverun.db");
    let s = example();
    let clock = ManualClock::at(s.start);
    let (mut engine, _) = start(&plugin, &db, &clock);
    let e = engine
        .command(
            &Command::StartRun {
                name: "no-such-run".to_string(),
            },
            Some(audit("updateRuns.start")),
        )
        .unwrap_err();
    match &e {
        DaemonError::Refused(p) => assert_eq!(p.guest().unwrap().code, "NotFound", "{e}"),
        other => panic!("expected a refusal, got {other}"),
    }
    let rows = engine.store().audit_after(0, 10).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].entry.outcome, "NotFound");
    assert!(engine.store().events_after(0, None, 10).unwrap().is_empty());
    assert!(engine.instance().runs().unwrap().is_empty());
}

/// An engine on a new store in `dir`, given the example's setup but its last command (the one
/// that creates the run), which it returns.
fn all_but_the_run(plugin: &PluginModule, dir: &tempfile::TempDir) -> (FleetEngine, Command) {
    let s = example();
    let clock = ManualClock::at(s.start);
    let (mut engine, _) = start(plugin, &dir.path().join("waverun.db"), &clock);
    let mut setup = s.setup_commands();
    let (_, last) = setup.pop().unwrap();
    for (_, cmd) in setup {
        engine.command(&cmd, None).unwrap();
    }
    (engine, last)
}

#[test]
fn a_failed_commit_leaves_neither_the_store_nor_the_engine_ahead() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, last) = all_but_the_run(&plugin, &dir);
    let journal = engine.store().last_journal_seq().unwrap();
    engine.store().fail_next_commit();
    match engine.command(&last, None) {
        Err(DaemonError::Store(e)) => assert!(e.to_string().contains("injected"), "{e}"),
        other => panic!("expected a store error, got {other:?}"),
    }
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal);
    assert!(
        engine.instance().runs().unwrap().is_empty(),
        "the engine was rebuilt from the store: the run it created in memory is gone"
    );
    assert_eq!(engine.recoveries(), 1);
    // The same command again is accepted, once.
    engine.command(&last, None).unwrap();
    let runs = engine.instance().runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, State::NotStarted);
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal + 1);
}

#[test]
fn a_trap_before_the_input_is_journaled_is_recovered_and_the_input_applied_once() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, last) = all_but_the_run(&plugin, &dir);
    let journal = engine.store().last_journal_seq().unwrap();
    engine.instance().set_next_deadline(Duration::ZERO);
    engine.command(&last, None).expect("recovered and retried");
    assert_eq!(engine.recoveries(), 1);
    assert_eq!(engine.instance().runs().unwrap().len(), 1);
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal + 1);
}

#[test]
fn a_trap_after_the_input_is_journaled_keeps_it_and_the_replay_applies_it() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, last) = all_but_the_run(&plugin, &dir);
    let journal = engine.store().last_journal_seq().unwrap();
    engine.instance().inject_trap_after_next_append();
    engine
        .command(&last, None)
        .expect("kept, applied by the replay");
    assert_eq!(engine.recoveries(), 1);
    assert_eq!(engine.instance().runs().unwrap().len(), 1);
    assert_eq!(engine.store().last_journal_seq().unwrap(), journal + 1);
}

#[test]
fn the_upgrades_a_trapped_start_asked_for_go_out_with_the_step_that_recovered_it() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, last) = all_but_the_run(&plugin, &dir);
    engine.command(&last, None).unwrap();
    let run = engine.instance().runs().unwrap()[0].name.clone();
    // The start is journaled, then the guest traps: the replay applies it, and the upgrades it
    // asks for are in the store *and* handed out to be sent (not left as intents until the
    // next restart).
    engine.instance().inject_trap_after_next_append();
    let applied = engine
        .command(&Command::StartRun { name: run }, None)
        .expect("kept, applied by the replay");
    assert_eq!(engine.recoveries(), 1);
    assert!(
        !applied.operations.is_empty(),
        "the started members' upgrades go out"
    );
    let intents = engine.unfinished_operations().unwrap();
    let mut sent: Vec<&str> = applied.operations.iter().map(|o| o.id.as_str()).collect();
    let mut stored: Vec<&str> = intents.iter().map(|o| o.id.as_str()).collect();
    sent.sort();
    stored.sort();
    assert_eq!(sent, stored);
}
