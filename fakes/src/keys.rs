//! Test key pairs as JWKs: ES256 and EdDSA generated with ring, RS256 from
//! the checked-in fixtures (ring cannot generate RSA keys).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey};
use pkcs8::der::asn1::OctetStringRef;
use pkcs8::der::Decode;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde_json::{json, Value};

const ISSUER_RSA_JWK: &str = include_str!("../fixtures/issuer-rsa.jwk.json");
const ISSUER_RSA_DER: &[u8] = include_bytes!("../fixtures/issuer-rsa.der");
const CLIENT_RSA_JWK: &str = include_str!("../fixtures/client-rsa.jwk.json");
const CLIENT_RSA_DER: &[u8] = include_bytes!("../fixtures/client-rsa.der");

/// The key types the fakes use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA 2048, RS256 (a fixed test key).
    Rs256,
    /// EC P-256, ES256 (generated).
    Es256,
    /// Ed25519, EdDSA (generated).
    EdDsa,
}

/// A test key pair with its JWKs.
#[derive(Clone)]
pub struct TestKey {
    /// The key type.
    pub kind: KeyKind,
    /// The key id in both JWKs.
    pub kid: String,
    /// The private JWK (what a connection's `signingKeyRef` holds).
    pub private_jwk: Value,
    /// The public JWK (what an issuer registers or publishes).
    pub public_jwk: Value,
    der: Vec<u8>,
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestKey")
            .field("kind", &self.kind)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl TestKey {
    /// A client key of `kind` with key id `kid`. RS256 keys are the fixed
    /// client fixture (the same key for every call).
    ///
    /// Panics if ring cannot generate a key (no system randomness).
    pub fn generate(kind: KeyKind, kid: &str) -> TestKey {
        match kind {
            KeyKind::Rs256 => rsa(CLIENT_RSA_JWK, CLIENT_RSA_DER, kid),
            KeyKind::Es256 => ec(kid),
            KeyKind::EdDsa => ed(kid),
        }
    }

    /// The issuer's fixed RS256 key.
    pub(crate) fn issuer_rsa(kid: &str) -> TestKey {
        rsa(ISSUER_RSA_JWK, ISSUER_RSA_DER, kid)
    }

    /// The JWS algorithm of this key.
    pub fn algorithm(&self) -> Algorithm {
        match self.kind {
            KeyKind::Rs256 => Algorithm::RS256,
            KeyKind::Es256 => Algorithm::ES256,
            KeyKind::EdDsa => Algorithm::EdDSA,
        }
    }

    /// The private JWK as JSON text.
    pub fn private_jwk_text(&self) -> String {
        self.private_jwk.to_string()
    }

    /// A `jsonwebtoken` signing key.
    pub fn encoding_key(&self) -> EncodingKey {
        match self.kind {
            KeyKind::Rs256 => EncodingKey::from_rsa_der(&self.der),
            KeyKind::Es256 => EncodingKey::from_ec_der(&self.der),
            KeyKind::EdDsa => EncodingKey::from_ed_der(&self.der),
        }
    }
}

fn rsa(jwk_text: &str, der: &[u8], kid: &str) -> TestKey {
    let mut private: Value = serde_json::from_str(jwk_text).expect("fixture JWK is JSON");
    private["kid"] = json!(kid);
    let public = json!({
        "kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
        "n": private["n"], "e": private["e"],
    });
    TestKey {
        kind: KeyKind::Rs256,
        kid: kid.to_owned(),
        private_jwk: private,
        public_jwk: public,
        der: der.to_vec(),
    }
}

fn ec(kid: &str) -> TestKey {
    let rng = SystemRandom::new();
    let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .expect("ring generates a P-256 key");
    let info = pkcs8::PrivateKeyInfo::from_der(doc.as_ref()).expect("ring writes PKCS#8");
    let inner = sec1::EcPrivateKey::from_der(info.private_key).expect("ring writes SEC1");
    let point = inner.public_key.expect("ring includes the public key");
    let (x, y) = (
        point.get(1..33).unwrap_or_default(),
        point.get(33..65).unwrap_or_default(),
    );
    let public = json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
        "x": b64(x), "y": b64(y)});
    let mut private = public.clone();
    private["d"] = json!(b64(inner.private_key));
    TestKey {
        kind: KeyKind::Es256,
        kid: kid.to_owned(),
        private_jwk: private,
        public_jwk: public,
        der: doc.as_ref().to_vec(),
    }
}

fn ed(kid: &str) -> TestKey {
    let rng = SystemRandom::new();
    let doc = Ed25519KeyPair::generate_pkcs8(&rng).expect("ring generates an Ed25519 key");
    let pair = Ed25519KeyPair::from_pkcs8(doc.as_ref()).expect("ring reads its own key");
    let info = pkcs8::PrivateKeyInfo::from_der(doc.as_ref()).expect("ring writes PKCS#8");
    let seed = OctetStringRef::from_der(info.private_key).expect("an Ed25519 seed");
    let public = json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig",
        "x": b64(pair.public_key().as_ref())});
    let mut private = public.clone();
    private["d"] = json!(b64(seed.as_bytes()));
    TestKey {
        kind: KeyKind::EdDsa,
        kid: kid.to_owned(),
        private_jwk: private,
        public_jwk: public,
        der: doc.as_ref().to_vec(),
    }
}
