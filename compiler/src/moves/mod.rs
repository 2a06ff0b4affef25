//! The cross-revision check behind `coordinatorctl move plan`: for every
//! step of revision A where a run waits (`wait-until`, `wait-for`), whether
//! a run waiting there can resume at a step of revision B, proven offline
//! from the two revisions alone, and written as a
//! [`MoveCertificate`]
//! (docs/decisions.md "Moving waiting runs").
//!
//! A wait is movable when (`wait.rs`, one function per rule):
//! - its target (the same id, or the one `--map` names) is a step of B of
//!   the same kind; for a `wait-for`, with the same completion name, on the
//!   same call, and that call carried (the due instant and the timeout are
//!   kept, so B's `until` and `timeoutSeconds` do not matter);
//! - every mapping of B after the target reads only what the run is
//!   certain to have: its input as A's input type admits it, the outputs of
//!   A's steps completed on every route to the wait that B carries
//!   ([`coordinator_ir::carried::carried_steps`], the one rule: the same
//!   id, kind, operation, BReg action and output schema; a `wait-for` only
//!   with its call), and the outputs of B's own steps after the target. This is `check`'s own route-sensitive
//!   typing run from that state ([`crate::check`]'s `resume.rs`), not a
//!   second copy of it;
//! - no step of B after the target has the id of a call A may already have
//!   performed before the wait (its idempotency key would repeat);
//! - no call of B before the target was skipped (not carried), unless the
//!   plan accepts the skip (`--accept-skipped STEP`; a read of it after the
//!   target is still refused by the data check).
//!
//! - every scenario case of A that moves its run at the wait to the target
//!   passes (`cases.rs`: the caller runs them and hands over
//!   [`MovedCases`]).
//!
//! Revision A is read from its Program alone (a project's or a package's),
//! revision B from its project: B's findings need its sources and their
//! positions. Every finding is located in B where B causes it, except a
//! failed scenario case, located at the case in A's `scenarios.yaml`.

mod cases;
mod wait;

pub use cases::{CasesByWait, MovedCaseRun, MovedCases};

use std::collections::BTreeSet;

use coordinator_ir::moves::{
    DueInstant, FindingSeverity, MoveCertificate, MoveFinding, RevisionRef, StepMapEntry,
    CERTIFICATE_FORMAT, CHECKER_VERSION,
};
use coordinator_ir::name::is_name;
use coordinator_ir::{Program, StepOp};
use coordinator_source::{diagnostic, Diagnostic, Located, Severity};
use serde_json::Value;

use crate::ast::Step;
use crate::codes;
use crate::{Analysis, Compiled};

/// The `$id` of the certificate's JSON Schema
/// (`coordinatorctl schema --kind move-certificate`).
pub const CERTIFICATE_SCHEMA_ID: &str =
    "https://id.registrystack.org/schemas/coordinator/move-certificate/move-certificate.v1beta1.schema.json";

/// What a plan is given beyond the two revisions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MoveOptions {
    /// `--map OLD=NEW`: the wait `OLD` of A resumes at step `NEW` of B
    /// (in the order given; see [`read_step_map`]).
    pub map: Vec<StepMapEntry>,
    /// `--accept-skipped STEP`: calls of B a moved run may skip.
    pub accept_skipped: Vec<String>,
}

/// A plan: the sealed certificate, and its findings as diagnostics (wait by
/// wait, in A's step order, each sorted by position) for the text form.
#[derive(Clone, Debug)]
pub struct MovePlan {
    /// The certificate, its digest set.
    pub certificate: MoveCertificate,
    /// Every finding of every wait, as the diagnostic it was made from.
    pub diagnostics: Vec<Diagnostic>,
    /// Per wait step of A (every one, in the certificate), the scenario
    /// cases held to its move, in file order (empty: no case moves there
    /// to the target). Not part of the certificate: a failed case is there
    /// only as its finding.
    pub moved_cases: CasesByWait,
}

/// Why no plan was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanRefused {
    /// A bad `--map` or `--accept-skipped` (`coordinator.move.map-invalid`,
    /// `coordinator.move.skip-invalid`): a usage error (exit 2).
    Usage(Vec<Diagnostic>),
    /// The revisions cannot be compared: B did not compile (its own
    /// diagnostics), A and B are different workflows
    /// (`coordinator.move.workflow-differs`), or A's scenarios file has
    /// faults ([`MovedCases::faults`]): exit 1.
    Refused(Vec<Diagnostic>),
}

