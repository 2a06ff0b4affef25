//! Each `coordinator.yaml.*` code of typed reading follows the kind serde's
//! derived code reports, whatever its sentence says; and the reading says
//! what `serde_json` says for the same fault (the sentences authors saw).

use std::collections::BTreeMap;

use serde::de::{Error as _, Unexpected};
use serde::Deserialize;
use serde_json::Value;

use super::{read_typed, Found, TypedError, TypedErrorKind, TypedFault, Wants};
use crate::yaml::{parse, YamlDocument};

#[derive(Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    version: String,
    #[serde(default)]
    limits: Option<Limits>,
    #[serde(default)]
    mode: Option<Mode>,
    #[serde(default)]
    steps: Vec<Step>,
    #[serde(default)]
    pair: Option<(u8, String)>,
    #[serde(default)]
    labels: BTreeMap<String, i64>,
    #[serde(default)]
    weight: Option<f64>,
    #[serde(default)]
    shape: Option<Shape>,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Limits {
    in_flight: u32,
    #[serde(default, alias = "burstSize")]
    burst: Option<u16>,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum Mode {
    Session,
    Transaction,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
enum Step {
    Wait { seconds: u64 },
    Call { operation: String },
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum Shape {
    Circle(f64),
    Square { side: u8 },
}

fn doc(text: &str) -> YamlDocument {
    parse("f.yaml", text).expect("the YAML reads")
}

/// The fault of reading `text` as a [`File`].
fn fault(text: &str) -> TypedFault {
    read_typed::<File>(doc(text).value).expect_err("a fault")
}

/// What `serde_json` itself says of reading `value` as a [`File`]: the
/// pointer and its sentence.
fn serde_json_says(value: Value) -> (String, String) {
    let err = serde_path_to_error::deserialize::<_, File>(value).expect_err("a fault");
    (
        crate::yaml::path_to_pointer(err.path()),
        err.into_inner().to_string(),
    )
}

const FAULTS: [&str; 22] = [
    "verison: '1'\n",
    "version: '1'\nlimits: {inFlight: 2, bogus: 1}\n",
    "limits: {inFlight: 2}\n",
    "version: '1'\nlimits: {}\n",
    "version: '1'\nmode: pooled\n",
    "version: '1'\nmode: {session: 1}\n",
    "version: '1'\nmode: [session]\n",
    "version: 1\n",
    "version: null\n",
    "version: '1'\nlimits: {inFlight: '2'}\n",
    "version: '1'\nlimits: {inFlight: -1}\n",
    "version: '1'\nlimits: {inFlight: 2.5}\n",
    "version: '1'\nlimits: {inFlight: 5000000000}\n",
    "version: '1'\nlimits: [2, 5, 7]\n",
    "version: '1'\nsteps: [{type: sleep}]\n",
    "version: '1'\nsteps: [{seconds: 1}]\n",
    "version: '1'\nsteps: [{type: wait, seconds: 1, extra: 2}]\n",
    "version: '1'\npair: [1, a, 2]\n",
    "version: '1'\nlabels: {a: x}\n",
    "version: '1'\nweight: true\n",
    "version: '1'\nshape: {circle: 1.5, square: {side: 1}}\n",
    "",
];

#[test]
fn the_reading_says_what_serde_json_says() {
    for text in FAULTS {
        let value = doc(text).value;
        let ours = fault(text);
        assert_eq!(
            (ours.pointer.clone(), ours.error.message().to_owned()),
            serde_json_says(value),
            "{text}"
        );
        // And the kind read from the sentence is the kind recorded.
        assert_eq!(
            TypedErrorKind::of_message(ours.error.message()),
            *ours.error.kind(),
            "{text}"
        );
    }
}

#[test]
fn the_reading_reads_what_serde_json_reads() {
    let text = "version: '1'\nlimits: {inFlight: 2, burstSize: 3}\nmode: transaction\nsteps:\n  - {type: wait, seconds: 5}\n  - {type: call, operation: a.b/v1}\npair: [7, x]\nlabels: {b: -2, a: 1}\nweight: 0.5\nshape: {square: {side: 2}}\n";
    let value = doc(text).value;
    let ours: File = read_typed(value.clone()).expect("reads");
    let theirs: File = serde_json::from_value(value).expect("reads");
    assert_eq!(ours, theirs);
    assert_eq!(ours.limits.and_then(|l| l.burst), Some(3));
}

/// The code of the diagnostic of `error` at `pointer` in `text`.
fn code_of(text: &str, pointer: &str, error: TypedError) -> String {
    let fault = TypedFault {
        pointer: pointer.to_owned(),
        error,
    };
    doc(text).typed_diagnostic("", &fault).code
}

#[test]
fn unknown_key_follows_unknown_field() {
    let error = TypedError::unknown_field("bogus", &["inFlight", "burst"]);
    assert_eq!(
        *error.kind(),
        TypedErrorKind::UnknownKey {
            key: "bogus".into(),
            expected: "`inFlight` or `burst`".into()
        }
    );
    assert_eq!(
        code_of("limits: {bogus: 1}\n", "/limits", error),
        "coordinator.yaml.unknown-key"
    );
    let d = doc("version: '1'\nlimits:\n  inFlight: 2\n  bogus: 1\n")
        .deserialize::<File>()
        .expect_err("unknown");
    assert_eq!(
        (d.code.as_str(), d.pointer.as_str(), d.line, d.column),
        ("coordinator.yaml.unknown-key", "/limits/bogus", 4, 3)
    );
    assert_eq!(
        d.message,
        "unknown key `bogus` (expected one of `inFlight`, `burst`, `burstSize`)"
    );
}

#[test]
fn missing_key_follows_missing_field() {
    let error = TypedError::missing_field("version");
    assert_eq!(code_of("a: 1\n", "", error), "coordinator.yaml.missing-key");
    let d = doc("limits: {inFlight: 2}\n")
        .deserialize::<File>()
        .expect_err("missing");
    assert_eq!(
        (d.code.as_str(), d.message.as_str()),
        (
            "coordinator.yaml.missing-key",
            "missing required key `version`"
        )
    );
}

#[test]
fn unknown_value_follows_unknown_variant() {
    let error = TypedError::unknown_variant("pooled", &["session", "transaction"]);
    assert_eq!(
        code_of("mode: pooled\n", "/mode", error),
        "coordinator.yaml.unknown-value"
    );
    let d = doc("version: '1'\nmode: pooled\n")
        .deserialize::<File>()
        .expect_err("unknown value");
    assert_eq!(
        (d.code.as_str(), d.pointer.as_str(), d.message.as_str()),
        (
            "coordinator.yaml.unknown-value",
            "/mode",
            "`pooled` is not an accepted value; expected `session` or `transaction`"
        )
    );
    // An internally tagged enum's tag is a variant too.
    let d = doc("version: '1'\nsteps: [{type: sleep}]\n")
        .deserialize::<File>()
        .expect_err("unknown tag");
    assert_eq!(d.code, "coordinator.yaml.unknown-value");
}

#[test]
fn duplicate_key_follows_duplicate_field() {
    let error = TypedError::duplicate_field("burst");
    assert_eq!(
        code_of("limits: {burst: 1}\n", "/limits", error),
        "coordinator.yaml.duplicate-key"
    );
    // A key and its alias name one field.
    let d = doc("version: '1'\nlimits: {inFlight: 1, burst: 2, burstSize: 3}\n")
        .deserialize::<File>()
        .expect_err("duplicate");
    assert_eq!(d.code, "coordinator.yaml.duplicate-key");
}

#[test]
fn wrong_type_follows_invalid_type_value_and_length() {
    let errors = [
        TypedError::invalid_type(Unexpected::Str("2"), &"u32"),
        TypedError::invalid_value(Unexpected::Signed(-1), &"u32"),
        TypedError::invalid_length(3, &"a tuple of size 2"),
    ];
    for error in errors {
        assert_eq!(
            code_of("a: 1\n", "/a", error),
            "coordinator.yaml.wrong-type"
        );
    }
    let cases = [
        (
            "version: 1\n",
            "wrong type: found integer `1`, expected a string",
            "Quote the value to make it a string, e.g. \"1\"; values are never coerced.",
        ),
        (
            "version: '1'\nlimits: {inFlight: '2'}\n",
            "wrong type: found string \"2\", expected a whole number (0 or more)",
            "Write the number without quotes.",
        ),
        (
            "version: '1'\nlimits: {inFlight: -1}\n",
            "invalid value: integer `-1`, expected a whole number (0 or more)",
            "Write a value of the expected type; values are never coerced.",
        ),
        (
            "version: '1'\nlimits: [2, 5, 7]\n",
            "invalid length 3, expected fewer elements in array",
            "Write a value of the expected type; values are never coerced.",
        ),
        (
            "",
            "the file is empty; expected a mapping with apiVersion and kind",
            "Write a value of the expected type; values are never coerced.",
        ),
    ];
    for (text, message, next) in cases {
        let d = doc(text).deserialize::<File>().expect_err(text);
        assert_eq!(
            (d.code.as_str(), d.message.as_str(), d.next.as_str()),
            ("coordinator.yaml.wrong-type", message, next),
            "{text}"
        );
    }
}

#[test]
fn the_kind_not_the_sentence_chooses_the_code() {
    // A wrong type whose found text reads like another fault.
    let error = TypedError::invalid_type(Unexpected::Str("unknown field `x`"), &"u32");
    assert_eq!(
        *error.kind(),
        TypedErrorKind::WrongType {
            found: Found::String,
            wants: Wants::Number
        }
    );
    assert_eq!(
        code_of("a: 1\n", "/a", error),
        "coordinator.yaml.wrong-type"
    );
    // A plain message has no kind but its words: the fallback reads them.
    let custom = TypedError::custom("missing field `x`");
    assert_eq!(
        *custom.kind(),
        TypedErrorKind::MissingKey { key: "x".into() }
    );
    assert_eq!(
        *TypedError::custom("no such thing").kind(),
        TypedErrorKind::WrongType {
            found: Found::Other,
            wants: Wants::Other
        }
    );
}

/// A two-phase read, as the compiler reads a step: buffer the value, look
/// at its `type`, read the rest as that variant.
#[derive(Debug)]
#[allow(dead_code)]
enum Tagged {
    Wait(Limits),
}

impl<'de> Deserialize<'de> for Tagged {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut value = Value::deserialize(d)?;
        let tag = value
            .as_object_mut()
            .and_then(|m| m.shift_remove("type"))
            .and_then(|t| t.as_str().map(str::to_owned))
            .ok_or_else(|| D::Error::missing_field("type"))?;
        match tag.as_str() {
            "wait" => super::read_nested(value).map(Tagged::Wait),
            other => Err(super::nested_error(
                "/type",
                &TypedError::unknown_variant(other, &["wait"]),
            )),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Outer {
    steps: BTreeMap<String, Tagged>,
}

#[test]
fn a_nested_read_passes_its_fault_up_with_its_pointer_and_kind() {
    let cases = [
        (
            "steps:\n  a: {type: wait, inFlight: 1, bogus: 2}\n",
            "/steps/a/bogus",
            "coordinator.yaml.unknown-key",
            (2, 32),
        ),
        (
            "steps:\n  a: {type: sleep}\n",
            "/steps/a/type",
            "coordinator.yaml.unknown-value",
            (2, 13),
        ),
        (
            "steps:\n  a: {type: wait, inFlight: x}\n",
            "/steps/a/inFlight",
            "coordinator.yaml.wrong-type",
            (2, 29),
        ),
        (
            "steps:\n  a: {inFlight: 1}\n",
            "/steps/a",
            "coordinator.yaml.missing-key",
            (2, 6),
        ),
    ];
    for (text, pointer, code, (line, column)) in cases {
        let doc = doc(text);
        // Through this crate's reading: the kind is kept.
        let ours = doc.deserialize::<Outer>().expect_err(text);
        assert_eq!(
            (
                ours.pointer.as_str(),
                ours.code.as_str(),
                ours.line,
                ours.column
            ),
            (pointer, code, line, column),
            "{text}"
        );
        // Through serde_json's, whose error keeps only a message: the
        // message carries the kind and the pointer.
        let err = serde_path_to_error::deserialize::<_, Outer>(doc.value.clone()).expect_err(text);
        let outer = crate::yaml::path_to_pointer(err.path());
        let theirs = doc.serde_diagnostic(&outer, &err.into_inner().to_string());
        assert_eq!(theirs, ours, "{text}");
    }
}
