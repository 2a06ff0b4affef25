//! The checks of a read scenarios document against the compiled Program
//! (SPEC §7): the header, then each case in order (its id, its admission
//! instant, the steps its replies, completions and recovery name, and what
//! it expects). Every finding is one located `coordinator.scenario.*`
//! diagnostic, collected in that order.

use std::collections::BTreeSet;

use coordinator_ir::{Program, StepKind};
use coordinator_source::{Diagnostic, YamlDocument};

use super::{
    Case, ExpectedOutcome, RecoveryAction, ScenarioFile, MAX_REPLIES, SCENARIOS_API_VERSION,
    SCENARIOS_KIND,
};
use crate::codes;

/// Collects the findings about one document against one Program.
pub(super) struct ScenarioChecks<'a> {
    doc: &'a YamlDocument,
    program: &'a Program,
    /// The findings so far, in the order they were made.
    pub(super) diags: Vec<Diagnostic>,
}

impl<'a> ScenarioChecks<'a> {
    pub(super) fn new(doc: &'a YamlDocument, program: &'a Program) -> Self {
        ScenarioChecks {
            doc,
            program,
            diags: Vec::new(),
        }
    }

    /// A finding located at the value at `ptr`.
    fn err(&mut self, code: &str, ptr: String, msg: String, next: &str) {
        self.diags
            .push(Diagnostic::error(code, self.doc.locate(&ptr), msg, next));
    }

    /// A finding about a member's name (a step named under `replies` or
    /// `completions`), located at its key, not at its value.
    fn err_at_key(&mut self, code: &str, ptr: String, msg: String, next: &str) {
        self.diags.push(Diagnostic::error(
            code,
            self.doc.locate_key(&ptr),
            msg,
            next,
        ));
    }

    /// The whole file: its header, then every case.
    pub(super) fn file(&mut self, file: &ScenarioFile) {
        self.header(file);
        let mut seen = BTreeSet::new();
        for (i, case) in file.cases.iter().enumerate() {
            let base = format!("/cases/{i}");
            if !seen.insert(case.id.as_str()) {
                self.err(
                    codes::SCENARIO_DUPLICATE_CASE,
                    format!("{base}/id"),
                    format!("case id `{}` is used twice", case.id),
                    "Give every case its own id.",
                );
            }
            self.case(case, &base);
        }
    }

    /// `apiVersion` and `kind`.
    fn header(&mut self, file: &ScenarioFile) {
        if file.api_version != SCENARIOS_API_VERSION {
            self.err(
                codes::SCENARIO_API_VERSION,
                "/apiVersion".into(),
                format!(
                    "`{}` is not a supported scenarios apiVersion",
                    file.api_version
                ),
                &format!("Use apiVersion: {SCENARIOS_API_VERSION}."),
            );
        }
        if file.kind != SCENARIOS_KIND {
            self.err(
                codes::SCENARIO_KIND,
                "/kind".into(),
                format!("`{}` is not the scenarios kind", file.kind),
                &format!("Use kind: {SCENARIOS_KIND}."),
            );
        }
    }

    /// One case at `base` (`/cases/N`), but for its id's uniqueness.
    fn case(&mut self, case: &Case, base: &str) {
        if coordinator_ir::instant::Instant::parse(&case.admitted_at).is_err() {
            self.err(
                codes::SCENARIO_TIMESTAMP,
                format!("{base}/admittedAt"),
                format!("`{}` is not an RFC 3339 instant", case.admitted_at),
                "Write an instant such as '2026-10-09T09:00:00Z'.",
            );
        }
        for (name, replies) in &case.replies {
            self.replies(base, name, replies.len());
        }
        for name in case.completions.keys() {
            self.completions(base, name);
        }
        for (name, action) in &case.recovery {
            self.recovery(base, name, *action);
        }
        self.expect(case, base);
    }

