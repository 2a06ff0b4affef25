//! Every problem code the service answers, as data: one [`ProblemType`]
//! per code with its HTTP status, title and what to do. The server builds
//! every problem document from this table (it has no other way to make
//! one), `coordinatorctl` prints the `next` line of a problem it received,
//! the OpenAPI document lists the codes, and `docs/errors/` has a page per
//! code that a test holds to this table. Where seed 000's "Codes you see"
//! has a line, `next` is that line word for word.

/// One problem code of the HTTP API (RFC 9457 problem documents carry it
/// as `code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProblemType {
    /// The stable code, e.g. `idempotency.key-reused`.
    pub code: &'static str,
    /// The HTTP status it is answered with.
    pub status: u16,
    /// The problem document's `title`.
    pub title: &'static str,
    /// What the caller or operator does about it (seed 000's line where it
    /// has one).
    pub next: &'static str,
    /// Whether an operator acts on it (seed 000 lists it), rather than the
    /// caller correcting a request.
    pub operator: bool,
}

macro_rules! problems {
    ($($name:ident = ($code:literal, $status:literal, $title:literal, $next:literal, $operator:literal);)+) => {
        $(
            #[doc = concat!("`", $code, "` (", stringify!($status), "): ", $title, ".")]
            pub const $name: ProblemType = ProblemType {
                code: $code,
                status: $status,
                title: $title,
                next: $next,
                operator: $operator,
            };
        )+
        /// Every problem type, in code order.
        pub const ALL: &[ProblemType] = &[$($name),+];
    };
}

