//! `coordinatorctl`'s own codes as data: what a command reports about its
//! own work (writing a project, a package, a graph or a caller; its output;
//! the service it talks to) rather than about a checked file. The codes of
//! what it checks are the tables of the crates that check
//! (`coordinator_source::codes`, `coordinator_compiler::codes`,
//! `coordinator_runtime::codes`, `coordinator_scenario::codes`,
//! `coordinator_store::codes`) and the service's problems
//! (`coordinator_api::problems`). Raise sites name the constants
//! (`codes::INIT_WRITE`); every code has its page under `docs/errors/`.

coordinator_source::diagnostic_codes! {
    BULK_CONFIRMATION_REQUIRED = ("coordinator.bulk.confirmation-required", Error,
        "A bulk action (`--filter`) was not confirmed: no terminal to ask on and no `--yes`, or the answer on the terminal was not `yes`.");
    BULK_FILTER_EMPTY = ("coordinator.bulk.filter-empty", Error,
        "The `--filter` of a bulk action names no key, so it would act on every run.");
    BULK_FILTER_KEY = ("coordinator.bulk.filter-key", Error,
        "The `--filter` of a bulk action names a key it does not know.");
    BULK_FILTER_VALUE = ("coordinator.bulk.filter-value", Error,
        "A pair of a bulk action's `--filter` is not `key=value`, gives a key twice, or has a value the key does not take.");
    COMMAND_OUTPUT_CLOSED = ("coordinator.command.output-closed", Error,
        "`coordinatorctl` could not write its standard output for a reason other than its reader going away.");
    COMMAND_SERVICE_UNREACHABLE = ("coordinator.command.service-unreachable", Error,
        "An operator or caller command.");
    COMMAND_TOKEN_FILE_PERMISSIONS = ("coordinator.command.token-file-permissions", Error,
        "The file given with `--token-file` can be read by its group or by others.");
    COMMAND_TOKEN_FILE_UNREADABLE = ("coordinator.command.token-file-unreadable", Error,
        "The file given with `--token-file` is missing.");
    COMMAND_UNEXPECTED_ANSWER = ("coordinator.command.unexpected-answer", Error,
        "The service at `--url` answered with something that is neither the expected JSON body nor an RFC 9457 problem document.");
    CONVERT_BREG_ACTION = ("coordinator.convert.breg-action", Warning,
        "`convert`: a v1alpha1 `invoke-breg-action` call needs its alias's `action: {id, kind}`, which only the registry's owner can confirm.");
    CONVERT_DECISION_BEARER = ("coordinator.convert.decision-bearer", Warning,
        "`convert`: a v1alpha1 decision connection authenticates with a bearer token; its `authorization` was left out.");
    CONVERT_FUNCTION_MISSING = ("coordinator.convert.function-missing", Warning,
        "`convert`: a step calls a function that OLD's functions.rhai does not define, or passes another number of arguments than it takes.");
    CONVERT_FUNCTIONS_FILE = ("coordinator.convert.functions-file", Error,
        "`convert`: OLD's `functionsFile` is not the name of a file in OLD's directory (a path with `/`, `..` or a root).");
    CONVERT_MISSING_INPUT = ("coordinator.convert.missing-input", Warning,
        "`convert`: OLD's workflow.yaml has no `input` schema.");
    CONVERT_NAME_COLLISION = ("coordinator.convert.name-collision", Error,
        "`convert`: two steps or two outcomes of OLD have one name once `_` is dropped (`read_record` and `read-record`).");
    CONVERT_NOT_V1ALPHA1 = ("coordinator.convert.not-v1alpha1", Error,
        "`convert --from v1alpha1`: a file of `--project` is not of the v1alpha1 format (its `apiVersion`).");
    CONVERT_OPERATION_MISSING = ("coordinator.convert.operation-missing", Warning,
        "`convert`: a v1alpha1 operation has no counterpart in the catalogue (such as `read-scheduling`).");
    CONVERT_OUTPUT_EXISTS = ("coordinator.convert.output-exists", Error,
        "The `--output` of `convert` exists and is not an empty directory.");
    CONVERT_REPLY = ("coordinator.convert.reply", Warning,
        "`convert`: a scripted reply needs members convert could not compute.");
    CONVERT_REQUEST_SHAPE = ("coordinator.convert.request-shape", Warning,
        "`convert`: a Rhai function builds an operation's request in the v1alpha1 shape, which differs beyond a reshaping.");
    CONVERT_RUNTIME_SECTION = ("coordinator.convert.runtime-section", Warning,
        "`convert`: a section of OLD's runtime.yaml (such as `deployment`) was not converted, or OLD has no runtime.yaml.");
    CONVERT_STEP_KIND = ("coordinator.convert.step-kind", Warning,
        "`convert`: a step of a kind convert does not translate was copied as it was.");
    CONVERT_TASK_AUTHORITY = ("coordinator.convert.task-authority", Warning,
        "`convert`: a connection's Casework task authority (`taskAuthority`, `observationAuthorization`) was left out.");
    CONVERT_WRITE = ("coordinator.convert.write", Error,
        "`convert` could not write the project to `--output`.");
    COPY_SECRETS_SOURCE = ("coordinator.copy-secrets.source", Error,
        "`copy-secrets --from` is not a readable directory of secret files: missing, empty, or an entry that is not a regular file, links outside it, or is over 1 MiB.");
    COPY_SECRETS_WRITE = ("coordinator.copy-secrets.write", Error,
        "`copy-secrets --to` already exists, or the new directory or a copy could not be written.");
    EXPORT_OUTPUT = ("coordinator.export.output", Error,
        "The `--output` of `scenario export` exists, or its directory does not; an exported case never replaces a file.");
    EXPORT_WRITE = ("coordinator.export.write", Error,
        "`scenario export` could not write the case to `--output`; nothing was written.");
    GRAPH_LAYOUT = ("coordinator.graph.layout", Error,
        "`graph --format svg` could not lay out the drawing.");
    GRAPH_RUN_REVISION = ("coordinator.graph.run-revision", Warning,
        "A warning of `graph --run RUN`.");
    GRAPH_RUN_WORKFLOW = ("coordinator.graph.run-workflow", Error,
        "`graph --run RUN` names a run of another workflow than the project given with `--project`.");
    GRAPH_WRITE = ("coordinator.graph.write", Error,
        "`graph` could not write the drawing to `--output`.");
    INIT_DIRECTORY = ("coordinator.init.directory", Error,
        "`init --directory PATH` was given a path without a usable base name.");
    INIT_EXISTS = ("coordinator.init.exists", Error,
        "The path given to `init` already exists (a file, a directory or a symbolic link).");
    INIT_PROJECT_ID = ("coordinator.init.project-id", Error,
        "The directory's base name is not a valid project id, and `init` writes it into `project.id`.");
    INIT_WRITE = ("coordinator.init.write", Error,
        "`init` could not create the directory.");
    MOVE_CERTIFICATE = ("coordinator.move.certificate", Error,
        "`move apply --certificate` cannot be read, or is not a move certificate whose digest verifies.");
    MOVE_OUTPUT = ("coordinator.move.output", Error,
        "The `--output` of `move plan` exists and is not a regular file (a directory, a symbolic link, a device), or its directory does not exist.");
    MOVE_TO_PACKAGE = ("coordinator.move.to-package", Error,
        "`move plan --to` names a package; revision B must be given as its project directory.");
    MOVE_WRITE = ("coordinator.move.write", Error,
        "`move plan` could not write the certificate to `--output`.");
    PACKAGE_EXISTS = ("coordinator.package.exists", Error,
        "The `--output` path of `package` already exists.");
    PACKAGE_SCENARIOS_FAILED = ("coordinator.package.scenarios-failed", Error,
        "`package` runs every case of `scenarios.yaml` before writing, and one or more cases failed.");
    PACKAGE_WRITE = ("coordinator.package.write", Error,
        "`package` could not write the package directory.");
    SCENARIO_UNKNOWN_CASE = ("coordinator.scenario.unknown-case", Error,
        "`test --case ID` names a case id that `scenarios.yaml` does not have.");
    TEST_CASES = ("coordinator.test.cases", Error,
        "A `test --cases` path is missing, or a file there is neither one scenario case nor a scenarios document.");
    TEST_FAIL_UNDER = ("coordinator.test.fail-under", Error,
        "`test --fail-under PERCENT` was given something other than a number from 0 to 100.");
    TYPES_WRITE = ("coordinator.types.write", Error,
        "`types` could not write the generated caller to `--output`.");
}
