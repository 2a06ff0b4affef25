//! `test --coverage`: what the scenarios exercised of the workflow
//! (docs/coverage.md). The items that could be reached are the workflow's
//! own, as explain's data lists them (steps, their labelled successors,
//! outcomes) plus the recovery paths the VM offers each call
//! ([`run::recovery_paths`]); whether an item was reached is read only from what the VM
//! did in the cases ([`run::Exercised`]), never from the graph.
//!
//! The percentage counts every item alike: reached items over all items,
//! steps, edges, outcomes and recovery paths together. The moves a case
//! exercised (its run moved to another revision at a wait) are reported
//! beside them, per wait step, and not counted in the percentage: a move
//! is an option of an upgrade, not a route of the workflow.

use coordinator_compiler::explain_data::{EdgeKind, ExplainData, StepData};
use coordinator_ir::pointer::escape_token;
use coordinator_ir::Program;
use coordinator_scenario::run::{self, Edge, EdgeTaken, RecoveryPath};
use coordinator_source::YamlDocument;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// The `$id` of the coverage JSON Schema.
pub const COVERAGE_SCHEMA_ID: &str =
    "https://id.registrystack.org/schemas/coordinator/coverage/coverage.v1beta1.schema.json";

/// The JSON Schema (draft 2020-12) of [`Coverage`], the `coverage` member
/// of `test --format json` (`coordinatorctl schema --kind coverage`,
/// committed as `docs/schemas/coverage.v1beta1.schema.json`).
pub fn schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut v = generator.into_root_schema_for::<Coverage>().to_value();
    if let Value::Object(m) = &mut v {
        m.insert("$id".into(), Value::String(COVERAGE_SCHEMA_ID.into()));
    }
    v
}

/// The coverage of a project's scenarios: one entry per workflow (a
/// project has one), and the figures over all of them.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CoordinatorTestCoverage")]
pub struct Coverage {
    /// Items reached by at least one case.
    pub reached: usize,
    /// Items that could be reached.
    pub total: usize,
    /// `reached / total` as a percentage, rounded down to one decimal
    /// (100.0 only when every item is reached).
    pub percent: f64,
    /// The `--fail-under` threshold (a percentage), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_under: Option<f64>,
    /// Whether `reached / total` is below `failUnder` (false without one).
    pub below_fail_under: bool,
    /// Per workflow.
    pub workflows: Vec<WorkflowCoverage>,
}

/// The coverage of one workflow.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowCoverage {
    /// The workflow name (`project.id`).
    pub workflow: String,
    /// The file positions refer to (`workflow.yaml` as displayed).
    pub file: String,
    /// Items reached.
    pub reached: usize,
    /// Items that could be reached.
    pub total: usize,
    /// `reached / total` as a percentage, rounded down to one decimal.
    pub percent: f64,
    /// The figures by kind of item.
    pub kinds: Kinds,
    /// Every item, reached or not: the steps in explain's order, then the
    /// edges (by step, in explain's successor order), the outcomes in
    /// declaration order, and the recovery paths by call step.
    pub items: Vec<Item>,
    /// The moves the cases exercised, per wait step (not counted in
    /// `reached`, `total` or `percent`).
    pub moves: MoveCoverage,
}

/// The moves to another revision the cases exercised: per wait step where
/// a run can move (`wait-until`, `wait-for`), the cases whose run moved
/// there (a case's `move`, docs/scenarios.md "Moves").
#[derive(Clone, Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveCoverage {
    /// Wait steps where a case's run moved.
    pub exercised: usize,
    /// Wait steps where a run can move.
    pub waits: usize,
    /// Per wait step, in explain's order.
    pub items: Vec<MoveItem>,
}

/// One wait step and the cases whose run moved there.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveItem {
    /// The wait step.
    pub step: String,
    /// Whether a case's run moved there.
    pub exercised: bool,
    /// The ids of the cases whose run moved there, in file order.
    pub cases: Vec<String>,
    /// 1-based line in `file` (0 when the file could not be read again).
    pub line: u32,
    /// 1-based column in `file`.
    pub column: u32,
    /// The JSON Pointer of the step in `workflow.yaml`.
    pub pointer: String,
}

/// The figures by kind of item.
#[derive(Clone, Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Kinds {
    /// Steps entered.
    pub steps: Tally,
    /// Successor edges taken.
    pub edges: Tally,
    /// Outcomes ended with.
    pub outcomes: Tally,
    /// Recovery paths taken.
    pub recoveries: Tally,
}

