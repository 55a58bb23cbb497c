//! The `az fleet` extension's scenario tests, run against `waverun`. The extension is github
//! Azure/azure-cli-extensions, `src/fleet/azext_fleet/tests/latest/` (MIT). Every `self.cmd` line
//! of a test with in-scope lines is transcribed here, in order, with its `checks=[...]`. The
//! in-scope lines are run **unchanged**: `az fleet` becomes the `waverun` binary, and the
//! arguments are split as `az` splits them (`shlex.split`). The daemon is a simulated fleet whose
//! members are the clusters the lines name, served as the test's fleet (`fl-000002`).
//!
//! The checks are evaluated as azure-cli's testsdk does:
//! - `JMESPathCheck`: the kwargs are applied to the query and to the expected value; it passes
//!   when `jmespath.search(q, output) == expected` or when `str(actual) == str(expected)`;
//! - `NoneCheck`: the stripped output is empty, `[]`, `{}` or `false`;
//! - every line must exit 0, except one this file marks as failing in today's `az` too.
//!
//! Out-of-scope lines are in the tables with the reason and are counted, never run:
//! - the fleet resource itself, hubs and credentials;
//! - managed identities, cluster mesh, managed namespaces;
//! - `az aks`, `az network`, `az identity`.
//!
//! Each test asserts how many lines and checks it accounted for, so none is silently skipped,
//! then that none failed. The placeholder values are the testsdk's playback monikers
//! (`cli-000001`, `fl-000002`, …).
//!
//! Versions transcribed:
//! - `test_fleet_hubless_scenario.py` @0f858617;
//! - `test_fleet_hubful_scenario.py` @cbba8f37;
//! - `test_fleet_scenario.py` @0634828a (legacy);
//! - `test_fleet_clustermesh_scenario.py` @0f858617.
//!
//! The identities and managed-namespace tests have no in-scope line; see the drafts'
//! `az_lines.md`.
//!
//! Data: the hubless test's `--stages` file is the version that test needs (limits, selectors,
//! gates), in `host/tests/fixtures/azure-cli-fleet/` with its source; the shared reference holds
//! an older one.
//!
//! **Divergences by design.** With that file the hubless test's member (update group `group2`,
//! label `team=fleet`) matches two groups of stage1: `group1` by its label selector and `group2`
//! by name. The spec decides this is an error at run start naming the member and both groups
//! (`shared/spec/update-runs.md` section 2), where Azure puts the member somewhere undocumented.
//! The lines whose checks depend on that run starting are marked [`Line::diverging`] with the
//! reason: they are run, must fail, and are counted apart (a line that starts passing is
//! reported, so the mark is removed).

mod http_support;
mod process_support;
mod runtime_support;

use process_support::Life;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The testsdk's playback monikers: the resource group is made first, then the fleet.
const RG: &str = "cli-000001";
const FLEET: &str = "fl-000002";
const SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";

// ---------------------------------------------------------------------------------------------
// The testsdk, as far as these lines need it.

/// A check, as `ScenarioTest` makes it.
enum Check {
    /// `self.check(query, expected)`: a `JMESPathCheck`.
    Jmes(&'static str, Value),
    /// `self.greater_than(query, n)`: only on out-of-scope lines here; kept so they are counted.
    GreaterThan(&'static str, i64),
    /// `self.is_empty()`: a `NoneCheck`.
    Empty,
}

fn check(query: &'static str, expected: impl Into<Value>) -> Check {
    Check::Jmes(query, expected.into())
}

/// Why a line is not run.
#[derive(Clone, Copy, Debug)]
enum Out {
    /// `az fleet create|update|show|list|delete|wait|reconcile` of the fleet itself.
    Fleet,
    /// A hubful fleet's hub.
    Hub,
    /// `get-credentials`: a hub's kubeconfig.
    Credentials,
    /// Cluster mesh profiles, and member state that belongs to them.
    ClusterMesh,
    /// Another `az` group (`aks`, `network`, `identity`).
    NotFleet,
}

/// One `self.cmd(...)`.
struct Line {
    /// The test's name for it (`A8` …; the lines of `az_lines.md`).
    at: &'static str,
    /// The command as `self.cmd` gets it, before kwargs.
    cmd: &'static str,
    checks: Vec<Check>,
    /// `kwarg <- JMESPath over the output`: what the test reads with `get_output_in_json()`.
    captures: Vec<(&'static str, &'static str)>,
    /// The line fails (exits non-zero) in today's `az` too.
    expect_failure: bool,
    /// Not run, and why.
    out: Option<Out>,
    /// Run, and expected to fail by a decision of waverun's: why.
    diverges: Option<&'static str>,
}

fn line(at: &'static str, cmd: &'static str, checks: Vec<Check>) -> Line {
    Line {
        at,
        cmd,
        checks,
        captures: Vec::new(),
        expect_failure: false,
        out: None,
        diverges: None,
    }
}

/// An out-of-scope line: transcribed and counted, not run.
fn skip(at: &'static str, why: Out, cmd: &'static str, checks: Vec<Check>) -> Line {
    Line {
        out: Some(why),
        ..line(at, cmd, checks)
    }
}

impl Line {
    fn capture(mut self, kwarg: &'static str, query: &'static str) -> Line {
        self.captures.push((kwarg, query));
        self
    }

    fn failing(mut self) -> Line {
        self.expect_failure = true;
        self
    }

    /// The line is run and fails by a decision of waverun's (`why`).
    fn diverging(mut self, why: &'static str) -> Line {
        self.diverges = Some(why);
        self
    }
}

/// `str.format(**kwargs)` for `{name}` fields (and `{{`/`}}`). A field the kwargs have not got
/// is an error naming it: an earlier capture failed.
fn format(s: &str, kw: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err(format!("a lone '}}' in {s:?}"));
        }
        let end = tail
            .find('}')
            .ok_or_else(|| format!("an unclosed '{{' in {s:?}"))?;
        let key = &tail[1..end];
        let v = kw
            .get(key)
            .ok_or_else(|| format!("no value for {{{key}}} (an earlier line did not give it)"))?;
        out.push_str(v);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Python's `shlex.split` (POSIX mode): whitespace separates words; '…' is literal; in "…" a
/// backslash escapes only `"` and `\`; outside quotes a backslash escapes the next character.
fn shlex_split(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\')) => {
                            word.push(chars.next().expect("peeked"));
                        }
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// `jmespath.search(query, doc)`, through the same crate the CLI's `--query` uses.
fn search(query: &str, doc: &Value) -> Result<Value, String> {
    let expr = jmespath::compile(query).map_err(|e| format!("{query:?} does not compile: {e}"))?;
    let data = jmespath::Variable::from_serializable(doc).map_err(|e| e.to_string())?;
    let found = expr.search(data).map_err(|e| format!("{query:?}: {e}"))?;
    serde_json::to_value(&*found).map_err(|e| e.to_string())
}

/// Python's `==` between JSON values: numbers by value, and `True == 1`.
fn py_eq(a: &Value, b: &Value) -> bool {
    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some(p), Some(q)) => p == q,
            _ => a == b,
        },
    }
}

