//! `coordinatorctl graph --project D [--format svg|dot|mermaid] [--output FILE]
//! [--run RUN --url URL --token-file PATH]`: draws the workflow (docs/graph.md).
//!
//! Drawn from explain's data ([`ExplainData`], what `explain --format
//! json` carries as `ir`), never from the compiler's internals: every step
//! a node (its kind and, for a call, the alias, host operation, product,
//! effect and recovery; a finish with its outcome), every edge labelled
//! (`next`, each case label, `onDeclaredRefusal`, `onTimeout`, `onCancel`),
//! in the data's order, so the same project gives the same bytes. SVG is
//! laid out in-process by `layout-rs`; DOT and Mermaid are text for other
//! renderers. With `--run`, the nodes are coloured by the run's `inspect`
//! (fetched as `inspect` fetches it) and carry its timeline
//! ([`RunView`]): the steps and edges the run did not take are faint.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use coordinator_compiler::explain_data::{ExplainData, StepData, StepKind};

use super::timeline::{RunView, Standing};
use crate::codes;
use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE};

/// The drawing's format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum GraphFormat {
    /// SVG, laid out in-process (open it in a browser).
    #[default]
    Svg,
    /// Graphviz DOT text.
    Dot,
    /// Mermaid flowchart text (renders in GitHub and most docs sites).
    Mermaid,
}

/// Arguments of `graph`.
#[derive(Args, Debug)]
pub struct GraphArgs {
    /// The project directory (holding workflow.yaml).
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
    /// The drawing's format.
    #[arg(long, value_enum, default_value_t)]
    pub format: GraphFormat,
    /// The file to write (`-`, the default: standard output). An existing
    /// path that is not a regular file is refused, never replaced.
    #[arg(long, value_name = "FILE", default_value = "-")]
    pub output: PathBuf,
    /// Colour the nodes by this run's `inspect` (needs --url and --token-file).
    #[arg(long, value_name = "ID", requires_all = ["url", "token_file"],
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub run: Option<String>,
    /// The service's base URL (with --run).
    #[arg(long, value_name = "URL", requires = "run")]
    pub url: Option<String>,
    /// A file holding the access token, owner-only (with --run).
    #[arg(long = "token-file", value_name = "PATH", requires = "run")]
    pub token_file: Option<PathBuf>,
}

/// A node's label lines: the step name, then what it does.
pub fn node_lines(step: &StepData) -> Vec<String> {
    let mut lines = vec![step.id.clone()];
    match step.kind {
        StepKind::Call => {
            if let Some(c) = &step.call {
                lines.push(format!("call {}", c.alias));
                lines.push(c.host_operation.clone());
                lines.push(format!(
                    "{} {}, recovery {}",
                    c.product, c.effect, c.recovery
                ));
            }
        }
        StepKind::Choose => {
            if let Some(c) = &step.choose {
                lines.push(format!("choose by {}()", c.function));
            }
        }
        StepKind::WaitUntil => lines.push("wait until".into()),
        StepKind::WaitFor => {
            if let Some(w) = &step.wait_for {
                lines.push(format!("wait for {} of {}", w.completion, w.step));
                lines.push(format!("timeout {}s", w.timeout_seconds));
            }
        }
        StepKind::Finish => {
            if let Some(f) = &step.finish {
                lines.push(format!("finish {}", f.outcome));
            }
        }
    }
    lines
}

/// DOT's quoted string.
fn dot_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A step's label lines under `run`: [`node_lines`], then the run's
/// timeline of it.
fn label_lines(step: &StepData, run: &RunView) -> Vec<String> {
    let mut lines = node_lines(step);
    lines.extend(run.details(&step.id).iter().cloned());
    lines
}

/// The grey of what a run did not take, in DOT.
const FAINT_DOT: &str = ", color=\"gray75\", fontcolor=\"gray60\"";

/// The opacity of what a run did not take, in SVG and Mermaid.
const FAINT_OPACITY: &str = "0.35";

