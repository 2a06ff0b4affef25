//! The run store's errors as the port's: [`DatabaseError`] and database
//! errors mapped to [`PortError`], and the refusals the run store names
//! itself (a tampered row, an erased run).

use coordinator_ports::store::StoreError as PortError;

use crate::{db_error, DatabaseError};

/// A database error as the port's: unavailable stays unavailable (retry),
/// refusals (custody, tampering, erased payloads) keep their code.
pub(super) fn port(e: DatabaseError) -> PortError {
    match e.kind {
        crate::ErrorKind::Unavailable => PortError::Unavailable(e.message),
        crate::ErrorKind::Refused => PortError::Refused {
            code: e.code,
            message: e.message,
        },
    }
}

/// A database error as the port's ([`db_error`], then [`port`]).
pub(super) fn pdb(e: sqlx::Error) -> PortError {
    port(db_error(e))
}

/// `state-tampered`: a stored row that does not read back as written.
pub(super) fn tampered(what: impl std::fmt::Display) -> PortError {
    PortError::Refused {
        code: "state-tampered",
        message: what.to_string(),
    }
}

/// `run.payload-erased`: retention erased the payloads `run_id` needs.
pub(super) fn erased(run_id: &str) -> DatabaseError {
    DatabaseError::refused(
        "run.payload-erased",
        format!("retention erased the payloads of run {run_id}"),
        "an erased run can no longer be retried or reconciled",
    )
}