problems! {
    ADMISSION_HELD = ("admission.held", 409, "The admission hold is in place",
        "The restore hold or the admission hold is in place.", true);
    ADMISSION_RECOVERY_ONLY = ("admission.recovery-only", 409, "This instance runs with --recovery-only and admits no runs",
        "This instance runs with `--recovery-only` and admits no runs. Send starts to the ordinary service.", true);
    AUDIT_RESPONSE_UNAVAILABLE = ("audit.response-unavailable", 503, "The operation may have completed, but its audited result was not released",
        "The operation may have completed, but its audited result was not released. Inspect the run before repeating it.", true);
    AUTHENTICATION_REFUSED = ("authentication.refused", 401, "Authentication refused",
        "Present a current access token of the deployment's issuer and audience (RFC 9068, `typ: at+jwt`).", false);
    AUTHORIZATION_REFUSED = ("authorization.refused", 403, "The policy does not grant this action",
        "The policy of this token's client does not grant the action here: list it in the policy's `actions`, and the workflow in its `workflows` when that is set.", false);
    BINDING_CONFLICT = ("binding.conflict", 409, "The runtime file changed connection settings a run uses",
        "The runtime file changed connection settings a run uses. Restore them and restart, or investigate with `--recovery-only`.", true);
    BINDING_LIVE_CONFLICT = ("binding.live-conflict", 409, "The runtime file changed connection settings a run uses",
        "The runtime file changed connection settings a run uses. Restore them and restart, or investigate with `--recovery-only`.", true);
    DEPLOYMENT_ACTIVATION_CHANGED = ("deployment.activation-changed", 409, "An apply changed the active packages after the service started",
        "An apply changed the active packages after the service started. Restart it with the runtime file apply used.", true);
    DEPLOYMENT_REFUSED = ("deployment.refused", 409, "The activation, runtime file, or state key custody check failed",
        "The activation, runtime file, or state key custody check failed. Run `deployment-status`.", true);
    EVENT_DATA_INVALID = ("event.data-invalid", 422, "The trigger cannot start a run from this event",
        "Send an event whose data the trigger's mappings and the workflow's input schema accept.", false);
    EVENT_RECOVERY_ONLY = ("event.recovery-only", 409, "This instance runs with --recovery-only and takes no events",
        "This instance runs with `--recovery-only` and takes no events. Send events to the ordinary service.", true);
    EVENT_SOURCE_MISMATCH = ("event.source-mismatch", 422, "The event's source is not the trigger's event source",
        "Send the event with the `source` of the trigger's event source.", false);
    EVENT_TYPE_MISMATCH = ("event.type-mismatch", 422, "The event's type is not the trigger's eventType",
        "Send the event with the trigger's `eventType` as `type`.", false);
    EXECUTION_HELD = ("execution.held", 409, "The restore hold is in place",
        "The restore hold or the admission hold is in place.", true);
    EXPORT_NOT_REPRODUCIBLE = ("export.not-reproducible", 409, "The run cannot be written as a scenario case that passes",
        "The detail says what the case cannot say (a run that has not ended, an answer no reply scripts, answers no longer kept) or where the case differs from the run; nothing was exported.", true);
    EXPORT_PAYLOAD_ERASED = ("export.payload-erased", 409, "Retention erased the run's payloads",
        "Retention erased the run's input and answers; a run is exported before its retention period ends.", true);
    EXPORT_REDACT_INVALID = ("export.redact-invalid", 409, "A redaction names no member of the run's input, or a value it cannot hide",
        "Name a member of the run's input as a JSON Pointer (`/applicationId`); a value that is also a step name or a word of the format cannot be hidden.", false);
    IDEMPOTENCY_KEY_REQUIRED = ("idempotency.key-required", 400, "A valid Idempotency-Key is required",
        "Send an `Idempotency-Key` header of 1 to 255 visible ASCII characters.", false);
    IDEMPOTENCY_KEY_REUSED = ("idempotency.key-reused", 409, "The key was used with another revision or input",
        "A key names one start: repeat it only with the same revision and input, or use a new key for new work.", false);
    INPUT_INVALID = ("input.invalid", 400, "The input schema refuses the input",
        "Correct the input at the JSON Pointer the detail names.", false);
    METHOD_NOT_ALLOWED = ("method.not-allowed", 405, "Method not allowed",
        "See docs/openapi.json for each route's method.", false);
    MOVE_CERTIFICATE_INVALID = ("move.certificate-invalid", 409, "The move certificate is not valid here",
        "Write the certificate again with `coordinatorctl move plan` from the revision the runs wait on and the revision applied, and send it unchanged.", true);
    MOVE_RACED = ("move.raced", 409, "The run changed meanwhile",
        "The run changed between the read the move was decided on and its commit; nothing was moved. Run the move again: it moves the run if it still waits.", true);
    MOVE_REVISION_DIFFERS = ("move.revision-differs", 409, "The run is not on the certificate's revision",
        "The run is on another revision than the certificate's `from` (it may have moved already); nothing was moved.", true);
    MOVE_RUN_ENDED = ("move.run-ended", 409, "The run has ended",
        "An ended run is never moved; nothing was moved.", true);
    MOVE_RUN_HELD = ("move.run-held", 409, "The run is held in attention",
        "Settle the held call first (reconcile, retry-same or cancel); a held run is never moved.", true);
    MOVE_RUN_NOT_WAITING = ("move.run-not-waiting", 409, "The run is not waiting",
        "The run is in a call or a cancel was requested; only a run waiting at a wait step moves. Run the move again once it waits.", true);
    MOVE_TARGET_NOT_ACTIVE = ("move.target-not-active", 409, "The certificate's target revision is not active in this service",
        "`apply` the certificate's target revision and restart the service on its package before moving runs to it.", true);
    MOVE_WAIT_REFUSED = ("move.wait-refused", 409, "The certificate refuses the wait the run is at",
        "The certificate does not find the wait this run is at movable; read its findings, fix the new revision and plan again, or let the run drain.", true);
    RECEIPT_EXPIRED = ("receipt.expired", 409, "The product no longer holds the original receipt",
        "The product no longer holds the original receipt. This is not evidence the command was never sent.", true);
    RECONCILE_RACED = ("reconcile.raced", 409, "The run changed meanwhile",
        "The held call cannot be reconciled or retried that way, or changed meanwhile. Inspect it again.", true);
    RECONCILE_REFUSED = ("reconcile.refused", 409, "The run cannot be recovered that way",
        "The held call cannot be reconciled or retried that way, or changed meanwhile. Inspect it again.", true);
    RECONCILE_UNSUPPORTED = ("reconcile.unsupported", 409, "The run cannot be recovered that way",
        "The held call cannot be reconciled or retried that way, or changed meanwhile. Inspect it again.", true);
    REQUEST_INVALID = ("request.invalid", 400, "The request is not valid",
        "Correct the request as the detail says.", false);
    REQUEST_TOO_LARGE = ("request.too-large", 413, "The request body is too large",
        "Send a body of at most 64 KiB (1 MiB for a run's move).", false);
    REQUEST_UNSUPPORTED_MEDIA_TYPE = ("request.unsupported-media-type", 415, "The request body must be JSON",
        "Send the body with `Content-Type: application/json`.", false);
    REQUEST_WAIT_TOO_LONG = ("request.wait-too-long", 400, "The Prefer header asks for a wait longer than 60 seconds",
        "Ask for `Prefer: wait=N` with N at most 60, and ask again when it answers with the run not ended.", false);
    RESTORE_HOLD_REQUIRED = ("restore.hold-required", 409, "A restore step is out of order, or held work still needs review",
        "A restore step is out of order, or held work still needs review.", true);
    RESTORE_LEASE_INCOMPATIBLE = ("restore.lease-incompatible", 409, "A restore step is out of order, or held work still needs review",
        "A restore step is out of order, or held work still needs review.", true);
    RESTORE_REVIEW_REQUIRED = ("restore.review-required", 409, "A restore step is out of order, or held work still needs review",
        "A restore step is out of order, or held work still needs review.", true);
    RESTORE_UNRESOLVED = ("restore.unresolved", 409, "A restore step is out of order, or held work still needs review",
        "A restore step is out of order, or held work still needs review.", true);
    RETRY_REFUSED = ("retry.refused", 409, "The run cannot be recovered that way",
        "The held call cannot be reconciled or retried that way, or changed meanwhile. Inspect it again.", true);
    REVISION_NOT_ACTIVE = ("revision.not-active", 409, "The revision is not the workflow's active one",
        "Start the workflow's active revision (the detail names it).", false);
    ROUTE_NOT_FOUND = ("route.not-found", 404, "No such route",
        "See docs/openapi.json for the routes.", false);
    RUN_NOT_FOUND = ("run.not-found", 404, "No such run",
        "Check the run id; a caller sees only its own runs.", false);
    RUN_PAYLOAD_ERASED = ("run.payload-erased", 409, "Retention erased the run's payloads",
        "Retention erased the run's payloads; it can no longer be retried or reconciled.", true);
    SERVICE_UNAVAILABLE = ("service.unavailable", 503, "The service is unavailable",
        "The database, audit stream, or token verifier is unavailable. Try again after it recovers.", true);
    TRIGGER_NOT_FOUND = ("trigger.not-found", 404, "The workflow's active revision has no such trigger",
        "Send events to a trigger of the workflow's active revision.", false);
    WORKFLOW_NOT_FOUND = ("workflow.not-found", 404, "No package serves this workflow",
        "Start a workflow the deployment serves.", false);
}

/// The problem type of `code`, if the service answers it.
pub fn find(code: &str) -> Option<&'static ProblemType> {
    ALL.iter().find(|p| p.code == code)
}

impl ProblemType {
    /// The problem document of this type, with `detail` when given.
    pub fn problem(&self, detail: Option<String>) -> crate::Problem {
        crate::Problem::new(self.status, self.code, self.title, detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_sorted_and_statuses_are_errors() {
        let codes: Vec<&str> = ALL.iter().map(|p| p.code).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted, "one entry per code, in code order");
        for p in ALL {
            assert!((400..600).contains(&p.status), "{}", p.code);
            assert!(!p.title.is_empty() && !p.next.is_empty(), "{}", p.code);
        }
        assert_eq!(find("run.not-found"), Some(&RUN_NOT_FOUND));
        assert_eq!(find("no.such-code"), None);
    }
}
