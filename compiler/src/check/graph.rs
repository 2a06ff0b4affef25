//! The step graph, built once from the workflow ([`Graph::new`]), and what
//! is computed over it: the steps reachable from `start`, the back edges of
//! cycles, the steps from which a finish is reachable, and the
//! must-dataflow of completed steps that `type: step` mappings, Function
//! arguments bound by type and `wait-for` read. The checker's part
//! ([`Checker::check_graph`]) turns these into diagnostics
//! (`coordinator.step.unknown`, `coordinator.graph.*`,
//! `coordinator.outcome.unused`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::ast::{Named, ProjectFile, Step};
use crate::codes;
use coordinator_ir::pointer::escape_token;
use coordinator_ir::{Program, StepOp};

use super::{names, step_ptr, Checker};

/// Which output a step has on a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Variant {
    /// A call's `next` route.
    Success,
    /// A call's `onDeclaredRefusal` route.
    Refusal,
    /// A wait-for's `next` route.
    Completion,
}

/// Step name → the outputs it may have at a point: a step is present when
/// it has completed on every route from `start` to that point, with every
/// output it may have there (more than one where routes join).
pub(crate) type Facts = BTreeMap<String, BTreeSet<Variant>>;

/// One successor of a step, as authored.
#[derive(Clone, Debug)]
pub(crate) struct Edge {
    /// The step the edge leads to; it may name no step
    /// (`coordinator.step.unknown`).
    pub target: String,
    /// JSON Pointer of the authored reference (`…/next`, `…/cases/LABEL`,
    /// `…/onDeclaredRefusal`, `…/onTimeout`, `…/onCancel`).
    pub pointer: String,
    /// Whether the edge is a case of a `choose`.
    pub case: bool,
    /// The output the edge adds: a call's success or declared refusal, a
    /// wait-for's completion; `None` for the other edges.
    pub adds: Option<(String, Variant)>,
}

/// A cycle found by [`Graph::cycles`]: the back edge's pointer and the
/// route from the step it returns to, back to that step.
pub(crate) struct Cycle {
    /// Where the back edge is authored.
    pub pointer: String,
    /// The step it returns to.
    pub target: String,
    /// The steps from `target` around to `target` again.
    pub route: Vec<String>,
}

/// The successors of every step, computed once. Steps keep their
/// declaration order; each step's edges keep explain order (`next`, then
/// `onDeclaredRefusal`; the cases in order; `next`, `onTimeout`,
/// `onCancel`).
pub(crate) struct Graph {
    order: Vec<String>,
    edges: BTreeMap<String, Vec<Edge>>,
    finishes: BTreeSet<String>,
}

fn edge(target: &str, pointer: String, adds: Option<(String, Variant)>) -> Edge {
    Edge {
        target: target.to_owned(),
        pointer,
        case: false,
        adds,
    }
}

impl Graph {
    /// The graph of `steps`.
    pub fn new(steps: &Named<Step>) -> Graph {
        let mut order = Vec::new();
        let mut edges = BTreeMap::new();
        let mut finishes = BTreeSet::new();
        for (name, step) in steps.iter() {
            let sp = step_ptr(name);
            let me = name.clone();
            let out = match step {
                Step::Call(c) => {
                    let mut v = vec![edge(
                        &c.next,
                        format!("{sp}/next"),
                        Some((me.clone(), Variant::Success)),
                    )];
                    if let Some(r) = &c.on_declared_refusal {
                        v.push(edge(
                            r,
                            format!("{sp}/onDeclaredRefusal"),
                            Some((me, Variant::Refusal)),
                        ));
                    }
                    v
                }
                Step::Choose(c) => c
                    .cases
                    .iter()
                    .map(|(label, target)| Edge {
                        case: true,
                        ..edge(target, format!("{sp}/cases/{}", escape_token(label)), None)
                    })
                    .collect(),
                Step::WaitUntil(w) => vec![edge(&w.next, format!("{sp}/next"), None)],
                Step::WaitFor(w) => {
                    let mut v = vec![edge(
                        &w.next,
                        format!("{sp}/next"),
                        Some((me, Variant::Completion)),
                    )];
                    if let Some(t) = &w.on_timeout {
                        v.push(edge(t, format!("{sp}/onTimeout"), None));
                    }
                    if let Some(t) = &w.on_cancel {
                        v.push(edge(t, format!("{sp}/onCancel"), None));
                    }
                    v
                }
                Step::Finish(_) => {
                    finishes.insert(name.clone());
                    Vec::new()
                }
            };
            order.push(name.clone());
            edges.insert(name.clone(), out);
        }
        Graph {
            order,
            edges,
            finishes,
        }
    }