/// The graph as Graphviz DOT text; under a run, its summary is the graph's
/// label and what it did not take is grey.
pub fn dot(data: &ExplainData, run: &RunView) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", dot_quote(&data.workflow));
    let _ = writeln!(out, "  rankdir=TB;");
    if let Some(summary) = &run.summary {
        let _ = writeln!(out, "  label={}; labelloc=t;", dot_quote(summary));
    }
    let _ = writeln!(
        out,
        "  node [fontname=\"Helvetica\", fontsize=11, shape=box];"
    );
    let _ = writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=10];");
    for step in &data.steps {
        let (shape, mut styles) = match step.kind {
            StepKind::Call => ("box", vec![]),
            StepKind::Choose => ("diamond", vec![]),
            StepKind::WaitUntil | StepKind::WaitFor => ("box", vec!["dashed"]),
            StepKind::Finish => ("box", vec!["rounded"]),
        };
        let standing = run.standing(&step.id);
        if standing.is_some() {
            styles.insert(0, "filled");
        }
        let mut attrs = format!(
            "label={}, shape={shape}",
            dot_quote(&label_lines(step, run).join("\n"))
        );
        if !styles.is_empty() {
            let _ = write!(attrs, ", style=\"{}\"", styles.join(","));
        }
        if let Some(s) = standing {
            let _ = write!(
                attrs,
                ", fillcolor=\"{}\", tooltip={}",
                s.colour(),
                dot_quote(s.as_str())
            );
        }
        if run.faint_step(&step.id) {
            attrs.push_str(FAINT_DOT);
        }
        let _ = writeln!(out, "  {} [{attrs}];", dot_quote(&step.id));
    }
    for step in &data.steps {
        for e in &step.successors {
            let faint = if run.faint_edge(&step.id, &e.to) {
                FAINT_DOT
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {} -> {} [label={}{faint}];",
                dot_quote(&step.id),
                dot_quote(&e.to),
                dot_quote(&e.label)
            );
        }
    }
    out.push_str("}\n");
    out
}

/// A Mermaid node id: `step_` and the name with `-` as `_` (names hold
/// only `a-z`, `0-9` and `-`, so this is one to one, and never a Mermaid
/// keyword such as `end`).
fn mermaid_id(step: &str) -> String {
    let mut id = String::from("step_");
    for c in step.chars() {
        id.push(if c.is_ascii_alphanumeric() { c } else { '_' });
    }
    id
}

