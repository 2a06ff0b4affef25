//! The [`RunCounts`] port: how many runs are in each state, wait and
//! review, and how many dispatch jobs in each state, read without visiting
//! every run (doctor and `/metrics` read it at each request and scrape).
//!
//! The PostgreSQL store keeps the run counts in tables the statements
//! that change runs update (`coordinator-store`, `run_counts` and
//! `revision_counts`), and counts
//! dispatch jobs through an index of them only, so a read costs the same
//! with a million waiting runs as with none; the in-memory store counts
//! its maps.

use coordinator_ir::StepKind;

use crate::store::StoreError;

/// Counts over the runs that have not ended (and the ended runs that still
/// hold an unknown effect) and over the dispatch jobs. Every field is a
/// number of runs or jobs at one moment of the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Runs in state `running`.
    pub running: u64,
    /// Runs in state `attention`.
    pub attention: u64,
    /// Runs in state `cancel-requested`.
    pub cancel_requested: u64,
    /// Runs that have not ended and hold an `unknown` effect.
    pub unknown_effects: u64,
    /// Runs that ended still holding an `unknown` effect.
    pub ended_unknown_effects: u64,
    /// Runs that have not ended whose restore review is required.
    pub review_required: u64,
    /// Runs that have not ended, in a `waitUntil` wait.
    pub wait_until: u64,
    /// Runs that have not ended, in a `waitFor` wait.
    pub wait_for: u64,
    /// Dispatch jobs `ready` and not leased.
    pub dispatch_ready: u64,
    /// Dispatch jobs `ready` and leased (expired leases included until
    /// another lease takes them).
    pub dispatch_leased: u64,
    /// Dispatch jobs `sending` (an attempt may be out).
    pub dispatch_sending: u64,
}

impl LiveCounts {
    /// Runs that have not ended.
    pub fn live(&self) -> u64 {
        self.running + self.attention + self.cancel_requested
    }

    /// Runs by state, as `(state, count)` with the states' API names.
    pub fn runs_by_state(&self) -> [(&'static str, u64); 3] {
        [
            ("running", self.running),
            ("attention", self.attention),
            ("cancel-requested", self.cancel_requested),
        ]
    }

    /// Runs in a wait by kind, as `(kind, count)` (`wait-until`,
    /// `wait-for`).
    pub fn waits_by_kind(&self) -> [(&'static str, u64); 2] {
        [
            (StepKind::WaitUntil.as_str(), self.wait_until),
            (StepKind::WaitFor.as_str(), self.wait_for),
        ]
    }

    /// Dispatch jobs by state, as `(state, count)` (`ready`, `leased`,
    /// `sending`).
    pub fn dispatch_jobs_by_state(&self) -> [(&'static str, u64); 3] {
        [
            ("ready", self.dispatch_ready),
            ("leased", self.dispatch_leased),
            ("sending", self.dispatch_sending),
        ]
    }
}

/// How many runs that have not ended are on one revision of a workflow
/// (the revision a run is on now: a moved run counts on the revision it
/// moved to, docs/decisions.md "Moving waiting runs").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RevisionLiveRuns {
    /// The workflow's name.
    pub workflow: String,
    /// The revision (`sha256:<hex>`).
    pub revision: String,
    /// Runs on it that have not ended (at least 1 in
    /// [`RunCounts::live_runs_by_revision`]).
    pub live: u64,
}

/// Reads [`LiveCounts`] in time independent of the number of runs.
#[async_trait::async_trait]
pub trait RunCounts: Send + Sync {
    /// The counts now.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the store cannot be reached.
    async fn live_counts(&self) -> Result<LiveCounts, StoreError>;

    /// The runs that have not ended, by workflow and revision: one entry
    /// per revision with at least one such run (a drained revision is left
    /// out), ordered by workflow then revision. Read in time independent
    /// of the number of runs (it depends on the number of revisions).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the store cannot be reached.
    async fn live_runs_by_revision(&self) -> Result<Vec<RevisionLiveRuns>, StoreError>;
}
