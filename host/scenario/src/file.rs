//! `scenarios.yaml` (CoordinatorScenarios, SPEC §7): types, strict reading,
//! and the checks that need the compiled Program (step names and kinds).

mod checks;

use std::collections::BTreeMap;

use coordinator_ir::Program;
use coordinator_source::{Diagnostic, YamlDocument};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::targets::MoveTargets;
use checks::ScenarioChecks;

/// `apiVersion` of the scenarios format (SPEC §1).
pub const SCENARIOS_API_VERSION: &str =
    "id.registrystack.org/formats/coordinator/scenarios/v1beta1";
/// `kind` of the scenarios format.
pub const SCENARIOS_KIND: &str = "CoordinatorScenarios";
/// `$id` of the scenarios JSON Schema.
pub const SCENARIOS_SCHEMA_ID: &str =
    "https://id.registrystack.org/schemas/coordinator/scenarios/scenarios.v1beta1.schema.json";

/// Most replies scripted for one call step (SPEC §7: 1..8).
pub const MAX_REPLIES: usize = 8;

/// The whole `scenarios.yaml` file.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioFile {
    /// Always [`SCENARIOS_API_VERSION`].
    pub api_version: String,
    /// Always [`SCENARIOS_KIND`].
    pub kind: String,
    /// The cases, run in this order.
    pub cases: Vec<Case>,
}

/// One scenario case.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Case {
    /// The case label (`^[a-z][a-z0-9-]{0,63}$`), printed by `test`.
    pub id: String,
    /// RFC 3339 instant at which the run is admitted; the virtual clock starts here.
    pub admitted_at: String,
    /// The run input.
    pub input: Value,
    /// Per call step, the replies it receives, consumed in order (1..=8).
    #[serde(default)]
    pub replies: BTreeMap<String, Vec<Reply>>,
    /// Per wait-for step, what its completion does.
    #[serde(default)]
    pub completions: BTreeMap<String, CompletionScript>,
    /// A cancel request at a virtual time.
    #[serde(default)]
    pub cancel: Option<CancelScript>,
    /// Per call step, what the operator does after every unknown answer.
    #[serde(default)]
    pub recovery: BTreeMap<String, RecoveryAction>,
    /// A move of the run to another revision of the workflow at one of its
    /// waits (docs/scenarios.md "Moves").
    #[serde(default, rename = "move")]
    pub move_to: Option<CaseMove>,
    /// What the case asserts.
    pub expect: Expect,
}

/// Where a case's run moves: as soon as it waits at `step`, it moves to
/// the project `project` (revision B of the same workflow) and goes on
/// there on the same virtual clock. `replies`, `completions` and
/// `recovery` name B's steps after the move; `expect.path` lists this
/// workflow's steps up to the wait, then B's.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CaseMove {
    /// B's project directory, relative to the directory of the scenarios
    /// file.
    pub project: String,
    /// The `wait-until` or `wait-for` step of this workflow where the run
    /// moves.
    pub step: String,
    /// B's step the run then waits at, when B renamed the wait (`step`
    /// when absent).
    #[serde(default)]
    pub to: Option<String>,
}

impl CaseMove {
    /// B's step the run waits at after the move: `to`, else `step`.
    pub fn target_step(&self) -> &str {
        self.to.as_deref().unwrap_or(&self.step)
    }

    /// The VM's move of this case's run from `from` to `to`: from `step`
    /// to [`CaseMove::target_step`], carrying what
    /// [`coordinator_ir::carried::carried_steps`] says (the rule the move
    /// certificate is written with).
    pub fn vm_target(&self, from: &Program, to: &Program) -> coordinator_vm::MoveTarget {
        coordinator_vm::MoveTarget {
            from_step: self.step.clone(),
            to_step: self.target_step().to_owned(),
            carried: coordinator_ir::carried::carried_steps(from, to, &self.step),
        }
    }
}