/// Reached of total.
#[derive(Clone, Copy, Debug, Default, Serialize, JsonSchema)]
pub struct Tally {
    /// Items reached.
    pub reached: usize,
    /// Items that could be reached.
    pub total: usize,
}

/// The kind of an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ItemKind {
    /// A step entered.
    Step,
    /// A successor edge taken (`next`, a case, `onDeclaredRefusal`,
    /// `onTimeout`, `onCancel`).
    Edge,
    /// An outcome a run ended with.
    Outcome,
    /// A recovery path of a call: `held`, `retry-same`, `reconcile`.
    Recovery,
}

/// The authored member an edge comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum EdgeMember {
    /// `next` of a call, wait-until or wait-for.
    Next,
    /// A case of a choose (its label is `label`).
    Case,
    /// `onDeclaredRefusal` of a call.
    OnDeclaredRefusal,
    /// `onTimeout` of a wait-for.
    OnTimeout,
    /// `onCancel` of a wait-for.
    OnCancel,
}

impl EdgeMember {
    /// The member's name in `workflow.yaml` (`cases` for a case).
    fn as_str(self) -> &'static str {
        match self {
            EdgeMember::Next => "next",
            EdgeMember::Case => "case",
            EdgeMember::OnDeclaredRefusal => "onDeclaredRefusal",
            EdgeMember::OnTimeout => "onTimeout",
            EdgeMember::OnCancel => "onCancel",
        }
    }
}

/// A recovery path of a call whose effect may be unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryName {
    /// An uncertain answer held the run for an operator (`attention`,
    /// effect `unknown`).
    Held,
    /// The operator's `retry-same` was applied.
    RetrySame,
    /// The operator's `reconcile` was applied.
    Reconcile,
}

impl RecoveryName {
    fn of(path: RecoveryPath) -> RecoveryName {
        match path {
            RecoveryPath::Held => RecoveryName::Held,
            RecoveryPath::RetrySame => RecoveryName::RetrySame,
            RecoveryPath::Reconcile => RecoveryName::Reconcile,
        }
    }
}

/// One thing the scenarios could reach.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    /// What the item is.
    pub kind: ItemKind,
    /// The step (of a step, an edge's source, a recovery's call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// An edge's authored member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeMember>,
    /// A case edge's label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The step an edge leads to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// An outcome's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// A recovery path of the call `step`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryName>,
    /// Whether a case reached it.
    pub reached: bool,
    /// The ids of the cases that reached it, in file order.
    pub cases: Vec<String>,
    /// 1-based line in `file` (0 when the file could not be read again).
    pub line: u32,
    /// 1-based column in `file`.
    pub column: u32,
    /// The JSON Pointer of the authored member in `workflow.yaml`.
    pub pointer: String,
}

impl Item {
    fn new(kind: ItemKind, step: Option<&str>) -> Item {
        Item {
            kind,
            step: step.map(str::to_owned),
            edge: None,
            label: None,
            to: None,
            outcome: None,
            recovery: None,
            reached: false,
            cases: Vec::new(),
            line: 0,
            column: 0,
            pointer: String::new(),
        }
    }

    /// One line saying what the item is (`step notify`, `edge permission
    /// -> skipped (case skip)`, `outcome accepted`, `recovery notify:
    /// retry-same`).
    pub fn describe(&self) -> String {
        let step = self.step.as_deref().unwrap_or("");
        match self.kind {
            ItemKind::Step => format!("step {step}"),
            ItemKind::Edge => {
                let member = match (&self.label, self.edge) {
                    (Some(label), _) => format!("case {label}"),
                    (None, edge) => edge.map(EdgeMember::as_str).unwrap_or("").to_owned(),
                };
                format!(
                    "edge {step} -> {} ({member})",
                    self.to.as_deref().unwrap_or("")
                )
            }
            ItemKind::Outcome => format!("outcome {}", self.outcome.as_deref().unwrap_or("")),
            ItemKind::Recovery => match self.recovery {
                Some(RecoveryName::Held) => format!("recovery {step}: uncertain answer held"),
                Some(RecoveryName::RetrySame) => format!("recovery {step}: retry-same"),
                Some(RecoveryName::Reconcile) => format!("recovery {step}: reconcile"),
                None => format!("recovery {step}"),
            },
        }
    }
}

