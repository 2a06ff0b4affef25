//! Whether a mapping's value fits the schema it feeds: the static type of
//! a mapping ([`Ty`]) against a target schema, on the decidable subset of
//! SPEC §2 (`type`, `enum`/`const`, `properties`, `required`,
//! `additionalProperties`, `items`, local `$ref`, `allOf`, string and
//! number bounds). What lies outside it is [`Fit::Unchecked`]
//! (`coordinator.mapping.fit-unchecked`); a literal is decided whole by the
//! run's validator (`literal.rs`).

use coordinator_ir::pointer::escape_token;
use serde_json::{Map, Value};

use super::literal::fit_literal;
pub use super::verdict::Fit;
use super::verdict::{describe_types, list_values};
use super::{show, types_of, value_type, Sch};

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
            let mp = format!("{member}/{}", escape_token(name));
            let f = match m.get("properties").and_then(|p| p.get(name)) {
                Some(_) => fit_d(
                    ty,
                    &tgt.at(&format!("/properties/{}", escape_token(name))),
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

/// Schema-to-schema fit at one node, combinators aside: the declared
/// types, then `enum`/`const`, then the bounds and members of each type the
/// source may have, then the keywords only the run can check.
fn fit_own(src: &Sch, tgt: &Sch, at: &str, member: &str, depth: usize) -> Fit {
    let Some(t) = tgt.obj() else { return Fit::Ok };
    let s = src.obj().cloned().unwrap_or_default();
    let sts = src_types(src);
    let node = NodeFit {
        src,
        tgt,
        s: &s,
        t,
        at,
        member,
        depth,
    };
    if let Some(decided) = node.declared_types(sts.as_deref()) {
        return decided;
    }
    if let Some(decided) = node.enumerated_values(sts.as_deref()) {
        return decided;
    }
    let sts = sts.unwrap_or_default();
    let is = |t: &str| sts.iter().any(|x| x == t);
    let mut result = Fit::Ok;
    if is("string") {
        result = worst(result, node.string_bounds());
    }
    if is("integer") || is("number") {
        result = worst(result, node.number_bounds());
    }
    if is("object") {
        result = worst(result, node.object_members());
    }
    if is("array") {
        result = worst(result, node.array_items());
    }
    worst(result, keywords_checked_at_run_time(&s, t, at))
}

/// One node of a schema-to-schema fit: the source and target schemas and
/// their keyword maps, the mapping pointer `at`, the target `member`
/// pointer for messages, and the nesting depth so far.
struct NodeFit<'a> {
    src: &'a Sch,
    tgt: &'a Sch,
    s: &'a Map<String, Value>,
    t: &'a Map<String, Value>,
    at: &'a str,
    member: &'a str,
    depth: usize,
}

impl NodeFit<'_> {
    fn mismatch(&self, msg: String) -> Fit {
        Fit::Mismatch(self.at.to_owned(), self.member.to_owned(), msg)
    }

    fn unchecked(&self, reason: String) -> Fit {
        Fit::Unchecked(self.at.to_owned(), reason)
    }

    /// The target's `type` against the source's types (`sts`): decided
    /// when the source declares none (unchecked) or one the target refuses.
    fn declared_types(&self, sts: Option<&[String]>) -> Option<Fit> {
        let tts = types_of(self.tgt.node())?;
        let Some(sts) = sts else {
            return Some(self.unchecked(format!(
                "the source declares no type; {} expects {}",
                show(self.member),
                describe_types(&tts)
            )));
        };
        let bad: Vec<String> = sts
            .iter()
            .filter(|st| !type_allowed(st, &tts))
            .cloned()
            .collect();
        if bad.is_empty() {
            return None;
        }
        Some(self.mismatch(format!(
            "expected {} at {}, found {}",
            describe_types(&tts),
            show(self.member),
            describe_types(&bad)
        )))
    }

    /// The target's `enum`/`const`: when it has one, the source's values
    /// must be among the target's, and that decides the node.
    fn enumerated_values(&self, sts: Option<&[String]>) -> Option<Fit> {
        let tv = enumerated(self.t)?;
        let Some(sv) = enumerated(self.s) else {
            return Some(self.mismatch(format!(
                "expected one of {} at {}, found any {}",
                list_values(&tv),
                show(self.member),
                sts.map(describe_types).unwrap_or_else(|| "value".into())
            )));
        };
        if let Some(x) = sv.iter().find(|x| !tv.contains(x)) {
            return Some(self.mismatch(format!(
                "expected one of {} at {}, found a possible {x}",
                list_values(&tv),
                show(self.member)
            )));
        }
        Some(Fit::Ok)
    }

    /// `format`, `minLength`, `maxLength` and `pattern` of a string source.
    fn string_bounds(&self) -> Fit {
        let (s, t, member) = (self.s, self.t, self.member);
        if let Some(f) = t.get("format").and_then(Value::as_str) {
            if s.get("format").and_then(Value::as_str) != Some(f) {
                return self.mismatch(format!(
                    "expected a {f} string at {}, found a string with no such format",
                    show(member)
                ));
            }
        }
        let smin = s.get("minLength").and_then(Value::as_u64).unwrap_or(0);
        let smax = s.get("maxLength").and_then(Value::as_u64);
        if let Some(tmin) = t.get("minLength").and_then(Value::as_u64) {
            if smin < tmin {
                return self.mismatch(format!("expected a string of at least {tmin} characters at {}, found one that may be shorter", show(member)));
            }
        }
        if let Some(tmax) = t.get("maxLength").and_then(Value::as_u64) {
            if smax.is_none_or(|m| m > tmax) {
                return self.mismatch(format!("expected a string of at most {tmax} characters at {}, found one that may be longer", show(member)));
            }
        }
        match t.get("pattern") {
            Some(tp) if s.get("pattern") != Some(tp) => {
                self.unchecked("`pattern` is checked at run time".into())
            }
            _ => Fit::Ok,
        }
    }

    /// The target's inclusive and exclusive bounds and `multipleOf` for a
    /// number source: each bound must be met by one the source sets.
    fn number_bounds(&self) -> Fit {
        let (s, t) = (self.s, self.t);
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
                    return self.mismatch(format!("expected a number within the bounds the schema sets at {} ({k} {tb}), found one that may fall outside", show(self.member)));
                }
            }
        }
        if t.contains_key("multipleOf") && s.get("multipleOf") != t.get("multipleOf") {
            return self.unchecked("`multipleOf` is checked at run time".into());
        }
        Fit::Ok
    }

    /// An object source: the target's `required` members, each member the
    /// source declares, the target's members the source leaves open, and a
    /// closed target against an open source.
    fn object_members(&self) -> Fit {
        let (s, t, member) = (self.s, self.t, self.member);
        let sreq: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(Value::Array(req)) = t.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !sreq.contains(&r) {
                    return self.mismatch(format!("expected member `{r}` at {}, which the schema requires; the source may lack it", show(member)));
                }
            }
        }
        let sprops = s
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut result = Fit::Ok;
        for name in sprops.keys() {
            result = worst(result, self.source_member(name, &sreq));
        }
        // Target members the source leaves open.
        if let Some(Value::Object(tprops)) = t.get("properties") {
            for name in tprops.keys() {
                if !sprops.contains_key(name)
                    && !matches!(s.get("additionalProperties"), Some(Value::Bool(false)))
                {
                    result = worst(
                        result,
                        self.unchecked(format!(
                            "the source leaves `{name}` open; {} constrains it",
                            show(member)
                        )),
                    );
                }
            }
        }
        if matches!(t.get("additionalProperties"), Some(Value::Bool(false)))
            && !matches!(s.get("additionalProperties"), Some(Value::Bool(false)))
        {
            result = worst(
                result,
                self.unchecked(format!(
                    "the source is an open object; {} is closed",
                    show(member)
                )),
            );
        }
        result
    }

    /// The source's member `name` (required when in `sreq`) against the
    /// target's declaration of it, or its `additionalProperties`.
    fn source_member(&self, name: &str, sreq: &[&str]) -> Fit {
        let (t, member) = (self.t, self.member);
        let mp = format!("{member}/{}", escape_token(name));
        let ssub = self.src.at(&format!("/properties/{}", escape_token(name)));
        match t.get("properties").and_then(|p| p.get(name)) {
            Some(_) => fit_d(
                &Ty::Schema(vec![ssub]),
                &self.tgt.at(&format!("/properties/{}", escape_token(name))),
                self.at,
                &mp,
                self.depth + 1,
            ),
            None => match t.get("additionalProperties") {
                Some(Value::Bool(false)) if !t.contains_key("patternProperties") => {
                    if sreq.contains(&name) {
                        self.mismatch(format!("expected only members the schema declares at {}; the source has `{name}`", show(member)))
                    } else {
                        self.unchecked(format!(
                            "the source may carry `{name}`, which {} does not declare",
                            show(member)
                        ))
                    }
                }
                Some(Value::Object(_)) => fit_d(
                    &Ty::Schema(vec![ssub]),
                    &self.tgt.at("/additionalProperties"),
                    self.at,
                    &mp,
                    self.depth + 1,
                ),
                _ => Fit::Ok,
            },
        }
    }

    /// An array source: its `items` against the target's.
    fn array_items(&self) -> Fit {
        let Some(ti) = self.t.get("items") else {
            return Fit::Ok;
        };
        if !(ti.is_object() || ti == &Value::Bool(false)) {
            return Fit::Ok;
        }
        match self.s.get("items") {
            Some(_) => fit_d(
                &Ty::Schema(vec![self.src.at("/items")]),
                &self.tgt.at("/items"),
                self.at,
                &format!("{}/0", self.member),
                self.depth + 1,
            ),
            None => self.unchecked("the source's items are not typed".into()),
        }
    }
}

/// The keywords of target `t` this fit does not decide, unless source `s`
/// sets the same: unchecked at `at`, the first such keyword's reason kept.
fn keywords_checked_at_run_time(s: &Map<String, Value>, t: &Map<String, Value>, at: &str) -> Fit {
    let mut result = Fit::Ok;
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

/// The values a schema's `const` (first) or `enum` allows, if it sets one.
fn enumerated(keywords: &Map<String, Value>) -> Option<Vec<Value>> {
    keywords
        .get("const")
        .map(|c| vec![c.clone()])
        .or_else(|| keywords.get("enum").and_then(Value::as_array).cloned())
}
