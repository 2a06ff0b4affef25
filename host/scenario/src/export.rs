//! A run's history written as one scenario case (`coordinatorctl scenario
//! export`, docs/scenarios.md "Cases exported from runs"): its admission
//! time and input, every answer each call got in order, its completions
//! and cancel at their times, the operator's recovery after an unknown
//! answer, and `expect` as the run really ended (its elapsed seconds only
//! when no operator recovery took place: the format applies a recovery at
//! once, the real run waited for its operator). The case is run on the
//! run's own Program before it is handed out ([`export_case`]): a case
//! that would not pass is refused with the reason, never written.
//!
//! The service builds a [`RunHistory`] from what it keeps of a run (the
//! VM state and the step ledger); this module knows no store.

mod redact;

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_vm::{RunState, RunStatus, Vm};
use serde_json::{json, Map, Value};

use crate::file::{self, SCENARIOS_API_VERSION, SCENARIOS_KIND};
use crate::run::{self, settled_state_name};
use crate::targets::MoveTargets;

/// One answer a call step received, as the service's ledger keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerHistory {
    /// The dispatch attempt it answered (from 1); `0` for a receipt lookup.
    pub attempt: u32,
    /// The VM's `Answer::kind` word (`success`, `uncertain`, ...).
    pub kind: String,
    /// The answer's code, if it has one.
    pub code: Option<String>,
}

/// What the service kept of one visited step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepHistory {
    /// Call steps: the answers, oldest first.
    pub answers: Vec<AnswerHistory>,
    /// Whether `answers` holds every answer the step received (the service
    /// keeps the latest eight).
    pub answers_complete: bool,
    /// Wait steps that ended: how (`woke`, `completed`, `timed-out`,
    /// `cancelled`, `deadline`).
    pub wait_ended: Option<String>,
    /// When the run left the step (a whole second of the service's clock).
    pub ended_at: Option<Instant>,
}

/// A run as the export reads it: its id, its VM state, and per visited
/// step what the service kept of it, by step name.
#[derive(Clone, Debug)]
pub struct RunHistory<'a> {
    /// The run id (a UUID); the case's id is `run-<id>`.
    pub run_id: &'a str,
    /// The run's VM state as stored (never an erased skeleton).
    pub state: &'a RunState,
    /// By step name.
    pub steps: BTreeMap<String, StepHistory>,
}

/// Why a run cannot be exported as a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportRefused {
    /// The run's history cannot be written as a case that passes: the
    /// sentence says what (a run that has not ended, an answer kind no
    /// reply type scripts, answers the service no longer keeps, the case
    /// not passing on the run's Program, a placeholder that changes the
    /// run).
    NotReproducible(String),
    /// A `--redact` pointer names no member of the run's input, or a value
    /// it names cannot be hidden from the case.
    RedactInvalid {
        /// The pointer as given.
        pointer: String,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for ExportRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportRefused::NotReproducible(m) => f.write_str(m),
            ExportRefused::RedactInvalid { pointer, reason } => {
                write!(f, "--redact {pointer}: {reason}")
            }
        }
    }
}

/// An exported case: a scenarios document holding the one case, as data
/// and as the text written to a file (JSON, which YAML 1.2 reads as
/// itself, after a comment naming the run).
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedCase {
    /// The scenarios document (`apiVersion`, `kind`, `cases: [case]`).
    pub document: Value,
    /// The file's text.
    pub text: String,
}

/// Writes the run `history` ran on `vm` (the Program of the run's
/// revision) as one scenario case, with each input member `redact` names
/// (JSON Pointers into the input) replaced by a placeholder of its type
/// everywhere in the case, and runs the case on `vm` first unredacted,
/// then redacted: it is returned only when both pass.
///
/// # Errors
/// [`ExportRefused::NotReproducible`] for a run that has not ended
/// (states `running`, `cancel-requested`), an answer no reply type
/// scripts (`invalid-command`, `invalid-response`), a call whose older
/// answers the service no longer keeps, more than eight answers, both
/// recoveries on one call, a step output missing, or a case that does
/// not pass (the first difference or fault, said); a redaction that
/// changes the run says which pointers. [`ExportRefused::RedactInvalid`]
/// for a pointer that names no member of the input, or a value that
/// still appears in the case once replaced (a step name, a code).
pub fn export_case(
    vm: &Vm,
    history: &RunHistory<'_>,
    redact: &[String],
) -> Result<ExportedCase, ExportRefused> {
    let case = build_case(vm, history)?;
    let header = format!(
        "# Exported from run {} by `coordinatorctl scenario export`.\n",
        history.run_id
    );
    let plain = document_of(case.clone());
    verify(vm, &plain).map_err(|why| {
        ExportRefused::NotReproducible(format!("the case does not reproduce the run: {why}"))
    })?;
    if redact.is_empty() {
        return Ok(finish(plain, &header));
    }
    let redacted = redact::redact_case(case, redact)?;
    let document = document_of(redacted.case);
    verify(vm, &document).map_err(|why| {
        ExportRefused::NotReproducible(format!(
            "with {} replaced by placeholders the case no longer reproduces the run: {why}",
            redact.join(", ")
        ))
    })?;
    let text = format!(
        "{header}# Redacted: {}.\n{}\n",
        redact.join(", "),
        pretty(&document)
    );
    redact::check_hidden(&text, &redacted.hidden)?;
    Ok(ExportedCase { document, text })
}

