//! The typed form of `workflow.yaml` (SPEC §1–§2): the serde types that read
//! the file and the schemars types that describe it are the same.
//!
//! Tagged unions (`Step`, `Mapping`) are read in two phases (the `type`
//! member picks a variant struct, read with its own located errors) so that a
//! fault deep inside a mapping still names its own node.

use std::borrow::Cow;

use coordinator_ir::step_kind::{StepKind, UnknownStepKind};
use coordinator_source::yaml::{
    nested_error, read_nested, Found, TypedError, TypedErrorKind, Wants,
};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// The `apiVersion` of `workflow.yaml`.
pub const PROJECT_API_VERSION: &str = "id.registrystack.org/formats/coordinator/project/v1beta1";
/// The `kind` of `workflow.yaml`.
pub const PROJECT_KIND: &str = "CoordinatorProject";
/// The `$id` of the project format's JSON Schema.
pub const PROJECT_SCHEMA_ID: &str =
    "https://id.registrystack.org/schemas/coordinator/project/project.v1beta1.schema.json";
/// The pattern every name must match (SPEC §1); the rule itself is
/// [`coordinator_ir::name::is_name`].
pub use coordinator_ir::name::NAME_PATTERN;

/// A mapping of names to values that keeps declaration order.
#[derive(Clone, Debug, PartialEq)]
pub struct Named<T>(pub Vec<(String, T)>);

impl<T> Default for Named<T> {
    fn default() -> Self {
        Named(Vec::new())
    }
}

impl<T> Named<T> {
    /// The value declared under `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
    /// Whether `name` is declared.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    /// Entries in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &T)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Named<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Named<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of names")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    let v = map.next_value::<T>()?;
                    out.push((k, v));
                }
                Ok(Named(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<T: JsonSchema> JsonSchema for Named<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("Named_{}", T::schema_name()).into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let item = g.subschema_for::<T>();
        json_schema!({
            "type": "object",
            "propertyNames": {"pattern": NAME_PATTERN},
            "additionalProperties": item
        })
    }
}

/// Like [`Named`], for maps whose keys are not project names: object member
/// names of a `fields` mapping and Rhai parameter names (`inputs`,
/// `arguments`). Its schema puts no pattern on the keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Members<T>(pub Named<T>);

impl<T> Default for Members<T> {
    fn default() -> Self {
        Members(Named::default())
    }
}

impl<T> std::ops::Deref for Members<T> {
    type Target = Named<T>;
    fn deref(&self) -> &Named<T> {
        &self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Members<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Named::deserialize(d).map(Members)
    }
}

impl<T: JsonSchema> JsonSchema for Members<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("Members_{}", T::schema_name()).into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let item = g.subschema_for::<T>();
        json_schema!({
            "type": "object",
            "additionalProperties": item
        })
    }
}

/// Reads a tagged value (a step, a mapping) as its variant: the `type`
/// key removed, a fault passed up with its pointer and kind
/// ([`read_nested`]).
fn read_variant<T: DeserializeOwned, E: de::Error>(mut v: Value) -> Result<T, E> {
    if let Value::Object(m) = &mut v {
        m.shift_remove("type");
    }
    read_nested(v)
}

/// The fault of a `type` that names none of `variants` (kind
/// `UnknownValue`, pointer `/type`), worded as before: `` unknown variant
/// `x`, expected one of a, b `` (the names unquoted).
fn unknown_type<E: de::Error>(other: &str, variants: &[&str]) -> E {
    let expected = format!("one of {}", variants.join(", "));
    let error = TypedError::with_kind(
        TypedErrorKind::UnknownValue {
            value: other.to_owned(),
            expected: expected.clone(),
        },
        format!("unknown variant `{other}`, expected {expected}"),
    );
    nested_error("/type", &error)
}

/// A wrong-typed tagged value (kind `WrongType`) at `pointer` below it.
fn wrong_tag_type<E: de::Error>(pointer: &str, message: String) -> E {
    let kind = TypedErrorKind::WrongType {
        found: Found::Other,
        wants: Wants::Other,
    };
    nested_error(pointer, &TypedError::with_kind(kind, message))
}

fn tag<E: de::Error>(v: &Value, variants: &'static [&'static str]) -> Result<String, E> {
    match v {
        Value::Object(m) => match m.get("type") {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(wrong_tag_type(
                "/type",
                format!("invalid type: expected one of {}", variants.join(", ")),
            )),
            None => Err(E::missing_field("type")),
        },
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            Err(wrong_tag_type(
                "",
                "invalid type: expected a mapping with a `type` key".to_owned(),
            ))
        }
    }
}

