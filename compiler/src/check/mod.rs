//! Resolution and checks (SPEC §2.3), one file per concern:
//!
//! - `resolve.rs`: types, operation aliases, outcomes and Functions, each
//!   resolved once to schemas ([`Sch`]);
//! - `graph.rs`: the step graph, built once, its checks (references,
//!   reachability, cycles, finishes, outcomes used) and the must-dataflow
//!   of completed steps;
//! - `steps.rs`: what each step and trigger requires beyond the graph
//!   (choose labels, wait-for completion and timeout, finish outputs);
//! - `mapping.rs`: the typing of mappings (paths, step outputs on every
//!   route, Function calls and their implicit bindings) and their fit;
//! - `resume.rs`: the same step checks run again from a state another
//!   revision produced (a run moved to this revision at one of its steps):
//!   the starting step, the completed steps and the input schema given.
//!
//! This file holds the `Checker` and what every part shares. Checking
//! collects every independent finding and never stops at the first.

use std::collections::{BTreeMap, HashMap};

use coordinator_ir::catalogue::OperationDescriptor;
use coordinator_ir::name::is_name;
use coordinator_ir::pointer::escape_token;
use coordinator_source::{Diagnostic, Located, YamlDocument};

use crate::ast::*;
use crate::codes;
use crate::functions::ScriptFn;
use crate::schema::{Sch, Ty};

mod graph;
mod mapping;
mod resolve;
mod resume;
mod steps;

pub(crate) use graph::{Facts, Graph};
pub(crate) use resume::{check_resumed, Resume};

/// Limits of SPEC §2.
pub const MAX_STEPS: usize = 64;
/// Most outcomes.
pub const MAX_OUTCOMES: usize = 64;
/// Most operation aliases.
pub const MAX_ALIASES: usize = 16;
/// Most Functions.
pub const MAX_FUNCTIONS: usize = 128;
/// Most cases per `choose`.
pub const MAX_CASES: usize = 32;
/// Most members per `fields` mapping.
pub const MAX_FIELDS: usize = 64;
/// Most inputs per Function.
pub const MAX_FUNCTION_INPUTS: usize = 16;
/// Largest run deadline, seconds.
pub const MAX_DEADLINE_SECONDS: u64 = 31_536_000;

/// The repair line of every "does not fit" error.
const MISMATCH_NEXT: &str =
    "Map a value of the type the schema declares there, or change the declared type.";

/// A resolved operation alias.
pub(crate) struct Alias {
    /// The host operation it uses, from the catalogue.
    pub desc: OperationDescriptor,
    /// The operation's input schema.
    pub input: Sch,
    /// The operation's output schema, narrowed by the alias's `output`.
    pub output: Sch,
    /// The completion the operation exposes (name, schema), if any.
    pub completion: Option<(String, Sch)>,
    /// The BReg action `breg.invoke-action/v1` invokes.
    pub action: Option<String>,
}

/// A resolved Function.
pub(crate) struct Func {
    /// The Rhai function in `functions.rhai`.
    pub entrypoint: String,
    /// Declared inputs in declaration order, with their schema when resolved.
    pub inputs: Vec<(String, TypeRef, Option<Sch>)>,
    /// The declared output schema, when resolved.
    pub output: Option<Sch>,
    /// The entrypoint's parameters in order, when it was found and matches.
    pub params: Option<Vec<String>>,
}

/// How an omitted Function argument was bound (SPEC §2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// The run input (the input is declared with the workflow input's type).
    Input,
    /// The output of this call step (declared `operationOutput` of its alias).
    Step(String),
}

/// Mapping pointer -> the implicit bindings of the Function called there
/// (input name, binding), in the Function's input order.
pub(crate) type Bindings = HashMap<String, Vec<(String, Binding)>>;

/// Which output of a step a `type: step` mapping reads on a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadRoute {
    /// A call's output on its `next` route.
    Success,
    /// A call's `{refusalCode}` on its `onDeclaredRefusal` route.
    DeclaredRefusal,
    /// The completion a wait-for step received.
    Completion,
}

