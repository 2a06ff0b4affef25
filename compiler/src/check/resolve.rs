//! Resolution: every type, operation alias, outcome and Function resolved
//! once to schemas ([`Sch`]), with the authored schemas checked
//! (`coordinator.schema.*`, `coordinator.type.*`, `coordinator.operation.*`,
//! `coordinator.function.*`).

use std::collections::BTreeSet;

use coordinator_ir::catalogue;
use coordinator_ir::name::is_name;
use coordinator_ir::pointer::escape_token;
use serde_json::{json, Value};

use super::{quote_list, Alias, Checker, Func, MAX_FUNCTION_INPUTS};
use crate::ast::*;
use crate::codes;
use crate::functions::ScriptFn;
use crate::schema::{self, Sch};

impl Checker<'_> {
    fn report_schema(&mut self, ptr: &str, root: &Value) -> bool {
        let faults = schema::validate_authored(root);
        let ok = faults.is_empty();
        for f in faults {
            self.err(f.code, &format!("{ptr}{}", f.pointer), f.message, f.next);
        }
        ok
    }

    pub(super) fn resolve_types(&mut self) {
        for (name, s) in self.p.types.iter() {
            let ptr = format!("/types/{}", escape_token(name));
            let ok = self.report_schema(&ptr, &s.0);
            self.types
                .insert(name.clone(), ok.then(|| Sch::new(s.0.clone())));
        }
    }

    /// Resolves a type reference or inline schema at `ptr`.
    pub(super) fn resolve(&mut self, t: &TypeRef, ptr: &str, depth: usize) -> Option<Sch> {
        let Some((key, name)) = t.reference() else {
            if self.report_schema(ptr, &t.0) {
                return Some(Sch::new(t.0.clone()));
            }
            return None;
        };
        let kptr = format!("{ptr}/{key}");
        let Some(name) = name.as_str() else {
            self.err(
                codes::TYPE_UNKNOWN,
                &kptr,
                format!(
                    "`{key}` must name a declaration, found {}",
                    schema::json_kind(name)
                ),
                "Write the name as a string.",
            );
            return None;
        };
        let unknown = |what: &str, list: Vec<&String>| {
            (
                format!("`{key}: {name}` names no {what}"),
                if list.is_empty() {
                    format!("Declare the {what} first.")
                } else {
                    format!(
                        "Use one of: {}.",
                        list.iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
            )
        };
        match key {
            "typeRef" => match self.types.get(name) {
                Some(s) => s.clone(),
                None => {
                    let (m, n) = unknown(
                        "entry under `types`",
                        self.p.types.iter().map(|(k, _)| k).collect(),
                    );
                    self.err(codes::TYPE_UNKNOWN, &kptr, m, n);
                    None
                }
            },
            "operationInput" | "operationOutput" | "completion" => {
                if let Some(a) = self.out.aliases.get(name) {
                    return match key {
                        "operationInput" => Some(a.input.clone()),
                        "operationOutput" => Some(a.output.clone()),
                        _ => match &a.completion {
                            Some((_, s)) => Some(s.clone()),
                            None => {
                                let id = a.desc.id.clone();
                                self.err(
                                    codes::TYPE_NO_COMPLETION,
                                    &kptr,
                                    format!("operation alias `{name}` uses {id}, which exposes no completion"),
                                    "Name an alias of an operation that exposes a completion, such as casework.submit-review-request/v1.",
                                );
                                None
                            }
                        },
                    };
                }
                if self.p.operations.contains(name) {
                    return None; // the alias has its own error
                }
                let (m, n) = unknown(
                    "operation alias",
                    self.p.operations.iter().map(|(k, _)| k).collect(),
                );
                self.err(codes::TYPE_UNKNOWN, &kptr, m, n);
                None
            }
            "outcome" => {
                if let Some(s) = self.out.outcomes.get(name) {
                    return Some(s.clone());
                }
                match self.p.workflow.outcomes.get(name) {
                    Some(t) if depth < 8 => {
                        let t = t.clone();
                        self.resolve(
                            &t,
                            &format!("/workflow/outcomes/{}", escape_token(name)),
                            depth + 1,
                        )
                    }
                    Some(_) => None,
                    None => {
                        let (m, n) = unknown(
                            "outcome",
                            self.p.workflow.outcomes.iter().map(|(k, _)| k).collect(),
                        );
                        self.err(codes::TYPE_UNKNOWN, &kptr, m, n);
                        None
                    }
                }
            }
            _ => None,
        }
    }

    pub(super) fn resolve_aliases(&mut self) {
        let ops: Vec<(String, OperationAlias)> = self
            .p
            .operations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, a) in ops {
            let ptr = format!("/operations/{}", escape_token(&name));
            if !is_name(&a.connection) {
                self.err(
                    codes::NAME_INVALID,
                    &format!("{ptr}/connection"),
                    format!(
                        "`{}` is not a valid connection name; names match {NAME_PATTERN}",
                        a.connection
                    ),
                    "Use lowercase letters, digits and hyphens, starting with a letter.",
                );
            }
            let Some(desc) = catalogue::lookup(&a.uses) else {
                self.err(
                    codes::OPERATION_UNKNOWN,
                    &format!("{ptr}/uses"),
                    format!("`{}` is not a host operation", a.uses),
                    format!("Use one of: {}.", catalogue::OPERATION_IDS.join(", ")),
                );
                continue;
            };
            let mut ok = true;
            let action = match (&a.action, desc.needs_action) {
                (None, true) => {
                    self.err(
                        codes::OPERATION_ACTION_REQUIRED,
                        &ptr,
                        format!("{} needs the BReg action it invokes", desc.id),
                        "Add `action: {id: ACTION, kind: immediate}` to the alias.",
                    );
                    ok = false;
                    None
                }
                (Some(_), false) => {
                    self.err(
                        codes::OPERATION_ACTION_NOT_ALLOWED,
                        &format!("{ptr}/action"),
                        format!(
                            "{} takes no action; only breg.invoke-action/v1 does",
                            desc.id
                        ),
                        "Remove `action` from this alias.",
                    );
                    ok = false;
                    None
                }
                (Some(act), true) => {
                    if act.kind == ActionKind::Proposal {
                        self.err(
                            codes::OPERATION_PROPOSAL_ACTION,
                            &format!("{ptr}/action/kind"),
                            format!("action `{}` is a BReg Proposal; a workflow may invoke immediate actions only", act.id),
                            "Invoke an immediate action, or submit the proposal for review outside the workflow.",
                        );
                        ok = false;
                    }
                    Some(act.id.clone())
                }
                (None, false) => None,
            };
            let base = catalogue::output_schema(&desc.id).unwrap_or(Value::Bool(true));
            let output = match &a.output {
                None => Some(Sch::new(base)),
                Some(t) => {
                    if t.reference().is_some_and(|(k, _)| k != "typeRef") {
                        self.err(
                            codes::TYPE_REFERENCE_KIND,
                            &format!("{ptr}/output"),
                            "an alias's output may narrow the operation output with `typeRef` or an inline schema only",
                            "Use `typeRef: NAME` or an inline schema.",
                        );
                        None
                    } else {
                        self.resolve(t, &format!("{ptr}/output"), 0).map(|narrow| {
                            let rebased = schema::rebase(narrow.node(), "/allOf/1");
                            Sch::new(json!({"allOf": [base, rebased]}))
                        })
                    }
                }
            };
            let (Some(output), true) = (output, ok) else {
                continue;
            };
            let completion = desc.completions.first().and_then(|c| {
                catalogue::completion_schema(&desc.id, c).map(|s| (c.clone(), Sch::new(s)))
            });
            let input = Sch::new(catalogue::input_schema(&desc.id).unwrap_or(Value::Bool(true)));
            self.out.aliases.insert(
                name,
                Alias {
                    desc,
                    input,
                    output,
                    completion,
                    action,
                },
            );
        }
    }

    pub(super) fn resolve_outcomes(&mut self) {
        let outs: Vec<(String, TypeRef)> = self
            .p
            .workflow
            .outcomes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, t) in outs {
            let ptr = format!("/workflow/outcomes/{}", escape_token(&name));
            if let Some(s) = self.resolve(&t, &ptr, 0) {
                self.out.outcomes.insert(name, s);
            }
        }
    }

    pub(super) fn resolve_functions(&mut self) {
        let fns: Vec<(String, FunctionDecl)> = self
            .p
            .functions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, f) in fns {
            let ptr = format!("/functions/{}", escape_token(&name));
            self.check_function_declaration(&name, &f, &ptr);
            let mut inputs = Vec::new();
            for (iname, t) in f.inputs.iter() {
                let s = self.resolve(t, &format!("{ptr}/inputs/{}", escape_token(iname)), 0);
                inputs.push((iname.clone(), t.clone(), s));
            }
            let output = self.resolve(&f.output, &format!("{ptr}/output"), 0);
            let params = self.entrypoint_params(&f, &ptr);
            self.out.functions.insert(
                name,
                Func {
                    entrypoint: f.entrypoint.clone(),
                    inputs,
                    output,
                    params,
                },
            );
        }
    }

    /// The declaration of Function `name` at `ptr`: its `source` is
    /// [`crate::FUNCTIONS_FILE`] and it declares at most
    /// [`MAX_FUNCTION_INPUTS`] inputs.
    fn check_function_declaration(&mut self, name: &str, f: &FunctionDecl, ptr: &str) {
        if f.source != crate::FUNCTIONS_FILE {
            self.err(
                codes::FUNCTION_SOURCE,
                &format!("{ptr}/source"),
                format!(
                    "Function source `{}` is not accepted; every Function lives in {}",
                    f.source,
                    crate::FUNCTIONS_FILE
                ),
                format!(
                    "Move the entrypoint into {} and set `source: {}`.",
                    crate::FUNCTIONS_FILE,
                    crate::FUNCTIONS_FILE
                ),
            );
        }
        if f.inputs.len() > MAX_FUNCTION_INPUTS {
            self.err(
                codes::LIMIT_FUNCTION_INPUTS,
                &format!("{ptr}/inputs"),
                format!("Function `{name}` declares {} inputs; at most {MAX_FUNCTION_INPUTS} are accepted", f.inputs.len()),
                "Pass fewer, larger inputs (an object) instead.",
            );
        }
    }

    /// The parameters of the script function that `f.entrypoint` names, in
    /// their script order, when their names are exactly its declared inputs.
    /// `None` when the script did not parse (reported already), or after
    /// reporting a missing entrypoint or parameters that do not match.
    fn entrypoint_params(&mut self, f: &FunctionDecl, ptr: &str) -> Option<Vec<String>> {
        let fns = self.script.as_ref()?;
        let candidates: Vec<&ScriptFn> = fns.iter().filter(|s| s.name == f.entrypoint).collect();
        let declared: BTreeSet<&str> = f.inputs.iter().map(|(k, _)| k.as_str()).collect();
        if candidates.is_empty() {
            let known: Vec<&str> = fns.iter().map(|s| s.name.as_str()).collect();
            let next = if known.is_empty() {
                format!(
                    "Define `fn {}(...)` in {}.",
                    f.entrypoint,
                    crate::FUNCTIONS_FILE
                )
            } else {
                format!(
                    "Define `fn {}(...)` in {}, or name one of: {}.",
                    f.entrypoint,
                    crate::FUNCTIONS_FILE,
                    known.join(", ")
                )
            };
            self.err(
                codes::FUNCTION_ENTRYPOINT,
                &format!("{ptr}/entrypoint"),
                format!(
                    "{} defines no function `{}`",
                    crate::FUNCTIONS_FILE,
                    f.entrypoint
                ),
                next,
            );
            return None;
        }
        if let Some(c) = candidates.iter().find(|c| {
            c.params.iter().map(String::as_str).collect::<BTreeSet<_>>() == declared
                && c.params.len() == declared.len()
        }) {
            return Some(c.params.clone());
        }
        let (at, message) = parameter_mismatch(f, ptr, &candidates, &declared);
        self.err_key(
            codes::FUNCTION_PARAMETERS,
            &at,
            message,
            "Rename the declared inputs or the Rhai parameters so the two sets are equal.",
        );
        None
    }
}

