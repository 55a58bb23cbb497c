//! Property tests of auto-upgrade profiles: random fleets (members on minors 1.27–1.31, some
//! with LTS, Linux and Windows pools, some joining later), random release calendars (GA and
//! preview patches, minors out of community support, node images with and without the
//! security flag, region by region), one to three profiles of random channels, sometimes a
//! manual run, and random operator actions on the runs the profiles generate — simulated with
//! the invariants checked after every step:
//!
//! - no member upgrade ever crosses two minors or moves a control plane or a node image down;
//! - at most one generated run per profile is running (Running, Pending or Stopping);
//! - a member is in flight in at most one run (one upgrade authority, across profiles and the
//!   manual run);
//! - in every run, as in the single-run properties (`properties.rs`): members in flight within
//!   the resolved `maxConcurrency` of their group and stage, and `failureCount` = the Failed
//!   members at run, stage and group level;
//! - a generated run targets only GA versions that were in the catalog when it was generated,
//!   and is announced (`RunGenerated`) before it starts;
//! - time never goes backwards, and the simulation ends within a bounded number of steps;
//! - the same scenario gives byte-identical reports, and an engine restored from a snapshot at
//!   a random step makes the same decisions as the original.
//!
//! `PROPTEST_CASES=N` raises the case counts.

use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::{BTreeMap, BTreeSet};
use waverun_core::model::{AutoUpgradeNodeImageSelection, AutoUpgradeProfile, UpgradeChannel};
use waverun_core::profile::generated_run_name;
use waverun_core::sim::{
    simulate, Action, ActionKind, Behavior, NamedStrategy, Scenario, ScenarioMember, ScenarioRun,
    Simulation,
};
use waverun_core::version::{compare_image_versions, KubeVersion};
use waverun_core::{
    Engine, EventKind, ManagedClusterUpdate, MemberSelector, MinorSupport, NodeImageSelection,
    NodeImageSelectionType, NodePool, OsType, Release, ReleaseCatalog, Stage, State, Support,
    Timestamp, UpdateStrategy, Upgrade, UpgradeType,
};

const MAX_STEPS: usize = 20_000;
const LINUX: &str = "AKSUbuntu-2204gen2containerd";
const WINDOWS: &str = "AKSWindows-2022-containerd";
const REGIONS: [&str; 2] = ["eastus", "westeurope"];

fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2048,
        max_shrink_time: 60_000,
        ..ProptestConfig::default()
    }
}

fn start() -> Timestamp {
    "2026-12-07T00:00:00Z".parse().unwrap()
}

fn at(minutes: i64) -> Timestamp {
    start() + chrono::Duration::minutes(minutes)
}

fn linux(v: usize) -> String {
    format!("{LINUX}-202411.{:02}.0", v + 1)
}

fn windows(v: usize) -> String {
    format!("{WINDOWS}-20348.2582.2407{:02}", v + 10)
}

#[derive(Clone, Debug)]
struct GenMember {
    minor: u32,
    patch: u32,
    lts: bool,
    region: usize,
    ring: usize,
    linux: usize,
    windows: Option<usize>,
    snapshot: bool,
    minutes: u32,
    fails: u32,
    joins: Option<i64>,
}

prop_compose! {
    fn gen_member()(
        minor in 27u32..=31, patch in 0u32..3, lts in prop::bool::weighted(0.3),
        region in 0usize..2, ring in 0usize..2, linux in 0usize..3,
        windows in prop::option::weighted(0.3, 0usize..2), snapshot in prop::bool::weighted(0.2),
        minutes in 10u32..180, fails in prop::sample::select(vec![0u32, 0, 0, 1, 2]),
        joins in prop::option::weighted(0.2, 60i64..20 * 1440),
    ) -> GenMember {
        GenMember { minor, patch, lts, region, ring, linux, windows, snapshot, minutes, fails, joins }
    }
}

/// One release: what, where (one region or both), when (minutes after the start; negative:
/// before it), and its flag (preview for Kubernetes, security for images).
#[derive(Clone, Debug)]
struct GenRelease {
    what: usize,
    regions: usize,
    minutes: i64,
    lag: i64,
    flag: bool,
}

