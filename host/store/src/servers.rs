//! Where the store's connections go: the servers a database URL names, in
//! order, and which of them may be used.
//!
//! A database URL names one server (`postgres://ROLE:PASSWORD@HOST:PORT/DB`)
//! or, in libpq's multi-host form, several
//! (`postgres://ROLE:PASSWORD@H1:5432,H2:5432/DB?target_session_attrs=read-write`),
//! as Patroni and managed services hand out. [`ServerList::parse`] cuts the
//! host list — the one part of that form RFC 3986 lacks — into one URL per
//! host and hands each to sqlx's parser (the `url` crate), so every other
//! part (user, password, database, `sslmode`, `sslrootcert`, ...) is read
//! by the crate, once per host, and the TLS rule of SPEC §8 is applied to
//! each host by itself (docs/decisions.md "Multi-host database URLs").
//!
//! `target_session_attrs` is `any` (the default) or `read-write`
//! (`primary` is taken as `read-write`); the others libpq knows
//! (`read-only`, `standby`, `prefer-standby`) name servers the service
//! cannot work with and are refused. Whatever the URL says, a connection
//! that will write (every connection of the service, and `apply`'s) is
//! used only on a server that is writable: [`writable`] is asked of every
//! new connection, and a server in recovery or read-only is passed over
//! ([`ServerList::first_usable`]) and logged with its address and why.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::{ConnectOptions, Connection, Executor, PgConnection, Row};

use coordinator_runtime::config::{PoolingMode, SecretRef};
use coordinator_runtime::net::is_loopback_host;

use crate::codes;
use crate::DatabaseError;

/// How long one server may take to accept a connection before the next one
/// in the list is tried (and, with one server, before the database is
/// reported unreachable), in seconds.
pub const FIRST_CONNECT_TIMEOUT_SECONDS: u64 = 5;

/// libpq's `target_session_attrs`, as far as the service accepts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetSessionAttrs {
    /// The first server that accepts a connection (libpq's default).
    Any,
    /// The first server that accepts a connection and is writable
    /// (`read-write`, or `primary`).
    ReadWrite,
}

/// Whether a connection will be used to write. The service's connections
/// and `apply`'s always write; `plan` and `deployment-status` only read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads only: a read-only server is acceptable when the URL says
    /// `target_session_attrs=any`.
    Read,
    /// Writes: a read-only server is never used.
    Write,
}

/// The servers of one database URL, in the URL's order, each with its
/// connection options (TLS rule applied), and the session attributes asked
/// for. Never holds or prints the URL itself: [`ServerList::address`] is
/// `HOST:PORT` (or the socket directory).
#[derive(Clone, Debug)]
pub struct ServerList {
    servers: Vec<PgConnectOptions>,
    target: TargetSessionAttrs,
    reference: String,
}

/// Why a server was passed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotUsable {
    /// In recovery: a standby (`pg_is_in_recovery()`).
    InRecovery,
    /// Not in recovery, but read-only (`transaction_read_only`, from
    /// `default_transaction_read_only`).
    ReadOnly,
}

impl std::fmt::Display for NotUsable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotUsable::InRecovery => "is in recovery (a standby), so it cannot be written to",
            NotUsable::ReadOnly => "is read-only (transaction_read_only is on)",
        })
    }
}

/// Asks the server of `connection` whether it can be written to: `Ok(None)`
/// when it can, else why not.
///
/// # Errors
/// The database's (the connection is then unusable too).
pub async fn writable(connection: &mut PgConnection) -> Result<Option<NotUsable>, sqlx::Error> {
    // The simple query protocol: one message, one round trip, nothing
    // prepared, so a pooler in transaction mode cannot split it between
    // server sessions.
    let row = connection
        .fetch_one("SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'")
        .await?;
    let in_recovery: bool = row.try_get(0)?;
    let read_only: bool = row.try_get(1)?;
    Ok(if in_recovery {
        Some(NotUsable::InRecovery)
    } else if read_only {
        Some(NotUsable::ReadOnly)
    } else {
        None
    })
}

/// The refusal of a URL that does not parse; never echoes the URL.
fn bad_url(reference: &str, why: &str) -> DatabaseError {
    DatabaseError::refused(
        codes::DATABASE_URL,
        format!("`{reference}` does not hold a PostgreSQL URL{why}"),
        "write `postgres://ROLE:PASSWORD@HOST:PORT/DATABASE?sslmode=require` into the file (several hosts as `HOST1:PORT,HOST2:PORT`)",
    )
}

