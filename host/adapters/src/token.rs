//! Access tokens for product calls (SPEC §6 "Token acquisition"): for each
//! attempt, a fresh token from the connection's `tokenEndpoint` by OAuth 2.0
//! client credentials, authenticated with a `private_key_jwt` client
//! assertion (RFC 7523 §2.2, OpenID Connect Core §9) signed with the
//! connection's private JWK.
//!
//! Secrets (the JWK) are read through [`SecretSource`], the port through
//! which an adapter obtains key bytes: tests pass keys in memory
//! ([`MemorySecrets`]), and the service passes the runtime file's one
//! reader, [`SecretResolver`] (`coordinator_runtime::secrets`: no symbolic
//! link, a regular owner-only file of this process's user, at most
//! [`coordinator_runtime::secrets::MAX_SECRET_BYTES`]), whose
//! [`SecretError`] codes every refusal. Neither a key nor a token is ever
//! logged, formatted by `Debug`, or put into an error.

use std::collections::HashMap;
use std::time::Duration;

use jsonwebtoken::Header;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use super::jwk::{signing_key, JwkError};
use coordinator_runtime::clock::{Clock, SystemClock};
use coordinator_runtime::config::{Authorization, SecretRef};
use coordinator_runtime::secrets::{Secret, SecretError, SecretResolver};

/// Lifetime of a client assertion, in seconds (`exp` - `iat`).
pub const ASSERTION_LIFETIME_SECONDS: u64 = 60;
/// RFC 7523 §2.2 `client_assertion_type`.
pub const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Where secret references (`secret:file/<name>`, `secret:env/<NAME>`)
/// resolve to bytes. The production implementation is
/// [`SecretResolver`], the runtime file's one reader of secrets.
pub trait SecretSource: Send + Sync {
    /// The secret's bytes.
    ///
    /// # Errors
    /// A [`SecretError`] naming the reference only, never the value
    /// (`secret.unavailable`, `secret.not-regular-file`,
    /// `secret.permissions`, `secret.owner`, ...).
    fn read(&self, reference: &SecretRef) -> Result<Secret, SecretError>;
}

/// The runtime file's providers, through the one reader of secrets
/// (`coordinator_runtime::secrets`).
impl SecretSource for SecretResolver {
    fn read(&self, reference: &SecretRef) -> Result<Secret, SecretError> {
        self.resolve(reference)
    }
}

/// Secrets held in memory, by reference string (tests).
#[derive(Clone, Default)]
pub struct MemorySecrets {
    values: HashMap<String, Vec<u8>>,
}

impl MemorySecrets {
    /// An empty source.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the secret behind `reference` (e.g.
    /// `secret:file/applications-client-key`).
    pub fn insert(&mut self, reference: &str, value: impl Into<Vec<u8>>) -> &mut Self {
        self.values.insert(reference.to_owned(), value.into());
        self
    }
}

