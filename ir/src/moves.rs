//! The move certificate: which waiting runs of revision A can resume at a
//! step of revision B, as `coordinatorctl move plan` proves it offline and
//! the service checks it before a move (docs/decisions.md "Moving waiting
//! runs").
//!
//! The compiler writes a [`MoveCertificate`] (`coordinator_compiler::moves`),
//! the service reads one back ([`MoveCertificate::from_json`]); both call
//! the one digest here ([`MoveCertificate::compute_digest`]).
//!
//! The digest is `sha256:` + the lowercase hex SHA-256 of the canonical JSON
//! ([`crate::canonical`]) of the certificate without its `digest` member and
//! with each wait's `findings` reduced to the sorted list of their codes.
//! So a finding's position and wording (which reformatting B moves) never
//! move the digest; the revisions, the workflow, the map, the accepted
//! skips, the checker version, the due-instant rule and every wait's target,
//! kind, verdict, carried steps and finding codes do.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{canonical, sha256_digest, StepKind};

/// The certificate format this crate writes and reads (`format`).
pub const CERTIFICATE_FORMAT: &str = "coordinator-move-certificate/1";

/// The version of the cross-revision check that decided the verdicts
/// (`checker`). It changes whenever a rule of the check changes, so a
/// certificate written by another checker is never taken for this one's.
pub const CHECKER_VERSION: &str = "coordinator-move-check/1";

/// A move certificate: for every wait step of revision A, whether a run
/// waiting there can resume at its target step of revision B, and why not.
/// Its JSON members are camelCase; reading refuses unknown members.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schemars", schemars(title = "CoordinatorMoveCertificate"))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MoveCertificate {
    /// The format: always `coordinator-move-certificate/1`.
    pub format: String,
    /// The version of the check that decided the verdicts:
    /// `coordinator-move-check/1`.
    pub checker: String,
    /// `sha256:` and 64 lowercase hex digits: the SHA-256 of the canonical
    /// JSON of the certificate without `digest`, each wait's findings
    /// reduced to the sorted list of their codes.
    pub digest: String,
    /// The workflow (`project.id`), the same in both revisions.
    pub workflow: String,
    /// Revision A, the one runs wait on now.
    pub from: RevisionRef,
    /// Revision B, the one they would resume on.
    pub to: RevisionRef,
    /// The wait steps of A given another target in B (`--map OLD=NEW`), in
    /// the order given.
    pub map: Vec<StepMapEntry>,
    /// The call steps of B a moved run may skip (`--accept-skipped STEP`),
    /// sorted.
    pub accept_skipped: Vec<String>,
    /// What becomes of a `wait-until`'s due instant: always kept.
    pub due_instant: DueInstant,
    /// One entry per `wait-until` and `wait-for` step of A, in A's step order.
    pub waits: Vec<WaitVerdict>,
}

/// A revision named by its Program's revision (`sha256:<64 hex>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RevisionRef {
    /// The revision, `sha256:<64 hex>`.
    pub revision: String,
}

/// One `--map OLD=NEW`: the wait step `from` of A resumes at step `to` of B.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepMapEntry {
    /// A wait step of A.
    pub from: String,
    /// The step of B it resumes at.
    pub to: String,
}

/// The due instant of a moved `wait-until` (and the timeout of a moved
/// `wait-for`): the one revision A computed is kept, with its timer job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum DueInstant {
    /// The instant A computed stays; B's `until` is not evaluated again.
    Kept,
}

/// The verdict on one wait step of A.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WaitVerdict {
    /// The wait step of A.
    pub from: String,
    /// The target step of B (the same id, or the one the map names), even
    /// when B has no such step.
    pub to: String,
    /// The kind of A's step (`wait-until` or `wait-for`).
    pub kind: StepKind,
    /// Whether a run waiting at `from` can resume at `to`: true exactly
    /// when there are no findings.
    pub movable: bool,
    /// The steps of A whose outputs (and effects) a moved run keeps:
    /// completed on every route to the wait, and in B with the same id,
    /// kind, operation and output schema. Sorted.
    pub carried: Vec<String>,
    /// Why the wait is refused, each located in B where B causes it.
    pub findings: Vec<MoveFinding>,
}