/// A diagnostic about a command-line argument (`--map due=x`): no file,
/// no position.
fn argument(code: &str, shown: String, message: String, next: impl Into<String>) -> Diagnostic {
    Diagnostic::error(
        code,
        Located {
            file: shown,
            ..Located::default()
        },
        message,
        next,
    )
}

/// Reads `--map OLD=NEW` arguments. Each must be two non-empty parts around
/// one `=`; which steps they name is checked by [`plan_move`]. Every
/// malformed one is reported (`coordinator.move.map-invalid`).
pub fn read_step_map(entries: &[String]) -> Result<Vec<StepMapEntry>, Vec<Diagnostic>> {
    let mut map = Vec::new();
    let mut faults = Vec::new();
    for raw in entries {
        match raw.split_once('=') {
            Some((from, to)) if !from.is_empty() && !to.is_empty() && !to.contains('=') => map
                .push(StepMapEntry {
                    from: from.to_owned(),
                    to: to.to_owned(),
                }),
            _ => faults.push(argument(
                codes::MOVE_MAP_INVALID,
                format!("--map {raw}"),
                format!(
                    "`{raw}` is not OLD=NEW (a wait step of revision A, `=`, a step of revision B)"
                ),
                "Write each map as --map OLD=NEW, e.g. --map due=due-later.",
            )),
        }
    }
    if faults.is_empty() {
        Ok(map)
    } else {
        Err(faults)
    }
}

/// The map's faults against A's steps: each `from` is a wait step of A,
/// given once, and each `to` a valid step id.
fn map_faults(a: &Program, map: &[StepMapEntry]) -> Vec<Diagnostic> {
    let waits: Vec<&str> = a
        .steps
        .iter()
        .filter(|s| s.op.kind().is_wait())
        .map(|s| s.name.as_str())
        .collect();
    let mut seen = BTreeSet::new();
    let mut faults = Vec::new();
    let next = "Map each wait step of revision A at most once, to a step id of revision B.";
    for entry in map {
        let shown = format!("--map {}={}", entry.from, entry.to);
        let fault = match a.steps.iter().find(|s| s.name == entry.from) {
            None => Some(format!(
                "`{}` is not a step of revision A; its wait steps are: {}",
                entry.from,
                listed(&waits)
            )),
            Some(s) if !s.op.kind().is_wait() => Some(format!(
                "`{}` is a {} step of revision A; only runs waiting at a wait step move (its wait steps are: {})",
                entry.from,
                s.op.kind(),
                listed(&waits)
            )),
            Some(_) if !seen.insert(entry.from.as_str()) => {
                Some(format!("`{}` is mapped more than once", entry.from))
            }
            Some(_) if !is_name(&entry.to) => Some(format!(
                "`{}` is not a step id (names match {})",
                entry.to,
                coordinator_ir::name::NAME_PATTERN
            )),
            Some(_) => None,
        };
        if let Some(message) = fault {
            faults.push(argument(codes::MOVE_MAP_INVALID, shown, message, next));
        }
    }
    faults
}

/// The accepted skips' faults against B's steps: each names a call of B.
fn skip_faults(b: &Analysis, accept: &[String]) -> Vec<Diagnostic> {
    let calls: Vec<&str> = b
        .project
        .workflow
        .steps
        .iter()
        .filter(|(_, s)| matches!(s, Step::Call(_)))
        .map(|(n, _)| n.as_str())
        .collect();
    accept
        .iter()
        .filter(|step| !calls.contains(&step.as_str()))
        .map(|step| {
            argument(
                codes::MOVE_SKIP_INVALID,
                format!("--accept-skipped {step}"),
                format!(
                    "`{step}` is not a call step of revision B; its call steps are: {}",
                    listed(&calls)
                ),
                format!(
                    "Accept only the skip of a call of B that `move plan` reported as {}.",
                    codes::MOVE_CALL_SKIPPED
                ),
            )
        })
        .collect()
}

/// Names joined for a message, or `(none)`.
fn listed(names: &[&str]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}

