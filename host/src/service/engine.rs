//! The engine: admission, the worker step ([`Engine::tick`]), operator
//! actions and inspection. It feeds the VM events and turns the VM's
//! commands into jobs; it never decides what a step does (ARCHITECTURE.md).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use coordinator_ir::catalogue::{self, Effect};
use coordinator_ir::{Definition, StepOp};
use coordinator_vm::{
    Answer, CallPhase, Command, EffectState, Event, Pending, Rejected, RunState, Vm, WakeKind,
};
use serde_json::Value;

use super::clock::{rfc3339_to_unix, unix_to_rfc3339, Clock};
pub use super::store::Holds;
use super::store::{
    Admitted, Commit, Erasure, Job, JobKind, JobState, LeaseRequest, NewJob, NewRun, Owner, Review,
    RunFilter, RunPage, RunRecord, RunStore, StepLedger, StoreError,
};
use crate::adapters::{DispatchRequest, ProductAdapter, ReceiptRequest, ReviewState};
use crate::audit::{AuditJournal, AuditRecord};
use crate::keys::{AdmissionKey, AuditKey};
use crate::runtime::binding;
use crate::runtime::config::{Connection, DEFAULT_RESULT_CHECK_SECONDS};

/// The code fed as [`Answer::Uncertain`] for a mutation or evaluation whose
/// job was found `sending` after its lease expired (a crash mid-request).
pub const INTERRUPTED: &str = "dispatch-interrupted";

/// The code fed as [`Answer::Uncertain`] for a prepared command the restore
/// hold found `ready` or `sending` (committed before the backup; the
/// deployment the backup came from may have sent it since): held as an
/// `unknown` effect for review, never dispatched by itself
/// (docs/operations.md "Restore from a backup").
pub const RESTORED: &str = "restored-prepared-command";

/// The longest retry backoff, in seconds.
pub const MAX_BACKOFF_SECONDS: i64 = 300;

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

impl From<StoreError> for AdmitError {
    fn from(e: StoreError) -> Self {
        AdmitError::Store(e)
    }
}

/// Why an operator action was refused.
#[derive(Debug)]
pub enum ActionError {
    /// No such run.
    NotFound,
    /// The VM refused the event (not held, not resendable, no receipt, ...).
    Refused(Rejected),
    /// The restore hold is in place and the action would dispatch (409
    /// `execution.held`): `retry-same` always, `cancel` when its route
    /// sends a call. A reconcile only looks a receipt up, so it is served.
    ExecutionHeld,
    /// `retry-same` or `reconcile` of a run whose recorded binding of
    /// `connection` differs from the runtime file's (409
    /// `binding.live-conflict`; only an instance started with
    /// `--recovery-only` serves such a run at all).
    BindingChanged {
        /// The first connection (by name) whose binding changed.
        connection: String,
    },
    /// `retry-same` or `reconcile` of a run whose payloads retention erased
    /// (409 `run.payload-erased`, seed 000).
    PayloadErased,
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for ActionError {
    fn from(e: StoreError) -> Self {
        ActionError::Store(e)
    }
}

/// An operator action on a run (SPEC §8 recovery routes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `cancel`.
    Cancel,
    /// `retry-same`.
    RetrySame,
    /// `reconcile`.
    Reconcile,
}

/// One visited step as inspection shows it (never inputs, responses or
/// commands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectedStep {
    /// The step name.
    pub name: String,
    /// `call`, `choose`, `wait-until`, `wait-for` or `finish`.
    pub kind: &'static str,
    /// Mutation and evaluation calls: `accepted` / `unknown`.
    pub effect: Option<EffectState>,
    /// Calls: dispatch attempts made.
    pub attempts: Option<u32>,
    /// The current wait: when it is due (a wait-until's instant, a
    /// wait-for's timeout), RFC 3339.
    pub due_at: Option<String>,
    /// Wait-for steps: observations made.
    pub observations: Option<u32>,
    /// Call steps: the restore hold held this step's prepared command back
    /// for review ([`StepLedger::restored`]).
    pub restored: bool,
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// `deployment.databaseId` (part of every idempotency key).
    pub database_id: String,
    /// This process's worker id (lease owner), unique per process.
    pub worker_id: String,
    /// `observation.minimumIntervalSeconds` (SPEC §6 floor, ≥ 30).
    pub observation_floor_seconds: u64,
    /// How long a lease lasts, seconds. A job in `sending` whose lease
    /// expired is taken as interrupted; keep it at least twice
    /// `request_budget_seconds`.
    pub lease_seconds: i64,
    /// The longest a job takes once started (token and request timeouts
    /// plus a margin): a leased job is started only while this much of its
    /// lease is left, else given back, so an attempt never outlives its
    /// lease.
    pub request_budget_seconds: i64,
    /// Jobs leased per tick.
    pub batch: usize,
    /// `--recovery-only`: admits nothing, dispatches nothing.
    pub recovery_only: bool,
}

impl EngineConfig {
    /// Defaults: floor 30 s, request budget 305 s (the 300 s request
    /// timeout ceiling), lease 610 s, batch 32. The `coordinator` binary
    /// derives the budget from its connections' timeouts
    /// ([`EngineConfig::with_request_timeout`]).
    pub fn new(database_id: &str, worker_id: &str) -> Self {
        EngineConfig {
            database_id: database_id.to_owned(),
            worker_id: worker_id.to_owned(),
            observation_floor_seconds: 30,
            lease_seconds: 610,
            request_budget_seconds: 305,
            batch: 32,
            recovery_only: false,
        }
    }

    /// Sets the request budget to twice `timeout_seconds` (a token request
    /// and the request itself) plus 5 s, and the lease to twice the budget.
    pub fn with_request_timeout(mut self, timeout_seconds: i64) -> Self {
        self.request_budget_seconds = timeout_seconds.max(1).saturating_mul(2).saturating_add(5);
        self.lease_seconds = self.request_budget_seconds.saturating_mul(2);
        self
    }
}

