//! OLD's `workflow.yaml` (v1alpha1) → NEW's `workflow.yaml` (v1beta1).
//!
//! The inline `input` schema becomes the type `workflow-input`;
//! `connections` with flat operation ids become `operations` aliases of
//! catalogue operations; each Function use (`{function, arguments}` with
//! positional arguments) becomes a `functions` declaration whose inputs are
//! named by the Rhai parameters and typed from their use, used with
//! explicit `arguments`; `waitUntil`, `choose` and `output` move to their
//! v1beta1 keys; names lose `_`. What has no mechanical counterpart is
//! written as it was (so `check` refuses it there) and listed for a person.

use std::collections::BTreeMap;

use coordinator_source::YamlDocument;
use serde_json::{json, Map, Value};

use super::findings::Findings;
use super::rhai_source::RhaiSource;
use super::{escape, new_name, PROJECT_API_VERSION};
use crate::codes;

/// What the scenarios and the report need to know of a converted call step.
#[derive(Clone, Debug, Default)]
pub struct StepFacts {
    /// The catalogue operation (`breg.read-record/v1`), when it has one.
    pub operation: Option<String>,
    /// OLD's Rhai function that builds the call's input, with its old
    /// positional arguments.
    pub request: Option<(String, Vec<Value>)>,
    /// The NEW Function declarations the step uses (for pointing a failing
    /// case at the function to edit).
    pub functions: Vec<String>,
}

/// NEW's workflow with what the other files need.
pub struct ConvertedWorkflow {
    pub value: Value,
    /// By NEW step name.
    pub steps: BTreeMap<String, StepFacts>,
    /// The NEW function declaration → its entrypoint.
    pub entrypoints: BTreeMap<String, String>,
}

/// The catalogue operation of v1alpha1's `product` and flat `operation`.
fn catalogue_operation(product: &str, operation: &str) -> Option<&'static str> {
    Some(match (product, operation) {
        ("breg", "read-record") => "breg.read-record/v1",
        ("breg", "invoke-breg-action") => "breg.invoke-action/v1",
        ("messaging", "submit-message") => "messaging.submit-message/v1",
        ("scheduling", "read-availability") => "scheduling.read-availability/v1",
        ("scheduling", "create-appointment") => "scheduling.create-appointment/v1",
        ("external-http", "external-get") => "external.get/v1",
        ("decision", "evaluate-decision") => "evaluation.evaluate/v1",
        _ => return None,
    })
}

/// The operation alias of OLD's `connection` and flat `operation`.
fn alias_of(connection: &str, operation: &str) -> String {
    format!("{}-{}", new_name(connection), new_name(operation))
}

/// A v1alpha1 call step's `connection` and `operation` (empty when absent).
fn call_target(step: &Value) -> (&str, &str) {
    let member = |key: &str| step.get(key).and_then(Value::as_str).unwrap_or_default();
    (member("connection"), member("operation"))
}

