//! Command → job translation: each VM command becomes a job row with a due
//! time (a dispatch with its prepared command and idempotency key, a
//! receipt lookup, a timer, an observation); retries wait their backoff.

use coordinator_ir::catalogue::{self, Effect};
use coordinator_ir::StepOp;
use coordinator_ports::clock::rfc3339_to_unix;
use coordinator_ports::store::{JobKind, NewJob};
use coordinator_runtime::config::{Connection, DEFAULT_RESULT_CHECK_SECONDS};
use coordinator_vm::{Command, Vm, WakeKind};
use serde_json::Value;

use crate::engine::{Engine, MAX_BACKOFF_SECONDS};

/// Backoff before attempt `attempt` (≥ 2) after a retryable answer:
/// 2, 4, 8, ... seconds, at most [`MAX_BACKOFF_SECONDS`].
pub fn backoff(attempt: u32) -> i64 {
    let exp = attempt.saturating_sub(1).min(20);
    (1i64 << exp).min(MAX_BACKOFF_SECONDS)
}

impl Engine {
    pub(crate) fn observe_interval(&self, connection: &str) -> i64 {
        let check = match self.connections.get(connection) {
            Some(Connection::CaseworkReviewProducer(c)) => c.result_check_seconds,
            _ => DEFAULT_RESULT_CHECK_SECONDS,
        };
        i64::try_from(check.max(self.config.observation_floor_seconds)).unwrap_or(i64::MAX)
    }

    /// The jobs for the VM's commands. `answered`: the commands follow a
    /// product answer, so a repeated attempt waits its backoff.
    pub(crate) fn jobs_for(
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

    pub(crate) fn key(&self, start_identity: &str, step: &str) -> String {
        self.admission_key
            .idempotency_key(&self.config.database_id, start_identity, step)
    }
}
