//! The scenario host's codes as data: what `coordinatorctl test` reports
//! about a scenarios file and its cases (`scenario.*`; the file's `yaml.*`
//! codes are `coordinator_source::codes`'). Raise sites name the constants
//! (`codes::SCENARIO_NO_PROGRESS`); every code has its page under
//! `docs/errors/`.

coordinator_source::diagnostic_codes! {
    SCENARIO_API_VERSION = ("coordinator.scenario.api-version", Error,
        "`scenarios.yaml` has an `apiVersion` this reader does not support.");
    SCENARIO_COMMAND_CHANGED = ("coordinator.scenario.command-changed", Error,
        "A later attempt of a call sent a command that differs from the first attempt's.");
    SCENARIO_DUPLICATE_CASE = ("coordinator.scenario.duplicate-case", Error,
        "Two cases in `scenarios.yaml` share one `id`.");
    SCENARIO_KIND = ("coordinator.scenario.kind", Error,
        "`scenarios.yaml` has a `kind` other than `CoordinatorScenarios`.");
    SCENARIO_MOVE_NOT_A_WAIT = ("coordinator.scenario.move-not-a-wait", Error,
        "A case's `move.step` is not a `wait-until` or `wait-for` step; a run moves only while it waits.");
    SCENARIO_MOVE_NOT_REACHED = ("coordinator.scenario.move-not-reached", Error,
        "A case with a `move` ended without its run ever waiting at `move.step`.");
    SCENARIO_MOVE_PROJECT = ("coordinator.scenario.move-project", Error,
        "A case's `move.project` is not a project that compiles.");
    SCENARIO_MOVE_REFUSED = ("coordinator.scenario.move-refused", Error,
        "The VM refuses a case's move: the target in the new revision is missing, of another kind or wait contract.");
    SCENARIO_MOVE_WORKFLOW = ("coordinator.scenario.move-workflow", Error,
        "A case's `move.project` is another workflow (another `project.id`).");
    SCENARIO_NO_PROGRESS = ("coordinator.scenario.no-progress", Error,
        "A case did not settle within 10,000 events; the script keeps the run going round.");
    SCENARIO_NOT_A_CALL = ("coordinator.scenario.not-a-call", Error,
        "`replies` or `recovery` names a step that is not a call step.");
    SCENARIO_NOT_A_WAIT_FOR = ("coordinator.scenario.not-a-wait-for", Error,
        "`completions` names a step that is not a `wait-for` step; only `wait-for` steps have completions.");
    SCENARIO_PROGRAM = ("coordinator.scenario.program", Error,
        "The compiled workflow could not be loaded to run the scenarios.");
    SCENARIO_RECEIPT_WITHOUT_RECONCILE = ("coordinator.scenario.receipt-without-reconcile", Error,
        "A call receives `receipt-expired` or `receipt-unresolved` where it sent a command.");
    SCENARIO_RECONCILE_REPLY = ("coordinator.scenario.reconcile-reply", Error,
        "After `reconcile`, the next reply of the call answers the receipt lookup, and it is not one of `success` (the original response), `receipt-unresolved` or `receipt-expired`.");
    SCENARIO_RECONCILE_UNSUPPORTED = ("coordinator.scenario.reconcile-unsupported", Error,
        "`recovery` says `reconcile` for a call whose operation has no receipts.");
    SCENARIO_RECOVERY_UNSUPPORTED = ("coordinator.scenario.recovery-unsupported", Error,
        "`recovery` names a call to an evaluation operation.");
    SCENARIO_REJECTED = ("coordinator.scenario.rejected", Error,
        "While a case runs, the workflow refuses a scripted event at the point it arrives.");
    SCENARIO_REPLY_AFTER_RECEIPT_EXPIRED = ("coordinator.scenario.reply-after-receipt-expired", Error,
        "A reply follows `receipt-expired` for the same call.");
    SCENARIO_REPLY_AFTER_UNKNOWN_EVALUATION = ("coordinator.scenario.reply-after-unknown-evaluation", Error,
        "A reply follows an `uncertain` answer of an evaluation call.");
    SCENARIO_REPLY_COUNT = ("coordinator.scenario.reply-count", Error,
        "A call step has no replies, or more than eight, in one case.");
    SCENARIO_TIMESTAMP = ("coordinator.scenario.timestamp", Error,
        "A scenario time is unusable.");
    SCENARIO_UNKNOWN_OUTCOME = ("coordinator.scenario.unknown-outcome", Error,
        "`expect.outcome` names an outcome the workflow does not declare.");
    SCENARIO_UNKNOWN_STEP = ("coordinator.scenario.unknown-step", Error,
        "A case names a step the workflow does not have.");
    SCENARIO_UNSCRIPTED_CALL = ("coordinator.scenario.unscripted-call", Error,
        "The run reaches a call (or the receipt lookup of a reconcile) and the case has no reply left for it.");
    SCENARIO_UNSCRIPTED_WAIT = ("coordinator.scenario.unscripted-wait", Error,
        "The run reaches a `wait-for` step and the case scripts no completion for it.");
    SCENARIO_UNUSED_REPLY = ("coordinator.scenario.unused-reply", Error,
        "A scripted reply is never used: the run ended, or took another route, before asking for it.");
}
