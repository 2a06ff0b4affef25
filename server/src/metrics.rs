//! `GET /metrics` on `deployment.metricsListener`: Prometheus text
//! exposition (format 0.0.4), served by axum on its own listener.
//!
//! No series has a workflow, run or principal label: labels are drawn from
//! small fixed sets (states, outcomes, answer kinds). Series read from the
//! store (`coordinator_dispatch_jobs`, `coordinator_runs`,
//! `coordinator_waits`, `coordinator_uncertain_runs`) are left out of a
//! scrape when the store does not answer, so alert on
//! `coordinator_dispatch_jobs` going absent as well as on its value
//! (seed 000). Counters count since the process started.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{HeaderValue, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use coordinator_engine::Engine;

use crate::ops::survey;

/// The exposition's content type.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Admission outcomes always rendered (zero until seen).
pub const ADMISSION_OUTCOMES: [&str; 6] = [
    "created",
    "existing",
    "key-reused",
    "refused",
    "held",
    "store-error",
];

/// Dispatch attempt results always rendered: the answer kinds, plus
/// `interrupted` (found `sending` after a crash) and `host-fault`.
pub const DISPATCH_RESULTS: [&str; 12] = [
    "success",
    "retryable",
    "refused",
    "uncertain",
    "declared-refusal",
    "receipt-expired",
    "receipt-unresolved",
    "invalid-command",
    "invalid-response",
    "interrupted",
    "host-fault",
    "unknown",
];

/// Ended run states always rendered.
pub const ENDED_STATES: [&str; 5] = [
    "finished",
    "failed",
    "cancelled",
    "cancelled-after-effect",
    "expired",
];

/// The metrics router (`GET /metrics`, anything else 404).
pub fn router(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(engine)
}

/// The metrics router while `coordinator` waits for the database and no
/// engine exists yet: `GET /metrics` is the exposition with one series,
/// `coordinator_store_ready 0` (so every series read from the store is
/// absent, as during an outage), anything else 404. `coordinator` serves it
/// through a [`crate::gate::Gate`] until [`router`] takes over.
pub fn waiting_router() -> Router {
    Router::new().route(
        "/metrics",
        get(|| async {
            let mut out = String::new();
            family(
                &mut out,
                "coordinator_store_ready",
                "gauge",
                "1 when the store answered this scrape's survey.",
            );
            out.push_str("coordinator_store_ready 0\n");
            (
                [(CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_TEXT))],
                out,
            )
        }),
    )
}

/// Serves `/metrics` on `listener` until `shutdown` completes.
///
/// # Errors
/// The listener's I/O errors.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(engine))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(engine): State<Arc<Engine>>) -> Response {
    let text = render(&engine).await;
    (
        [(CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_TEXT))],
        text,
    )
        .into_response()
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn labelled(out: &mut String, name: &str, label: &str, values: &[(String, u64)]) {
    for (value, n) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {n}", escape(value));
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Counter values for each fixed label, then any other label seen.
fn with_fixed(fixed: &[&str], seen: Vec<(String, u64)>) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = fixed
        .iter()
        .map(|l| {
            let n = seen
                .iter()
                .find(|(s, _)| s == l)
                .map(|(_, n)| *n)
                .unwrap_or(0);
            ((*l).to_owned(), n)
        })
        .collect();
    for (l, n) in seen {
        if !fixed.contains(&l.as_str()) {
            out.push((l, n));
        }
    }
    out
}

fn owned(v: &[(&'static str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|(l, n)| ((*l).to_owned(), *n)).collect()
}

/// Renders the exposition.
pub async fn render(engine: &Engine) -> String {
    let surveyed = survey(engine).await;
    let counters = engine.counters();
    // Unknown (shown as not placed) while the store is unreachable.
    let holds = engine.holds().await.unwrap_or_default();
    let mut out = String::new();
    match &surveyed {
        Ok(s) => {
            family(
                &mut out,
                "coordinator_dispatch_jobs",
                "gauge",
                "Dispatch jobs by state (ready, leased, sending).",
            );
            labelled(
                &mut out,
                "coordinator_dispatch_jobs",
                "state",
                &owned(&s.dispatch_jobs),
            );
            family(
                &mut out,
                "coordinator_runs",
                "gauge",
                "Runs that have not ended, by state.",
            );
            labelled(&mut out, "coordinator_runs", "state", &owned(&s.runs));
            family(
                &mut out,
                "coordinator_waits",
                "gauge",
                "Runs in a wait, by kind (wait-until, wait-for).",
            );
            labelled(&mut out, "coordinator_waits", "kind", &owned(&s.waits));
            family(
                &mut out,
                "coordinator_uncertain_runs",
                "gauge",
                "Runs that have not ended and hold an unknown effect.",
            );
            let _ = writeln!(out, "coordinator_uncertain_runs {}", s.uncertain);
        }
        Err(e) => {
            tracing::warn!(code = "store-unavailable", error = %e, "metrics: store survey failed");
        }
    }
    family(
        &mut out,
        "coordinator_store_ready",
        "gauge",
        "1 when the store answered this scrape's survey.",
    );
    let _ = writeln!(
        out,
        "coordinator_store_ready {}",
        u8::from(surveyed.is_ok())
    );
    family(
        &mut out,
        "coordinator_admissions_total",
        "counter",
        "Start requests by outcome.",
    );
    labelled(
        &mut out,
        "coordinator_admissions_total",
        "outcome",
        &with_fixed(&ADMISSION_OUTCOMES, counters.of("admissions")),
    );
    family(
        &mut out,
        "coordinator_dispatch_attempts_total",
        "counter",
        "Dispatch attempts by result.",
    );
    labelled(
        &mut out,
        "coordinator_dispatch_attempts_total",
        "result",
        &with_fixed(&DISPATCH_RESULTS, counters.of("dispatch_attempts")),
    );
    family(
        &mut out,
        "coordinator_runs_ended_total",
        "counter",
        "Runs this process saw end, by state.",
    );
    labelled(
        &mut out,
        "coordinator_runs_ended_total",
        "state",
        &with_fixed(&ENDED_STATES, counters.of("runs_ended")),
    );
    family(
        &mut out,
        "coordinator_store_errors_total",
        "counter",
        "Store operations that failed because the store was unavailable.",
    );
    let store_errors: u64 = counters.of("store_errors").iter().map(|(_, n)| n).sum();
    let _ = writeln!(out, "coordinator_store_errors_total {store_errors}");
    family(
        &mut out,
        "coordinator_hold",
        "gauge",
        "1 while the hold is in place (restore, admission).",
    );
    let _ = writeln!(
        out,
        "coordinator_hold{{hold=\"restore\"}} {}",
        u8::from(holds.restore)
    );
    let _ = writeln!(
        out,
        "coordinator_hold{{hold=\"admission\"}} {}",
        u8::from(holds.admission)
    );
    out
}
