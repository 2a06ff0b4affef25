//! The typing of mappings: the static type ([`Ty`]) of what a mapping
//! produces — the input, the event, a literal, `fields`, a step's output on
//! every route that reaches it (the must-dataflow of `graph.rs`), a
//! Function call with its arguments bound by name or by type — and the
//! fit of that type to the schema it feeds.

use std::collections::BTreeSet;

use coordinator_ir::catalogue;
use coordinator_ir::pointer::escape_token;
use serde_json::{json, Value};

use super::graph::{Facts, Variant};
use super::{names, quote_list, Binding, Checker, Read, ReadRoute, MAX_FIELDS, MISMATCH_NEXT};
use crate::ast::*;
use crate::codes;
use crate::schema::{self, Fit, Sch, Ty, Walk};

/// Where a mapping is evaluated.
#[derive(Clone, Copy)]
pub(super) enum Env<'a> {
    /// In a step; `None` facts when the step is unreachable (route checks skipped).
    Step(&'a str, Option<&'a Facts>),
    /// In a trigger.
    Trigger,
}

impl Checker<'_> {
    pub(super) fn fit_report(&mut self, ty: &Ty, tgt: &Sch, at: &str, desc: &str, code: &str) {
        match schema::fit(ty, tgt, at, "") {
            Fit::Ok => {}
            Fit::Unchecked(p, why) => self.warn(
                codes::MAPPING_FIT_UNCHECKED,
                &p,
                format!("check cannot prove that this value fits {desc}: {why}; the host validates it at run time"),
                "Nothing to do; to have it proven offline, declare a narrower type for the source.",
            ),
            Fit::Mismatch(p, _member, msg) => self.err(
                code,
                &p,
                format!("this mapping does not fit {desc}: {msg}"),
                MISMATCH_NEXT,
            ),
        }
    }

    /// Keeps what the mapping at `ptr` reads, for explain's data; a read
    /// whose type has an error is not kept.
    fn note_read(&mut self, ptr: &str, reads: Vec<(Option<ReadRoute>, Ty)>) {
        let reads: Vec<Read> = reads
            .into_iter()
            .filter(|(_, ty)| !matches!(ty, Ty::Error))
            .map(|(route, ty)| Read { route, ty })
            .collect();
        if !reads.is_empty() {
            self.out.reads.insert(ptr.to_owned(), reads);
        }
    }

    /// Checks a JSON Pointer's syntax; returns its tokens.
    fn tokens(&mut self, path: &str, ptr: &str) -> Option<Vec<String>> {
        match coordinator_ir::pointer::tokens(path) {
            Some(t) if !path.is_empty() => Some(t),
            _ => {
                self.err(
                    codes::MAPPING_POINTER,
                    ptr,
                    format!("`{path}` is not a JSON Pointer (it must start with `/`; `~` is written `~0` and `/` in a name `~1`)"),
                    "Write the path as a JSON Pointer such as /applicationId, or omit path to use the whole value.",
                );
                None
            }
        }
    }

    /// Walks `path` through `src` (described as `desc`) and reports.
    fn typed_path(&mut self, src: Vec<Sch>, path: Option<&String>, ptr: &str, desc: &str) -> Ty {
        let Some(path) = path else {
            return Ty::Schema(src);
        };
        let pptr = format!("{ptr}/path");
        let Some(tokens) = self.tokens(path, &pptr) else {
            return Ty::Error;
        };
        let mut found = Vec::new();
        for s in &src {
            match schema::walk(s, &tokens) {
                Walk::Found(v) => found.extend(v),
                Walk::Missing(at) => {
                    self.err(
                        codes::MAPPING_PATH,
                        &pptr,
                        format!("expected a path that {desc} declares; it declares nothing at {at}"),
                        format!("Correct the path to a member {desc} declares, or omit path to use the whole value."),
                    );
                    return Ty::Error;
                }
                Walk::Unchecked(at) => {
                    self.warn(
                        codes::MAPPING_PATH_UNCHECKED,
                        &pptr,
                        format!(
                            "{desc} leaves {} open, so check cannot prove that {path} exists; the value is checked at run time",
                            if at.is_empty() { "its top level".to_owned() } else { at.clone() }
                        ),
                        format!("Nothing to do; to have it proven offline, declare {path} in the schema."),
                    );
                    // Reported once here; the fit of this value is left to run time.
                    return Ty::Error;
                }
            }
        }
        Ty::Schema(found)
    }

    /// The static type of mapping `m` at `ptr`, evaluated in `env`; reports
    /// what is wrong with it and keeps what it reads and binds.
    pub(super) fn mapping(&mut self, m: &Mapping, ptr: &str, env: Env) -> Ty {
        match m {
            Mapping::Input(p) => self.input_mapping(p, ptr, env),
            Mapping::Event(p) => self.event_mapping(p, ptr, env),
            Mapping::Literal(l) => Ty::Literal(l.value.clone()),
            Mapping::Fields(f) => self.fields_mapping(f, ptr, env),
            Mapping::Step(s) => self.step_mapping(s, ptr, env),
            Mapping::Function(f) => {
                self.function_call(&f.function, f.arguments.as_deref(), ptr, env)
            }
        }
    }

    /// `type: input`: the workflow input at `path`, in a step only.
    fn input_mapping(&mut self, p: &PathMapping, ptr: &str, env: Env) -> Ty {
        if matches!(env, Env::Trigger) {
            self.err(
                codes::MAPPING_CONTEXT,
                &format!("{ptr}/type"),
                "a trigger builds the run input, so it cannot read it",
                "Read the event with `type: event` instead.",
            );
            return Ty::Error;
        }
        match self.out.input.clone() {
            Some(s) => {
                let ty = self.typed_path(vec![s], p.path.as_ref(), ptr, self.input_label);
                self.note_read(ptr, vec![(None, ty.clone())]);
                ty
            }
            None => Ty::Error,
        }
    }

    /// `type: event`: the triggering event at `path`, in a trigger only.
    fn event_mapping(&mut self, p: &PathMapping, ptr: &str, env: Env) -> Ty {
        if !matches!(env, Env::Trigger) {
            self.err(
                codes::MAPPING_CONTEXT,
                &format!("{ptr}/type"),
                "`type: event` is available only inside a trigger",
                "Read the run input with `type: input` instead.",
            );
            return Ty::Error;
        }
        let ev = Sch::new(json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "source": {"type": "string"},
                "type": {"type": "string"},
                "time": {"type": "string", "format": "date-time"},
                "data": {}
            },
            "required": ["id", "source", "type"],
            "additionalProperties": false
        }));
        let ty = self.typed_path(vec![ev], p.path.as_ref(), ptr, "the event");
        self.note_read(ptr, vec![(None, ty.clone())]);
        ty
    }

    /// `fields`: an object of the members' types, at most [`MAX_FIELDS`].
    fn fields_mapping(&mut self, f: &FieldsMapping, ptr: &str, env: Env) -> Ty {
        if f.fields.len() > MAX_FIELDS {
            self.err(
                codes::LIMIT_FIELDS,
                &format!("{ptr}/fields"),
                format!(
                    "the mapping builds {} members; at most {MAX_FIELDS} are accepted",
                    f.fields.len()
                ),
                "Group members into nested `fields` mappings.",
            );
        }
        let mut members = Vec::new();
        for (k, sub) in f.fields.iter() {
            let sp = format!("{ptr}/fields/{}", escape_token(k));
            let ty = self.mapping(sub, &sp, env);
            members.push((k.clone(), ty, sp));
        }
        Ty::Object(members)
    }

    /// `type: step`, in a step only: the output of a call or wait-for step
    /// that completed on every route reaching here, one alternative per
    /// output it may have (see [`Self::step_output_reads`]).
    fn step_mapping(&mut self, s: &StepMapping, ptr: &str, env: Env) -> Ty {
        let Env::Step(here, facts) = env else {
            self.err(
                codes::MAPPING_CONTEXT,
                &format!("{ptr}/type"),
                "a trigger runs before any step, so it cannot read a step's output",
                "Read the event with `type: event` instead.",
            );
            return Ty::Error;
        };
        let sptr = format!("{ptr}/step");
        let p = self.p;
        let Some(target) = p.workflow.steps.get(&s.step) else {
            self.err(
                codes::MAPPING_UNKNOWN_STEP,
                &sptr,
                format!("`{}` is not a step of this workflow", s.step),
                "Name an earlier call or wait-for step.",
            );
            return Ty::Error;
        };
        if !matches!(target, Step::Call(_) | Step::WaitFor(_)) {
            self.err(
                codes::MAPPING_STEP_KIND,
                &sptr,
                format!(
                    "step `{}` has no output; only call and wait-for steps do",
                    s.step
                ),
                "Read the output of a call or wait-for step.",
            );
            return Ty::Error;
        }
        let Some(facts) = facts else { return Ty::Error };
        let Some(variants) = facts.get(&s.step).cloned() else {
            let route = self.graph.route_without(&self.start, here, &s.step);
            self.err(
                codes::MAPPING_STEP_NOT_COMPLETED,
                &sptr,
                format!("expected step `{}` to have completed on every route that reaches this mapping; it has not on the route {route}", s.step),
                format!("Read `{}` only on routes that pass through it, or compute the value with a Function that takes it as an input.", s.step),
            );
            return Ty::Error;
        };
        self.step_output_reads(s, target, variants, ptr)
    }

    /// The type of mapping `s` (at `ptr`) over each output `variants` of
    /// its `target` step: one alternative each, a union when several, and
    /// the reads kept for explain; an error when any has one.
    fn step_output_reads(
        &mut self,
        s: &StepMapping,
        target: &Step,
        variants: BTreeSet<Variant>,
        ptr: &str,
    ) -> Ty {
        let mut alts = Vec::new();
        let mut reads = Vec::new();
        for v in variants {
            let (sch, desc) = self.step_output_schema(target, v, &s.step);
            let Some(sch) = sch else { return Ty::Error };
            match self.typed_path(vec![sch], s.path.as_ref(), ptr, &desc) {
                Ty::Error => return Ty::Error,
                t @ (Ty::Any | Ty::Schema(_) | Ty::Union(_) | Ty::Literal(_) | Ty::Object(_)) => {
                    let route = match v {
                        Variant::Success => ReadRoute::Success,
                        Variant::Refusal => ReadRoute::DeclaredRefusal,
                        Variant::Completion => ReadRoute::Completion,
                    };
                    reads.push((Some(route), t.clone()));
                    alts.push(t);
                }
            }
        }
        self.note_read(ptr, reads);
        if alts.len() == 1 {
            alts.pop().unwrap_or(Ty::Error)
        } else {
            Ty::Union(alts)
        }
    }

    /// The schema of `target`'s (step `step`'s) output `v`, if resolved,
    /// and how messages describe it: a call's operation output or the
    /// declared refusal, a wait-for's awaited completion.
    fn step_output_schema(&self, target: &Step, v: Variant, step: &str) -> (Option<Sch>, String) {
        match (target, v) {
            (Step::Call(c), Variant::Success) => (
                self.out.aliases.get(&c.operation).map(|a| a.output.clone()),
                format!("the output of step `{step}`"),
            ),
            (Step::Call(_), Variant::Refusal) => (
                Some(Sch::new(catalogue::declared_refusal_schema())),
                format!("the output of step `{step}` on its declared-refusal route"),
            ),
            (Step::WaitFor(w), _) => (
                self.p
                    .workflow
                    .steps
                    .get(&w.completion.step)
                    .and_then(|c| match c {
                        Step::Call(c) => self
                            .out
                            .aliases
                            .get(&c.operation)
                            .and_then(|a| a.completion.as_ref().map(|x| x.1.clone())),
                        Step::Choose(_)
                        | Step::WaitUntil(_)
                        | Step::WaitFor(_)
                        | Step::Finish(_) => None,
                    }),
                format!("the completion that step `{step}` waits for"),
            ),
            (Step::Call(_), Variant::Completion)
            | (Step::Choose(_) | Step::WaitUntil(_) | Step::Finish(_), _) => (None, String::new()),
        }
    }

    /// Checks a Function call (mapping or choose) at `ptr`; returns its type.
    /// Each input is passed under `arguments` or bound by its type
    /// ([`Self::implicit_binding`]); the bindings are kept for lowering.
    pub(super) fn function_call(
        &mut self,
        fname: &str,
        args: Option<&Named<Mapping>>,
        ptr: &str,
        env: Env,
    ) -> Ty {
        let Some(func) = self.out.functions.get(fname) else {
            self.err(
                codes::FUNCTION_UNKNOWN,
                &format!("{ptr}/function"),
                format!("`{fname}` is not a declared Function"),
                format!(
                    "Declare it under `functions`, or use one of: {}.",
                    names(self.p.functions.iter().map(|(k, _)| k))
                ),
            );
            return Ty::Error;
        };
        let inputs = func.inputs.clone();
        let output = func.output.clone();
        let mut bindings = Vec::new();
        let mut unbound: Vec<(String, String)> = Vec::new();
        // A Function whose entrypoint or parameters are refused, or a call to
        // an unknown alias, already explains why binding may fail.
        let quiet = func.params.is_none()
            || self.p.workflow.steps.iter().any(
                |(_, s)| matches!(s, Step::Call(c) if !self.out.aliases.contains_key(&c.operation)),
            );
        if let Some(args) = args {
            self.report_unknown_arguments(fname, args, &inputs, ptr);
        }
        for (iname, tref, sch) in &inputs {
            let explicit = args.and_then(|a| a.get(iname));
            let ty = match explicit {
                Some(m) => {
                    self.mapping(m, &format!("{ptr}/arguments/{}", escape_token(iname)), env)
                }
                None => match self.binding(ptr, iname, tref, env) {
                    Ok(b) => {
                        let ty = match &b {
                            Binding::Input => self
                                .out
                                .input
                                .clone()
                                .map(|s| Ty::Schema(vec![s]))
                                .unwrap_or(Ty::Error),
                            Binding::Step(_) => sch
                                .clone()
                                .map(|s| Ty::Schema(vec![s]))
                                .unwrap_or(Ty::Error),
                        };
                        bindings.push((iname.clone(), b));
                        ty
                    }
                    Err(why) => {
                        if !matches!(env, Env::Step(_, None)) && !quiet {
                            unbound.push((iname.clone(), why));
                        }
                        Ty::Error
                    }
                },
            };
            if let Some(s) = sch {
                let at = if explicit.is_some() {
                    format!("{ptr}/arguments/{}", escape_token(iname))
                } else {
                    ptr.to_owned()
                };
                self.fit_report(
                    &ty,
                    s,
                    &at,
                    &format!("input `{iname}` of Function `{fname}`"),
                    codes::MAPPING_TYPE,
                );
            }
        }
        if !unbound.is_empty() {
            self.report_unbound_inputs(fname, &unbound, ptr);
        }
        self.out.bindings.insert(ptr.to_owned(), bindings);
        output.map(|s| Ty::Schema(vec![s])).unwrap_or(Ty::Error)
    }

    /// Each of `args` that names none of Function `fname`'s `inputs`.
    fn report_unknown_arguments(
        &mut self,
        fname: &str,
        args: &Named<Mapping>,
        inputs: &[(String, TypeRef, Option<Sch>)],
        ptr: &str,
    ) {
        for (aname, _) in args.iter() {
            if !inputs.iter().any(|(n, _, _)| n == aname) {
                self.err_key(
                    codes::FUNCTION_UNKNOWN_ARGUMENT,
                    &format!("{ptr}/arguments/{}", escape_token(aname)),
                    format!("Function `{fname}` declares no input `{aname}`"),
                    format!(
                        "Pass only declared inputs: {}.",
                        inputs
                            .iter()
                            .map(|(n, _, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
    }

    /// What input `iname` (declared as `tref`) of the Function called at
    /// `ptr` is bound to when no argument passes it, or why it cannot be
    /// bound. By its type ([`Self::implicit_binding`]); but in a check
    /// resumed from another revision's state ([`super::check_resumed`]),
    /// as this project's own check bound it, since that is the binding its
    /// Program runs, and only when the call it names completed on every
    /// route reaching here.
    fn binding(&self, ptr: &str, iname: &str, tref: &TypeRef, env: Env) -> Result<Binding, String> {
        let Some(own) = self.own_bindings else {
            return self
                .implicit_binding(tref, env)
                .ok_or_else(|| why_unbound(iname, tref));
        };
        let fixed = own
            .get(ptr)
            .and_then(|v| v.iter().find(|(n, _)| n == iname))
            .map(|(_, b)| b.clone());
        match (fixed, env) {
            (Some(Binding::Step(step)), Env::Step(_, Some(facts)))
                if !facts
                    .get(&step)
                    .is_some_and(|v| v.iter().all(|x| *x == Variant::Success)) =>
            {
                Err(format!(
                    "`{iname}` is bound by its type to the output of call `{step}`, which has not completed on every route reaching here"
                ))
            }
            (Some(b), _) => Ok(b),
            (None, _) => Err(why_unbound(iname, tref)),
        }
    }

    /// What an input declared as `tref` is bound to when no argument passes
    /// it, in a step only: the run input for the workflow input's type, or
    /// the one call of an `operationOutput` alias that completed on every
    /// route reaching here (on an unreachable step, none).
    fn implicit_binding(&self, tref: &TypeRef, env: Env) -> Option<Binding> {
        match (tref.reference(), env) {
            (Some(("typeRef", _)), Env::Step(..)) if *tref == self.p.workflow.input => {
                Some(Binding::Input)
            }
            (Some(("operationOutput", Value::String(alias))), Env::Step(_, facts)) => {
                let calls: Vec<String> = match facts {
                    Some(facts) => self
                        .p
                        .workflow
                        .steps
                        .iter()
                        .filter(|(n, s)| {
                            matches!(s, Step::Call(c) if c.operation == *alias)
                                && facts
                                    .get(*n)
                                    .is_some_and(|v| v.iter().all(|x| *x == Variant::Success))
                        })
                        .map(|(n, _)| n.clone())
                        .collect(),
                    None => vec![String::new()],
                };
                match calls.len() {
                    1 => calls.into_iter().next().map(Binding::Step),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// One error for the `unbound` inputs (name, reason) of Function
    /// `fname` called at `ptr`.
    fn report_unbound_inputs(&mut self, fname: &str, unbound: &[(String, String)], ptr: &str) {
        let names: Vec<&str> = unbound.iter().map(|(n, _)| n.as_str()).collect();
        let whys: Vec<&str> = unbound.iter().map(|(_, w)| w.as_str()).collect();
        self.err(
            codes::FUNCTION_ARGUMENT_REQUIRED,
            ptr,
            format!(
                "Function `{fname}` needs {} that cannot be bound by type: {}",
                quote_list(&names),
                whys.join("; ")
            ),
            format!(
                "Pass {} explicitly under `arguments`, e.g. `arguments: {{{}: MAPPING}}`.",
                quote_list(&names),
                names.first().copied().unwrap_or_default()
            ),
        );
    }
}

/// Why input `iname`, declared as `tref`, could not be bound by its type.
fn why_unbound(iname: &str, tref: &TypeRef) -> String {
    match tref.reference() {
        Some(("operationOutput", a)) => format!(
            "`{iname}` is declared `operationOutput: {}`, and not exactly one call using that alias completed on every route reaching here",
            a.as_str().unwrap_or("?"),
        ),
        _ => format!("`{iname}` is declared neither as the workflow input's type nor as an operationOutput"),
    }
}
