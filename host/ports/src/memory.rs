//! [`MemoryRunStore`]: the in-memory implementation of the [`RunStore`](crate::store::RunStore)
//! port, for tests and for a service started without PostgreSQL (nothing
//! survives the process). It keeps every rule the port states, as the
//! conformance checks (`coordinator_testkit::conformance`) prove on both stores.
//! Like the PostgreSQL store it keeps the whole seconds of the instants it
//! is given ([`whole_second`]), and compares those.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use coordinator_ir::instant::Instant;
use coordinator_ir::Definition;
use coordinator_runtime::binding::LiveBinding;
use coordinator_vm::{DispatchCommand, RunStatus};

use crate::clock::{due_at, seconds_after, whole_second};
use crate::store::{
    erasable, erased_state, Admitted, Commit, Committed, Definitions, Erasure, Holds,
    HoldsAndReviews, Job, JobKind, JobQueue, JobState, Lease, LeaseOnInsert, LeaseRequest,
    Maintenance, NewJob, NewRun, Review, ReviewSurvey, RunAdmission, RunFilter, RunPage, RunReads,
    RunRecord, StoreError, MAX_ERASE_LIMIT,
};

mod moves;

/// Whether the run's state holds an `unknown` effect.
fn holds_unknown(r: &RunRecord) -> bool {
    r.state
        .effects
        .values()
        .any(|e| *e == coordinator_vm::EffectState::Unknown)
}

#[derive(Default)]
struct Memory {
    holds: Holds,
    /// Set by [`MemoryRunStore::change_activation`].
    activation_changed: bool,
    /// Set by [`MemoryRunStore::conflict_next_commit`].
    conflict_next_commit: bool,
    definitions: BTreeMap<String, Definition>,
    runs: BTreeMap<String, RunRecord>,
    by_identity: BTreeMap<String, String>,
    jobs: BTreeMap<u64, Job>,
    /// Runs whose deadline became a timer job (PostgreSQL:
    /// `runs.deadline_job_created`).
    deadline_jobs_created: std::collections::BTreeSet<String>,
    next_sequence: u64,
    next_job: u64,
}

impl Memory {
    /// Adds `jobs`; those due by `lease.now` are leased to its owner (if
    /// the deployment is under its epoch and no restore hold) and returned.
    fn add_jobs(
        &mut self,
        run_id: &str,
        jobs: Vec<NewJob>,
        lease: Option<&LeaseOnInsert>,
    ) -> Vec<Job> {
        let lease = lease.filter(|l| !self.holds.restore && l.epoch == self.holds.restore_epoch);
        let mut leased = Vec::new();
        for (index, j) in jobs.into_iter().enumerate() {
            self.next_job += 1;
            let lease_now = lease.filter(|l| whole_second(&j.due_at) <= whole_second(&l.now));
            // The job the committing lane writes next is marked `sending`
            // by this commit, when it is leased to that lane.
            let marked = lease_now.is_some_and(|l| l.mark_sending == Some(index));
            let job = Job {
                id: self.next_job,
                run_id: run_id.to_owned(),
                lease: lease_now.map(|l| Lease {
                    owner: l.owner.clone(),
                    expires_at: whole_second(&l.lease_until),
                }),
                kind: j.kind,
                due_at: whole_second(&j.due_at),
                state: if marked {
                    JobState::Sending
                } else {
                    JobState::Ready
                },
            };
            if job.lease.is_some() {
                leased.push(job.clone());
            }
            self.jobs.insert(self.next_job, job);
        }
        leased
    }

    fn find_start(
        &self,
        start_identity: &str,
        request_digest: &str,
    ) -> Result<Option<Admitted>, StoreError> {
        let Some(id) = self.by_identity.get(start_identity) else {
            return Ok(None);
        };
        let existing = self.runs.get(id).cloned().ok_or(StoreError::NotFound)?;
        Ok(Some(if existing.request_digest == request_digest {
            Admitted::Existing(existing)
        } else {
            Admitted::Conflict
        }))
    }