impl std::fmt::Debug for MemorySecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySecrets")
            .field("references", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SecretSource for MemorySecrets {
    /// The value inserted for `reference`; [`SecretError::Unavailable`]
    /// when there is none.
    fn read(&self, reference: &SecretRef) -> Result<Secret, SecretError> {
        self.values
            .get(&reference.0)
            .map(|v| Secret::from(v.clone()))
            .ok_or_else(|| SecretError::Unavailable {
                reference: reference.0.clone(),
                reason: "no such secret in memory".into(),
            })
    }
}

/// A bearer access token. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(String);

impl AccessToken {
    /// The token, for the `Authorization: Bearer` header only.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

/// Why no token was obtained. Nothing was sent to the product in any case.
#[derive(Debug)]
pub enum TokenError {
    /// The signing key could not be read, or its file is unsafe (the
    /// secret's own code: [`SecretError::code`]).
    Secret(SecretError),
    /// The signing key is not a usable private JWK.
    Key(JwkError),
    /// The token endpoint answered 4xx (the client or assertion refused).
    Refused {
        /// The HTTP status.
        status: u16,
        /// The OAuth `error` code, when the body had one.
        error: Option<String>,
    },
    /// The token endpoint was unreachable, timed out, answered 5xx, or
    /// answered without an `access_token`.
    Unavailable(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Secret(e) => write!(f, "signing key unavailable: {e}"),
            TokenError::Key(e) => write!(f, "signing key unusable: {e}"),
            TokenError::Refused { status, error } => write!(
                f,
                "token endpoint refused the client ({status} {})",
                error.as_deref().unwrap_or("-")
            ),
            TokenError::Unavailable(m) => write!(f, "token endpoint unavailable: {m}"),
        }
    }
}

impl std::error::Error for TokenError {}

/// The client assertion's claims (RFC 7523 §3).
#[derive(Debug, Serialize, Deserialize)]
pub struct AssertionClaims {
    /// The client id.
    pub iss: String,
    /// The client id.
    pub sub: String,
    /// The token endpoint URL.
    pub aud: String,
    /// A fresh random id (32 hex digits).
    pub jti: String,
    /// Issued at, seconds since the epoch.
    pub iat: u64,
    /// `iat` + [`ASSERTION_LIFETIME_SECONDS`].
    pub exp: u64,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: Option<String>,
    error: Option<String>,
}

/// Obtains access tokens by client credentials with `private_key_jwt`.
#[derive(Clone)]
pub struct TokenClient {
    http: reqwest::Client,
    secrets: std::sync::Arc<dyn SecretSource>,
    random: SystemRandom,
    /// Stamps `iat` and `exp` of each assertion.
    clock: std::sync::Arc<dyn Clock>,
}

/// Reads `auth`'s signing key from `secrets` and checks that it is a usable
/// private JWK, without signing anything: the service's startup check, so a
/// missing, unsafe or malformed connection key refuses startup instead of
/// failing the first dispatch.
///
/// # Errors
/// [`TokenError::Secret`] when the key cannot be read (missing, not an
/// owner-only regular file), [`TokenError::Key`] when it is not a private
/// JWK of a supported type.
pub fn check_signing_key(
    secrets: &dyn SecretSource,
    auth: &Authorization,
) -> Result<(), TokenError> {
    let jwk = secrets
        .read(&auth.signing_key_ref)
        .map_err(TokenError::Secret)?;
    signing_key(jwk.bytes())
        .map(|_| ())
        .map_err(TokenError::Key)
}

impl TokenClient {
    /// A token client over `http` (which must not follow redirects) reading
    /// signing keys from `secrets`.
    pub fn new(http: reqwest::Client, secrets: std::sync::Arc<dyn SecretSource>) -> Self {
        TokenClient {
            http,
            secrets,
            random: SystemRandom::new(),
            clock: std::sync::Arc::new(SystemClock),
        }
    }

    /// This client, stamping assertions with `clock` instead of the
    /// operating system's.
    pub fn with_clock(mut self, clock: std::sync::Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Signs a fresh client assertion for `auth` (RFC 7523: iss = sub =
    /// `clientId`, aud = `tokenEndpoint`, random `jti`, `exp` 60 s after
    /// `iat`; RS256, ES256 or EdDSA by key type; `kid` from the JWK).
    pub fn assertion(&self, auth: &Authorization) -> Result<String, TokenError> {
        let jwk = self
            .secrets
            .read(&auth.signing_key_ref)
            .map_err(TokenError::Secret)?;
        let key = signing_key(jwk.bytes()).map_err(TokenError::Key)?;
        let mut jti = [0u8; 16];
        self.random
            .fill(&mut jti)
            .map_err(|_| TokenError::Unavailable("no randomness for `jti`".to_owned()))?;
        // Before 1970 only on a broken clock: stamped 0 then.
        let iat = u64::try_from(self.clock.now_unix()).unwrap_or_default();
        let claims = AssertionClaims {
            iss: auth.client_id.clone(),
            sub: auth.client_id.clone(),
            aud: auth.token_endpoint.clone(),
            jti: hex::encode(jti),
            iat,
            exp: iat + ASSERTION_LIFETIME_SECONDS,
        };
        let mut header = Header::new(key.algorithm);
        header.kid = key.kid.clone();
        jsonwebtoken::encode(&header, &claims, &key.key)
            .map_err(|e| TokenError::Key(JwkError(format!("cannot sign: {e}"))))
    }

    /// Requests one access token for `auth` (`grant_type=client_credentials`,
    /// the assertion, `scope` = the scopes joined by spaces when any,
    /// `resource` when set), within `timeout`.
    pub async fn acquire(
        &self,
        auth: &Authorization,
        timeout: Duration,
    ) -> Result<AccessToken, TokenError> {
        let assertion = self.assertion(auth)?;
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", "client_credentials"),
            ("client_id", &auth.client_id),
            ("client_assertion_type", JWT_BEARER_ASSERTION),
            ("client_assertion", &assertion),
        ];
        let scope = auth.scopes.join(" ");
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        if let Some(resource) = &auth.resource {
            form.push(("resource", resource));
        }
        let response = self
            .http
            .post(&auth.token_endpoint)
            .header(reqwest::header::ACCEPT, "application/json")
            .form(&form)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| TokenError::Unavailable(transport_reason(&e)))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| TokenError::Unavailable(transport_reason(&e)))?;
        let parsed: Option<TokenResponse> = serde_json::from_slice(&body).ok();
        match status {
            200 => parsed
                .and_then(|p| p.access_token)
                .filter(|t| !t.is_empty())
                .map(AccessToken)
                .ok_or_else(|| TokenError::Unavailable("no `access_token` in the answer".into())),
            400..=499 => Err(TokenError::Refused {
                status,
                error: parsed.and_then(|p| p.error),
            }),
            _ => Err(TokenError::Unavailable(format!("status {status}"))),
        }
    }
}