/// The service host's engine. `Send + Sync`; share it in an `Arc`.
pub struct Engine {
    pub(super) store: Arc<dyn RunStore>,
    pub(super) clock: Arc<dyn Clock>,
    adapter: Arc<dyn ProductAdapter>,
    admission_key: AdmissionKey,
    connections: BTreeMap<String, Connection>,
    /// Programs by revision: the active ones from the start, older ones
    /// loaded from the store when a run needs them.
    programs: std::sync::RwLock<HashMap<String, Arc<Vm>>>,
    active: BTreeMap<String, String>,
    pub(super) config: EngineConfig,
    counters: Counters,
    audit: Option<(Arc<AuditJournal>, AuditKey)>,
    /// Jobs a worker lane of this process is carrying out. The lanes share
    /// one lease owner, so a job whose lease ran out while its lane waited
    /// for the store (holding a product answer) can be leased again by
    /// another lane; that lane must leave it to the holder instead of
    /// taking it for an interrupted attempt.
    in_flight: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// The restore epoch ([`Holds::restore_epoch`]) this process works
    /// under: adopted once, at startup ([`Engine::adopt_restore_epoch`]) or
    /// at its first lease; never changes afterwards.
    restore_epoch: std::sync::OnceLock<u64>,
    /// Set when the store refused a lease as `restore.lease-incompatible`:
    /// a restore hold was placed after this process started, so it does no
    /// more work (the `coordinator` binary exits).
    fenced: std::sync::atomic::AtomicBool,
}

/// Removes a job from [`Engine`]'s in-flight set when its lane is done.
struct InFlight<'a> {
    set: &'a std::sync::Mutex<std::collections::BTreeSet<u64>>,
    job: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.job);
        }
    }
}

/// Why an engine could not be built.
#[derive(Debug)]
pub struct EngineError(pub String);

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EngineError {}

pub(super) enum Fed {
    Applied(Box<RunRecord>),
    Rejected(Rejected),
    /// The event would dispatch while the restore hold is in place; nothing
    /// was committed.
    Held,
}

