//! Strict JSON reading (SPEC §8): a duplicate member anywhere in a request
//! body is refused, which `serde_json::Value` alone would silently accept
//! (last one wins).

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut seen = BTreeSet::new();
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate member `{key}`"
                )));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Reads `bytes` as one JSON object refusing duplicate members, then as
/// `T`. Every request body of the API is an object: an array is refused
/// here, before serde could read a struct from it by position.
///
/// # Errors
/// A sentence naming what is wrong (never echoing values).
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let Strict(v) = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if !v.is_object() {
        return Err("the body must be a JSON object".to_owned());
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_at_any_depth() {
        assert!(from_slice::<Value>(br#"{"a":1,"b":{"c":1,"c":2}}"#).is_err());
        assert!(from_slice::<Value>(br#"{"a":1,"a":1}"#).is_err());
        assert_eq!(
            from_slice::<Value>(br#"{"a":[1,{"b":null}]}"#).ok(),
            Some(serde_json::json!({"a":[1,{"b":null}]}))
        );
    }

    #[test]
    fn only_an_object_is_a_body() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Pair {
            a: String,
            b: String,
        }
        for body in [&br#"["x","y"]"#[..], b"[]", b"\"x\"", b"1", b"null"] {
            let e = from_slice::<Pair>(body).expect_err("not an object");
            assert_eq!(e, "the body must be a JSON object");
        }
        assert!(from_slice::<Pair>(br#"{"a":"x","b":"y"}"#).is_ok());
    }
}
