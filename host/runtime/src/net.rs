//! The URLs the service contacts and the loopback rule, each in one place.
//!
//! - [`http_url`]: an `http(s)` URL of the runtime file (a connection's
//!   `baseUrl`, a token endpoint, a resource, the issuer, a JWKS URI),
//!   parsed by the `url` crate, the WHATWG URL parser reqwest itself uses,
//!   so the check decides on the very host a request would reach.
//! - [`absolute_uri`]: an absolute URI the runtime file names but the
//!   service never contacts (an event source's `source`, an RFC 8707
//!   `resource` indicator), parsed by the same crate.
//! - [`is_private_address`]: the one rule of which addresses a listener
//!   may bind (loopback, RFC 1918, unique-local, link-local).
//! - [`is_loopback_host`]: the one "is this host loopback" rule, for
//!   plaintext `http` URLs (the runtime check) and plaintext database
//!   connections (`coordinator-store`).

use std::net::{IpAddr, Ipv6Addr};

pub use url::Url;

/// Whether `host` is a loopback host: `localhost` (in any ASCII case), an
/// IPv4 address in `127.0.0.0/8` in any spelling the WHATWG host parser
/// (the `url` crate) and the C resolver's `inet_aton` read as one (`127.1`,
/// `0x7f.0.0.1`, `2130706433`), the IPv6 loopback address `::1`, or an
/// IPv4-mapped IPv6 address of `127.0.0.0/8` (`::ffff:127.0.0.1`), each
/// IPv6 form with or without brackets and in any spelling
/// (`[0:0:0:0:0:0:0:1]`, `[::ffff:7f00:1]`). No name is resolved: any
/// other name is not loopback, and neither is a host ending in `.`
/// (`localhost.`, `127.0.0.1.`), which a resolver may look up as a name.
pub fn is_loopback_host(host: &str) -> bool {
    if host.is_empty() || host.ends_with('.') {
        return false;
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ip = match url::Host::parse(host) {
        Ok(url::Host::Domain(name)) => return name == "localhost",
        Ok(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Ok(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        // An IPv6 address without brackets (how a database URL's host
        // reads back), which the host parser takes only in brackets.
        Err(_) => match bare.parse::<Ipv6Addr>() {
            Ok(ip) => IpAddr::V6(ip),
            Err(_) => return false,
        },
    };
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether a listener on `ip` is reachable only from a private network
/// (seed 000: "a service listener bound to a private address"): a
/// loopback address, an IPv4 address of RFC 1918 (`10.0.0.0/8`,
/// `172.16.0.0/12`, `192.168.0.0/16`) or link-local (`169.254.0.0/16`), an
/// IPv6 unique-local (`fc00::/7`) or link-local (`fe80::/10`) address, or
/// the IPv4-mapped form of an IPv4 one. The wildcard addresses (`0.0.0.0`,
/// `::`), which listen on every interface, and every other (public)
/// address are not. The one rule of the runtime check's
/// `coordinator.runtime.listener-not-private`.
pub fn is_private_address(ip: IpAddr) -> bool {
    let v4_private =
        |v4: std::net::Ipv4Addr| v4.is_loopback() || v4.is_private() || v4.is_link_local();
    match ip {
        IpAddr::V4(v4) => v4_private(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4_private(v4),
            None => v6.is_loopback() || v6.is_unique_local() || v6.is_unicast_link_local(),
        },
    }
}

/// Why a URL is not a usable `http(s)` URL of the runtime file (the
/// runtime check reports each as `coordinator.runtime.url`, except
/// [`UrlFault::Plaintext`], `coordinator.runtime.insecure-url`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlFault {
    /// It holds whitespace or control characters (which the URL parser
    /// would silently drop or encode).
    Spaces,
    /// It does not parse as an absolute URL; the reason, in words.
    Unparsable(String),
    /// Its scheme is neither `https` nor `http`.
    Scheme,
    /// It carries user information (`user:password@`).
    UserInfo,
    /// It carries a fragment (`#...`).
    Fragment,
    /// It carries a query string where an endpoint is expected.
    Query,
    /// Plaintext `http` to `host`, which is not a loopback host.
    Plaintext {
        /// The host as the URL parser reads it (`[::1]`, `127.0.0.1`, ...).
        host: String,
    },
}

impl std::fmt::Display for UrlFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlFault::Spaces => f.write_str("it holds spaces or control characters"),
            UrlFault::Unparsable(why) => f.write_str(why),
            UrlFault::Scheme => f.write_str("its scheme is neither https nor http"),
            UrlFault::UserInfo => {
                f.write_str("it carries user information; put credentials in a secret reference")
            }
            UrlFault::Fragment => f.write_str("it carries a fragment"),
            UrlFault::Query => f.write_str("it carries a query string"),
            UrlFault::Plaintext { host } => write!(
                f,
                "it uses plaintext http to `{host}`, which is not a loopback host"
            ),
        }
    }
}