/// Where and how the first of the entrypoint `candidates` of `f` (at `ptr`)
/// differs from its `declared` inputs: the pointer of the first declared
/// input that is no parameter (else `inputs`), and the message.
fn parameter_mismatch(
    f: &FunctionDecl,
    ptr: &str,
    candidates: &[&ScriptFn],
    declared: &BTreeSet<&str>,
) -> (String, String) {
    let params = candidates
        .first()
        .map(|c| c.params.clone())
        .unwrap_or_default();
    let extra: Vec<&str> = declared
        .iter()
        .filter(|d| !params.iter().any(|p| p == *d))
        .copied()
        .collect();
    let missing: Vec<&str> = params
        .iter()
        .map(String::as_str)
        .filter(|p| !declared.contains(p))
        .collect();
    let mut parts = Vec::new();
    if !extra.is_empty() {
        parts.push(format!(
            "declared input {} is not a parameter of `{}`",
            quote_list(&extra),
            f.entrypoint
        ));
    }
    if !missing.is_empty() {
        parts.push(format!(
            "parameter {} of `{}` is not a declared input",
            quote_list(&missing),
            f.entrypoint
        ));
    }
    if parts.is_empty() {
        parts.push(format!("`{}` repeats a parameter name", f.entrypoint));
    }
    let at = extra
        .first()
        .map(|e| format!("{ptr}/inputs/{}", escape_token(e)))
        .unwrap_or_else(|| format!("{ptr}/inputs"));
    let message = format!(
        "{}; arguments are passed by name, so the names must match (`fn {}({})`)",
        parts.join("; "),
        f.entrypoint,
        params.join(", ")
    );
    (at, message)
}