prop_compose! {
    fn gen_release(kinds: usize)(
        what in 0..kinds, regions in 0usize..3, minutes in -3000i64..25 * 1440,
        lag in 0i64..3000, flag in prop::bool::weighted(0.2),
    ) -> GenRelease {
        GenRelease { what, regions, minutes, lag, flag }
    }
}

#[derive(Clone, Debug)]
struct GenProfile {
    channel: usize,
    tkv: u32,
    lts: bool,
    strategy: bool,
    consistent: bool,
    disabled: bool,
}

prop_compose! {
    fn gen_profile()(
        channel in 0usize..5, tkv in 27u32..=32, lts in prop::bool::weighted(0.4),
        strategy in any::<bool>(), consistent in prop::bool::weighted(0.3),
        disabled in prop::bool::weighted(0.1),
    ) -> GenProfile {
        GenProfile { channel, tkv, lts, strategy, consistent, disabled }
    }
}

#[derive(Clone, Debug)]
enum GenAct {
    Stop(usize, usize),
    Start(usize, usize),
    Generate(usize),
}

fn gen_act() -> impl Strategy<Value = (i64, GenAct)> {
    (
        0i64..25 * 1440,
        prop_oneof![
            (0usize..3, 0usize..40).prop_map(|(p, v)| GenAct::Stop(p, v)),
            (0usize..3, 0usize..40).prop_map(|(p, v)| GenAct::Start(p, v)),
            (0usize..3).prop_map(GenAct::Generate),
        ],
    )
}

#[derive(Clone, Debug)]
struct Gen {
    members: Vec<GenMember>,
    kubernetes: Vec<GenRelease>,
    images: Vec<GenRelease>,
    support: Vec<(u32, usize)>,
    profiles: Vec<GenProfile>,
    manual: Option<(u32, u32, i64)>,
    actions: Vec<(i64, GenAct)>,
}

prop_compose! {
    fn gen()(
        members in prop::collection::vec(gen_member(), 1..8),
        // Kubernetes: minors 1.27–1.32 × patches 0–5; images: 5 Linux and 3 Windows versions.
        kubernetes in prop::collection::vec(gen_release(36), 1..14),
        images in prop::collection::vec(gen_release(8), 0..6),
        support in prop::collection::vec((27u32..=32, 0usize..3), 0..3),
        profiles in prop::collection::vec(gen_profile(), 1..4),
        manual in prop::option::weighted(0.3, (28u32..=32, 0u32..6, 0i64..5 * 1440)),
        actions in prop::collection::vec(gen_act(), 0..6),
    ) -> Gen {
        Gen { members, kubernetes, images, support, profiles, manual, actions }
    }
}

const CHANNELS: [UpgradeChannel; 5] = [
    UpgradeChannel::Rapid,
    UpgradeChannel::Stable,
    UpgradeChannel::TargetKubernetesVersion,
    UpgradeChannel::NodeImage,
    UpgradeChannel::SecurityPatch,
];

fn kube_version(what: usize) -> String {
    format!("1.{}.{}", 27 + what / 6, what % 6)
}

fn image_version(what: usize) -> String {
    if what < 5 {
        linux(what)
    } else {
        windows(what - 5)
    }
}

fn release(version: String, r: &GenRelease, preview: bool, security: bool) -> Release {
    let first = at(r.minutes);
    let available = match r.regions {
        0 => BTreeMap::from([("*".to_string(), first)]),
        1 => BTreeMap::from([(REGIONS[0].to_string(), first)]),
        _ => BTreeMap::from([
            (REGIONS[0].to_string(), first),
            (REGIONS[1].to_string(), at(r.minutes + r.lag)),
        ]),
    };
    Release {
        version,
        available,
        preview,
        security_patch: security,
        os_type: None,
    }
}

