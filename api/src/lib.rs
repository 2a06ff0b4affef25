//! `coordinator-api`: request and response bodies of the coordinator HTTP API
//! (SPEC §8), shared by the server, `coordinatorctl` and tests.
//!
//! All bodies are JSON with camelCase members. Errors are RFC 9457 problem
//! documents ([`Problem`]) with `Content-Type: application/problem+json` and a
//! stable `code` (seed 000, "Codes you see").

#![warn(missing_docs)]

pub mod openapi;
pub mod problems;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest request body the service accepts, in bytes (SPEC §8: 64 KiB).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Largest body of `POST /v1/runs/{run}/move`, in bytes (1 MiB): the only
/// route above [`MAX_BODY_BYTES`], since a move certificate lists every
/// wait of a workflow with its findings and outgrows 64 KiB for a big one
/// (docs/decisions.md "Moving waiting runs: the service's part").
pub const MAX_MOVE_BODY_BYTES: usize = 1024 * 1024;

/// Default page size of `GET /v1/runs`.
pub const DEFAULT_LIST_LIMIT: u32 = 20;
/// Largest page size of `GET /v1/runs`.
pub const MAX_LIST_LIMIT: u32 = 100;

/// The most bytes the review-completion bearer token may hold (a
/// connection's `completion.bearerTokenRef`, docs/runtime.md), as the
/// document states it: the runtime check refuses a longer or empty one at
/// startup with `secret.content`
/// (`coordinator_runtime::secrets::MAX_COMPLETION_TOKEN_BYTES`, which the
/// layering keeps apart from this crate; a server test holds the two
/// equal), so a longer token presented to `POST /v1/review-completions`
/// is never accepted.
pub const MAX_COMPLETION_TOKEN_BYTES: usize = 4096;

/// The `cursor` of `GET /v1/runs` and the `nextCursor` of its answer:
/// the hexadecimal (lowercase) of `runs-before:<sequence>` with a decimal
/// sequence of at most 18 digits, as the run store writes it. Every text
/// of this form is a page position the service accepts (the runs before
/// that sequence); any other is 400 `request.invalid`. The contract
/// journey (server/tests/contract.rs) holds the cursors the service writes
/// to this pattern.
pub const LIST_CURSOR_PATTERN: &str = "^72756e732d6265666f72653a(3[0-9]){1,18}$";

/// Longest accepted `Idempotency-Key` of `POST /v1/runs`, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 255;

/// The characters an `Idempotency-Key` may hold, as the document's
/// `pattern`: visible ASCII (`!` to `~`), which is exactly what
/// [`idempotency_key_valid`] checks byte by byte.
pub const IDEMPOTENCY_KEY_PATTERN: &str = "^[!-~]+$";

/// Whether `key` is an `Idempotency-Key` the service accepts: 1 to
/// [`MAX_IDEMPOTENCY_KEY_BYTES`] visible ASCII characters
/// ([`IDEMPOTENCY_KEY_PATTERN`]); else 400 `idempotency.key-required`.
pub fn idempotency_key_valid(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_IDEMPOTENCY_KEY_BYTES
        && key.bytes().all(|b| b.is_ascii_graphic())
}

/// The longest wait `GET /v1/runs/{run}` takes with `Prefer: wait=N`
/// (RFC 7240), in seconds; a longer one is 400 `request.wait-too-long`.
pub const MAX_RUN_WAIT_SECONDS: u64 = 60;

/// Every state a run can be in, as `RunStatus.state` spells it and
/// `GET /v1/runs?state=` accepts it (the engine's run statuses; a server
/// test holds the two equal).
pub const RUN_STATES: [&str; 8] = [
    "running",
    "attention",
    "cancel-requested",
    "finished",
    "failed",
    "cancelled",
    "cancelled-after-effect",
    "expired",
];

/// The states of [`RUN_STATES`] a run has ended in (the engine's
/// terminal statuses; a server test holds the two equal): what
/// `Prefer: wait=N` waits for. `attention` and `cancel-requested` have not
/// ended.
pub const ENDED_RUN_STATES: [&str; 5] = [
    "finished",
    "failed",
    "cancelled",
    "cancelled-after-effect",
    "expired",
];

/// Every effect a call step can have, as `InspectedStep.effect` spells it
/// and `GET /v1/runs?effect=` accepts it (the engine's effect states; a
/// server test holds the two equal).
pub const EFFECT_STATES: [&str; 2] = ["accepted", "unknown"];

