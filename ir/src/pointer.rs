//! JSON Pointer reference tokens (RFC 6901), the one escape and unescape
//! every crate uses: diagnostics' pointers (`source`, the compiler, the
//! runtime check, the scenario file), the VM's value paths, and mapping
//! `path`s read by the compiler.

/// Escapes one reference token: `~` becomes `~0`, then `/` becomes `~1`
/// (RFC 6901 §3), so `a/b~c` is `a~1b~0c`.
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Splits a JSON Pointer into its unescaped reference tokens (`""` is the
/// whole document: no token; `/a~1b` is `["a/b"]`).
///
/// Returns `None` when `pointer` is malformed: not empty and not starting
/// with `/`, or holding a `~` not followed by `0` or `1`.
pub fn tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    let mut out = Vec::new();
    for t in rest.split('/') {
        let mut s = String::new();
        let mut chars = t.chars();
        while let Some(c) = chars.next() {
            if c == '~' {
                match chars.next() {
                    Some('0') => s.push('~'),
                    Some('1') => s.push('/'),
                    _ => return None,
                }
            } else {
                s.push(c);
            }
        }
        out.push(s);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_and_tokens_round_trip() {
        assert_eq!(escape_token("a/b~c"), "a~1b~0c");
        // `~1` written literally is escaped to `~01`, not read back as `/`.
        assert_eq!(escape_token("~1"), "~01");
        for t in ["", "plain", "a/b", "~", "~0", "~1", "/~/"] {
            let p = format!("/x/{}", escape_token(t));
            assert_eq!(tokens(&p), Some(vec!["x".to_owned(), t.to_owned()]), "{t}");
        }
        assert_eq!(tokens(""), Some(Vec::new()));
        assert_eq!(tokens("/"), Some(vec![String::new()]));
        for bad in ["a", "/~", "/~2", "/a~"] {
            assert_eq!(tokens(bad), None, "{bad}");
        }
    }
}
