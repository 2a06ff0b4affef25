//! `coordinatorctl lsp`: a language server over stdio (LSP 3.17, full
//! document sync, UTF-16 positions). docs/editors.md shows how editors
//! start it.
//!
//! - On open and on every change or save of `workflow.yaml`,
//!   `functions.rhai`, `runtime.yaml` or `scenarios.yaml`, the project (the
//!   file's directory) is checked on the unsaved texts, the other files
//!   read from disk ([`analysis::check_project`]), and the diagnostics of
//!   each of its files are published: the stretch `check --format rich`
//!   marks, the code with its `docs/errors` page as `codeDescription`, the
//!   message with the `next:` repair.
//! - In `workflow.yaml`: hover, go-to-definition and completion
//!   ([`navigate`]).
//!
//! Messages are lsp-server's, payloads lsp-types'; frames are cut by
//! [`transport`], which answers a malformed message with a JSON-RPC error
//! and reads on. Every message is handled under `catch_unwind`, so even a
//! bug answers `InternalError` instead of ending the server; nothing here
//! is expected to panic.

mod analysis;
mod hints;
mod navigate;
mod position;
mod transport;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use coordinator_compiler::ast::ProjectFile;
use coordinator_source::YamlDocument;
use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::{
    CompletionOptions, CompletionResponse, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, GotoDefinitionParams,
    GotoDefinitionResponse, Hover, HoverContents, HoverParams, HoverProviderCapability,
    InitializeResult, Location, MarkupContent, MarkupKind, OneOf, PublishDiagnosticsParams, Range,
    SaveOptions, ServerCapabilities, ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, TextDocumentSyncSaveOptions, Uri,
};
use serde_json::Value;

use analysis::{Document, Documents, ErrorPages};
use transport::Frame;

use crate::report::{EXIT_OK, EXIT_REFUSED};

/// Arguments of `lsp` (none: the editor speaks on stdin and stdout).
#[derive(Args, Debug)]
pub struct LspArgs {}

/// The last `workflow.yaml` text of a file that read as YAML (and, when it
/// did, as a typed project): completion and hover use it while the current
/// text is half typed.
#[derive(Default)]
struct LastGood {
    doc: Option<YamlDocument>,
    project: Option<ProjectFile>,
}

/// Where the server is in the protocol's life cycle.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before `initialize`.
    Waiting,
    /// Between `initialize` and `shutdown`.
    Running,
    /// After `shutdown`: only `exit` is expected.
    ShutDown,
}

struct Server {
    phase: Phase,
    docs: Documents,
    last_good: HashMap<PathBuf, LastGood>,
    pages: Option<ErrorPages>,
    pages_option: Option<PathBuf>,
    /// Files with diagnostics published, so that an empty list clears them.
    published: BTreeSet<String>,
}

/// What handling a message asks of the loop.
enum Next {
    Continue,
    Exit(u8),
}

/// Runs the server on stdin and stdout until `exit` or the end of input;
/// exit 0 after `shutdown` then `exit`, 1 otherwise (LSP 3.17).
pub fn run(_args: LspArgs) -> u8 {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    serve(&mut input, &mut out)
}

/// The server loop over any input and output.
fn serve(input: &mut impl std::io::BufRead, out: &mut impl Write) -> u8 {
    let mut server = Server {
        phase: Phase::Waiting,
        docs: Documents::default(),
        last_good: HashMap::new(),
        pages: None,
        pages_option: std::env::var_os("COORDINATOR_ERROR_PAGES").map(PathBuf::from),
        published: BTreeSet::new(),
    };
    loop {
        let message = match transport::read(input) {
            Frame::End => {
                return if server.phase == Phase::ShutDown {
                    EXIT_OK
                } else {
                    EXIT_REFUSED
                }
            }
            Frame::Malformed(Some(answer)) => {
                if transport::write_value(out, &answer).is_err() {
                    return EXIT_REFUSED;
                }
                continue;
            }
            Frame::Malformed(None) => continue,
            Frame::Message(m) => m,
        };
        let id = match &message {
            Message::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        let mut outgoing = Vec::new();
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            server.handle(message, &mut outgoing)
        }));
        let next = match handled {
            Ok(next) => next,
            Err(_) => {
                if let Some(id) = id {
                    outgoing.push(error(id, ErrorCode::InternalError, "internal error"));
                }
                Next::Continue
            }
        };
        for m in &outgoing {
            if transport::write(out, m).is_err() {
                return EXIT_REFUSED;
            }
        }
        if let Next::Exit(code) = next {
            return code;
        }
    }
}