/// The schema of an `Option<T>` member that is always sent, `null` for
/// `None`: required and nullable. (A member omitted when `None` is
/// `skip_serializing_if` and its schema is `T`'s: optional, never `null`.)
struct Nullable<T>(std::marker::PhantomData<T>);

impl<T: JsonSchema> JsonSchema for Nullable<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Nullable_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<Option<T>>()
    }
}

/// The schema of a run state: one of [`RUN_STATES`].
fn run_state_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": RUN_STATES})
}

/// The schema of a `nextCursor`: a [`LIST_CURSOR_PATTERN`] cursor, or
/// `null` on the last page.
fn next_cursor_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "pattern": LIST_CURSOR_PATTERN})
}

/// The schema of an attestation the service requires to be `true`
/// (else 400 `request.invalid`).
fn attested_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "boolean", "const": true})
}

/// The schema of an RFC 3339 instant the service reads
/// (`format: date-time`, the profile of RFC 3339 §5.6 the service parses).
fn date_time_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "format": "date-time"})
}

/// `POST /v1/runs` body; the `Idempotency-Key` header carries the key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRun {
    /// The workflow name.
    pub workflow: String,
    /// The expected revision (`sha256:<hex>`); 409 unless it is active.
    pub revision: String,
    /// The run input, checked against the workflow's input schema.
    pub input: Value,
}

/// A run's status (`GET /v1/runs/{run}`, and the answer to a start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// The run id.
    pub run: String,
    /// The workflow name.
    pub workflow: String,
    /// The revision the run is on now (`sha256:<hex>`): the one it was
    /// admitted under, unless an operator moved it (`moves`).
    pub revision: String,
    /// `running`, `attention`, `cancel-requested`, `finished`, `failed`,
    /// `cancelled`, `cancelled-after-effect` or `expired`.
    #[schemars(schema_with = "run_state_schema")]
    pub state: String,
    /// When the run was admitted (RFC 3339).
    pub admitted_at: String,
    /// When the deadline ends the run `expired` (RFC 3339).
    pub deadline_at: String,
    /// When the run ended (RFC 3339); `null` while it has not.
    #[schemars(with = "Nullable<String>")]
    pub ended_at: Option<String>,
    /// The outcome, once a finish was reached; else `null`.
    #[schemars(with = "Nullable<String>")]
    pub outcome: Option<String>,
    /// The finish output (only what the workflow declares to publish);
    /// `null` before.
    #[schemars(with = "Nullable<Value>")]
    pub output: Option<Value>,
    /// The failure code of a failed run (`product-refused`, `mapping-invalid`, ...);
    /// else `null`.
    #[schemars(with = "Nullable<String>")]
    pub failure: Option<String>,
    /// Where the run broke, as a JSON Pointer: for `invalid-command`, the
    /// member of the computed command that broke the operation's contract;
    /// for `mapping-invalid`, the member a mapping read and did not find
    /// (or the member of an outcome's output that broke its schema);
    /// else `null`.
    #[schemars(with = "Nullable<String>")]
    pub failure_path: Option<String>,
    /// For `product-refused` (and a product's `invalid-command`): the
    /// product's own refusal code. Present only then (never `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub refusal_code: Option<String>,
    /// Retention erased the run's payloads (seed 000 "Erase ended
    /// payloads"): `outcome`, `output` and `failure` are gone, the state
    /// and timestamps remain. Present only when `true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub payload_erased: bool,
    /// The restore review (docs/operations.md "Restore from a backup"):
    /// `required` while a prepared command the restore hold held back
    /// waits for an operator, then how it was reviewed: `reconciled`,
    /// `cancelled` or `attested`. Absent on runs the restore hold never
    /// held back (never `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub review: Option<String>,
    /// While the run's next call waits for its connection's flow control
    /// (the connection's `limits`, or a product's `Retry-After`;
    /// docs/runtime.md "Flow control"): the connection's name. Absent
    /// otherwise (never `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub waiting_for: Option<String>,
    /// The run's moves to another revision of its workflow (`POST
    /// /v1/runs/{run}/move`), oldest first. Absent when it never moved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<RunMoveRecord>,
}

