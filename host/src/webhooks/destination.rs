//! Where a subscription may deliver: the endpoint URL's rules and the addresses it may
//! resolve to (server-side request forgery). The daemon runs next to credentials for whole
//! fleets; an endpoint is written by whoever administers subscriptions, and must not turn the
//! daemon into a way to reach a cloud's metadata service or the daemon's own host.
//!
//! - `https` always; plain `http` only to a loopback address, and only where loopback is
//!   allowed (`webhooks.allowLoopback`, for receivers on the same machine and for tests).
//! - No user info in the URL (`https://user:pass@host/`), no fragment.
//! - Every address the host resolves to is checked before a connection is made, and the
//!   connection goes to a checked address (a name that resolves elsewhere the next time cannot
//!   slip through): never link-local (169.254.0.0/16, fe80::/10, where clouds put their
//!   metadata services), a known metadata address (169.254.169.254, fd00:ec2::254,
//!   100.100.100.200, 192.0.0.192), unspecified, broadcast or multicast; loopback only where
//!   allowed. Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7) are allowed: receivers
//!   inside a company's network are the common case.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What the daemon's configuration allows beyond the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Deliveries to loopback addresses (and plain `http` to them).
    pub allow_loopback: bool,
}

/// An endpoint that passed [`check_url`]: its scheme, host and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL as given.
    pub url: String,
    /// `https` or `http`.
    pub https: bool,
    /// The host (a name, or an address without brackets).
    pub host: String,
    /// The port (the scheme's default when none is written).
    pub port: u16,
}

/// Metadata services at addresses outside link-local.
const METADATA_V4: [Ipv4Addr; 2] = [
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
    Ipv4Addr::new(192, 0, 0, 192),     // Oracle Cloud
];

/// The endpoint of `url`, or why it may not be one. The error names the rule and never repeats
/// the URL: its path, query or user info can be a credential, and errors reach the audit log
/// (which viewers read) and the daemon's log.
pub fn check_url(url: &str, policy: AddressPolicy) -> Result<Endpoint, String> {
    let uri: ureq::http::Uri = url.parse().map_err(|e| format!("is not a URL ({e})"))?;
    let https = match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
        Some("https") => true,
        Some("http") => false,
        Some(s) => return Err(format!("the scheme is {s:?}; an endpoint is https")),
        None => return Err("is not an absolute URL (https://…)".to_string()),
    };
    let authority = uri.authority().ok_or_else(|| "has no host".to_string())?;
    if authority.as_str().contains('@') {
        return Err(
            "carries user info (user:password@host); an endpoint authenticates \
                    deliveries by their signature"
                .to_string(),
        );
    }
    if url.contains('#') {
        return Err("has a fragment (#…), which is never sent".to_string());
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    if host.is_empty() {
        return Err("has no host".to_string());
    }
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let literal = host.parse::<IpAddr>().ok();
    if let Some(ip) = literal {
        check_address(ip, policy)?;
    }
    if !https {
        let loopback = host == "localhost" || literal.is_some_and(|ip| unmapped(ip).is_loopback());
        if !(loopback && policy.allow_loopback) {
            return Err(format!(
                "is plain http to {host}; an endpoint is https (http only to loopback, where \
                 webhooks.allowLoopback is set)"
            ));
        }
    }
    Ok(Endpoint {
        url: url.to_string(),
        https,
        host,
        port,
    })
}

