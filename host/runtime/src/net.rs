//! The URLs the service contacts and the loopback rule, each in one place.
//!
//! - [`http_url`]: an `http(s)` URL of the runtime file (a connection's
//!   `baseUrl`, a token endpoint, a resource, the issuer, a JWKS URI),
//!   parsed by the `url` crate, the WHATWG URL parser reqwest itself uses,
//!   so the check decides on the very host a request would reach.
//! - [`is_loopback_host`]: the one "is this host loopback" rule, for
//!   plaintext `http` URLs (the runtime check) and plaintext database
//!   connections (`coordinator-store`).

use std::net::IpAddr;

pub use url::Url;

/// Whether `host` is a loopback host: `localhost` (in any ASCII case), an
/// IPv4 address in `127.0.0.0/8`, or the IPv6 loopback address `::1` (in
/// any spelling, with or without brackets: `[::1]`, `0:0:0:0:0:0:0:1`).
/// No name is resolved: any other name, `localhost.` included, is not
/// loopback.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
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
    let url = Url::parse(text).map_err(|e| {
        UrlFault::Unparsable(match e {
            url::ParseError::RelativeUrlWithoutBase => "it is not an absolute URL".into(),
            url::ParseError::EmptyHost => "it has no host".into(),
            url::ParseError::InvalidPort => "its port is not a number from 0 to 65535".into(),
            url::ParseError::InvalidIpv6Address => "its IPv6 host is not valid".into(),
            url::ParseError::InvalidIpv4Address => "its IPv4 host is not valid".into(),
            other => format!("it does not parse ({other})"),
        })
    })?;
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
            "[::1]",
            "::1",
            "[0:0:0:0:0:0:0:1]",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "localhost.",
            "localhost.example.org",
            "128.0.0.1",
            "10.0.0.1",
            "[::2]",
            "[::ffff:127.0.0.1]",
            "example.org",
            "[::1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
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
