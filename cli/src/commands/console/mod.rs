//! `coordinatorctl console --url URL --token-file PATH [--listen
//! 127.0.0.1:PORT] [--open] [--project DIR]...`: an operator console in the
//! browser, served by the CLI on a loopback address (docs/console.md).
//!
//! The CLI holds the token: the browser talks only to the console, which
//! forwards each page's requests to the coordinator API with the token of
//! `--token-file` (read again for every request, so a refreshed file is
//! picked up). The page never sees the token.
//!
//! Every request must carry the per-session secret the console printed at
//! the head of its path (`/s/<secret>/...`; a path, not a cookie, because a
//! browser sends a 127.0.0.1 cookie to every port of 127.0.0.1) and a
//! `Host` equal to the address the console listens on (no DNS rebinding).
//! A state-changing request must also carry the secret in the
//! `X-Console-Secret` header and a same-origin `Origin` (no cross-site
//! request). Anything else is 403. Secrets are compared in constant time.
//!
//! Exit codes: 0 stopped by Ctrl-C; 1 the token file is unsafe; 2 usage
//! (`--url`, `--listen` not a loopback address, a `--project` that does
//! not compile); 3 the address cannot be bound, the token file cannot be
//! read, or the URL cannot be printed (stdout closed).

mod moves;
mod pages;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method as HttpMethod, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, ServiceExt};
use clap::Args;
use coordinator_api as api;
use coordinator_compiler::explain_data::ExplainData;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tower::Layer as _;