/// What one mapping that reads a value (`input`, `event`, `step`) reads, as
/// the route-sensitive check typed it: one entry per route output for a
/// `step` mapping (more than one where routes join), one for the others.
pub(crate) struct Read {
    /// The step output read (`None` for `input` and `event`).
    pub route: Option<ReadRoute>,
    /// The type of the value read (after its `path`).
    pub ty: Ty,
}

/// Everything the later phases (lowering, explain) need from checking.
pub(crate) struct Checked {
    /// Resolved operation aliases by name.
    pub aliases: BTreeMap<String, Alias>,
    /// Resolved Functions by name.
    pub functions: BTreeMap<String, Func>,
    /// The workflow input schema, when resolved.
    pub input: Option<Sch>,
    /// Resolved outcome schemas by name.
    pub outcomes: BTreeMap<String, Sch>,
    /// Mapping pointer -> implicit bindings, in the Function's input order.
    pub bindings: Bindings,
    /// Mapping pointer -> what the mapping reads, for `input`, `event` and
    /// `step` mappings whose type the check computed (explain's data).
    pub reads: HashMap<String, Vec<Read>>,
}

/// Runs every check of a project once ([`Checker::run`]).
pub(crate) struct Checker<'a> {
    doc: &'a YamlDocument,
    p: &'a ProjectFile,
    pub diags: Vec<Diagnostic>,
    types: BTreeMap<String, Option<Sch>>,
    out: Checked,
    script: Option<Vec<ScriptFn>>,
    /// The step graph, built once in [`Checker::new`].
    graph: Graph,
    /// Where routes named in messages begin: `workflow.start`, or the step
    /// a moved run resumes at ([`check_resumed`]).
    start: String,
    /// How messages name the run input's schema.
    input_label: &'static str,
    /// In a check resumed from another revision's state, the implicit
    /// bindings of the project's own check, which its Program runs.
    own_bindings: Option<&'a Bindings>,
}

/// How messages name the run input's schema in a project's own check.
const INPUT_LABEL: &str = "the workflow input schema";

impl<'a> Checker<'a> {
    /// A checker of `p`, read from `doc`; `script` lists the Functions of
    /// `functions.rhai` (`None` when it could not be read or parsed).
    pub fn new(doc: &'a YamlDocument, p: &'a ProjectFile, script: Option<Vec<ScriptFn>>) -> Self {
        Checker {
            doc,
            p,
            diags: Vec::new(),
            types: BTreeMap::new(),
            out: Checked {
                aliases: BTreeMap::new(),
                functions: BTreeMap::new(),
                input: None,
                outcomes: BTreeMap::new(),
                bindings: HashMap::new(),
                reads: HashMap::new(),
            },
            script,
            graph: Graph::new(&p.workflow.steps),
            start: p.workflow.start.clone(),
            input_label: INPUT_LABEL,
            own_bindings: None,
        }
    }

    fn at(&self, ptr: &str) -> Located {
        self.doc.locate(ptr)
    }

    fn err(&mut self, code: &str, ptr: &str, message: impl Into<String>, next: impl Into<String>) {
        let d = Diagnostic::error(code, self.at(ptr), message, next);
        self.diags.push(d);
    }

    fn err_key(
        &mut self,
        code: &str,
        ptr: &str,
        message: impl Into<String>,
        next: impl Into<String>,
    ) {
        let d = Diagnostic::error(code, self.doc.locate_key(ptr), message, next);
        self.diags.push(d);
    }

    fn warn(&mut self, code: &str, ptr: &str, message: impl Into<String>, next: impl Into<String>) {
        let d = Diagnostic::warning(code, self.at(ptr), message, next);
        self.diags.push(d);
    }

