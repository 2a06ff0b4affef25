//! `otlp-sink`: an OTLP/HTTP traces receiver for the flow phase of
//! `scripts/bench.sh` (scripts/bench-flow.sh), so tracing can be measured
//! on without a collector. It answers `POST /v1/traces` (a protobuf
//! `ExportTraceServiceRequest`, decoded with the `opentelemetry-proto`
//! types) with 200 and an empty `ExportTraceServiceResponse`, counts the
//! spans, and after each request rewrites `--count-file` (`spans=N`,
//! `requests=N`, `garbled=N`, one a line; a temporary file renamed over it,
//! so a reader never sees half of it). The file is written once at the
//! start, with zeros: the script waits for it to know the sink listens.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use clap::Args;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use crate::Failure;

#[derive(Args)]
pub(crate) struct OtlpSinkArgs {
    /// The loopback port to listen on (`free-ports`).
    #[arg(long)]
    port: u16,
    /// Where the counts are written.
    #[arg(long)]
    count_file: PathBuf,
    /// Exit when this process (bench.sh) is gone.
    #[arg(long)]
    watch_pid: Option<u32>,
}

#[derive(Default)]
struct Counts {
    spans: u64,
    requests: u64,
    garbled: u64,
}

#[derive(Clone)]
struct Sink {
    counts: Arc<Mutex<Counts>>,
    file: Arc<PathBuf>,
}

impl Sink {
    /// Writes the counts (the lock held, so writes never interleave).
    fn write(&self, c: &Counts) -> Result<(), Failure> {
        let tmp = self.file.with_extension("tmp");
        let text = format!(
            "spans={}\nrequests={}\ngarbled={}\n",
            c.spans, c.requests, c.garbled
        );
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, self.file.as_path()))
            .map_err(|e| format!("cannot write {}: {e}", shown(&self.file)))
    }
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// Serves until it is stopped (SIGTERM) or `--watch-pid` is gone.
pub(crate) async fn run(a: OtlpSinkArgs) -> Result<(), Failure> {
    if let Some(pid) = a.watch_pid {
        crate::soak::exit_once_the_process_is_gone(pid);
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", a.port))
        .await
        .map_err(|e| format!("otlp-sink cannot listen on 127.0.0.1:{}: {e}", a.port))?;
    let sink = Sink {
        counts: Arc::new(Mutex::new(Counts::default())),
        file: Arc::new(a.count_file),
    };
    sink.write(&Counts::default())?;
    // An export batch (512 spans by default) is far below this; a bigger
    // one is counted rather than refused.
    let app = Router::new()
        .route("/v1/traces", post(export))
        .layer(DefaultBodyLimit::max(64 << 20))
        .with_state(sink);
    axum::serve(listener, app)
        .await
        .map_err(|e| format!("otlp-sink stopped: {e}"))
}

async fn export(State(s): State<Sink>, body: Bytes) -> Response {
    let decoded = ExportTraceServiceRequest::decode(body);
    let mut c = s.counts.lock().unwrap();
    c.requests += 1;
    let answer = match &decoded {
        Ok(request) => {
            c.spans += request
                .resource_spans
                .iter()
                .flat_map(|rs| &rs.scope_spans)
                .map(|ss| ss.spans.len() as u64)
                .sum::<u64>();
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/x-protobuf")],
                ExportTraceServiceResponse::default().encode_to_vec(),
            )
                .into_response()
        }
        Err(_) => {
            c.garbled += 1;
            (StatusCode::BAD_REQUEST, Vec::new()).into_response()
        }
    };
    if let Err(e) = s.write(&c) {
        eprintln!("throughput otlp-sink: {e}");
        return (StatusCode::INTERNAL_SERVER_ERROR, e).into_response();
    }
    answer
}