fn finish(document: Value, header: &str) -> ExportedCase {
    let text = format!("{header}{}\n", pretty(&document));
    ExportedCase { document, text }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn document_of(case: Value) -> Value {
    json!({"apiVersion": SCENARIOS_API_VERSION, "kind": SCENARIOS_KIND, "cases": [case]})
}

/// Runs the one case of `document` on `vm`: `Err` with the first fault of
/// the file or the case's first difference.
fn verify(vm: &Vm, document: &Value) -> Result<(), String> {
    let text = pretty(document);
    let doc = coordinator_source::parse("exported case", &text).map_err(|d| d.message)?;
    let scenarios = file::parse(&doc).map_err(|d| first_message(&d))?;
    let faults = file::check(&doc, &scenarios, vm.program(), &MoveTargets::default());
    if !faults.is_empty() {
        return Err(first_message(&faults));
    }
    let case = scenarios.cases.first().ok_or("no case")?;
    let report = run::run_case(vm, &doc, 0, case).map_err(|d| first_message(&d))?;
    if report.passed {
        Ok(())
    } else {
        Err(report.problem())
    }
}

fn first_message(diags: &[coordinator_source::Diagnostic]) -> String {
    diags
        .first()
        .map(|d| format!("{} ({})", d.message, d.code))
        .unwrap_or_default()
}

fn refuse(message: String) -> ExportRefused {
    ExportRefused::NotReproducible(message)
}

fn instant_text(at: &Instant) -> Result<String, ExportRefused> {
    at.format()
        .map_err(|e| refuse(format!("an instant cannot be written: {}", e.0)))
}

/// The case as data (the scenarios format's members, camelCase).
fn build_case(vm: &Vm, history: &RunHistory<'_>) -> Result<Value, ExportRefused> {
    let state = history.state;
    if matches!(
        state.status,
        RunStatus::Running | RunStatus::CancelRequested
    ) {
        return Err(refuse(format!(
            "the run is {}: only a run that ended, or waits in attention, is exported",
            state.status.as_str()
        )));
    }
    let mut case = Map::new();
    case.insert("id".into(), json!(format!("run-{}", history.run_id)));
    case.insert(
        "admittedAt".into(),
        json!(instant_text(&state.admitted_at)?),
    );
    case.insert("input".into(), state.input.clone());
    let (replies, recovery) = calls(vm, history)?;
    let completions = completions(vm, history)?;
    for (key, map) in [
        ("replies", replies),
        ("completions", completions),
        ("recovery", recovery),
    ] {
        if !map.is_empty() {
            case.insert(key.into(), Value::Object(map));
        }
    }
    if let Some(at) = vm.cancel_requested_at(state) {
        let after = state.admitted_at.seconds_until(&at).max(0);
        case.insert("cancel".into(), json!({"afterSeconds": after}));
    }
    // The scenario host applies an operator's recovery at once; the run
    // waited for its operator for as long as it did: its elapsed time is
    // then not the case's to check.
    let timed = !case.contains_key("recovery");
    case.insert("expect".into(), expect(state, timed));
    Ok(Value::Object(case))
}

/// `expect` as the run ended; its elapsed seconds only when `timed`.
fn expect(state: &RunState, timed: bool) -> Value {
    let mut expect = Map::new();
    expect.insert("path".into(), json!(state.path));
    expect.insert("state".into(), json!(settled_state_name(state)));
    let outcome = match &state.outcome {
        Some(name) => json!({"type": "named", "value": name}),
        None => json!({"type": "none"}),
    };
    expect.insert("outcome".into(), outcome);
    if state.outcome.is_some() {
        expect.insert("output".into(), state.output.clone().unwrap_or(Value::Null));
    }
    if timed {
        expect.insert(
            "workflowElapsedSeconds".into(),
            json!(state.elapsed_seconds),
        );
    }
    if let Some(f) = &state.failure {
        expect.insert("failure".into(), json!(f.code.as_str()));
    }
    Value::Object(expect)
}

/// Members of a case's map (`replies`, `recovery`, ...), by step name.
type Members = Map<String, Value>;

/// Each visited call's replies, in the order answered, and the recovery
/// the operator applied after its unknown answers.
fn calls(vm: &Vm, history: &RunHistory<'_>) -> Result<(Members, Members), ExportRefused> {
    let (mut replies, mut recovery) = (Map::new(), Map::new());
    for step in &history.state.path {
        if vm.step_kind(step) != Some(coordinator_ir::StepKind::Call) || replies.contains_key(step)
        {
            continue;
        }
        let Some(h) = history.steps.get(step).filter(|h| !h.answers.is_empty()) else {
            continue;
        };
        if !h.answers_complete {
            return Err(refuse(format!(
                "call `{step}` received more answers than the service keeps (the latest 8): its first answers are gone"
            )));
        }
        if h.answers.len() > file::MAX_REPLIES {
            return Err(refuse(format!(
                "call `{step}` received {} answers; a case scripts at most {}",
                h.answers.len(),
                file::MAX_REPLIES
            )));
        }
        let list = h
            .answers
            .iter()
            .map(|a| reply(step, a, history.state))
            .collect::<Result<Vec<_>, _>>()?;
        replies.insert(step.clone(), Value::Array(list));
        let holds = coordinator_vm::recovery_support(vm.program(), step).is_some_and(|s| s.holds);
        if let Some(Some(action)) = holds.then(|| recovery_of(step, &h.answers)).transpose()? {
            recovery.insert(step.clone(), json!(action));
        }
    }
    Ok((replies, recovery))
}

/// The scenario reply for answer `a` of call `step`.
fn reply(step: &str, a: &AnswerHistory, state: &RunState) -> Result<Value, ExportRefused> {
    let code = || a.code.clone().unwrap_or_default();
    Ok(match a.kind.as_str() {
        "success" => {
            let value = state.outputs.get(step).ok_or_else(|| {
                refuse(format!(
                    "call `{step}` was answered with success but the run holds no output of it"
                ))
            })?;
            json!({"type": "success", "value": value})
        }
        "retryable" | "refused" | "uncertain" => json!({"type": a.kind, "code": code()}),
        "declared-refusal" => json!({"type": "declared-refusal", "refusalCode": code()}),
        "receipt-expired" | "receipt-unresolved" => json!({"type": a.kind}),
        other => {
            return Err(refuse(format!(
                "call `{step}` was answered `{other}`, which no scenario reply scripts"
            )))
        }
    })
}

/// What the operator did after the unknown answers of a call that holds
/// the run: `reconcile` when the next answer was a receipt lookup's
/// (attempt 0), `retry-same` when it was a dispatch's; `None` when no
/// answer followed one.
fn recovery_of(
    step: &str,
    answers: &[AnswerHistory],
) -> Result<Option<&'static str>, ExportRefused> {
    let mut found = None;
    for pair in answers.windows(2) {
        let [first, next] = pair else { continue };
        if !matches!(first.kind.as_str(), "uncertain" | "receipt-unresolved") {
            continue;
        }
        let action = if next.attempt == 0 {
            "reconcile"
        } else {
            "retry-same"
        };
        if found.is_some_and(|f| f != action) {
            return Err(refuse(format!(
                "call `{step}` was both reconciled and sent again after unknown answers; a case gives one recovery per call"
            )));
        }
        found = Some(action);
    }
    Ok(found)
}

/// Each visited wait-for's completion: its value at the second it was
/// observed, or `never` when the wait ended otherwise.
fn completions(vm: &Vm, history: &RunHistory<'_>) -> Result<Map<String, Value>, ExportRefused> {
    let state = history.state;
    let mut out = Map::new();
    for step in &state.path {
        if vm.step_kind(step) != Some(coordinator_ir::StepKind::WaitFor) {
            continue;
        }
        let h = history.steps.get(step);
        let completed = h.and_then(|h| h.wait_ended.as_deref()) == Some("completed");
        let value = if completed {
            let at = h.and_then(|h| h.ended_at).ok_or_else(|| {
                refuse(format!(
                    "wait `{step}` was completed but the service kept no time for it"
                ))
            })?;
            let value = state.outputs.get(step).ok_or_else(|| {
                refuse(format!(
                    "wait `{step}` was completed but the run holds no value of it"
                ))
            })?;
            let after = state.admitted_at.seconds_until(&at).max(0);
            json!({"type": "completed", "afterSeconds": after, "value": value})
        } else {
            json!({"type": "never"})
        };
        out.insert(step.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
