//! JSON Schema support for `check`: keyword validation of authored schemas,
//! annotation stripping for the revision, path walking, and the decidable
//! "does this fit" subset of SPEC §2.

// Matches here are over `serde_json::Value`, a foreign enum whose variants are
// the JSON data model and will not grow; listing them all would add nothing.
#![allow(clippy::wildcard_enum_match_arm)]

use std::rc::Rc;

use coordinator_ir::validation::{self, TypeKind, ValidationErrorKind};
use serde_json::{json, Map, Value};

/// Keywords an authored schema may use (draft 2020-12, no `$id`, no dynamic
/// references). Anything else is refused (`coordinator.schema.unknown-keyword`).
pub const KNOWN_KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "items",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "unevaluatedItems",
    "$ref",
    "$defs",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "title",
    "description",
    "examples",
    "$comment",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
];

/// Annotations removed before hashing (SPEC §4).
pub const ANNOTATIONS: &[&str] = &["title", "description", "examples", "$comment"];

/// Formats that are asserted (SPEC §2).
pub const FORMATS: &[&str] = &["date-time", "uuid", "email"];

const TYPE_NAMES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// Keywords whose value is one subschema.
const SUB_ONE: &[&str] = &[
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "items",
    "contains",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a map of subschemas.
const SUB_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "dependentSchemas",
];
/// Keywords whose value is an array of subschemas.
const SUB_ARRAY: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// A fault in an authored schema: code, pointer suffix inside the schema,
/// message and repair.
#[derive(Debug, Clone)]
pub struct SchemaFault {
    pub code: &'static str,
    pub pointer: String,
    pub message: String,
    pub next: String,
}

/// Checks an authored schema: known keywords, asserted formats, local
/// `$ref`s that resolve, well-formed `type`, `required` and `enum`.
pub fn validate_authored(root: &Value) -> Vec<SchemaFault> {
    let mut out = Vec::new();
    validate_node(root, root, "", 0, &mut out);
    out
}

fn esc(t: &str) -> String {
    t.replace('~', "~0").replace('/', "~1")
}

fn validate_node(root: &Value, node: &Value, ptr: &str, depth: usize, out: &mut Vec<SchemaFault>) {
    if depth > 64 {
        return;
    }
    let map = match node {
        Value::Bool(_) => return,
        Value::Object(m) => m,
        other => {
            out.push(SchemaFault {
                code: "coordinator.schema.invalid",
                pointer: ptr.to_owned(),
                message: format!(
                    "expected a JSON Schema (a mapping or a boolean), found {}",
                    json_kind(other)
                ),
                next: "Write a schema object such as `{type: string}`.".into(),
            });
            return;
        }
    };
    for (k, v) in map {
        let here = format!("{ptr}/{}", esc(k));
        if !KNOWN_KEYWORDS.contains(&k.as_str()) {
            let (message, next) = if k == "$id" || k == "$anchor" || k.starts_with("$dynamic") {
                (
                    format!("`{k}` is not accepted: schemas are local and refer to their own parts only"),
                    format!("Remove `{k}`; use a local `$ref` such as `#/$defs/NAME`."),
                )
            } else {
                (
                    format!("`{k}` is not a JSON Schema keyword this format accepts"),
                    "Correct the keyword's spelling or remove it; unknown keywords are refused."
                        .into(),
                )
            };
            out.push(SchemaFault {
                code: "coordinator.schema.unknown-keyword",
                pointer: here,
                message,
                next,
            });
            continue;
        }
        match k.as_str() {
            "type" => {
                let ok = match v {
                    Value::String(s) => TYPE_NAMES.contains(&s.as_str()),
                    Value::Array(a) => {
                        !a.is_empty()
                            && a.iter()
                                .all(|t| t.as_str().is_some_and(|s| TYPE_NAMES.contains(&s)))
                    }
                    _ => false,
                };
                if !ok {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: format!("`type` must be one of {} or a list of them", TYPE_NAMES.join(", ")),
                        next: "Use a JSON Schema type name.".into(),
                    });
                }
            }
            "required" => {
                let ok = v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
                if !ok {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: "`required` must be a list of member names".into(),
                        next: "List the required member names as strings.".into(),
                    });
                }
            }
            "enum" if v.as_array().is_none_or(|a| a.is_empty()) => {
                {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: "`enum` must be a non-empty list of values".into(),
                        next: "List the accepted values.".into(),
                    });
                }
            }
            "format" => match v.as_str() {
                Some(f) if FORMATS.contains(&f) => {}
                _ => out.push(SchemaFault {
                    code: "coordinator.schema.format",
                    pointer: here,
                    message: format!(
                        "format {} is not asserted; the accepted formats are date-time, uuid and email",
                        v
                    ),
                    next: "Use format date-time, uuid or email, or remove `format` and use `pattern`.".into(),
                }),
            },
            "$ref" => match v.as_str() {
                Some(r) if r.starts_with('#') => {
                    if root.pointer(&r[1..]).is_none() {
                        out.push(SchemaFault {
                            code: "coordinator.schema.ref",
                            pointer: here,
                            message: format!("`$ref` {r} names nothing in this schema"),
                            next: "Point `$ref` at a member of this schema's `$defs`.".into(),
                        });
                    }
                }
                _ => out.push(SchemaFault {
                    code: "coordinator.schema.ref",
                    pointer: here,
                    message: format!("`$ref` {v} is not local; only `#...` references are accepted"),
                    next: "Copy the schema into `$defs` and refer to it as `#/$defs/NAME`, or use `typeRef`.".into(),
                }),
            },
            "$schema" if v.as_str() != Some("https://json-schema.org/draft/2020-12/schema") => {
                {
                    out.push(SchemaFault {
                        code: "coordinator.schema.invalid",
                        pointer: here,
                        message: "only draft 2020-12 schemas are accepted".into(),
                        next: "Remove `$schema` or set it to https://json-schema.org/draft/2020-12/schema."
                            .into(),
                    });
                }
            }
            kw if SUB_ONE.contains(&kw) => validate_node(root, v, &here, depth + 1, out),
            kw if SUB_MAP.contains(&kw) => match v.as_object() {
                Some(m) => {
                    for (name, sub) in m {
                        validate_node(root, sub, &format!("{here}/{}", esc(name)), depth + 1, out);
                    }
                }
                None => out.push(SchemaFault {
                    code: "coordinator.schema.invalid",
                    pointer: here,
                    message: format!("`{kw}` must be a mapping of schemas"),
                    next: "Write a mapping from names to schemas.".into(),
                }),
            },
            kw if SUB_ARRAY.contains(&kw) => match v.as_array() {
                Some(a) => {
                    for (i, sub) in a.iter().enumerate() {
                        validate_node(root, sub, &format!("{here}/{i}"), depth + 1, out);
                    }
                }
                None => out.push(SchemaFault {
                    code: "coordinator.schema.invalid",
                    pointer: here,
                    message: format!("`{kw}` must be a list of schemas"),
                    next: "Write a list of schemas.".into(),
                }),
            },
            _ => {}
        }
    }
}