/// Whether a finding refuses the wait (every finding of this checker does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum FindingSeverity {
    /// Refuses the wait.
    Error,
    /// Does not refuse the wait.
    Warning,
}

/// One reason a wait cannot move, located in revision B's files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MoveFinding {
    /// `coordinator.move.<condition>`; each has its page under docs/errors/.
    pub code: String,
    /// Error or warning.
    pub severity: FindingSeverity,
    /// The file of B, as the plan was given it (`b/workflow.yaml`).
    pub file: String,
    /// 1-based line (0 when the finding has no position).
    pub line: u32,
    /// 1-based column, in Unicode scalar values (0 without a position).
    pub column: u32,
    /// JSON Pointer of the node in B's file (`/workflow/steps/notify/input`).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
    /// How to repair it.
    pub next: String,
}

/// Why a certificate was not accepted by [`MoveCertificate::from_json`] or
/// [`MoveCertificate::verify_digest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertificateError {
    /// The bytes are not a certificate (JSON syntax, a missing or unknown
    /// member, a wrong type); serde's sentence.
    Malformed(String),
    /// `format` is not [`CERTIFICATE_FORMAT`].
    Format(String),
    /// `checker` is not [`CHECKER_VERSION`].
    Checker(String),
    /// A wait says `movable` and has findings, or the reverse.
    Inconsistent(String),
    /// The digest recorded is not the digest of the content.
    Digest {
        /// The `digest` member as read.
        recorded: String,
        /// The digest of the content.
        computed: String,
    },
}

impl std::fmt::Display for CertificateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertificateError::Malformed(m) => write!(f, "not a move certificate: {m}"),
            CertificateError::Format(v) => {
                write!(f, "format is `{v}`; this reads `{CERTIFICATE_FORMAT}`")
            }
            CertificateError::Checker(v) => write!(
                f,
                "the certificate was written by checker `{v}`; this is `{CHECKER_VERSION}`"
            ),
            CertificateError::Inconsistent(wait) => write!(
                f,
                "wait `{wait}` is marked movable with findings, or refused without one"
            ),
            CertificateError::Digest { recorded, computed } => write!(
                f,
                "the certificate records digest {recorded} but its content hashes to {computed}"
            ),
        }
    }
}

impl std::error::Error for CertificateError {}

impl MoveCertificate {
    /// The certificate's digest, computed from its content (never from the
    /// `digest` member): see the module documentation for what it covers.
    // A certificate is plain data whose maps have string keys: serialising
    // it cannot fail.
    #[allow(clippy::expect_used)]
    pub fn compute_digest(&self) -> String {
        let mut value = serde_json::to_value(self).expect("a certificate always serialises");
        if let Value::Object(members) = &mut value {
            members.remove("digest");
            if let Some(Value::Array(waits)) = members.get_mut("waits") {
                for wait in waits.iter_mut() {
                    if let Some(Value::Array(findings)) = wait.get_mut("findings") {
                        let mut codes: Vec<Value> = findings
                            .iter()
                            .filter_map(|f| f.get("code").cloned())
                            .collect();
                        codes.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                        *findings = codes;
                    }
                }
            }
        }
        sha256_digest(&canonical::to_vec(&value))
    }

    /// Sets `digest` to [`MoveCertificate::compute_digest`]; the last step
    /// of writing a certificate.
    pub fn sealed(mut self) -> Self {
        self.digest = self.compute_digest();
        self
    }

    /// Whether `digest` is the digest of the content.
    pub fn verify_digest(&self) -> Result<(), CertificateError> {
        let computed = self.compute_digest();
        if computed == self.digest {
            Ok(())
        } else {
            Err(CertificateError::Digest {
                recorded: self.digest.clone(),
                computed,
            })
        }
    }

