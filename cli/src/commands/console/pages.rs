//! The console's pages, rendered on the server with `maud` (every string
//! is escaped by the template). They show what the API's answers hold:
//! states, steps, effects, waits, failures and holds; never an input, a
//! product response or a prepared command (inspection never returns them).

use coordinator_api as api;
use coordinator_compiler::explain_data::ExplainData;
use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::{Fetched, RunsQuery};
use crate::commands::graph;
use crate::commands::ops;
use crate::commands::timeline::{self, RunView, Standing};

/// Run states that are ended (the API's `state` values).
const ENDED: [&str; 5] = [
    "finished",
    "failed",
    "cancelled",
    "cancelled-after-effect",
    "expired",
];

/// Which page the navigation marks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    Runs,
    Run,
    Moves,
    Deployment,
}

/// The frame of every page; `base` is the console's path prefix
/// (`/s/<secret>`), before every link. `secret` (the Run page only) is the session
/// secret the page's script sends in `X-Console-Secret` with a change.
pub(super) fn layout(
    base: &str,
    title: &str,
    nav: Nav,
    refresh: bool,
    secret: Option<&str>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(secret) = secret {
                    meta name="console-secret" content=(secret);
                }
                title { (title) " · Registry Coordinator console" }
                link rel="stylesheet" href={ (base) "/assets/console.css" };
                script src={ (base) "/assets/console.js" } defer {}
            }
            body data-refresh=[refresh.then_some("5")] {
                header {
                    strong { "Registry Coordinator" }
                    nav {
                        a href={ (base) "/" } class=[(nav == Nav::Runs).then_some("active")] { "Runs" }
                        @if nav == Nav::Run { a class="active" { "Run" } }
                        a href={ (base) "/moves" } class=[(nav == Nav::Moves).then_some("active")] { "Moves" }
                        a href={ (base) "/deployment" } class=[(nav == Nav::Deployment).then_some("active")] { "Deployment" }
                    }
                    @if refresh {
                        label.refresh {
                            input #auto-refresh type="checkbox" checked;
                            " refresh every 5 s"
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A problem document or a failure, as a page section.
fn failure<T>(what: &str, fetched: &Fetched<T>) -> Option<Markup> {
    match fetched {
        Fetched::Answer(_) => None,
        Fetched::Problem(p) => Some(html! {
            section.problem {
                h3 { (what) ": " (p.status) " " (p.title) }
                p { code { "coordinator." (p.code) } }
                @if let Some(d) = &p.detail { p { (d) } }
                p.next { "next: " (crate::service_client::next_step(&p.code)) }
            }
        }),
        Fetched::Failed(why) => Some(html! {
            section.problem {
                h3 { (what) ": no answer" }
                p { (why) }
            }
        }),
    }
}

fn state_badge(state: &str) -> Markup {
    html! { span class={ "state state-" (state) } { (state) } }
}

/// The runs as table rows; with `pick`, each with a checkbox for the bulk
/// actions carrying the actions its state takes (`data-takes`).
fn run_rows(base: &str, runs: &[api::RunStatus], pick: bool) -> Markup {
    html! {
        table.runs {
            thead { tr {
                @if pick { th { input #pick-page type="checkbox" title="select the runs of this page"; } }
                th { "run" } th { "workflow" } th { "state" } th { "outcome / failure" } th { "admitted" } th { "review" }
            } }
            tbody {
                @for r in runs {
                    tr data-run=(r.run) {
                        @if pick { td { input.pick type="checkbox" value=(r.run) data-takes=(takes(&r.state)); } }
                        td { a href=(run_link(base, &r.run, None)) { code { (r.run) } } }
                        td { (r.workflow) }
                        td { (state_badge(&r.state)) }
                        td {
                            @if let Some(o) = &r.outcome { (o) }
                            @if let Some(f) = &r.failure { span.failure { (f) } }
                        }
                        td { (r.admitted_at) }
                        td { @if let Some(v) = &r.review { (v) } }
                    }
                }
            }
        }
    }
}

/// The Runs page: the runs in `attention` first, then every run (newest
/// first) with the workflow and state filters and `nextCursor` paging.
pub(super) fn runs(
    base: &str,
    secret: &str,
    filters: &RunsQuery,
    attention: &Fetched<api::RunList>,
    all: &Fetched<api::RunList>,
) -> Markup {
    let body = html! {
        section #attention {
            h2 { "Needs attention" }
            @if let Some(f) = failure("the runs in attention", attention) { (f) }
            @if let Fetched::Answer(list) = attention {
                @if list.runs.is_empty() {
                    p.empty { "No run needs an operator." }
                } @else {
                    (run_rows(base, &list.runs, false))
                    @if list.next_cursor.is_some() {
                        p.more { "More runs need attention than shown: use "
                            code { "coordinatorctl list --attention true" } "." }
                    }
                }
            }
        }
        section #all {
            h2 { "Runs" }
            form.filters method="get" action={ (base) "/" } {
                label { "workflow " input name="workflow" value=[filters.workflow.as_deref()] size="20"; }
                label { "state "
                    select name="state" {
                        option value="" { "any" }
                        @for s in ["running", "attention", "cancel-requested", "finished", "failed", "cancelled", "cancelled-after-effect", "expired"] {
                            option value=(s) selected[filters.state.as_deref() == Some(s)] { (s) }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            @if let Some(f) = failure("the runs", all) { (f) }
            @if let Fetched::Answer(list) = all {
                @if list.runs.is_empty() { p.empty { "No run matches." } } @else {
                    (run_rows(base, &list.runs, true))
                    (bulk_form(base, filters))
                }
                p.paging {
                    @if filters.cursor.is_some() { a href=(page_link(base, filters, None)) { "« first page" } " " }
                    @if let Some(next) = &list.next_cursor {
                        a #next-page href=(page_link(base, filters, Some(next))) { "next page »" }
                    }
                }
            }
        }
    };
    // The secret for the bulk actions' changes (the page's script sends it
    // as `X-Console-Secret`).
    layout(base, "Runs", Nav::Runs, true, Some(secret), body)
}

/// The bulk actions under the Runs table: the selected runs, or every run
/// matching the filter (not offered for an empty filter), one reason, and
/// the action; the page's script asks for confirmation, then calls the
/// single-run action for each run that takes it, paced, and shows the
/// progress and a summary by result and problem code.
fn bulk_form(base: &str, filters: &RunsQuery) -> Markup {
    let filtered = [&filters.workflow, &filters.state]
        .iter()
        .any(|v| v.as_deref().is_some_and(|v| !v.is_empty()));
    let matching = page_link(base, filters, None).replacen(
        &format!("{base}/"),
        &format!("{base}/matching"),
        1,
    );
    html! {
        form #bulk data-endpoint={ (base) "/runs/" } data-matching=(matching)
            data-no-longer-needed=(ops::NO_LONGER_NEEDED.join(" ")) {
            h3 { "Act on several runs" }
            p #bulk-selected { "0 selected" }
            @if filtered {
                label { input #pick-all-matching type="checkbox"; " every run matching this filter, on every page" }
            }
            label { "reason " input name="reason" placeholder="investigation reference" required maxlength="256" pattern="[!-~]+" size="28"; }
            @for action in ops::BULK_ACTIONS {
                button type="submit" name="action" value=(action) { (action) }
            }
            div #bulk-result {}
        }
    }
}

/// The bulk actions a run in `state` takes, space-separated.
fn takes(state: &str) -> String {
    ops::BULK_ACTIONS
        .into_iter()
        .filter(|a| ops::takes_action(a, state))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `BASE/?workflow=&state=&cursor=` for the filters and a cursor.
fn page_link(base: &str, filters: &RunsQuery, cursor: Option<&str>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    if let Some(w) = filters.workflow.as_deref().filter(|w| !w.is_empty()) {
        query.append_pair("workflow", w);
    }
    if let Some(s) = filters.state.as_deref().filter(|s| !s.is_empty()) {
        query.append_pair("state", s);
    }
    if let Some(c) = cursor {
        query.append_pair("cursor", c);
    }
    let query = query.finish();
    if query.is_empty() {
        format!("{base}/")
    } else {
        format!("{base}/?{query}")
    }
}

/// `BASE/runs/RUN[/ACTION]`, the run id percent-encoded as a path segment
/// by the `url` crate (an id comes from the service).
pub(super) fn run_link(base: &str, run: &str, action: Option<&str>) -> String {
    let mut url = match url::Url::parse("http://console.invalid/") {
        Ok(u) => u,
        Err(_) => return format!("{base}/"),
    };
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.clear().push("runs").push(run).extend(action);
    }
    format!("{base}{}", url.path())
}

/// A standing's colour (an SVG square: the content security policy
/// allows no inline style) and name.
fn swatch(standing: Standing) -> Markup {
    html! {
        span.key {
            svg width="12" height="12" viewBox="0 0 12 12" aria-hidden="true" {
                rect width="12" height="12" rx="2" fill=(standing.colour()) stroke="#5b6577" {}
            }
            " " (standing.as_str())
        }
    }
}

/// Box size and spacing of the drawn steps, in SVG user units.
const NODE_WIDTH: u32 = 260;
const NODE_HEIGHT: u32 = 46;
const NODE_GAP: u32 = 30;
const MARGIN: u32 = 10;

/// The visited steps drawn top to bottom as an SVG, each box coloured by
/// where the run stands at it ([`timeline::standings`]: class
/// `standing-<name>`, `data-step` its name, `data-status` the standing),
/// joined by arrows in the order the run took them.
fn visited_graph(inspection: &api::Inspection) -> Markup {
    let standings = timeline::standings(inspection);
    let n = u32::try_from(inspection.steps.len()).unwrap_or(u32::MAX / 100);
    let height = MARGIN * 2 + n * NODE_HEIGHT + n.saturating_sub(1) * NODE_GAP;
    let width = NODE_WIDTH + MARGIN * 2;
    html! {
        svg.graph xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
            viewBox={ "0 0 " (width) " " (height) } role="img" aria-label="the steps this run visited" {
            defs {
                marker #arrow viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto" {
                    path d="M0,0 L10,5 L0,10 z" {}
                }
            }
            @for (i, (step, (_, standing))) in inspection.steps.iter().zip(&standings).enumerate() {
                @let i = u32::try_from(i).unwrap_or(0);
                @let y = MARGIN + i * (NODE_HEIGHT + NODE_GAP);
                @if i > 0 {
                    line.edge x1=(MARGIN + NODE_WIDTH / 2) y1=(y - NODE_GAP) x2=(MARGIN + NODE_WIDTH / 2) y2=(y) marker-end="url(#arrow)" {}
                }
                g class="step" data-step=(step.name) data-status=(standing.as_str()) {
                    title { (step.name) " (" (step.kind) "): " (standing.as_str()) }
                    rect x=(MARGIN) y=(y) width=(NODE_WIDTH) height=(NODE_HEIGHT) rx="6" fill=(standing.colour()) {}
                    text x=(MARGIN + 10) y=(y + 19) { (step.name) }
                    text.sub x=(MARGIN + 10) y=(y + 37) {
                        (step.kind)
                        @if let Some(e) = &step.effect { " · effect " (e) }
                        " · " (standing.as_str())
                        @if let Some(took) = timeline::step_seconds(step) { " · " (timeline::duration(took)) }
                    }
                }
            }
        }
    }
}

/// The whole workflow of `data` drawn by `coordinatorctl graph`'s SVG
/// renderer, coloured by the run; `None` when the layout failed. The SVG
/// is the renderer's (its texts are the compiled project's names, written
/// escaped by it), without its XML declaration, inline in the page.
fn workflow_graph(data: &ExplainData, inspection: &api::Inspection) -> Option<Markup> {
    let svg = graph::svg(data, &RunView::of(inspection)).ok()?;
    let start = svg.find("<svg")?;
    // The renderer's inline `<style>` (its label font) would break the
    // console's content security policy (`style-src 'self'`): it is left
    // out, and console.css sets the labels' font.
    let mut svg = svg[start..].to_owned();
    while let Some(open) = svg.find("<style") {
        let Some(close) = svg[open..].find("</style>") else {
            break;
        };
        svg.replace_range(open..open + close + "</style>".len(), "");
    }
    Some(html! { div.graph.whole { (PreEscaped(svg)) } })
}

/// The run's timeline as a table that reads without the drawing: per
/// visited step when it started and ended and how long it took, its wait
/// (due, how it ended) and its answers; the caption weighs the time waited
/// against the run's deadline ([`timeline::summary`]).
fn timeline_table(i: &api::Inspection) -> Markup {
    html! {
        section #timeline {
            h3 { "Timeline" }
            table.timeline {
                caption #timeline-summary { (timeline::summary(i)) }
                thead { tr {
                    th scope="col" { "step" } th scope="col" { "started" } th scope="col" { "ended" }
                    th scope="col" { "took" } th scope="col" { "wait" } th scope="col" { "answers" }
                } }
                tbody {
                    @for step in &i.steps {
                        tr data-step=(step.name) {
                            th scope="row" { (step.name) " " span.kind { "(" (step.kind) ")" } }
                            td.started { (optional(&step.started_at)) }
                            td.ended { (optional(&step.ended_at)) }
                            td.took { @match timeline::step_seconds(step) {
                                Some(t) => (timeline::duration(t)),
                                None => span.none { "—" },
                            } }
                            td.wait {
                                @match timeline::wait_line(step) {
                                    Some(w) => (w),
                                    None => span.none { "—" },
                                }
                                @for m in timeline::moves_at(&i.status.moves, &step.name) {
                                    div.moved { (timeline::move_line(m)) }
                                }
                            }
                            td.answers {
                                @if step.answers.is_empty() { span.none { "—" } }
                                @else { ol { @for a in &step.answers {
                                    li data-kind=(a.kind) { (timeline::answer_line(a)) }
                                } } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The project of `projects` that draws the run of `s`: the one of its
/// workflow at the revision it is on, else at a revision it moved from
/// (the moved wait is drawn under either name, [`RunView::of`]).
fn project_of<'p>(projects: &'p [ExplainData], s: &api::RunStatus) -> Option<&'p ExplainData> {
    let of_workflow = || projects.iter().filter(|p| p.workflow == s.workflow);
    of_workflow()
        .find(|p| p.revision == s.revision)
        .or_else(|| of_workflow().find(|p| s.moves.iter().any(|m| m.from_revision == p.revision)))
}

/// The run's moves to another revision, oldest first: when, from which
/// revision and wait step to which, and the certificate's digest, each in
/// full (`#moves`, one row per move with `data-from-step` and
/// `data-to-step`); nothing for a run that never moved.
fn moves_table(s: &api::RunStatus) -> Markup {
    html! {
        @if !s.moves.is_empty() {
            section #moves {
                h3 { "Moves" }
                table.moves {
                    thead { tr {
                        th scope="col" { "at" } th scope="col" { "from" } th scope="col" { "to" }
                        th scope="col" { "certificate" }
                    } }
                    tbody {
                        @for m in &s.moves {
                            tr data-from-step=(m.from_step) data-to-step=(m.to_step) {
                                td.at { (m.at) }
                                td.from { code { (m.from_revision) } " " (m.from_step) }
                                td.to { code { (m.to_revision) } " " (m.to_step) }
                                td.certificate { code { (m.certificate) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn optional(value: &Option<String>) -> Markup {
    html! { @match value { Some(v) => (v), None => span.none { "—" } } }
}

/// The Run page: status, the drawn steps, each step's facts, and the
/// recovery actions (each asks for the investigation reference).
pub(super) fn run(
    base: &str,
    secret: &str,
    id: &str,
    inspection: &Fetched<api::Inspection>,
    projects: &[ExplainData],
) -> Markup {
    let body = html! {
        h2 { "Run " code { (id) } }
        @if let Some(f) = failure("inspect", inspection) { (f) }
        @if let Fetched::Answer(i) = inspection {
            @let s = &i.status;
            div.columns {
                section #status {
                    h3 { "Status" }
                    dl {
                        dt { "state" } dd #run-state { (state_badge(&s.state)) }
                        dt { "workflow" } dd { (s.workflow) }
                        dt { "revision" } dd { code { (s.revision) }
                            @if !s.moves.is_empty() { " " a href="#moves" { "moved " (s.moves.len()) "×" } } }
                        dt { "admitted" } dd { (s.admitted_at) }
                        dt { "deadline" } dd { (s.deadline_at) }
                        dt { "ended" } dd { (optional(&s.ended_at)) }
                        dt { "outcome" } dd { (optional(&s.outcome)) }
                        dt { "failure" } dd { (optional(&s.failure)) }
                        dt { "failure path" } dd { @match &s.failure_path { Some(p) => code { (p) }, None => span.none { "—" } } }
                        @if let Some(c) = &s.refusal_code { dt { "refusal code" } dd { code { (c) } } }
                        @if let Some(r) = &s.review { dt { "restore review" } dd { (r) } }
                        @if s.payload_erased { dt { "payloads" } dd { "erased by retention" } }
                    }
                }
                section #graph {
                    @let whole = project_of(projects, s).and_then(|p| workflow_graph(p, i));
                    @if let Some(drawn) = whole {
                        h3 { "Workflow" }
                        (drawn)
                    } @else {
                        h3 { "Steps taken" }
                        (visited_graph(i))
                        p.hint { "Start the console with " code { "--project DIR" } " (the project of "
                            (s.workflow) " at this revision) to draw the whole workflow." }
                    }
                    p.legend {
                        @for m in Standing::ALL { (swatch(m)) " " }
                    }
                }
            }
            section #steps {
                h3 { "Steps" }
                table.steps {
                    thead { tr { th { "step" } th { "kind" } th { "effect" } th { "attempts" } th { "due" } th { "observations" } th { "standing" } } }
                    tbody {
                        @for (step, (_, standing)) in i.steps.iter().zip(timeline::standings(i)) {
                            tr data-step=(step.name) {
                                td { (step.name) @if step.restored { " " span.restored { "restored" } } }
                                td { (step.kind) }
                                td { (optional(&step.effect)) }
                                td { @match step.attempts { Some(a) => (a), None => span.none { "—" } } }
                                td { (optional(&step.due_at)) }
                                td { @match step.observations { Some(o) => (o), None => span.none { "—" } } }
                                td { (swatch(standing)) }
                            }
                        }
                    }
                }
            }
            (timeline_table(i))
            (moves_table(s))
            @if ENDED.contains(&s.state.as_str()) {
                section #actions {
                    h3 { "Recovery" }
                    p { "The run has ended: there is nothing to reconcile, retry or cancel." }
                }
            } @else {
            section #actions {
                h3 { "Recovery" }
                p { "Each action is audited with an investigation reference (no personal data)." }
                @for (action, what) in [
                    ("reconcile", "ask the product for its receipt of the held call"),
                    ("retry-same", "resend the held call with its original command and key"),
                    ("cancel", "cancel the run (its onCancel path where one exists)"),
                ] {
                    form.action id={ "action-" (action) } data-endpoint=(run_link(base, id, Some(action))) {
                        button type="submit" { (action) }
                        " "
                        input name="reason" placeholder="investigation reference" required maxlength="256" pattern="[!-~]+" size="28";
                        " " span.what { (what) }
                    }
                }
                div #action-result role="status" {}
            }
            }
        }
    };
    let title = format!("Run {id}");
    let refresh =
        matches!(inspection, Fetched::Answer(i) if !ENDED.contains(&i.status.state.as_str()));
    layout(base, &title, Nav::Run, refresh, Some(secret), body)
}

/// One of seed 000's restore steps with what the doctor shows of it.
struct RestoreStep {
    text: &'static str,
    state: &'static str,
}

fn restore_steps(d: &api::Doctor) -> Vec<RestoreStep> {
    let h = &d.holds;
    let reviewed = d.state.review_required == Some(0);
    let settled = d.state.uncertain == Some(0);
    let placed = h.restore || h.restore_epoch > 0;
    let step = |text, state| RestoreStep { text, state };
    vec![
        step(
            "Stop or fence the old service and its workers; restore the database, keys, journal and packages; apply",
            "operator",
        ),
        step(
            "Start the maintenance instance (coordinator --recovery-only)",
            if d.recovery_only { "this instance" } else { "not this instance" },
        ),
        step(
            "restore-hold --reason REF",
            if h.restore { "placed" } else if placed { "was placed" } else { "not placed" },
        ),
        step(
            "Review every held run: list --attention true, inspect, reconcile",
            match (reviewed, settled) {
                (true, true) => "nothing held",
                (true, false) => "reviewed; unknown effects remain",
                _ => "reviews required",
            },
        ),
        step(
            "complete-execution-recovery (when retained evidence establishes the rest)",
            if h.execution_recovery_completed { "attested" } else { "not attested" },
        ),
        step(
            "release-restore-hold --reason REF",
            if h.restore { "held" } else if placed { "released" } else { "no hold" },
        ),
        step(
            "Start the ordinary coordinator; retry-same or cancel what is in attention",
            if d.recovery_only { "not yet" } else { "this instance" },
        ),
        step(
            "release-admission-hold (once every spent start key is established)",
            if h.admission { "held" } else { "admitting" },
        ),
    ]
}

fn yes_no(v: bool) -> &'static str {
    if v {
        "yes"
    } else {
        "no"
    }
}

fn count(v: Option<u64>) -> Markup {
    html! { @match v { Some(n) => (n), None => span.none { "unknown" } } }
}

/// The Deployment page: `doctor`, the holds and the restore steps.
pub(super) fn deployment(base: &str, doctor: &Fetched<api::Doctor>) -> Markup {
    let body = html! {
        h2 { "Deployment" }
        @if let Some(f) = failure("doctor", doctor) { (f) }
        @if let Fetched::Answer(d) = doctor {
            div.columns {
                section #doctor {
                    h3 { "Doctor" }
                    dl {
                        dt { "version" } dd { (d.version.package) " (source " (d.version.source_revision) ")" }
                        dt { "activation ready" } dd {
                            @match d.activation_ready {
                                Some(ready) => (yes_no(ready)),
                                None => span.none { "unknown" },
                            }
                        }
                        dt { "recovery-only instance" } dd { (yes_no(d.recovery_only)) }
                        dt { "audit journal" } dd { (yes_no(d.state.audit_ready)) }
                        dt { "store" } dd { (yes_no(d.state.store_ready)) }
                        dt { "live runs" } dd { (count(d.state.live)) }
                        dt { "in attention" } dd { (count(d.state.attention)) }
                        dt { "unknown effects" } dd { (count(d.state.uncertain)) }
                        dt { "restore reviews required" } dd { (count(d.state.review_required)) }
                    }
                }
                section #holds {
                    h3 { "Holds" }
                    dl {
                        dt { "restore hold" } dd { (yes_no(d.holds.restore)) }
                        dt { "admission hold" } dd { (yes_no(d.holds.admission)) }
                        dt { "execution recovery attested" } dd { (yes_no(d.holds.execution_recovery_completed)) }
                        dt { "restore epoch" } dd { (d.holds.restore_epoch) }
                    }
                }
            }
            section #restore {
                h3 { "Restore from a backup (seed 000)" }
                ol.restore {
                    @for s in restore_steps(d) {
                        li { span.text { (s.text) } " " span.step-state { (s.state) } }
                    }
                }
                p { "The steps run with " code { "coordinatorctl" } " (docs/operations.md \"Restore from a backup, step by step\")." }
            }
        }
    };
    layout(base, "Deployment", Nav::Deployment, true, None, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run of `w` waiting at `due-b` of revision B since it moved from
    /// `due` of revision A, as the service inspects it (`moves` listed).
    fn moved_run() -> api::Inspection {
        serde_json::from_value(json!({
            "status": {
                "run": "r1", "workflow": "w", "revision": format!("sha256:{}", "b".repeat(64)),
                "state": "running", "admittedAt": "2026-01-01T00:00:00Z",
                "deadlineAt": "2026-01-02T00:00:00Z", "endedAt": null, "outcome": null,
                "output": null, "failure": null, "failurePath": null,
                "moves": [{
                    "at": "2026-01-01T00:05:00Z",
                    "fromRevision": format!("sha256:{}", "a".repeat(64)),
                    "toRevision": format!("sha256:{}", "b".repeat(64)),
                    "fromStep": "due", "toStep": "due-b",
                    "certificate": format!("sha256:{}", "c".repeat(64))
                }]
            },
            "steps": [
                {"name": "read", "kind": "call", "effect": "accepted", "attempts": 1,
                 "dueAt": null, "observations": null,
                 "startedAt": "2026-01-01T00:00:00Z", "endedAt": "2026-01-01T00:00:01Z"},
                {"name": "due", "kind": "wait-until", "effect": null, "attempts": null,
                 "dueAt": null, "observations": null, "startedAt": "2026-01-01T00:00:01Z",
                 "waitDueAt": "2026-01-01T06:00:00Z"}
            ]
        }))
        .expect("an inspection")
    }

    #[test]
    fn the_run_page_shows_a_move_in_the_timeline_and_in_full() {
        let mut inspection = moved_run();
        let page = run("/s/x", "x", "r1", &Fetched::Answer(inspection.clone()), &[]).into_string();
        let moves = page.split("<section id=\"moves\">").nth(1).expect("#moves");
        for full in ["a", "b", "c"].map(|c| format!("sha256:{}", c.repeat(64))) {
            assert!(moves.contains(&full), "{full} in\n{moves}");
        }
        assert!(
            moves.contains("data-from-step=\"due\" data-to-step=\"due-b\""),
            "{moves}"
        );
        let wait = page
            .split("<tr data-step=\"due\">")
            .nth(2)
            .expect("the timeline's row of the wait");
        let cell = wait.split("</td></tr>").next().unwrap_or_default();
        assert!(
            cell.contains("<div class=\"moved\">moved 00:05:00 from sha256:aaaaaaaaaaaa… due to sha256:bbbbbbbbbbbb… due-b"),
            "{cell}"
        );
        assert!(page.contains("href=\"#moves\">moved 1×</a>"), "{page}");
        // A run that never moved has neither.
        inspection.status.moves.clear();
        let page = run("/s/x", "x", "r1", &Fetched::Answer(inspection), &[]).into_string();
        assert!(!page.contains("id=\"moves\"") && !page.contains("class=\"moved\""));
    }
}
