//! `coordinatorctl console` (issue 15) against the built `coordinator` on
//! PostgreSQL 17, driven in headless Chromium through ChromeDriver
//! (WebDriver, `fantoccini`): a run held in `attention` on an `unknown`
//! effect is listed first, its page draws the unknown step, `reconcile`
//! with a reason settles it against Messaging's receipt and the page shows
//! it finished. On the Runs page a running run is selected and cancelled
//! in bulk, after the confirmation, with its summary. A run that waited
//! and retried shows its timeline (a table and the labelled drawing, the
//! untaken branch faint). A waiting run moved to another revision shows
//! its move (in the status, the timeline, **Moves** and the drawing). The
//! guard refuses a request without the secret, with a
//! foreign `Host`, and a cross-origin or header-less change (403).
//!
//! Screenshots of the three pages, of the timeline and of a moved run are
//! written to
//! `target/console-screenshots/` (and to `docs/console/` with
//! `UPDATE_SCREENSHOTS=1`).
//!
//! Tools: `chromium` and `chromedriver` (Debian's `chromium` and
//! `chromium-driver`, installed by scripts/test.sh): missing, the test
//! skips after a notice, and fails under `CI=true`.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordinator_fakes::Reply;
use coordinator_testkit::tools;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::support::{free_port, rfc3339, unix_now, urls, Deployment, OPERATOR};

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `coordinatorctl console`; its printed URL (with the secret).
fn start_console(base: &str, token_file: &Path, project: &Path) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"))
        .args(["console", "--url", base, "--token-file"])
        .arg(token_file)
        .arg("--project")
        .arg(project)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let guard = Killed(child);
    let mut first = String::new();
    BufReader::new(stdout).read_line(&mut first).unwrap();
    let url = first
        .strip_prefix("console: ")
        .unwrap_or_else(|| panic!("no console URL in {first:?}"))
        .trim()
        .to_owned();
    (guard, url)
}