    /// The deadlines not yet timer jobs, as (due second, run id): of
    /// the runs that have not ended ([`JobQueue::lease`] makes them jobs,
    /// [`JobQueue::next_due`] waits for them).
    fn deadlines_not_yet_jobs(&self) -> impl Iterator<Item = (Instant, &str)> {
        self.runs
            .values()
            .filter(|r| !r.state.status.is_terminal())
            .filter(|r| !self.deadline_jobs_created.contains(&r.id))
            .map(|r| (due_at(&r.state.deadline_at), r.id.as_str()))
    }

    fn leased(&mut self, job_id: u64, owner: &str) -> Result<&mut Job, StoreError> {
        match self.jobs.get_mut(&job_id) {
            Some(j) if j.lease.as_ref().is_some_and(|l| l.owner == owner) => Ok(j),
            _ => Err(StoreError::LeaseLost),
        }
    }
}

/// An in-memory [`RunStore`](crate::store::RunStore) for tests and for a service started without
/// PostgreSQL (nothing survives the process).
#[derive(Default)]
pub struct MemoryRunStore {
    inner: Mutex<Memory>,
    unavailable: std::sync::atomic::AtomicBool,
}

impl MemoryRunStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps `definition` (what `apply` does for the PostgreSQL store).
    pub fn add_definition(&self, definition: Definition) {
        if let Ok(mut m) = self.inner.lock() {
            m.definitions
                .insert(definition.revision.clone(), definition);
        }
    }

    /// Acts as if an `apply` changed the active packages since the store
    /// was opened: admissions answer [`Admitted::ActivationChanged`] and
    /// [`Definitions::activation_current`] `false` (tests).
    pub fn change_activation(&self) {
        if let Ok(mut m) = self.inner.lock() {
            m.activation_changed = true;
        }
    }

    /// Makes the next commit (or move) fail with [`StoreError::Conflict`], as if
    /// another process had changed the run after it was read (tests).
    pub fn conflict_next_commit(&self) {
        if let Ok(mut m) = self.inner.lock() {
            m.conflict_next_commit = true;
        }
    }

    /// Makes every call fail with [`StoreError::Unavailable`] (tests).
    pub fn set_unavailable(&self, unavailable: bool) {
        self.unavailable
            .store(unavailable, std::sync::atomic::Ordering::SeqCst);
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Memory>, StoreError> {
        if self.unavailable.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Unavailable("memory store switched off".into()));
        }
        self.inner
            .lock()
            .map_err(|_| StoreError::Unavailable("memory store poisoned".into()))
    }
}

fn cursor_of(sequence: u64) -> String {
    format!("s{sequence:x}")
}

fn parse_cursor(cursor: &str) -> Result<u64, StoreError> {
    cursor
        .strip_prefix('s')
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or(StoreError::BadCursor)
}

impl MemoryRunStore {
    /// One start of [`RunAdmission::admit_batch`].
    fn admit_one(
        &self,
        run: NewRun,
        lease: Option<&LeaseOnInsert>,
    ) -> Result<(Admitted, Vec<Job>), StoreError> {
        let mut m = self.lock()?;
        if let Some(found) = m.find_start(&run.start_identity, &run.request_digest)? {
            return Ok((found, Vec::new()));
        }
        if m.holds.admission {
            return Ok((Admitted::AdmissionHeld, Vec::new()));
        }
        if m.activation_changed {
            return Ok((Admitted::ActivationChanged, Vec::new()));
        }
        m.next_sequence += 1;
        let mut run = run;
        let jobs = std::mem::take(&mut run.jobs);
        let record = RunRecord::admitted(run, m.next_sequence);
        m.by_identity
            .insert(record.start_identity.clone(), record.id.clone());
        m.runs.insert(record.id.clone(), record.clone());
        let leased = if record.state.status.is_terminal() {
            Vec::new()
        } else {
            m.add_jobs(&record.id, jobs, lease)
        };
        Ok((Admitted::Created(record), leased))
    }

    /// One job of [`JobQueue::mark_sending_batch`].
    fn mark_one_sending(&self, job_id: u64, owner: &str, epoch: u64) -> Result<(), StoreError> {
        let mut m = self.lock()?;
        if m.holds.restore || m.holds.restore_epoch != epoch {
            return Err(StoreError::LeaseLost);
        }
        m.leased(job_id, owner)?.state = JobState::Sending;
        Ok(())
    }