/// Python's `str()` of a JSON value (dicts as plain dicts; the testsdk's `OrderedDict` prints
/// otherwise, but no check here compares an object).
fn py_str(v: &Value) -> String {
    fn repr(v: &Value) -> String {
        match v {
            Value::String(s) => format!("'{s}'"),
            other => py_str(other),
        }
    }
    match v {
        Value::Null => "None".to_string(),
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            if f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                format!("{f}")
            }
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("'{k}': {}", repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `JMESPathCheck.__call__`'s comparison (case-sensitive, as `self.check` makes it).
fn jmes_equals(actual: &Value, expected: &Value) -> bool {
    py_eq(actual, expected) || py_str(actual) == py_str(expected)
}

/// `NoneCheck.__call__`.
fn is_empty_output(stdout: &str) -> bool {
    let data = stdout.trim();
    data.is_empty() || ["[]", "{}", "false"].contains(&data)
}

/// What a scenario accounted for.
#[derive(Default)]
struct Tally {
    /// Lines transcribed (run or not).
    lines: usize,
    /// In-scope lines run.
    run: usize,
    /// Out-of-scope lines counted and not run.
    skipped: usize,
    /// Checks of in-scope lines accounted for (passed + failed).
    checks: usize,
    passed_checks: usize,
    passed_lines: usize,
    failures: Vec<String>,
    /// Lines run that diverge by design, and how each failed.
    diverged: Vec<String>,
}

/// `waverun ARGS` against `server`: stdin closed, stdout a pipe (so JSON, as `az`'s default).
fn waverun(server: &str, args: &[String]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_waverun"))
        .args(args)
        .env("WAVERUN_SERVER", server)
        .env_remove("WAVERUN_TOKEN")
        .env_remove("WAVERUN_FLEET_NAME")
        .stdin(Stdio::null())
        .output()
        .expect("waverun runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs the in-scope lines in order, as `ScenarioTest.cmd(...)` would, and accounts for all.
fn run_scenario(server: &str, kw: &mut BTreeMap<String, String>, lines: &[Line]) -> Tally {
    let mut t = Tally::default();
    for l in lines {
        t.lines += 1;
        if let Some(why) = l.out {
            t.skipped += 1;
            eprintln!("{:>4} skip ({why:?}): {}", l.at, l.cmd);
            continue;
        }
        t.run += 1;
        let n_checks = l.checks.len();
        let fail = |t: &mut Tally, what: String| {
            let entry = format!("{} `{}`: {what}", l.at, l.cmd);
            match l.diverges {
                Some(why) => t.diverged.push(format!("{entry} [by design: {why}]")),
                None => t.failures.push(entry),
            }
        };
        // kwargs, then az's own handling: a leading `az ` dropped, shlex, `fleet` → waverun.
        let cmd = match format(l.cmd, kw) {
            Ok(c) => c,
            Err(e) => {
                t.checks += n_checks;
                fail(&mut t, format!("not run: {e}"));
                continue;
            }
        };
        let cmd = cmd.strip_prefix("az ").unwrap_or(&cmd);
        let words = shlex_split(cmd);
        assert_eq!(
            words.first().map(String::as_str),
            Some("fleet"),
            "{}: an in-scope line is an `az fleet` line: {cmd}",
            l.at
        );
        let args = &words[1..];
        let (code, stdout, stderr) = waverun(server, args);
        eprintln!("{:>4} exit {code}: waverun {}", l.at, args.join(" "));
        if l.expect_failure {
            t.checks += n_checks;
            if code == 0 {
                fail(&mut t, "exited 0; today's az fails here".to_string());
            } else {
                t.passed_lines += 1;
            }
            continue;
        }
        if code != 0 {
            t.checks += n_checks;
            fail(
                &mut t,
                format!(
                    "exited {code}; {n_checks} check(s) not reached; stderr: {}",
                    stderr.trim()
                ),
            );
            continue;
        }
        let doc: Result<Value, String> =
            serde_json::from_str(&stdout).map_err(|e| format!("the output is not JSON ({e})"));
        let mut line_ok = true;
        for c in &l.checks {
            t.checks += 1;
            let outcome = match c {
                Check::Empty => {
                    if is_empty_output(&stdout) {
                        Ok(())
                    } else {
                        Err(format!("is_empty(): the output is {:?}", stdout.trim()))
                    }
                }
                Check::GreaterThan(q, n) => Err(format!(
                    "greater_than({q:?}, {n}) on an in-scope line: not transcribed for running"
                )),
                Check::Jmes(q, expected) => (|| -> Result<(), String> {
                    let q = format(q, kw)?;
                    let expected = match expected {
                        Value::String(s) => Value::String(format(s, kw)?),
                        other => other.clone(),
                    };
                    let doc = doc.as_ref().map_err(Clone::clone)?;
                    let actual = search(&q, doc)?;
                    if jmes_equals(&actual, &expected) {
                        Ok(())
                    } else {
                        Err(format!("check({q:?}): expected {expected}, got {actual}"))
                    }
                })(),
            };
            match outcome {
                Ok(()) => t.passed_checks += 1,
                Err(e) => {
                    line_ok = false;
                    fail(&mut t, e);
                }
            }
        }
        for (k, q) in &l.captures {
            let got = doc
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|d| search(q, d));
            match got {
                Ok(Value::String(s)) => {
                    kw.insert((*k).to_string(), s);
                }
                other => {
                    line_ok = false;
                    fail(
                        &mut t,
                        format!("capturing {{{k}}} from {q:?}: got {other:?}"),
                    );
                }
            }
        }
        if line_ok {
            t.passed_lines += 1;
            if l.diverges.is_some() {
                t.failures.push(format!(
                    "{} `{}`: passes now; remove its divergence mark",
                    l.at, l.cmd
                ));
            }
        }
    }
    t
}

/// Asserts the transcription, then the run: every line and check accounted for, none failed.
fn assert_scenario(
    name: &str,
    lines: &[Line],
    t: &Tally,
    (total, in_scope, checks): (usize, usize, usize),
) {
    // The table is the Python file's: its counts were taken from the source.
    assert_eq!(lines.len(), total, "{name}: self.cmd lines transcribed");
    assert_eq!(
        lines.iter().filter(|l| l.out.is_none()).count(),
        in_scope,
        "{name}: in-scope lines transcribed"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.out.is_none())
            .map(|l| l.checks.len())
            .sum::<usize>(),
        checks,
        "{name}: checks of in-scope lines transcribed"
    );
    // Nothing silently skipped.
    assert_eq!(t.lines, total, "{name}: lines accounted for");
    assert_eq!(t.run, in_scope, "{name}: in-scope lines run");
    assert_eq!(
        t.skipped,
        total - in_scope,
        "{name}: out-of-scope lines counted"
    );
    assert_eq!(t.checks, checks, "{name}: checks accounted for");
    let diverging: Vec<&str> = lines
        .iter()
        .filter(|l| l.diverges.is_some())
        .map(|l| l.at)
        .collect();
    eprintln!(
        "{name}: {}/{} in-scope lines and {}/{} checks pass; {} line(s) diverge by design ({}):\n  {}",
        t.passed_lines,
        in_scope,
        t.passed_checks,
        checks,
        diverging.len(),
        diverging.join(", "),
        t.diverged.join("\n  ")
    );
    assert!(
        t.failures.is_empty(),
        "{name}: {}/{} lines and {}/{} checks passed; failures:\n  {}",
        t.passed_lines,
        in_scope,
        t.passed_checks,
        checks,
        t.failures.join("\n  ")
    );
    assert_eq!(t.passed_lines + diverging.len(), in_scope);
}

// ---------------------------------------------------------------------------------------------
// The daemon: a simulated fleet of the clusters the lines name, served as `fl-000002`.

/// Members on 1.32.7 with one Linux pool in eastus; 1.33.0 (the hubless test's
/// `--kubernetes-version`, and Rapid's target) and the pool's image released everywhere.
fn fleet_file(dir: &Path, members: &[&str]) -> PathBuf {
    let members: Vec<Value> = members
        .iter()
        .map(|name| {
            json!({
                "name": name, "region": "eastus", "kubernetesVersion": "1.32.7",
                "nodePools": [{"name": "system", "osType": "Linux", "imageVersion": "AKSUbuntu-2204-202611.01.0"}],
                "behavior": {"upgradeMinutes": 30},
            })
        })
        .collect();
    let since = json!({"*": "2026-01-01T00:00:00Z"});
    let file = json!({
        "seed": 1,
        "members": members,
        "releases": {
            "kubernetes": [{"version": "1.33.0", "available": since}],
            "nodeImages": [{"version": "AKSUbuntu-2204-202611.01.0", "available": since}],
        },
    });
    let path = dir.join("fleet.json");
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    path
}

/// `waverun serve` with the fleet, named as the test names it; no tokens (loopback).
fn daemon(dir: &Path, members: &[&str]) -> (Life, String) {
    let fleet = fleet_file(dir, members);
    let data = dir.join("data");
    let life = Life::start(
        &[
            "--time-scale",
            "60",
            "--data-dir",
            data.to_str().unwrap(),
            "--fleet",
            fleet.to_str().unwrap(),
            "--fleet-name",
            FLEET,
        ],
        &[],
        &dir.join("daemon.log"),
    );
    assert!(life.ready(60), "the daemon never got ready");
    let server = life.api.base.split("/api/").next().unwrap().to_string();
    (life, server)
}

/// The cluster id `az aks create` would have printed for `name` (its output's `id`).
fn aks_id(name: &str) -> String {
    format!(
        "/subscriptions/{SUBSCRIPTION}/resourcegroups/{RG}/providers/Microsoft.ContainerService/managedClusters/{name}"
    )
}

/// The hubless test's `stages.json`, checked to be the version the test's checks need.
fn stages_file() -> String {
    let path = runtime_support::workspace().join("host/tests/fixtures/azure-cli-fleet/stages.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        doc["stages"][0]["maxConcurrency"],
        "7",
        "{}: the old stages.json; the current test needs the one with limits, selectors and \
         gates (azure-cli-extensions commit 0e1dda26)",
        path.display()
    );
    path.to_str().unwrap().to_string()
}

fn kwargs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// test_fleet_hubless_scenario.py @0f858617 (test_fleet_hubless)

/// Why the run of the hubless test does not start here.
const TWO_GROUPS: &str = "the member matches group1 (label team=fleet) and group2 (by name): \
    refused at run start, naming both (shared/spec/update-runs.md section 2)";

fn hubless_lines() -> Vec<Line> {
    use Out::*;
    vec![
        skip("A1", Fleet, "fleet create -g {rg} -n {fleet_name}", vec![check("name", "{fleet_name}")]),
        skip("A2", Fleet, "fleet wait -g {rg} --fleet-name {fleet_name} --created", vec![Check::Empty]),
        skip("A3", Fleet, "fleet update -g {rg} -n {fleet_name} --tags foo=doo",
            vec![check("name", "{fleet_name}"), check("tags.foo", "doo")]),
        skip("A4", Fleet, "fleet reconcile -g {rg} -n {fleet_name}",
            vec![check("name", "{fleet_name}"), check("tags.foo", "doo")]),
        skip("A5", Fleet, "fleet show -g {rg} -n {fleet_name}", vec![check("name", "{fleet_name}")]),
        skip("A6", Fleet, "fleet list -g {rg}", vec![check("length([])", 1)]),
        skip("A7", Fleet, "fleet list", vec![Check::GreaterThan("length([])", 0)]),
        skip("-", NotFleet, "aks create -g {rg} -n {member_name} --ssh-key-value={ssh_key_value}",
            vec![check("name", "{member_name}")]),
        line("A8", "fleet member create -g {rg} --fleet-name {fleet_name} -n {member_name} --member-cluster-id {mc_id} --update-group group1 --member-labels \"team=fleet\"", vec![
            check("name", "{member_name}"),
            check("clusterResourceId", "{mc_id}"),
            check("group", "group1"),
            check("labels.team", "fleet"),
        ]),
        line("A9", "fleet member update -g {rg} --fleet-name {fleet_name} -n {member_name} --update-group group2",
            vec![check("group", "group2")]),
        line("A10", "fleet member wait -g {rg} --fleet-name {fleet_name} --fleet-member-name {member_name} --updated",
            vec![Check::Empty]),
        skip("-", NotFleet, "aks wait -g {rg} -n {member_name} --custom \"provisioningState=='Succeeded'\"",
            vec![Check::Empty]),
        line("A11", "fleet member reconcile -g {rg} -f {fleet_name} -n {member_name}",
            vec![check("name", "{member_name}"), check("group", "group2")]),
        line("A12", "fleet member list -g {rg} --fleet-name {fleet_name}", vec![check("length([])", 1)]),
        line("A13", "fleet member show -g {rg} --fleet-name {fleet_name} -n {member_name}",
            vec![check("name", "{member_name}")]),
        line("A14", "fleet member wait -g {rg} --fleet-name {fleet_name} --fleet-member-name {member_name} --updated",
            vec![Check::Empty]),
        skip("-", NotFleet, "aks wait -g {rg} -n {member_name} --updated", vec![Check::Empty]),
        line("A15", "fleet updaterun create -g {rg} -n {updaterun} -f {fleet_name} --upgrade-type Full --node-image-selection Latest --kubernetes-version {kubernetes_version} --stages {stages_file}",
            vec![check("name", "{updaterun}")]),
        line("A16", "fleet updaterun skip -g {rg} -n {updaterun} -f {fleet_name} --targets Group:group2",
            vec![check("status.stages[0].groups[1].status.state", "Skipped")])
            .diverging(TWO_GROUPS),
        line("A17", "fleet updaterun delete -g {rg} -n {updaterun} -f {fleet_name} --yes", vec![]),
        line("A18", "fleet updatestrategy create -g {rg} -n {updateStrategy_name} -f {fleet_name} --stages {stages_file}",
            vec![check("name", "{updateStrategy_name}")])
            .capture("update_strategy_name", "name")
            .capture("update_strategy_id", "id"),
        line("A19", "fleet updatestrategy show -g {rg} -n {updateStrategy_name} -f {fleet_name}", vec![
            check("name", "{updateStrategy_name}"),
            check("strategy.stages[0].maxConcurrency", "{strategy_stage_max_concurrency}"),
            check("strategy.stages[0].groups[0].maxConcurrency", "{strategy_group1_max_concurrency}"),
            check("strategy.stages[0].groups[1].maxConcurrency", "{strategy_group2_max_concurrency}"),
        ]),
        line("A20", "fleet updatestrategy list -g {rg} -f {fleet_name}", vec![check("length([])", 1)]),
        line("A21", "fleet updaterun create -g {rg} -n {updaterun} -f {fleet_name} --upgrade-type Full --node-image-selection Latest --kubernetes-version {kubernetes_version} --update-strategy-name {update_strategy_name}",
            vec![check("name", "{updaterun}")]),
        line("A22", "fleet updaterun start -g {rg} -n {updaterun} -f {fleet_name}",
            vec![check("name", "{updaterun}")])
            .diverging(TWO_GROUPS),
        line("A23", "fleet updaterun show -g {rg} -n {updaterun} -f {fleet_name}", vec![
            check("name", "{updaterun}"),
            check("status.stages[0].maxConcurrency", "{updaterun_stage_max_concurrency}"),
            check("status.stages[0].groups[0].maxConcurrency", "{updaterun_group1_max_concurrency}"),
            check("status.stages[0].groups[1].maxConcurrency", "{updaterun_group2_max_concurrency}"),
        ])
            .diverging(TWO_GROUPS),
        line("A24", "fleet updaterun list -g {rg} -f {fleet_name}", vec![check("length([])", 1)]),
        line("A25", "fleet gate list -g {rg} -f {fleet_name}", vec![check("length([])", 1)])
            .diverging(TWO_GROUPS),
        line("A26", "fleet gate list -g {rg} -f {fleet_name}", vec![check("length([])", 1)])
            .capture("gate_name", "[0].name")
            .diverging(TWO_GROUPS),
        line("A27", "fleet gate show -g {rg} -f {fleet_name} -n {gate_name}",
            vec![check("name", "{gate_name}")])
            .diverging(TWO_GROUPS),
        line("A28", "fleet gate approve -g {rg} -f {fleet_name} -n {gate_name}",
            vec![check("state", "Completed")])
            .diverging(TWO_GROUPS),
        line("A29", "fleet updaterun delete -g {rg} -n {updaterun} -f {fleet_name} --yes", vec![]),
        line("A30", "fleet autoupgradeprofile create -g {rg} -f {fleet_name} -n {autoupgradeprofile_name} -c Rapid --node-image-selection Latest --update-strategy-id {update_strategy_id} --disabled",
            vec![check("name", "{autoupgradeprofile_name}")]),
        line("A31", "fleet autoupgradeprofile create -g {rg} -f {fleet_name} -n {autoupgradeprofile_name_TKV} -c TargetKubernetesVersion --long-term-support --target-kubernetes-version {target_kubernetes_version}", vec![
            check("name", "{autoupgradeprofile_name_TKV}"),
            check("longTermSupport", true),
            check("targetKubernetesVersion", "{target_kubernetes_version}"),
        ]),
        line("A32", "fleet autoupgradeprofile show -g {rg} -f {fleet_name} -n {autoupgradeprofile_name}",
            vec![check("name", "{autoupgradeprofile_name}")]),
        line("A33", "fleet autoupgradeprofile show -g {rg} -f {fleet_name} -n {autoupgradeprofile_name_TKV}", vec![
            check("name", "{autoupgradeprofile_name_TKV}"),
            check("longTermSupport", true),
            check("targetKubernetesVersion", "{target_kubernetes_version}"),
        ]),
        line("A34", "fleet autoupgradeprofile list -g {rg} -f {fleet_name}", vec![check("length([])", 2)]),
        line("A35", "fleet autoupgradeprofile generate-update-run -g {rg} -f {fleet_name} --auto-upgrade-profile-name {autoupgradeprofile_name}",
            vec![check("contains(id, 'auto-{autoupgradeprofile_name}-rapid')", true)])
            .diverging(TWO_GROUPS),
        line("A36", "fleet autoupgradeprofile delete -g {rg} -f {fleet_name} -n {autoupgradeprofile_name} --yes", vec![]),
        line("A37", "fleet updatestrategy delete -g {rg} -f {fleet_name} -n {updateStrategy_name} --yes", vec![]),
        line("A38", "fleet member delete -g {rg} --fleet-name {fleet_name} -n {member_name} --yes", vec![]),
        skip("A39", Fleet, "fleet delete -g {rg} -n {fleet_name} --yes", vec![]),
    ]
}

#[test]
fn az_fleet_hubless_scenario_lines_run_unchanged() {
    let stages = stages_file();
    let dir = tempfile::tempdir().unwrap();
    let member = "flmc-000003";
    let (life, server) = daemon(dir.path(), &[member]);
    let mc_id = aks_id(member);
    let mut kw = kwargs(&[
        ("rg", RG),
        ("fleet_name", FLEET),
        ("member_name", member),
        ("updaterun", "uprn-000004"),
        ("updateStrategy_name", "upstr-000005"),
        ("autoupgradeprofile_name", "aup-000006"),
        ("autoupgradeprofile_name_TKV", "aup-000007"),
        ("stages_file", stages.as_str()),
        ("kubernetes_version", "1.33.0"),
        ("target_kubernetes_version", "1.30"),
        // Python ints; `self.check` formats them into strings, and str(7) == '7' holds.
        ("updaterun_stage_max_concurrency", "7"),
        ("updaterun_group1_max_concurrency", "1"),
        ("updaterun_group2_max_concurrency", "1"),
        ("strategy_stage_max_concurrency", "7"),
        ("strategy_group1_max_concurrency", "100%"),
        ("strategy_group2_max_concurrency", "50%"),
        // From `aks create`'s output (out of scope): the simulated cluster of that name.
        ("mc_id", mc_id.as_str()),
    ]);
    let lines = hubless_lines();
    let t = run_scenario(&server, &mut kw, &lines);
    drop(life);
    // 42 self.cmd (39 az fleet + 3 aks); 31 in scope with 40 checks.
    assert_scenario("test_fleet_hubless", &lines, &t, (42, 31, 40));
}

// ---------------------------------------------------------------------------------------------
// test_fleet_hubful_scenario.py @cbba8f37 (test_fleet_hubful): its member lines

fn hubful_lines() -> Vec<Line> {
    use Out::*;
    vec![
        skip("B1", Hub, "fleet create -g {rg} -n {fleet_name} --enable-hub  --vm-size Standard_DS1 ",
            vec![check("name", "{fleet_name}")]),
        skip("B2", Fleet, "fleet wait -g {rg} --fleet-name {fleet_name} --created", vec![Check::Empty]),
        skip("B3", Credentials, "fleet get-credentials -g {rg} -n {fleet_name} --overwrite-existing", vec![]),
        skip("-", NotFleet, "aks create -g {rg} -n {member_name} --ssh-key-value={ssh_key_value}",
            vec![check("name", "{member_name}")]),
        line("B4", "fleet member create -g {rg} --fleet-name {fleet_name} -n {member_name} --member-cluster-id {mc_id} --update-group group1", vec![
            check("name", "{member_name}"),
            check("clusterResourceId", "{mc_id}"),
            check("group", "group1"),
        ]),
        line("B5", "fleet member show -g {rg} --fleet-name {fleet_name} -n {member_name}",
            vec![check("name", "{member_name}")]),
        skip("-", NotFleet, "aks wait -g {rg} -n {member_name} --created", vec![Check::Empty]),
        line("B6", "fleet member wait -g {rg} --fleet-name {fleet_name} --fleet-member-name {member_name} --created",
            vec![Check::Empty]),
        line("B7", "fleet member delete -g {rg} --fleet-name {fleet_name} -n {member_name} --yes", vec![]),
        skip("B8", Fleet, "fleet delete -g {rg} -n {fleet_name} --yes", vec![]),
    ]
}

#[test]
fn az_fleet_hubful_scenario_member_lines_run_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let member = "flmc-000003";
    let (life, server) = daemon(dir.path(), &[member]);
    let mc_id = aks_id(member);
    let mut kw = kwargs(&[
        ("rg", RG),
        ("fleet_name", FLEET),
        ("member_name", member),
        ("mc_id", mc_id.as_str()),
    ]);
    let lines = hubful_lines();
    let t = run_scenario(&server, &mut kw, &lines);
    drop(life);
    // 10 self.cmd (8 az fleet + 2 aks); 4 in scope with 5 checks.
    assert_scenario("test_fleet_hubful", &lines, &t, (10, 4, 5));
}

// ---------------------------------------------------------------------------------------------
// test_fleet_scenario.py @0634828a (test_fleet, legacy): its member lines

fn legacy_lines() -> Vec<Line> {
    use Out::*;
    vec![
        skip("C1", Fleet, "fleet create -g {rg} -n {fleet_name}", vec![check("name", "{fleet_name}")]),
        skip("C2", Fleet, "fleet wait -g {rg} --fleet-name {fleet_name} --created", vec![Check::Empty]),
        skip("C3", Fleet, "fleet update -g {rg} -n {fleet_name} --tags foo=doo",
            vec![check("name", "{fleet_name}"), check("tags.foo", "doo")]),
        skip("C4", Fleet, "fleet show -g {rg} -n {fleet_name}", vec![check("name", "{fleet_name}")]),
        skip("C5", Fleet, "fleet list -g {rg}", vec![check("length([])", 1)]),
        skip("C6", Fleet, "fleet list", vec![Check::GreaterThan("length([])", 0)]),
        skip("C7", Credentials, "fleet get-credentials -g {rg} -n {fleet_name} --overwrite-existing", vec![]),
        skip("-", NotFleet, "aks create -g {rg} -n {member_name} --ssh-key-value={ssh_key_value}",
            vec![check("name", "{member_name}")]),
        line("C8", "fleet member create -g {rg} --fleet-name {fleet_name} -n {member_name} --member-cluster-id {mc_id}",
            vec![check("name", "{member_name}"), check("clusterResourceId", "{mc_id}")]),
        line("C9", "fleet member list -g {rg} --fleet-name {fleet_name}", vec![check("length([])", 1)]),
        line("C10", "fleet member show -g {rg} --fleet-name {fleet_name} -n {member_name}",
            vec![check("name", "{member_name}")]),
        // Written before deletes asked for confirmation (extension 0.3.0). Today's az, with no
        // TTY: "Unable to prompt for confirmation as no tty available. Use --yes." waverun
        // refuses the same way.
        line("C11", "fleet member delete -g {rg} --fleet-name {fleet_name} -n {member_name}", vec![])
            .failing(),
        skip("C12", Fleet, "fleet delete -g {rg} -n {fleet_name}", vec![]),
    ]
}

#[test]
fn az_fleet_legacy_scenario_member_lines_run_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let member = "flmc-000003";
    let (life, server) = daemon(dir.path(), &[member]);
    let mc_id = aks_id(member);
    let mut kw = kwargs(&[
        ("rg", RG),
        ("fleet_name", FLEET),
        ("member_name", member),
        ("mc_id", mc_id.as_str()),
    ]);
    let lines = legacy_lines();
    let t = run_scenario(&server, &mut kw, &lines);
    drop(life);
    // 13 self.cmd (12 az fleet + 1 aks); 4 in scope with 4 checks.
    assert_scenario("test_fleet", &lines, &t, (13, 4, 4));
}

