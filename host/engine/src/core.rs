//! [`Core`]: what the engine's three roles share (admission in
//! `admission.rs`, the worker in `worker.rs`, operator actions in
//! `actions.rs` and `restore.rs`): the ports, the Program cache, the
//! settings, the restore epoch and fence, the hand-off of jobs leased on
//! insert, the group commits, the audit journal and the holds. Feeding an
//! event to the VM and committing it is `feed.rs`; the VM's commands
//! turned into jobs `jobs.rs`: both are the core's, one commit path for
//! every role.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use coordinator_ports::adapter::ProductAdapter;
use coordinator_ports::clock::Clock;
use coordinator_ports::store::{
    Commit, Committed, Holds, LeaseOnInsert, RunRecord, RunStore, StoreError,
};
use coordinator_runtime::audit::{AuditJournal, AuditRecord};
use coordinator_runtime::config::Connection;
use coordinator_runtime::keys::{AdmissionKey, AuditKey};
use coordinator_vm::Vm;

use crate::config::EngineConfig;
use crate::flow_gate::FlowGate;
use crate::group::Group;
use crate::metrics::Counters;

/// What the three roles share (admission, the worker, operator actions):
/// the ports, the Program cache, the settings and counters, the audit
/// journal, the restore epoch and fence, the hand-off queue and the group
/// commits of runs and of `sending` marks. Each role holds it in an `Arc`.
pub(crate) struct Core {
    pub(crate) store: Arc<dyn RunStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) adapter: Arc<dyn ProductAdapter>,
    /// Derives start identities (admission) and idempotency keys (the
    /// jobs of dispatches).
    pub(crate) admission_key: AdmissionKey,
    pub(crate) connections: BTreeMap<String, Connection>,
    /// Programs by revision: the active ones from the start, older ones
    /// loaded from the store when a run needs them.
    pub(crate) programs: std::sync::RwLock<HashMap<String, Arc<Vm>>>,
    pub(crate) active: BTreeMap<String, String>,
    pub(crate) config: EngineConfig,
    pub(crate) counters: Counters,
    /// This process's audit journal and the audit key, once attached
    /// ([`Engine::with_audit`]).
    pub(crate) audit: std::sync::OnceLock<(Arc<AuditJournal>, AuditKey)>,
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
    /// "Mark sending" fences of this process written together
    /// ([`JobQueue::mark_sending_batch`]): job id, lease owner, epoch.
    pub(crate) sendings: Group<(u64, String, u64), Result<(), StoreError>>,
    /// Flow control of the calls to each connection ([`FlowGate`]).
    pub(crate) flow: FlowGate,
    /// The tracer of runs' spans, once handed over
    /// ([`Engine::with_tracer`]); unset, no span is made.
    pub(crate) tracer: std::sync::OnceLock<crate::trace::RunTracer>,
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

impl Core {
    /// The work of [`Engine::recovery_only`].
    pub(crate) fn recovery_only(&self) -> bool {
        self.config.recovery_only
    }

    /// The work of [`Engine::adopt_restore_epoch`].
    pub(crate) async fn adopt_restore_epoch(&self) -> Result<u64, StoreError> {
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

    /// The work of [`Engine::fenced`].
    pub(crate) fn fenced(&self) -> bool {
        self.fenced.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The work of [`Engine::batch`].
    pub(crate) fn batch(&self) -> usize {
        self.config.batch
    }

    /// The work of [`Engine::wake_one`].
    pub(crate) fn wake_one(&self) {
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

    /// The work of [`Engine::release_handed`].
    pub(crate) async fn release_handed(&self) {
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

    /// The work of [`Engine::woken`].
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The work of [`Engine::next_due`].
    pub(crate) async fn next_due(&self) -> Result<Option<i64>, StoreError> {
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

    /// The work of [`Engine::audit_ready`].
    pub(crate) fn audit_ready(&self) -> bool {
        self.audit
            .get()
            .is_none_or(|(journal, _)| journal.healthy())
    }

    /// The work of [`Engine::audit_probe`].
    pub(crate) async fn audit_probe(&self) -> bool {
        let Some((journal, _)) = self.audit.get() else {
            return false;
        };
        let journal = journal.clone();
        tokio::task::spawn_blocking(move || journal.probe().is_ok())
            .await
            .unwrap_or(false)
    }

    /// The work of [`Engine::audit`].
    pub(crate) fn audit(
        &self,
        build: impl FnOnce(&AuditKey) -> AuditRecord,
    ) -> std::io::Result<()> {
        match self.audit.get() {
            Some((journal, key)) => journal.append(&build(key)),
            None => Ok(()),
        }
    }

    /// The work of [`Engine::holds`].
    pub(crate) async fn holds(&self) -> Result<Holds, StoreError> {
        self.store.holds().await
    }

    /// The work of [`Engine::update_holds`].
    pub(crate) async fn update_holds<E: From<StoreError>>(
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

    /// The work of [`Engine::counters`].
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The work of [`Engine::seen`].
    pub(crate) fn seen(&self, e: StoreError) -> StoreError {
        if matches!(e, StoreError::Unavailable(_)) {
            self.counters.store_error();
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

    /// The work of [`Engine::store`].
    pub(crate) fn store(&self) -> &Arc<dyn RunStore> {
        &self.store
    }

    /// The work of [`Engine::active_revisions`].
    pub(crate) fn active_revisions(&self) -> &BTreeMap<String, String> {
        &self.active
    }

    /// The work of [`Engine::now_unix`].
    pub(crate) fn now_unix(&self) -> i64 {
        self.clock.now_unix()
    }
}