    /// One commit of [`JobQueue::commit_batch`].
    fn commit_one(
        &self,
        commit: Commit,
        lease: Option<&LeaseOnInsert>,
    ) -> Result<Committed, StoreError> {
        let mut m = self.lock()?;
        if std::mem::take(&mut m.conflict_next_commit) {
            return Err(StoreError::Conflict);
        }
        let version = match m.runs.get(&commit.run_id) {
            None => return Err(StoreError::NotFound),
            Some(r) if r.payload_erased => {
                return Err(StoreError::Refused {
                    code: "run.payload-erased",
                    message: format!("retention erased the payloads of run {}", r.id),
                })
            }
            Some(r) if r.version != commit.expected_version => return Err(StoreError::Conflict),
            Some(r) => r.version + 1,
        };
        if let Some((job, owner)) = &commit.complete {
            m.leased(*job, owner)?;
            m.jobs.remove(job);
        }
        let ended = commit.state.status.is_terminal();
        if let Some(r) = m.runs.get_mut(&commit.run_id) {
            if ended && r.ended_at.is_none() {
                r.ended_at = Some(whole_second(&commit.at));
            }
            r.state = commit.state;
            r.ledger = commit.ledger;
            r.version = version;
            r.review = Review::after(r.review, commit.review);
        }
        let leased = if ended {
            m.jobs.retain(|_, j| j.run_id != commit.run_id);
            Vec::new()
        } else {
            m.add_jobs(&commit.run_id, commit.jobs, lease)
        };
        Ok(Committed { version, leased })
    }
}