    /// A step named under `section`: its pointer and kind, or an
    /// `unknown-step` finding (with `hint`) and `None`.
    fn scripted_step(
        &mut self,
        base: &str,
        section: &str,
        name: &str,
        hint: &str,
    ) -> Option<(String, StepKind)> {
        let ptr = format!(
            "{base}/{section}/{}",
            coordinator_ir::pointer::escape_token(name)
        );
        let program = self.program;
        match program.step_id(name).and_then(|id| program.step(id)) {
            Some(step) => Some((ptr, step.op.kind())),
            None => {
                self.err_at_key(
                    codes::SCENARIO_UNKNOWN_STEP,
                    ptr,
                    format!("the workflow has no step `{name}`"),
                    hint,
                );
                None
            }
        }
    }

    /// `count` replies scripted for step `name`: it must be a call, and
    /// 1 to [`MAX_REPLIES`] of them.
    fn replies(&mut self, base: &str, name: &str, count: usize) {
        let Some((ptr, op)) =
            self.scripted_step(base, "replies", name, "Name a call step of the workflow.")
        else {
            return;
        };
        if op != StepKind::Call {
            self.err_at_key(
                codes::SCENARIO_NOT_A_CALL,
                ptr,
                format!("`{name}` is not a call step; only call steps receive replies"),
                "Move these replies to a call step, or script a completion for a wait-for step.",
            );
        } else if count == 0 || count > MAX_REPLIES {
            self.err(
                codes::SCENARIO_REPLY_COUNT,
                ptr,
                format!(
                    "{count} replies are scripted for `{name}`; 1 to {MAX_REPLIES} are accepted"
                ),
                "Script between one and eight replies.",
            );
        }
    }

    /// A completion scripted for step `name`: it must be a wait-for.
    fn completions(&mut self, base: &str, name: &str) {
        let Some((ptr, op)) = self.scripted_step(
            base,
            "completions",
            name,
            "Name a wait-for step of the workflow.",
        ) else {
            return;
        };
        if op != StepKind::WaitFor {
            self.err_at_key(
                codes::SCENARIO_NOT_A_WAIT_FOR,
                ptr,
                format!("`{name}` is not a wait-for step; only wait-for steps have completions"),
                "Script completions for wait-for steps only.",
            );
        }
    }

    /// A recovery `action` for step `name`: it must be a call whose
    /// operation the action can settle.
    fn recovery(&mut self, base: &str, name: &str, action: RecoveryAction) {
        let Some((ptr, _)) =
            self.scripted_step(base, "recovery", name, "Name a call step of the workflow.")
        else {
            return;
        };
        match coordinator_vm::recovery_support(self.program, name) {
            Some(support) => {
                let evaluation = !support.retry_same;
                let receipt = support.reconcile;
                if evaluation {
                    self.err(
                        codes::SCENARIO_RECOVERY_UNSUPPORTED,
                        ptr,
                        format!("`{name}` is an evaluation: one that may have been sent is never sent again or looked up, so no recovery applies"),
                        "Remove this recovery entry; an unknown evaluation answer leaves the run uncertain.",
                    );
                } else if action == RecoveryAction::Reconcile && !receipt {
                    self.err(
                        codes::SCENARIO_RECONCILE_UNSUPPORTED,
                        ptr,
                        format!("`{name}` calls an operation without receipts; reconcile cannot settle it"),
                        "Use retry-same, or leave the call uncertain.",
                    );
                }
            }
            _ => self.err_at_key(
                codes::SCENARIO_NOT_A_CALL,
                ptr,
                format!("`{name}` is not a call step; recovery applies to calls"),
                "Name a call step.",
            ),
        }
    }

    /// The steps of `expect.path` and the outcome of `expect.outcome` must
    /// be the workflow's.
    fn expect(&mut self, case: &Case, base: &str) {
        for (j, name) in case.expect.path.iter().enumerate() {
            if self.program.step_id(name).is_none() {
                self.err(
                    codes::SCENARIO_UNKNOWN_STEP,
                    format!("{base}/expect/path/{j}"),
                    format!("the workflow has no step `{name}`"),
                    "List step names of the workflow.",
                );
            }
        }
        if let ExpectedOutcome::Named { value } = &case.expect.outcome {
            if !self.program.outcomes.iter().any(|o| &o.name == value) {
                self.err(
                    codes::SCENARIO_UNKNOWN_OUTCOME,
                    format!("{base}/expect/outcome/value"),
                    format!("the workflow declares no outcome `{value}`"),
                    "Name a declared outcome.",
                );
            }
        }
    }
}