fn build(g: &Gen) -> Scenario {
    let members: Vec<ScenarioMember> = g
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut pools = vec![NodePool {
                name: "linux".into(),
                os_type: OsType::Linux,
                image_version: linux(m.linux),
                from_snapshot: m.snapshot,
            }];
            if let Some(w) = m.windows {
                pools.push(NodePool {
                    name: "win".into(),
                    os_type: OsType::Windows,
                    image_version: windows(w),
                    from_snapshot: false,
                });
            }
            ScenarioMember {
                name: format!("m{i}"),
                group: None,
                labels: waverun_core::Labels::from([("ring".to_string(), m.ring.to_string())]),
                region: REGIONS[m.region].to_string(),
                kubernetes_version: format!("1.{}.{}", m.minor, m.patch),
                node_pools: pools,
                maintenance: Default::default(),
                long_term_support: m.lts,
                provider: None,
                behavior: Behavior {
                    upgrade_minutes: m.minutes,
                    fail_attempts: m.fails,
                    jitter_minutes: 0,
                },
                joins_at: m.joins.map(at),
            }
        })
        .collect();
    // The versions the members run are in the catalog from before the start.
    let mut kubernetes: BTreeMap<String, Release> = BTreeMap::new();
    let mut node_images: BTreeMap<String, Release> = BTreeMap::new();
    let old = GenRelease {
        what: 0,
        regions: 0,
        minutes: -10 * 1440,
        lag: 0,
        flag: false,
    };
    for m in &members {
        kubernetes.insert(
            m.kubernetes_version.clone(),
            release(m.kubernetes_version.clone(), &old, false, false),
        );
        for p in &m.node_pools {
            node_images.insert(
                p.image_version.clone(),
                release(p.image_version.clone(), &old, false, false),
            );
        }
    }
    for r in &g.kubernetes {
        let v = kube_version(r.what);
        kubernetes.insert(v.clone(), release(v, r, r.flag, false));
    }
    for r in &g.images {
        let v = image_version(r.what);
        let mut rel = release(v.clone(), r, false, r.flag);
        // The OS is given for some images (as a provider may), and a Windows security image is
        // never what the SecurityPatch channel targets.
        if r.lag % 2 == 0 {
            rel.os_type = Some(if r.what < 5 {
                OsType::Linux
            } else {
                OsType::Windows
            });
        }
        node_images.insert(v, rel);
    }
    let mut minors: BTreeMap<String, Support> = BTreeMap::new();
    for (minor, s) in &g.support {
        let support = [Support::Community, Support::LtsOnly, Support::EndOfSupport][*s];
        minors.insert(format!("1.{minor}"), support);
    }
    let releases = ReleaseCatalog {
        kubernetes: kubernetes.into_values().collect(),
        node_images: node_images.into_values().collect(),
        minors: minors
            .into_iter()
            .map(|(minor, support)| MinorSupport { minor, support })
            .collect(),
    };
    let rings = UpdateStrategy {
        stages: (0..2)
            .map(|ring| Stage {
                name: format!("ring-{ring}"),
                groups: vec![],
                member_selector: Some(MemberSelector {
                    by_label: format!("ring={ring}"),
                }),
                after_stage_wait_in_seconds: Some(600),
                max_concurrency: Some("2".into()),
                max_allowed_failures: Some("1".into()),
                before_gates: vec![],
                after_gates: vec![],
                after_member_checks: None,
                preflight: None,
                on_preflight_failure: None,
            })
            .collect(),
        health_checks: vec![],
    };
    let profiles: Vec<AutoUpgradeProfile> = g
        .profiles
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let channel = CHANNELS[p.channel];
            let tkv = channel == UpgradeChannel::TargetKubernetesVersion;
            AutoUpgradeProfile {
                name: format!("p{i}"),
                channel,
                update_strategy_name: p.strategy.then(|| "rings".to_string()),
                node_image_selection: (p.consistent && channel.is_kubernetes()).then_some(
                    AutoUpgradeNodeImageSelection {
                        selection_type: NodeImageSelectionType::Consistent,
                    },
                ),
                disabled: p.disabled,
                target_kubernetes_version: tkv.then(|| format!("1.{}", p.tkv)),
                long_term_support: tkv && p.lts,
            }
        })
        .collect();
    let run = g.manual.map(|(minor, patch, _)| ScenarioRun {
        name: "manual".into(),
        update_strategy_name: Some("rings".into()),
        managed_cluster_update: ManagedClusterUpdate {
            upgrade: Upgrade {
                upgrade_type: UpgradeType::Full,
                kubernetes_version: Some(format!("1.{minor}.{patch}")),
            },
            node_image_selection: NodeImageSelection::default(),
        },
    });
    // Run names the actions aim at: what a profile would call a run for a catalog version.
    let targets: Vec<String> = releases
        .kubernetes
        .iter()
        .map(|r| r.version.clone())
        .collect();
    let name_for = |p: usize, v: usize| {
        let p = p % profiles.len();
        generated_run_name(
            &profiles[p].name,
            profiles[p].channel,
            &[targets[v % targets.len()].clone()],
            1,
        )
    };
    let mut actions: Vec<Action> = Vec::new();
    if let Some((_, _, t)) = g.manual {
        actions.push(Action::new(at(t), ActionKind::Start));
    }
    for (t, a) in &g.actions {
        actions.push(match a {
            GenAct::Stop(p, v) => Action {
                run: Some(name_for(*p, *v)),
                ..Action::new(at(*t), ActionKind::Stop)
            },
            GenAct::Start(p, v) => Action {
                run: Some(name_for(*p, *v)),
                ..Action::new(at(*t), ActionKind::Start)
            },
            GenAct::Generate(p) => Action {
                profile: Some(profiles[p % profiles.len()].name.clone()),
                ..Action::new(at(*t), ActionKind::GenerateUpdateRun)
            },
        });
    }
    actions.sort_by_key(|a| a.at);
    Scenario {
        start: start(),
        until: Some(at(40 * 1440)),
        auto_approve: true,
        seed: 7,
        members,
        releases: Some(releases),
        freezes: vec![],
        strategy: None,
        strategies: vec![NamedStrategy {
            name: "rings".into(),
            strategy: rings,
        }],
        profiles,
        run,
        actions,
        health: vec![],
    }
}