#[async_trait]
impl RunAdmission for MemoryRunStore {
    async fn admit_batch(
        &self,
        runs: Vec<(NewRun, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<(Admitted, Vec<Job>), StoreError>> {
        let mut answers = Vec::with_capacity(runs.len());
        for (run, lease) in runs {
            answers.push(self.admit_one(run, lease.as_ref()));
        }
        answers
    }

    async fn find_start(
        &self,
        start_identity: &str,
        request_digest: &str,
    ) -> Result<Option<Admitted>, StoreError> {
        self.lock()?.find_start(start_identity, request_digest)
    }
}

#[async_trait]
impl JobQueue for MemoryRunStore {
    async fn lease(&self, request: &LeaseRequest<'_>) -> Result<Vec<Job>, StoreError> {
        let mut m = self.lock()?;
        if let Some(process) = request.epoch {
            if process != m.holds.restore_epoch {
                return Err(StoreError::LeaseIncompatible {
                    process,
                    store: m.holds.restore_epoch,
                });
            }
        }
        let lookups_only =
            request.receipt_lookups_only || m.holds.restore || request.epoch.is_none();
        let now = whole_second(&request.now);
        let lease_until = whole_second(&request.lease_until);
        let limit = request.limit.clamp(1, 1000);
        // The deadlines that came due become timer jobs (once per run),
        // leased at once when timers may be leased.
        let mut deadlines: Vec<(Instant, String)> = m
            .deadlines_not_yet_jobs()
            .filter(|(due, id)| *due <= now && request.run_id.is_none_or(|r| r == *id))
            .map(|(due, id)| (due, id.to_owned()))
            .collect();
        deadlines.sort_unstable();
        deadlines.truncate(limit);
        let timer_lease = (!lookups_only).then(|| LeaseOnInsert {
            owner: request.owner.to_owned(),
            now,
            lease_until,
            epoch: m.holds.restore_epoch,
            mark_sending: None,
        });
        let mut out = Vec::new();
        for (due, run_id) in deadlines {
            m.deadline_jobs_created.insert(run_id.clone());
            let job = NewJob {
                kind: JobKind::Timer {
                    at: due,
                    wake: coordinator_vm::WakeKind::Deadline,
                },
                due_at: due,
            };
            out.extend(m.add_jobs(&run_id, vec![job], timer_lease.as_ref()));
        }
        let created = out.iter().map(|j| j.id).collect::<Vec<_>>();
        let mut due: Vec<(Instant, u64)> = m
            .jobs
            .values()
            .filter(|j| j.due_at <= now)
            .filter(|j| j.lease.as_ref().is_none_or(|l| l.expires_at <= now))
            .filter(|j| !lookups_only || matches!(j.kind, JobKind::LookupReceipt { .. }))
            .filter(|j| request.run_id.is_none_or(|r| r == j.run_id))
            .filter(|j| !created.contains(&j.id))
            .map(|j| (j.due_at, j.id))
            .collect();
        due.sort_unstable();
        due.truncate(limit.saturating_sub(out.len()));
        for (_, id) in due {
            if let Some(j) = m.jobs.get_mut(&id) {
                j.lease = Some(Lease {
                    owner: request.owner.to_owned(),
                    expires_at: lease_until,
                });
                out.push(j.clone());
            }
        }
        out.sort_by_key(|j| (j.due_at, j.id));
        Ok(out)
    }

    async fn next_due(&self) -> Result<Option<Instant>, StoreError> {
        let m = self.lock()?;
        let jobs = m
            .jobs
            .values()
            .filter(|j| j.lease.is_none())
            .map(|j| j.due_at);
        let deadlines = m.deadlines_not_yet_jobs().map(|(due, _)| due);
        Ok(jobs.chain(deadlines).min())
    }

    async fn mark_sending_batch(
        &self,
        jobs: Vec<(u64, String, u64)>,
    ) -> Vec<Result<(), StoreError>> {
        jobs.into_iter()
            .map(|(job_id, owner, epoch)| self.mark_one_sending(job_id, &owner, epoch))
            .collect()
    }

    async fn commit_batch(
        &self,
        commits: Vec<(Commit, Option<LeaseOnInsert>)>,
    ) -> Vec<Result<Committed, StoreError>> {
        let mut answers = Vec::with_capacity(commits.len());
        for (commit, lease) in commits {
            answers.push(self.commit_one(commit, lease.as_ref()));
        }
        answers
    }

    async fn release(
        &self,
        job_id: u64,
        owner: &str,
        due: Instant,
        kind: Option<JobKind>,
    ) -> Result<(), StoreError> {
        let mut m = self.lock()?;
        let job = m.leased(job_id, owner)?;
        job.lease = None;
        job.state = JobState::Ready;
        job.due_at = whole_second(&due);
        if let Some(k) = kind {
            job.kind = k;
        }
        Ok(())
    }

    async fn discard(&self, job_id: u64, owner: &str) -> Result<(), StoreError> {
        let mut m = self.lock()?;
        m.leased(job_id, owner)?;
        m.jobs.remove(&job_id);
        Ok(())
    }

    async fn claim_restored_commands(
        &self,
        owner: &str,
        lease_until: Instant,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let lease_until = whole_second(&lease_until);
        let mut m = self.lock()?;
        let mut out = Vec::new();
        for j in m.jobs.values_mut() {
            if out.len() >= limit {
                break;
            }
            if let JobKind::Dispatch {
                dispatch:
                    DispatchCommand {
                        resend_safe: false, ..
                    },
                ..
            } = j.kind
            {
                j.lease = Some(Lease {
                    owner: owner.to_owned(),
                    expires_at: lease_until,
                });
                out.push(j.clone());
            }
        }
        Ok(out)
    }

    async fn bring_run_forward(&self, run_id: &str, now: Instant) -> Result<usize, StoreError> {
        let now = whole_second(&now);
        let mut m = self.lock()?;
        let mut moved = 0;
        for j in m.jobs.values_mut() {
            if j.run_id == run_id
                && matches!(j.kind, JobKind::Dispatch { .. })
                && j.state == JobState::Ready
                && j.lease.is_none()
                && j.due_at > now
            {
                j.due_at = now;
                moved += 1;
            }
        }
        Ok(moved)
    }

    async fn bring_forward(
        &self,
        review_request_id: &str,
        now: Instant,
        floor_seconds: i64,
    ) -> Result<usize, StoreError> {
        let now = whole_second(&now);
        let mut m = self.lock()?;
        let mut moved = 0;
        for j in m.jobs.values_mut() {
            if let JobKind::Observe {
                review_request_id: id,
                last_observed_at,
                ..
            } = &j.kind
            {
                if id == review_request_id {
                    let earliest = last_observed_at
                        .map(|t| seconds_after(&whole_second(&t), floor_seconds))
                        .unwrap_or(now)
                        .max(now);
                    if j.due_at > earliest {
                        j.due_at = earliest;
                        moved += 1;
                    }
                }
            }
        }
        Ok(moved)
    }
}

#[async_trait]
impl RunReads for MemoryRunStore {
    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.lock()?.runs.get(run_id).cloned())
    }

