//! Walking a mapping's JSON Pointer `path` through a schema: what the
//! schema declares at the path, or where it stops declaring
//! (`coordinator.mapping.path`) or leaves the member open
//! (`coordinator.mapping.path-unchecked`).

use coordinator_ir::pointer::escape_token;
use serde_json::Value;

use super::{types_of, Sch};

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
    let here = format!("{done}/{}", escape_token(first));
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

fn walk_own(s: &Sch, first: &str, rest: &[String], here: &str, done: &str, depth: usize) -> Walk {
    let Some(m) = s.obj() else {
        return Walk::Unchecked(done.to_owned());
    };
    let types = types_of(s.node());
    let allows = |t: &str| types.as_ref().is_none_or(|ts| ts.iter().any(|x| x == t));
    let is_index = !first.is_empty() && first.chars().all(|c| c.is_ascii_digit());
    if let Some(Value::Object(props)) = m.get("properties") {
        if props.contains_key(first) {
            let sub = s.at(&format!("/properties/{}", escape_token(first)));
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