/// Parses `text` as an `http(s)` URL the service may contact: absolute,
/// `https` or `http`, without user information or fragment, without
/// whitespace or control characters, plaintext `http` only to a loopback
/// host ([`is_loopback_host`]), and, when `endpoint`, without a query
/// string. Faults are reported in that order.
///
/// # Errors
/// The first [`UrlFault`] found.
pub fn http_url(text: &str, endpoint: bool) -> Result<Url, UrlFault> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlFault::Spaces);
    }
    let url = Url::parse(text).map_err(unparsable)?;
    if url.scheme() != "https" && url.scheme() != "http" {
        return Err(UrlFault::Scheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlFault::UserInfo);
    }
    if url.fragment().is_some() {
        return Err(UrlFault::Fragment);
    }
    // `http` and `https` URLs always have a host (else `EmptyHost` above).
    let host = url.host_str().unwrap_or_default();
    if url.scheme() == "http" && !is_loopback_host(host) {
        return Err(UrlFault::Plaintext {
            host: host.to_owned(),
        });
    }
    if endpoint && url.query().is_some() {
        return Err(UrlFault::Query);
    }
    Ok(url)
}

/// The URL parser's refusal in words.
fn unparsable(e: url::ParseError) -> UrlFault {
    UrlFault::Unparsable(match e {
        url::ParseError::RelativeUrlWithoutBase => "it is not an absolute URL".into(),
        url::ParseError::EmptyHost => "it has no host".into(),
        url::ParseError::InvalidPort => "its port is not a number from 0 to 65535".into(),
        url::ParseError::InvalidIpv6Address => "its IPv6 host is not valid".into(),
        url::ParseError::InvalidIpv4Address => "its IPv4 host is not valid".into(),
        other => format!("it does not parse ({other})"),
    })
}

