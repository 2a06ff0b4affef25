//! Runs one scenario case on a virtual clock (SPEC §7), driving the VM exactly
//! as the service does: the VM decides, this host only answers its commands
//! from the script and delivers timed events in order.
//!
//! Timing: the clock starts at `admittedAt`, moves only while the run waits,
//! and never passes the deadline. Calls and automatic retries take no virtual
//! time. At one instant the order is the VM's
//! ([`coordinator_vm::SAME_INSTANT_ORDER`]). A completion scripted before
//! its wait began is observed when the wait begins.

use std::collections::{BTreeMap, VecDeque};

use coordinator_ir::instant::Instant;
use coordinator_ir::{canonical, Program};
use coordinator_source::{Diagnostic, YamlDocument};
use coordinator_vm::{
    Answer, Command, Event, FailureCode, Rejected, RunState, RunStatus, TimedEvent, Vm, WaitKind,
    WakeKind,
};
use serde::Serialize;
use serde_json::Value;

use super::file::{Case, CompletionScript, ExpectedOutcome, RecoveryAction, Reply};

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
    /// JSON Pointer).
    pub failure_detail: Option<String>,
}

/// Runs case number `index` of the file. `Err` carries located diagnostics
/// for faults of the scenario file itself (a call reached with nothing
/// scripted, a reply never used, a recovery the VM refuses, ...). Replies
/// left unused are only reported for a case whose expectations hold: when
/// the run went elsewhere, the case FAILs with the first difference instead.
pub fn run_case(
    vm: &Vm,
    doc: &YamlDocument,
    index: usize,
    case: &Case,
) -> Result<CaseReport, Vec<Diagnostic>> {
    let mut host = CaseHost::new(vm, doc, index, case);
    let end = host.drive()?;
    let report = compare(case, &end);
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
    vm: &'a Vm,
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
}

impl<'a> CaseHost<'a> {
    fn new(vm: &'a Vm, doc: &'a YamlDocument, index: usize, case: &'a Case) -> Self {
        CaseHost {
            vm,
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
            "coordinator.scenario.rejected",
            pointer,
            format!("the run refuses this event: {}", r.message),
            "Script only what the workflow can receive at this point.",
        )
    }

    fn instant(&self, text: &str, pointer: &str) -> Result<Instant, Vec<Diagnostic>> {
        Instant::parse(text).map_err(|e| {
            self.fault(
                "coordinator.scenario.timestamp",
                pointer,
                format!("`{text}` is not an instant: {}", e.0),
                "Write an RFC 3339 instant such as '2026-10-09T09:00:00Z'.",
            )
        })
    }

    fn format(&self, at: Instant) -> Result<String, Vec<Diagnostic>> {
        at.format().map_err(|e| {
            self.fault(
                "coordinator.scenario.timestamp",
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
                    "coordinator.scenario.timestamp",
                    pointer,
                    format!("{seconds} seconds after admission is out of range"),
                    "Use a smaller afterSeconds.",
                )
            })
    }