    /// The graph of a compiled Program's steps (a package's, or the
    /// Program of a project checked earlier): the same edges as
    /// [`Graph::new`] gives the authored steps, without their pointers
    /// (empty). An index outside the Program is an edge to no step.
    pub fn from_program(program: &Program) -> Graph {
        let name = |id: coordinator_ir::StepId| {
            program
                .steps
                .get(id.index())
                .map_or_else(String::new, |s| s.name.clone())
        };
        let plain = |id| edge(&name(id), String::new(), None);
        let mut order = Vec::new();
        let mut edges = BTreeMap::new();
        let mut finishes = BTreeSet::new();
        for step in &program.steps {
            let me = step.name.clone();
            let out = match &step.op {
                StepOp::Call {
                    next,
                    on_declared_refusal,
                    ..
                } => {
                    let mut v = vec![edge(
                        &name(*next),
                        String::new(),
                        Some((me.clone(), Variant::Success)),
                    )];
                    if let Some(r) = on_declared_refusal {
                        v.push(edge(
                            &name(*r),
                            String::new(),
                            Some((me.clone(), Variant::Refusal)),
                        ));
                    }
                    v
                }
                StepOp::Choose { cases, .. } => cases
                    .iter()
                    .map(|c| Edge {
                        case: true,
                        ..plain(c.step)
                    })
                    .collect(),
                StepOp::WaitUntil { next, .. } => vec![plain(*next)],
                StepOp::WaitFor {
                    next,
                    on_timeout,
                    on_cancel,
                    ..
                } => {
                    let mut v = vec![edge(
                        &name(*next),
                        String::new(),
                        Some((me.clone(), Variant::Completion)),
                    )];
                    v.extend(on_timeout.iter().chain(on_cancel).map(|t| plain(*t)));
                    v
                }
                StepOp::Finish { .. } => {
                    finishes.insert(me.clone());
                    Vec::new()
                }
            };
            order.push(me.clone());
            edges.insert(me, out);
        }
        Graph {
            order,
            edges,
            finishes,
        }
    }

    /// Whether `name` is a step.
    pub fn has(&self, name: &str) -> bool {
        self.edges.contains_key(name)
    }

    /// The successors of `step` (none for a finish or an unknown name).
    pub fn successors(&self, step: &str) -> &[Edge] {
        self.edges.get(step).map_or(&[], Vec::as_slice)
    }

    /// Every edge whose target is no step, in declaration order.
    pub fn dangling(&self) -> impl Iterator<Item = &Edge> {
        self.order
            .iter()
            .flat_map(|n| self.successors(n))
            .filter(|e| !self.has(&e.target))
    }

    /// The steps reachable from `start`, in breadth-first order (empty when
    /// `start` is no step).
    pub fn reachable(&self, start: &str) -> Vec<String> {
        let mut reach = Vec::new();
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::new();
        if self.has(start) {
            queue.push_back(start.to_owned());
        }
        while let Some(n) = queue.pop_front() {
            if !seen.insert(n.clone()) {
                continue;
            }
            for e in self.successors(&n) {
                if self.has(&e.target) {
                    queue.push_back(e.target.clone());
                }
            }
            reach.push(n);
        }
        reach
    }

