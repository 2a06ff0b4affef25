//! Admission (SPEC §8 `POST /v1/runs`, SPEC §2.4 event starts): the start
//! identity is looked up before any refusal, so a repeated start finds its
//! run whatever refuses new ones; a new start is checked by the VM and
//! stored with its first jobs in one store step.

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator_ports::clock::whole_second;
use coordinator_ports::store::{Admitted, NewRun, Owner, RunRecord, StoreError};
use coordinator_runtime::binding;
use coordinator_vm::{RejectCode, Vm};
use serde_json::Value;

use coordinator_ports::store::LeaseOnInsert;
use coordinator_ports::TraceParent;

use coordinator_ports::store::{Definitions, RunAdmission};
use coordinator_runtime::keys::AdmissionKey;

use crate::group::{Group, GROUP_MAX, GROUP_SLOTS};
use crate::parts::Parts;

/// A verified caller (from an RFC 9068 access token).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// `iss`.
    pub iss: String,
    /// `sub`.
    pub sub: String,
    /// `client_id` (the policy key).
    pub client_id: String,
}

impl Principal {
    /// The run owner this principal is.
    pub fn owner(&self) -> Owner {
        Owner {
            iss: self.iss.clone(),
            sub: self.sub.clone(),
        }
    }
}

/// A trusted event producer: one `eventSources` entry of runtime.yaml
/// (SPEC §2.4), the authenticated party of `POST /v1/events/...` once its
/// signature verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventOrigin {
    /// The `eventSources` name (what a trigger's `source` names).
    pub name: String,
    /// Its `source` URI, which every event it signs must carry as `source`.
    pub source: String,
}

impl EventOrigin {
    /// The owner of the runs its events start (docs/service.md): `iss` is
    /// the source URI and `sub` the `eventSources` name. No token caller
    /// has this owner (`coordinator` refuses to start when the token issuer
    /// equals an event source URI), so only operators see these runs.
    pub fn owner(&self) -> Owner {
        Owner {
            iss: self.source.clone(),
            sub: self.name.clone(),
        }
    }
}

/// What an active Program's trigger expects of an event (SPEC §2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerInfo {
    /// The `eventSources` entry whose key signs its events.
    pub source: String,
    /// The CloudEvents `type` it accepts.
    pub event_type: String,
}

/// A start request (`POST /v1/runs` body, SPEC §8).
#[derive(Clone, Debug, PartialEq)]
pub struct StartRequest {
    /// The workflow name.
    pub workflow: String,
    /// The expected revision; must be the active one.
    pub revision: String,
    /// The run input.
    pub input: Value,
    /// The caller's W3C `traceparent`, if it sent one: with traces on, the
    /// run's admission span is its child (docs/operations.md "Traces").
    pub trace_parent: Option<TraceParent>,
}

/// Why an admission was refused.
#[derive(Debug)]
pub enum AdmitError {
    /// No package serves this workflow.
    UnknownWorkflow,
    /// The revision is not the workflow's active one (409).
    RevisionNotActive {
        /// The active revision.
        active: String,
    },
    /// The input schema refused the input (400); the message names the
    /// JSON Pointer, never the value.
    InputRefused(String),
    /// The key was used with another revision or input (409
    /// `idempotency.key-reused`).
    KeyReused,
    /// `--recovery-only`: no admissions (409 `admission.recovery-only`).
    RecoveryOnly,
    /// The admission hold is in place (409 `admission.held`).
    AdmissionHeld,
    /// This process's binding of `connection` is not the one the last
    /// `apply` recorded (409 `binding.conflict`): it serves another runtime
    /// file; restart it with the one apply used.
    BindingConflict {
        /// The first such connection, by name.
        connection: String,
    },
    /// An `apply` changed the active packages after this process started
    /// (409 `deployment.activation-changed`): restart it with the runtime
    /// file apply used. Only new starts get it.
    ActivationChanged,
    /// Event starts: the workflow's active Program has no such trigger.
    UnknownTrigger,
    /// Event starts: the event's `source` is not its event source's URI.
    EventSourceMismatch,
    /// Event starts: the event's `type` is not the trigger's `eventType`.
    EventTypeMismatch,
    /// Event starts: the trigger's mappings fail on the event (a member they
    /// read is missing, the idempotency value is not a non-empty string),
    /// or the input schema refuses what they made. The message names no
    /// value.
    EventRefused(String),
    /// The store failed.
    Store(StoreError),
}