    /// Reads a certificate and accepts it only when it is this format,
    /// written by this checker, consistent (a wait is movable exactly when
    /// it has no findings) and its digest verifies. It does not check that
    /// the revisions it names are the ones at hand: the service compares
    /// `from` and `to` with the revisions it holds.
    pub fn from_json(bytes: &[u8]) -> Result<Self, CertificateError> {
        let certificate: MoveCertificate = serde_json::from_slice(bytes)
            .map_err(|e| CertificateError::Malformed(e.to_string()))?;
        if certificate.format != CERTIFICATE_FORMAT {
            return Err(CertificateError::Format(certificate.format));
        }
        if certificate.checker != CHECKER_VERSION {
            return Err(CertificateError::Checker(certificate.checker));
        }
        if let Some(wait) = certificate
            .waits
            .iter()
            .find(|w| w.movable != w.findings.is_empty())
        {
            return Err(CertificateError::Inconsistent(wait.from.clone()));
        }
        certificate.verify_digest()?;
        Ok(certificate)
    }

    /// The verdict on wait step `from` of A, if A has that wait.
    pub fn wait(&self, from: &str) -> Option<&WaitVerdict> {
        self.waits.iter().find(|w| w.from == from)
    }

    /// The verdict on wait step `from` of A when it is movable.
    pub fn movable_wait(&self, from: &str) -> Option<&WaitVerdict> {
        self.wait(from).filter(|w| w.movable)
    }