use crate::codes;
use crate::commands::ops;
use crate::report::{self, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::service_client::{self, Body, Method, RawAnswer, SendFailure};

/// The header a state-changing request carries the secret in.
const SECRET_HEADER: &str = "x-console-secret";
/// Runs per page of the Runs page's lists.
const PAGE_SIZE: u32 = 20;
/// Largest body of a console request (a reason), in bytes.
const MAX_ACTION_BYTES: usize = 4 * 1024;

/// Arguments of `console`.
#[derive(Args, Debug)]
pub struct ConsoleArgs {
    /// The service's base URL (`https://coordinator.example.org`).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// A file holding the operator's access token (owner-only); read for
    /// every request the console forwards.
    #[arg(long = "token-file", value_name = "PATH")]
    pub token_file: PathBuf,
    /// The loopback address to serve on (`127.0.0.1:PORT` or `[::1]:PORT`;
    /// port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Open the console in the desktop's browser (`xdg-open`).
    #[arg(long)]
    pub open: bool,
    /// A project directory whose workflow the Run page draws whole
    /// (`coordinatorctl graph`'s drawing, coloured by the run) for runs of
    /// its workflow and revision; repeatable. Without one, the Run page
    /// draws the steps the run took.
    #[arg(long, value_name = "DIR")]
    pub project: Vec<PathBuf>,
}

/// The console's state, shared by every request.
pub(crate) struct Console {
    /// `--url` as given (checked by [`service_client::service_url`]).
    service: String,
    token_file: PathBuf,
    client: reqwest::Client,
    /// 64 lowercase hex digits (256 random bits).
    secret: String,
    /// `/s/<secret>`: the path prefix of every page and request.
    base: String,
    /// `IP:PORT` the console listens on: the only `Host` accepted.
    host: String,
    /// `http://IP:PORT`: the only `Origin` of a state-changing request.
    origin: String,
    /// The compiled `--project`s (their explain data).
    projects: Vec<ExplainData>,
    /// The move certificates read on the Moves page.
    certificates: moves::Certificates,
}

/// Runs the command; returns the exit code.
pub fn run(args: ConsoleArgs) -> u8 {
    match report::io_runtime() {
        Ok(runtime) => runtime.block_on(serve(args)),
        Err(exit) => exit,
    }
}

/// Whether `listen` is a loopback socket address; the message otherwise.
fn loopback(listen: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = listen.parse().map_err(|_| {
        format!("coordinatorctl console: --listen must be IP:PORT on a loopback address (127.0.0.1:8080), not {listen:?}")
    })?;
    // The one loopback rule (`runtime::net`); a name never reaches it: the
    // address must parse as IP:PORT.
    if !coordinator_runtime::net::is_loopback_host(&addr.ip().to_string()) {
        return Err(format!(
            "coordinatorctl console: --listen {addr} is not a loopback address; the console serves 127.0.0.1 or [::1] only"
        ));
    }
    Ok(addr)
}

/// 256 bits from the operating system's generator, as 64 hex digits.
fn new_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

async fn serve(args: ConsoleArgs) -> u8 {
    if let Err(message) = service_client::service_url("console", &args.url, &[]) {
        errln!("{message}");
        return EXIT_USAGE;
    }
    let addr = match loopback(&args.listen) {
        Ok(a) => a,
        Err(message) => {
            errln!("{message}");
            return EXIT_USAGE;
        }
    };
    if let Err((exit, code, title, next)) = service_client::read_token(&args.token_file) {
        errln!("error[{code}] {}", args.token_file.display());
        errln!("  {title}");
        errln!("  next: {next}");
        return exit;
    }
    let mut projects = Vec::new();
    for dir in &args.project {
        let display = dir.to_string_lossy().into_owned();
        let compiled = coordinator_compiler::compile_project(dir, &display);
        if report::exit_code(&compiled.diagnostics) != EXIT_OK {
            report::print_diagnostics(&compiled.diagnostics);
            errln!("coordinatorctl console: --project {display} does not compile (see above)");
            return EXIT_USAGE;
        }
        projects.extend(compiled.explain_data);
    }
    let client = match service_client::http_client() {
        Ok(c) => c,
        Err(e) => {
            errln!("coordinatorctl: cannot build the HTTP client: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let secret = match new_secret() {
        Ok(s) => s,
        Err(e) => {
            errln!("coordinatorctl console: no random secret from the operating system: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            errln!("coordinatorctl console: cannot listen on {addr}: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let bound = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            errln!("coordinatorctl console: cannot read the bound address: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let host = bound.to_string();
    let console = Arc::new(Console {
        service: args.url.clone(),
        base: format!("/s/{secret}"),
        token_file: args.token_file.clone(),
        client,
        origin: format!("http://{host}"),
        secret,
        host,
        projects,
        certificates: moves::Certificates::default(),
    });
    let url = format!("{}{}/", console.origin, console.base);
    // The URL is the only way in: a closed or broken stdout ends the
    // console rather than serving a URL nobody can see.
    let printed = {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "console: {url}").and_then(|()| stdout.flush())
    };
    if let Err(e) = printed {
        errln!("error[{code}] coordinatorctl console: cannot print the console's URL ({e}); nothing is served", code = codes::COMMAND_OUTPUT_CLOSED);
        return EXIT_UNAVAILABLE;
    }
    errln!(
        "coordinatorctl console: forwarding to {} with the token in {}; stop with Ctrl-C",
        args.url,
        args.token_file.display()
    );
    if args.open {
        if let Err(e) = std::process::Command::new("xdg-open").arg(&url).spawn() {
            errln!("coordinatorctl console: cannot open a browser ({e}); open the URL above");
        }
    }
    let app = middleware::from_fn_with_state(console.clone(), guard).layer(routes(console));
    let stopped = axum::serve(listener, ServiceExt::<Request>::into_make_service(app))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    match stopped {
        Ok(()) => EXIT_OK,
        Err(e) => {
            errln!("coordinatorctl console: the server stopped: {e}");
            EXIT_UNAVAILABLE
        }
    }
}

/// The console's routes, behind [`guard`].
///
/// The guard wraps the whole router (a `Router::layer` would run after
/// routing), so the router sees the path the guard took the secret prefix
/// off.
fn routes(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(runs_page))
        .route("/runs/{run}", get(run_page))
        .route("/runs/{run}/{action}", post(run_action))
        .route("/matching", get(matching))
        .route("/moves", get(moves::moves_page))
        .route("/moves/certificates", post(moves::upload))
        .route("/moves/{certificate}/runs/{run}", post(moves::move_run))
        .route("/deployment", get(deployment_page))
        .route("/assets/console.js", get(script))
        .route("/assets/console.css", get(style))
        .fallback(not_found)
        .with_state(console)
}

/// Headers on every answer: no caching, no framing, no sniffing, no
/// referrer, and a content security policy that allows the console's own
/// script and style only.
fn harden(headers: &mut HeaderMap) {
    let set = [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// 403 with a short explanation (never the secret).
fn forbidden(why: &'static str) -> Response {
    let mut response = (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("403 forbidden: {why}\n"),
    )
        .into_response();
    harden(response.headers_mut());
    response
}

/// Equal in constant time.
fn same_secret(given: &str, secret: &str) -> bool {
    given.as_bytes().ct_eq(secret.as_bytes()).into()
}

/// The one header `name`, as text; `None` when absent, repeated or not text.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()
}

/// The path under the console's prefix `/s/<secret>`: `Some("/...")` when
/// `path` starts with the prefix holding this console's secret (compared in
/// constant time); `None` otherwise.
fn under_prefix<'a>(path: &'a str, secret: &str) -> Option<&'a str> {
    let rest = path.strip_prefix("/s/")?;
    let (given, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    same_secret(given, secret).then_some(if tail.is_empty() { "/" } else { tail })
}

/// Checks every request (module docs): the `Host` (and an absolute
/// request target's authority), the secret at the head of the path, and for
/// a state-changing request the secret header and the `Origin`; then hands
/// the request on with the prefix taken off its path.
async fn guard(State(console): State<Arc<Console>>, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    if single(headers, header::HOST.as_str()) != Some(console.host.as_str()) {
        return forbidden("the Host header is not the console's address");
    }
    if let Some(authority) = request.uri().authority() {
        if authority.as_str() != console.host {
            return forbidden("the request target is not the console's address");
        }
    }
    let Some(inner) = under_prefix(request.uri().path(), &console.secret) else {
        return forbidden("open the console with the URL `coordinatorctl console` printed");
    };
    if !matches!(*request.method(), HttpMethod::GET | HttpMethod::HEAD) {
        let header_ok =
            single(headers, SECRET_HEADER).is_some_and(|given| same_secret(given, &console.secret));
        if !header_ok {
            return forbidden("a change needs the X-Console-Secret header");
        }
        if single(headers, header::ORIGIN.as_str()) != Some(console.origin.as_str()) {
            return forbidden("a change must come from the console's own pages (Origin)");
        }
    }
    let target = match request.uri().query() {
        Some(q) => format!("{inner}?{q}"),
        None => inner.to_owned(),
    };
    match target.parse::<axum::http::Uri>() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => return forbidden("the request target cannot be read"),
    }
    let mut response = next.run(request).await;
    harden(response.headers_mut());
    response
}

/// What the console got from the service for one request.
pub(crate) enum Fetched<T> {
    /// The API's answer of the expected type.
    Answer(T),
    /// A problem document.
    Problem(api::Problem),
    /// No answer, or not the API's: a sentence for the page.
    Failed(String),
}

impl Console {
    /// One request to the service with the operator's token.
    async fn fetch<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&'static str, String)],
    ) -> Fetched<T> {
        let segments = service_client::request_path(segments);
        let url = match service_client::service_url("console", &self.service, &segments) {
            Ok(u) => u.to_string(),
            Err(message) => return Fetched::Failed(message),
        };
        let token = match service_client::read_token(&self.token_file) {
            Ok(t) => t,
            Err((_, code, title, next)) => {
                return Fetched::Failed(format!("{code}: {title} (next: {next})"))
            }
        };
        match service_client::send(&self.client, &url, &token, &method, query).await {
            Err(SendFailure::Encode(e)) => Fetched::Failed(format!("cannot encode: {e}")),
            Err(SendFailure::Unreachable { title, chain, .. }) => {
                Fetched::Failed(format!("{title}: {chain}"))
            }
            Ok(RawAnswer {
                status,
                problem,
                text,
            }) => {
                if (200..300).contains(&status) {
                    match serde_json::from_str(&text) {
                        Ok(v) => Fetched::Answer(v),
                        Err(_) => Fetched::Failed(format!(
                            "the answer ({status}) is not the coordinator API's"
                        )),
                    }
                } else if let Some(p) = problem
                    .then(|| serde_json::from_str::<api::Problem>(&text).ok())
                    .flatten()
                {
                    Fetched::Problem(p)
                } else {
                    Fetched::Failed(format!(
                        "the answer ({status}) is not the coordinator API's"
                    ))
                }
            }
        }
    }
}

/// The Runs page's filters (`?workflow=&state=&cursor=`).
#[derive(Debug, Deserialize)]
pub(crate) struct RunsQuery {
    pub(crate) workflow: Option<String>,
    pub(crate) state: Option<String>,
    pub(crate) cursor: Option<String>,
}

/// The status of a page: the problem's when the service refused (404 for
/// an unknown run, ...), 502 when it did not answer, else 200.
fn page_status<T>(fetched: &Fetched<T>) -> StatusCode {
    match fetched {
        Fetched::Answer(_) => StatusCode::OK,
        Fetched::Problem(p) => StatusCode::from_u16(p.status).unwrap_or(StatusCode::BAD_GATEWAY),
        Fetched::Failed(_) => StatusCode::BAD_GATEWAY,
    }
}

fn html(markup: maud::Markup) -> Response {
    Html(markup.into_string()).into_response()
}

async fn runs_page(
    State(console): State<Arc<Console>>,
    Query(filters): Query<RunsQuery>,
) -> Response {
    let mut q: Vec<(&'static str, String)> = vec![("limit", PAGE_SIZE.to_string())];
    for (name, value) in [
        ("workflow", &filters.workflow),
        ("state", &filters.state),
        ("cursor", &filters.cursor),
    ] {
        if let Some(v) = value.as_ref().filter(|v| !v.is_empty()) {
            q.push((name, v.clone()));
        }
    }
    let attention_query = [
        ("attention", "true".to_owned()),
        ("limit", api::MAX_LIST_LIMIT.to_string()),
    ];
    // Both lists at once: a slow service costs one timeout, not two.
    let (attention, all): (Fetched<api::RunList>, Fetched<api::RunList>) = tokio::join!(
        console.fetch(Method::Get, &["v1", "runs"], &attention_query),
        console.fetch(Method::Get, &["v1", "runs"], &q),
    );
    html(pages::runs(
        &console.base,
        &console.secret,
        &filters,
        &attention,
        &all,
    ))
}

async fn run_page(State(console): State<Arc<Console>>, UrlPath(run): UrlPath<String>) -> Response {
    if run == "." || run == ".." {
        return not_found().await;
    }
    let inspection: Fetched<api::Inspection> = console
        .fetch(Method::Get, &["v1", "runs", &run, "inspect"], &[])
        .await;
    let mut response = html(pages::run(
        &console.base,
        &console.secret,
        &run,
        &inspection,
        &console.projects,
    ));
    *response.status_mut() = page_status(&inspection);
    response
}

async fn deployment_page(State(console): State<Arc<Console>>) -> Response {
    let doctor: Fetched<api::Doctor> = console.fetch(Method::Get, &["v1", "doctor"], &[]).await;
    let mut response = html(pages::deployment(&console.base, &doctor));
    *response.status_mut() = page_status(&doctor);
    response
}

/// The body of an action from a console page (a recovery action on the
/// Run page, a move on the Moves page): `{"reason": REF}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionBody {
    reason: String,
}

/// The `reason` of an action's body, or the console problem for a body
/// over [`MAX_ACTION_BYTES`] (413 `request.too-large`) or not
/// `{"reason": "..."}` (400 `request.invalid`).
pub(crate) fn action_reason(body: &[u8]) -> Result<String, Response> {
    if body.len() > MAX_ACTION_BYTES {
        return Err(console_problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request.too-large",
            "The request body is too large",
            format!("at most {MAX_ACTION_BYTES} bytes"),
        ));
    }
    serde_json::from_slice::<ActionBody>(body)
        .map(|b| b.reason)
        .map_err(|e| {
            console_problem(
                StatusCode::BAD_REQUEST,
                "request.invalid",
                "The request body is not {\"reason\": \"...\"}",
                e.to_string(),
            )
        })
}

/// A console problem (`application/problem+json`) for the page's script.
fn console_problem(status: StatusCode, code: &str, title: &str, detail: String) -> Response {
    let body = api::Problem::new(status.as_u16(), code, title, Some(detail));
    let mut response = (status, axum::Json(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// `POST /runs/{run}/{reconcile|retry-same|cancel}` with `{"reason": REF}`:
/// forwarded to the service; answers the run's status (200) or the
/// service's problem document with its status.
async fn run_action(
    State(console): State<Arc<Console>>,
    UrlPath((run, action)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    if run == "." || run == ".." {
        return not_found().await;
    }
    let action: &'static str = match action.as_str() {
        "reconcile" => "reconcile",
        "retry-same" => "retry-same",
        "cancel" => "cancel",
        _ => return not_found().await,
    };
    let reason = match action_reason(&body) {
        Ok(reason) => reason,
        Err(problem) => return problem,
    };
    let answer: Fetched<api::RunStatus> = console
        .fetch(
            Method::Post(Body::Recovery(api::Recovery { reason })),
            &["v1", "runs", &run, action],
            &[],
        )
        .await;
    match answer {
        // Only what the page shows: never the run's output (it may hold a
        // product's answer).
        Fetched::Answer(status) => (
            StatusCode::OK,
            axum::Json(serde_json::json!({
                "state": status.state,
                "outcome": status.outcome,
                "failure": status.failure,
            })),
        )
            .into_response(),
        Fetched::Problem(p) => forwarded_problem(p),
        Fetched::Failed(why) => unanswered(why),
    }
}

/// The service's problem document, with its status, for the page's script.
fn forwarded_problem(p: api::Problem) -> Response {
    let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = (status, axum::Json(p)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// 502: the service did not answer (`why`).
fn unanswered(why: String) -> Response {
    console_problem(
        StatusCode::BAD_GATEWAY,
        "console.service-unreachable",
        "The coordinator did not answer",
        why,
    )
}

/// `GET /matching?workflow=&state=`: every run the Runs page's filter
/// matches (the API's pages followed to the end), each with the bulk
/// actions its state takes, for the page's "every run matching this
/// filter": `{"runs": [{"run", "takes": [action]}]}`. An empty filter is
/// refused (400 `bulk.filter-empty`), as `--filter` refuses it.
async fn matching(
    State(console): State<Arc<Console>>,
    Query(filters): Query<RunsQuery>,
) -> Response {
    let mut query: Vec<(&'static str, String)> = Vec::new();
    for (name, value) in [("workflow", &filters.workflow), ("state", &filters.state)] {
        if let Some(v) = value.as_ref().filter(|v| !v.is_empty()) {
            query.push((name, v.clone()));
        }
    }
    if query.is_empty() {
        return console_problem(
            StatusCode::BAD_REQUEST,
            codes::BULK_FILTER_EMPTY
                .strip_prefix("coordinator.")
                .unwrap_or(codes::BULK_FILTER_EMPTY),
            "The filter names no runs",
            "choose a workflow or a state first: an empty filter would act on every run".into(),
        );
    }
    query.push(("limit", api::MAX_LIST_LIMIT.to_string()));
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
                runs.extend(list.runs.iter().map(|r| {
                    let takes: Vec<&str> = ops::BULK_ACTIONS
                        .into_iter()
                        .filter(|a| ops::takes_action(a, &r.state))
                        .collect();
                    serde_json::json!({"run": r.run, "takes": takes})
                }));
                match list.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            Fetched::Problem(p) => return forwarded_problem(p),
            Fetched::Failed(why) => return unanswered(why),
        }
    }
    axum::Json(serde_json::json!({ "runs": runs })).into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/console.js"),
    )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/console.css"),
    )
        .into_response()
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "404 not found\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_served() {
        assert!(loopback("127.0.0.1:0").is_ok());
        assert!(loopback("[::1]:8080").is_ok());
        assert!(loopback("0.0.0.0:8080").is_err());
        assert!(loopback("192.168.1.4:8080").is_err());
        assert!(
            loopback("localhost:8080").is_err(),
            "a name could resolve anywhere"
        );
        assert!(loopback("127.0.0.1").is_err(), "a port is required");
    }

    #[test]
    fn the_secret_heads_the_path() {
        let secret = "ab".repeat(32);
        let at = |path: &str| under_prefix(path, &secret).map(str::to_owned);
        assert_eq!(at(&format!("/s/{secret}")), Some("/".to_owned()));
        assert_eq!(at(&format!("/s/{secret}/")), Some("/".to_owned()));
        assert_eq!(
            at(&format!("/s/{secret}/runs/r-1")),
            Some("/runs/r-1".to_owned())
        );
        assert_eq!(at(&format!("/s/{}/", "cd".repeat(32))), None);
        assert_eq!(at(&format!("/s/{}/", &secret[..63])), None);
        assert_eq!(at(&format!("/s/{secret}x/")), None);
        assert_eq!(at(&format!("/x/{secret}/")), None);
        assert_eq!(at("/"), None);
        assert_eq!(at("/runs/r-1"), None);
    }

    #[test]
    fn secrets_are_256_random_bits_in_hex() {
        let a = new_secret().unwrap();
        let b = new_secret().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(same_secret(&a, &a.clone()));
        assert!(!same_secret(&a, &b));
        assert!(!same_secret(&a, &a[..63]));
    }
}
