//! `waverun updaterun`: Azure's verbs (`create`, `start`, `stop`, `skip`, `show`, `list`,
//! `delete`, `wait`) and waverun's (`watch`, `plan`, `forecast`, `retry`). `wait` and `watch`
//! follow the run's event stream ([`super::stream`]) and read the run again on each event; they
//! do not poll.

use super::client::{CliError, Precondition};
use super::conn::{etag_of, Conn, Ctx};
use super::output::{self, columns, flatten, text, Output};
use super::resources::{delete, list_all, print_list, read, read_stages, show};
use super::stream::{Follow, StreamNote};
use super::tree::{self, FleetNow, RunView};
use clap::Subcommand;
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use waverun_core::state::RunStatus;

/// `--upgrade-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UpgradeType {
    /// Control plane, then node images.
    #[value(name = "Full")]
    Full,
    /// The control plane only.
    #[value(name = "ControlPlaneOnly")]
    ControlPlaneOnly,
    /// Node images only.
    #[value(name = "NodeImageOnly")]
    NodeImageOnly,
}

/// `--node-image-selection`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NodeImageSelection {
    /// The newest image available in each member's region.
    #[value(name = "Latest")]
    Latest,
    /// One image for every member, chosen when the run starts.
    #[value(name = "Consistent")]
    Consistent,
}

/// A state `wait --custom` can wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RunState {
    /// Not started.
    #[value(name = "NotStarted")]
    NotStarted,
    /// Running.
    #[value(name = "Running")]
    Running,
    /// Stopping.
    #[value(name = "Stopping")]
    Stopping,
    /// Stopped.
    #[value(name = "Stopped")]
    Stopped,
    /// Completed.
    #[value(name = "Completed")]
    Completed,
    /// Failed.
    #[value(name = "Failed")]
    Failed,
    /// Skipped.
    #[value(name = "Skipped")]
    Skipped,
}

impl RunState {
    fn as_str(self) -> &'static str {
        match self {
            RunState::NotStarted => "NotStarted",
            RunState::Running => "Running",
            RunState::Stopping => "Stopping",
            RunState::Stopped => "Stopped",
            RunState::Completed => "Completed",
            RunState::Failed => "Failed",
            RunState::Skipped => "Skipped",
        }
    }
}

