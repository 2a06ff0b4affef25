//! [`Spans`]: the spans the engine makes of runs (docs/operations.md
//! "Traces"): the admission span, the step and wait spans `feed` makes
//! after a commit, the attempt span the worker wraps a dispatch in, and the
//! operator actions' spans, each through the tracer once handed over
//! ([`crate::trace`]: the tracer, the keys, the SDK's terms); none without
//! one. Spans are measured: each reads the clock where it starts and ends.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::SystemTime;

use coordinator_ir::instant::Instant;
use coordinator_ports::adapter::{AdapterError, Outcome};
use coordinator_ports::store::{RunRecord, StepLedger};
use coordinator_ports::TraceParent;
use coordinator_vm::{Event, Vm};
use opentelemetry::trace::{FutureExt, Span, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};

use coordinator_ports::clock::Clock;
use std::sync::{Arc, OnceLock};

use crate::trace::{
    answer_attributes, keys, run_attributes, run_context, system_time, Admitting, Before, RunTracer,
};

/// The tracer of runs' spans, once handed over
/// ([`crate::Engine::with_tracer`]), and the clock spans are timed by;
/// without a tracer, no span is made.
pub(crate) struct Spans {
    tracer: OnceLock<RunTracer>,
    clock: Arc<dyn Clock>,
}

