//! The step checks of a project run again from a state another revision
//! produced: a run that waited at a step of revision A and resumes at step
//! `step` of this revision (B) with A's run input and the outputs of the
//! steps A completed that B keeps ([`crate::moves`]).
//!
//! Nothing here types a mapping: the checker's own step checks
//! (`steps.rs`, `mapping.rs`) run unchanged over every step after `step`,
//! with three things given instead of derived from `workflow.start` — the
//! starting step, the steps completed there ([`super::graph::Graph::must_complete_from`])
//! and the input schema. So a move is held to exactly the rules `check`
//! holds a start to.

use coordinator_source::Diagnostic;
use serde_json::Value;

use super::{Checker, Facts};
use crate::schema::Sch;
use crate::Analysis;

/// How messages name a moved run's input schema.
const MOVED_INPUT_LABEL: &str = "the input schema of the revision the run was admitted under";

/// Where, and with what, a run resumes in this project.
pub(crate) struct Resume<'r> {
    /// The step the run resumes at. Its own mappings are not evaluated
    /// again (a wait's due instant and timeout are kept); every step
    /// reachable after it is checked.
    pub step: &'r str,
    /// The steps completed before it, each with the outputs it may have.
    pub completed: Facts,
    /// The run input's schema as a self-contained document (another
    /// revision's `Program::schemas` entry); `None` for this project's own
    /// workflow input schema.
    pub input: Option<Value>,
}

/// The diagnostics of the step checks of every step reachable after
/// `resume.step`, the run's state given by `resume`. The project's own
/// resolution (types, aliases, Functions) is done again and its findings
/// dropped: a project that compiled has none, and they do not depend on the
/// state. A Function input omitted under `arguments` keeps the binding the
/// project's own check made (`analysis.bindings`): the Program binds it by
/// its type once, from `workflow.start`, and a moved run runs that
/// binding. The result is unsorted.
pub(crate) fn check_resumed(analysis: &Analysis, resume: &Resume) -> Vec<Diagnostic> {
    let mut checker = Checker::new(&analysis.doc, &analysis.project, analysis.script.clone());
    checker.resolve_all();
    checker.diags.clear();
    if let Some(input) = &resume.input {
        checker.out.input = Some(Sch::new(input.clone()));
        checker.input_label = MOVED_INPUT_LABEL;
    }
    checker.start = resume.step.to_owned();
    checker.own_bindings = Some(&analysis.bindings);
    let facts = checker
        .graph
        .must_complete_from(resume.step, resume.completed.clone());
    let project = checker.p;
    for name in checker.graph.reachable(resume.step) {
        if name == resume.step {
            continue;
        }
        if let Some(step) = project.workflow.steps.get(&name) {
            checker.check_step(&name, step, facts.get(&name));
        }
    }
    checker.diags
}