fn scenario() -> impl Strategy<Value = Scenario> {
    gen().prop_map(|g| build(&g))
}

fn yaml(sc: &Scenario) -> String {
    serde_json::to_string_pretty(sc).unwrap()
}

/// The checks after one step: the events it added (from `from` on) and the engine's state.
fn check_step(sim: &Simulation, from: usize, last: &mut Timestamp) -> Result<(), String> {
    let engine = sim.engine();
    let timeline = sim.timeline();
    for e in &timeline[from..] {
        if e.at < *last {
            return Err(format!("time went backwards: {} after {}", e.at, last));
        }
        *last = e.at;
        match e.kind() {
            EventKind::MemberStarted => {
                let m = e.member().unwrap();
                let current = engine.member(m).ok_or("a started member exists")?;
                if let Some(target) = e.kubernetes_version() {
                    let (cur, tgt) = (
                        KubeVersion::parse(&current.kubernetes_version).unwrap(),
                        KubeVersion::parse(target).unwrap(),
                    );
                    if tgt <= cur {
                        return Err(format!(
                            "{m} moved from {cur} down (or nowhere) to {tgt} in {}",
                            e.run
                        ));
                    }
                    if cur.minors_until(&tgt) > 1 {
                        return Err(format!(
                            "{m} moved across two minors, {cur} → {tgt}, in {}",
                            e.run
                        ));
                    }
                }
                for p in e.node_images() {
                    let pool = current
                        .node_pools
                        .iter()
                        .find(|x| x.name == p.node_pool)
                        .ok_or("the pool exists")?;
                    if compare_image_versions(&p.image_version, &pool.image_version)
                        != std::cmp::Ordering::Greater
                    {
                        return Err(format!(
                            "{m}/{} moved from {} to {} (not newer) in {}",
                            p.node_pool, pool.image_version, p.image_version, e.run
                        ));
                    }
                }
            }
            EventKind::RunGenerated => {
                let (profile, versions) = (e.profile().unwrap(), e.versions());
                let (spec, _) = engine.profile(profile).ok_or("the profile exists")?;
                if spec.channel == UpgradeChannel::SecurityPatch {
                    if let Some(w) = versions.iter().find(|v| v.starts_with(WINDOWS)) {
                        return Err(format!("{} targets the Windows image {w}", e.run));
                    }
                }
                if spec.channel.is_kubernetes() {
                    let v = &versions[0];
                    let release = engine
                        .catalog()
                        .kubernetes
                        .iter()
                        .find(|r| &r.version == v)
                        .ok_or(format!("{v} is not in the catalog"))?;
                    if release.preview {
                        return Err(format!("{} targets the preview {v}", e.run));
                    }
                    if !release.available.values().any(|t| *t <= e.at) {
                        return Err(format!("{} targets {v} before its release", e.run));
                    }
                }
            }
            EventKind::RunStarted => {
                if let Some((_, _)) = engine.run_generated_by(&e.run) {
                    let announced = timeline[..]
                        .iter()
                        .any(|x| x.kind() == EventKind::RunGenerated && x.run == e.run);
                    if !announced {
                        return Err(format!("{} started without RunGenerated", e.run));
                    }
                }
            }
            _ => {}
        }
    }
    // At most one generated run per profile running.
    let mut running: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for run in engine.run_names() {
        let active = matches!(
            engine.run_state(run),
            Some(State::Running | State::Pending | State::Stopping)
        );
        if let (true, Some((profile, _))) = (active, engine.run_generated_by(run)) {
            running.entry(profile).or_default().push(run);
        }
    }
    if let Some((p, runs)) = running.iter().find(|(_, r)| r.len() > 1) {
        return Err(format!("profile {p} has {runs:?} running at once"));
    }
    // In every run (as in the single-run properties): members in flight within the resolved
    // maxConcurrency of their group and stage, and failureCount = Failed members at every level.
    let names: Vec<String> = engine.run_names().map(str::to_string).collect();
    for run in &names {
        let status = engine.run_status(run).map_err(|e| e.to_string())?;
        let mut run_failed = 0;
        for st in &status.stages {
            let (mut stage_running, mut stage_failed) = (0, 0);
            for g in &st.groups {
                let count = |s: State| g.members.iter().filter(|m| m.status.state == s).count();
                let (running, failed) = (count(State::Running), count(State::Failed));
                if running as u32 > g.max_concurrency {
                    return Err(format!(
                        "{run}/{}: {running} in flight, maxConcurrency {}",
                        g.name, g.max_concurrency
                    ));
                }
                if g.failure_count as usize != failed {
                    return Err(format!(
                        "{run}/{}: failureCount {} but {failed} Failed",
                        g.name, g.failure_count
                    ));
                }
                stage_running += running;
                stage_failed += failed;
            }
            if stage_running as u32 > st.max_concurrency {
                return Err(format!(
                    "{run}/{}: {stage_running} in flight, maxConcurrency {}",
                    st.name, st.max_concurrency
                ));
            }
            if st.failure_count as usize != stage_failed {
                return Err(format!(
                    "{run}/{}: failureCount {} but {stage_failed} Failed",
                    st.name, st.failure_count
                ));
            }
            run_failed += stage_failed;
        }
        if status.failure_count as usize != run_failed {
            return Err(format!(
                "{run}: failureCount {} but {run_failed} Failed",
                status.failure_count
            ));
        }
    }
    // One upgrade authority: a member in flight in at most one run.
    let mut in_flight = BTreeSet::new();
    for (_, run, member) in engine.operations_in_flight() {
        if !in_flight.insert(member) {
            return Err(format!("{member} is in flight twice (one in {run})"));
        }
    }
    Ok(())
}

