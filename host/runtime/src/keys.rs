//! The deployment's three keys (seed 000, "Create the keys, secrets, and roles"):
//!
//! - the **payload state key** ([`StateKeyring`]) seals run input, state,
//!   outputs and prepared commands with AES-256-GCM; it can gain versions and
//!   every earlier version stays readable;
//! - the **admission key** ([`AdmissionKey`]) derives start identities and
//!   command idempotency keys with HMAC-SHA256; it never rotates;
//! - the **audit key** ([`AuditKey`]) derives the audit journal's keyed
//!   references with HMAC-SHA256.
//!
//! Every key is exactly 32 bytes ([`KEY_BYTES`]).

use std::collections::BTreeMap;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Length of every key, in bytes.
pub const KEY_BYTES: usize = 32;
/// Length of an AES-GCM nonce, in bytes.
const NONCE_BYTES: usize = 12;
/// Format byte that starts every sealed value.
const SEALED_FORMAT: u8 = 1;

type HmacSha256 = Hmac<Sha256>;

/// Why a key or a sealed value cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// A key file does not hold exactly 32 bytes.
    KeyLength {
        /// Which key.
        name: String,
        /// Its length in bytes.
        found: usize,
    },
    /// A sealed value names a state key version the keyring does not hold
    /// (seed 000's `state-key-custody`).
    StateKeyCustody {
        /// The missing version.
        version: u32,
    },
    /// The sealed value is malformed, was altered, or belongs to another row
    /// (its associated data does not match).
    Tampered,
    /// The active version is not in the keyring.
    ActiveMissing {
        /// The configured active version.
        version: u32,
    },
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::KeyLength { name, found } => {
                write!(
                    f,
                    "key `{name}` holds {found} bytes; exactly {KEY_BYTES} are required"
                )
            }
            KeyError::StateKeyCustody { version } => write!(
                f,
                "state-key-custody: state key version {version} is not configured"
            ),
            KeyError::Tampered => write!(f, "a sealed value failed authentication"),
            KeyError::ActiveMissing { version } => {
                write!(
                    f,
                    "the active state key version {version} is not configured"
                )
            }
        }
    }
}

impl std::error::Error for KeyError {}

fn key_array(name: &str, bytes: &[u8]) -> Result<[u8; KEY_BYTES], KeyError> {
    bytes.try_into().map_err(|_| KeyError::KeyLength {
        name: name.to_owned(),
        found: bytes.len(),
    })
}

/// What a sealed value is bound to: the associated data of AES-GCM. A
/// ciphertext opened with other associated data fails as [`KeyError::Tampered`],
/// so a value copied to another row, run or purpose is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding<'a> {
    /// `deployment.databaseId`.
    pub database_id: &'a str,
    /// The run's id.
    pub run_id: &'a str,
    /// What the value is: `input`, `state`, `output`, `command`, ...
    pub purpose: &'a str,
    /// The step it belongs to, or `""`.
    pub step: &'a str,
}

impl<'a> Binding<'a> {
    /// The binding of a stored definition (a revision's Program):
    /// (database id, the revision in the run id's place, purpose
    /// `definition`, no step). A definition copied under another revision
    /// or database does not open.
    pub fn definition(database_id: &'a str, revision: &'a str) -> Binding<'a> {
        Binding {
            database_id,
            run_id: revision,
            purpose: "definition",
            step: "",
        }
    }

    fn associated_data(&self, version: u32) -> Vec<u8> {
        let mut out = Vec::new();
        out.push(SEALED_FORMAT);
        out.extend_from_slice(&version.to_be_bytes());
        for part in [self.database_id, self.run_id, self.purpose, self.step] {
            length_prefixed(&mut out, part.as_bytes());
        }
        out
    }
}

fn length_prefixed(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&(part.len() as u64).to_be_bytes());
    out.extend_from_slice(part);
}

/// The payload state key versions and the active one.
#[derive(Clone)]
pub struct StateKeyring {
    versions: BTreeMap<u32, [u8; KEY_BYTES]>,
    active: u32,
}