impl Engine {
    /// Builds an engine serving `definitions` (each the active revision of
    /// its workflow). Each admission records the binding digest of every
    /// connection its Program uses ([`crate::runtime::binding`]), from
    /// `connections`.
    ///
    /// # Errors
    /// A Program the VM cannot load, two definitions of one workflow, or a
    /// connection a workflow names that `connections` lacks.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: EngineConfig,
        store: Arc<dyn RunStore>,
        clock: Arc<dyn Clock>,
        adapter: Arc<dyn ProductAdapter>,
        admission_key: AdmissionKey,
        connections: BTreeMap<String, Connection>,
        definitions: &[Definition],
    ) -> Result<Engine, EngineError> {
        let mut programs = HashMap::new();
        let mut active = BTreeMap::new();
        for d in definitions {
            let vm = Vm::new(&d.program)
                .map_err(|e| EngineError(format!("workflow `{}`: {}", d.program.workflow, e.0)))?;
            for c in &d.program.connections {
                if !connections.contains_key(c) {
                    return Err(EngineError(format!(
                        "workflow `{}` uses connection `{c}`, which the runtime file lacks",
                        d.program.workflow
                    )));
                }
            }
            if active
                .insert(d.program.workflow.clone(), d.revision.clone())
                .is_some()
            {
                return Err(EngineError(format!(
                    "two packages serve workflow `{}`",
                    d.program.workflow
                )));
            }
            programs.insert(d.revision.clone(), Arc::new(vm));
        }
        Ok(Engine {
            store,
            clock,
            adapter,
            admission_key,
            connections,
            programs: std::sync::RwLock::new(programs),
            active,
            config,
            counters: Counters::default(),
            audit: None,
            in_flight: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            restore_epoch: std::sync::OnceLock::new(),
            fenced: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Gives the engine this process's audit journal and the audit key
    /// (`deployment.auditFile`, `deployment.auditKeyRef`). Without one,
    /// [`Engine::audit`] records nothing and the doctor report says
    /// `auditReady: false`.
    pub fn with_audit(mut self, journal: Arc<AuditJournal>, key: AuditKey) -> Engine {
        self.audit = Some((journal, key));
        self
    }

    /// Whether this engine runs with `--recovery-only`.
    pub fn recovery_only(&self) -> bool {
        self.config.recovery_only
    }

    /// Reads the store's restore epoch and works under it from now on (the
    /// `coordinator` binary calls it once at startup, so the epoch is the
    /// one the process started under). A later call changes nothing.
    /// Returns the epoch this engine works under.
    ///
    /// # Errors
    /// The store's.
    pub async fn adopt_restore_epoch(&self) -> Result<u64, StoreError> {
        if let Some(e) = self.restore_epoch.get() {
            return Ok(*e);
        }
        let epoch = self
            .store
            .holds()
            .await
            .map_err(|e| self.seen(e))?
            .restore_epoch;
        Ok(*self.restore_epoch.get_or_init(|| epoch))
    }

    /// What this engine states when it leases: `None` for a
    /// `--recovery-only` instance (it is given receipt lookups only),
    /// else the epoch it works under ([`Engine::adopt_restore_epoch`]).
    async fn lease_epoch(&self) -> Result<Option<u64>, StoreError> {
        if self.config.recovery_only {
            return Ok(None);
        }
        self.adopt_restore_epoch().await.map(Some)
    }

    /// Whether the store refused this process's lease as
    /// `restore.lease-incompatible` (a restore hold was placed after it
    /// started): it leases nothing any more and should stop.
    pub fn fenced(&self) -> bool {
        self.fenced.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Notes a store error: a `restore.lease-incompatible` refusal fences
    /// this engine (logged once); an outage is counted.
    fn noted(&self, e: StoreError) -> StoreError {
        if let StoreError::LeaseIncompatible { process, store } = &e {
            if !self.fenced.swap(true, std::sync::atomic::Ordering::SeqCst) {
                tracing::error!(
                    code = "restore.lease-incompatible",
                    process_epoch = process,
                    store_epoch = store,
                    next = "restart this process: the restore hold was placed after it started",
                    "a restore hold was placed after this process started; it does no more work"
                );
            }
        }
        self.seen(e)
    }

    /// Whether an audit journal is attached.
    pub fn audit_ready(&self) -> bool {
        self.audit.is_some()
    }

    /// Appends the record `build` makes with the audit key, `fsync`ed before
    /// this returns. Records nothing (and succeeds) when no journal is
    /// attached.
    ///
    /// # Errors
    /// The journal's I/O error: the audited answer must not be released
    /// (`audit.response-unavailable`).
    pub fn audit(&self, build: impl FnOnce(&AuditKey) -> AuditRecord) -> std::io::Result<()> {
        match &self.audit {
            Some((journal, key)) => journal.append(&build(key)),
            None => Ok(()),
        }
    }

    /// The deployment-wide holds, read from the store (every process on
    /// the database obeys the same holds).
    ///
    /// # Errors
    /// The store's.
    pub async fn holds(&self) -> Result<Holds, StoreError> {
        self.store.holds().await
    }

    /// Changes the holds: `change` sees the current holds and either
    /// changes them or refuses; the change is stored only if no other
    /// process changed them meanwhile (else `change` runs again on the
    /// new holds). Returns the holds after.
    ///
    /// # Errors
    /// The refusal `change` returns, or the store's.
    pub async fn update_holds<E: From<StoreError>>(
        &self,
        change: impl Fn(&mut Holds) -> Result<(), E>,
    ) -> Result<Holds, E> {
        loop {
            let current = self.store.holds().await?;
            let mut next = current.clone();
            change(&mut next)?;
            if next == current || self.store.swap_holds(&current, &next).await? {
                return Ok(next);
            }
        }
    }

    /// The counters the metrics listener renders.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Every run that has not ended (`running`, `attention`,
    /// `cancel-requested`), scanning the store page by page.
    ///
    /// # Errors
    /// The store's.
    pub async fn live_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut out = Vec::new();
        for state in [
            coordinator_vm::RunStatus::Running,
            coordinator_vm::RunStatus::Attention,
            coordinator_vm::RunStatus::CancelRequested,
        ] {
            let mut cursor = None;
            loop {
                let filter = RunFilter {
                    state: Some(state),
                    limit: 100,
                    cursor,
                    ..RunFilter::default()
                };
                let page = self.store.list(&filter).await.map_err(|e| self.seen(e))?;
                out.extend(page.runs);
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        Ok(out)
    }

    /// Counts a store error (the `coordinator_store_errors_total` metric)
    /// and hands it back.
    pub fn seen(&self, e: StoreError) -> StoreError {
        if matches!(e, StoreError::Unavailable(_)) {
            self.counters.add("store_errors", "unavailable");
        }
        e
    }

    fn cached(&self, revision: &str) -> Option<Arc<Vm>> {
        self.programs
            .read()
            .ok()
            .and_then(|p| p.get(revision).cloned())
    }

    /// The VM of `revision`: cached, or loaded from the store's definitions
    /// (every revision ever applied), so a run keeps its Program after its
    /// workflow moved on. `None` when no definition exists or it cannot be
    /// served (a connection the runtime file lacks: logged).
    async fn vm(&self, revision: &str) -> Result<Option<Arc<Vm>>, StoreError> {
        if let Some(vm) = self.cached(revision) {
            return Ok(Some(vm));
        }
        let Some(d) = self.store.definition(revision).await? else {
            return Ok(None);
        };
        if d.revision != revision {
            tracing::error!(revision, "the stored definition names another revision");
            return Ok(None);
        }
        let vm = match Vm::new(&d.program) {
            Ok(vm) => Arc::new(vm),
            Err(e) => {
                tracing::error!(revision, error = %e.0, "a stored definition does not load");
                return Ok(None);
            }
        };
        if let Some(c) = d
            .program
            .connections
            .iter()
            .find(|c| !self.connections.contains_key(*c))
        {
            tracing::error!(revision, connection = %c, "a stored revision uses a connection the runtime file lacks");
            return Ok(None);
        }
        if let Ok(mut p) = self.programs.write() {
            p.insert(revision.to_owned(), vm.clone());
        }
        tracing::info!(revision, workflow = %d.program.workflow, "loaded the Program of an earlier revision");
        Ok(Some(vm))
    }

    /// The store (for readiness).
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.store
    }

    /// The active revision of each workflow.
    pub fn active_revisions(&self) -> &BTreeMap<String, String> {
        &self.active
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
                | AdmitError::ActivationChanged,
            ) => "held",
            Err(AdmitError::Store(_)) => "store-error",
            Err(_) => "refused",
        };
        self.counters.add("admissions", outcome);
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
        self.admit_prepared(
            &vm,
            principal.owner(),
            start_identity,
            request_digest,
            request.workflow,
            request.revision,
            request.input,
        )
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
        if self.config.recovery_only {
            return Err(AdmitError::RecoveryOnly);
        }
        let active = self
            .active
            .get(workflow)
            .ok_or(AdmitError::UnknownWorkflow)?;
        if active != revision {
            return Err(AdmitError::RevisionNotActive {
                active: active.clone(),
            });
        }
        self.cached(active).ok_or(AdmitError::UnknownWorkflow)
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
            .store
            .find_start(start_identity, request_digest)
            .await
            .map_err(|e| self.seen(e))?
        {
            Some(Admitted::Existing(run)) => return Ok((false, run)),
            Some(_) => return Err(AdmitError::KeyReused),
            None => {}
        }
        if matches!(
            refusal,
            AdmitError::UnknownWorkflow | AdmitError::RevisionNotActive { .. }
        ) && !self
            .store
            .activation_current()
            .await
            .map_err(|e| self.seen(e))?
        {
            return Err(AdmitError::ActivationChanged);
        }
        Err(refusal)
    }

    /// Checks the input with the VM and stores the run with its first jobs
    /// under `start_identity` (one store step, which looks the identity up
    /// first and then checks the admission hold and the activation).
    #[allow(clippy::too_many_arguments)]
    async fn admit_prepared(
        &self,
        vm: &Vm,
        owner: Owner,
        start_identity: String,
        request_digest: String,
        workflow: String,
        revision: String,
        input: Value,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let now = self.clock.now_unix();
        let resumed = match vm.admit(input, &unix_to_rfc3339(now)) {
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
        let jobs = self.jobs_for(vm, &start_identity, &resumed.commands, now, false);
        let bindings = binding::binding_digests(&self.connections, &vm.program().connections);
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
        };
        match self.store.admit(run).await.map_err(|e| self.seen(e))? {
            Admitted::Created(r) => {
                tracing::info!(run = %r.id, workflow = %r.workflow, "admitted");
                Ok((true, r))
            }
            Admitted::Existing(r) => Ok((false, r)),
            Admitted::Conflict => Err(AdmitError::KeyReused),
            Admitted::RevisionNotActive { .. } | Admitted::ActivationChanged => {
                Err(AdmitError::ActivationChanged)
            }
            Admitted::AdmissionHeld => Err(AdmitError::AdmissionHeld),
        }
    }

    /// The trigger `trigger` of `workflow`'s active Program, or `None` when
    /// no package serves the workflow or its Program has no such trigger.
    pub fn trigger(&self, workflow: &str, trigger: &str) -> Option<TriggerInfo> {
        let vm = self.cached(self.active.get(workflow)?)?;
        vm.program()
            .triggers
            .iter()
            .find(|t| t.name == trigger)
            .map(|t| TriggerInfo {
                source: t.source.clone(),
                event_type: t.event_type.clone(),
            })
    }

    /// The engine clock's current instant, Unix seconds (the event
    /// signature's clock-skew check uses it, so a manual clock drives it).
    pub fn now_unix(&self) -> i64 {
        self.clock.now_unix()
    }

    /// Admits a run from a verified event (SPEC §2.4 `POST
    /// /v1/events/{workflow}/{trigger}`): the event's `source` must be
    /// `origin`'s URI and its `type` the trigger's `eventType`; the
    /// trigger's mappings give the idempotency value and the input; the run
    /// is admitted under the active revision with `origin` as its owner and
    /// the start identity [`AdmissionKey::event_start_identity`]. Returns
    /// `(created, run)`: `false` for a repeat with the same idempotency
    /// value and the same input. Counted as an admission.
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
    ) -> Result<(bool, RunRecord), AdmitError> {
        let result = self.admit_event_run(origin, workflow, trigger, event).await;
        self.count_admission(&result);
        result
    }

    async fn admit_event_run(
        &self,
        origin: &EventOrigin,
        workflow: &str,
        trigger: &str,
        event: &Value,
    ) -> Result<(bool, RunRecord), AdmitError> {
        let Some(revision) = self.active.get(workflow) else {
            let changed = !self
                .store
                .activation_current()
                .await
                .map_err(|e| self.seen(e))?;
            return Err(if changed {
                AdmitError::ActivationChanged
            } else {
                AdmitError::UnknownWorkflow
            });
        };
        let vm = self.cached(revision).ok_or(AdmitError::UnknownWorkflow)?;
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
            AdmitError::EventRefused(if r.message.starts_with("the event has no member at") {
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
        if self.config.recovery_only {
            return self
                .refuse_new_start(&start_identity, &request_digest, AdmitError::RecoveryOnly)
                .await;
        }
        self.admit_prepared(
            &vm,
            origin.owner(),
            start_identity,
            request_digest,
            workflow.to_owned(),
            revision.clone(),
            start.input,
        )
        .await
        .map_err(|e| match e {
            AdmitError::InputRefused(m) => {
                AdmitError::EventRefused(format!("the input schema refuses the mapped input: {m}"))
            }
            other => other,
        })
    }

    /// The run with this id.
    ///
    /// # Errors
    /// The store's.
    pub async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.store.get(run_id).await.map_err(|e| self.seen(e))
    }

    /// A page of runs.
    ///
    /// # Errors
    /// The store's ([`StoreError::BadCursor`] for a foreign cursor).
    pub async fn list(&self, filter: &RunFilter) -> Result<RunPage, StoreError> {
        self.store.list(filter).await.map_err(|e| self.seen(e))
    }

    /// Each visited step with its effect, attempts, and the current wait's
    /// due time and observation count.
    ///
    /// # Errors
    /// The store's.
    pub async fn inspect(&self, run: &RunRecord) -> Result<Vec<InspectedStep>, StoreError> {
        let vm = self.vm(&run.revision).await?;
        let program = vm.as_ref().map(|v| v.program());
        let mut out = Vec::new();
        for name in &run.state.path {
            let op = program
                .and_then(|p| p.step_id(name).and_then(|id| p.step(id)))
                .map(|s| &s.op);
            let kind = match op {
                Some(StepOp::Call { .. }) => "call",
                Some(StepOp::Choose { .. }) => "choose",
                Some(StepOp::WaitUntil { .. }) => "wait-until",
                Some(StepOp::WaitFor { .. }) => "wait-for",
                Some(StepOp::Finish { .. }) => "finish",
                None => "unknown",
            };
            let ledger = run.ledger.get(name);
            let pending_here = match (&run.state.pending, program) {
                (Some(Pending::Wake { step, at }), Some(p)) if p.step_id(name) == Some(*step) => {
                    Some(at.clone())
                }
                (Some(Pending::Completion { step, timeout_at }), Some(p))
                    if p.step_id(name) == Some(*step) =>
                {
                    Some(timeout_at.clone())
                }
                _ => None,
            };
            out.push(InspectedStep {
                name: name.clone(),
                kind,
                effect: run.state.effects.get(name).copied(),
                attempts: (kind == "call").then(|| ledger.map(|l| l.attempts).unwrap_or(0)),
                due_at: pending_here,
                observations: (kind == "wait-for")
                    .then(|| ledger.map(|l| l.observations).unwrap_or(0)),
                restored: ledger.is_some_and(|l| l.restored),
            });
        }
        Ok(out)
    }

    /// Applies an operator action (SPEC §8 `cancel`, `retry-same`,
    /// `reconcile`) and returns the run after it. A cancel of an ended run
    /// changes nothing and returns it.
    ///
    /// # Errors
    /// [`ActionError::Refused`] when the VM refuses the event;
    /// [`ActionError::BindingChanged`] for a `retry-same` or `reconcile` of
    /// a run admitted under another binding of one of its connections.
    pub async fn act(&self, run_id: &str, action: Action) -> Result<RunRecord, ActionError> {
        let run = self.store.get(run_id).await?.ok_or(ActionError::NotFound)?;
        if action == Action::Cancel && run.status().is_terminal() {
            return Ok(run);
        }
        if run.payload_erased {
            return Err(ActionError::PayloadErased);
        }
        let holds = self.store.holds().await.map_err(|e| self.seen(e))?;
        if let Some(process) = self.lease_epoch().await? {
            if process != holds.restore_epoch {
                return Err(ActionError::Store(self.noted(
                    StoreError::LeaseIncompatible {
                        process,
                        store: holds.restore_epoch,
                    },
                )));
            }
        }
        if action == Action::RetrySame && holds.restore {
            return Err(ActionError::ExecutionHeld);
        }
        if action != Action::Cancel {
            // Never resend or look up a receipt where, or as whom, the run
            // was not admitted (docs/service.md "Connection bindings").
            if let Some(c) = binding::changed_connection(&run.bindings, &self.connections) {
                return Err(ActionError::BindingChanged {
                    connection: c.to_owned(),
                });
            }
        }
        let at = self.clock.now_rfc3339();
        let (event, review) = match action {
            Action::Cancel => (Event::CancelRequested { at }, Some(Review::Cancelled)),
            Action::RetrySame => (Event::RetrySame { at }, None),
            Action::Reconcile => (Event::Reconcile { at }, Some(Review::Reconciled)),
        };
        let fed = self
            .feed(
                run,
                &event,
                Feeding {
                    review,
                    refuse_dispatch: holds.restore,
                    ..Feeding::default()
                },
            )
            .await?;
        match fed {
            Fed::Applied(r) => {
                tracing::info!(run = %r.id, action = ?action, state = r.status().as_str(), "operator action");
                if action != Action::Reconcile {
                    return Ok(*r);
                }
                // The receipt lookup is carried out at once, so the answer
                // shows what it found (it is a read: also under the restore
                // hold and on a `--recovery-only` instance).
                self.look_up_receipts_now(&r.id).await;
                Ok(self.store.get(&r.id).await?.unwrap_or(*r))
            }
            Fed::Rejected(r) => Err(ActionError::Refused(r)),
            Fed::Held => Err(ActionError::ExecutionHeld),
        }
    }

    /// Carries out the due receipt lookups of run `run_id` in this call
    /// (after a reconcile). A lookup a worker took first is left to it;
    /// failures are logged, and a lookup not carried out stays due for the
    /// workers.
    async fn look_up_receipts_now(&self, run_id: &str) {
        let epoch = match self.lease_epoch().await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(run = %run_id, error = %e, "receipt lookup left to the workers");
                return;
            }
        };
        let now = self.clock.now_unix();
        let lease_until = now.saturating_add(self.config.lease_seconds);
        let leased = self
            .store
            .lease(&LeaseRequest {
                owner: &self.config.worker_id,
                now,
                lease_until,
                limit: 1,
                epoch,
                run_id: Some(run_id),
                receipt_lookups_only: true,
            })
            .await;
        match leased {
            Ok(jobs) => {
                for job in jobs {
                    self.carry_out(job, lease_until).await;
                }
            }
            Err(e) => {
                let e = self.noted(e);
                tracing::warn!(run = %run_id, error = %e, "receipt lookup left to the workers");
            }
        }
    }

    /// Retention (seed 000 "Erase ended payloads"): erases the payloads of
    /// at most `limit` runs (1..=100) that ended before `before_unix`,
    /// oldest ended first, never live or uncertain work
    /// ([`RunStore::erase_payloads`]); stamped with this engine's clock.
    ///
    /// # Errors
    /// The store's.
    pub async fn retain(&self, before_unix: i64, limit: u32) -> Result<Erasure, StoreError> {
        let done = self
            .store
            .erase_payloads(before_unix, limit, self.clock.now_unix())
            .await
            .map_err(|e| self.seen(e))?;
        tracing::info!(erased = done.erased, more = done.more, "retention");
        Ok(done)
    }

    /// `POST /v1/review-completions`: brings the next read of this review
    /// request forward (never sooner than the observation floor after the
    /// last read). Returns how many waits moved.
    ///
    /// # Errors
    /// The store's.
    pub async fn bring_forward(&self, review_request_id: &str) -> Result<usize, StoreError> {
        self.store
            .bring_forward(
                review_request_id,
                self.clock.now_unix(),
                i64::try_from(self.config.observation_floor_seconds).unwrap_or(i64::MAX),
            )
            .await
    }

    /// One worker step: leases the due jobs and carries each out. Returns
    /// how many jobs it leased. Under the restore hold, and on a
    /// `--recovery-only` instance, only receipt lookups are leased (reads,
    /// never dispatches). A fenced engine ([`Engine::fenced`]) leases
    /// nothing.
    ///
    /// # Errors
    /// The store's; [`StoreError::LeaseIncompatible`] when a restore hold
    /// was placed after this process started (it is fenced from then on).
    pub async fn tick(&self) -> Result<usize, StoreError> {
        if self.fenced() {
            return Ok(0);
        }
        let epoch = self.lease_epoch().await?;
        let now = self.clock.now_unix();
        let jobs = self
            .store
            .lease(&LeaseRequest {
                owner: &self.config.worker_id,
                now,
                lease_until: now.saturating_add(self.config.lease_seconds),
                limit: self.config.batch,
                epoch,
                run_id: None,
                receipt_lookups_only: false,
            })
            .await
            .map_err(|e| self.noted(e))?;
        let n = jobs.len();
        let lease_until = now.saturating_add(self.config.lease_seconds);
        // Jobs of one run are carried out in lease order, one after
        // another (each sees the state its predecessor committed); jobs of
        // different runs go concurrently, so one slow product call does
        // not hold up the others.
        let mut by_run: Vec<(String, Vec<Job>)> = Vec::new();
        for job in jobs {
            match by_run.iter_mut().find(|(run, _)| *run == job.run_id) {
                Some((_, group)) => group.push(job),
                None => by_run.push((job.run_id.clone(), vec![job])),
            }
        }
        futures_util::future::join_all(by_run.into_iter().map(|(_, group)| async move {
            for job in group {
                self.carry_out(job, lease_until).await;
            }
        }))
        .await;
        Ok(n)
    }

    /// Marks job `id` in flight in this process; `None` when a lane
    /// already carries it out.
    fn hold(&self, id: u64) -> Option<InFlight<'_>> {
        let inserted = self.in_flight.lock().ok()?.insert(id);
        // (The guard is gone before an `InFlight` exists: its drop locks.)
        inserted.then(|| InFlight {
            set: &self.in_flight,
            job: id,
        })
    }

    /// Carries out one leased job, unless too little of its lease is left
    /// to start it safely (then it is given back). A store outage before
    /// the request left is waited out while the lease holds; other failures
    /// are logged and the lease left to expire.
    async fn carry_out(&self, job: Job, lease_until: i64) {
        let id = job.id;
        // Another lane of this process holds the job (its lease ran out
        // while it waited for the store): leave it to that lane. The new
        // lease just taken only extends the holder's.
        let Some(_held) = self.hold(id) else {
            return;
        };
        if self
            .clock
            .now_unix()
            .saturating_add(self.config.request_budget_seconds)
            > lease_until
        {
            let _ = self
                .store
                .release(id, &self.config.worker_id, job.due_unix, None)
                .await;
            return;
        }
        let mut result = self.run_job(job.clone()).await.map_err(|e| self.seen(e));
        // The store went away before the job's request left (an answer in
        // hand is held by `feed`): wait for it, then carry the job out
        // again while the lease holds.
        while let Err(StoreError::Unavailable(e)) = &result {
            tracing::error!(code = "store-unavailable", job = id, error = %e, "store unavailable; the job waits for it");
            if !self.wait_for_store(lease_until).await {
                break;
            }
            result = self.run_job(job.clone()).await.map_err(|e| self.seen(e));
        }
        if let Err(e) = result {
            tracing::warn!(job = id, error = %e, "job not completed; its lease will expire");
        }
    }

    /// Ticks until a tick leases nothing (at most `max_ticks` times);
    /// returns the jobs leased in all. For tests and for draining.
    ///
    /// # Errors
    /// The store's.
    pub async fn run_until_idle(&self, max_ticks: usize) -> Result<usize, StoreError> {
        let mut total = 0;
        for _ in 0..max_ticks {
            let n = self.tick().await?;
            total += n;
            if n == 0 {
                break;
            }
        }
        Ok(total)
    }

    async fn run_job(&self, job: Job) -> Result<(), StoreError> {
        let owner = self.config.worker_id.clone();
        let Some(run) = self.store.get(&job.run_id).await? else {
            return self.store.discard(job.id, &owner).await;
        };
        if run.status().is_terminal() {
            return self.store.discard(job.id, &owner).await;
        }
        let Some(vm) = self.vm(&run.revision).await? else {
            tracing::error!(run = %run.id, revision = %run.revision, "no Program for the run's revision; job held");
            let later = self.clock.now_unix().saturating_add(MAX_BACKOFF_SECONDS);
            return self.store.release(job.id, &owner, later, None).await;
        };
        let now = self.clock.now_unix();
        match job.kind.clone() {
            JobKind::Timer { at, .. } => {
                let event = Event::TimerFired { at };
                self.feed(run, &event, Feeding::completing(job.id)).await?;
                Ok(())
            }
            JobKind::Dispatch {
                step,
                operation_id,
                connection,
                action,
                command,
                idempotency_key,
                attempt,
                resend_safe,
            } => {
                if !call_in(&vm, &run.state, &step, CallPhase::Dispatched, Some(attempt)) {
                    return self.store.discard(job.id, &owner).await;
                }
                let answer = if job.state == JobState::Sending && !resend_safe {
                    tracing::warn!(run = %run.id, step = %step, "interrupted dispatch found; effect unknown, never resent");
                    self.counters.add("dispatch_attempts", "interrupted");
                    Answer::Uncertain {
                        code: INTERRUPTED.to_owned(),
                    }
                } else {
                    let Some(conn) = self.connections.get(&connection) else {
                        return self.hold_job(&job, "unknown connection").await;
                    };
                    let Some(epoch) = self.restore_epoch.get().copied() else {
                        return self.hold_job(&job, "no restore epoch adopted").await;
                    };
                    self.store.mark_sending(job.id, &owner, epoch).await?;
                    let request = DispatchRequest {
                        operation_id,
                        action,
                        command,
                        idempotency_key,
                    };
                    match self.adapter.dispatch(conn, &request).await {
                        Ok(outcome) => {
                            let label = outcome.label();
                            tracing::info!(run = %run.id, step = %step, attempt, result = %label, "dispatched");
                            self.counters.add(
                                "dispatch_attempts",
                                label.split(' ').next().unwrap_or("unknown"),
                            );
                            outcome.into_answer()
                        }
                        Err(e) => {
                            self.counters.add("dispatch_attempts", "host-fault");
                            return self.hold_job(&job, &e.to_string()).await;
                        }
                    }
                };
                let event = Event::CallAnswered {
                    step: step.clone(),
                    answer,
                };
                let count = |l: &mut BTreeMap<String, StepLedger>| {
                    l.entry(step.clone()).or_default().attempts = attempt;
                };
                self.feed(
                    run,
                    &event,
                    Feeding {
                        ledger: Some(&count),
                        ..Feeding::completing(job.id)
                    },
                )
                .await?;
                Ok(())
            }
            JobKind::LookupReceipt {
                step,
                operation_id,
                connection,
                idempotency_key,
                ..
            } => {
                if !call_in(&vm, &run.state, &step, CallPhase::LookingUpReceipt, None) {
                    return self.store.discard(job.id, &owner).await;
                }
                let Some(conn) = self.connections.get(&connection) else {
                    return self.hold_job(&job, "unknown connection").await;
                };
                let request = ReceiptRequest {
                    operation_id,
                    idempotency_key,
                };
                let answer = match self.adapter.lookup_receipt(conn, &request).await {
                    Ok(o) => {
                        // What reconcile found (never a body): the operator's
                        // only trace when the lookup settles nothing.
                        tracing::info!(run = %run.id, step = %step, answer = %o.label(), "receipt lookup answered");
                        o.into_answer()
                    }
                    Err(e) => return self.hold_job(&job, &e.to_string()).await,
                };
                let event = Event::CallAnswered { step, answer };
                self.feed(run, &event, Feeding::completing(job.id)).await?;
                Ok(())
            }
            JobKind::Observe {
                step,
                connection,
                review_request_id,
                ..
            } => {
                let waiting = matches!(&run.state.pending,
                    Some(Pending::Completion { step: s, .. }) if vm.program().step_id(&step) == Some(*s));
                if !waiting {
                    return self.store.discard(job.id, &owner).await;
                }
                let Some(conn) = self.connections.get(&connection) else {
                    return self.hold_job(&job, "unknown connection").await;
                };
                let read = self.adapter.read_review(conn, &review_request_id).await;
                let count = |l: &mut BTreeMap<String, StepLedger>| {
                    l.entry(step.clone()).or_default().observations += 1;
                };
                if let Ok(ReviewState::Decided { decision }) = read {
                    let event = Event::CompletionObserved {
                        step: step.clone(),
                        value: decision,
                        at: unix_to_rfc3339(now),
                    };
                    self.feed(
                        run,
                        &event,
                        Feeding {
                            ledger: Some(&count),
                            ..Feeding::completing(job.id)
                        },
                    )
                    .await?;
                    return Ok(());
                }
                match &read {
                    Ok(_) => {}
                    Err(e) => {
                        tracing::info!(run = %run.id, step = %step, error = %e, "observation unanswered")
                    }
                }
                // Still pending (or unanswered): record the observation and
                // schedule the next one, in one step.
                let mut ledger = run.ledger.clone();
                count(&mut ledger);
                let next = NewJob {
                    kind: JobKind::Observe {
                        step: step.clone(),
                        connection: connection.clone(),
                        review_request_id,
                        last_observed_unix: Some(now),
                    },
                    due_unix: now.saturating_add(self.observe_interval(&connection)),
                };
                self.store
                    .commit(Commit {
                        run_id: run.id.clone(),
                        expected_version: run.version,
                        state: run.state.clone(),
                        ledger,
                        complete: Some((job.id, owner)),
                        jobs: vec![next],
                        review: None,
                    })
                    .await
                    .map(|_| ())
            }
        }
    }

    /// A host fault (nothing was sent): log and try the job again later.
    async fn hold_job(&self, job: &Job, why: &str) -> Result<(), StoreError> {
        tracing::error!(job = job.id, run = %job.run_id, reason = why, "host fault; job retried later");
        let later = self.clock.now_unix().saturating_add(MAX_BACKOFF_SECONDS);
        self.store
            .release(job.id, &self.config.worker_id, later, None)
            .await
    }

    /// Feeds `event` to the run, commits the new state, the completed job
    /// and the new jobs; on a version conflict re-reads the run and applies
    /// the event again (an answer is never dropped because an operator
    /// acted meanwhile). See [`Feeding`] for the options.
    pub(super) async fn feed(
        &self,
        mut run: RunRecord,
        event: &Event,
        feeding: Feeding<'_>,
    ) -> Result<Fed, StoreError> {
        let Feeding {
            complete,
            ledger: ledger_update,
            review,
            refuse_dispatch,
        } = feeding;
        let owner = self.config.worker_id.clone();
        let Some(vm) = self.vm(&run.revision).await? else {
            return Err(StoreError::NotFound);
        };
        let answered = matches!(event, Event::CallAnswered { .. });
        let mut conflicts = 0;
        let mut outage = StoreWait::new();
        loop {
            let resumed = match vm.resume(&run.state, event) {
                Ok(r) => r,
                Err(rejected) => {
                    if let Some(job) = complete {
                        tracing::warn!(run = %run.id, error = %rejected, "event refused by the VM; job discarded");
                        self.store.discard(job, &owner).await?;
                    }
                    return Ok(Fed::Rejected(rejected));
                }
            };
            if refuse_dispatch
                && resumed
                    .commands
                    .iter()
                    .any(|c| matches!(c, Command::Dispatch { .. }))
            {
                return Ok(Fed::Held);
            }
            let now = self.clock.now_unix();
            let jobs = self.jobs_for(&vm, &run.start_identity, &resumed.commands, now, answered);
            let mut ledger = run.ledger.clone();
            if let Some(update) = ledger_update {
                update(&mut ledger);
            }
            let commit = Commit {
                run_id: run.id.clone(),
                expected_version: run.version,
                state: resumed.state.clone(),
                ledger: ledger.clone(),
                complete: complete.map(|j| (j, owner.clone())),
                jobs,
                review,
            };
            let failed = match self.store.commit(commit).await {
                Ok(version) => {
                    if resumed.status.is_terminal() {
                        tracing::info!(run = %run.id, state = resumed.status.as_str(), "run ended");
                        self.counters.add("runs_ended", resumed.status.as_str());
                    }
                    run.state = resumed.state;
                    run.ledger = ledger;
                    run.version = version;
                    run.review = Review::after(run.review, review);
                    return Ok(Fed::Applied(Box::new(run)));
                }
                Err(e) => e,
            };
            match failed {
                StoreError::Conflict if conflicts < 8 => conflicts += 1,
                // A worker holds an answer (a request may have left): it is
                // never dropped for an outage; the commit is tried again
                // until the store is back. An operator action fails fast.
                StoreError::Unavailable(e) if complete.is_some() => {
                    outage.wait(&run.id, &e).await;
                    continue;
                }
                e => return Err(e),
            }
            run = loop {
                match self.store.get(&run.id).await {
                    Ok(Some(r)) => break r,
                    Ok(None) => return Err(StoreError::NotFound),
                    Err(StoreError::Unavailable(e)) if complete.is_some() => {
                        outage.wait(&run.id, &e).await;
                    }
                    Err(e) => return Err(e),
                }
            };
        }
    }

    /// Waits (real time, polling `ping`) until the store answers again, or
    /// until `deadline` (engine clock) passes. Returns whether it answers.
    async fn wait_for_store(&self, deadline: i64) -> bool {
        let mut outage = StoreWait::new();
        loop {
            match self.store.ping().await {
                Ok(()) => return true,
                Err(e) => {
                    if self.clock.now_unix() >= deadline {
                        return false;
                    }
                    outage.wait("-", &e.to_string()).await;
                }
            }
        }
    }

    fn observe_interval(&self, connection: &str) -> i64 {
        let check = match self.connections.get(connection) {
            Some(Connection::CaseworkReviewProducer(c)) => c.result_check_seconds,
            _ => DEFAULT_RESULT_CHECK_SECONDS,
        };
        i64::try_from(check.max(self.config.observation_floor_seconds)).unwrap_or(i64::MAX)
    }

    /// The jobs for the VM's commands. `answered`: the commands follow a
    /// product answer, so a repeated attempt waits its backoff.
    fn jobs_for(
        &self,
        vm: &Vm,
        start_identity: &str,
        commands: &[Command],
        now: i64,
        answered: bool,
    ) -> Vec<NewJob> {
        let mut jobs = Vec::new();
        for c in commands {
            match c {
                Command::ScheduleWake { at, kind } => jobs.push(NewJob {
                    due_unix: rfc3339_to_unix(at).unwrap_or(now),
                    kind: JobKind::Timer {
                        at: at.clone(),
                        wake: *kind,
                    },
                }),
                Command::Dispatch {
                    step,
                    operation_id,
                    connection,
                    action,
                    command,
                    attempt,
                    ..
                } => {
                    let descriptor = catalogue::lookup(operation_id);
                    let keyed = descriptor.as_ref().is_some_and(|d| d.idempotency_key);
                    let read = descriptor
                        .as_ref()
                        .is_some_and(|d| d.effect == Effect::Read);
                    let delay = if answered && *attempt > 1 {
                        backoff(*attempt)
                    } else {
                        0
                    };
                    jobs.push(NewJob {
                        due_unix: now.saturating_add(delay),
                        kind: JobKind::Dispatch {
                            step: step.clone(),
                            operation_id: operation_id.clone(),
                            connection: connection.clone(),
                            action: action.clone(),
                            command: command.clone(),
                            idempotency_key: keyed.then(|| self.key(start_identity, step)),
                            attempt: *attempt,
                            resend_safe: read,
                        },
                    });
                }
                Command::LookupReceipt {
                    step,
                    operation_id,
                    connection,
                    lookup,
                    ..
                } => {
                    let delay = if answered && *lookup > 1 {
                        backoff(*lookup)
                    } else {
                        0
                    };
                    jobs.push(NewJob {
                        due_unix: now.saturating_add(delay),
                        kind: JobKind::LookupReceipt {
                            step: step.clone(),
                            operation_id: operation_id.clone(),
                            connection: connection.clone(),
                            idempotency_key: self.key(start_identity, step),
                            lookup: *lookup,
                        },
                    });
                }
                Command::ObserveCompletion {
                    step,
                    call,
                    call_output,
                    timeout_at,
                    ..
                } => {
                    jobs.push(NewJob {
                        due_unix: rfc3339_to_unix(timeout_at).unwrap_or(now),
                        kind: JobKind::Timer {
                            at: timeout_at.clone(),
                            wake: WakeKind::Timeout,
                        },
                    });
                    let program = vm.program();
                    let connection = program
                        .step_id(call)
                        .and_then(|id| program.step(id))
                        .and_then(|s| match &s.op {
                            StepOp::Call { operation, .. } => {
                                program.operations.get(operation.index())
                            }
                            _ => None,
                        })
                        .map(|b| b.connection.clone());
                    let id = call_output.get("id").and_then(Value::as_str);
                    match (connection, id) {
                        (Some(connection), Some(id)) => jobs.push(NewJob {
                            due_unix: now.saturating_add(self.observe_interval(&connection)),
                            kind: JobKind::Observe {
                                step: step.clone(),
                                connection,
                                review_request_id: id.to_owned(),
                                last_observed_unix: None,
                            },
                        }),
                        _ => {
                            tracing::error!(step = %step, "cannot observe: no connection or review id; the wait runs to its timeout")
                        }
                    }
                }
                Command::Ended { .. } => {}
            }
        }
        jobs
    }

    fn key(&self, start_identity: &str, step: &str) -> String {
        self.admission_key
            .idempotency_key(&self.config.database_id, start_identity, step)
    }
}

