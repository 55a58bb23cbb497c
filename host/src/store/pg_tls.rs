//! TLS to PostgreSQL: what a connection string says about it, read as libpq reads it, and the
//! connector that carries it out (rustls with ring, as everywhere else in waverun).
//!
//! The `postgres` crate knows `sslmode` `disable`, `prefer` and `require` and nothing of
//! certificates; libpq's `sslrootcert` and `sslmode=verify-ca`/`verify-full` are taken out of
//! the string here, before it is parsed. What each mode does:
//!
//! - `disable`: plain.
//! - `prefer` (the default): TLS when the server offers it and `sslrootcert` names the
//!   authorities to check it against, else plain — a certificate nobody said how to check is
//!   never accepted, and no connection fails for want of one.
//! - `require`, `verify-ca`, `verify-full`: TLS or no connection, the server's certificate
//!   checked against `sslrootcert` (a PEM file), else the system's bundle, and its name against
//!   the host connected to. Stricter than libpq's `require`, which checks nothing: a database
//!   holding the fleet's history and the leader lease is not trusted unverified.

use super::StoreError;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_rustls::rustls;

/// `sslmode`, as far as it matters here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plain.
    Disable,
    /// TLS if offered and checkable.
    Prefer,
    /// TLS, verified, or nothing.
    Require,
}

/// A connection string split into what `postgres` parses and what TLS needs.
#[derive(Clone, Debug)]
pub struct PgTarget {
    /// The string without `sslrootcert` (and `verify-*` written `require`).
    pub rest: String,
    /// Its `sslmode`.
    pub mode: SslMode,
    /// Its `sslrootcert`.
    pub root_cert: Option<PathBuf>,
}

/// Reads `url` (a `postgresql://` URL or a libpq `key=value` string).
pub fn parse(url: &str) -> Result<PgTarget, String> {
    let mut mode = SslMode::Prefer;
    let mut root_cert = None;
    let mut take = |key: &str, value: &str| -> Result<Option<String>, String> {
        match key {
            "sslrootcert" => {
                if value.is_empty() {
                    return Err("sslrootcert: empty; name a PEM file".to_string());
                }
                root_cert = Some(PathBuf::from(value));
                Ok(None)
            }
            "sslmode" => {
                let (m, written) = match value {
                    "disable" => (SslMode::Disable, "disable"),
                    "prefer" | "allow" => (SslMode::Prefer, "prefer"),
                    "require" | "verify-ca" | "verify-full" => (SslMode::Require, "require"),
                    other => {
                        return Err(format!(
                            "sslmode: {other:?} is not one of disable, allow, prefer, require, \
                             verify-ca, verify-full"
                        ))
                    }
                };
                mode = m;
                Ok(Some(written.to_string()))
            }
            _ => Ok(Some(value.to_string())),
        }
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_string(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    let value = percent_decode(v);
                    if let Some(v2) = take(k, &value)? {
                        kept.push(if v2 == value {
                            pair.to_string()
                        } else {
                            format!("{k}={v2}")
                        });
                    }
                }
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for (k, v) in key_values(url)? {
            if let Some(v) = take(&k, &v)? {
                let quoted = v.replace('\\', "\\\\").replace('\'', "\\'");
                kept.push(format!("{k}='{quoted}'"));
            }
        }
        kept.join(" ")
    };
    Ok(PgTarget {
        rest,
        mode,
        root_cert,
    })
}

/// `%XX` escapes of a URL's query value.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The pairs of a libpq `key=value` string (values optionally in single quotes, with `\`
/// escapes).
fn key_values(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(format!("{key:?} has no value (key=value)"));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("{key}: an unterminated quoted value")),
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                if c == '\\' {
                    chars.next();
                    value.extend(chars.next());
                    continue;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key, value));
    }
}

/// The rustls settings for `target`: `None` for a plain connection.
pub fn client_config(target: &PgTarget) -> Result<Option<rustls::ClientConfig>, StoreError> {
    let file = match (target.mode, &target.root_cert) {
        (SslMode::Disable, _) | (SslMode::Prefer, None) => return Ok(None),
        (_, Some(f)) => f.clone(),
        (SslMode::Require, None) => crate::outbound::system_bundle().ok_or_else(|| {
            StoreError::Database(
                "sslmode=require: this system has no bundle of certificate authorities; \
                 name one with sslrootcert (store.caFile)"
                    .to_string(),
            )
        })?,
    };
    let pem = std::fs::read(&file)
        .map_err(|e| StoreError::Database(format!("sslrootcert: {}: {e}", file.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    for item in ureq::tls::parse_pem(&pem) {
        if let Ok(ureq::tls::PemItem::Certificate(c)) = item {
            let der = rustls::pki_types::CertificateDer::from(c.der().to_vec());
            roots.add(der).map_err(|e| {
                StoreError::Database(format!("sslrootcert: {}: {e}", file.display()))
            })?;
        }
    }
    if roots.is_empty() {
        return Err(StoreError::Database(format!(
            "sslrootcert: {}: holds no PEM certificate",
            file.display()
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Database(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_loses_its_root_cert_and_writes_verify_full_as_require() {
        let t = parse(
            "postgresql://waverun@db.example:5432/w?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            t.rest,
            "postgresql://waverun@db.example:5432/w?sslmode=require&connect_timeout=3"
        );
        assert_eq!(t.mode, SslMode::Require);
        assert_eq!(t.root_cert, Some(PathBuf::from("/etc/ca.pem")));
    }

    #[test]
    fn a_key_value_string_keeps_its_quoting_and_loses_its_root_cert() {
        let t = parse("host=db port=5432 password='a b\\'c' sslrootcert='/x y/ca.pem'").unwrap();
        assert_eq!(t.rest, "host='db' port='5432' password='a b\\'c'");
        assert_eq!(t.mode, SslMode::Prefer);
        assert_eq!(t.root_cert, Some(PathBuf::from("/x y/ca.pem")));
        let parsed: postgres::Config = t.rest.parse().unwrap();
        assert_eq!(parsed.get_password(), Some(&b"a b'c"[..]));
    }

    #[test]
    fn an_unknown_sslmode_is_named() {
        let e = parse("host=db sslmode=strict").unwrap_err();
        assert!(e.starts_with("sslmode: \"strict\" is not one of"), "{e}");
        assert!(parse("host=db password='open").is_err());
    }

    #[test]
    fn prefer_without_authorities_is_plain_and_require_without_a_file_is_named() {
        let plain = parse("host=db").unwrap();
        assert!(client_config(&plain).unwrap().is_none());
        let missing = parse("host=db sslmode=require sslrootcert=/nonexistent/ca.pem").unwrap();
        let e = client_config(&missing).unwrap_err().to_string();
        assert!(e.contains("sslrootcert: /nonexistent/ca.pem"), "{e}");
    }
}