impl std::fmt::Debug for StateKeyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("StateKeyring")
            .field("versions", &self.versions.keys().collect::<Vec<_>>())
            .field("active", &self.active)
            .finish()
    }
}

impl StateKeyring {
    /// Builds a keyring from `(version, 32 key bytes)` pairs.
    ///
    /// # Errors
    /// [`KeyError::KeyLength`] for a key that is not 32 bytes,
    /// [`KeyError::ActiveMissing`] when `active` is not among the versions.
    pub fn new(versions: Vec<(u32, Vec<u8>)>, active: u32) -> Result<Self, KeyError> {
        let mut map = BTreeMap::new();
        for (v, bytes) in versions {
            map.insert(v, key_array(&format!("state key {v}"), &bytes)?);
        }
        if !map.contains_key(&active) {
            return Err(KeyError::ActiveMissing { version: active });
        }
        Ok(StateKeyring {
            versions: map,
            active,
        })
    }

    /// The active version, used for every new seal.
    pub fn active_version(&self) -> u32 {
        self.active
    }

    /// The configured versions, ascending.
    pub fn versions(&self) -> Vec<u32> {
        self.versions.keys().copied().collect()
    }

    /// Seals `plaintext` under the active version, bound to `binding`.
    /// Layout: format byte (1), key version (4, big-endian), nonce (12),
    /// ciphertext with its 16-byte tag. A fresh random nonce per seal.
    pub fn seal(&self, binding: &Binding<'_>, plaintext: &[u8]) -> Vec<u8> {
        let Some(key) = self.versions.get(&self.active) else {
            return Vec::new();
        };
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let aad = binding.associated_data(self.active);
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .unwrap_or_default();
        let mut out = Vec::with_capacity(1 + 4 + NONCE_BYTES + sealed.len());
        out.push(SEALED_FORMAT);
        out.extend_from_slice(&self.active.to_be_bytes());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The custody fingerprint of `version`: HMAC-SHA256 under that key
    /// over a fixed label and the version, lowercase hex (64 chars), or
    /// `None` when the version is not configured. The store records it per
    /// version, so a different key file under the same version number is
    /// detected (`state-key-custody`) before anything is sealed with it. It
    /// reveals nothing about the key.
    pub fn fingerprint(&self, version: u32) -> Option<String> {
        let key = self.versions.get(&version)?;
        Some(hmac_hex(
            key,
            &[b"coordinator state key custody v1", &version.to_be_bytes()],
        ))
    }

    /// The key version a sealed value names, without opening it.
    pub fn version_of(sealed: &[u8]) -> Option<u32> {
        let bytes: [u8; 4] = sealed.get(1..5)?.try_into().ok()?;
        Some(u32::from_be_bytes(bytes))
    }

    /// Opens a sealed value.
    ///
    /// # Errors
    /// [`KeyError::StateKeyCustody`] when its version is not configured;
    /// [`KeyError::Tampered`] when it is malformed, altered, or bound to
    /// another row.
    pub fn open(&self, binding: &Binding<'_>, sealed: &[u8]) -> Result<Vec<u8>, KeyError> {
        if sealed.first() != Some(&SEALED_FORMAT) {
            return Err(KeyError::Tampered);
        }
        let version = Self::version_of(sealed).ok_or(KeyError::Tampered)?;
        let key = self
            .versions
            .get(&version)
            .ok_or(KeyError::StateKeyCustody { version })?;
        let nonce = sealed.get(5..5 + NONCE_BYTES).ok_or(KeyError::Tampered)?;
        let body = sealed.get(5 + NONCE_BYTES..).ok_or(KeyError::Tampered)?;
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key));
        let aad = binding.associated_data(version);
        cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .map_err(|_| KeyError::Tampered)
    }
}

fn hmac_hex(key: &[u8; KEY_BYTES], parts: &[&[u8]]) -> String {
    let mut mac = match <HmacSha256 as Mac>::new_from_slice(key) {
        Ok(m) => m,
        // HMAC accepts keys of any length.
        Err(_) => return String::new(),
    };
    let mut message = Vec::new();
    for p in parts {
        length_prefixed(&mut message, p);
    }
    mac.update(&message);
    hex::encode(mac.finalize().into_bytes())
}