/// Removes annotations (SPEC §4) from schema positions and sorts `required`,
/// so that neither moves the revision.
pub fn normalise(node: &Value) -> Value {
    match node {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if ANNOTATIONS.contains(&k.as_str()) {
                    continue;
                }
                let nv = if SUB_ONE.contains(&k.as_str()) {
                    normalise(v)
                } else if SUB_MAP.contains(&k.as_str()) {
                    match v {
                        Value::Object(sm) => Value::Object(
                            sm.iter().map(|(n, s)| (n.clone(), normalise(s))).collect(),
                        ),
                        other => other.clone(),
                    }
                } else if SUB_ARRAY.contains(&k.as_str()) {
                    match v {
                        Value::Array(a) => Value::Array(a.iter().map(normalise).collect()),
                        other => other.clone(),
                    }
                } else if k == "required" {
                    match v {
                        Value::Array(a) => {
                            let mut names: Vec<Value> = a.clone();
                            names.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
                            names.dedup();
                            Value::Array(names)
                        }
                        other => other.clone(),
                    }
                } else {
                    v.clone()
                };
                out.insert(k.clone(), nv);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// A JSON kind name for messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A schema node inside a schema document (for local `$ref`).
#[derive(Clone, Debug)]
pub struct Sch {
    /// The whole schema document.
    pub root: Rc<Value>,
    /// JSON Pointer of the node inside `root`.
    pub ptr: String,
}

static TRUE: Value = Value::Bool(true);

impl Sch {
    /// A schema document's root.
    pub fn new(root: Value) -> Self {
        Sch {
            root: Rc::new(root),
            ptr: String::new(),
        }
    }
    /// The node (after no `$ref` resolution).
    pub fn node(&self) -> &Value {
        self.root.pointer(&self.ptr).unwrap_or(&TRUE)
    }
    fn at(&self, suffix: &str) -> Sch {
        Sch {
            root: self.root.clone(),
            ptr: format!("{}{suffix}", self.ptr),
        }
    }
    /// Follows `$ref` when the node is only a reference; up to 32 hops.
    pub fn deref(&self) -> Sch {
        let mut cur = self.clone();
        for _ in 0..32 {
            match cur.node().get("$ref").and_then(Value::as_str) {
                Some(r)
                    if r.starts_with('#')
                        && cur.node().as_object().is_some_and(|m| m.len() == 1) =>
                {
                    cur = Sch {
                        root: cur.root.clone(),
                        ptr: r.get(1..).unwrap_or("").to_owned(),
                    }
                }
                _ => break,
            }
        }
        cur
    }
    fn obj(&self) -> Option<&Map<String, Value>> {
        self.node().as_object()
    }
    /// Subschemas of a combinator keyword.
    fn list(&self, kw: &str) -> Vec<Sch> {
        match self.obj().and_then(|m| m.get(kw)).and_then(Value::as_array) {
            Some(a) => (0..a.len())
                .map(|i| self.at(&format!("/{kw}/{i}")))
                .collect(),
            None => Vec::new(),
        }
    }
    /// The `$ref` target when the node has a `$ref` beside other keywords.
    fn side_ref(&self) -> Option<Sch> {
        let r = self.obj()?.get("$ref")?.as_str()?;
        Some(Sch {
            root: self.root.clone(),
            ptr: r.get(1..)?.to_owned(),
        })
    }
    /// Whether this is the "anything" schema.
    pub fn is_any(&self) -> bool {
        match self.node() {
            Value::Bool(b) => *b,
            Value::Object(m) => m
                .keys()
                .all(|k| ANNOTATIONS.contains(&k.as_str()) || k == "default"),
            _ => false,
        }
    }
    /// Whether it is structurally the same schema as `other`.
    pub fn same_as(&self, other: &Sch) -> bool {
        (Rc::ptr_eq(&self.root, &other.root) && self.ptr == other.ptr)
            || (self.node() == other.node() && self.root == other.root)
    }
}

/// What walking a JSON Pointer through a schema found.
#[derive(Clone, Debug)]
pub enum Walk {
    /// The member is declared; every listed schema applies to it.
    Found(Vec<Sch>),
    /// The member lies under an open object (or an undecidable keyword).
    Unchecked(String),
    /// The schema declares nothing at this prefix of the path.
    Missing(String),
}

/// Splits a JSON Pointer into unescaped tokens; `None` when malformed.
pub fn pointer_tokens(p: &str) -> Option<Vec<String>> {
    if p.is_empty() {
        return Some(Vec::new());
    }
    let rest = p.strip_prefix('/')?;
    let mut out = Vec::new();
    for t in rest.split('/') {
        let mut s = String::new();
        let mut chars = t.chars();
        while let Some(c) = chars.next() {
            if c == '~' {
                match chars.next() {
                    Some('0') => s.push('~'),
                    Some('1') => s.push('/'),
                    _ => return None,
                }
            } else {
                s.push(c);
            }
        }
        out.push(s);
    }
    Some(out)
}

/// Walks `tokens` from `s`. `done` is the pointer walked so far (for messages).
pub fn walk(s: &Sch, tokens: &[String]) -> Walk {
    walk_at(s, tokens, String::new(), 0)
}

fn walk_at(s: &Sch, tokens: &[String], done: String, depth: usize) -> Walk {
    let s = s.deref();
    let Some((first, rest)) = tokens.split_first() else {
        return Walk::Found(vec![s]);
    };
    if depth > 64 {
        return Walk::Unchecked(done);
    }
    let here = format!("{done}/{}", esc(first));
    match s.node() {
        Value::Bool(true) => return Walk::Unchecked(done),
        Value::Bool(false) => return Walk::Missing(here),
        _ => {}
    }
    // Conjunction: own keywords, allOf members, a side $ref, and the
    // disjunction of anyOf/oneOf.
    let mut parts: Vec<Walk> = vec![walk_own(&s, first, rest, &here, &done, depth)];
    for m in s.list("allOf") {
        parts.push(walk_at(&m, tokens, done.clone(), depth + 1));
    }
    if let Some(r) = s.side_ref() {
        parts.push(walk_at(&r, tokens, done.clone(), depth + 1));
    }
    for kw in ["anyOf", "oneOf"] {
        let alts = s.list(kw);
        if !alts.is_empty() {
            let results: Vec<Walk> = alts
                .iter()
                .map(|a| walk_at(a, tokens, done.clone(), depth + 1))
                .collect();
            parts.push(disjoin(results, &here));
        }
    }
    conjoin(parts, &here)
}

fn conjoin(parts: Vec<Walk>, here: &str) -> Walk {
    let mut found = Vec::new();
    let mut unchecked = None;
    for p in parts {
        match p {
            Walk::Missing(at) => return Walk::Missing(at),
            Walk::Found(v) => found.extend(v),
            Walk::Unchecked(at) => {
                unchecked.get_or_insert(at);
            }
        }
    }
    if !found.is_empty() {
        Walk::Found(found)
    } else {
        Walk::Unchecked(unchecked.unwrap_or_else(|| here.to_owned()))
    }
}

fn disjoin(parts: Vec<Walk>, here: &str) -> Walk {
    let mut found = Vec::new();
    let mut unchecked = None;
    let mut missing = None;
    for p in parts {
        match p {
            Walk::Found(v) => found.push(v),
            Walk::Unchecked(at) => {
                unchecked.get_or_insert(at);
            }
            Walk::Missing(at) => {
                missing.get_or_insert(at);
            }
        }
    }
    if let Some(u) = unchecked {
        return Walk::Unchecked(u);
    }
    match found.len() {
        0 => Walk::Missing(missing.unwrap_or_else(|| here.to_owned())),
        // Several branches declare it: its type is one of them; we keep the
        // first branch's view only when there is one, otherwise unchecked.
        1 => Walk::Found(found.into_iter().flatten().collect()),
        _ => Walk::Unchecked(here.to_owned()),
    }
}

fn types_of(node: &Value) -> Option<Vec<String>> {
    match node.get("type")? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => None,
    }
}

fn walk_own(s: &Sch, first: &str, rest: &[String], here: &str, done: &str, depth: usize) -> Walk {
    let Some(m) = s.obj() else {
        return Walk::Unchecked(done.to_owned());
    };
    let types = types_of(s.node());
    let allows = |t: &str| types.as_ref().is_none_or(|ts| ts.iter().any(|x| x == t));
    let is_index = !first.is_empty() && first.chars().all(|c| c.is_ascii_digit());
    if let Some(Value::Object(props)) = m.get("properties") {
        if props.contains_key(first) {
            let sub = s.at(&format!("/properties/{}", esc(first)));
            return walk_at(&sub, rest, here.to_owned(), depth + 1);
        }
    }
    let object_ish = allows("object")
        && (types.is_some()
            || m.contains_key("properties")
            || m.contains_key("additionalProperties"));
    let array_ish = allows("array") && (types.is_some() || m.contains_key("items"));
    if types.is_some() && !allows("object") && !(allows("array") && is_index) {
        return Walk::Missing(here.to_owned());
    }
    if array_ish && is_index && !allows("object") {
        return match m.get("items") {
            Some(_) if !m.contains_key("prefixItems") => {
                walk_at(&s.at("/items"), rest, here.to_owned(), depth + 1)
            }
            _ => Walk::Unchecked(here.to_owned()),
        };
    }
    if object_ish {
        if m.contains_key("patternProperties") {
            return Walk::Unchecked(done.to_owned());
        }
        return match m.get("additionalProperties") {
            Some(Value::Bool(false)) => Walk::Missing(here.to_owned()),
            Some(Value::Object(_)) => walk_at(
                &s.at("/additionalProperties"),
                rest,
                here.to_owned(),
                depth + 1,
            ),
            _ => Walk::Unchecked(done.to_owned()),
        };
    }
    Walk::Unchecked(done.to_owned())
}

/// A static type of a mapping's value.
#[derive(Clone, Debug)]
pub enum Ty {
    /// Nothing known: checked at run time.
    Any,
    /// The mapping already has an error: dependent checks stay silent.
    Error,
    /// A value valid under every one of these schemas.
    Schema(Vec<Sch>),
    /// One of these (a join of routes).
    Union(Vec<Ty>),
    /// A known value.
    Literal(Value),
    /// An object built by `fields`: member, its type, the member mapping's pointer.
    Object(Vec<(String, Ty, String)>),
}

/// Result of a fit check.
#[derive(Clone, Debug)]
pub enum Fit {
    /// Every value of the source type is valid under the target.
    Ok,
    /// Not decidable here: `(mapping pointer, reason)`.
    Unchecked(String, String),
    /// Does not fit: `(mapping pointer, target member pointer, message)`.
    Mismatch(String, String, String),
}

fn rank(f: &Fit) -> u8 {
    match f {
        Fit::Ok => 0,
        Fit::Unchecked(..) => 1,
        Fit::Mismatch(..) => 2,
    }
}

/// Checks that every value of `src` (produced by the mapping at `at`) is
/// valid under `tgt`. `member` is the target pointer for messages.
pub fn fit(src: &Ty, tgt: &Sch, at: &str, member: &str) -> Fit {
    fit_d(src, tgt, at, member, 0)
}

fn worst(a: Fit, b: Fit) -> Fit {
    if rank(&b) > rank(&a) {
        b
    } else {
        a
    }
}

fn fit_d(src: &Ty, tgt: &Sch, at: &str, member: &str, depth: usize) -> Fit {
    let tgt = tgt.deref();
    if tgt.is_any() {
        return Fit::Ok;
    }
    if depth > 48 {
        return Fit::Unchecked(
            at.to_owned(),
            "the schemas nest too deeply to compare".into(),
        );
    }
    if let Value::Bool(false) = tgt.node() {
        return Fit::Mismatch(
            at.to_owned(),
            member.to_owned(),
            "no value is accepted here".into(),
        );
    }
    match src {
        Ty::Any => Fit::Unchecked(
            at.to_owned(),
            "the value's type is not known before run time".into(),
        ),
        Ty::Error => Fit::Ok,
        Ty::Union(alts) => alts
            .iter()
            .map(|a| fit_d(a, &tgt, at, member, depth + 1))
            .fold(Fit::Ok, worst),
        Ty::Literal(v) => fit_literal(v, &tgt, at, member),
        Ty::Object(members) => fit_object(members, &tgt, at, member, depth),
        Ty::Schema(conj) => {
            let mut best: Option<Fit> = None;
            for s in conj {
                let f = fit_schema(s, &tgt, at, member, depth);
                if matches!(f, Fit::Ok) {
                    return Fit::Ok;
                }
                best = Some(match best {
                    None => f,
                    Some(b) => {
                        if rank(&f) < rank(&b) {
                            f
                        } else {
                            b
                        }
                    }
                });
            }
            best.unwrap_or_else(|| Fit::Unchecked(at.to_owned(), "no schema".into()))
        }
    }
}

/// Applies the combinators of `tgt` around a per-node check.
fn combinators(
    tgt: &Sch,
    own: Fit,
    mut each: impl FnMut(&Sch) -> Fit,
    at: &str,
    member: &str,
) -> Fit {
    let mut result = own;
    for m in tgt.list("allOf") {
        result = worst(result, each(&m));
    }
    if let Some(r) = tgt.side_ref() {
        result = worst(result, each(&r));
    }
    for kw in ["anyOf", "oneOf"] {
        let alts = tgt.list(kw);
        if alts.is_empty() {
            continue;
        }
        let fits: Vec<Fit> = alts.iter().map(&mut each).collect();
        let f = if fits.iter().any(|f| matches!(f, Fit::Ok)) {
            if kw == "oneOf" && fits.iter().filter(|f| matches!(f, Fit::Ok)).count() > 1 {
                Fit::Unchecked(
                    at.to_owned(),
                    "more than one `oneOf` branch accepts the value".into(),
                )
            } else {
                Fit::Ok
            }
        } else if let Some(u) = fits.iter().find(|f| matches!(f, Fit::Unchecked(..))) {
            u.clone()
        } else {
            Fit::Mismatch(
                at.to_owned(),
                member.to_owned(),
                format!("the value matches none of the `{kw}` alternatives"),
            )
        };
        result = worst(result, f);
    }
    if tgt
        .obj()
        .is_some_and(|m| m.contains_key("not") || m.contains_key("if"))
    {
        result = worst(
            result,
            Fit::Unchecked(at.to_owned(), "`not`/`if` are checked at run time".into()),
        );
    }
    result
}

fn type_word(t: &str) -> String {
    match t {
        "object" => "an object".into(),
        "array" => "a list".into(),
        "integer" => "an integer".into(),
        "null" => "null".into(),
        other => format!("a {other}"),
    }
}

fn describe_types(ts: &[String]) -> String {
    ts.iter()
        .map(|t| type_word(t))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn type_allowed(v_type: &str, allowed: &[String]) -> bool {
    allowed
        .iter()
        .any(|a| a == v_type || (a == "number" && v_type == "integer"))
}

fn fit_object(
    members: &[(String, Ty, String)],
    tgt: &Sch,
    at: &str,
    member: &str,
    depth: usize,
) -> Fit {
    let own = (|| {
        let Some(m) = tgt.obj() else { return Fit::Ok };
        if let Some(ts) = types_of(tgt.node()) {
            if !type_allowed("object", &ts) {
                return Fit::Mismatch(
                    at.to_owned(),
                    member.to_owned(),
                    format!(
                        "expected {} at {}, found an object",
                        describe_types(&ts),
                        show(member)
                    ),
                );
            }
        }
        let mut result = Fit::Ok;
        if let Some(Value::Array(req)) = m.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !members.iter().any(|(n, _, _)| n == r) {
                    return Fit::Mismatch(
                        at.to_owned(),
                        member.to_owned(),
                        format!("expected member `{r}` at {}, which the schema requires; the mapping does not set it", show(member)),
                    );
                }
            }
        }
        for (name, ty, ptr) in members {
            let mp = format!("{member}/{}", esc(name));
            let f = match m.get("properties").and_then(|p| p.get(name)) {
                Some(_) => fit_d(
                    ty,
                    &tgt.at(&format!("/properties/{}", esc(name))),
                    ptr,
                    &mp,
                    depth + 1,
                ),
                None => {
                    if m.contains_key("patternProperties") {
                        Fit::Unchecked(
                            ptr.clone(),
                            "`patternProperties` is checked at run time".into(),
                        )
                    } else {
                        match m.get("additionalProperties") {
                            Some(Value::Bool(false)) => Fit::Mismatch(
                                ptr.clone(),
                                mp.clone(),
                                format!("expected only members the schema declares at {}; it declares no `{name}`", show(member)),
                            ),
                            Some(Value::Object(_)) => {
                                fit_d(ty, &tgt.at("/additionalProperties"), ptr, &mp, depth + 1)
                            }
                            _ => Fit::Ok,
                        }
                    }
                }
            };
            result = worst(result, f);
        }
        for kw in [
            "minProperties",
            "maxProperties",
            "propertyNames",
            "dependentRequired",
            "dependentSchemas",
            "unevaluatedProperties",
        ] {
            if m.contains_key(kw) {
                result = worst(
                    result,
                    Fit::Unchecked(at.to_owned(), format!("`{kw}` is checked at run time")),
                );
            }
        }
        if m.contains_key("enum") || m.contains_key("const") {
            result = worst(
                result,
                Fit::Unchecked(
                    at.to_owned(),
                    "`enum`/`const` of objects are checked at run time".into(),
                ),
            );
        }
        result
    })();
    combinators(
        tgt,
        own,
        |s| fit_object(members, s, at, member, depth + 1),
        at,
        member,
    )
}

