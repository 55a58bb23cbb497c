//! Input documents (spec section 10): closed schemas with hints, mappings where the model has
//! objects, typed YAML scalars, strict timestamps, names and free text, actions that point at
//! something, and errors printed once with the path as it is in the file.

use waverun_core::document::{document, from_str, Document, Format};
use waverun_core::sim::{simulate, Scenario};
use waverun_core::{Error, UpdateStrategy};

#[test]
fn a_misspelt_gate_list_is_an_error_with_a_hint_not_a_dropped_gate() {
    let yaml = "stages:\n- name: canary\n  beforeGate: [{type: Approval}]\n  groups: [{name: a}]\n";
    let e = strategy_yaml(yaml).unwrap_err();
    assert_first(
        &e,
        "stages[0].beforeGate",
        "unknown field; did you mean beforeGates?",
    );
    let json = r#"{"stages": [{"name": "canary", "beforeGate": [{"type": "Approval"}], "groups": [{"name": "a"}]}]}"#;
    let e = from_str::<UpdateStrategy>(json, Format::Json).unwrap_err();
    assert_eq!(
        e.to_string(),
        "stages[0].beforeGate: unknown field; did you mean beforeGates?"
    );
}

#[test]
fn misspelt_limits_windows_and_versions_are_errors_naming_the_closest_field() {
    let cases = [
        (
            "stages:\n- name: s\n  groups: [{name: a, maxConcurency: 2}]\n",
            "stages[0].groups[0].maxConcurency",
            "maxConcurrency",
        ),
        (
            "stages:\n- name: s\n  groups: [{name: a, maxAllowedFailure: 2}]\n",
            "stages[0].groups[0].maxAllowedFailure",
            "maxAllowedFailures",
        ),
        (
            "stages:\n- name: s\n  groups: [{name: a}]\n  afterStageWaitInSecond: 60\n",
            "stages[0].afterStageWaitInSecond",
            "afterStageWaitInSeconds",
        ),
    ];
    for (yaml, path, hint) in cases {
        let e = strategy_yaml(yaml).unwrap_err();
        assert_first(&e, path, &format!("unknown field; did you mean {hint}?"));
    }
    let window = |extra: &str| {
        scenario_with_member(&format!(
            "maintenance:\n      kubernetes:\n        schedule: {{daily: {{intervalDays: 1}}}}\n        durationHours: 4\n        startTime: '01:00'\n        {extra}\n"
        ))
    };
    let e = Scenario::from_text(&window("utcoffset: '+01:00'"), Format::Yaml).unwrap_err();
    assert_first(
        &e,
        "members[0].maintenance.kubernetes.utcoffset",
        "unknown field; did you mean utcOffset?",
    );
    let e = Scenario::from_text(
        &window("notAllowedDate: [{start: '2026-12-24', end: '2026-12-26'}]"),
        Format::Yaml,
    )
    .unwrap_err();
    assert_first(
        &e,
        "members[0].maintenance.kubernetes.notAllowedDate",
        "unknown field; did you mean notAllowedDates?",
    );
    let e = Scenario::from_text(
        &scenario_with_member(
            "maintenance:\n      kubernetess: {schedule: {daily: {intervalDays: 1}}, durationHours: 4, startTime: '01:00'}\n",
        ),
        Format::Yaml,
    )
    .unwrap_err();
    assert_first(
        &e,
        "members[0].maintenance.kubernetess",
        "unknown field; did you mean kubernetes?",
    );
}

#[test]
fn an_unknown_field_far_from_every_known_one_lists_the_fields() {
    let e =
        strategy_yaml("stages:\n- name: s\n  groups: [{name: a}]\n  colour: red\n").unwrap_err();
    let f = &e.fields[0];
    assert_eq!(f.path, "stages[0].colour");
    assert!(
        f.message
            .starts_with("unknown field; the fields here are name, groups"),
        "{f}"
    );
}

#[test]
fn a_misspelt_enum_value_names_the_closest_value() {
    let e = strategy_yaml(
        "stages:\n- name: s\n  groups: [{name: a}]\n  beforeGates: [{type: Aproval}]\n",
    )
    .unwrap_err();
    assert_first(
        &e,
        "stages[0].beforeGates[0].type",
        "\"Aproval\" is not a known value; did you mean Approval?",
    );
}

