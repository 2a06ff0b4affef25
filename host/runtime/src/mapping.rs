//! Sections of the runtime file that must be YAML mappings, and words
//! that must be plain strings.
//!
//! serde's derived `Deserialize` of a struct also takes a sequence, its
//! members by position (`limits: [2, 5, 5]` read as `inFlight: 2,
//! perSecond: 5, burst: 5`), which the JSON Schema and the docs do not
//! allow and which a new member would silently shift. The fields named
//! with `#[serde(deserialize_with = "crate::mapping::…")]` take a mapping
//! only: anything else is serde's "invalid type: …, expected a mapping",
//! which the YAML reader reports as `coordinator.yaml.wrong-type` at the
//! value. (Through an internally tagged enum too: the check is made where
//! the field is read.)

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// `T` read from a mapping only.
struct MappingOnly<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MappingOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Only(PhantomData)).map(MappingOnly)
    }
}

/// A section that must be a mapping.
pub(crate) fn required<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    MappingOnly::deserialize(d).map(|m| m.0)
}

/// A word of a fixed set (an enum of unit variants) that must be written
/// as a plain string: serde's derived enums also take the mapping form
/// `{session: null}`.
pub(crate) fn word<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    struct Word<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Word<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            T::deserialize(de::value::StrDeserializer::<E>::new(v))
        }
    }
    d.deserialize_str(Word(PhantomData))
}

/// An optional section (absent or `null`: `None`) that must otherwise be
/// a mapping.
pub(crate) fn optional<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Option::<MappingOnly<T>>::deserialize(d).map(|o| o.map(|m| m.0))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::CallLimits;

    #[derive(serde::Deserialize, Debug)]
    struct Holder {
        #[serde(default, deserialize_with = "super::optional")]
        limits: Option<CallLimits>,
    }

    #[derive(serde::Deserialize, Debug)]
    struct Pooling {
        #[serde(default, deserialize_with = "super::word")]
        mode: crate::config::PoolingMode,
    }

    #[test]
    fn a_word_is_a_plain_string() {
        let read = |v| serde_json::from_value::<Pooling>(v);
        let p = read(json!({"mode": "transaction"})).expect("a word");
        assert_eq!(p.mode, crate::config::PoolingMode::Transaction);
        assert_eq!(
            read(json!({})).expect("absent").mode,
            crate::config::PoolingMode::Session
        );
        let e = read(json!({"mode": {"session": null}}))
            .expect_err("a mapping")
            .to_string();
        assert!(e.contains("expected a string"), "{e}");
        let e = read(json!({"mode": "pooled"}))
            .expect_err("no such word")
            .to_string();
        assert!(e.contains("unknown variant `pooled`"), "{e}");
    }

    #[test]
    fn a_mapping_is_read_and_a_sequence_is_refused() {
        let read = |v| serde_json::from_value::<Holder>(v);
        let h = read(json!({"limits": {"inFlight": 2}})).expect("a mapping");
        assert_eq!(h.limits.and_then(|l| l.in_flight), Some(2));
        assert!(read(json!({"limits": null}))
            .expect("null")
            .limits
            .is_none());
        assert!(read(json!({})).expect("absent").limits.is_none());
        for bad in [json!([2, 5, 5]), json!([]), json!(5), json!("none")] {
            let e = read(json!({ "limits": bad }))
                .expect_err("refused")
                .to_string();
            assert!(e.contains("expected a mapping"), "{e}");
        }
    }
}