/// One move of a run to another revision of its workflow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunMoveRecord {
    /// When the move was committed (RFC 3339, whole seconds).
    pub at: String,
    /// The revision the run left (`sha256:<hex>`).
    pub from_revision: String,
    /// The revision the run moved to.
    pub to_revision: String,
    /// The wait step of the revision it left.
    pub from_step: String,
    /// The step of the new revision it waits at.
    pub to_step: String,
    /// The digest of the move certificate that allowed it
    /// (`sha256:<hex>`).
    pub certificate: String,
}

/// `GET /v1/runs` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<RunStatus>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    #[schemars(schema_with = "next_cursor_schema")]
    pub next_cursor: Option<String>,
}

/// `GET /v1/runs/{run}/inspect` answer: steps, effects and waits, never
/// inputs, product responses or prepared commands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// The run's status.
    pub status: RunStatus,
    /// Visited steps in order.
    pub steps: Vec<InspectedStep>,
}

/// One visited step in an [`Inspection`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InspectedStep {
    /// The step name.
    pub name: String,
    /// `call`, `choose`, `wait-until`, `wait-for` or `finish`.
    pub kind: String,
    /// For mutation and evaluation calls: `accepted` or `unknown`; else
    /// `null`.
    #[schemars(with = "Nullable<String>")]
    pub effect: Option<String>,
    /// For calls: dispatch attempts so far; else `null`.
    #[schemars(with = "Nullable<u32>")]
    pub attempts: Option<u32>,
    /// For waits: when the wait is due (RFC 3339); else `null`.
    #[schemars(with = "Nullable<String>")]
    pub due_at: Option<String>,
    /// For wait-for steps: how many times the source was observed; else
    /// `null`.
    #[schemars(with = "Nullable<u32>")]
    pub observations: Option<u32>,
    /// The restore hold found this call's prepared command `ready` or
    /// `sending` (it may have been sent after the backup) and held it back
    /// as an `unknown` effect for review. Present only when `true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
    /// For calls whose next attempt waits for its connection's flow
    /// control: which connection, the limit that holds it, since when.
    /// Absent otherwise (never `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<CallWaiting>,
    /// When the run reached the step (RFC 3339, the coordinator's clock at
    /// the commit). Absent when not recorded (a step visited before the
    /// coordinator kept step times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub started_at: Option<String>,
    /// When the run left the step, or ended at it (RFC 3339). Absent while
    /// the run is at it (or when not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub ended_at: Option<String>,
    /// For waits: when the wait was due (RFC 3339), kept after it ended
    /// (`dueAt` is the current wait's only). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub wait_due_at: Option<String>,
    /// For waits that ended: how — `woke` (a wait-until's instant came),
    /// `completed` (a wait-for's completion was observed), `timed-out`,
    /// `cancelled` or `deadline` (the run's deadline ended it). Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "wait_ended_schema")]
    pub wait_ended: Option<String>,
    /// For calls: the latest answers the step received (dispatch attempts
    /// and receipt lookups), oldest first, at most 8 (`attempts` counts
    /// every attempt). Absent when there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<InspectedAnswer>,
}

/// The schema of [`InspectedStep::wait_ended`].
fn wait_ended_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["woke", "completed", "timed-out", "cancelled", "deadline"]
    })
}

/// One answer a call step received, in an [`InspectedStep`]: its kind and
/// code, never a body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InspectedAnswer {
    /// When it was answered (RFC 3339, the coordinator's clock).
    pub at: String,
    /// The dispatch attempt it answered, from 1; `0` for a receipt lookup
    /// (`reconcile`).
    pub attempt: u32,
    /// `success`, `retryable`, `refused`, `uncertain`, `declared-refusal`,
    /// `receipt-expired`, `receipt-unresolved`, `invalid-command` or
    /// `invalid-response`.
    pub kind: String,
    /// The answer's code (an HTTP status, the product's or the declared
    /// refusal code). Absent when the answer has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub code: Option<String>,
}

/// A call waiting for its connection's flow control, in an
/// [`InspectedStep`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallWaiting {
    /// The connection's name.
    pub connection: String,
    /// `in-flight`, `rate` or `retry-after`.
    #[schemars(extend("enum" = ["in-flight", "rate", "retry-after"]))]
    pub limit: String,
    /// When the wait began (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub since: String,
}