/// `waverun updaterun ...`.
// The `conn` fields are flattened flags: clap would read a doc comment there as help.
#[allow(missing_docs)]
#[derive(Subcommand, Debug)]
pub enum RunCmd {
    /// Create (or change, before it starts) an update run; `--start` starts it too.
    #[command(
        after_help = "Examples:\n  waverun updaterun create -n r1 --upgrade-type Full --kubernetes-version 1.33.3 \
        --update-strategy-name safe-rollout --start\n  waverun updaterun create -n images --upgrade-type NodeImageOnly \
        --node-image-selection Consistent --stages stages.yaml"
    )]
    Create {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// What to upgrade.
        #[arg(long = "upgrade-type", value_enum)]
        upgrade_type: UpgradeType,
        /// The target Kubernetes version (x.y.z) for Full and ControlPlaneOnly.
        #[arg(long = "kubernetes-version", value_name = "VERSION")]
        kubernetes_version: Option<String>,
        /// How node images are chosen (default Latest).
        #[arg(long = "node-image-selection", value_enum)]
        node_image_selection: Option<NodeImageSelection>,
        /// The run's own stages: a file, inline JSON, or - (instead of --update-strategy-name).
        #[arg(
            long,
            value_name = "FILE|JSON|-",
            conflicts_with = "update_strategy_name"
        )]
        stages: Option<String>,
        /// A stored strategy, copied into the run.
        #[arg(long = "update-strategy-name", value_name = "NAME")]
        update_strategy_name: Option<String>,
        /// Start it right away.
        #[arg(long)]
        start: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Start (or resume) a run.
    #[command(after_help = "Example:\n  waverun updaterun start -n r1")]
    Start {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Stop a run: no new upgrades start; those in flight finish. Waits until it is Stopped
    /// unless --no-wait.
    #[command(after_help = "Example:\n  waverun updaterun stop -n r1 --no-wait")]
    Stop {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// How long to wait for Stopped (e.g. 30m; default 1h).
        #[arg(long, value_name = "DURATION", default_value = "1h")]
        timeout: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Skip members, groups, stages or after-stage waits of a run.
    #[command(
        after_help = "Example:\n  waverun updaterun skip -n r1 --targets Group:canary Stage:staging Member:prod-eu-1"
    )]
    Skip {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Type:name ... (types are case-sensitive: Member, Group, Stage, AfterStageWait).
        #[arg(
            long,
            num_args = 1..,
            required_unless_present = "skip_properties",
            conflicts_with = "skip_properties",
            value_name = "TYPE:NAME"
        )]
        targets: Vec<String>,
        /// The targets as a JSON file (or @file, or inline JSON), as older `az` takes them:
        /// {"targets": [{"type": "Member", "name": "m1"}, ...]}.
        #[arg(long = "skip-properties", value_name = "FILE|JSON")]
        skip_properties: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a run: its tree with states, progress, limits and what waits on what.
    #[command(
        after_help = "Examples:\n  waverun updaterun show -n r1\n  waverun updaterun show -n r1 -o json | jq '.status.stages[].groups[].status.state'"
    )]
    Show {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the runs.
    #[command(after_help = "Example:\n  waverun updaterun list")]
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a run (not while it is running).
    #[command(after_help = "Example:\n  waverun updaterun delete -n r1 --yes")]
    Delete {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Wait until a run reaches a state (pipelines): exit 0 when it does, 1 when it ends in
    /// another, 3 when the time runs out.
    #[command(
        after_help = "Example:\n  waverun updaterun wait -n r1 --custom Completed --timeout 2h"
    )]
    Wait {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// The state to wait for (NotStarted, Running, Stopping, Stopped, Completed, Failed,
        /// Skipped), or, as in `az`, a JMESPath query on the run (as `show -o json` prints it)
        /// to wait until it is true.
        #[arg(long, value_name = "STATE|JMESPATH", required_unless_present_any = ["created", "deleted"])]
        custom: Option<String>,
        /// Wait until the run exists.
        #[arg(long, conflicts_with_all = ["custom", "deleted"])]
        created: bool,
        /// Wait until the run is gone.
        #[arg(long, conflicts_with_all = ["custom", "created"])]
        deleted: bool,
        /// How long to wait at most (e.g. 90s, 30m, 2h; default 1h).
        #[arg(long, value_name = "DURATION", default_value = "1h")]
        timeout: String,
        /// At most this many seconds between two reads of the run, events or not.
        #[arg(long, value_name = "SECONDS", default_value_t = 30)]
        interval: u64,
        #[command(flatten)]
        conn: Conn,
    },
    /// Follow a run live until it ends (or Ctrl-C): its tree with progress, waits and
    /// countdowns, the gates that need you and the forecast finish; on a non-terminal, one
    /// line per event.
    #[command(after_help = "Example:\n  waverun updaterun watch -n r1")]
    Watch {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The run's plan: members per stage and group, resolved limits, gates, images, members
    /// that will fail.
    #[command(after_help = "Example:\n  waverun updaterun plan -n r1")]
    Plan {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// When the run is expected to finish, per member, group and stage (simulated forward
    /// from now on the fleet's real state).
    #[command(after_help = "Example:\n  waverun updaterun forecast -n r1")]
    Forecast {
        /// The run's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// A new run over the failed, skipped and pending members of a finished run.
    #[command(after_help = "Example:\n  waverun updaterun retry -n r1 --retry-name r1-again")]
    Retry {
        /// The finished run.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// The new run's name (default NAME-retry).
        #[arg(long = "retry-name", value_name = "NAME")]
        retry_name: Option<String>,
        /// Start the new run right away.
        #[arg(long)]
        start: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `90s`, `30m`, `2h`, `1d` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, CliError> {
    let bad = || {
        CliError::Usage(format!(
            "--timeout {s:?}: write a duration such as 90s, 30m, 2h or 1d"
        ))
    };
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(n.checked_mul(mult).ok_or_else(bad)?))
}

/// `--skip-properties`: a file (or the JSON itself) `{"targets": [{"type", "name"}, ...]}`,
/// as `TYPE:NAME` targets.
fn skip_properties_targets(arg: &str) -> Result<Vec<String>, CliError> {
    let text = if arg.trim_start().starts_with('{') {
        arg.to_string()
    } else {
        std::fs::read_to_string(arg)
            .map_err(|e| CliError::Usage(format!("--skip-properties {arg:?}: {e}")))?
    };
    let bad = |why: String| CliError::Usage(format!("--skip-properties: {why}"));
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let items = v["targets"]
        .as_array()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("needs {\"targets\": [{\"type\": ..., \"name\": ...}]}".into()))?;
    items
        .iter()
        .enumerate()
        .map(|(i, t)| match (t["type"].as_str(), t["name"].as_str()) {
            (Some(k), Some(n)) => Ok(format!("{k}:{n}")),
            _ => Err(bad(format!("targets[{i}] needs a type and a name"))),
        })
        .collect()
}

fn path(name: &str) -> String {
    format!("/updateRuns/{name}")
}

fn state_of(run: &Value) -> String {
    text(run, "/properties/status/status/state")
}

fn status_of(run: &Value) -> Result<RunStatus, CliError> {
    serde_json::from_value(run["properties"]["status"].clone())
        .map_err(|e| CliError::Other(format!("the run's status is not what this CLI reads: {e}")))
}

/// The fleet's clock, from `GET /api/v1/fleets/{fleet}` (the countdowns are in fleet time).
fn fleet_now(ctx: &Ctx) -> Option<FleetNow> {
    let url = format!(
        "{}/api/v1/fleets/{}",
        ctx.client.server(),
        ctx.client.fleet()
    );
    let f = ctx.client.get_url(&url).ok()?.body;
    let now = f["properties"]["fleetTime"].as_str()?;
    let now = chrono::DateTime::parse_from_rfc3339(now).ok()?.to_utc();
    let scale = f["properties"]["timeScale"].as_f64().unwrap_or(1.0);
    Some(FleetNow { now, scale })
}

/// Prints a run resource: flattened JSON or YAML, or its tree (with countdowns in fleet time).
fn show_run(ctx: &Ctx, out: &mut dyn Write, run: &Value) -> Result<(), CliError> {
    let now = (ctx.output == Output::Table)
        .then(|| fleet_now(ctx))
        .flatten();
    show(ctx, out, run, |_| run_tree(ctx, run, now, None))
}

/// The tree of a run resource, for people.
fn run_tree(ctx: &Ctx, run: &Value, now: Option<FleetNow>, finish: Option<String>) -> String {
    tree_of(ctx, run, now, finish, false)
}

fn tree_of(
    ctx: &Ctx,
    run: &Value,
    now: Option<FleetNow>,
    finish: Option<String>,
    compact: bool,
) -> String {
    let name = run["name"].as_str().unwrap_or("?").to_string();
    let flat = flatten(run);
    match status_of(run) {
        Ok(status) => {
            let approve = |id: &str| ctx.command(&format!("gate approve --gate-name {id}"));
            tree::render(&RunView {
                name: &name,
                run: &flat,
                status: &status,
                now,
                approve: &approve,
                expected_finish: finish,
                compact,
            })
        }
        Err(e) => format!("run {name}: {e}\n"),
    }
}

/// `updaterun list -o table`.
pub fn run_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|r| {
            let upgrade = &r["managedClusterUpdate"]["upgrade"];
            vec![
                text(r, "/name"),
                text(r, "/status/status/state"),
                text(upgrade, "/type"),
                text(upgrade, "/kubernetesVersion"),
                text(r, "/managedClusterUpdate/nodeImageSelection/type"),
                r["updateStrategyId"]
                    .as_str()
                    .and_then(|id| id.rsplit('/').next())
                    .unwrap_or_default()
                    .to_string(),
                text(r, "/status/failureCount"),
                text(r, "/status/status/startTime"),
            ]
        })
        .collect();
    columns(
        &[
            "NAME",
            "STATE",
            "UPGRADE",
            "KUBERNETES",
            "IMAGES",
            "STRATEGY",
            "FAILURES",
            "STARTED",
        ],
        &rows,
    )
}