impl AdmitError {
    /// The refusal as an admission span's outcome: a short fixed label,
    /// never the message (which may name input members).
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            AdmitError::UnknownWorkflow => "unknown-workflow",
            AdmitError::RevisionNotActive { .. } => "revision-not-active",
            AdmitError::InputRefused(_) => "input-refused",
            AdmitError::KeyReused => "key-reused",
            AdmitError::RecoveryOnly => "recovery-only",
            AdmitError::AdmissionHeld => "admission-held",
            AdmitError::BindingConflict { .. } => "binding-conflict",
            AdmitError::ActivationChanged => "activation-changed",
            AdmitError::UnknownTrigger => "unknown-trigger",
            AdmitError::EventSourceMismatch => "event-source-mismatch",
            AdmitError::EventTypeMismatch => "event-type-mismatch",
            AdmitError::EventRefused(_) => "event-refused",
            AdmitError::Store(_) => "store-error",
        }
    }
}

impl From<StoreError> for AdmitError {
    fn from(e: StoreError) -> Self {
        AdmitError::Store(e)
    }
}

/// A start about to be admitted, once its workflow and revision are known
/// to be served: who starts which workflow at which revision, and the
/// start identity and request digest it is kept under.
struct NewStart {
    /// The run's owner (a token's principal, or an event source).
    owner: Owner,
    /// The start identity (a repeated start finds its run by it).
    start_identity: String,
    /// The keyed fingerprint of the revision and input.
    request_digest: String,
    /// The workflow.
    workflow: String,
    /// The active revision it runs under.
    revision: String,
}

/// What an admission answers: the store's answer and the jobs leased on
/// insert, or the store's error.
pub(crate) type AdmittedOrError =
    Result<(Admitted, Vec<coordinator_ports::store::Job>), StoreError>;

/// The store ports admission may touch: nothing else of the store.
pub(crate) struct AdmissionPorts {
    /// Admits runs (in groups) and finds the run a start identity names.
    pub(crate) admission: Arc<dyn RunAdmission>,
    /// Whether the active packages are still those this process started
    /// with.
    pub(crate) definitions: Arc<dyn Definitions>,
}

/// One role of the engine: admission. Starts by token and by event become
/// runs through the group admission; its own state is the admissions in
/// flight.
pub struct Admission {
    ports: AdmissionPorts,
    parts: Parts,
    /// Derives start identities and request digests.
    admission_key: AdmissionKey,
    /// `--recovery-only`: no new start.
    recovery_only: bool,
    /// Admissions of this process written together
    /// ([`RunAdmission::admit_batch`]).
    ///
    /// [`RunAdmission::admit_batch`]: coordinator_ports::store::RunAdmission::admit_batch
    admissions: Group<(NewRun, Option<LeaseOnInsert>), AdmittedOrError>,
}

impl Admission {
    /// Admission over `ports` with `parts`, deriving start
    /// identities with `admission_key`; no new start when `recovery_only`.
    pub(crate) fn new(
        ports: AdmissionPorts,
        parts: Parts,
        admission_key: AdmissionKey,
        recovery_only: bool,
    ) -> Self {
        Admission {
            ports,
            parts,
            admission_key,
            recovery_only,
            admissions: Group::new(GROUP_SLOTS, GROUP_MAX),
        }
    }
}

impl Admission {
    /// The active revision of each workflow.
    pub fn active_revisions(&self) -> &BTreeMap<String, String> {
        self.parts.committer.programs().active_revisions()
    }

    /// Each active workflow with its revision and that revision's input
    /// schema (the Program's resolved JSON Schema), by workflow name: what
    /// this process admits (the served OpenAPI document's start variants).
    pub fn active_input_schemas(&self) -> Vec<(String, String, serde_json::Value)> {
        let programs = self.parts.committer.programs();
        programs
            .active_revisions()
            .iter()
            .filter_map(|(workflow, revision)| {
                let vm = programs.cached(revision)?;
                let program = vm.program();
                let input = program.schemas.get(program.input.index())?.clone();
                Some((workflow.clone(), revision.clone(), input))
            })
            .collect()
    }

