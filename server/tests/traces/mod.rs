//! The traces journey (docs/operations.md "Traces"): the built binary
//! exports OpenTelemetry spans over OTLP/HTTP to a receiver inside the
//! test ([`receiver`]). A `delayed-follow-up` run, started with an inbound
//! `traceparent`, waits, is carried on by a second process after the first
//! is killed during the wait, calls BReg once and Messaging twice (the
//! first answer is a 503) and finishes; an operator then acts on it. Its
//! spans form one trace under the caller's span; and no attribute of any
//! span exported holds the run's input, the product's record, or a token.
//! Beside it: an event start joins its request's trace, and the variables'
//! faults refuse startup while no configuration means no trace at all.

mod receiver;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use coordinator_fakes::Reply;
use serde_json::json;
use sqlx::Connection;

use coordinator::events::sign;

use crate::support::{rfc3339, unix_now, urls, Deployment, Example, EVENT_KEY, PRODUCER};
use receiver::{Got, Receiver};

/// The caller's trace and span (W3C Trace Context's own example ids).
const INBOUND_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const INBOUND_SPAN: &str = "00f067aa0ba902b7";

/// OTLP's span kinds.
const SERVER: i32 = 2;
const CLIENT: i32 = 3;

/// Waits (up to 30 s) until the receiver holds a span `accepts` takes.
async fn received(r: &Receiver, what: &str, accepts: impl Fn(&Got) -> bool) {
    let start = Instant::now();
    while !r.spans().iter().any(&accepts) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no span {what} in 30 s: {:#?}",
            r.spans()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn one<'a>(spans: &'a [Got], what: &str, accepts: impl Fn(&Got) -> bool) -> &'a Got {
    let found: Vec<&Got> = spans.iter().filter(|s| accepts(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {found:#?}");
    found[0]
}

#[tokio::test]
async fn a_run_is_one_trace_across_processes_with_its_inbound_parent_and_no_secret() {
    let Some(urls) =
        urls("a_run_is_one_trace_across_processes_with_its_inbound_parent_and_no_secret")
    else {
        return;
    };
    let r = Receiver::start().await;
    let d = Deployment::new(urls, 2_000).await;
    // The first Messaging answer is a 503: the notice goes out on attempt 2.
    d.messaging
        .fake()
        .script("/v1/messages", [Reply::Retryable]);
    // Process A: traces from the standard variables alone.
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", r.base.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let port_a = crate::support::free_port();
    let a = d
        .spawn_env(&d.runtime_file(port_a), port_a, &[], &env)
        .await;
    assert!(
        a.log_text().contains("traces: exporting"),
        "{}",
        a.log_text()
    );
    let app = "app-trace-5d1c9e";
    // Long enough that process A is surely killed before the wake.
    let send_after = rfc3339(unix_now() + 10);
    d.record(app);
    let start_token = d.token(PRODUCER);
    let key = "trace-start-8e2f41";
    let answer = d
        .http
        .post(format!("{}/v1/runs", a.base))
        .bearer_auth(&start_token)
        .header("idempotency-key", key)
        .header(
            "traceparent",
            format!("00-{INBOUND_TRACE}-{INBOUND_SPAN}-01"),
        )
        .header("content-type", "application/json")
        .body(
            json!({"workflow": d.example.workflow, "revision": d.revision,
                "input": {"applicationId": app, "sendAfter": send_after}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    let run = serde_json::from_str::<serde_json::Value>(&answer.text().await.unwrap()).unwrap()
        ["run"]
        .as_str()
        .unwrap()
        .to_owned();
    // Exported as the run goes: the admission span arrives while the run
    // still waits, before any later span exists.
    received(&r, "coordinator.admission", |s| {
        s.name == "coordinator.admission" && s.attr("coordinator.run") == Some(run.as_str())
    })
    .await;
    let status = d.get(&a, &format!("/v1/runs/{run}")).await.unwrap();
    assert_eq!(status["state"], "running", "{status}");
    // Process A dies during the wait; process B, whose traces come from
    // the runtime file's `telemetry` section, carries the run on.
    assert!(
        !r.spans().iter().any(|s| s.name == "coordinator.attempt"),
        "process A called a product before the wake"
    );
    a.kill9();
    let port_b = crate::support::free_port();
    let file_b = d.runtime_file(port_b);
    let text = std::fs::read_to_string(&file_b).unwrap();
    let text = format!(
        "{text}\ntelemetry:\n  traces:\n    endpoint: {}/v1/traces\n",
        r.base
    );
    std::fs::write(&file_b, text).unwrap();
    let b = d
        .spawn_env(&file_b, port_b, &[], &[("OTEL_BSP_SCHEDULE_DELAY", "100")])
        .await;
    let done = d
        .wait_state(&b, &run, "finished", Duration::from_secs(40))
        .await;
    assert_eq!(done["outcome"], "message-accepted", "{done}");
    // An operator action on the ended run (a cancel of an ended run
    // changes nothing, and is traced all the same).
    let (code, answer) = d
        .operate(
            &b,
            &format!("/v1/runs/{run}/cancel"),
            json!({"reason": "trace-journey"}),
        )
        .await;
    assert_eq!(code, 200, "{answer}");
    received(&r, "of the last step", |s| {
        s.name == "coordinator.step" && s.attr("coordinator.step") == Some("accepted")
    })
    .await;
    received(&r, "of the cancel", |s| s.name == "coordinator.operator").await;
    assert_eq!(r.garbled(), 0);

    let spans = r.spans();
    check_tree(&spans, &run, &d);
    check_no_secret(&spans, &d, &[app, &send_after, key, &start_token]);
    drop(b);
    d.cleanup().await;
}

/// The run's spans: one trace under the inbound span, every span the
/// admission's child but the HTTP client spans (their attempt's), the
/// steps, the wait, the three attempts with their outcomes, and the
/// `traceparent` each product request carried.
fn check_tree(spans: &[Got], run: &str, d: &Deployment) {
    let admission = one(spans, "the admission span", |s| {
        s.name == "coordinator.admission"
    });
    assert_eq!(
        (
            admission.trace_id.as_str(),
            admission.parent_span_id.as_str(),
            admission.kind
        ),
        (INBOUND_TRACE, INBOUND_SPAN, SERVER),
        "{admission:#?}"
    );
    assert_eq!(admission.attr("coordinator.outcome"), Some("created"));
    assert_eq!(admission.attr("coordinator.workflow"), Some("follow-up"));
    assert_eq!(
        admission.attr("coordinator.revision"),
        Some(d.revision.as_str())
    );
    for s in spans {
        assert_eq!(s.trace_id, INBOUND_TRACE, "one trace: {s:#?}");
        assert!(s.start_nanos <= s.end_nanos, "{s:#?}");
    }
    let of_run: Vec<&Got> = spans
        .iter()
        .filter(|s| s.name != "coordinator.admission" && s.kind != CLIENT)
        .collect();
    for s in &of_run {
        assert_eq!(s.parent_span_id, admission.span_id, "{s:#?}");
        assert_eq!(s.attr("coordinator.run"), Some(run), "{s:#?}");
    }
    let steps: BTreeSet<&str> = of_run
        .iter()
        .filter(|s| s.name == "coordinator.step")
        .filter_map(|s| s.attr("coordinator.step"))
        .collect();
    let want: BTreeSet<&str> = [
        "due",
        "read-application",
        "permission",
        "notify",
        "accepted",
    ]
    .into();
    assert_eq!(steps, want);
    assert_eq!(
        of_run
            .iter()
            .filter(|s| s.name == "coordinator.step")
            .count(),
        5,
        "one span per step"
    );
    let wait = one(spans, "the wait", |s| s.name == "coordinator.wait");
    assert_eq!(wait.attr("coordinator.step"), Some("due"));
    assert_eq!(wait.attr("coordinator.wait_kind"), Some("wait-until"));
    let attempt = |step: &str, n: &str| {
        one(spans, &format!("attempt {n} of {step}"), |s| {
            s.name == "coordinator.attempt"
                && s.attr("coordinator.step") == Some(step)
                && s.attr("coordinator.attempt") == Some(n)
        })
    };
    let read = attempt("read-application", "1");
    let first = attempt("notify", "1");
    let second = attempt("notify", "2");
    assert_eq!(read.attr("coordinator.connection"), Some("applications"));
    assert_eq!(second.attr("coordinator.connection"), Some("notices"));
    assert_eq!(
        (
            read.attr("coordinator.outcome"),
            second.attr("coordinator.outcome")
        ),
        (Some("success"), Some("success"))
    );
    assert_eq!(first.attr("coordinator.outcome"), Some("retryable"));
    assert_eq!(first.attr("coordinator.problem_code"), Some("http-503"));
    assert!(
        wait.end_nanos <= read.start_nanos,
        "the wait ends before the call"
    );
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.name == "coordinator.attempt")
            .count(),
        3
    );
    // Each attempt has its HTTP client span beneath it, whose context the
    // product got as `traceparent`.
    let mut sent = Vec::new();
    for (a, failed) in [(read, false), (first, true), (second, false)] {
        let client = one(spans, "an attempt's client span", |s| {
            s.kind == CLIENT && s.parent_span_id == a.span_id
        });
        let status = client.attr("http.response.status_code").unwrap_or_default();
        assert_eq!(status == "503", failed, "{client:#?}");
        assert!(status.starts_with('2') || failed, "{client:#?}");
        assert!(client.attr("http.request.method").is_some(), "{client:#?}");
        assert_eq!(
            client.attr("server.address"),
            Some("127.0.0.1"),
            "{client:#?}"
        );
        assert!(client.attr("url.full").is_none() && client.attr("url.path").is_none());
        sent.push(format!("00-{INBOUND_TRACE}-{}-01", client.span_id));
    }
    let breg: Vec<String> = d
        .breg
        .fake()
        .requests()
        .iter()
        .filter_map(|q| q.header("traceparent").map(str::to_owned))
        .collect();
    let messaging: Vec<String> = d
        .messaging
        .fake()
        .requests_to("/v1/messages")
        .iter()
        .filter_map(|q| q.header("traceparent").map(str::to_owned))
        .collect();
    assert_eq!(breg, sent[..1].to_vec());
    assert_eq!(messaging, sent[1..].to_vec());
    let operator = one(spans, "the cancel", |s| s.name == "coordinator.operator");
    assert_eq!(operator.attr("coordinator.action"), Some("cancel"));
    assert_eq!(operator.attr("coordinator.state"), Some("finished"));
}

/// No attribute of any span (nor of its resource), no name and no status
/// holds one of `values` (the run's input, its start key and the caller's
/// token), the applicant's e-mail address the product returned and the
/// notice carried, or an access token any request to a product carried.
fn check_no_secret(spans: &[Got], d: &Deployment, values: &[&str]) {
    let mut secrets: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
    secrets.push("@example.org".to_owned());
    let requests = [d.breg.fake().requests(), d.messaging.fake().requests()].concat();
    for q in &requests {
        let auth = q.header("authorization").unwrap_or_default();
        let token = auth.trim_start_matches("Bearer ");
        assert!(
            token.len() > 20,
            "a product request without its token: {auth:?}"
        );
        secrets.push(token.to_owned());
    }
    // The run's input and the record did reach the products: the scan
    // looks for values that exist.
    assert!(requests
        .iter()
        .any(|q| String::from_utf8_lossy(&q.body).contains(values[0])));
    assert!(requests
        .iter()
        .any(|q| String::from_utf8_lossy(&q.body).contains("@example.org")));
    for s in spans {
        let texts = s
            .attributes
            .iter()
            .chain(s.resource.iter())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain([("name", s.name.as_str()), ("status", s.status.as_str())]);
        for (key, value) in texts {
            for secret in &secrets {
                assert!(
                    !value.contains(secret.as_str()),
                    "span {} {key} = {value:?} holds a run value or a token",
                    s.name
                );
            }
        }
    }
}

/// Variables that ask for traces the service cannot export refuse startup
/// by name (`deployment.refused`, reason
/// `coordinator.runtime.telemetry-export`), before anything is served;
/// without them, traces are off: no exporter, and a run stores no trace
/// context though its start carried a `traceparent`.
#[tokio::test]
async fn otlp_variables_naming_another_protocol_refuse_startup_and_none_means_off() {
    let Some(urls) =
        urls("otlp_variables_naming_another_protocol_refuse_startup_and_none_means_off")
    else {
        return;
    };
    let d = Deployment::new(urls, 2_000).await;
    let port = crate::support::free_port();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ];
    let mut c = d.launch_env(&d.runtime_file(port), port, &[], &env);
    let status = c.exited(Duration::from_secs(30)).await.expect("it exits");
    assert_eq!(status.code(), Some(1), "{}", c.log_text());
    let line = c
        .log_text()
        .lines()
        .find(|l| l.contains("\"deployment.refused\""))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no refusal: {}", c.log_text()));
    assert!(
        line.contains("\"reason\":\"coordinator.runtime.telemetry-export\"")
            && line.contains("OTEL_EXPORTER_OTLP_PROTOCOL"),
        "{line}"
    );
    let c = d.spawn().await;
    assert!(!c.log_text().contains("traces:"), "{}", c.log_text());
    d.record("app-off");
    let status = d
        .http
        .post(format!("{}/v1/runs", c.base))
        .bearer_auth(d.token(PRODUCER))
        .header("idempotency-key", "off-1")
        .header(
            "traceparent",
            format!("00-{INBOUND_TRACE}-{INBOUND_SPAN}-01"),
        )
        .header("content-type", "application/json")
        .body(
            json!({"workflow": d.example.workflow, "revision": d.revision,
                "input": {"applicationId": "app-off", "sendAfter": rfc3339(unix_now())}})
            .to_string(),
        )
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap();
    assert_eq!(status, 201);
    let mut admin = sqlx::PgConnection::connect(&d.urls.admin).await.unwrap();
    let stored: Vec<Option<String>> =
        sqlx::query_scalar(&format!("SELECT trace_parent FROM {}.runs", d.ns))
            .fetch_all(&mut admin)
            .await
            .unwrap();
    assert_eq!(stored, vec![None]);
    drop(c);
    d.cleanup().await;
}

/// A run started by a signed event joins the trace of the event request's
/// `traceparent`, and its call is traced beneath it.
#[tokio::test]
async fn a_signed_event_start_joins_the_caller_trace() {
    let Some(urls) = urls("a_signed_event_start_joins_the_caller_trace") else {
        return;
    };
    let r = Receiver::start().await;
    let d = Deployment::of(Example::event_follow_up(), urls, 2_000).await;
    d.record("app-ev7");
    let env = [
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            &*format!("{}/v1/traces", r.base),
        ),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let port = crate::support::free_port();
    let c = d.spawn_env(&d.runtime_file(port), port, &[], &env).await;
    let body = json!({
        "specversion": "1.0",
        "id": "evt-trace-1",
        "source": "https://breg.example.org/applications",
        "type": "breg.record.created/v1",
        "time": rfc3339(unix_now()),
        "data": {"recordId": "app-ev7"},
    })
    .to_string();
    let answer = d
        .http
        .post(format!(
            "{}/v1/events/event-follow-up/application-submitted",
            c.base
        ))
        .header("content-type", "application/json")
        .header(
            "registry-signature",
            sign(&EVENT_KEY, unix_now(), body.as_bytes()),
        )
        .header(
            "traceparent",
            format!("00-{INBOUND_TRACE}-{INBOUND_SPAN}-01"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    let run: serde_json::Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    let run = run["run"].as_str().unwrap().to_owned();
    d.wait_state(&c, &run, "finished", Duration::from_secs(30))
        .await;
    received(&r, "of the finish", |s| {
        s.name == "coordinator.step" && s.attr("coordinator.step") == Some("done")
    })
    .await;
    received(&r, "of the attempt", |s| s.name == "coordinator.attempt").await;
    let spans = r.spans();
    let admission = one(&spans, "the admission", |s| {
        s.name == "coordinator.admission"
    });
    assert_eq!(
        (
            admission.trace_id.as_str(),
            admission.parent_span_id.as_str()
        ),
        (INBOUND_TRACE, INBOUND_SPAN)
    );
    let attempt = one(&spans, "the attempt", |s| s.name == "coordinator.attempt");
    assert_eq!(attempt.parent_span_id, admission.span_id);
    assert_eq!(attempt.attr("coordinator.run"), Some(run.as_str()));
    drop(c);
    d.cleanup().await;
}

/// SIGTERM stops the service within seed 000's 15 s with traces on, while
/// its OTLP receiver accepts connections and never answers, a product
/// call is in flight and a start's body is still arriving: the drain and the last export share one budget
/// (docs/service.md "Shutdown"), and the spans the stalled receiver never
/// took are logged as lost.
#[tokio::test]
async fn sigterm_stops_within_15_s_with_a_stalled_otlp_receiver_and_a_call_in_flight() {
    let Some(urls) =
        urls("sigterm_stops_within_15_s_with_a_stalled_otlp_receiver_and_a_call_in_flight")
    else {
        return;
    };
    // A receiver that accepts every connection and never reads or answers.
    let stalled = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled_base = format!("http://{}", stalled.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = stalled.accept().await {
            open.push(socket);
        }
    });
    let d = Deployment::new(urls, 2_000).await;
    // The notice never answers: the worker holds a call while it drains.
    d.messaging.fake().script("/v1/messages", [Reply::Hang]);
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", stalled_base.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        // Spans stay queued until the stop's own export.
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
    ];
    let port = crate::support::free_port();
    let mut c = d.spawn_env(&d.runtime_file(port), port, &[], &env).await;
    d.start(&c, "app-stop-3b7e", &rfc3339(unix_now())).await;
    let began = Instant::now();
    while d.messaging.fake().requests_to("/v1/messages").is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "no notice sent in 30 s:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A start whose body never finishes arriving: a request in flight
    // that the drain waits on until its budget ends.
    let mut slow = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\
         idempotency-key: stop-slow-1\r\ncontent-type: application/json\r\n\
         content-length: 4000\r\n\r\n{{\"workflow\":",
        d.token(PRODUCER)
    );
    tokio::io::AsyncWriteExt::write_all(&mut slow, head.as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = c.terminate(Duration::from_secs(15)).await;
    assert!(
        status.is_some(),
        "not stopped by SIGTERM within 15 s with a stalled OTLP receiver:\n{}",
        c.log_text()
    );
    assert!(
        c.log_text()
            .contains("traces: the last spans could not be exported"),
        "{}",
        c.log_text()
    );
    held.abort();
    drop(slow);
    drop(c);
    d.cleanup().await;
}
