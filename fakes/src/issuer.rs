//! A fake OpenID Connect issuer: discovery, JWKS, a token endpoint that
//! accepts client credentials with `private_key_jwt` assertions (RFC 7523),
//! and minting of caller access tokens (RFC 9068), good and deliberately
//! broken.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{decode, decode_header, encode, Algorithm, DecodingKey, Header, Validation};
use serde_json::{json, Value};

use crate::keys::{KeyKind, TestKey};
use crate::server::{serve, Fake, Running, TokenCheck};

/// `client_assertion_type` for JWT assertions (RFC 7523 §2.2).
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// The audience of access tokens issued to product clients without a
/// `resource`.
pub const PRODUCTS_AUDIENCE: &str = "urn:registry:products";

/// One request to the token endpoint and what the issuer made of it.
#[derive(Clone, Debug)]
pub struct TokenRequest {
    /// The client id (from the assertion's `iss`).
    pub client_id: Option<String>,
    /// The `scope` form parameter.
    pub scope: Option<String>,
    /// The `resource` form parameter.
    pub resource: Option<String>,
    /// The assertion's claims (unverified when the request was refused).
    pub assertion_claims: Value,
    /// The assertion's header `alg`.
    pub assertion_alg: Option<String>,
    /// `Ok(())` when a token was issued, else the reason.
    pub outcome: Result<(), String>,
}

/// What a broken caller token gets wrong (acceptance: each refused 401).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flaw {
    /// `exp` an hour in the past.
    Expired,
    /// `typ: JWT` instead of `at+jwt`.
    WrongTyp,
    /// An `iss` other than the issuer.
    WrongIssuer,
    /// An `aud` other than the one asked for.
    WrongAudience,
    /// Signed with a key the JWKS does not publish.
    UnknownKid,
    /// `alg: none`, no signature.
    AlgNone,
    /// No `iat` claim (RFC 9068 §2.2 requires it).
    NoIat,
    /// No `jti` claim (RFC 9068 §2.2 requires it).
    NoJti,
    /// `nbf` ten minutes ahead.
    FutureNbf,
    /// `iat` ten minutes ahead.
    FutureIat,
    /// A `crit` header naming an extension (RFC 7515 §4.1.11).
    CritHeader,
}

/// What a caller access token says (RFC 9068).
#[derive(Clone, Debug)]
pub struct Mint {
    /// `sub`.
    pub subject: String,
    /// `client_id`.
    pub client_id: String,
    /// `aud`.
    pub audience: String,
    /// `exp` - `iat`, seconds.
    pub lifetime_seconds: u64,
    /// RS256 or ES256.
    pub kind: KeyKind,
    /// A deliberate defect, or none.
    pub flaw: Option<Flaw>,
}

impl Mint {
    /// A valid ES256 token for `client_id` (also the `sub`) and `audience`,
    /// valid for 5 minutes.
    pub fn new(client_id: &str, audience: &str) -> Mint {
        Mint {
            subject: client_id.to_owned(),
            client_id: client_id.to_owned(),
            audience: audience.to_owned(),
            lifetime_seconds: 300,
            kind: KeyKind::Es256,
            flaw: None,
        }
    }
}

struct Client {
    public_jwk: Value,
    scopes: Option<Vec<String>>,
}

struct Inner {
    issuer: String,
    clients: HashMap<String, Client>,
    requests: Vec<TokenRequest>,
    issued: HashSet<String>,
    seen_jti: HashSet<String>,
}

struct Shared {
    inner: Mutex<Inner>,
    rsa: TestKey,
    ec: TestKey,
    stray: TestKey,
}

