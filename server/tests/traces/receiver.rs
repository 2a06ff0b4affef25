//! A small OTLP/HTTP traces receiver for the journeys: `POST /v1/traces`
//! with a protobuf `ExportTraceServiceRequest` (decoded with the
//! `opentelemetry-proto` types), answered with an empty
//! `ExportTraceServiceResponse`. It keeps every span it got, flattened.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;

/// One exported span, ids as lowercase hex.
#[derive(Clone, Debug)]
pub struct Got {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// OTLP's `SpanKind` number (2 server, 3 client).
    pub kind: i32,
    pub start_nanos: u64,
    pub end_nanos: u64,
    /// The span's attributes, each value as text.
    pub attributes: Vec<(String, String)>,
    /// The resource's attributes, each value as text.
    pub resource: Vec<(String, String)>,
    /// The status message, if any.
    pub status: String,
}

impl Got {
    /// The text of attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A receiver on 127.0.0.1 (its port in [`Receiver::endpoint`]).
pub struct Receiver {
    pub base: String,
    spans: Arc<Mutex<Vec<Got>>>,
    /// Export requests that did not decode.
    garbled: Arc<Mutex<usize>>,
    _server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    spans: Arc<Mutex<Vec<Got>>>,
    garbled: Arc<Mutex<usize>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let garbled = Arc::new(Mutex::new(0));
        let shared = Shared {
            spans: spans.clone(),
            garbled: garbled.clone(),
        };
        let app = Router::new()
            .route("/v1/traces", post(export))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver {
            base,
            spans,
            garbled,
            _server: server,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    /// How many export requests did not decode.
    pub fn garbled(&self) -> usize {
        *self.garbled.lock().unwrap()
    }
}

async fn export(State(s): State<Shared>, body: Bytes) -> impl IntoResponse {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        *s.garbled.lock().unwrap() += 1;
        return (StatusCode::BAD_REQUEST, Vec::new()).into_response();
    };
    let mut got = Vec::new();
    for rs in request.resource_spans {
        let resource: Vec<(String, String)> = rs
            .resource
            .map(|r| r.attributes.iter().map(flat).collect())
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for span in ss.spans {
                got.push(Got {
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    name: span.name,
                    kind: span.kind,
                    start_nanos: span.start_time_unix_nano,
                    end_nanos: span.end_time_unix_nano,
                    attributes: span.attributes.iter().map(flat).collect(),
                    resource: resource.clone(),
                    status: span.status.map(|st| st.message).unwrap_or_default(),
                });
            }
        }
    }
    s.spans.lock().unwrap().extend(got);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

fn flat(kv: &KeyValue) -> (String, String) {
    (
        kv.key.clone(),
        kv.value.as_ref().map(text).unwrap_or_default(),
    )
}

fn text(v: &AnyValue) -> String {
    match &v.value {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(Any::BytesValue(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Any::ArrayValue(a)) => a.values.iter().map(text).collect::<Vec<_>>().join(","),
        Some(Any::KvlistValue(l)) => l
            .values
            .iter()
            .map(|kv| {
                let (k, v) = flat(kv);
                format!("{k}={v}")
            })
            .collect::<Vec<_>>()
            .join(","),
        // A string by index into a dictionary the exporter does not send.
        Some(Any::StringValueStrindex(i)) => format!("#{i}"),
        None => String::new(),
    }
}