/// `POST /v1/runs/{run}/cancel|retry-same|reconcile` body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recovery {
    /// An investigation reference holding no personal data: 1 to 256
    /// visible ASCII characters (else 400 `request.invalid`).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!-~]+$"))]
    pub reason: String,
}

/// `POST /v1/runs/{run}/export` body: the run written as one scenario
/// case (docs/scenarios.md "Cases exported from runs"; action `export`,
/// operators only, audited as `run.export`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportRun {
    /// Members of the run's input to replace by placeholders of their type
    /// everywhere in the case, as JSON Pointers into the input
    /// (`/applicationId`; one that does not start with `/` is 400
    /// `request.invalid`); a pointer the run's input has no member at is
    /// 409 `export.redact-invalid`.
    #[serde(default)]
    #[schemars(length(max = 64), extend("items" = {"type": "string", "pattern": "^/"}))]
    pub redact: Vec<String>,
    /// An investigation reference holding no personal data: 1 to 256
    /// visible ASCII characters (else 400 `request.invalid`).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!-~]+$"))]
    pub reason: String,
}

/// `POST /v1/runs/{run}/export` answer: the case, checked to pass on the
/// run's own revision before it was answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportedCase {
    /// The run id.
    pub run: String,
    /// The revision the case passes on (the run's, `sha256:<hex>`).
    pub revision: String,
    /// A scenarios document (`CoordinatorScenarios`) holding the one case.
    pub document: serde_json::Map<String, Value>,
    /// The file to write: the document as JSON (which YAML 1.2 reads as
    /// itself) after comment lines naming the run and the redactions.
    pub text: String,
}

/// Most `redact` pointers one export takes.
pub const MAX_EXPORT_REDACTIONS: usize = 64;

/// `POST /v1/runs/{run}/move` body (at most [`MAX_MOVE_BODY_BYTES`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MoveRun {
    /// The move certificate `coordinatorctl move plan` wrote
    /// (`coordinator-move-certificate/1`), unchanged: its digest must
    /// verify (else 409 `move.certificate-invalid`: it does not hold against this deployment).
    pub certificate: serde_json::Map<String, Value>,
    /// An investigation reference holding no personal data: 1 to 256
    /// visible ASCII characters (else 400 `request.invalid`).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!-~]+$"))]
    pub reason: String,
}

/// An RFC 9457 problem document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// A URI reference naming the problem type (`about:blank` by default).
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// The stable code, e.g. `idempotency.key-reused`.
    pub code: String,
    /// A sentence for people, holding no personal data. Absent rather
    /// than `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub detail: Option<String>,
}

impl Problem {
    /// A problem with `type: about:blank`.
    pub fn new(status: u16, code: &str, title: &str, detail: Option<String>) -> Self {
        Problem {
            kind: "about:blank".into(),
            title: title.into(),
            status,
            code: code.into(),
            detail,
        }
    }
}

/// `GET /ready` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ready {
    /// This process serves (200): its store answers and can be written
    /// to, its audit journal is not known to be failing and its packages
    /// are the active ones. A hold does not make it false: under the
    /// admission hold it serves every route but starts (see `holds`).
    pub ready: bool,
    /// Why not, when `ready` is false (503): `store-unavailable` (the
    /// database cannot be reached, or the process has not passed its
    /// startup checks yet), `database.read-only` (every server the URL
    /// names that answers is a standby or read-only),
    /// `audit.response-unavailable` (the audit journal failed its last
    /// append or is gone), `deployment.activation-changed` (an `apply`
    /// changed the active packages since the process started) or
    /// `restore.lease-incompatible` (a restore hold placed after it
    /// started fenced it), or `clock.skew` (this process's clock stands
    /// further from the database's than the deployment's bound; it is out
    /// of service until it is back). Absent when ready (never `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub reason: Option<String>,
    /// The holds in place when ready, by the names the `coordinator_hold`
    /// gauge and doctor's `holds` use: `restore` (nothing is dispatched)
    /// and `admission` (every start is refused `admission.held`). Absent
    /// when none is in place, and when not ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// With `clock.skew`: the measured offset in seconds, this process's
    /// clock minus the database's (positive: ahead). Absent otherwise.
    #[serde(
        rename = "clockOffsetSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "f64")]
    pub clock_offset_seconds: Option<f64>,
}

