//! Auto-upgrade profiles (`shared/spec/update-runs.md` section 8, issue "auto-upgrade
//! profiles"): every example of the reference as a test named after it, channel resolution as a
//! table over catalogs, deterministic generation, one run per profile, superseding, catch-up and
//! disabled profiles. Scenarios are YAML in the scenario format; every one starts on Monday
//! 2026-12-07 00:00 UTC, upgrades take 30 minutes and gates are approved at once.

use waverun_core::document::{from_str, Format};
use waverun_core::model::{AutoUpgradeProfile, ReleaseCatalog, UpgradeChannel};
use waverun_core::profile::{generated_run_name, kubernetes_target, Generation, TriggerStatus};
use waverun_core::sim::{simulate, Scenario, Simulation, SimulationReport};
use waverun_core::state::MemberStatus;
use waverun_core::{Command, Engine, ErrorCode, EventKind, Input, Reason, State, Timestamp};

const START: &str = "start: 2026-12-07T00:00:00Z\nautoApprove: true\n";
const LINUX: &str = "AKSUbuntu-2204gen2containerd";
const WINDOWS: &str = "AKSWindows-2022-containerd";

fn scenario(yaml: &str) -> Scenario {
    let text = format!("{START}{yaml}");
    from_str(&text, Format::Yaml).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn sim(yaml: &str) -> SimulationReport {
    simulate(&scenario(yaml)).unwrap_or_else(|e| panic!("invalid scenario: {e}"))
}

fn t(s: &str) -> Timestamp {
    s.parse().expect("RFC 3339")
}

/// A Linux member on `version` with one pool on `AKSUbuntu-...-202411.03.0`.
fn member(name: &str, version: &str) -> String {
    member_in(name, version, "eastus", "")
}

fn member_in(name: &str, version: &str, region: &str, extra: &str) -> String {
    format!(
        "  - {{name: {name}, region: {region}, kubernetesVersion: {version}, nodePools: [{{name: system, osType: Linux, imageVersion: {LINUX}-202411.03.0}}]{extra}}}\n"
    )
}

fn members(list: &[String]) -> String {
    format!("members:\n{}", list.concat())
}

/// A catalog: `(version, available since, flags)`; images are always there.
fn kubernetes(releases: &[(&str, &str, &str)]) -> String {
    let mut out = String::from("releases:\n  kubernetes:\n");
    for (v, at, flags) in releases {
        out.push_str(&format!(
            "    - {{version: {v}, available: {{'*': {at}}}{flags}}}\n"
        ));
    }
    out.push_str(&format!(
        "  nodeImages:\n    - {{version: {LINUX}-202411.03.0, available: {{'*': 2026-11-01T00:00:00Z}}}}\n"
    ));
    out
}

fn profile(yaml: &str) -> String {
    format!("profiles:\n  - {{{yaml}}}\n")
}

/// `(run, kind)` of every run-level event, in order.
fn run_events(r: &SimulationReport) -> Vec<(String, EventKind)> {
    r.timeline
        .iter()
        .filter(|e| {
            matches!(
                e.kind(),
                EventKind::RunGenerated
                    | EventKind::RunStarted
                    | EventKind::RunCompleted
                    | EventKind::RunFailed
                    | EventKind::RunStopped
                    | EventKind::RunDeleted
            )
        })
        .map(|e| (e.run.clone(), e.kind()))
        .collect()
}

fn generated(r: &SimulationReport) -> Vec<(String, Vec<String>, String)> {
    r.timeline
        .iter()
        .filter(|e| e.kind() == EventKind::RunGenerated)
        .map(|e| {
            (
                e.run.clone(),
                e.versions().to_vec(),
                waverun_core::fmt_time(e.at),
            )
        })
        .collect()
}

fn run_member<'a>(r: &'a SimulationReport, run: &str, m: &str) -> &'a MemberStatus {
    let run = r
        .runs
        .iter()
        .find(|x| x.name == run)
        .unwrap_or_else(|| panic!("no run {run} in the report"));
    run.status
        .stages
        .iter()
        .flat_map(|s| &s.groups)
        .flat_map(|g| &g.members)
        .find(|x| x.name == m)
        .unwrap_or_else(|| panic!("no member {m} in run {}", run.name))
}

fn run_state(r: &SimulationReport, run: &str) -> State {
    r.runs
        .iter()
        .find(|x| x.name == run)
        .unwrap_or_else(|| panic!("no run {run}"))
        .status
        .status
        .state
}

fn v(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

// =============================================================================================
// Channels, as the reference describes them

#[test]
fn rapid_follows_patches_of_the_newest_minor_and_moves_1_30_clusters_to_the_latest_1_31_patch_when_1_31_is_published(
) {
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("a", "1.30.2")]),
        kubernetes(&[
            ("1.29.9", "2026-10-01T00:00:00Z", ""),
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.3", "2026-12-08T00:00:00Z", ""),
            ("1.31.0", "2026-12-10T00:00:00Z", ""),
            ("1.31.1", "2026-12-10T00:00:00Z", ""),
        ]),
        profile("name: fast, channel: Rapid")
    ));
    assert_eq!(
        generated(&r),
        [
            (
                "auto-fast-rapid-1-30-3".into(),
                v(&["1.30.3"]),
                "2026-12-08T00:00:00Z".into()
            ),
            (
                "auto-fast-rapid-1-31-1".into(),
                v(&["1.31.1"]),
                "2026-12-10T00:00:00Z".into()
            ),
        ]
    );
    assert_eq!(run_state(&r, "auto-fast-rapid-1-31-1"), State::Completed);
    assert_eq!(
        run_member(&r, "auto-fast-rapid-1-31-1", "a")
            .kubernetes_version
            .as_deref(),
        Some("1.31.1")
    );
}

#[test]
fn stable_follows_patches_of_minor_n_minus_1_and_moves_1_29_clusters_to_the_latest_1_30_patch_when_1_31_appears(
) {
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("a", "1.29.4")]),
        kubernetes(&[
            ("1.29.4", "2026-10-01T00:00:00Z", ""),
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.29.5", "2026-12-08T00:00:00Z", ""),
            ("1.30.3", "2026-12-09T00:00:00Z", ""),
            ("1.31.0", "2026-12-10T00:00:00Z", ""),
        ]),
        profile("name: steady, channel: Stable")
    ));
    // 1.29 patches while 1.30 is the newest minor; the 1.30.3 patch does not move a Stable
    // profile (N-1 is still 1.29); 1.31 makes 1.30 the N-1 minor.
    assert_eq!(
        generated(&r),
        [
            (
                "auto-steady-stable-1-29-5".into(),
                v(&["1.29.5"]),
                "2026-12-08T00:00:00Z".into()
            ),
            (
                "auto-steady-stable-1-30-3".into(),
                v(&["1.30.3"]),
                "2026-12-10T00:00:00Z".into()
            ),
        ]
    );
    assert_eq!(
        run_member(&r, "auto-steady-stable-1-30-3", "a")
            .kubernetes_version
            .as_deref(),
        Some("1.30.3")
    );
}

