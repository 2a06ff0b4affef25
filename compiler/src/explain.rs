//! `explain`: the steps breadth-first from `start`, one line each, rendered
//! from the authored form (declaration order), never from the Program.
//! The forms are listed in docs/explain.md.

use std::collections::{BTreeSet, VecDeque};

use coordinator_ir::catalogue;
use serde_json::Value;

use crate::ast::{Mapping, Named, ProjectFile, Step};

/// Renders a mapping in explain form.
pub fn mapping(m: &Mapping) -> String {
    let path = |p: &Option<String>| p.as_deref().map(|p| format!(" {p}")).unwrap_or_default();
    match m {
        Mapping::Input(p) => format!("input{}", path(&p.path)),
        Mapping::Event(p) => format!("event{}", path(&p.path)),
        Mapping::Step(s) => format!("step {}{}", s.step, path(&s.path)),
        Mapping::Literal(l) => literal(&l.value),
        Mapping::Fields(f) => {
            let members: Vec<String> = f
                .fields
                .iter()
                .map(|(k, v)| format!("{k}: {}", mapping(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        Mapping::Function(f) => call(&f.function, f.arguments.as_deref()),
    }
}

/// A literal as JSON text (strings quoted), members in authored order.
fn literal(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn call(function: &str, args: Option<&Named<Mapping>>) -> String {
    let args: Vec<String> = args
        .map(|a| {
            a.iter()
                .map(|(k, v)| format!("{k}: {}", mapping(v)))
                .collect()
        })
        .unwrap_or_default();
    format!("{function}({})", args.join(", "))
}

/// Step names breadth-first from start: successors in the order `next`,
/// cases in declaration order, `onDeclaredRefusal`, `onTimeout`, `onCancel`.
pub fn order(p: &ProjectFile) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut queue = VecDeque::from([p.workflow.start.clone()]);
    while let Some(n) = queue.pop_front() {
        let Some(step) = p.workflow.steps.get(&n) else {
            continue;
        };
        if !seen.insert(n.clone()) {
            continue;
        }
        out.push(n.clone());
        match step {
            Step::Call(c) => {
                queue.push_back(c.next.clone());
                queue.extend(c.on_declared_refusal.clone());
            }
            Step::Choose(c) => queue.extend(c.cases.iter().map(|(_, s)| s.clone())),
            Step::WaitUntil(w) => queue.push_back(w.next.clone()),
            Step::WaitFor(w) => {
                queue.push_back(w.next.clone());
                queue.extend(w.on_timeout.clone());
                queue.extend(w.on_cancel.clone());
            }
            Step::Finish(_) => {}
        }
    }
    out
}

/// One step's line (without indentation).
pub fn step_line(p: &ProjectFile, name: &str, step: &Step) -> String {
    let body = match step {
        Step::WaitUntil(w) => format!("wait until {}, then {}", mapping(&w.until), w.next),
        Step::Call(c) => {
            let (conn, what) = match p.operations.get(&c.operation) {
                Some(a) => {
                    let what = catalogue::lookup(&a.uses)
                        .map(|d| {
                            format!(
                                " ({} {}, recovery {})",
                                d.product.as_str(),
                                d.effect.as_str(),
                                d.recovery.as_str()
                            )
                        })
                        .unwrap_or_default();
                    let action = a
                        .action
                        .as_ref()
                        .map(|x| format!(" action {}", x.id))
                        .unwrap_or_default();
                    (format!("{} ", a.connection), format!("{action}{what}"))
                }
                None => (String::new(), String::new()),
            };
            let refusal = c
                .on_declared_refusal
                .as_ref()
                .map(|r| format!(", on declared refusal {r}"))
                .unwrap_or_default();
            format!(
                "call {conn}{}{what} with {}, then {}{refusal}",
                c.operation,
                mapping(&c.input),
                c.next
            )
        }
        Step::Choose(c) => {
            let cases: Vec<String> = c.cases.iter().map(|(l, s)| format!("{l} -> {s}")).collect();
            format!(
                "choose by {}: {}",
                call(&c.function, c.arguments.as_deref()),
                cases.join(", ")
            )
        }
        Step::WaitFor(w) => {
            let mut s = format!(
                "wait for {} of {} (timeout {}s), then {}",
                w.completion.name, w.completion.step, w.timeout_seconds, w.next
            );
            if let Some(t) = &w.on_timeout {
                s.push_str(&format!(", on timeout {t}"));
            }
            if let Some(t) = &w.on_cancel {
                s.push_str(&format!(", on cancel {t}"));
            }
            s
        }
        Step::Finish(f) => match &f.output {
            Some(m) => format!("finish {} with {}", f.outcome, mapping(m)),
            None => format!("finish {}", f.outcome),
        },
    };
    format!("{name}: {body}")
}

/// The whole explain text: `Steps from start:` and one indented line per step.
pub fn render(p: &ProjectFile) -> String {
    let mut out = String::from("Steps from start:\n");
    for n in order(p) {
        if let Some(step) = p.workflow.steps.get(&n) {
            out.push_str("  ");
            out.push_str(&step_line(p, &n, step));
            out.push('\n');
        }
    }
    out
}
