//! `waverun member`, `waverun updatestrategy` and `waverun gate`: the `az fleet` verbs and
//! flags over the daemon's API. `create` is an upsert, as in Azure: it reads the resource first
//! and writes with `If-Match` (or `If-None-Match: *` when it is new), so a change made in
//! between is refused rather than overwritten. `delete` asks first, unless `--yes`.

use super::client::{CliError, Precondition, Reply};
use super::conn::{etag_of, Conn, Ctx};
use super::output::{self, columns, flatten, flatten_list, labels, text};
use clap::Subcommand;
use serde_json::{json, Map, Value};
use std::io::{IsTerminal, Write};

/// `waverun member ...`.
// The `conn` fields are flattened flags: clap would read a doc comment there as help.
#[allow(missing_docs)]
#[derive(Subcommand, Debug)]
pub enum MemberCmd {
    /// Create (or replace) a member: a cluster bound to its provider.
    #[command(
        after_help = "Examples:\n  waverun member create -n prod-eu-1 --provider gke \
        --cluster-ref '{\"location\":\"europe-west1\",\"cluster\":\"prod-eu-1\"}' --update-group prod \
        --labels \"env=prod geo=eu\"\n  waverun member create -n aks-1 --member-cluster-id \
        /subscriptions/S/resourceGroups/RG/providers/Microsoft.ContainerService/managedClusters/aks-1"
    )]
    Create {
        /// The member's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Azure's cluster resource id (the reference when there is no --cluster-ref).
        #[arg(long = "member-cluster-id", value_name = "ID")]
        member_cluster_id: Option<String>,
        /// The provider that reaches the cluster (default: simulated).
        #[arg(long)]
        provider: Option<String>,
        /// The cluster as the provider knows it: a string, or a JSON object.
        #[arg(long = "cluster-ref", value_name = "REF")]
        cluster_ref: Option<String>,
        /// The update group.
        #[arg(long = "update-group", value_name = "GROUP")]
        update_group: Option<String>,
        /// Labels: "k=v k2=v2".
        #[arg(long = "labels", alias = "member-labels", value_name = "K=V ...")]
        labels: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Create (or replace) many members at once, all of them or none: a JSON or YAML file of
    /// members, each with its name — the API's list (`{"value": [...]}`), or a list as
    /// `waverun member list -o json` prints it.
    #[command(
        after_help = "Examples:\n  waverun member list -o json > members.json   # on one daemon\n  \
        waverun member import --file members.json     # into another\n  \
        waverun member import --file new-clusters.yaml --only-new"
    )]
    Import {
        /// The file of members (`-` for stdin).
        #[arg(long = "file", value_name = "FILE")]
        file: String,
        /// Refuse the whole import if one of its members exists already.
        #[arg(long = "only-new")]
        only_new: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Change a member's update group or labels (the rest is kept).
    #[command(
        after_help = "Example:\n  waverun member update -n prod-eu-1 --update-group canary --labels \"env=prod ring=0\""
    )]
    Update {
        /// The member's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// The update group.
        #[arg(long = "update-group", value_name = "GROUP")]
        update_group: Option<String>,
        /// Labels, replacing the member's: "k=v k2=v2".
        #[arg(long = "labels", alias = "member-labels", value_name = "K=V ...")]
        labels: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a member: its binding and what its provider observed.
    #[command(after_help = "Example:\n  waverun member show -n prod-eu-1 -o json")]
    Show {
        /// The member's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the fleet's members.
    #[command(after_help = "Example:\n  waverun member list -o table")]
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Describe a member again through its provider and write it back (as `az fleet member
    /// reconcile`): its status, versions and labels as the cluster has them now.
    #[command(after_help = "Example:\n  waverun member reconcile -n prod-eu-1")]
    Reconcile {
        /// The member's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Wait until a member is in a condition (as `az fleet member wait`).
    #[command(
        after_help = "Examples:\n  waverun member wait -n prod-eu-1 --created\n  \
        waverun member wait -n prod-eu-1 --custom \"status.kubernetesVersion=='1.33.3'\" --timeout 600"
    )]
    Wait {
        /// The member's name.
        #[arg(short = 'n', long = "name", visible_alias = "fleet-member-name")]
        name: String,
        #[command(flatten)]
        wait: WaitFor,
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a member (refused while a started run includes it).
    #[command(after_help = "Example:\n  waverun member delete -n prod-eu-1 --yes")]
    Delete {
        /// The member's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `waverun updatestrategy ...`.
// The `conn` fields are flattened flags: clap would read a doc comment there as help.
#[allow(missing_docs)]
#[derive(Subcommand, Debug)]
pub enum StrategyCmd {
    /// Create (or replace) an update strategy from a stages document.
    #[command(
        after_help = "Examples:\n  waverun updatestrategy create -n safe-rollout --stages stages.yaml\n  \
        waverun updatestrategy create -n quick --stages '{\"stages\":[{\"name\":\"all\"}]}'\n  \
        az fleet updatestrategy show ... | waverun updatestrategy create -n copy --stages -"
    )]
    Create {
        /// The strategy's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// The stages: a file (YAML or JSON), inline JSON, or - for stdin. A bare
        /// {"stages": [...]}, {"strategy": ...} or a whole updateStrategies resource; every
        /// field is kept.
        #[arg(long, value_name = "FILE|JSON|-")]
        stages: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a strategy.
    #[command(after_help = "Example:\n  waverun updatestrategy show -n safe-rollout -o yaml")]
    Show {
        /// The strategy's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the strategies.
    #[command(after_help = "Example:\n  waverun updatestrategy list")]
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Wait until a strategy is in a condition (as `az fleet updatestrategy wait`).
    #[command(after_help = "Example:\n  waverun updatestrategy wait -n safe-rollout --deleted")]
    Wait {
        /// The strategy's name.
        #[arg(short = 'n', long = "name", visible_alias = "update-strategy-name")]
        name: String,
        #[command(flatten)]
        wait: WaitFor,
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a strategy (runs made from it keep their copy).
    #[command(after_help = "Example:\n  waverun updatestrategy delete -n safe-rollout --yes")]
    Delete {
        /// The strategy's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `waverun gate ...`.
// The `conn` fields are flattened flags: clap would read a doc comment there as help.
#[allow(missing_docs)]
#[derive(Subcommand, Debug)]
pub enum GateCmd {
    /// List gates, fleet-wide or of one run.
    #[command(
        after_help = "Examples:\n  waverun gate list --state-filter Pending\n  waverun gate list --run r1"
    )]
    List {
        /// Only gates in this state (Pending, Completed, Skipped).
        #[arg(long = "state-filter", alias = "state", value_name = "STATE")]
        state_filter: Option<GateState>,
        /// Only the gates of this run.
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a gate.
    #[command(
        after_help = "Example:\n  waverun gate show --gate-name 3fa85f64-5717-4562-b3fc-2c963f66afa6"
    )]
    Show {
        /// The gate's name (a GUID).
        #[arg(
            short = 'n',
            long = "gate-name",
            alias = "gate",
            alias = "name",
            value_name = "GUID"
        )]
        gate_name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Approve a gate (its state becomes Completed).
    #[command(
        after_help = "Example:\n  waverun gate approve --gate-name 3fa85f64-5717-4562-b3fc-2c963f66afa6"
    )]
    Approve {
        /// The gate's name (a GUID).
        #[arg(
            short = 'n',
            long = "gate-name",
            alias = "gate",
            alias = "name",
            value_name = "GUID"
        )]
        gate_name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Fail a Pending gate (an inconclusive health check judged unhealthy, an approval
    /// refused): its stage or group fails and the run stops.
    #[command(
        after_help = "Example:\n  waverun gate fail --gate-name 3fa85f64-5717-4562-b3fc-2c963f66afa6 --message \"error budget burnt\""
    )]
    Fail {
        /// The gate's name (a GUID).
        #[arg(
            short = 'n',
            long = "gate-name",
            alias = "gate",
            alias = "name",
            value_name = "GUID"
        )]
        gate_name: String,
        /// Why (shown on the gate and in the run's error).
        #[arg(long)]
        message: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Set a gate's state (only Completed is accepted: an approval).
    #[command(
        after_help = "Example:\n  waverun gate update --gate-name 3fa85f64-5717-4562-b3fc-2c963f66afa6 --state Completed"
    )]
    Update {
        /// The gate's name (a GUID).
        #[arg(
            short = 'n',
            long = "gate-name",
            alias = "gate",
            alias = "name",
            value_name = "GUID"
        )]
        gate_name: String,
        /// The new state.
        #[arg(
            long = "state",
            alias = "gate-state",
            alias = "gs",
            value_name = "STATE"
        )]
        state: GateState,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `az`'s wait conditions (`--created`, `--updated`, `--deleted`, `--exists`, `--custom`):
