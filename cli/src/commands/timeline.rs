//! The run's timeline as `graph --run` and the console's Run page show it
//! (docs/graph.md "The run's timeline"): where the run stands at each
//! visited step ([`Standing`]); per visited step when it started and ended,
//! its answers and its wait's due time and end, read from the run's
//! inspection only; the edges the run took (the others are drawn faint);
//! and the time its waits took against the run's deadline; and the run's
//! moves to another revision (when, from which revision and step to which,
//! under which certificate: [`move_line`]), on the wait it moved at.

use coordinator_api as api;
use coordinator_compiler::explain_data::StepKind;
use coordinator_ir::instant;

/// Where a run stands at a step (`--run`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The run passed the step.
    Done,
    /// The run is at the step.
    Current,
    /// The run waits at the step (a wait-until or wait-for).
    Waiting,
    /// The step's effect is unknown (an answer was lost, or the restore
    /// hold held its prepared command back): an operator reviews it.
    UnknownEffect,
    /// The run failed at the step.
    Failed,
    /// The run ended at the step without an outcome (cancelled or expired).
    Stopped,
}

impl Standing {
    /// The name used in the drawing (class, `data-status`, legend).
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Done => "done",
            Standing::Current => "current",
            Standing::Waiting => "waiting",
            Standing::UnknownEffect => "unknown-effect",
            Standing::Failed => "failed",
            Standing::Stopped => "stopped",
        }
    }

    /// The fill colour.
    pub fn colour(self) -> &'static str {
        match self {
            Standing::Done => "#c8e6c9",
            Standing::Current => "#90caf9",
            Standing::Waiting => "#fff59d",
            Standing::UnknownEffect => "#ffb74d",
            Standing::Failed => "#ef9a9a",
            Standing::Stopped => "#e0e0e0",
        }
    }

    /// Every standing, in the legend's order.
    pub const ALL: [Standing; 6] = [
        Standing::Done,
        Standing::Current,
        Standing::Waiting,
        Standing::UnknownEffect,
        Standing::Failed,
        Standing::Stopped,
    ];
}

/// Where the run of `inspection` stands at each step it visited, in the
/// order visited. The last visited step is where the run is (or ended); a
/// step whose effect is `unknown` (or that the restore hold held back) is
/// [`Standing::UnknownEffect`] wherever it is.
pub fn standings(inspection: &api::Inspection) -> Vec<(String, Standing)> {
    let last = inspection.steps.len().checked_sub(1);
    inspection
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let standing = if step.effect.as_deref() == Some("unknown") || step.restored {
                Standing::UnknownEffect
            } else if Some(i) != last {
                Standing::Done
            } else {
                match inspection.status.state.as_str() {
                    "finished" => Standing::Done,
                    "failed" => Standing::Failed,
                    "running" | "attention" | "cancel-requested" => {
                        if step.kind.parse().is_ok_and(StepKind::is_wait) {
                            Standing::Waiting
                        } else {
                            Standing::Current
                        }
                    }
                    _ => Standing::Stopped,
                }
            };
            (step.name.clone(), standing)
        })
        .collect()
}

/// What a drawing shows of a run (`graph --run`, the console's Run page).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunView {
    /// Whether a run is drawn at all: without one nothing is faint.
    pub run: bool,
    /// Where the run stands at each step it visited ([`standings`]).
    pub standings: Vec<(String, Standing)>,
    /// The timeline lines added under each visited step's label.
    pub details: Vec<(String, Vec<String>)>,
    /// The edges the run took, `(from, to)`: consecutive visited steps.
    pub taken: Vec<(String, String)>,
    /// One line on the run: admitted, deadline, time waited.
    pub summary: Option<String>,
}

impl RunView {
    /// The view of the run `inspection` describes. A wait the run moved at
    /// ([`api::RunStatus::moves`]) carries its move lines ([`move_line`]);
    /// when the new revision names it otherwise, it is also drawn under
    /// that name (its standing, lines and edges), so the drawing of either
    /// revision shows it.
    pub fn of(inspection: &api::Inspection) -> RunView {
        let steps = &inspection.steps;
        let moves = &inspection.status.moves;
        let mut view = RunView {
            run: true,
            standings: standings(inspection),
            details: steps
                .iter()
                .map(|s| {
                    let mut lines = step_lines(s);
                    lines.extend(moves_at(moves, &s.name).map(move_line));
                    (s.name.clone(), lines)
                })
                .collect(),
            taken: steps
                .windows(2)
                .map(|w| (w[0].name.clone(), w[1].name.clone()))
                .collect(),
            summary: Some(summary(inspection)),
        };
        for m in moves.iter().filter(|m| m.from_step != m.to_step) {
            view.alias(&m.from_step, &m.to_step);
        }
        view
    }