/// An IPv4 address written as IPv6 (`::ffff:169.254.169.254`) is judged as the IPv4 address.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether a delivery may connect to `ip`; the error says what the address is.
pub fn check_address(ip: IpAddr, policy: AddressPolicy) -> Result<(), String> {
    let ip = unmapped(ip);
    let what = match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    };
    match what {
        None => Ok(()),
        Some("loopback") if policy.allow_loopback => Ok(()),
        Some("loopback") => Err(format!(
            "{ip} is a loopback address: deliveries to the daemon's own host are refused \
             unless webhooks.allowLoopback is set"
        )),
        Some(kind) => Err(format!(
            "{ip} is {kind} address: deliveries there are refused (server-side request forgery)"
        )),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if METADATA_V4.contains(&ip) || ip == Ipv4Addr::new(169, 254, 169, 254) {
        Some("a cloud metadata")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_link_local() {
        Some("a link-local")
    } else if ip.is_unspecified() || ip.octets()[0] == 0 {
        Some("an unspecified")
    } else if ip.is_broadcast() {
        Some("the broadcast")
    } else if ip.is_multicast() {
        Some("a multicast")
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let seg = ip.segments();
    if seg == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254] {
        Some("a cloud metadata")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if seg[0] & 0xffc0 == 0xfe80 {
        Some("a link-local")
    } else if ip.is_unspecified() {
        Some("an unspecified")
    } else if ip.is_multicast() {
        Some("a multicast")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: AddressPolicy = AddressPolicy {
        allow_loopback: false,
    };
    const LOOPBACK: AddressPolicy = AddressPolicy {
        allow_loopback: true,
    };

    #[test]
    fn https_endpoints_are_taken_with_their_host_and_port() {
        let e = check_url("https://hooks.example.com/waverun?team=sre", DEFAULT).unwrap();
        assert_eq!(
            (e.https, e.host.as_str(), e.port),
            (true, "hooks.example.com", 443)
        );
        let e = check_url("https://10.1.2.3:8443/in", DEFAULT).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("10.1.2.3", 8443));
        let e = check_url("https://[fd12::1]/in", DEFAULT).unwrap();
        assert_eq!(e.host, "fd12::1");
    }

    #[test]
    fn metadata_link_local_and_unspecified_addresses_are_refused_whatever_the_policy() {
        for url in [
            "https://169.254.169.254/latest/meta-data/",
            "https://[::ffff:169.254.169.254]/",
            "https://169.254.10.1/",
            "https://[fe80::1]/",
            "https://[fd00:ec2::254]/",
            "https://100.100.100.200/",
            "https://192.0.0.192/",
            "https://0.0.0.0/",
            "https://[::]/",
            "https://224.0.0.1/",
            "https://255.255.255.255/",
        ] {
            for policy in [DEFAULT, LOOPBACK] {
                let e = check_url(url, policy).unwrap_err();
                assert!(e.contains("refused"), "{url}: {e}");
            }
        }
    }

    #[test]
    fn loopback_is_refused_unless_allowed_and_only_loopback_may_be_plain_http() {
        for url in [
            "https://127.0.0.1:9000/",
            "https://[::1]/",
            "https://127.8.9.10/",
        ] {
            let e = check_url(url, DEFAULT).unwrap_err();
            assert!(e.contains("webhooks.allowLoopback"), "{url}: {e}");
            assert!(check_url(url, LOOPBACK).is_ok(), "{url}");
        }
        let e = check_url("http://127.0.0.1:9000/hook", DEFAULT).unwrap_err();
        assert!(e.contains("loopback"), "{e}");
        let e = check_url("http://localhost:9000/hook", DEFAULT).unwrap_err();
        assert!(e.contains("plain http"), "{e}");
        assert!(check_url("http://127.0.0.1:9000/hook", LOOPBACK).is_ok());
        assert!(check_url("http://localhost:9000/hook", LOOPBACK).is_ok());
        let e = check_url("http://hooks.example.com/", LOOPBACK).unwrap_err();
        assert!(e.contains("plain http"), "{e}");
    }

    #[test]
    fn urls_that_are_not_plain_endpoints_are_refused_with_the_rule() {
        for (url, rule) in [
            ("ftp://hooks.example.com/", "the scheme is \"ftp\""),
            ("/relative/path", "not an absolute URL"),
            ("https://user:pass@hooks.example.com/", "user info"),
            ("https://hooks.example.com/#frag", "fragment"),
            ("not a url at all", "not a URL"),
        ] {
            let e = check_url(url, LOOPBACK).unwrap_err();
            assert!(e.contains(rule), "{url}: {e}");
        }
    }

    #[test]
    fn an_error_never_repeats_the_url_which_can_carry_a_credential() {
        for url in [
            "https://user:s3cr3t-pw@hooks.example.com/",
            "http://hooks.example.com/s3cr3t-pw",
            "https://hooks.example.com/in?token=s3cr3t-pw#x",
            "gopher://hooks.example.com/s3cr3t-pw",
            "https://169.254.169.254/s3cr3t-pw",
        ] {
            let e = check_url(url, DEFAULT).unwrap_err();
            assert!(!e.contains("s3cr3t-pw"), "{url}: {e}");
        }
    }

    #[test]
    fn resolved_addresses_are_judged_like_literal_ones() {
        assert!(check_address("93.184.216.34".parse().unwrap(), DEFAULT).is_ok());
        assert!(check_address("10.0.0.7".parse().unwrap(), DEFAULT).is_ok());
        assert!(check_address("2606:4700::1111".parse().unwrap(), DEFAULT).is_ok());
        assert!(check_address("169.254.169.254".parse().unwrap(), LOOPBACK).is_err());
        assert!(check_address("127.0.0.1".parse().unwrap(), DEFAULT).is_err());
        assert!(check_address("::ffff:127.0.0.1".parse().unwrap(), DEFAULT).is_err());
        assert!(check_address("::ffff:127.0.0.1".parse().unwrap(), LOOPBACK).is_ok());
    }
}
