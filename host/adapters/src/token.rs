//! Access tokens for product calls (SPEC §6 "Token acquisition"): for each
//! attempt, a fresh token from the connection's `tokenEndpoint` by OAuth 2.0
//! client credentials, authenticated with a `private_key_jwt` client
//! assertion (RFC 7523 §2.2, OpenID Connect Core §9) signed with the
//! connection's private JWK.
//!
//! Secrets (the JWK) are read through [`SecretSource`], so tests pass keys in
//! memory ([`MemorySecrets`]) and the service reads the runtime file's
//! providers ([`ProviderSecrets`]). Neither a key nor a token is ever logged,
//! formatted by `Debug`, or put into an error.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::Header;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use super::jwk::{signing_key, JwkError};
use coordinator_runtime::config::{Authorization, SecretProviders, SecretRef};

/// Lifetime of a client assertion, in seconds (`exp` - `iat`).
pub const ASSERTION_LIFETIME_SECONDS: u64 = 60;
/// RFC 7523 §2.2 `client_assertion_type`.
pub const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Why a secret could not be read. Names the reference, never the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretError(pub String);

impl std::fmt::Display for SecretError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SecretError {}

/// Where secret references (`secret:file/<name>`, `secret:env/<NAME>`)
/// resolve to bytes.
pub trait SecretSource: Send + Sync {
    /// The secret's bytes. Errors name the reference only.
    fn read(&self, reference: &SecretRef) -> Result<Vec<u8>, SecretError>;
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
    fn read(&self, reference: &SecretRef) -> Result<Vec<u8>, SecretError> {
        self.values
            .get(&reference.0)
            .cloned()
            .ok_or_else(|| SecretError(format!("no secret for `{}`", reference.0)))
    }
}

/// The runtime file's `secretProviders` (SPEC §9): `secret:file/<name>` is
/// the file `<root>/<name>`, which must not be readable by group or others;
/// `secret:env/<NAME>` is an environment variable, only when the environment
/// provider is enabled.
#[derive(Clone, Debug)]
pub struct ProviderSecrets {
    file_root: Option<PathBuf>,
    environment: bool,
}

impl ProviderSecrets {
    /// The providers a runtime file enables.
    pub fn new(providers: &SecretProviders) -> Self {
        ProviderSecrets {
            file_root: providers.file.as_ref().map(|f| PathBuf::from(&f.root)),
            environment: providers.environment.is_some(),
        }
    }
}

impl SecretSource for ProviderSecrets {
    fn read(&self, reference: &SecretRef) -> Result<Vec<u8>, SecretError> {
        let r = &reference.0;
        if let Some(name) = r.strip_prefix("secret:file/") {
            let root = self
                .file_root
                .as_ref()
                .ok_or_else(|| SecretError(format!("`{r}`: no file provider")))?;
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(SecretError(format!("`{r}`: not a file name")));
            }
            let path = root.join(name);
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let meta = std::fs::metadata(&path)
                    .map_err(|e| SecretError(format!("`{r}`: {}", e.kind())))?;
                if meta.permissions().mode() & 0o077 != 0 {
                    return Err(SecretError(format!(
                        "`{r}`: the file is readable by group or others (chmod 600)"
                    )));
                }
            }
            std::fs::read(&path).map_err(|e| SecretError(format!("`{r}`: {}", e.kind())))
        } else if let Some(name) = r.strip_prefix("secret:env/") {
            if !self.environment {
                return Err(SecretError(format!("`{r}`: no environment provider")));
            }
            std::env::var_os(name)
                .map(|v| v.into_encoded_bytes())
                .ok_or_else(|| SecretError(format!("`{r}`: the variable is not set")))
        } else {
            Err(SecretError(format!("`{r}` is not a secret reference")))
        }
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
    /// The signing key could not be read.
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
    signing_key(&jwk).map(|_| ()).map_err(TokenError::Key)
}

impl TokenClient {
    /// A token client over `http` (which must not follow redirects) reading
    /// signing keys from `secrets`.
    pub fn new(http: reqwest::Client, secrets: std::sync::Arc<dyn SecretSource>) -> Self {
        TokenClient {
            http,
            secrets,
            random: SystemRandom::new(),
        }
    }

    /// Signs a fresh client assertion for `auth` (RFC 7523: iss = sub =
    /// `clientId`, aud = `tokenEndpoint`, random `jti`, `exp` 60 s after
    /// `iat`; RS256, ES256 or EdDSA by key type; `kid` from the JWK).
    pub fn assertion(&self, auth: &Authorization) -> Result<String, TokenError> {
        let jwk = self
            .secrets
            .read(&auth.signing_key_ref)
            .map_err(TokenError::Secret)?;
        let key = signing_key(&jwk).map_err(TokenError::Key)?;
        let mut jti = [0u8; 16];
        self.random
            .fill(&mut jti)
            .map_err(|_| TokenError::Unavailable("no randomness for `jti`".to_owned()))?;
        let iat = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
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
    use coordinator_runtime::config::{EnvironmentProvider, FileProvider};

    #[test]
    fn provider_secrets_read_owner_only_files_and_enabled_env() {
        let dir = tempfile::tempdir().unwrap();
        let providers = SecretProviders {
            file: Some(FileProvider {
                root: dir.path().display().to_string(),
            }),
            environment: None,
        };
        let secrets = ProviderSecrets::new(&providers);
        let path = dir.path().join("key");
        std::fs::write(&path, b"jwk").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(
                secrets.read(&SecretRef("secret:file/key".into())).unwrap(),
                b"jwk"
            );
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = secrets
                .read(&SecretRef("secret:file/key".into()))
                .unwrap_err();
            assert!(e.0.contains("group or others"), "{e}");
        }
        assert!(secrets
            .read(&SecretRef("secret:file/../key".into()))
            .is_err());
        assert!(secrets.read(&SecretRef("secret:env/HOME".into())).is_err());
        let with_env = ProviderSecrets::new(&SecretProviders {
            file: None,
            environment: Some(EnvironmentProvider {}),
        });
        assert!(with_env.read(&SecretRef("secret:env/PATH".into())).is_ok());
        assert!(with_env.read(&SecretRef("secret:file/key".into())).is_err());
    }

    #[test]
    fn access_tokens_do_not_print() {
        let t = AccessToken("s3cret".into());
        assert_eq!(format!("{t:?}"), "AccessToken(..)");
    }
}