/// exactly one of them; the resource is read every `--interval` seconds until it holds or
/// `--timeout` passes.
#[derive(clap::Args, Debug, Clone)]
pub struct WaitFor {
    /// Until it exists and its provisioningState is Succeeded.
    #[arg(long)]
    pub created: bool,
    /// Until its provisioningState is Succeeded.
    #[arg(long)]
    pub updated: bool,
    /// Until it is gone.
    #[arg(long)]
    pub deleted: bool,
    /// Until it exists.
    #[arg(long)]
    pub exists: bool,
    /// Until this JMESPath query on it (as `show -o json` prints it) is true, e.g.
    /// "provisioningState=='Succeeded'".
    #[arg(long, value_name = "JMESPATH")]
    pub custom: Option<String>,
    /// Seconds between two reads.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub interval: u64,
    /// How long to wait at most (seconds, or 90s, 30m, 2h).
    #[arg(long, value_name = "DURATION", default_value = "3600")]
    pub timeout: String,
}

/// What a wait waits for, once checked.
enum Until {
    Created,
    Updated,
    Deleted,
    Exists,
    Custom(String),
}

impl WaitFor {
    /// The one condition given.
    fn until(&self) -> Result<Until, CliError> {
        let mut given = Vec::new();
        if self.created {
            given.push(Until::Created);
        }
        if self.updated {
            given.push(Until::Updated);
        }
        if self.deleted {
            given.push(Until::Deleted);
        }
        if self.exists {
            given.push(Until::Exists);
        }
        if let Some(q) = &self.custom {
            output::check_query(q, "--custom")?;
            given.push(Until::Custom(q.clone()));
        }
        match given.len() {
            1 => Ok(given.pop().expect("one")),
            n => Err(CliError::Usage(format!(
                "wait: give exactly one of --created, --updated, --deleted, --exists, --custom ({n} given)"
            ))),
        }
    }
}

