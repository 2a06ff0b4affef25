//! One role of the engine: operator actions. [`actions`]: `cancel`,
//! `retry-same`, `reconcile`, inspection, listing and retention;
//! [`restore`]: the restore sequence (holds, the restore epoch, review of
//! restored prepared commands, attestations). Both are `impl
//! OperatorActions`, over the core's one commit path.

pub mod actions;
pub mod restore;

pub(crate) use actions::OperatorActions;
