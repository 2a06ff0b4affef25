//! A human-readable listing of a [`Program`], one entity per line, used by
//! golden tests so that a change to compiler output shows as a text diff.
//!
//! Form (every line is stable; schemas and constants print as canonical JSON):
//!
//! ```text
//! program follow-up format 1
//! input t0
//! deadline 2592000s
//! start s0
//! step s0 due: wait-until e0 next s1
//! ...
//! expr e0: input /sendAfter
//! operation op0 applications-read-record = breg.read-record/v1 on applications (breg read, recovery read-again, key no, receipt no) in t1 out t2
//! function f0 notice-route = notice_route(input: t0, record: t2) -> t3
//! outcome o0 message-accepted t4
//! schema t0 {...}
//! const c0 "applications"
//! ```

use std::fmt::Write as _;

use crate::canonical;
use crate::program::*;

fn opt_path(path: &Option<String>) -> String {
    path.as_deref().map(|p| format!(" {p}")).unwrap_or_default()
}

fn opt_step(label: &str, id: &Option<StepId>) -> String {
    id.map(|s| format!(" {label} {s}")).unwrap_or_default()
}

/// Renders the whole Program. Never fails; an out-of-range index prints as is.
pub fn disassemble(p: &Program) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "program {} format {}", p.workflow, p.format);
    let _ = writeln!(out, "input {}", p.input);
    let _ = writeln!(out, "deadline {}s", p.deadline_seconds);
    let _ = writeln!(out, "start {}", p.start);
    if !p.connections.is_empty() {
        let _ = writeln!(out, "connections {}", p.connections.join(", "));
    }
    for (i, step) in p.steps.iter().enumerate() {
        let _ = writeln!(out, "step s{i} {}: {}", step.name, step_body(&step.op));
    }
    for (i, e) in p.exprs.iter().enumerate() {
        let code: Vec<String> = e.code.iter().map(instr).collect();
        let _ = writeln!(out, "expr e{i}: {}", code.join("; "));
    }
    for (i, op) in p.operations.iter().enumerate() {
        let _ = writeln!(out, "operation op{i} {}", operation_body(op));
    }
    for (i, f) in p.functions.iter().enumerate() {
        let inputs: Vec<String> = f
            .inputs
            .iter()
            .map(|i| format!("{}: {}", i.name, i.schema))
            .collect();
        let _ = writeln!(
            out,
            "function f{i} {} = {}({}) -> {}",
            f.name,
            f.entrypoint,
            inputs.join(", "),
            f.output
        );
    }
    for (i, t) in p.triggers.iter().enumerate() {
        let _ = writeln!(
            out,
            "trigger {i} {} source {} type {} idempotency {} input {}",
            t.name, t.source, t.event_type, t.idempotency, t.input
        );
    }
    for (i, o) in p.outcomes.iter().enumerate() {
        let _ = writeln!(out, "outcome o{i} {} {}", o.name, o.schema);
    }
    for (i, s) in p.schemas.iter().enumerate() {
        let _ = writeln!(out, "schema t{i} {}", canonical::to_string(s));
    }
    for (i, c) in p.constants.iter().enumerate() {
        let _ = writeln!(out, "const c{i} {}", canonical::to_string(c));
    }
    if !p.function_source.is_empty() {
        let _ = writeln!(
            out,
            "source {} bytes {}",
            p.function_source.len(),
            crate::sha256_digest(p.function_source.as_bytes())
        );
    }
    out
}

/// A step's line after `step sN name: `: its kind, what it reads and
/// where it goes.
fn step_body(op: &StepOp) -> String {
    match op {
        StepOp::Call {
            operation,
            input,
            next,
            on_declared_refusal,
        } => format!(
            "{} {operation} with {input} next {next}{}",
            op.kind(),
            opt_step("on-declared-refusal", on_declared_refusal)
        ),
        StepOp::Choose { selector, cases } => {
            let cases: Vec<String> = cases
                .iter()
                .map(|c| format!("{} -> {}", c.label, c.step))
                .collect();
            format!("{} {selector}: {}", op.kind(), cases.join(", "))
        }
        StepOp::WaitUntil { until, next } => {
            format!("{} {until} next {next}", op.kind())
        }
        StepOp::WaitFor {
            call,
            completion,
            timeout_seconds,
            next,
            on_timeout,
            on_cancel,
        } => format!(
            "{} {call}.{completion} timeout {timeout_seconds}s next {next}{}{}",
            op.kind(),
            opt_step("on-timeout", on_timeout),
            opt_step("on-cancel", on_cancel)
        ),
        StepOp::Finish { outcome, output } => format!(
            "{} {outcome}{}",
            op.kind(),
            output.map(|e| format!(" with {e}")).unwrap_or_default()
        ),
    }
}

/// An operation's line after `operation opN `: alias, pinned descriptor,
/// connection, semantics and schemas.
fn operation_body(op: &OperationBinding) -> String {
    let d = &op.descriptor;
    format!(
        "{} = {}{} on {} ({} {}, recovery {}, key {}, receipt {}{}) in {} out {}{}",
        op.alias,
        d.id,
        op.action
            .as_deref()
            .map(|a| format!(" action {a}"))
            .unwrap_or_default(),
        op.connection,
        d.product.as_str(),
        d.effect.as_str(),
        d.recovery.as_str(),
        if d.idempotency_key { "yes" } else { "no" },
        if d.receipt { "yes" } else { "no" },
        if d.completions.is_empty() {
            String::new()
        } else {
            format!(", completions {}", d.completions.join(" "))
        },
        op.input,
        op.output,
        op.completion
            .map(|c| format!(" completion {c}"))
            .unwrap_or_default()
    )
}

fn instr(i: &Instr) -> String {
    match i {
        Instr::Input { path } => format!("input{}", opt_path(path)),
        Instr::StepOutput { step, path } => format!("step {step}{}", opt_path(path)),
        Instr::Const { value } => format!("const {value}"),
        Instr::Event { path } => format!("event{}", opt_path(path)),
        Instr::Object { keys } => format!("object {{{}}}", keys.join(", ")),
        Instr::Call { function, args } => {
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    if a.explicit {
                        a.name.clone()
                    } else {
                        format!("{}=bound", a.name)
                    }
                })
                .collect();
            format!("call {function}({})", args.join(", "))
        }
    }
}