/// Mermaid's quoted label text.
fn mermaid_text(text: &str) -> String {
    text.replace('&', "#amp;")
        .replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

/// The graph as a Mermaid flowchart.
pub fn mermaid(data: &ExplainData, run: &RunView) -> String {
    let mut out = String::new();
    if let Some(summary) = &run.summary {
        // A JSON string is a YAML double-quoted scalar (the front matter).
        let title = serde_json::Value::String(mermaid_text(summary)).to_string();
        let _ = writeln!(out, "---\ntitle: {title}\n---");
    }
    out.push_str("flowchart TD\n");
    for step in &data.steps {
        let label = label_lines(step, run)
            .iter()
            .map(|l| mermaid_text(l))
            .collect::<Vec<_>>()
            .join("<br/>");
        let (open, close) = match step.kind {
            StepKind::Call => ("[\"", "\"]"),
            StepKind::Choose => ("{\"", "\"}"),
            StepKind::WaitUntil | StepKind::WaitFor => ("[/\"", "\"/]"),
            StepKind::Finish => ("([\"", "\"])"),
        };
        let _ = writeln!(out, "  {}{open}{label}{close}", mermaid_id(&step.id));
    }
    // Mermaid numbers links in the order written, from 0.
    let mut faint_links = Vec::new();
    let mut link = 0usize;
    for step in &data.steps {
        for e in &step.successors {
            if run.faint_edge(&step.id, &e.to) {
                faint_links.push(link.to_string());
            }
            link += 1;
            let _ = writeln!(
                out,
                "  {} -->|{}| {}",
                mermaid_id(&step.id),
                mermaid_text(&e.label),
                mermaid_id(&e.to)
            );
        }
    }
    for s in Standing::ALL {
        let ids: Vec<String> = data
            .steps
            .iter()
            .filter(|step| run.standing(&step.id) == Some(s))
            .map(|step| mermaid_id(&step.id))
            .collect();
        if !ids.is_empty() {
            let class = s.as_str().replace('-', "_");
            let _ = writeln!(out, "  classDef {class} fill:{}", s.colour());
            let _ = writeln!(out, "  class {} {class}", ids.join(","));
        }
    }
    let faint: Vec<String> = data
        .steps
        .iter()
        .filter(|step| run.faint_step(&step.id))
        .map(|step| mermaid_id(&step.id))
        .collect();
    if !faint.is_empty() {
        let _ = writeln!(out, "  classDef untaken opacity:{FAINT_OPACITY}");
        let _ = writeln!(out, "  class {} untaken", faint.join(","));
    }
    if !faint_links.is_empty() {
        let _ = writeln!(
            out,
            "  linkStyle {} opacity:{FAINT_OPACITY}",
            faint_links.join(",")
        );
    }
    out
}

/// An XML attribute value.
fn xml_attr(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The font size of every label (one size: `layout-rs` keeps its font
/// classes in a hash map, so one class keeps the bytes the same).
const FONT_SIZE: usize = 13;

/// A node's box for its label lines: about 0.6 em a character (the
/// crate's own estimate is a whole em, which draws boxes twice too wide).
fn node_size(lines: &[String]) -> (f64, f64) {
    let widest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(1);
    let font = FONT_SIZE as f64;
    (
        widest as f64 * font * 0.6 + 24.0,
        (lines.len() + 1) as f64 * font + 8.0,
    )
}

/// The graph as SVG, laid out by `layout-rs`. Each step is a
/// `<g class="step" data-step=... data-kind=...>` and each edge a
/// `<g class="edge" data-from=... data-to=... data-label=...>`; the labels
/// are `<text>`. `Err` when the layout failed (it never should for a
/// checked workflow, whose graph has no cycle).
pub fn svg(data: &ExplainData, run: &RunView) -> Result<String, String> {
    use layout::backends::svg::SVGWriter;
    use layout::core::base::Orientation;
    use layout::core::color::Color;
    use layout::core::geometry::Point;
    use layout::core::style::StyleAttr;
    use layout::std_shapes::shapes::{Arrow, Element, ShapeKind};
    use layout::topo::layout::VisualGraph;

    let orientation = Orientation::TopToBottom;
    let mut graph = VisualGraph::new(orientation);
    let mut handles = Vec::new();
    for step in &data.steps {
        let lines = label_lines(step, run);
        let shape = ShapeKind::new_box(&lines.join("\n"));
        let standing = run.standing(&step.id);
        let fill = standing.map_or("white", Standing::colour);
        let rounded = match step.kind {
            StepKind::Finish => 12,
            StepKind::Call | StepKind::Choose | StepKind::WaitUntil | StepKind::WaitFor => 0,
        };
        let look = StyleAttr::new(
            Color::fast("black"),
            if step.kind == StepKind::Choose { 3 } else { 1 },
            Color::from_name(fill),
            rounded,
            FONT_SIZE,
        );
        let size = node_size(&lines);
        let mut props = format!(
            "class=\"step\" data-step=\"{}\" data-kind=\"{}\"",
            xml_attr(&step.id),
            step.kind.as_str()
        );
        if let Some(s) = standing {
            let _ = write!(props, " data-status=\"{}\"", s.as_str());
        }
        if run.faint_step(&step.id) {
            let _ = write!(props, " data-taken=\"false\" opacity=\"{FAINT_OPACITY}\"");
        }
        let (width, height) = size;
        let node = Element::create_with_properties(
            shape,
            look,
            orientation,
            Point::new(width, height),
            props,
        );
        handles.push((step.id.as_str(), graph.add_node(node)));
    }
    let handle = |name: &str| handles.iter().find(|(n, _)| *n == name).map(|(_, h)| *h);
    for step in &data.steps {
        for e in &step.successors {
            let (Some(from), Some(to)) = (handle(&step.id), handle(&e.to)) else {
                return Err(format!(
                    "the edge {} -> {} names a step the data does not hold",
                    step.id, e.to
                ));
            };
            let mut props = format!(
                "class=\"edge\" data-from=\"{}\" data-to=\"{}\" data-label=\"{}\"",
                xml_attr(&step.id),
                xml_attr(&e.to),
                xml_attr(&e.label)
            );
            if run.faint_edge(&step.id, &e.to) {
                let _ = write!(props, " data-taken=\"false\" opacity=\"{FAINT_OPACITY}\"");
            }
            let mut arrow = Arrow::simple_with_properties(&e.label, props);
            arrow.look.font_size = FONT_SIZE;
            arrow.look.line_width = 1;
            graph.add_edge(arrow, from, to);
        }
    }
    // `layout-rs` asserts its invariants; a checked workflow never breaks
    // them, and should one ever, the command reports it instead of
    // panicking (and the hook's message is kept off the terminal).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let mut writer = SVGWriter::new();
        graph.do_it(false, false, false, &mut writer);
        let bottom = graph
            .iter_nodes()
            .map(|n| graph.pos(n).bbox(false).1.y)
            .fold(0.0, f64::max);
        (writer.finalize(), bottom)
    }));
    std::panic::set_hook(hook);
    let (text, bottom) = drawn.map_err(|_| "the layout failed".to_owned())?;
    let text = fade_labels(&text);
    let mut text = match &run.summary {
        None => fit_height(&text, bottom + 10.0),
        Some(summary) => with_summary(&fit_height(&text, bottom + 90.0), summary, bottom + 14.0),
    };
    text.push('\n');
    Ok(text)
}

