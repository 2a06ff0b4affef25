//! Runs one scenario case on a virtual clock (SPEC §7), driving the VM exactly
//! as the service does: the VM decides, this host only answers its commands
//! from the script and delivers timed events in order.
//!
//! Timing: the clock starts at `admittedAt`, moves only while the run waits,
//! and never passes the deadline. Calls and automatic retries take no virtual
//! time. At one instant the order is the VM's
//! ([`coordinator_vm::SAME_INSTANT_ORDER`]). A completion scripted before
//! its wait began is observed when the wait begins.
//!
//! A case with a `move` runs on this workflow until its run waits at the
//! move's step, is moved there by the VM's move
//! ([`coordinator_vm::move_waiting_run`]) and goes on under the revision it
//! moved to, on the same clock (`run/moved.rs`).

mod drive;
mod exercised;
mod moved;

pub use exercised::{recovery_paths, Edge, EdgeTaken, Exercised, RecoveryPath};

use std::collections::{BTreeMap, VecDeque};

use coordinator_ir::instant::Instant;
use coordinator_ir::{canonical, Program};
use coordinator_source::{Diagnostic, YamlDocument};
use coordinator_vm::{Answer, Event, FailureCode, Rejected, RunState, RunStatus, Vm};
use serde::Serialize;
use serde_json::Value;

use super::file::{Case, ExpectedOutcome, Reply};
use crate::codes;
use crate::targets::MoveTargets;

/// What happened in one case.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseReport {
    /// The case id.
    pub id: String,
    /// Whether every expectation held.
    pub passed: bool,
    /// The first difference, as `what: expected X, got Y` (failed cases).
    pub difference: Option<String>,
    /// The scenario state the run reached.
    pub state: String,
    /// Step names visited.
    pub path: Vec<String>,
    /// The outcome reached, if any.
    pub outcome: Option<String>,
    /// The finish output, if a finish was reached.
    pub output: Option<Value>,
    /// Virtual seconds from admission to the end.
    pub workflow_elapsed_seconds: u64,
    /// The failure code, for a failed or refused run.
    pub failure: Option<String>,
    /// What failed, for a failed or refused run: the step and the VM's
    /// sentence (a Function error names the Function, the input and the
    /// JSON Pointer); after a move, the move too.
    pub failure_detail: Option<String>,
    /// Where the run moved to another revision, for a case with a `move`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<MoveReport>,
    /// What the VM did in the case (for coverage; not part of the
    /// report's JSON).
    #[serde(skip)]
    pub exercised: Exercised,
}

/// Where a case's run moved (`move` of the case).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveReport {
    /// The wait step of this workflow where it moved.
    pub step: String,
    /// The step of the new revision it then waited at.
    pub to: String,
    /// The new revision's project, as `move.project` writes it.
    pub project: String,
    /// The new revision (`sha256:...`).
    pub revision: String,
}

impl CaseReport {
    /// Why a case did not pass, in one text: the first difference, then
    /// the run's failure when it failed; empty for a case that passed.
    pub fn problem(&self) -> String {
        let mut lines: Vec<String> = self.difference.iter().cloned().collect();
        if let (Some(code), Some(detail)) = (&self.failure, &self.failure_detail) {
            lines.push(format!("the run failed {code} at {detail}"));
        }
        lines.join("\n")
    }
}

/// Runs case number `index` of the file, which moves no run (a case with a
/// `move` is a fault here: run it with [`run_case_with_moves`]). `Err`
/// carries located diagnostics for faults of the scenario file itself (a
/// call reached with nothing scripted, a reply never used, a recovery the
/// VM refuses, ...). Replies left unused are only reported for a case
/// whose expectations hold: when the run went elsewhere, the case FAILs
/// with the first difference instead.
pub fn run_case(
    vm: &Vm,
    doc: &YamlDocument,
    index: usize,
    case: &Case,
) -> Result<CaseReport, Vec<Diagnostic>> {
    run_case_with_moves(vm, &MoveTargets::default(), doc, index, case)
}

