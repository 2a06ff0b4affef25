//! The data the VM consumes and produces: [`Event`]s in, [`Command`]s out,
//! and the [`RunState`] carried between them. All plain serde data; instants
//! are [`Instant`]s, whose serde form is their RFC 3339 text (the VM writes
//! them in UTC with `Z`, within years 0001–9999), so hosts never convert
//! time by hand and stored JSON reads as it always did.

use std::collections::BTreeMap;

use coordinator_ir::instant::Instant;
use coordinator_ir::StepId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::functions::FunctionError;

/// Everything that happens to a run after admission. Time enters only here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Event {
    /// The answer to the last [`Command::Dispatch`] or
    /// [`Command::LookupReceipt`] of call step `step` (its name).
    CallAnswered { step: String, answer: Answer },
    /// A timer the host scheduled is due at `at`: a wait-until wake, a
    /// wait-for timeout or the deadline. The VM decides what it means; a
    /// timer that is not (or no longer) due changes nothing.
    TimerFired { at: Instant },
    /// The completion awaited by wait-for step `step` (its name) arrived at
    /// `at` with `value`.
    CompletionObserved {
        step: String,
        value: Value,
        at: Instant,
    },
    /// A cancel request at `at`.
    CancelRequested { at: Instant },
    /// Operator recovery of a run held with an unknown effect: resend the
    /// same frozen command.
    RetrySame { at: Instant },
    /// Operator recovery of a run held with an unknown effect: look up the
    /// receipt (receipt-capable operations only).
    Reconcile { at: Instant },
}

/// A product's answer to a dispatch or receipt lookup (SPEC §6, §7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Answer {
    /// A 2xx answer, or the original response from a receipt lookup.
    Success { value: Value },
    /// Definitely not processed (408, 429, 503, refused before sending).
    Retryable { code: String },
    /// A definite refusal with the product's code.
    Refused { code: String },
    /// May or may not have been processed (timeout or reset after sending,
    /// 500, 502, 504).
    Uncertain { code: String },
    /// An owner-declared no-effect refusal (`breg.invoke-action/v1`).
    #[serde(rename_all = "camelCase")]
    DeclaredRefusal { refusal_code: String },
    /// Receipt lookup: the idempotency record expired (410).
    ReceiptExpired,
    /// Receipt lookup: still unknown (404).
    ReceiptUnresolved,
    /// The product answered 400 or another 4xx without a refusal code: the
    /// command broke the operation's contract and had no effect (SPEC §6).
    /// The run fails `invalid-command`, unless an earlier answer left the
    /// effect unknown (then it stays held).
    InvalidCommand {
        /// The HTTP status or product code, for inspection.
        code: String,
    },
    /// The product answered 2xx with a body that is not the operation's
    /// output (e.g. not JSON): the run fails `invalid-response`; a mutation's
    /// effect is recorded as accepted (SPEC §6).
    InvalidResponse {
        /// The HTTP status, for inspection.
        code: String,
    },
}

impl Answer {
    /// The answer's kind, as the scenario reply type names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Answer::Success { .. } => "success",
            Answer::Retryable { .. } => "retryable",
            Answer::Refused { .. } => "refused",
            Answer::Uncertain { .. } => "uncertain",
            Answer::DeclaredRefusal { .. } => "declared-refusal",
            Answer::ReceiptExpired => "receipt-expired",
            Answer::ReceiptUnresolved => "receipt-unresolved",
            Answer::InvalidCommand { .. } => "invalid-command",
            Answer::InvalidResponse { .. } => "invalid-response",
        }
    }
}