/// `svg` with the label of each faint step faint too: the crate's writer
/// puts a node's `<text>` just after the node's `<g>` (which carries the
/// properties), so the first `<text` after a `data-taken="false"` group's
/// `</g>` gains the group's opacity.
fn fade_labels(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len() + 64);
    let mut rest = svg;
    while let Some(at) = rest.find("data-taken=\"false\"") {
        let Some(text) = rest[at..]
            .find("</g>")
            .and_then(|close| rest[at + close..].find("<text").map(|t| at + close + t))
        else {
            break;
        };
        out.push_str(&rest[..text]);
        let _ = write!(out, "<text opacity=\"{FAINT_OPACITY}\"");
        rest = &rest[text + "<text".len()..];
    }
    out.push_str(rest);
    out
}

/// `svg` with the run's summary from `y` down, under the drawing
/// (`<text class="run-summary">`), one line a part of it (the run, when
/// admitted, the deadline, the time waited: the canvas is as narrow as
/// the drawing).
fn with_summary(svg: &str, summary: &str, y: f64) -> String {
    let parts = summary
        .replacen(": ", "\n", 1)
        .replace("; ", "\n")
        .replace(", ", "\n");
    let mut line = format!(
        "<text class=\"run-summary\" x=\"10\" y=\"{y}\" font-family=\"Helvetica\" font-size=\"{FONT_SIZE}\">"
    );
    for part in parts.lines() {
        let _ = write!(
            line,
            "<tspan x=\"10\" dy=\"1.2em\">{}</tspan>",
            xml_attr(part)
        );
    }
    line.push_str("</text>\n");
    match svg.rfind("</svg>") {
        Some(end) => format!("{}{line}{}", &svg[..end], &svg[end..]),
        None => svg.to_owned(),
    }
}

/// The SVG with its height cut to `height` when it is taller: the
/// crate's writer grows the canvas downwards by ten pixels a character of
/// every label (as if text ran down the page), which leaves a long empty
/// space under the drawing. Only the first `height` and the viewBox's
/// height change; a text of another shape is returned as it is.
fn fit_height(svg: &str, height: f64) -> String {
    let Some(open) = svg.find("<svg ") else {
        return svg.to_owned();
    };
    let Some(end) = svg.get(open..).and_then(|t| t.find('>')).map(|e| open + e) else {
        return svg.to_owned();
    };
    let Some(tag) = svg.get(open..end) else {
        return svg.to_owned();
    };
    let attr = |name: &str| -> Option<String> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag.get(start..)?.split('"').next()?.to_owned())
    };
    let (Some(h_text), Some(v_text)) = (attr("height"), attr("viewBox")) else {
        return svg.to_owned();
    };
    let Ok(h) = h_text.parse::<f64>() else {
        return svg.to_owned();
    };
    if h <= height {
        return svg.to_owned();
    }
    let mut view: Vec<&str> = v_text.split(' ').collect();
    if view.len() != 4 || view.get(3) != Some(&h_text.as_str()) {
        return svg.to_owned();
    }
    let new_h = format!("{height}");
    view[3] = &new_h;
    let tag = tag
        .replacen(
            &format!(" height=\"{h_text}\""),
            &format!(" height=\"{new_h}\""),
            1,
        )
        .replacen(
            &format!(" viewBox=\"{v_text}\""),
            &format!(" viewBox=\"{}\"", view.join(" ")),
            1,
        );
    format!("{}{tag}{}", &svg[..open], &svg[end..])
}

