//! The language server's edit-to-diagnostics time: `coordinatorctl lsp`
//! (the release binary) on a copy of the largest example (by
//! `workflow.yaml`), its workflow open in the server; each round sends one
//! `didChange` (alternating seed 004's misspelling `/applicationID`-style
//! break and the file as it is, so every round is a real check) and waits
//! for the `publishDiagnostics` of that version. Prints the median, the
//! 90th percentile, the fastest and the slowest round, first with the
//! workflow open alone, then with all four project files open.
//!
//! Not a test: `cargo bench -p registry-coordinator --bench lsp` builds and
//! runs it; nothing here asserts on time (the target, under 20 ms median,
//! is read from its output; docs/editors.md carries the figure).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const ROUNDS: usize = 200;
const WARM_UP: usize = 20;

fn frame(v: &Value) -> Vec<u8> {
    let body = v.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

fn read_frame(out: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(n) = line.strip_prefix("Content-Length: ") {
            length = n.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    out.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The example whose `workflow.yaml` is largest, copied into `into`.
fn largest_example(into: &Path) -> (String, PathBuf) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(&examples).expect("examples/") {
        let dir = entry.expect("entry").path();
        let size = std::fs::metadata(dir.join("workflow.yaml")).map_or(0, |m| m.len());
        if best.as_ref().is_none_or(|(s, _)| size > *s) {
            best = Some((size, dir));
        }
    }
    let (_, from) = best.expect("an example");
    let name = from
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("example")
        .to_owned();
    let to = into.join(&name);
    std::fs::create_dir_all(&to).expect("mkdir");
    for entry in std::fs::read_dir(&from).expect("example") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
    (name, to)
}

struct Figures {
    median: Duration,
    p90: Duration,
    min: Duration,
    max: Duration,
}

fn measure(project: &Path, open_all: bool) -> Figures {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("coordinatorctl lsp");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |v: Value| {
        input.write_all(&frame(&v)).expect("write");
        input.flush().expect("flush");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
    );
    while read_frame(&mut output).is_some_and(|v| v.get("id") != Some(&json!(1))) {}
    send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));

    let workflow = project.join("workflow.yaml");
    let wf = uri(&workflow);
    let text = std::fs::read_to_string(&workflow).expect("workflow.yaml");
    // A break every check finds: the first input path misspelt, else a
    // `next` that names no step.
    let broken = match text.find("path: /") {
        Some(i) => format!("{}path: /nosuchmember{}", &text[..i], &text[i + 7..]),
        None => text.replacen("next: ", "next: no-such-step-", 1),
    };
    let files: &[&str] = if open_all {
        &[
            "workflow.yaml",
            "functions.rhai",
            "runtime.yaml",
            "scenarios.yaml",
        ]
    } else {
        &["workflow.yaml"]
    };
    for f in files {
        let path = project.join(f);
        let t = std::fs::read_to_string(&path).expect("project file");
        send(
            json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri(&path), "languageId": "yaml", "version": 1, "text": t}}}),
        );
    }
    let mut times = Vec::with_capacity(ROUNDS);
    for round in 0..WARM_UP + ROUNDS {
        let version = round as i64 + 2;
        let body = if round % 2 == 0 { &broken } else { &text };
        let change = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": wf, "version": version}, "contentChanges": [{"text": body}]}});
        // The clock includes writing the frame (microseconds).
        let started = Instant::now();
        send(change);
        loop {
            let v = read_frame(&mut output).expect("the server answers");
            if v["method"] == "textDocument/publishDiagnostics"
                && v["params"]["uri"] == wf
                && v["params"]["version"] == version
            {
                let n = v["params"]["diagnostics"].as_array().map_or(0, Vec::len);
                assert_eq!(
                    n > 0,
                    round % 2 == 0,
                    "the break is found, the fix clears it"
                );
                break;
            }
        }
        if round >= WARM_UP {
            times.push(started.elapsed());
        }
    }
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}));
    send(json!({"jsonrpc": "2.0", "method": "exit"}));
    let _ = child.wait();
    times.sort();
    Figures {
        median: times[times.len() / 2],
        p90: times[times.len() * 9 / 10],
        min: times[0],
        max: times[times.len() - 1],
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let tmp = std::env::temp_dir().join(format!("coordinator-lsp-bench-{}", std::process::id()));
    let (name, project) = largest_example(&tmp);
    let size = std::fs::metadata(project.join("workflow.yaml")).map_or(0, |m| m.len());
    println!("lsp: didChange -> publishDiagnostics on examples/{name} (workflow.yaml {size} bytes), {ROUNDS} rounds after {WARM_UP} warm-up");
    for (label, open_all) in [("workflow.yaml open", false), ("all four files open", true)] {
        let f = measure(&project, open_all);
        println!(
            "  {label}: median {}, p90 {}, min {}, max {}",
            ms(f.median),
            ms(f.p90),
            ms(f.min),
            ms(f.max)
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