#[test]
fn stable_on_1_17_7_with_1_17_9_1_18_4_1_18_6_and_1_19_1_available_targets_1_18_6() {
    let catalog: ReleaseCatalog = from_str(
        "kubernetes:\n- {version: 1.17.7, available: {'*': 2020-01-01T00:00:00Z}}\n- {version: 1.17.9, available: {'*': 2020-01-01T00:00:00Z}}\n- {version: 1.18.4, available: {'*': 2020-01-01T00:00:00Z}}\n- {version: 1.18.6, available: {'*': 2020-01-01T00:00:00Z}}\n- {version: 1.19.1, available: {'*': 2020-01-01T00:00:00Z}}\n",
        Format::Yaml,
    )
    .unwrap();
    let p = aup("name: s, channel: Stable");
    let catalog = waverun_core::catalog::Catalog::new(catalog);
    let target = kubernetes_target(&p, &catalog, t("2020-02-01T00:00:00Z")).unwrap();
    assert_eq!(target.to_string(), "1.18.6");
    // And a member on 1.17.7 is upgraded to it.
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("a", "1.17.7")]),
        kubernetes(&[
            ("1.17.7", "2026-01-01T00:00:00Z", ""),
            ("1.17.9", "2026-01-01T00:00:00Z", ""),
            ("1.18.4", "2026-01-01T00:00:00Z", ""),
            ("1.18.6", "2026-12-08T00:00:00Z", ""),
            ("1.19.1", "2026-01-01T00:00:00Z", ""),
        ]),
        profile("name: s, channel: Stable")
    ));
    assert_eq!(
        run_member(&r, "auto-s-stable-1-18-6", "a")
            .kubernetes_version
            .as_deref(),
        Some("1.18.6")
    );
}

#[test]
fn target_kubernetes_version_1_30_with_1_30_5_published_generates_a_run_targeting_1_30_5_and_never_another_minor(
) {
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("a", "1.30.2"), member("b", "1.29.8")]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.5", "2026-12-08T00:00:00Z", ""),
            ("1.31.2", "2026-12-09T00:00:00Z", ""),
        ]),
        profile(
            "name: patches, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\""
        )
    ));
    assert_eq!(
        generated(&r),
        [(
            "auto-patches-targetkubernetesversion-1-30-5".into(),
            v(&["1.30.5"]),
            "2026-12-08T00:00:00Z".into()
        )]
    );
    let run = r
        .runs
        .iter()
        .find(|x| x.name == "auto-patches-targetkubernetesversion-1-30-5")
        .unwrap();
    assert_eq!(run.auto_upgrade_profile_name.as_deref(), Some("patches"));
    assert_eq!(run.status.status.state, State::Completed);
    for m in ["a", "b"] {
        assert_eq!(
            run_member(&r, "auto-patches-targetkubernetesversion-1-30-5", m)
                .kubernetes_version
                .as_deref(),
            Some("1.30.5")
        );
    }
}

#[test]
fn target_1_29_with_lts_while_the_community_supports_up_to_1_33_targets_1_29_5_and_a_member_without_lts_fails_the_run(
) {
    let yaml = format!(
        "{}{}  minors:\n    - {{minor: \"1.29\", support: LTSOnly}}\n{}",
        members(&[
            member_in("lts", "1.29.3", "eastus", ", longTermSupport: true"),
            member("plain", "1.29.3"),
        ]),
        kubernetes(&[
            ("1.29.3", "2026-11-01T00:00:00Z", ""),
            ("1.29.5", "2026-12-08T00:00:00Z", ""),
            ("1.33.1", "2026-11-01T00:00:00Z", ""),
        ]),
        profile("name: lts, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.29\", longTermSupport: true")
    );
    let r = sim(&yaml);
    assert_eq!(generated(&r)[0].1, v(&["1.29.5"]));
    let run = &r.runs[0].status.status;
    assert_eq!(run.state, State::Failed);
    assert_eq!(run.error.as_ref().unwrap().code, "FailureThresholdExceeded");
    let plain = run_member(&r, "auto-lts-targetkubernetesversion-1-29-5", "plain");
    assert_eq!(plain.status.state, State::Failed);
    let err = plain.status.error.as_ref().unwrap();
    assert_eq!(err.code, "LongTermSupportRequired");
    assert!(err.message.contains("LTS"), "{}", err.message);
    assert_eq!(
        run_state(&r, "auto-lts-targetkubernetesversion-1-29-5"),
        State::Failed
    );
    // The same pinned minor without longTermSupport is never targeted.
    let without =
        aup("name: x, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.29\"");
    let sc = scenario(&yaml);
    let catalog = waverun_core::catalog::Catalog::new(sc.catalog());
    let why = kubernetes_target(&without, &catalog, t("2026-12-09T00:00:00Z")).unwrap_err();
    assert!(why.contains("LTSOnly"), "{why}");
}

#[test]
fn node_image_channel_moves_a_windows_pool_from_240716_to_240916_and_each_family_follows_its_own() {
    let r = sim(&format!(
        r#"members:
  - name: mixed
    region: eastus
    kubernetesVersion: 1.30.4
    nodePools:
      - {{name: linux, osType: Linux, imageVersion: {LINUX}-202411.03.0}}
      - {{name: win, osType: Windows, imageVersion: {WINDOWS}-20348.2582.240716}}
      - {{name: snap, osType: Linux, imageVersion: {LINUX}-202411.03.0, fromSnapshot: true}}
releases:
  kubernetes: [{{version: 1.30.4, available: {{'*': 2026-11-01T00:00:00Z}}}}]
  nodeImages:
    - {{version: {LINUX}-202411.03.0, available: {{'*': 2026-11-01T00:00:00Z}}}}
    - {{version: {WINDOWS}-20348.2582.240716, available: {{'*': 2026-11-01T00:00:00Z}}}}
    - {{version: {WINDOWS}-20348.2582.240916, available: {{'*': 2026-12-08T00:00:00Z}}}}
    - {{version: {LINUX}-202412.01.0, available: {{'*': 2026-12-09T00:00:00Z}}}}
{}"#,
        profile("name: images, channel: NodeImage")
    ));
    let runs = generated(&r);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(
        runs[0].1,
        v(&[
            &format!("{LINUX}-202411.03.0"),
            &format!("{WINDOWS}-20348.2582.240916")
        ])
    );
    let m = run_member(&r, &runs[0].0, "mixed");
    let images: Vec<(&str, &str)> = m
        .node_images
        .iter()
        .map(|p| (p.node_pool.as_str(), p.image_version.as_str()))
        .collect();
    assert_eq!(
        images,
        [("win", "AKSWindows-2022-containerd-20348.2582.240916")]
    );
    // The Linux release moves both Linux pools, the one made from a snapshot too.
    let m = run_member(&r, &runs[1].0, "mixed");
    let images: Vec<(&str, &str)> = m
        .node_images
        .iter()
        .map(|p| (p.node_pool.as_str(), p.image_version.as_str()))
        .collect();
    assert_eq!(
        images,
        [
            ("linux", "AKSUbuntu-2204gen2containerd-202412.01.0"),
            ("snap", "AKSUbuntu-2204gen2containerd-202412.01.0")
        ]
    );
    assert!(
        runs[1].0.starts_with("auto-images-nodeimage-")
            && runs[1].0.len() == "auto-images-nodeimage-".len() + 8
    );
}

#[test]
fn security_patch_channel_updates_linux_pools_only_and_says_why_windows_pools_are_skipped() {
    let r = sim(&format!(
        r#"members:
  - name: mixed
    region: eastus
    kubernetesVersion: 1.30.4
    nodePools:
      - {{name: linux, osType: Linux, imageVersion: {LINUX}-202411.03.0}}
      - {{name: win, osType: Windows, imageVersion: {WINDOWS}-20348.2582.240716}}
  - name: windows-only
    region: eastus
    kubernetesVersion: 1.30.4
    nodePools:
      - {{name: win, osType: Windows, imageVersion: {WINDOWS}-20348.2582.240716}}
releases:
  kubernetes: [{{version: 1.30.4, available: {{'*': 2026-11-01T00:00:00Z}}}}]
  nodeImages:
    - {{version: {LINUX}-202411.03.0, available: {{'*': 2026-11-01T00:00:00Z}}}}
    - {{version: {LINUX}-202411.20.0, available: {{'*': 2026-12-08T00:00:00Z}}}}
    - {{version: {LINUX}-202411.21.0, available: {{'*': 2026-12-09T00:00:00Z}}, securityPatch: true}}
    - {{version: {WINDOWS}-20348.2582.240916, available: {{'*': 2026-12-09T00:00:00Z}}, securityPatch: true, osType: Windows}}
{}"#,
        profile("name: sec, channel: SecurityPatch")
    ));
    // The plain image of 12-08 is not a security patch: nothing then.
    let runs = generated(&r);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].2, "2026-12-09T00:00:00Z");
    assert_eq!(runs[0].1, v(&[&format!("{LINUX}-202411.21.0")]));
    let mixed = run_member(&r, &runs[0].0, "mixed");
    assert_eq!(mixed.status.state, State::Completed);
    assert_eq!(mixed.node_images.len(), 1);
    assert_eq!(mixed.node_images[0].node_pool, "linux");
    let note = mixed.message.as_deref().unwrap_or_default();
    assert!(
        note.contains("Windows pools left alone") && note.contains("win"),
        "{note}"
    );
    let win = run_member(&r, &runs[0].0, "windows-only");
    assert_eq!(win.status.state, State::Skipped);
    let note = win.message.as_deref().unwrap_or_default();
    assert!(
        note.contains("SecurityPatch channel updates Linux pools only"),
        "{note}"
    );
}

