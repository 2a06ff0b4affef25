//! The `runtime.yaml` format (`CoordinatorRuntimeConfig`, SPEC §1 and §9,
//! seed 000 "Write the runtime file") as Rust types.
//!
//! These types are the single source of the format: [`super::check`] reads
//! files through them and [`super::runtime_schema`] derives the JSON Schema
//! from them. Shape rules (types, required keys, unknown keys) live here; rules
//! that need a located, named refusal (ranges, references, cross-references)
//! live in [`super::check`], so that each gets its own code.
//!
//! Every key that ends in `Ref` holds a secret *reference*
//! (`secret:file/<name>` or `secret:env/<NAME>`), never a secret value.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The one `apiVersion` this reader accepts (SPEC §1).
pub const API_VERSION: &str = "id.registrystack.org/formats/coordinator/runtime/v1beta1";
/// The one `kind` this reader accepts (SPEC §1).
pub const KIND: &str = "CoordinatorRuntimeConfig";
/// The `$id` of the runtime format's JSON Schema (SPEC §1).
pub const SCHEMA_ID: &str =
    "https://id.registrystack.org/schemas/coordinator/runtime/runtime.v1beta1.schema.json";

/// Default `observation.minimumIntervalSeconds` (SPEC §6: the 30 s floor).
pub const DEFAULT_OBSERVATION_SECONDS: u64 = 30;
/// Default Casework `resultCheckSeconds` (seed 000: 900).
pub const DEFAULT_RESULT_CHECK_SECONDS: u64 = 900;

/// A whole runtime file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "CoordinatorRuntimeConfig")]
pub struct RuntimeConfig {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always [`KIND`].
    pub kind: String,
    /// SQL namespace: `coordinator_` followed by lowercase letters, digits or
    /// `_`, at most 63 bytes (a PostgreSQL identifier).
    #[schemars(extend("pattern" = "^coordinator_[a-z0-9_]+$", "maxLength" = 63))]
    pub namespace: String,
    /// Where secret references resolve.
    pub secret_providers: SecretProviders,
    /// The database URLs (as references).
    pub database: Database,
    /// The floor for wait observations.
    #[serde(default, deserialize_with = "crate::mapping::required")]
    pub observation: Observation,
    /// Trusted producers whose signed events start runs, by name.
    #[serde(default)]
    pub event_sources: BTreeMap<String, EventSource>,
    /// One entry per logical connection the workflows use, by name.
    #[serde(default)]
    pub connections: BTreeMap<String, Connection>,
    /// The operator's part; optional in an author's template.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::mapping::optional"
    )]
    pub deployment: Option<Deployment>,
    /// Where the service exports OpenTelemetry traces; absent: nowhere,
    /// unless the standard `OTEL_EXPORTER_OTLP_*` variables name an
    /// endpoint (docs/operations.md "Traces").
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::mapping::optional"
    )]
    pub telemetry: Option<crate::telemetry::Telemetry>,
}

/// A secret reference: `secret:file/<name>` (a file directly under
/// `secretProviders.file.root`) or `secret:env/<NAME>` (an environment
/// variable, only with `secretProviders.environment: {}`). Never a value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
#[schemars(extend("pattern" = "^secret:(file/[^/]+|env/[A-Za-z_][A-Za-z0-9_]*)$"))]
pub struct SecretRef(pub String);

/// `secretProviders`: which reference kinds are enabled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretProviders {
    /// Enables `secret:file/<name>` under `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileProvider>,
    /// Present (as `{}`) to enable `secret:env/<NAME>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentProvider>,
}

/// `secretProviders.file`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileProvider {
    /// Absolute directory holding one owner-only file per secret.
    pub root: String,
}

/// `secretProviders.environment`: an empty mapping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentProvider {}

/// `database`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Database {
    /// The runtime role's URL (`sslmode=require`).
    pub runtime_url_ref: SecretRef,
    /// The migration role's URL; only `apply` reads it.
    pub migration_url_ref: SecretRef,
    /// A private root certificate (PEM) to verify the database against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_root_certificate_ref: Option<SecretRef>,
    /// What stands between the service and PostgreSQL (default `session`:
    /// each connection is one server session, directly or through a pooler
    /// in session mode). `transaction` for a pooler in transaction mode
    /// (PgBouncer `pool_mode = transaction`): no statement outlives its
    /// transaction, no setting travels in the startup packet, no session
    /// state is kept (docs/operations.md "Through a connection pooler").
    #[serde(
        default,
        skip_serializing_if = "PoolingMode::is_session",
        deserialize_with = "crate::mapping::word"
    )]
    pub pooling_mode: PoolingMode,
}