fn error(id: RequestId, code: ErrorCode, message: &str) -> Message {
    Message::Response(Response::new_err(id, code as i32, message.to_owned()))
}

fn ok(id: RequestId, result: impl serde::Serialize) -> Message {
    match serde_json::to_value(result) {
        Ok(v) => Message::Response(Response {
            id,
            response_result: Ok(v),
        }),
        Err(e) => error(id, ErrorCode::InternalError, &e.to_string()),
    }
}

fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::FULL),
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
                ..TextDocumentSyncOptions::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![" ".into(), ":".into()]),
            ..CompletionOptions::default()
        }),
        ..ServerCapabilities::default()
    }
}

impl Server {
    fn handle(&mut self, message: Message, out: &mut Vec<Message>) -> Next {
        match message {
            Message::Request(r) => self.request(r, out),
            Message::Notification(n) => return self.notification(n, out),
            Message::Response(_) => {}
        }
        Next::Continue
    }

    fn request(&mut self, r: Request, out: &mut Vec<Message>) {
        match (self.phase, r.method.as_str()) {
            (Phase::Waiting, "initialize") => {
                self.pages_option = r
                    .params
                    .pointer("/initializationOptions/errorPages")
                    .and_then(Value::as_str)
                    .map(PathBuf::from)
                    .or(self.pages_option.take());
                self.phase = Phase::Running;
                out.push(ok(
                    r.id,
                    InitializeResult {
                        capabilities: capabilities(),
                        server_info: Some(ServerInfo {
                            name: "coordinatorctl".into(),
                            version: Some(env!("CARGO_PKG_VERSION").into()),
                        }),
                    },
                ));
            }
            (Phase::Waiting, _) => out.push(error(
                r.id,
                ErrorCode::ServerNotInitialized,
                "the server is not initialized: send initialize first",
            )),
            (Phase::ShutDown, _) => out.push(error(
                r.id,
                ErrorCode::InvalidRequest,
                "the server is shut down: only exit is expected",
            )),
            (Phase::Running, "initialize") => out.push(error(
                r.id,
                ErrorCode::InvalidRequest,
                "the server is already initialized",
            )),
            (Phase::Running, "shutdown") => {
                self.phase = Phase::ShutDown;
                out.push(ok(r.id, Value::Null));
            }
            (Phase::Running, "textDocument/hover") => {
                self.with_params::<HoverParams>(r, out, |s, p| {
                    s.hover(&p).map_or(Value::Null, |h| {
                        serde_json::to_value(h).unwrap_or(Value::Null)
                    })
                });
            }
            (Phase::Running, "textDocument/definition") => {
                self.with_params::<GotoDefinitionParams>(r, out, |s, p| {
                    s.definition(&p).map_or(Value::Null, |d| {
                        serde_json::to_value(d).unwrap_or(Value::Null)
                    })
                });
            }
            (Phase::Running, "textDocument/completion") => {
                self.with_params::<lsp_types::CompletionParams>(r, out, |s, p| {
                    serde_json::to_value(CompletionResponse::Array(s.completion(&p)))
                        .unwrap_or(Value::Null)
                });
            }
            (Phase::Running, method) => {
                let message = format!("method {method} is not served");
                out.push(error(r.id, ErrorCode::MethodNotFound, &message));
            }
        }
    }

    /// Reads a request's params as `P` and answers with `f`'s result, or
    /// `InvalidParams` when they do not read.
    fn with_params<P: serde::de::DeserializeOwned>(
        &mut self,
        r: Request,
        out: &mut Vec<Message>,
        f: impl FnOnce(&mut Self, P) -> Value,
    ) {
        match serde_json::from_value::<P>(r.params) {
            Ok(p) => {
                let v = f(self, p);
                out.push(ok(r.id, v));
            }
            Err(e) => out.push(error(
                r.id,
                ErrorCode::InvalidParams,
                &format!("invalid params of {}: {e}", r.method),
            )),
        }
    }