// =============================================================================================
// Only GA, never across two minors, never down

#[test]
fn previews_are_never_targeted() {
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("a", "1.30.2")]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.31.0", "2026-12-08T00:00:00Z", ", preview: true"),
            ("1.30.3", "2026-12-09T00:00:00Z", ""),
        ]),
        profile("name: fast, channel: Rapid")
    ));
    assert_eq!(
        generated(&r),
        [(
            "auto-fast-rapid-1-30-3".into(),
            v(&["1.30.3"]),
            "2026-12-09T00:00:00Z".into()
        )]
    );
}

#[test]
fn a_member_more_than_one_minor_behind_is_skipped_with_minor_version_skip_saying_a_manual_run_must_bring_it_closer(
) {
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("new", "1.29.2"), member("old", "1.28.9")]),
        kubernetes(&[
            ("1.29.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.1", "2026-12-08T00:00:00Z", ""),
        ]),
        profile("name: fast, channel: Rapid")
    ));
    let old = run_member(&r, "auto-fast-rapid-1-30-1", "old");
    assert_eq!(old.status.state, State::Skipped);
    let msg = old.message.as_deref().unwrap();
    assert!(
        msg.contains("1.28.9") && msg.contains("manual update run") && msg.contains("1.29"),
        "{msg}"
    );
    let skipped = r
        .timeline
        .iter()
        .find(|e| e.kind() == EventKind::MemberSkipped && e.member() == Some("old"))
        .unwrap();
    assert_eq!(skipped.reason(), Some(Reason::MinorVersionSkip));
    // The run itself completes: the member that can move does.
    assert_eq!(run_state(&r, "auto-fast-rapid-1-30-1"), State::Completed);
    assert_eq!(
        run_member(&r, "auto-fast-rapid-1-30-1", "new").status.state,
        State::Completed
    );
}

#[test]
fn a_member_ahead_of_the_target_is_never_downgraded() {
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("behind", "1.29.2"), member("ahead", "1.30.9")]),
        kubernetes(&[
            ("1.29.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.9", "2026-11-01T00:00:00Z", ""),
            ("1.29.3", "2026-12-08T00:00:00Z", ""),
        ]),
        profile("name: p, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.29\"")
    ));
    let ahead = run_member(&r, "auto-p-targetkubernetesversion-1-29-3", "ahead");
    assert_eq!(ahead.status.state, State::Skipped);
    assert!(ahead.kubernetes_version.is_none());
    assert!(!r
        .timeline
        .iter()
        .any(|e| e.kind() == EventKind::MemberStarted && e.member() == Some("ahead")));
}

// =============================================================================================
// Generation: deterministic, generate-and-start vs generateUpdateRun, one run at a time

/// A fleet of three on 1.30.2 (one slow member so runs last), a TargetKubernetesVersion 1.30
/// profile through a stored strategy, and 1.30.5 published on 12-08.
fn patches_fleet(extra_releases: &str, actions: &str) -> String {
    format!(
        "{}{}{extra_releases}strategies:\n  - {{name: rings, strategy: {{stages: [{{name: all, memberSelector: {{byLabel: \"waverun.dev/region\"}}, maxConcurrency: \"1\"}}]}}}}\n{}{actions}",
        members(&[
            member("a", "1.30.2"),
            member("b", "1.30.2"),
            member_in("c", "1.30.2", "eastus", ", behavior: {upgradeMinutes: 600}")
        ]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.5", "2026-12-08T00:00:00Z", ""),
        ]),
        profile("name: patches, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\", updateStrategyName: rings")
    )
}

#[test]
fn a_release_that_matches_the_channel_generates_the_run_and_starts_it_at_the_release_instant() {
    let r = sim(&patches_fleet("", ""));
    assert_eq!(
        run_events(&r)[..2],
        [
            (
                "auto-patches-targetkubernetesversion-1-30-5".into(),
                EventKind::RunGenerated
            ),
            (
                "auto-patches-targetkubernetesversion-1-30-5".into(),
                EventKind::RunStarted
            )
        ]
    );
    let started = r
        .timeline
        .iter()
        .find(|e| e.kind() == EventKind::RunStarted)
        .unwrap();
    assert_eq!(started.at, t("2026-12-08T00:00:00Z"));
    // Every timeline entry names its run when there are profiles.
    assert!(r.timeline.iter().all(|e| !e.run.is_empty()));
}

#[test]
fn generate_update_run_creates_the_run_without_starting_it_and_generating_twice_returns_the_same_run(
) {
    let sc = scenario(&patches_fleet("", ""));
    let mut sim = Simulation::new(&sc).unwrap();
    // 1.30.2 is the newest 1.30 patch and every member runs it: nothing to generate.
    assert!(matches!(
        sim.engine().generation_preview("patches").unwrap(),
        Generation::Nothing { .. }
    ));
    while sim.now() < t("2026-12-07T12:00:00Z") && sim.step() {}
    let engine = sim.driver();
    assert!(matches!(
        engine.generation_preview("patches").unwrap(),
        Generation::Nothing { .. }
    ));
    // After the release (the engine generated and started a run already): that run is returned.
    while sim.now() < t("2026-12-08T00:10:00Z") && sim.step() {}
    assert_eq!(
        sim.engine().generation_preview("patches").unwrap(),
        Generation::Existing {
            run: "auto-patches-targetkubernetesversion-1-30-5".into()
        }
    );

    // On an engine that did not see the release happen (the catalog given with it already in),
    // generateUpdateRun creates the run, not started, and again returns the same one.
    let mut e = Engine::new(t("2026-12-09T00:00:00Z"));
    for (_, cmd) in sc.setup_commands() {
        e.handle_input(t("2026-12-09T00:00:00Z"), Input::Command(cmd))
            .unwrap();
    }
    // The profile was created with 1.30.5 already in the catalog: its baseline, no run.
    assert_eq!(e.run_names().count(), 0);
    let preview = e.generation_preview("patches").unwrap();
    assert_eq!(
        preview,
        Generation::New {
            run: "auto-patches-targetkubernetesversion-1-30-5".into(),
            versions: v(&["1.30.5"])
        }
    );
    let gen = Command::GenerateUpdateRun {
        profile: "patches".into(),
    };
    e.handle_command_at(t("2026-12-09T00:00:00Z"), gen.clone())
        .unwrap();
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-5"),
        Some(State::NotStarted)
    );
    assert_eq!(
        e.run_generated_by("auto-patches-targetkubernetesversion-1-30-5"),
        Some(("patches", &v(&["1.30.5"])[..]))
    );
    e.handle_command_at(t("2026-12-09T00:01:00Z"), gen).unwrap();
    assert_eq!(
        e.run_names().collect::<Vec<_>>(),
        ["auto-patches-targetkubernetesversion-1-30-5"]
    );
    assert_eq!(
        e.generation_preview("patches").unwrap(),
        Generation::Existing {
            run: "auto-patches-targetkubernetesversion-1-30-5".into()
        }
    );
    let (_, status) = e.profile("patches").unwrap();
    assert_eq!(status.last_trigger_status, Some(TriggerStatus::Succeeded));
    assert_eq!(status.last_trigger_upgrade_versions, v(&["1.30.5"]));
    assert_eq!(
        status.last_update_run_name.as_deref(),
        Some("auto-patches-targetkubernetesversion-1-30-5")
    );
}