/// A change to a run's ledger, made in the commit of an event.
pub(super) type LedgerUpdate<'a> = dyn Fn(&mut BTreeMap<String, StepLedger>) + Sync + 'a;

/// How [`Engine::feed`] commits an event.
#[derive(Default)]
pub(super) struct Feeding<'a> {
    /// The leased job the event answers: completed (deleted) by the commit,
    /// discarded when the VM refuses the event; an outage is waited out
    /// (an answer in hand is never dropped).
    pub(super) complete: Option<u64>,
    /// Changes the run's ledger in the same commit.
    pub(super) ledger: Option<&'a LedgerUpdate<'a>>,
    /// The restore review to record ([`Review::after`]).
    pub(super) review: Option<Review>,
    /// Commit nothing (answer [`Fed::Held`]) if the VM's commands would
    /// dispatch (the restore hold is in place).
    pub(super) refuse_dispatch: bool,
}

impl Feeding<'_> {
    /// Completing leased job `job`, nothing else.
    pub(super) fn completing(job: u64) -> Self {
        Feeding {
            complete: Some(job),
            ..Feeding::default()
        }
    }
}

/// Real-time backoff while the store is unavailable: 250 ms doubling to
/// 2 s; logs `store-unavailable` on the first wait and every 10th.
struct StoreWait {
    waits: u32,
}