    async fn list(&self, filter: &RunFilter) -> Result<RunPage, StoreError> {
        let m = self.lock()?;
        let limit = filter.limit.clamp(1, 100) as usize;
        let before = filter.cursor.as_deref().map(parse_cursor).transpose()?;
        let mut runs: Vec<&RunRecord> = m
            .runs
            .values()
            .filter(|r| before.is_none_or(|b| r.sequence < b))
            .filter(|r| filter.owner.as_ref().is_none_or(|o| *o == r.owner))
            .filter(|r| {
                filter
                    .workflows
                    .as_ref()
                    .is_none_or(|w| w.contains(&r.workflow))
            })
            .filter(|r| filter.state.is_none_or(|s| s == r.status()))
            .filter(|r| {
                filter
                    .attention
                    .is_none_or(|a| a == (r.status() == RunStatus::Attention))
            })
            .filter(|r| {
                filter
                    .admitted_before
                    .is_none_or(|b| r.state.admitted_at.unix_seconds() < b.unix_seconds())
            })
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse(r.sequence));
        let more = runs.len() > limit;
        runs.truncate(limit);
        // As the PostgreSQL store: the cursor follows the last run scanned,
        // and step and effect are decided on the scanned page.
        let next_cursor = if more {
            runs.last().map(|r| cursor_of(r.sequence))
        } else {
            None
        };
        Ok(RunPage {
            runs: runs
                .into_iter()
                .filter(|r| filter.passes_current_step(r))
                .cloned()
                .collect(),
            next_cursor,
        })
    }

    async fn jobs(&self, run_id: &str) -> Result<Vec<Job>, StoreError> {
        Ok(self
            .lock()?
            .jobs
            .values()
            .filter(|j| j.run_id == run_id)
            .cloned()
            .collect())
    }

    async fn live_bindings(&self) -> Result<Vec<LiveBinding>, StoreError> {
        let m = self.lock()?;
        let mut counts: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for r in m.runs.values().filter(|r| !r.status().is_terminal()) {
            for (connection, digest) in &r.bindings {
                *counts.entry((connection, digest)).or_default() += 1;
            }
        }
        Ok(counts
            .into_iter()
            .map(|((connection, digest), runs)| LiveBinding {
                connection: connection.to_owned(),
                digest: digest.to_owned(),
                runs,
            })
            .collect())
    }
}

#[async_trait]
impl HoldsAndReviews for MemoryRunStore {
    async fn holds(&self) -> Result<Holds, StoreError> {
        Ok(self.lock()?.holds.clone())
    }

    async fn swap_holds(&self, expected: &Holds, next: &Holds) -> Result<bool, StoreError> {
        let mut m = self.lock()?;
        if m.holds != *expected {
            return Ok(false);
        }
        m.holds = next.clone();
        Ok(true)
    }

    async fn review_survey(&self) -> Result<ReviewSurvey, StoreError> {
        let m = self.lock()?;
        let count =
            |f: &dyn Fn(&RunRecord) -> bool| m.runs.values().filter(|r| f(r)).count() as u64;
        Ok(ReviewSurvey {
            review_required: count(&|r| {
                !r.status().is_terminal() && r.review == Some(Review::Required)
            }),
            unknown_effects: count(&|r| !r.status().is_terminal() && holds_unknown(r)),
            ended_unknown_effects: count(&|r| r.status().is_terminal() && holds_unknown(r)),
        })
    }

    async fn attest_reviews(&self) -> Result<u64, StoreError> {
        let mut m = self.lock()?;
        let mut n = 0;
        for r in m.runs.values_mut() {
            if r.review == Some(Review::Required) {
                r.review = Some(Review::Attested);
                n += 1;
            }
        }
        Ok(n)
    }
}