/// Renders a target member pointer for messages (`/` for the whole value).
pub fn show(member: &str) -> String {
    if member.is_empty() {
        "the top level".into()
    } else {
        member.to_owned()
    }
}

fn list_values(e: &[Value]) -> String {
    e.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The JSON Schema type name of a value.
pub fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A literal's fit, decided by the run-time validator
/// ([`coordinator_ir::validation`]) against the schema exactly as the
/// Program stores it ([`materialise`]): a literal is never left unchecked,
/// so `check` and a run cannot disagree about it. When several faults are
/// found, the one nearest the literal's top level is reported.
fn fit_literal(v: &Value, tgt: &Sch, at: &str, member: &str) -> Fit {
    let validator = match validation::validator(&materialise(tgt)) {
        Ok(x) => x,
        Err(e) => {
            return Fit::Unchecked(at.to_owned(), format!("the schema does not compile ({e})"))
        }
    };
    let fault = validator
        .iter_errors(v)
        .min_by_key(|e| e.instance_path().as_str().matches('/').count());
    match fault {
        None => Fit::Ok,
        Some(e) => {
            let here = format!("{member}{}", e.instance_path().as_str());
            let message = literal_fault(e.kind(), e.instance(), &here);
            Fit::Mismatch(at.to_owned(), here, message)
        }
    }
}

/// A validator's finding about a literal, in the words of `check`'s other
/// fit messages (`expected ... at MEMBER, found ...`). The literal is the
/// author's own text, so unlike the VM's run-time messages it is quoted.
// The kinds are jsonschema's, and grow with it: every other kind is named
// by its keyword, so a catch-all arm is the intent here.
#[allow(clippy::wildcard_enum_match_arm)]
fn literal_fault(kind: &ValidationErrorKind, found: &Value, member: &str) -> String {
    use ValidationErrorKind as K;
    let at = show(member);
    match kind {
        K::Type { kind } => {
            let ts: Vec<String> = match kind {
                TypeKind::Single(t) => vec![t.as_str().to_owned()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.as_str().to_owned()).collect(),
            };
            format!(
                "expected {} at {at}, found {}",
                describe_types(&ts),
                json_kind(found)
            )
        }
        K::Enum { options } => {
            let listed = match options.as_ref() {
                Value::Array(a) => list_values(a),
                other => other.to_string(),
            };
            format!("expected one of {listed} at {at}, found {found}")
        }
        K::Constant { expected_value } => {
            format!("expected {expected_value} at {at}, found {found}")
        }
        K::MinLength { limit } => {
            format!("expected a string of at least {limit} characters at {at}")
        }
        K::MaxLength { limit } => {
            format!("expected a string of at most {limit} characters at {at}")
        }
        K::Format { format } => format!("expected a {format} string at {at}, found {found}"),
        K::Pattern { pattern } => {
            format!("expected a string matching `{pattern}` at {at}, found {found}")
        }
        K::Minimum { .. }
        | K::Maximum { .. }
        | K::ExclusiveMinimum { .. }
        | K::ExclusiveMaximum { .. } => {
            format!("the number {found} is out of the bounds the schema sets at {at}")
        }
        K::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            format!("expected member `{name}` at {at}, which the schema requires")
        }
        K::AdditionalProperties { unexpected } => format!(
            "expected only members the schema declares at {at}; it declares no `{}`",
            unexpected.first().map(String::as_str).unwrap_or_default()
        ),
        K::MinItems { .. } | K::MaxItems { .. } => format!(
            "the list has {} items, out of the bounds the schema sets at {at}",
            found.as_array().map_or(0, Vec::len)
        ),
        K::AnyOf { .. } => format!("the value matches none of the `anyOf` alternatives at {at}"),
        K::OneOfNotValid { .. } => {
            format!("the value matches none of the `oneOf` alternatives at {at}")
        }
        K::OneOfMultipleValid { .. } => {
            format!("the value matches more than one `oneOf` alternative at {at}")
        }
        K::FalseSchema => format!("no value is accepted at {at}"),
        other => format!(
            "the value does not satisfy the schema's `{}` at {at}",
            other.keyword()
        ),
    }
}

