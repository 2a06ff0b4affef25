//! `coordinator-ports`: the service host's ports (STYLE.md "host/": small
//! traits, each with an in-memory implementation beside it).
//!
//! - [`store`]: the run store port, narrow traits by what they serve
//!   ([`RunAdmission`], [`JobQueue`], [`RunReads`], [`HoldsAndReviews`],
//!   [`Definitions`], [`Maintenance`]; [`RunStore`] is all of them) and its data ([`RunRecord`], [`Job`],
//!   [`Holds`], ...); [`memory`]: [`MemoryRunStore`], the in-memory store
//!   for tests; the PostgreSQL store (`coordinator-store`) implements the
//!   same trait.
//! - [`counts`]: the [`RunCounts`] port (doctor's and `/metrics`' counts,
//!   read in time independent of the number of runs).
//! - [`waiting`]: [`FlowLimit`] and [`CallWait`](waiting::CallWait), a flow-control wait as
//!   data (the ledger's and the port's).
//! - [`flow`]: the [`FlowControl`] port (a connection's `limits` and a
//!   product's `Retry-After`, shared by every process) and
//!   [`MemoryFlowControl`].
//! - [`clock`]: the [`Clock`] port ([`SystemClock`], [`ManualClock`]).
//! - [`trace`]: [`TraceParent`], a run's trace context as stored.
//! - [`adapter`]: the [`ProductAdapter`] port through which the service
//!   calls products, and what it answers.
//!
//! The store behaviours every implementation is tested against live in
//! `coordinator-testkit` (`conformance`), outside this production crate.
//!
//! The engine (`coordinator-engine`) drives the VM over these ports; the
//! store and the adapters implement them without knowing the engine.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![warn(missing_docs)]

pub mod adapter;
pub mod clock;
pub mod counts;
pub mod flow;
pub mod memory;
pub mod run_ends;
pub mod store;
pub mod trace;
pub mod waiting;

pub use adapter::{
    AdapterError, DispatchRequest, Observation, ObserveError, Outcome, ProductAdapter,
    ReceiptRequest,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use counts::{LiveCounts, RevisionLiveRuns, RunCounts};
pub use flow::{
    FlowControl, FlowLimit, MemoryFlowControl, SlotAnswer, SlotRequest, SlotsAsk, TokensAsk,
};
pub use memory::MemoryRunStore;
pub use run_ends::{Heard, RunEndChannel, RunEndHearing};
pub use store::{moves_of, MoveRecord, RunMove, RunMoves};
pub use store::{
    Admitted, Commit, Committed, Erasure, Holds, Job, JobKind, JobState, LeaseOnInsert,
    LeaseRequest, NewJob, NewRun, Owner, Review, ReviewSurvey, RunFilter, RunPage, RunRecord,
    RunStore, StepLedger, StoreError,
};
pub use store::{AnswerRecord, WaitEnd, ANSWERS_KEPT};
pub use store::{Definitions, HoldsAndReviews, JobQueue, Maintenance, RunAdmission, RunReads};
pub use trace::TraceParent;
