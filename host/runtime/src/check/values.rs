//! The rules for single values, used by every section: absolute paths,
//! non-empty values, names, and the http(s) URLs the service contacts
//! (TLS, or plaintext only to a loopback host), and the absolute URIs it
//! only names.

use coordinator_ir::name::{is_name, NAME_PATTERN};

use super::Checker;
use crate::codes;
use crate::net::{absolute_uri, http_url, UrlFault};

impl Checker<'_> {
    /// Refuses (`relative-path`) a path that is not absolute.
    pub(super) fn absolute(&mut self, at: &str, path: &str) {
        if !path.starts_with('/') {
            self.err(
                codes::RUNTIME_RELATIVE_PATH,
                self.doc.locate(at),
                format!("`{path}` is not an absolute path"),
                "Write an absolute path; the service does not resolve paths against its working directory.",
            );
        }
    }

    /// Refuses (`empty-value`) a value that is empty or only white space.
    pub(super) fn non_empty(&mut self, at: &str, v: &str) {
        if v.trim().is_empty() {
            self.err(
                codes::RUNTIME_EMPTY_VALUE,
                self.doc.locate(at),
                "this value is empty",
                "Write the value this key names.",
            );
        }
    }

    /// Refuses (`name`) a `what` name that does not match the name pattern.
    pub(super) fn name(&mut self, at: &str, name: &str, what: &str) {
        if !is_name(name) {
            self.err(
                codes::RUNTIME_NAME,
                self.doc.locate_key(at),
                format!("{what} name `{name}` does not match {NAME_PATTERN}"),
                "Use lowercase letters, digits and `-`, starting with a letter.",
            );
        }
    }

    /// An `http(s)` URL the service contacts ([`http_url`]): https, or http
    /// only to a loopback host; when `endpoint`, without a query string.
    pub(super) fn url(&mut self, at: &str, url: &str, endpoint: bool) {
        match http_url(url, endpoint) {
            Ok(_) => {}
            Err(UrlFault::Plaintext { host }) => self.err(
                codes::RUNTIME_INSECURE_URL,
                self.doc.locate(at),
                format!("`{url}` uses plaintext http to `{host}`, which is not a loopback host"),
                "Use https; plaintext http is accepted only to localhost, 127.0.0.0/8 or [::1].",
            ),
            Err(UrlFault::Query) => self.err(
                codes::RUNTIME_URL,
                self.doc.locate(at),
                format!("`{url}` carries a query string"),
                "Remove the query string from the URL.",
            ),
            Err(why) => self.err(
                codes::RUNTIME_URL,
                self.doc.locate(at),
                format!("`{url}` is not a usable URL: {why}"),
                "Write an absolute https URL, e.g. `https://breg.example.org`.",
            ),
        }
    }

    /// An absolute URI the service names but never contacts
    /// ([`absolute_uri`]): any scheme, a fragment only when
    /// `fragment_allowed`. `what` starts the message (`event source
    /// `applications`: `source``).
    pub(super) fn uri(&mut self, at: &str, text: &str, what: &str, fragment_allowed: bool) {
        if let Err(why) = absolute_uri(text, fragment_allowed) {
            self.err(
                codes::RUNTIME_URL,
                self.doc.locate(at),
                format!("{what} is not an absolute URI: {why}"),
                "Write an absolute URI with its scheme, e.g. `urn:example:applications` or `https://breg.example.org/applications`.",
            );
        }
    }
}
