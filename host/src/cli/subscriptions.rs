//! `waverun eventsubscription`: event subscriptions over the daemon's API — `create` (an
//! upsert: run again, it changes the subscription and keeps its secret and place), `show`,
//! `list`, `delete`, `test`, `deliveries`, `dead-letters`, `redeliver`, `rotate-secret`.
//! A secret the daemon generates is printed once, by the command that made it.

use super::client::{CliError, Precondition};
use super::conn::{etag_of, Conn, Ctx};
use super::output::{self, columns, text};
use super::resources::{delete, list_all, print_list, read, show, upsert};
use clap::{Subcommand, ValueEnum};
use serde_json::{json, Value};
use std::io::Write;

/// `--minimum-severity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Severity {
    /// Everything (the default).
    Info,
    /// Pending approvals, stops, skips, failures.
    Warning,
    /// Failures only.
    Error,
}

/// `waverun eventsubscription ...`.
// The `conn` fields are flattened flags: clap would read a doc comment there as help.
#[allow(missing_docs)]
#[derive(Subcommand, Debug)]
pub enum SubscriptionCmd {
    /// Create (or change) an event subscription: the fleet's events, as signed CloudEvents,
    /// POSTed to an endpoint. Without --secret-ref, the daemon makes a signing secret and this
    /// command prints it, once.
    #[command(after_help = "Examples:\n  waverun eventsubscription create -n pager \
        --endpoint https://hooks.example.com/waverun --included-event-types GateCreated RunFailed\n  \
        waverun eventsubscription create -n audit --endpoint https://siem.example.com/in \
        --secret-ref siem --minimum-severity warning")]
    Create {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Where deliveries go: https (http only to loopback, when the daemon allows it).
        #[arg(long, value_name = "URL")]
        endpoint: String,
        /// Only these kinds (GateCreated, RunFailed, …) or CloudEvents types; default all.
        #[arg(long, num_args = 1.., value_name = "TYPE")]
        included_event_types: Vec<String>,
        /// Only these runs' events.
        #[arg(long, num_args = 1.., value_name = "RUN")]
        runs: Vec<String>,
        /// Only these stages' events.
        #[arg(long, num_args = 1.., value_name = "STAGE")]
        stages: Vec<String>,
        /// Only events at least this severe.
        #[arg(long, value_enum)]
        minimum_severity: Option<Severity>,
        /// Minutes an event is tried before it is dead-lettered (1 to 1440; default 1440).
        #[arg(long = "event-ttl", value_name = "MINUTES")]
        event_ttl: Option<u32>,
        /// Sign with this secret of the daemon's configuration (webhooks.secrets) instead of
        /// one of its own.
        #[arg(long, value_name = "NAME")]
        secret_ref: Option<String>,
        /// Create it disabled: nothing is delivered until it is enabled (its events wait).
        #[arg(long)]
        disabled: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a subscription: what it receives, where, and where its deliveries stand.
    #[command(after_help = "Example:\n  waverun eventsubscription show -n pager")]
    Show {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the subscriptions.
    #[command(after_help = "Example:\n  waverun eventsubscription list")]
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a subscription (its place in the log, dead letters and delivery log too).
    #[command(after_help = "Example:\n  waverun eventsubscription delete -n pager --yes")]
    Delete {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Send the endpoint one signed io.waverun.Test event now, and say how it went.
    #[command(after_help = "Example:\n  waverun eventsubscription test -n pager")]
    Test {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The subscription's delivery log, newest first.
    #[command(after_help = "Example:\n  waverun eventsubscription deliveries -n pager --top 20")]
    Deliveries {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// At most this many attempts (the newest).
        #[arg(long, default_value_t = 50)]
        top: u32,
        #[command(flatten)]
        conn: Conn,
    },
    /// The events given up on (older than the subscription's event TTL when they failed).
    #[command(after_help = "Example:\n  waverun eventsubscription dead-letters -n pager")]
    DeadLetters {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Deliver dead letters again (these events, or all of them), after what the subscription
    /// is delivering now.
    #[command(
        after_help = "Examples:\n  waverun eventsubscription redeliver -n pager\n  \
        waverun eventsubscription redeliver -n pager --event-ids 1041 1042"
    )]
    Redeliver {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        /// Only these events (their ids); default every dead letter.
        #[arg(long, num_args = 1.., value_name = "ID")]
        event_ids: Vec<u64>,
        #[command(flatten)]
        conn: Conn,
    },
    /// A new signing secret, printed once; the old ones keep signing beside it for a day, so
    /// the receiver can move to the new one without missing a delivery.
    #[command(after_help = "Example:\n  waverun eventsubscription rotate-secret -n pager")]
    RotateSecret {
        /// The subscription's name.
        #[arg(short = 'n', long = "name")]
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
}

fn list_or(v: &Value, none: &str) -> String {
    let items: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if items.is_empty() {
        none.to_string()
    } else {
        items.join(", ")
    }
}

fn endpoint(s: &Value) -> String {
    text(s, "/destination/properties/endpointUrl")
}

fn enabled(s: &Value) -> bool {
    s["enabled"] != false
}

/// `eventsubscription list -o table`.
pub fn subscription_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|s| {
            vec![
                text(s, "/name"),
                endpoint(s),
                list_or(&s["filter"]["includedEventTypes"], "all"),
                if enabled(s) { "yes" } else { "no" }.to_string(),
                text(s, "/status/lag"),
                text(s, "/status/deadLetters"),
            ]
        })
        .collect();
    columns(
        &[
            "NAME",
            "ENDPOINT",
            "EVENTS",
            "ENABLED",
            "BEHIND",
            "DEAD LETTERS",
        ],
        &rows,
    )
}

/// A subscription for people.
pub fn subscription_text(s: &Value) -> String {
    let f = &s["filter"];
    let mut out = format!(
        "Event subscription {} → {}{}\n",
        text(s, "/name"),
        endpoint(s),
        if enabled(s) { "" } else { " (disabled)" }
    );
    out.push_str(&format!(
        "  events: {}; runs: {}; stages: {}; at least {}\n",
        list_or(&f["includedEventTypes"], "all"),
        list_or(&f["runs"], "all"),
        list_or(&f["stages"], "all"),
        f["minimumSeverity"].as_str().unwrap_or("info"),
    ));
    let ttl = s["retryPolicy"]["eventTimeToLiveInMinutes"]
        .as_u64()
        .unwrap_or(1440);
    out.push_str(&format!(
        "  an event is tried for {ttl} minutes, then dead-lettered\n"
    ));
    let signing = &s["signing"];
    match signing["secretRef"].as_str() {
        Some(r) => out.push_str(&format!("  signed with the configured secret {r:?}\n")),
        None => {
            let n = signing["secrets"].as_array().map_or(0, Vec::len);
            out.push_str(&format!(
                "  signed with its own secret{} (newest made {})\n",
                if n > 1 {
                    format!("s ({n}, during a rotation)")
                } else {
                    String::new()
                },
                text(signing, "/secrets/0/createdAt")
            ));
        }
    }
    let st = &s["status"];
    let a = &st["attemptsSinceStart"];
    out.push_str(&format!(
        "  at event {} of {}: {} behind, {} dead letters; since the daemon started {} delivered, {} failed attempts\n",
        text(st, "/cursor"),
        text(st, "/logEnd"),
        text(st, "/lag"),
        text(st, "/deadLetters"),
        text(a, "/delivered"),
        text(a, "/failed"),
    ));
    if let Some(secret) = signing["secret"].as_str() {
        out.push_str(&format!(
            "\nSigning secret (shown this once; give it to the receiver now):\n  {secret}\n"
        ));
    }
    out
}

fn deliveries_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|d| {
            vec![
                text(d, "/at"),
                text(d, "/eventId"),
                text(d, "/attempt"),
                text(d, "/outcome"),
                text(d, "/status"),
                format!("{} ms", text(d, "/latencyMs")),
                text(d, "/error"),
            ]
        })
        .collect();
    columns(
        &[
            "AT", "EVENT", "ATTEMPT", "OUTCOME", "STATUS", "LATENCY", "ERROR",
        ],
        &rows,
    )
}

