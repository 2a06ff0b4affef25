//! The access tokens this process has verified, kept until they expire, so
//! a caller that presents the same token again (every request of a
//! producer, until its token's `exp`) is not verified again: the
//! signature check was about half of what the coordinator spent on a start
//! (docs/decisions.md "A verified token is kept until it expires").
//!
//! An entry is keyed by the SHA-256 digest of the whole token, so only a
//! token identical to the one verified (header, claims and signature)
//! finds it, and holds what the checks that do not depend on time read
//! (the principal) and the token's times. A hit is taken only when the
//! token's times still pass [`crate::auth`]'s time rules now (the same
//! function the full check runs) and the issuer's key set is the one the
//! token was verified against (a fetch of the JWKS starts a new key set
//! generation: a token whose key was withdrawn is checked again, and
//! refused). Refusals are never kept. A policy is read at each request,
//! never kept here.

use std::collections::HashMap;
use std::sync::Mutex;

use coordinator_engine::Principal;
use sha2::{Digest, Sha256};

/// The most tokens kept. When it is reached, the expired entries are
/// dropped, and if none had expired, all of them (each is verified again
/// on its next use).
pub const VERIFIED_TOKENS_KEPT: usize = 4096;

/// A token's times, Unix seconds, as its claims state them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenTimes {
    /// `exp`.
    pub expires: u64,
    /// `nbf`, when present.
    pub not_before: Option<u64>,
    /// `iat`.
    pub issued: u64,
}

struct Kept {
    principal: Principal,
    times: TokenTimes,
    key_set_generation: u64,
}

/// The verified tokens, by digest ([`VERIFIED_TOKENS_KEPT`] at most).
#[derive(Default)]
pub struct VerifiedTokens {
    kept: Mutex<HashMap<[u8; 32], Kept>>,
}

impl VerifiedTokens {
    /// The principal of `token` when it was verified against the key set
    /// of `key_set_generation` and `still_valid` accepts its times now;
    /// otherwise `None` (an entry that no longer holds is dropped).
    pub fn principal(
        &self,
        token: &str,
        key_set_generation: u64,
        still_valid: impl Fn(&TokenTimes) -> bool,
    ) -> Option<Principal> {
        let digest = digest(token);
        let mut kept = self.kept.lock().ok()?;
        let entry = kept.get(&digest)?;
        if entry.key_set_generation == key_set_generation && still_valid(&entry.times) {
            return Some(entry.principal.clone());
        }
        kept.remove(&digest);
        None
    }

    /// Keeps `token`, verified now against the key set of
    /// `key_set_generation`. `expired` says which kept entries may be
    /// dropped when the cache is full.
    pub fn keep(
        &self,
        token: &str,
        principal: &Principal,
        times: TokenTimes,
        key_set_generation: u64,
        expired: impl Fn(&TokenTimes) -> bool,
    ) {
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        if kept.len() >= VERIFIED_TOKENS_KEPT {
            kept.retain(|_, entry| !expired(&entry.times));
            if kept.len() >= VERIFIED_TOKENS_KEPT {
                kept.clear();
            }
        }
        kept.insert(
            digest(token),
            Kept {
                principal: principal.clone(),
                times,
                key_set_generation,
            },
        );
    }

    /// How many tokens are kept.
    pub fn len(&self) -> usize {
        self.kept.lock().map_or(0, |kept| kept.len())
    }

    /// Whether no token is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(sub: &str) -> Principal {
        Principal {
            iss: "https://issuer".into(),
            sub: sub.into(),
            client_id: "producer".into(),
        }
    }

    const TIMES: TokenTimes = TokenTimes {
        expires: 2_000,
        not_before: None,
        issued: 1_000,
    };

    #[test]
    fn a_kept_token_answers_only_for_the_same_bytes_key_set_and_valid_times() {
        let tokens = VerifiedTokens::default();
        tokens.keep("a.b.c", &principal("s"), TIMES, 1, |_| false);
        assert_eq!(tokens.principal("a.b.c", 1, |_| true), Some(principal("s")));
        assert_eq!(tokens.principal("a.b.d", 1, |_| true), None, "other bytes");
        assert_eq!(
            tokens.principal("a.b.c", 2, |_| true),
            None,
            "another key set"
        );
        assert!(tokens.is_empty(), "an entry of an old key set is dropped");
        tokens.keep("a.b.c", &principal("s"), TIMES, 1, |_| false);
        assert_eq!(
            tokens.principal("a.b.c", 1, |t| t.expires > 3_000),
            None,
            "times refused now"
        );
        assert!(tokens.is_empty(), "an entry whose times fail is dropped");
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_everything() {
        let tokens = VerifiedTokens::default();
        for i in 0..VERIFIED_TOKENS_KEPT {
            let times = TokenTimes {
                expires: if i % 2 == 0 { 10 } else { 2_000 },
                ..TIMES
            };
            tokens.keep(&format!("t{i}"), &principal("s"), times, 1, |_| false);
        }
        assert_eq!(tokens.len(), VERIFIED_TOKENS_KEPT);
        tokens.keep("new", &principal("n"), TIMES, 1, |t| t.expires < 100);
        assert_eq!(tokens.len(), VERIFIED_TOKENS_KEPT / 2 + 1);
        assert_eq!(
            tokens.principal("t0", 1, |_| true),
            None,
            "expired, dropped"
        );
        assert_eq!(tokens.principal("t1", 1, |_| true), Some(principal("s")));
        for i in 0..VERIFIED_TOKENS_KEPT {
            tokens.keep(&format!("u{i}"), &principal("s"), TIMES, 1, |_| false);
        }
        assert!(
            tokens.len() <= VERIFIED_TOKENS_KEPT,
            "never above the bound: {}",
            tokens.len()
        );
    }
}