/// A schema as the Program stores it: self-contained, annotations removed.
/// A node inside a document becomes a `$ref` into the document, carried
/// under `$defs/root`, so its local references still resolve.
pub(crate) fn materialise(s: &Sch) -> Value {
    let node = normalise(s.node());
    if s.ptr.is_empty() {
        return node;
    }
    let root = rebase(&normalise(&s.root), "/$defs/root");
    json!({"$ref": format!("#/$defs/root{}", s.ptr), "$defs": {"root": root}})
}

/// Rewrites local `$ref`s of a schema placed at `prefix` inside a new root.
pub(crate) fn rebase(v: &Value, prefix: &str) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    let nx = match (k.as_str(), x) {
                        ("$ref", Value::String(r)) if r.starts_with('#') => {
                            Value::String(format!("#{prefix}{}", r.get(1..).unwrap_or("")))
                        }
                        _ => rebase(x, prefix),
                    };
                    (k.clone(), nx)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| rebase(x, prefix)).collect()),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_)) => {
            other.clone()
        }
    }
}

/// Schema-to-schema fit on the decidable subset.
fn fit_schema(src: &Sch, tgt: &Sch, at: &str, member: &str, depth: usize) -> Fit {
    let src = src.deref();
    let tgt = tgt.deref();
    if tgt.is_any() {
        return Fit::Ok;
    }
    if src.same_as(&tgt) || src.node() == tgt.node() && !src.node().to_string().contains("$ref") {
        return Fit::Ok;
    }
    if depth > 48 {
        return Fit::Unchecked(
            at.to_owned(),
            "the schemas nest too deeply to compare".into(),
        );
    }
    // A source with alternatives fits when every alternative does.
    for kw in ["anyOf", "oneOf"] {
        let alts = src.list(kw);
        if !alts.is_empty() && types_of(src.node()).is_none() {
            return alts
                .iter()
                .map(|a| fit_schema(a, &tgt, at, member, depth + 1))
                .fold(Fit::Ok, worst);
        }
    }
    // A source conjunction fits when one member does (sufficient).
    let conj = src.list("allOf");
    if !conj.is_empty() {
        let mut best = None;
        for s in conj
            .iter()
            .chain(std::iter::once(&src).filter(|_| types_of(src.node()).is_some()))
        {
            let probe = if std::ptr::eq(s, &src) {
                fit_own(&src, &tgt, at, member, depth)
            } else {
                fit_schema(s, &tgt, at, member, depth + 1)
            };
            if matches!(probe, Fit::Ok) {
                return Fit::Ok;
            }
            best = Some(match best {
                None => probe,
                Some(b) => {
                    if rank(&probe) < rank(&b) {
                        probe
                    } else {
                        b
                    }
                }
            });
        }
        return best.unwrap_or(Fit::Ok);
    }
    let own = fit_own(&src, &tgt, at, member, depth);
    combinators(
        &tgt,
        own,
        |t| fit_schema(&src, t, at, member, depth + 1),
        at,
        member,
    )
}

