//! The daemon's engine thread in scaled fleet time: the real plugin, a real SQLite file and
//! the simulated provider over it. A run completes as `waverun simulate` says it does; an engine
//! thread abandoned mid-run (nothing closed, provider calls in flight) and started again on the
//! same file finishes the run with exactly one upgrade operation per member; so does a run whose
//! steps' commits fail in each way a network database can fail them (`store_support::Faulty`).

mod runtime_support;
mod store_support;

use runtime_support::{plugin, workspace};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use waverun_core::sim::{simulate, Scenario};
use waverun_core::{Command, RunStatus, State};
use waverun_host::daemon::{Daemon, FleetClock, FleetEngine, Providers};
use waverun_host::load_scenario;
use waverun_host::providers::{Provider, SimulatedCluster, SimulatedProvider};
use waverun_host::runtime::{InstanceConfig, PluginModule};
use waverun_host::store::SqliteStore;

/// The scenario's 90 fleet minutes take about 0.3 s.
const FAST: f64 = 20_000.0;
/// About 2.7 s: each of the three waves of upgrades takes 0.9 s.
const SLOWER: f64 = 2_000.0;
/// About 5.4 s: each wave takes 1.8 s, and from the first wave's end to the last one's there
/// are 3.6 s to stop the engine in on a loaded machine.
const SLOWEST: f64 = 1_000.0;

fn scenario() -> Scenario {
    load_scenario(&workspace().join("tests/scenarios/concurrency-fixed.yaml")).unwrap()
}

struct Fleet {
    daemon: Daemon,
    simulated: Arc<SimulatedProvider>,
}

fn start(plugin: &PluginModule, db: &Path, s: &Scenario, scale: f64) -> Fleet {
    let mut store = SqliteStore::open(db).unwrap();
    let clock = FleetClock::resume(&mut store, scale, Some(s.start.timestamp_millis())).unwrap();
    let clusters = s.members.iter().map(SimulatedCluster::from);
    let simulated = Arc::new(SimulatedProvider::open(db, clusters, clock, s.seed).unwrap());
    let (engine, _) =
        FleetEngine::start(plugin, store, clock, InstanceConfig::default(), "simulated").unwrap();
    let mut providers: Providers = BTreeMap::new();
    providers.insert(
        "simulated".to_string(),
        simulated.clone() as Arc<dyn Provider>,
    );
    Fleet {
        daemon: Daemon::spawn(engine, clock, providers),
        simulated,
    }
}