    /// Draws what the view holds of step `from` under `to` as well
    /// (unless `to` was visited itself): standing, lines and edges.
    fn alias(&mut self, from: &str, to: &str) {
        if self.standing(to).is_some() {
            return;
        }
        if let Some(standing) = self.standing(from) {
            self.standings.push((to.to_owned(), standing));
        }
        let lines = self.details(from).to_vec();
        self.details.push((to.to_owned(), lines));
        let renamed: Vec<(String, String)> = self
            .taken
            .iter()
            .filter(|(f, t)| f == from || t == from)
            .map(|(f, t)| {
                let name = |s: &String| if s == from { to.to_owned() } else { s.clone() };
                (name(f), name(t))
            })
            .collect();
        self.taken.extend(renamed);
    }

    /// Where the run stands at `step`, if it visited it.
    pub fn standing(&self, step: &str) -> Option<Standing> {
        self.standings
            .iter()
            .find(|(s, _)| s == step)
            .map(|(_, c)| *c)
    }

    /// The timeline lines of `step` (none when not visited).
    pub fn details(&self, step: &str) -> &[String] {
        self.details
            .iter()
            .find(|(s, _)| s == step)
            .map_or(&[], |(_, l)| l.as_slice())
    }

    /// A step the run did not visit, drawn faint.
    pub fn faint_step(&self, step: &str) -> bool {
        self.run && self.standing(step).is_none()
    }

    /// An edge the run did not take, drawn faint.
    pub fn faint_edge(&self, from: &str, to: &str) -> bool {
        self.run && !self.taken.iter().any(|(f, t)| f == from && t == to)
    }
}

/// The time of day of an RFC 3339 instant (`HH:MM:SS`, UTC), or the
/// whole text when it is not of the form the service writes.
pub fn clock_time(at: &str) -> &str {
    at.get(11..19).unwrap_or(at)
}

/// Seconds as a short duration: `42s`, `3m 20s`, `2h 5m`, `3d 4h`.
pub fn duration(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// Seconds from `a` to `b` (RFC 3339), if both read.
pub fn seconds_between(a: &str, b: &str) -> Option<i64> {
    instant::seconds_between(a, b).ok()
}

/// How long the step took (or has taken so far: `None` while at it).
pub fn step_seconds(step: &api::InspectedStep) -> Option<i64> {
    seconds_between(step.started_at.as_deref()?, step.ended_at.as_deref()?)
}

/// One answer as `#1 retryable 503 at 12:00:02` (`lookup` for a receipt
/// lookup).
pub fn answer_line(a: &api::InspectedAnswer) -> String {
    let which = match a.attempt {
        0 => "lookup".to_owned(),
        n => format!("#{n}"),
    };
    let code = a
        .code
        .as_deref()
        .map(|c| format!(" {c}"))
        .unwrap_or_default();
    format!("{which} {}{code} at {}", a.kind, clock_time(&a.at))
}

/// The step's wait: `due 12:00:05, woke` (`waiting` while it waits).
pub fn wait_line(step: &api::InspectedStep) -> Option<String> {
    let due = step.wait_due_at.as_deref().or(step.due_at.as_deref())?;
    let end = step.wait_ended.as_deref().unwrap_or("waiting");
    Some(format!("due {}, {end}", clock_time(due)))
}

/// A revision or certificate digest shortened for a label:
/// `sha256:` and the first 12 hex digits (the whole text when shorter).
pub fn short_digest(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

/// One move as `moved 12:00:05 from sha256:3f0c… due to sha256:9a41…
/// due-b (certificate sha256:77aa…)`: when, the revision and wait step it
/// left, the revision and step it waits at since, the certificate's
/// digest (each digest shortened, [`short_digest`]).
pub fn move_line(m: &api::RunMoveRecord) -> String {
    format!(
        "moved {} from {}… {} to {}… {} (certificate {}…)",
        clock_time(&m.at),
        short_digest(&m.from_revision),
        m.from_step,
        short_digest(&m.to_revision),
        m.to_step,
        short_digest(&m.certificate)
    )
}

/// The moves of `moves` made while the run waited at `step` (the name of
/// the revision it left, as its path keeps it).
pub fn moves_at<'a>(
    moves: &'a [api::RunMoveRecord],
    step: &'a str,
) -> impl Iterator<Item = &'a api::RunMoveRecord> {
    moves.iter().filter(move |m| m.from_step == step)
}

