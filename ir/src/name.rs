//! The name rule of SPEC §1, in one place: project ids, steps, outcomes,
//! operation aliases, Functions, connections, case labels, triggers and
//! event sources are all `^[a-z][a-z0-9-]{0,63}$`. The compiler, the
//! runtime check and `coordinatorctl init` call [`is_name`], each with its
//! own diagnostic code.

/// The pattern every name matches (SPEC §1), as the JSON Schemas write it.
pub const NAME_PATTERN: &str = "^[a-z][a-z0-9-]{0,63}$";

/// The longest name, in bytes (a letter and 63 more characters).
pub const MAX_NAME_BYTES: usize = 64;

/// Whether `name` matches [`NAME_PATTERN`]: a lowercase ASCII letter, then
/// at most 63 lowercase ASCII letters, digits or `-`.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= MAX_NAME_BYTES
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_spec_pattern() {
        for ok in ["a", "follow-up", "step-2", "a-", &"a".repeat(64)] {
            assert!(is_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Follow",
            "1a",
            "-a",
            "a_b",
            "a b",
            "é",
            "aé",
            &"a".repeat(65),
        ] {
            assert!(!is_name(bad), "{bad}");
        }
    }
}