#[test]
fn azure_envelope_fields_are_accepted_around_a_resource_and_ignored() {
    let yaml = r#"
id: /subscriptions/0000/resourceGroups/rg/providers/Microsoft.ContainerService/fleets/f/updateStrategies/rings
name: rings
type: Microsoft.ContainerService/fleets/updateStrategies
eTag: '"EtagValue"'
systemData: {createdBy: someone, createdAt: '2026-01-01T00:00:00Z'}
properties:
  provisioningState: Succeeded
  strategy:
    stages:
    - name: canary
      groups: [{name: a}]
"#;
    match document(yaml, Format::Yaml).unwrap() {
        Document::Strategy { strategy, path } => {
            assert_eq!(path, "properties.strategy");
            assert_eq!(strategy.stages[0].name, "canary");
        }
        other => panic!("not a strategy: {other:?}"),
    }
    // The az CLI's flattened view of the same resource.
    let flat = "name: rings\nprovisioningState: Succeeded\neTag: x\nstrategy:\n  stages:\n  - name: canary\n    groups: [{name: a}]\n";
    assert!(matches!(
        document(flat, Format::Yaml).unwrap(),
        Document::Strategy {
            path: "strategy",
            ..
        }
    ));
}

#[test]
fn envelope_fields_are_refused_inside_the_model() {
    let e = strategy_yaml("stages:\n- name: s\n  id: x\n  groups: [{name: a}]\n").unwrap_err();
    assert_eq!(e.fields[0].path, "stages[0].id");
    let resource = "properties:\n  strategy:\n    stages:\n    - name: s\n      groups: [{name: a}]\n  colour: red\n";
    let e = document(resource, Format::Yaml).unwrap_err();
    assert_eq!(e.fields[0].path, "properties.colour");
    let e = document(
        "strategy: {stages: [{name: s, groups: [{name: a}]}]}\nlocation: x\n",
        Format::Yaml,
    )
    .unwrap_err();
    assert_eq!(e.fields[0].path, "location");
}

#[test]
fn a_sequence_in_place_of_an_object_is_refused_in_yaml_and_json() {
    let yaml = "start: '2026-12-07T00:00:00Z'\nmembers: [[a, null, {}, eastus, 1.30.4]]\nrun: {name: r1, managedClusterUpdate: {upgrade: {type: Full, kubernetesVersion: 1.31.2}}}\n";
    let e = Scenario::from_text(yaml, Format::Yaml).unwrap_err();
    assert_eq!(e.fields[0].path, "members[0]");
    assert!(e.fields[0].message.contains("must be a mapping"), "{e}");
    let json = r#"{"start": "2026-12-07T00:00:00Z", "members": [["a", null, {}, "eastus", "1.30.4"]],
        "run": {"name": "r1", "managedClusterUpdate": {"upgrade": {"type": "Full", "kubernetesVersion": "1.31.2"}}}}"#;
    let e = Scenario::from_text(json, Format::Json).unwrap_err();
    assert_eq!(e.fields[0].path, "members[0]");
    assert!(e.fields[0].message.contains("must be a mapping"), "{e}");
    let e = from_str::<UpdateStrategy>(r#"{"stages": [["s", []]]}"#, Format::Json).unwrap_err();
    assert_eq!(e.fields[0].path, "stages[0]");
}

#[test]
fn yaml_scalars_keep_the_type_of_their_string_fields() {
    let text =
        scenario_with_member("labels: {env: no, tier: on, code: '010', plain: 010, v: 1.30}\n")
            .replace("name: m1", "name: y");
    let s = Scenario::from_text(&text, Format::Yaml).unwrap();
    let m = &s.members[0];
    assert_eq!(m.name, "y");
    assert_eq!(m.labels.get("env"), Some("no"));
    assert_eq!(m.labels.get("tier"), Some("on"));
    assert_eq!(m.labels.get("code"), Some("010"));
    assert_eq!(m.labels.get("plain"), Some("010"));
    assert_eq!(m.labels.get("v"), Some("1.30"));
    let st = strategy_yaml(
        "stages:\n- name: s\n  groups: [{name: a}]\n  beforeGates: [{type: Approval, displayName: 1.30}]\n",
    )
    .unwrap();
    assert_eq!(
        st.stages[0].before_gates[0].display_name.as_deref(),
        Some("1.30")
    );
}