    /// Whether at least one wait is movable (`move plan` exits 0).
    pub fn any_movable(&self) -> bool {
        self.waits.iter().any(|w| w.movable)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// A change made to a certificate, named for the failure message.
    type Edit = (&'static str, Box<dyn Fn(&mut MoveCertificate)>);

    fn finding(code: &str, line: u32, message: &str) -> MoveFinding {
        MoveFinding {
            code: code.to_owned(),
            severity: FindingSeverity::Error,
            file: "b/workflow.yaml".to_owned(),
            line,
            column: 11,
            pointer: "/workflow/steps/notify/input".to_owned(),
            message: message.to_owned(),
            next: "Read what A's input type has.".to_owned(),
        }
    }

    fn certificate() -> MoveCertificate {
        MoveCertificate {
            format: CERTIFICATE_FORMAT.to_owned(),
            checker: CHECKER_VERSION.to_owned(),
            digest: String::new(),
            workflow: "follow-up".to_owned(),
            from: RevisionRef {
                revision: format!("sha256:{}", "a".repeat(64)),
            },
            to: RevisionRef {
                revision: format!("sha256:{}", "b".repeat(64)),
            },
            map: vec![StepMapEntry {
                from: "due".to_owned(),
                to: "due-later".to_owned(),
            }],
            accept_skipped: vec![],
            due_instant: DueInstant::Kept,
            waits: vec![
                WaitVerdict {
                    from: "due".to_owned(),
                    to: "due-later".to_owned(),
                    kind: StepKind::WaitUntil,
                    movable: true,
                    carried: vec![],
                    findings: vec![],
                },
                WaitVerdict {
                    from: "await".to_owned(),
                    to: "await".to_owned(),
                    kind: StepKind::WaitFor,
                    movable: false,
                    carried: vec!["submit".to_owned()],
                    findings: vec![
                        finding("coordinator.move.input-missing", 70, "reads /priority"),
                        finding("coordinator.move.effect-repeats", 80, "repeats"),
                    ],
                },
            ],
        }
        .sealed()
    }

    fn json(c: &MoveCertificate) -> Vec<u8> {
        serde_json::to_vec_pretty(c).expect("serialises")
    }

    #[test]
    fn the_digest_ignores_where_and_how_a_finding_is_said() {
        let c = certificate();
        let mut moved = c.clone();
        let findings = &mut moved.waits[1].findings;
        findings.reverse();
        for f in findings.iter_mut() {
            f.line += 40;
            f.column = 3;
            f.file = "elsewhere/workflow.yaml".to_owned();
            f.pointer = "/workflow/steps/other".to_owned();
            f.message = "said otherwise".to_owned();
            f.next = "another repair".to_owned();
        }
        assert_eq!(moved.compute_digest(), c.digest);
        assert!(moved.verify_digest().is_ok());
    }

    #[test]
    fn the_digest_moves_with_every_decision() {
        let c = certificate();
        let edits: Vec<Edit> = vec![
            ("verdict", Box::new(|c| c.waits[0].movable = false)),
            ("target", Box::new(|c| c.waits[0].to = "due".to_owned())),
            ("kind", Box::new(|c| c.waits[0].kind = StepKind::WaitFor)),
            ("carried", Box::new(|c| c.waits[1].carried.clear())),
            (
                "finding code",
                Box::new(|c| c.waits[1].findings[0].code = "coordinator.move.x".to_owned()),
            ),
            (
                "finding dropped",
                Box::new(|c| c.waits[1].findings.pop().map(drop).unwrap_or(())),
            ),
            ("from revision", Box::new(|c| c.from.revision.push('0'))),
            ("to revision", Box::new(|c| c.to.revision.push('0'))),
            ("map", Box::new(|c| c.map[0].to = "due".to_owned())),
            ("map entry", Box::new(|c| c.map.clear())),
            (
                "accepted skip",
                Box::new(|c| c.accept_skipped.push("read".to_owned())),
            ),
            (
                "checker",
                Box::new(|c| c.checker = "coordinator-move-check/2".to_owned()),
            ),
            ("workflow", Box::new(|c| c.workflow = "other".to_owned())),
            ("wait dropped", Box::new(|c| drop(c.waits.remove(0)))),
        ];
        for (what, edit) in edits {
            let mut changed = c.clone();
            edit(&mut changed);
            assert_ne!(
                changed.compute_digest(),
                c.digest,
                "{what} did not move the digest"
            );
        }
    }

    #[test]
    fn a_certificate_reads_back_and_a_tampered_one_does_not() {
        let c = certificate();
        assert!(c.digest.starts_with("sha256:") && c.digest.len() == 71);
        assert_eq!(MoveCertificate::from_json(&json(&c)), Ok(c.clone()));

        let mut tampered = c.clone();
        tampered.waits[1].movable = true;
        tampered.waits[1].findings.clear();
        assert!(matches!(
            MoveCertificate::from_json(&json(&tampered)),
            Err(CertificateError::Digest { .. })
        ));
        let mut inconsistent = c.clone();
        inconsistent.waits[1].movable = true;
        let inconsistent = inconsistent.sealed();
        assert_eq!(
            MoveCertificate::from_json(&json(&inconsistent)),
            Err(CertificateError::Inconsistent("await".to_owned()))
        );
        let mut other = c.clone();
        other.checker = "coordinator-move-check/0".to_owned();
        assert!(matches!(
            MoveCertificate::from_json(&json(&other.sealed())),
            Err(CertificateError::Checker(_))
        ));
        let mut other = c.clone();
        other.format = "coordinator-move-certificate/0".to_owned();
        assert!(matches!(
            MoveCertificate::from_json(&json(&other.sealed())),
            Err(CertificateError::Format(_))
        ));
    }

    #[test]
    fn reading_refuses_unknown_members_and_keeps_the_camel_case_form() {
        let c = certificate();
        let mut value = serde_json::to_value(&c).expect("value");
        assert_eq!(value["dueInstant"], "kept");
        assert_eq!(value["acceptSkipped"], serde_json::json!([]));
        assert_eq!(value["waits"][1]["kind"], "wait-for");
        assert_eq!(value["waits"][1]["findings"][0]["severity"], "error");
        value["waits"][0]["extra"] = serde_json::json!(1);
        let bytes = serde_json::to_vec(&value).expect("bytes");
        assert!(matches!(
            MoveCertificate::from_json(&bytes),
            Err(CertificateError::Malformed(m)) if m.contains("extra")
        ));
        assert!(matches!(
            MoveCertificate::from_json(b"{}"),
            Err(CertificateError::Malformed(_))
        ));
    }

    #[test]
    fn waits_are_found_by_their_step_in_a() {
        let c = certificate();
        assert_eq!(
            c.movable_wait("due").map(|w| w.to.as_str()),
            Some("due-later")
        );
        assert!(c.wait("await").is_some() && c.movable_wait("await").is_none());
        assert!(c.wait("nowhere").is_none());
        assert!(c.any_movable());
    }
}