    /// Whether the active packages are still the ones this process started
    /// with (no `apply` changed them since; the doctor's `activationReady`).
    ///
    /// # Errors
    /// The store's.
    pub async fn activation_current(&self) -> Result<bool, StoreError> {
        self.ports
            .definitions
            .activation_current()
            .await
            .map_err(|e| self.parts.fence.count_outage(e))
    }

    /// Admits a run (SPEC §8 `POST /v1/runs`): the revision must be the
    /// active one, the VM checks the input, and the run and its first jobs
    /// are stored in one step. Returns `(created, run)`: `false` for a
    /// repeat of the same key, revision and input.
    ///
    /// # Errors
    /// See [`AdmitError`].
    pub async fn admit(
        &self,
        principal: &Principal,
        request: StartRequest,
        idempotency_key: &str,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let result = self.admit_run(principal, request, idempotency_key).await;
        self.count_admission(&result);
        result
    }

    /// Counts an admission's outcome (`coordinator_admissions_total`).
    fn count_admission(&self, result: &Result<(bool, RunRecord), AdmitError>) {
        let outcome = match result {
            Ok((true, _)) => "created",
            Ok((false, _)) => "existing",
            Err(AdmitError::KeyReused) => "key-reused",
            Err(
                AdmitError::RecoveryOnly
                | AdmitError::AdmissionHeld
                | AdmitError::ActivationChanged
                | AdmitError::BindingConflict { .. },
            ) => "held",
            Err(AdmitError::Store(_)) => "store-error",
            Err(_) => "refused",
        };
        self.parts.counters.admission(outcome);
    }

    async fn admit_run(
        &self,
        principal: &Principal,
        request: StartRequest,
        idempotency_key: &str,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let start_identity = self.admission_key.start_identity(
            &principal.iss,
            &principal.sub,
            &request.workflow,
            idempotency_key,
        );
        let request_digest = self.request_digest(&request.revision, &request.input);
        let vm = match self.start_program(&request.workflow, &request.revision) {
            Ok(vm) => vm,
            Err(refusal) => {
                return self
                    .refuse_new_start(&start_identity, &request_digest, refusal)
                    .await
            }
        };
        let start = NewStart {
            owner: principal.owner(),
            start_identity,
            request_digest,
            workflow: request.workflow,
            revision: request.revision,
        };
        self.admit_prepared(&vm, start, request.input, request.trace_parent)
            .await
    }

    /// The keyed fingerprint of a start request (revision and canonical
    /// input): a repeat of a start identity with another one is
    /// `idempotency.key-reused`.
    fn request_digest(&self, revision: &str, input: &Value) -> String {
        self.admission_key
            .request_fingerprint(revision, &coordinator_ir::canonical::to_vec(input))
    }

    /// The Program a new start of `workflow` at `revision` runs under, or
    /// why this process admits no such start (`--recovery-only`, no such
    /// workflow, another active revision).
    fn start_program(&self, workflow: &str, revision: &str) -> Result<Arc<Vm>, AdmitError> {
        if self.recovery_only {
            return Err(AdmitError::RecoveryOnly);
        }
        let programs = self.parts.committer.programs();
        let active = programs
            .active_revisions()
            .get(workflow)
            .ok_or(AdmitError::UnknownWorkflow)?;
        if active != revision {
            return Err(AdmitError::RevisionNotActive {
                active: active.clone(),
            });
        }
        programs.cached(active).ok_or(AdmitError::UnknownWorkflow)
    }

    /// Refuses a start only if it is new: a start identity the store
    /// already holds answers with its run (the same request digest) or
    /// `idempotency.key-reused` (another one), whatever refuses new starts
    /// now (seed 000: an upgrade, a hold or `--recovery-only` never turns
    /// a repeated start away). A refusal about the workflow or revision
    /// becomes [`AdmitError::ActivationChanged`] when an `apply` changed
    /// the active packages since this process started.
    async fn refuse_new_start(
        &self,
        start_identity: &str,
        request_digest: &str,
        refusal: AdmitError,
    ) -> Result<(bool, RunRecord), AdmitError> {
        match self
            .ports
            .admission
            .find_start(start_identity, request_digest)
            .await
            .map_err(|e| self.parts.fence.count_outage(e))?
        {
            Some(Admitted::Existing(run)) => return Ok((false, run)),
            Some(_) => return Err(AdmitError::KeyReused),
            None => {}
        }
        if matches!(
            refusal,
            AdmitError::UnknownWorkflow | AdmitError::RevisionNotActive { .. }
        ) && !self
            .ports
            .definitions
            .activation_current()
            .await
            .map_err(|e| self.parts.fence.count_outage(e))?
        {
            return Err(AdmitError::ActivationChanged);
        }
        Err(refusal)
    }

