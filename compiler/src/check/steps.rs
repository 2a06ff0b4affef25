//! What each step and trigger requires beyond the graph: an operation
//! alias and its input's fit for a call, case labels equal to the
//! Function's output enum for a choose, an instant for a wait-until, an
//! exposed completion, route dominance and a timeout within the deadline
//! for a wait-for, an output that fits the outcome for a finish, and the
//! idempotency and input mappings of a trigger.

use std::collections::BTreeSet;

use coordinator_ir::instant::Instant;
use coordinator_ir::name::is_name;
use coordinator_ir::pointer::escape_token;
use serde_json::{json, Value};

use super::graph::{Facts, Variant};
use super::mapping::Env;
use super::{names, step_ptr, Checker, MAX_CASES, MISMATCH_NEXT};
use crate::ast::*;
use crate::codes;
use crate::schema::{self, Fit, Sch, Ty};

impl Checker<'_> {
    /// The checks of step `name`; `facts` is `None` when the step is
    /// unreachable (route checks are then skipped).
    pub(super) fn check_step(&mut self, name: &str, step: &Step, facts: Option<&Facts>) {
        let sp = step_ptr(name);
        let env = Env::Step(name, facts);
        match step {
            Step::Call(c) => self.check_call_step(c, &sp, env),
            Step::Choose(c) => self.check_choose_step(c, &sp, env),
            Step::WaitUntil(w) => self.check_wait_until_step(w, &sp, env),
            Step::WaitFor(w) => self.check_wait_for_step(name, w, &sp, facts),
            Step::Finish(f) => self.check_finish_step(f, &sp, env),
        }
    }

    /// A call step at `sp`: its alias is declared, its input fits the
    /// operation's input, and `onDeclaredRefusal` only on an action.
    fn check_call_step(&mut self, c: &CallStep, sp: &str, env: Env) {
        let alias = self
            .out
            .aliases
            .get(&c.operation)
            .map(|a| (a.input.clone(), a.desc.id.clone(), a.desc.needs_action));
        let ty = self.mapping(&c.input, &format!("{sp}/input"), env);
        match alias {
            Some((input, id, invoke)) => {
                self.fit_report(
                    &ty,
                    &input,
                    &format!("{sp}/input"),
                    &format!("the input of operation alias `{}` ({id})", c.operation),
                    codes::MAPPING_TYPE,
                );
                if c.on_declared_refusal.is_some() && !invoke {
                    self.err(
                        codes::CALL_DECLARED_REFUSAL,
                        &format!("{sp}/onDeclaredRefusal"),
                        format!("{id} has no declared refusals; onDeclaredRefusal applies to breg.invoke-action/v1 immediate actions only"),
                        "Remove onDeclaredRefusal from this step.",
                    );
                }
            }
            None => {
                if !self.p.operations.contains(&c.operation) {
                    self.err(
                        codes::OPERATION_UNKNOWN_ALIAS,
                        &format!("{sp}/operation"),
                        format!(
                            "`{}` is not an operation alias of this project",
                            c.operation
                        ),
                        format!(
                            "Declare it under `operations`, or use one of: {}.",
                            names(self.p.operations.iter().map(|(k, _)| k))
                        ),
                    );
                }
            }
        }
    }

    /// A choose step at `sp`: between one and [`MAX_CASES`] well-named
    /// cases, a well-typed Function call, and case labels that are exactly
    /// the Function's output enum.
    fn check_choose_step(&mut self, c: &ChooseStep, sp: &str, env: Env) {
        if c.cases.is_empty() {
            self.err(
                codes::CHOOSE_LABELS,
                &format!("{sp}/cases"),
                "a choose step needs at least one case",
                "Add the cases the Function returns.",
            );
        }
        if c.cases.len() > MAX_CASES {
            self.err(
                codes::LIMIT_CASES,
                &format!("{sp}/cases"),
                format!(
                    "the step has {} cases; at most {MAX_CASES} are accepted",
                    c.cases.len()
                ),
                "Split the decision into several choose steps.",
            );
        }
        for (label, _) in c.cases.iter() {
            if !is_name(label) {
                self.err_key(
                    codes::NAME_INVALID,
                    &format!("{sp}/cases/{}", escape_token(label)),
                    format!("`{label}` is not a valid case label; names match {NAME_PATTERN}"),
                    "Use lowercase letters, digits and hyphens, starting with a letter.",
                );
            }
        }
        let _ = self.function_call(&c.function, c.arguments.as_deref(), sp, env);
        if let Some(out) = self
            .out
            .functions
            .get(&c.function)
            .and_then(|f| f.output.clone())
        {
            self.check_case_labels_against_output(c, &out, sp);
        }
    }

    /// The case labels of choose step `c` (at `sp`) against the output
    /// schema `out` of its Function: a string enum of exactly the labels.
    fn check_case_labels_against_output(&mut self, c: &ChooseStep, out: &Sch, sp: &str) {
        let node = out.deref();
        let n = node.node();
        let labels: BTreeSet<&str> = c.cases.iter().map(|(k, _)| k.as_str()).collect();
        let is_string = n.get("type").and_then(Value::as_str) == Some("string");
        let en: Option<BTreeSet<&str>> = n.get("enum").and_then(Value::as_array).and_then(|a| {
            a.iter()
                .map(Value::as_str)
                .collect::<Option<BTreeSet<&str>>>()
        });
        if is_string && en.as_ref() == Some(&labels) {
            return;
        }
        let found = match (&en, is_string) {
            (Some(e), true) => format!(
                "its output is the string enum [{}]",
                e.iter().copied().collect::<Vec<_>>().join(", ")
            ),
            _ => "its output is not a string enum".to_owned(),
        };
        self.err(
            codes::CHOOSE_LABELS,
            &format!("{sp}/cases"),
            format!(
                "expected Function `{}` to return exactly the case labels [{}]; {found}",
                c.function,
                labels.iter().copied().collect::<Vec<_>>().join(", ")
            ),
            "Declare the Function's output as `{type: string, enum: [...]}` listing exactly the case labels.",
        );
    }

    /// A wait-until step at `sp`: `until` is an RFC 3339 instant.
    fn check_wait_until_step(&mut self, w: &WaitUntilStep, sp: &str, env: Env) {
        let up = format!("{sp}/until");
        let ty = self.mapping(&w.until, &up, env);
        let desc = "an RFC 3339 instant (a string with format date-time)";
        // The VM reads `until` with `Instant::parse`, not with a
        // schema: a literal is checked the same way, so check and run
        // agree on it (`noon:60` included).
        if let Ty::Literal(Value::String(text)) = &ty {
            if Instant::parse(text).is_err() {
                self.err(
                    codes::WAIT_UNTIL_INSTANT,
                    &up,
                    format!("this mapping does not fit {desc}: expected a date-time string at the top level, found {}", Value::String(text.clone())),
                    MISMATCH_NEXT,
                );
            }
        } else {
            let instant = Sch::new(json!({"type": "string", "format": "date-time"}));
            self.fit_report(&ty, &instant, &up, desc, codes::WAIT_UNTIL_INSTANT);
        }
    }

    /// Wait-for step `name` at `sp`: it waits for a call step (see
    /// [`Self::check_awaited_call`]), with a timeout of at least one second
    /// and shorter than the run deadline.
    fn check_wait_for_step(
        &mut self,
        name: &str,
        w: &WaitForStep,
        sp: &str,
        facts: Option<&Facts>,
    ) {
        let cp = format!("{sp}/completion");
        match self.p.workflow.steps.get(&w.completion.step) {
            None => self.err(
                codes::STEP_UNKNOWN,
                &format!("{cp}/step"),
                format!("`{}` is not a step of this workflow", w.completion.step),
                "Name the call step whose completion this step waits for.",
            ),
            Some(Step::Call(call)) => self.check_awaited_call(name, w, call, &cp, facts),
            Some(_) => self.err(
                codes::WAIT_FOR_STEP,
                &format!("{cp}/step"),
                format!(
                    "step `{}` is not a call; a wait-for waits for a completion of a call",
                    w.completion.step
                ),
                "Name a call step whose operation exposes the completion.",
            ),
        }
        let d = self.p.workflow.deadline_seconds;
        if w.timeout_seconds == 0 || w.timeout_seconds >= d {
            self.err(
                codes::WAIT_FOR_TIMEOUT,
                &format!("{sp}/timeoutSeconds"),
                format!("timeoutSeconds is {}; it must be at least 1 and shorter than the run deadline ({d} seconds)", w.timeout_seconds),
                format!("Set timeoutSeconds below {d}, or raise workflow.deadlineSeconds."),
            );
        }
    }

    /// The call step `call` that wait-for step `name` waits for (its
    /// completion at `cp`): the call's operation exposes the completion, and
    /// the call was accepted on every route to the wait (when reachable).
    fn check_awaited_call(
        &mut self,
        name: &str,
        w: &WaitForStep,
        call: &CallStep,
        cp: &str,
        facts: Option<&Facts>,
    ) {
        if let Some(a) = self.out.aliases.get(&call.operation) {
            if !a.desc.completions.contains(&w.completion.name) {
                let id = a.desc.id.clone();
                let msg = if a.desc.completions.is_empty() {
                    format!(
                        "step `{}` calls {id}, which exposes no completion",
                        w.completion.step
                    )
                } else {
                    format!(
                        "step `{}` calls {id}, which exposes no completion `{}` (it exposes {})",
                        w.completion.step,
                        w.completion.name,
                        a.desc.completions.join(", ")
                    )
                };
                self.err(
                    codes::WAIT_FOR_COMPLETION,
                    &format!("{cp}/name"),
                    msg,
                    "Wait for a completion the call's operation exposes, such as `result` of casework.submit-review-request/v1.",
                );
            }
        }
        let Some(f) = facts else { return };
        let ok = f
            .get(&w.completion.step)
            .is_some_and(|v| v.iter().all(|x| *x == Variant::Success));
        if !ok {
            let route = self
                .graph
                .route_without(&self.start, name, &w.completion.step);
            self.err(
                codes::WAIT_FOR_DOMINANCE,
                &format!("{cp}/step"),
                format!("expected call `{}` to have been accepted on every route that reaches this wait; it was not on the route {route}", w.completion.step),
                "Wait only after the call on every route, or move the wait after it.",
            );
        }
    }

    /// A finish step at `sp`: a declared outcome, and an output (null when
    /// absent) that fits its schema.
    fn check_finish_step(&mut self, f: &FinishStep, sp: &str, env: Env) {
        let schema = self.out.outcomes.get(&f.outcome).cloned();
        if !self.p.workflow.outcomes.contains(&f.outcome) {
            self.err(
                codes::OUTCOME_UNKNOWN,
                &format!("{sp}/outcome"),
                format!("`{}` is not a declared outcome", f.outcome),
                format!(
                    "Declare it under workflow.outcomes, or use one of: {}.",
                    names(self.p.workflow.outcomes.iter().map(|(k, _)| k))
                ),
            );
        }
        let desc = format!("the schema of outcome `{}`", f.outcome);
        match &f.output {
            Some(m) => {
                let ty = self.mapping(m, &format!("{sp}/output"), env);
                if let Some(s) = schema {
                    self.fit_report(&ty, &s, &format!("{sp}/output"), &desc, codes::MAPPING_TYPE);
                }
            }
            None => {
                let Some(s) = schema else { return };
                if let Fit::Mismatch(..) = schema::fit(&Ty::Literal(Value::Null), &s, sp, "") {
                    self.err(
                        codes::OUTCOME_NULL_OUTPUT,
                        sp,
                        format!("this finish has no output, so its output is null, which {desc} does not accept"),
                        "Add an `output` mapping, or declare the outcome as `{type: \"null\"}`.",
                    );
                }
            }
        }
    }

    /// The checks of every trigger's mappings.
    pub(super) fn check_triggers(&mut self) {
        let trig: Vec<(String, TriggerDecl)> = self
            .p
            .triggers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, t) in trig {
            let tp = format!("/triggers/{}", escape_token(&name));
            if !is_name(&t.source) {
                self.err(
                    codes::NAME_INVALID,
                    &format!("{tp}/source"),
                    format!(
                        "`{}` is not a valid event source name; names match {NAME_PATTERN}",
                        t.source
                    ),
                    "Use lowercase letters, digits and hyphens, starting with a letter.",
                );
            }
            if t.event_type.is_empty() {
                self.err(
                    codes::TRIGGER_EVENT_TYPE,
                    &format!("{tp}/eventType"),
                    "eventType is empty",
                    "Name the event type, e.g. breg.record.created/v1.",
                );
            }
            if let Some(m) = &t.idempotency {
                let ty = self.mapping(m, &format!("{tp}/idempotency"), Env::Trigger);
                let s = Sch::new(json!({"type": "string", "minLength": 1}));
                self.fit_report(
                    &ty,
                    &s,
                    &format!("{tp}/idempotency"),
                    "an idempotency string",
                    codes::MAPPING_TYPE,
                );
            }
            let ty = self.mapping(&t.input, &format!("{tp}/input"), Env::Trigger);
            if let Some(s) = self.out.input.clone() {
                self.fit_report(
                    &ty,
                    &s,
                    &format!("{tp}/input"),
                    "the workflow input schema",
                    codes::MAPPING_TYPE,
                );
            }
        }
    }
}
