//! The HTTP client span of a request to a product (docs/operations.md
//! "Traces"): made only when the adapter was given a tracer
//! ([`crate::HttpAdapter::with_tracer`]) and the request is sent inside a
//! span (the engine's attempt span, carried by the OpenTelemetry context
//! of the future). The product gets the span's W3C `traceparent`.
//!
//! Its attributes are OpenTelemetry's HTTP client conventions without the
//! URL's path or query (a path may carry a record's identifier): method,
//! server address and port, status; plus the catalogue operation.

use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use reqwest::{Method, Url};

use coordinator_ports::TraceParent;

/// A client span in progress, or none.
pub(crate) struct ClientSpan(Option<BoxedSpan>);

impl ClientSpan {
    /// The span of a `method` request to `url` for `operation_id`, the
    /// child of the current context's span; none without a tracer or
    /// outside a span.
    pub(crate) fn start(
        tracer: Option<&BoxedTracer>,
        method: &Method,
        url: &Url,
        operation_id: &str,
    ) -> ClientSpan {
        let Some(tracer) = tracer else {
            return ClientSpan(None);
        };
        let cx = Context::current();
        if !cx.span().span_context().is_valid() {
            return ClientSpan(None);
        }
        let mut attributes = vec![
            KeyValue::new("http.request.method", method.as_str().to_owned()),
            KeyValue::new("coordinator.operation", operation_id.to_owned()),
        ];
        if let Some(host) = url.host_str() {
            attributes.push(KeyValue::new("server.address", host.to_owned()));
        }
        if let Some(port) = url.port_or_known_default() {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        let span = tracer.build_with_context(
            tracer
                .span_builder(method.as_str().to_owned())
                .with_kind(SpanKind::Client)
                .with_attributes(attributes),
            &cx,
        );
        ClientSpan(Some(span))
    }

    /// The `traceparent` header value that names this span as the
    /// product's parent.
    pub(crate) fn traceparent(&self) -> Option<String> {
        let cx = self.0.as_ref()?.span_context();
        cx.is_valid().then(|| {
            TraceParent {
                trace_id: cx.trace_id().to_bytes(),
                span_id: cx.span_id().to_bytes(),
                flags: cx.trace_flags().to_u8(),
            }
            .to_string()
        })
    }

    /// Ends the span with the response's status, or the transport error's
    /// kind (`timeout`, `connect`, `body`, ...) when there was none.
    pub(crate) fn end(self, status: Result<u16, &'static str>) {
        let Some(mut span) = self.0 else { return };
        match status {
            Ok(status) => {
                span.set_attribute(KeyValue::new(
                    "http.response.status_code",
                    i64::from(status),
                ));
                if status >= 400 {
                    span.set_status(Status::error(status.to_string()));
                }
            }
            Err(kind) => {
                span.set_attribute(KeyValue::new("error.type", kind));
                span.set_status(Status::error(kind));
            }
        }
        span.end();
    }
}