/// A transport error's kind, without URLs or bodies.
pub(crate) fn transport_reason(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timeout".to_owned()
    } else if e.is_connect() {
        "connect".to_owned()
    } else {
        "transport".to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use coordinator_runtime::config::{FileProvider, SecretProviders};

    /// The service's source is the runtime file's one reader: a connection
    /// key that is a symbolic link, readable by group or others, or owned by
    /// another user is refused with the secret's own code, as every secret
    /// is (a second reader once followed links and skipped the owner).
    #[test]
    fn the_service_reads_signing_keys_through_the_one_secret_reader() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let providers = SecretProviders {
            file: Some(FileProvider {
                root: dir.path().display().to_string(),
            }),
            environment: None,
        };
        let secrets = SecretResolver::new(&providers);
        let write = |name: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"jwk").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path
        };
        let code = |name: &str| {
            SecretSource::read(&secrets, &SecretRef(format!("secret:file/{name}")))
                .map(|s| s.bytes().to_vec())
                .map_err(|e| e.code())
        };
        let key = write("key", 0o600);
        assert_eq!(code("key"), Ok(b"jwk".to_vec()));
        write("group", 0o640);
        assert_eq!(code("group"), Err("secret.permissions"));
        std::os::unix::fs::symlink(&key, dir.path().join("link")).unwrap();
        assert_eq!(code("link"), Err("secret.not-regular-file"));
        assert_eq!(code("missing"), Err("secret.unavailable"));
        assert_eq!(code("../key"), Err("secret.reference"));
        assert_eq!(
            SecretSource::read(&secrets, &SecretRef("secret:env/PATH".into()))
                .map(|_| ())
                .map_err(|e| e.code()),
            Err("secret.provider-disabled")
        );
        // Owned by another user: only root can give a file away. Tests run
        // as root in CI; elsewhere this one sub-case cannot be set up.
        let me = std::fs::metadata("/proc/self").map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid()
        });
        if me.is_ok_and(|uid| uid == 0) {
            let theirs = write("theirs", 0o600);
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            assert_eq!(code("theirs"), Err("secret.owner"));
        }
    }

    #[test]
    fn memory_secrets_answer_unavailable_for_an_unknown_reference() {
        let mut secrets = MemorySecrets::new();
        secrets.insert("secret:file/k", b"v".to_vec());
        let r = |s: &str| SecretRef(s.into());
        assert_eq!(secrets.read(&r("secret:file/k")).unwrap().bytes(), b"v");
        assert_eq!(
            secrets
                .read(&r("secret:file/x"))
                .map(|_| ())
                .map_err(|e| e.code()),
            Err("secret.unavailable")
        );
    }

    #[test]
    fn access_tokens_do_not_print() {
        let t = AccessToken("s3cret".into());
        assert_eq!(format!("{t:?}"), "AccessToken(..)");
    }
}