/// `database.poolingMode`: how the service's connections reach PostgreSQL
/// sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PoolingMode {
    /// Each connection is one server session for as long as it lives: a
    /// direct connection, or a pooler in session mode. Statements are
    /// prepared once per connection and kept; settings travel in the
    /// startup packet.
    #[default]
    Session,
    /// A pooler in transaction mode hands each transaction to any server
    /// session: every statement runs in its own transaction as an unnamed
    /// statement, nothing is cached per connection, and no setting travels
    /// in the startup packet.
    Transaction,
}

impl PoolingMode {
    /// Whether this is the default, [`PoolingMode::Session`].
    pub fn is_session(&self) -> bool {
        *self == PoolingMode::Session
    }
}

/// `observation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Observation {
    /// Seconds; no wait is observed more often (30 ..= 86,400, default 30).
    #[serde(default = "default_observation")]
    #[schemars(range(min = 30, max = 86400))]
    pub minimum_interval_seconds: u64,
}

impl Default for Observation {
    fn default() -> Self {
        Observation {
            minimum_interval_seconds: DEFAULT_OBSERVATION_SECONDS,
        }
    }
}

/// Whether `namespace` is a deployment namespace: `coordinator_` followed
/// by at least one lowercase ASCII letter, digit or `_`, at most 63 bytes in
/// all (a PostgreSQL identifier), so the store may interpolate it into SQL.
/// The one rule: the runtime check refuses other values
/// (`coordinator.runtime.namespace`) and the store will not open or apply
/// one (`coordinator.deployment.not-applied`).
pub fn valid_namespace(namespace: &str) -> bool {
    namespace.len() <= 63
        && namespace.strip_prefix("coordinator_").is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

fn default_observation() -> u64 {
    DEFAULT_OBSERVATION_SECONDS
}

fn default_result_check() -> u64 {
    DEFAULT_RESULT_CHECK_SECONDS
}

/// One `eventSources` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventSource {
    /// The producer's `source` URI, as its signed events carry it.
    pub source: String,
    /// The HMAC key the producer signs events with.
    pub signing_key_ref: SecretRef,
}

/// One `connections` entry, by `type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Connection {
    /// Base Registry Engine.
    Breg(BregConnection),
    /// Registry Messaging.
    Messaging(PlainConnection),
    /// Registry Scheduling.
    Scheduling(PlainConnection),
    /// Casework, as a trusted review producer.
    CaseworkReviewProducer(CaseworkConnection),
    /// An external HTTP API read with `external.get/v1`.
    ExternalHttp(ExternalHttpConnection),
    /// A decision (evaluation) service.
    Decision(DecisionConnection),
}

impl Connection {
    /// The `type` value as written (`breg`, ..., `decision`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Connection::Breg(_) => "breg",
            Connection::Messaging(_) => "messaging",
            Connection::Scheduling(_) => "scheduling",
            Connection::CaseworkReviewProducer(_) => "casework-review-producer",
            Connection::ExternalHttp(_) => "external-http",
            Connection::Decision(_) => "decision",
        }
    }

    /// How often, in seconds, a completion on this connection is observed
    /// (`resultCheckSeconds` of a Casework review producer; the default,
    /// [`DEFAULT_RESULT_CHECK_SECONDS`], for every other kind): the
    /// product's knowledge, so the engine stays generic.
    pub fn result_check_seconds(&self) -> u64 {
        match self {
            Connection::CaseworkReviewProducer(c) => c.result_check_seconds,
            Connection::Breg(_)
            | Connection::Messaging(_)
            | Connection::Scheduling(_)
            | Connection::ExternalHttp(_)
            | Connection::Decision(_) => DEFAULT_RESULT_CHECK_SECONDS,
        }
    }

    /// The connection's `baseUrl`.
    pub fn base_url(&self) -> &str {
        match self {
            Connection::Breg(c) => &c.base_url,
            Connection::Messaging(c) | Connection::Scheduling(c) => &c.base_url,
            Connection::CaseworkReviewProducer(c) => &c.base_url,
            Connection::ExternalHttp(c) => &c.base_url,
            Connection::Decision(c) => &c.base_url,
        }
    }

    /// The connection's client-credentials settings, when it has them.
    pub fn authorization(&self) -> Option<&Authorization> {
        match self {
            Connection::Breg(c) => Some(&c.authorization),
            Connection::Messaging(c) | Connection::Scheduling(c) => Some(&c.authorization),
            Connection::CaseworkReviewProducer(c) => Some(&c.authorization),
            Connection::ExternalHttp(c) => c.authorization.as_ref(),
            Connection::Decision(c) => Some(&c.authorization),
        }
    }

    /// `limits`, when set ([`CallLimits`]).
    pub fn limits(&self) -> Option<&CallLimits> {
        match self {
            Connection::Breg(c) => c.limits.as_ref(),
            Connection::Messaging(c) | Connection::Scheduling(c) => c.limits.as_ref(),
            Connection::CaseworkReviewProducer(c) => c.limits.as_ref(),
            Connection::ExternalHttp(c) => c.limits.as_ref(),
            Connection::Decision(c) => c.limits.as_ref(),
        }
    }

    /// `requestTimeoutMilliseconds`, when set.
    pub fn request_timeout_milliseconds(&self) -> Option<u64> {
        match self {
            Connection::Breg(c) => c.request_timeout_milliseconds,
            Connection::Messaging(c) | Connection::Scheduling(c) => c.request_timeout_milliseconds,
            Connection::CaseworkReviewProducer(c) => c.request_timeout_milliseconds,
            Connection::ExternalHttp(c) => c.request_timeout_milliseconds,
            Connection::Decision(c) => c.request_timeout_milliseconds,
        }
    }
}

