//! The codes the service's log lines carry in their `code` field that are
//! not an HTTP problem's (`coordinator_api::problems`, whose codes a log
//! line may carry too), as data: each the raw code as logged (no
//! `coordinator.` prefix, like every code in a log line) and the page that
//! explains it. `golden/tests/log_codes.rs` holds every log line's literal
//! `code` and `reason` to this table or the problem registry, and every
//! entry to its page.

/// One code a log line carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogCode {
    /// The code as a log line's `code` field writes it (`store-unavailable`).
    pub code: &'static str,
    /// The page that explains it, as the printed code without its
    /// `coordinator.` prefix (`command.store-unavailable`):
    /// `docs/errors/coordinator.<it>.md`.
    pub page_code: &'static str,
    /// What it means, in one line.
    pub meaning: &'static str,
}

impl LogCode {
    /// Its page, relative to the workspace root.
    pub fn page(&self) -> String {
        format!("docs/errors/coordinator.{}.md", self.page_code)
    }
}

/// Declares the log codes: a constant per code and [`ALL`].
macro_rules! log_codes {
    ($($name:ident = ($code:literal, $page:literal, $meaning:literal);)+) => {
        $(
            #[doc = concat!("`", $code, "`: ", $meaning)]
            pub const $name: &str = $code;
        )+
        /// Every log code, in table order.
        pub const ALL: &[LogCode] = &[$(LogCode { code: $name, page_code: $page, meaning: $meaning }),+];
    };
}

log_codes! {
    STORE_UNAVAILABLE = ("store-unavailable", "command.store-unavailable",
        "The database cannot be reached or failed a statement; the service waits and retries.");
    DATABASE_READ_ONLY = ("database.read-only", "database.read-only",
        "A server of the database URL is a standby or read-only and was passed over.");
    DATABASE_SERVER_CHANGED = ("database.server-changed", "database.server-changed",
        "The service now works against another server of the database URL's host list.");
    DEPLOYMENT_REFUSED = ("deployment.refused", "deployment.refused",
        "The deployment cannot be served (the runtime file, a secret or the database refused it).");
    STATE_KEY_CUSTODY = ("state-key-custody", "command.state-key-custody",
        "A stored value is sealed under a state key version the runtime file does not configure.");
    LIVE_BINDING_CONFLICT = ("live-binding-conflict", "command.live-binding-conflict",
        "Runs that have not ended recorded another binding of a connection than the runtime file gives.");
    RESTORE_LEASE_INCOMPATIBLE = ("restore.lease-incompatible", "restore.lease-incompatible",
        "A restore hold was placed after this process started; it does no more work.");
    CLOCK_SKEW = ("clock.skew", "clock.skew",
        "This process's clock stands further from the database's than the bound; it is out of service until it is back.");
    METRICS_ENCODING = ("metrics.encoding", "metrics.encoding",
        "The metrics could not be encoded for a scrape; the scrape is answered 500.");
}