    /// Every back edge of a depth-first search from each step in
    /// declaration order: one [`Cycle`] per back edge. A case edge is
    /// reported at the first case of its step that leads to the same step.
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut color: BTreeMap<&str, u8> = BTreeMap::new();
        let mut stack: Vec<&str> = Vec::new();
        let mut found = Vec::new();
        for root in &self.order {
            if color.get(root.as_str()).copied().unwrap_or(0) == 0 {
                self.dfs(root, &mut color, &mut stack, &mut found);
            }
        }
        found
    }

    fn dfs<'g>(
        &'g self,
        n: &'g str,
        color: &mut BTreeMap<&'g str, u8>,
        stack: &mut Vec<&'g str>,
        found: &mut Vec<Cycle>,
    ) {
        color.insert(n, 1);
        stack.push(n);
        let out = self.successors(n);
        for e in out.iter().filter(|e| self.has(&e.target)) {
            match color.get(e.target.as_str()).copied().unwrap_or(0) {
                0 => self.dfs(&e.target, color, stack, found),
                1 => {
                    let from = stack.iter().position(|x| *x == e.target).unwrap_or(0);
                    let mut route: Vec<String> = stack
                        .get(from..)
                        .unwrap_or_default()
                        .iter()
                        .map(|s| (*s).to_owned())
                        .collect();
                    route.push(e.target.clone());
                    let pointer = if e.case {
                        out.iter()
                            .find(|x| x.case && x.target == e.target)
                            .unwrap_or(e)
                            .pointer
                            .clone()
                    } else {
                        e.pointer.clone()
                    };
                    found.push(Cycle {
                        pointer,
                        target: e.target.clone(),
                        route,
                    });
                }
                _ => {}
            }
        }
        stack.pop();
        color.insert(n, 2);
    }

    /// The steps from which some route reaches a finish (finishes included).
    pub fn reaching_finish(&self) -> BTreeSet<String> {
        let mut preds: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (n, out) in &self.edges {
            for e in out {
                preds.entry(e.target.as_str()).or_default().push(n);
            }
        }
        let mut ends = self.finishes.clone();
        let mut queue: VecDeque<&str> = self.finishes.iter().map(String::as_str).collect();
        while let Some(n) = queue.pop_front() {
            for p in preds.get(n).into_iter().flatten() {
                if ends.insert((*p).to_owned()) {
                    queue.push_back(p);
                }
            }
        }
        ends
    }

    /// The must-dataflow of completed steps: for every step reachable from
    /// `start`, the [`Facts`] that hold on every route reaching it (the
    /// greatest fixpoint; `start` has no route before it, so it holds none).
    ///
    /// A worklist: a step is queued again only when its facts change, and
    /// they only ever descend (the new facts are the meet of the old ones
    /// and the incoming ones), while each step's facts can descend at most
    /// `3 × steps + 1` times (a first value, then each step dropped once or
    /// given one more of its three variants twice). So the loop ends after at
    /// most `steps × (3 × steps + 1)` turns, on cyclic graphs too, with no
    /// cap that could cut it short.
    pub fn must_complete(&self, start: &str) -> BTreeMap<String, Facts> {
        self.must_complete_from(start, Facts::new())
    }

    /// The must-dataflow of [`Graph::must_complete`] from a run already at
    /// `start` with the steps `completed` (another revision's state: the
    /// steps carried by a move). The same worklist, whose facts at `start`
    /// are `completed` rather than none.
    pub fn must_complete_from(&self, start: &str, completed: Facts) -> BTreeMap<String, Facts> {
        let mut facts: BTreeMap<String, Facts> = BTreeMap::new();
        if !self.has(start) {
            return facts;
        }
        facts.insert(start.to_owned(), completed);
        let mut queue: VecDeque<&str> = VecDeque::from([start]);
        let mut queued: BTreeSet<&str> = BTreeSet::from([start]);
        while let Some(n) = queue.pop_front() {
            queued.remove(n);
            let Some(here) = facts.get(n).cloned() else {
                continue;
            };
            for e in self.successors(n) {
                if e.target == start || !self.has(&e.target) {
                    continue;
                }
                let mut out = here.clone();
                if let Some((k, v)) = &e.adds {
                    out.insert(k.clone(), BTreeSet::from([*v]));
                }
                let next = match facts.get(&e.target) {
                    None => out,
                    Some(old) => meet(old, &out),
                };
                if facts.get(&e.target) != Some(&next) {
                    facts.insert(e.target.clone(), next);
                    if queued.insert(&e.target) {
                        queue.push_back(&e.target);
                    }
                }
            }
        }
        facts
    }

    /// The steps from which some route reaches `target` (not `target`
    /// itself), in declaration order.
    pub fn leading_to(&self, target: &str) -> Vec<String> {
        self.order
            .iter()
            .filter(|n| n.as_str() != target && self.reachable(n).iter().any(|r| r == target))
            .cloned()
            .collect()
    }

    /// One route from `start` to `target` on which `missing` did not
    /// complete, as `a -> b -> c` (just `target` when there is none).
    pub fn route_without(&self, start: &str, target: &str, missing: &str) -> String {
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = VecDeque::from([start.to_owned()]);
        let mut seen = BTreeSet::from([start.to_owned()]);
        while let Some(n) = queue.pop_front() {
            if n == target {
                let mut route = vec![n.clone()];
                let mut cur = n;
                while let Some(p) = parent.get(&cur) {
                    route.push(p.clone());
                    cur = p.clone();
                }
                route.reverse();
                return route.join(" -> ");
            }
            for e in self.successors(&n) {
                if e.adds.as_ref().is_some_and(|(k, _)| k == missing) {
                    continue;
                }
                if seen.insert(e.target.clone()) {
                    parent.insert(e.target.clone(), n.clone());
                    queue.push_back(e.target.clone());
                }
            }
        }
        target.to_owned()
    }
}

