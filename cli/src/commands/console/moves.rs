//! The console's Moves page (`/moves`, docs/console.md): the runs in state
//! `running` by workflow and revision, and the move of a revision's waiting
//! runs to another revision by a certificate `coordinatorctl move plan`
//! wrote, uploaded in the browser (`POST /moves/certificates`) or read from
//! a path on the console's machine (`?path=`). The page shows the
//! certificate's waits with their findings and the runs on its revision A;
//! each run's move is forwarded to `POST /v1/runs/{run}/move` with the
//! operator's token (`POST /moves/{certificate}/runs/{run}`), and the
//! service decides: a run that is not waiting at a movable wait is refused
//! with its code and nothing moves.
//!
//! A certificate read is kept in the console's memory under a random id
//! (the last [`KEPT_CERTIFICATES`]), so the page and the moves name it
//! without sending it back and forth; it holds revisions, step ids and
//! findings, never a run's data.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use coordinator_api as api;
use coordinator_ir::moves::MoveCertificate;
use maud::{html, Markup};
use serde::Deserialize;

use super::pages::{layout, Nav};
use super::{console_problem, forwarded_problem, unanswered, Console, Fetched};
use crate::codes;
use crate::commands::timeline::short_digest;
use crate::service_client::{Body, Method};

/// Certificates the console keeps (the oldest is dropped first).
pub(crate) const KEPT_CERTIFICATES: usize = 16;
/// Most runs the page lists (the API's pages followed up to this).
const MAX_LISTED: usize = 2_000;

/// A certificate read: its members as written (sent unchanged with each
/// move) and what the page shows of it.
pub(crate) struct KeptCertificate {
    id: String,
    members: serde_json::Map<String, serde_json::Value>,
    certificate: MoveCertificate,
}

/// The certificates the console read, newest last.
#[derive(Default)]
pub(crate) struct Certificates(std::sync::Mutex<Vec<Arc<KeptCertificate>>>);

impl Certificates {
    fn keep(&self, kept: KeptCertificate) -> Arc<KeptCertificate> {
        let kept = Arc::new(kept);
        if let Ok(mut all) = self.0.lock() {
            all.push(kept.clone());
            let over = all.len().saturating_sub(KEPT_CERTIFICATES);
            all.drain(..over);
        }
        kept
    }

    fn get(&self, id: &str) -> Option<Arc<KeptCertificate>> {
        let all = self.0.lock().ok()?;
        all.iter().find(|c| c.id == id).cloned()
    }
}

/// `bytes` read as a move certificate (its digest verified, as `move
/// apply` reads it) and kept under a new id; the reason it is not one.
fn read_certificate(console: &Console, bytes: &[u8]) -> Result<Arc<KeptCertificate>, String> {
    if bytes.len() > api::MAX_MOVE_BODY_BYTES {
        return Err(format!(
            "a certificate is at most {} bytes",
            api::MAX_MOVE_BODY_BYTES
        ));
    }
    let certificate = MoveCertificate::from_json(bytes).map_err(|e| e.to_string())?;
    let members = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let id = super::new_secret()
        .map(|s| s[..16].to_owned())
        .map_err(|e| format!("no random id: {e}"))?;
    Ok(console.certificates.keep(KeptCertificate {
        id,
        members,
        certificate,
    }))
}

/// The runs in state `running` (of `workflow` when given), following the
/// API's pages up to [`MAX_LISTED`]; the sentence of a failure.
async fn running_runs(
    console: &Console,
    workflow: Option<&str>,
) -> Result<Vec<api::RunStatus>, String> {
    let mut query = vec![
        ("state", "running".to_owned()),
        ("limit", api::MAX_LIST_LIMIT.to_string()),
    ];
    if let Some(w) = workflow {
        query.push(("workflow", w.to_owned()));
    }
    let mut runs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut page = query.clone();
        if let Some(c) = cursor.take() {
            page.push(("cursor", c));
        }
        match console
            .fetch::<api::RunList>(Method::Get, &["v1", "runs"], &page)
            .await
        {
            Fetched::Answer(list) => {
                runs.extend(list.runs);
                match list.next_cursor {
                    Some(c) if runs.len() < MAX_LISTED => cursor = Some(c),
                    _ => break,
                }
            }
            Fetched::Problem(p) => return Err(format!("{} (coordinator.{})", p.title, p.code)),
            Fetched::Failed(why) => return Err(why),
        }
    }
    Ok(runs)
}

