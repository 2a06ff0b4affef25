//! The engine's OpenTelemetry spans (docs/operations.md "Traces"), made
//! through a tracer the embedding process hands over
//! ([`crate::Engine::with_tracer`]); this crate never installs or reads a
//! global provider. Without one every function here returns at once.
//!
//! A run is one trace. Its admission span is the parent of every other
//! span of the run, and its context (`RunRecord::trace_parent`) is stored
//! with the run, so whichever process carries a job out later, after any
//! restart, exports into the same trace: a span per step (exported when the
//! step ends; the instant the run entered it is kept in the step's ledger),
//! per call attempt (live: the adapter's HTTP client span is its child, and
//! the product gets its `traceparent`), per wait (a wake, a completion or
//! the deadline, from the instant the step began to the event that ended
//! it), and per operator action on the run. A run admitted while traces
//! were off has no context and no spans.
//!
//! Attributes are the identifiers the logs carry: workflow, revision, run
//! id, step, connection, attempt, outcome and problem code; never an
//! input, output, command, token or key.
//!
//! Here: the tracer, the attribute keys and the conversions to the SDK's
//! terms; the core's methods that make the spans are `spans.rs`.

use coordinator_ir::instant::Instant;
use coordinator_ports::store::RunRecord;
use coordinator_ports::TraceParent;
use coordinator_vm::Answer;
use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::trace::{
    Span, SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Context, KeyValue};

/// Attribute keys (namespaced `coordinator.`, except OpenTelemetry's own).
pub mod keys {
    /// The workflow name.
    pub const WORKFLOW: &str = "coordinator.workflow";
    /// The run's revision (`sha256:<hex>`).
    pub const REVISION: &str = "coordinator.revision";
    /// The run id.
    pub const RUN: &str = "coordinator.run";
    /// The step name.
    pub const STEP: &str = "coordinator.step";
    /// The connection name.
    pub const CONNECTION: &str = "coordinator.connection";
    /// The VM's attempt number, from 1.
    pub const ATTEMPT: &str = "coordinator.attempt";
    /// What an attempt, an admission or an action came to.
    pub const OUTCOME: &str = "coordinator.outcome";
    /// The product's or the host's problem code.
    pub const PROBLEM_CODE: &str = "coordinator.problem_code";
    /// The wait's kind: `wait-until`, `wait-for` or `deadline`.
    pub const WAIT_KIND: &str = "coordinator.wait_kind";
    /// The operator action: `cancel`, `retry-same`, `reconcile`.
    pub const ACTION: &str = "coordinator.action";
    /// The run's state after the span's event.
    pub const STATE: &str = "coordinator.state";
}

/// The tracer the engine makes its spans with.
pub(crate) struct RunTracer {
    pub(crate) tracer: BoxedTracer,
}

impl RunTracer {
    pub(crate) fn new(tracer: BoxedTracer) -> Self {
        RunTracer { tracer }
    }
}

/// An instant as the SDK takes it ([`coordinator_ports::clock::system_time`]).
pub(crate) use coordinator_ports::clock::system_time;

/// The context of the run's admission span, as a remote parent.
pub(crate) fn run_context(parent: &TraceParent) -> Context {
    Context::new().with_remote_span_context(span_context(parent))
}

fn span_context(parent: &TraceParent) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(parent.span_id),
        TraceFlags::new(parent.flags),
        true,
        TraceState::default(),
    )
}

/// A span's context as stored with a run.
fn trace_parent(cx: &SpanContext) -> Option<TraceParent> {
    cx.is_valid().then(|| TraceParent {
        trace_id: cx.trace_id().to_bytes(),
        span_id: cx.span_id().to_bytes(),
        flags: cx.trace_flags().to_u8(),
    })
}

pub(crate) fn run_attributes(run: &RunRecord) -> Vec<KeyValue> {
    vec![
        KeyValue::new(keys::WORKFLOW, run.workflow.clone()),
        KeyValue::new(keys::REVISION, run.revision.clone()),
        KeyValue::new(keys::RUN, run.id.clone()),
    ]
}

/// The outcome and problem code of an answer (the codes the logs carry).
pub(crate) fn answer_attributes(answer: &Answer) -> (&'static str, Option<&str>) {
    let code = match answer {
        Answer::Retryable { code }
        | Answer::Refused { code }
        | Answer::Uncertain { code }
        | Answer::InvalidCommand { code }
        | Answer::InvalidResponse { code } => Some(code.as_str()),
        Answer::DeclaredRefusal { refusal_code } => Some(refusal_code.as_str()),
        _ => None,
    };
    (answer.kind(), code)
}

/// An admission in progress: its span, ended by [`Admitting::end`].
pub(crate) struct Admitting {
    pub(crate) span: BoxedSpan,
}

impl Admitting {
    /// The context stored with the run: every later span descends from it.
    pub(crate) fn trace_parent(&self) -> Option<TraceParent> {
        trace_parent(self.span.span_context())
    }

    /// Ends the admission span: `outcome` (`created`, `existing`, or the
    /// refusal), and the run when one was admitted or found.
    pub(crate) fn end(mut self, outcome: &str, run: Option<&RunRecord>, now: &Instant) {
        self.span
            .set_attribute(KeyValue::new(keys::OUTCOME, outcome.to_owned()));
        if let Some(run) = run {
            for kv in run_attributes(run) {
                self.span.set_attribute(kv);
            }
            self.span
                .set_attribute(KeyValue::new(keys::STATE, run.status().as_str().to_owned()));
        }
        self.span.end_with_timestamp(system_time(now));
    }
}

/// What the core's `feed` notes about a traced run before it commits.
pub(crate) struct Before {
    pub(crate) parent: TraceParent,
    pub(crate) path_len: usize,
    pub(crate) wait: Option<(String, &'static str)>,
}
