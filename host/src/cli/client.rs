//! The daemon's API as the CLI commands use it: one server, one token, one fleet. Every call
//! answers a [`Reply`] or a [`CliError`] — the daemon's problem document (its `code`, `target`
//! and `detail`), or why the daemon could not be reached and how to point the CLI elsewhere.

use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// The server the CLI talks to when neither `--server` nor `$WAVERUN_SERVER` says.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7700";

/// Why a command failed, and so its exit code.
#[derive(Debug)]
pub enum CliError {
    /// The daemon refused or failed the request (exit 1): its problem document.
    Api {
        /// HTTP status.
        status: u16,
        /// The problem's stable code (`InvalidField`, `NotFound`, ...).
        code: String,
        /// The field at fault, when there is one.
        target: Option<String>,
        /// What went wrong.
        detail: String,
    },
    /// The daemon could not be reached (exit 1).
    Connect {
        /// The server tried.
        server: String,
        /// What the connection said.
        reason: String,
    },
    /// The command line or a file it named is wrong (exit 2).
    Usage(String),
    /// A run did not reach the state waited for (exit 3 for a timeout, 1 otherwise).
    Wait {
        /// What happened.
        message: String,
        /// Whether the wait ran out of time.
        timed_out: bool,
    },
    /// Output that could not be written, stdin that could not be read (exit 1).
    Io(std::io::Error),
    /// Anything else (exit 1): an answer that is not JSON.
    Other(String),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Wait {
                timed_out: true, ..
            } => 3,
            _ => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Api {
                target: Some(t),
                detail,
                ..
            } if !t.is_empty() && !detail.starts_with(&format!("{t}: ")) => {
                write!(f, "{t}: {detail}")
            }
            CliError::Api { detail, .. } => write!(f, "{detail}"),
            CliError::Connect { server, reason } => write!(
                f,
                "cannot reach the waverun daemon at {server} ({reason}); start one \
                 (`waverun serve`, or `waverun demo`), or point --server or WAVERUN_SERVER at it"
            ),
            CliError::Usage(m) | CliError::Other(m) => write!(f, "{m}"),
            CliError::Wait { message, .. } => write!(f, "{message}"),
            CliError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        CliError::Io(e)
    }
}

/// A successful answer.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status (2xx).
    pub status: u16,
    /// The `ETag` header.
    pub etag: Option<String>,
    /// The JSON body (`null` for an empty one, e.g. 204).
    pub body: Value,
}

/// A conditional request header.
#[derive(Clone, Debug)]
pub enum Precondition {
    /// None.
    None,
    /// `If-Match: ETAG`: only if the resource is still what was read.
    Match(String),
    /// `If-None-Match: *`: only if it does not exist.
    Absent,
}

/// How long a change is tried again while the replica asked follows and no leader is known
/// yet (a failover under way): a few leases.
pub const FOLLOW_LEADER_FOR: Duration = Duration::from_secs(30);

/// What one request came back with.
enum Sent {
    Reply(Reply),
    /// Not 2xx: the problem document, and what a follower says of the leader.
    Refused {
        status: u16,
        body: Value,
        /// `x-waverun-leader`: the leader's base URL.
        leader: Option<String>,
        /// `Retry-After`, clamped to 1..5 s.
        retry_after: Duration,
    },
}

/// The URL `url` (sent to `server`) as the leader at `leader` serves it: the same path under
/// the leader's base URL. `None` when `leader` is not an http(s) URL or `url` is not under
/// `server`.
pub fn leader_url(server: &str, url: &str, leader: &str) -> Option<String> {
    let leader = leader.trim().trim_end_matches('/');
    if !(leader.starts_with("http://") || leader.starts_with("https://")) {
        return None;
    }
    let rest = url.strip_prefix(server.trim_end_matches('/'))?;
    Some(format!("{leader}{rest}"))
}

/// The API of one fleet on one server.
pub struct Client {
    server: String,
    token: Option<String>,
    fleet: String,
    agent: ureq::Agent,
    tls: ureq::tls::TlsConfig,
}

/// `--verbose` (1: each request and its status) and `--debug` (2: and the answers' bodies)
/// on stderr, for this process.
static VERBOSITY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Sets how much the client says about its requests on stderr (see [`VERBOSITY`]).
pub fn set_verbosity(level: u8) {
    VERBOSITY.store(level, std::sync::atomic::Ordering::Relaxed);
}