/// One URL per host of libpq's multi-host form: the authority's host list
/// (after the last `@`, up to the first `/`, `?` or `#`) cut at its commas,
/// each host put back in place of the list. A URL naming one host is
/// returned as it is. `None` for an empty host in a list.
fn one_url_per_host(url: &str) -> Option<Vec<String>> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(vec![url.to_owned()]);
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    if !hosts.contains(',') {
        return Some(vec![url.to_owned()]);
    }
    hosts
        .split(',')
        .map(|host| (!host.is_empty()).then(|| format!("{scheme}://{userinfo}{host}{tail}")))
        .collect()
}

/// Why `one` (one server's URL of the list) is not a PostgreSQL URL the
/// service reads, in words that quote no part of it (a password written
/// with a raw `@` or `/` would otherwise show up as a host or a path):
/// a scheme other than `postgres`/`postgresql`, what the `url` crate
/// finds wrong (a port out of range, an unclosed IPv6 bracket, ...), a
/// path that is not one database name, port 0, or — with
/// [`PoolingMode::Transaction`] — an `options` parameter, which a pooler
/// in transaction mode refuses at login. `None` when it is fine.
fn url_form_fault(one: &str, pooling: PoolingMode) -> Option<String> {
    let parsed = match url::Url::parse(one) {
        Ok(parsed) => parsed,
        Err(e) => return Some(format!("it does not parse as a URL ({e})")),
    };
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Some("its scheme is not `postgres://` or `postgresql://`".into());
    }
    if parsed.port() == Some(0) {
        return Some("its port is 0".into());
    }
    let path = parsed.path().strip_prefix('/').unwrap_or(parsed.path());
    if path.contains('/') {
        return Some(
            "its path is not one database name (is a `@` or `/` of the password not percent-encoded?)"
                .into(),
        );
    }
    if pooling == PoolingMode::Transaction && parsed.query_pairs().any(|(k, _)| k == "options") {
        return Some(
            "it sets `options`, which a pooler in transaction mode (database.poolingMode: transaction) refuses at login; set those settings on the role or the database instead"
                .into(),
        );
    }
    None
}

impl ServerList {
    /// Reads `url` (from the secret `reference`): one server or libpq's
    /// host list, `target_session_attrs`, and the TLS rule of SPEC §8 for
    /// each host — `sslmode=require`/`verify-ca`/`verify-full` →
    /// `verify-full` (against the system roots, or `trusted_root_pem`);
    /// any other mode (or none) only to a loopback host or a Unix socket.
    /// With [`PoolingMode::Transaction`] no statement cache is kept and
    /// no setting is sent in the startup packet (`extra_float_digits`
    /// included), as a pooler in transaction mode requires.
    ///
    /// # Errors
    /// `database.url` for a URL that does not parse, an empty host in the
    /// list or a `target_session_attrs` the service cannot work with (the
    /// URL is never echoed); `database.insecure-url` for plaintext to a
    /// host that is not loopback.
    pub fn parse(
        url: &str,
        reference: &SecretRef,
        trusted_root_pem: Option<&[u8]>,
        pooling: PoolingMode,
    ) -> Result<ServerList, DatabaseError> {
        let reference = reference.0.as_str();
        let urls = one_url_per_host(url)
            .ok_or_else(|| bad_url(reference, ": its host list has an empty entry"))?;
        let mut target = TargetSessionAttrs::Any;
        let mut servers = Vec::with_capacity(urls.len());
        for (index, one) in urls.iter().enumerate() {
            if let Some(why) = url_form_fault(one, pooling) {
                let which = if urls.len() > 1 {
                    format!(" (server {} of {})", index + 1, urls.len())
                } else {
                    String::new()
                };
                return Err(bad_url(reference, &format!("{which}: {why}")));
            }
            let (one, attrs) =
                without_target_session_attrs(one).ok_or_else(|| bad_url(reference, ""))?;
            target = match attrs.as_deref() {
                None | Some("any") => TargetSessionAttrs::Any,
                Some("read-write" | "primary") => TargetSessionAttrs::ReadWrite,
                Some(other) => {
                    return Err(bad_url(
                        reference,
                        &format!(
                            " the service can use: target_session_attrs `{other}` (use `read-write` or `any`)"
                        ),
                    ))
                }
            };
            let options = PgConnectOptions::from_str(&one).map_err(|_| bad_url(reference, ""))?;
            let options = tls_rule(options, reference, trusted_root_pem)?
                .application_name("registry-coordinator");
            servers.push(match pooling {
                PoolingMode::Session => options,
                PoolingMode::Transaction => {
                    options.statement_cache_capacity(0).extra_float_digits(None)
                }
            });
        }
        Ok(ServerList {
            servers,
            target,
            reference: reference.to_owned(),
        })
    }