/// Waits until the resource at `path` (`what`, for messages) is as `wait` says; an error when
/// `--timeout` passes first (exit 3, as `updaterun wait`).
pub fn wait_for(ctx: &Ctx, path: &str, what: &str, wait: &WaitFor) -> Result<(), CliError> {
    let until = wait.until()?;
    let timeout = super::runs::parse_duration(&wait.timeout)?;
    let every = std::time::Duration::from_secs(wait.interval.max(1));
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let current = read(ctx, path)?;
        let succeeded = |r: &Value| {
            let state = r["properties"]["provisioningState"].as_str();
            state.is_none_or(|s| s == "Succeeded")
        };
        let holds = match (&until, &current) {
            (Until::Deleted, None) => true,
            (Until::Exists, Some(_)) => true,
            (Until::Created | Until::Updated, Some(r)) => succeeded(r),
            (Until::Custom(q), Some(r)) => output::truthy(q, &flatten(r))?,
            _ => false,
        };
        if holds {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(CliError::Wait {
                message: format!("{what}: the wait timed out after {} s", timeout.as_secs()),
                timed_out: true,
            });
        }
        std::thread::sleep(every.min(left));
    }
}

/// A gate's state, as the flags take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GateState {
    /// Waiting.
    #[value(name = "Pending")]
    Pending,
    /// Approved (or opened).
    #[value(name = "Completed")]
    Completed,
    /// Skipped.
    #[value(name = "Skipped")]
    Skipped,
}

impl GateState {
    fn as_str(self) -> &'static str {
        match self {
            GateState::Pending => "Pending",
            GateState::Completed => "Completed",
            GateState::Skipped => "Skipped",
        }
    }
}

/// `k=v k2=v2` (Azure's `key[=value]`, space-separated) as a labels object.
pub fn parse_labels(s: &str) -> Result<Value, CliError> {
    let mut m = Map::new();
    for part in s.split_whitespace() {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        if k.is_empty() {
            return Err(CliError::Usage(format!(
                "--labels: {part:?} has no key (write \"key=value key2=value2\")"
            )));
        }
        m.insert(k.to_string(), Value::String(v.to_string()));
    }
    Ok(Value::Object(m))
}