/// ChromeDriver on a free port, and a headless Chromium session on it.
async fn browser(chromedriver: &str) -> (Killed, Client) {
    let port = free_port();
    let driver = Killed(
        Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", "--window-size=1280,900"
        ]}),
    );
    let start = Instant::now();
    loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => return (driver, client),
            Err(e) => {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "no WebDriver session: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Waits until `css` matches an element whose text holds `text`.
async fn wait_text(client: &Client, css: &str, text: &str) {
    let start = Instant::now();
    loop {
        if let Ok(e) = client.find(Locator::Css(css)).await {
            if e.text().await.unwrap_or_default().contains(text) {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{css} never showed {text:?}: {}",
            client.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Saves a screenshot of the page under `target/console-screenshots/`
/// (and `docs/console/` with `UPDATE_SCREENSHOTS=1`).
async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs = vec![root.join("target/console-screenshots")];
    if std::env::var("UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        dirs.push(root.join("docs/console"));
    }
    for dir in dirs {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    }
}

/// The timeline of a run that waited (a `sendAfter` two seconds ahead)
/// and retried (Messaging answered 503 once): the Run page's table lists
/// each step's times, the wait's due time and end and both answers, the
/// drawing fades the branch the run did not take; screenshot `timeline`.
async fn timeline_journey(
    d: &Deployment,
    c: &crate::support::Coordinator,
    client: &Client,
    base: &str,
) {
    let run = d.start(c, "app-timeline", &rfc3339(unix_now() + 2)).await;
    d.wait_state(c, &run, "finished", Duration::from_secs(30))
        .await;
    assert_eq!(
        d.messaging.fake().requests_to("/v1/messages").len(),
        4,
        "the timeline run's message was sent twice (503, then accepted)"
    );
    client.goto(&format!("{base}/runs/{run}")).await.unwrap();
    wait_text(client, "#run-state", "finished").await;
    wait_text(client, "#timeline tr[data-step='due'] td.wait", "woke").await;
    let answers = client
        .find_all(Locator::Css(
            "#timeline tr[data-step='notify'] td.answers li",
        ))
        .await
        .unwrap();
    let mut kinds = Vec::new();
    for a in &answers {
        kinds.push(a.attr("data-kind").await.unwrap().unwrap_or_default());
    }
    assert_eq!(kinds, ["retryable", "success"], "the notify step's answers");
    let first = answers[0].text().await.unwrap();
    assert!(first.starts_with("#1 retryable http-503 at "), "{first}");
    for step in [
        "due",
        "read-application",
        "permission",
        "notify",
        "accepted",
    ] {
        let row = client
            .find(Locator::Css(&format!("#timeline tr[data-step='{step}']")))
            .await
            .unwrap();
        let started = row
            .find(Locator::Css("td.started"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let ended = row
            .find(Locator::Css("td.ended"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            started.ends_with('Z') && ended.ends_with('Z'),
            "{step}: {started} / {ended}"
        );
        assert!(
            started <= ended,
            "{step} ends before it starts: {started} / {ended}"
        );
    }
    wait_text(client, "#timeline-summary", "of the deadline").await;
    let faint = client
        .find(Locator::Css("#graph svg [data-step='skipped']"))
        .await
        .unwrap();
    assert_eq!(
        faint.attr("data-taken").await.unwrap().as_deref(),
        Some("false"),
        "the branch the run did not take is faint"
    );
    let notify = client
        .find(Locator::Css("#graph svg [data-step='notify']"))
        .await
        .unwrap();
    assert_eq!(notify.attr("data-taken").await.unwrap(), None);
    let drawing = client.find(Locator::Css("#graph svg")).await.unwrap();
    assert!(
        drawing
            .html(true)
            .await
            .unwrap()
            .contains(">#2 success at "),
        "the drawing labels the step with its answers"
    );
    client
        .execute(
            "document.getElementById('timeline').scrollIntoView();",
            vec![],
        )
        .await
        .unwrap();
    screenshot(client, "timeline").await;
}

/// A run waiting an hour at `due` of revision A is moved to revision B (a
/// shorter `deadlineSeconds`) the way docs/operations.md "Moving waiting
/// runs" orders it: B applied, the service restarted on B's package (on
/// `c`'s port, so the console keeps its `--url`), then on the Moves page
/// the run counted on A, the certificate `plan_move` writes read from its
/// path with its wait movable, and the run moved (once: a second move is
/// skipped with the service's code); screenshot `moves`. The Run page
/// then shows B as the run's revision with a link to its moves, the move
/// in the wait's timeline row and in **Moves** in full, and the drawing
/// labels the wait with it; screenshot `run-moved`. Returns the service
/// now serving B.
async fn moved_journey(
    d: &Deployment,
    mut c: crate::support::Coordinator,
    client: &Client,
    base: &str,
) -> crate::support::Coordinator {
    let run = d.start(&c, "app-moved", &rfc3339(unix_now() + 3600)).await;
    let scratch = tempfile::tempdir().unwrap();
    let a = d.example.compile(scratch.path());
    assert_eq!(a.revision, d.revision);
    let b_example = d.example.clone().with_deadline_seconds(2_592_000 - 60);
    let b_dir = scratch.path().join("b");
    let b = b_example.compile(&b_dir);
    assert_ne!(b.revision, a.revision, "B is another revision");
    let b_root = scratch.path().join("package-b");
    let b_digest = coordinator_runtime::package::write_package(&b_root, &b).unwrap();
    let port: u16 = c.base.rsplit(':').next().unwrap().parse().unwrap();
    let a_text = std::fs::read_to_string(d.runtime_file(port)).unwrap();
    let b_text = a_text
        .replace(&d.package.0, &b_root.display().to_string())
        .replace(&d.package.1, &b_digest);
    assert_ne!(b_text, a_text);
    let b_file = scratch.path().join("runtime-b.yaml");
    std::fs::write(&b_file, b_text).unwrap();
    d.apply_file(&b_file).await.expect("apply B");
    let status = c.terminate(Duration::from_secs(15)).await;
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", c.log_text());
    drop(c);
    let c = d.spawn_with(&b_file, port, &[]).await;

    let b_project = coordinator_compiler::compile_project(&b_dir.join("source"), "b");
    let plan = coordinator_compiler::moves::plan_move(
        &a.program,
        &b_project,
        &Default::default(),
        &Default::default(),
    )
    .expect("a plan");
    let certificate = serde_json::to_value(&plan.certificate).unwrap();
    let digest = certificate["digest"].as_str().unwrap().to_owned();
    let certificate_file = scratch.path().join("move-certificate.json");
    std::fs::write(&certificate_file, certificate.to_string()).unwrap();

    // The Moves page: the running run counted on A, the certificate read
    // from its path, its wait movable, the listed run moved.
    client.goto(&format!("{base}/moves")).await.unwrap();
    wait_text(
        client,
        &format!("#by-revision tr[data-revision='{}'] td.count", a.revision),
        "1",
    )
    .await;
    let form = client
        .find(Locator::Css("#certificate-path"))
        .await
        .unwrap();
    form.find(Locator::Css("input[name=path]"))
        .await
        .unwrap()
        .send_keys(&certificate_file.display().to_string())
        .await
        .unwrap();
    form.find(Locator::Css("button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_text(client, "#movable-waits", "1 of 1").await;
    let due = client
        .find(Locator::Css("#certificate tr[data-wait='due']"))
        .await
        .unwrap();
    assert_eq!(
        due.attr("data-movable").await.unwrap().as_deref(),
        Some("true")
    );
    wait_text(client, "#move-runs", "1 running run(s)").await;
    let move_form = client.find(Locator::Css("#move")).await.unwrap();
    move_form
        .find(Locator::Css("input[name=reason]"))
        .await
        .unwrap()
        .send_keys("ticket-34")
        .await
        .unwrap();
    screenshot(client, "moves").await;
    move_form
        .find(Locator::Css("button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let asked = Instant::now();
    while client.accept_alert().await.is_err() {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "no confirmation asked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_text(client, "#move-result", "moved: 1").await;
    let moved = d.get(&c, &format!("/v1/runs/{run}")).await.unwrap();
    assert_eq!(moved["revision"], b.revision.as_str(), "{moved}");
    // Moved once: the same move again is refused by the service, counted
    // as skipped with its code.
    client
        .find(Locator::Css("#move button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let asked = Instant::now();
    while client.accept_alert().await.is_err() {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "no confirmation asked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_text(client, "#move-result", "skipped coordinator.move.").await;

    client.goto(&format!("{base}/runs/{run}")).await.unwrap();
    wait_text(client, "#run-state", "running").await;
    wait_text(client, "#status a[href='#moves']", "moved 1×").await;
    let row = client
        .find(Locator::Css("#moves tr[data-from-step='due']"))
        .await
        .unwrap();
    assert_eq!(
        row.attr("data-to-step").await.unwrap().as_deref(),
        Some("due")
    );
    let text = row.text().await.unwrap();
    for full in [&a.revision, &b.revision, &digest] {
        assert!(text.contains(full.as_str()), "{full} not in {text}");
    }
    wait_text(
        client,
        "#timeline tr[data-step='due'] td.wait .moved",
        "moved ",
    )
    .await;
    wait_text(client, "#timeline-summary", "moved 1 time, last at").await;
    let drawing = client.find(Locator::Css("#graph svg")).await.unwrap();
    assert!(
        drawing.html(true).await.unwrap().contains(">moved "),
        "the drawing labels the wait with its move"
    );
    client
        .execute("document.getElementById('moves').scrollIntoView();", vec![])
        .await
        .unwrap();
    screenshot(client, "run-moved").await;
    c
}

fn owner_only(path: &PathBuf, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test]
async fn the_console_lists_draws_and_reconciles_a_held_run_in_chromium() {
    const TEST: &str = "the_console_lists_draws_and_reconciles_a_held_run_in_chromium";
    let Some(urls) = urls(TEST) else {
        return;
    };
    let (Some(_), Some(chromedriver)) = (
        tools::program(TEST, "chromium"),
        tools::program(TEST, "chromedriver"),
    ) else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    // Messaging sends the message, then drops the connection: the effect
    // happened and the coordinator cannot know (`unknown`, attention).
    // The third message (the timeline run's first attempt) is answered
    // 503: it is sent again after its backoff.
    d.messaging.fake().script(
        "/v1/messages",
        [Reply::ResetAfterEffect, Reply::Normal, Reply::Retryable],
    );
    let c = d.spawn().await;
    let held = d.start(&c, "app-held", &rfc3339(unix_now() - 60)).await;
    d.wait_state(&c, &held, "attention", Duration::from_secs(30))
        .await;
    // Newer runs: one finished, one waiting an hour.
    let finished = d.start(&c, "app-done", &rfc3339(unix_now() - 60)).await;
    d.wait_state(&c, &finished, "finished", Duration::from_secs(30))
        .await;
    d.start(&c, "app-later", &rfc3339(unix_now() + 3600)).await;
    assert_eq!(d.messaging.fake().requests_to("/v1/messages").len(), 2);

    let token_file = d.dir.path().join("operator.token");
    owner_only(&token_file, &d.token(OPERATOR));
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/delayed-follow-up");
    let (_console, url) = start_console(&c.base, &token_file, &project);
    let origin = url.split("/s/").next().unwrap().to_owned();
    let host = origin.strip_prefix("http://").unwrap().to_owned();
    let secret = url
        .split("/s/")
        .nth(1)
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    assert_eq!(secret.len(), 64, "{url}");
    let base = format!("{origin}/s/{secret}");

    // The guard, from outside the browser.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(
        status(http.get(&origin).send().await.unwrap()),
        403,
        "no secret"
    );
    assert_eq!(
        status(
            http.get(format!("{origin}/s/{}/", "0".repeat(64)))
                .send()
                .await
                .unwrap()
        ),
        403,
        "a wrong secret"
    );
    assert_eq!(
        status(
            http.get(format!("{origin}/runs/{held}"))
                .send()
                .await
                .unwrap()
        ),
        403,
        "a page without the secret"
    );
    let port = host.split(':').nth(1).unwrap();
    assert_eq!(
        status(
            http.get(&url)
                .header("host", format!("evil.example:{port}"))
                .send()
                .await
                .unwrap()
        ),
        403,
        "a foreign Host (DNS rebinding)"
    );
    let page = http.get(&url).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(
        page.headers().get("set-cookie").is_none(),
        "no cookie: it would reach every port"
    );
    assert!(page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("default-src 'none'"));
    let page = page.text().await.unwrap();
    assert!(
        !page.contains(&d.token(OPERATOR)[..20]),
        "the page holds the token"
    );
    let run_page = http
        .get(format!("{base}/runs/{held}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(run_page.contains("<svg"), "the Run page draws the workflow");
    assert!(
        !run_page.contains("<style"),
        "an inline style would break the page's own content security policy"
    );
    let missing = http
        .get(format!("{base}/runs/no-such-run"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        missing.status().as_u16(),
        404,
        "an unknown run's page has the problem's status"
    );
    let cancel = format!("{base}/runs/{held}/cancel");
    let body = json!({"reason": "ticket-7"}).to_string();
    for (why, req) in [
        (
            "a change without the secret header",
            http.post(&cancel).header("origin", &origin),
        ),
        (
            "a cross-origin change",
            http.post(&cancel)
                .header("x-console-secret", &secret)
                .header("origin", "http://evil.example"),
        ),
        (
            "a change without an Origin",
            http.post(&cancel).header("x-console-secret", &secret),
        ),
        (
            "a change without the secret in its path",
            http.post(format!("{origin}/runs/{held}/cancel"))
                .header("x-console-secret", &secret)
                .header("origin", &origin),
        ),
    ] {
        assert_eq!(
            status(req.body(body.clone()).send().await.unwrap()),
            403,
            "{why}"
        );
    }
    let st = d.get(&c, &format!("/v1/runs/{held}")).await.unwrap();
    assert_eq!(
        st["state"], "attention",
        "a refused change changed the run: {st}"
    );
    // Through the guard, a refusal is the service's problem document.
    let bad = http
        .post(format!("{base}/runs/no-such-run/reconcile"))
        .header("x-console-secret", &secret)
        .header("origin", &origin)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 404);
    let problem: Value = serde_json::from_str(&bad.text().await.unwrap()).unwrap();
    assert_eq!(problem["code"], "run.not-found", "{problem}");

    // The operator's journey in Chromium.
    let (_driver, client) = browser(&chromedriver).await;
    client.goto(&url).await.unwrap();
    wait_text(&client, "h2", "Needs attention").await;
    let first_row = client
        .find(Locator::Css("#attention table.runs tbody tr"))
        .await
        .unwrap();
    assert_eq!(
        first_row.attr("data-run").await.unwrap().as_deref(),
        Some(held.as_str())
    );
    assert_eq!(
        client
            .find_all(Locator::Css("#all table.runs tbody tr"))
            .await
            .unwrap()
            .len(),
        3,
        "every run is listed under Runs"
    );
    screenshot(&client, "runs").await;

    client
        .find(Locator::Css(&format!(
            "#attention a[href='/s/{secret}/runs/{held}']"
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_text(&client, "#run-state", "attention").await;
    // The whole workflow is drawn (--project), the unknown step marked.
    let drawn = client
        .find_all(Locator::Css("#graph svg [data-step]"))
        .await
        .unwrap();
    let explain = coordinator_compiler::compile_project(&project, "p")
        .explain_data
        .unwrap();
    assert_eq!(
        drawn.len(),
        explain.steps.len(),
        "every step of the workflow is drawn"
    );
    let unknown = client
        .find(Locator::Css("#graph svg [data-status='unknown-effect']"))
        .await
        .unwrap();
    assert_eq!(
        unknown.attr("data-step").await.unwrap().as_deref(),
        Some("notify")
    );
    screenshot(&client, "run").await;

    let form = client
        .find(Locator::Css("#action-reconcile"))
        .await
        .unwrap();
    form.find(Locator::Css("input[name=reason]"))
        .await
        .unwrap()
        .send_keys("ticket-7")
        .await
        .unwrap();
    form.find(Locator::Css("button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_text(&client, "#run-state", "finished").await;
    assert!(
        client
            .find(Locator::Css("#graph svg [data-status='unknown-effect']"))
            .await
            .is_err(),
        "the settled step is still drawn unknown"
    );
    assert!(
        client
            .find(Locator::Css("#action-reconcile"))
            .await
            .is_err(),
        "an ended run offers no action"
    );
    let notify = client
        .find(Locator::Css("#graph svg [data-step='notify']"))
        .await
        .unwrap();
    assert_eq!(
        notify.attr("data-status").await.unwrap().as_deref(),
        Some("done")
    );
    let st = d.get(&c, &format!("/v1/runs/{held}")).await.unwrap();
    assert_eq!(st["state"], "finished", "{st}");
    assert_eq!(
        d.messaging.fake().requests_to("/v1/messages").len(),
        2,
        "reconcile read the receipt; nothing was sent again"
    );

    // Bulk: the running run selected on the Runs page filtered by state,
    // cancelled after the confirmation, the summary shown.
    let later = d.get(&c, "/v1/runs?state=running").await.unwrap()["runs"][0]["run"]
        .as_str()
        .unwrap()
        .to_owned();
    client
        .goto(&format!("{base}/?state=running"))
        .await
        .unwrap();
    wait_text(&client, "#bulk-selected", "0 selected").await;
    let pick = client
        .find(Locator::Css(&format!("#all input.pick[value='{later}']")))
        .await
        .unwrap();
    assert_eq!(
        pick.attr("data-takes").await.unwrap().as_deref(),
        Some("cancel"),
        "a running run takes cancel only"
    );
    pick.click().await.unwrap();
    wait_text(&client, "#bulk-selected", "1 selected").await;
    let bulk = client.find(Locator::Css("#bulk")).await.unwrap();
    bulk.find(Locator::Css("input[name=reason]"))
        .await
        .unwrap()
        .send_keys("ticket-8")
        .await
        .unwrap();
    screenshot(&client, "runs-bulk").await;
    bulk.find(Locator::Css("button[value=cancel]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let asked = Instant::now();
    while client.accept_alert().await.is_err() {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "no confirmation asked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_text(&client, "#bulk-result", "done: 1").await;
    let st = d.get(&c, &format!("/v1/runs/{later}")).await.unwrap();
    assert_eq!(st["state"], "cancelled", "{st}");
    // "Every run matching this filter": listed with the actions each
    // takes; an empty filter is refused, as `--filter` refuses it.
    let matching = |query: &str| http.get(format!("{base}/matching{query}")).send();
    let empty = matching("").await.unwrap();
    assert_eq!(empty.status().as_u16(), 400);
    let problem: Value = serde_json::from_str(&empty.text().await.unwrap()).unwrap();
    assert_eq!(problem["code"], "bulk.filter-empty", "{problem}");
    let ended: Value = serde_json::from_str(
        &matching("?state=cancelled")
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(ended, json!({"runs": [{"run": later, "takes": []}]}));
    timeline_journey(&d, &c, &client, &base).await;
    let c = moved_journey(&d, c, &client, &base).await;

    client.goto(&format!("{base}/deployment")).await.unwrap();
    wait_text(&client, "#doctor", "activation ready").await;
    wait_text(&client, "#restore", "restore-hold").await;
    screenshot(&client, "deployment").await;
    client.close().await.unwrap();
    drop(c);
    d.cleanup().await;
}