impl Client {
    /// A client of `fleet` on `server` (a base URL, `http://HOST:PORT` or `https://...`);
    /// `tls` says which certificate authorities it trusts ([`tls_config`]).
    pub fn new(
        server: &str,
        token: Option<String>,
        fleet: &str,
        tls: ureq::tls::TlsConfig,
    ) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(120)))
            .tls_config(tls.clone())
            .build()
            .into();
        Client {
            server: server.trim_end_matches('/').to_string(),
            token,
            fleet: fleet.to_string(),
            agent,
            tls,
        }
    }

    /// Its TLS settings (for the event stream's own agent).
    pub fn tls(&self) -> ureq::tls::TlsConfig {
        self.tls.clone()
    }

    /// The server's base URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The fleet's name.
    pub fn fleet(&self) -> &str {
        &self.fleet
    }

    /// The bearer token, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The URL of a path under the fleet (`/updateRuns/r1`).
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1/fleets/{}{path}", self.server, self.fleet)
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Reply, CliError> {
        self.call("GET", path, None, Precondition::None)
    }

    /// `method path` with an optional JSON body and a precondition.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        pre: Precondition,
    ) -> Result<Reply, CliError> {
        self.request(method, &self.url(path), body, pre)
    }

    /// `GET` of a whole URL (outside the fleet, or a `nextLink`).
    pub fn get_url(&self, url: &str) -> Result<Reply, CliError> {
        self.request("GET", url, None, Precondition::None)
    }

    /// Sends a request; a replica that follows answers a change 503 `NotLeader` with the
    /// leader's address (`x-waverun-leader`): the same request goes there instead, and while no
    /// leader is known (a failover under way) it is asked again after `Retry-After`, for up to
    /// [`FOLLOW_LEADER_FOR`].
    fn request(
        &self,
        method: &str,
        url: &str,
        body: Option<&Value>,
        pre: Precondition,
    ) -> Result<Reply, CliError> {
        let began = std::time::Instant::now();
        let mut url = url.to_string();
        loop {
            let sent = self.send(method, &url, body, &pre)?;
            let (status, parsed, leader, retry_after) = match sent {
                Sent::Reply(r) => return Ok(r),
                Sent::Refused {
                    status,
                    body,
                    leader,
                    retry_after,
                } => (status, body, leader, retry_after),
            };
            let not_leader =
                status == 503 && parsed.get("code").and_then(Value::as_str) == Some("NotLeader");
            if !not_leader || began.elapsed() >= FOLLOW_LEADER_FOR {
                return Err(problem(status, &parsed));
            }
            match leader
                .as_deref()
                .and_then(|l| leader_url(&self.server, &url, l))
            {
                Some(at) if at != url => {
                    if VERBOSITY.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                        eprintln!("{url}: this replica follows; asking the leader at {at}");
                    }
                    url = at;
                }
                _ => std::thread::sleep(retry_after),
            }
        }
    }

    /// One request and its answer, as it came.
    fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<&Value>,
        pre: &Precondition,
    ) -> Result<Sent, CliError> {
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(url)
            .header("accept", "application/json");
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        req = match pre {
            Precondition::None => req,
            Precondition::Match(e) => req.header("if-match", e),
            Precondition::Absent => req.header("if-none-match", "*"),
        };
        let text = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                b.to_string()
            }
            None => String::new(),
        };
        let req = req
            .body(text)
            .map_err(|e| CliError::Usage(format!("{url}: {e}")))?;
        let began = std::time::Instant::now();
        let mut resp = self.agent.run(req).map_err(|e| self.connect_error(e))?;
        let status = resp.status().as_u16();
        let verbosity = VERBOSITY.load(std::sync::atomic::Ordering::Relaxed);
        if verbosity > 0 {
            eprintln!(
                "{method} {url} -> {status} ({} ms)",
                began.elapsed().as_millis()
            );
        }
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let etag = header("etag");
        let leader = header("x-waverun-leader");
        let retry_after = header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(1), |s| {
                Duration::from_secs(s.clamp(1, 5))
            });
        let text = resp
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| CliError::Other(format!("{method} {url}: reading the answer: {e}")))?;
        if verbosity > 1 && !text.is_empty() {
            eprintln!("{text}");
        }
        let parsed = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|_| {
                CliError::Other(format!(
                    "{method} {url}: HTTP {status}, and the answer is not JSON: {}",
                    text.chars().take(200).collect::<String>()
                ))
            })?
        };
        if (200..300).contains(&status) {
            return Ok(Sent::Reply(Reply {
                status,
                etag,
                body: parsed,
            }));
        }
        Ok(Sent::Refused {
            status,
            body: parsed,
            leader,
            retry_after,
        })
    }

    fn connect_error(&self, e: ureq::Error) -> CliError {
        let reason = match &e {
            ureq::Error::Io(io) => io.to_string(),
            ureq::Error::ConnectionFailed => "connection failed".to_string(),
            ureq::Error::HostNotFound => "host not found".to_string(),
            ureq::Error::Timeout(t) => format!("timed out ({t})"),
            other => other.to_string(),
        };
        CliError::Connect {
            server: self.server.clone(),
            reason,
        }
    }
}

