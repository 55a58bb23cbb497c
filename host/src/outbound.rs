//! Outbound HTTPS, shared by the CLI (a client of a daemon) and the cloud providers (clients of
//! Azure): which certificate authorities a client trusts, and whether a URL is on a server's
//! origin, since a bearer token goes only there.
//!
//! Roots are given explicitly (a PEM file, else the system's bundle), never a compiled-in list;
//! rustls with ring (ureq's `rustls-no-provider` + `_ring`).

use std::path::{Path, PathBuf};
use ureq::tls::{PemItem, RootCerts, TlsConfig};

/// The system's bundle of certificate authorities: `$SSL_CERT_FILE`, else the first of the
/// usual places that exists.
pub fn system_bundle() -> Option<PathBuf> {
    if let Some(f) = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
        return Some(f.into());
    }
    [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// The TLS settings of a client of `url`: for `https`, the certificate authorities of `ca_file`
/// (a PEM bundle), else the system's bundle. Plain `http` needs none. `setting` names where
/// `ca_file` came from (`--ca-file`, `caFile`) in errors; `hint` is what to do when the system
/// has no bundle (`name one with --ca-file`).
pub fn tls_config(
    url: &str,
    ca_file: Option<&Path>,
    setting: &str,
    hint: &str,
) -> Result<TlsConfig, String> {
    if !url.to_ascii_lowercase().starts_with("https://") {
        return Ok(TlsConfig::default());
    }
    let (file, from) = match ca_file {
        Some(f) => (f.to_path_buf(), setting),
        None => (
            system_bundle().ok_or_else(|| {
                format!(
                    "{url} is https, and this system has no bundle of certificate \
                     authorities: {hint}"
                )
            })?,
            "the system's bundle",
        ),
    };
    let pem = std::fs::read(&file).map_err(|e| format!("{from}: {}: {e}", file.display()))?;
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(format!(
            "{from}: {}: no certificate (a PEM `CERTIFICATE` block) in it",
            file.display()
        ));
    }
    Ok(TlsConfig::builder()
        .root_certs(RootCerts::new_with_certs(&certs))
        .build())
}

/// A URL's origin: scheme, host (lower case) and port (the scheme's default when none is
/// written). `None` for what is not an absolute `http`/`https` URL, or carries user info
/// (`https://a.example@b.example/`).
pub fn origin(url: &str) -> Option<(String, String, u16)> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = uri.authority()?;
    if authority.as_str().contains('@') {
        return None;
    }
    let port = authority.port_u16().unwrap_or(default_port);
    Some((scheme, authority.host().to_ascii_lowercase(), port))
}

/// Whether `url` is on `server`'s origin (scheme, host, port): where a token for `server` may go.
pub fn same_origin(server: &str, url: &str) -> bool {
    matches!((origin(server), origin(url)), (Some(a), Some(b)) if a == b)
}

/// Whether `url`'s host is this machine (`localhost`, `127.0.0.0/8`, `::1`): the one place a
/// bearer token may travel over plain `http` (tests, a local proxy).
pub fn is_loopback(url: &str) -> bool {
    let Some((_, host, _)) = origin(url) else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert!(same_origin(
            "https://management.azure.com",
            "https://Management.Azure.com:443/subscriptions/s?api-version=1"
        ));
        for other in [
            "http://management.azure.com/x",
            "https://management.azure.com:8443/x",
            "https://management.azure.com@evil.example/x",
            "https://evil.example/x",
            "/relative",
            "ftp://management.azure.com/x",
        ] {
            assert!(
                !same_origin("https://management.azure.com", other),
                "{other}"
            );
        }
    }

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_is_named() {
        assert!(tls_config("http://127.0.0.1:7700", None, "caFile", "-").is_ok());
        let missing = Path::new("/nonexistent/ca.pem");
        let e = tls_config("https://x.example", Some(missing), "caFile", "-").unwrap_err();
        assert!(e.starts_with("caFile: /nonexistent/ca.pem: "), "{e}");
        let dir = std::env::temp_dir().join(format!("outbound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = tls_config("https://x.example", Some(&empty), "--ca-file", "-").unwrap_err();
        assert!(
            e.contains("--ca-file") && e.contains("no certificate"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        assert!(is_loopback("http://127.0.0.1:8080"));
        assert!(is_loopback("http://localhost"));
        assert!(is_loopback("http://[::1]:80/x"));
        assert!(!is_loopback("http://169.254.169.254"));
        assert!(!is_loopback("https://management.azure.com"));
    }
}