/// Runs `graph`; returns the exit code.
pub fn run(args: GraphArgs) -> u8 {
    let display = args.project.to_string_lossy().into_owned();
    let compiled = coordinator_compiler::compile_project(&args.project, &display);
    let code = report::exit_code(&compiled.diagnostics);
    report::print_diagnostics(&compiled.diagnostics);
    let Some(data) = compiled.explain_data.filter(|_| code == EXIT_OK) else {
        return if code == EXIT_OK { EXIT_REFUSED } else { code };
    };
    let view = match (&args.run, &args.url, &args.token_file) {
        (Some(run), Some(url), Some(token_file)) => match run_view(&data, run, url, token_file) {
            Ok(v) => v,
            Err(exit) => return exit,
        },
        _ => RunView::default(),
    };
    let text = match args.format {
        GraphFormat::Dot => dot(&data, &view),
        GraphFormat::Mermaid => mermaid(&data, &view),
        GraphFormat::Svg => match svg(&data, &view) {
            Ok(t) => t,
            Err(why) => {
                errln!(
                    "error[{code}] {display}\n  cannot lay out the graph: {why}\n  next: Draw it with --format dot or --format mermaid, and report this with the project attached.\n1 error, 0 warnings in 1 file", code = codes::GRAPH_LAYOUT);
                return EXIT_REFUSED;
            }
        },
    };
    write_output(&args.output, &text)
}

/// What `--run` draws: the inspection fetched as `inspect` fetches it; a
/// run of another workflow is refused, one of another revision warned about.
fn run_view(data: &ExplainData, run: &str, url: &str, token_file: &Path) -> Result<RunView, u8> {
    let inspection = crate::service_client::fetch_inspection("graph", run, url, token_file)?;
    if inspection.status.workflow != data.workflow {
        errln!(
            "error[{code}] run {run}\n  the run is of workflow {}, and the project is {}\n  next: Pass the project of the run's workflow, or a run of this workflow.",
            inspection.status.workflow,
            data.workflow, code = codes::GRAPH_RUN_WORKFLOW);
        return Err(EXIT_REFUSED);
    }
    if inspection.status.revision != data.revision {
        errln!(
            "warning[{code}] run {run}\n  the run is on revision {} (admitted or moved there), and the project compiles to {}; steps may have changed since\n  next: Draw the run with the project as it was at its revision (the package it was deployed from).",
            inspection.status.revision,
            data.revision, code = codes::GRAPH_RUN_REVISION);
    }
    Ok(RunView::of(&inspection))
}