/// What the host must do, in order. Effects as data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Command {
    /// Send `dispatch.command` (the frozen operation input) for call step
    /// `dispatch.step`. Every attempt of one step carries the
    /// byte-identical command; `dispatch.attempt` counts from 1. The host
    /// derives the idempotency key from the step, never from the attempt.
    /// Serialised flat: `operation`, `needsIdempotencyKey` and the members
    /// of [`DispatchCommand`] side by side.
    #[serde(rename_all = "camelCase")]
    Dispatch {
        /// The operation alias.
        operation: String,
        /// Whether the operation carries an idempotency key (SPEC §5: the
        /// host derives it from the step).
        needs_idempotency_key: bool,
        /// What to send, where, and which attempt it is.
        #[serde(flatten)]
        dispatch: DispatchCommand,
    },
    /// Look up the receipt of call step `step`'s idempotency key; `lookup`
    /// counts the lookups of this step from 1.
    #[serde(rename_all = "camelCase")]
    LookupReceipt {
        step: String,
        operation: String,
        operation_id: String,
        connection: String,
        lookup: u32,
    },
    /// Deliver [`Event::TimerFired`] at `at` (or later).
    ScheduleWake { at: Instant, kind: WakeKind },
    /// Observe completion `completion` of the accepted call `call` (whose
    /// output is `call_output`) for wait-for step `step`; deliver
    /// [`Event::CompletionObserved`], and [`Event::TimerFired`] at
    /// `timeout_at` if nothing arrives first.
    #[serde(rename_all = "camelCase")]
    ObserveCompletion {
        step: String,
        call: String,
        completion: String,
        /// The connection of the call, which the source is observed through.
        connection: String,
        /// The product's handle of what is observed (the call's output
        /// member [`coordinator_ir::catalogue::COMPLETION_HANDLE`], e.g. a
        /// Casework review request id); `None` when the output has none (the
        /// wait then runs to its timeout).
        handle: Option<String>,
        timeout_at: Instant,
    },
    /// The run ended with `status` (details in the state).
    Ended { status: RunStatus },
}

/// One attempt of a call step as the VM prepares it: what to send, where,
/// and whether a resend is harmless. [`Command::Dispatch`] carries it, and
/// a host's dispatch job stores it as it is (`coordinator-ports`'
/// `JobKind::Dispatch`), so these fields are declared once. Its serde form
/// is camelCase members (`step`, `operationId`, `connection`, `action`,
/// `command`, `attempt`, `resendSafe`), flattened into the command or job
/// that carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchCommand {
    /// The call step's name.
    pub step: String,
    /// The catalogue operation, e.g. `messaging.submit-message/v1`.
    pub operation_id: String,
    /// The logical connection name.
    pub connection: String,
    /// The BReg action (`breg.invoke-action/v1` only).
    pub action: Option<String>,
    /// The frozen operation input (SPEC §5.1), byte-identical on every
    /// attempt of the step.
    pub command: Value,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// Whether sending it again is harmless (a read): the host may let a
    /// crashed attempt go again without an operator. The host still never
    /// resends on its own: it reports the interrupted attempt as
    /// [`Answer::Uncertain`] and the VM decides.
    pub resend_safe: bool,
}

/// Why a timer exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeKind {
    /// The run deadline (scheduled once, at admission).
    Deadline,
    /// The instant of a `wait-until`.
    Wake,
    /// A `wait-for` timeout (also announced by [`Command::ObserveCompletion`]).
    Timeout,
}

/// The run's state (SPEC §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Progressing: a call in flight or a wait.
    Running,
    /// A cancel arrived while a call was in flight; its answer ends the run.
    CancelRequested,
    /// Held: an effect is `unknown`; only an operator moves it on.
    Attention,
    /// Reached a `finish`.
    Finished,
    /// Failed; see [`RunState::failure`].
    Failed,
    /// The deadline passed, or a wait-for timed out without `onTimeout`.
    Expired,
    /// Cancelled (with or without an `onCancel` route).
    Cancelled,
    /// Cancelled after an accepted mutation, with no `onCancel` route.
    CancelledAfterEffect,
}

impl RunStatus {
    /// Whether the run has ended (no event moves it any more).
    pub fn is_terminal(self) -> bool {
        match self {
            RunStatus::Running | RunStatus::CancelRequested | RunStatus::Attention => false,
            RunStatus::Finished
            | RunStatus::Failed
            | RunStatus::Expired
            | RunStatus::Cancelled
            | RunStatus::CancelledAfterEffect => true,
        }
    }

    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::CancelRequested => "cancel-requested",
            RunStatus::Attention => "attention",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Expired => "expired",
            RunStatus::Cancelled => "cancelled",
            RunStatus::CancelledAfterEffect => "cancelled-after-effect",
        }
    }
}