#[test]
fn the_same_scenario_generates_the_same_runs_with_the_same_names_every_time() {
    const TKV: UpgradeChannel = UpgradeChannel::TargetKubernetesVersion;
    let yaml = patches_fleet("", "");
    let a = serde_json::to_string(&sim(&yaml)).unwrap();
    let b = serde_json::to_string(&sim(&yaml)).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        generated_run_name("patches", TKV, &v(&["1.30.5"]), 1),
        "auto-patches-targetkubernetesversion-1-30-5"
    );
    assert_eq!(
        generated_run_name("patches", TKV, &v(&["1.30.5"]), 2),
        "auto-patches-targetkubernetesversion-1-30-5-2"
    );
    let images = v(&["AKSUbuntu-2204gen2containerd-202412.01.0"]);
    assert_eq!(
        generated_run_name("nightly", UpgradeChannel::NodeImage, &images, 1),
        generated_run_name("nightly", UpgradeChannel::NodeImage, &images, 1)
    );
    // Azure's form: `auto-{profile}-{channel}-...` (what `az fleet`'s tests check).
    assert_eq!(
        generated_run_name("aup1", UpgradeChannel::Rapid, &v(&["1.33.0"]), 1),
        "auto-aup1-rapid-1-33-0"
    );
    let long = "p".repeat(50);
    let name = generated_run_name(&long, TKV, &v(&["1.30.5"]), 12);
    assert!(name.len() <= 50, "{name}");
    assert!(name.starts_with("auto-ppp"), "{name}");
    assert!(name.ends_with("-12"), "{name}");
    assert_ne!(
        name,
        generated_run_name(&"q".repeat(50), TKV, &v(&["1.30.5"]), 12)
    );
}

#[test]
fn a_newer_target_waits_for_the_profiles_running_run_to_end_and_then_only_the_newest_runs() {
    let r = sim(&patches_fleet(
        "",
        "",
    )
    .replace(
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n",
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n    - {version: 1.30.6, available: {'*': 2026-12-08T01:00:00Z}}\n    - {version: 1.30.7, available: {'*': 2026-12-08T02:00:00Z}}\n",
    ));
    // 1.30.5 runs from 00:00 (c takes 10 hours); 1.30.6 and 1.30.7 arrive meanwhile; when the
    // first run ends, only the newest, 1.30.7, runs.
    let gens = generated(&r);
    assert_eq!(gens.len(), 2, "{gens:?}");
    assert_eq!(gens[1].0, "auto-patches-targetkubernetesversion-1-30-7");
    let first_end = r
        .timeline
        .iter()
        .find(|e| {
            e.kind() == EventKind::RunCompleted
                && e.run == "auto-patches-targetkubernetesversion-1-30-5"
        })
        .unwrap()
        .at;
    assert_eq!(waverun_core::fmt_time(first_end), gens[1].2);
    let in_flight = |at: Timestamp| {
        r.runs
            .iter()
            .filter(|x| {
                x.status.status.start_time.is_some_and(|s| s <= at)
                    && x.status.status.completed_time.is_none_or(|c| c > at)
            })
            .count()
    };
    assert_eq!(in_flight(t("2026-12-08T05:00:00Z")), 1);
}

#[test]
fn the_profile_status_says_which_run_the_next_target_waits_for() {
    let sc = scenario(&patches_fleet(
        "",
        "",
    )
    .replace(
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n",
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n    - {version: 1.30.6, available: {'*': 2026-12-08T01:00:00Z}}\n",
    ));
    let mut sim = Simulation::new(&sc).unwrap();
    while sim.now() < t("2026-12-08T02:00:00Z") && sim.step() {}
    let (_, status) = sim.engine().profile("patches").unwrap();
    let next = status.next_target.as_ref().expect("a next target");
    assert_eq!(next.versions, v(&["1.30.6"]));
    assert!(
        next.message
            .contains("auto-patches-targetkubernetesversion-1-30-5"),
        "{}",
        next.message
    );
    assert_eq!(status.last_trigger_upgrade_versions, v(&["1.30.5"]));
    assert_eq!(status.last_triggered_at, Some(t("2026-12-08T00:00:00Z")));
    assert!(status
        .last_trigger_message
        .as_deref()
        .unwrap()
        .contains("generated and started update run auto-patches-targetkubernetesversion-1-30-5"));
}

#[test]
fn a_generated_run_not_started_yet_is_superseded_by_a_newer_target() {
    // The engine is set up with 1.30.5 in the catalog already (its baseline), and
    // generateUpdateRun creates the 1.30.5 run without starting it; 1.30.6 then supersedes it.
    let mut e = Engine::new(t("2026-12-08T00:00:00Z"));
    let sc = scenario(&patches_fleet("", ""));
    for (_, cmd) in sc.setup_commands() {
        e.handle_input(t("2026-12-08T00:00:00Z"), Input::Command(cmd))
            .unwrap();
    }
    let at = t("2026-12-08T00:00:00Z");
    e.handle_command_at(
        at,
        Command::GenerateUpdateRun {
            profile: "patches".into(),
        },
    )
    .unwrap();
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-5"),
        Some(State::NotStarted)
    );
    e.handle_input(
        t("2026-12-08T01:00:00Z"),
        Input::Observation(waverun_core::Observation::KubernetesReleased {
            version: "1.30.6".into(),
            region: "*".into(),
            since: t("2026-12-08T01:00:00Z"),
            preview: false,
        }),
    )
    .unwrap();
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-5"),
        None,
        "superseded: deleted"
    );
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-6"),
        Some(State::Running)
    );
    let mut deleted = false;
    let mut message = None;
    while let Some(o) = e.poll_output() {
        if let waverun_core::Output::Event(ev) = o {
            deleted |= ev.kind() == EventKind::RunDeleted
                && ev.run == "auto-patches-targetkubernetesversion-1-30-5";
            if ev.kind() == EventKind::RunGenerated {
                message = ev.message().map(str::to_string);
            }
        }
    }
    assert!(deleted);
    assert!(
        message
            .as_deref()
            .unwrap()
            .contains("supersedes run auto-patches-targetkubernetesversion-1-30-5"),
        "{message:?}"
    );
}

