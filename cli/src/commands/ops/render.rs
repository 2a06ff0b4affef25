//! The text form of the operator commands' answers (one `name: value` line
//! a member, in the service's order; `list` a line a run), and the printing
//! of an answer in the command's `--format`.

use std::fmt::Write as _;

use coordinator_api as api;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::report;
use crate::service_client::{AnswerOrFailure, ServiceCall};
use crate::Format;

/// Reads a 2xx answer as its API type and renders it as text; `Err` when the
/// answer is not of that type (`coordinator.command.unexpected-answer`).
pub(super) type Render = fn(&Value) -> Result<String, serde_json::Error>;

/// Prints `call`'s answer: with `--format json` the report with the answer
/// as the service sent it under `result`, in text `rendered` on stdout.
pub(super) fn print_answer(call: &ServiceCall, answer: &Value, rendered: &str) {
    print_answer_as(call, answer, rendered, (true, "ok"));
}

/// [`print_answer`] with the JSON line's `ok` and `status` given (`start
/// --wait` whose run had not ended: `false`, `not-ended`).
pub(super) fn print_answer_as(
    call: &ServiceCall,
    answer: &Value,
    rendered: &str,
    (ok, status): (bool, &str),
) {
    match call.conn.format {
        Format::Json => report::print_json(
            call.command,
            ok,
            status,
            &[],
            AnswerOrFailure::answer(answer),
        ),
        Format::Text => out!("{rendered}"),
    }
}

/// Reads `value` as the API type `T` and renders it as text.
pub(super) fn read<T: DeserializeOwned + Text>(value: &Value) -> Result<String, serde_json::Error> {
    T::deserialize(value).map(|answer| answer.text())
}

/// The text form of an API answer: lines, each ending in `\n`.
///
/// The renderers destructure each type without `..`, so a member added to
/// or renamed in `coordinator-api` breaks the build here until the text
/// form says what to do with it.
pub(super) trait Text {
    fn text(&self) -> String;
}

/// `name: value` when `value` is set.
fn line(out: &mut String, name: &str, value: Option<&dyn std::fmt::Display>) {
    if let Some(v) = value {
        let _ = writeln!(out, "{name}: {v}");
    }
}

/// An optional member, shown when set.
fn if_set<T: std::fmt::Display>(value: &Option<T>) -> Option<&dyn std::fmt::Display> {
    value.as_ref().map(|v| v as &dyn std::fmt::Display)
}

/// A member present only when `true`, shown as `true`.
fn flag(value: bool) -> Option<&'static dyn std::fmt::Display> {
    value.then_some(&true)
}

/// A count the store may not have answered: `unknown` when it did not.
fn count(n: Option<u64>) -> String {
    known(n)
}

/// A value the store may not have answered: `unknown` when it did not.
fn known<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "unknown".to_owned(), |v| v.to_string())
}

impl Text for api::RunStatus {
    fn text(&self) -> String {
        let api::RunStatus {
            run,
            workflow,
            revision,
            state,
            admitted_at,
            deadline_at,
            ended_at,
            outcome,
            output,
            failure,
            failure_path,
            refusal_code,
            payload_erased,
            review,
            waiting_for,
            moves,
        } = self;
        let mut out = String::new();
        line(&mut out, "run", Some(run));
        line(&mut out, "workflow", Some(workflow));
        line(&mut out, "revision", Some(revision));
        line(&mut out, "state", Some(state));
        line(&mut out, "admittedAt", Some(admitted_at));
        line(&mut out, "deadlineAt", Some(deadline_at));
        line(&mut out, "endedAt", if_set(ended_at));
        line(&mut out, "outcome", if_set(outcome));
        line(&mut out, "failure", if_set(failure));
        line(&mut out, "failurePath", if_set(failure_path));
        line(&mut out, "refusalCode", if_set(refusal_code));
        line(&mut out, "payloadErased", flag(*payload_erased));
        line(&mut out, "review", if_set(review));
        line(&mut out, "waitingFor", if_set(waiting_for));
        for m in moves {
            let _ = writeln!(
                out,
                "moved: {} {} {} -> {} {} (certificate {})",
                m.at, m.from_revision, m.from_step, m.to_revision, m.to_step, m.certificate
            );
        }
        // Compact JSON, members in the service's order.
        line(&mut out, "output", if_set(output));
        out
    }
}