impl ScenarioFile {
    /// The B projects the cases move to, as written (`move.project`), each
    /// once, sorted.
    pub fn move_projects(&self) -> std::collections::BTreeSet<&str> {
        self.cases
            .iter()
            .filter_map(|c| c.move_to.as_ref().map(|m| m.project.as_str()))
            .collect()
    }
}

/// A scripted product answer (SPEC §7 reply types).
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Reply {
    /// The product accepted the call and answered `value`.
    Success {
        /// The response body (a receipt lookup: the original response).
        value: Value,
    },
    /// A definite "not processed" answer (408, 429, 503): retried automatically.
    Retryable {
        /// A free-form code naming the answer.
        code: String,
    },
    /// A definite refusal.
    Refused {
        /// A free-form code naming the answer.
        code: String,
    },
    /// The effect is unknown (timeout or reset after sending, 500/502/504).
    Uncertain {
        /// A free-form code naming the answer.
        code: String,
    },
    /// A receipt lookup: the product no longer holds the receipt.
    ReceiptExpired,
    /// A receipt lookup: still unknown.
    ReceiptUnresolved,
    /// An owner-declared no-effect refusal (BReg immediate actions).
    #[serde(rename_all = "camelCase")]
    DeclaredRefusal {
        /// The owner's refusal code.
        refusal_code: String,
    },
}

/// What a wait-for's completion does.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CompletionScript {
    /// The completion arrives `afterSeconds` after admission with `value`.
    #[serde(rename_all = "camelCase")]
    Completed {
        /// Seconds after admission.
        after_seconds: u64,
        /// The completion's value.
        value: Value,
    },
    /// The completion never arrives.
    Never,
}

/// A cancel request.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CancelScript {
    /// Seconds after admission.
    pub after_seconds: u64,
}

/// What the operator does after an unknown answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryAction {
    /// Resend the same frozen command with the same key.
    RetrySame,
    /// Look up the receipt of the original command (receipt-capable operations only).
    Reconcile,
}

/// The expected end of a case.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// The step names visited, in order.
    pub path: Vec<String>,
    /// The scenario state (SPEC §7 table).
    pub state: ExpectedState,
    /// The outcome reached, or none.
    pub outcome: ExpectedOutcome,
    /// The finish output; not checked when absent (an explicit `null` is checked).
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<Value>")]
    pub output: Option<Value>,
    /// Virtual seconds from admission to the end; not checked when absent.
    #[serde(default)]
    pub workflow_elapsed_seconds: Option<u64>,
    /// With state `failed`: the failure code.
    #[serde(default)]
    pub failure: Option<String>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Scenario states (SPEC §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ExpectedState {
    /// A `finish` was reached (service state `finished`).
    Completed,
    /// A definite refusal (service state `failed`, failure `product-refused`).
    Refused,
    /// The replies ran out after a retryable answer (service state `running`).
    Retryable,
    /// An unknown mutation answer not settled (service state `attention`).
    Uncertain,
    /// A Function error, `mapping-invalid`, `invalid-command` or `invalid-response`.
    Failed,
    /// The deadline passed.
    Expired,
    /// A cancel, with or without an `onCancel` route.
    Cancelled,
    /// A cancel after an accepted mutation, with no `onCancel` route.
    CancelledAfterEffect,
}

impl ExpectedState {
    /// The name as written in `scenarios.yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExpectedState::Completed => "completed",
            ExpectedState::Refused => "refused",
            ExpectedState::Retryable => "retryable",
            ExpectedState::Uncertain => "uncertain",
            ExpectedState::Failed => "failed",
            ExpectedState::Expired => "expired",
            ExpectedState::Cancelled => "cancelled",
            ExpectedState::CancelledAfterEffect => "cancelled-after-effect",
        }
    }
}

/// The expected outcome.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ExpectedOutcome {
    /// A declared outcome by name.
    Named {
        /// The outcome name.
        value: String,
    },
    /// No outcome (the run did not reach a finish).
    None,
}