/// POST an action with `If-Match` the run's eTag; the run as it is after.
fn act(ctx: &Ctx, name: &str, action: &str, body: Option<&Value>) -> Result<Value, CliError> {
    let current = ctx.client.get(&path(name))?;
    let pre = etag_of(&current.body).map_or(Precondition::None, Precondition::Match);
    Ok(ctx
        .client
        .call("POST", &format!("{}/{action}", path(name)), body, pre)?
        .body)
}

/// `waverun updaterun ...`.
pub fn run(cmd: RunCmd, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        RunCmd::Create {
            name,
            upgrade_type,
            kubernetes_version,
            node_image_selection,
            stages,
            update_strategy_name,
            start,
            conn,
        } => {
            let (kind, needs_version) = match upgrade_type {
                UpgradeType::Full => ("Full", true),
                UpgradeType::ControlPlaneOnly => ("ControlPlaneOnly", true),
                UpgradeType::NodeImageOnly => ("NodeImageOnly", false),
            };
            match (&kubernetes_version, needs_version) {
                (None, true) => {
                    return Err(CliError::Usage(format!(
                        "--upgrade-type {kind} needs --kubernetes-version (x.y.z)"
                    )))
                }
                (Some(_), false) => {
                    return Err(CliError::Usage(
                        "--kubernetes-version: not with --upgrade-type NodeImageOnly".to_string(),
                    ))
                }
                _ => {}
            }
            let strategy = stages.as_deref().map(read_stages).transpose()?;
            let ctx = conn.connect()?;
            let mut upgrade = json!({ "type": kind });
            if let Some(v) = &kubernetes_version {
                upgrade["kubernetesVersion"] = json!(v);
            }
            let selection = match node_image_selection.unwrap_or(NodeImageSelection::Latest) {
                NodeImageSelection::Latest => "Latest",
                NodeImageSelection::Consistent => "Consistent",
            };
            let mut properties = json!({ "managedClusterUpdate": {
                "upgrade": upgrade,
                "nodeImageSelection": { "type": selection },
            }});
            if let Some(s) = strategy {
                properties["strategy"] = s;
            }
            if let Some(s) = &update_strategy_name {
                properties["updateStrategyId"] = json!(format!(
                    "/fleets/{}/updateStrategies/{s}",
                    ctx.client.fleet()
                ));
            }
            let body = json!({ "properties": properties });
            let pre = match read(&ctx, &path(&name))?.as_ref().and_then(etag_of) {
                Some(e) => Precondition::Match(e),
                None => Precondition::Absent,
            };
            let mut r = ctx.client.call("PUT", &path(&name), Some(&body), pre)?.body;
            if start {
                r = act(&ctx, &name, "start", None)?;
            } else {
                ctx.hint(&format!(
                    "created; start it with `{}`",
                    ctx.command(&format!("updaterun start -n {name}"))
                ));
            }
            show_run(&ctx, out, &r)
        }
        RunCmd::Start { name, conn, .. } => {
            let ctx = conn.connect()?;
            let r = act(&ctx, &name, "start", None)?;
            ctx.hint(&format!(
                "started; follow it with `{}`",
                ctx.command(&format!("updaterun watch -n {name}"))
            ));
            show_run(&ctx, out, &r)
        }
        RunCmd::Stop {
            name,
            timeout,
            conn,
        } => {
            let timeout = parse_duration(&timeout)?;
            let ctx = conn.connect()?;
            let mut r = act(&ctx, &name, "stop", None)?;
            if !ctx.no_wait && state_of(&r) == "Stopping" {
                ctx.hint("stopping: upgrades in flight finish first (--no-wait returns now)");
                r = wait_until(&ctx, &name, timeout, Duration::from_secs(30), |run| {
                    let s = run.map(state_of).unwrap_or_default();
                    (s != "Stopping").then_some(s)
                })?
                .1
                .unwrap_or(r);
            }
            show_run(&ctx, out, &r)
        }
        RunCmd::Skip {
            name,
            targets,
            skip_properties,
            conn,
        } => {
            let targets = match skip_properties {
                Some(p) => skip_properties_targets(&p)?,
                None => targets,
            };
            let mut body = Vec::new();
            for t in &targets {
                // Checked here, so a typo is a usage error before anything is sent.
                waverun_core::SkipTarget::parse(t)
                    .map_err(|e| CliError::Usage(format!("--targets {t:?}: {e}")))?;
                let (kind, n) = t.split_once(':').unwrap_or((t, ""));
                body.push(json!({ "type": kind, "name": n }));
            }
            let ctx = conn.connect()?;
            let r = act(&ctx, &name, "skip", Some(&json!({ "targets": body })))?;
            show_run(&ctx, out, &r)
        }
        RunCmd::Show { name, conn } => {
            let ctx = conn.connect()?;
            let r = ctx.client.get(&path(&name))?.body;
            show_run(&ctx, out, &r)
        }
        RunCmd::List { conn } => {
            let ctx = conn.connect()?;
            let items = list_all(&ctx, "/updateRuns")?;
            print_list(&ctx, out, items, run_table)
        }
        RunCmd::Delete { name, yes, conn } => {
            let ctx = conn.connect()?;
            delete(&ctx, &path(&name), &format!("update run {name}"), yes)
        }
        RunCmd::Wait {
            name,
            custom,
            created,
            deleted,
            timeout,
            interval,
            conn,
        } => {
            let timeout = parse_duration(&timeout)?;
            // A state's name, or else a JMESPath query.
            let state = custom
                .as_deref()
                .and_then(|c| <RunState as clap::ValueEnum>::from_str(c, false).ok());
            if let (Some(q), None) = (&custom, state) {
                output::check_query(q, "--custom")?;
            }
            let query = custom.clone().filter(|_| state.is_none());
            let custom = state;
            let ctx = conn.connect()?;
            let every = Duration::from_secs(interval.max(1));
            if let Some(q) = query {
                let held = std::cell::Cell::new(false);
                let (outcome, _) = wait_until(&ctx, &name, timeout, every, |run| {
                    let r = run?;
                    let truth = output::truthy(&q, &output::flatten(r)).unwrap_or(false);
                    held.set(truth);
                    let s = state_of(r);
                    let ended =
                        matches!(s.as_str(), "Completed" | "Failed" | "Skipped" | "Stopped");
                    (truth || ended).then_some(s)
                })?;
                return if held.get() {
                    writeln!(out, "{name}: {q}")?;
                    Ok(())
                } else {
                    Err(CliError::Wait {
                        message: format!("update run {name} ended {outcome} before {q} held"),
                        timed_out: false,
                    })
                };
            }
            let (outcome, _) = wait_until(&ctx, &name, timeout, every, |run| match run {
                None if deleted => Some("deleted".to_string()),
                None => None,
                Some(_) if created => Some("created".to_string()),
                Some(_) if deleted => None,
                Some(r) => {
                    let s = state_of(r);
                    let wanted = custom.map_or("", RunState::as_str);
                    let ended =
                        matches!(s.as_str(), "Completed" | "Failed" | "Skipped" | "Stopped");
                    (s == wanted || ended).then_some(s)
                }
            })?;
            let wanted = if created {
                "created"
            } else if deleted {
                "deleted"
            } else {
                custom.map_or("", RunState::as_str)
            };
            if outcome == wanted {
                writeln!(out, "{name}: {outcome}")?;
                Ok(())
            } else {
                Err(CliError::Wait {
                    message: format!("update run {name} ended {outcome}, not {wanted}"),
                    timed_out: false,
                })
            }
        }
        RunCmd::Watch { name, conn } => {
            let ctx = conn.connect()?;
            watch(&ctx, &name, out)
        }
        RunCmd::Plan { name, conn } => {
            let ctx = conn.connect()?;
            let plan = ctx.client.get(&format!("{}/plan", path(&name)))?.body;
            output::print(out, ctx.output, &plan, |p| {
                match serde_json::from_value::<waverun_core::plan::Plan>(p.clone()) {
                    Ok(plan) => waverun_core::plan_text::render_text(&plan),
                    Err(e) => format!("plan of {name}: {e}\n"),
                }
            })
        }
        RunCmd::Forecast { name, conn } => {
            let ctx = conn.connect()?;
            let f = ctx.client.get(&format!("{}/forecast", path(&name)))?.body;
            output::print(out, ctx.output, &f, forecast_table)
        }
        RunCmd::Retry {
            name,
            retry_name,
            start,
            conn,
        } => {
            let ctx = conn.connect()?;
            let body = retry_name.as_ref().map(|n| json!({ "name": n }));
            let mut r = act(&ctx, &name, "retry", body.as_ref())?;
            let new = r["name"].as_str().unwrap_or_default().to_string();
            if start {
                r = act(&ctx, &new, "start", None)?;
            } else {
                ctx.hint(&format!(
                    "created {new}; start it with `{}`",
                    ctx.command(&format!("updaterun start -n {new}"))
                ));
            }
            show_run(&ctx, out, &r)
        }
    }
}