    /// Checks `input` with the VM and stores the run of `start` with its
    /// first jobs under its start identity (one store step, which looks the
    /// identity up first and then checks the admission hold and the
    /// activation). With traces on, inside the admission span (the child of
    /// `inbound`), whose context is stored with the run.
    async fn admit_prepared(
        &self,
        vm: &Vm,
        start: NewStart,
        input: Value,
        inbound: Option<TraceParent>,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let Some(admitting) = self.parts.spans.trace_admission(inbound) else {
            return self.admit_checked(vm, start, input, None).await;
        };
        let started = self.parts.clock.now();
        let result = self
            .admit_checked(vm, start, input, admitting.trace_parent())
            .await;
        let now = self.parts.clock.now();
        match &result {
            Ok((created, run)) => {
                if *created {
                    self.parts.spans.trace_admitted_steps(run, &started);
                }
                let outcome = if *created { "created" } else { "existing" };
                admitting.end(outcome, Some(run), &now);
            }
            Err(e) => admitting.end(e.outcome(), None, &now),
        }
        result
    }

    /// [`Admission::admit_prepared`] once its span (if any) is started;
    /// `trace_parent` is the context stored with the run.
    async fn admit_checked(
        &self,
        vm: &Vm,
        start: NewStart,
        input: Value,
        trace_parent: Option<TraceParent>,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let NewStart {
            owner,
            start_identity,
            request_digest,
            workflow,
            revision,
        } = start;
        let now = self.parts.clock.now();
        let resumed = match vm.admit(input, whole_second(&now)) {
            Ok(r) => r,
            Err(r) => {
                return self
                    .refuse_new_start(
                        &start_identity,
                        &request_digest,
                        AdmitError::InputRefused(r.message),
                    )
                    .await
            }
        };
        let resumed = crate::jobs::take_due_waits(vm, resumed, &now, true);
        let jobs =
            self.parts
                .committer
                .jobs()
                .jobs_for(&start_identity, &resumed.commands, &now, false);
        let bindings = binding::binding_digests(&self.parts.connections, &vm.program().connections);
        let run = NewRun {
            id: uuid::Uuid::new_v4().to_string(),
            workflow,
            revision,
            owner,
            start_identity,
            request_digest,
            state: resumed.state,
            jobs,
            bindings,
            trace_parent,
        };
        let due_now = run.jobs.iter().any(|j| j.due_at <= now);
        let lease = self.parts.committer.leases().on_insert(&now);
        let (admitted, leased) = self
            .admit_grouped(run, lease.clone())
            .await
            .map_err(|e| self.parts.fence.count_outage(e))?;
        match admitted {
            Admitted::Created(r) => {
                tracing::info!(run = %r.id, workflow = %r.workflow, "admitted");
                match lease.filter(|_| !leased.is_empty()) {
                    // Handed to a lane of this process: no lease statement,
                    // no re-read of the run.
                    Some(lease) => {
                        self.parts
                            .committer
                            .hand_off()
                            .hand_off(leased, &r, lease.lease_until)
                    }
                    None if due_now => self.parts.committer.hand_off().wake_one(),
                    None => {}
                }
                Ok((true, r))
            }
            Admitted::Existing(r) => Ok((false, r)),
            Admitted::Conflict => Err(AdmitError::KeyReused),
            Admitted::RevisionNotActive { .. } | Admitted::ActivationChanged => {
                Err(AdmitError::ActivationChanged)
            }
            Admitted::AdmissionHeld => Err(AdmitError::AdmissionHeld),
            Admitted::BindingConflict { connection } => {
                Err(AdmitError::BindingConflict { connection })
            }
        }
    }

    /// The trigger `trigger` of `workflow`'s active Program, or `None` when
    /// no package serves the workflow or its Program has no such trigger.
    pub fn trigger(&self, workflow: &str, trigger: &str) -> Option<TriggerInfo> {
        let programs = self.parts.committer.programs();
        let vm = programs.cached(programs.active_revisions().get(workflow)?)?;
        vm.program()
            .triggers
            .iter()
            .find(|t| t.name == trigger)
            .map(|t| TriggerInfo {
                source: t.source.clone(),
                event_type: t.event_type.clone(),
            })
    }

