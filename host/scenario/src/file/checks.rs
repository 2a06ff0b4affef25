//! The checks of a read scenarios document against the compiled Program
//! (SPEC §7): the header, then each case in order (its id, its admission
//! instant, its move, the steps its replies, completions and recovery
//! name, and what it expects). Every finding is one located
//! `coordinator.scenario.*` diagnostic, collected in that order. A case
//! that moves may name the steps and outcomes of either revision.

use std::collections::BTreeSet;

use coordinator_ir::{Program, StepKind};
use coordinator_source::{Diagnostic, YamlDocument};

use super::{
    Case, CaseMove, ExpectedOutcome, RecoveryAction, ScenarioFile, MAX_REPLIES,
    SCENARIOS_API_VERSION, SCENARIOS_KIND,
};
use crate::codes;
use crate::targets::MoveTargets;

/// Collects the findings about one document against one Program.
pub(super) struct ScenarioChecks<'a> {
    doc: &'a YamlDocument,
    program: &'a Program,
    targets: &'a MoveTargets,
    /// The Program the case being checked moves to, once its move checked.
    moved_to: Option<&'a Program>,
    /// The findings so far, in the order they were made.
    pub(super) diags: Vec<Diagnostic>,
}

impl<'a> ScenarioChecks<'a> {
    pub(super) fn new(
        doc: &'a YamlDocument,
        program: &'a Program,
        targets: &'a MoveTargets,
    ) -> Self {
        ScenarioChecks {
            doc,
            program,
            targets,
            moved_to: None,
            diags: Vec::new(),
        }
    }

    /// The Programs a case's names are looked up in: this workflow's, then
    /// the one it moves to.
    fn programs(&self) -> impl Iterator<Item = &'a Program> {
        std::iter::once(self.program).chain(self.moved_to)
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
        self.moved_to = None;
        if let Some(m) = &case.move_to {
            self.moved_to = self.case_move(m, base);
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

    /// A step named under `section`: its pointer and its kinds (in this
    /// workflow, then in the one the case moves to), or an `unknown-step`
    /// finding (with `hint`) and `None`.
    fn scripted_step(
        &mut self,
        base: &str,
        section: &str,
        name: &str,
        hint: &str,
    ) -> Option<(String, Vec<StepKind>)> {
        let ptr = format!(
            "{base}/{section}/{}",
            coordinator_ir::pointer::escape_token(name)
        );
        let kinds: Vec<StepKind> = self
            .programs()
            .filter_map(|p| p.step_id(name).and_then(|id| p.step(id)))
            .map(|step| step.op.kind())
            .collect();
        if kinds.is_empty() {
            self.err_at_key(
                codes::SCENARIO_UNKNOWN_STEP,
                ptr,
                format!("the workflow has no step `{name}`"),
                hint,
            );
            return None;
        }
        Some((ptr, kinds))
    }

    /// The move of a case at `base`: its step must be a wait of this
    /// workflow, its project loaded, the same workflow, and a target the
    /// VM's move takes. Returns the Program it moves to when it was loaded.
    fn case_move(&mut self, m: &CaseMove, base: &str) -> Option<&'a Program> {
        let program = self.program;
        let step_ptr = format!("{base}/move/step");
        if program.step_id(&m.step).is_none() {
            self.err(
                codes::SCENARIO_UNKNOWN_STEP,
                step_ptr.clone(),
                format!("the workflow has no step `{}`", m.step),
                "Name the wait-until or wait-for step where the run moves.",
            );
        } else if let Err(refused) = coordinator_vm::move_source(program, &m.step) {
            self.err(
                codes::SCENARIO_MOVE_NOT_A_WAIT,
                step_ptr.clone(),
                format!("a run moves only while it waits: {refused}"),
                "Name a wait-until or wait-for step of the workflow.",
            );
        }
        let project_ptr = format!("{base}/move/project");
        let to = match self.targets.get(&m.project) {
            Some(Ok(vm)) => vm.program(),
            Some(Err(reason)) => {
                self.err(
                    codes::SCENARIO_MOVE_PROJECT,
                    project_ptr,
                    format!("the project `{}` cannot be moved to: {reason}", m.project),
                    "Point move.project at a project directory (relative to this file's directory) that `coordinatorctl check` accepts.",
                );
                return None;
            }
            None => {
                self.err(
                    codes::SCENARIO_MOVE_PROJECT,
                    project_ptr,
                    format!("the project `{}` was not compiled for this run", m.project),
                    "Run the case with `coordinatorctl test`, which compiles the projects the cases move to.",
                );
                return None;
            }
        };
        let target = m.vm_target(program, to);
        match coordinator_vm::check_move_target(program, to, &target) {
            Ok(()) => {}
            // Found above, without the project.
            Err(coordinator_vm::MoveRefused::NotAWait { .. }) => {}
            Err(refused @ coordinator_vm::MoveRefused::WorkflowDiffers { .. }) => self.err(
                codes::SCENARIO_MOVE_WORKFLOW,
                project_ptr,
                format!("a run moves only within its workflow: {refused}"),
                "Point move.project at a revision of this workflow (the same project.id).",
            ),
            Err(refused) => {
                let at = if m.to.is_some() { "to" } else { "step" };
                self.err(
                    codes::SCENARIO_MOVE_REFUSED,
                    format!("{base}/move/{at}"),
                    format!("the move from `{}` to `{}` is refused ({}): {refused}", m.step, target.to_step, refused.code()),
                    "Move the run to a step of the same kind and wait contract (move.to names a renamed wait), or change the new revision.",
                );
            }
        }
        Some(to)
    }

    /// `count` replies scripted for step `name`: it must be a call, and
    /// 1 to [`MAX_REPLIES`] of them.
    fn replies(&mut self, base: &str, name: &str, count: usize) {
        let Some((ptr, op)) =
            self.scripted_step(base, "replies", name, "Name a call step of the workflow.")
        else {
            return;
        };
        if !op.contains(&StepKind::Call) {
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
        if !op.contains(&StepKind::WaitFor) {
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
        let support = self
            .programs()
            .filter_map(|p| coordinator_vm::recovery_support(p, name))
            .reduce(|a, b| coordinator_vm::RecoverySupport {
                holds: a.holds && b.holds,
                retry_same: a.retry_same && b.retry_same,
                reconcile: a.reconcile && b.reconcile,
            });
        match support {
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
            if !self.programs().any(|p| p.step_id(name).is_some()) {
                self.err(
                    codes::SCENARIO_UNKNOWN_STEP,
                    format!("{base}/expect/path/{j}"),
                    format!("the workflow has no step `{name}`"),
                    "List step names of the workflow.",
                );
            }
        }
        if let ExpectedOutcome::Named { value } = &case.expect.outcome {
            if !self
                .programs()
                .any(|p| p.outcomes.iter().any(|o| &o.name == value))
            {
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