/// The forecast for people: the run's, then each stage's and group's expected finish.
pub fn forecast_table(f: &Value) -> String {
    let mut out = format!(
        "Forecast of {} at {}: {} → expected finish {}\n",
        text(f, "/run"),
        text(f, "/at"),
        text(f, "/state"),
        text(f, "/expectedFinish"),
    );
    if let Some(a) = f.get("assumptions") {
        out.push_str(&format!(
            "  assuming upgrades take {} min ({}), no failures, approvals when reached\n",
            text(a, "/upgradeMinutes"),
            text(a, "/basis")
        ));
    }
    let mut rows = Vec::new();
    for st in f["stages"].as_array().into_iter().flatten() {
        rows.push(vec![
            format!("stage {}", text(st, "/name")),
            text(st, "/expectedStart"),
            text(st, "/expectedFinish"),
        ]);
        for g in st["groups"].as_array().into_iter().flatten() {
            rows.push(vec![
                format!("  group {}", text(g, "/name")),
                text(g, "/expectedStart"),
                text(g, "/expectedFinish"),
            ]);
        }
    }
    out.push_str(&columns(&["", "EXPECTED START", "EXPECTED FINISH"], &rows));
    out
}

/// Follows the run's events until `done` says the run (or its absence) is an outcome; reads
/// the run at the start, after every event and at least every `every`. Returns the outcome
/// and the run as last read; a [`CliError::Wait`] when `timeout` passes first.
fn wait_until(
    ctx: &Ctx,
    name: &str,
    timeout: Duration,
    every: Duration,
    done: impl Fn(Option<&Value>) -> Option<String>,
) -> Result<(String, Option<Value>), CliError> {
    let deadline = Instant::now() + timeout;
    let follow = Follow::start(&ctx.client, name, last_event(ctx)?);
    loop {
        let run = read(ctx, &path(name))?;
        if let Some(outcome) = done(run.as_ref()) {
            return Ok((outcome, run));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let state = run.as_ref().map_or("absent".to_string(), state_of);
            return Err(CliError::Wait {
                message: format!(
                    "update run {name}: timed out after {}; it is {state}",
                    tree::span(timeout.as_secs() as i64)
                ),
                timed_out: true,
            });
        }
        // Until an event (then read again at once), or the next read at the latest.
        let until = Instant::now() + every.min(left);
        while let Some(note) = follow.next(until.saturating_duration_since(Instant::now())) {
            if matches!(note, StreamNote::Event(_) | StreamNote::Connected) {
                break;
            }
        }
    }
}

