//! Bearer tokens and roles (`shared/spec/api.md` §4). Tokens are kept as SHA-256 hashes, never
//! logged; each has a name (what the audit log records) and a role. With no tokens configured
//! every request acts as `admin` under the name `anonymous` — the daemon then listens on
//! loopback only (see `serve`).

use super::problem::Problem;
use axum::http::{header, HeaderMap, StatusCode};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// What a token may do. Each role includes the ones before it, except that `approver` does not
/// include `operator`: an approver reads and approves gates, nothing else.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read everything.
    Viewer,
    /// Members, strategies, runs: create, start, stop, skip, delete.
    Operator,
    /// Gates: approve.
    Approver,
    /// Everything, including freezes and auto-upgrade profiles.
    Admin,
}

/// What a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Any valid token.
    Read,
    /// Operator or admin.
    Operate,
    /// Approver or admin.
    Approve,
    /// Admin only.
    Administer,
}

impl Role {
    /// Whether this role may do what `need` asks.
    pub fn allows(self, need: Need) -> bool {
        match need {
            Need::Read => true,
            Need::Operate => matches!(self, Role::Operator | Role::Admin),
            Need::Approve => matches!(self, Role::Approver | Role::Admin),
            Need::Administer => self == Role::Admin,
        }
    }
}

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The token's name (`anonymous` without tokens).
    pub name: String,
    /// Its role.
    pub role: Role,
}

/// The configured tokens, by the hex SHA-256 of the token.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    by_hash: BTreeMap<String, Caller>,
}

/// The token of an `Authorization` value: the scheme `Bearer` in any case (RFC 9110 §11.1:
/// schemes are case-insensitive), one or more spaces, then the token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The hex SHA-256 of a token, as the config file stores it.
pub fn token_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Auth {
    /// No tokens: every caller is `anonymous` with role `admin`.
    pub fn open() -> Auth {
        Auth::default()
    }

    /// Adds a token by its hash.
    pub fn with_hash(mut self, name: &str, role: Role, sha256_hex: &str) -> Auth {
        self.by_hash.insert(
            sha256_hex.to_ascii_lowercase(),
            Caller {
                name: name.to_string(),
                role,
            },
        );
        self
    }

    /// Whether any token is configured.
    pub fn is_open(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The caller of a request that needs `need`: 401 without a valid token, 403 with one
    /// whose role is too weak.
    pub fn check(&self, headers: &HeaderMap, need: Need) -> Result<Caller, Problem> {
        if self.is_open() {
            return Ok(Caller {
                name: "anonymous".to_string(),
                role: Role::Admin,
            });
        }
        let unauthorized =
            |why: &str| Problem::new(StatusCode::UNAUTHORIZED, "Unauthorized", why.to_string());
        let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
            unauthorized("this request needs a bearer token (Authorization: Bearer TOKEN)")
        })?;
        let token = value
            .to_str()
            .ok()
            .and_then(bearer_token)
            .ok_or_else(|| unauthorized("the Authorization header must be `Bearer TOKEN`"))?;
        let caller = self
            .by_hash
            .get(&token_hash(token))
            .ok_or_else(|| unauthorized("the token is not valid"))?;
        if !caller.role.allows(need) {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!(
                    "token {:?} has role {:?}, which may not do this (it needs {})",
                    caller.name,
                    caller.role,
                    match need {
                        Need::Read => "any role",
                        Need::Operate => "operator or admin",
                        Need::Approve => "approver or admin",
                        Need::Administer => "admin",
                    }
                ),
            ));
        }
        Ok(caller.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case() {
        let auth = Auth::open().with_hash("ci", Role::Viewer, &token_hash("s3cret-token"));
        for v in [
            "Bearer s3cret-token",
            "bearer s3cret-token",
            "BEARER s3cret-token",
            "bEaReR   s3cret-token",
        ] {
            let c = auth.check(&headers(v), Need::Read);
            assert_eq!(c.map(|c| c.name), Ok("ci".to_string()), "{v}");
        }
    }

    #[test]
    fn other_schemes_and_empty_tokens_are_unauthorized() {
        let auth = Auth::open().with_hash("ci", Role::Viewer, &token_hash("s3cret-token"));
        for v in [
            "Basic s3cret-token",
            "Bearers3cret-token",
            "Bearer ",
            "s3cret-token",
        ] {
            let status = auth.check(&headers(v), Need::Read).map_err(|p| p.status);
            assert_eq!(status, Err(401), "{v}");
        }
    }
}