#[test]
fn a_user_cannot_start_a_second_generated_run_of_a_profile_while_one_runs() {
    let mut e = Engine::new(t("2026-12-08T00:00:00Z"));
    let sc = scenario(&patches_fleet("", ""));
    for (_, cmd) in sc.setup_commands() {
        e.handle_input(t("2026-12-08T00:00:00Z"), Input::Command(cmd))
            .unwrap();
    }
    let at = t("2026-12-08T00:00:00Z");
    e.handle_command_at(
        at,
        Command::GenerateUpdateRun {
            profile: "patches".into(),
        },
    )
    .unwrap();
    e.handle_command_at(
        at,
        Command::StartRun {
            name: "auto-patches-targetkubernetesversion-1-30-5".into(),
        },
    )
    .unwrap();
    // A member joins behind 1.30.5 while the run runs: its catch-up run waits for it.
    e.handle_command_at(
        t("2026-12-08T00:05:00Z"),
        Command::UpsertMember {
            member: from_str(
                &format!("{{name: late, region: eastus, kubernetesVersion: 1.30.2, nodePools: [{{name: system, osType: Linux, imageVersion: {LINUX}-202411.03.0}}]}}"),
                Format::Yaml,
            )
            .unwrap(),
        },
    )
    .unwrap();
    assert_eq!(e.run_names().count(), 1);
    let (_, status) = e.profile("patches").unwrap();
    assert!(status
        .next_target
        .as_ref()
        .unwrap()
        .message
        .contains("waits for update run \"auto-patches-targetkubernetesversion-1-30-5\""));
    // Stop the run: once it drained, the catch-up run starts at once (a Stopped run has
    // ended for its profile) — and the stopped one cannot be resumed while that one runs.
    e.handle_command_at(
        t("2026-12-08T00:06:00Z"),
        Command::StopRun {
            name: "auto-patches-targetkubernetesversion-1-30-5".into(),
        },
    )
    .unwrap();
    // `a` is in flight (30 minutes): the run is Stopping, so nothing new yet.
    assert_eq!(e.run_names().count(), 1);
    e.handle_input(
        t("2026-12-08T00:30:00Z"),
        Input::Observation(waverun_core::Observation::UpgradeSucceeded {
            operation_id: "auto-patches-targetkubernetesversion-1-30-5/a".into(),
        }),
    )
    .unwrap();
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-5"),
        Some(State::Stopped)
    );
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-5-2"),
        Some(State::Running)
    );
    // Resuming the stopped run now is refused: one run per profile at a time.
    let err = e
        .handle_command_at(
            t("2026-12-08T00:31:00Z"),
            Command::StartRun {
                name: "auto-patches-targetkubernetesversion-1-30-5".into(),
            },
        )
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidState);
    assert!(
        err.message.contains("one update run at a time"),
        "{}",
        err.message
    );
}

#[test]
fn a_member_in_flight_in_a_manual_run_holds_its_lease_against_a_generated_run() {
    let r = sim(&format!(
        "{}{}{}run:\n  name: manual\n  managedClusterUpdate: {{upgrade: {{type: Full, kubernetesVersion: 1.30.3}}}}\nactions:\n  - {{at: 2026-12-07T23:50:00Z, do: start}}\n",
        members(&[member_in("a", "1.30.2", "eastus", ", behavior: {upgradeMinutes: 60}")]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.3", "2026-11-01T00:00:00Z", ""),
            ("1.30.5", "2026-12-08T00:00:00Z", ""),
        ]),
        profile("name: patches, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\"")
    ));
    let pending = r
        .timeline
        .iter()
        .find(|e| {
            e.kind() == EventKind::MemberPending
                && e.run == "auto-patches-targetkubernetesversion-1-30-5"
        })
        .expect("the generated run waits");
    assert_eq!(pending.reason(), Some(Reason::Lease));
    let started = r
        .timeline
        .iter()
        .find(|e| {
            e.kind() == EventKind::MemberStarted
                && e.run == "auto-patches-targetkubernetesversion-1-30-5"
        })
        .unwrap();
    assert_eq!(started.at, t("2026-12-08T00:50:00Z"));
    // The report has the scenario's run first, then the generated one.
    let names: Vec<&str> = r.runs.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(
        names,
        ["manual", "auto-patches-targetkubernetesversion-1-30-5"]
    );
    assert_eq!(r.run.as_ref().unwrap().name, "manual");
}

// =============================================================================================
// Catch-up

#[test]
fn a_member_that_joins_the_fleet_behind_the_target_triggers_a_catch_up_run_through_the_same_strategy(
) {
    let yaml = patches_fleet("", "").replace(
        "members:\n",
        &format!(
            "members:\n{}",
            member_in(
                "late",
                "1.30.2",
                "eastus",
                ", joinsAt: 2026-12-10T00:00:00Z"
            )
        ),
    );
    let r = sim(&yaml);
    let gens = generated(&r);
    assert_eq!(
        gens.iter()
            .map(|g| (g.0.as_str(), g.2.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                "auto-patches-targetkubernetesversion-1-30-5",
                "2026-12-08T00:00:00Z"
            ),
            (
                "auto-patches-targetkubernetesversion-1-30-5-2",
                "2026-12-10T00:00:00Z"
            )
        ]
    );
    let catch_up = r
        .runs
        .iter()
        .find(|x| x.name == "auto-patches-targetkubernetesversion-1-30-5-2")
        .unwrap();
    assert_eq!(
        catch_up.status.stages[0].name, "all",
        "the profile's strategy"
    );
    assert_eq!(
        run_member(&r, "auto-patches-targetkubernetesversion-1-30-5-2", "late")
            .status
            .state,
        State::Completed
    );
    for m in ["a", "b", "c"] {
        assert_eq!(
            run_member(&r, "auto-patches-targetkubernetesversion-1-30-5-2", m)
                .status
                .state,
            State::Skipped,
            "{m} is at the target already"
        );
    }
    // A member that joins at the target triggers nothing.
    let yaml = patches_fleet("", "").replace(
        "members:\n",
        &format!(
            "members:\n{}",
            member_in(
                "late",
                "1.30.5",
                "eastus",
                ", joinsAt: 2026-12-10T00:00:00Z"
            )
        ),
    );
    assert_eq!(generated(&sim(&yaml)).len(), 1);
}

#[test]
fn a_stopped_member_is_included_in_the_next_generated_run() {
    // The run is stopped while c waits its turn (a and b done): c missed 1.30.5 and gets
    // 1.30.6 with the next run.
    let yaml = patches_fleet(
        "",
        "actions:\n  - {at: 2026-12-08T00:45:00Z, do: stop, run: auto-patches-targetkubernetesversion-1-30-5}\n",
    )
    .replace(
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n",
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n    - {version: 1.30.6, available: {'*': 2026-12-09T00:00:00Z}}\n",
    );
    let r = sim(&yaml);
    assert_eq!(
        run_state(&r, "auto-patches-targetkubernetesversion-1-30-5"),
        State::Stopped
    );
    assert_eq!(
        run_member(&r, "auto-patches-targetkubernetesversion-1-30-5", "c")
            .status
            .state,
        State::NotStarted
    );
    assert_eq!(
        run_member(&r, "auto-patches-targetkubernetesversion-1-30-6", "c")
            .kubernetes_version
            .as_deref(),
        Some("1.30.6")
    );
    assert_eq!(
        run_member(&r, "auto-patches-targetkubernetesversion-1-30-6", "c")
            .status
            .state,
        State::Completed
    );
}

#[test]
fn a_member_outside_its_windows_for_the_whole_run_is_included_in_the_next_generated_run() {
    // A closed window never ends a run by itself (the member waits, Pending, saying when it
    // opens): `w` only opens on Saturdays, the run reaches it on Tuesday, and the operator skips
    // it so that the run finishes without it. The next release (the following Monday) finds it
    // behind, and the run started then waits for its window and upgrades it.
    let yaml = format!(
        "{}{}strategies:\n  - {{name: rings, strategy: {{stages: [{{name: all, memberSelector: {{byLabel: \"waverun.dev/region\"}}, maxConcurrency: \"1\"}}]}}}}\n{}actions:\n  - {{at: 2026-12-08T02:00:00Z, do: skip, run: auto-patches-targetkubernetesversion-1-30-5, targets: [\"Member:w\"]}}\n",
        members(&[
            member("a", "1.30.2"),
            member_in(
                "w",
                "1.30.2",
                "eastus",
                ", maintenance: {kubernetes: {schedule: {weekly: {intervalWeeks: 1, dayOfWeek: Saturday}}, durationHours: 4, startTime: \"00:00\", utcOffset: \"+00:00\"}}"
            ),
        ]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.5", "2026-12-08T00:00:00Z", ""),
            ("1.30.6", "2026-12-14T00:00:00Z", ""),
        ]),
        profile("name: patches, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\", updateStrategyName: rings")
    );
    let r = sim(&yaml);
    let w = run_member(&r, "auto-patches-targetkubernetesversion-1-30-5", "w");
    assert_eq!(w.status.state, State::Skipped);
    let w = run_member(&r, "auto-patches-targetkubernetesversion-1-30-6", "w");
    assert_eq!(w.status.state, State::Completed);
    assert_eq!(
        w.status.start_time,
        Some(t("2026-12-19T00:00:00Z")),
        "the next Saturday"
    );
}