/// Where a Function is used, which types its output.
enum Use<'a> {
    CallInput(&'a str),
    Choose(&'a [String]),
    WaitUntil,
    Output(&'a str),
}

struct Builder<'a> {
    doc: &'a YamlDocument,
    rhai: &'a mut RhaiSource,
    findings: &'a mut Findings,
    products: BTreeMap<String, String>,
    response_types: &'a BTreeMap<String, Value>,
    types: Map<String, Value>,
    operations: Map<String, Value>,
    functions: Map<String, Value>,
    /// OLD step name → NEW operation alias.
    aliases: BTreeMap<String, String>,
    facts: BTreeMap<String, StepFacts>,
    entrypoints: BTreeMap<String, String>,
}

/// Converts OLD's workflow. `response_types` are the external-http
/// response schemas by connection, moved from OLD's runtime.yaml.
pub fn convert(
    doc: &YamlDocument,
    rhai: &mut RhaiSource,
    response_types: &BTreeMap<String, Value>,
    findings: &mut Findings,
) -> ConvertedWorkflow {
    let old = &doc.value;
    let mut b = Builder {
        doc,
        rhai,
        findings,
        products: BTreeMap::new(),
        response_types,
        types: Map::new(),
        operations: Map::new(),
        functions: Map::new(),
        aliases: BTreeMap::new(),
        facts: BTreeMap::new(),
        entrypoints: BTreeMap::new(),
    };
    b.input_type(old.get("input"));
    if let Some(Value::Object(c)) = old.get("connections") {
        for (name, product) in c {
            b.products.insert(
                name.clone(),
                product.as_str().unwrap_or_default().to_owned(),
            );
        }
    }
    let steps = b.steps(old.get("steps"));
    let mut outcomes = Map::new();
    if let Some(Value::Object(o)) = old.get("outcomes") {
        for (name, schema) in o {
            let new = b.renamed(name, &format!("/outcomes/{}", escape(name)));
            outcomes.insert(new, schema.clone());
        }
    }
    let project = old.get("project").cloned().unwrap_or(Value::Null);
    let id = project
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("converted");
    let version = project.get("version").cloned().unwrap_or(json!("1"));
    b.findings.rule(
        "workflow-section",
        doc,
        "/steps",
        "`deadlineSeconds`, `start`, `steps` and `outcomes` moved under `workflow:`",
        "nothing to do",
    );
    let start = old.get("start").and_then(Value::as_str).unwrap_or_default();
    let value = json!({
        "apiVersion": PROJECT_API_VERSION,
        "kind": "CoordinatorProject",
        "project": {"id": new_name(id), "version": version},
        "types": b.types,
        "operations": b.operations,
        "functions": b.functions,
        "workflow": {
            "input": {"typeRef": "workflow-input"},
            "deadlineSeconds": old.get("deadlineSeconds").cloned().unwrap_or(Value::Null),
            "start": new_name(start),
            "steps": steps,
            "outcomes": outcomes,
        }
    });
    ConvertedWorkflow {
        value,
        steps: b.facts,
        entrypoints: b.entrypoints,
    }
}

impl Builder<'_> {
    fn renamed(&mut self, old: &str, pointer: &str) -> String {
        let new = new_name(old);
        if new != old {
            self.findings.rule(
                "name-without-underscore",
                self.doc,
                pointer,
                format!("`{old}` is named `{new}` (names have no `_`)"),
                "nothing to do: the scenarios use the new name too",
            );
        }
        new
    }

    fn input_type(&mut self, input: Option<&Value>) {
        match input {
            Some(schema) => {
                self.types
                    .insert("workflow-input".to_owned(), schema.clone());
                self.findings.rule(
                    "input-schema-to-type",
                    self.doc,
                    "/input",
                    "the inline `input` schema became the type `workflow-input`, used by `workflow.input.typeRef`",
                    "nothing to do",
                );
            }
            None => {
                self.types
                    .insert("workflow-input".to_owned(), json!({"type": "object"}));
                self.findings.person(
                    codes::CONVERT_MISSING_INPUT,
                    self.doc,
                    "",
                    "the project has no `input` schema; `workflow-input` was written as any object",
                    "Write the run input's schema in `types.workflow-input` of NEW's workflow.yaml.",
                );
            }
        }
    }

    fn steps(&mut self, steps: Option<&Value>) -> Map<String, Value> {
        let mut out = Map::new();
        let Some(Value::Object(steps)) = steps else {
            return out;
        };
        for (name, step) in steps {
            if step.get("type").and_then(Value::as_str) == Some("call") {
                let (connection, operation) = call_target(step);
                self.aliases
                    .insert(new_name(name), alias_of(connection, operation));
            }
        }
        for (name, step) in steps {
            let at = format!("/steps/{}", escape(name));
            let new = self.renamed(name, &at);
            let converted = self.step(&new, step, &at);
            out.insert(new, converted);
        }
        out
    }

    fn step(&mut self, name: &str, step: &Value, at: &str) -> Value {
        let kind = step.get("type").and_then(Value::as_str).unwrap_or_default();
        let mut facts = StepFacts::default();
        let mut out = Map::new();
        out.insert("type".to_owned(), json!(kind));
        let next = |key: &str| step.get(key).and_then(Value::as_str).map(new_name);
        match kind {
            "call" => self.call(name, step, at, &mut out, &mut facts),
            "choose" => {
                let cases = step.get("cases").cloned().unwrap_or_else(|| json!({}));
                let labels: Vec<String> = cases
                    .as_object()
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                let renamed: Map<String, Value> = cases
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), json!(new_name(v.as_str().unwrap_or_default()))))
                    .collect();
                if let Some(old) = step.get("choose") {
                    let key = format!("{at}/choose");
                    let mapping =
                        self.function_use(name, old, &key, Use::Choose(&labels), &mut facts);
                    self.rule_moved(&key, "choose-key", "`choose: {function, arguments}` became `function` and `arguments` of the step");
                    if let Some(m) = mapping.as_object() {
                        out.insert("function".to_owned(), m["function"].clone());
                        if let Some(a) = m.get("arguments") {
                            out.insert("arguments".to_owned(), a.clone());
                        }
                    }
                }
                out.insert("cases".to_owned(), Value::Object(renamed));
            }
            "wait-until" => {
                if let Some(old) = step.get("waitUntil") {
                    let key = format!("{at}/waitUntil");
                    let mapping = self.function_use(name, old, &key, Use::WaitUntil, &mut facts);
                    self.rule_moved(&key, "wait-until-key", "`waitUntil` became `until`");
                    out.insert("until".to_owned(), mapping);
                }
                out.insert("next".to_owned(), json!(next("next")));
            }
            "finish" => {
                let outcome = next("outcome").unwrap_or_default();
                out.insert("outcome".to_owned(), json!(outcome));
                if let Some(old) = step.get("output") {
                    let key = format!("{at}/output");
                    let mapping =
                        self.function_use(name, old, &key, Use::Output(&outcome), &mut facts);
                    self.rule_moved(&key, "output-key", "`output: {function, arguments}` became a mapping `{type: function, function, arguments}`");
                    out.insert("output".to_owned(), mapping);
                }
            }
            other => {
                self.findings.person(
                    codes::CONVERT_STEP_KIND,
                    self.doc,
                    &format!("{at}/type"),
                    format!("step `{name}` is of kind `{other}`, which convert does not translate; it was copied as it was"),
                    "Rewrite the step in NEW's workflow.yaml by the v1beta1 step kinds (`coordinatorctl schema --kind project`).",
                );
                return step.clone();
            }
        }
        self.facts.insert(name.to_owned(), facts);
        Value::Object(out)
    }

    fn rule_moved(&mut self, pointer: &str, rule: &'static str, detail: &str) {
        self.findings
            .rule(rule, self.doc, pointer, detail, "nothing to do");
    }

    fn call(
        &mut self,
        name: &str,
        step: &Value,
        at: &str,
        out: &mut Map<String, Value>,
        facts: &mut StepFacts,
    ) {
        let (connection, operation) = call_target(step);
        let product = self.products.get(connection).cloned().unwrap_or_default();
        let alias = alias_of(connection, operation);
        let catalogue = catalogue_operation(&product, operation);
        let op_at = format!("{at}/operation");
        if !self.operations.contains_key(&alias) {
            let uses = catalogue.unwrap_or(operation);
            let mut decl = json!({"uses": uses, "connection": new_name(connection)});
            if let (Some("external.get/v1"), Some(_)) =
                (catalogue, self.response_types.get(connection))
            {
                let type_name = format!("{}-response", new_name(connection));
                decl["output"] = json!({"typeRef": type_name});
            }
            self.operations.insert(alias.clone(), decl);
            self.operation_people(&alias, &product, operation, catalogue, &op_at);
            if catalogue.is_some() {
                self.findings.rule(
                    "connection-operation-to-alias",
                    self.doc,
                    &op_at,
                    format!("connection `{connection}` ({product}) with operation `{operation}` became the alias `{alias}` of `{}`", catalogue.unwrap_or_default()),
                    "nothing to do",
                );
            }
        }
        facts.operation = catalogue.map(str::to_owned);
        out.insert("operation".to_owned(), json!(alias));
        if let Some(old) = step.get("input") {
            let key = format!("{at}/input");
            if let Some(f) = old.get("function").and_then(Value::as_str) {
                let args = old
                    .get("arguments")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                facts.request = Some((f.to_owned(), args));
            }
            let mapping = self.function_use(name, old, &key, Use::CallInput(&alias), facts);
            out.insert("input".to_owned(), mapping);
        }
        out.insert(
            "next".to_owned(),
            json!(step.get("next").and_then(Value::as_str).map(new_name)),
        );
        if let Some(r) = step.get("onDeclaredRefusal").and_then(Value::as_str) {
            out.insert("onDeclaredRefusal".to_owned(), json!(new_name(r)));
        }
    }

    /// The items a person settles for an operation: one we do not have,
    /// and the BReg action's declaration.
    fn operation_people(
        &mut self,
        alias: &str,
        product: &str,
        operation: &str,
        catalogue: Option<&str>,
        at: &str,
    ) {
        match catalogue {
            None => self.findings.person(
                codes::CONVERT_OPERATION_MISSING,
                self.doc,
                at,
                format!("operation `{operation}` of a `{product}` connection has no catalogue counterpart; alias `{alias}` was written with `uses: {operation}`"),
                "Replace the step with catalogue operations (`coordinatorctl explain` lists them; docs/adapters.md), or take the value from the run input.",
            ),
            Some("breg.invoke-action/v1") => self.findings.person(
                codes::CONVERT_BREG_ACTION,
                self.doc,
                at,
                format!("alias `{alias}` needs its `action: {{id, kind}}`: v1alpha1 named the action inside the request, and only the registry's owner says whether it is `immediate`"),
                "Add `action: {id: ACTION, kind: immediate}` to the alias once the owner confirms it, and make the request `{input: ...}`.",
            ),
            Some(_) => {}
        }
    }

    /// A v1alpha1 Function use `{function, arguments: [...]}` as a
    /// v1beta1 mapping `{type: function, function, arguments: {...}}`,
    /// declaring the Function on first use.
    fn function_use(
        &mut self,
        step: &str,
        old: &Value,
        at: &str,
        usage: Use<'_>,
        facts: &mut StepFacts,
    ) -> Value {
        let Some(entry) = old.get("function").and_then(Value::as_str) else {
            return self.mapping(old);
        };
        let args = old
            .get("arguments")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let Some(params) = self.rhai.parameters(entry).map(<[String]>::to_vec) else {
            self.findings.person(
                codes::CONVERT_FUNCTION_MISSING,
                self.doc,
                &format!("{at}/function"),
                format!("step `{step}` calls `{entry}`, which functions.rhai does not define"),
                "Define the function in NEW's functions.rhai, or name an existing one.",
            );
            return json!({"type": "function", "function": new_name(entry)});
        };
        if params.len() != args.len() {
            self.findings.person(
                codes::CONVERT_FUNCTION_MISSING,
                self.doc,
                &format!("{at}/arguments"),
                format!(
                    "step `{step}` passes {} arguments to `{entry}`, which takes {}",
                    args.len(),
                    params.len()
                ),
                "Name each argument of the Function in `arguments` of NEW's step.",
            );
        }
        let mut entrypoint = entry.to_owned();
        if let Use::CallInput(alias) = usage {
            entrypoint = self.reshape_request(alias, entry, at);
        }
        let mut inputs = Map::new();
        let mut arguments = Map::new();
        for (param, arg) in params.iter().zip(&args) {
            inputs.insert(param.clone(), self.argument_type(arg));
            arguments.insert(param.clone(), self.mapping(arg));
        }
        let output = match usage {
            Use::CallInput(alias) => {
                match self.operations.get(alias).and_then(|o| o["uses"].as_str()) {
                    Some(uses) if coordinator_ir::catalogue::lookup(uses).is_some() => {
                        json!({"operationInput": alias})
                    }
                    _ => json!(true),
                }
            }
            Use::Choose(labels) => {
                let type_name = format!("{}-label", new_name(entry));
                self.types
                    .insert(type_name.clone(), json!({"type": "string", "enum": labels}));
                json!({"typeRef": type_name})
            }
            Use::WaitUntil => json!({"type": "string", "format": "date-time"}),
            Use::Output(outcome) => json!({"outcome": outcome}),
        };
        let decl = json!({
            "runtime": "rhai",
            "source": "functions.rhai",
            "entrypoint": entrypoint,
            "inputs": inputs,
            "output": output,
        });
        let name = self.declare(&new_name(entry), decl);
        self.entrypoints.insert(name.clone(), entry.to_owned());
        facts.functions.push(name.clone());
        self.findings.rule(
            "positional-arguments-named",
            self.doc,
            at,
            format!("`{entry}`'s positional arguments became named ones ({}) of Function `{name}`, typed from their use", params.join(", ")),
            "nothing to do",
        );
        json!({"type": "function", "function": name, "arguments": arguments})
    }

    /// Declares a Function under `base` (or `base-2`, ... when `base` is
    /// declared otherwise); the name used.
    fn declare(&mut self, base: &str, decl: Value) -> String {
        let mut name = base.to_owned();
        let mut n = 1;
        while let Some(existing) = self.functions.get(&name) {
            if *existing == decl {
                return name;
            }
            n += 1;
            name = format!("{base}-{n}");
        }
        self.functions.insert(name.clone(), decl);
        name
    }

    /// The entrypoint that builds a call's input: a wrapper when only the
    /// data needs reshaping, else the old function (with an item for a
    /// person when the request has an older shape).
    fn reshape_request(&mut self, alias: &str, entry: &str, at: &str) -> String {
        let uses = self
            .operations
            .get(alias)
            .and_then(|o| o["uses"].as_str())
            .unwrap_or_default()
            .to_owned();
        match uses.as_str() {
            "external.get/v1" => {
                let wrapper = self.rhai.wrap_path_slash(entry);
                self.findings.rule(
                    "wrapper-path-slash",
                    self.doc,
                    at,
                    format!("`{entry}` is called through the wrapper `{wrapper}`, which makes the path start with `/`"),
                    format!("review `{wrapper}` at the end of NEW's functions.rhai"),
                );
                wrapper
            }
            "breg.invoke-action/v1"
            | "scheduling.create-appointment/v1"
            | "evaluation.evaluate/v1" => {
                let at_fn = self.rhai.locate(entry);
                self.findings.person_at(
                    codes::CONVERT_REQUEST_SHAPE,
                    at_fn,
                    format!("`{entry}` builds the request of `{uses}` in the v1alpha1 shape; its members differ in v1beta1 beyond a reshaping"),
                    format!("Rewrite `{entry}` in NEW's functions.rhai to return `{uses}`'s input (`coordinatorctl explain --project NEW` shows its schema)."),
                );
                entry.to_owned()
            }
            _ => entry.to_owned(),
        }
    }

    /// The declared type of a Function input from the argument it gets.
    fn argument_type(&self, arg: &Value) -> Value {
        let path = arg.get("path").and_then(Value::as_str).unwrap_or_default();
        match arg.get("type").and_then(Value::as_str) {
            Some("input") if path.is_empty() => json!({"typeRef": "workflow-input"}),
            Some("step") if path.is_empty() => {
                let step = arg.get("step").and_then(Value::as_str).unwrap_or_default();
                match self.aliases.get(&new_name(step)) {
                    Some(alias) => json!({"operationOutput": alias}),
                    None => json!(true),
                }
            }
            _ => json!(true),
        }
    }

    /// A v1alpha1 argument as a v1beta1 mapping: step names lose `_`.
    fn mapping(&self, arg: &Value) -> Value {
        let mut out = arg.clone();
        if let Some(step) = arg.get("step").and_then(Value::as_str) {
            out["step"] = json!(new_name(step));
        }
        out
    }
}

/// The types NEW's workflow gains from OLD's runtime (external-http
/// response schemas, as `<connection>-response`).
pub fn add_response_types(workflow: &mut Value, response_types: &BTreeMap<String, Value>) {
    for (connection, schema) in response_types {
        let used = workflow["operations"].as_object().is_some_and(|ops| {
            ops.values()
                .any(|o| o["connection"] == json!(new_name(connection)))
        });
        if used {
            workflow["types"][format!("{}-response", new_name(connection))] = schema.clone();
        }
    }
}