#[test]
fn yaml_booleans_are_true_or_false_only() {
    let text = scenario_with_member("").replace("start:", "autoApprove: yes\nstart:");
    let e = Scenario::from_text(&text, Format::Yaml).unwrap_err();
    assert_eq!(e.fields[0].path, "autoApprove");
}

#[test]
fn a_quoted_boolean_is_a_string_and_refused_in_yaml_and_json() {
    for (extra, path) in [
        ("longTermSupport: 'true'\n", "members[0].longTermSupport"),
        ("longTermSupport: \"false\"\n", "members[0].longTermSupport"),
    ] {
        let e = Scenario::from_text(&scenario_with_member(extra), Format::Yaml).unwrap_err();
        assert_eq!(e.fields[0].path, path, "{extra}: {e}");
        assert!(
            e.fields[0].message.contains("without quotes"),
            "{extra}: {e}"
        );
    }
    let text = scenario_with_member("").replace("start:", "autoApprove: 'true'\nstart:");
    let e = Scenario::from_text(&text, Format::Yaml).unwrap_err();
    assert_eq!(e.fields[0].path, "autoApprove");
    // Unquoted, both spellings are booleans.
    let s = Scenario::from_text(
        &scenario_with_member("longTermSupport: true\n"),
        Format::Yaml,
    )
    .unwrap();
    assert!(s.members[0].long_term_support);
    let json = r#"{"stages": [{"name": "s", "groups": [{"name": "a"}]}]}"#;
    assert!(from_str::<UpdateStrategy>(json, Format::Json).is_ok());
    let s = Scenario::from_text(
        &serde_json::to_string(&serde_json::json!({
            "start": "2026-12-07T00:00:00Z",
            "members": [{"name": "m1", "region": "eastus", "kubernetesVersion": "1.30.4",
                         "longTermSupport": "true"}],
        }))
        .unwrap(),
        Format::Json,
    );
    let e = s.unwrap_err();
    assert_eq!(e.fields[0].path, "members[0].longTermSupport", "{e}");
}

#[test]
fn a_json_number_where_a_string_is_expected_is_an_error() {
    let json = r#"{"stages": [{"name": "s", "groups": [{"name": "a"}], "beforeGates": [{"type": "Approval", "displayName": 1.3}]}]}"#;
    let e = from_str::<UpdateStrategy>(json, Format::Json).unwrap_err();
    assert_eq!(e.fields[0].path, "stages[0].beforeGates[0].displayName");
    assert!(e.fields[0].message.contains("expected a string"), "{e}");
}