/// The lines a visited step's label gains: its times, its wait, its
/// answers.
pub fn step_lines(step: &api::InspectedStep) -> Vec<String> {
    let mut lines = Vec::new();
    match (&step.started_at, &step.ended_at) {
        (Some(s), Some(e)) => lines.push(format!(
            "{} to {} ({})",
            clock_time(s),
            clock_time(e),
            duration(seconds_between(s, e).unwrap_or(0))
        )),
        (Some(s), None) => lines.push(format!("since {}", clock_time(s))),
        (None, Some(e)) => lines.push(format!("ended {}", clock_time(e))),
        (None, None) => {}
    }
    lines.extend(wait_line(step));
    lines.extend(step.answers.iter().map(answer_line));
    lines
}

/// Seconds the run spent in its waits that ended (wait-until and
/// wait-for steps with both times).
pub fn waited_seconds(inspection: &api::Inspection) -> i64 {
    inspection
        .steps
        .iter()
        .filter(|s| s.kind == "wait-until" || s.kind == "wait-for")
        .filter_map(step_seconds)
        .sum()
}

/// `run R: admitted A, deadline D (window W); waited X (P% of the
/// deadline)`, P to a tenth, rounded down; then, for a run that moved,
/// `; moved N times, last at T to REVISION` (the deadline is kept by a
/// move).
pub fn summary(inspection: &api::Inspection) -> String {
    let st = &inspection.status;
    let window = seconds_between(&st.admitted_at, &st.deadline_at).unwrap_or(0);
    let waited = waited_seconds(inspection);
    // Tenths of a percent, rounded down.
    let tenths = if window > 0 {
        waited.saturating_mul(1000) / window
    } else {
        0
    };
    let share = format!("{}.{}", tenths / 10, tenths % 10);
    let moved = match st.moves.last() {
        None => String::new(),
        Some(last) => format!(
            "; moved {} {} at {} to {}",
            st.moves.len(),
            if st.moves.len() == 1 {
                "time, last"
            } else {
                "times, last"
            },
            last.at,
            last.to_revision
        ),
    };
    format!(
        "run {}: admitted {}, deadline {} ({}); waited {} ({share}% of the deadline){moved}",
        st.run,
        st.admitted_at,
        st.deadline_at,
        duration(window),
        duration(waited)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inspection() -> api::Inspection {
        serde_json::from_value(json!({
            "status": {
                "run": "r1", "workflow": "w", "revision": "sha256:00", "state": "finished",
                "admittedAt": "2026-01-01T00:00:00Z", "deadlineAt": "2026-01-01T01:40:00Z",
                "endedAt": "2026-01-01T00:10:05Z", "outcome": "sent", "output": null,
                "failure": null, "failurePath": null
            },
            "steps": [
                {"name": "due", "kind": "wait-until", "effect": null, "attempts": null,
                 "dueAt": null, "observations": null,
                 "startedAt": "2026-01-01T00:00:00Z", "endedAt": "2026-01-01T00:10:00Z",
                 "waitDueAt": "2026-01-01T00:10:00Z", "waitEnded": "woke"},
                {"name": "notify", "kind": "call", "effect": "accepted", "attempts": 2,
                 "dueAt": null, "observations": null,
                 "startedAt": "2026-01-01T00:10:00Z", "endedAt": "2026-01-01T00:10:05Z",
                 "answers": [
                    {"at": "2026-01-01T00:10:01Z", "attempt": 1, "kind": "retryable", "code": "503"},
                    {"at": "2026-01-01T00:10:05Z", "attempt": 2, "kind": "success"}]},
                {"name": "sent", "kind": "finish", "effect": null, "attempts": null,
                 "dueAt": null, "observations": null,
                 "startedAt": "2026-01-01T00:10:05Z", "endedAt": "2026-01-01T00:10:05Z"}
            ]
        }))
        .expect("an inspection")
    }

    fn in_state(state: &str, steps: serde_json::Value) -> api::Inspection {
        serde_json::from_value(json!({
            "status": {
                "run": "r1", "workflow": "w", "revision": "sha256:00", "state": state,
                "admittedAt": "2026-01-01T00:00:00Z", "deadlineAt": "2026-01-02T00:00:00Z",
                "endedAt": null, "outcome": null, "output": null, "failure": null,
                "failurePath": null
            },
            "steps": steps
        }))
        .expect("an inspection")
    }

    fn step(name: &str, kind: &str, effect: Option<&str>) -> serde_json::Value {
        json!({"name": name, "kind": kind, "effect": effect, "attempts": null,
               "dueAt": null, "observations": null})
    }

    #[test]
    fn a_running_run_is_current_or_waiting_at_its_last_step() {
        let i = in_state(
            "running",
            json!([
                step("a", "call", Some("accepted")),
                step("b", "wait-for", None)
            ]),
        );
        assert_eq!(
            standings(&i),
            vec![
                ("a".into(), Standing::Done),
                ("b".into(), Standing::Waiting)
            ]
        );
        let i = in_state("attention", json!([step("a", "call", Some("unknown"))]));
        assert_eq!(standings(&i), vec![("a".into(), Standing::UnknownEffect)]);
        let i = in_state("running", json!([step("a", "call", None)]));
        assert_eq!(standings(&i), vec![("a".into(), Standing::Current)]);
    }

    #[test]
    fn an_ended_run_is_done_failed_or_stopped_at_its_last_step() {
        let steps = json!([step("a", "call", None), step("b", "finish", None)]);
        let done = standings(&in_state("finished", steps.clone()));
        assert!(done.iter().all(|(_, s)| *s == Standing::Done));
        let failed = standings(&in_state("failed", steps.clone()));
        assert_eq!(failed.last().map(|x| x.1), Some(Standing::Failed));
        let expired = standings(&in_state("expired", steps));
        assert_eq!(expired.last().map(|x| x.1), Some(Standing::Stopped));
        assert_eq!(expired.first().map(|x| x.1), Some(Standing::Done));
    }

    #[test]
    fn a_step_reads_its_times_wait_and_answers() {
        let i = inspection();
        assert_eq!(
            step_lines(&i.steps[0]),
            ["00:00:00 to 00:10:00 (10m 0s)", "due 00:10:00, woke"]
        );
        assert_eq!(
            step_lines(&i.steps[1]),
            [
                "00:10:00 to 00:10:05 (5s)",
                "#1 retryable 503 at 00:10:01",
                "#2 success at 00:10:05"
            ]
        );
    }

    #[test]
    fn the_summary_weighs_the_waits_against_the_deadline() {
        assert_eq!(waited_seconds(&inspection()), 600);
        assert_eq!(
            summary(&inspection()),
            "run r1: admitted 2026-01-01T00:00:00Z, deadline 2026-01-01T01:40:00Z (1h 40m); waited 10m 0s (10.0% of the deadline)"
        );
    }

    /// A run waiting at `due` of revision A moved to B, where the wait
    /// is `due-b`; it went on to `notify` on B.
    fn moved() -> api::Inspection {
        let mut i = inspection();
        i.status.moves = vec![api::RunMoveRecord {
            at: "2026-01-01T00:05:00Z".into(),
            from_revision: format!("sha256:{}", "a".repeat(64)),
            to_revision: format!("sha256:{}", "b".repeat(64)),
            from_step: "due".into(),
            to_step: "due-b".into(),
            certificate: format!("sha256:{}", "c".repeat(64)),
        }];
        i
    }

    #[test]
    fn a_move_is_on_the_wait_it_left_under_both_names_and_in_the_summary() {
        let i = moved();
        let line = "moved 00:05:00 from sha256:aaaaaaaaaaaa… due to sha256:bbbbbbbbbbbb… due-b (certificate sha256:cccccccccccc…)";
        assert_eq!(move_line(&i.status.moves[0]), line);
        let v = RunView::of(&i);
        assert_eq!(v.details("due").last().map(String::as_str), Some(line));
        assert_eq!(v.details("due-b"), v.details("due"));
        assert_eq!(v.details("notify").len(), 3, "no move line elsewhere");
        assert_eq!(v.standing("due-b"), Some(Standing::Done));
        assert!(!v.faint_edge("due-b", "notify") && !v.faint_edge("due", "notify"));
        assert!(!v.faint_step("due-b"));
        assert!(
            summary(&i).ends_with(&format!(
                "(10.0% of the deadline); moved 1 time, last at 2026-01-01T00:05:00Z to sha256:{}",
                "b".repeat(64)
            )),
            "{}",
            summary(&i)
        );
        // A move that keeps the step's name adds no second name.
        let mut same = moved();
        same.status.moves[0].to_step = "due".into();
        let v = RunView::of(&same);
        assert_eq!(v.standings.len(), 3);
        assert_eq!(v.details("due").len(), 3);
    }

    #[test]
    fn untaken_steps_and_edges_are_faint_only_under_a_run() {
        let v = RunView::of(&inspection());
        assert!(!v.faint_step("notify") && v.faint_step("skipped"));
        assert!(!v.faint_edge("due", "notify") && v.faint_edge("due", "sent"));
        let plain = RunView::default();
        assert!(!plain.faint_step("skipped") && !plain.faint_edge("due", "sent"));
        assert_eq!(duration(3 * 86_400 + 4 * 3600 + 5), "3d 4h");
    }
}