    /// How many servers the URL names (at least 1).
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Always false: a list names at least one server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The session attributes the URL asked for.
    pub fn target(&self) -> TargetSessionAttrs {
        self.target
    }

    /// The options of server `index` (in the URL's order).
    pub fn options(&self, index: usize) -> Option<&PgConnectOptions> {
        self.servers.get(index)
    }

    /// Server `index` as `HOST:PORT` (or its socket directory), for logs and
    /// messages.
    pub fn address(&self, index: usize) -> String {
        self.servers.get(index).map_or_else(String::new, address_of)
    }

    /// Every server's settings changed by `change` (a pool's session
    /// settings, say).
    pub fn map(mut self, change: impl Fn(PgConnectOptions) -> PgConnectOptions) -> ServerList {
        self.servers = self.servers.into_iter().map(change).collect();
        self
    }

    /// Whether a server answering `found` may be used for `access`: a
    /// writer never uses a read-only server; a reader does only when the
    /// URL asked for `any`.
    pub fn accepts(&self, access: Access, found: &Option<NotUsable>) -> bool {
        found.is_none() || (access == Access::Read && self.target == TargetSessionAttrs::Any)
    }

    /// Tries the servers in the URL's order, as libpq does for each new
    /// connection, and answers the index of the first that accepts a
    /// connection and may be used for `access` ([`ServerList::accepts`]).
    /// Each server passed over is logged (warning, with its address and
    /// why).
    ///
    /// # Errors
    /// `database.login` when a server refuses the role or its password
    /// (SQLSTATE class 28), `database.missing` without the database
    /// (3D000) and `database.tls` for a TLS configuration fault (no TLS at
    /// the server, a certificate the handshake refuses): configuration
    /// faults, not outages, returned at once.
    /// Otherwise, when no server may be used: `database.read-only` when
    /// every one that answered is read-only, else `store-unavailable`; the
    /// message names each server and why it was passed over.
    pub async fn first_usable(&self, access: Access) -> Result<usize, DatabaseError> {
        self.walk(access, true).await
    }

    /// [`ServerList::first_usable`] without its warnings (for a probe that
    /// may come every second, such as `/ready`'s).
    ///
    /// # Errors
    /// As [`ServerList::first_usable`].
    pub async fn first_usable_quietly(&self, access: Access) -> Result<usize, DatabaseError> {
        self.walk(access, false).await
    }

    async fn walk(&self, access: Access, log: bool) -> Result<usize, DatabaseError> {
        let mut passed = Vec::new();
        let mut read_only = false;
        for (index, options) in self.servers.iter().enumerate() {
            let address = address_of(options);
            match probe(options, access, self).await {
                Ok(()) => return Ok(index),
                Err(Probe::Refused(e)) => return Err(e),
                Err(Probe::NotUsable(why)) => {
                    read_only = true;
                    if log {
                        tracing::warn!(code = "database.read-only", server = %address, "passed over PostgreSQL at {address}: it {why}");
                    }
                    passed.push(format!("PostgreSQL at {address} {why}"));
                }
                Err(Probe::Unreachable(why)) => {
                    if log && self.servers.len() > 1 {
                        tracing::warn!(code = "store-unavailable", server = %address, "passed over PostgreSQL at {address}: {why}");
                    }
                    passed.push(match why.strip_prefix("cannot connect: ") {
                        Some(cause) => {
                            format!("cannot connect to PostgreSQL at {address}: {cause}")
                        }
                        None => format!("PostgreSQL at {address} {why}"),
                    });
                }
            }
        }
        let message = if self.servers.len() == 1 {
            passed.join("; ")
        } else {
            format!(
                "no server of `{}` may be used: {}",
                self.reference,
                passed.join("; ")
            )
        };
        Err(if read_only {
            DatabaseError::unavailable(
                codes::DATABASE_READ_ONLY,
                message,
                "point the URL at the primary (or list every server with target_session_attrs=read-write); the service waits for a writable server",
            )
        } else {
            DatabaseError::unavailable(
                codes::COMMAND_STORE_UNAVAILABLE,
                message,
                "check that PostgreSQL is running and reachable from this host, then try again",
            )
        })
    }
}