/// The current resource, or `None` when it does not exist.
pub fn read(ctx: &Ctx, path: &str) -> Result<Option<Value>, CliError> {
    match ctx.client.get(path) {
        Ok(r) => Ok(Some(r.body)),
        Err(CliError::Api { status: 404, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// PUT as an upsert: `If-Match` the eTag read, or `If-None-Match: *` when it is new.
pub fn upsert(ctx: &Ctx, path: &str, body: &Value) -> Result<Reply, CliError> {
    let pre = match read(ctx, path)?.as_ref().and_then(etag_of) {
        Some(e) => Precondition::Match(e),
        None => Precondition::Absent,
    };
    ctx.client.call("PUT", path, Some(body), pre)
}

/// Asks "delete X? [y/N]" on a terminal; without one, `--yes` is required.
pub fn confirm(what: &str, yes: bool) -> Result<(), CliError> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "deleting {what}: pass --yes to confirm (stdin is not a terminal to ask on)"
        )));
    }
    eprint!("Delete {what}? [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        Ok(())
    } else {
        Err(CliError::Usage(format!("not deleting {what}")))
    }
}

/// DELETE with `If-Match` the eTag read (404 when it is not there).
pub fn delete(ctx: &Ctx, path: &str, what: &str, yes: bool) -> Result<(), CliError> {
    let current = ctx.client.get(path)?;
    confirm(what, yes)?;
    let pre = etag_of(&current.body).map_or(Precondition::None, Precondition::Match);
    let r = ctx.client.call("DELETE", path, None, pre)?;
    if r.status == 202 && ctx.no_wait {
        ctx.hint(&format!(
            "{what} is stopping: it is deleted once the upgrades in flight finish"
        ));
        return Ok(());
    }
    if r.status == 202 {
        // A started run: stopped first, deleted once its upgrades in flight have finished.
        ctx.hint(&format!(
            "{what} is stopping: it is deleted once the upgrades in flight finish"
        ));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(24 * 3600);
        while read(ctx, path)?.is_some() {
            if std::time::Instant::now() > deadline {
                return Err(CliError::Wait {
                    message: format!("{what}: still not deleted after a day"),
                    timed_out: true,
                });
            }
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
    }
    ctx.hint(&format!("deleted {what}"));
    Ok(())
}

/// Prints one resource, flattened.
pub fn show(
    ctx: &Ctx,
    out: &mut dyn Write,
    resource: &Value,
    table: impl FnOnce(&Value) -> String,
) -> Result<(), CliError> {
    output::print(out, ctx.output, &flatten(resource), table)
}

/// Every item of a list, following `nextLink`s.
pub fn list_all(ctx: &Ctx, path: &str) -> Result<Vec<Value>, CliError> {
    let mut items = Vec::new();
    let mut page = ctx.client.get(path)?.body;
    loop {
        items.extend(flatten_list(&page));
        let Some(next) = page["nextLink"].as_str().filter(|n| !n.is_empty()) else {
            return Ok(items);
        };
        let url = super::client::next_url(ctx.client.server(), next)?;
        page = ctx.client.get_url(&url)?.body;
    }
}

/// Prints a list: a JSON/YAML array, or `table` of it.
pub fn print_list(
    ctx: &Ctx,
    out: &mut dyn Write,
    items: Vec<Value>,
    table: impl FnOnce(&[Value]) -> String,
) -> Result<(), CliError> {
    let doc = Value::Array(items);
    output::print(out, ctx.output, &doc, |d| {
        table(d.as_array().map(Vec::as_slice).unwrap_or_default())
    })
}

/// `member list -o table`.
pub fn member_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|m| {
            vec![
                text(m, "/name"),
                text(m, "/group"),
                text(m, "/provider"),
                text(m, "/status/kubernetesVersion"),
                text(m, "/status/region"),
                labels(m.get("labels")),
                text(m, "/status/leaseHolder"),
            ]
        })
        .collect();
    columns(
        &[
            "NAME",
            "GROUP",
            "PROVIDER",
            "KUBERNETES",
            "REGION",
            "LABELS",
            "HELD BY RUN",
        ],
        &rows,
    )
}