/// Runs case number `index` of the file on `vm`, moving its run to the
/// revision `targets` holds for its `move.project` when it has a `move`
/// (as [`run_case`] otherwise). A case whose run never waits at the move's
/// step is a fault (`coordinator.scenario.move-not-reached`), and so is a
/// move the VM refuses.
pub fn run_case_with_moves(
    vm: &Vm,
    targets: &MoveTargets,
    doc: &YamlDocument,
    index: usize,
    case: &Case,
) -> Result<CaseReport, Vec<Diagnostic>> {
    let mut host = CaseHost::new(vm, targets, doc, index, case);
    let end = host.drive()?;
    host.check_moved(&end)?;
    let mut report = compare(case, &end);
    report.exercised = std::mem::take(&mut host.exercised);
    report.moved = host.moved.take();
    if let (Some(m), Some(f)) = (&report.moved, &end_state(&end).failure) {
        report.failure_detail = Some(format!(
            "step {} after the move at `{}` to {}: {}",
            f.step, m.step, m.project, f.message
        ));
    }
    if report.passed {
        let unused = host.unused_replies();
        if !unused.is_empty() {
            return Err(unused);
        }
    }
    Ok(report)
}

enum End {
    Settled(RunState),
    /// The replies ran out after an answer that the VM retries by itself.
    Retryable(RunState),
}

struct CaseHost<'a> {
    /// The revision the run is on: the case's workflow, then the one it
    /// moved to.
    vm: &'a Vm,
    targets: &'a MoveTargets,
    /// Where the run moved, once it did.
    moved: Option<MoveReport>,
    doc: &'a YamlDocument,
    base: String,
    case: &'a Case,
    replies: BTreeMap<String, VecDeque<Reply>>,
    /// First dispatched command per step, canonical JSON.
    frozen: BTreeMap<String, Vec<u8>>,
    /// Per step, whether the last answer left the effect unknown and the
    /// operator's recovery has not been applied for it yet.
    recovery_due: BTreeMap<String, bool>,
    cancel_delivered: bool,
    /// Steps whose next dispatch is an operator's retry-same.
    operator_resend: std::collections::BTreeSet<String>,
    /// The last reply consumed per step.
    last_reply: BTreeMap<String, Reply>,
    completion_delivered: bool,
    deadline: Option<Instant>,
    /// What the VM did so far.
    exercised: Exercised,
}

impl<'a> CaseHost<'a> {
    fn new(
        vm: &'a Vm,
        targets: &'a MoveTargets,
        doc: &'a YamlDocument,
        index: usize,
        case: &'a Case,
    ) -> Self {
        CaseHost {
            vm,
            targets,
            moved: None,
            doc,
            base: format!("/cases/{index}"),
            case,
            replies: case
                .replies
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                .collect(),
            frozen: BTreeMap::new(),
            recovery_due: BTreeMap::new(),
            cancel_delivered: false,
            operator_resend: Default::default(),
            last_reply: BTreeMap::new(),
            completion_delivered: false,
            deadline: None,
            exercised: Exercised::default(),
        }
    }

    fn fault(&self, code: &str, pointer: &str, message: String, next: &str) -> Vec<Diagnostic> {
        vec![Diagnostic::error(
            code,
            self.doc.locate(&format!("{}{pointer}", self.base)),
            format!("case `{}`: {message}", self.case.id),
            next,
        )]
    }

    fn rejected(&self, pointer: &str, r: &Rejected) -> Vec<Diagnostic> {
        self.fault(
            codes::SCENARIO_REJECTED,
            pointer,
            format!("the run refuses this event: {}", r.message),
            "Script only what the workflow can receive at this point.",
        )
    }

    fn instant(&self, text: &str, pointer: &str) -> Result<Instant, Vec<Diagnostic>> {
        Instant::parse(text).map_err(|e| {
            self.fault(
                codes::SCENARIO_TIMESTAMP,
                pointer,
                format!("`{text}` is not an instant: {}", e.0),
                "Write an RFC 3339 instant such as '2026-10-09T09:00:00Z'.",
            )
        })
    }

    /// `at` when it can be written (years 0001–9999): the instant of an
    /// event the case delivers.
    fn writable(&self, at: Instant) -> Result<Instant, Vec<Diagnostic>> {
        at.format().map(|_| at).map_err(|e| {
            self.fault(
                codes::SCENARIO_TIMESTAMP,
                "",
                format!("an instant is out of range: {}", e.0),
                "Keep scenario times within years 0001-9999.",
            )
        })
    }

