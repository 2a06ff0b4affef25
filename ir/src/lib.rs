//! `coordinator-ir`: the compiled form of a workflow that the compiler emits
//! and the VM runs.
//!
//! - [`program`]: the [`Program`] (step bytecode, expressions, pools).
//! - [`catalogue`]: the ten host operations (SPEC §5), as data.
//! - [`canonical`]: canonical JSON, the encoding the revision hashes.
//! - [`carried`]: the step outputs a run keeps when it moves to another
//!   revision.
//! - [`disasm`]: a human-readable listing used by golden tests.
//! - [`instant`]: RFC 3339 instants and Unix seconds, without a clock.
//! - [`limits`]: the fixed Function limits (SPEC §3).
//! - [`moves`]: the move certificate (which waiting runs of one revision
//!   can resume on another) and its digest.
//! - [`name`]: the name rule of SPEC §1 (`^[a-z][a-z0-9-]{0,63}$`).
//! - [`pointer`](mod@pointer): JSON Pointer reference tokens (RFC 6901), escaped and
//!   unescaped in one place.
//! - [`step_kind`]: the five step kinds ([`StepKind`]) and their words.
//! - [`validation`]: the JSON Schema validator the VM and the compiler share.
//!
//! This crate depends on no other crate of the project, and knows nothing
//! about YAML, source positions, clocks or I/O.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(clippy::wildcard_enum_match_arm)]

pub mod canonical;
pub mod carried;
pub mod catalogue;
pub mod disasm;
pub mod instant;
pub mod limits;
pub mod moves;
pub mod name;
pub mod pointer;
pub mod program;
pub mod step_kind;
pub mod validation;

pub use program::*;
pub use step_kind::StepKind;

use sha2::{Digest, Sha256};

/// Prefix of every revision and digest string.
pub const SHA256_PREFIX: &str = "sha256:";

impl Program {
    /// The canonical encoding of the Program: canonical JSON of its serde
    /// form. This is exactly what the revision hashes.
    // A Program is plain data whose maps have string keys: serialising it
    // cannot fail, and an empty encoding would hash to a valid-looking
    // revision.
    #[allow(clippy::expect_used)]
    pub fn canonical_bytes(&self) -> Vec<u8> {
        canonical::to_vec(&serde_json::to_value(self).expect("a Program always serialises"))
    }

    /// The revision: `sha256:` + lowercase hex SHA-256 of
    /// [`Program::canonical_bytes`] (SPEC §4).
    pub fn revision(&self) -> String {
        sha256_digest(&self.canonical_bytes())
    }
}

/// `sha256:` + lowercase hex SHA-256 of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("{SHA256_PREFIX}{}", hex::encode(Sha256::digest(bytes)))
}

/// A package's `definition.json` content: the Program plus its revision.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// `sha256:<hex>` of the Program's canonical encoding.
    pub revision: String,
    pub program: Program,
}

impl Definition {
    /// Wraps a Program with its computed revision.
    pub fn new(program: Program) -> Self {
        Definition {
            revision: program.revision(),
            program,
        }
    }

    /// Canonical JSON bytes of the definition, as written to
    /// `definition.json`.
    #[allow(clippy::expect_used)]
    pub fn canonical_bytes(&self) -> Vec<u8> {
        canonical::to_vec(&serde_json::to_value(self).expect("a Definition always serialises"))
    }

    /// Reads a definition and checks that its revision matches its Program
    /// and that the Program is well formed. Errors are sentences.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, String> {
        let def: Definition =
            serde_json::from_slice(bytes).map_err(|e| format!("definition.json: {e}"))?;
        def.program.validate()?;
        let actual = def.program.revision();
        if actual != def.revision {
            return Err(format!(
                "definition.json records revision {} but its program hashes to {actual}",
                def.revision
            ));
        }
        Ok(def)
    }
}
