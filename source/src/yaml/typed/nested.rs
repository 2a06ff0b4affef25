//! A fault of a nested read passed up with its pointer and kind.
//!
//! A hand-written `Deserialize` that buffers a value, looks at its `type`
//! and reads it as that variant starts a second read: `serde_path_to_error`
//! of the outer read knows the path only down to the buffered value. The
//! inner fault goes up through the outer deserializer's error type `E`,
//! which serde lets a `Deserialize` build only from a message
//! (`E::custom`). [`nested_error`] writes the fault's pointer, kind and
//! sentence into that message in this module's own form (three fields
//! after a U+0001 mark, each ended by one); [`TypedError::from_message`]
//! reads them back, whether the outer error is a [`TypedError`] (through
//! [`read_typed`]: the pointer joins the fault's) or another type whose
//! message reaches [`crate::YamlDocument::serde_diagnostic`].

use serde::de::{self, DeserializeOwned};
use serde_json::Value;

use super::{read_typed, TypedError};

/// Starts and ends each field of a passed-up fault.
const MARK: char = '\u{1}';

/// Reads `value` into `T` inside another `Deserialize`, passing a fault
/// up as the outer deserializer's error [`nested_error`] makes.
///
/// # Errors
/// The fault, its pointer relative to `value`.
pub fn read_nested<T: DeserializeOwned, E: de::Error>(value: Value) -> Result<T, E> {
    read_typed(value).map_err(|fault| nested_error(&fault.pointer, &fault.error))
}

/// `error`, about the node at `pointer` below the value being read, as
/// the error `E` of the deserializer reading it: its message carries the
/// pointer, the kind and serde's sentence for [`TypedError::from_message`].
pub fn nested_error<E: de::Error>(pointer: &str, error: &TypedError) -> E {
    let kind = serde_json::to_string(error.kind()).unwrap_or_default();
    E::custom(format_args!(
        "{MARK}{pointer}{}{MARK}{kind}{MARK}{}",
        error.below, error.message
    ))
}

/// The fault a [`nested_error`] message carries (`None` for any other
/// message).
pub(super) fn decode(message: &str) -> Option<TypedError> {
    let mut fields = message.strip_prefix(MARK)?.splitn(3, MARK);
    let below = fields.next()?.to_owned();
    let kind = serde_json::from_str(fields.next()?).ok()?;
    let message = fields.next()?.to_owned();
    Some(TypedError {
        kind,
        message,
        below,
    })
}