/// `waverun member ...`.
pub fn member(cmd: MemberCmd, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        MemberCmd::Create {
            name,
            member_cluster_id,
            provider,
            cluster_ref,
            update_group,
            labels,
            conn,
        } => {
            let ctx = conn.connect()?;
            let mut p = Map::new();
            if let Some(id) = member_cluster_id {
                p.insert("clusterResourceId".into(), json!(id));
            }
            if let Some(pr) = provider {
                p.insert("provider".into(), json!(pr));
            }
            if let Some(r) = cluster_ref {
                let v = if r.trim_start().starts_with('{') {
                    serde_json::from_str(&r).map_err(|e| {
                        CliError::Usage(format!("--cluster-ref: not a JSON object: {e}"))
                    })?
                } else {
                    json!(r)
                };
                p.insert("clusterRef".into(), v);
            }
            if let Some(g) = update_group {
                p.insert("group".into(), json!(g));
            }
            if let Some(l) = labels {
                p.insert("labels".into(), parse_labels(&l)?);
            }
            let r = upsert(
                &ctx,
                &format!("/members/{name}"),
                &json!({ "properties": p }),
            )?;
            show(&ctx, out, &r.body, |m| {
                member_table(std::slice::from_ref(m))
            })
        }
        MemberCmd::Import {
            file,
            only_new,
            conn,
        } => {
            let value = read_members(&file)?;
            let ctx = conn.connect()?;
            let pre = if only_new {
                Precondition::Absent
            } else {
                Precondition::None
            };
            let r = ctx
                .client
                .call("POST", "/members", Some(&json!({ "value": value })), pre)?;
            output::print(out, ctx.output, &r.body, |b| {
                format!(
                    "{} members: {} created, {} registered again\n",
                    b["created"].as_u64().unwrap_or(0) + b["updated"].as_u64().unwrap_or(0),
                    b["created"].as_u64().unwrap_or(0),
                    b["updated"].as_u64().unwrap_or(0),
                )
            })
        }
        MemberCmd::Update {
            name,
            update_group,
            labels,
            conn,
        } => {
            let ctx = conn.connect()?;
            if update_group.is_none() && labels.is_none() {
                return Err(CliError::Usage(
                    "member update: give --update-group and/or --labels".to_string(),
                ));
            }
            let path = format!("/members/{name}");
            let current = ctx.client.get(&path)?;
            let mut p = Map::new();
            if let Some(g) = update_group {
                p.insert("group".into(), json!(g));
            }
            if let Some(l) = labels {
                p.insert("labels".into(), parse_labels(&l)?);
            }
            let pre = etag_of(&current.body).map_or(Precondition::None, Precondition::Match);
            let r = ctx
                .client
                .call("PATCH", &path, Some(&json!({ "properties": p })), pre)?;
            show(&ctx, out, &r.body, |m| {
                member_table(std::slice::from_ref(m))
            })
        }
        MemberCmd::Show { name, conn } => {
            let ctx = conn.connect()?;
            let r = ctx.client.get(&format!("/members/{name}"))?;
            show(&ctx, out, &r.body, output::fields)
        }
        MemberCmd::List { conn } => {
            let ctx = conn.connect()?;
            let items = list_all(&ctx, "/members")?;
            print_list(&ctx, out, items, member_table)
        }
        MemberCmd::Reconcile { name, conn } => {
            let ctx = conn.connect()?;
            let path = format!("/members/{name}");
            let current = ctx.client.get(&path)?;
            // The binding as it is, written back: the daemon describes the cluster again.
            let mut p = current.body["properties"].clone();
            if let Some(m) = p.as_object_mut() {
                m.remove("status");
                m.remove("provisioningState");
            }
            let pre = etag_of(&current.body).map_or(Precondition::None, Precondition::Match);
            let r = ctx
                .client
                .call("PUT", &path, Some(&json!({ "properties": p })), pre)?;
            show(&ctx, out, &r.body, |m| {
                member_table(std::slice::from_ref(m))
            })
        }
        MemberCmd::Wait { name, wait, conn } => {
            let ctx = conn.connect()?;
            wait_for(
                &ctx,
                &format!("/members/{name}"),
                &format!("member {name}"),
                &wait,
            )
        }
        MemberCmd::Delete { name, yes, conn } => {
            let ctx = conn.connect()?;
            delete(
                &ctx,
                &format!("/members/{name}"),
                &format!("member {name}"),
                yes,
            )
        }
    }
}