    fn drive(&mut self) -> Result<End, Vec<Diagnostic>> {
        let admitted = self.instant(&self.case.admitted_at, "/admittedAt")?;
        let resumed = self
            .vm
            .admit(self.case.input.clone(), &self.case.admitted_at)
            .map_err(|r| self.rejected("/input", &r))?;
        let mut state = resumed.state;
        let mut queue: VecDeque<Command> = resumed.commands.into();
        let mut timers: Vec<Instant> = Vec::new();
        // Bounded: every loop turn consumes a reply, a timed event or a recovery.
        for _ in 0..10_000 {
            // 1. Immediate commands: calls and receipt lookups take no time.
            if let Some(cmd) = queue.pop_front() {
                let event = match cmd {
                    Command::Dispatch { step, command, .. } => {
                        let bytes = canonical::to_vec(&command);
                        match self.frozen.get(&step) {
                            Some(first) if *first != bytes => {
                                return Err(self.fault(
                                    "coordinator.scenario.command-changed",
                                    "",
                                    format!("a later attempt of `{step}` sent a different command"),
                                    "Report this: every attempt must send the frozen command.",
                                ))
                            }
                            Some(_) => {}
                            None => {
                                self.frozen.insert(step.clone(), bytes);
                            }
                        }
                        match self.next_reply(&step) {
                            Some(reply) => match reply {
                                Reply::ReceiptExpired | Reply::ReceiptUnresolved => {
                                    return Err(self.fault(
                                        "coordinator.scenario.receipt-without-reconcile",
                                        &format!("/replies/{step}"),
                                        format!("`{step}` gets a receipt answer where it sent a command"),
                                        "Script receipt answers only after an unknown answer with recovery reconcile.",
                                    ))
                                }
                                other => self.answer(&step, other),
                            },
                            None => {
                                if self.frozen_attempts_exhausted(&state, &step) {
                                    return Ok(End::Retryable(state));
                                }
                                return Err(self.fault(
                                    "coordinator.scenario.unscripted-call",
                                    "/replies",
                                    format!("the run reaches call `{step}` with no reply scripted for it"),
                                    &format!("Add replies for `{step}` under replies."),
                                ));
                            }
                        }
                    }
                    Command::LookupReceipt { step, .. } => match self.next_reply(&step) {
                        Some(reply) => match reply {
                            Reply::Success { .. } | Reply::ReceiptExpired | Reply::ReceiptUnresolved => {
                                self.answer(&step, reply)
                            }
                            Reply::Retryable { .. }
                            | Reply::Refused { .. }
                            | Reply::Uncertain { .. }
                            | Reply::DeclaredRefusal { .. } => {
                                return Err(self.fault(
                                    "coordinator.scenario.reconcile-reply",
                                    &format!("/replies/{step}"),
                                    format!("after reconcile, `{step}` needs a receipt answer (success, receipt-unresolved or receipt-expired)"),
                                    "Script the receipt lookup's answer.",
                                ))
                            }
                        },
                        None => {
                            return Err(self.fault(
                                "coordinator.scenario.unscripted-call",
                                "/replies",
                                format!("reconcile of `{step}` has no receipt answer scripted"),
                                &format!("Add the receipt answer for `{step}` under replies."),
                            ))
                        }
                    },
                    Command::ScheduleWake { at, kind } => {
                        let t = self.instant(&at, "")?;
                        if kind == WakeKind::Deadline {
                            self.deadline = Some(t);
                        }
                        timers.push(t);
                        continue;
                    }
                    Command::ObserveCompletion { step, timeout_at, .. } => {
                        let t = self.instant(&timeout_at, "")?;
                        timers.push(t);
                        let _ = step;
                        self.completion_delivered = false;
                        continue;
                    }
                    Command::Ended { .. } => continue,
                };
                let resumed = self
                    .vm
                    .resume(&state, &event)
                    .map_err(|r| self.rejected("/replies", &r))?;
                state = resumed.state;
                queue.extend(resumed.commands);
                continue;
            }
            if state.status.is_terminal() {
                return Ok(End::Settled(state));
            }
            let now = self.instant(&state.now, "")?;
            // 2. An operator's recovery after an unknown answer.
            if state.status == RunStatus::Attention {
                let step = self
                    .vm
                    .held_call(&state)
                    .map(str::to_owned)
                    .unwrap_or_default();
                // The operator acts after an unknown answer only while the
                // script still holds an answer for the step: when the replies
                // ran out on an unknown answer the run stays held (uncertain).
                let due = self.recovery_due.get(&step).copied().unwrap_or(false)
                    && self.replies.get(&step).is_some_and(|left| !left.is_empty());
                match self.case.recovery.get(&step) {
                    Some(action) if due => {
                        self.recovery_due.insert(step.clone(), false);
                        if *action == RecoveryAction::RetrySame {
                            self.operator_resend.insert(step.clone());
                        }
                        let at = self.format(now)?;
                        let event = match action {
                            RecoveryAction::RetrySame => Event::RetrySame { at },
                            RecoveryAction::Reconcile => Event::Reconcile { at },
                        };
                        let resumed = self
                            .vm
                            .resume(&state, &event)
                            .map_err(|r| self.rejected(&format!("/recovery/{step}"), &r))?;
                        state = resumed.state;
                        queue.extend(resumed.commands);
                        continue;
                    }
                    _ => {
                        // A held run still takes a scripted cancel that falls
                        // before the deadline; otherwise the case ends held.
                        if let Some(event) = self.cancel_while_held(admitted, now)? {
                            self.cancel_delivered = true;
                            let resumed = self
                                .vm
                                .resume(&state, &event)
                                .map_err(|r| self.rejected("/cancel", &r))?;
                            state = resumed.state;
                            queue.extend(resumed.commands);
                            continue;
                        }
                        return Ok(End::Settled(state));
                    }
                }
            }
            // 3. The run waits: deliver the earliest timed event.
            let waiting_on = self
                .vm
                .current_wait(&state)
                .filter(|w| w.kind == WaitKind::For)
                .map(|w| w.step.to_owned());
            if let Some(step) = &waiting_on {
                if !self.case.completions.contains_key(step) {
                    return Err(self.fault(
                        "coordinator.scenario.unscripted-wait",
                        "/completions",
                        format!(
                            "the run reaches wait-for `{step}` with no completion scripted for it"
                        ),
                        &format!("Add a completion for `{step}` (completed or never)."),
                    ));
                }
            }
            let mut candidates: Vec<(Instant, TimedEvent, Event)> = Vec::new();
            if let Some(d) = self.deadline {
                if d >= now {
                    candidates.push((
                        d,
                        TimedEvent::Deadline,
                        Event::TimerFired {
                            at: self.format(d)?,
                        },
                    ));
                }
            }
            if let (Some(c), false) = (&self.case.cancel, self.cancel_delivered) {
                let t = self
                    .after(admitted, c.after_seconds, "/cancel/afterSeconds")?
                    .max(now);
                candidates.push((
                    t,
                    TimedEvent::Cancel,
                    Event::CancelRequested {
                        at: self.format(t)?,
                    },
                ));
            }
            if let (Some(step), false) = (&waiting_on, self.completion_delivered) {
                if let Some(CompletionScript::Completed {
                    after_seconds,
                    value,
                }) = self.case.completions.get(step)
                {
                    let t = self
                        .after(admitted, *after_seconds, &format!("/completions/{step}"))?
                        .max(now);
                    candidates.push((
                        t,
                        TimedEvent::Completion,
                        Event::CompletionObserved {
                            step: step.clone(),
                            value: value.clone(),
                            at: self.format(t)?,
                        },
                    ));
                }
            }
            timers.retain(|t| *t >= now);
            for t in &timers {
                if Some(*t) != self.deadline {
                    candidates.push((
                        *t,
                        TimedEvent::Timer,
                        Event::TimerFired {
                            at: self.format(*t)?,
                        },
                    ));
                }
            }
            // At one instant, the VM's order (SPEC §7).
            candidates.sort_by_key(|a| (a.0, a.1.rank()));
            let Some((at, kind, event)) = candidates.into_iter().next() else {
                return Ok(End::Settled(state));
            };
            match kind {
                TimedEvent::Cancel => self.cancel_delivered = true,
                TimedEvent::Completion => self.completion_delivered = true,
                TimedEvent::Deadline => {
                    timers.retain(|t| *t != at);
                    self.deadline = None;
                }
                TimedEvent::Timer => timers.retain(|t| *t != at),
            }
            let resumed = self
                .vm
                .resume(&state, &event)
                .map_err(|r| self.rejected("", &r))?;
            state = resumed.state;
            queue.extend(resumed.commands);
        }
        Err(self.fault(
            "coordinator.scenario.no-progress",
            "",
            "the case did not settle within 10,000 events".into(),
            "Check the replies and completions for a loop.",
        ))
    }