/// The JSON Schema (draft 2020-12) of `scenarios.yaml`, generated from the
/// types above.
pub fn scenarios_schema() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(ScenarioFile)).unwrap_or_default();
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("$id".into(), Value::String(SCENARIOS_SCHEMA_ID.into()));
        obj.insert("title".into(), Value::String("CoordinatorScenarios".into()));
    }
    schema
}

/// Reads and checks a scenarios document against the compiled Program,
/// with no move target loaded (a case with a `move` is then refused:
/// read it with [`parse`] and [`check`] and the [`MoveTargets`] its
/// [`ScenarioFile::move_projects`] compile to).
///
/// Returns the file when it has no errors. Each fault is one located
/// diagnostic (`coordinator.scenario.*`), as [`check`] finds them.
pub fn read(doc: &YamlDocument, program: &Program) -> Result<ScenarioFile, Vec<Diagnostic>> {
    let file = parse(doc)?;
    let diags = check(doc, &file, program, &MoveTargets::default());
    if diags.is_empty() {
        Ok(file)
    } else {
        Err(diags)
    }
}

/// Reads a scenarios document as its types (strict YAML: unknown keys,
/// wrong types and missing members are located diagnostics); nothing is
/// checked against the workflow yet.
pub fn parse(doc: &YamlDocument) -> Result<ScenarioFile, Vec<Diagnostic>> {
    doc.deserialize().map_err(|d| vec![d])
}

/// The findings about `file` (read from `doc`) against the compiled
/// Program and the revisions its cases move to (`targets`), in file
/// order; empty when the file can run. Each is one located diagnostic
/// (`coordinator.scenario.*`): wrong header, an unknown step, replies for
/// a step that is not a call, completions for a step that is not a
/// wait-for, recovery for a step that is not a call, `reconcile` for an
/// operation without receipts, more than eight or zero replies, a bad
/// timestamp, a duplicate case id, an unknown outcome or step in
/// `expect`; for a `move`: a step that is not a wait, a project that was
/// not loaded or does not compile, another workflow, a target the VM's
/// move refuses. A moved case may name the steps and outcomes of either
/// revision.
pub fn check(
    doc: &YamlDocument,
    file: &ScenarioFile,
    program: &Program,
    targets: &MoveTargets,
) -> Vec<Diagnostic> {
    let mut checks = ScenarioChecks::new(doc, program, targets);
    checks.file(file);
    checks.diags
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    const STARTER: &str = include_str!("../../../examples/delayed-follow-up/scenarios.yaml");

    fn typed(text: &str) -> Result<ScenarioFile, Diagnostic> {
        coordinator_source::parse("s.yaml", text)?.deserialize()
    }

    #[test]
    fn starter_reads() {
        let f = typed(STARTER).expect("starter reads");
        assert_eq!(f.cases.len(), 6);
        let first = &f.cases[0];
        assert_eq!(first.expect.workflow_elapsed_seconds, Some(960));
        assert_eq!(f.cases[1].expect.output, Some(Value::Null));
        assert_eq!(f.cases[2].expect.output.as_ref().map(|_| ()), Some(()));
        assert_eq!(f.cases[4].expect.output, None);
        assert_eq!(f.cases[4].replies["notify"][1], Reply::ReceiptExpired);
        assert_eq!(f.cases[2].recovery["notify"], RecoveryAction::RetrySame);
    }

    #[test]
    fn faults_are_located() {
        let bad = STARTER.replacen("type: success", "type: sucess", 1);
        let e = typed(&bad).expect_err("unknown variant");
        assert!(e.line > 1, "{e:?}");
        let bad = STARTER.replacen("  expect:\n", "  expcet:\n", 1);
        let e = typed(&bad).expect_err("unknown key");
        assert_eq!(e.code, coordinator_source::codes::YAML_UNKNOWN_KEY);
    }

    #[test]
    fn schema_has_id() {
        assert_eq!(scenarios_schema()["$id"], SCENARIOS_SCHEMA_ID);
    }
}
