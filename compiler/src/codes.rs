//! The compiler's diagnostic codes as data (the `file.*` and `yaml.*`
//! codes it also raises are `coordinator_source::codes`'). Each check names
//! its code by the constant here (`codes::LIMIT_STEPS`); every code has its
//! page under `docs/errors/`, and `golden/diagnostics/` has a case raising
//! it where one can be written.

coordinator_source::diagnostic_codes! {
    CALL_DECLARED_REFUSAL = ("coordinator.call.declared-refusal", Error,
        "A call step sets `onDeclaredRefusal` but its operation is not `breg.invoke-action/v1`.");
    CHOOSE_LABELS = ("coordinator.choose.labels", Error,
        "The Function a `choose` step calls must declare its output as a string `enum` whose values are exactly the case labels (or the step has no cases).");
    COMPILER_INTERNAL = ("coordinator.compiler.internal", Error,
        "Every check passed but lowering failed.");
    FUNCTION_ARGUMENT_REQUIRED = ("coordinator.function.argument-required", Error,
        "A Function input was omitted under `arguments` and cannot be bound by its declared type.");
    FUNCTION_ENTRYPOINT = ("coordinator.function.entrypoint", Error,
        "`entrypoint` names no function defined in functions.rhai.");
    FUNCTION_PARAMETERS = ("coordinator.function.parameters", Error,
        "The declared input names and the entrypoint's parameter names differ.");
    FUNCTION_SOURCE = ("coordinator.function.source", Error,
        "`source` names a file other than functions.rhai; a project has one Function source.");
    FUNCTION_SYNTAX = ("coordinator.function.syntax", Error,
        "functions.rhai does not parse as Rhai.");
    FUNCTION_UNKNOWN = ("coordinator.function.unknown", Error,
        "A mapping or `choose` names a Function that `functions` does not declare.");
    FUNCTION_UNKNOWN_ARGUMENT = ("coordinator.function.unknown-argument", Error,
        "`arguments` passes a name the Function does not declare as an input.");
    GRAPH_CYCLE = ("coordinator.graph.cycle", Error,
        "A route returns to a step it already passed; workflows are acyclic.");
    GRAPH_NO_FINISH = ("coordinator.graph.no-finish", Error,
        "No route from this step reaches a `finish` (it loops).");
    GRAPH_UNREACHABLE = ("coordinator.graph.unreachable", Error,
        "No route from `workflow.start` reaches this step.");
    LIMIT_CASES = ("coordinator.limit.cases", Error,
        "A `choose` step has more than 32 cases.");
    LIMIT_FIELDS = ("coordinator.limit.fields", Error,
        "A `fields` mapping builds more than 64 members.");
    LIMIT_FUNCTION_INPUTS = ("coordinator.limit.function-inputs", Error,
        "A Function declares more than 16 inputs.");
    LIMIT_FUNCTIONS = ("coordinator.limit.functions", Error,
        "The project declares more than 128 Functions.");
    LIMIT_OPERATIONS = ("coordinator.limit.operations", Error,
        "The project declares more than 16 operation aliases.");
    LIMIT_OUTCOMES = ("coordinator.limit.outcomes", Error,
        "The workflow declares more than 64 outcomes.");
    LIMIT_STEPS = ("coordinator.limit.steps", Error,
        "The workflow declares more than 64 steps.");
    MAPPING_CONTEXT = ("coordinator.mapping.context", Error,
        "A mapping reads a source not available where it is.");
    MAPPING_FIT_UNCHECKED = ("coordinator.mapping.fit-unchecked", Warning,
        "Warning.");
    MAPPING_PATH = ("coordinator.mapping.path", Error,
        "A `path` names a member the schema of what it reads does not declare, under a closed object.");
    MAPPING_PATH_UNCHECKED = ("coordinator.mapping.path-unchecked", Warning,
        "Warning.");
    MAPPING_POINTER = ("coordinator.mapping.pointer", Error,
        "A `path` is not a JSON Pointer (RFC 6901): it must start with `/`.");
    MAPPING_STEP_KIND = ("coordinator.mapping.step-kind", Error,
        "A `type: step` mapping reads a step that has no output (`choose`, `wait-until`, `finish`).");
    MAPPING_STEP_NOT_COMPLETED = ("coordinator.mapping.step-not-completed", Error,
        "A `type: step` mapping reads a step that has not completed on every route reaching the mapping.");
    MAPPING_TYPE = ("coordinator.mapping.type", Error,
        "The mapped value does not fit the schema it feeds (operation input, Function input, outcome).");
    MAPPING_UNKNOWN_STEP = ("coordinator.mapping.unknown-step", Error,
        "A `type: step` mapping names no step.");
    MOVE_CALL_SKIPPED = ("coordinator.move.call-skipped", Error,
        "A call of revision B placed before the move's target step was never performed by a run waiting on revision A, and the plan was not given `--accept-skipped` for it.");
    MOVE_COMPLETION_DIFFERS = ("coordinator.move.completion-differs", Error,
        "The target of a moved `wait-for` waits for another completion name or on another call, or the call it waits on is not carried to revision B.");
    MOVE_EFFECT_REPEATS = ("coordinator.move.effect-repeats", Error,
        "A step of revision B after the move's target has the id of a call that a run waiting on revision A may already have performed.");
    MOVE_INPUT_MISSING = ("coordinator.move.input-missing", Error,
        "A mapping of revision B after the move's target reads from the run input something that revision A's input type does not guarantee.");
    MOVE_MAP_INVALID = ("coordinator.move.map-invalid", Error,
        "A `--map OLD=NEW` of `move plan` is not `OLD=NEW`, names no wait step of revision A, maps a wait twice or names no valid step id.");
    MOVE_READ_UNAVAILABLE = ("coordinator.move.read-unavailable", Error,
        "A mapping of revision B after the move's target reads a step output that a moved run does not have.");
    MOVE_SCENARIO_FAILED = ("coordinator.move.scenario-failed", Error,
        "A scenario case of revision A that moves its run at a wait to revision B does not pass, so `move plan` refuses that wait.");
    MOVE_SKIP_INVALID = ("coordinator.move.skip-invalid", Error,
        "`move plan --accept-skipped STEP` names no call step of revision B.");
    MOVE_TARGET_KIND = ("coordinator.move.target-kind", Error,
        "The step of revision B a wait of revision A would move to is of another kind.");
    MOVE_SAME_REVISION = ("coordinator.move.same-revision", Error,
        "`move plan --from A --to B` was given the same revision twice: a run is already on it.");
    MOVE_TARGET_MISSING = ("coordinator.move.target-missing", Error,
        "Revision B has no step with the id a wait of revision A would move to.");
    MOVE_WORKFLOW_DIFFERS = ("coordinator.move.workflow-differs", Error,
        "`move plan --from A --to B` was given revisions of two different workflows (`project.id`).");
    NAME_INVALID = ("coordinator.name.invalid", Error,
        "A name does not match `^[a-z][a-z0-9-]{0,63}$`.");
    OPERATION_ACTION_NOT_ALLOWED = ("coordinator.operation.action-not-allowed", Error,
        "An alias of an operation other than `breg.invoke-action/v1` sets `action`.");
    OPERATION_ACTION_REQUIRED = ("coordinator.operation.action-required", Error,
        "An alias of `breg.invoke-action/v1` does not name its action.");
    OPERATION_PROPOSAL_ACTION = ("coordinator.operation.proposal-action", Error,
        "An alias names a BReg Proposal action (`kind: proposal`); workflows invoke immediate actions only.");
    OPERATION_UNKNOWN = ("coordinator.operation.unknown", Error,
        "`uses` names no catalogue operation (SPEC §5 lists the ten).");
    OPERATION_UNKNOWN_ALIAS = ("coordinator.operation.unknown-alias", Error,
        "A call step names an operation alias that `operations` does not declare.");
    OUTCOME_NULL_OUTPUT = ("coordinator.outcome.null-output", Error,
        "A `finish` without `output` ends with `null`, which the outcome's schema does not accept.");
    OUTCOME_UNKNOWN = ("coordinator.outcome.unknown", Error,
        "A `finish` names an outcome that `workflow.outcomes` does not declare.");
    OUTCOME_UNUSED = ("coordinator.outcome.unused", Error,
        "A declared outcome is used by no `finish` step.");
    PROJECT_API_VERSION = ("coordinator.project.api-version", Error,
        "workflow.yaml's `apiVersion` is missing or not `id.registrystack.org/formats/coordinator/project/v1beta1` (an earlier `v1alpha1` project is refused).");
    PROJECT_HEADER = ("coordinator.project.header", Error,
        "workflow.yaml is not a mapping (empty, a list or a scalar).");
    PROJECT_KIND = ("coordinator.project.kind", Error,
        "workflow.yaml's `kind` is not `CoordinatorProject`.");
    SCHEMA_FORMAT = ("coordinator.schema.format", Error,
        "A schema uses a `format` other than date-time, uuid or email.");
    SCHEMA_INVALID = ("coordinator.schema.invalid", Error,
        "A schema keyword has a malformed value.");
    SCHEMA_REF = ("coordinator.schema.ref", Error,
        "A `$ref` is not local (`#...`) or names nothing in its schema.");
    SCHEMA_UNKNOWN_KEYWORD = ("coordinator.schema.unknown-keyword", Error,
        "A schema uses a keyword this format does not accept.");
    STEP_UNKNOWN = ("coordinator.step.unknown", Error,
        "`start`, `next`, a case, `onDeclaredRefusal`, `onTimeout`, `onCancel` or a wait-for's `completion.step` names no step.");
    TRIGGER_EVENT_TYPE = ("coordinator.trigger.event-type", Error,
        "A trigger's `eventType` is empty.");
    TYPE_NO_COMPLETION = ("coordinator.type.no-completion", Error,
        "`completion: ALIAS` names an alias whose operation exposes no completion.");
    TYPE_REFERENCE_KIND = ("coordinator.type.reference-kind", Error,
        "An alias's `output` uses a reference other than `typeRef` or an inline schema.");
    TYPE_UNKNOWN = ("coordinator.type.unknown", Error,
        "A type reference names no `types` entry, operation alias or outcome.");
    WAIT_FOR_COMPLETION = ("coordinator.wait-for.completion", Error,
        "A `wait-for` names a completion the call's operation does not expose.");
    WAIT_FOR_DOMINANCE = ("coordinator.wait-for.dominance", Error,
        "The call a `wait-for` waits on was not accepted on every route reaching the wait.");
    WAIT_FOR_STEP = ("coordinator.wait-for.step", Error,
        "A `wait-for`'s `completion.step` is not a `call` step.");
    WAIT_FOR_TIMEOUT = ("coordinator.wait-for.timeout", Error,
        "`timeoutSeconds` is 0 or not shorter than `workflow.deadlineSeconds`.");
    WAIT_UNTIL_INSTANT = ("coordinator.wait-until.instant", Error,
        "A `wait-until`'s `until` mapping does not give an RFC 3339 instant (a string with format date-time).");
    WORKFLOW_DEADLINE = ("coordinator.workflow.deadline", Error,
        "`deadlineSeconds` is outside 1 ..= 31,536,000.");
}