    /// The scripted cancel, when it is still to come and falls before the
    /// deadline (at the deadline instant the deadline comes first).
    fn cancel_while_held(
        &self,
        admitted: Instant,
        now: Instant,
    ) -> Result<Option<Event>, Vec<Diagnostic>> {
        let Some(c) = (!self.cancel_delivered)
            .then_some(())
            .and(self.case.cancel.as_ref())
        else {
            return Ok(None);
        };
        let t = self
            .after(admitted, c.after_seconds, "/cancel/afterSeconds")?
            .max(now);
        if self.deadline.is_some_and(|d| t >= d) {
            return Ok(None);
        }
        Ok(Some(Event::CancelRequested {
            at: self.format(t)?,
        }))
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
                        "coordinator.scenario.reply-after-receipt-expired",
                        &pointer,
                        format!("nothing may follow `receipt-expired` for `{step}`: an expired receipt never proves either way, and nothing is sent or looked up for the call again"),
                        "Remove the replies after receipt-expired; the case then ends uncertain.",
                    ));
                    continue;
                }
                Some(Reply::Uncertain { .. }) if self.is_evaluation(step) => {
                    out.extend(self.fault(
                        "coordinator.scenario.reply-after-unknown-evaluation",
                        &pointer,
                        format!("nothing may follow an uncertain answer for evaluation `{step}`: an evaluation that may have been sent is never sent again"),
                        "Remove the replies after the uncertain answer; the case then ends uncertain.",
                    ));
                    continue;
                }
                _ => {}
            }
            out.extend(self.fault(
                "coordinator.scenario.unused-reply",
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

fn scenario_state(end: &End) -> (&'static str, &RunState) {
    match end {
        End::Retryable(s) => ("retryable", s),
        End::Settled(s) => (
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
            },
            s,
        ),
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
            "coordinator.scenario.program",
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
