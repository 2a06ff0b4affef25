//! The run store: the PostgreSQL implementation of the service's
//! [`RunStore`] port (docs/service.md), the only production store.
//!
//! A [`Store`] is opened at service startup with the runtime credential
//! ([`Store::open`] verifies everything `deployment-status` verifies). Each
//! port method is one transaction (most are one statement):
//!
//! - `admit`: the run row, its spent start identity and its first jobs; a
//!   repeat with the same request fingerprint returns the stored run,
//!   another is a conflict; refused while the admission hold is in place or
//!   when the revision is not the active one.
//! - `lease`: due jobs with no lease or an expired one, oldest due first,
//!   `FOR UPDATE SKIP LOCKED` (several processes share a database); an
//!   expired lease comes back with its state (`sending`). Nothing is leased
//!   while the restore hold is in place.
//! - `commit`: optimistic on the run's version; the completed job is
//!   deleted only if the caller holds its lease; an ended run loses every
//!   job; an erased run is refused (`run.payload-erased`).
//! - `erase_payloads` (retention): ended, unheld runs without an unknown
//!   effect or a job, ended before the cutoff, oldest ended first,
//!   `FOR UPDATE SKIP LOCKED`: sealed input, state and output set NULL, the
//!   owner re-sealed under the active version, `payload_erased_at` stamped.
//!
//! Times are parameters (the engine's clock), never SQL `now()`: due times
//! and leases are the caller's Unix seconds, and a run's `created_at`,
//! `updated_at` and `ended_at` come from its VM state. Payloads are sealed
//! with the active state key version bound to (database id, run id,
//! purpose, step): purposes `input`, `state`, `output`, `owner` (the
//! starter's `iss`/`sub`) and `command` (step = the job's step).
//!
//! Where each part lives, by what it serves:
//!
//! - `open.rs`: [`Store::open`] (startup checks, session settings) and the
//!   pool's accessors;
//! - `admission.rs`: [`RunAdmission`] (a start found again, the admission
//!   checks' refusals); `batch.rs` (with `batch/`): the group statements
//!   of admissions, commits and `sending` marks;
//! - `job_queue.rs`: [`JobQueue`] (lease, next due, release, discard,
//!   claim of restored commands, bring forward);
//! - `reads.rs`: [`RunReads`] and the decoding of a run's and a job's row;
//! - `holds.rs`: [`HoldsAndReviews`]; `definitions.rs`: [`Definitions`] and
//!   the active workflows; `maintenance.rs`: [`Maintenance`] (retention's
//!   erasure, the readiness ping); `counts.rs`: the live counts;
//!   `flow.rs`: [`FlowControl`](coordinator_ports::flow::FlowControl)
//!   (a connection's `limits`, shared through the `connection_*` tables);
//!   `moves.rs`: [`RunMoves`](coordinator_ports::store::RunMoves) (a
//!   waiting run moved to another revision, one statement);
//!   `run_ends.rs`: run ends relayed between processes for the callers
//!   waiting for them (`NOTIFY` and one `LISTEN` connection a process);
//! - `new_jobs.rs` (a new job's columns as written), `sealing.rs` (payloads
//!   sealed to their binding), `columns.rs` (instants, epochs and the
//!   columns computed from a state) and `errors.rs` (errors as the port's).
//!
//! [`RunStore`]: coordinator_ports::RunStore
//! [`RunAdmission`]: coordinator_ports::store::RunAdmission
//! [`JobQueue`]: coordinator_ports::store::JobQueue
//! [`RunReads`]: coordinator_ports::store::RunReads
//! [`HoldsAndReviews`]: coordinator_ports::store::HoldsAndReviews
//! [`Definitions`]: coordinator_ports::store::Definitions
//! [`Maintenance`]: coordinator_ports::store::Maintenance

mod admission;
mod batch;
mod columns;
mod counts;
mod definitions;
mod errors;
mod flow;
mod holds;
mod job_queue;
mod maintenance;
mod moves;
mod new_jobs;
mod open;
mod reads;
mod run_ends;
mod sealing;

use coordinator_runtime::keys::{AdmissionKey, StateKeyring};

use super::session::Database;

pub(crate) use definitions::read_definition;
pub use maintenance::PING_TIMEOUT;
pub use run_ends::RunEndListener;

/// The run store: a pool of runtime connections, the namespace, the
/// database id, the state keyring and the admission key (for owner
/// references).
#[derive(Clone, Debug)]
pub struct Store {
    db: Database,
    ns: String,
    database_id: String,
    keyring: StateKeyring,
    admission: AdmissionKey,
    /// `deployment.activation_generation` when the store was opened (read
    /// before the activation was checked): an admission finding another
    /// one answers `deployment.activation-changed`.
    activation_generation: i64,
}