/// Plans the move of the runs waiting on revision `from` (A, a Program:
/// a project's or a package's) to the project `to` (B, compiled without
/// errors): one verdict per wait step of A, in A's step order, sealed into
/// a certificate; `cases` are A's scenario cases that move to B, as the
/// caller ran them (none for a package). Usage faults (`options`) and a
/// refusal (B did not compile, another workflow, faults of A's scenarios)
/// come back as [`PlanRefused`], every fault at once.
pub fn plan_move(
    from: &Program,
    to: &Compiled,
    options: &MoveOptions,
    cases: &MovedCases,
) -> Result<MovePlan, PlanRefused> {
    let (Some(b_program), Some(b), false) = (&to.program, &to.analysis, to.has_errors()) else {
        let mut diags: Vec<Diagnostic> = to
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .cloned()
            .collect();
        if diags.is_empty() {
            diags = to.diagnostics.clone();
        }
        return Err(PlanRefused::Refused(diags));
    };
    let mut usage = map_faults(from, &options.map);
    usage.extend(skip_faults(b, &options.accept_skipped));
    if !usage.is_empty() {
        return Err(PlanRefused::Usage(usage));
    }
    if from.workflow != b_program.workflow {
        return Err(PlanRefused::Refused(vec![Diagnostic::error(
            codes::MOVE_WORKFLOW_DIFFERS,
            b.doc.locate("/project/id"),
            format!(
                "revision A is of workflow `{}` and this project (revision B) of workflow `{}`; a run moves only between revisions of its own workflow",
                from.workflow, b_program.workflow
            ),
            format!(
                "Give --to the project of workflow `{}` (or --from a revision of `{}`).",
                from.workflow, b_program.workflow
            ),
        )]));
    }
    if from.revision() == b_program.revision() {
        return Err(PlanRefused::Refused(vec![Diagnostic::error(
            codes::MOVE_SAME_REVISION,
            b.doc.locate(""),
            format!(
                "revision A and this project (revision B) are the same revision {}; a run waiting on it is already there",
                from.revision()
            ),
            "Give --to the project of the new revision (a changed copy of the workflow).",
        )]));
    }
    if !cases.faults.is_empty() {
        return Err(PlanRefused::Refused(cases.faults.clone()));
    }
    let accepted: BTreeSet<String> = options.accept_skipped.iter().cloned().collect();
    let check = wait::Revisions::new(from, b_program, b, &to.diagnostics, &accepted);
    let mut waits = Vec::new();
    let mut diagnostics = Vec::new();
    let mut moved_cases = CasesByWait::new();
    for step in from.steps.iter().filter(|s| s.op.kind().is_wait()) {
        let target = options
            .map
            .iter()
            .find(|m| m.from == step.name)
            .map_or(step.name.as_str(), |m| m.to.as_str());
        let (verdict, mut found) = check.decide(step, target);
        let held = cases.at(&step.name, target);
        found.extend(cases::failed(&held, &step.name, target));
        moved_cases.insert(step.name.clone(), held.into_iter().cloned().collect());
        diagnostic::sort(&mut found);
        waits.push(coordinator_ir::moves::WaitVerdict {
            movable: found.is_empty(),
            findings: found.iter().map(finding).collect(),
            ..verdict
        });
        diagnostics.extend(found);
    }
    let certificate = MoveCertificate {
        format: CERTIFICATE_FORMAT.to_owned(),
        checker: CHECKER_VERSION.to_owned(),
        digest: String::new(),
        workflow: from.workflow.clone(),
        from: RevisionRef {
            revision: from.revision(),
        },
        to: RevisionRef {
            revision: b_program.revision(),
        },
        map: options.map.clone(),
        accept_skipped: accepted.into_iter().collect(),
        due_instant: DueInstant::Kept,
        waits,
    }
    .sealed();
    Ok(MovePlan {
        certificate,
        diagnostics,
        moved_cases,
    })
}

/// A diagnostic as a certificate's finding.
fn finding(d: &Diagnostic) -> MoveFinding {
    MoveFinding {
        code: d.code.clone(),
        severity: match d.severity {
            Severity::Error => FindingSeverity::Error,
            Severity::Warning => FindingSeverity::Warning,
        },
        file: d.file.clone(),
        line: d.line,
        column: d.column,
        pointer: d.pointer.clone(),
        message: d.message.clone(),
        next: d.next.clone(),
    }
}

/// Whether a step of a Program is a call.
fn is_call(op: &StepOp) -> bool {
    matches!(op, StepOp::Call { .. })
}

/// The JSON Schema (draft 2020-12) of the move certificate, generated from
/// [`MoveCertificate`]; committed as
/// `docs/schemas/move-certificate.v1beta1.schema.json`.
pub fn certificate_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<MoveCertificate>();
    let mut v = schema.to_value();
    if let Value::Object(m) = &mut v {
        m.insert("$id".into(), Value::String(CERTIFICATE_SCHEMA_ID.into()));
    }
    v
}

#[cfg(test)]
mod tests;
