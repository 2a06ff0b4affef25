//! A connection's private JWK (RFC 7517/7518, RFC 8037) as a `jsonwebtoken`
//! signing key.
//!
//! Supported: `kty: RSA` (RS256), `kty: EC` with `crv: P-256` (ES256) and
//! `kty: OKP` with `crv: Ed25519` (EdDSA). The key members are re-encoded in
//! the DER forms ring reads (PKCS#1 for RSA, PKCS#8 v1 for EC and Ed25519)
//! with the `pkcs1`/`sec1`/`pkcs8` format crates; no key material is ever
//! formatted into an error or a log line.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey};
use pkcs8::der::asn1::{AnyRef, OctetStringRef};
use pkcs8::der::Encode;
use pkcs8::{AlgorithmIdentifierRef, ObjectIdentifier, PrivateKeyInfo};
use serde_json::Value;

/// id-ecPublicKey (RFC 5480).
const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
/// secp256r1 / P-256 (RFC 5480).
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
/// id-Ed25519 (RFC 8410).
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

/// A private JWK ready to sign: its algorithm, its key id and the key.
pub struct SigningKey {
    /// RS256, ES256 or EdDSA, from the key type.
    pub algorithm: Algorithm,
    /// The JWK's `kid`, sent in the assertion header when present.
    pub kid: Option<String>,
    /// The key.
    pub key: EncodingKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("algorithm", &self.algorithm)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// Why a JWK cannot sign. The message names members, never their values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwkError(pub String);

impl std::fmt::Display for JwkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JwkError {}

fn err(m: impl Into<String>) -> JwkError {
    JwkError(m.into())
}

fn member(jwk: &Value, name: &str) -> Result<Vec<u8>, JwkError> {
    let text = jwk
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| err(format!("the JWK has no `{name}` string")))?;
    URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|_| err(format!("the JWK member `{name}` is not base64url")))
}

/// Reads a private JWK (JSON text) into a [`SigningKey`].
///
/// Errors: not JSON, an unsupported `kty`/`crv`, a missing private member
/// (`d`, and for RSA `p`, `q`, `dp`, `dq`, `qi`), an `alg` that contradicts
/// the key type, or members of the wrong length.
pub fn signing_key(jwk_text: &[u8]) -> Result<SigningKey, JwkError> {
    let jwk: Value =
        serde_json::from_slice(jwk_text).map_err(|_| err("the signing key is not JSON"))?;
    let kid = jwk.get("kid").and_then(Value::as_str).map(str::to_owned);
    let kty = jwk.get("kty").and_then(Value::as_str).unwrap_or_default();
    let crv = jwk.get("crv").and_then(Value::as_str).unwrap_or_default();
    let (algorithm, key) = match (kty, crv) {
        ("RSA", _) => (Algorithm::RS256, EncodingKey::from_rsa_der(&rsa_der(&jwk)?)),
        ("EC", "P-256") => (Algorithm::ES256, EncodingKey::from_ec_der(&ec_der(&jwk)?)),
        ("OKP", "Ed25519") => (Algorithm::EdDSA, EncodingKey::from_ed_der(&ed_der(&jwk)?)),
        _ => {
            return Err(err(format!(
                "unsupported key type `{kty}` (curve `{crv}`): use RSA, EC P-256 or OKP Ed25519"
            )))
        }
    };
    if let Some(alg) = jwk.get("alg").and_then(Value::as_str) {
        let expected = match algorithm {
            Algorithm::RS256 => "RS256",
            Algorithm::ES256 => "ES256",
            _ => "EdDSA",
        };
        if alg != expected {
            return Err(err(format!(
                "the JWK says `alg: {alg}` but its key type signs {expected}"
            )));
        }
    }
    Ok(SigningKey {
        algorithm,
        kid,
        key,
    })
}

fn rsa_der(jwk: &Value) -> Result<Vec<u8>, JwkError> {
    let parts = ["n", "e", "d", "p", "q", "dp", "dq", "qi"]
        .iter()
        .map(|m| member(jwk, m))
        .collect::<Result<Vec<_>, _>>()?;
    let uint = |i: usize| {
        let bytes = parts.get(i).map(Vec::as_slice).unwrap_or_default();
        // A minimal big-endian integer: strip leading zero bytes.
        let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
        pkcs1::UintRef::new(bytes.get(start..).unwrap_or_default())
            .map_err(|_| err("an RSA member is not an integer"))
    };
    let key = pkcs1::RsaPrivateKey {
        modulus: uint(0)?,
        public_exponent: uint(1)?,
        private_exponent: uint(2)?,
        prime1: uint(3)?,
        prime2: uint(4)?,
        exponent1: uint(5)?,
        exponent2: uint(6)?,
        coefficient: uint(7)?,
        other_prime_infos: None,
    };
    key.to_der()
        .map_err(|_| err("the RSA key cannot be encoded"))
}

fn ec_der(jwk: &Value) -> Result<Vec<u8>, JwkError> {
    let d = member(jwk, "d")?;
    let x = member(jwk, "x")?;
    let y = member(jwk, "y")?;
    if d.len() != 32 || x.len() != 32 || y.len() != 32 {
        return Err(err("a P-256 JWK needs 32-byte `d`, `x` and `y`"));
    }
    let mut point = Vec::with_capacity(65);
    point.push(0x04);
    point.extend_from_slice(&x);
    point.extend_from_slice(&y);
    // ring reads the curve from the PKCS#8 wrapper and wants the public key
    // inside the ECPrivateKey.
    let inner = sec1::EcPrivateKey {
        private_key: &d,
        parameters: None,
        public_key: Some(&point),
    }
    .to_der()
    .map_err(|_| err("the EC key cannot be encoded"))?;
    let info = PrivateKeyInfo {
        algorithm: AlgorithmIdentifierRef {
            oid: EC_PUBLIC_KEY,
            parameters: Some(AnyRef::from(&P256)),
        },
        private_key: &inner,
        public_key: None,
    };
    info.to_der()
        .map_err(|_| err("the EC key cannot be encoded"))
}

fn ed_der(jwk: &Value) -> Result<Vec<u8>, JwkError> {
    let d = member(jwk, "d")?;
    if d.len() != 32 {
        return Err(err("an Ed25519 JWK needs a 32-byte `d`"));
    }
    let inner = OctetStringRef::new(&d)
        .and_then(|o| o.to_der())
        .map_err(|_| err("the Ed25519 key cannot be encoded"))?;
    let info = PrivateKeyInfo {
        algorithm: AlgorithmIdentifierRef {
            oid: ED25519,
            parameters: None,
        },
        private_key: &inner,
        public_key: None,
    };
    info.to_der()
        .map_err(|_| err("the Ed25519 key cannot be encoded"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn refuses_unsupported_and_contradictory_keys() {
        assert!(signing_key(b"nope").is_err());
        assert!(signing_key(br#"{"kty":"oct","k":"AAAA"}"#).is_err());
        assert!(signing_key(br#"{"kty":"EC","crv":"P-384","d":"AA","x":"AA","y":"AA"}"#).is_err());
        let e = signing_key(br#"{"kty":"OKP","crv":"Ed25519","x":"AA"}"#).unwrap_err();
        assert!(e.0.contains("`d`"), "{e}");
        let d = URL_SAFE_NO_PAD.encode([7u8; 32]);
        let text = format!(r#"{{"kty":"OKP","crv":"Ed25519","d":"{d}","x":"AA","alg":"ES256"}}"#);
        assert!(signing_key(text.as_bytes()).is_err());
    }
}
