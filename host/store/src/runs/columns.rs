//! Values as the run store's columns hold them: the engine's instants as
//! `timestamptz`, restore epochs as `bigint`, the columns kept in the clear
//! beside a sealed state (`effect_unknown`, `wait`), and the column lists
//! the reads decode.

use coordinator_ir::instant::Instant;
use coordinator_ports::store::StoreError as PortError;
use coordinator_vm::{EffectState, RunState};
use time::OffsetDateTime;

use super::errors::tampered;

/// Unix seconds as a `timestamptz` value, capped to years 0001–9999 as
/// every instant we write is
/// ([`coordinator_ir::instant::format_unix_seconds`]).
pub(super) fn at(unix: i64) -> OffsetDateTime {
    use coordinator_ir::instant::{MAX_UNIX_SECONDS, MIN_UNIX_SECONDS};
    let capped = unix.clamp(MIN_UNIX_SECONDS, MAX_UNIX_SECONDS);
    match OffsetDateTime::from_unix_timestamp(capped) {
        Ok(t) => t,
        // `time` covers years ±9999: every capped second is inside.
        Err(e) => unreachable!("{capped} s is inside 0001-9999: {e}"),
    }
}

/// An instant (the engine's clock, or of a run's VM state) as a
/// `timestamptz` value: its whole Unix seconds (fractions truncated toward
/// zero), capped as [`at`] caps. The one place the store turns the port's
/// instants into stored seconds.
pub(super) fn at_instant(instant: &Instant) -> OffsetDateTime {
    at(instant.unix_seconds())
}

/// A `timestamptz` value as the port's instant (whole seconds, as stored).
pub(super) fn instant_of(t: OffsetDateTime) -> Instant {
    Instant::from_unix_seconds(t.unix_timestamp())
}

/// A run's columns as [`Store::record`](super::Store) reads them.
pub(super) const RUN_COLUMNS: &str =
    "run_id, seq, workflow, revision, start_identity, request_fingerprint, \
     version, ledger::text AS ledger, bindings::text AS bindings, sealed_state, sealed_owner, \
     state, created_at, deadline_at, updated_at, ended_at, payload_erased_at, review, trace_parent";

/// A job's columns as [`Store::job`](super::Store) reads them.
pub(super) const JOB_COLUMNS: &str = "job_id, run_id, kind, step, state, due_at, lease_owner, \
     lease_expires_at, detail::text AS detail, sealed_command";

/// A restore epoch as stored (`bigint`, never negative).
pub(super) fn epoch_column(epoch: u64) -> i64 {
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

/// A stored restore epoch; a negative one (the column's CHECK forbids it)
/// is a damaged row.
pub(super) fn epoch_of(stored: i64) -> Result<u64, PortError> {
    u64::try_from(stored).map_err(|_| tampered(format!("restore epoch {stored}")))
}

/// Whether a state holds an `unknown` effect (the `effect_unknown` column).
pub(super) fn effect_unknown(state: &RunState) -> bool {
    state.effects.values().any(|e| *e == EffectState::Unknown)
}

/// The `wait` column of a run in `state`: the VM's wait kind, `None`
/// outside a wait and once the run has ended.
pub(super) fn wait_column(state: &RunState) -> Option<&'static str> {
    if state.status.is_terminal() {
        return None;
    }
    coordinator_vm::wait_kind(state).map(coordinator_vm::WaitKind::as_str)
}