/// `limits` of a connection: flow control of the calls made to it, across
/// every workflow and every `coordinator` process of the deployment (they
/// share it through PostgreSQL; docs/decisions.md "Flow control is shared
/// through PostgreSQL"). Each member is optional; none set is no limit.
/// A call that would exceed a limit waits for its turn (the run shows
/// it); the wait counts against the run's deadline, never against the
/// attempt's request budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CallLimits {
    /// At most this many calls in flight at once (1 ..= 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub in_flight: Option<u32>,
    /// At most this many calls per second on average (greater than 0, at
    /// most 10,000; fractions allowed: `0.5` is one call every 2 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.001, max = 10000))]
    pub per_second: Option<f64>,
    /// How many calls may go at once after a quiet spell (1 ..= 10,000;
    /// needs `perSecond`; default `perSecond` rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub burst: Option<u32>,
}

/// Highest `limits.inFlight`, `limits.perSecond` and `limits.burst`.
pub const MAX_CALL_LIMIT: u32 = 10_000;

/// Lowest `limits.perSecond` (one call every 1,000 s).
pub const MIN_CALLS_PER_SECOND: f64 = 0.001;

impl CallLimits {
    /// The burst in force: `burst`, else `perSecond` rounded up (at least
    /// 1); `None` without `perSecond`.
    pub fn effective_burst(&self) -> Option<u32> {
        let rate = self.per_second?;
        Some(self.burst.unwrap_or_else(|| {
            // perSecond is checked to 0.001 ..= 10,000, so this fits.
            (rate.ceil() as u32).max(1)
        }))
    }

    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.in_flight.is_some() || self.per_second.is_some()
    }
}

/// OAuth client credentials with a `private_key_jwt` assertion (SPEC §6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Authorization {
    /// The issuer's token endpoint (https, or http to a loopback host).
    pub token_endpoint: String,
    /// This connection's client id at the issuer.
    #[schemars(length(min = 1))]
    pub client_id: String,
    /// The private JWK that signs the client assertion.
    pub signing_key_ref: SecretRef,
    /// Scopes requested with each token.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// RFC 8707 resource indicator, when the issuer needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// `type: breg`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BregConnection {
    /// Base URL of the BReg service.
    pub base_url: String,
    /// The access profile sent as `registry-access-profile`.
    #[schemars(length(min = 1))]
    pub profile: String,
    /// Client credentials.
    pub authorization: Authorization,
    /// Per-request timeout in milliseconds (1 ..= 300,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300000))]
    pub request_timeout_milliseconds: Option<u64>,
    /// Flow control of the calls to this connection, shared by every
    /// workflow and every process of the deployment ([`CallLimits`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::mapping::optional"
    )]
    pub limits: Option<CallLimits>,
}

/// `type: messaging` and `type: scheduling`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlainConnection {
    /// Base URL of the product.
    pub base_url: String,
    /// Client credentials.
    pub authorization: Authorization,
    /// Per-request timeout in milliseconds (1 ..= 300,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300000))]
    pub request_timeout_milliseconds: Option<u64>,
    /// Flow control of the calls to this connection, shared by every
    /// workflow and every process of the deployment ([`CallLimits`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::mapping::optional"
    )]
    pub limits: Option<CallLimits>,
}

