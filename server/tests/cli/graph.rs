//! `coordinatorctl graph` through the real binary: the DOT and Mermaid text
//! of every example is a golden file under `tests/cli/graphs/`, and so are
//! the steps and labelled edges read back from its SVG (every step a node,
//! every edge one path with its label drawn); the same project gives the
//! same bytes; `--output` is written whole and never replaces a link,
//! directory or device. `UPDATE_GRAPHS=1` rewrites the golden files.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ctl;
use crate::explain::examples;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn graph(dir: &Path, format: &str) -> String {
    let project = dir.to_str().expect("UTF-8 path");
    let out = ctl(
        &root(),
        &["graph", "--project", project, "--format", format],
    );
    assert!(
        out.status.success(),
        "{project} {format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli/graphs")
        .join(name);
    if std::env::var_os("UPDATE_GRAPHS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("graphs/");
        std::fs::write(&path, actual).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing; run with UPDATE_GRAPHS=1", path.display()));
    assert_eq!(expected, actual, "{name}: run with UPDATE_GRAPHS=1");
}

/// The value of attribute `name` in the tag text `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag.get(start..)?.find('"')?;
    tag.get(start..start + len)
}

/// The steps and edges of an SVG drawn by `graph`, as text: the `<g>`
/// elements of class `step` and `edge`, each edge with a drawn path, and
/// every drawn text line.
fn read_svg(svg: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut steps = Vec::new();
    let mut edges = Vec::new();
    for piece in svg.split("<g ").skip(1) {
        let tag = format!(" {}", piece.split('>').next().expect("tag"));
        match attr(&tag, "class") {
            Some("step") => {
                let step = attr(&tag, "data-step").expect("data-step");
                let kind = attr(&tag, "data-kind").expect("data-kind");
                assert!(piece.contains("<rect "), "{step} is drawn");
                steps.push(format!("{step} ({kind})"));
            }
            Some("edge") => {
                let from = attr(&tag, "data-from").expect("data-from");
                let to = attr(&tag, "data-to").expect("data-to");
                let label = attr(&tag, "data-label").expect("data-label");
                assert!(piece.contains("<path "), "{from} -> {to} is drawn");
                edges.push(format!("{from} -> {to} [{label}]"));
            }
            _ => {}
        }
    }
    let texts = svg
        .split("<tspan ")
        .skip(1)
        .filter_map(|t| t.split_once('>')?.1.split_once("</tspan>").map(|x| x.0))
        .map(str::to_owned)
        .collect();
    (steps, edges, texts)
}

#[test]
fn graph_of_every_example_matches_its_golden_files() {
    for dir in examples() {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_owned();
        golden(&format!("{name}.dot"), &graph(&dir, "dot"));
        golden(&format!("{name}.mmd"), &graph(&dir, "mermaid"));

        let svg = graph(&dir, "svg");
        assert_eq!(svg, graph(&dir, "svg"), "{name}: the SVG is deterministic");
        assert!(svg.contains("<svg ") && svg.trim_end().ends_with("</svg>"));
        let (steps, edges, texts) = read_svg(&svg);
        let mut summary = format!("nodes {}\n", steps.len());
        for s in &steps {
            summary.push_str(&format!("  {s}\n"));
        }
        summary.push_str(&format!("edges {}\n", edges.len()));
        for e in &edges {
            summary.push_str(&format!("  {e}\n"));
        }
        golden(&format!("{name}.svg.txt"), &summary);

        // The drawing shows what explain's data holds: every step named,
        // every edge drawn with its label.
        let out = ctl(
            &root(),
            &[
                "explain",
                "--project",
                dir.to_str().expect("path"),
                "--format",
                "json",
            ],
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let ir_steps = report["ir"]["steps"].as_array().expect("steps");
        assert_eq!(steps.len(), ir_steps.len(), "{name}: nodes");
        let ir_edges: usize = ir_steps
            .iter()
            .map(|s| s["successors"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(edges.len(), ir_edges, "{name}: edges");
        for s in ir_steps {
            let id = s["id"].as_str().expect("id");
            assert!(texts.iter().any(|t| t == id), "{name}: {id} is written");
            for e in s["successors"].as_array().expect("successors") {
                let label = e["label"].as_str().expect("label");
                assert!(
                    texts.iter().any(|t| t == label),
                    "{name}: {label} is written"
                );
            }
        }
    }
}

#[test]
fn graph_writes_output_whole_and_never_replaces_what_is_not_a_file() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let project = root().join("examples/delayed-follow-up");
    let project = project.to_str().expect("path");
    let file = tmp.path().join("g.svg");
    let out = ctl(
        tmp.path(),
        &["graph", "--project", project, "--output", "g.svg"],
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let default_stdout = ctl(tmp.path(), &["graph", "--project", project]).stdout;
    assert_eq!(std::fs::read(&file).expect("written"), default_stdout);
    let dash = ctl(
        tmp.path(),
        &[
            "graph",
            "--project",
            project,
            "--output",
            "-",
            "--format",
            "svg",
        ],
    );
    assert_eq!(dash.stdout, default_stdout, "`-` is standard output");

    std::os::unix::fs::symlink(tmp.path().join("target.dot"), tmp.path().join("link.dot"))
        .expect("link");
    std::fs::create_dir(tmp.path().join("dir.dot")).expect("dir");
    for refused in ["link.dot", "dir.dot", "/dev/null"] {
        let out = ctl(
            tmp.path(),
            &[
                "graph",
                "--project",
                project,
                "--format",
                "dot",
                "--output",
                refused,
            ],
        );
        assert_eq!(out.status.code(), Some(3), "{refused}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error[coordinator.graph.write]"), "{err}");
    }
    assert!(tmp.path().join("link.dot").is_symlink());
    assert!(!tmp.path().join("target.dot").exists());
    assert!(tmp.path().join("dir.dot").is_dir());
}

#[test]
fn graph_refuses_a_project_that_does_not_compile_and_a_run_without_a_service() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = ctl(tmp.path(), &["graph", "--project", "missing"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("coordinator.file.unreadable"));

    let project = root().join("examples/delayed-follow-up");
    let project = project.to_str().expect("path");
    // --run needs --url and --token-file (a usage error)...
    let out = ctl(tmp.path(), &["graph", "--project", project, "--run", "r1"]);
    assert_eq!(out.status.code(), Some(2));
    // ...and they are checked as `inspect` checks them.
    let out = ctl(
        tmp.path(),
        &[
            "graph",
            "--project",
            project,
            "--run",
            "r1",
            "--url",
            "ftp://example.org",
            "--token-file",
            "token",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--url must be an http(s) URL"));
    let out = ctl(
        tmp.path(),
        &[
            "graph",
            "--project",
            project,
            "--run",
            "r1",
            "--url",
            "http://127.0.0.1:9",
            "--token-file",
            "missing-token",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("coordinator.command.token-file-unreadable")
    );
    assert!(out.stdout.is_empty(), "nothing is drawn");
}
