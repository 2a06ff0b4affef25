//! [`StepKind`]: the five step kinds of SPEC §2.1 as one vocabulary.
//!
//! A kind is written as the lowercase, hyphenated word `workflow.yaml` uses
//! (`call`, `choose`, `wait-until`, `wait-for`, `finish`): in its serde
//! form, by [`StepKind::as_str`] and by `Display`. The compiler's reader,
//! the disassembler, explain data, the VM's views, the scenario host,
//! inspection and the metrics all take the word from here.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// Runs one operation.
    Call,
    /// Routes by a Function's result.
    Choose,
    /// Waits until an instant.
    WaitUntil,
    /// Waits for a completion of an earlier call.
    WaitFor,
    /// Ends the run with an outcome.
    Finish,
}

impl StepKind {
    /// Every kind, in the order SPEC §2.1 lists them.
    pub const ALL: [StepKind; 5] = [
        StepKind::Call,
        StepKind::Choose,
        StepKind::WaitUntil,
        StepKind::WaitFor,
        StepKind::Finish,
    ];

    /// The kind as written in `workflow.yaml` (`call`, `wait-until`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            StepKind::Call => "call",
            StepKind::Choose => "choose",
            StepKind::WaitUntil => "wait-until",
            StepKind::WaitFor => "wait-for",
            StepKind::Finish => "finish",
        }
    }

    /// Whether a run at a step of this kind waits (`wait-until`, `wait-for`).
    pub fn is_wait(self) -> bool {
        matches!(self, StepKind::WaitUntil | StepKind::WaitFor)
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The word is not one of the five kinds; it carries the word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownStepKind(pub String);

impl fmt::Display for UnknownStepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not a step kind", self.0)
    }
}

impl std::error::Error for UnknownStepKind {}

impl FromStr for StepKind {
    type Err = UnknownStepKind;

    /// The kind [`StepKind::as_str`] writes as `word`.
    fn from_str(word: &str) -> Result<Self, Self::Err> {
        StepKind::ALL
            .into_iter()
            .find(|k| k.as_str() == word)
            .ok_or_else(|| UnknownStepKind(word.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_is_the_serde_form_and_parses_back() {
        for kind in StepKind::ALL {
            assert_eq!(
                serde_json::to_value(kind).ok(),
                Some(serde_json::Value::from(kind.as_str()))
            );
            assert_eq!(kind.to_string(), kind.as_str());
            assert_eq!(kind.as_str().parse::<StepKind>(), Ok(kind));
        }
        assert_eq!(
            "wait".parse::<StepKind>(),
            Err(UnknownStepKind("wait".into()))
        );
    }

    #[test]
    fn a_step_op_is_tagged_with_its_kind() {
        use crate::{ExprId, OperationId, OutcomeId, StepId, StepOp};
        let ops = [
            StepOp::Call {
                operation: OperationId(0),
                input: ExprId(0),
                next: StepId(1),
                on_declared_refusal: None,
            },
            StepOp::Choose {
                selector: ExprId(0),
                cases: vec![],
            },
            StepOp::WaitUntil {
                until: ExprId(0),
                next: StepId(1),
            },
            StepOp::WaitFor {
                call: StepId(0),
                completion: "done".into(),
                timeout_seconds: 60,
                next: StepId(1),
                on_timeout: None,
                on_cancel: None,
            },
            StepOp::Finish {
                outcome: OutcomeId(0),
                output: None,
            },
        ];
        let kinds: Vec<StepKind> = ops.iter().map(StepOp::kind).collect();
        assert_eq!(kinds, StepKind::ALL);
        for op in &ops {
            let json = serde_json::to_value(op).ok();
            let tag = json.as_ref().and_then(|v| v.get("kind"));
            assert_eq!(tag, Some(&serde_json::Value::from(op.kind().as_str())));
        }
    }
}