/// A running fake issuer. The issuer identifier is its base URL.
#[derive(Clone)]
pub struct FakeIssuer {
    running: Running,
    fake: Fake,
    shared: Arc<Shared>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl FakeIssuer {
    /// Starts an issuer on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<FakeIssuer> {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                issuer: String::new(),
                clients: HashMap::new(),
                requests: Vec::new(),
                issued: HashSet::new(),
                seen_jti: HashSet::new(),
            }),
            rsa: TestKey::issuer_rsa("issuer-rs256"),
            ec: TestKey::generate(KeyKind::Es256, "issuer-es256"),
            stray: TestKey::generate(KeyKind::Es256, "issuer-unpublished"),
        });
        let router = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/token", post(token))
            .with_state(shared.clone());
        let fake = Fake::default();
        let running = serve(router, &fake).await?;
        lock(&shared).issuer = running.base_url().to_owned();
        Ok(FakeIssuer {
            running,
            fake,
            shared,
        })
    }

    /// The issuer identifier (`iss`) and base URL.
    pub fn issuer(&self) -> &str {
        self.running.base_url()
    }

    /// The token endpoint URL.
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer())
    }

    /// The JWKS URL.
    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.issuer())
    }

    /// The recording and scripting handle (script `/token` to make the token
    /// endpoint misbehave).
    pub fn fake(&self) -> &Fake {
        &self.fake
    }

    /// Registers a client and its public JWK; `scopes`, when given, limits
    /// what it may ask for.
    pub fn register_client(&self, client_id: &str, public_jwk: Value, scopes: Option<Vec<String>>) {
        lock(&self.shared)
            .clients
            .insert(client_id.to_owned(), Client { public_jwk, scopes });
    }

    /// Every token request so far.
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        lock(&self.shared).requests.clone()
    }

    /// The token requests since the last call (or the start), forgotten
    /// here: the sandbox, which runs for hours and requests no list,
    /// counts them and keeps none. The tokens issued stay valid.
    pub fn take_token_requests(&self) -> Vec<TokenRequest> {
        std::mem::take(&mut lock(&self.shared).requests)
    }

    /// Whether `token` is an access token this issuer's token endpoint
    /// issued.
    pub fn issued(&self, token: &str) -> bool {
        lock(&self.shared).issued.contains(token)
    }

    /// A [`TokenCheck`] accepting exactly the tokens [`Self::issued`] knows,
    /// for [`Fake::require_bearer`] on product fakes.
    pub fn token_check(&self) -> TokenCheck {
        let shared = self.shared.clone();
        Arc::new(move |t: &str| lock(&shared).issued.contains(t))
    }

    /// Mints a caller access token (RFC 9068: `typ: at+jwt`, iss, aud, sub,
    /// client_id, exp, iat, jti), with `spec.flaw` when asked.
    pub fn mint(&self, spec: &Mint) -> String {
        let t = now();
        let issuer = self.issuer().to_owned();
        let mut claims = json!({
            "iss": issuer,
            "aud": spec.audience,
            "sub": spec.subject,
            "client_id": spec.client_id,
            "iat": t,
            "exp": t + spec.lifetime_seconds,
            "jti": uuid::Uuid::new_v4().to_string(),
        });
        let mut typ = "at+jwt";
        let mut key = match spec.kind {
            KeyKind::Rs256 => &self.shared.rsa,
            _ => &self.shared.ec,
        };
        match spec.flaw {
            None => {}
            Some(Flaw::Expired) => {
                claims["iat"] = json!(t - 7200);
                claims["exp"] = json!(t - 3600);
            }
            Some(Flaw::WrongTyp) => typ = "JWT",
            Some(Flaw::WrongIssuer) => claims["iss"] = json!(format!("{issuer}/other")),
            Some(Flaw::WrongAudience) => claims["aud"] = json!("some-other-audience"),
            Some(Flaw::UnknownKid) => key = &self.shared.stray,
            Some(Flaw::NoIat) => {
                if let Some(o) = claims.as_object_mut() {
                    o.remove("iat");
                }
            }
            Some(Flaw::NoJti) => {
                if let Some(o) = claims.as_object_mut() {
                    o.remove("jti");
                }
            }
            Some(Flaw::FutureNbf) => claims["nbf"] = json!(t + 600),
            Some(Flaw::FutureIat) => claims["iat"] = json!(t + 600),
            Some(Flaw::CritHeader) => {
                // jsonwebtoken's `Header` has no `crit`: the JWS is put
                // together by hand and signed with the library.
                let header = json!({"alg": "ES256", "typ": typ, "kid": key.kid,
                    "crit": ["exp-ext"], "exp-ext": true});
                let signing_input = format!(
                    "{}.{}",
                    URL_SAFE_NO_PAD.encode(header.to_string()),
                    URL_SAFE_NO_PAD.encode(claims.to_string())
                );
                let signature = jsonwebtoken::crypto::sign(
                    signing_input.as_bytes(),
                    &key.encoding_key(),
                    key.algorithm(),
                )
                .unwrap_or_default();
                return format!("{signing_input}.{signature}");
            }
            Some(Flaw::AlgNone) => {
                // An unsigned JWS (RFC 7515 §A.5) cannot be made with a
                // signing library, by design: two base64url parts and an
                // empty signature.
                let header = json!({"alg": "none", "typ": typ, "kid": self.shared.ec.kid});
                return format!(
                    "{}.{}.",
                    URL_SAFE_NO_PAD.encode(header.to_string()),
                    URL_SAFE_NO_PAD.encode(claims.to_string())
                );
            }
        }
        sign(key, typ, &claims)
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, Inner> {
    shared.inner.lock().unwrap_or_else(|p| p.into_inner())
}

fn sign(key: &TestKey, typ: &str, claims: &Value) -> String {
    let mut header = Header::new(key.algorithm());
    header.typ = Some(typ.to_owned());
    header.kid = Some(key.kid.clone());
    encode(&header, claims, &key.encoding_key()).unwrap_or_default()
}

async fn discovery(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let issuer = lock(&shared).issuer.clone();
    Json(json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/jwks"),
        "token_endpoint": format!("{issuer}/token"),
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
        "response_types_supported": ["token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
    }))
}