impl Spans {
    /// No tracer yet; spans timed by `clock`.
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Spans {
            tracer: OnceLock::new(),
            clock,
        }
    }

    /// Makes spans with `tracer` from now on; `false` when one was handed
    /// over already (the second is ignored).
    pub(crate) fn attach(&self, tracer: RunTracer) -> bool {
        self.tracer.set(tracer).is_ok()
    }

    fn tracer(&self) -> Option<&RunTracer> {
        self.tracer.get()
    }

    /// Starts the admission span of a start, the child of the caller's
    /// `traceparent` when it sent one; `None` when traces are off.
    pub(crate) fn trace_admission(&self, inbound: Option<TraceParent>) -> Option<Admitting> {
        let tracer = self.tracer()?;
        let parent = inbound.map_or_else(Context::new, |p| run_context(&p));
        let span = tracer.tracer.build_with_context(
            tracer
                .tracer
                .span_builder("coordinator.admission")
                .with_kind(SpanKind::Server)
                .with_start_time(system_time(&self.clock.now())),
            &parent,
        );
        Some(Admitting { span })
    }

    /// The steps a new run went through at admission: a span for each
    /// one it left (and the last, if it ended there), from `started`.
    pub(crate) fn trace_admitted_steps(&self, run: &RunRecord, started: &Instant) {
        let Some((tracer, parent)) = self.tracer().zip(run.trace_parent) else {
            return;
        };
        let now = self.clock.now();
        self.ended_steps(tracer, &parent, run, 0, Some(*started), &now);
    }

    /// Notes what [`Spans::trace_fed`] needs of a traced run before `feed`
    /// commits: its path's length and the wait it is in.
    pub(crate) fn trace_before(&self, vm: &Vm, run: &RunRecord) -> Option<Before> {
        self.tracer()?;
        let parent = run.trace_parent?;
        Some(Before {
            parent,
            path_len: run.state.path.len(),
            wait: vm
                .current_wait(&run.state)
                .map(|w| (w.step.to_owned(), w.kind.as_str())),
        })
    }

    /// Records in the ledger the instant the run entered each step it
    /// entered in this commit (the start of the step's span).
    pub(crate) fn trace_entered(
        &self,
        before: Option<&Before>,
        path: &[String],
        ledger: &mut BTreeMap<String, StepLedger>,
    ) {
        let Some(before) = before else { return };
        let now = self.clock.now();
        for step in path.iter().skip(before.path_len) {
            ledger.entry(step.clone()).or_default().entered_at = Some(now);
        }
    }

    /// After `feed` committed `event` on a traced run (now `run`): a span
    /// for each step the run left, and for the wait the event ended.
    pub(crate) fn trace_fed(&self, before: Option<Before>, run: &RunRecord, event: &Event) {
        let Some((tracer, before)) = self.tracer().zip(before) else {
            return;
        };
        let now = self.clock.now();
        if let Some((step, kind)) = &before.wait {
            let kind = match event {
                Event::TimerFired { at } if *at == run.state.deadline_at => "deadline",
                Event::TimerFired { .. } | Event::CompletionObserved { .. } => kind,
                _ => "",
            };
            if !kind.is_empty() {
                let started = run.ledger.get(step).and_then(|l| l.entered_at);
                let mut attributes = run_attributes(run);
                attributes.push(KeyValue::new(keys::STEP, step.clone()));
                attributes.push(KeyValue::new(keys::WAIT_KIND, kind));
                self.closed_span(
                    tracer,
                    &before.parent,
                    "coordinator.wait",
                    system_time(started.as_ref().unwrap_or(&run.state.admitted_at)),
                    attributes,
                    &now,
                );
            }
        }
        let from = before.path_len.saturating_sub(1);
        self.ended_steps(tracer, &before.parent, run, from, None, &now);
    }

    /// Spans for the steps of `run.state.path` from index `from` that the
    /// run has left (every one but the last, and the last too once the
    /// run ended), each from the instant it was entered (its ledger, else
    /// `fallback`, else the admission) to `now`.
    fn ended_steps(
        &self,
        tracer: &RunTracer,
        parent: &TraceParent,
        run: &RunRecord,
        from: usize,
        fallback: Option<Instant>,
        now: &Instant,
    ) {
        let path = &run.state.path;
        let ended = if run.status().is_terminal() {
            path.len()
        } else {
            path.len().saturating_sub(1)
        };
        for step in path.iter().take(ended).skip(from) {
            let started = run.ledger.get(step).and_then(|l| l.entered_at).or(fallback);
            let started = system_time(started.as_ref().unwrap_or(&run.state.admitted_at));
            let mut attributes = run_attributes(run);
            attributes.push(KeyValue::new(keys::STEP, step.clone()));
            self.closed_span(tracer, parent, "coordinator.step", started, attributes, now);
        }
    }

    /// A span of the run that began at `start` and ends now.
    fn closed_span(
        &self,
        tracer: &RunTracer,
        parent: &TraceParent,
        name: &'static str,
        start: SystemTime,
        attributes: Vec<KeyValue>,
        now: &Instant,
    ) {
        let mut span = tracer.tracer.build_with_context(
            tracer
                .tracer
                .span_builder(Cow::Borrowed(name))
                .with_start_time(start)
                .with_attributes(attributes),
            &run_context(parent),
        );
        span.end_with_timestamp(system_time(now));
    }

    /// Carries out `sent` (one dispatch attempt of call step `step` on
    /// `connection`) inside its attempt span, when the run is traced: the
    /// adapter's HTTP client span is the attempt span's child.
    pub(crate) async fn traced_attempt<F>(
        &self,
        run: &RunRecord,
        step: &str,
        connection: &str,
        attempt: u32,
        sent: F,
    ) -> Result<Outcome, AdapterError>
    where
        F: Future<Output = Result<Outcome, AdapterError>>,
    {
        let Some((tracer, parent)) = self.tracer().zip(run.trace_parent) else {
            return sent.await;
        };
        let mut attributes = run_attributes(run);
        attributes.extend([
            KeyValue::new(keys::STEP, step.to_owned()),
            KeyValue::new(keys::CONNECTION, connection.to_owned()),
            KeyValue::new(keys::ATTEMPT, i64::from(attempt)),
        ]);
        let span = tracer.tracer.build_with_context(
            tracer
                .tracer
                .span_builder("coordinator.attempt")
                .with_start_time(system_time(&self.clock.now()))
                .with_attributes(attributes),
            &run_context(&parent),
        );
        let cx = Context::new().with_span(span);
        let result = sent.with_context(cx.clone()).await;
        let span = cx.span();
        match &result {
            Ok(outcome) => {
                let answer = outcome.clone().into_answer();
                let (kind, code) = answer_attributes(&answer);
                span.set_attribute(KeyValue::new(keys::OUTCOME, kind));
                if let Some(code) = code {
                    span.set_attribute(KeyValue::new(keys::PROBLEM_CODE, code.to_owned()));
                }
                if kind != "success" {
                    span.set_status(Status::error(kind));
                }
            }
            Err(AdapterError::NotSent(_)) => {
                span.set_attribute(KeyValue::new(keys::OUTCOME, "not-sent"));
            }
            Err(_) => {
                span.set_attribute(KeyValue::new(keys::OUTCOME, "host-fault"));
                span.set_status(Status::error("host-fault"));
            }
        }
        span.end_with_timestamp(system_time(&self.clock.now()));
        result
    }

    /// A span for operator action `action` on `run` (traced runs only),
    /// from `started` to now, with what it came to.
    pub(crate) fn trace_action(
        &self,
        run: &RunRecord,
        action: &'static str,
        started: &Instant,
        outcome: &str,
    ) {
        let Some((tracer, parent)) = self.tracer().zip(run.trace_parent) else {
            return;
        };
        let mut attributes = run_attributes(run);
        attributes.extend([
            KeyValue::new(keys::ACTION, action),
            KeyValue::new(keys::OUTCOME, outcome.to_owned()),
            KeyValue::new(keys::STATE, run.status().as_str()),
        ]);
        self.closed_span(
            tracer,
            &parent,
            "coordinator.operator",
            system_time(started),
            attributes,
            &self.clock.now(),
        );
    }
}
