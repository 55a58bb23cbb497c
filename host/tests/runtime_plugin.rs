//! The real plugin (`bindings/plugin`, built on demand) in the wasmtime runtime: the ABI calls,
//! persistence failures, a restart from storage, snapshots, and recovery from traps mid-run
//! with nothing accepted lost. `measure_*` (ignored) prints the figures quoted in reports:
//! `cargo test -p waverun --test runtime_plugin -- --ignored --nocapture`.

mod runtime_support;

use runtime_support::{plugin, plugin_wasm, shared_cache, workspace};
use std::time::Duration;
use waverun_core::sim::{simulate, Scenario, Simulation, SimulationReport};
use waverun_host::load_scenario;
use waverun_host::runtime::{
    plugin_simulation, InstanceConfig, ManualClock, MemoryPersistence, PluginError, PluginHost,
    PluginRuntime, QueueProvider, RuntimeConfig, TrapKind,
};

fn scenario(rel: &str) -> Scenario {
    load_scenario(&workspace().join(rel)).expect("scenario loads")
}

fn json(r: &SimulationReport) -> String {
    serde_json::to_string(r).expect("report serialises")
}

fn fresh_host(clock: &ManualClock, storage: &MemoryPersistence) -> PluginHost {
    PluginHost::new(clock.clone(), QueueProvider::new(), storage.clone())
}

#[test]
fn calls_before_init_are_refused() {
    let (_rt, plugin) = plugin();
    let mut i = plugin
        .instantiate(
            fresh_host(&ManualClock::new(0), &MemoryPersistence::new()),
            InstanceConfig::default(),
        )
        .expect("instantiate");
    match i.runs() {
        Err(PluginError::Guest(g)) => assert_eq!(g.code, "NotInitialized"),
        other => panic!("expected NotInitialized, got {other:?}"),
    }
    match i.wake() {
        Err(PluginError::Guest(g)) => assert_eq!(g.code, "NotInitialized"),
        other => panic!("expected NotInitialized, got {other:?}"),
    }
    i.init().expect("init");
    i.runs().expect("runs after init");
}