/// The whole `workflow.yaml`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "CoordinatorProject")]
pub struct ProjectFile {
    /// Always `id.registrystack.org/formats/coordinator/project/v1beta1`.
    #[schemars(extend("const" = PROJECT_API_VERSION))]
    pub api_version: String,
    /// Always `CoordinatorProject`.
    #[schemars(extend("const" = PROJECT_KIND))]
    pub kind: String,
    /// Project identity.
    pub project: ProjectInfo,
    /// Named JSON Schemas (draft 2020-12, local `$ref` only).
    #[serde(default)]
    pub types: Named<InlineSchema>,
    /// Operation aliases.
    #[serde(default)]
    pub operations: Named<OperationAlias>,
    /// Functions (Rhai entrypoints).
    #[serde(default)]
    pub functions: Named<FunctionDecl>,
    /// Event triggers (SPEC §2.4).
    #[serde(default)]
    pub triggers: Named<TriggerDecl>,
    /// The workflow graph.
    pub workflow: WorkflowDecl,
}

/// `project:`; only `id` reaches the Program.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectInfo {
    /// The workflow name.
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub id: String,
    /// A label for people (quoted string); never part of the revision.
    pub version: String,
    /// Optional title.
    #[serde(default)]
    pub title: Option<String>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// An inline JSON Schema (draft 2020-12 subset; see SPEC §2).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct InlineSchema(pub Value);

impl JsonSchema for InlineSchema {
    fn schema_name() -> Cow<'static, str> {
        "InlineSchema".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A JSON Schema (draft 2020-12): local $ref only, formats date-time, uuid and email.",
            "type": ["object", "boolean"]
        })
    }
}

/// A type: a reference (`typeRef`, `operationInput`, `operationOutput`,
/// `completion`, `outcome`) or an inline JSON Schema.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct TypeRef(pub Value);

/// The reference keys a [`TypeRef`] may use.
pub const TYPE_REF_KEYS: [&str; 5] = [
    "typeRef",
    "operationInput",
    "operationOutput",
    "completion",
    "outcome",
];

impl TypeRef {
    /// `(key, name)` when this is a reference, `None` for an inline schema.
    pub fn reference(&self) -> Option<(&str, &Value)> {
        let m = self.0.as_object()?;
        if m.len() != 1 {
            return None;
        }
        let (k, v) = m.iter().next()?;
        TYPE_REF_KEYS
            .contains(&k.as_str())
            .then_some((k.as_str(), v))
    }
}

impl JsonSchema for TypeRef {
    fn schema_name() -> Cow<'static, str> {
        "TypeRef".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let inline = g.subschema_for::<InlineSchema>();
        let mut alts: Vec<Value> = TYPE_REF_KEYS
            .iter()
            .map(|k| {
                serde_json::json!({
                    "type": "object",
                    "properties": {*k: {"type": "string", "pattern": NAME_PATTERN}},
                    "required": [k],
                    "additionalProperties": false
                })
            })
            .collect();
        alts.push(inline.to_value());
        json_schema!({ "anyOf": alts })
    }
}

/// An operation alias.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationAlias {
    /// A catalogue operation, e.g. `breg.read-record/v1`.
    pub uses: String,
    /// The logical connection bound in `runtime.yaml`.
    pub connection: String,
    /// Narrows the operation output (`allOf(base, output)`).
    #[serde(default)]
    pub output: Option<TypeRef>,
    /// The BReg action (`breg.invoke-action/v1` only).
    #[serde(default)]
    pub action: Option<ActionDecl>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// A BReg action named by an alias.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionDecl {
    /// The action id.
    pub id: String,
    /// `immediate` (a `proposal` is refused).
    pub kind: ActionKind,
}

/// The kind of a BReg action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// Takes effect at once.
    Immediate,
    /// A Proposal that needs review: refused by `check`.
    Proposal,
}

/// The Function runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// Rhai, sandboxed.
    Rhai,
}

/// A Function declaration.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FunctionDecl {
    /// Always `rhai`.
    pub runtime: Runtime,
    /// The source file (`functions.rhai`).
    pub source: String,
    /// The Rhai function name.
    pub entrypoint: String,
    /// Declared inputs; names equal the entrypoint's parameter names.
    #[serde(default)]
    pub inputs: Members<TypeRef>,
    /// Declared output.
    pub output: TypeRef,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// An event trigger.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TriggerDecl {
    /// An `eventSources` entry of `runtime.yaml`.
    pub source: String,
    /// The event type, e.g. `breg.record.created/v1`.
    pub event_type: String,
    /// What identifies one admission (default: the event's `/id`).
    #[serde(default)]
    pub idempotency: Option<Mapping>,
    /// The run input.
    pub input: Mapping,
}

/// `workflow:`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkflowDecl {
    /// The run input type.
    pub input: TypeRef,
    /// Seconds from admission to the deadline (1 ..= 31,536,000).
    #[schemars(range(min = 1, max = 31_536_000))]
    pub deadline_seconds: u64,
    /// The first step.
    pub start: String,
    /// Steps by name.
    pub steps: Named<Step>,
    /// Outcomes by name, each with the type of its output.
    pub outcomes: Named<TypeRef>,
}

/// A step (SPEC §2.1).
#[derive(Clone, Debug, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Step {
    /// Run one operation.
    Call(CallStep),
    /// Route by a Function's result.
    Choose(ChooseStep),
    /// Wait until an instant.
    WaitUntil(WaitUntilStep),
    /// Wait for a completion of an earlier call.
    WaitFor(WaitForStep),
    /// End the run.
    Finish(FinishStep),
}

