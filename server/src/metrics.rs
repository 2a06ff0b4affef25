//! `GET /metrics` on `deployment.metricsListener`, served by axum on its
//! own listener. The exposition is a `prometheus-client` [`Registry`]
//! encoded by that crate: Prometheus text format 0.0.4 by default, or
//! OpenMetrics 1.0.0 text when the scraper's `Accept` asks for
//! `application/openmetrics-text` (as Prometheus does); see [`Exposition`].
//!
//! No series has a run or principal label: labels are drawn from small
//! fixed sets (states, outcomes, answer kinds), the connections of the
//! runtime file, and, for `coordinator_live_runs` only, the workflow and
//! revision of each active revision and each revision that still has runs
//! that have not ended (so an operator sees an old revision drain; a
//! drained revision leaves the exposition). Series read from the store
//! (`coordinator_dispatch_jobs`, `coordinator_runs`, `coordinator_waits`,
//! `coordinator_uncertain_runs`, `coordinator_live_runs`) are left out of
//! a scrape when the store does not answer, so alert on
//! `coordinator_dispatch_jobs` going absent as well as on its value
//! (seed 000). Counters count since the process started.
//!
//! Every value is read when the scrape arrives (the store survey, the
//! engine's counters, the holds), so each scrape builds a fresh registry of
//! constant metrics; nothing is kept between scrapes.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use coordinator_engine::Engine;
use coordinator_ports::RunCounts;
use prometheus_client::encoding::{prometheus_text, text, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::ops::survey;

/// The content type of the Prometheus text format 0.0.4 (the default).
pub const CONTENT_TYPE_TEXT: &str = prometheus_text::CONTENT_TYPE;

/// The content type of the OpenMetrics 1.0.0 text format.
pub const CONTENT_TYPE_OPENMETRICS: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

/// The text format of one answer, chosen from the request's `Accept`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus text format 0.0.4 ([`CONTENT_TYPE_TEXT`]): counters are
    /// named with `_total` in `# HELP` and `# TYPE` too.
    Prometheus,
    /// OpenMetrics 1.0.0 text ([`CONTENT_TYPE_OPENMETRICS`]): `# HELP` and
    /// `# TYPE` name a counter's family without `_total` (its samples keep
    /// it), and the answer ends with `# EOF`.
    OpenMetrics,
}

impl Exposition {
    /// OpenMetrics when `accept` lists `application/openmetrics-text` with a
    /// quality above 0 and no lower than any range that matches
    /// `text/plain`; Prometheus text otherwise (no `Accept`, `*/*`,
    /// `text/plain`, or anything else: `/metrics` never answers 406).
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let (mut openmetrics, mut plain) = (0.0_f32, 0.0_f32);
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .and_then(|(_, v)| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => plain = plain.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= plain {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }

    /// The answer's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => CONTENT_TYPE_TEXT,
            Exposition::OpenMetrics => CONTENT_TYPE_OPENMETRICS,
        }
    }

    /// Encodes `registry` with `prometheus-client`'s encoder for this format.
    ///
    /// # Errors
    /// A metric that fails to encode (none of this module's do).
    pub fn encode(self, registry: &Registry) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        match self {
            Exposition::Prometheus => prometheus_text::encode(&mut out, registry)?,
            Exposition::OpenMetrics => text::encode(&mut out, registry)?,
        }
        Ok(out)
    }
}

/// What a scrape reads: the engine's counters and holds, and the store's
/// counts (the same store the engine uses).
#[derive(Clone)]
pub struct Scraped {
    /// The engine.
    pub engine: Arc<Engine>,
    /// The store's counts.
    pub counts: Arc<dyn RunCounts>,
}

/// The metrics router (`GET /metrics`, anything else 404).
pub fn router(engine: Arc<Engine>, counts: Arc<dyn RunCounts>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(Scraped { engine, counts })
}