async fn jwks(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({"keys": [shared.rsa.public_jwk, shared.ec.public_jwk]}))
}

fn oauth_error(status: u16, error: &str) -> Response {
    (
        axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_REQUEST),
        Json(json!({"error": error})),
    )
        .into_response()
}

async fn token(
    State(shared): State<Arc<Shared>>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let assertion = form.get("client_assertion").cloned().unwrap_or_default();
    let header = decode_header(&assertion).ok();
    let claims = unverified_claims(&assertion);
    let client_id = claims.get("iss").and_then(Value::as_str).map(str::to_owned);
    let result = verify(&shared, &form, &assertion, client_id.as_deref());
    let mut inner = lock(&shared);
    inner.requests.push(TokenRequest {
        client_id: client_id.clone(),
        scope: form.get("scope").cloned(),
        resource: form.get("resource").cloned(),
        assertion_claims: claims,
        assertion_alg: header.map(|h| format!("{:?}", h.alg)),
        outcome: result.clone().map(|_| ()).map_err(|(_, e)| e),
    });
    match result {
        Err((status, reason)) => {
            drop(inner);
            let error = if status == 401 {
                "invalid_client"
            } else {
                reason.as_str()
            };
            oauth_error(status, error)
        }
        Ok(client_id) => {
            let t = now();
            let claims = json!({
                "iss": inner.issuer,
                "aud": form.get("resource").cloned().unwrap_or_else(|| PRODUCTS_AUDIENCE.to_owned()),
                "sub": client_id,
                "client_id": client_id,
                "scope": form.get("scope").cloned().unwrap_or_default(),
                "iat": t,
                "exp": t + 300,
                "jti": uuid::Uuid::new_v4().to_string(),
            });
            let token = sign(&shared.ec, "at+jwt", &claims);
            inner.issued.insert(token.clone());
            drop(inner);
            Json(json!({"access_token": token, "token_type": "Bearer", "expires_in": 300}))
                .into_response()
        }
    }
}

fn unverified_claims(token: &str) -> Value {
    let Some(payload) = token.split('.').nth(1) else {
        return Value::Null;
    };
    URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// Verifies a client-credentials request; the client id, or (status, reason).
fn verify(
    shared: &Shared,
    form: &HashMap<String, String>,
    assertion: &str,
    client_id: Option<&str>,
) -> Result<String, (u16, String)> {
    if form.get("grant_type").map(String::as_str) != Some("client_credentials") {
        return Err((400, "unsupported_grant_type".into()));
    }
    if form.get("client_assertion_type").map(String::as_str) != Some(JWT_BEARER) {
        return Err((400, "invalid_request".into()));
    }
    let client_id = client_id.ok_or((401, "no iss".to_owned()))?;
    if form.get("client_id").is_some_and(|c| c != client_id) {
        return Err((401, "client_id differs from the assertion".into()));
    }
    let (issuer, public_jwk, scopes) = {
        let inner = lock(shared);
        let client = inner
            .clients
            .get(client_id)
            .ok_or((401, "unknown client".to_owned()))?;
        (
            inner.issuer.clone(),
            client.public_jwk.clone(),
            client.scopes.clone(),
        )
    };
    let jwk: Jwk = serde_json::from_value(public_jwk).map_err(|e| (401, format!("jwk: {e}")))?;
    let key = DecodingKey::from_jwk(&jwk).map_err(|e| (401, format!("jwk: {e}")))?;
    let alg = match jwk
        .common
        .key_algorithm
        .map(|a| format!("{a:?}"))
        .as_deref()
    {
        Some("RS256") => Algorithm::RS256,
        Some("ES256") => Algorithm::ES256,
        Some("EdDSA") => Algorithm::EdDSA,
        _ => match &jwk.algorithm {
            jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
            jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
            _ => Algorithm::EdDSA,
        },
    };
    let mut validation = Validation::new(alg);
    validation.set_audience(&[format!("{issuer}/token")]);
    validation.set_issuer(&[client_id]);
    validation.sub = Some(client_id.to_owned());
    validation.set_required_spec_claims(&["exp", "iat", "iss", "sub", "aud", "jti"]);
    let data = decode::<Value>(assertion, &key, &validation)
        .map_err(|e| (401, format!("assertion: {e:?}")))?;
    let jti = data
        .claims
        .get("jti")
        .and_then(Value::as_str)
        .ok_or((401, "no jti".to_owned()))?;
    let exp = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
    if exp > now() + 600 {
        return Err((401, "assertion lives too long".into()));
    }
    if !lock(shared).seen_jti.insert(jti.to_owned()) {
        return Err((401, "assertion replayed (jti)".into()));
    }
    if let (Some(allowed), Some(asked)) = (scopes, form.get("scope")) {
        if asked.split(' ').any(|s| !allowed.iter().any(|a| a == s)) {
            return Err((400, "invalid_scope".into()));
        }
    }
    Ok(client_id.to_owned())
}