#[test]
fn a_failed_member_is_included_in_the_next_generated_run_and_does_not_trigger_runs_by_itself() {
    let yaml = format!(
        "{}{}{}",
        members(&[
            member("a", "1.30.2"),
            member_in("flaky", "1.30.2", "eastus", ", behavior: {failAttempts: 1}"),
        ]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.5", "2026-12-08T00:00:00Z", ""),
            ("1.30.6", "2026-12-20T00:00:00Z", ""),
        ]),
        profile(
            "name: patches, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\""
        )
    );
    let r = sim(&yaml);
    // One run per release, no run in between for the failure.
    let gens = generated(&r);
    assert_eq!(
        gens.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(),
        [
            "auto-patches-targetkubernetesversion-1-30-5",
            "auto-patches-targetkubernetesversion-1-30-6"
        ]
    );
    assert_eq!(
        run_member(&r, "auto-patches-targetkubernetesversion-1-30-5", "flaky")
            .status
            .state,
        State::Failed
    );
    assert_eq!(
        run_member(&r, "auto-patches-targetkubernetesversion-1-30-6", "flaky")
            .status
            .state,
        State::Completed
    );
}

// =============================================================================================
// Disabled profiles

#[test]
fn a_disabled_profile_generates_nothing_by_itself_but_a_run_when_asked() {
    let r = sim(&format!(
        "{}{}{}",
        members(&[member("a", "1.30.2")]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.5", "2026-12-08T00:00:00Z", ""),
        ]),
        profile("name: patches, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\", disabled: true")
    ));
    assert!(generated(&r).is_empty());
    assert!(r.runs.is_empty());
    // Asked, it generates its run (as Azure answers generateUpdateRun on a disabled profile).
    let sc = scenario(&format!(
        "{}{}{}",
        members(&[member("a", "1.30.2")]),
        kubernetes(&[
            ("1.30.2", "2026-11-01T00:00:00Z", ""),
            ("1.30.5", "2026-11-02T00:00:00Z", ""),
        ]),
        profile("name: patches, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\", disabled: true")
    ));
    let sim = Simulation::new(&sc).unwrap();
    match sim.engine().generation_preview("patches").unwrap() {
        Generation::New { versions, .. } => assert_eq!(versions, vec!["1.30.5".to_string()]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn disabling_a_profile_leaves_the_run_it_started_alone_and_re_enabling_it_catches_up() {
    let sc = scenario(&patches_fleet("", "").replace(
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n",
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n    - {version: 1.30.6, available: {'*': 2026-12-09T00:00:00Z}}\n",
    ));
    let mut sim = Simulation::new(&sc).unwrap();
    while sim.now() < t("2026-12-08T00:10:00Z") && sim.step() {}
    let mut p = sc.profiles[0].clone();
    p.disabled = true;
    sim.driver()
        .handle_input(
            t("2026-12-08T00:10:00Z"),
            Input::Command(Command::UpsertProfile { profile: p.clone() }),
        )
        .unwrap();
    sim.drain();
    while sim.now() < t("2026-12-10T00:00:00Z") && sim.step() {}
    // The run went on to its end; 1.30.6 came while disabled and generated nothing.
    assert_eq!(
        sim.engine()
            .run_state("auto-patches-targetkubernetesversion-1-30-5"),
        Some(State::Completed)
    );
    assert_eq!(
        sim.engine()
            .run_state("auto-patches-targetkubernetesversion-1-30-6"),
        None
    );
    let (_, status) = sim.engine().profile("patches").unwrap();
    assert!(status
        .next_target
        .as_ref()
        .unwrap()
        .message
        .contains("disabled"));
    p.disabled = false;
    sim.driver()
        .handle_input(
            t("2026-12-10T00:00:00Z"),
            Input::Command(Command::UpsertProfile { profile: p }),
        )
        .unwrap();
    sim.drain();
    assert_eq!(
        sim.engine()
            .run_state("auto-patches-targetkubernetesversion-1-30-6"),
        Some(State::Running),
        "re-enabled: the missed release runs"
    );
}

#[test]
fn creating_a_profile_or_changing_its_channel_starts_nothing_until_a_release_moves_its_target() {
    let sc = scenario(&patches_fleet("", ""));
    let mut e = Engine::new(t("2026-12-09T00:00:00Z"));
    for (_, cmd) in sc.setup_commands() {
        e.handle_input(t("2026-12-09T00:00:00Z"), Input::Command(cmd))
            .unwrap();
    }
    assert_eq!(e.run_names().count(), 0);
    let mut p = sc.profiles[0].clone();
    p.channel = UpgradeChannel::Rapid;
    p.target_kubernetes_version = None;
    e.handle_command_at(
        t("2026-12-09T00:01:00Z"),
        Command::UpsertProfile { profile: p },
    )
    .unwrap();
    assert_eq!(e.run_names().count(), 0);
    // ... and a release does.
    e.handle_input(
        t("2026-12-09T01:00:00Z"),
        Input::Observation(waverun_core::Observation::KubernetesReleased {
            version: "1.31.1".into(),
            region: "eastus".into(),
            since: t("2026-12-09T01:00:00Z"),
            preview: false,
        }),
    )
    .unwrap();
    assert_eq!(
        e.run_state("auto-patches-rapid-1-31-1"),
        Some(State::Running)
    );
}

// =============================================================================================
// Channel resolution as a table over catalogs

fn aup(yaml: &str) -> AutoUpgradeProfile {
    from_str(&format!("{{{yaml}}}"), Format::Yaml).unwrap()
}

#[test]
fn channel_resolution_over_catalogs_ignores_previews_respects_minor_boundaries_and_lts() {
    // (catalog: version[:preview], minors: "x.y=Support", profile, expected target or an error
    // containing the text)
    let table: &[(&str, &str, &str, Result<&str, &str>)] = &[
        ("1.30.1 1.30.2 1.31.0:p", "", "channel: Rapid", Ok("1.30.2")),
        ("1.30.1 1.31.0 1.31.2", "", "channel: Rapid", Ok("1.31.2")),
        ("1.30.1 1.31.0 1.31.2", "", "channel: Stable", Ok("1.30.1")),
        ("1.31.0 1.31.2", "", "channel: Stable", Err("no GA patch of 1.30")),
        ("1.29.9 1.30.1 1.31.0:p", "", "channel: Stable", Ok("1.29.9")),
        ("1.9.3 1.10.1", "", "channel: Stable", Ok("1.9.3")),
        ("1.30.1 1.30.12 1.30.9", "", "channel: Rapid", Ok("1.30.12")),
        ("1.30.1 1.31.0", "1.31=EndOfSupport", "channel: Rapid", Ok("1.30.1")),
        ("1.30.1", "", "channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\"", Ok("1.30.1")),
        ("1.30.1 1.30.2:p", "", "channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30\"", Ok("1.30.1")),
        ("1.30.1", "", "channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.31\"", Err("no GA patch of 1.31")),
        ("1.29.5 1.33.1", "1.29=LTSOnly", "channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.29\"", Err("LTSOnly")),
        ("1.29.5 1.33.1", "1.29=LTSOnly", "channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.29\", longTermSupport: true", Ok("1.29.5")),
        ("1.29.5 1.33.1", "1.29=EndOfSupport", "channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.29\", longTermSupport: true", Err("end of support")),
        ("1.32.1 1.33.1", "1.32=LTSOnly", "channel: Stable", Err("out of community support")),
        ("1.31.0:p", "", "channel: Rapid", Err("no GA Kubernetes version")),
    ];
    for (versions, minors, profile, expected) in table {
        let mut catalog = String::from("kubernetes:\n");
        for v in versions.split(' ') {
            let (v, preview) = v.split_once(':').map_or((v, false), |(v, _)| (v, true));
            catalog.push_str(&format!(
                "- {{version: {v}, available: {{eastus: 2026-01-01T00:00:00Z}}, preview: {preview}}}\n"
            ));
        }
        if !minors.is_empty() {
            catalog.push_str("minors:\n");
            for m in minors.split(' ') {
                let (minor, support) = m.split_once('=').unwrap();
                catalog.push_str(&format!("- {{minor: \"{minor}\", support: {support}}}\n"));
            }
        }
        let c: ReleaseCatalog = from_str(&catalog, Format::Yaml).unwrap();
        let c = waverun_core::catalog::Catalog::new(c);
        let p = aup(&format!("name: p, {profile}"));
        let got = kubernetes_target(&p, &c, t("2026-06-01T00:00:00Z")).map(|v| v.to_string());
        match (expected, got) {
            (Ok(want), Ok(got)) => assert_eq!(&got, want, "{versions} / {minors} / {profile}"),
            (Err(want), Err(got)) => {
                assert!(got.contains(want), "{versions} / {profile}: {got}")
            }
            (want, got) => panic!("{versions} / {minors} / {profile}: want {want:?}, got {got:?}"),
        }
    }
    // A release not yet available anywhere is not in the catalog yet.
    let c: ReleaseCatalog = from_str(
        "kubernetes:\n- {version: 1.30.1, available: {eastus: 2026-01-01T00:00:00Z}}\n- {version: 1.30.2, available: {eastus: 2026-07-01T00:00:00Z}}\n",
        Format::Yaml,
    )
    .unwrap();
    let c = waverun_core::catalog::Catalog::new(c);
    let p = aup("name: p, channel: Rapid");
    assert_eq!(
        kubernetes_target(&p, &c, t("2026-06-01T00:00:00Z"))
            .unwrap()
            .to_string(),
        "1.30.1"
    );
}

#[test]
fn profile_fields_break_their_rules_with_errors_naming_the_field() {
    let cases: &[(&str, &str)] = &[
        (
            "channel: TargetKubernetesVersion",
            "targetKubernetesVersion: is required",
        ),
        (
            "channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.30.2\"",
            "is not a minor version",
        ),
        (
            "channel: Rapid, targetKubernetesVersion: \"1.30\"",
            "only allowed with the TargetKubernetesVersion channel",
        ),
        (
            "channel: Stable, longTermSupport: true",
            "longTermSupport: is only allowed",
        ),
        (
            "channel: Rapid, nodeImageSelection: {type: Custom}",
            "Custom is not allowed",
        ),
        (
            "channel: NodeImage, nodeImageSelection: {type: Latest}",
            "nodeImageSelection: is not allowed with the NodeImage channel",
        ),
        (
            "channel: Rapid, updateStrategyName: Rings",
            "updateStrategyName",
        ),
    ];
    for (fields, want) in cases {
        let p = aup(&format!("name: p, {fields}"));
        let err = waverun_core::validate::profile(&p).unwrap_err();
        assert!(err.to_string().contains(want), "{fields}: {err}");
    }
    let unknown = from_str::<AutoUpgradeProfile>("{name: p, chanel: Rapid}", Format::Yaml)
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("did you mean channel"), "{unknown}");
    // In a scenario, with the path of the profile.
    let err = waverun_core::sim::simulate(&scenario(&format!(
        "{}{}",
        members(&[member("a", "1.30.2")]),
        profile("name: p, channel: Rapid, updateStrategyName: missing")
    )))
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("profiles[0].updateStrategyName: \"missing\" is not one of the scenario's named strategies"),
        "{err}"
    );
    let err =
        waverun_core::sim::simulate(&scenario(&members(&[member("a", "1.30.2")]))).unwrap_err();
    assert!(err.to_string().contains("run: is required"), "{err}");
}