fn create_and_start(daemon: &Daemon, s: &Scenario) {
    let mut commands: Vec<Command> = s.setup_commands().into_iter().map(|(_, c)| c).collect();
    commands.push(Command::StartRun {
        name: s.run_name().unwrap().to_string(),
    });
    for c in commands {
        daemon
            .call(move |w| w.command(&c, None).map(|_| ()))
            .unwrap()
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

fn status(daemon: &Daemon, run: &str) -> RunStatus {
    let run = run.to_string();
    daemon
        .call(move |w| w.engine().status(&run))
        .unwrap()
        .unwrap()
}

/// Waits (bounded) until the run has ended; returns its status.
fn wait_for_end(daemon: &Daemon, run: &str, limit: Duration) -> RunStatus {
    let until = Instant::now() + limit;
    loop {
        let st = status(daemon, run);
        if st.status.state.is_terminal() {
            return st;
        }
        assert!(
            Instant::now() < until,
            "the run has not ended after {limit:?}: {:?}",
            st.status
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn member_states(st: &RunStatus) -> BTreeMap<String, State> {
    st.stages
        .iter()
        .flat_map(|s| &s.groups)
        .flat_map(|g| &g.members)
        .map(|m| (m.name.clone(), m.status.state))
        .collect()
}

#[test]
fn a_run_completes_in_fleet_time_as_the_simulation_says() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("waverun.db");
    let s = scenario();
    let fleet = start(&plugin, &db, &s, FAST);
    create_and_start(&fleet.daemon, &s);
    let st = wait_for_end(
        &fleet.daemon,
        s.run_name().unwrap(),
        Duration::from_secs(60),
    );
    let expected = simulate(&s).unwrap();
    assert_eq!(
        st.status.state,
        expected.run.as_ref().unwrap().status.status.state
    );
    assert_eq!(
        member_states(&st),
        member_states(&expected.run.as_ref().unwrap().status)
    );
    for m in &s.members {
        assert_eq!(
            fleet.simulated.operations_of(&m.name).unwrap(),
            1,
            "{}",
            m.name
        );
    }
    fleet.daemon.shutdown().unwrap();
    assert!(!SqliteStore::open(&db)
        .unwrap()
        .recovered_from_unclean_shutdown());
}

#[test]
fn an_engine_abandoned_mid_run_finishes_it_after_a_restart_upgrading_each_member_once() {
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("waverun.db");
    let s = scenario();
    let fleet = start(&plugin, &db, &s, SLOWEST);
    create_and_start(&fleet.daemon, &s);
    // Abandon once some members finished and others are in flight.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let states = member_states(&status(&fleet.daemon, s.run_name().unwrap()));
        let done = states.values().filter(|s| **s == State::Completed).count();
        if done >= 2 {
            assert!(done < states.len(), "abandoned too late: {states:?}");
            break;
        }
        assert!(Instant::now() < until, "no member finished: {states:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    fleet.daemon.abandon();
    drop(fleet.simulated);

    let fleet = start(&plugin, &db, &s, SLOWEST);
    let st = wait_for_end(
        &fleet.daemon,
        s.run_name().unwrap(),
        Duration::from_secs(60),
    );
    assert_eq!(st.status.state, State::Completed);
    assert!(member_states(&st).values().all(|s| *s == State::Completed));
    for m in &s.members {
        assert_eq!(
            fleet.simulated.operations_of(&m.name).unwrap(),
            1,
            "{}",
            m.name
        );
    }
    fleet.daemon.shutdown().unwrap();
}

#[test]
fn a_window_the_provider_reports_later_reaches_the_engine_s_member() {
    use waverun_host::daemon::MemberBinding;
    use waverun_host::providers::ClusterTarget;
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let s = scenario();
    let fleet = start(&plugin, &dir.path().join("waverun.db"), &s, FAST);
    let m = &s.members[0];
    let target = ClusterTarget {
        member: m.name.clone(),
        cluster_ref: None,
        region: Some(m.region.clone()),
    };
    let described = fleet.simulated.describe(&target).unwrap();
    let binding = MemberBinding {
        name: m.name.clone(),
        provider: "simulated".to_string(),
        cluster_ref: None,
        cluster_resource_id: None,
        group: m.group.clone(),
        labels: m.labels.clone(),
        long_term_support: false,
    };
    let snapshot = |daemon: &Daemon| -> String {
        daemon
            .call(|w| w.engine().query(&serde_json::json!({"type": "snapshot"})))
            .unwrap()
            .unwrap()
            .to_string()
    };
    let (b, d) = (binding.clone(), described.clone());
    fleet
        .daemon
        .call(move |w| {
            w.register_member(&b, &d, "test", Default::default())
                .map(|_| ())
        })
        .unwrap()
        .unwrap();
    assert!(!snapshot(&fleet.daemon).contains("Saturday"));
    // The platform now reports a window: the next observation replaces the engine's member.
    let mut later = described;
    later.maintenance = Some(
        serde_json::from_value(serde_json::json!({"kubernetes": {
            "schedule": {"weekly": {"intervalWeeks": 1, "dayOfWeek": "Saturday"}},
            "durationHours": 6, "startTime": "02:00"}}))
        .unwrap(),
    );
    fleet
        .daemon
        .call(move |w| w.observed(&binding, &later))
        .unwrap()
        .unwrap();
    assert!(
        snapshot(&fleet.daemon).contains("Saturday"),
        "the engine's member has the window"
    );
}

#[test]
fn a_batch_of_members_registers_in_one_step_or_not_at_all() {
    use waverun_host::daemon::{MemberBinding, MEMBERS};
    use waverun_host::providers::ClusterTarget;
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let s = scenario();
    let fleet = start(&plugin, &dir.path().join("waverun.db"), &s, FAST);
    let described = |name: &str| {
        let m = &s.members[0];
        let target = ClusterTarget {
            member: m.name.clone(),
            cluster_ref: None,
            region: Some(m.region.clone()),
        };
        let binding = MemberBinding {
            name: name.to_string(),
            provider: "simulated".to_string(),
            cluster_ref: None,
            cluster_resource_id: None,
            group: Some("batch".to_string()),
            labels: m.labels.clone(),
            long_term_support: false,
        };
        (binding, fleet.simulated.describe(&target).unwrap())
    };
    // What the engine and the store hold of `names`: (in the engine, stored).
    let held = |names: &'static [&'static str]| {
        fleet
            .daemon
            .call(move |w| {
                let snapshot = w
                    .engine()
                    .query(&serde_json::json!({"type": "snapshot"}))
                    .unwrap()
                    .to_string();
                names
                    .iter()
                    .map(|n| {
                        let stored = w.engine().stored().resource(MEMBERS, n).unwrap();
                        (snapshot.contains(&format!("\"{n}\"")), stored.is_some())
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap()
    };
    let good = vec![
        described("batch-a"),
        described("batch-b"),
        described("batch-c"),
    ];
    let registered = fleet
        .daemon
        .call(move |w| w.register_members(&good, "test", None).map(|m| m.len()))
        .unwrap()
        .unwrap_or_else(|(i, e)| panic!("refused at {i:?}: {e}"));
    assert_eq!(registered, 3);
    assert_eq!(held(&["batch-a", "batch-b", "batch-c"]), [(true, true); 3]);
    // The engine refuses the second member of the next batch (its name breaks the naming
    // rule): the first one is not kept either, in the engine or in the store.
    let bad = vec![
        described("batch-d"),
        described("Not A Name"),
        described("batch-e"),
    ];
    let refused = fleet
        .daemon
        .call(move |w| w.register_members(&bad, "test", None).map(|m| m.len()))
        .unwrap();
    let (index, error) = refused.expect_err("a member with a bad name is refused");
    assert_eq!(index, Some(1), "{error}");
    assert!(error.to_string().contains("name"), "{error}");
    assert_eq!(held(&["batch-d", "batch-e"]), [(false, false); 2]);
    // The engine goes on from the committed state: the first batch is whole.
    assert_eq!(held(&["batch-a", "batch-b", "batch-c"]), [(true, true); 3]);
}

#[test]
fn commits_that_fail_after_writing_or_before_it_lose_no_upgrade_and_double_none() {
    use store_support::{Fault, Faulty};
    let (_rt, plugin) = plugin();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("waverun.db");
    let s = scenario();
    let mut store = SqliteStore::open(&db).unwrap();
    let clock = FleetClock::resume(&mut store, SLOWER, Some(s.start.timestamp_millis())).unwrap();
    let clusters = s.members.iter().map(SimulatedCluster::from);
    let simulated = Arc::new(SimulatedProvider::open(&db, clusters, clock, s.seed).unwrap());
    // The run's first step that asks for upgrades is written but answered as failed; later
    // ones fail before writing, as a lost lease and a serialization failure would.
    let (faulty, faults) = Faulty::on_operations(
        store,
        [Fault::AckLost, Fault::Failed, Fault::AckLost, Fault::Fenced],
    );
    let (engine, _) = FleetEngine::start(
        &plugin,
        faulty,
        clock,
        InstanceConfig::default(),
        "simulated",
    )
    .unwrap();
    let mut providers: Providers = BTreeMap::new();
    providers.insert(
        "simulated".to_string(),
        simulated.clone() as Arc<dyn Provider>,
    );
    let daemon = Daemon::spawn(engine, clock, providers);
    let mut commands: Vec<Command> = s.setup_commands().into_iter().map(|(_, c)| c).collect();
    let run = s.run_name().unwrap().to_string();
    commands.push(Command::StartRun { name: run.clone() });
    for c in commands {
        // A start answered as failed may have happened all the same: the run says which.
        let _ = daemon
            .call(move |w| w.command(&c, None).map(|_| ()))
            .unwrap();
    }
    if status(&daemon, &run).status.state == State::NotStarted {
        let name = run.clone();
        daemon
            .call(move |w| w.command(&Command::StartRun { name }, None).map(|_| ()))
            .unwrap()
            .unwrap();
    }
    let st = wait_for_end(&daemon, &run, Duration::from_secs(60));
    assert!(faults.lock().unwrap().is_empty(), "every fault was played");
    assert_eq!(
        st.status.state,
        State::Completed,
        "{:?}",
        member_states(&st)
    );
    assert!(member_states(&st).values().all(|s| *s == State::Completed));
    for m in &s.members {
        assert_eq!(
            simulated.operations_of(&m.name).unwrap(),
            1,
            "{}: one upgrade, whatever the commits said",
            m.name
        );
    }
    daemon.shutdown().unwrap();
}
