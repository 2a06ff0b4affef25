//! Every log line's code is declared (issue 27 item 7, like the error
//! pages): the literal `code = "..."` and `reason = "..."` of each
//! `tracing` event in the service host's sources (`server/src`,
//! `host/*/src`) is an HTTP problem's code (`coordinator_api::problems`)
//! or one of `coordinator_runtime::log_codes`; every entry of that table
//! has its page and is logged somewhere; a `reason` written as a literal
//! carries the `coordinator.` prefix like every computed one.

use std::collections::BTreeSet;

use coordinator_golden::{code, service_host_sources, workspace};

/// The text of every `tracing::<level>!( ... )` event in `text`, comments
/// left out, each with the line it starts on.
fn events(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().map(code).collect();
    let mut found = Vec::new();
    let mut k = 0;
    while k < lines.len() {
        let line = lines.get(k).copied().unwrap_or_default();
        let starts = ["error!(", "warn!(", "info!(", "debug!(", "trace!("]
            .iter()
            .any(|m| line.contains(&format!("tracing::{m}")));
        if !starts {
            k += 1;
            continue;
        }
        let mut event = String::new();
        let mut depth = 0i32;
        let mut j = k;
        'lines: while let Some(l) = lines.get(j) {
            for ch in l.chars() {
                event.push(ch);
                match ch {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break 'lines;
                        }
                    }
                    _ => {}
                }
            }
            event.push('\n');
            j += 1;
        }
        found.push((k + 1, event));
        k = j + 1;
    }
    found
}

/// The string literals given to `field = "..."` in `event`.
fn literal_fields<'a>(event: &'a str, field: &str) -> Vec<&'a str> {
    let key = format!("{field} = \"");
    let mut out = Vec::new();
    let mut rest = event;
    while let Some(at) = rest.find(&key) {
        let after = &rest[at + key.len()..];
        let Some(end) = after.find('"') else { break };
        // `reason = "x"` but not `whatever_reason = "x"`.
        let before = &rest[..at];
        if before.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            rest = &after[end..];
            continue;
        }
        out.push(&after[..end]);
        rest = &after[end..];
    }
    out
}

/// Every `(file:line, field, literal)` of the service host's log events.
fn logged_literals() -> Vec<(String, &'static str, String)> {
    let root = workspace();
    let files = service_host_sources(&root);
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        let relative = file
            .strip_prefix(&root)
            .expect("under the workspace")
            .display()
            .to_string();
        for (line, event) in events(&text) {
            for field in ["code", "reason"] {
                for literal in literal_fields(&event, field) {
                    found.push((format!("{relative}:{line}"), field, literal.to_owned()));
                }
            }
        }
    }
    found
}

fn declared_codes() -> BTreeSet<&'static str> {
    coordinator_api::problems::ALL
        .iter()
        .map(|p| p.code)
        .chain(coordinator_runtime::log_codes::ALL.iter().map(|l| l.code))
        .collect()
}

#[test]
fn every_logged_code_is_a_problem_or_a_declared_log_code() {
    let declared = declared_codes();
    let mut undeclared = Vec::new();
    let mut seen = 0;
    for (place, field, literal) in logged_literals() {
        seen += 1;
        let ok = match field {
            "code" => declared.contains(literal.as_str()),
            _ => literal.starts_with("coordinator."),
        };
        if !ok {
            undeclared.push(format!("{place}: {field} = \"{literal}\""));
        }
    }
    assert!(seen > 10, "the scan found only {seen} literal codes");
    assert!(
        undeclared.is_empty(),
        "log codes that are neither a problem's nor in coordinator_runtime::log_codes (a reason is a `coordinator.*` code):\n  {}",
        undeclared.join("\n  ")
    );
}

#[test]
fn every_log_code_has_its_page_and_is_logged() {
    let logged: BTreeSet<String> = logged_literals()
        .into_iter()
        .filter(|(_, field, _)| *field == "code")
        .map(|(_, _, literal)| literal)
        .collect();
    let sources = {
        service_host_sources(&workspace())
            .iter()
            .filter(|f| !f.ends_with("log_codes.rs"))
            .map(|f| std::fs::read_to_string(f).expect("readable"))
            .collect::<String>()
    };
    for log in coordinator_runtime::log_codes::ALL {
        assert!(
            workspace().join(log.page()).is_file(),
            "{}: no page {}",
            log.code,
            log.page()
        );
        assert!(
            logged.contains(log.code) || sources.contains(&format!("\"{}\"", log.code)),
            "{} is declared but never logged",
            log.code
        );
        assert!(log.meaning.ends_with('.'), "{}: no meaning", log.code);
    }
}

#[test]
fn the_scan_reads_events_over_several_lines_and_skips_comments() {
    let text = "// tracing::error!(code = \"commented\")\n\
                tracing::warn!(\n    code = \"store-unavailable\",\n    reason = %why,\n    \"x (y)\"\n);\n\
                tracing::error!(code = \"a.b\", reason = \"coordinator.c\", \"z\");\n";
    let found = events(text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(literal_fields(&found[0].1, "code"), ["store-unavailable"]);
    assert!(literal_fields(&found[0].1, "reason").is_empty());
    assert_eq!(literal_fields(&found[1].1, "code"), ["a.b"]);
    assert_eq!(literal_fields(&found[1].1, "reason"), ["coordinator.c"]);
}