/// The members of `member import --file FILE` (`-`: stdin), JSON or YAML: the API's list
/// (`{"value": [...]}`) or a plain list, each member as the API gives it (`name`,
/// `properties`) or flattened as the CLI prints it. Returns them as the API takes them.
pub fn read_members(arg: &str) -> Result<Vec<Value>, CliError> {
    use waverun_core::document::{self, Format};
    let (text, what) = if arg == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        (s, "stdin".to_string())
    } else {
        let path = std::path::Path::new(arg);
        (
            crate::read_document(path).map_err(CliError::Usage)?,
            arg.to_string(),
        )
    };
    let format = match text.trim_start().chars().next() {
        Some('{' | '[') => Format::Json,
        _ => Format::Yaml,
    };
    let doc: Value =
        document::from_str(&text, format).map_err(|e| CliError::Usage(format!("{what}: {e}")))?;
    let items = match doc {
        Value::Array(items) => items,
        Value::Object(mut o) if o.contains_key("value") => match o.remove("value") {
            Some(Value::Array(items)) => items,
            _ => {
                return Err(CliError::Usage(format!(
                    "{what}: value: must be a list of members"
                )))
            }
        },
        _ => {
            return Err(CliError::Usage(format!(
                "{what}: must be a list of members, or {{\"value\": [...]}}"
            )))
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(mut m) = item else {
                return Err(CliError::Usage(format!(
                    "{what}: [{i}]: a member must be an object with its name"
                )));
            };
            if m.contains_key("properties") {
                return Ok(Value::Object(m));
            }
            // Flattened, as `member list -o json` prints it: the resource's own fields stay
            // at the top, the rest are its properties.
            let mut top = Map::new();
            for k in ["name", "id", "type", "systemData", "eTag"] {
                if let Some(v) = m.remove(k) {
                    top.insert(k.to_string(), v);
                }
            }
            top.insert("properties".to_string(), Value::Object(m));
            Ok(Value::Object(top))
        })
        .collect()
}

/// The `--stages` document: a file, inline JSON, or `-` (stdin), in any form the strategy
/// reader takes (bare, wrapped, a whole resource, `az`'s flattened view). Returns the strategy
/// as JSON, every field kept.
pub fn read_stages(arg: &str) -> Result<Value, CliError> {
    use waverun_core::document::{self, Document, Format};
    let (text, format, what) = if arg == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        let f = if s.trim_start().starts_with('{') {
            Format::Json
        } else {
            Format::Yaml
        };
        (s, f, "stdin".to_string())
    } else if std::path::Path::new(arg).exists() {
        let path = std::path::Path::new(arg);
        let s = crate::read_document(path).map_err(CliError::Usage)?;
        let f = if crate::is_json(path) || s.trim_start().starts_with('{') {
            Format::Json
        } else {
            Format::Yaml
        };
        (s, f, arg.to_string())
    } else if arg.trim_start().starts_with('{') {
        (arg.to_string(), Format::Json, "the inline JSON".to_string())
    } else {
        return Err(CliError::Usage(format!(
            "--stages: {arg:?} is neither a file nor inline JSON ({{\"stages\": [...]}}), nor - for stdin"
        )));
    };
    match document::document(&text, format) {
        Ok(Document::Strategy { strategy, .. }) => {
            let mut errors = waverun_core::error::Errors::default();
            waverun_core::validate::validate_strategy("stages", &strategy, &mut errors);
            errors
                .into_result()
                .map_err(|e| CliError::Usage(format!("--stages ({what}): {e}")))?;
            serde_json::to_value(&strategy).map_err(|e| CliError::Other(e.to_string()))
        }
        Ok(Document::Scenario(_)) => Err(CliError::Usage(format!(
            "--stages ({what}): a scenario, not a strategy ({{\"stages\": [...]}})"
        ))),
        Err(e) => Err(CliError::Usage(format!("--stages ({what}): {e}"))),
    }
}

