//! Caller authentication and authorisation (SPEC §8, seed 000 "Write the
//! runtime file"): RFC 9068 access tokens verified against the issuer's
//! JWKS, and policies keyed by `client_id`.
//!
//! Token rules: header `typ` is `at+jwt` (or `application/at+jwt`); `alg`
//! is RS256, ES256 or EdDSA (`none` and everything else refused); `kid`
//! names a key of the issuer's JWKS (fetched from a static file, a URI or
//! the discovery document, cached, and fetched again when a `kid` is
//! unknown, at most once per [`REFRESH_MIN_SECONDS`]); `iss` and `aud`
//! exact; `exp` and `iat` required (RFC 9068 §2.2), `exp` in the future,
//! `iat` not more than [`IAT_LEEWAY_SECONDS`] ahead, `nbf` (when present)
//! not in the future; `exp − iat` at most one hour; `sub` and `client_id`
//! present; no `crit` header (RFC 7515 §4.1.11: we implement no extension).
//! Token times (`exp`, `nbf`, `iat`) are checked against the verifier's
//! clock ([`Verifier::with_clock`]): in the service, the engine's clock,
//! aligned with the database's (docs/decisions.md "One time for every
//! process"), so a process whose wall clock is off neither refuses a valid
//! token nor accepts an expired one; jsonwebtoken's own checks, which read
//! the system clock, are off.
//!
//! A token that fails any rule is [`AuthError::Refused`] (401). When the
//! issuer's keys cannot be fetched (the discovery document or the JWKS does
//! not answer), that is [`AuthError::Unavailable`]: an outage of ours, 503
//! `service.unavailable`, never a 401.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coordinator_ports::clock::{Clock, SystemClock};

use coordinator_engine::Principal;
use coordinator_runtime::config::{Authentication, Jwks, Policy};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::verified_tokens::{TokenTimes, VerifiedTokens};

/// Longest accepted token lifetime, seconds (SPEC §8: one hour).
pub const MAX_LIFETIME_SECONDS: u64 = 3600;
/// Least time between two JWKS fetches caused by unknown `kid`s.
pub const REFRESH_MIN_SECONDS: u64 = 5;
/// Clock skew tolerated on `exp` and `nbf`, seconds.
pub const LEEWAY_SECONDS: u64 = 30;
/// How far `iat` may lie in the future (clock skew), seconds.
pub const IAT_LEEWAY_SECONDS: u64 = 60;

/// Why a token was not accepted. The reason is logged, never returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// The token breaks a rule: 401 `authentication.refused`.
    Refused(String),
    /// The issuer's keys could not be fetched (discovery or JWKS did not
    /// answer, or answered garbage): 503 `service.unavailable`.
    Unavailable(String),
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthError::Refused(m) => write!(f, "refused: {m}"),
            AuthError::Unavailable(m) => write!(f, "verifier unavailable: {m}"),
        }
    }
}

fn refused(m: impl Into<String>) -> AuthError {
    AuthError::Refused(m.into())
}

/// Where the verification keys come from.
#[derive(Clone, Debug)]
pub enum KeySource {
    /// A static JWKS (read from `jwks.file` at startup).
    Static(JwkSet),
    /// `jwks.uri`.
    Uri(String),
    /// The issuer's discovery document's `jwks_uri`.
    Discovery,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    client_id: String,
    exp: u64,
    iat: u64,
    /// Checked when present.
    #[serde(default)]
    nbf: Option<u64>,
    iss: String,
    /// RFC 9068 §2.2 requires it (absent: refused).
    #[serde(default)]
    jti: String,
}

/// Verifies caller tokens and answers policy questions.
pub struct Verifier {
    issuer: String,
    audience: String,
    source: KeySource,
    policies: BTreeMap<String, Policy>,
    http: reqwest::Client,
    cache: tokio::sync::Mutex<Option<JwkSet>>,
    /// Counts the key sets `cache` has held: a token verified against one
    /// is taken from `verified` only while it is still the one held.
    key_set_generation: AtomicU64,
    last_fetch: Mutex<Option<Instant>>,
    /// What token times are checked against.
    clock: Arc<dyn Clock>,
    /// The tokens verified already, until they expire.
    verified: VerifiedTokens,
}

/// What a policy says about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// The action is not granted (403).
    Denied,
    /// Granted; `operator` sees every run.
    Allowed {
        /// `operator: true`.
        operator: bool,
    },
}

impl Verifier {
    /// A verifier for `deployment.authentication`. A `jwks.file` must be
    /// read by the caller into [`KeySource::Static`].
    pub fn new(auth: &Authentication, source: KeySource) -> Verifier {
        Verifier {
            issuer: auth.issuer.clone(),
            audience: auth.audience.clone(),
            source,
            policies: auth.policies.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            cache: tokio::sync::Mutex::new(None),
            key_set_generation: AtomicU64::new(0),
            last_fetch: Mutex::new(None),
            clock: Arc::new(SystemClock),
            verified: VerifiedTokens::default(),
        }
    }