// ---------------------------------------------------------------------------------------------
// test_fleet_clustermesh_scenario.py @0f858617 (test_fleet_cluster_mesh): its member lines

fn clustermesh_lines() -> Vec<Line> {
    use Out::*;
    let aks_wait = |n: &'static str| skip("-", NotFleet, n, vec![Check::Empty]);
    vec![
        skip("D1", Fleet, "fleet create -g {rg} -n {fleet_name}", vec![check("name", "{fleet_name}")]),
        skip("D2", Fleet, "fleet wait -g {rg} --fleet-name {fleet_name} --created", vec![Check::Empty]),
        skip("-", NotFleet, "network vnet create -g {rg} -n {vnet_name} --address-prefixes 192.168.0.0/16", vec![]),
        skip("-", NotFleet, "network vnet subnet create -g {rg} --vnet-name {vnet_name} -n nodesubnet1 --address-prefixes 192.168.1.0/24", vec![]),
        skip("-", NotFleet, "network vnet subnet create -g {rg} --vnet-name {vnet_name} -n podsubnet1 --address-prefixes 192.168.2.0/24", vec![]),
        skip("-", NotFleet, "network vnet subnet create -g {rg} --vnet-name {vnet_name} -n nodesubnet2 --address-prefixes 192.168.11.0/24", vec![]),
        skip("-", NotFleet, "network vnet subnet create -g {rg} --vnet-name {vnet_name} -n podsubnet2 --address-prefixes 192.168.12.0/24", vec![]),
        skip("-", NotFleet, "network vnet show -g {rg} -n {vnet_name}", vec![]),
        skip("-", NotFleet, "aks create -g {rg} -n {member1_name} --ssh-key-value={ssh_key_value} --network-plugin azure --network-dataplane cilium --enable-acns --vnet-subnet-id {node_subnet1_id} --pod-subnet-id {pod_subnet1_id} --skip-subnet-role-assignment",
            vec![check("name", "{member1_name}")]),
        skip("-", NotFleet, "aks create -g {rg} -n {member2_name} --ssh-key-value={ssh_key_value} --network-plugin azure --network-dataplane cilium --enable-acns --vnet-subnet-id {node_subnet2_id} --pod-subnet-id {pod_subnet2_id} --skip-subnet-role-assignment",
            vec![check("name", "{member2_name}")]),
        aks_wait("aks wait -g {rg} -n {member1_name} --custom \"provisioningState=='Succeeded'\""),
        aks_wait("aks wait -g {rg} -n {member2_name} --custom \"provisioningState=='Succeeded'\""),
        line("D3", "fleet member create -g {rg} --fleet-name {fleet_name} -n {member1_name} --member-cluster-id {mc1_id} --update-group group1 --member-labels \"env=production\"",
            vec![check("name", "{member1_name}"), check("labels.env", "production")]),
        aks_wait("aks wait -g {rg} -n {member1_name} --custom \"provisioningState=='Succeeded'\""),
        aks_wait("aks wait -g {rg} -n {member2_name} --custom \"provisioningState=='Succeeded'\""),
        line("D4", "fleet member create -g {rg} --fleet-name {fleet_name} -n {member2_name} --member-cluster-id {mc2_id} --update-group group1 --member-labels \"env=production\"",
            vec![check("name", "{member2_name}"), check("labels.env", "production")]),
        line("D5", "fleet member wait -g {rg} --fleet-name {fleet_name} --fleet-member-name {member1_name} --custom \"provisioningState=='Succeeded'\"",
            vec![Check::Empty]),
        line("D6", "fleet member wait -g {rg} --fleet-name {fleet_name} --fleet-member-name {member2_name} --custom \"provisioningState=='Succeeded'\"",
            vec![Check::Empty]),
        skip("D7", ClusterMesh, "fleet clustermeshprofile create -g {rg} -f {fleet_name} -n {cmp1_name} --member-selector \"env=production\"",
            vec![check("name", "{cmp1_name}")]),
        skip("D8", ClusterMesh, "fleet clustermeshprofile create -g {rg} -f {fleet_name} -n {cmp2_name} --member-selector \"env=production\"",
            vec![check("name", "{cmp2_name}")]),
        skip("D9", ClusterMesh, "fleet clustermeshprofile list -g {rg} -f {fleet_name}", vec![check("length([])", 2)]),
        skip("D10", ClusterMesh, "fleet clustermeshprofile show -g {rg} -f {fleet_name} -n {cmp1_name}",
            vec![check("name", "{cmp1_name}")]),
        skip("D11", ClusterMesh, "fleet clustermeshprofile list-members -g {rg} -f {fleet_name} -n {cmp1_name}",
            vec![check("length([])", 0)]),
        skip("D12", ClusterMesh, "fleet clustermeshprofile list-members -g {rg} -f {fleet_name} -n {cmp1_name} --selector",
            vec![check("length([])", 2)]),
        skip("D13", ClusterMesh, "fleet clustermeshprofile apply -g {rg} -f {fleet_name} -n {cmp1_name} --what-if", vec![]),
        skip("D14", ClusterMesh, "fleet clustermeshprofile apply -g {rg} -f {fleet_name} -n {cmp1_name}", vec![]),
        skip("D15", ClusterMesh, "fleet clustermeshprofile wait -g {rg} -f {fleet_name} -n {cmp1_name} --custom \"properties.status.state=='Connected'\"",
            vec![Check::Empty]),
        skip("D16", ClusterMesh, "fleet member wait -g {rg} --fleet-name {fleet_name} --fleet-member-name {member1_name} --custom \"meshProperties.status.state=='Connected'\"",
            vec![Check::Empty]),
        skip("D17", ClusterMesh, "fleet member wait -g {rg} --fleet-name {fleet_name} --fleet-member-name {member2_name} --custom \"meshProperties.status.state=='Connected'\"",
            vec![Check::Empty]),
        skip("D18", ClusterMesh, "fleet clustermeshprofile list-members -g {rg} -f {fleet_name} -n {cmp1_name}",
            vec![check("length([])", 2)]),
        skip("D19", ClusterMesh, "fleet member list -g {rg} --fleet-name {fleet_name} --cluster-mesh-profile {cmp1_name}",
            vec![check("length([])", 2)]),
        skip("D20", ClusterMesh, "fleet clustermeshprofile apply -g {rg} -f {fleet_name} -n {cmp1_name} --what-if", vec![]),
        skip("D21", ClusterMesh, "fleet clustermeshprofile apply -g {rg} -f {fleet_name} -n {cmp2_name} --what-if", vec![]),
        skip("D22", ClusterMesh, "fleet clustermeshprofile create -g {rg} -f {fleet_name} -n {cmp1_name} --member-selector \"env=none\"", vec![]),
        skip("D23", ClusterMesh, "fleet clustermeshprofile apply -g {rg} -f {fleet_name} -n {cmp1_name}", vec![]),
        skip("D24", ClusterMesh, "fleet clustermeshprofile wait -g {rg} -f {fleet_name} -n {cmp1_name} --custom \"properties.status.state=='NotConnected'\"",
            vec![Check::Empty]),
        skip("D25", ClusterMesh, "fleet clustermeshprofile delete -g {rg} -f {fleet_name} -n {cmp1_name} --yes", vec![]),
        skip("D26", ClusterMesh, "fleet clustermeshprofile delete -g {rg} -f {fleet_name} -n {cmp2_name} --yes", vec![]),
        skip("D27", ClusterMesh, "fleet clustermeshprofile list -g {rg} -f {fleet_name}", vec![check("length([])", 0)]),
    ]
}