/// What a call did to the product, as far as the run knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EffectState {
    Accepted,
    Unknown,
}

/// A failure code (SPEC §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureCode {
    /// A definite refusal; the product's code is in [`Failure::product_code`].
    ProductRefused,
    /// A mapping could not be evaluated at run time (a missing member, a
    /// missing step output, an `until` that is not an instant, a `finish`
    /// output the outcome schema refuses, a case label that is not a case).
    MappingInvalid,
    /// The mapped call input does not fit the operation's input schema.
    InvalidCommand,
    /// A success (or completion) value does not fit its schema.
    InvalidResponse,
    /// A Function failed; see [`Failure::function`].
    FunctionError,
}

impl FailureCode {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::ProductRefused => "product-refused",
            FailureCode::MappingInvalid => "mapping-invalid",
            FailureCode::InvalidCommand => "invalid-command",
            FailureCode::InvalidResponse => "invalid-response",
            FailureCode::FunctionError => "function-error",
        }
    }
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Failure {
    pub code: FailureCode,
    /// The step where it failed.
    pub step: String,
    /// The product's own refusal code (`product-refused`).
    pub product_code: Option<String>,
    /// The Function error (`function-error`).
    pub function: Option<FunctionError>,
    /// A sentence; for schema failures it names the JSON Pointer.
    pub message: String,
    /// Where it broke, as a JSON Pointer: for `invalid-command`, the member
    /// of the computed command that broke the operation's contract; for
    /// `mapping-invalid`, the member a mapping read and did not find, or
    /// the member of an outcome's output that broke its schema. `None`
    /// when the failure has no such place (a product's refusal, a Function
    /// error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Where a call step stands. The VM's own: hosts ask [`crate::Vm::expects`],
/// [`crate::Vm::held_call`] and [`crate::Vm::current_call`] instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CallPhase {
    /// A dispatch is out; waiting for its answer.
    Dispatched,
    /// Effect unknown; waiting for an operator (`attention`).
    Held,
    /// A receipt lookup is out; waiting for its answer.
    LookingUpReceipt,
}

/// What the run waits for. The VM's own record of pending work: hosts ask
/// [`crate::Vm::current_wait`], [`crate::wait_kind`] and the other queries
/// of `view.rs` instead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) enum Pending {
    /// A call step in progress.
    #[serde(rename_all = "camelCase")]
    Call {
        step: StepId,
        /// The frozen operation input, sent byte-identical on every attempt.
        command: Value,
        /// Dispatches so far (1 after the first).
        attempt: u32,
        /// Receipt lookups so far.
        lookups: u32,
        phase: CallPhase,
        /// Whether an earlier answer left the effect unknown.
        unknown: bool,
        /// Whether a receipt lookup answered `idempotency.expired`: nothing
        /// may be sent or looked up for this step any more.
        receipt_expired: bool,
        /// Kind and code of the last answer, for inspection.
        last_answer: Option<String>,
    },
    /// A wait-until (or a wait for the deadline).
    Wake { step: StepId, at: Instant },
    /// A wait-for.
    #[serde(rename_all = "camelCase")]
    Completion { step: StepId, timeout_at: Instant },
}

/// How a cancel request is being honoured (the VM's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CancelMode {
    /// Arrived while a call was in flight: the answer ends the run.
    InFlight,
    /// Arrived during a wait-for with `onCancel`: the run follows that
    /// route and ends `cancelled` at its finish.
    Route,
}

/// A recorded cancel request (the VM's own).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelRecord {
    pub(crate) at: Instant,
    pub(crate) mode: CancelMode,
}