#[async_trait]
impl Definitions for MemoryRunStore {
    async fn definition(&self, revision: &str) -> Result<Option<Definition>, StoreError> {
        Ok(self.lock()?.definitions.get(revision).cloned())
    }

    async fn activation_current(&self) -> Result<bool, StoreError> {
        Ok(!self.lock()?.activation_changed)
    }
}

#[async_trait]
impl Maintenance for MemoryRunStore {
    async fn erase_payloads(
        &self,
        before: Instant,
        limit: u32,
        _now: Instant,
    ) -> Result<Erasure, StoreError> {
        let before = whole_second(&before);
        let mut m = self.lock()?;
        let limit = limit.clamp(1, MAX_ERASE_LIMIT) as usize;
        let mut due: Vec<(Instant, u64, String)> = m
            .runs
            .values()
            .filter(|r| !r.payload_erased && erasable(&r.state))
            .filter(|r| !m.jobs.values().any(|j| j.run_id == r.id))
            .filter_map(|r| {
                let ended = r.ended_at?;
                (ended < before).then(|| (ended, r.sequence, r.id.clone()))
            })
            .collect();
        due.sort_unstable();
        let more = due.len() > limit;
        due.truncate(limit);
        for (_, _, id) in &due {
            if let Some(r) = m.runs.get_mut(id) {
                r.state = erased_state(
                    r.state.status,
                    &r.state.admitted_at,
                    &r.state.deadline_at,
                    &r.state.now,
                    r.ended_at.as_ref(),
                );
                r.payload_erased = true;
                r.version += 1;
            }
        }
        Ok(Erasure {
            erased: u32::try_from(due.len()).unwrap_or(u32::MAX),
            more,
        })
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.lock().map(|_| ())
    }

    /// None: the in-memory store has no clock of its own.
    async fn sample_database_clock(
        &self,
        _local: &dyn coordinator_runtime::clock::Clock,
        _count: usize,
    ) -> Result<Vec<coordinator_runtime::clock::ClockSample>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait]
impl crate::counts::RunCounts for MemoryRunStore {
    async fn live_counts(&self) -> Result<crate::counts::LiveCounts, StoreError> {
        let m = self.lock()?;
        let mut c = crate::counts::LiveCounts::default();
        for r in m.runs.values() {
            let status = r.status();
            if status.is_terminal() {
                c.ended_unknown_effects += u64::from(holds_unknown(r));
                continue;
            }
            match status {
                RunStatus::Running => c.running += 1,
                RunStatus::Attention => c.attention += 1,
                RunStatus::CancelRequested => c.cancel_requested += 1,
                _ => {}
            }
            c.unknown_effects += u64::from(holds_unknown(r));
            c.review_required += u64::from(r.review == Some(Review::Required));
            match coordinator_vm::wait_kind(&r.state) {
                Some(coordinator_vm::WaitKind::Until) => c.wait_until += 1,
                Some(coordinator_vm::WaitKind::For) => c.wait_for += 1,
                None => {}
            }
        }
        for j in m.jobs.values() {
            if !matches!(j.kind, JobKind::Dispatch { .. }) {
                continue;
            }
            match (j.state, &j.lease) {
                (JobState::Sending, _) => c.dispatch_sending += 1,
                (JobState::Ready, Some(_)) => c.dispatch_leased += 1,
                (JobState::Ready, None) => c.dispatch_ready += 1,
            }
        }
        Ok(c)
    }

    async fn live_runs_by_revision(
        &self,
    ) -> Result<Vec<crate::counts::RevisionLiveRuns>, StoreError> {
        let m = self.lock()?;
        let mut by: std::collections::BTreeMap<(&str, &str), u64> =
            std::collections::BTreeMap::new();
        for r in m.runs.values().filter(|r| !r.status().is_terminal()) {
            *by.entry((&r.workflow, &r.revision)).or_default() += 1;
        }
        Ok(by
            .into_iter()
            .map(
                |((workflow, revision), live)| crate::counts::RevisionLiveRuns {
                    workflow: workflow.to_owned(),
                    revision: revision.to_owned(),
                    live,
                },
            )
            .collect())
    }
}
