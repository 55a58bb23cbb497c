//! The flags every command that talks to a daemon takes — `--server`, `--token`,
//! `-f/--fleet-name`, `-o`, and `az`'s global arguments (`--query`, `--only-show-errors`,
//! `--verbose`, `--debug`; `-g` and `--subscription` accepted and ignored) — and the [`Ctx`]
//! they make:
//! the client, the output format, and the flags to repeat in a hint (`waverun gate approve ...`).

use super::client::{CliError, Client, DEFAULT_SERVER};
use super::output::Output;
use serde_json::Value;

/// Where the daemon is and how to print.
#[derive(clap::Args, Clone, Debug)]
pub struct Conn {
    /// The daemon's base URL.
    #[arg(long, env = "WAVERUN_SERVER", default_value = DEFAULT_SERVER, value_name = "URL")]
    pub server: String,
    /// A bearer token (`waverun demo` prints one).
    #[arg(
        long,
        env = "WAVERUN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// The fleet (default: the one the daemon serves).
    #[arg(
        short = 'f',
        long = "fleet-name",
        env = "WAVERUN_FLEET_NAME",
        value_name = "NAME"
    )]
    pub fleet: Option<String>,
    /// Output format (default: table on a terminal, json otherwise).
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<Output>,
    /// Azure's resource group: accepted for `az fleet` compatibility and ignored (a daemon
    /// serves one fleet).
    #[arg(
        short = 'g',
        long = "resource-group",
        hide = true,
        value_name = "GROUP"
    )]
    pub resource_group: Option<String>,
    /// Certificate authorities to trust for an https `--server` (a PEM file; default: the
    /// system's bundle).
    #[arg(long, env = "WAVERUN_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// A JMESPath query applied to the output before it is printed, as in `az` (e.g.
    /// `--query id -o tsv`, `--query "[?status.state=='Running'].name"`).
    #[arg(long, value_name = "JMESPATH")]
    pub query: Option<String>,
    /// Azure's subscription: accepted for `az fleet` compatibility and ignored (a daemon
    /// serves one fleet).
    #[arg(long, hide = true, value_name = "ID")]
    pub subscription: Option<String>,
    /// Print errors only: no hints or warnings on stderr.
    #[arg(long)]
    pub only_show_errors: bool,
    /// Print each request to the daemon and its answer's status on stderr.
    #[arg(long)]
    pub verbose: bool,
    /// As --verbose, and the answers' bodies too (never the token).
    #[arg(long)]
    pub debug: bool,
    /// Return as soon as the daemon has accepted the request, as in `az`. Most requests are
    /// done when answered; this matters for stopping a run and deleting a started one.
    #[arg(long)]
    pub no_wait: bool,
}

/// What a command works with.
pub struct Ctx {
    /// The API client.
    pub client: Client,
    /// The output format.
    pub output: Output,
    /// The flags a printed command must repeat (`--server` when not the default, `-f`).
    pub flags: String,
    /// `--only-show-errors`: no hints.
    pub quiet: bool,
    /// `--no-wait`: return once a request is accepted.
    pub no_wait: bool,
}

impl Conn {
    /// The client: the fleet named, else the one the daemon says it serves.
    pub fn connect(&self) -> Result<Ctx, CliError> {
        if let Some(q) = &self.query {
            super::output::set_query(q)?;
        }
        super::client::set_verbosity(if self.debug {
            2
        } else {
            u8::from(self.verbose)
        });
        let token = self.token.clone().filter(|t| !t.is_empty());
        let tls = super::client::tls_config(&self.server, self.ca_file.as_deref())?;
        let fleet = match &self.fleet {
            Some(f) => f.clone(),
            None => served_fleet(&self.server, token.clone(), tls.clone())?,
        };
        let mut flags = String::new();
        if self.server.trim_end_matches('/') != DEFAULT_SERVER {
            flags.push_str(&format!(" --server {}", self.server));
        }
        if let Some(ca) = &self.ca_file {
            flags.push_str(&format!(" --ca-file {}", ca.display()));
        }
        if self.fleet.is_some() {
            flags.push_str(&format!(" -f {fleet}"));
        }
        Ok(Ctx {
            client: Client::new(&self.server, token, &fleet, tls),
            output: Output::or_default(self.output),
            flags,
            quiet: self.only_show_errors,
            no_wait: self.no_wait,
        })
    }
}

/// The fleet a daemon serves (`GET /api/v1/fleets`).
fn served_fleet(
    server: &str,
    token: Option<String>,
    tls: ureq::tls::TlsConfig,
) -> Result<String, CliError> {
    let probe = Client::new(server, token, "", tls);
    let url = format!("{}/api/v1/fleets", probe.server());
    let reply = probe.get_url(&url)?;
    let names: Vec<&str> = reply.body["value"]
        .as_array()
        .map(|v| v.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    match names.as_slice() {
        [one] => Ok(one.to_string()),
        _ => Err(CliError::Usage(format!(
            "the daemon at {server} serves {} fleets: name one with -f/--fleet-name",
            names.len()
        ))),
    }
}

impl Ctx {
    /// `waverun GROUP VERB ARGS` with this context's flags, for hints.
    pub fn command(&self, rest: &str) -> String {
        format!("waverun {rest}{}", self.flags)
    }

    /// A hint for people, on stderr (stdout is data).
    pub fn hint(&self, text: &str) {
        if !self.quiet {
            eprintln!("{text}");
        }
    }
}

/// The resource's `eTag` (for `If-Match`).
pub fn etag_of(resource: &Value) -> Option<String> {
    resource["eTag"].as_str().map(str::to_string)
}
