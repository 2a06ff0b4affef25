//! A new job as written: its columns in the clear ([`JobRow`]), its
//! command sealed, and the values a group statement binds for it
//! ([`JobValues`]); a job leased on insert as handed back to its lane.

use coordinator_ports::clock::whole_second;
use coordinator_ports::store::{Job, JobKind, JobState, Lease, LeaseOnInsert, NewJob};
use serde_json::Value;
use time::OffsetDateTime;

use super::columns::at_instant;
use super::Store;

/// A job's columns: what is stored in the clear and the sealed command.
pub(super) struct JobRow {
    pub(super) kind: &'static str,
    pub(super) step: String,
    pub(super) detail: String,
    pub(super) review_request_id: Option<String>,
    pub(super) idempotency_key: Option<String>,
    command: Option<Value>,
}

/// The columns of a job of `kind`: its kind's name, its step, its detail
/// (the kind as JSON without the command), the review request it
/// observes and its idempotency key, and the command to seal apart.
pub(super) fn job_row(kind: &JobKind) -> JobRow {
    let mut detail = serde_json::to_value(kind).unwrap_or(Value::Null);
    let mut command = None;
    if let Some(o) = detail.as_object_mut() {
        command = o.remove("command");
    }
    let (name, step, review, key) = match kind {
        JobKind::Dispatch {
            dispatch,
            idempotency_key,
        } => (
            "dispatch",
            dispatch.step.clone(),
            None,
            idempotency_key.clone(),
        ),
        JobKind::LookupReceipt { step, .. } => ("lookup-receipt", step.clone(), None, None),
        JobKind::Timer { .. } => ("timer", String::new(), None, None),
        JobKind::Observe {
            step,
            review_request_id,
            ..
        } => (
            "observe",
            step.clone(),
            Some(review_request_id.clone()),
            None,
        ),
    };
    JobRow {
        kind: name,
        step,
        detail: detail.to_string(),
        review_request_id: review,
        idempotency_key: key,
        command,
    }
}

/// A job's values as bound (`runs/batch.rs`: a new job's columns in the
/// group statements' arrays).
pub(super) struct JobValues<'a> {
    pub(super) row: JobRow,
    pub(super) sealed: Option<Vec<u8>>,
    pub(super) key_version: Option<i32>,
    pub(super) due_at: OffsetDateTime,
    pub(super) lease: Option<&'a LeaseOnInsert>,
    /// Inserted `sending` when leased on insert
    /// ([`LeaseOnInsert::mark_sending`] names it).
    pub(super) sending: bool,
}

/// The job `job_id` as leased on insert (`owner` set), for the lane that
/// inserted it, in `state` (`sending` when the insert marked it); `None`
/// when it was inserted unleased.
pub(super) fn leased_job(
    run_id: &str,
    job: &NewJob,
    lease: Option<&LeaseOnInsert>,
    job_id: i64,
    owner: Option<String>,
    state: JobState,
) -> Option<Job> {
    owner.zip(lease).map(|(owner, l)| Job {
        id: u64::try_from(job_id).unwrap_or(0),
        run_id: run_id.to_owned(),
        kind: job.kind.clone(),
        due_at: whole_second(&job.due_at),
        state,
        lease: Some(Lease {
            owner,
            expires_at: whole_second(&l.lease_until),
        }),
    })
}

impl Store {
    /// The command of `row` (a job of `run_id`) sealed with the active
    /// state key, and that key's version; `(None, None)` for a job without
    /// a command.
    pub(super) fn sealed_command(
        &self,
        run_id: &str,
        row: &JobRow,
    ) -> (Option<Vec<u8>>, Option<i32>) {
        let sealed = row
            .command
            .as_ref()
            .map(|c| self.seal_json(run_id, "command", &row.step, c));
        let key_version = sealed
            .as_ref()
            .map(|_| self.keyring.active_version() as i32);
        (sealed, key_version)
    }

    /// A job's values as bound: its columns, its command sealed (with the
    /// active key version), and the lease to take on insert when the job is
    /// due by `lease.now`.
    pub(super) fn job_values<'a>(
        &self,
        run_id: &str,
        job: &NewJob,
        lease: Option<&'a LeaseOnInsert>,
    ) -> JobValues<'a> {
        let row = job_row(&job.kind);
        let (sealed, key_version) = self.sealed_command(run_id, &row);
        JobValues {
            row,
            sealed,
            key_version,
            due_at: at_instant(&job.due_at),
            lease: lease.filter(|l| whole_second(&job.due_at) <= whole_second(&l.now)),
            sending: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use coordinator_ir::canonical;
    use coordinator_vm::DispatchCommand;
    use serde_json::json;

    use super::*;

    /// The `detail` of a dispatch job as stored before `JobKind::Dispatch`
    /// carried the VM's `DispatchCommand` (the command is sealed apart).
    const STORED_DISPATCH: &str = r#"{"kind":"dispatch","step":"send","operationId":"messaging.submit-message/v1","connection":"messaging","action":null,"idempotencyKey":"key-send","attempt":2,"resendSafe":false}"#;

    fn dispatch_job() -> JobKind {
        JobKind::Dispatch {
            dispatch: DispatchCommand {
                step: "send".into(),
                operation_id: "messaging.submit-message/v1".into(),
                connection: "messaging".into(),
                action: None,
                command: json!({"message": {"to": "applicant"}}),
                attempt: 2,
                resend_safe: false,
            },
            idempotency_key: Some("key-send".into()),
        }
    }

    #[test]
    fn a_dispatch_job_is_stored_as_it_always_was() {
        let row = job_row(&dispatch_job());
        let detail: Value = serde_json::from_str(&row.detail).unwrap_or_default();
        let stored: Value = serde_json::from_str(STORED_DISPATCH).unwrap_or_default();
        // `detail` is a `jsonb` column: its keys are kept in jsonb's own
        // order, so the stored value is its members and their values.
        assert_eq!(canonical::to_string(&detail), canonical::to_string(&stored));
        assert_eq!(row.command, Some(json!({"message": {"to": "applicant"}})));
        assert_eq!(
            (row.kind, row.step.as_str(), row.idempotency_key.as_deref()),
            ("dispatch", "send", Some("key-send"))
        );
    }

    #[test]
    fn a_dispatch_job_stored_before_reads_back() {
        let mut detail: Value = serde_json::from_str(STORED_DISPATCH).unwrap_or_default();
        if let Some(o) = detail.as_object_mut() {
            o.insert("command".into(), json!({"message": {"to": "applicant"}}));
        }
        let kind: Option<JobKind> = serde_json::from_value(detail).ok();
        assert_eq!(kind, Some(dispatch_job()));
    }
}