    fn notification(&mut self, n: Notification, out: &mut Vec<Message>) -> Next {
        if n.method == "exit" {
            return Next::Exit(if self.phase == Phase::ShutDown {
                EXIT_OK
            } else {
                EXIT_REFUSED
            });
        }
        if self.phase != Phase::Running {
            return Next::Continue;
        }
        // A notification with params that do not read is dropped: there is
        // no one to answer.
        let changed: Option<Uri> = match n.method.as_str() {
            "textDocument/didOpen" => serde_json::from_value::<DidOpenTextDocumentParams>(n.params)
                .ok()
                .and_then(|p| {
                    let path = analysis::path_of(&p.text_document.uri)?;
                    self.docs.set(
                        path,
                        Document {
                            text: p.text_document.text,
                            version: p.text_document.version,
                        },
                    );
                    Some(p.text_document.uri)
                }),
            "textDocument/didChange" => {
                serde_json::from_value::<DidChangeTextDocumentParams>(n.params)
                    .ok()
                    .and_then(|p| {
                        let path = analysis::path_of(&p.text_document.uri)?;
                        let mut text = self
                            .docs
                            .get(&path)
                            .map(|d| d.text.clone())
                            .unwrap_or_default();
                        for change in &p.content_changes {
                            position::apply_change(&mut text, change);
                        }
                        self.docs.set(
                            path,
                            Document {
                                text,
                                version: p.text_document.version,
                            },
                        );
                        Some(p.text_document.uri)
                    })
            }
            "textDocument/didSave" => serde_json::from_value::<DidSaveTextDocumentParams>(n.params)
                .ok()
                .map(|p| p.text_document.uri),
            "textDocument/didClose" => {
                serde_json::from_value::<DidCloseTextDocumentParams>(n.params)
                    .ok()
                    .and_then(|p| {
                        let path = analysis::path_of(&p.text_document.uri)?;
                        self.docs.close(&path);
                        Some(p.text_document.uri)
                    })
            }
            _ => None,
        };
        if let Some(uri) = changed {
            self.check(&uri, out);
        }
        Next::Continue
    }

    /// Checks the project of `uri` (when it is a project file) and queues
    /// its diagnostics.
    fn check(&mut self, uri: &Uri, out: &mut Vec<Message>) {
        let Some((dir, _)) = analysis::project_file(uri) else {
            return;
        };
        let option = self.pages_option.clone();
        let pages = self
            .pages
            .get_or_insert_with(|| ErrorPages::find(option, Some(&dir)));
        for file in analysis::check_project(&dir, &self.docs, pages) {
            let key = file.uri.as_str().to_owned();
            if file.diagnostics.is_empty() && !self.published.contains(&key) {
                // Nothing to say and nothing to clear, but an open file is
                // told it is clean.
                if file.version.is_none() {
                    continue;
                }
            }
            if file.diagnostics.is_empty() {
                self.published.remove(&key);
            } else {
                self.published.insert(key);
            }
            let params = PublishDiagnosticsParams {
                uri: file.uri,
                diagnostics: file.diagnostics,
                version: file.version,
            };
            if let Ok(params) = serde_json::to_value(params) {
                out.push(Message::Notification(Notification {
                    method: "textDocument/publishDiagnostics".into(),
                    params,
                }));
            }
        }
        self.remember(&dir.join(coordinator_compiler::WORKFLOW_FILE));
    }

    /// Keeps the workflow file's last text that read (see [`LastGood`]).
    fn remember(&mut self, path: &Path) {
        let Some(text) = self.docs.text(path) else {
            return;
        };
        let Ok(doc) = coordinator_source::parse(coordinator_compiler::WORKFLOW_FILE, &text) else {
            return;
        };
        let entry = self.last_good.entry(path.to_path_buf()).or_default();
        if let Ok(project) = doc.deserialize::<ProjectFile>() {
            entry.project = Some(project);
        }
        entry.doc = Some(doc);
    }