    fn after(
        &self,
        admitted: Instant,
        seconds: u64,
        pointer: &str,
    ) -> Result<Instant, Vec<Diagnostic>> {
        i64::try_from(seconds)
            .ok()
            .and_then(|s| admitted.plus_seconds(s))
            .ok_or_else(|| {
                self.fault(
                    codes::SCENARIO_TIMESTAMP,
                    pointer,
                    format!("{seconds} seconds after admission is out of range"),
                    "Use a smaller afterSeconds.",
                )
            })
    }

    /// Whether a dispatch with no reply left is the VM's own retry after an
    /// answer it retries by itself (retryable, or a failed read), not an
    /// operator's resend: the scenario state is then `retryable`.
    fn frozen_attempts_exhausted(&self, _state: &RunState, step: &str) -> bool {
        let consumed = self.case.replies.get(step).map_or(0, Vec::len)
            - self.replies.get(step).map_or(0, VecDeque::len);
        consumed > 0 && !self.operator_resend.contains(step)
    }

    fn next_reply(&mut self, step: &str) -> Option<Reply> {
        let reply = self.replies.get_mut(step).and_then(VecDeque::pop_front);
        if let Some(r) = &reply {
            self.operator_resend.remove(step);
            self.last_reply.insert(step.to_owned(), r.clone());
        }
        reply
    }

    /// Whether `step`'s call is never sent again once it may have been
    /// sent (an evaluation: the VM's [`coordinator_vm::RecoverySupport`]).
    fn is_evaluation(&self, step: &str) -> bool {
        coordinator_vm::recovery_support(self.vm.program(), step).is_some_and(|s| !s.retry_same)
    }

    fn answer(&mut self, step: &str, reply: Reply) -> Event {
        let unknown = matches!(reply, Reply::Uncertain { .. } | Reply::ReceiptUnresolved);
        self.recovery_due.insert(step.to_owned(), unknown);
        let answer = match reply {
            Reply::Success { value } => Answer::Success { value },
            Reply::Retryable { code } => Answer::Retryable { code },
            Reply::Refused { code } => Answer::Refused { code },
            Reply::Uncertain { code } => Answer::Uncertain { code },
            Reply::DeclaredRefusal { refusal_code } => Answer::DeclaredRefusal { refusal_code },
            Reply::ReceiptExpired => Answer::ReceiptExpired,
            Reply::ReceiptUnresolved => Answer::ReceiptUnresolved,
        };
        Event::CallAnswered {
            step: step.to_owned(),
            answer,
        }
    }

    fn unused_replies(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for (step, left) in &self.replies {
            if left.is_empty() {
                continue;
            }
            let used = self.case.replies.get(step).map_or(0, Vec::len) - left.len();
            let pointer = format!(
                "/replies/{}/{used}",
                coordinator_ir::pointer::escape_token(step)
            );
            // SPEC §7: nothing may follow receipt-expired, nor an unknown
            // evaluation answer; say so rather than only "never used".
            match self.last_reply.get(step) {
                Some(Reply::ReceiptExpired) => {
                    out.extend(self.fault(
                        codes::SCENARIO_REPLY_AFTER_RECEIPT_EXPIRED,
                        &pointer,
                        format!("nothing may follow `receipt-expired` for `{step}`: an expired receipt never proves either way, and nothing is sent or looked up for the call again"),
                        "Remove the replies after receipt-expired; the case then ends uncertain.",
                    ));
                    continue;
                }
                Some(Reply::Uncertain { .. }) if self.is_evaluation(step) => {
                    out.extend(self.fault(
                        codes::SCENARIO_REPLY_AFTER_UNKNOWN_EVALUATION,
                        &pointer,
                        format!("nothing may follow an uncertain answer for evaluation `{step}`: an evaluation that may have been sent is never sent again"),
                        "Remove the replies after the uncertain answer; the case then ends uncertain.",
                    ));
                    continue;
                }
                _ => {}
            }
            out.extend(self.fault(
                codes::SCENARIO_UNUSED_REPLY,
                &pointer,
                format!(
                    "{} scripted {} for `{step}` {} never used",
                    left.len(),
                    if left.len() == 1 { "reply" } else { "replies" },
                    if left.len() == 1 { "is" } else { "are" }
                ),
                "Remove the replies the run never reaches, or correct the expectations that lead to them.",
            ));
        }
        out
    }
}

