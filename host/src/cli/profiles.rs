//! `waverun autoupgradeprofile`: `az fleet autoupgradeprofile`'s verbs and flags over the
//! daemon's API — `create` (an upsert, as in Azure: re-running it without `--disabled` enables
//! the profile again), `show`, `list`, `delete`, `generate-update-run`.

use super::client::{CliError, Precondition};
use super::conn::{etag_of, Conn, Ctx};
use super::output::{self, columns, text};
use super::resources::{delete, list_all, print_list, read, show, upsert};
use clap::{Subcommand, ValueEnum};
use serde_json::{json, Value};
use std::io::Write;

/// `--channel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum Channel {
    /// The latest patch of the newest GA minor.
    Rapid,
    /// The latest patch of the minor before the newest.
    Stable,
    /// The latest patch of --target-kubernetes-version.
    TargetKubernetesVersion,
    /// The newest node image of every family (NodeImageOnly runs).
    NodeImage,
    /// Security-patch node images, Linux pools only.
    SecurityPatch,
}

/// `--node-image-selection`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum Selection {
    /// Each pool's newest image in its region, when the member starts.
    Latest,
    /// One image per family, available in every region of the run, chosen at its start.
    Consistent,
}

/// `waverun autoupgradeprofile ...`.
// The `conn` fields are flattened flags: clap would read a doc comment there as help.
#[allow(missing_docs)]
#[derive(Subcommand, Debug)]
pub enum ProfileCmd {
    /// Create (or replace) an auto-upgrade profile: new releases of its channel are rolled out
    /// through its strategy, each in a run generated and started when the release appears.
    #[command(
        after_help = "Examples:\n  waverun autoupgradeprofile create -n patches -c \
        TargetKubernetesVersion --tkv 1.30 --update-strategy-name rings\n  waverun \
        autoupgradeprofile create -n lts -c TargetKubernetesVersion --tkv 1.29 --lts\n  waverun \
        autoupgradeprofile create -n images -c NodeImage --update-strategy-id \
        /fleets/default/updateStrategies/rings\n  waverun autoupgradeprofile create -n fast -c \
        Rapid --disabled"
    )]
    Create {
        /// The profile's name.
        #[arg(short = 'n', long = "name", visible_alias = "profile-name")]
        name: String,
        /// The release channel it follows.
        #[arg(short = 'c', long, value_enum)]
        channel: Channel,
        /// The strategy's id (`/fleets/FLEET/updateStrategies/NAME`); without a strategy,
        /// members are upgraded one by one.
        #[arg(long, value_name = "ID", conflicts_with = "update_strategy_name")]
        update_strategy_id: Option<String>,
        /// The strategy's name (waverun's shorthand for --update-strategy-id).
        #[arg(long, value_name = "NAME")]
        update_strategy_name: Option<String>,
        /// How node images are chosen in Full runs (not with the NodeImage and SecurityPatch
        /// channels, whose runs take the channel's images).
        #[arg(long, value_enum)]
        node_image_selection: Option<Selection>,
        /// The minor to follow, "x.y" (only, and required, with TargetKubernetesVersion).
        #[arg(
            long = "target-kubernetes-version",
            visible_alias = "tkv",
            value_name = "X.Y"
        )]
        target_kubernetes_version: Option<String>,
        /// Target an LTS-only minor (only with TargetKubernetesVersion).
        #[arg(long = "long-term-support", visible_alias = "lts")]
        long_term_support: bool,
        /// Create it disabled: it generates nothing until enabled.
        #[arg(long)]
        disabled: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a profile with its status: the last trigger, and what it targets next.
    #[command(after_help = "Example:\n  waverun autoupgradeprofile show -n patches")]
    Show {
        /// The profile's name.
        #[arg(short = 'n', long = "name", visible_alias = "profile-name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the profiles.
    #[command(after_help = "Example:\n  waverun autoupgradeprofile list")]
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Wait until a profile is in a condition (as `az fleet autoupgradeprofile wait`).
    #[command(after_help = "Example:\n  waverun autoupgradeprofile wait -n patches --created")]
    Wait {
        /// The profile's name.
        #[arg(
            short = 'n',
            long = "name",
            visible_alias = "profile-name",
            visible_alias = "auto-upgrade-profile-name"
        )]
        name: String,
        #[command(flatten)]
        wait: super::resources::WaitFor,
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a profile (the runs it generated stay, and go on).
    #[command(after_help = "Example:\n  waverun autoupgradeprofile delete -n patches --yes")]
    Delete {
        /// The profile's name.
        #[arg(short = 'n', long = "name", visible_alias = "profile-name")]
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Create (not start) the update run for the profile's current target now, or print the
    /// one that exists; nothing when every member is at the target.
    #[command(
        after_help = "Example:\n  waverun autoupgradeprofile generate-update-run -n patches"
    )]
    GenerateUpdateRun {
        /// The profile's name.
        #[arg(
            short = 'n',
            long = "name",
            visible_aliases = ["profile-name", "auto-upgrade-profile-name"]
        )]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `autoupgradeprofile list -o table`.