/// The meet of two facts: the steps completed on both, with the outputs
/// either may have.
fn meet(a: &Facts, b: &Facts) -> Facts {
    let mut out = Facts::new();
    for (k, va) in a {
        if let Some(vb) = b.get(k) {
            out.insert(k.clone(), va.union(vb).copied().collect());
        }
    }
    out
}

impl<'a> Checker<'a> {
    /// The graph checks: every reference names a step, every step is
    /// reachable from `start`, the graph is acyclic, every route ends in a
    /// finish, every outcome is used. Returns the must-dataflow facts of
    /// every reachable step.
    pub(super) fn check_graph(&mut self) -> BTreeMap<String, Facts> {
        let p: &'a ProjectFile = self.p;
        let wf = &p.workflow;
        let steps = &wf.steps;
        let all = names(steps.iter().map(|(k, _)| k));
        if !self.graph.has(&wf.start) {
            self.err(
                codes::STEP_UNKNOWN,
                "/workflow/start",
                format!("start names no step: `{}`", wf.start),
                format!("Set start to one of: {all}."),
            );
        }
        let dangling: Vec<Edge> = self.graph.dangling().cloned().collect();
        for e in &dangling {
            self.err(
                codes::STEP_UNKNOWN,
                &e.pointer,
                format!("`{}` is not a step of this workflow", e.target),
                format!("Name one of the declared steps: {all}."),
            );
        }
        let broken_refs = !self.graph.has(&wf.start) || !dangling.is_empty();
        let reach = self.graph.reachable(&wf.start);
        if self.graph.has(&wf.start) && !broken_refs {
            let seen: BTreeSet<&String> = reach.iter().collect();
            for (name, _) in steps.iter().filter(|(n, _)| !seen.contains(n)) {
                self.err_key(
                    codes::GRAPH_UNREACHABLE,
                    &step_ptr(name),
                    format!("step `{name}` is not reachable from start `{}`", wf.start),
                    "Route to the step from an earlier step, or remove it.",
                );
            }
        }
        let graph = &self.graph;
        let cycles = graph.cycles();
        let ends = graph.reaching_finish();
        let facts = graph.must_complete(&wf.start);
        for c in cycles {
            self.err(
                codes::GRAPH_CYCLE,
                &c.pointer,
                format!(
                    "the route {} returns to `{}`; a workflow must be acyclic",
                    c.route.join(" -> "),
                    c.target
                ),
                "Route forward to a later step; to repeat work, start another run.",
            );
        }
        for name in reach.iter().filter(|_| !broken_refs) {
            if !ends.contains(name) {
                self.err_key(
                    codes::GRAPH_NO_FINISH,
                    &step_ptr(name),
                    format!("no route from step `{name}` reaches a finish"),
                    "Route every path to a `finish` step.",
                );
            }
        }
        let used: BTreeSet<&str> = steps
            .iter()
            .filter_map(|(_, s)| match s {
                Step::Finish(f) => Some(f.outcome.as_str()),
                Step::Call(_) | Step::Choose(_) | Step::WaitUntil(_) | Step::WaitFor(_) => None,
            })
            .collect();
        for (name, _) in wf.outcomes.iter() {
            if !used.contains(name.as_str()) {
                self.err_key(
                    codes::OUTCOME_UNUSED,
                    &format!("/workflow/outcomes/{}", escape_token(name)),
                    format!("outcome `{name}` is declared but no finish step ends with it"),
                    "Finish with the outcome on some route, or remove it.",
                );
            }
        }
        facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn graph(steps: serde_json::Value) -> Graph {
        let steps: Named<Step> = serde_json::from_value(steps).expect("steps");
        Graph::new(&steps)
    }

    fn call(next: &str) -> serde_json::Value {
        json!({"type": "call", "operation": "op", "input": {"type": "literal", "value": 1}, "next": next})
    }

    fn choose(cases: serde_json::Value) -> serde_json::Value {
        json!({"type": "choose", "function": "f", "cases": cases})
    }

    fn finish() -> serde_json::Value {
        json!({"type": "finish", "outcome": "done"})
    }

    fn done(steps: &[&str]) -> Facts {
        steps
            .iter()
            .map(|s| ((*s).to_owned(), BTreeSet::from([Variant::Success])))
            .collect()
    }

    #[test]
    fn the_dataflow_meets_routes_and_ends_on_a_cycle() {
        // s -> a -> b; b loops back to a or leaves to f.
        let g = graph(json!({
            "s": {"type": "wait-until", "until": {"type": "literal", "value": "2026-01-01T00:00:00Z"}, "next": "a"},
            "a": call("b"),
            "b": choose(json!({"again": "a", "out": "f"})),
            "f": finish(),
        }));
        let facts = g.must_complete("s");
        assert_eq!(facts.get("s"), Some(&Facts::new()));
        assert_eq!(facts.get("a"), Some(&Facts::new()));
        assert_eq!(facts.get("b"), Some(&done(&["a"])));
        assert_eq!(facts.get("f"), Some(&done(&["a"])));
        let cycles = g.cycles();
        assert_eq!(cycles.len(), 1);
        let c = cycles.first().expect("one cycle");
        assert_eq!(c.pointer, "/workflow/steps/b/cases/again");
        assert_eq!(c.route, ["a", "b", "a"]);
    }

    #[test]
    fn the_dataflow_reaches_its_fixpoint_on_long_graphs() {
        // A chain of 400 calls with a bypass around every other one: the
        // facts at the end name exactly the calls no bypass skips.
        let n = 400;
        let mut steps = serde_json::Map::new();
        for i in 0..n {
            let next = format!("c{}", i + 1);
            if i % 2 == 0 {
                steps.insert(
                    format!("c{i}"),
                    choose(json!({"do": format!("k{i}"), "skip": next})),
                );
                steps.insert(format!("k{i}"), call(&next));
            } else {
                steps.insert(format!("c{i}"), call(&next));
            }
        }
        steps.insert(format!("c{n}"), finish());
        let g = graph(serde_json::Value::Object(steps));
        let facts = g.must_complete("c0");
        let want: BTreeSet<String> = (0..n)
            .filter(|i| i % 2 == 1)
            .map(|i| format!("c{i}"))
            .collect();
        let got: BTreeSet<String> = facts
            .get(&format!("c{n}"))
            .expect("reached")
            .keys()
            .cloned()
            .collect();
        assert_eq!(got, want);
        assert_eq!(g.reachable("c0").len(), facts.len());
        assert!(g.cycles().is_empty());
        assert_eq!(g.reaching_finish().len(), facts.len());
    }

    #[test]
    fn routes_without_a_step_and_dangling_edges() {
        let g = graph(json!({
            "a": choose(json!({"x": "b", "y": "c"})),
            "b": call("c"),
            "c": call("nowhere"),
        }));
        assert_eq!(g.route_without("a", "c", "b"), "a -> c");
        assert_eq!(g.route_without("a", "b", "a"), "a -> b");
        let dangling: Vec<&str> = g.dangling().map(|e| e.pointer.as_str()).collect();
        assert_eq!(dangling, ["/workflow/steps/c/next"]);
        assert!(g.reaching_finish().is_empty());
    }
}