#[test]
fn az_fleet_clustermesh_scenario_member_lines_run_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (m1, m2) = ("cm1-000003", "cm2-000004");
    let (life, server) = daemon(dir.path(), &[m1, m2]);
    let (mc1, mc2) = (aks_id(m1), aks_id(m2));
    let mut kw = kwargs(&[
        ("rg", RG),
        ("fleet_name", FLEET),
        ("member1_name", m1),
        ("member2_name", m2),
        ("cmp1_name", "cmp-000005"),
        ("cmp2_name", "cmp-000006"),
        ("vnet_name", "vnet-000007"),
        ("mc1_id", mc1.as_str()),
        ("mc2_id", mc2.as_str()),
    ]);
    let lines = clustermesh_lines();
    let t = run_scenario(&server, &mut kw, &lines);
    drop(life);
    // 39 self.cmd (27 az fleet + 6 network + 6 aks); 4 in scope with 6 checks.
    assert_scenario("test_fleet_cluster_mesh", &lines, &t, (39, 4, 6));
}

// ---------------------------------------------------------------------------------------------
// The harness itself, against what the testsdk does.

#[test]
fn the_harness_splits_formats_and_compares_as_the_testsdk_does() {
    // shlex: double quotes kept together, quotes inside single quotes literal.
    assert_eq!(
        shlex_split(r#"fleet member wait --custom "provisioningState=='Succeeded'" -n x"#),
        [
            "fleet",
            "member",
            "wait",
            "--custom",
            "provisioningState=='Succeeded'",
            "-n",
            "x"
        ]
    );
    assert_eq!(
        shlex_split("fleet create -g a -n b --enable-hub  --vm-size Standard_DS1 "),
        [
            "fleet",
            "create",
            "-g",
            "a",
            "-n",
            "b",
            "--enable-hub",
            "--vm-size",
            "Standard_DS1"
        ]
    );
    assert_eq!(shlex_split(r#"a "x \" y" 'p q'"#), ["a", r#"x " y"#, "p q"]);
    // str.format, and an unknown field named.
    let kw = kwargs(&[("a", "1")]);
    assert_eq!(format("x{a}y{{z}}", &kw).unwrap(), "x1y{z}");
    assert!(format("{gate_name}", &kw)
        .unwrap_err()
        .contains("{gate_name}"));
    // JMESPathCheck: == or str(actual) == str(expected).
    assert!(jmes_equals(&json!(7), &json!("7")));
    assert!(jmes_equals(&json!(true), &json!(true)));
    assert!(
        !jmes_equals(&json!(true), &json!("true")),
        "str(True) is 'True'"
    );
    assert!(jmes_equals(&json!(true), &json!("True")));
    assert!(!jmes_equals(&Value::Null, &json!("Skipped")));
    // length([]) over a list, as az's checks write it.
    assert_eq!(
        search("length([])", &json!([{"a": 1}, {"a": 2}])).unwrap(),
        json!(2)
    );
    assert_eq!(
        search(
            "contains(id, 'auto-p-rapid')",
            &json!({"id": "/x/updateRuns/auto-p-rapid-1"})
        )
        .unwrap(),
        json!(true)
    );
    // NoneCheck.
    assert!(is_empty_output("\n") && is_empty_output("[]\n") && !is_empty_output("x: done\n"));
}

// ---------------------------------------------------------------------------------------------
// az's global arguments and wait verbs, as Azure's docs use them (no scenario line uses them).

/// `waverun ARGS` against `server`, the arguments as `&str`.
fn az(server: &str, args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    waverun(server, &args)
}

#[test]
fn azs_global_arguments_query_output_verbosity_and_at_files_work_as_in_azures_docs() {
    let dir = tempfile::tempdir().unwrap();
    let (life, server) = daemon(dir.path(), &["m1", "m2"]);
    // `@file` for any value; `--subscription` and `-g` accepted.
    let labels = dir.path().join("labels.txt");
    std::fs::write(&labels, "team=fleet ring=0\n").unwrap();
    let at = format!("@{}", labels.display());
    let (code, out, err) = az(
        &server,
        &[
            "member",
            "create",
            "-n",
            "m1",
            "--update-group",
            "g1",
            "--labels",
            &at,
            "--subscription",
            SUBSCRIPTION,
            "-g",
            RG,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let m: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&m["labels"]["team"], &m["labels"]["ring"]),
        (&json!("fleet"), &json!("0"))
    );
    let (code, _, err) = az(
        &server,
        &[
            "member",
            "create",
            "-n",
            "m2",
            "--labels",
            "@/nonexistent/labels",
        ],
    );
    assert_eq!(code, 2);
    assert!(err.contains("@/nonexistent/labels"), "{err}");
    // `--query id -o tsv`, as in Azure's docs: the value alone.
    let (code, out, err) = az(
        &server,
        &["member", "show", "-n", "m1", "--query", "id", "-o", "tsv"],
    );
    assert_eq!(
        (code, out.as_str()),
        (0, format!("/fleets/{FLEET}/members/m1\n").as_str()),
        "{err}"
    );
    // A projection of a list as tsv: one line per item, tab-separated.
    az(
        &server,
        &["member", "create", "-n", "m2", "--update-group", "g2"],
    );
    let (code, out, _) = az(
        &server,
        &["member", "list", "--query", "[].[name, group]", "-o", "tsv"],
    );
    assert_eq!((code, out.as_str()), (0, "m1\tg1\nm2\tg2\n"));
    // A filter, printed as JSON.
    let (_, out, _) = az(
        &server,
        &[
            "member",
            "list",
            "--query",
            "[?group=='g2'].name",
            "-o",
            "json",
        ],
    );
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), json!(["m2"]));
    // yaml and the coloured variants (ANSI colours only in jsonc and yamlc).
    let (_, yaml, _) = az(
        &server,
        &[
            "member",
            "show",
            "-n",
            "m1",
            "--query",
            "{nm: name}",
            "-o",
            "yaml",
        ],
    );
    assert_eq!(yaml.trim(), "nm: m1");
    let (_, jsonc, _) = az(&server, &["member", "show", "-n", "m1", "-o", "jsonc"]);
    assert!(jsonc.contains("\x1b["), "{jsonc}");
    let (_, yamlc, _) = az(&server, &["member", "show", "-n", "m1", "-o", "yamlc"]);
    assert!(yamlc.contains("\x1b[") && yamlc.contains("m1"), "{yamlc}");
    // `-o none`: nothing at all.
    let (code, out, _) = az(&server, &["member", "show", "-n", "m1", "-o", "none"]);
    assert_eq!((code, out.as_str()), (0, ""));
    // A query that is not JMESPath is a usage error naming it.
    let (code, _, err) = az(
        &server,
        &["member", "show", "-n", "m1", "--query", "[?name=="],
    );
    assert_eq!(code, 2);
    assert!(err.contains("--query"), "{err}");
    // `--verbose`: each request and its status on stderr; `--debug` the answers too; the
    // token never.
    let (code, _, err) = az(
        &server,
        &[
            "member",
            "show",
            "-n",
            "m1",
            "--verbose",
            "--token",
            "tok-SECRET-1",
        ],
    );
    assert_eq!(code, 0);
    assert!(
        err.contains("GET ") && err.contains("/members/m1 -> 200"),
        "{err}"
    );
    assert!(!err.contains("tok-SECRET-1"), "{err}");
    let (_, _, err) = az(
        &server,
        &[
            "member",
            "show",
            "-n",
            "m1",
            "--debug",
            "--token",
            "tok-SECRET-1",
        ],
    );
    assert!(
        err.contains("\"clusterRef\"") || err.contains("\"labels\""),
        "{err}"
    );
    assert!(!err.contains("tok-SECRET-1"), "{err}");
    // `--only-show-errors`: no hints.
    let (code, _, err) = az(
        &server,
        &[
            "member",
            "delete",
            "-n",
            "m2",
            "--yes",
            "--only-show-errors",
        ],
    );
    assert_eq!((code, err.as_str()), (0, ""));
    drop(life);
}

#[test]
fn azs_wait_verbs_wait_for_one_condition_and_time_out_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let (life, server) = daemon(dir.path(), &["m1"]);
    az(
        &server,
        &["member", "create", "-n", "m1", "--update-group", "g1"],
    );
    // Conditions that hold return at once, printing nothing (az's wait prints nothing).
    for cond in [
        vec!["--created"],
        vec!["--updated"],
        vec!["--exists"],
        vec!["--custom", "provisioningState=='Succeeded' && group=='g1'"],
    ] {
        let mut args = vec![
            "member",
            "wait",
            "--fleet-member-name",
            "m1",
            "--interval",
            "1",
        ];
        args.extend(cond.iter().copied());
        let (code, out, err) = az(&server, &args);
        assert_eq!((code, out.as_str()), (0, ""), "{cond:?}: {err}");
    }
    // One condition only, and a JMESPath one that compiles.
    let (code, _, err) = az(
        &server,
        &["member", "wait", "-n", "m1", "--created", "--deleted"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("exactly one"), "{err}");
    let (code, _, err) = az(
        &server,
        &["member", "wait", "-n", "m1", "--custom", "group=="],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--custom"), "{err}");
    // A condition that does not come: exit 3 once the timeout passes.
    let (code, _, err) = az(
        &server,
        &[
            "member",
            "wait",
            "-n",
            "m1",
            "--deleted",
            "--interval",
            "1",
            "--timeout",
            "2",
        ],
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("timed out"), "{err}");
    // The same verb on strategies and profiles.
    let stages = r#"{"stages": [{"name": "s", "groups": [{"name": "g1"}]}]}"#;
    let (code, _, err) = az(
        &server,
        &["updatestrategy", "create", "-n", "st", "--stages", stages],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = az(
        &server,
        &[
            "updatestrategy",
            "wait",
            "--update-strategy-name",
            "st",
            "--created",
        ],
    );
    assert_eq!(code, 0, "{err}");
    az(&server, &["updatestrategy", "delete", "-n", "st", "--yes"]);
    let (code, _, err) = az(
        &server,
        &[
            "updatestrategy",
            "wait",
            "-n",
            "st",
            "--deleted",
            "--interval",
            "1",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = az(
        &server,
        &[
            "autoupgradeprofile",
            "create",
            "-n",
            "p",
            "-c",
            "Rapid",
            "--disabled",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = az(
        &server,
        &[
            "autoupgradeprofile",
            "wait",
            "--auto-upgrade-profile-name",
            "p",
            "--custom",
            "disabled",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // updaterun wait --custom takes a state, or a JMESPath query on the run.
    let (code, _, err) = az(
        &server,
        &[
            "updaterun",
            "create",
            "-n",
            "r",
            "--upgrade-type",
            "NodeImageOnly",
            "--node-image-selection",
            "Latest",
            "--stages",
            stages,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = az(
        &server,
        &[
            "updaterun",
            "wait",
            "-n",
            "r",
            "--custom",
            "status.status.state=='NotStarted'",
            "--timeout",
            "30",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // Older az's `skip --skip-properties FILE`; a skip before the start shows at once.
    let props = dir.path().join("skip_properties.json");
    std::fs::write(&props, r#"{"targets": [{"type": "Group", "name": "g1"}]}"#).unwrap();
    let (code, out, err) = az(
        &server,
        &[
            "updaterun",
            "skip",
            "-n",
            "r",
            "--skip-properties",
            props.to_str().unwrap(),
            "--no-wait",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let run: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(run["status"]["status"]["state"], "NotStarted");
    assert_eq!(
        run["status"]["stages"][0]["groups"][0]["status"]["state"],
        "Skipped"
    );
    drop(life);
}
