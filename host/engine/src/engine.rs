//! The [`Engine`]: its settings, construction, the state it shares across
//! its parts (programs by revision, the restore epoch, the jobs in flight)
//! and small accessors. The rest of `impl Engine` lives beside it:
//! admission (`admission.rs`), the worker (`worker.rs`), command → job
//! translation (`jobs.rs`), operator actions and inspection
//! (`actions.rs`), the restore sequence (`restore.rs`) and the counters
//! (`metrics.rs`). It feeds the VM events and turns the VM's commands into
//! jobs; it never decides what a step does (ARCHITECTURE.md).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use coordinator_ir::Definition;
use coordinator_ports::adapter::ProductAdapter;
use coordinator_ports::clock::Clock;
pub use coordinator_ports::store::Holds;
use coordinator_ports::store::{
    Admitted, Commit, Committed, Job, LeaseOnInsert, NewRun, RunRecord, RunStore, StoreError,
};
use coordinator_runtime::audit::{AuditJournal, AuditRecord};
use coordinator_runtime::config::Connection;
use coordinator_runtime::keys::{AdmissionKey, AuditKey};
use coordinator_vm::{Rejected, Vm};

use crate::group::{Group, GROUP_MAX, GROUP_SLOTS};
use crate::metrics::Counters;

/// What an admission answers: the store's answer and the jobs leased on
/// insert, or the store's error.
pub(crate) type AdmittedOrError = Result<(Admitted, Vec<Job>), StoreError>;

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
    pub(crate) store: Arc<dyn RunStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) adapter: Arc<dyn ProductAdapter>,
    pub(crate) admission_key: AdmissionKey,
    pub(crate) connections: BTreeMap<String, Connection>,
    /// Programs by revision: the active ones from the start, older ones
    /// loaded from the store when a run needs them.
    pub(crate) programs: std::sync::RwLock<HashMap<String, Arc<Vm>>>,
    pub(crate) active: BTreeMap<String, String>,
    pub(crate) config: EngineConfig,
    pub(crate) counters: Counters,
    pub(crate) audit: Option<(Arc<AuditJournal>, AuditKey)>,
    /// Jobs a worker lane of this process is carrying out. The lanes share
    /// one lease owner, so a job whose lease ran out while its lane waited
    /// for the store (holding a product answer) can be leased again by
    /// another lane; that lane must leave it to the holder instead of
    /// taking it for an interrupted attempt.
    pub(crate) in_flight: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// The restore epoch ([`Holds::restore_epoch`]) this process works
    /// under: adopted once, at startup ([`Engine::adopt_restore_epoch`]) or
    /// at its first lease; never changes afterwards.
    pub(crate) restore_epoch: std::sync::OnceLock<u64>,
    /// Set when the store refused a lease as `restore.lease-incompatible`:
    /// a restore hold was placed after this process started, so it does no
    /// more work (the `coordinator` binary exits).
    pub(crate) fenced: std::sync::atomic::AtomicBool,
    /// Wakes an idle worker lane of this process when a job became due
    /// here (an admission, a commit that made the next job, a review
    /// completion), so a due job runs now rather than at the next poll.
    pub(crate) wake: tokio::sync::Notify,
    /// Jobs a commit of this process inserted leased to it
    /// ([`coordinator_ports::store::LeaseOnInsert`]), with the run as that
    /// commit left it: the next [`Engine::tick`] carries them out without
    /// leasing them or reading the run again.
    pub(crate) handed: std::sync::Mutex<std::collections::VecDeque<HandedOff>>,
    /// Commits of this process written together ([`crate::group`],
    /// [`JobQueue::commit_batch`]).
    pub(crate) commits: Group<(Commit, Option<LeaseOnInsert>), Result<Committed, StoreError>>,
    /// Admissions of this process written together
    /// ([`RunAdmission::admit_batch`]).
    pub(crate) admissions: Group<(NewRun, Option<LeaseOnInsert>), AdmittedOrError>,
    /// "Mark sending" fences of this process written together
    /// ([`JobQueue::mark_sending_batch`]): job id, lease owner, epoch.
    pub(crate) sendings: Group<(u64, String, u64), Result<(), StoreError>>,
}