/// The admission key: derives start identities and idempotency keys
/// (SPEC §5 and §8). Never rotates.
#[derive(Clone)]
pub struct AdmissionKey([u8; KEY_BYTES]);

impl std::fmt::Debug for AdmissionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdmissionKey(..)")
    }
}

impl AdmissionKey {
    /// # Errors
    /// [`KeyError::KeyLength`] unless `bytes` is 32 bytes long.
    pub fn new(bytes: &[u8]) -> Result<Self, KeyError> {
        Ok(AdmissionKey(key_array("admission key", bytes)?))
    }

    /// The custody fingerprint of this key: HMAC-SHA256 under it over a
    /// fixed label, lowercase hex (64 chars). `apply` records it, and
    /// startup, `deployment-status` and `apply` refuse another key
    /// (`state-key-custody`): start identities are keyed by it, so a new
    /// key would let a repeated start create a second run. It reveals
    /// nothing about the key.
    pub fn fingerprint(&self) -> String {
        hmac_hex(&self.0, &[b"coordinator admission key custody v1"])
    }

    /// The start identity (SPEC §8): HMAC-SHA256 over the length-prefixed
    /// (`iss`, `sub`, workflow, idempotency key), lowercase hex (64 chars).
    pub fn start_identity(&self, iss: &str, sub: &str, workflow: &str, key: &str) -> String {
        hmac_hex(
            &self.0,
            &[
                iss.as_bytes(),
                sub.as_bytes(),
                workflow.as_bytes(),
                key.as_bytes(),
            ],
        )
    }

    /// The start identity of an event start (SPEC §2.4, docs/service.md):
    /// HMAC-SHA256 over the length-prefixed (`"event"`, the event source's
    /// `source` URI, its `eventSources` name, workflow, trigger, the
    /// trigger's idempotency value), lowercase hex (64 chars). The event
    /// source takes the place of the token's `iss`/`sub`; the leading
    /// `"event"` part and the part count keep it apart from every token
    /// start identity.
    pub fn event_start_identity(
        &self,
        source: &str,
        source_name: &str,
        workflow: &str,
        trigger: &str,
        idempotency: &str,
    ) -> String {
        hmac_hex(
            &self.0,
            &[
                b"event",
                source.as_bytes(),
                source_name.as_bytes(),
                workflow.as_bytes(),
                trigger.as_bytes(),
                idempotency.as_bytes(),
            ],
        )
    }

    /// A run's owner reference: HMAC-SHA256 over the length-prefixed
    /// (`"owner"`, `iss`, `sub`), lowercase hex. Stored instead of the
    /// caller's identity; stable for the deployment's life (the admission
    /// key never rotates), so owner filters keep working.
    pub fn owner_reference(&self, iss: &str, sub: &str) -> String {
        hmac_hex(&self.0, &[b"owner", iss.as_bytes(), sub.as_bytes()])
    }

    /// An admission request's fingerprint: HMAC-SHA256 over the
    /// length-prefixed (`"request"`, revision, canonical input bytes),
    /// lowercase hex. A repeated start with the same start identity and the
    /// same fingerprint is the same request; another fingerprint is
    /// `idempotency.key-reused`. Keyed, so a low-entropy input cannot be
    /// guessed from the stored value.
    pub fn request_fingerprint(&self, revision: &str, canonical_input: &[u8]) -> String {
        hmac_hex(&self.0, &[b"request", revision.as_bytes(), canonical_input])
    }

    /// A call's idempotency key (SPEC §5): HMAC-SHA256 over the
    /// length-prefixed (database id, start identity, step), lowercase hex.
    /// Stable across restarts, retries and state key rotation.
    pub fn idempotency_key(&self, database_id: &str, start_identity: &str, step: &str) -> String {
        hmac_hex(
            &self.0,
            &[
                database_id.as_bytes(),
                start_identity.as_bytes(),
                step.as_bytes(),
            ],
        )
    }
}