/// What [`probe`] found wrong with one server.
enum Probe {
    /// A configuration fault: stop trying.
    Refused(DatabaseError),
    /// It answered, but cannot be used for the access asked.
    NotUsable(NotUsable),
    /// It did not answer, or failed otherwise (the cause).
    Unreachable(String),
}

/// Opens one connection to `options`, asks whether its server is writable,
/// and closes it.
async fn probe(options: &PgConnectOptions, access: Access, list: &ServerList) -> Result<(), Probe> {
    let attempt = tokio::time::timeout(
        Duration::from_secs(FIRST_CONNECT_TIMEOUT_SECONDS),
        options.connect(),
    )
    .await;
    let mut connection = match attempt {
        Err(_) => {
            return Err(Probe::Unreachable(format!(
                "did not answer within {FIRST_CONNECT_TIMEOUT_SECONDS} s"
            )))
        }
        Ok(Err(e)) => return Err(classify_connect_error(&e, options, &list.reference)),
        Ok(Ok(c)) => c,
    };
    let found = tokio::time::timeout(
        Duration::from_secs(FIRST_CONNECT_TIMEOUT_SECONDS),
        writable(&mut connection),
    )
    .await;
    let _ = connection.close().await;
    match found {
        Err(_) => Err(Probe::Unreachable(format!(
            "did not answer within {FIRST_CONNECT_TIMEOUT_SECONDS} s"
        ))),
        Ok(Err(e)) => Err(Probe::Unreachable(e.to_string())),
        Ok(Ok(found)) if list.accepts(access, &found) => Ok(()),
        Ok(Ok(found)) => {
            Err(found.map_or_else(|| Probe::Unreachable("unusable".into()), Probe::NotUsable))
        }
    }
}

/// `HOST:PORT`, or the socket directory.
fn address_of(options: &PgConnectOptions) -> String {
    match options.get_socket() {
        Some(socket) => socket.display().to_string(),
        None => format!("{}:{}", options.get_host(), options.get_port()),
    }
}

/// A failed connection attempt: a login, database or TLS configuration
/// fault ([`tls_fault`]) refuses; any other (a refused or timed-out TCP
/// connection, a connection cut) is an unreachable server.
fn classify_connect_error(e: &sqlx::Error, options: &PgConnectOptions, reference: &str) -> Probe {
    if let Some(fault) = tls_fault(e, options) {
        return Probe::Refused(fault);
    }
    let code = match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    };
    let target = address_of(options);
    let role = options.get_username();
    let database = options.get_database().unwrap_or(role);
    match code.as_deref() {
        Some(c) if c.starts_with("28") => Probe::Refused(DatabaseError::refused(
            codes::DATABASE_LOGIN,
            format!("PostgreSQL at {target} refused the login of role `{role}` ({c})"),
            format!(
                "check the role name and password in `{reference}`, and that pg_hba.conf lets the role connect from this host"
            ),
        )),
        Some("3D000") => Probe::Refused(DatabaseError::refused(
            codes::DATABASE_MISSING,
            format!("PostgreSQL at {target} has no database `{database}`"),
            format!("create the database, or correct the database name in `{reference}`"),
        )),
        _ if e.to_string().contains("unsupported startup parameter") => {
            Probe::Refused(DatabaseError::refused(
                codes::DATABASE_URL,
                format!("the server at {target} refused a startup setting: it is a pooler in transaction mode ({e})"),
                format!(
                    "set `database.poolingMode: transaction` in the runtime file (and no `options` in `{reference}`)"
                ),
            ))
        }
        _ => Probe::Unreachable(format!("cannot connect: {e}")),
    }
}