/// Parses `text` as an absolute URI (RFC 3986 section 4.3) that names
/// something rather than being contacted: an event source's `source`, a
/// token request's RFC 8707 `resource` indicator
/// (`urn:example:applications`, `https://breg.example.org`). Any scheme is
/// accepted, and plaintext `http` to any host (nothing is sent there);
/// the `url` crate reads it. Refused: whitespace or control characters, no
/// scheme, nothing after the scheme, and, unless `fragment_allowed`, a
/// fragment (RFC 8707 section 2 forbids one in a resource indicator).
///
/// # Errors
/// [`UrlFault::Spaces`], [`UrlFault::Unparsable`], [`UrlFault::Fragment`].
pub fn absolute_uri(text: &str, fragment_allowed: bool) -> Result<Url, UrlFault> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlFault::Spaces);
    }
    let uri = Url::parse(text).map_err(unparsable)?;
    if uri.as_str().len() <= uri.scheme().len() + 1 {
        return Err(UrlFault::Unparsable(
            "it has nothing after its scheme".into(),
        ));
    }
    if !fragment_allowed && uri.fragment().is_some() {
        return Err(UrlFault::Fragment);
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LocalHost",
            "127.0.0.1",
            "127.1.2.3",
            // Spellings the resolver reads as 127.0.0.1 too.
            "127.1",
            "127.0.1",
            "0x7f.0.0.1",
            "0177.0.0.1",
            "2130706433",
            "[::1]",
            "::1",
            "[0:0:0:0:0:0:0:1]",
            "[::ffff:127.0.0.1]",
            "::ffff:127.0.0.1",
            "[::ffff:7f00:1]",
            "[0:0:0:0:0:ffff:127.1.2.3]",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "localhost.",
            "127.0.0.1.",
            "localhost.example.org",
            "127.0.0.1.example.org",
            "128.0.0.1",
            "10.0.0.1",
            "[::2]",
            "[::ffff:10.0.0.1]",
            "[::127.0.0.1]",
            "[64:ff9b::127.0.0.1]",
            "example.org",
            "[::1",
            "::1]",
            "127.0.0.1.0.1",
            "256.0.0.1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn private_addresses() {
        let ip = |text: &str| text.parse::<IpAddr>().expect(text);
        for private in [
            "127.0.0.1",
            "127.9.9.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.10",
            "169.254.10.1",
            "::1",
            "fd12:3456:789a::1",
            "fc00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private_address(ip(private)), "{private}");
        }
        for exposed in [
            "0.0.0.0",
            "::",
            "8.8.8.8",
            "172.32.0.1",
            "172.15.255.255",
            "192.169.0.1",
            "100.64.0.1",
            "2001:db8::1",
            "2a00:1450::1",
            "fec0::1",
            "::ffff:8.8.8.8",
            "::ffff:0.0.0.0",
        ] {
            assert!(!is_private_address(ip(exposed)), "{exposed}");
        }
    }

    #[test]
    fn absolute_uris_name_without_being_contacted() {
        for uri in [
            "urn:example:applications",
            "https://breg.example.org",
            "https://breg.example.org/api?x=1",
            // Never contacted: plaintext to any host is no concern.
            "http://api.example.org/",
            "tag:example.org,2026:applications",
        ] {
            assert!(absolute_uri(uri, false).is_ok(), "{uri}");
        }
        assert_eq!(
            absolute_uri("https://breg.example.org/#x", false).err(),
            Some(UrlFault::Fragment)
        );
        assert!(absolute_uri("https://breg.example.org/#x", true).is_ok());
        for (uri, why) in [
            ("applications", "it is not an absolute URL"),
            ("urn:", "it has nothing after its scheme"),
            (":applications", "it is not an absolute URL"),
            ("https://[::1/", "its IPv6 host is not valid"),
        ] {
            assert_eq!(
                absolute_uri(uri, false)
                    .err()
                    .map(|f| f.to_string())
                    .as_deref(),
                Some(why),
                "{uri}"
            );
        }
        assert_eq!(
            absolute_uri("urn:example: applications", false).err(),
            Some(UrlFault::Spaces)
        );
    }

    fn fault(text: &str, endpoint: bool) -> Option<UrlFault> {
        http_url(text, endpoint).err()
    }

    #[test]
    fn http_urls_are_parsed_by_the_url_crate() {
        assert_eq!(fault("https://breg.example.org/base", true), None);
        assert_eq!(fault("http://127.0.0.1:9000", true), None);
        assert_eq!(fault("http://[::1]:9000/x", true), None);
        assert_eq!(fault("http://LOCALHOST/x", true), None);
        // What reqwest would reach is what is decided: `127.1` is 127.0.0.1.
        assert_eq!(fault("http://127.1/", true), None);
        assert_eq!(fault("https://a.example.org/?x=1", false), None);
        assert_eq!(
            fault("https://a.example.org/?x=1", true),
            Some(UrlFault::Query)
        );
        assert_eq!(
            fault("http://breg.example.org", true),
            Some(UrlFault::Plaintext {
                host: "breg.example.org".into()
            })
        );
        // A loopback name in the user information is not the host.
        assert_eq!(
            fault("http://localhost@evil.example.org/", true),
            Some(UrlFault::UserInfo)
        );
        assert_eq!(fault("ftp://a.example.org", true), Some(UrlFault::Scheme));
        assert_eq!(
            fault("https://a.example.org/#x", true),
            Some(UrlFault::Fragment)
        );
        assert_eq!(
            fault("https://a.example.org/ x", true),
            Some(UrlFault::Spaces)
        );
        assert_eq!(
            fault(" https://a.example.org", true),
            Some(UrlFault::Spaces)
        );
        assert_eq!(
            fault("https://a.example.org\t/", true),
            Some(UrlFault::Spaces)
        );
        for (text, why) in [
            ("breg.example.org", "it is not an absolute URL"),
            ("https://", "it has no host"),
            (
                "https://a.example.org:99999/",
                "its port is not a number from 0 to 65535",
            ),
            ("https://[::1/", "its IPv6 host is not valid"),
        ] {
            assert_eq!(
                fault(text, true).map(|f| f.to_string()).as_deref(),
                Some(why),
                "{text}"
            );
        }
    }
}