/// Writes the drawing to `output` (`-`: standard output) whole, through
/// the one writer of `types` (an existing path that is not a regular file
/// is refused).
fn write_output(output: &Path, text: &str) -> u8 {
    if output.as_os_str() == "-" {
        out!("{text}");
        return EXIT_OK;
    }
    match super::types::write_whole(output, text) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            errln!(
                "error[{code}] {}\n  cannot write the graph: {e}; nothing was written\n  next: Check that the directory exists, is writable and has room, or write to standard output with --output -.\n1 error, 0 warnings in 1 file",
                output.display(), code = codes::GRAPH_WRITE);
            EXIT_UNAVAILABLE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordinator_api as api;
    use serde_json::json;

    /// A running run, admitted 2026-01-01T00:00:00Z with a day's deadline,
    /// that visited `steps`.
    fn running(steps: serde_json::Value) -> api::Inspection {
        serde_json::from_value(json!({
            "status": {
                "run": "r1", "workflow": "follow-up", "revision": "sha256:00", "state": "running",
                "admittedAt": "2026-01-01T00:00:00Z", "deadlineAt": "2026-01-02T00:00:00Z",
                "endedAt": null, "outcome": null, "output": null, "failure": null,
                "failurePath": null
            },
            "steps": steps
        }))
        .expect("an inspection")
    }

    fn step(name: &str, kind: &str) -> serde_json::Value {
        json!({"name": name, "kind": kind, "effect": null, "attempts": null,
               "dueAt": null, "observations": null})
    }

    #[test]
    fn a_run_labels_its_steps_with_the_timeline_and_fades_what_it_did_not_take() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayed-follow-up");
        let data = coordinator_compiler::compile_project(&dir, "delayed-follow-up")
            .explain_data
            .expect("the example compiles");
        let mut due = step("due", "wait-until");
        due["startedAt"] = json!("2026-01-01T00:00:00Z");
        due["endedAt"] = json!("2026-01-01T00:10:00Z");
        due["waitDueAt"] = json!("2026-01-01T00:10:00Z");
        due["waitEnded"] = json!("woke");
        let mut read = step("read-application", "call");
        read["startedAt"] = json!("2026-01-01T00:10:00Z");
        read["answers"] = json!([
            {"at": "2026-01-01T00:10:01Z", "attempt": 1, "kind": "retryable", "code": "http-503"}
        ]);
        let view = RunView::of(&running(json!([due, read])));
        let text = dot(&data, &view);
        assert!(
            text.contains("\\n00:00:00 to 00:10:00 (10m 0s)\\ndue 00:10:00, woke\""),
            "{text}"
        );
        assert!(
            text.contains("\\nsince 00:10:00\\n#1 retryable http-503 at 00:10:01\""),
            "{text}"
        );
        assert!(text.contains("label=\"run r1: admitted"), "{text}");
        assert!(
            text.contains("\"due\" -> \"read-application\" [label=\"next\"];"),
            "{text}"
        );
        assert!(
            text.contains("\"permission\" -> \"notify\" [label=\"send\", color=\"gray75\""),
            "{text}"
        );
        let text = mermaid(&data, &view);
        assert!(text.starts_with("---\ntitle: \"run r1: admitted"), "{text}");
        assert!(
            text.contains(
                "  class step_permission,step_notify,step_skipped,step_accepted untaken\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  linkStyle 1,2,3,4 opacity:0.35\n"),
            "{text}"
        );
        let text = svg(&data, &view).expect("laid out");
        let (steps, edges) = (
            text.matches("class=\"step\"").count(),
            text.matches("class=\"edge\"").count(),
        );
        assert_eq!(
            text.matches("data-taken=\"false\"").count(),
            (steps - 2) + (edges - 1),
            "two steps and one edge taken, the rest faint: {text}"
        );
        assert!(text.contains("<text class=\"run-summary\""), "{text}");
        assert_eq!(
            text.matches("<text opacity=\"0.35\"").count(),
            (steps - 2) + (edges - 1),
            "each faint step's and edge's label is faint: {text}"
        );
        assert!(
            text.contains(">#1 retryable http-503 at 00:10:01</tspan>"),
            "{text}"
        );
    }

    #[test]
    fn a_run_colours_the_steps_it_visited_in_every_format() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/governed-action");
        let data = coordinator_compiler::compile_project(&dir, "governed-action")
            .explain_data
            .expect("the example compiles");
        let colours = vec![
            ("read-application".to_owned(), Standing::Done),
            ("check-readiness".to_owned(), Standing::Done),
            ("grant-permit".to_owned(), Standing::UnknownEffect),
        ];
        let colours = RunView {
            standings: colours,
            ..RunView::default()
        };
        let text = dot(&data, &colours);
        assert!(text.contains(
            "\"grant-permit\" [label=\"grant-permit\\ncall permits-grant\\nbreg.invoke-action/v1\\nbreg mutation, recovery same-command\", shape=box, style=\"filled\", fillcolor=\"#ffb74d\", tooltip=\"unknown-effect\"];"
        ), "{text}");
        assert!(text.contains("\"not-ready\" [label=\"not-ready\\nfinish application-not-ready\", shape=box, style=\"rounded\"];"));
        let text = mermaid(&data, &colours);
        assert!(text.contains("  classDef done fill:#c8e6c9\n  class step_read_application,step_check_readiness done\n"), "{text}");
        assert!(text.contains("  class step_grant_permit unknown_effect\n"));
        let text = svg(&data, &colours).expect("laid out");
        assert!(text.contains(
            "data-step=\"grant-permit\" data-kind=\"call\" data-status=\"unknown-effect\""
        ));
        assert_eq!(text.matches("data-status=").count(), 3);
        assert_eq!(text.matches("fill=\"#ffb74dff\"").count(), 1);
    }

    #[test]
    fn the_canvas_ends_under_the_drawing() {
        let svg =
            "<?xml?><svg width=\"20\" height=\"900\" viewBox=\"0 0 20 900\" x=\"1\">\n<g/></svg>";
        assert_eq!(
            fit_height(svg, 80.5),
            "<?xml?><svg width=\"20\" height=\"80.5\" viewBox=\"0 0 20 80.5\" x=\"1\">\n<g/></svg>"
        );
        assert_eq!(fit_height(svg, 1000.0), svg, "never taller");
        assert_eq!(fit_height("<svg>", 10.0), "<svg>");
    }
}