    /// The workflow file at `uri`: its path, its text and its document
    /// (the current text when it reads as YAML, else the last that did).
    fn workflow(&mut self, uri: &Uri) -> Option<(PathBuf, String, Option<YamlDocument>)> {
        let (dir, name) = analysis::project_file(uri)?;
        if name != coordinator_compiler::WORKFLOW_FILE {
            return None;
        }
        let path = dir.join(name);
        let text = self.docs.text(&path)?;
        let doc = coordinator_source::parse(name, &text)
            .ok()
            .or_else(|| self.last_good.get(&path).and_then(|g| g.doc.clone()));
        Some((path, text, doc))
    }

    fn hover(&mut self, p: &HoverParams) -> Option<Hover> {
        let at = &p.text_document_position_params;
        let (path, text, doc) = self.workflow(&at.text_document.uri)?;
        let doc = doc?;
        let project = doc
            .deserialize::<ProjectFile>()
            .ok()
            .or_else(|| self.last_good.get(&path).and_then(|g| g.project.clone()));
        let position = position::from_lsp_position(&text, at.position);
        let (found, markdown) = navigate::hover(&doc, project.as_ref(), position)?;
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value: markdown,
            }),
            range: Some(Range {
                start: position::to_lsp_position(&text, found.start),
                end: position::to_lsp_position(&text, found.end),
            }),
        })
    }

    fn definition(&mut self, p: &GotoDefinitionParams) -> Option<GotoDefinitionResponse> {
        let at = &p.text_document_position_params;
        let (_, text, doc) = self.workflow(&at.text_document.uri)?;
        let doc = doc?;
        let position = position::from_lsp_position(&text, at.position);
        let found = navigate::name_at(&doc, position)?;
        let (start, end) = navigate::declaration(&doc, found.kind, &found.name)?;
        Some(GotoDefinitionResponse::Scalar(Location {
            uri: at.text_document.uri.clone(),
            range: Range {
                start: position::to_lsp_position(&text, start),
                end: position::to_lsp_position(&text, end),
            },
        }))
    }

    fn completion(&mut self, p: &lsp_types::CompletionParams) -> Vec<lsp_types::CompletionItem> {
        let at = &p.text_document_position;
        let Some((_, text, doc)) = self.workflow(&at.text_document.uri) else {
            return Vec::new();
        };
        navigate::completion(&text, doc.as_ref(), at.position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(v: Value) -> Vec<u8> {
        let body = v.to_string();
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    #[test]
    fn life_cycle_and_bad_requests_are_answered() {
        let mut input = Vec::new();
        input.extend(frame(
            serde_json::json!({"jsonrpc":"2.0","id":1,"method":"textDocument/hover","params":{}}),
        ));
        input.extend(frame(serde_json::json!({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"capabilities":{}}})));
        input.extend(frame(serde_json::json!({"jsonrpc":"2.0","id":3,"method":"textDocument/hover","params":{"bad":1}})));
        input.extend(frame(
            serde_json::json!({"jsonrpc":"2.0","id":4,"method":"nope"}),
        ));
        input.extend(frame(serde_json::json!({"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///nowhere/x.txt","languageId":"x","version":1,"text":""}}})));
        input.extend(frame(
            serde_json::json!({"jsonrpc":"2.0","id":5,"method":"shutdown"}),
        ));
        input.extend(frame(serde_json::json!({"jsonrpc":"2.0","method":"exit"})));
        let mut out = Vec::new();
        let code = serve(&mut std::io::BufReader::new(input.as_slice()), &mut out);
        assert_eq!(code, EXIT_OK);
        let mut reader = std::io::BufReader::new(out.as_slice());
        let mut codes = Vec::new();
        while let Frame::Message(Message::Response(r)) = transport::read(&mut reader) {
            codes.push(r.response_result.err().map(|e| e.code));
        }
        assert_eq!(
            codes,
            [Some(-32002), None, Some(-32602), Some(-32601), None]
        );
    }
}