    /// Runs every check; returns what lowering needs.
    pub fn run(mut self) -> (Checked, Vec<Diagnostic>) {
        self.names_and_limits();
        self.resolve_all();
        let facts = self.check_graph();
        let p: &'a ProjectFile = self.p;
        for (name, step) in p.workflow.steps.iter() {
            self.check_step(name, step, facts.get(name));
        }
        self.check_triggers();
        (self.out, self.diags)
    }

    /// Resolves the types, operation aliases, outcomes, the workflow
    /// input and the Functions, once, in that order.
    fn resolve_all(&mut self) {
        self.resolve_types();
        self.resolve_aliases();
        self.resolve_outcomes();
        let input = self.resolve(&self.p.workflow.input.clone(), "/workflow/input", 0);
        self.out.input = input;
        self.resolve_functions();
    }

    fn names_and_limits(&mut self) {
        let p = self.p;
        if !is_name(&p.project.id) {
            self.err(
                codes::NAME_INVALID,
                "/project/id",
                format!("`{}` is not a valid project id; names match {NAME_PATTERN}", p.project.id),
                "Use lowercase letters, digits and hyphens, starting with a letter (at most 64 characters).",
            );
        }
        let groups: Vec<(&str, Vec<&String>)> = vec![
            ("/types", p.types.iter().map(|(k, _)| k).collect()),
            ("/operations", p.operations.iter().map(|(k, _)| k).collect()),
            ("/functions", p.functions.iter().map(|(k, _)| k).collect()),
            ("/triggers", p.triggers.iter().map(|(k, _)| k).collect()),
            (
                "/workflow/steps",
                p.workflow.steps.iter().map(|(k, _)| k).collect(),
            ),
            (
                "/workflow/outcomes",
                p.workflow.outcomes.iter().map(|(k, _)| k).collect(),
            ),
        ];
        for (base, names) in groups {
            for n in names {
                if !is_name(n) {
                    self.err_key(
                        codes::NAME_INVALID,
                        &format!("{base}/{}", escape_token(n)),
                        format!("`{n}` is not a valid name; names match {NAME_PATTERN}"),
                        "Use lowercase letters, digits and hyphens, starting with a letter (at most 64 characters).",
                    );
                }
            }
        }
        let limits = [
            (
                codes::LIMIT_STEPS,
                "/workflow/steps",
                p.workflow.steps.len(),
                MAX_STEPS,
                "steps",
            ),
            (
                codes::LIMIT_OUTCOMES,
                "/workflow/outcomes",
                p.workflow.outcomes.len(),
                MAX_OUTCOMES,
                "outcomes",
            ),
            (
                codes::LIMIT_OPERATIONS,
                "/operations",
                p.operations.len(),
                MAX_ALIASES,
                "operation aliases",
            ),
            (
                codes::LIMIT_FUNCTIONS,
                "/functions",
                p.functions.len(),
                MAX_FUNCTIONS,
                "Functions",
            ),
        ];
        for (code, ptr, n, max, what) in limits {
            if n > max {
                self.err(
                    code,
                    ptr,
                    format!("the project declares {n} {what}; at most {max} are accepted"),
                    format!("Split the workflow or merge {what} to stay within {max}."),
                );
            }
        }
        let d = p.workflow.deadline_seconds;
        if d == 0 || d > MAX_DEADLINE_SECONDS {
            self.err(
                codes::WORKFLOW_DEADLINE,
                "/workflow/deadlineSeconds",
                format!("deadlineSeconds is {d}; it must be between 1 and {MAX_DEADLINE_SECONDS} (365 days)"),
                "Set deadlineSeconds to a whole number of seconds from 1 to 31536000.",
            );
        }
    }
}

/// The JSON Pointer of step `name`.
fn step_ptr(name: &str) -> String {
    format!("/workflow/steps/{}", escape_token(name))
}

/// The names listed for a message, or `(none declared)`.
fn names<'x>(it: impl Iterator<Item = &'x String>) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "(none declared)".into()
    } else {
        v.join(", ")
    }
}

/// The names quoted in backticks, comma-separated.
fn quote_list(v: &[&str]) -> String {
    v.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