/// The generic next step of a TLS fault.
const TLS_NEXT: &str = "check the server's TLS settings and certificate, the host name in the URL and database.trustedRootCertificateRef";

/// A failed connection attempt that is a TLS configuration fault, not an
/// outage (`database.tls`, refused at once, never waited out): the server
/// does not accept TLS while the URL asks for it (`sslmode=require`), or
/// the handshake refused its certificate (an issuer no trusted root
/// vouches for, a name or address the certificate does not list, outside
/// its validity) or otherwise failed (every error rustls raises: no
/// network fault is one). The message names the server and the cause,
/// the next step what to change. `None` for any other error.
fn tls_fault(e: &sqlx::Error, options: &PgConnectOptions) -> Option<DatabaseError> {
    use rustls::CertificateError as Cert;
    let target = address_of(options);
    let host = options.get_host();
    let (cause, next) = match e {
        sqlx::Error::Tls(inner) if inner.to_string().contains("does not support TLS") => (
            format!("PostgreSQL at {target} does not accept TLS connections, and the URL asks for one (sslmode=require, taken as verify-full)"),
            "turn TLS on at the server (`ssl = on` with a certificate), or, for a loopback host or a Unix socket only, drop `sslmode` from the URL".to_owned(),
        ),
        sqlx::Error::Tls(inner) => (
            format!("TLS with PostgreSQL at {target} could not be set up: {inner}"),
            TLS_NEXT.to_owned(),
        ),
        sqlx::Error::Io(io) => {
            let tls = io.get_ref()?.downcast_ref::<rustls::Error>()?;
            match tls {
                rustls::Error::InvalidCertificate(Cert::UnknownIssuer) => (
                    format!("the certificate of PostgreSQL at {target} is not signed by a trusted root"),
                    "set database.trustedRootCertificateRef to the PEM of the root that signed the server's certificate (a private certificate authority), or give the server a certificate from a root in the system's store".to_owned(),
                ),
                rustls::Error::InvalidCertificate(
                    Cert::NotValidForName | Cert::NotValidForNameContext { .. },
                ) => (
                    format!("the certificate of PostgreSQL at {target} is not valid for `{host}`, the host in the URL"),
                    format!("write a host name (or address) into the URL that the server's certificate lists in its subjectAltName, or reissue the certificate for `{host}`"),
                ),
                rustls::Error::InvalidCertificate(
                    Cert::Expired
                    | Cert::ExpiredContext { .. }
                    | Cert::NotValidYet
                    | Cert::NotValidYetContext { .. },
                ) => (
                    format!("the certificate of PostgreSQL at {target} is outside its validity ({tls})"),
                    "renew the server's certificate (and check this host's clock)".to_owned(),
                ),
                other => (
                    format!("the TLS handshake with PostgreSQL at {target} failed: {other}"),
                    TLS_NEXT.to_owned(),
                ),
            }
        }
        _ => return None,
    };
    Some(DatabaseError::refused(codes::DATABASE_TLS, cause, next))
}

/// Refuses (`database.tls`) a private root certificate
/// (`database.trustedRootCertificateRef`, named `reference`) that holds no
/// PEM certificate, or a PEM block that does not read: otherwise every
/// connection would fail its handshake (an unknown issuer) and look like
/// an outage.
///
/// # Errors
/// `database.tls`.
pub fn check_trusted_root(pem: &[u8], reference: &SecretRef) -> Result<(), DatabaseError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let refuse = |why: &str| {
        DatabaseError::refused(
            codes::DATABASE_TLS,
            format!(
                "`{}` (database.trustedRootCertificateRef) {why}",
                reference.0
            ),
            "write the PEM of the root certificate that signed the database server's certificate (`-----BEGIN CERTIFICATE-----` ...) into that secret, or remove trustedRootCertificateRef to use the system's roots",
        )
    };
    let mut found = 0;
    for certificate in CertificateDer::pem_slice_iter(pem) {
        if certificate.is_err() {
            return Err(refuse("holds a PEM block that does not read"));
        }
        found += 1;
    }
    if found == 0 {
        return Err(refuse(if pem.iter().all(u8::is_ascii_whitespace) {
            "is empty"
        } else {
            "holds no PEM certificate"
        }));
    }
    Ok(())
}