pub fn profile_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|p| {
            let s = &p["autoUpgradeProfileStatus"];
            let last = match s["lastTriggerStatus"].as_str() {
                Some(st) => format!(
                    "{st} {}",
                    versions(&s["lastTriggerUpgradeVersions"]).unwrap_or_default()
                ),
                None => "-".to_string(),
            };
            let next = versions(&s["nextTarget"]["versions"]).unwrap_or_else(|| "-".into());
            vec![
                text(p, "/name"),
                text(p, "/channel"),
                target(p),
                strategy(p),
                if p["disabled"] == true { "yes" } else { "no" }.to_string(),
                last.trim_end().to_string(),
                text(s, "/lastUpdateRunName"),
                next,
            ]
        })
        .collect();
    columns(
        &[
            "NAME",
            "CHANNEL",
            "TARGET",
            "STRATEGY",
            "DISABLED",
            "LAST TRIGGER",
            "LAST RUN",
            "NEXT",
        ],
        &rows,
    )
}

/// A profile for people: what it follows, through what, what it did last and does next.
pub fn profile_text(p: &Value) -> String {
    let mut out = format!(
        "Auto-upgrade profile {}: {} {}, strategy {}{}\n",
        text(p, "/name"),
        text(p, "/channel"),
        target(p),
        strategy(p),
        if p["disabled"] == true {
            ", disabled"
        } else {
            ""
        }
    );
    let s = &p["autoUpgradeProfileStatus"];
    match s["lastTriggerStatus"].as_str() {
        None => out.push_str("  last trigger: none yet\n"),
        Some(st) => {
            out.push_str(&format!(
                "  last trigger: {st} at {}",
                text(s, "/lastTriggeredAt")
            ));
            if let Some(v) = versions(&s["lastTriggerUpgradeVersions"]) {
                out.push_str(&format!(", {v}"));
            }
            if let Some(r) = s["lastUpdateRunName"].as_str() {
                out.push_str(&format!(" → update run {r}"));
            }
            out.push('\n');
            if let Some(m) = s["lastTriggerMessage"].as_str() {
                out.push_str(&format!("    {m}\n"));
            }
            if let Some(e) = s["lastTriggerError"]["message"].as_str() {
                out.push_str(&format!("    error: {e}\n"));
            }
        }
    }
    if s["nextTarget"].is_object() {
        let n = &s["nextTarget"];
        let v = versions(&n["versions"]).unwrap_or_else(|| "no target".into());
        out.push_str(&format!("  next: {v} — {}\n", text(n, "/message")));
    }
    out
}

fn versions(v: &Value) -> Option<String> {
    let list: Vec<&str> = v.as_array()?.iter().filter_map(Value::as_str).collect();
    (!list.is_empty()).then(|| list.join(", "))
}

fn target(p: &Value) -> String {
    match p["targetKubernetesVersion"].as_str() {
        Some(v) if p["longTermSupport"] == true => format!("{v} (LTS)"),
        Some(v) => v.to_string(),
        None => "-".to_string(),
    }
}

fn strategy(p: &Value) -> String {
    p["updateStrategyId"]
        .as_str()
        .map(|id| id.rsplit('/').next().unwrap_or(id).to_string())
        .unwrap_or_else(|| "(one by one)".to_string())
}

