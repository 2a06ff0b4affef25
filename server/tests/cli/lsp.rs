//! `coordinatorctl lsp` driven as an editor drives it: the built binary on
//! pipes, LSP base-protocol frames, one request at a time.
//!
//! - `lsp_editor_session_on_the_starter`: initialize, didOpen, didChange
//!   with seed 004's misspelling `/applicationID` (the diagnostic
//!   `coordinator.mapping.path` at the path's range, its page as code
//!   description, the `next:` repair), hover on an alias and a step,
//!   go-to-definition, completion, a fix that clears the diagnostic, the
//!   runtime and scenario files' own diagnostics, shutdown and exit.
//! - `lsp_survives_half_typed_files_and_malformed_messages`: every
//!   example's four files cut at many points (each cut a didChange, with a
//!   hover, a definition and a completion at the cut), and malformed
//!   JSON-RPC between them; the server answers every request and never
//!   panics.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{json, Value};

use crate::ctl;

/// How long one answer may take before the test fails (debug build, CI).
const PATIENCE: Duration = Duration::from_secs(60);

/// An editor's end of the pipes.
struct Editor {
    child: Child,
    stdin: ChildStdin,
    frames: Receiver<Value>,
    next_id: i64,
    /// Notifications read while waiting for something else.
    pending: Vec<Value>,
    stderr: std::thread::JoinHandle<String>,
}

/// Reads LSP frames from `out` and sends each body, as JSON, to the channel.
fn read_frames(out: impl Read + Send + 'static) -> Receiver<Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = BufReader::new(out);
        loop {
            let mut length = None;
            loop {
                let mut line = String::new();
                if out.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some(n) = line.strip_prefix("Content-Length: ") {
                    length = n.parse::<usize>().ok();
                }
            }
            let mut body = vec![0; length.expect("every frame has a Content-Length")];
            if out.read_exact(&mut body).is_err() {
                return;
            }
            let value: Value = serde_json::from_slice(&body).expect("the server writes JSON");
            if tx.send(value).is_err() {
                return;
            }
        }
    });
    rx
}