    /// Checks token times (`exp`, `nbf`, `iat`) against `clock` instead of
    /// the system clock: the service gives it the engine's clock.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Verifier {
        self.clock = clock;
        self
    }

    /// The key source a runtime file's `jwks` names (reading a file now).
    ///
    /// # Errors
    /// A JWKS file that cannot be read or parsed.
    pub fn source_for(auth: &Authentication) -> Result<KeySource, String> {
        match &auth.jwks {
            None => Ok(KeySource::Discovery),
            Some(Jwks::Uri(u)) => Ok(KeySource::Uri(u.clone())),
            Some(Jwks::File(path)) => {
                let bytes =
                    std::fs::read(path).map_err(|e| format!("jwks file {path}: {}", e.kind()))?;
                serde_json::from_slice(&bytes)
                    .map(KeySource::Static)
                    .map_err(|e| format!("jwks file {path}: {e}"))
            }
        }
    }

    /// Verifies `token` and returns its principal.
    ///
    /// A token verified before is answered from [`VerifiedTokens`] while
    /// its times pass `time_refusal` now and the issuer's key set is the
    /// one it was verified against; any other token is checked whole, and
    /// kept when it passes.
    ///
    /// # Errors
    /// [`AuthError`] for any refusal (the server answers 401).
    pub async fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let now = u64::try_from(self.clock.now_unix()).unwrap_or_default();
        let generation = self.key_set_generation.load(Ordering::Acquire);
        if let Some(principal) = self.verified.principal(token, generation, |times| {
            time_refusal(times, now).is_none()
        }) {
            return Ok(principal);
        }
        let (principal, times, generation) = self.verify_whole(token, now).await?;
        self.verified
            .keep(token, &principal, times, generation, |kept| {
                time_refusal(kept, now).is_some()
            });
        Ok(principal)
    }

    /// Every rule of the module's documentation, checked on `token` at
    /// `now`: its principal, its times and the key set generation its key
    /// was found in.
    async fn verify_whole(
        &self,
        token: &str,
        now: u64,
    ) -> Result<(Principal, TokenTimes, u64), AuthError> {
        let header = decode_header(token).map_err(|e| refused(format!("header: {e}")))?;
        let typ = header.typ.as_deref().unwrap_or("").to_ascii_lowercase();
        if typ != "at+jwt" && typ != "application/at+jwt" {
            return Err(refused("typ is not at+jwt"));
        }
        if names_critical_extensions(token) {
            return Err(refused("crit header: no extension is implemented"));
        }
        if !matches!(
            header.alg,
            Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA
        ) {
            return Err(refused(format!("alg {:?} refused", header.alg)));
        }
        let kid = header.kid.ok_or_else(|| refused("no kid"))?;
        let (key, generation) = self.key_for(&kid).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Times are checked below against this verifier's clock, not
        // jsonwebtoken's reading of the system clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        let data = decode::<Claims>(token, &key, &validation)
            .map_err(|e| refused(format!("claims: {e}")))?;
        let c = data.claims;
        let times = TokenTimes {
            expires: c.exp,
            not_before: c.nbf,
            issued: c.iat,
        };
        if let Some(reason) = time_refusal(&times, now) {
            return Err(refused(reason));
        }
        let lifetime = c.exp.saturating_sub(c.iat);
        if lifetime > MAX_LIFETIME_SECONDS {
            return Err(refused("lifetime over one hour"));
        }
        if c.client_id.is_empty() || c.sub.is_empty() {
            return Err(refused("empty sub or client_id"));
        }
        if c.jti.is_empty() {
            return Err(refused("no jti (RFC 9068 §2.2)"));
        }
        let principal = Principal {
            iss: c.iss,
            sub: c.sub,
            client_id: c.client_id,
        };
        Ok((principal, times, generation))
    }

    /// How many verified tokens this verifier keeps now
    /// ([`VerifiedTokens`]).
    pub fn verified_tokens_kept(&self) -> usize {
        self.verified.len()
    }

    /// Whether `principal`'s policy grants `action`, for `workflow` when
    /// given (run actions), or at all (listing).
    pub fn grant(&self, principal: &Principal, action: &str, workflow: Option<&str>) -> Grant {
        let Some(policy) = self.policies.get(&principal.client_id) else {
            return Grant::Denied;
        };
        if !policy.actions.iter().any(|a| a == action) {
            return Grant::Denied;
        }
        let in_scope = match (workflow, &policy.workflows) {
            (Some(w), Some(ws)) => ws.iter().any(|x| x == w),
            _ => true,
        };
        if in_scope {
            Grant::Allowed {
                operator: policy.operator,
            }
        } else {
            Grant::Denied
        }
    }

    /// The workflows `principal`'s policy scopes its run actions to
    /// (`None`: every workflow).
    pub fn scope(&self, principal: &Principal) -> Option<Vec<String>> {
        self.policies
            .get(&principal.client_id)
            .and_then(|p| p.workflows.clone())
    }

    /// The key `kid` names and the generation of the key set it was found
    /// in (read under the key set's lock, so a key set fetched meanwhile
    /// has another).
    async fn key_for(&self, kid: &str) -> Result<(DecodingKey, u64), AuthError> {
        let mut cache = self.cache.lock().await;
        let generation = self.key_set_generation.load(Ordering::Acquire);
        if let Some(k) = cache.as_ref().and_then(|s| find(s, kid)) {
            return k.map(|k| (k, generation));
        }
        if let KeySource::Static(set) = &self.source {
            return find(set, kid)
                .unwrap_or_else(|| Err(refused("unknown kid")))
                .map(|k| (k, generation));
        }
        let may_fetch = {
            let mut last = self
                .last_fetch
                .lock()
                .map_err(|_| AuthError::Unavailable("poisoned".into()))?;
            let ok = cache.is_none()
                || last.is_none_or(|t| t.elapsed() >= Duration::from_secs(REFRESH_MIN_SECONDS));
            if ok {
                *last = Some(Instant::now());
            }
            ok
        };
        if !may_fetch {
            return Err(refused("unknown kid (refresh rate-limited)"));
        }
        let set = self.fetch().await?;
        let found = find(&set, kid);
        *cache = Some(set);
        let generation = self.key_set_generation.fetch_add(1, Ordering::AcqRel) + 1;
        found
            .unwrap_or_else(|| Err(refused("unknown kid")))
            .map(|k| (k, generation))
    }

    async fn fetch(&self) -> Result<JwkSet, AuthError> {
        let uri = match &self.source {
            KeySource::Uri(u) => u.clone(),
            KeySource::Discovery => {
                let url = format!(
                    "{}/.well-known/openid-configuration",
                    self.issuer.trim_end_matches('/')
                );
                let doc: serde_json::Value = self.get_json(&url).await?;
                doc.get("jwks_uri")
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| AuthError::Unavailable("discovery has no jwks_uri".into()))?
                    .to_owned()
            }
            KeySource::Static(s) => return Ok(s.clone()),
        };
        let set = self.get_json(&uri).await?;
        serde_json::from_value(set).map_err(|e| AuthError::Unavailable(format!("jwks: {e}")))
    }

    async fn get_json(&self, url: &str) -> Result<serde_json::Value, AuthError> {
        let r = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| AuthError::Unavailable(format!("fetch {url}: {e}")))?;
        if !r.status().is_success() {
            return Err(AuthError::Unavailable(format!(
                "fetch {url}: {}",
                r.status()
            )));
        }
        let bytes = r
            .bytes()
            .await
            .map_err(|e| AuthError::Unavailable(format!("fetch {url}: {e}")))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| AuthError::Unavailable(format!("fetch {url}: {e}")))
    }
}