#[test]
fn a_scenario_without_profiles_reports_exactly_one_run_as_before() {
    let r = sim(&format!(
        "{}{}run:\n  name: r1\n  managedClusterUpdate: {{upgrade: {{type: Full, kubernetesVersion: 1.30.5}}}}\nactions:\n  - {{at: 2026-12-08T00:00:00Z, do: start}}\n",
        members(&[member("a", "1.30.2")]),
        kubernetes(&[("1.30.5", "2026-11-01T00:00:00Z", "")])
    ));
    let json = serde_json::to_value(&r).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["run", "summary", "timeline"]);
    assert!(r.timeline.iter().all(|e| e.run.is_empty()));
}

#[test]
fn the_curated_profile_scenarios_hold_what_their_headers_say() {
    let load = |f: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/profiles")
            .join(f);
        simulate(&waverun_host::load_scenario(&path).unwrap()).unwrap()
    };
    let r = load("patches.yaml");
    assert_eq!(
        generated(&r),
        [
            (
                "auto-patches-targetkubernetesversion-1-30-5".into(),
                v(&["1.30.5"]),
                "2026-12-08T00:00:00Z".into()
            ),
            (
                "auto-patches-targetkubernetesversion-1-30-6".into(),
                v(&["1.30.6"]),
                "2026-12-08T06:30:00Z".into()
            ),
        ]
    );
    assert_eq!(
        run_member(&r, "auto-patches-targetkubernetesversion-1-30-5", "old-1")
            .status
            .state,
        State::Skipped
    );
    let wait = r
        .timeline
        .iter()
        .find(|e| e.kind() == EventKind::MemberPending && e.member() == Some("prod-2"))
        .unwrap();
    assert_eq!(wait.reason(), Some(Reason::VersionNotInRegion));
    assert_eq!(wait.until(), Some(t("2026-12-08T06:00:00Z")));

    let r = load("catch-up.yaml");
    let names: Vec<(String, String)> = generated(&r).into_iter().map(|g| (g.0, g.2)).collect();
    assert_eq!(
        names,
        [
            (
                "auto-images-nodeimage-632cf7e9".into(),
                "2026-12-08T00:00:00Z".into()
            ),
            (
                "auto-images-nodeimage-ef79661a".into(),
                "2026-12-09T00:00:00Z".into()
            ),
            (
                "auto-security-securitypatch-b4bc87fa".into(),
                "2026-12-09T00:00:00Z".into()
            ),
            (
                "auto-images-nodeimage-ef79661a-2".into(),
                "2026-12-10T00:00:00Z".into()
            ),
            (
                "auto-security-securitypatch-b4bc87fa-2".into(),
                "2026-12-10T00:00:00Z".into()
            ),
        ]
    );
    let mixed = run_member(&r, "auto-images-nodeimage-632cf7e9", "mixed-1");
    assert_eq!(mixed.node_images.len(), 1);
    assert_eq!(mixed.node_images[0].node_pool, "win");
    let linux = run_member(&r, "auto-security-securitypatch-b4bc87fa", "linux-1");
    assert_eq!(linux.node_images.len(), 2, "the snapshot pool moves too");
    assert_eq!(
        run_member(&r, "auto-images-nodeimage-ef79661a-2", "late-1")
            .status
            .state,
        State::Completed
    );

    let r = load("actions.yaml");
    let rejected: Vec<(&str, &str)> = r
        .timeline
        .iter()
        .filter(|e| e.kind() == EventKind::ActionRejected)
        .map(|e| (e.run.as_str(), e.error().unwrap().code.as_str()))
        .collect();
    // (generateUpdateRun of the disabled profile is not rejected: it generates nothing, as for
    // an enabled one.)
    assert_eq!(
        rejected,
        [
            ("nope", "NotFound"),
            ("r1", "InvalidState"),
            (
                "auto-patches-targetkubernetesversion-1-30-6",
                "InvalidState"
            )
        ]
    );
    let names: Vec<(String, String)> = generated(&r).into_iter().map(|g| (g.0, g.2)).collect();
    assert_eq!(
        names,
        [
            (
                "auto-patches-targetkubernetesversion-1-30-5".into(),
                "2026-12-08T00:00:00Z".into()
            ),
            (
                "auto-patches-targetkubernetesversion-1-30-6".into(),
                "2026-12-08T01:10:00Z".into()
            ),
        ]
    );
    for m in ["late-0", "late-1"] {
        assert_eq!(
            run_member(&r, "auto-patches-targetkubernetesversion-1-30-6", m)
                .status
                .state,
            State::Completed
        );
    }
}

