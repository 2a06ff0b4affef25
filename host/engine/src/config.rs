//! The engine's settings ([`EngineConfig`]) and the constants every role
//! reads: the codes fed as uncertain answers ([`INTERRUPTED`],
//! [`RESTORED`]) and the longest retry backoff; [`EngineError`], why an
//! engine could not be built.

/// The code of the answer a call is given when its run's cancel was
/// requested while the call waited for its connection's flow control: it
/// was never sent, so the answer is retryable ("not processed") and the run
/// ends `cancelled`.
pub const CANCELLED_UNSENT: &str = "cancelled-unsent";

/// The code fed as [`Answer::Uncertain`](coordinator_vm::Answer::Uncertain) for a mutation or evaluation whose
/// job was found `sending` after its lease expired (a crash mid-request).
pub const INTERRUPTED: &str = "dispatch-interrupted";

/// The code fed as [`Answer::Uncertain`](coordinator_vm::Answer::Uncertain) for a prepared command the restore
/// hold found `ready` or `sending` (committed before the backup; the
/// deployment the backup came from may have sent it since): held as an
/// `unknown` effect for review, never dispatched by itself
/// (docs/operations.md "Restore from a backup").
pub const RESTORED: &str = "restored-prepared-command";

/// The longest retry backoff, in seconds.
pub const MAX_BACKOFF_SECONDS: i64 = 300;

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// `deployment.databaseId` (part of every idempotency key).
    pub database_id: String,
    /// This process's worker id (lease owner), unique per process.
    pub worker_id: String,
    /// `observation.minimumIntervalSeconds` (SPEC §6 floor, ≥ 30).
    pub observation_floor_seconds: u64,
    /// How long a lease lasts, seconds. A job in `sending` whose lease
    /// expired is taken as interrupted; keep it at least twice
    /// `request_budget_seconds`.
    pub lease_seconds: i64,
    /// The longest a job takes once started (token and request timeouts
    /// plus a margin): a leased job is started only while this much of its
    /// lease is left, else given back, so an attempt never outlives its
    /// lease.
    pub request_budget_seconds: i64,
    /// Jobs leased per tick.
    pub batch: usize,
    /// `--recovery-only`: admits nothing, dispatches nothing.
    pub recovery_only: bool,
}

impl EngineConfig {
    /// Defaults: floor 30 s, request budget 305 s (the 300 s request
    /// timeout ceiling), lease 610 s, batch 32. The `coordinator` binary
    /// derives the budget from its connections' timeouts
    /// ([`EngineConfig::with_request_timeout`]).
    pub fn new(database_id: &str, worker_id: &str) -> Self {
        EngineConfig {
            database_id: database_id.to_owned(),
            worker_id: worker_id.to_owned(),
            observation_floor_seconds: 30,
            lease_seconds: 610,
            request_budget_seconds: 305,
            batch: 32,
            recovery_only: false,
        }
    }

    /// Sets the request budget to twice `timeout_seconds` (a token request
    /// and the request itself) plus 5 s, and the lease to twice the budget.
    pub fn with_request_timeout(mut self, timeout_seconds: i64) -> Self {
        self.request_budget_seconds = timeout_seconds.max(1).saturating_mul(2).saturating_add(5);
        self.lease_seconds = self.request_budget_seconds.saturating_mul(2);
        self
    }
}

/// Why an engine could not be built.
#[derive(Debug)]
pub struct EngineError(pub String);

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EngineError {}