fn src_types(src: &Sch) -> Option<Vec<String>> {
    if let Some(ts) = types_of(src.node()) {
        return Some(ts);
    }
    let m = src.obj()?;
    if let Some(c) = m.get("const") {
        return Some(vec![value_type(c).to_owned()]);
    }
    if let Some(Value::Array(e)) = m.get("enum") {
        let mut ts: Vec<String> = e.iter().map(|v| value_type(v).to_owned()).collect();
        ts.sort();
        ts.dedup();
        return Some(ts);
    }
    None
}

fn fit_own(src: &Sch, tgt: &Sch, at: &str, member: &str, depth: usize) -> Fit {
    let Some(t) = tgt.obj() else { return Fit::Ok };
    let mismatch = |msg: String| Fit::Mismatch(at.to_owned(), member.to_owned(), msg);
    let s = src.obj().cloned().unwrap_or_default();
    let sts = src_types(src);
    let mut result = Fit::Ok;
    if let Some(tts) = types_of(tgt.node()) {
        match &sts {
            None => {
                return Fit::Unchecked(
                    at.to_owned(),
                    format!(
                        "the source declares no type; {} expects {}",
                        show(member),
                        describe_types(&tts)
                    ),
                )
            }
            Some(sts) => {
                let bad: Vec<String> = sts
                    .iter()
                    .filter(|st| !type_allowed(st, &tts))
                    .cloned()
                    .collect();
                if !bad.is_empty() {
                    return mismatch(format!(
                        "expected {} at {}, found {}",
                        describe_types(&tts),
                        show(member),
                        describe_types(&bad)
                    ));
                }
            }
        }
    }
    // enum / const: the source's values must be among the target's.
    let tvals: Option<Vec<Value>> = t
        .get("const")
        .map(|c| vec![c.clone()])
        .or_else(|| t.get("enum").and_then(Value::as_array).cloned());
    if let Some(tv) = tvals {
        let svals: Option<Vec<Value>> = s
            .get("const")
            .map(|c| vec![c.clone()])
            .or_else(|| s.get("enum").and_then(Value::as_array).cloned());
        match svals {
            Some(sv) => {
                if let Some(x) = sv.iter().find(|x| !tv.contains(x)) {
                    return mismatch(format!(
                        "expected one of {} at {}, found a possible {x}",
                        list_values(&tv),
                        show(member)
                    ));
                }
                return Fit::Ok;
            }
            None => {
                return mismatch(format!(
                    "expected one of {} at {}, found any {}",
                    list_values(&tv),
                    show(member),
                    sts.map(|t| describe_types(&t))
                        .unwrap_or_else(|| "value".into())
                ))
            }
        }
    }
    let sts = sts.unwrap_or_default();
    let is = |t: &str| sts.iter().any(|x| x == t);
    if is("string") {
        if let Some(f) = t.get("format").and_then(Value::as_str) {
            if s.get("format").and_then(Value::as_str) != Some(f) {
                return mismatch(format!(
                    "expected a {f} string at {}, found a string with no such format",
                    show(member)
                ));
            }
        }
        let smin = s.get("minLength").and_then(Value::as_u64).unwrap_or(0);
        let smax = s.get("maxLength").and_then(Value::as_u64);
        if let Some(tmin) = t.get("minLength").and_then(Value::as_u64) {
            if smin < tmin {
                return mismatch(format!("expected a string of at least {tmin} characters at {}, found one that may be shorter", show(member)));
            }
        }
        if let Some(tmax) = t.get("maxLength").and_then(Value::as_u64) {
            if smax.is_none_or(|m| m > tmax) {
                return mismatch(format!("expected a string of at most {tmax} characters at {}, found one that may be longer", show(member)));
            }
        }
        if let Some(tp) = t.get("pattern") {
            if s.get("pattern") != Some(tp) {
                result = worst(
                    result,
                    Fit::Unchecked(at.to_owned(), "`pattern` is checked at run time".into()),
                );
            }
        }
    }
    if is("integer") || is("number") {
        for (k, lower) in [
            ("minimum", true),
            ("exclusiveMinimum", true),
            ("maximum", false),
            ("exclusiveMaximum", false),
        ] {
            if let Some(tb) = t.get(k).and_then(Value::as_f64) {
                let sb = s.get(k).and_then(Value::as_f64).or_else(|| {
                    if k.starts_with("exclusive") {
                        None
                    } else {
                        s.get(if lower {
                            "exclusiveMinimum"
                        } else {
                            "exclusiveMaximum"
                        })
                        .and_then(Value::as_f64)
                    }
                });
                let ok = match sb {
                    Some(sb) => {
                        if lower {
                            sb >= tb
                        } else {
                            sb <= tb
                        }
                    }
                    None => false,
                };
                if !ok {
                    return mismatch(format!("expected a number within the bounds the schema sets at {} ({k} {tb}), found one that may fall outside", show(member)));
                }
            }
        }
        if t.contains_key("multipleOf") && s.get("multipleOf") != t.get("multipleOf") {
            result = worst(
                result,
                Fit::Unchecked(at.to_owned(), "`multipleOf` is checked at run time".into()),
            );
        }
    }
    if is("object") {
        let sreq: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(Value::Array(req)) = t.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !sreq.contains(&r) {
                    return mismatch(format!("expected member `{r}` at {}, which the schema requires; the source may lack it", show(member)));
                }
            }
        }
        let sprops = s
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for name in sprops.keys() {
            let mp = format!("{member}/{}", esc(name));
            let ssub = src.at(&format!("/properties/{}", esc(name)));
            let f = match t.get("properties").and_then(|p| p.get(name)) {
                Some(_) => fit_d(
                    &Ty::Schema(vec![ssub]),
                    &tgt.at(&format!("/properties/{}", esc(name))),
                    at,
                    &mp,
                    depth + 1,
                ),
                None => match t.get("additionalProperties") {
                    Some(Value::Bool(false)) if !t.contains_key("patternProperties") => {
                        if sreq.contains(&name.as_str()) {
                            mismatch(format!("expected only members the schema declares at {}; the source has `{name}`", show(member)))
                        } else {
                            Fit::Unchecked(
                                at.to_owned(),
                                format!(
                                    "the source may carry `{name}`, which {} does not declare",
                                    show(member)
                                ),
                            )
                        }
                    }
                    Some(Value::Object(_)) => fit_d(
                        &Ty::Schema(vec![ssub]),
                        &tgt.at("/additionalProperties"),
                        at,
                        &mp,
                        depth + 1,
                    ),
                    _ => Fit::Ok,
                },
            };
            result = worst(result, f);
        }
        // Target members the source leaves open.
        if let Some(Value::Object(tprops)) = t.get("properties") {
            for name in tprops.keys() {
                if !sprops.contains_key(name)
                    && !matches!(s.get("additionalProperties"), Some(Value::Bool(false)))
                {
                    result = worst(
                        result,
                        Fit::Unchecked(
                            at.to_owned(),
                            format!(
                                "the source leaves `{name}` open; {} constrains it",
                                show(member)
                            ),
                        ),
                    );
                }
            }
        }
        if matches!(t.get("additionalProperties"), Some(Value::Bool(false)))
            && !matches!(s.get("additionalProperties"), Some(Value::Bool(false)))
        {
            result = worst(
                result,
                Fit::Unchecked(
                    at.to_owned(),
                    format!("the source is an open object; {} is closed", show(member)),
                ),
            );
        }
    }
    if is("array") {
        if let Some(ti) = t.get("items") {
            if ti.is_object() || ti == &Value::Bool(false) {
                let f = match s.get("items") {
                    Some(_) => fit_d(
                        &Ty::Schema(vec![src.at("/items")]),
                        &tgt.at("/items"),
                        at,
                        &format!("{member}/0"),
                        depth + 1,
                    ),
                    None => {
                        Fit::Unchecked(at.to_owned(), "the source's items are not typed".into())
                    }
                };
                result = worst(result, f);
            }
        }
    }
    for kw in [
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
        "prefixItems",
        "contains",
        "minItems",
        "maxItems",
        "uniqueItems",
        "unevaluatedItems",
    ] {
        if t.contains_key(kw) && s.get(kw) != t.get(kw) {
            result = worst(
                result,
                Fit::Unchecked(at.to_owned(), format!("`{kw}` is checked at run time")),
            );
        }
    }
    result
}