impl Text for api::RunList {
    fn text(&self) -> String {
        let api::RunList { runs, next_cursor } = self;
        let mut out = String::new();
        if runs.is_empty() {
            out.push_str("no runs\n");
        }
        for r in runs {
            let review = r
                .review
                .as_ref()
                .map(|x| format!("  review={x}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{}  {}  {}  {}{review}",
                r.run, r.state, r.workflow, r.admitted_at
            );
        }
        line(&mut out, "nextCursor", if_set(next_cursor));
        out
    }
}

impl Text for api::Inspection {
    fn text(&self) -> String {
        let api::Inspection { status, steps } = self;
        let mut out = status.text();
        if status.payload_erased {
            out.push_str("steps: (erased by retention)\n");
            return out;
        }
        out.push_str("steps:\n");
        for step in steps {
            let api::InspectedStep {
                name,
                kind,
                effect,
                attempts,
                due_at,
                observations,
                restored,
                started_at,
                ended_at,
                wait_due_at,
                wait_ended,
                answers,
                waiting_for,
            } = step;
            let _ = write!(out, "  {name} ({kind})");
            let answered = (!answers.is_empty()).then(|| answers_text(answers));
            let waiting = waiting_for
                .as_ref()
                .map(|w| format!("{}:{} since {}", w.connection, w.limit, w.since));
            let facts: [(&str, Option<&dyn std::fmt::Display>); 11] = [
                ("effect", if_set(effect)),
                ("attempts", if_set(attempts)),
                ("dueAt", if_set(due_at)),
                ("observations", if_set(observations)),
                ("restored", flag(*restored)),
                ("startedAt", if_set(started_at)),
                ("endedAt", if_set(ended_at)),
                ("waitDueAt", if_set(wait_due_at)),
                ("waitEnded", if_set(wait_ended)),
                ("answers", if_set(&answered)),
                ("waitingFor", if_set(&waiting)),
            ];
            for (fact, value) in facts {
                if let Some(v) = value {
                    let _ = write!(out, " {fact}={v}");
                }
            }
            out.push('\n');
        }
        out
    }
}

/// A call's answers as `ATTEMPT:KIND[(CODE)]` joined by commas, attempt
/// `0` (a receipt lookup) written `lookup`: `1:retryable(503),2:success`.
pub(crate) fn answers_text(answers: &[api::InspectedAnswer]) -> String {
    let one = |a: &api::InspectedAnswer| {
        let attempt = match a.attempt {
            0 => "lookup".to_owned(),
            n => n.to_string(),
        };
        match &a.code {
            Some(code) => format!("{attempt}:{}({code})", a.kind),
            None => format!("{attempt}:{}", a.kind),
        }
    };
    answers.iter().map(one).collect::<Vec<_>>().join(",")
}

/// Every member flat, `state.` and `holds.` before the nested ones; a count
/// the store did not answer is `unknown`.
impl Text for api::Doctor {
    fn text(&self) -> String {
        let api::Doctor {
            version,
            activation_ready,
            recovery_only,
            state,
            holds,
            clock,
        } = self;
        let api::DoctorState {
            audit_ready,
            store_ready,
            uncertain,
            attention,
            live,
            review_required,
        } = state;
        let mut out = String::new();
        line(&mut out, "version", Some(&version.package));
        line(&mut out, "sourceRevision", Some(&version.source_revision));
        line(&mut out, "activationReady", Some(&known(*activation_ready)));
        line(&mut out, "recoveryOnly", Some(recovery_only));
        line(&mut out, "state.auditReady", Some(audit_ready));
        line(&mut out, "state.storeReady", Some(store_ready));
        line(&mut out, "state.uncertain", Some(&count(*uncertain)));
        line(&mut out, "state.attention", Some(&count(*attention)));
        line(&mut out, "state.live", Some(&count(*live)));
        line(
            &mut out,
            "state.reviewRequired",
            Some(&count(*review_required)),
        );
        out.push_str(&holds.text());
        let offset = clock
            .offset_seconds
            .map_or_else(|| "unknown".to_owned(), |o| format!("{o:.3}"));
        line(&mut out, "clock.offsetSeconds", Some(&offset));
        line(&mut out, "clock.outOfService", Some(&clock.out_of_service));
        out
    }
}

/// `holds.<member>: <value>`, as the hold routes and `doctor` answer them.
impl Text for api::Holds {
    fn text(&self) -> String {
        let api::Holds {
            restore,
            admission,
            execution_recovery_completed,
            restore_epoch,
        } = self;
        let mut out = String::new();
        line(&mut out, "holds.restore", Some(restore));
        line(&mut out, "holds.admission", Some(admission));
        line(
            &mut out,
            "holds.executionRecoveryCompleted",
            Some(execution_recovery_completed),
        );
        line(&mut out, "holds.restoreEpoch", Some(restore_epoch));
        out
    }
}

/// `Erased N runs ended before T; more remain` (or `none remain`).
impl Text for api::Retained {
    fn text(&self) -> String {
        let api::Retained {
            erased,
            more,
            before,
        } = self;
        format!(
            "Erased {erased} run{} ended before {before}; {}\n",
            if *erased == 1 { "" } else { "s" },
            if *more { "more remain" } else { "none remain" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status() -> Value {
        json!({
            "run": "r-1", "workflow": "follow-up", "revision": "sha256:9a",
            "state": "failed", "admittedAt": "2026-03-02T09:00:00Z",
            "deadlineAt": "2026-03-16T09:00:00Z", "endedAt": "2026-03-02T09:01:00Z",
            "outcome": null, "output": {"b": 1, "a": [true]}, "failure": "invalid-command",
            "failurePath": "/to", "review": "reconciled"
        })
    }

    #[test]
    fn status_prints_the_members_that_are_set_in_order() {
        assert_eq!(
            read::<api::RunStatus>(&status()).unwrap(),
            "run: r-1\nworkflow: follow-up\nrevision: sha256:9a\nstate: failed\n\
             admittedAt: 2026-03-02T09:00:00Z\ndeadlineAt: 2026-03-16T09:00:00Z\n\
             endedAt: 2026-03-02T09:01:00Z\nfailure: invalid-command\nfailurePath: /to\n\
             review: reconciled\noutput: {\"b\":1,\"a\":[true]}\n"
        );
    }

    #[test]
    fn list_lines_end_with_the_review_and_the_cursor_follows() {
        let mut other = status();
        other["run"] = json!("r-2");
        other["state"] = json!("running");
        other.as_object_mut().unwrap().remove("review");
        let page = json!({"runs": [status(), other], "nextCursor": "s2"});
        assert_eq!(
            read::<api::RunList>(&page).unwrap(),
            "r-1  failed  follow-up  2026-03-02T09:00:00Z  review=reconciled\n\
             r-2  running  follow-up  2026-03-02T09:00:00Z\nnextCursor: s2\n"
        );
        let empty = json!({"runs": [], "nextCursor": null});
        assert_eq!(read::<api::RunList>(&empty).unwrap(), "no runs\n");
    }

    #[test]
    fn inspect_shows_each_step_with_its_facts() {
        let answer = json!({"status": status(), "steps": [
            {"name": "due", "kind": "wait-until", "effect": null, "attempts": null,
             "dueAt": "2026-03-02T10:00:00Z", "observations": null},
            {"name": "send", "kind": "call", "effect": "unknown", "attempts": 1,
             "dueAt": null, "observations": null, "restored": true},
        ]});
        let text = read::<api::Inspection>(&answer).unwrap();
        assert!(
            text.ends_with(
                "output: {\"b\":1,\"a\":[true]}\nsteps:\n  due (wait-until) dueAt=2026-03-02T10:00:00Z\n  \
                 send (call) effect=unknown attempts=1 restored=true\n"
            ),
            "{text}"
        );
        let mut erased = status();
        erased["payloadErased"] = json!(true);
        erased["output"] = Value::Null;
        let answer = json!({"status": erased, "steps": []});
        let text = read::<api::Inspection>(&answer).unwrap();
        assert!(
            text.ends_with(
                "failurePath: /to\npayloadErased: true\nreview: reconciled\nsteps: (erased by retention)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn doctor_prints_every_member_flat_and_unknown_for_null() {
        let answer = json!({
            "version": {"package": "0.1.0", "sourceRevision": "unknown"},
            "activationReady": null, "recoveryOnly": false,
            "state": {"auditReady": true, "storeReady": false, "uncertain": null,
                      "attention": null, "live": null, "reviewRequired": null},
            "holds": {"restore": true, "admission": true,
                      "executionRecoveryCompleted": false, "restoreEpoch": 3},
            "clock": {"offsetSeconds": -300.0004, "outOfService": true}
        });
        assert_eq!(
            read::<api::Doctor>(&answer).unwrap(),
            "version: 0.1.0\nsourceRevision: unknown\n\
             activationReady: unknown\nrecoveryOnly: false\nstate.auditReady: true\n\
             state.storeReady: false\nstate.uncertain: unknown\nstate.attention: unknown\n\
             state.live: unknown\nstate.reviewRequired: unknown\nholds.restore: true\n\
             holds.admission: true\nholds.executionRecoveryCompleted: false\n\
             holds.restoreEpoch: 3\nclock.offsetSeconds: -300.000\nclock.outOfService: true\n"
        );
    }

    #[test]
    fn retained_counts_runs() {
        let one = json!({"erased": 1, "more": true, "before": "2026-07-01T00:00:00Z"});
        assert_eq!(
            read::<api::Retained>(&one).unwrap(),
            "Erased 1 run ended before 2026-07-01T00:00:00Z; more remain\n"
        );
    }

    #[test]
    fn an_answer_of_another_shape_is_not_read() {
        assert!(read::<api::RunStatus>(&json!({"ready": true})).is_err());
        assert!(read::<api::Holds>(&json!({"restore": "yes"})).is_err());
        assert!(read::<api::Doctor>(&json!([])).is_err());
    }
}