/// The sequence number of the fleet's newest event (what a stream starts after).
fn last_event(ctx: &Ctx) -> Result<u64, CliError> {
    // Events are kept in order; the newest is the last page's last item. A run's own
    // events are few; the stream filters by run, so start from the fleet's newest.
    let mut after = 0u64;
    loop {
        let page = ctx
            .client
            .get(&format!("/events?after={after}&$top=1000"))?
            .body;
        let items = page["value"].as_array().cloned().unwrap_or_default();
        match items.last().and_then(|e| e["seq"].as_u64()) {
            Some(seq) if items.len() == 1000 => after = seq,
            Some(seq) => return Ok(seq),
            None => return Ok(after),
        }
    }
}

/// `updaterun watch`: on a terminal, the tree redrawn on every event and every second (the
/// countdowns); otherwise one line per event. Ends when the run ends.
fn watch(ctx: &Ctx, name: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let live = std::io::stdout().is_terminal() && ctx.output == Output::Table;
    let mut run = ctx.client.get(&path(name))?.body;
    let ended = |r: &Value| {
        matches!(
            state_of(r).as_str(),
            "Completed" | "Failed" | "Skipped" | "Stopped"
        )
    };
    if !live {
        // One line per event, from the run's first.
        let follow = Follow::start(&ctx.client, name, 0);
        writeln!(out, "watching update run {name}: {}", state_of(&run))?;
        out.flush()?;
        if ended(&run) {
            return Ok(());
        }
        loop {
            match follow.next(Duration::from_secs(30)) {
                Some(StreamNote::Event(e)) => {
                    writeln!(out, "{}", waverun_core::sim::timeline_line(&e))?;
                    out.flush()?;
                    if matches!(
                        e.kind(),
                        waverun_core::EventKind::RunCompleted
                            | waverun_core::EventKind::RunFailed
                            | waverun_core::EventKind::RunStopped
                            | waverun_core::EventKind::RunSkipped
                    ) {
                        return Ok(());
                    }
                }
                Some(StreamNote::Lost(why)) => {
                    eprintln!("watch: lost the event stream ({why}); reconnecting");
                }
                Some(StreamNote::Connected) => {}
                None => {
                    run = ctx.client.get(&path(name))?.body;
                    if ended(&run) {
                        writeln!(out, "update run {name}: {}", state_of(&run))?;
                        return Ok(());
                    }
                }
            }
        }
    }
    let follow = Follow::start(&ctx.client, name, last_event(ctx)?);
    let mut clock = fleet_now(ctx).map(|n| (n, Instant::now()));
    let mut finish = forecast_finish(ctx, name);
    let mut last_forecast = Instant::now();
    let mut last_read = Instant::now();
    let mut note = String::new();
    loop {
        let now = clock.map(|(n, at)| FleetNow {
            now: n.now
                + chrono::TimeDelta::milliseconds(
                    (at.elapsed().as_secs_f64() * 1000.0 * n.scale) as i64,
                ),
            scale: n.scale,
        });
        // The whole tree when it fits the terminal; else quiet groups as counts; else cut.
        let rows = terminal_rows().saturating_sub(3).max(10);
        let mut screen = tree_of(ctx, &run, now, finish.clone(), false);
        if screen.lines().count() > rows {
            screen = tree_of(ctx, &run, now, finish.clone(), true);
        }
        let lines: Vec<&str> = screen.lines().collect();
        if lines.len() > rows {
            let cut = lines.len() - (rows - 1);
            screen = lines[..rows - 1].join("\n")
                + &format!(
                    "\n… {cut} more lines (`{}` prints them all)\n",
                    ctx.command(&format!("updaterun show -n {name}"))
                );
        }
        if !note.is_empty() {
            screen.push_str(&format!("({note})\n"));
        }
        screen.push_str("Ctrl-C stops watching (the run goes on).\n");
        // Redraw from the top of the screen: home, clear, draw.
        write!(out, "\x1b[H\x1b[2J")?;
        out.write_all(screen.as_bytes())?;
        out.flush()?;
        if ended(&run) {
            return Ok(());
        }
        match follow.next(Duration::from_secs(1)) {
            Some(StreamNote::Event(_)) | Some(StreamNote::Connected) => {
                note.clear();
                // Drain what else arrived, then read the run once.
                while let Some(n) = follow.next(Duration::from_millis(20)) {
                    if let StreamNote::Lost(why) = n {
                        note = format!("event stream lost: {why}; reconnecting");
                    }
                }
                run = ctx.client.get(&path(name))?.body;
                last_read = Instant::now();
                if last_forecast.elapsed() > Duration::from_secs(10) {
                    finish = forecast_finish(ctx, name);
                    clock = fleet_now(ctx).map(|n| (n, Instant::now()));
                    last_forecast = Instant::now();
                }
            }
            Some(StreamNote::Lost(why)) => note = format!("event stream lost: {why}; reconnecting"),
            // A second passed: the countdowns move; now and then the run is read again, for
            // what changes without an event (a member waiting on its provider, retried).
            None if last_read.elapsed() >= Duration::from_secs(5) => {
                run = ctx.client.get(&path(name))?.body;
                last_read = Instant::now();
            }
            None => {}
        }
    }
}

/// The terminal's height (stdout's), or 50 when it cannot be had.
fn terminal_rows() -> usize {
    // SAFETY: TIOCGWINSZ writes a `winsize` into the value we own; stdout's descriptor stays
    // open for the call.
    unsafe {
        let mut size: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) == 0 && size.ws_row > 0 {
            size.ws_row as usize
        } else {
            50
        }
    }
}

/// The forecast's expected finish of the run, when it can be had.
fn forecast_finish(ctx: &Ctx, name: &str) -> Option<String> {
    let f = ctx
        .client
        .get(&format!("{}/forecast", path(name)))
        .ok()?
        .body;
    f["expectedFinish"].as_str().map(str::to_string)
}