fn dead_letters_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|d| {
            vec![
                text(d, "/eventId"),
                text(d, "/at"),
                text(d, "/attempts"),
                text(d, "/error"),
            ]
        })
        .collect();
    columns(&["EVENT", "DEAD SINCE", "ATTEMPTS", "LAST ERROR"], &rows)
}

/// Every item of a list of `{value, nextLink}` pages, without flattening.
fn pages(ctx: &Ctx, path: &str, most: usize) -> Result<Vec<Value>, CliError> {
    let mut items = Vec::new();
    let mut page = ctx.client.get(path)?.body;
    loop {
        items.extend(page["value"].as_array().cloned().unwrap_or_default());
        let next = page["nextLink"].as_str().filter(|n| !n.is_empty());
        match next {
            Some(next) if items.len() < most => {
                let url = super::client::next_url(ctx.client.server(), next)?;
                page = ctx.client.get_url(&url)?.body;
            }
            _ => {
                items.truncate(most);
                return Ok(items);
            }
        }
    }
}

/// The `If-Match` of an action on the subscription as it is now.
fn current(ctx: &Ctx, path: &str) -> Result<Precondition, CliError> {
    Ok(read(ctx, path)?
        .as_ref()
        .and_then(etag_of)
        .map_or(Precondition::None, Precondition::Match))
}