/// `reached / total` as a percentage rounded down to one decimal.
pub fn percent(reached: usize, total: usize) -> f64 {
    if total == 0 {
        return 100.0;
    }
    // Whole tenths of a percent, rounded down; exact in u128.
    let tenths = (reached as u128 * 1000) / total as u128;
    tenths as f64 / 10.0
}

/// Whether `reached / total` is below `threshold` percent (exactly, not
/// on the rounded figure).
pub fn below(reached: usize, total: usize, threshold: f64) -> bool {
    total > 0 && (reached as f64) * 100.0 < threshold * (total as f64)
}

fn steps_pointer(step: &str) -> String {
    format!("/workflow/steps/{}", escape_token(step))
}

fn step_items(ir: &ExplainData) -> Vec<Item> {
    ir.steps
        .iter()
        .map(|s| {
            let mut item = Item::new(ItemKind::Step, Some(&s.id));
            item.pointer = steps_pointer(&s.id);
            item
        })
        .collect()
}

/// The VM's name for an explain edge, and the edge's item.
fn edge_items(step: &StepData) -> Vec<(EdgeTaken, Item)> {
    step.successors
        .iter()
        .map(|e| {
            let (edge, member) = match e.kind {
                EdgeKind::Next => (Edge::Next, EdgeMember::Next),
                EdgeKind::Case => (
                    Edge::Case {
                        label: e.label.clone(),
                    },
                    EdgeMember::Case,
                ),
                EdgeKind::OnDeclaredRefusal => {
                    (Edge::OnDeclaredRefusal, EdgeMember::OnDeclaredRefusal)
                }
                EdgeKind::OnTimeout => (Edge::OnTimeout, EdgeMember::OnTimeout),
                EdgeKind::OnCancel => (Edge::OnCancel, EdgeMember::OnCancel),
            };
            let pointer = match member {
                EdgeMember::Case => format!("cases/{}", escape_token(&e.label)),
                other => other.as_str().to_owned(),
            };
            let mut item = Item::new(ItemKind::Edge, Some(&step.id));
            item.edge = Some(member);
            item.label = (e.kind == EdgeKind::Case).then(|| e.label.clone());
            item.to = Some(e.to.clone());
            item.pointer = format!("{}/{pointer}", steps_pointer(&step.id));
            let taken = EdgeTaken {
                from: step.id.clone(),
                edge,
                to: e.to.clone(),
            };
            (taken, item)
        })
        .collect()
}

/// The recovery paths of call `step`, each with its item.
fn recovery_items(program: &Program, step: &StepData) -> Vec<(RecoveryPath, Item)> {
    run::recovery_paths(program, &step.id)
        .into_iter()
        .map(|path| {
            let mut item = Item::new(ItemKind::Recovery, Some(&step.id));
            item.recovery = Some(RecoveryName::of(path));
            item.pointer = format!("{}/operation", steps_pointer(&step.id));
            (path, item)
        })
        .collect()
}

/// The coverage of the workflow `ir` (compiled to `program`) by the cases
/// `reports`; positions from `doc` (`workflow.yaml`, `None` when it could
/// not be read again: every position is then 0).
pub fn workflow(
    ir: &ExplainData,
    program: &Program,
    doc: Option<&YamlDocument>,
    file: &str,
    reports: &[run::CaseReport],
) -> WorkflowCoverage {
    let reached_by = |hit: &dyn Fn(&run::Exercised) -> bool| -> Vec<String> {
        reports
            .iter()
            .filter(|r| hit(&r.exercised))
            .map(|r| r.id.clone())
            .collect()
    };
    let mut kinds = Kinds::default();
    let mut items = Vec::new();
    for mut item in step_items(ir) {
        let name = item.step.clone().unwrap_or_default();
        item.cases = reached_by(&|e| e.steps.contains(&name));
        tally(&mut kinds.steps, &mut item);
        items.push(item);
    }
    for step in &ir.steps {
        for (taken, mut item) in edge_items(step) {
            item.cases = reached_by(&|e| e.edges.contains(&taken));
            tally(&mut kinds.edges, &mut item);
            items.push(item);
        }
    }
    for outcome in &ir.outcomes {
        let mut item = Item::new(ItemKind::Outcome, None);
        item.outcome = Some(outcome.name.clone());
        item.pointer = format!("/workflow/outcomes/{}", escape_token(&outcome.name));
        item.cases = reached_by(&|e| e.outcomes.contains(&outcome.name));
        tally(&mut kinds.outcomes, &mut item);
        items.push(item);
    }
    for step in &ir.steps {
        for (path, mut item) in recovery_items(program, step) {
            let key = (step.id.clone(), path);
            item.cases = reached_by(&|e| e.recoveries.contains(&key));
            tally(&mut kinds.recoveries, &mut item);
            items.push(item);
        }
    }
    let mut moves = move_items(program, ir, reports);
    if let Some(doc) = doc {
        for item in &mut items {
            let at = doc.locate_key(&item.pointer);
            item.line = at.line;
            item.column = at.column;
        }
        for item in &mut moves.items {
            let at = doc.locate_key(&item.pointer);
            item.line = at.line;
            item.column = at.column;
        }
    }
    let reached = items.iter().filter(|i| i.reached).count();
    WorkflowCoverage {
        workflow: ir.workflow.clone(),
        file: file.to_owned(),
        reached,
        total: items.len(),
        percent: percent(reached, items.len()),
        kinds,
        items,
        moves,
    }
}