fn end_state(end: &End) -> &RunState {
    match end {
        End::Settled(s) | End::Retryable(s) => s,
    }
}

fn scenario_state(end: &End) -> (&'static str, &RunState) {
    match end {
        End::Retryable(s) => ("retryable", s),
        End::Settled(s) => (settled_state_name(s), s),
    }
}

/// The scenario state (`expect.state`'s word) of a run that settled in
/// `s`: the one mapping from the VM's run status, which `test` compares
/// with and an exported case expects.
pub(crate) fn settled_state_name(s: &RunState) -> &'static str {
    match s.status {
        RunStatus::Finished => "completed",
        RunStatus::Failed => match s.failure.as_ref().map(|f| f.code) {
            Some(FailureCode::ProductRefused) => "refused",
            _ => "failed",
        },
        RunStatus::Attention => "uncertain",
        RunStatus::Running | RunStatus::CancelRequested => "retryable",
        RunStatus::Expired => "expired",
        RunStatus::Cancelled => "cancelled",
        RunStatus::CancelledAfterEffect => "cancelled-after-effect",
    }
}

fn show(v: &Value) -> String {
    canonical::to_string(v)
}

fn compare(case: &Case, end: &End) -> CaseReport {
    let (state_name, state) = scenario_state(end);
    let failure = state.failure.as_ref().map(|f| f.code.as_str().to_owned());
    let mut report = CaseReport {
        id: case.id.clone(),
        passed: true,
        difference: None,
        state: state_name.to_owned(),
        path: state.path.clone(),
        outcome: state.outcome.clone(),
        output: state.output.clone(),
        workflow_elapsed_seconds: state.elapsed_seconds,
        failure: failure.clone(),
        failure_detail: state
            .failure
            .as_ref()
            .map(|f| format!("step {}: {}", f.step, f.message)),
        moved: None,
        exercised: Exercised::default(),
    };
    let expect = &case.expect;
    let difference = if expect.path != state.path {
        Some(format!(
            "path: expected [{}], got [{}]",
            expect.path.join(", "),
            state.path.join(", ")
        ))
    } else if expect.state.as_str() != state_name {
        Some(format!(
            "state: expected {}, got {state_name}",
            expect.state.as_str()
        ))
    } else {
        let got_outcome = state.outcome.clone();
        let want_outcome = match &expect.outcome {
            ExpectedOutcome::Named { value } => Some(value.clone()),
            ExpectedOutcome::None => None,
        };
        if want_outcome != got_outcome {
            Some(format!(
                "outcome: expected {}, got {}",
                want_outcome.as_deref().unwrap_or("none"),
                got_outcome.as_deref().unwrap_or("none")
            ))
        } else if let Some(want) = &expect.output {
            let got = state.output.clone().unwrap_or(Value::Null);
            (canonical::to_vec(want) != canonical::to_vec(&got))
                .then(|| format!("output: expected {}, got {}", show(want), show(&got)))
        } else {
            None
        }
        .or_else(|| {
            expect
                .workflow_elapsed_seconds
                .filter(|want| *want != state.elapsed_seconds)
                .map(|want| {
                    format!(
                        "elapsed seconds: expected {want}, got {}",
                        state.elapsed_seconds
                    )
                })
        })
        .or_else(|| {
            let want = expect.failure.as_ref()?;
            let product = state.failure.as_ref().and_then(|f| f.product_code.clone());
            (Some(want) != failure.as_ref() && Some(want) != product.as_ref()).then(|| {
                format!(
                    "failure: expected {want}, got {}",
                    failure.as_deref().unwrap_or("none")
                )
            })
        })
    };
    if difference.is_some() {
        report.passed = false;
        report.difference = difference;
    }
    report
}

/// Loads the VM for a Program, as a located diagnostic on failure.
pub fn load_vm(program: &Program, file: &str) -> Result<Vm, Diagnostic> {
    Vm::new(program).map_err(|e| {
        Diagnostic::error(
            codes::SCENARIO_PROGRAM,
            coordinator_source::Located {
                file: file.to_owned(),
                line: 0,
                column: 0,
                pointer: String::new(),
            },
            format!("the compiled workflow cannot be loaded: {}", e.0),
            "Report this: a checked workflow must always load.",
        )
    })
}