/// A job handed from a commit to a worker lane of the same process.
pub(crate) struct HandedOff {
    /// The job, leased to this process.
    pub(crate) job: coordinator_ports::store::Job,
    /// The run as the commit that made the job left it.
    pub(crate) run: RunRecord,
    /// Unix seconds the job's lease runs until.
    pub(crate) lease_until: i64,
}

/// Removes a job from [`Engine`]'s in-flight set when its lane is done.
pub(crate) struct InFlight<'a> {
    pub(crate) set: &'a std::sync::Mutex<std::collections::BTreeSet<u64>>,
    pub(crate) job: u64,
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

pub(crate) enum Fed {
    Applied(Box<RunRecord>),
    Rejected(Rejected),
    /// The event would dispatch while the restore hold is in place; nothing
    /// was committed.
    Held,
}

impl Engine {
    /// Builds an engine serving `definitions` (each the active revision of
    /// its workflow). Each admission records the binding digest of every
    /// connection its Program uses ([`coordinator_runtime::binding`]), from
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
            wake: tokio::sync::Notify::new(),
            handed: std::sync::Mutex::new(std::collections::VecDeque::new()),
            commits: Group::new(GROUP_SLOTS, GROUP_MAX),
            admissions: Group::new(GROUP_SLOTS, GROUP_MAX),
            sendings: Group::new(GROUP_SLOTS, GROUP_MAX),
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
    pub(crate) async fn lease_epoch(&self) -> Result<Option<u64>, StoreError> {
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

    /// How many jobs one [`Engine::tick`] leases at most.
    pub fn batch(&self) -> usize {
        self.config.batch
    }

    /// Wakes one idle worker lane of this process ([`Engine::woken`]); a
    /// wake while no lane waits is kept for the next lane that does.
    pub fn wake_one(&self) {
        self.wake.notify_one();
    }

    /// The lease new jobs are inserted under ([`LeaseOnInsert`]): this
    /// process's worker id and adopted restore epoch; none on a
    /// `--recovery-only` instance or before an epoch is adopted.
    /// When a lease taken at `now` (engine clock, Unix seconds) runs out:
    /// the one lease rule ([`EngineConfig::lease_seconds`] later).
    pub(crate) fn lease_until(&self, now: i64) -> i64 {
        now.saturating_add(self.config.lease_seconds)
    }

    pub(crate) fn lease_on_insert(&self, now: i64) -> Option<LeaseOnInsert> {
        if self.config.recovery_only {
            return None;
        }
        let epoch = self.restore_epoch.get().copied()?;
        Some(LeaseOnInsert {
            owner: self.config.worker_id.clone(),
            now,
            lease_until: self.lease_until(now),
            epoch,
        })
    }

    /// Queues jobs a commit leased to this process for the next tick, and
    /// wakes a lane for each.
    /// Commits through the group commit ([`crate::group`]): written with
    /// the commits of other runs that arrive meanwhile, answered as
    /// [`JobQueue::commit_leasing`] answers.
    pub(crate) async fn commit_grouped(
        &self,
        commit: Commit,
        lease: Option<LeaseOnInsert>,
    ) -> Result<Committed, StoreError> {
        let store = self.store.clone();
        self.commits
            .submit(
                (commit, lease),
                move |batch| {
                    let store = store.clone();
                    async move { store.commit_batch(batch).await }
                },
                || {
                    Err(StoreError::Unavailable(
                        "the group commit ended without an answer".into(),
                    ))
                },
            )
            .await
    }

    /// Admits through the group commit ([`crate::group`]), answered as
    /// [`RunAdmission::admit_leasing`] answers.
    pub(crate) async fn admit_grouped(
        &self,
        run: NewRun,
        lease: Option<LeaseOnInsert>,
    ) -> AdmittedOrError {
        let store = self.store.clone();
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

    /// Marks a leased job `sending` through the group commit
    /// ([`JobQueue::mark_sending_batch`]).
    pub(crate) async fn mark_sending_grouped(
        &self,
        job: u64,
        owner: &str,
        epoch: u64,
    ) -> Result<(), StoreError> {
        let store = self.store.clone();
        self.sendings
            .submit(
                (job, owner.to_owned(), epoch),
                move |batch| {
                    let store = store.clone();
                    async move { store.mark_sending_batch(batch).await }
                },
                || {
                    Err(StoreError::Unavailable(
                        "the group commit ended without an answer".into(),
                    ))
                },
            )
            .await
    }

    pub(crate) fn hand_off(
        &self,
        jobs: Vec<coordinator_ports::store::Job>,
        run: &RunRecord,
        lease_until: i64,
    ) {
        let Ok(mut queue) = self.handed.lock() else {
            return;
        };
        for job in jobs {
            queue.push_back(HandedOff {
                job,
                run: run.clone(),
                lease_until,
            });
            self.wake.notify_one();
        }
    }

    /// Gives back the leases of handed-off jobs no lane has started (at
    /// shutdown), so that another process takes them at once rather than
    /// when their leases run out. Errors are logged: the leases then run
    /// out by themselves.
    pub async fn release_handed(&self) {
        for h in self.take_handed(usize::MAX) {
            if let Err(e) = self
                .store
                .release(h.job.id, &self.config.worker_id, h.job.due_unix, None)
                .await
            {
                tracing::warn!(job = h.job.id, error = %e, "handed-off job not released; its lease will run out");
            }
        }
    }

    /// The handed-off jobs of run `run_id` (taken off the queue).
    pub(crate) fn take_handed_of(&self, run_id: &str) -> Vec<HandedOff> {
        match self.handed.lock() {
            Ok(mut queue) => {
                let (mine, rest): (Vec<HandedOff>, Vec<HandedOff>) =
                    queue.drain(..).partition(|h| h.job.run_id == run_id);
                queue.extend(rest);
                mine
            }
            Err(_) => Vec::new(),
        }
    }

    /// Up to `limit` handed-off jobs, oldest first.
    pub(crate) fn take_handed(&self, limit: usize) -> Vec<HandedOff> {
        match self.handed.lock() {
            Ok(mut queue) => {
                let n = limit.min(queue.len());
                queue.drain(..n).collect()
            }
            Err(_) => Vec::new(),
        }
    }

    /// Waits for [`Engine::wake_one`] (at once when a wake is kept).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The earliest due instant (Unix seconds) of a job no lease holds
    /// ([`JobQueue::next_due`]): the worker's timer sleeps until then.
    ///
    /// # Errors
    /// The store's.
    pub async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        self.store.next_due().await
    }

    /// Notes a store error: a `restore.lease-incompatible` refusal fences
    /// this engine (logged once); an outage is counted.
    pub(crate) fn noted(&self, e: StoreError) -> StoreError {
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

    /// Whether an audited answer would be released now, without writing
    /// anything: no journal is attached (nothing is audited), or the one
    /// attached did not fail its last append and its file is there
    /// ([`AuditJournal::healthy`]). `/ready` asks this.
    pub fn audit_ready(&self) -> bool {
        self.audit
            .as_ref()
            .is_none_or(|(journal, _)| journal.healthy())
    }

    /// Whether the audit journal takes an append now: a probe line
    /// appended and synced ([`AuditJournal::probe`]); false without a
    /// journal. Doctor asks this.
    pub async fn audit_probe(&self) -> bool {
        let Some((journal, _)) = &self.audit else {
            return false;
        };
        let journal = journal.clone();
        tokio::task::spawn_blocking(move || journal.probe().is_ok())
            .await
            .unwrap_or(false)
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

    /// Counts a store error (the `coordinator_store_errors_total` metric)
    /// and hands it back.
    pub fn seen(&self, e: StoreError) -> StoreError {
        if matches!(e, StoreError::Unavailable(_)) {
            self.counters.add("store_errors", "unavailable");
        }
        e
    }

    pub(crate) fn cached(&self, revision: &str) -> Option<Arc<Vm>> {
        self.programs
            .read()
            .ok()
            .and_then(|p| p.get(revision).cloned())
    }

    /// The VM of `revision`: cached, or loaded from the store's definitions
    /// (every revision ever applied), so a run keeps its Program after its
    /// workflow moved on. `None` when no definition exists or it cannot be
    /// served (a connection the runtime file lacks: logged).
    pub(crate) async fn vm(&self, revision: &str) -> Result<Option<Arc<Vm>>, StoreError> {
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

    /// The engine clock's current instant, Unix seconds (the event
    /// signature's clock-skew check uses it, so a manual clock drives it).
    pub fn now_unix(&self) -> i64 {
        self.clock.now_unix()
    }
}