#[test]
fn the_abi_calls_answer() {
    let (_rt, plugin) = plugin();
    let s = scenario("host/examples/fleet-rollout.yaml");
    let clock = ManualClock::at(s.start);
    let storage = MemoryPersistence::new();
    let mut i = plugin
        .instantiate(fresh_host(&clock, &storage), InstanceConfig::default())
        .expect("instantiate");
    let r = i.init().expect("init");
    assert_eq!((r.journal_seq, r.replayed, r.in_flight), (0, 0, 0));
    i.ping().expect("ping");
    assert!(i.runs().expect("runs").is_empty());
    assert_eq!(i.next_wakeup().expect("next wakeup"), None);
    for (path, cmd) in s.setup_commands() {
        i.command(&cmd).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    assert_eq!(storage.journal_len(), s.setup_commands().len());
    let runs = i.runs().expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].name, s.run_name().unwrap());
    let status = i.status(s.run_name().unwrap()).expect("status");
    let native = Simulation::new(&s)
        .expect("native")
        .engine()
        .run_status(s.run_name().unwrap())
        .expect("native status");
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        serde_json::to_value(&native).unwrap()
    );
    match i.status("no-such-run") {
        Err(PluginError::Guest(g)) => assert_eq!(g.code, "NotFound", "{g:?}"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    let bad =
        serde_json::json!({"type": "command", "command": {"type": "startRun", "name": "missing"}});
    match i.request(&bad) {
        Err(PluginError::Guest(g)) => assert_eq!(g.code, "NotFound", "{g:?}"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    match i.request(&serde_json::json!({"type": "noSuchRequest"})) {
        Err(PluginError::Guest(_)) => {}
        other => panic!("expected a guest error, got {other:?}"),
    }
    // Refused commands are not journaled... or if they are, they replay to the same state.
    let before = serde_json::to_value(i.status(s.run_name().unwrap()).unwrap()).unwrap();
    i.recover().expect("recover");
    let after = serde_json::to_value(i.status(s.run_name().unwrap()).unwrap()).unwrap();
    assert_eq!(before, after);
}

#[test]
fn an_input_that_cannot_be_journaled_is_refused_and_not_applied() {
    let (_rt, plugin) = plugin();
    let s = scenario("host/examples/fleet-rollout.yaml");
    let storage = MemoryPersistence::new();
    let mut i = plugin
        .instantiate(
            fresh_host(&ManualClock::at(s.start), &storage),
            InstanceConfig::default(),
        )
        .unwrap();
    i.init().unwrap();
    let setup = s.setup_commands();
    let (_, first) = &setup[0];
    storage.fail_appends(true);
    match i.command(first) {
        Err(PluginError::Guest(g)) => assert_eq!(g.code, "PersistenceFailed", "{g:?}"),
        other => panic!("expected PersistenceFailed, got {other:?}"),
    }
    assert_eq!(storage.journal_len(), 0);
    storage.fail_appends(false);
    for (_, cmd) in &setup {
        i.command(cmd).expect("accepted once the disk is back");
    }
    assert_eq!(i.runs().unwrap().len(), 1);
}

/// Traps forced at several steps (a zero deadline traps the next call at its first epoch
/// check, before anything is journaled): the driver recovers, replays the journal and sends
/// the input again; the report is byte-identical to the native engine's.
#[test]
fn traps_mid_run_are_recovered_without_losing_input() {
    let (_rt, plugin) = plugin();
    let s = scenario("host/examples/fleet-rollout.yaml");
    let native = simulate(&s).expect("native");
    let mut sim = plugin_simulation(&plugin, &s).unwrap();
    let trap_at = [1usize, 4, 7, 10];
    let mut step = 0;
    loop {
        if trap_at.contains(&step) {
            sim.driver().instance().set_next_deadline(Duration::ZERO);
        }
        if !sim.step() {
            break;
        }
        step += 1;
    }
    assert!(step > 10, "the scenario has {step} steps");
    let d = sim.driver();
    assert!(d.failure().is_none(), "{:?}", d.failure());
    assert_eq!(d.recoveries(), trap_at.len() as u32);
    assert_eq!(d.lost_events(), 0);
    assert!(!d.instance().is_poisoned());
    assert_eq!(json(&sim.report()), json(&native));
}

/// A crash right after an input is durable (before the guest answers): the replay applies the
/// input, every operation in flight is queried and the unknown ones submitted again. Only that
/// call's events are missing from the timeline; the final state is the native one.
#[test]
fn a_trap_after_journaling_is_applied_by_the_replay() {
    let (_rt, plugin) = plugin();
    let s = scenario("tests/scenarios/concurrency-fixed.yaml");
    let native = simulate(&s).expect("native");
    let mut sim = plugin_simulation(&plugin, &s).unwrap();
    let mut injected = false;
    let mut step = 0;
    loop {
        // Inject when a cluster result is due: the step's first input is that delivery.
        if !injected && step >= 2 && sim.fleet().next_completion() == Some(sim.now()) {
            sim.driver().instance().inject_trap_after_next_append();
            injected = true;
        }
        if !sim.step() {
            break;
        }
        step += 1;
    }
    assert!(injected);
    let d = sim.driver();
    assert!(d.failure().is_none(), "{:?}", d.failure());
    assert_eq!(d.recoveries(), 1);
    assert_eq!(d.lost_events(), 1);
    assert!(
        !d.provider().queries().is_empty(),
        "in-flight operations were queried"
    );
    let report = sim.report();
    assert_eq!(
        serde_json::to_string(&report.run).unwrap(),
        serde_json::to_string(&native.run).unwrap()
    );
    assert_eq!(report.summary, native.summary);
    // The plugin's timeline is the native one minus the trapped call's events.
    assert!(report.timeline.len() < native.timeline.len());
    let mut rest = native.timeline.iter();
    for ev in &report.timeline {
        assert!(
            rest.any(|n| n == ev),
            "{ev:?} is not in the native timeline in order"
        );
    }
}

/// A new process: a new runtime over the same module cache, a new instance over the same
/// storage; `waverun_init` restores the state and asks about every operation in flight.
#[test]
fn a_restarted_host_resumes_from_storage() {
    let (_rt, plugin) = plugin();
    let s = scenario("host/examples/fleet-rollout.yaml");
    let mut sim = plugin_simulation(&plugin, &s).unwrap();
    for _ in 0..12 {
        assert!(sim.step());
    }
    let storage = sim.driver().persistence().clone();
    let before = serde_json::to_value(
        sim.driver()
            .instance()
            .status(s.run_name().unwrap())
            .unwrap(),
    )
    .unwrap();
    let in_flight = sim.fleet().in_flight() as u64;

    let rt2 = PluginRuntime::new(RuntimeConfig::with_cache(shared_cache())).unwrap();
    let plugin2 = rt2.load_file(&plugin_wasm()).unwrap();
    assert_eq!(
        plugin2.cache_status(),
        &waverun_host::runtime::CacheStatus::Hit
    );
    let provider = QueueProvider::new();
    let mut i = plugin2
        .instantiate(
            PluginHost::new(
                ManualClock::at(sim.now()),
                provider.clone(),
                storage.clone(),
            ),
            InstanceConfig::default(),
        )
        .unwrap();
    let r = i.init().expect("init");
    assert_eq!(r.replayed as usize, storage.journal_len());
    assert_eq!(r.journal_seq, storage.last_seq());
    assert_eq!(r.in_flight, in_flight);
    // This provider knows nothing: every operation in flight is queried and submitted again.
    assert_eq!(provider.queries().len() as u64, in_flight);
    assert_eq!(provider.take().len() as u64, in_flight);
    let after = serde_json::to_value(i.status(s.run_name().unwrap()).unwrap()).unwrap();
    assert_eq!(before, after);
}

/// More than 1,000 journal records: the guest writes a snapshot, the host drops the records it
/// covers, and a recovery restores the snapshot and replays the rest.
#[test]
fn snapshots_bound_the_journal() {
    let (_rt, plugin) = plugin();
    let s = scenario("host/examples/fleet-rollout.yaml");
    let clock = ManualClock::at(s.start);
    let storage = MemoryPersistence::new();
    let mut i = plugin
        .instantiate(fresh_host(&clock, &storage), InstanceConfig::default())
        .unwrap();
    i.init().unwrap();
    for (_, cmd) in s.setup_commands() {
        i.command(&cmd).unwrap();
    }
    i.command(&waverun_core::Command::StartRun {
        name: s.run_name().unwrap().to_string(),
    })
    .unwrap();
    for _ in 0..5_000 {
        if storage.appends() >= 1_100 {
            break;
        }
        clock.advance_ms(60_000);
        i.wake().unwrap();
    }
    assert_eq!(storage.appends(), 1_100, "every wake is journaled (ABI 4)");
    assert_eq!(storage.snapshot_seq(), Some(1_000));
    assert_eq!(storage.journal_len(), 100);
    let before = serde_json::to_value(i.status(s.run_name().unwrap()).unwrap()).unwrap();
    let r = i.recover().unwrap();
    assert_eq!((r.journal_seq, r.replayed), (1_100, 100));
    let after = serde_json::to_value(i.status(s.run_name().unwrap()).unwrap()).unwrap();
    assert_eq!(before, after);
    // The explicit snapshot request writes one too.
    i.request(&serde_json::json!({"type": "snapshot"})).unwrap();
    assert_eq!(storage.snapshot_seq(), Some(1_100));
    assert_eq!(storage.journal_len(), 0);
}

#[test]
fn the_plugin_traps_cleanly_when_its_memory_limit_is_too_small() {
    let (_rt, plugin) = plugin();
    let config = InstanceConfig {
        memory_limit: 64 << 10, // one page: less than the module's own data
        ..InstanceConfig::default()
    };
    match plugin.instantiate(
        fresh_host(&ManualClock::new(0), &MemoryPersistence::new()),
        config,
    ) {
        Err(PluginError::Trap(t)) => assert_eq!(t.kind, TrapKind::MemoryLimit),
        Err(e) => panic!("expected a memory-limit trap, got {e}"),
        Ok(_) => panic!("instantiated in 64 KiB"),
    }
}

/// ABI v2's `check_submit` through wasmtime: a HealthCheck gate's measurement reaches the host's
/// provider, comes back as an observation and completes the gate; after a recovery the guest
/// submits the awaited measurement again under the same id (taken once by the host); a refusal
/// is an Error measurement, journaled.
#[test]
fn a_health_check_goes_out_through_check_submit_and_its_result_comes_back() {
    use waverun_core::health::Verdict;
    use waverun_core::{Command, EventKind, Observation};
    let (_rt, plugin) = plugin();
    let start: waverun_core::Timestamp = "2026-12-07T00:00:00Z".parse().unwrap();
    let storage = MemoryPersistence::new();
    let provider = QueueProvider::new();
    let host = PluginHost::new(ManualClock::at(start), provider.clone(), storage.clone());
    let mut i = plugin
        .instantiate(host, InstanceConfig::default())
        .expect("instantiate");
    i.init().expect("init");
    let setup = [
        serde_json::json!({"type": "setCatalog", "catalog": {
            "kubernetes": [{"version": "1.31.2", "available": {"*": "2026-12-07T00:00:00Z"}}]}}),
        serde_json::json!({"type": "upsertMember", "member": {"name": "a", "group": "g",
            "region": "eastus", "kubernetesVersion": "1.30.4"}}),
        serde_json::json!({"type": "createRun", "run": {"name": "r1",
            "strategy": {
                "healthChecks": [{"name": "slo", "http": {"url": "http://127.0.0.1:9/slo"}}],
                "stages": [{"name": "s", "beforeGates": [{"type": "HealthCheck", "healthCheck": "slo"}],
                            "groups": [{"name": "g"}]}]},
            "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.31.2"}}}}),
        serde_json::json!({"type": "startRun", "name": "r1"}),
    ];
    for c in setup {
        let cmd: Command = serde_json::from_value(c).unwrap();
        i.command(&cmd).expect("command");
    }
    let checks = provider.take_checks();
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0].check.name, "slo");
    let id = checks[0].measurement_id.clone();

    i.recover().expect("recover");
    assert_eq!(provider.check_calls(), vec![id.clone(), id.clone()]);
    assert!(
        provider.take_checks().is_empty(),
        "a repeated id is taken once"
    );

    let events = i
        .deliver(&Observation::CheckMeasured {
            measurement_id: id,
            values: None,
            verdict: Some(Verdict::Pass),
            message: None,
        })
        .expect("deliver");
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind()).collect();
    assert!(kinds.contains(&EventKind::GateCompleted), "{kinds:?}");
    assert_eq!(provider.take().len(), 1, "the member's upgrade went out");
}

