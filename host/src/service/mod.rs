//! The service host (`coordinator`): ports, their in-memory
//! implementations, and the engine that drives the VM over them.
//!
//! - [`clock`]: the [`Clock`] port ([`SystemClock`], [`ManualClock`]).
//! - [`store`]: the [`RunStore`] port ([`MemoryRunStore`]); the PostgreSQL
//!   store ([`crate::store::Store`]) implements the same trait.
//! - [`engine`]: admission, the worker step, operator actions, inspection.
//! - [`restore`]: the restore sequence (holds, review of restored prepared
//!   commands, attestations).
//! - [`conformance`]: the store behaviours both stores are tested against.
//!
//! Products are called through [`crate::adapters::ProductAdapter`]. No HTTP
//! server here: `server/` translates HTTP to these calls. See
//! docs/service.md.

pub mod clock;
pub mod conformance;
pub mod engine;
pub mod restore;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::{
    Action, ActionError, AdmitError, Engine, EngineConfig, EngineError, EventOrigin, InspectedStep,
    Principal, StartRequest, TriggerInfo,
};
pub use restore::HoldError;
pub use store::{
    Admitted, Commit, Erasure, Holds, Job, JobKind, JobState, LeaseRequest, MemoryRunStore, NewJob,
    NewRun, Owner, Review, ReviewSurvey, RunFilter, RunPage, RunRecord, RunStore, StepLedger,
    StoreError,
};

/// The VM's run state names and effect states, re-exported for `server/`
/// (which depends on `host/` and `api/` only).
pub use coordinator_vm::{EffectState, RejectCode, RunStatus};