#[test]
fn a_key_given_twice_is_an_error_in_yaml_and_json() {
    let e = strategy_yaml("stages:\n- name: s\n  name: t\n  groups: [{name: a}]\n").unwrap_err();
    assert_first(
        &e,
        "stages[0].name",
        "is given twice; each key may appear once",
    );
    let e = from_str::<UpdateStrategy>(
        r#"{"stages": [{"name": "s", "groups": [{"name": "a", "maxConcurrency": "1", "maxConcurrency": "9"}]}]}"#,
        Format::Json,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("\"maxConcurrency\" is given twice"),
        "{e}"
    );
    let labels = scenario_with_member("labels: {env: a, env: b}\n");
    let e = Scenario::from_text(&labels, Format::Yaml).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    // In JSON: in a map of the model, in an object of more than 16 keys, and in a value that
    // is read only to be ignored (an Azure envelope field) — never "last one wins".
    let one = Scenario::from_text(&scenario_with_member("labels: {env: a}\n"), Format::Yaml)
        .expect("a valid scenario");
    let json = serde_json::to_string(&one).expect("serialises");
    assert!(json.contains(r#""labels":{"env":"a"}"#), "{json}");
    assert_eq!(
        Scenario::from_text(&json, Format::Json).expect("reads"),
        one
    );
    let labels = json.replace(
        r#""labels":{"env":"a"}"#,
        r#""labels":{"env":"a","env":"b"}"#,
    );
    let e = Scenario::from_text(&labels, Format::Json).unwrap_err();
    assert!(
        e.to_string()
            .contains("\"env\" is given twice in one object (line 1, column"),
        "{e}"
    );
    let many: Vec<String> = (0..20).map(|i| format!(r#""k{i}": {i}"#)).collect();
    let twice = format!(
        r#"{{"systemData": {{{}, "k3": 0}}, "properties": {{"strategy": {{"stages": []}}}}}}"#,
        many.join(", ")
    );
    let e = document(&twice, Format::Json).unwrap_err();
    assert!(e.to_string().contains("\"k3\" is given twice"), "{e}");
    let once = twice.replace(r#", "k3": 0}"#, "}");
    assert!(document(&once, Format::Json).is_ok());
}

#[test]
fn timestamps_must_be_rfc3339_with_a_t_and_errors_name_the_rule() {
    let base = scenario_with_member("");
    for (bad, rule) in [
        ("2026-12-07 00:00:00Z", "separated by 'T', not a space"),
        ("2026-12-07T00:00:00UTC", "offset must be Z"),
        (" 2026-12-07T00:00:00Z", "no spaces"),
        ("2026-12-07T00:00:00+23:59", "within -14:00 and +14:00"),
        ("+262142-01-01T00:00:00Z", "year must be four digits"),
        ("-262143-01-01T00:00:00Z", "year must be four digits"),
        ("2026-12-31T23:59:60Z", "leap seconds"),
        ("2026-12-07", "too short"),
    ] {
        let text = base.replace("'2026-12-07T00:00:00Z'", &format!("'{bad}'"));
        let e = Scenario::from_text(&text, Format::Yaml).unwrap_err();
        let f = &e.fields[0];
        assert_eq!(f.path, "start", "{bad}: {f}");
        assert!(f.message.contains(rule), "{bad}: {f}");
        assert!(!f.message.contains("premature"), "{bad}: {f}");
    }
}

#[test]
fn timestamps_in_releases_freezes_and_actions_are_strict_too() {
    let text = scenario_with_member("")
        + "freezes: [{name: year-end, start: '2026-12-20 00:00:00Z', end: '2027-01-04T00:00:00Z'}]\n";
    let e = Scenario::from_text(&text, Format::Yaml).unwrap_err();
    assert_eq!(e.fields[0].path, "freezes[0].start");
    let text = scenario_with_member("")
        + "releases: {kubernetes: [{version: 1.31.2, available: {eastus: '2026-12-01T00:00:00 UTC'}}]}\n";
    let e = Scenario::from_text(&text, Format::Yaml).unwrap_err();
    assert_eq!(e.fields[0].path, "releases.kubernetes[0].available.eastus");
}

#[test]
fn control_characters_in_display_names_and_approvers_are_refused() {
    let st = strategy_yaml(
        "stages:\n- name: s\n  groups: [{name: a}]\n  beforeGates: [{type: Approval, displayName: \"\\e]0;owned\\a\\e[2J\"}]\n",
    )
    .unwrap();
    let e = waverun_core::validate::strategy(&st).unwrap_err();
    assert_eq!(e.fields[0].path, "stages[0].beforeGates[0].displayName");
    assert!(
        e.fields[0].message.contains("control character U+001B"),
        "{e}"
    );
    let text = scenario_with_member("")
        + "actions:\n- {at: '2026-12-07T00:00:00Z', do: start}\n- {at: '2026-12-07T00:00:00Z', do: approve, gate: {stage: s, timing: Before}, by: \"ops\\u0007\"}\n";
    let s = Scenario::from_text(&text, Format::Yaml).unwrap();
    let e = s.validate().unwrap_err();
    assert_eq!(e.fields[0].path, "actions[1].by");
}

#[test]
fn names_follow_the_azure_rule_everywhere() {
    let text = scenario_with_member("").replace("name: m1", "name: \"m\\t1\"");
    let e = Scenario::from_text(&text, Format::Yaml)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(e.fields[0].path, "members[0].name");
    let text = scenario_with_member("").replace("name: system", "name: \"Sys\\npool\"");
    let e = Scenario::from_text(&text, Format::Yaml)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(e.fields[0].path, "members[0].nodePools[0].name");
}

#[test]
fn actions_that_point_at_nothing_are_errors_with_their_path() {
    let actions = [
        ("{at: '2026-12-07T01:00:00Z', do: approve, gate: {}}", "actions[1].gate", "names no gate"),
        (
            "{at: '2026-12-07T01:00:00Z', do: approve, gate: {stage: nope, timing: Before}}",
            "actions[1].gate.stage",
            "\"nope\" is not a stage of the strategy (stages: s)",
        ),
        (
            "{at: '2026-12-07T01:00:00Z', do: approve, gate: {stage: s, group: nope, timing: Before}}",
            "actions[1].gate.group",
            "\"nope\" is not a group of stage \"s\"",
        ),
        (
            "{at: '2026-12-07T01:00:00Z', do: approve, gate: {stage: s, timing: After}}",
            "actions[1].gate",
            "stage \"s\" has no After gate to approve",
        ),
        (
            "{at: '2026-12-07T01:00:00Z', do: skip, targets: ['Member:nope']}",
            "actions[1].targets[0]",
            "member \"nope\" is not in the fleet",
        ),
        (
            "{at: '2026-12-07T01:00:00Z', do: skip, targets: ['Group:nope']}",
            "actions[1].targets[0]",
            "\"nope\" is not a group of the strategy",
        ),
        (
            "{at: '2026-12-07T01:00:00Z', do: skip, targets: ['AfterStageWait:nope']}",
            "actions[1].targets[0]",
            "\"nope\" is not a stage of the strategy",
        ),
    ];
    for (action, path, message) in actions {
        let text = scenario_with_member("")
            + &format!("actions:\n- {{at: '2026-12-07T00:00:00Z', do: start}}\n- {action}\n");
        let s = Scenario::from_text(&text, Format::Yaml).unwrap();
        let e = s.validate().unwrap_err();
        assert_eq!(e.fields[0].path, path, "{action}: {e}");
        assert!(e.fields[0].message.starts_with(message), "{action}: {e}");
        assert!(
            simulate(&s).is_err(),
            "simulate must refuse what validate refuses"
        );
    }
}

#[test]
fn a_member_in_two_groups_is_an_error_at_the_second_groups_selector() {
    let text = scenario_with_member("labels: {env: prod}\n").replace(
        "groups: [{name: a}]",
        "groups: [{name: a, memberSelector: {byLabel: env=prod}}, {name: b, memberSelector: {byLabel: 'env in (prod)'}}]",
    );
    let s = Scenario::from_text(&text, Format::Yaml).unwrap();
    let e = s.validate().unwrap_err();
    assert_eq!(e.fields.len(), 1, "{e}");
    assert_eq!(
        e.fields[0].path,
        "strategy.stages[0].groups[1].memberSelector.byLabel"
    );
    assert!(
        e.fields[0]
            .message
            .contains("member \"m1\" matches both group \"a\""),
        "{e}"
    );
    assert_eq!(simulate(&s).unwrap_err(), e);
}

#[test]
fn strategy_errors_in_a_scenario_are_reported_once_under_their_own_path() {
    let text = scenario_with_member("").replace("{name: a}", "{name: a, maxConcurrency: '120%'}");
    let e = Scenario::from_text(&text, Format::Yaml)
        .unwrap()
        .validate()
        .unwrap_err();
    let paths: Vec<&str> = e.fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["strategy.stages[0].groups[0].maxConcurrency"],
        "{e}"
    );
}

#[test]
fn control_plane_only_with_a_node_image_selection_is_accepted_and_behaves_as_latest() {
    let latest = scenario_with_member("").replace("type: Full", "type: ControlPlaneOnly")
        + "actions:\n- {at: '2026-12-07T00:00:00Z', do: start}\n";
    let s_latest = Scenario::from_text(&latest, Format::Yaml).unwrap();
    for selection in [
        "{type: Consistent}",
        "{type: Custom, customNodeImageVersions: [{version: AKSUbuntu-2204gen2containerd-202412.01.0}]}",
    ] {
        let text = latest.replace(
            "kubernetesVersion: 1.31.2}",
            &format!("kubernetesVersion: 1.31.2}}\n    nodeImageSelection: {selection}"),
        );
        let s = Scenario::from_text(&text, Format::Yaml).unwrap();
        s.validate().unwrap();
        let warnings = waverun_core::validate::run_spec_warnings("run", &s.run_spec().unwrap());
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].path, "run.managedClusterUpdate.nodeImageSelection.type");
        assert!(warnings[0].message.contains("has no effect on a ControlPlaneOnly upgrade"));
        assert_eq!(
            serde_json::to_value(simulate(&s).unwrap()).unwrap(),
            serde_json::to_value(simulate(&s_latest).unwrap()).unwrap(),
            "{selection}"
        );
    }
}

#[test]
fn extreme_numbers_in_a_scenario_are_errors_not_panics() {
    let text = scenario_with_member("behavior: {upgradeMinutes: 4294967295}\n");
    let e = Scenario::from_text(&text, Format::Yaml)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(e.fields[0].path, "members[0].behavior.upgradeMinutes");
    let text = scenario_with_member("").replace(
        "groups: [{name: a}]",
        "groups: [{name: a}]\n    afterStageWaitInSeconds: 18446744073709551615",
    );
    let e = Scenario::from_text(&text, Format::Yaml)
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(
        e.fields[0].path,
        "strategy.stages[0].afterStageWaitInSeconds"
    );
    let text = scenario_with_member("").replace("'2026-12-07T00:00:00Z'", "'9999-12-31T23:59:59Z'");
    let s = Scenario::from_text(&text, Format::Yaml).unwrap();
    s.validate().unwrap();
    assert!(s.horizon() > s.start);
    simulate(&s).unwrap();
}

#[test]
fn thousands_of_gated_stages_parse_and_validate() {
    let mut yaml = String::from("stages:\n");
    for i in 0..5000 {
        yaml.push_str(&format!(
            "- name: s{i}\n  groups: [{{name: g{i}}}]\n  beforeGates: [{{type: Approval}}]\n  afterGates: [{{type: Approval}}]\n"
        ));
    }
    let st = strategy_yaml(&yaml).unwrap();
    assert_eq!(st.stages.len(), 5000);
    waverun_core::validate::strategy(&st).unwrap();
}

#[test]
fn an_empty_or_non_mapping_file_is_an_error_saying_so() {
    for format in [Format::Yaml, Format::Json] {
        let e = document("", format).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }
    let e = document("- a\n- b\n", Format::Yaml).unwrap_err();
    assert!(e.to_string().contains("must hold a mapping"), "{e}");
}

// ---------------------------------------------------------------------------------------------

fn strategy_yaml(yaml: &str) -> Result<UpdateStrategy, Error> {
    from_str(yaml, Format::Yaml)
}

fn assert_first(e: &Error, path: &str, message_start: &str) {
    let f = &e.fields[0];
    assert_eq!(f.path, path, "{e}");
    assert!(
        f.message.starts_with(message_start),
        "expected {message_start:?}, got {:?}",
        f.message
    );
}

/// A valid one-member scenario; `member_extra` is indented under the member.
fn scenario_with_member(member_extra: &str) -> String {
    let extra = if member_extra.is_empty() {
        String::new()
    } else {
        format!("    {member_extra}")
    };
    format!(
        "start: '2026-12-07T00:00:00Z'
members:
  - name: m1
    group: a
    region: eastus
    kubernetesVersion: 1.30.4
    nodePools:
    - {{name: system, osType: Linux, imageVersion: AKSUbuntu-2204gen2containerd-202411.03.0}}
{extra}strategy:
  stages:
  - name: s
    groups: [{{name: a}}]
run:
  name: r1
  managedClusterUpdate:
    upgrade: {{type: Full, kubernetesVersion: 1.31.2}}
"
    )
}