/// A host that refuses `check_submit`: the measurement is an Error, journaled.
#[test]
fn a_refused_measurement_is_an_error_in_the_journal() {
    use waverun_core::Command;
    let (_rt, plugin) = plugin();
    let start: waverun_core::Timestamp = "2026-12-07T00:00:00Z".parse().unwrap();
    let storage = MemoryPersistence::new();
    let provider = QueueProvider::new();
    provider.refuse_checks(Some("no checks today".into()));
    let host = PluginHost::new(ManualClock::at(start), provider.clone(), storage.clone());
    let mut i = plugin
        .instantiate(host, InstanceConfig::default())
        .expect("instantiate");
    i.init().expect("init");
    for c in [
        serde_json::json!({"type": "setCatalog", "catalog": {
            "kubernetes": [{"version": "1.31.2", "available": {"*": "2026-12-07T00:00:00Z"}}]}}),
        serde_json::json!({"type": "upsertMember", "member": {"name": "a", "group": "g",
            "region": "eastus", "kubernetesVersion": "1.30.4"}}),
        serde_json::json!({"type": "createRun", "run": {"name": "r1",
            "strategy": {
                "healthChecks": [{"name": "slo", "http": {"url": "http://127.0.0.1:9/slo"}}],
                "stages": [{"name": "s", "beforeGates": [{"type": "HealthCheck", "healthCheck": "slo"}],
                            "groups": [{"name": "g"}]}]},
            "managedClusterUpdate": {"upgrade": {"type": "ControlPlaneOnly", "kubernetesVersion": "1.31.2"}}}}),
        serde_json::json!({"type": "startRun", "name": "r1"}),
    ] {
        let cmd: Command = serde_json::from_value(c).unwrap();
        i.command(&cmd).expect("command");
    }
    let last = storage.records().last().cloned().expect("a record");
    assert!(last.contains("\"checkMeasured\""), "{last}");
    assert!(last.contains("\"Error\""), "{last}");
    assert!(
        last.contains("check_submit refused the measurement (the host answered 1)"),
        "{last}"
    );
}