/// `waverun autoupgradeprofile ...`.
pub fn profile(cmd: ProfileCmd, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        ProfileCmd::Create {
            name,
            channel,
            update_strategy_id,
            update_strategy_name,
            node_image_selection,
            target_kubernetes_version,
            long_term_support,
            disabled,
            conn,
        } => {
            if matches!(channel, Channel::NodeImage | Channel::SecurityPatch)
                && node_image_selection.is_some()
            {
                return Err(CliError::Usage(format!(
                    "--node-image-selection must not be given with --channel {channel:?}: its \
                     runs take exactly the channel's newest images (as Azure's CLI refuses it \
                     for NodeImage)"
                )));
            }
            let ctx = conn.connect()?;
            let mut properties = json!({
                "channel": channel.to_possible_value().map(|v| v.get_name().to_string()),
                "disabled": disabled,
                "longTermSupport": long_term_support,
            });
            let id = update_strategy_id.or_else(|| {
                update_strategy_name
                    .map(|n| format!("/fleets/{}/updateStrategies/{n}", ctx.client.fleet()))
            });
            if let Some(id) = id {
                properties["updateStrategyId"] = json!(id);
            }
            if let Some(s) = node_image_selection {
                let t = s.to_possible_value().map(|v| v.get_name().to_string());
                properties["nodeImageSelection"] = json!({ "type": t });
            }
            if let Some(v) = target_kubernetes_version {
                properties["targetKubernetesVersion"] = json!(v);
            }
            let r = upsert(
                &ctx,
                &format!("/autoUpgradeProfiles/{name}"),
                &json!({ "properties": properties }),
            )?;
            show(&ctx, out, &r.body, profile_text)
        }
        ProfileCmd::Show { name, conn } => {
            let ctx = conn.connect()?;
            let r = ctx.client.get(&format!("/autoUpgradeProfiles/{name}"))?;
            show(&ctx, out, &r.body, profile_text)
        }
        ProfileCmd::List { conn } => {
            let ctx = conn.connect()?;
            let items = list_all(&ctx, "/autoUpgradeProfiles")?;
            print_list(&ctx, out, items, profile_table)
        }
        ProfileCmd::Wait { name, wait, conn } => {
            let ctx = conn.connect()?;
            super::resources::wait_for(
                &ctx,
                &format!("/autoUpgradeProfiles/{name}"),
                &format!("auto-upgrade profile {name}"),
                &wait,
            )
        }
        ProfileCmd::Delete { name, yes, conn } => {
            let ctx = conn.connect()?;
            delete(
                &ctx,
                &format!("/autoUpgradeProfiles/{name}"),
                &format!("auto-upgrade profile {name}"),
                yes,
            )
        }
        ProfileCmd::GenerateUpdateRun { name, conn } => {
            let ctx = conn.connect()?;
            generate(&ctx, out, &name)
        }
    }
}

/// `generate-update-run`: the `GenerateResponse` (`{id, name}`), with the command that starts
/// the run; or, when nothing was generated, why (on stderr) and no output.
fn generate(ctx: &Ctx, out: &mut dyn Write, name: &str) -> Result<(), CliError> {
    let path = format!("/autoUpgradeProfiles/{name}");
    let pre = read(ctx, &path)?
        .as_ref()
        .and_then(etag_of)
        .map_or(Precondition::None, Precondition::Match);
    let r = ctx
        .client
        .call("POST", &format!("{path}/generateUpdateRun"), None, pre)?;
    if r.status == 204 {
        let why = ctx.client.get(&path).ok().and_then(|p| {
            p.body["properties"]["autoUpgradeProfileStatus"]["nextTarget"]["message"]
                .as_str()
                .map(str::to_string)
        });
        ctx.hint(&match why {
            Some(w) => format!("No update run was generated: {w}."),
            None => {
                "No update run was generated: every member the profile covers is at its target."
                    .to_string()
            }
        });
        return Ok(());
    }
    let run = text(&r.body, "/name");
    output::print(out, ctx.output, &r.body, |b| {
        format!("{}\n", text(b, "/id"))
    })?;
    let state = ctx
        .client
        .get(&format!("/updateRuns/{run}"))
        .ok()
        .and_then(|v| {
            v.body["properties"]["status"]["status"]["state"]
                .as_str()
                .map(str::to_string)
        });
    if state.as_deref() == Some("NotStarted") {
        ctx.hint(&format!(
            "update run {run} is not started: start it with `{}`",
            ctx.command(&format!("updaterun start -n {run}"))
        ));
    } else if let Some(s) = state {
        ctx.hint(&format!(
            "update run {run} is {s}: follow it with `{}`",
            ctx.command(&format!("updaterun watch -n {run}"))
        ));
    }
    Ok(())
}