/// The metrics router while `coordinator` waits for the database and no
/// engine exists yet: `GET /metrics` is the exposition with one series,
/// `coordinator_store_ready 0` (so every series read from the store is
/// absent, as during an outage), anything else 404. `coordinator` serves it
/// through a [`crate::gate::Gate`] until [`router`] takes over.
pub fn waiting_router() -> Router {
    Router::new().route(
        "/metrics",
        get(|headers: HeaderMap| async move {
            let mut registry = Registry::default();
            register_store_ready(&mut registry, false);
            answer(&headers, &registry)
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
    counts: Arc<dyn RunCounts>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(engine, counts))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(scraped): State<Scraped>, headers: HeaderMap) -> Response {
    let registry = registry(&scraped.engine, scraped.counts.as_ref()).await;
    answer(&headers, &registry)
}

/// `registry` in the format `headers` ask for, with its content type.
fn answer(headers: &HeaderMap, registry: &Registry) -> Response {
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    let exposition = Exposition::negotiate(accept);
    match exposition.encode(registry) {
        Ok(body) => (
            [(
                CONTENT_TYPE,
                HeaderValue::from_static(exposition.content_type()),
            )],
            body,
        )
            .into_response(),
        Err(_) => {
            tracing::error!(
                code = "metrics.encoding",
                "metrics: the exposition could not be encoded"
            );
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// One family's samples by one label, in a fixed order (a
/// `prometheus_client` `Family` keeps a hash map, so its order would change
/// from scrape to scrape).
#[derive(Debug)]
struct ByLabel {
    kind: MetricType,
    labels: Vec<&'static str>,
    values: Vec<(Vec<String>, u64)>,
}

impl ByLabel {
    fn gauge(label: &'static str, values: Vec<(String, u64)>) -> ByLabel {
        ByLabel::of(MetricType::Gauge, label, values)
    }

    fn counter(label: &'static str, values: Vec<(String, u64)>) -> ByLabel {
        ByLabel::of(MetricType::Counter, label, values)
    }

    fn of(kind: MetricType, label: &'static str, values: Vec<(String, u64)>) -> ByLabel {
        ByLabel {
            kind,
            labels: vec![label],
            values: values.into_iter().map(|(v, n)| (vec![v], n)).collect(),
        }
    }
}

impl EncodeMetric for ByLabel {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (values, n) in &self.values {
            let labels: Vec<(&str, &str)> = self
                .labels
                .iter()
                .copied()
                .zip(values.iter().map(String::as_str))
                .collect();
            let mut sample = encoder.encode_family(&labels)?;
            match self.kind {
                MetricType::Counter => sample.encode_counter::<NoLabelSet, _, u64>(n, None)?,
                _ => sample.encode_gauge(n)?,
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        self.kind
    }
}

/// The per-connection flow-control series (docs/operations.md "Choosing
/// limits"): calls in flight and waiting (read from the shared flow
/// control; left out when it does not answer), throttled calls by limit
/// and `Retry-After` honoured (this process's counters). The only label
/// beyond the limit is the connection's name.
async fn register_connection_flows(
    registry: &mut Registry,
    engine: &Engine,
    counters: &coordinator_engine::metrics::CounterValues,
) {
    match engine.worker.connection_flows().await {
        Ok(flows) => {
            let in_flight = flows
                .iter()
                .map(|(c, f)| (c.clone(), f.in_flight))
                .collect();
            let waiting = flows.iter().map(|(c, f)| (c.clone(), f.waiting)).collect();
            registry.register(
                "coordinator_connection_calls_in_flight",
                "A connection's inFlight slots held, by calls and by each process's reserve, by connection",
                ByLabel::gauge("connection", in_flight),
            );
            registry.register(
                "coordinator_connection_calls_waiting",
                "Calls waiting for their connection's flow control, by connection",
                ByLabel::gauge("connection", waiting),
            );
        }
        Err(e) => {
            tracing::warn!(code = "store-unavailable", error = %e, "metrics: flow control not read");
        }
    }
    registry.register(
        "coordinator_connection_throttled",
        "Calls this process told to wait, by connection and limit (in-flight, rate, retry-after)",
        ByLabel {
            kind: MetricType::Counter,
            labels: vec!["connection", "limit"],
            values: counters
                .throttled
                .iter()
                .map(|((c, l), n)| (vec![c.clone(), l.as_str().to_owned()], *n))
                .collect(),
        },
    );
    registry.register(
        "coordinator_connection_retry_after_honoured",
        "A product's Retry-After recorded for its connection, by connection",
        ByLabel::counter(
            "connection",
            counters.retry_after_honoured.clone().into_iter().collect(),
        ),
    );
}

/// `coordinator_live_runs{workflow,revision}`: the runs that have not
/// ended on each revision ([`RunCounts::live_runs_by_revision`], kept by
/// the store: a moved run counts on the revision it moved to), and each
/// revision this process serves as active with 0 when none of its runs is
/// live; left out (and counted as a store error) when the store does not
/// answer. The labels are bounded by the revisions still live, never by
/// runs.
async fn register_live_runs(registry: &mut Registry, engine: &Engine, counts: &dyn RunCounts) {
    let live = match counts.live_runs_by_revision().await {
        Ok(live) => live,
        Err(e) => {
            let e = engine.health.count_outage(e);
            tracing::warn!(code = "store-unavailable", error = %e, "metrics: live runs by revision not read");
            return;
        }
    };
    let mut by: BTreeMap<(String, String), u64> = engine
        .admission
        .active_revisions()
        .iter()
        .map(|(workflow, revision)| ((workflow.clone(), revision.clone()), 0))
        .collect();
    for l in live {
        by.insert((l.workflow, l.revision), l.live);
    }
    registry.register(
        "coordinator_live_runs",
        "Runs that have not ended, by workflow and the revision they are on (active revisions and revisions with such runs)",
        ByLabel {
            kind: MetricType::Gauge,
            labels: vec!["workflow", "revision"],
            values: by
                .into_iter()
                .map(|((workflow, revision), n)| (vec![workflow, revision], n))
                .collect(),
        },
    );
}

/// Counter values for each fixed label, then any other label seen (in
/// label order).
fn with_fixed(fixed: &[&str], mut seen: BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = fixed
        .iter()
        .map(|l| ((*l).to_owned(), seen.remove(*l).unwrap_or(0)))
        .collect();
    out.extend(seen);
    out
}

fn owned(v: &[(&'static str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|(l, n)| ((*l).to_owned(), *n)).collect()
}

// Help texts: the crate adds the final full stop.
fn register_store_ready(registry: &mut Registry, ready: bool) {
    registry.register(
        "coordinator_store_ready",
        "1 when the store answered this scrape's survey",
        ConstGauge::new(u64::from(ready)),
    );
}

/// The registry of one scrape: every series of docs/operations.md
/// "Metrics", with the values read now. Counters are registered without
/// `_total`; the encoders add it.
pub async fn registry(engine: &Engine, counts: &dyn RunCounts) -> Registry {
    let surveyed = survey(counts, engine).await;
    let counters = engine.health.counters().values();
    // Unknown (shown as not placed) while the store is unreachable.
    let holds = engine.operator.holds().await.unwrap_or_default();
    let mut registry = Registry::default();
    match &surveyed {
        Ok(s) => {
            registry.register(
                "coordinator_dispatch_jobs",
                "Dispatch jobs by state (ready, leased, sending)",
                ByLabel::gauge("state", owned(&s.dispatch_jobs_by_state())),
            );
            registry.register(
                "coordinator_runs",
                "Runs that have not ended, by state",
                ByLabel::gauge("state", owned(&s.runs_by_state())),
            );
            registry.register(
                "coordinator_waits",
                "Runs in a wait, by kind (wait-until, wait-for)",
                ByLabel::gauge("kind", owned(&s.waits_by_kind())),
            );
            registry.register(
                "coordinator_uncertain_runs",
                "Runs that have not ended and hold an unknown effect",
                ConstGauge::new(s.unknown_effects),
            );
        }
        Err(e) => {
            tracing::warn!(code = "store-unavailable", error = %e, "metrics: store survey failed");
        }
    }
    register_store_ready(&mut registry, surveyed.is_ok());
    register_live_runs(&mut registry, engine, counts).await;
    register_connection_flows(&mut registry, engine, &counters).await;
    registry.register(
        "coordinator_admissions",
        "Start requests by outcome",
        ByLabel::counter(
            "outcome",
            with_fixed(&ADMISSION_OUTCOMES, counters.admissions),
        ),
    );
    registry.register(
        "coordinator_dispatch_attempts",
        "Dispatch attempts by result",
        ByLabel::counter(
            "result",
            with_fixed(&DISPATCH_RESULTS, counters.dispatch_attempts),
        ),
    );
    registry.register(
        "coordinator_runs_ended",
        "Runs this process saw end, by state",
        ByLabel::counter("state", with_fixed(&ENDED_STATES, counters.runs_ended)),
    );
    registry.register(
        "coordinator_store_errors",
        "Store operations that failed because the store was unavailable",
        ConstCounter::new(counters.store_errors),
    );
    registry.register(
        "coordinator_hold",
        "1 while the hold is in place (restore, admission)",
        ByLabel::gauge(
            "hold",
            holds
                .named()
                .into_iter()
                .map(|(name, placed)| (name.to_owned(), u64::from(placed)))
                .collect(),
        ),
    );
    if let Some(offset) = engine.health.clock_offset_seconds() {
        registry.register(
            "coordinator_clock_offset_seconds",
            "This process's clock minus the database's at the last measurement, in seconds (positive: ahead)",
            ConstGauge::<f64>::new(offset),
        );
    }
    registry
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn while_waiting_only_the_store_is_not_ready_in_either_format() {
        use axum::body::Body;
        use axum::http::Request;
        use tower::ServiceExt;
        for (accept, content_type, body) in [
            (
                "*/*",
                CONTENT_TYPE_TEXT,
                "# HELP coordinator_store_ready 1 when the store answered this scrape's survey.\n\
                 # TYPE coordinator_store_ready gauge\ncoordinator_store_ready 0\n",
            ),
            (
                "application/openmetrics-text",
                CONTENT_TYPE_OPENMETRICS,
                "# HELP coordinator_store_ready 1 when the store answered this scrape's survey.\n\
                 # TYPE coordinator_store_ready gauge\ncoordinator_store_ready 0\n# EOF\n",
            ),
        ] {
            let request = Request::get("/metrics")
                .header(ACCEPT, accept)
                .body(Body::empty())
                .unwrap();
            let response = waiting_router().oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()[CONTENT_TYPE], content_type);
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .unwrap();
            assert_eq!(String::from_utf8(bytes.to_vec()).unwrap(), body);
        }
    }

    #[test]
    fn openmetrics_only_when_the_scraper_prefers_it() {
        use Exposition::{OpenMetrics, Prometheus};
        // Prometheus 3's default scrape protocols.
        let prometheus = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,\
                          application/openmetrics-text;version=0.0.1;q=0.4,\
                          text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,\
                          text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
        for (accept, expected) in [
            (None, Prometheus),
            (Some("*/*"), Prometheus),
            (Some("text/plain"), Prometheus),
            (Some("application/json"), Prometheus),
            (Some("application/openmetrics-text"), OpenMetrics),
            (
                Some("Application/OpenMetrics-Text; version=1.0.0"),
                OpenMetrics,
            ),
            (Some(prometheus), OpenMetrics),
            (Some("application/openmetrics-text;q=0"), Prometheus),
            (
                Some("text/plain;q=0.9, application/openmetrics-text;q=0.5"),
                Prometheus,
            ),
            (
                Some("text/plain;q=0.5, application/openmetrics-text;q=0.5"),
                OpenMetrics,
            ),
        ] {
            assert_eq!(Exposition::negotiate(accept), expected, "{accept:?}");
        }
    }

    fn sample() -> Registry {
        let mut registry = Registry::default();
        registry.register(
            "coordinator_hold",
            "1 while the hold is in place (restore, admission)",
            ByLabel::gauge("hold", vec![("restore".into(), 1), ("admission".into(), 0)]),
        );
        registry.register(
            "coordinator_admissions",
            "Start requests by outcome",
            ByLabel::counter(
                "outcome",
                with_fixed(
                    &["created", "existing"],
                    BTreeMap::from([("odd\"one".into(), 2)]),
                ),
            ),
        );
        registry.register(
            "coordinator_store_errors",
            "Store operations that failed because the store was unavailable",
            ConstCounter::new(3u64),
        );
        registry
    }

    #[test]
    fn prometheus_text_keeps_the_documented_names() {
        assert_eq!(
            Exposition::Prometheus.encode(&sample()).unwrap(),
            "# HELP coordinator_hold 1 while the hold is in place (restore, admission).\n\
             # TYPE coordinator_hold gauge\n\
             coordinator_hold{hold=\"restore\"} 1\n\
             coordinator_hold{hold=\"admission\"} 0\n\
             # HELP coordinator_admissions_total Start requests by outcome.\n\
             # TYPE coordinator_admissions_total counter\n\
             coordinator_admissions_total{outcome=\"created\"} 0\n\
             coordinator_admissions_total{outcome=\"existing\"} 0\n\
             coordinator_admissions_total{outcome=\"odd\\\"one\"} 2\n\
             # HELP coordinator_store_errors_total Store operations that failed because the store was unavailable.\n\
             # TYPE coordinator_store_errors_total counter\n\
             coordinator_store_errors_total 3\n"
        );
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_and_ends_with_eof() {
        assert_eq!(
            Exposition::OpenMetrics.encode(&sample()).unwrap(),
            "# HELP coordinator_hold 1 while the hold is in place (restore, admission).\n\
             # TYPE coordinator_hold gauge\n\
             coordinator_hold{hold=\"restore\"} 1\n\
             coordinator_hold{hold=\"admission\"} 0\n\
             # HELP coordinator_admissions Start requests by outcome.\n\
             # TYPE coordinator_admissions counter\n\
             coordinator_admissions_total{outcome=\"created\"} 0\n\
             coordinator_admissions_total{outcome=\"existing\"} 0\n\
             coordinator_admissions_total{outcome=\"odd\\\"one\"} 2\n\
             # HELP coordinator_store_errors Store operations that failed because the store was unavailable.\n\
             # TYPE coordinator_store_errors counter\n\
             coordinator_store_errors_total 3\n\
             # EOF\n"
        );
    }
}
