//! Rust source text as the shape tests read it: comments and literals
//! blanked out (so a brace, `fn` or `crate::` inside them is not code), the
//! line structure kept (so a finding's line number is the file's), and the
//! regions of `#[cfg(test)]` modules (test code, which the size rules skip).

/// `text` with every comment removed and every string and character
/// literal emptied, each line where it was.
///
/// A line comment (`//`, doc comments included) goes up to its line's end;
/// a block comment (nested ones too) is replaced by the line breaks it
/// held. A string literal (`"…"`, `b"…"`, raw `r#"…"#`) becomes `""`
/// followed by the line breaks it held; a character literal becomes
/// `' '`. Lifetimes and labels (`'a`) stay. An unterminated comment or
/// literal runs to the end of the text.
pub fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        if c == '/' && next == Some('/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '/' && next == Some('*') {
            let end = block_comment_end(&chars, at);
            push_line_breaks(&mut out, &chars[at..end]);
            at = end;
        } else if let Some(hashes) = raw_string_start(&chars, at) {
            let end = raw_string_end(&chars, at, hashes);
            out.push_str("\"\"");
            push_line_breaks(&mut out, &chars[at..end]);
            at = end;
        } else if c == '"' {
            let end = string_end(&chars, at);
            out.push_str("\"\"");
            push_line_breaks(&mut out, &chars[at..end]);
            at = end;
        } else if c == '\'' {
            match char_literal_end(&chars, at) {
                Some(end) => {
                    out.push_str("' '");
                    at = end;
                }
                None => {
                    out.push(c);
                    at += 1;
                }
            }
        } else {
            out.push(c);
            at += 1;
        }
    }
    out
}

/// Whether `c` can be part of an identifier.
pub fn is_identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn push_line_breaks(out: &mut String, skipped: &[char]) {
    out.extend(skipped.iter().filter(|c| **c == '\n'));
}

/// The index just past the block comment opened at `start` (nested
/// comments counted).
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0usize;
    let mut at = start;
    while at < chars.len() {
        let pair = (chars[at], chars.get(at + 1).copied());
        if pair == ('/', Some('*')) {
            depth += 1;
            at += 2;
        } else if pair == ('*', Some('/')) {
            depth -= 1;
            at += 2;
            if depth == 0 {
                return at;
            }
        } else {
            at += 1;
        }
    }
    chars.len()
}

/// The number of `#`s when a raw string (`r"`, `r#"`, `br"`, `cr#"`…)
/// starts at `at`; `None` otherwise (a raw identifier `r#type` included).
fn raw_string_start(chars: &[char], at: usize) -> Option<usize> {
    if chars[at] != 'r' {
        return None;
    }
    let before = at.checked_sub(1).map(|i| chars[i]);
    let prefixed = matches!(before, Some('b' | 'c'))
        && at
            .checked_sub(2)
            .is_none_or(|i| !is_identifier_char(chars[i]));
    if before.is_some_and(is_identifier_char) && !prefixed {
        return None;
    }
    let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
    (chars.get(at + 1 + hashes) == Some(&'"')).then_some(hashes)
}

fn raw_string_end(chars: &[char], start: usize, hashes: usize) -> usize {
    let mut at = start + 2 + hashes;
    while at < chars.len() {
        if chars[at] == '"'
            && chars[at + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return at + 1 + hashes;
        }
        at += 1;
    }
    chars.len()
}

fn string_end(chars: &[char], start: usize) -> usize {
    let mut at = start + 1;
    while at < chars.len() {
        match chars[at] {
            '\\' => at += 2,
            '"' => return at + 1,
            _ => at += 1,
        }
    }
    chars.len()
}

/// The index just past a character literal starting at `start`, or `None`
/// when the quote starts a lifetime or a label.
fn char_literal_end(chars: &[char], start: usize) -> Option<usize> {
    match chars.get(start + 1)? {
        '\\' => {
            // Past the backslash and the character it escapes.
            let mut at = start + 3;
            while at < chars.len() && chars[at] != '\'' && chars[at] != '\n' {
                at += 1;
            }
            (chars.get(at) == Some(&'\'')).then_some(at + 1)
        }
        _ => (chars.get(start + 2) == Some(&'\'')).then_some(start + 3),
    }
}