#[test]
fn with_profiles_a_rejected_action_names_the_run_it_was_for() {
    let r = sim(&patches_fleet(
        "",
        "actions:\n  - {at: 2026-12-07T01:00:00Z, do: start, run: ghost}\n  - {at: 2026-12-07T01:00:00Z, do: generateUpdateRun, profile: patches}\n",
    ));
    let rejected: Vec<&str> = r
        .timeline
        .iter()
        .filter(|e| e.kind() == EventKind::ActionRejected)
        .map(|e| e.run.as_str())
        .collect();
    // generateUpdateRun with nothing behind is not refused: it generates nothing.
    assert_eq!(rejected, ["ghost"]);
}

#[test]
fn a_member_without_lts_fails_a_run_to_an_lts_only_minor_whatever_its_failure_threshold() {
    let yaml = format!(
        "{}{}  minors:\n    - {{minor: \"1.29\", support: LTSOnly}}\nstrategies:\n  - {{name: tolerant, strategy: {{stages: [{{name: all, memberSelector: {{byLabel: \"waverun.dev/region\"}}, maxConcurrency: \"1\", maxAllowedFailures: \"100%\"}}]}}}}\n{}",
        members(&[
            member_in("a-lts", "1.29.3", "eastus", ", longTermSupport: true"),
            member("b-plain", "1.29.3"),
            member_in("c-lts", "1.29.3", "eastus", ", longTermSupport: true"),
        ]),
        kubernetes(&[
            ("1.29.3", "2026-11-01T00:00:00Z", ""),
            ("1.29.5", "2026-12-08T00:00:00Z", ""),
            ("1.33.1", "2026-11-01T00:00:00Z", ""),
        ]),
        profile("name: lts, channel: TargetKubernetesVersion, targetKubernetesVersion: \"1.29\", longTermSupport: true, updateStrategyName: tolerant")
    );
    let r = sim(&yaml);
    let run = &r.runs[0].status.status;
    assert_eq!(
        run.state,
        State::Failed,
        "100% allowed failures do not save it"
    );
    let err = run.error.as_ref().unwrap();
    assert_eq!(err.code, "LongTermSupportRequired");
    assert!(err.message.contains("b-plain"), "{}", err.message);
    // b-plain is failed when its group begins (it needs no slot): nothing starts after it.
    for m in ["a-lts", "c-lts"] {
        assert_eq!(
            run_member(&r, "auto-lts-targetkubernetesversion-1-29-5", m)
                .status
                .state,
            State::NotStarted
        );
    }
}

#[test]
fn a_node_image_reaching_regions_days_apart_is_waited_for_in_each_region_not_skipped() {
    let r = sim(&format!(
        r#"members:
  - {{name: east, region: eastus, kubernetesVersion: 1.30.4, nodePools: [{{name: linux, osType: Linux, imageVersion: {LINUX}-202411.03.0}}]}}
  - {{name: west, region: westeurope, kubernetesVersion: 1.30.4, nodePools: [{{name: linux, osType: Linux, imageVersion: {LINUX}-202411.03.0}}]}}
releases:
  kubernetes: [{{version: 1.30.4, available: {{'*': 2026-11-01T00:00:00Z}}}}]
  nodeImages:
    - {{version: {LINUX}-202411.03.0, available: {{'*': 2026-11-01T00:00:00Z}}}}
    - {{version: {LINUX}-202412.01.0, available: {{eastus: 2026-12-08T00:00:00Z, westeurope: 2026-12-10T00:00:00Z}}}}
{}"#,
        profile("name: images, channel: NodeImage")
    ));
    let gens = generated(&r);
    assert_eq!(gens.len(), 1, "{gens:?}");
    let run = &gens[0].0;
    let west = run_member(&r, run, "west");
    assert_eq!(west.status.state, State::Completed);
    assert_eq!(west.status.start_time, Some(t("2026-12-10T00:00:00Z")));
    let wait = r
        .timeline
        .iter()
        .find(|e| e.kind() == EventKind::MemberPending && e.member() == Some("west"))
        .expect("west waits for its region");
    assert_eq!(wait.reason(), Some(Reason::VersionNotInRegion));
    assert_eq!(wait.until(), Some(t("2026-12-10T00:00:00Z")));
}

#[test]
fn a_run_generated_by_hand_for_a_target_that_waits_is_started_when_the_running_run_ends() {
    let sc = scenario(&patches_fleet("", "").replace(
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n",
        "    - {version: 1.30.5, available: {'*': 2026-12-08T00:00:00Z}}\n    - {version: 1.30.6, available: {'*': 2026-12-08T01:00:00Z}}\n",
    ));
    let mut sim = Simulation::new(&sc).unwrap();
    while sim.now() < t("2026-12-08T02:00:00Z") && sim.step() {}
    // 1.30.6 waits for auto-patches-targetkubernetesversion-1-30-5; generateUpdateRun creates its run now, not started.
    sim.driver()
        .handle_input(
            t("2026-12-08T02:00:00Z"),
            Input::Command(Command::GenerateUpdateRun {
                profile: "patches".into(),
            }),
        )
        .unwrap();
    sim.drain();
    assert_eq!(
        sim.engine()
            .run_state("auto-patches-targetkubernetesversion-1-30-6"),
        Some(State::NotStarted)
    );
    while sim.step() {}
    // When the first run ended, that run was started (a release generates and starts its run).
    assert_eq!(
        sim.engine()
            .run_state("auto-patches-targetkubernetesversion-1-30-5"),
        Some(State::Completed)
    );
    assert_eq!(
        sim.engine()
            .run_state("auto-patches-targetkubernetesversion-1-30-6"),
        Some(State::Completed)
    );
    assert_eq!(sim.engine().run_names().count(), 2);
}

#[test]
fn a_member_that_joins_while_its_profile_is_disabled_is_caught_up_when_it_is_enabled_again() {
    let sc = scenario(&patches_fleet("", ""));
    let mut sim = Simulation::new(&sc).unwrap();
    while sim.now() < t("2026-12-09T00:00:00Z") && sim.step() {}
    assert_eq!(
        sim.engine()
            .run_state("auto-patches-targetkubernetesversion-1-30-5"),
        Some(State::Completed)
    );
    let mut p = sc.profiles[0].clone();
    p.disabled = true;
    let late: waverun_core::Member = from_str(
        &format!("{{name: late, region: eastus, kubernetesVersion: 1.30.2, nodePools: [{{name: system, osType: Linux, imageVersion: {LINUX}-202411.03.0}}]}}"),
        Format::Yaml,
    )
    .unwrap();
    let at = t("2026-12-09T00:00:00Z");
    let e = sim.driver();
    e.handle_command_at(at, Command::UpsertProfile { profile: p.clone() })
        .unwrap();
    e.handle_command_at(at, Command::UpsertMember { member: late })
        .unwrap();
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-5-2"),
        None,
        "disabled: nothing yet"
    );
    p.disabled = false;
    e.handle_command_at(at, Command::UpsertProfile { profile: p })
        .unwrap();
    assert_eq!(
        e.run_state("auto-patches-targetkubernetesversion-1-30-5-2"),
        Some(State::Running)
    );
}
