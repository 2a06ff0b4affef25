//! One minimal failing project per diagnostic code (golden/diagnostics/CODE/),
//! one test each. Each snapshot holds the source followed by the rendered
//! diagnostics, and the test checks that the directory's code is reported.
// Test names mirror diagnostic codes, with `__` between area and condition.
#![allow(non_snake_case)]

use std::path::PathBuf;

use coordinator_source::diagnostic;

fn fixture(code: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("diagnostics")
        .join(code);
    let compiled = coordinator_compiler::compile_project(&dir, "fixture");
    let mut out = String::new();
    for file in ["workflow.yaml", "functions.rhai"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
            out.push_str(&format!("--- fixture/{file}\n{text}"));
        }
    }
    out.push_str("--- diagnostics\n");
    out.push_str(&diagnostic::render_text(&compiled.diagnostics));
    out.push_str(&diagnostic::summary_line(&compiled.diagnostics));
    out.push('\n');
    assert!(
        compiled.diagnostics.iter().any(|d| d.code == code),
        "{code} not reported:\n{out}"
    );
    if compiled
        .diagnostics
        .iter()
        .any(|d| d.code == code && d.is_error())
    {
        assert!(
            compiled.program.is_none(),
            "{code}: a refused project has no Program"
        );
    }
    insta::assert_snapshot!(code, out);
}

macro_rules! fixtures {
    ($($name:ident => $code:literal,)*) => {
        $(
            #[test]
            fn $name() {
                fixture($code);
            }
        )*

        /// Every fixture directory has a test above.
        #[test]
        fn every_fixture_directory_has_a_test() {
            let listed = [$($code),*];
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("diagnostics");
            for entry in std::fs::read_dir(dir).expect("diagnostics dir").flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                assert!(listed.contains(&name.as_str()), "no test for fixture {name}");
            }
        }
    };
}

fixtures! {
    call__declared_refusal => "coordinator.call.declared-refusal",
    choose__labels => "coordinator.choose.labels",
    function__argument_required => "coordinator.function.argument-required",
    function__entrypoint => "coordinator.function.entrypoint",
    function__parameters => "coordinator.function.parameters",
    function__source => "coordinator.function.source",
    function__syntax => "coordinator.function.syntax",
    function__unknown => "coordinator.function.unknown",
    function__unknown_argument => "coordinator.function.unknown-argument",
    graph__cycle => "coordinator.graph.cycle",
    graph__no_finish => "coordinator.graph.no-finish",
    graph__unreachable => "coordinator.graph.unreachable",
    limit__fields => "coordinator.limit.fields",
    limit__function_inputs => "coordinator.limit.function-inputs",
    limit__steps => "coordinator.limit.steps",
    mapping__context => "coordinator.mapping.context",
    mapping__fit_unchecked => "coordinator.mapping.fit-unchecked",
    mapping__path => "coordinator.mapping.path",
    mapping__path_unchecked => "coordinator.mapping.path-unchecked",
    mapping__pointer => "coordinator.mapping.pointer",
    mapping__step_kind => "coordinator.mapping.step-kind",
    mapping__step_not_completed => "coordinator.mapping.step-not-completed",
    mapping__type => "coordinator.mapping.type",
    mapping__unknown_step => "coordinator.mapping.unknown-step",
    name__invalid => "coordinator.name.invalid",
    operation__action_not_allowed => "coordinator.operation.action-not-allowed",
    operation__action_required => "coordinator.operation.action-required",
    operation__proposal_action => "coordinator.operation.proposal-action",
    operation__unknown => "coordinator.operation.unknown",
    operation__unknown_alias => "coordinator.operation.unknown-alias",
    outcome__null_output => "coordinator.outcome.null-output",
    outcome__unknown => "coordinator.outcome.unknown",
    outcome__unused => "coordinator.outcome.unused",
    project__api_version => "coordinator.project.api-version",
    project__header => "coordinator.project.header",
    project__kind => "coordinator.project.kind",
    schema__format => "coordinator.schema.format",
    schema__invalid => "coordinator.schema.invalid",
    schema__ref => "coordinator.schema.ref",
    schema__unknown_keyword => "coordinator.schema.unknown-keyword",
    step__unknown => "coordinator.step.unknown",
    trigger__event_type => "coordinator.trigger.event-type",
    type__no_completion => "coordinator.type.no-completion",
    type__reference_kind => "coordinator.type.reference-kind",
    type__unknown => "coordinator.type.unknown",
    wait_for__completion => "coordinator.wait-for.completion",
    wait_for__dominance => "coordinator.wait-for.dominance",
    wait_for__step => "coordinator.wait-for.step",
    wait_for__timeout => "coordinator.wait-for.timeout",
    wait_until__instant => "coordinator.wait-until.instant",
    workflow__deadline => "coordinator.workflow.deadline",
    yaml__anchor => "coordinator.yaml.anchor",
    yaml__duplicate_key => "coordinator.yaml.duplicate-key",
    yaml__missing_key => "coordinator.yaml.missing-key",
    yaml__syntax => "coordinator.yaml.syntax",
    yaml__tag => "coordinator.yaml.tag",
    yaml__too_deep => "coordinator.yaml.too-deep",
    yaml__unknown_key => "coordinator.yaml.unknown-key",
    yaml__unknown_value => "coordinator.yaml.unknown-value",
    yaml__wrong_type => "coordinator.yaml.wrong-type",
}