/// A region of text, by byte offsets (`start` included, `end` excluded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: usize,
    pub end: usize,
}

/// The byte index just past the `}` that closes the `{` at `open` in
/// `code` (blanked text), or the text's length when it is never closed.
pub fn matching_brace(code: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (offset, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return open + offset + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// The 1-based line of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// The identifier starting at byte `at` of `code` (empty when none).
pub fn identifier_at(code: &str, at: usize) -> &str {
    let rest = &code[at..];
    let end = rest
        .char_indices()
        .find(|(_, c)| !is_identifier_char(*c))
        .map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}

/// The byte offsets where keyword `word` stands as a whole token in `code`
/// (not inside an identifier, not after `$` or `#` as in `r#fn`).
pub fn keyword_offsets<'a>(code: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    code.match_indices(word).filter_map(move |(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        let whole = before.is_none_or(|c| !is_identifier_char(c) && c != '$' && c != '#')
            && after.is_none_or(|c| !is_identifier_char(c));
        whole.then_some(at)
    })
}

/// The regions of `code` (blanked text) that are `#[cfg(test)]` modules
/// with a body: from the attribute to the module's closing brace.
pub fn test_module_regions(code: &str) -> Vec<Region> {
    let mut regions = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let mut rest = code[at + "#[cfg(test)]".len()..].trim_start();
        while rest.starts_with("#[") {
            let Some(close) = rest.find(']') else { break };
            rest = rest[close + 1..].trim_start();
        }
        let rest = rest
            .strip_prefix("pub(crate)")
            .or_else(|| rest.strip_prefix("pub"))
            .unwrap_or(rest)
            .trim_start();
        let Some(after_mod) = rest.strip_prefix("mod") else {
            continue;
        };
        let name = identifier_at(after_mod.trim_start(), 0);
        let after_name = after_mod.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after_name.starts_with('{') {
            continue;
        }
        let open = code.len() - after_name.len();
        regions.push(Region {
            start: at,
            end: matching_brace(code, open),
        });
    }
    regions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_literals_are_blanked_and_lines_kept() {
        let text = "let a = \"{ // not a comment\n}\"; // a { comment\n/* one\n /* two */ { */ let b = '{';\nlet r = r#\"fn x() {\"#; fn f<'a>(x: &'a str) {}\n";
        let blank = blank_comments_and_literals(text);
        assert_eq!(
            blank,
            "let a = \"\"\n; \n\n let b = ' ';\nlet r = \"\"; fn f<'a>(x: &'a str) {}\n"
        );
        assert_eq!(blank.lines().count(), text.lines().count());
    }

    #[test]
    fn escapes_in_literals_do_not_end_them() {
        let blank = blank_comments_and_literals("f(\"a\\\"{\", '\\'', b'\\\\', br\"{\");");
        assert_eq!(blank, "f(\"\", ' ', b' ', b\"\");");
    }

    #[test]
    fn a_test_module_is_a_region_and_a_test_function_is_not() {
        let code = "fn a() {}\n#[cfg(test)]\nfn helper() {}\n#[cfg(test)]\n#[allow(x)]\nmod tests {\n fn t() { {} }\n}\nfn b() {}\n";
        let regions = test_module_regions(code);
        assert_eq!(regions.len(), 1);
        let region = &code[regions[0].start..regions[0].end];
        assert!(region.starts_with("#[cfg(test)]\n#[allow(x)]\nmod tests {"));
        assert!(region.ends_with(" fn t() { {} }\n}"));
    }

    #[test]
    fn keywords_are_whole_tokens() {
        let code = "fn a() {} r#fn; fnord; $fn; x.fn_y(); fn b";
        assert_eq!(keyword_offsets(code, "fn").collect::<Vec<_>>(), [0, 38]);
    }
}