/// `updatestrategy list -o table`.
pub fn strategy_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|s| {
            let stages = s["strategy"]["stages"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let names: Vec<String> = stages
                .iter()
                .map(|st| st["name"].as_str().unwrap_or("?").to_string())
                .collect();
            let groups: usize = stages
                .iter()
                .map(|st| st["groups"].as_array().map_or(0, Vec::len))
                .sum();
            let gates: usize = stages
                .iter()
                .map(|st| {
                    let n = |k: &str| st[k].as_array().map_or(0, Vec::len);
                    n("beforeGates")
                        + n("afterGates")
                        + st["groups"].as_array().map_or(0, |gs| {
                            gs.iter()
                                .map(|g| {
                                    g["beforeGates"].as_array().map_or(0, Vec::len)
                                        + g["afterGates"].as_array().map_or(0, Vec::len)
                                })
                                .sum()
                        })
                })
                .sum();
            vec![
                text(s, "/name"),
                names.join(" → "),
                groups.to_string(),
                gates.to_string(),
            ]
        })
        .collect();
    columns(&["NAME", "STAGES", "GROUPS", "GATES"], &rows)
}

/// A strategy's stages for people: each stage with its selector, limits, gates and wait,
/// each group with its own.
pub fn strategy_tree(s: &Value) -> String {
    let mut out = format!("Update strategy {}\n", text(s, "/name"));
    let limits = |v: &Value| {
        let mut parts = Vec::new();
        if let Some(Value::Object(sel)) = v.get("memberSelector") {
            for (k, x) in sel {
                let x = x.as_str().map_or_else(|| x.to_string(), str::to_string);
                parts.push(format!("{k} {x}"));
            }
        }
        for k in ["maxConcurrency", "maxAllowedFailures"] {
            if let Some(x) = v.get(k) {
                parts.push(format!(
                    "{k} {}",
                    x.as_str().map_or_else(|| x.to_string(), str::to_string)
                ));
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("  [{}]", parts.join(", "))
        }
    };
    let gates = |v: &Value, k: &str| {
        v[k].as_array()
            .map(|gs| {
                gs.iter()
                    .map(|g| {
                        let mut t = text(g, "/type");
                        if let Some(d) = g["displayName"].as_str() {
                            t.push_str(&format!(" \"{d}\""));
                        }
                        t
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    for st in s["strategy"]["stages"].as_array().into_iter().flatten() {
        out.push_str(&format!("  stage {}{}\n", text(st, "/name"), limits(st)));
        let b = gates(st, "beforeGates");
        if !b.is_empty() {
            out.push_str(&format!("    before: {b}\n"));
        }
        for g in st["groups"].as_array().into_iter().flatten() {
            out.push_str(&format!("    group {}{}\n", text(g, "/name"), limits(g)));
            for (k, label) in [("beforeGates", "before"), ("afterGates", "after")] {
                let t = gates(g, k);
                if !t.is_empty() {
                    out.push_str(&format!("      {label}: {t}\n"));
                }
            }
        }
        let a = gates(st, "afterGates");
        if !a.is_empty() {
            out.push_str(&format!("    after: {a}\n"));
        }
        if let Some(w) = st["afterStageWaitInSeconds"].as_u64() {
            out.push_str(&format!("    then wait {}\n", super::tree::span(w as i64)));
        }
    }
    out
}

/// `waverun updatestrategy ...`.
pub fn strategy(cmd: StrategyCmd, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        StrategyCmd::Create { name, stages, conn } => {
            let strategy = read_stages(&stages)?;
            let ctx = conn.connect()?;
            let r = upsert(
                &ctx,
                &format!("/updateStrategies/{name}"),
                &json!({ "properties": { "strategy": strategy } }),
            )?;
            show(&ctx, out, &r.body, strategy_tree)
        }
        StrategyCmd::Show { name, conn } => {
            let ctx = conn.connect()?;
            let r = ctx.client.get(&format!("/updateStrategies/{name}"))?;
            show(&ctx, out, &r.body, strategy_tree)
        }
        StrategyCmd::List { conn } => {
            let ctx = conn.connect()?;
            let items = list_all(&ctx, "/updateStrategies")?;
            print_list(&ctx, out, items, strategy_table)
        }
        StrategyCmd::Wait { name, wait, conn } => {
            let ctx = conn.connect()?;
            wait_for(
                &ctx,
                &format!("/updateStrategies/{name}"),
                &format!("update strategy {name}"),
                &wait,
            )
        }
        StrategyCmd::Delete { name, yes, conn } => {
            let ctx = conn.connect()?;
            delete(
                &ctx,
                &format!("/updateStrategies/{name}"),
                &format!("update strategy {name}"),
                yes,
            )
        }
    }
}

/// `gate list -o table`, with the command that approves each pending approval gate.
pub fn gate_table(items: &[Value], approve: &dyn Fn(&str) -> String) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|g| {
            let pending = g["state"] == "Pending" && g["gateType"] == "Approval";
            vec![
                text(g, "/name"),
                text(g, "/state"),
                text(g, "/gateType"),
                text(g, "/displayName"),
                text(g, "/target/updateRunProperties/name"),
                gate_place(g),
                if pending {
                    approve(&text(g, "/name"))
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    columns(
        &[
            "NAME",
            "STATE",
            "TYPE",
            "DISPLAY NAME",
            "RUN",
            "WHERE",
            "TO APPROVE",
        ],
        &rows,
    )
}

/// Where a gate stands in its run: `Before stage/group`.
fn gate_place(g: &Value) -> String {
    let p = &g["target"]["updateRunProperties"];
    let mut place = text(p, "/stage");
    if let Some(group) = p["group"].as_str() {
        place = format!("{place}/{group}");
    }
    format!("{} {place}", text(p, "/timing"))
}

/// `waverun gate ...`.
pub fn gate(cmd: GateCmd, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        GateCmd::List {
            state_filter,
            run,
            conn,
        } => {
            let ctx = conn.connect()?;
            let mut query = Vec::new();
            if let Some(s) = state_filter {
                query.push(format!("$filter=state%20eq%20{}", s.as_str()));
            }
            if let Some(r) = &run {
                query.push(format!("run={r}"));
            }
            let path = if query.is_empty() {
                "/gates".to_string()
            } else {
                format!("/gates?{}", query.join("&"))
            };
            let items = list_all(&ctx, &path)?;
            let approve = |id: &str| ctx.command(&format!("gate approve --gate-name {id}"));
            print_list(&ctx, out, items, |i| gate_table(i, &approve))
        }
        GateCmd::Show { gate_name, conn } => {
            let ctx = conn.connect()?;
            let r = ctx.client.get(&format!("/gates/{gate_name}"))?;
            show(&ctx, out, &r.body, output::fields)
        }
        GateCmd::Approve { gate_name, conn } => {
            let ctx = conn.connect()?;
            approve(&ctx, out, &gate_name)
        }
        GateCmd::Fail {
            gate_name,
            message,
            conn,
        } => {
            let ctx = conn.connect()?;
            let body = json!({ "message": message });
            let r = ctx.client.call(
                "POST",
                &format!("/gates/{gate_name}/fail"),
                Some(&body),
                Precondition::None,
            )?;
            show(&ctx, out, &r.body, |g| {
                format!(
                    "gate {} ({}): {}\n",
                    text(g, "/name"),
                    text(g, "/properties/displayName"),
                    text(g, "/properties/state")
                )
            })
        }
        GateCmd::Update {
            gate_name,
            state,
            conn,
        } => {
            if state != GateState::Completed {
                return Err(CliError::Usage(format!(
                    "--state {}: only Completed is accepted (it approves the gate)",
                    state.as_str()
                )));
            }
            let ctx = conn.connect()?;
            approve(&ctx, out, &gate_name)
        }
    }
}

/// PATCH `{"properties":{"state":"Completed"}}` with `If-Match` the gate's eTag.
fn approve(ctx: &Ctx, out: &mut dyn Write, gate: &str) -> Result<(), CliError> {
    let path = format!("/gates/{gate}");
    let current = ctx.client.get(&path)?;
    let pre = etag_of(&current.body).map_or(Precondition::None, Precondition::Match);
    let r = ctx.client.call(
        "PATCH",
        &path,
        Some(&json!({"properties": {"state": "Completed"}})),
        pre,
    )?;
    show(ctx, out, &r.body, |g| {
        format!(
            "gate {} ({}): {}\n",
            text(g, "/name"),
            text(g, "/displayName"),
            text(g, "/state")
        )
    })
}