/// `GET /v1/doctor` answer (operator only; seed 000 "Apply and start").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Doctor {
    /// The build this process runs (what `coordinator --version` prints).
    pub version: BuildVersion,
    /// The service verified its packages, serves at least one workflow,
    /// and no `apply` changed the active packages since it started.
    /// `None` (`null`) when the store did not answer: unknown, not false.
    #[schemars(with = "Nullable<bool>")]
    pub activation_ready: Option<bool>,
    /// This instance runs with `--recovery-only` (admits and dispatches
    /// nothing).
    pub recovery_only: bool,
    /// Audit, store and run counts.
    pub state: DoctorState,
    /// The deployment-wide holds.
    pub holds: Holds,
    /// This process's clock against the database's (docs/operations.md
    /// "Clock skew").
    #[serde(default)]
    pub clock: DoctorClock,
}

/// The `clock` member of [`Doctor`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoctorClock {
    /// The last measured offset in seconds: this process's clock minus the
    /// database's (`clock_timestamp()`; positive: ahead). `None` (`null`)
    /// before a first measurement.
    #[schemars(with = "Nullable<f64>")]
    pub offset_seconds: Option<f64>,
    /// The offset is beyond `deployment.clockSkewBoundMilliseconds`: this
    /// process admits nothing and leases nothing until it is back.
    pub out_of_service: bool,
}

/// The `version` member of [`Doctor`]: the build a binary reports (seed
/// 000: both binaries come from one source version).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildVersion {
    /// The package version, e.g. `0.1.0`.
    pub package: String,
    /// The git commit the binary was built from (lowercase hex), or
    /// `unknown` when it was built outside a checkout.
    pub source_revision: String,
}

/// The `state` member of [`Doctor`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoctorState {
    /// An audit journal is attached: audited actions are recorded.
    pub audit_ready: bool,
    /// The run store answered.
    pub store_ready: bool,
    /// Runs that hold an effect in state `unknown`: the calls waiting for
    /// an operator (`reconcile`, `retry-same`, `cancel`), and runs that
    /// ended holding one (cancelled or expired during an uncertain call:
    /// what happened must still be found out). `None` when the store did
    /// not answer.
    #[schemars(with = "Nullable<u64>")]
    pub uncertain: Option<u64>,
    /// Runs in state `attention`; `None` when the store did not answer.
    #[schemars(with = "Nullable<u64>")]
    pub attention: Option<u64>,
    /// Runs that have not ended; `None` when the store did not answer.
    #[schemars(with = "Nullable<u64>")]
    pub live: Option<u64>,
    /// Runs that have not ended holding a prepared command the restore hold
    /// held back that no operator reviewed yet (`release-restore-hold`
    /// answers `restore.review-required` while it is not 0); `None` when
    /// the store did not answer.
    #[schemars(with = "Nullable<u64>")]
    pub review_required: Option<u64>,
}

/// The deployment-wide holds (seed 000 "Restore from a backup"): the answer
/// of every hold route and the `holds` member of [`Doctor`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Holds {
    /// The restore hold: no dispatch, `retry-same` refused (`execution.held`).
    pub restore: bool,
    /// The admission hold: starts refused (`admission.held`).
    pub admission: bool,
    /// `complete-execution-recovery` was attested under the restore hold.
    pub execution_recovery_completed: bool,
    /// The restore epoch: +1 each time the restore hold is placed. A
    /// process that started under an older epoch is refused every lease
    /// (`restore.lease-incompatible`) and stops.
    pub restore_epoch: u64,
}

/// `POST /v1/restore-hold` and `POST /v1/release-restore-hold` body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HoldReason {
    /// An investigation reference holding no personal data: 1 to 256
    /// visible ASCII characters (else 400 `request.invalid`).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!-~]+$"))]
    pub reason: String,
}

/// `POST /v1/complete-execution-recovery` body: audited operator
/// statements, not proof.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionRecovery {
    /// The investigation reference, holding no personal data: 1 to 256
    /// visible ASCII characters (else 400 `request.invalid`).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!-~]+$"))]
    pub recovery_reference: String,
    /// The operator states that retained evidence establishes the history
    /// of every held call. Must be `true`.
    #[schemars(schema_with = "attested_schema")]
    pub execution_history_complete: bool,
    /// The operator states the prior deployment and its workers are
    /// stopped or fenced. Must be `true`.
    #[schemars(schema_with = "attested_schema")]
    pub prior_deployment_fenced: bool,
}