    /// Admits a run from a verified event (SPEC §2.4 `POST
    /// /v1/events/{workflow}/{trigger}`): the event's `source` must be
    /// `origin`'s URI and its `type` the trigger's `eventType`; the
    /// trigger's mappings give the idempotency value and the input; the run
    /// is admitted under the active revision with `origin` as its owner and
    /// the start identity [`AdmissionKey::event_start_identity`]. Returns
    /// `(created, run)`: `false` for a repeat with the same idempotency
    /// value and the same input. Counted as an admission. With traces on,
    /// the run's admission span is the child of `trace_parent` (the
    /// request's `traceparent`) when given.
    ///
    /// # Errors
    /// See [`AdmitError`] (the `Event*` and `UnknownTrigger` variants are
    /// this route's).
    pub async fn admit_event(
        &self,
        origin: &EventOrigin,
        workflow: &str,
        trigger: &str,
        event: &Value,
        trace_parent: Option<TraceParent>,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let result = self
            .admit_event_run(origin, workflow, trigger, event, trace_parent)
            .await;
        self.count_admission(&result);
        result
    }

    async fn admit_event_run(
        &self,
        origin: &EventOrigin,
        workflow: &str,
        trigger: &str,
        event: &Value,
        trace_parent: Option<TraceParent>,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let programs = self.parts.committer.programs();
        let Some(revision) = programs.active_revisions().get(workflow) else {
            let changed = !self
                .ports
                .definitions
                .activation_current()
                .await
                .map_err(|e| self.parts.fence.count_outage(e))?;
            return Err(if changed {
                AdmitError::ActivationChanged
            } else {
                AdmitError::UnknownWorkflow
            });
        };
        let vm = programs
            .cached(revision)
            .ok_or(AdmitError::UnknownWorkflow)?;
        let t = vm
            .program()
            .triggers
            .iter()
            .find(|t| t.name == trigger)
            .ok_or(AdmitError::UnknownTrigger)?;
        if t.source != origin.name
            || event.get("source").and_then(Value::as_str) != Some(origin.source.as_str())
        {
            return Err(AdmitError::EventSourceMismatch);
        }
        if event.get("type").and_then(Value::as_str) != Some(t.event_type.as_str()) {
            return Err(AdmitError::EventTypeMismatch);
        }
        // A missing member is named by its path; any other VM message may
        // quote event values, so it is not passed on.
        let start = vm.trigger_start(trigger, event).map_err(|r| {
            AdmitError::EventRefused(if r.code == RejectCode::EventMemberMissing {
                r.message
            } else {
                "the trigger's mappings cannot be evaluated on this event (the idempotency value must be a string)".into()
            })
        })?;
        if start.idempotency.is_empty() {
            return Err(AdmitError::EventRefused(
                "the trigger's idempotency value is empty".into(),
            ));
        }
        let start_identity = self.admission_key.event_start_identity(
            &origin.source,
            &origin.name,
            workflow,
            trigger,
            &start.idempotency,
        );
        let request_digest = self.request_digest(revision, &start.input);
        if self.recovery_only {
            return self
                .refuse_new_start(&start_identity, &request_digest, AdmitError::RecoveryOnly)
                .await;
        }
        let new_start = NewStart {
            owner: origin.owner(),
            start_identity,
            request_digest,
            workflow: workflow.to_owned(),
            revision: revision.clone(),
        };
        self.admit_prepared(&vm, new_start, start.input, trace_parent)
            .await
            .map_err(|e| match e {
                AdmitError::InputRefused(m) => AdmitError::EventRefused(format!(
                    "the input schema refuses the mapped input: {m}"
                )),
                other => other,
            })
    }

    /// Admits through the group commit ([`crate::group`]), answered as
    /// [`RunAdmission::admit_leasing`] answers.
    async fn admit_grouped(&self, run: NewRun, lease: Option<LeaseOnInsert>) -> AdmittedOrError {
        let store = self.ports.admission.clone();
        self.admissions
            .submit(
                (run, lease),
                move |batch| {
                    let store = store.clone();
                    async move { store.admit_batch(batch).await }
                },
                || {
                    Err(StoreError::Unavailable(
                        "the group commit ended without an answer".into(),
                    ))
                },
            )
            .await
    }
}