/// Why `times` refuse a token at `now` (Unix seconds), if they do: `exp`
/// passed by more than [`LEEWAY_SECONDS`], `nbf` more than
/// [`LEEWAY_SECONDS`] ahead, `iat` more than [`IAT_LEEWAY_SECONDS`] ahead.
/// The one home of the time rules: a whole check and a kept token's reuse
/// both ask it.
fn time_refusal(times: &TokenTimes, now: u64) -> Option<&'static str> {
    if times.expires.saturating_add(LEEWAY_SECONDS) < now {
        return Some("expired");
    }
    if times
        .not_before
        .is_some_and(|nbf| nbf > now.saturating_add(LEEWAY_SECONDS))
    {
        return Some("nbf in the future");
    }
    if times.issued > now.saturating_add(IAT_LEEWAY_SECONDS) {
        return Some("iat in the future");
    }
    None
}

fn find(set: &JwkSet, kid: &str) -> Option<Result<DecodingKey, AuthError>> {
    set.find(kid)
        .map(|jwk| DecodingKey::from_jwk(jwk).map_err(|e| refused(format!("jwk: {e}"))))
}

/// Whether the token's protected header has a `crit` member (RFC 7515
/// §4.1.11: a recipient that does not implement every extension it names
/// must refuse the token; we implement none). An unreadable header counts
/// as naming one.
fn names_critical_extensions(token: &str) -> bool {
    use base64::Engine as _;
    let Some(segment) = token.split('.').next() else {
        return true;
    };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(segment) else {
        return true;
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(header) => header.get("crit").is_some(),
        Err(_) => true,
    }
}