/// `type: casework-review-producer` (seed 000 "Let Casework wake waiting runs").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CaseworkConnection {
    /// Base URL of Casework.
    pub base_url: String,
    /// The Casework review profile, when the project uses one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The producer's key under the Casework project's `trustedProducers`.
    #[schemars(length(min = 1))]
    pub producer: String,
    /// Client credentials.
    pub authorization: Authorization,
    /// Lets Casework wake waiting runs sooner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<ReviewCompletion>,
    /// Seconds between result reads of a waiting run (60 ..= 86,400, default 900).
    #[serde(default = "default_result_check")]
    #[schemars(range(min = 60, max = 86400))]
    pub result_check_seconds: u64,
    /// Per-request timeout in milliseconds (1 ..= 300,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300000))]
    pub request_timeout_milliseconds: Option<u64>,
    /// Flow control of the calls to this connection, shared by every
    /// workflow and every process of the deployment ([`CallLimits`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::mapping::optional"
    )]
    pub limits: Option<CallLimits>,
}

/// `completion` of a Casework connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReviewCompletion {
    /// 1 ..= 256 visible ASCII characters, no spaces; unique across Casework
    /// connections.
    #[schemars(extend("pattern" = "^[!-~]{1,256}$"))]
    pub recipient_binding: String,
    /// The bearer token Casework presents: 1 to 4096 bytes
    /// (`secrets::MAX_COMPLETION_TOKEN_BYTES`; a longer or empty one
    /// refuses startup with `secret.content`).
    pub bearer_token_ref: SecretRef,
}

/// `type: external-http`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExternalHttpConnection {
    /// Base URL of the API.
    pub base_url: String,
    /// The permitted request paths, each starting with `/`.
    #[schemars(length(min = 1))]
    pub paths: Vec<String>,
    /// The permitted query parameter names.
    #[serde(default)]
    pub query_parameters: Vec<String>,
    /// Client credentials, when the API needs them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<Authorization>,
    /// Per-request timeout in milliseconds (1 ..= 300,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300000))]
    pub request_timeout_milliseconds: Option<u64>,
    /// Flow control of the calls to this connection, shared by every
    /// workflow and every process of the deployment ([`CallLimits`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::mapping::optional"
    )]
    pub limits: Option<CallLimits>,
}

/// `type: decision`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DecisionConnection {
    /// Base URL of the decision service.
    pub base_url: String,
    /// The model every evaluation names.
    #[schemars(length(min = 1))]
    pub model: String,
    /// Client credentials.
    pub authorization: Authorization,
    /// Per-request timeout in milliseconds (1 ..= 300,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300000))]
    pub request_timeout_milliseconds: Option<u64>,
    /// Flow control of the calls to this connection, shared by every
    /// workflow and every process of the deployment ([`CallLimits`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::mapping::optional"
    )]
    pub limits: Option<CallLimits>,
}

/// `deployment`: the operator's part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Deployment {
    /// The deployment's durable identity.
    #[schemars(length(min = 1, max = 128))]
    pub database_id: String,
    /// The runtime PostgreSQL role.
    #[schemars(extend("pattern" = "^[a-z_][a-z0-9_]{0,62}$"))]
    pub runtime_role: String,
    /// One pinned package per workflow (at most 16).
    #[schemars(length(max = 16))]
    pub packages: Vec<PackagePin>,
    /// The service listener.
    #[serde(deserialize_with = "crate::mapping::required")]
    pub listener: Listener,
    /// The private `/metrics` listener.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_listener: Option<MetricsListener>,
    /// What keeps the listeners private (default `private-address`: each
    /// `bind` is a loopback, RFC 1918, unique-local or link-local address;
    /// `container-private`: the process runs in a network that is private
    /// by construction, so any address, `0.0.0.0` included, is accepted).
    #[serde(
        default,
        skip_serializing_if = "NetworkExposure::is_private_address",
        deserialize_with = "crate::mapping::word"
    )]
    pub network_exposure: NetworkExposure,
    /// Caller token verification and policies.
    pub authentication: Authentication,
    /// Absolute path of the audit journal (see docs/runtime.md for several
    /// processes).
    pub audit_file: String,
    /// The audit key.
    pub audit_key_ref: SecretRef,
    /// Payload state key versions, keyed by a decimal version number.
    #[schemars(extend("propertyNames" = {"pattern": "^[1-9][0-9]{0,8}$"}, "minProperties" = 1))]
    pub state_keys: BTreeMap<String, StateKey>,
    /// The version new state is encrypted under; a key of `stateKeys`.
    #[schemars(range(min = 1))]
    pub active_state_key: u32,
    /// The admission key (never rotates).
    pub admission_key_ref: SecretRef,
    /// Milliseconds: how far this process's clock may stand from the
    /// database's before the process takes itself out of service
    /// (docs/operations.md "Clock skew"; 100 ..= 10,000, default 1,000).
    #[serde(default = "default_clock_skew_bound")]
    #[schemars(range(min = 100, max = 10000))]
    pub clock_skew_bound_milliseconds: u64,
}