/// The audit key: keyed references for the audit journal, so that the
/// journal never holds personal data or raw identifiers.
#[derive(Clone)]
pub struct AuditKey([u8; KEY_BYTES]);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

impl AuditKey {
    /// # Errors
    /// [`KeyError::KeyLength`] unless `bytes` is 32 bytes long.
    pub fn new(bytes: &[u8]) -> Result<Self, KeyError> {
        Ok(AuditKey(key_array("audit key", bytes)?))
    }

    /// A keyed reference to `value` of kind `kind` (e.g. `run`, `principal`):
    /// HMAC-SHA256 over the length-prefixed pair, lowercase hex.
    pub fn reference(&self, kind: &str, value: &str) -> String {
        hmac_hex(&self.0, &[kind.as_bytes(), value.as_bytes()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding<'a>(run: &'a str) -> Binding<'a> {
        Binding {
            database_id: "db-1",
            run_id: run,
            purpose: "input",
            step: "",
        }
    }

    #[test]
    fn seal_open_round_trip_and_binding() {
        let ring = StateKeyring::new(vec![(1, vec![7; 32])], 1).expect("ring");
        let sealed = ring.seal(&binding("run-1"), b"marker-123");
        assert!(!sealed.windows(10).any(|w| w == b"marker-123"));
        assert_eq!(
            ring.open(&binding("run-1"), &sealed).expect("opens"),
            b"marker-123"
        );
        assert_eq!(
            ring.open(&binding("run-2"), &sealed),
            Err(KeyError::Tampered)
        );
        let mut altered = sealed.clone();
        if let Some(b) = altered.last_mut() {
            *b ^= 1;
        }
        assert_eq!(
            ring.open(&binding("run-1"), &altered),
            Err(KeyError::Tampered)
        );
        // Two seals of the same value differ (fresh nonces).
        assert_ne!(sealed, ring.seal(&binding("run-1"), b"marker-123"));
    }

    #[test]
    fn rotation_keeps_old_versions_readable_and_custody_is_enforced() {
        let old = StateKeyring::new(vec![(1, vec![1; 32])], 1).expect("ring");
        let sealed = old.seal(&binding("r"), b"x");
        let rotated = StateKeyring::new(vec![(1, vec![1; 32]), (2, vec![2; 32])], 2).expect("ring");
        assert_eq!(
            rotated.open(&binding("r"), &sealed).expect("old readable"),
            b"x"
        );
        let new = rotated.seal(&binding("r"), b"y");
        assert_eq!(StateKeyring::version_of(&new), Some(2));
        let dropped = StateKeyring::new(vec![(2, vec![2; 32])], 2).expect("ring");
        assert_eq!(
            dropped.open(&binding("r"), &sealed),
            Err(KeyError::StateKeyCustody { version: 1 })
        );
    }

    #[test]
    fn derivations_are_stable_and_separated() {
        let k = AdmissionKey::new(&[3; 32]).expect("key");
        let a = k.start_identity("iss", "sub", "wf", "key-1");
        assert_eq!(a, k.start_identity("iss", "sub", "wf", "key-1"));
        assert_eq!(a.len(), 64);
        // Length prefixes keep ("ab","c") and ("a","bc") apart.
        assert_ne!(
            k.start_identity("ab", "c", "wf", "k"),
            k.start_identity("a", "bc", "wf", "k")
        );
        // An event start never shares a token start's identity, and each
        // trigger admits its own run.
        let e = k.event_start_identity("https://src", "src", "wf", "t", "key-1");
        assert_eq!(e.len(), 64);
        assert_ne!(e, k.start_identity("https://src", "src", "wf", "key-1"));
        assert_ne!(
            e,
            k.event_start_identity("https://src", "src", "wf", "t2", "key-1")
        );
        let i = k.idempotency_key("db", &a, "notify");
        assert_ne!(i, k.idempotency_key("db", &a, "other"));
        assert!(AdmissionKey::new(&[0; 31]).is_err());
        let audit = AuditKey::new(&[4; 32]).expect("key");
        assert_ne!(
            audit.reference("run", "r1"),
            audit.reference("principal", "r1")
        );
    }
}
