//! A serde deserializer over an owned [`Value`] whose error type is
//! [`TypedError`]: the kind of a fault is kept (see `typed.rs`).
//!
//! It calls the visitor as `serde_json`'s own `impl Deserializer for
//! Value` does — which method for which value, the same checks of a
//! sequence's and a mapping's leftovers, an enum as a word or a mapping
//! with one key, a mapping's keys as strings (numbers when a number is
//! asked for) — so a type reads the same, and a fault says the same, as
//! through `serde_json::from_value`. (serde_json's `RawValue` is not
//! supported: nothing read from an authored file holds one.)
//!
//! Why not a crate: `serde-value`'s and `serde_json`'s own `Value`
//! deserializers were tried. The first reads a mapping's keys in sorted
//! order and lets a sequence's leftover elements pass, so a fault would
//! name another field or none; the second's error type loses the kind of a
//! fault, which is what the stable `yaml.*` codes are made from.

use serde::de::{
    self, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Number, Value};

use super::TypedError;

/// Reads an owned JSON value; see the module's doc.
pub struct ValueDeserializer {
    value: Value,
}

impl ValueDeserializer {
    /// A deserializer of `value`.
    pub fn new(value: Value) -> ValueDeserializer {
        ValueDeserializer { value }
    }

    fn invalid_type(&self, exp: &dyn de::Expected) -> TypedError {
        de::Error::invalid_type(unexpected(&self.value), exp)
    }
}

fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => number_unexpected(n),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

fn number_unexpected(n: &Number) -> Unexpected<'static> {
    if let Some(u) = n.as_u64() {
        Unexpected::Unsigned(u)
    } else if let Some(i) = n.as_i64() {
        Unexpected::Signed(i)
    } else {
        Unexpected::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A number to the visitor as its own kind: `u64`, negative `i64`, `f64`.
fn visit_number<'de, V: Visitor<'de>>(n: &Number, visitor: V) -> Result<V::Value, TypedError> {
    if let Some(u) = n.as_u64() {
        visitor.visit_u64(u)
    } else if let Some(i) = n.as_i64() {
        visitor.visit_i64(i)
    } else {
        visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn visit_array<'de, V: Visitor<'de>>(
    array: Vec<Value>,
    visitor: V,
) -> Result<V::Value, TypedError> {
    let len = array.len();
    let mut elements = Elements {
        rest: array.into_iter(),
    };
    let read = visitor.visit_seq(&mut elements)?;
    if elements.rest.len() == 0 {
        Ok(read)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in array"))
    }
}

fn visit_object<'de, V: Visitor<'de>>(
    object: Map<String, Value>,
    visitor: V,
) -> Result<V::Value, TypedError> {
    let len = object.len();
    let mut entries = Entries {
        rest: object.into_iter(),
        value: None,
    };
    let read = visitor.visit_map(&mut entries)?;
    if entries.rest.len() == 0 {
        Ok(read)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in map"))
    }
}

macro_rules! numbers {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
                match &self.value {
                    Value::Number(n) => visit_number(n, visitor),
                    _ => Err(self.invalid_type(&visitor)),
                }
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for ValueDeserializer {
    type Error = TypedError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(n) => visit_number(&n, visitor),
            Value::String(s) => visitor.visit_string(s),
            Value::Array(a) => visit_array(a, visitor),
            Value::Object(o) => visit_object(o, visitor),
        }
    }

    numbers!(
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    );

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Object(object) => {
                let mut entries = object.into_iter();
                match (entries.next(), entries.next()) {
                    (Some((variant, value)), None) => visitor.visit_enum(Variant {
                        name: variant,
                        value: Some(value),
                    }),
                    _ => Err(de::Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    )),
                }
            }
            Value::String(variant) => visitor.visit_enum(Variant {
                name: variant,
                value: None,
            }),
            other => Err(de::Error::invalid_type(
                unexpected(&other),
                &"string or map",
            )),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Bool(b) => visitor.visit_bool(b),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.deserialize_string(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::String(s) => visitor.visit_string(s),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.deserialize_byte_buf(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::String(s) => visitor.visit_string(s),
            Value::Array(a) => visit_array(a, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Array(a) => visit_array(a, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Object(o) => visit_object(o, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        match self.value {
            Value::Array(a) => visit_array(a, visitor),
            Value::Object(o) => visit_object(o, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        self.deserialize_string(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        visitor.visit_unit()
    }
}

/// The elements of a sequence still to read.
struct Elements {
    rest: std::vec::IntoIter<Value>,
}

impl<'de> SeqAccess<'de> for Elements {
    type Error = TypedError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, TypedError> {
        match self.rest.next() {
            Some(value) => seed.deserialize(ValueDeserializer::new(value)).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest.len())
    }
}

/// The entries of a mapping still to read, and the value of the key last read.
struct Entries {
    rest: serde_json::map::IntoIter,
    value: Option<Value>,
}

impl<'de> MapAccess<'de> for Entries {
    type Error = TypedError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, TypedError> {
        match self.rest.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(Key { key }).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, TypedError> {
        match self.value.take() {
            Some(value) => seed.deserialize(ValueDeserializer::new(value)),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest.len())
    }
}

/// A mapping's key: a string, or the number it spells when a number is
/// asked for, or `true`/`false` when a boolean is.
struct Key {
    key: String,
}

impl Key {
    fn number<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        let starts_a_number = self
            .key
            .starts_with(|c: char| c.is_ascii_digit() || c == '-');
        match serde_json::from_str::<Number>(&self.key) {
            Ok(n) if starts_a_number => visit_number(&n, visitor),
            _ => Err(de::Error::custom(
                "invalid value: expected key to be a number in quotes",
            )),
        }
    }
}

macro_rules! numeric_keys {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
                self.number(visitor)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Key {
    type Error = TypedError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        visitor.visit_string(self.key)
    }

    numeric_keys!(
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    );

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        match self.key.as_str() {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            other => Err(de::Error::invalid_type(Unexpected::Str(other), &visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TypedError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        let word: de::value::StringDeserializer<TypedError> = self.key.into_deserializer();
        de::Deserializer::deserialize_enum(word, name, variants, visitor)
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct
        map struct identifier ignored_any
    }
}

/// An enum's variant: its name, and its content unless it is a bare word.
struct Variant {
    name: String,
    value: Option<Value>,
}

impl<'de> EnumAccess<'de> for Variant {
    type Error = TypedError;
    type Variant = VariantContent;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, VariantContent), TypedError> {
        let name: de::value::StringDeserializer<TypedError> = self.name.into_deserializer();
        let content = VariantContent { value: self.value };
        seed.deserialize(name).map(|v| (v, content))
    }
}

/// The content of an enum's variant (`None` for a bare word).
struct VariantContent {
    value: Option<Value>,
}

impl<'de> VariantAccess<'de> for VariantContent {
    type Error = TypedError;

    fn unit_variant(self) -> Result<(), TypedError> {
        match self.value {
            Some(value) => de::Deserialize::deserialize(ValueDeserializer::new(value)),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, TypedError> {
        match self.value {
            Some(value) => seed.deserialize(ValueDeserializer::new(value)),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        match self.value {
            Some(Value::Array(a)) if a.is_empty() => visitor.visit_unit(),
            Some(Value::Array(a)) => visit_array(a, visitor),
            Some(other) => Err(de::Error::invalid_type(
                unexpected(&other),
                &"tuple variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TypedError> {
        match self.value {
            Some(Value::Object(o)) => visit_object(o, visitor),
            Some(other) => Err(de::Error::invalid_type(
                unexpected(&other),
                &"struct variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}