/// `deployment.clockSkewBoundMilliseconds` when unset: one second.
pub const DEFAULT_CLOCK_SKEW_BOUND_MILLISECONDS: u64 = 1_000;

fn default_clock_skew_bound() -> u64 {
    DEFAULT_CLOCK_SKEW_BOUND_MILLISECONDS
}

/// One `deployment.packages` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PackagePin {
    /// Absolute path of the package directory.
    pub root: String,
    /// `sha256:` + 64 lowercase hex digits: the package digest.
    #[schemars(extend("pattern" = "^sha256:[0-9a-f]{64}$"))]
    pub expected_digest: String,
}

/// `deployment.listener`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Listener {
    /// A socket address, `IP:PORT` (`[v6]:PORT` for IPv6).
    pub bind: String,
    /// Who terminates TLS.
    pub tls_termination: TlsTermination,
}

/// The only supported TLS arrangement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TlsTermination {
    /// TLS ends at the operator's terminator in front of the listener.
    OperatorControlledUpstream,
}

/// `deployment.networkExposure`: what keeps the API and metrics listeners
/// reachable from a private network only (seed 000: "a service listener
/// bound to a private address").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkExposure {
    /// The listeners' own addresses: each `bind` must be a loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`), IPv6 unique-local
    /// (`fc00::/7`) or link-local address
    /// (`coordinator_runtime::net::is_private_address`); the wildcard
    /// `0.0.0.0` / `[::]` and public addresses are refused.
    #[default]
    PrivateAddress,
    /// The process runs in a network namespace that is private by
    /// construction (a container whose ports only the TLS terminator
    /// reaches), so the listeners may bind any address, the wildcard
    /// included; the operator vouches for it.
    ContainerPrivate,
}

impl NetworkExposure {
    /// Whether this is the default, [`NetworkExposure::PrivateAddress`].
    pub fn is_private_address(&self) -> bool {
        *self == NetworkExposure::PrivateAddress
    }
}

/// `deployment.metricsListener`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricsListener {
    /// A socket address, `IP:PORT`.
    pub bind: String,
}

/// `deployment.authentication`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Authentication {
    /// The exact `iss` of caller tokens.
    pub issuer: String,
    /// The exact `aud` of caller tokens.
    #[schemars(length(min = 1))]
    pub audience: String,
    /// Where verification keys come from; default: the issuer's discovery
    /// document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks: Option<Jwks>,
    /// Caller policies keyed by verified client id.
    #[serde(default)]
    pub policies: BTreeMap<String, Policy>,
}

/// `authentication.jwks`: `{uri: URL}` or `{file: PATH}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum Jwks {
    /// A JWKS URL.
    Uri(String),
    /// A static JWKS file (absolute path).
    File(String),
}

/// One caller policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// Workflows the run actions apply to; absent: every workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows: Option<Vec<String>>,
    /// Granted actions (see [`super::check::RUN_ACTIONS`],
    /// [`super::check::OPERATOR_RUN_ACTIONS`] and
    /// [`super::check::DEPLOYMENT_ACTIONS`]).
    #[schemars(extend("items" = {"enum": [
        "start", "status", "inspect", "retry-same", "cancel", "reconcile", "move",
        "export", "doctor", "restore-hold", "release-restore-hold", "release-admission-hold",
        "complete-execution-recovery", "retain"
    ]}, "minItems" = 1))]
    pub actions: Vec<String>,
    /// Required for any deployment-wide action.
    #[serde(default)]
    pub operator: bool,
}

/// One `deployment.stateKeys` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StateKey {
    /// The 32-byte key of this version.
    pub key_ref: SecretRef,
}

#[cfg(test)]
mod tests {
    use super::valid_namespace;

    #[test]
    fn namespaces() {
        assert!(valid_namespace("coordinator_follow_up"));
        assert!(valid_namespace(&format!("coordinator_{}", "a".repeat(51))));
        for bad in [
            "coordinator_",
            "public",
            "coordinator_X",
            "coordinator-follow",
            "coordinator_a;drop",
            &format!("coordinator_{}", "a".repeat(52)),
        ] {
            assert!(!valid_namespace(bad), "{bad}");
        }
    }
}
