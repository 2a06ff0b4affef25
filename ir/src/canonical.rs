//! Canonical JSON (SPEC §4): object keys sorted by Unicode code point, no
//! whitespace, integers exact, other numbers in shortest round-trip form with
//! the fraction kept (`1` and `1.0` stay distinct), strings as given.

use serde_json::Value;

/// Writes `value` as canonical JSON.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write(value, &mut out);
    out
}

/// Writes `value` as canonical JSON into a `String`.
pub fn to_string(value: &Value) -> String {
    // Canonical JSON is produced from `str`s and ASCII punctuation only,
    // so it is always UTF-8.
    match String::from_utf8(to_vec(value)) {
        Ok(text) => text,
        Err(e) => unreachable!("canonical JSON is UTF-8: {e}"),
    }
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // UTF-8 byte order is code point order.
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                write(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(v, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        // serde_json prints integers exactly and floats with ryu (shortest
        // round trip, keeping `.0`), which is the form SPEC §4 asks for.
        Value::Null | Value::Bool(_) | Value::Number(_) => {
            out.extend_from_slice(value.to_string().as_bytes())
        }
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(Value::String(s.to_owned()).to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_by_code_point_and_keeps_fractions() {
        let v = json!({"b": 1, "a": [1.0, 1, "é"], "B": null, "ä": true});
        assert_eq!(
            to_string(&v),
            r#"{"B":null,"a":[1.0,1,"é"],"b":1,"ä":true}"#
        );
    }

    #[test]
    fn nested_objects_are_sorted_too() {
        let v = json!({"z": {"y": 2, "x": 1}});
        assert_eq!(to_string(&v), r#"{"z":{"x":1,"y":2}}"#);
    }
}