/// The Moves page's query: a certificate kept (`certificate`) or to read
/// from a path on the console's machine (`path`).
#[derive(Debug, Deserialize)]
pub(crate) struct MovesQuery {
    certificate: Option<String>,
    path: Option<String>,
}

/// `GET /moves[?certificate=ID|?path=PATH]`: the page.
pub(crate) async fn moves_page(
    State(console): State<Arc<Console>>,
    Query(query): Query<MovesQuery>,
) -> Response {
    let chosen: Option<Result<Arc<KeptCertificate>, String>> = match (
        &query.certificate,
        query.path.as_deref().filter(|p| !p.is_empty()),
    ) {
        (Some(id), _) => Some(console.certificates.get(id).ok_or_else(|| {
            "the console no longer holds that certificate: read it again".to_owned()
        })),
        (None, Some(path)) => Some(read_path(&console, path)),
        (None, None) => None,
    };
    let workflow = match &chosen {
        Some(Ok(c)) => Some(c.certificate.workflow.clone()),
        _ => None,
    };
    let runs = running_runs(&console, workflow.as_deref()).await;
    let mut response = super::html(page(&console.base, &console.secret, &runs, chosen.as_ref()));
    if matches!(chosen, Some(Err(_))) {
        *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    }
    response
}

/// The certificate at `path` (a regular file of at most the move route's
/// body limit), read and kept.
fn read_path(console: &Console, path: &str) -> Result<Arc<KeptCertificate>, String> {
    let metadata = std::fs::metadata(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    if !metadata.is_file() || metadata.len() > api::MAX_MOVE_BODY_BYTES as u64 {
        return Err(format!(
            "{path} is not a regular file of at most {} bytes",
            api::MAX_MOVE_BODY_BYTES
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    read_certificate(console, &bytes)
}

/// `POST /moves/certificates` with a certificate's bytes (the browser's
/// upload): kept, answered `{"certificate": ID}` for the page to open
/// (`/moves?certificate=ID`); 422 `move.certificate` when it is not one.
pub(crate) async fn upload(
    State(console): State<Arc<Console>>,
    body: axum::body::Bytes,
) -> Response {
    match read_certificate(&console, &body) {
        Ok(kept) => axum::Json(serde_json::json!({ "certificate": kept.id })).into_response(),
        Err(why) => console_problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            codes::MOVE_CERTIFICATE
                .strip_prefix("coordinator.")
                .unwrap_or(codes::MOVE_CERTIFICATE),
            "The file is not a move certificate",
            why,
        ),
    }
}

/// `POST /moves/{certificate}/runs/{run}` with `{"reason": REF}`: the
/// kept certificate sent with the reason to `POST /v1/runs/{run}/move`;
/// answers `{"state", "revision"}` of the moved run, or the service's
/// problem document with its status (a run not waiting, held, ended, on
/// another revision, at a refused wait: nothing moved).
pub(crate) async fn move_run(
    State(console): State<Arc<Console>>,
    UrlPath((id, run)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    if run == "." || run == ".." {
        return super::not_found().await;
    }
    let Some(kept) = console.certificates.get(&id) else {
        return console_problem(
            StatusCode::NOT_FOUND,
            "move.certificate",
            "The console no longer holds that certificate",
            "read the certificate again on the Moves page".into(),
        );
    };
    let reason = match super::action_reason(&body) {
        Ok(reason) => reason,
        Err(problem) => return problem,
    };
    let answer: Fetched<api::RunStatus> = console
        .fetch(
            Method::Post(Body::Move(api::MoveRun {
                certificate: kept.members.clone(),
                reason,
            })),
            &["v1", "runs", &run, "move"],
            &[],
        )
        .await;
    match answer {
        Fetched::Answer(status) => (
            StatusCode::OK,
            axum::Json(serde_json::json!({"state": status.state, "revision": status.revision})),
        )
            .into_response(),
        Fetched::Problem(p) => forwarded_problem(p),
        Fetched::Failed(why) => unanswered(why),
    }
}

/// The page: the running runs by revision, the certificate form, and a
/// certificate's waits, findings and runs with the move.
fn page(
    base: &str,
    secret: &str,
    runs: &Result<Vec<api::RunStatus>, String>,
    chosen: Option<&Result<Arc<KeptCertificate>, String>>,
) -> Markup {
    let body = html! {
        h2 { "Moves" }
        section #by-revision {
            h3 { "Running runs by revision" }
            @match runs {
                Err(why) => p.problem { "The runs could not be listed: " (why) },
                Ok(runs) => (by_revision(runs)),
            }
        }
        section #certificate-form {
            h3 { "Move waiting runs" }
            p { "A certificate " code { "coordinatorctl move plan" } " wrote proves which waits of revision A "
                "can resume on revision B (docs/operations.md \"Moving waiting runs\"). Apply B and restart the "
                "service on it first; then read the certificate here." }
            form #certificate-upload data-endpoint={ (base) "/moves/certificates" } data-page={ (base) "/moves" } {
                label { "upload " input #certificate-file type="file" accept=".json,application/json"; }
                " " button type="submit" { "read" }
            }
            form #certificate-path method="get" action={ (base) "/moves" } {
                label { "or a path on this machine " input name="path" size="48" required; }
                " " button type="submit" { "read" }
            }
            div #certificate-result role="status" {}
        }
        @match chosen {
            None => {},
            Some(Err(why)) => section #certificate { p.problem { "Not a move certificate: " (why) } },
            Some(Ok(kept)) => (certificate_view(base, kept, runs)),
        }
    };
    layout(base, "Moves", Nav::Moves, false, Some(secret), body)
}

/// The running runs counted by workflow and revision (`#by-revision`).
fn by_revision(runs: &[api::RunStatus]) -> Markup {
    let mut counts: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for r in runs {
        *counts.entry((&r.workflow, &r.revision)).or_default() += 1;
    }
    html! {
        @if counts.is_empty() { p { "No run is running." } }
        @else {
            table.by-revision {
                thead { tr { th { "workflow" } th { "revision" } th { "running" } } }
                tbody {
                    @for ((workflow, revision), n) in &counts {
                        tr data-workflow=(workflow) data-revision=(revision) {
                            td { (workflow) } td { code { (revision) } } td.count { (n) }
                        }
                    }
                }
            }
            p.hint { "A running run waits or is in a call; only a run waiting at a wait the certificate finds movable moves." }
        }
    }
}

/// A certificate's waits with their findings, the runs on its revision A,
/// and the move form (`#certificate`).
fn certificate_view(
    base: &str,
    kept: &KeptCertificate,
    runs: &Result<Vec<api::RunStatus>, String>,
) -> Markup {
    let c = &kept.certificate;
    let on_a: Vec<&api::RunStatus> = match runs {
        Ok(runs) => runs
            .iter()
            .filter(|r| r.workflow == c.workflow && r.revision == c.from.revision)
            .collect(),
        Err(_) => Vec::new(),
    };
    let movable = c.waits.iter().filter(|w| w.movable).count();
    html! {
        section #certificate data-certificate=(kept.id) {
            h3 { "Certificate " code { (short_digest(&c.digest)) "…" } }
            dl {
                dt { "workflow" } dd { (c.workflow) }
                dt { "from (A)" } dd { code { (c.from.revision) } }
                dt { "to (B)" } dd { code { (c.to.revision) } }
                dt { "movable waits" } dd #movable-waits { (movable) " of " (c.waits.len()) }
            }
            table.waits {
                thead { tr { th { "wait (A)" } th { "to (B)" } th { "kind" } th { "movable" } th { "findings" } } }
                tbody {
                    @for w in &c.waits {
                        tr data-wait=(w.from) data-movable=(w.movable) {
                            td { (w.from) } td { (w.to) } td { (w.kind.as_str()) }
                            td { @if w.movable { "yes" } @else { "no" } }
                            td.findings {
                                @if w.findings.is_empty() { span.none { "—" } }
                                @else { ul { @for f in &w.findings {
                                    li data-code=(f.code) {
                                        code { (f.code) } " " (f.file) ":" (f.line) ":" (f.column) " " code { (f.pointer) }
                                        br; (f.message) br; span.next { "next: " (f.next) }
                                    }
                                } } }
                            }
                        }
                    }
                }
            }
            @if on_a.is_empty() {
                p #move-runs { "No running run of " (c.workflow) " is on revision A." }
            } @else {
                form #move data-endpoint={ (base) "/moves/" (kept.id) "/runs/" } data-runs=(on_a.iter().map(|r| r.run.as_str()).collect::<Vec<_>>().join(" ")) {
                    p #move-runs { (on_a.len()) " running run(s) of " (c.workflow) " on revision A. Each is moved only if it waits at a movable wait; the service refuses any other with its code, and nothing of it moves." }
                    input name="reason" placeholder="investigation reference" required maxlength="256" pattern="[!-~]+" size="28";
                    " " button type="submit" { "move " (on_a.len()) " run(s) to B" }
                }
                div #move-result role="status" {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A certificate whose one wait is refused with a finding.
    fn refused() -> KeptCertificate {
        let members = json!({
            "format": "coordinator-move-certificate/1", "checker": "coordinator-move-check/1",
            "digest": format!("sha256:{}", "d".repeat(64)), "workflow": "follow-up",
            "from": {"revision": format!("sha256:{}", "a".repeat(64))},
            "to": {"revision": format!("sha256:{}", "b".repeat(64))},
            "map": [], "acceptSkipped": [], "dueInstant": "kept",
            "waits": [{"from": "due", "to": "due", "kind": "wait-until", "movable": false,
                "carried": [], "findings": [{"code": "coordinator.move.input-missing",
                "severity": "error", "file": "b/workflow.yaml", "line": 70, "column": 11,
                "pointer": "/workflow/steps/notify/input", "message": "reads <priority>",
                "next": "make it optional"}]}]
        });
        KeptCertificate {
            id: "k1".into(),
            certificate: serde_json::from_value(members.clone()).expect("a certificate"),
            members: members.as_object().cloned().unwrap_or_default(),
        }
    }

    fn run_on(revision: &str) -> api::RunStatus {
        serde_json::from_value(json!({
            "run": format!("run-{}", &revision[7..8]), "workflow": "follow-up", "revision": revision,
            "state": "running", "admittedAt": "2026-01-01T00:00:00Z",
            "deadlineAt": "2026-01-02T00:00:00Z", "endedAt": null, "outcome": null,
            "output": null, "failure": null, "failurePath": null
        }))
        .expect("a status")
    }

    #[test]
    fn a_refused_wait_shows_its_findings_and_only_runs_on_a_are_offered() {
        let kept = refused();
        let runs = Ok(vec![
            run_on(&kept.certificate.from.revision),
            run_on(&kept.certificate.to.revision),
        ]);
        let html = certificate_view("/s/x", &kept, &runs).into_string();
        assert!(
            html.contains("data-wait=\"due\" data-movable=\"false\""),
            "{html}"
        );
        assert!(
            html.contains("li data-code=\"coordinator.move.input-missing\""),
            "{html}"
        );
        assert!(html.contains("b/workflow.yaml:70:11"), "{html}");
        assert!(html.contains("reads &lt;priority&gt;"), "escaped: {html}");
        assert!(html.contains("0 of 1"), "{html}");
        assert!(
            html.contains("data-runs=\"run-a\""),
            "only the run on A: {html}"
        );
        let counted = by_revision(runs.as_ref().map(Vec::as_slice).unwrap_or(&[])).into_string();
        assert_eq!(
            counted.matches("<td class=\"count\">1</td>").count(),
            2,
            "{counted}"
        );
    }
}