fn run_checked(sc: &Scenario) -> Result<Simulation, String> {
    let mut sim = Simulation::new(sc).map_err(|e| format!("invalid: {e}"))?;
    let mut last = sc.start;
    let mut seen = 0;
    let mut steps = 0;
    loop {
        let more = sim.step();
        check_step(&sim, seen, &mut last)?;
        seen = sim.timeline().len();
        steps += 1;
        if steps > MAX_STEPS {
            return Err(format!("more than {MAX_STEPS} steps"));
        }
        if !more {
            return Ok(sim);
        }
    }
}

proptest! {
    #![proptest_config(config(192))]

    /// The invariants of the module docs hold after every step.
    #[test]
    fn profile_invariants_hold_after_every_step(sc in scenario()) {
        sc.validate().map_err(|e| TestCaseError::fail(format!("generator: {e}")))?;
        run_checked(&sc).map_err(|e| TestCaseError::fail(format!("{e}\nscenario:\n{}", yaml(&sc))))?;
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// The same scenario with profiles gives byte-identical reports.
    #[test]
    fn profile_simulation_is_deterministic(sc in scenario()) {
        let a = serde_json::to_string(&simulate(&sc).expect("valid")).unwrap();
        let b = serde_json::to_string(&simulate(&sc).expect("valid")).unwrap();
        prop_assert!(a == b, "two simulations differ\nscenario:\n{}", yaml(&sc));
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// An engine with profiles restored from a snapshot at a random step continues exactly as
    /// the original: the same timeline and the same final state.
    #[test]
    fn profile_engine_restored_from_a_snapshot_makes_the_same_decisions(sc in scenario(), fork in any::<Index>()) {
        let mut whole = Simulation::new(&sc).expect("valid");
        let mut steps = 0;
        while whole.step() { steps += 1; }
        let mut a = Simulation::new(&sc).expect("valid");
        for _ in 0..fork.index(steps + 1) {
            a.step();
        }
        let snap = a.engine().snapshot();
        let restored = Engine::restore(&snap).expect("snapshot restores");
        prop_assert!(restored.snapshot() == snap, "restore(snapshot).snapshot() differs");
        let mut b = a.clone();
        *b.driver() = restored;
        while a.step() {}
        while b.step() {}
        prop_assert!(a.timeline() == b.timeline(), "timelines differ\nscenario:\n{}", yaml(&sc));
        prop_assert!(a.engine().snapshot() == b.engine().snapshot(), "final states differ");
        prop_assert!(a.timeline() == whole.timeline(), "stepping differs from a whole run");
    }
}

#[test]
fn the_generator_makes_scenarios_where_profiles_generate_runs() {
    // Not a property: a sample of generated scenarios must exercise what the properties are
    // about (runs generated, superseded, waiting; members skipped for minor skips).
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut generated, mut waited, mut skips, mut lts) = (0, 0, 0, 0);
    for _ in 0..200 {
        let sc = scenario().new_tree(&mut runner).unwrap().current();
        let r = simulate(&sc).expect("valid");
        generated += r
            .timeline
            .iter()
            .filter(|e| e.kind() == EventKind::RunGenerated)
            .count();
        waited += r
            .timeline
            .iter()
            .filter(|e| {
                e.kind() == EventKind::MemberPending
                    && e.reason() == Some(waverun_core::Reason::Lease)
            })
            .count();
        skips += r
            .timeline
            .iter()
            .filter(|e| e.reason() == Some(waverun_core::Reason::MinorVersionSkip))
            .count();
        lts += r
            .timeline
            .iter()
            .filter(|e| {
                e.error()
                    .is_some_and(|x| x.code == "LongTermSupportRequired")
            })
            .count();
    }
    assert!(generated > 100, "runs generated: {generated}");
    assert!(waited > 0, "lease waits: {waited}");
    assert!(skips > 0, "minor-version skips: {skips}");
    assert!(lts > 0, "LTS failures: {lts}");
}

/// The curated profile scenarios (`tests/scenarios/profiles/`) satisfy the same invariants.
#[test]
fn curated_profile_scenarios_satisfy_the_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/profiles");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("tests/scenarios/profiles") {
        let path = e.unwrap().path();
        let sc = waverun_host::load_scenario(&path).unwrap_or_else(|e| panic!("{e}"));
        if let Err(e) = run_checked(&sc) {
            panic!("{}: {e}", path.display());
        }
        n += 1;
    }
    assert!(n >= 2);
}