impl StoreWait {
    fn new() -> Self {
        StoreWait { waits: 0 }
    }

    async fn wait(&mut self, run: &str, error: &str) {
        if self.waits.is_multiple_of(10) {
            tracing::error!(
                code = "store-unavailable",
                run,
                error,
                "store unavailable; waiting for it"
            );
        }
        let ms = 250u64 << self.waits.min(3);
        self.waits = self.waits.saturating_add(1);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

/// Backoff before attempt `attempt` (≥ 2) after a retryable answer:
/// 2, 4, 8, ... seconds, at most [`MAX_BACKOFF_SECONDS`].
pub fn backoff(attempt: u32) -> i64 {
    let exp = attempt.saturating_sub(1).min(20);
    (1i64 << exp).min(MAX_BACKOFF_SECONDS)
}

fn call_in(vm: &Vm, state: &RunState, step: &str, want: CallPhase, attempt: Option<u32>) -> bool {
    match &state.pending {
        Some(Pending::Call {
            step: s,
            phase,
            attempt: a,
            ..
        }) => {
            vm.program().step_id(step) == Some(*s)
                && *phase == want
                && attempt.is_none_or(|want| want == *a)
        }
        _ => false,
    }
}

/// Process-wide counters by (metric, label), for the metrics listener. Each
/// label set is small and fixed (outcomes, answer kinds, run states): never
/// a workflow, run or principal.
#[derive(Debug, Default)]
pub struct Counters {
    values: Mutex<BTreeMap<(&'static str, String), u64>>,
}

impl Counters {
    /// Adds one to `metric{label}`.
    pub fn add(&self, metric: &'static str, label: &str) {
        let mut guard = match self.values.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *guard.entry((metric, label.to_owned())).or_insert(0) += 1;
    }

    /// The label values and counts of `metric`, sorted by label.
    pub fn of(&self, metric: &str) -> Vec<(String, u64)> {
        let guard = match self.values.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard
            .iter()
            .filter(|((m, _), _)| *m == metric)
            .map(|((_, l), v)| (l.clone(), *v))
            .collect()
    }
}

/// The kind of the wait a run is in: `wait-until`, `wait-for`, or `None`.
pub fn wait_kind(state: &RunState) -> Option<&'static str> {
    match state.pending {
        Some(Pending::Wake { .. }) => Some("wait-until"),
        Some(Pending::Completion { .. }) => Some("wait-for"),
        _ => None,
    }
}
