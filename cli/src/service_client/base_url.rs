//! `--url`, the service's base URL, and the request URLs built from it by
//! path segments.

/// The segments of a path under `--url` (each percent-encoded by the `url`
/// crate when the request URL is built).
pub(crate) fn request_path(segments: &[&str]) -> Vec<String> {
    segments.iter().map(|s| (*s).to_owned()).collect()
}

/// `--url` parsed by the `url` crate (the `Url` reqwest takes): an absolute
/// `http(s)` URL without credentials, query or fragment. The request URL is
/// this base with the call's path segments appended, so a base path
/// (`https://host/coordinator`) is kept. `Err` holds the usage message.
pub(crate) fn service_url(name: &str, text: &str, segments: &[String]) -> Result<url::Url, String> {
    let not_http = || {
        format!("coordinatorctl {name}: --url must be an http(s) URL, e.g. https://coordinator.example.org")
    };
    let mut url = match url::Url::parse(text) {
        Err(url::ParseError::RelativeUrlWithoutBase) => return Err(not_http()),
        Err(e) => {
            return Err(format!(
                "coordinatorctl {name}: --url is not a valid URL ({e})"
            ))
        }
        Ok(u) => u,
    };
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(not_http());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "coordinatorctl {name}: --url must not carry credentials; pass the token with --token-file"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "coordinatorctl {name}: --url must be the service's base URL, without a query or fragment"
        ));
    }
    // An http(s) URL always has a path to extend.
    url.path_segments_mut()
        .map_err(|()| not_http())?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::request_path as path;
    use super::*;

    #[test]
    fn request_urls_are_built_by_the_url_crate() {
        let url = |base: &str, segments: &[&str]| {
            service_url("status", base, &path(segments)).map(|u| u.to_string())
        };
        let run = ["v1", "runs", "a/b c%", "inspect"];
        assert_eq!(
            url("https://coordinator.example.org", &run).as_deref(),
            Ok("https://coordinator.example.org/v1/runs/a%2Fb%20c%25/inspect")
        );
        // A base path is kept, with or without its trailing slash.
        for base in [
            "http://127.0.0.1:8108/coordinator",
            "http://127.0.0.1:8108/coordinator/",
        ] {
            assert_eq!(
                url(base, &["v1", "doctor"]).as_deref(),
                Ok("http://127.0.0.1:8108/coordinator/v1/doctor"),
                "{base}"
            );
        }
        let refused = |base: &str, why: &str| {
            let e = url(base, &["v1", "doctor"]).expect_err(base);
            assert!(e.contains(why), "{base}: {e}");
        };
        refused("coordinator.example.org", "must be an http(s) URL");
        refused("ftp://coordinator.example.org", "must be an http(s) URL");
        refused("http://127.0.0.1:http://x", "is not a valid URL");
        refused(
            "https://u:pw@coordinator.example.org",
            "must not carry credentials",
        );
        // A query or fragment would end up inside the request URL.
        refused(
            "https://coordinator.example.org/?x=1",
            "without a query or fragment",
        );
        refused(
            "https://coordinator.example.org/#x",
            "without a query or fragment",
        );
    }
}