/// A run's whole state: plain data, serializable to JSON, bound to the
/// Program it was admitted under and to nothing else. Hosts store it whole
/// (serde) and read its public fields; what the run waits for and how a
/// cancel is honoured are the VM's own (ask [`crate::Vm::current_wait`],
/// [`crate::Vm::held_call`], [`crate::Vm::expects`], ...). A host that must
/// build a state by hand starts from [`RunState::new`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunState {
    pub status: RunStatus,
    /// The run input, as admitted.
    pub input: Value,
    /// When the run was admitted.
    pub admitted_at: Instant,
    /// `admitted_at` + the Program's `deadline_seconds`.
    pub deadline_at: Instant,
    /// The latest instant the run has seen (never past the deadline).
    pub now: Instant,
    /// Whole seconds from `admitted_at` to `now`.
    pub elapsed_seconds: u64,
    /// Names of the steps visited, in order.
    pub path: Vec<String>,
    /// Outputs of completed `call` and `wait-for` steps, by step name.
    pub outputs: BTreeMap<String, Value>,
    /// Effects of mutation and evaluation calls, by step name.
    pub effects: BTreeMap<String, EffectState>,
    /// What the run waits for; `None` once it has ended.
    pub(crate) pending: Option<Pending>,
    /// The cancel request, once one arrived.
    pub(crate) cancel: Option<CancelRecord>,
    /// The outcome name once a `finish` was reached.
    pub outcome: Option<String>,
    /// The outcome's output once a `finish` was reached.
    pub output: Option<Value>,
    pub failure: Option<Failure>,
    /// When the run ended (the run's `now` then).
    pub ended_at: Option<Instant>,
}

impl RunState {
    /// A state in `status` that has recorded nothing yet: run input
    /// `input`, admitted at `admitted_at` with deadline
    /// `deadline_at`, at `now`, 0 elapsed seconds; no path, step outputs,
    /// effects, wait, cancel, outcome, output, failure or end. The other
    /// public fields may be set after (e.g. a store's erased run sets
    /// `elapsed_seconds` and `ended_at`).
    pub fn new(
        status: RunStatus,
        input: Value,
        admitted_at: Instant,
        deadline_at: Instant,
        now: Instant,
    ) -> RunState {
        RunState {
            status,
            input,
            admitted_at,
            deadline_at,
            now,
            elapsed_seconds: 0,
            path: Vec::new(),
            outputs: BTreeMap::new(),
            effects: BTreeMap::new(),
            pending: None,
            cancel: None,
            outcome: None,
            output: None,
            failure: None,
            ended_at: None,
        }
    }
}

/// The result of one admission or event: the new state, the commands to
/// perform in order, the status (the same as `state.status`) and the edges
/// the run took while the event was applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resumed {
    pub state: RunState,
    pub commands: Vec<Command>,
    pub status: RunStatus,
    /// The edges the run took applying this admission or event, in the
    /// order taken (empty when it stayed in one step or ended there). Not
    /// part of the state: a host that wants the record keeps it (the
    /// scenario host's coverage does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<EdgeTaken>,
}

/// Which authored member of a step an edge comes from: the names
/// `workflow.yaml` and explain's `successors` give them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Edge {
    /// `next` of a call, wait-until or wait-for.
    Next,
    /// The case `label` of a choose.
    Case { label: String },
    /// `onDeclaredRefusal` of a call (an owner-declared no-effect refusal).
    OnDeclaredRefusal,
    /// `onTimeout` of a wait-for.
    OnTimeout,
    /// `onCancel` of a wait-for.
    OnCancel,
}

/// One edge a run took: out of step `from` (its name) by member `edge` to
/// step `to`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeTaken {
    pub from: String,
    pub edge: Edge,
    pub to: String,
}

/// Why an admission or event was refused. The state is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    pub code: RejectCode,
    pub message: String,
}

/// The kinds of [`Rejected`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectCode {
    /// The input does not fit the workflow's input schema.
    InputInvalid,
    /// An instant is not RFC 3339, or out of range.
    InstantInvalid,
    /// The run has ended.
    RunEnded,
    /// The event does not fit what the run waits for (wrong step, a
    /// receipt answer without a lookup, an answer while held, ...).
    Unexpected,
    /// Retry-same or reconcile on a run that is not held.
    NotHeld,
    /// Retry-same of an evaluation, or after an expired receipt.
    NotResendable,
    /// Reconcile of an operation without receipts, or after an expired one.
    NoReceipt,
    /// Reconcile after the product's receipt expired: nothing may be looked
    /// up for the call any more (seed 000 `receipt.expired`).
    ReceiptExpired,
    /// A trigger's mapping reads an event member the event lacks (the
    /// message names its JSON Pointer, never a value).
    EventMemberMissing,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Rejected {}
