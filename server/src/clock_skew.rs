//! One time for every process (docs/decisions.md "One time for every
//! process"; docs/operations.md "Clock skew"): this process measures its
//! wall clock's offset to the database's at startup and every
//! [`CLOCK_MEASURE_INTERVAL`] ([`ClockWatch`]). Each measurement aligns
//! the engine's clock, a [`DatabaseAlignedClock`], with the database's
//! time, so due times, lease ends and token lifetimes are judged by the
//! clock every process shares; and while the offset is beyond
//! `deployment.clockSkewBoundMilliseconds` the process is out of service
//! ([`Health::set_clock_standing`]): `/ready` 503 `clock.skew` with the
//! offset, every `POST` of the API 503 `service.unavailable` before its
//! token is read (`refuse_while_clock_skewed`), no lease taken. It logs
//! `clock.skew` once when this begins and once when it ends.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use coordinator_api::problems;
use coordinator_engine::Health;
use coordinator_ports::store::Maintenance;
use coordinator_ports::Clock;
use coordinator_runtime::clock::{ClockOffset, DatabaseAlignedClock};

use crate::{ApiError, AppState};

/// `/ready`'s reason and the log lines' code while this process's clock
/// is out of its bound (the log code table's `clock.skew`).
pub const CLOCK_SKEW: &str = coordinator_runtime::log_codes::CLOCK_SKEW;

/// Readings of the database's clock per measurement; the one with the
/// shortest round trip counts ([`ClockOffset::best_of`]).
pub const CLOCK_SAMPLES: usize = 3;

/// How often the offset is measured again: a clock that leaves its bound
/// takes the process out of service within about this long, and one that
/// comes back puts it in service again as soon.
pub const CLOCK_MEASURE_INTERVAL: Duration = Duration::from_secs(1);

/// Measures this process's clock against the database's and keeps the
/// engine's clock and standing up to date.
pub struct ClockWatch {
    /// Where the database's clock is read.
    store: Arc<dyn Maintenance>,
    /// This process's own wall clock (the one that may be wrong).
    system: Arc<dyn Clock>,
    /// The engine's clock, aligned at each measurement.
    aligned: DatabaseAlignedClock,
    /// `deployment.clockSkewBoundMilliseconds`.
    bound: Duration,
    /// Where the standing is recorded (read by `/ready`, doctor,
    /// `/metrics` and the worker).
    health: Arc<Health>,
}

impl ClockWatch {
    /// A watch measuring `system` against `store`'s clock, aligning
    /// `aligned` and recording the standing against `bound` in `health`.
    pub fn new(
        store: Arc<dyn Maintenance>,
        system: Arc<dyn Clock>,
        aligned: DatabaseAlignedClock,
        bound: Duration,
        health: Arc<Health>,
    ) -> Self {
        ClockWatch {
            store,
            system,
            aligned,
            bound,
            health,
        }
    }

    /// One measurement: [`CLOCK_SAMPLES`] readings, the best kept, the
    /// engine's clock aligned and the standing recorded (logged when it
    /// changes). `None` when the database did not answer: the clock keeps
    /// following the last alignment and the standing is unchanged.
    pub async fn measure(&self) -> Option<ClockOffset> {
        let samples = match self
            .store
            .sample_database_clock(self.system.as_ref(), CLOCK_SAMPLES)
            .await
        {
            Ok(samples) => samples,
            Err(e) => {
                tracing::debug!(error = %e, "the database's clock was not read");
                return None;
            }
        };
        let offset = ClockOffset::best_of(&samples)?;
        self.aligned.align(&offset);
        let within = offset.within(self.bound);
        if self.health.set_clock_standing(offset.seconds(), within) {
            log_standing_change(&offset, within, self.bound);
        }
        Some(offset)
    }

    /// Measures every [`CLOCK_MEASURE_INTERVAL`] until `stop` says so.
    pub async fn watch(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(CLOCK_MEASURE_INTERVAL) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            self.measure().await;
        }
    }
}

/// The one line when this process leaves service for its clock, and the
/// one when it comes back.
fn log_standing_change(offset: &ClockOffset, within: bool, bound: Duration) {
    let offset_seconds = offset.seconds();
    let bound_seconds = bound.as_secs_f64();
    if within {
        tracing::info!(
            was = CLOCK_SKEW,
            offset_seconds,
            bound_seconds,
            "this process's clock is back within its bound of the database's; serving again"
        );
    } else {
        tracing::warn!(
            code = "clock.skew",
            offset_seconds,
            bound_seconds,
            next = "repair this host's time source; the process serves again by itself once its clock is back within the bound",
            "this process's clock stands {offset_seconds:.3} s from the database's, beyond its bound of {bound_seconds} s: out of service (no start admitted, no lease taken)"
        );
    }
}

/// Refuses every `POST` of the API with 503 `service.unavailable` while
/// this process's clock is out of its bound, before anything else reads
/// the request (its token included: a clock that is behind would refuse a
/// valid token's `iat` as 401). Reads (`GET`) are answered as usual.
pub(crate) async fn refuse_while_clock_skewed(
    State(s): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() == axum::http::Method::POST && s.engine.health.clock_out_of_service() {
        let offset = s.engine.health.clock_offset_seconds().unwrap_or_default();
        return ApiError::of(&problems::SERVICE_UNAVAILABLE)
            .detail(format!(
                "this process's clock stands {offset:.3} s from the database's, beyond its bound (clock.skew); send the request to another process, or again once /ready answers 200"
            ))
            .into_response();
    }
    next.run(request).await
}
