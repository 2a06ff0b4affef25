//! The runtime file's codes as data: every code the offline check of a
//! runtime file raises (`runtime.*`; it also raises the `file.*` and
//! `yaml.*` codes of `coordinator_source::codes`), and the `secret.*` codes
//! of a secret that cannot be read ([`crate::secrets::SecretError::code`]).
//! Raise sites name the constants (`codes::RUNTIME_URL`); every code has its
//! page under `docs/errors/`.

coordinator_source::diagnostic_codes! {
    RUNTIME_ACTIVE_STATE_KEY = ("coordinator.runtime.active-state-key", Error,
        "`deployment.activeStateKey` is not one of the versions under `stateKeys`.");
    RUNTIME_API_VERSION = ("coordinator.runtime.api-version", Error,
        "The runtime file's `apiVersion` is not `id.registrystack.org/formats/coordinator/runtime/v1beta1`.");
    RUNTIME_CALL_LIMITS = ("coordinator.runtime.call-limits", Error,
        "A connection's `limits` holds a value out of range, or `burst` without `perSecond`.");
    RUNTIME_CLOCK_SKEW_BOUND = ("coordinator.runtime.clock-skew-bound", Error,
        "`deployment.clockSkewBoundMilliseconds` is outside 100 to 10,000.");
    RUNTIME_CONNECTION_MISSING = ("coordinator.runtime.connection-missing", Error,
        "The workflow (or a pinned package) calls an operation on a connection that the runtime file does not define.");
    RUNTIME_CONNECTION_TYPE = ("coordinator.runtime.connection-type", Error,
        "A connection's `type` does not fit the operation the workflow calls on it.");
    RUNTIME_DATABASE_ID = ("coordinator.runtime.database-id", Error,
        "`deployment.databaseId` is empty, longer than 128 characters, or holds spaces or control characters.");
    RUNTIME_DEPLOYMENT_MISSING = ("coordinator.runtime.deployment-missing", Error,
        "The file is checked as an operator's file.");
    RUNTIME_DIGEST_FORMAT = ("coordinator.runtime.digest-format", Error,
        "A package's `expectedDigest` is not `sha256:` followed by 64 lowercase hex digits.");
    RUNTIME_DUPLICATE_PACKAGE = ("coordinator.runtime.duplicate-package", Error,
        "The same package `root` is listed twice under `deployment.packages`.");
    RUNTIME_DUPLICATE_WORKFLOW = ("coordinator.runtime.duplicate-workflow", Error,
        "Two pinned packages hold the same workflow; one deployment serves each workflow from one package.");
    RUNTIME_EMPTY_VALUE = ("coordinator.runtime.empty-value", Error,
        "A value that names something is empty.");
    RUNTIME_EVENT_SOURCE_ISSUER = ("coordinator.runtime.event-source-issuer", Error,
        "An `eventSources` entry's `source` is the URI of `deployment.authentication.issuer`.");
    RUNTIME_EVENT_SOURCE_MISSING = ("coordinator.runtime.event-source-missing", Error,
        "The workflow has a trigger on an event source that the runtime file does not define under `eventSources`.");
    RUNTIME_EXTERNAL_PATH = ("coordinator.runtime.external-path", Error,
        "An `external-http` connection permits no path.");
    RUNTIME_INSECURE_URL = ("coordinator.runtime.insecure-url", Error,
        "A URL uses plaintext `http://` to a host that is not a loopback host.");
    RUNTIME_KIND = ("coordinator.runtime.kind", Error,
        "The runtime file's `kind` is not `CoordinatorRuntimeConfig`.");
    RUNTIME_LISTENER_BIND = ("coordinator.runtime.listener-bind", Error,
        "A listener `bind` (`deployment.listener` or `deployment.metricsListener`) is not an IP address and port.");
    RUNTIME_LISTENER_CONFLICT = ("coordinator.runtime.listener-conflict", Error,
        "`deployment.metricsListener.bind` is the API listener's address.");
    RUNTIME_LISTENER_NOT_PRIVATE = ("coordinator.runtime.listener-not-private", Error,
        "A listener `bind` (`deployment.listener` or `deployment.metricsListener`) is not a private address: a wildcard (`0.0.0.0`, `[::]`) or a public address, without `deployment.networkExposure: container-private`.");
    RUNTIME_NAME = ("coordinator.runtime.name", Error,
        "A connection or event source name does not match `^[a-z][a-z0-9-]{0,63}$`.");
    RUNTIME_NAMESPACE = ("coordinator.runtime.namespace", Error,
        "`namespace` is not `coordinator_` followed by lowercase letters.");
    RUNTIME_NO_PACKAGES = ("coordinator.runtime.no-packages", Error,
        "The operator's file pins no package under `deployment.packages`.");
    RUNTIME_OBSERVATION_FLOOR = ("coordinator.runtime.observation-floor", Error,
        "`observation.minimumIntervalSeconds` is outside 30 to 86,400.");
    RUNTIME_PACKAGE_DIGEST = ("coordinator.runtime.package-digest", Error,
        "A pinned package's digest differs from its `expectedDigest`.");
    RUNTIME_PACKAGE_REFUSED = ("coordinator.runtime.package-refused", Error,
        "A pinned package fails verification.");
    RUNTIME_PACKAGE_UNREADABLE = ("coordinator.runtime.package-unreadable", Error,
        "A pinned package (its directory, `SHA256SUMS` or a listed file) cannot be read.");
    RUNTIME_POLICY_EMPTY = ("coordinator.runtime.policy-empty", Error,
        "An authentication policy grants no action.");
    RUNTIME_POLICY_OPERATOR_REQUIRED = ("coordinator.runtime.policy-operator-required", Error,
        "A policy grants a deployment-wide action, or `move`, without `operator: true`.");
    RUNTIME_POLICY_UNKNOWN_ACTION = ("coordinator.runtime.policy-unknown-action", Error,
        "A policy grants something that is not an action.");
    RUNTIME_POLICY_UNKNOWN_WORKFLOW = ("coordinator.runtime.policy-unknown-workflow", Error,
        "A policy's `workflows` names a workflow that no pinned package serves.");
    RUNTIME_POLICY_WORKFLOWS_SCOPE = ("coordinator.runtime.policy-workflows-scope", Error,
        "A policy sets `workflows` but lists only deployment-wide actions.");
    RUNTIME_QUERY_PARAMETER = ("coordinator.runtime.query-parameter", Error,
        "An `external-http` query parameter name is empty or holds `&`, `=`, `#`, `?` or spaces.");
    RUNTIME_RECIPIENT_BINDING = ("coordinator.runtime.recipient-binding", Error,
        "A Casework connection's `completion.recipientBinding` is empty.");
    RUNTIME_RECIPIENT_BINDING_DUPLICATE = ("coordinator.runtime.recipient-binding-duplicate", Error,
        "Two Casework connections use the same `recipientBinding`; the finding is at the second.");
    RUNTIME_RELATIVE_PATH = ("coordinator.runtime.relative-path", Error,
        "A path that must be absolute is relative.");
    RUNTIME_REQUEST_TIMEOUT = ("coordinator.runtime.request-timeout", Error,
        "A connection's `requestTimeoutMilliseconds` is outside 1 to 300,000.");
    RUNTIME_RESULT_CHECK_SECONDS = ("coordinator.runtime.result-check-seconds", Error,
        "A Casework connection's `resultCheckSeconds` is outside 60 to 86,400.");
    RUNTIME_RUNTIME_ROLE = ("coordinator.runtime.runtime-role", Error,
        "`deployment.runtimeRole` is not a lowercase PostgreSQL role name.");
    RUNTIME_SECRET_PROVIDER_DISABLED = ("coordinator.runtime.secret-provider-disabled", Error,
        "A `secret:file/` reference without `secretProviders.file`.");
    RUNTIME_SECRET_REFERENCE = ("coordinator.runtime.secret-reference", Error,
        "A value under a key ending in `Ref` is not a secret reference.");
    RUNTIME_STATE_KEY_VERSION = ("coordinator.runtime.state-key-version", Error,
        "A key under `deployment.stateKeys` is not a positive decimal number.");
    RUNTIME_TOO_MANY_PACKAGES = ("coordinator.runtime.too-many-packages", Error,
        "`deployment.packages` lists more than 16 packages; one deployment serves at most 16.");
    RUNTIME_TELEMETRY_EXPORT = ("coordinator.runtime.telemetry-export", Error,
        "The `OTEL_EXPORTER_OTLP_*` variables ask for traces in another protocol than `http/protobuf` or at an unusable endpoint.");
    RUNTIME_URL = ("coordinator.runtime.url", Error,
        "A URL is not usable: a base URL.");
    SECRET_CONTENT = ("coordinator.secret.content", Error,
        "The secret's content is unusable.");
    SECRET_KEY_LENGTH = ("coordinator.secret.key-length", Error,
        "A key secret does not hold exactly 32 bytes.");
    SECRET_NOT_REGULAR_FILE = ("coordinator.secret.not-regular-file", Error,
        "The secret path is a symbolic link, a directory or another non-regular file.");
    SECRET_OWNER = ("coordinator.secret.owner", Error,
        "The secret file belongs to another user than the one the process runs as.");
    SECRET_PERMISSIONS = ("coordinator.secret.permissions", Error,
        "The secret file grants read, write or execute to group or others.");
    SECRET_PROVIDER_DISABLED = ("coordinator.secret.provider-disabled", Error,
        "A reference needs a secret provider that `secretProviders` does not enable.");
    SECRET_REFERENCE = ("coordinator.secret.reference", Error,
        "A secret reference cannot be resolved because it is not `secret:file/<name>` or `secret:env/<NAME>`.");
    SECRET_UNAVAILABLE = ("coordinator.secret.unavailable", Error,
        "The secret file does not exist or cannot be read, or the environment variable is not set.");
}