fn frame(body: &str) -> Vec<u8> {
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

impl Editor {
    fn start(dir: &Path) -> Editor {
        let mut child = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
            .arg("lsp")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("coordinatorctl lsp starts");
        let stdin = child.stdin.take().expect("stdin");
        let frames = read_frames(child.stdout.take().expect("stdout"));
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Editor {
            child,
            stdin,
            frames,
            next_id: 0,
            pending: Vec::new(),
            stderr,
        }
    }

    fn raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("the server reads");
        self.stdin.flush().expect("flush");
    }

    fn send(&mut self, message: Value) {
        self.raw(&frame(&message.to_string()));
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn next_frame(&mut self) -> Value {
        match self.frames.recv_timeout(PATIENCE) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("the server did not answer in time"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed its output"),
        }
    }

    /// Sends a request and returns its response (`result` or `error`).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&json!(id))
    }

    /// The response with `id`, keeping notifications read on the way.
    fn response(&mut self, id: &Value) -> Value {
        loop {
            let v = self.next_frame();
            if v.get("method").is_some() {
                self.pending.push(v);
            } else if v.get("id") == Some(id) {
                return v;
            }
        }
    }

    /// The next `publishDiagnostics` for `uri` (at `version` when given).
    fn diagnostics(&mut self, uri: &str, version: Option<i64>) -> Vec<Value> {
        let wanted = |v: &Value| {
            v["method"] == "textDocument/publishDiagnostics"
                && v["params"]["uri"] == uri
                && version.is_none_or(|n| v["params"]["version"] == n)
        };
        if let Some(i) = self.pending.iter().position(wanted) {
            let v = self.pending.remove(i);
            return v["params"]["diagnostics"]
                .as_array()
                .cloned()
                .unwrap_or_default();
        }
        loop {
            let v = self.next_frame();
            if wanted(&v) {
                return v["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
            }
            self.pending.push(v);
        }
    }

    fn initialize(&mut self, root: &Path) {
        let answer = self.request(
            "initialize",
            json!({"processId": null, "rootUri": uri(root), "capabilities": {}}),
        );
        let caps = &answer["result"]["capabilities"];
        assert_eq!(caps["hoverProvider"], true, "{answer}");
        assert_eq!(caps["definitionProvider"], true, "{answer}");
        assert!(caps["completionProvider"].is_object(), "{answer}");
        self.notify("initialized", json!({}));
    }

    /// shutdown, exit; the exit code and stderr.
    fn finish(mut self) -> (Option<i32>, String) {
        let answer = self.request("shutdown", Value::Null);
        assert_eq!(answer["result"], Value::Null, "{answer}");
        assert!(answer.get("error").is_none(), "{answer}");
        self.notify("exit", Value::Null);
        let status = self.child.wait().expect("the server exits");
        (status.code(), self.stderr.join().unwrap_or_default())
    }
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The 0-based line and UTF-16 column of the first `needle` in `text`
/// (after the first line holding `after`).
fn position_of(text: &str, after: &str, needle: &str) -> (u32, u32) {
    let start = text.find(after).expect("anchor in the text");
    let at = start + text[start..].find(needle).expect("needle in the text");
    let line = text[..at].matches('\n').count();
    let column = text[..at]
        .rsplit('\n')
        .next()
        .unwrap_or_default()
        .encode_utf16()
        .count();
    (line as u32, column as u32)
}

fn at(uri: &str, (line, character): (u32, u32)) -> Value {
    json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
}

fn hover_text(answer: &Value) -> String {
    answer["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn labels(answer: &Value) -> Vec<String> {
    answer["result"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["label"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn lsp_editor_session_on_the_starter() {
    let tmp = tempfile::tempdir().expect("temp dir");
    assert!(ctl(tmp.path(), &["init", "--directory", "follow-up"])
        .status
        .success());
    let project = tmp.path().join("follow-up");
    let path = project.join("workflow.yaml");
    let wf = uri(&path);
    let text = std::fs::read_to_string(&path).expect("workflow.yaml");

    let mut ed = Editor::start(tmp.path());
    ed.initialize(tmp.path());
    ed.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": wf, "languageId": "yaml", "version": 1, "text": text}}),
    );
    assert_eq!(
        ed.diagnostics(&wf, Some(1)),
        Vec::<Value>::new(),
        "the starter is clean"
    );

    // Seed 004's misspelling, unsaved.
    let broken = text.replacen("path: /applicationId", "path: /applicationID", 1);
    ed.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": wf, "version": 2}, "contentChanges": [{"text": broken}]}),
    );
    let diags = ed.diagnostics(&wf, Some(2));
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    assert_eq!(d["code"], "coordinator.mapping.path");
    assert_eq!(d["severity"], 1);
    let (line, column) = position_of(&broken, "recordId:", "/applicationID");
    assert_eq!(
        d["range"],
        json!({"start": {"line": line, "character": column}, "end": {"line": line, "character": column + 14}})
    );
    let message = d["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("expected a path that the workflow input schema declares; it declares nothing at /applicationID\nnext: Correct the path"),
        "{message}"
    );
    assert_eq!(
        d["data"]["pointer"],
        "/workflow/steps/read-application/input/fields/recordId/path"
    );
    let href = d["codeDescription"]["href"]
        .as_str()
        .expect("a code description");
    assert!(
        href.starts_with("file://") && href.ends_with("/docs/errors/coordinator.mapping.path.md"),
        "{href}"
    );
    assert!(Path::new(&href["file://".len()..]).is_file(), "{href}");
    // The saved files were not touched.
    assert_eq!(std::fs::read_to_string(&path).expect("read"), text);

    // Hover on an alias: host operation, effect, recovery.
    let alias = position_of(&broken, "read-application:\n", "applications-read-record");
    let answer = ed.request("textDocument/hover", at(&wf, (alias.0, alias.1 + 3)));
    let shown = hover_text(&answer);
    assert!(
        shown.contains("host operation `breg.read-record/v1` on connection `applications` (breg read, recovery read-again)"),
        "{answer}"
    );
    assert_eq!(
        answer["result"]["range"]["start"],
        json!({"line": alias.0, "character": alias.1})
    );
    // Hover on a step: its explain line.
    let next = position_of(&broken, "read-application:\n", "next: permission");
    let answer = ed.request("textDocument/hover", at(&wf, (next.0, next.1 + 8)));
    assert!(
        hover_text(&answer)
            .contains("permission: choose by notice-route(): send -> notify, skip -> skipped"),
        "{answer}"
    );
    let step_key = position_of(&broken, "steps:", "read-application:");
    let answer = ed.request("textDocument/hover", at(&wf, step_key));
    assert!(
        hover_text(&answer).contains("read-application: call applications applications-read-record (breg read, recovery read-again) with {collection: \"applications\", recordId: input /applicationID}, then permission"),
        "{answer}"
    );

    // Go to definition: alias, step, Function, type, outcome.
    for (anchor, needle, declared_after, declared) in [
        (
            "read-application:\n",
            "applications-read-record",
            "operations:",
            "applications-read-record:",
        ),
        ("read-application:\n", "permission", "steps:", "permission:"),
        (
            "permission:\n",
            "notice-route",
            "functions:",
            "notice-route:",
        ),
        ("workflow:\n", "workflow-input", "types:", "workflow-input:"),
        (
            "accepted:\n",
            "message-accepted",
            "outcomes:",
            "message-accepted:",
        ),
    ] {
        let from = position_of(&broken, anchor, needle);
        let answer = ed.request("textDocument/definition", at(&wf, (from.0, from.1 + 1)));
        let to = position_of(&broken, declared_after, declared);
        let end = to.1 + declared.len() as u32 - 1;
        assert_eq!(
            answer["result"],
            json!({"uri": wf, "range": {"start": {"line": to.0, "character": to.1}, "end": {"line": to.0, "character": end}}}),
            "definition of {needle}"
        );
    }

    // Completion where a step, an alias, an outcome or an operation is expected.
    let next = position_of(&broken, "read-application:\n", "next: permission");
    let answer = ed.request("textDocument/completion", at(&wf, (next.0, next.1 + 6)));
    assert_eq!(
        labels(&answer),
        [
            "due",
            "read-application",
            "permission",
            "notify",
            "skipped",
            "accepted"
        ]
    );
    let op = position_of(&broken, "notify:\n", "operation: ");
    let answer = ed.request("textDocument/completion", at(&wf, (op.0, op.1 + 11)));
    assert_eq!(
        labels(&answer),
        ["applications-read-record", "notices-submit-message"]
    );
    let outcome = position_of(&broken, "skipped:\n", "outcome: ");
    let answer = ed.request(
        "textDocument/completion",
        at(&wf, (outcome.0, outcome.1 + 9)),
    );
    assert_eq!(
        labels(&answer),
        ["message-accepted", "no-current-permission"]
    );
    let uses = position_of(&broken, "operations:", "uses: ");
    let answer = ed.request("textDocument/completion", at(&wf, (uses.0, uses.1 + 6)));
    let ops = labels(&answer);
    assert_eq!(ops.len(), 10, "{ops:?}");
    assert!(
        ops.contains(&"messaging.submit-message/v1".to_owned()),
        "{ops:?}"
    );

    // The fix clears the diagnostic.
    ed.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": wf, "version": 3}, "contentChanges": [{"text": text}]}),
    );
    assert_eq!(ed.diagnostics(&wf, Some(3)), Vec::<Value>::new());

    // The runtime file and the scenarios are checked against the Program.
    let runtime = project.join("runtime.yaml");
    let rt_text = std::fs::read_to_string(&runtime).expect("runtime.yaml");
    let rt_broken = rt_text.replacen("applications:", "applicationz:", 1);
    assert_ne!(rt_broken, rt_text);
    ed.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri(&runtime), "languageId": "yaml", "version": 1, "text": rt_broken}}),
    );
    let diags = ed.diagnostics(&uri(&runtime), Some(1));
    assert!(
        !diags.is_empty(),
        "a connection the workflow needs is missing"
    );
    assert!(
        diags.iter().all(|d| d["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("coordinator.runtime."))),
        "{diags:#?}"
    );
    let scenarios = project.join("scenarios.yaml");
    let sc_text = std::fs::read_to_string(&scenarios).expect("scenarios.yaml");
    let sc_broken = sc_text.replacen("read-application", "read-aplication", 1);
    assert_ne!(sc_broken, sc_text);
    ed.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri(&scenarios), "languageId": "yaml", "version": 1, "text": sc_broken}}),
    );
    let diags = ed.diagnostics(&uri(&scenarios), Some(1));
    assert!(
        diags.iter().any(|d| d["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("coordinator.scenario."))),
        "{diags:#?}"
    );

    let (code, stderr) = ed.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Copies an example project into `into`.
fn copy_example(name: &str, into: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let to = into.join(name);
    std::fs::create_dir_all(&to).expect("mkdir");
    for entry in std::fs::read_dir(&from).expect("example") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
    to
}

/// The longest prefix of `text` of at most `n` bytes that ends on a
/// character boundary.
fn prefix(text: &str, mut n: usize) -> &str {
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    &text[..n]
}

#[test]
fn lsp_survives_half_typed_files_and_malformed_messages() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut ed = Editor::start(tmp.path());

    // Before initialize: refused, but answered.
    let answer = ed.request("textDocument/hover", json!({}));
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    ed.initialize(tmp.path());

    let malformed: Vec<Vec<u8>> = vec![
        frame("{not json"),
        frame("[]"),
        frame("42"),
        frame(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"textDocument/hover"}"#),
        frame(r#"{"jsonrpc":"2.0","id":7.5,"method":"textDocument/hover"}"#),
        frame(r#"{"jsonrpc":"2.0","method":"textDocument/didChange","params":5}"#),
        frame(
            r#"{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"not a uri"}}}"#,
        ),
        frame(
            r#"{"jsonrpc":"2.0","id":"x","method":"textDocument/hover","params":{"textDocument":{"uri":"file:///nowhere/workflow.yaml"},"position":{"line":-1,"character":0}}}"#,
        ),
        frame(r#"{"jsonrpc":"2.0","id":"y","result":{}}"#),
        frame("\u{feff}{}"),
        b"Content-Type: text/plain\r\n\r\n".to_vec(),
        b"Content-Length: 3\r\n\r\n\xff\xfe\xfd".to_vec(),
        b"\r\n\r\n".to_vec(),
    ];
    let examples = [
        "decision-follow-up",
        "deferred-appointment",
        "delayed-follow-up",
        "external-directory",
        "governed-action",
        "reviewed-notice",
    ];
    let mut version = 0i64;
    let mut bad = malformed.iter().cycle();
    for name in examples {
        let project = copy_example(name, tmp.path());
        for file in [
            "workflow.yaml",
            "functions.rhai",
            "runtime.yaml",
            "scenarios.yaml",
        ] {
            let path = project.join(file);
            let doc = uri(&path);
            let full = std::fs::read_to_string(&path).expect("example file");
            version += 1;
            ed.notify(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": doc, "languageId": "yaml", "version": version, "text": ""}}),
            );
            ed.diagnostics(&doc, Some(version));
            // Every cut at a stride, and the whole file last.
            let stride = (full.len() / 16).max(1);
            let cuts = (0..full.len()).step_by(stride).chain([full.len()]);
            for cut in cuts {
                let text = prefix(&full, cut);
                version += 1;
                ed.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": doc, "version": version}, "contentChanges": [{"text": text}]}),
                );
                let diags = ed.diagnostics(&doc, Some(version));
                for d in &diags {
                    assert!(
                        d["code"]
                            .as_str()
                            .is_some_and(|c| c.starts_with("coordinator.")),
                        "{d}"
                    );
                    assert!(d["range"]["start"]["line"].as_u64().is_some(), "{d}");
                }
                // Requests at the cut, and in the middle.
                let end = (
                    text.matches('\n').count() as u32,
                    text.rsplit('\n')
                        .next()
                        .unwrap_or_default()
                        .encode_utf16()
                        .count() as u32,
                );
                for position in [end, (end.0 / 2, 7)] {
                    for method in [
                        "textDocument/hover",
                        "textDocument/definition",
                        "textDocument/completion",
                    ] {
                        let answer = ed.request(method, at(&doc, position));
                        assert!(
                            answer.get("error").is_none(),
                            "{method} at {position:?}: {answer}"
                        );
                    }
                }
                // And something malformed between edits.
                let junk = bad.next().expect("cycle").clone();
                ed.raw(&junk);
            }
            let answer = ed.request("textDocument/hover", at(&doc, (0, 0)));
            assert!(answer.get("error").is_none(), "{answer}");
            ed.notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": doc}}),
            );
        }
    }
    // Every malformed message once more, each followed by a request that is answered.
    for junk in &malformed {
        ed.raw(junk);
        let answer = ed.request(
            "textDocument/completion",
            at("file:///nowhere/workflow.yaml", (0, 0)),
        );
        assert!(answer.get("error").is_none(), "{answer}");
    }
    let answer = ed.request("no/such-method", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let answer = ed.request("textDocument/hover", json!({"textDocument": 3}));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let (code, stderr) = ed.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A step no scenario case reaches is marked with a hint at its name (as
/// `test --coverage` finds it: the cases are run); a case that reaches it,
/// typed into scenarios.yaml unsaved, clears the hint.
#[test]
fn lsp_hints_the_steps_no_case_reaches() {
    let tmp = tempfile::tempdir().expect("temp dir");
    assert!(ctl(tmp.path(), &["init", "--directory", "follow-up"])
        .status
        .success());
    let project = tmp.path().join("follow-up");
    let scenarios_path = project.join("scenarios.yaml");
    let all_cases = std::fs::read_to_string(&scenarios_path).expect("scenarios.yaml");
    let cut = all_cases.find("- id: permission-withdrawn").expect("case");
    let rest = all_cases.find("- id: same-command").expect("next case");
    let fewer = format!("{}{}", &all_cases[..cut], &all_cases[rest..]);
    std::fs::write(&scenarios_path, &fewer).expect("write");
    let path = project.join("workflow.yaml");
    let wf = uri(&path);
    let text = std::fs::read_to_string(&path).expect("workflow.yaml");

    let mut ed = Editor::start(tmp.path());
    ed.initialize(tmp.path());
    ed.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": wf, "languageId": "yaml", "version": 1, "text": text}}),
    );
    let diags = ed.diagnostics(&wf, Some(1));
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let hint = &diags[0];
    assert_eq!(hint["severity"], 4, "a hint");
    assert!(hint.get("code").is_none(), "{hint}");
    let (line, column) = position_of(&text, "        skip: skipped\n", "skipped:");
    assert_eq!(
        hint["range"],
        json!({"start": {"line": line, "character": column}, "end": {"line": line, "character": column + 7}})
    );
    assert!(
        hint["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("no case of scenarios.yaml reaches step `skipped`"),
        "{hint}"
    );

    let sc = uri(&scenarios_path);
    ed.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": sc, "languageId": "yaml", "version": 1, "text": all_cases}}),
    );
    assert_eq!(ed.diagnostics(&sc, Some(1)), Vec::<Value>::new());
    assert_eq!(
        ed.diagnostics(&wf, Some(1)),
        Vec::<Value>::new(),
        "every step reached"
    );
    let (code, stderr) = ed.finish();
    assert_eq!(code, Some(0), "{stderr}");
}