/// The `type` words a step may have, in SPEC §2.1's order.
const STEP_TYPES: &[&str] = &[
    StepKind::Call.as_str(),
    StepKind::Choose.as_str(),
    StepKind::WaitUntil.as_str(),
    StepKind::WaitFor.as_str(),
    StepKind::Finish.as_str(),
];

impl Step {
    /// The step's kind (its `type`).
    pub fn kind(&self) -> StepKind {
        match self {
            Step::Call(_) => StepKind::Call,
            Step::Choose(_) => StepKind::Choose,
            Step::WaitUntil(_) => StepKind::WaitUntil,
            Step::WaitFor(_) => StepKind::WaitFor,
            Step::Finish(_) => StepKind::Finish,
        }
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match tag::<D::Error>(&v, STEP_TYPES)?.parse::<StepKind>() {
            Ok(StepKind::Call) => read_variant(v).map(Step::Call),
            Ok(StepKind::Choose) => read_variant(v).map(Step::Choose),
            Ok(StepKind::WaitUntil) => read_variant(v).map(Step::WaitUntil),
            Ok(StepKind::WaitFor) => read_variant(v).map(Step::WaitFor),
            Ok(StepKind::Finish) => read_variant(v).map(Step::Finish),
            Err(UnknownStepKind(other)) => Err(unknown_type(&other, STEP_TYPES)),
        }
    }
}

/// `type: call`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CallStep {
    /// An operation alias.
    pub operation: String,
    /// The operation input.
    pub input: Mapping,
    /// The step after the call completes.
    pub next: String,
    /// Route for an owner-declared no-effect refusal (BReg actions only).
    #[serde(default)]
    pub on_declared_refusal: Option<String>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// `type: choose`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChooseStep {
    /// The Function returning a case label.
    pub function: String,
    /// Explicit arguments by parameter name.
    #[serde(default)]
    pub arguments: Option<Members<Mapping>>,
    /// Case label -> step.
    pub cases: Named<String>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// `type: wait-until`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitUntilStep {
    /// An RFC 3339 instant.
    pub until: Mapping,
    /// The step after the wait.
    pub next: String,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// `type: wait-for`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WaitForStep {
    /// The call step and the completion name.
    pub completion: CompletionRef,
    /// Shorter than the run deadline.
    #[schemars(range(min = 1))]
    pub timeout_seconds: u64,
    /// The step after the completion arrives.
    pub next: String,
    /// The step after a timeout (default: the run ends `expired`).
    #[serde(default)]
    pub on_timeout: Option<String>,
    /// The step after a cancel while waiting here.
    #[serde(default)]
    pub on_cancel: Option<String>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// `completion: {step, name}` of a wait-for.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionRef {
    /// An earlier call step.
    pub step: String,
    /// A completion its operation exposes (e.g. `result`).
    pub name: String,
}

/// `type: finish`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishStep {
    /// A declared outcome.
    pub outcome: String,
    /// The outcome output (default `null`).
    #[serde(default)]
    pub output: Option<Mapping>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
}

/// A mapping (SPEC §2.2).
#[derive(Clone, Debug, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Mapping {
    /// The run input or a member of it.
    Input(PathMapping),
    /// An earlier step's output or a member of it.
    Step(StepMapping),
    /// A fixed value.
    Literal(LiteralMapping),
    /// An object of mapped members.
    Fields(FieldsMapping),
    /// A Function's result.
    Function(FunctionMapping),
    /// The triggering event (triggers only).
    Event(PathMapping),
}

const MAPPING_TYPES: &[&str] = &["input", "step", "literal", "fields", "function", "event"];

impl<'de> Deserialize<'de> for Mapping {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match tag::<D::Error>(&v, MAPPING_TYPES)?.as_str() {
            "input" => read_variant(v).map(Mapping::Input),
            "step" => read_variant(v).map(Mapping::Step),
            "literal" => read_variant(v).map(Mapping::Literal),
            "fields" => read_variant(v).map(Mapping::Fields),
            "function" => read_variant(v).map(Mapping::Function),
            "event" => read_variant(v).map(Mapping::Event),
            other => Err(unknown_type(other, MAPPING_TYPES)),
        }
    }
}

/// `{type: input|event, path?}`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathMapping {
    /// A JSON Pointer.
    #[serde(default)]
    pub path: Option<String>,
}

/// `{type: step, step, path?}`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepMapping {
    /// An earlier `call` or `wait-for` step.
    pub step: String,
    /// A JSON Pointer into its output.
    #[serde(default)]
    pub path: Option<String>,
}

/// `{type: literal, value}`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiteralMapping {
    /// Any JSON value.
    pub value: Value,
}

/// `{type: fields, fields}`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldsMapping {
    /// Member name -> mapping (at most 64).
    pub fields: Members<Mapping>,
}

/// `{type: function, function, arguments?}`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FunctionMapping {
    /// A declared Function.
    pub function: String,
    /// Explicit arguments by parameter name.
    #[serde(default)]
    pub arguments: Option<Members<Mapping>>,
}