/// `POST /v1/release-admission-hold` body: audited operator statements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionRecovery {
    /// The investigation reference, holding no personal data: 1 to 256
    /// visible ASCII characters (else 400 `request.invalid`).
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!-~]+$"))]
    pub recovery_reference: String,
    /// The operator states every spent start key is established. Must be
    /// `true`.
    #[schemars(schema_with = "attested_schema")]
    pub admission_history_complete: bool,
    /// The operator states the prior deployment is stopped or fenced. Must
    /// be `true`.
    #[schemars(schema_with = "attested_schema")]
    pub prior_deployment_fenced: bool,
}

/// `POST /v1/retention` body (`coordinatorctl retain`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retention {
    /// Erase the payloads of runs that ended before this RFC 3339 instant.
    #[schemars(schema_with = "date_time_schema")]
    pub before: String,
    /// At most this many runs per call (1..=100). Any JSON number of
    /// integral value, as JSON Schema's `integer` admits (`1.0` is 1).
    #[schemars(range(min = 1, max = MAX_RETENTION_LIMIT))]
    #[serde(deserialize_with = "integral_u32")]
    pub limit: u32,
}

/// Largest `limit` of a [`Retention`] request.
pub const MAX_RETENTION_LIMIT: u32 = 100;

/// `coordinatorctl retain`'s `--limit` when none is given (the largest).
pub const DEFAULT_RETENTION_LIMIT: u32 = MAX_RETENTION_LIMIT;

/// `POST /v1/retention` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retained {
    /// Runs whose payloads this call erased (0..=`limit`).
    pub erased: u32,
    /// Whether more runs that ended before the cutoff qualify: call again.
    pub more: bool,
    /// The cutoff as given.
    #[schemars(schema_with = "date_time_schema")]
    pub before: String,
}

/// `POST /v1/review-completions` body (SPEC §6, Casework completion
/// events): names the review request whose next read is brought forward.
/// It carries no result: the result is always read from Casework.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewCompletion {
    /// The Casework review request id the run submitted.
    pub review_request_id: String,
}

/// A `u32` from any JSON number of integral value: JSON Schema's
/// `integer` (which the document states) admits `1.0` as well as `1`, so
/// a body a client generated from the document is read as it says.
/// `1.5`, a negative number or one above `u32::MAX` is refused with
/// serde's own error (answered 400 `request.invalid`).
fn integral_u32<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    use serde::de::{Error, Unexpected};
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(n) = number.as_u64() {
        return u32::try_from(n).map_err(|_| {
            D::Error::invalid_value(Unexpected::Unsigned(n), &"an integer up to 4294967295")
        });
    }
    let Some(f) = number.as_f64() else {
        return Err(D::Error::custom("not a number"));
    };
    if f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f) {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return Ok(f as u32);
    }
    Err(D::Error::invalid_value(
        Unexpected::Float(f),
        &"a non-negative integer",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_run_refuses_unknown_members() {
        let ok: StartRun =
            serde_json::from_str(r#"{"workflow":"w","revision":"sha256:00","input":{}}"#)
                .expect("reads");
        assert_eq!(ok.workflow, "w");
        assert!(serde_json::from_str::<StartRun>(
            r#"{"workflow":"w","revision":"r","input":{},"extra":1}"#
        )
        .is_err());
    }

    #[test]
    fn problem_serialises_type_member() {
        let p = Problem::new(409, "idempotency.key-reused", "Conflict", None);
        let v = serde_json::to_value(&p).expect("serialises");
        assert_eq!(v["type"], "about:blank");
        assert_eq!(v["code"], "idempotency.key-reused");
        assert!(v.get("detail").is_none());
    }

    #[test]
    fn retention_limit_is_any_number_of_integral_value() {
        let read = |limit: &str| {
            serde_json::from_str::<Retention>(&format!(
                r#"{{"before":"2026-01-01T00:00:00Z","limit":{limit}}}"#
            ))
            .map(|r| r.limit)
        };
        assert_eq!(read("1").expect("1"), 1);
        assert_eq!(read("1.0").expect("1.0"), 1);
        assert_eq!(read("100.0").expect("100.0"), 100);
        assert_eq!(read("1e2").expect("1e2"), 100);
        for refused in ["1.5", "-1", "-1.0", "4294967296", "4294967296.0", "\"1\""] {
            assert!(read(refused).is_err(), "{refused}");
        }
    }
}
