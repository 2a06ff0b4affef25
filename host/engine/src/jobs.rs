//! Command → job translation: each VM command becomes a job row with a due
//! time (a dispatch with its prepared command and idempotency key, a
//! receipt lookup, a timer, an observation); retries wait their backoff.

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator_ir::instant::Instant;
use coordinator_ports::clock::{due_at, seconds_after};
use coordinator_ports::store::{JobKind, NewJob};
use coordinator_runtime::config::{Connection, DEFAULT_RESULT_CHECK_SECONDS};
use coordinator_runtime::keys::AdmissionKey;
use coordinator_vm::{Command, Event, Resumed, Vm, WakeKind};

use crate::config::MAX_BACKOFF_SECONDS;

/// How many already-due waits one step takes in a row before it leaves
/// the rest to timer jobs (a bound on the work of one transaction).
const MAX_DUE_WAITS_TAKEN: usize = 8;

/// Takes the `wait-until` wakes among `resumed`'s commands that are due
/// by `now` at once: each is fed back to the VM as [`Event::TimerFired`],
/// so the step after a wait that is already due (a `sendAfter` in the
/// past) is decided in the same transaction as what scheduled it, with no
/// timer job inserted, leased and deleted. Deadlines and wait-for
/// timeouts stay jobs. With `keep_running`, a wake whose step would end
/// the run is left as a timer job (an admission stores running runs only).
pub(crate) fn take_due_waits(
    vm: &Vm,
    mut resumed: Resumed,
    now: &Instant,
    keep_running: bool,
) -> Resumed {
    for _ in 0..MAX_DUE_WAITS_TAKEN {
        let Some(i) = resumed.commands.iter().position(
            |c| matches!(c, Command::ScheduleWake { at, kind: WakeKind::Wake } if due_at(at) <= *now),
        ) else {
            break;
        };
        let Some(Command::ScheduleWake { at, .. }) = resumed.commands.get(i).cloned() else {
            break;
        };
        let Ok(next) = vm.resume(&resumed.state, &Event::TimerFired { at }) else {
            break;
        };
        if keep_running && next.status.is_terminal() {
            break;
        }
        resumed.commands.remove(i);
        resumed.commands.extend(next.commands);
        resumed.state = next.state;
        resumed.status = next.status;
    }
    resumed
}

/// Backoff before attempt `attempt` (≥ 2) after a retryable answer:
/// 2, 4, 8, ... seconds, at most [`MAX_BACKOFF_SECONDS`].
pub fn backoff(attempt: u32) -> i64 {
    let exp = attempt.saturating_sub(1).min(20);
    (1i64 << exp).min(MAX_BACKOFF_SECONDS)
}

/// Turns the VM's commands into jobs: the idempotency keys of dispatches
/// (from the admission key and the deployment's database id) and the
/// interval of observations (the connection's result check, never below
/// the observation floor).
pub(crate) struct JobMaker {
    admission_key: AdmissionKey,
    database_id: String,
    connections: Arc<BTreeMap<String, Connection>>,
    observation_floor_seconds: u64,
}

impl JobMaker {
    /// Jobs keyed under `admission_key` and `database_id`, observing
    /// through `connections` no more often than `observation_floor_seconds`.
    pub(crate) fn new(
        admission_key: AdmissionKey,
        database_id: String,
        connections: Arc<BTreeMap<String, Connection>>,
        observation_floor_seconds: u64,
    ) -> Self {
        JobMaker {
            admission_key,
            database_id,
            connections,
            observation_floor_seconds,
        }
    }

    /// Seconds between two observations through `connection`.
    pub(crate) fn observe_interval(&self, connection: &str) -> i64 {
        let check = self.connections.get(connection).map_or(
            DEFAULT_RESULT_CHECK_SECONDS,
            Connection::result_check_seconds,
        );
        i64::try_from(check.max(self.observation_floor_seconds)).unwrap_or(i64::MAX)
    }

    /// The jobs for the VM's commands. `answered`: the commands follow a
    /// product answer, so a repeated attempt waits its backoff.
    pub(crate) fn jobs_for(
        &self,
        start_identity: &str,
        commands: &[Command],
        now: &Instant,
        answered: bool,
    ) -> Vec<NewJob> {
        let mut jobs = Vec::new();
        for c in commands {
            match c {
                // The run deadline stays on the run row until it is due
                // (the store then makes it a timer job): no job is inserted
                // at admission and deleted unused when the run ends in time.
                Command::ScheduleWake {
                    kind: WakeKind::Deadline,
                    ..
                } => {}
                // Due at the whole second at or after the instant
                // ([`due_at`]), so a timer with a fraction of a second
                // (`sendAfter` at `…:15.9Z`) never fires before it.
                Command::ScheduleWake { at, kind } => jobs.push(NewJob {
                    due_at: due_at(at),
                    kind: JobKind::Timer {
                        at: *at,
                        wake: *kind,
                    },
                }),
                Command::Dispatch {
                    needs_idempotency_key,
                    dispatch,
                    ..
                } => {
                    let delay = if answered && dispatch.attempt > 1 {
                        backoff(dispatch.attempt)
                    } else {
                        0
                    };
                    jobs.push(NewJob {
                        due_at: seconds_after(now, delay),
                        kind: JobKind::Dispatch {
                            idempotency_key: needs_idempotency_key
                                .then(|| self.key(start_identity, &dispatch.step)),
                            dispatch: dispatch.clone(),
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
                        due_at: seconds_after(now, delay),
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
                    completion,
                    connection,
                    handle,
                    timeout_at,
                    ..
                } => {
                    jobs.push(NewJob {
                        due_at: due_at(timeout_at),
                        kind: JobKind::Timer {
                            at: *timeout_at,
                            wake: WakeKind::Timeout,
                        },
                    });
                    match handle {
                        Some(handle) => jobs.push(NewJob {
                            due_at: seconds_after(now, self.observe_interval(connection)),
                            kind: JobKind::Observe {
                                step: step.clone(),
                                connection: connection.clone(),
                                completion: completion.clone(),
                                review_request_id: handle.clone(),
                                last_observed_at: None,
                            },
                        }),
                        None => {
                            tracing::error!(step = %step, "cannot observe: the call answered no handle; the wait runs to its timeout")
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
            .idempotency_key(&self.database_id, start_identity, step)
    }
}
