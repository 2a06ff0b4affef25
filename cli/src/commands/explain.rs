//! `coordinatorctl explain --project D [--format text|json] [--bytecode]`:
//! lists the steps breadth-first from `start`, one line each; with
//! `--format json` also the typed IR as data (`ir`); with `--bytecode` the
//! Program's disassembly (docs/explain.md).
//!
//! The JSON report's schema is [`report_schema`] (`coordinatorctl schema
//! --kind explain`, committed as `docs/schemas/explain.v1beta1.schema.json`).

use std::path::PathBuf;

use clap::Args;
use coordinator_compiler::explain_data::ExplainData;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::report::{self, EXIT_OK, REPORT_API_VERSION};
use crate::Format;

/// The `$id` of the explain report's JSON Schema.
pub const EXPLAIN_SCHEMA_ID: &str =
    "https://id.registrystack.org/schemas/coordinator/explain/explain.v1beta1.schema.json";

/// Arguments of `explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The project directory (holding workflow.yaml).
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Print the compiled Program's disassembly (text) or add it as
    /// `bytecode` (JSON).
    #[arg(long)]
    pub bytecode: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExplainExtra<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<String>,
    steps: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ir: Option<&'a ExplainData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytecode: Option<String>,
}

/// Runs the command; returns the exit code.
pub fn run(args: ExplainArgs) -> u8 {
    let display = args.project.to_string_lossy().into_owned();
    let compiled = coordinator_compiler::compile_project(&args.project, &display);
    let code = report::exit_code(&compiled.diagnostics);
    let explain = compiled.explain.as_deref().unwrap_or_default();
    let bytecode = if args.bytecode {
        compiled
            .program
            .as_ref()
            .map(coordinator_ir::disasm::disassemble)
    } else {
        None
    };
    match args.format {
        Format::Json => report::print_json(
            "explain",
            code == EXIT_OK,
            if code == EXIT_OK {
                "explained"
            } else {
                "refused"
            },
            &compiled.diagnostics,
            ExplainExtra {
                workflow: compiled.workflow.as_deref(),
                revision: compiled.revision(),
                steps: explain.lines().skip(1).map(str::trim).collect(),
                ir: compiled.explain_data.as_ref(),
                bytecode,
            },
        ),
        Format::Text => {
            report::print_diagnostics(&compiled.diagnostics);
            if code == EXIT_OK {
                match bytecode {
                    Some(listing) => out!("{listing}"),
                    None => out!("{explain}"),
                }
            }
        }
    }
    code
}

/// `status` of an explain report.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)] // describes the report; never built
enum ExplainStatus {
    /// The project compiled; `ir` is present.
    Explained,
    /// The project was refused; `diagnostics` say why.
    Refused,
}

/// `error` or `warning`.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Severity")]
#[allow(dead_code)] // describes the report; never built
enum SeverityShape {
    /// Refuses the project.
    Error,
    /// Does not refuse it.
    Warning,
}

/// One diagnostic (the form `coordinator_source::Diagnostic` serializes to).
#[derive(JsonSchema)]
#[schemars(rename = "Diagnostic", deny_unknown_fields)]
#[allow(dead_code)] // describes the report; never built
struct DiagnosticShape {
    /// How bad it is.
    severity: SeverityShape,
    /// The stable code (`coordinator.<area>.<condition>`); docs/errors/ has a page per code.
    code: String,
    /// The file, as the command was given it.
    file: String,
    /// 1-based line; 0 when the finding has no position.
    line: u32,
    /// 1-based column in Unicode scalar values; 0 when it has no position.
    column: u32,
    /// The JSON Pointer of the offending node (`""`: the whole file).
    pointer: String,
    /// What is wrong.
    message: String,
    /// How to repair it.
    next: String,
}

/// `coordinatorctl explain --format json`: one `CoordinatorCtlReport`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "CoordinatorExplainReport", deny_unknown_fields)]
#[allow(dead_code)] // describes the report; never built
struct ExplainReportShape {
    /// The report format.
    #[schemars(extend("const" = REPORT_API_VERSION))]
    api_version: String,
    /// Always `CoordinatorCtlReport`.
    #[schemars(extend("const" = "CoordinatorCtlReport"))]
    kind: String,
    /// Whether the project compiled.
    ok: bool,
    /// Always `explain`.
    #[schemars(extend("const" = "explain"))]
    command: String,
    /// `explained` or `refused`.
    status: ExplainStatus,
    /// Every finding, errors and warnings.
    diagnostics: Vec<DiagnosticShape>,
    /// The workflow name, when the file could be read that far.
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow: Option<String>,
    /// The revision, when the project compiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<String>,
    /// The explain lines, without indentation (empty when refused).
    steps: Vec<String>,
    /// The typed IR, when the project compiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    ir: Option<ExplainData>,
    /// With `--bytecode`: the Program's disassembly.
    #[serde(skip_serializing_if = "Option::is_none")]
    bytecode: Option<String>,
}

/// The JSON Schema (draft 2020-12) of `explain --format json`'s report:
/// `ir` is generated from [`ExplainData`], the type the report carries; the
/// envelope mirrors `report::Report` and `Diagnostic`, and the CLI tests
/// validate real reports (accepted and refused) against it, so the two
/// cannot drift apart unnoticed.
pub fn report_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut v = generator
        .into_root_schema_for::<ExplainReportShape>()
        .to_value();
    if let Value::Object(m) = &mut v {
        m.insert("$id".into(), Value::String(EXPLAIN_SCHEMA_ID.into()));
    }
    v
}
