//! The service's OpenTelemetry traces (docs/operations.md "Traces"), off
//! unless an endpoint is configured
//! (`coordinator_runtime::telemetry::traces_export`: the runtime file's
//! `telemetry.traces.endpoint`, else the standard `OTEL_EXPORTER_OTLP_*`
//! variables).
//!
//! When on, this process owns one tracer provider: a batch span processor
//! (its own thread; `OTEL_BSP_*` tune it) and the OTLP/HTTP protobuf
//! exporter, which posts over the reqwest client the service already
//! uses, on the service's runtime (`ExportClient`). Its tracer is handed
//! to the engine and the product adapter; the global provider is never
//! set, so a process that embeds the service keeps its own.
//!
//! The inbound `traceparent` of a start is read by the SDK's W3C
//! propagator ([`inbound_trace_parent`]).

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use coordinator_ports::TraceParent;
use coordinator_runtime::telemetry::{traces_export, TelemetryFault, TracesExport};
use coordinator_runtime::RuntimeConfig;
use opentelemetry::global::BoxedTracer;
use opentelemetry::global::ObjectSafeTracerProvider;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry::InstrumentationScope;
use opentelemetry_http::{HeaderExtractor, HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

/// How long one export may take (OTLP's default).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The service's traces: its tracer provider and where it exports.
pub struct Traces {
    provider: SdkTracerProvider,
    /// Where spans go, and the setting that said so.
    pub export: TracesExport,
}

impl Traces {
    /// A tracer of this provider (scope `coordinator`), for the engine and
    /// the adapter.
    pub fn tracer(&self) -> BoxedTracer {
        let scope = InstrumentationScope::builder("coordinator")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        BoxedTracer::new(self.provider.boxed_tracer(scope))
    }

    /// Exports what is still queued and stops the processor's thread,
    /// waiting at most `timeout` (blocking: call it off the async
    /// runtime's threads). Failures and a receiver that does not answer in
    /// time are logged; a stop never waits longer.
    pub fn shutdown(self, timeout: Duration) {
        if let Err(e) = self.provider.shutdown_with_timeout(timeout) {
            tracing::warn!(error = %e, "traces: the last spans could not be exported");
        }
    }
}

/// Where traces go per `config` and the process's variables, and the
/// provider exporting there; `None` when traces are off (nothing is built).
/// `runtime` runs the exports' requests.
///
/// # Errors
/// A variable that names another protocol or an unusable URL
/// ([`TelemetryFault`]), or an exporter that cannot be built: the code
/// (`coordinator.runtime.telemetry-export`) and what is wrong.
pub fn start(
    config: &RuntimeConfig,
    runtime: tokio::runtime::Handle,
) -> Result<Option<Traces>, (&'static str, String)> {
    let code = coordinator_runtime::codes::RUNTIME_TELEMETRY_EXPORT;
    let export = traces_export(config.telemetry.as_ref(), |name| std::env::var(name).ok())
        .map_err(|e: TelemetryFault| (e.code(), e.to_string()))?;
    let Some(export) = export else {
        return Ok(None);
    };
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(EXPORT_TIMEOUT)
        .user_agent(concat!("registry-coordinator/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| (code, format!("traces: cannot build the HTTP client: {e}")))?;
    let exporter = SpanExporter::builder()
        .with_http()
        .with_http_client(ExportClient { http, runtime })
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(export.endpoint.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| (code, format!("traces: cannot build the OTLP exporter: {e}")))?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("coordinator");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    Ok(Some(Traces { provider, export }))
}

/// The caller's W3C `traceparent`, read by the SDK's propagator; `None`
/// when the request has none or an unreadable one (the run then starts a
/// trace of its own).
pub fn inbound_trace_parent(headers: &http::HeaderMap) -> Option<TraceParent> {
    headers.get("traceparent")?;
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| TraceParent {
        trace_id: sc.trace_id().to_bytes(),
        span_id: sc.span_id().to_bytes(),
        flags: sc.trace_flags().to_u8(),
    })
}

/// The exporter's HTTP client: the service's reqwest client, its requests
/// run on the service's runtime (the batch processor's thread has none).
struct ExportClient {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl fmt::Debug for ExportClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExportClient")
    }
}

#[async_trait::async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.http.clone();
        let answered = self
            .runtime
            .spawn(async move {
                let response = client.execute(request).await?;
                let status = response.status();
                let headers = response.headers().clone();
                let body = response.bytes().await?;
                Ok::<_, reqwest::Error>((status, headers, body))
            })
            .await??;
        let (status, headers, body) = answered;
        let mut response = http::Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}
