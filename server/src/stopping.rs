//! How the service stops and tells its service manager: SIGTERM's one
//! budget ([`SHUTDOWN_GRACE`], seed 000's 15 s) shared by the drain and
//! the last trace export (docs/service.md "Shutdown"), and the systemd
//! notifications of a `Type=notify` unit (docs/install.md "systemd").

use std::time::Duration;

use crate::SHUTDOWN_GRACE;

/// Tells systemd (a `Type=notify` unit, deploy/systemd/coordinator.service)
/// that the service is serving (`READY=1`: the store is open and checked,
/// the listener routes every request) or stopping (`STOPPING=1`), through
/// `NOTIFY_SOCKET`; nothing where the variable is unset. A failure is
/// logged and never stops the service.
pub fn tell_service_manager(state: sd_notify::NotifyState<'_>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, &[state]) {
        tracing::warn!(error = %e, "could not notify the service manager (NOTIFY_SOCKET)");
    }
}

/// The part of [`SHUTDOWN_GRACE`] the trace flush always gets, however
/// long the drain took (docs/operations.md "Stopping").
pub const TRACE_FLUSH_FLOOR: Duration = Duration::from_secs(1);

/// Kept back from [`SHUTDOWN_GRACE`] for the process's own exit after the
/// drain and the flush.
pub const EXIT_MARGIN: Duration = Duration::from_millis(500);

/// How long the drain (open requests, the worker, the metrics listener)
/// may take: the grace less the exit margin and, with traces on, less the
/// flush's floor — so the drain and the flush share one grace.
pub fn drain_budget(traces: &Option<crate::telemetry::Traces>) -> Duration {
    let flush = if traces.is_some() {
        TRACE_FLUSH_FLOOR
    } else {
        Duration::ZERO
    };
    SHUTDOWN_GRACE - EXIT_MARGIN - flush
}

/// Exports the spans still queued within what the grace has left since
/// `stopping` (at least [`TRACE_FLUSH_FLOOR`]); an OTLP receiver that
/// does not answer in time loses them (logged), never delays the stop
/// past the grace.
pub async fn flush_traces(traces: Option<crate::telemetry::Traces>, stopping: std::time::Instant) {
    let Some(traces) = traces else { return };
    let left = (SHUTDOWN_GRACE - EXIT_MARGIN).saturating_sub(stopping.elapsed());
    let budget = left.max(TRACE_FLUSH_FLOOR);
    // The batch processor's last export blocks: off the runtime's threads.
    let _ = tokio::task::spawn_blocking(move || traces.shutdown(budget)).await;
}
