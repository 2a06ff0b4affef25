//! Writing a JSON value as block-style YAML for the files `convert` writes.
//!
//! Mappings and sequences are written in block style (a sequence under a
//! key at the key's indentation, as the examples are written); a string
//! is written plain only when the strict reader
//! (`coordinator_source::yaml::resolve_plain`) reads it back as the same
//! string, and otherwise as a JSON string, which is a YAML double-quoted
//! scalar. Empty mappings and sequences are written `{}` and `[]`.
//! Whatever is written, `coordinator_source::parse` reads back as the same
//! value (tested below).

use serde_json::Value;

/// `value` as YAML, after the comment lines `header` (each written `# line`).
pub fn to_yaml(header: &[String], value: &Value) -> String {
    let mut out = String::new();
    for line in header {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    match value {
        Value::Object(m) if !m.is_empty() => write_mapping(value, 0, &mut out),
        Value::Array(a) if !a.is_empty() => write_sequence(value, 0, &mut out),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn is_block(value: &Value) -> bool {
    match value {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn write_mapping(value: &Value, indent: usize, out: &mut String) {
    let Value::Object(members) = value else {
        return;
    };
    for (i, (key, member)) in members.iter().enumerate() {
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&string_scalar(key));
        out.push(':');
        write_member(member, indent, out);
    }
}

/// The value after `key:`: on the same line when it is a scalar, else on
/// the next lines (a mapping indented by two, a sequence at `indent`).
fn write_member(member: &Value, indent: usize, out: &mut String) {
    match member {
        Value::Object(_) if is_block(member) => {
            out.push('\n');
            write_mapping(member, indent + 2, out);
        }
        Value::Array(_) if is_block(member) => {
            out.push('\n');
            write_sequence(member, indent, out);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn write_sequence(value: &Value, indent: usize, out: &mut String) {
    let Value::Array(items) = value else {
        return;
    };
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Value::Object(_) if is_block(item) => write_mapping(item, indent + 2, out),
            Value::Array(_) if is_block(item) => {
                out.push('\n');
                write_sequence(item, indent + 2, out);
            }
            other => {
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_scalar(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

/// A string plain when that is unambiguous, else JSON-quoted.
fn string_scalar(s: &str) -> String {
    let plain_characters = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " _./-".contains(c));
    let plain = !s.is_empty()
        && plain_characters
        && s.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '/')
        && !s.ends_with(' ')
        && matches!(
            coordinator_source::yaml::resolve_plain(s),
            Ok(Value::String(ref back)) if back == s
        );
    if plain {
        s.to_owned()
    } else {
        Value::String(s.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::to_yaml;
    use serde_json::json;

    #[test]
    fn what_is_written_reads_back_as_the_same_value() {
        let value = json!({
            "apiVersion": "id.registrystack.org/formats/x/v1beta1",
            "plain": "a-b c/d",
            "looks-like-bool": "true",
            "looks-like-number": "0012",
            "colon": "2026-10-09T09:00:00Z",
            "quote": "it's \"quoted\"\nand two lines",
            "empty": {},
            "none": [],
            "null": null,
            "list": [1, "two", {"a": 1, "b": [true, false]}, [1, [2]], {}],
            "nested": {"deeper": {"x": -1.5, "y": ""}},
            "": "empty key",
            "- dash": "#hash"
        });
        let text = to_yaml(&["a comment".to_owned()], &value);
        let back = coordinator_source::parse("t.yaml", &text).expect(&text);
        assert_eq!(back.value, value, "{text}");
        assert!(text.starts_with("# a comment\n"));
        assert!(text.contains("\nplain: a-b c/d\n"), "{text}");
        assert!(text.contains("\nlooks-like-bool: \"true\"\n"), "{text}");
    }
}