/// `waverun eventsubscription ...`.
pub fn subscription(cmd: SubscriptionCmd, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        SubscriptionCmd::Create {
            name,
            endpoint,
            included_event_types,
            runs,
            stages,
            minimum_severity,
            event_ttl,
            secret_ref,
            disabled,
            conn,
        } => {
            let ctx = conn.connect()?;
            let mut filter = json!({
                "includedEventTypes": included_event_types,
                "runs": runs,
                "stages": stages,
            });
            if let Some(s) = minimum_severity {
                filter["minimumSeverity"] = json!(format!("{s:?}").to_lowercase());
            }
            let mut properties = json!({
                "destination": {"endpointType": "WebHook",
                                "properties": {"endpointUrl": endpoint}},
                "filter": filter,
                "eventDeliverySchema": "CloudEventSchemaV1_0",
                "enabled": !disabled,
            });
            if let Some(t) = event_ttl {
                properties["retryPolicy"] = json!({ "eventTimeToLiveInMinutes": t });
            }
            if let Some(r) = secret_ref {
                properties["signing"] = json!({ "secretRef": r });
            }
            let r = upsert(
                &ctx,
                &format!("/eventSubscriptions/{name}"),
                &json!({ "properties": properties }),
            )?;
            if r.status == 201 && r.body["properties"]["signing"]["secret"].is_string() {
                ctx.hint(&format!(
                    "the signing secret is printed this once; `{}` makes a new one",
                    ctx.command(&format!("eventsubscription rotate-secret -n {name}"))
                ));
            }
            show(&ctx, out, &r.body, subscription_text)
        }
        SubscriptionCmd::Show { name, conn } => {
            let ctx = conn.connect()?;
            let r = ctx.client.get(&format!("/eventSubscriptions/{name}"))?;
            show(&ctx, out, &r.body, subscription_text)
        }
        SubscriptionCmd::List { conn } => {
            let ctx = conn.connect()?;
            let items = list_all(&ctx, "/eventSubscriptions")?;
            print_list(&ctx, out, items, subscription_table)
        }
        SubscriptionCmd::Delete { name, yes, conn } => {
            let ctx = conn.connect()?;
            delete(
                &ctx,
                &format!("/eventSubscriptions/{name}"),
                &format!("event subscription {name}"),
                yes,
            )
        }
        SubscriptionCmd::Test { name, conn } => {
            let ctx = conn.connect()?;
            let path = format!("/eventSubscriptions/{name}");
            let pre = current(&ctx, &path)?;
            let r = ctx
                .client
                .call("POST", &format!("{path}/test"), None, pre)?;
            output::print(out, ctx.output, &r.body, |b| match b["outcome"].as_str() {
                Some("delivered") => format!(
                    "delivered: {} answered {} in {} ms\n",
                    text(b, "/event/id"),
                    text(b, "/status"),
                    text(b, "/latencyMs")
                ),
                _ => format!(
                    "failed after {} ms: {}\n",
                    text(b, "/latencyMs"),
                    text(b, "/error")
                ),
            })?;
            if r.body["outcome"] != "delivered" {
                return Err(CliError::Wait {
                    message: format!("the test delivery to event subscription {name} failed"),
                    timed_out: false,
                });
            }
            Ok(())
        }
        SubscriptionCmd::Deliveries { name, top, conn } => {
            let ctx = conn.connect()?;
            let path = format!(
                "/eventSubscriptions/{name}/deliveries?$top={}",
                top.clamp(1, 1000)
            );
            let items = pages(&ctx, &path, top as usize)?;
            print_list(&ctx, out, items, deliveries_table)
        }
        SubscriptionCmd::DeadLetters { name, conn } => {
            let ctx = conn.connect()?;
            let path = format!("/eventSubscriptions/{name}/deadLetters?$top=1000");
            let items = pages(&ctx, &path, usize::MAX)?;
            print_list(&ctx, out, items, dead_letters_table)
        }
        SubscriptionCmd::Redeliver {
            name,
            event_ids,
            conn,
        } => {
            let ctx = conn.connect()?;
            let path = format!("/eventSubscriptions/{name}");
            let pre = current(&ctx, &path)?;
            let body = (!event_ids.is_empty()).then(|| json!({ "eventIds": event_ids }));
            let r = ctx.client.call(
                "POST",
                &format!("{path}/deadLetters/redeliver"),
                body.as_ref(),
                pre,
            )?;
            output::print(out, ctx.output, &r.body, |b| {
                format!("redelivering {} dead letters\n", text(b, "/redelivering"))
            })
        }
        SubscriptionCmd::RotateSecret { name, conn } => {
            let ctx = conn.connect()?;
            let path = format!("/eventSubscriptions/{name}");
            let pre = current(&ctx, &path)?;
            let r = ctx
                .client
                .call("POST", &format!("{path}/rotateSecret"), None, pre)?;
            ctx.hint("the old secrets keep signing beside the new one for a day");
            show(&ctx, out, &r.body, subscription_text)
        }
    }
}