/// `url` without its `target_session_attrs` query parameter, and that
/// parameter's value; `None` when the `url` crate cannot read it.
fn without_target_session_attrs(url: &str) -> Option<(String, Option<String>)> {
    let mut parsed = url::Url::parse(url).ok()?;
    let mut attrs = None;
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter_map(|(k, v)| {
            if k == "target_session_attrs" {
                attrs = Some(v.into_owned());
                None
            } else {
                Some((k.into_owned(), v.into_owned()))
            }
        })
        .collect();
    if attrs.is_none() {
        return Some((url.to_owned(), None));
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Some((parsed.to_string(), attrs))
}

/// SPEC §8's TLS rule for one server (see [`ServerList::parse`]).
fn tls_rule(
    options: PgConnectOptions,
    reference: &str,
    trusted_root_pem: Option<&[u8]>,
) -> Result<PgConnectOptions, DatabaseError> {
    // A Unix socket (a host that is a directory path), or a loopback host
    // by the one rule (`coordinator_runtime::net::is_loopback_host`).
    let host = options.get_host();
    let local = options.get_socket().is_some() || host.starts_with('/') || is_loopback_host(host);
    let options = match options.get_ssl_mode() {
        PgSslMode::Require | PgSslMode::VerifyCa | PgSslMode::VerifyFull => {
            options.ssl_mode(PgSslMode::VerifyFull)
        }
        _ if local => options,
        _ => {
            return Err(DatabaseError::refused(
                codes::DATABASE_INSECURE_URL,
                format!(
                "`{reference}` allows a plaintext connection to `{}`, which is not a loopback host",
                options.get_host()
            ),
                "add `sslmode=require` to the URL (the certificate is then verified)",
            ))
        }
    };
    Ok(match trusted_root_pem {
        Some(pem) => options.ssl_root_cert_from_pem(pem.to_vec()),
        None => options,
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn r() -> SecretRef {
        SecretRef("secret:file/runtime-database-url".into())
    }

    fn parse(url: &str) -> Result<ServerList, DatabaseError> {
        ServerList::parse(url, &r(), None, PoolingMode::Session)
    }

    #[test]
    fn tls_rule_of_spec_8() {
        let remote = parse("postgres://u:p@db.example.org/x?sslmode=require").expect("require");
        assert!(matches!(
            remote.options(0).map(PgConnectOptions::get_ssl_mode),
            Some(PgSslMode::VerifyFull)
        ));
        for plain in [
            "postgres://u:p@db.example.org/x",
            "postgres://u:p@db.example.org/x?sslmode=prefer",
            "postgres://u:p@10.0.0.1/x?sslmode=disable",
            // One remote host in a list is enough to refuse it.
            "postgres://u:p@127.0.0.1:5432,db.example.org:5432/x",
        ] {
            let e = parse(plain).expect_err(plain);
            assert_eq!(e.code, "database.insecure-url");
            assert!(!e.message.contains(":p@"), "{}", e.message);
        }
        for local in [
            "postgres://u:p@127.0.0.1:5432/x",
            "postgres://u:p@localhost/x?sslmode=disable",
            "postgres://u:p@[::1]:5432/x",
            "postgres://u:p@%2Frun%2Fpostgresql/x",
            // Other spellings of a loopback address (the one rule,
            // `coordinator_runtime::net::is_loopback_host`).
            "postgres://u:p@127.1:5432/x",
            "postgres://u:p@[::ffff:127.0.0.1]:5432/x",
            "postgres://u:p@LOCALHOST/x",
        ] {
            parse(local).expect(local);
        }
        let e = parse("not a url: hunter2").expect_err("bad");
        assert_eq!(e.code, "database.url");
        assert!(!e.message.contains("hunter2"));
    }

    #[test]
    fn urls_the_service_cannot_read_are_refused_without_quoting_them() {
        for (url, why) in [
            ("mysql://u:p@127.0.0.1:3306/db", "its scheme is not"),
            ("https://u:p@127.0.0.1/db", "its scheme is not"),
            ("postgres://u:p@127.0.0.1:70000/db", "invalid port number"),
            ("postgres://u:p@127.0.0.1:0/db", "its port is 0"),
            ("postgres://u:p@[::1/db", "does not parse as a URL"),
            (
                "postgres://u:hunter2@TOPSECRET/yy@127.0.0.1:5432/db",
                "not one database name",
            ),
            (
                "postgres://u:p@127.0.0.1:5432,127.0.0.1:99999/db",
                "(server 2 of 2)",
            ),
        ] {
            let e = parse(url).expect_err(url);
            assert_eq!(e.code, "database.url", "{url}: {e:?}");
            assert!(e.message.contains(why), "{url}: {}", e.message);
            assert!(
                !e.message.contains("TOPSECRET") && !e.message.contains(":p@"),
                "{}",
                e.message
            );
        }
        let transaction = ServerList::parse(
            "postgres://u:p@127.0.0.1:6432/db?options=-c%20search_path%3Dx",
            &r(),
            None,
            PoolingMode::Transaction,
        )
        .expect_err("options under transaction pooling");
        assert!(
            transaction.message.contains("poolingMode: transaction"),
            "{}",
            transaction.message
        );
        assert!(parse("postgres://u:p@127.0.0.1:5432/db?options=-c%20x%3Dy").is_ok());
        assert!(parse("postgresql://u:p@127.0.0.1/db").is_ok());
        assert!(parse("postgres:///db?host=/var/run/postgresql").is_ok());
    }

    #[test]
    fn libpq_host_lists_give_one_server_each_in_order() {
        let list = parse(
            "postgres://u:p%40ss@db1.example.org:5433,db2.example.org,[2001:db8::1]:5434/coord?sslmode=verify-full&target_session_attrs=read-write&application_name=x",
        )
        .expect("list");
        assert_eq!(list.len(), 3);
        assert_eq!(list.target(), TargetSessionAttrs::ReadWrite);
        assert_eq!(list.address(0), "db1.example.org:5433");
        assert_eq!(list.address(1), "db2.example.org:5432");
        assert_eq!(list.address(2), "[2001:db8::1]:5434");
        for i in 0..3 {
            let o = list.options(i).expect("server");
            assert_eq!(o.get_username(), "u");
            assert_eq!(o.get_database(), Some("coord"));
            assert!(matches!(o.get_ssl_mode(), PgSslMode::VerifyFull));
        }
        let any = parse("postgres://u:p@127.0.0.1:1,127.0.0.1:2/x?target_session_attrs=any")
            .expect("any");
        assert_eq!(any.target(), TargetSessionAttrs::Any);
        assert_eq!(
            parse("postgres://u:p@127.0.0.1/x?target_session_attrs=primary")
                .expect("primary")
                .target(),
            TargetSessionAttrs::ReadWrite
        );
        assert_eq!(
            parse("postgres://u:p@127.0.0.1/x").expect("plain").target(),
            TargetSessionAttrs::Any
        );
        for bad in [
            "postgres://u:hunter2@127.0.0.1:1,,127.0.0.1:2/x",
            "postgres://u:hunter2@127.0.0.1:1,/x",
            "postgres://u:hunter2@127.0.0.1/x?target_session_attrs=standby",
            "postgres://u:hunter2@127.0.0.1:1,127.0.0.1:port/x",
        ] {
            let e = parse(bad).expect_err(bad);
            assert_eq!(e.code, "database.url", "{bad}");
            assert!(!e.message.contains("hunter2"), "{}", e.message);
        }
    }

    #[test]
    fn a_reader_takes_a_read_only_server_only_when_the_url_says_any() {
        let any = parse("postgres://u:p@127.0.0.1/x").expect("any");
        let rw = parse("postgres://u:p@127.0.0.1/x?target_session_attrs=read-write").expect("rw");
        let standby = Some(NotUsable::InRecovery);
        assert!(any.accepts(Access::Read, &standby));
        assert!(!any.accepts(Access::Write, &standby));
        assert!(!rw.accepts(Access::Read, &standby));
        assert!(rw.accepts(Access::Write, &None));
    }

    #[test]
    fn transaction_pooling_keeps_no_statement_and_sends_no_setting() {
        let list = ServerList::parse(
            "postgres://u:p@127.0.0.1/x",
            &r(),
            None,
            PoolingMode::Transaction,
        )
        .expect("parse");
        let debug = format!("{:?}", list.options(0).expect("server"));
        assert!(debug.contains("statement_cache_capacity: 0"), "{debug}");
        assert!(debug.contains("extra_float_digits: None"), "{debug}");
    }
}