/// A refusal as a [`CliError`]: the problem document's fields, or what the status says.
pub fn problem(status: u16, body: &Value) -> CliError {
    let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
    CliError::Api {
        status,
        code: text("code").unwrap_or_else(|| format!("HTTP{status}")),
        target: text("target"),
        detail: text("detail")
            .or_else(|| text("title"))
            .unwrap_or_else(|| format!("HTTP {status}")),
    }
}

/// The TLS settings of a client of `server`: for `https`, the certificate authorities of
/// `ca_file` (`--ca-file`: a PEM bundle), else the system's bundle. Plain `http` needs none.
pub fn tls_config(
    server: &str,
    ca_file: Option<&std::path::Path>,
) -> Result<ureq::tls::TlsConfig, CliError> {
    crate::outbound::tls_config(
        server,
        ca_file,
        "--ca-file",
        "name one with --ca-file (or $WAVERUN_CA_FILE, $SSL_CERT_FILE)",
    )
    .map_err(CliError::Usage)
}

/// The URL of a list's `nextLink` as sent by `server`: a relative link is under `server`; an
/// absolute one must be on the same origin (scheme, host, port), since the token goes with it.
pub fn next_url(server: &str, next: &str) -> Result<String, CliError> {
    if next.starts_with('/') && !next.starts_with("//") {
        return Ok(format!("{}{next}", server.trim_end_matches('/')));
    }
    if crate::outbound::same_origin(server, next) {
        return Ok(next.to_string());
    }
    Err(CliError::Other(format!(
        "the server's next page is at {next:?}, not on {server}: not following it (the \
             token is only sent to --server)"
    )))
}

#[cfg(test)]
mod tests {
    use super::{leader_url, next_url};

    #[test]
    fn a_change_refused_by_a_follower_goes_to_the_same_path_at_the_leader() {
        assert_eq!(
            leader_url(
                "http://10.0.0.2:7700",
                "http://10.0.0.2:7700/api/v1/fleets/f/updateRuns/r1/start",
                "https://10.0.0.1:7700/"
            )
            .as_deref(),
            Some("https://10.0.0.1:7700/api/v1/fleets/f/updateRuns/r1/start")
        );
        assert_eq!(
            leader_url("http://a:1", "http://a:1/x", "ftp://b"),
            None,
            "only http(s)"
        );
        assert_eq!(
            leader_url("http://a:1", "http://c:1/x", "http://b:1"),
            None,
            "a URL not under the server is not rewritten"
        );
    }

    #[test]
    fn a_relative_next_link_is_under_the_server() {
        assert_eq!(
            next_url("http://127.0.0.1:7700", "/api/v1/fleets/f/members?$top=1").unwrap(),
            "http://127.0.0.1:7700/api/v1/fleets/f/members?$top=1"
        );
    }

    #[test]
    fn an_absolute_next_link_is_followed_only_on_the_same_origin() {
        let server = "https://waverun.example.com";
        for same in [
            "https://waverun.example.com/api/v1/fleets/f/members?$top=1",
            "https://WAVERUN.example.com:443/api/v1/fleets/f/members",
        ] {
            assert_eq!(next_url(server, same).unwrap(), same);
        }
        for other in [
            "http://waverun.example.com/api/v1/fleets/f/members",
            "https://evil.example/api/v1/fleets/f/members",
            "https://waverun.example.com:8443/api/v1/fleets/f/members",
            "https://waverun.example.com@evil.example/api",
            "//evil.example/api/v1/fleets/f/members",
            "javascript:alert(1)",
        ] {
            let e = next_url(server, other).unwrap_err().to_string();
            assert!(e.contains("not following it"), "{other}: {e}");
        }
    }
}
