//! `plan`, `apply` and `deployment_status` (seed 000 "Apply and start",
//! "Change the workflows"), and the runtime-role safety check used by
//! `apply` and at service startup.
//!
//! - [`plan()`] resolves and logs in with the runtime URL only (as
//!   `deployment-status` and the service do) and writes nothing; it
//!   previews `apply` as far as the runtime credential sees: it reads the
//!   keys as `apply` does, refuses a runtime login that is not
//!   `deployment.runtimeRole`, and on an applied namespace refuses what
//!   `apply` refuses before writing (`checks::check_applied_namespace`:
//!   runtime role safety, key custody). A missing or wrong migration
//!   secret does not stop it.
//! - [`apply()`] is the only user of `database.migrationUrlRef`. It logs in
//!   with the runtime URL before it changes anything, as
//!   `deployment.runtimeRole` and to the database the migration URL reaches
//!   (else `deployment.database-urls-differ`); then one
//!   transaction migrates, checks the database id, records the key custody
//!   fingerprints, records every pinned package's definition (kept forever)
//!   and the active package per workflow, grants the runtime role exactly
//!   [`super::schema::RUNTIME_GRANTS`], then checks the runtime role; any
//!   refusal rolls everything back.
//! - [`deployment_status`] reads with the runtime credential and verifies
//!   what the service verifies before it serves.
//!
//! One file per concern: `plan.rs`, `apply.rs`, `status.rs`
//! (`deployment_status`); `checks.rs`, every check these share (and the
//! service's startup), each in one place; `namespace.rs`, the reads of what
//! a namespace records; `runtime_role.rs`, the runtime role's grants and
//! safety check.

mod apply;
mod checks;
mod namespace;
mod plan;
mod runtime_role;
mod status;

pub use apply::{apply, ApplyReport};
pub use checks::{live_binding_refusal, load_pinned_packages};
pub use namespace::WorkflowStatus;
pub use plan::{plan, Plan, PlanAction, PlanEntry};
pub use runtime_role::verify_runtime_role;
pub use status::{deployment_status, DeploymentStatus};

pub(crate) use checks::{check_activation, verify_runtime};
pub(crate) use namespace::live_bindings;