/// The wait steps where a run can move, each with the cases whose run
/// moved there ([`run::Exercised::moves`]).
fn move_items(program: &Program, ir: &ExplainData, reports: &[run::CaseReport]) -> MoveCoverage {
    let items: Vec<MoveItem> = ir
        .steps
        .iter()
        .filter(|s| coordinator_scenario::moves::is_movable_wait(program, &s.id))
        .map(|s| {
            let cases: Vec<String> = reports
                .iter()
                .filter(|r| r.exercised.moves.contains(&s.id))
                .map(|r| r.id.clone())
                .collect();
            MoveItem {
                step: s.id.clone(),
                exercised: !cases.is_empty(),
                cases,
                line: 0,
                column: 0,
                pointer: steps_pointer(&s.id),
            }
        })
        .collect();
    MoveCoverage {
        exercised: items.iter().filter(|i| i.exercised).count(),
        waits: items.len(),
        items,
    }
}

fn tally(t: &mut Tally, item: &mut Item) {
    item.reached = !item.cases.is_empty();
    t.total += 1;
    t.reached += usize::from(item.reached);
}

/// The coverage over `workflows`, held to `fail_under` when given.
pub fn project(workflows: Vec<WorkflowCoverage>, fail_under: Option<f64>) -> Coverage {
    let reached = workflows.iter().map(|w| w.reached).sum();
    let total = workflows.iter().map(|w| w.total).sum();
    Coverage {
        reached,
        total,
        percent: percent(reached, total),
        fail_under,
        below_fail_under: fail_under.is_some_and(|t| below(reached, total, t)),
        workflows,
    }
}

/// The text form (docs/coverage.md): per workflow the figures, then each
/// unreached item at its `FILE:LINE:COLUMN`, in file order; last, when the
/// figure is below `--fail-under`, a line saying so.
pub fn render_text(c: &Coverage) -> String {
    let mut out = String::new();
    for w in &c.workflows {
        let k = &w.kinds;
        out.push_str(&format!(
            "coverage {}: {} of {} reached ({:.1}%): steps {}/{}, edges {}/{}, outcomes {}/{}, recovery paths {}/{}\n",
            w.workflow,
            w.reached,
            w.total,
            w.percent,
            k.steps.reached,
            k.steps.total,
            k.edges.reached,
            k.edges.total,
            k.outcomes.reached,
            k.outcomes.total,
            k.recoveries.reached,
            k.recoveries.total,
        ));
        if w.moves.exercised > 0 {
            let at: Vec<String> = w
                .moves
                .items
                .iter()
                .filter(|i| i.exercised)
                .map(|i| {
                    let n = i.cases.len();
                    format!("{} ({n} case{})", i.step, if n == 1 { "" } else { "s" })
                })
                .collect();
            out.push_str(&format!(
                "  moves exercised at {} of {} wait steps: {}\n",
                w.moves.exercised,
                w.moves.waits,
                at.join(", ")
            ));
        }
        let mut unreached: Vec<&Item> = w.items.iter().filter(|i| !i.reached).collect();
        unreached.sort_by_key(|i| (i.line, i.column));
        for item in unreached {
            out.push_str(&format!(
                "  unreached {}:{}:{} {}\n",
                w.file,
                item.line,
                item.column,
                item.describe()
            ));
        }
    }
    if let (Some(t), true) = (c.fail_under, c.below_fail_under) {
        out.push_str(&format!(
            "coverage {:.1}% is below --fail-under {t}\n",
            c.percent
        ));
    }
    out
}
