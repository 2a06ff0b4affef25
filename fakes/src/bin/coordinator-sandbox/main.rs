//! `coordinator-sandbox DIR`: local stand-ins for a trial of the starter
//! workflow (`coordinatorctl init`, `examples/delayed-follow-up`) and of
//! `examples/reviewed-notice` on this machine. **A local trial stand-in,
//! not for production**: the issuer and products are the test fakes of
//! this crate, keep everything in memory, accept any scope, and mint tokens
//! for whoever runs this program.
//!
//! It starts, each on a free `127.0.0.1` port:
//! - a [`FakeIssuer`] (discovery, JWKS, a token endpoint accepting
//!   `private_key_jwt` client assertions),
//! - a [`FakeBreg`] holding one record, `applications`/`demo-application`
//!   (`noticeAllowed: true`), the record the trial run reads,
//! - a [`FakeMessaging`] that accepts messages (printed on standard output
//!   as they arrive),
//! - a [`FakeCasework`] holding the review requests it is sent (printed as
//!   they arrive) until a person decides one with `coordinator-sandbox
//!   decide` (the `review` module: the control listener, the completion
//!   sent to the coordinator as Casework would).
//!
//! The products accept only access tokens this issuer's token endpoint
//! issued. For the connections `applications` (ES256 key), `notices`
//! (EdDSA key) and `review` (ES256 key, reviewed-notice's Casework), it
//! generates a key pair, registers the public JWK with the issuer under
//! client id `coordinator-<name>`, and writes the private JWK where the
//! examples' `signingKeyRef` points (`secret:file/<name>-client-key`).
//!
//! It writes into DIR (created with mode 0700; it must not exist or be
//! empty), every file owner-only (0600):
//! - `secrets/` (0700): `applications-client-key`, `notices-client-key`,
//!   `review-client-key`, and `review-completion-token`: the bearer token
//!   Casework's review completions carry (reviewed-notice's
//!   `completion.bearerTokenRef`), an access token this issuer minted for
//!   client `casework`,
//! - `control-token`: the bearer token of the control listener
//!   (`coordinator-sandbox decide` reads it),
//! - `producer-token`: a caller token of client `producer-app`,
//! - `operator-token`: a caller token of client `ops-console`,
//!   both RFC 9068 access tokens with audience `registry-coordinator`, valid
//!   for one hour (the service's longest accepted lifetime) and re-minted
//!   every 30 minutes while the sandbox runs,
//! - `sandbox.env`: `KEY='value'` lines for a shell (`. DIR/sandbox.env`),
//! - `sandbox.json`: the same as one JSON object,
//!
//! `sandbox.env` is written last (by rename), so its presence means ready.
//! Keys: `SANDBOX_ISSUER`, `SANDBOX_TOKEN_ENDPOINT`, `SANDBOX_BREG_URL`,
//! `SANDBOX_MESSAGING_URL`, `SANDBOX_AUDIENCE`, `SANDBOX_PRODUCER_CLIENT`,
//! `SANDBOX_OPERATOR_CLIENT`, `SANDBOX_APPLICATION_ID`, `SANDBOX_SECRETS`,
//! `SANDBOX_PRODUCER_TOKEN_FILE`, `SANDBOX_OPERATOR_TOKEN_FILE`,
//! `SANDBOX_LISTENER_PORT` and `SANDBOX_METRICS_PORT` (two loopback ports
//! that were free at startup, for the coordinator's listener and metrics),
//! `SANDBOX_CASEWORK_URL`, `SANDBOX_RECIPIENT_BINDING` (the completions'
//! `registry-recipient-binding`) and `SANDBOX_CONTROL_URL`.
//!
//! Then it stays up until SIGTERM or SIGINT. Exit codes: 0 stopped by a
//! signal, 1 a start-up failure (message on standard error), 2 usage.
//!
//! `coordinator-sandbox decide DIR approve|decline [--review-request ID]`
//! asks the sandbox serving DIR to decide the pending review request
//! (`approved` or `rejected` in Casework) and send the coordinator its
//! review completion; exit 0 when the coordinator accepted it (202), 1
//! otherwise, 2 usage.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

mod review;

use coordinator_fakes::{
    FakeBreg, FakeCasework, FakeIssuer, FakeMessaging, KeyKind, Mint, TestKey,
};
use serde_json::{json, Map, Value};

/// The caller tokens' audience (`deployment.authentication.audience`).
const AUDIENCE: &str = "registry-coordinator";
/// The client id of the application's caller token.
const PRODUCER: &str = "producer-app";
/// The client id of the operator's caller token.
const OPERATOR: &str = "ops-console";
/// The BReg record the trial run reads (collection `applications`).
const APPLICATION_ID: &str = "demo-application";
/// Caller token lifetime, seconds (the service accepts at most one hour).
const TOKEN_LIFETIME_SECONDS: u64 = 3600;
/// How often the caller tokens are re-minted.
const REMINT_EVERY: Duration = Duration::from_secs(1800);
/// The examples' connections: name and key type.
const CONNECTIONS: [(&str, KeyKind); 3] = [
    ("applications", KeyKind::Es256),
    ("notices", KeyKind::EdDsa),
    ("review", KeyKind::Es256),
];
/// The client id (and audience) of the review-completion token.
const CASEWORK_CLIENT: &str = "casework";

const USAGE: &str = "usage: coordinator-sandbox DIR\n       \
coordinator-sandbox decide DIR approve|decline [--review-request ID]\n\n\
Local trial stand-ins (NOT for production): a fake OIDC issuer, BReg,\n\
Messaging and Casework on loopback ports for the starter workflow and\n\
reviewed-notice. Writes keys, caller tokens and DIR/sandbox.env into DIR\n\
(new or empty), then runs until SIGTERM or Ctrl-C. `decide` decides the\n\
pending review request of the sandbox serving DIR.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("decide") {
        return decide(args.get(1..).unwrap_or_default());
    }
    let dir = match args.as_slice() {
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [dir] if !dir.starts_with('-') => PathBuf::from(dir),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("coordinator-sandbox: error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(&dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("coordinator-sandbox: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `coordinator-sandbox decide ...` (the `review` module).
fn decide(args: &[String]) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("coordinator-sandbox: error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(review::decide_command(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err((2, usage)) => {
            eprintln!("{usage}");
            ExitCode::from(2)
        }
        Err((code, message)) => {
            eprintln!("coordinator-sandbox decide: error: {message}");
            ExitCode::from(code)
        }
    }
}

/// Starts the fakes, writes DIR, serves until a signal.
async fn run(dir: &Path) -> Result<(), String> {
    let dir = prepare_dir(dir)?;
    let secrets = dir.join("secrets");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&secrets)
        .map_err(|e| format!("cannot create {}: {e}", secrets.display()))?;

    let started = |what: &str, e: std::io::Error| format!("cannot start the fake {what}: {e}");
    let issuer = FakeIssuer::start()
        .await
        .map_err(|e| started("issuer", e))?;
    let breg = FakeBreg::start().await.map_err(|e| started("BReg", e))?;
    let messaging = FakeMessaging::start()
        .await
        .map_err(|e| started("Messaging", e))?;
    let casework = FakeCasework::start()
        .await
        .map_err(|e| started("Casework", e))?;
    let check = issuer.token_check();
    breg.fake().require_bearer(check.clone());
    messaging.fake().require_bearer(check.clone());
    casework.fake().require_bearer(check);

    for (name, kind) in CONNECTIONS {
        let key = TestKey::generate(kind, &format!("{name}-sandbox"));
        issuer.register_client(&format!("coordinator-{name}"), key.public_jwk.clone(), None);
        write_private(
            &secrets.join(format!("{name}-client-key")),
            key.private_jwk_text().as_bytes(),
        )?;
    }
    breg.put_record(
        "applications",
        APPLICATION_ID,
        "r1",
        json!({"noticeAllowed": true, "applicantEmail": "applicant@example.org"}),
    );

    let producer_file = dir.join("producer-token");
    let operator_file = dir.join("operator-token");
    mint_tokens(&issuer, &producer_file, &operator_file)?;

    let (listener_port, metrics_port) = (free_port()?, free_port()?);
    let control_url = open_review_desk(&issuer, &casework, &dir, listener_port).await?;
    let path = |p: &Path| p.display().to_string();
    let values: Vec<(&str, String)> = vec![
        ("SANDBOX_ISSUER", issuer.issuer().to_owned()),
        ("SANDBOX_TOKEN_ENDPOINT", issuer.token_endpoint()),
        ("SANDBOX_BREG_URL", breg.base_url().to_owned()),
        ("SANDBOX_MESSAGING_URL", messaging.base_url().to_owned()),
        ("SANDBOX_AUDIENCE", AUDIENCE.to_owned()),
        ("SANDBOX_PRODUCER_CLIENT", PRODUCER.to_owned()),
        ("SANDBOX_OPERATOR_CLIENT", OPERATOR.to_owned()),
        ("SANDBOX_APPLICATION_ID", APPLICATION_ID.to_owned()),
        ("SANDBOX_SECRETS", path(&secrets)),
        ("SANDBOX_PRODUCER_TOKEN_FILE", path(&producer_file)),
        ("SANDBOX_OPERATOR_TOKEN_FILE", path(&operator_file)),
        ("SANDBOX_LISTENER_PORT", listener_port.to_string()),
        ("SANDBOX_METRICS_PORT", metrics_port.to_string()),
        ("SANDBOX_CASEWORK_URL", casework.base_url().to_owned()),
        (
            "SANDBOX_RECIPIENT_BINDING",
            review::RECIPIENT_BINDING.to_owned(),
        ),
        ("SANDBOX_CONTROL_URL", control_url),
    ];
    write_settings(&dir, &values)?;

    println!(
        "coordinator-sandbox: local trial stand-ins, not for production\n  issuer    {}\n  breg      {}\n  messaging {}\n  casework  {}\n  written   {}\nrunning until SIGTERM or Ctrl-C",
        issuer.issuer(),
        breg.base_url(),
        messaging.base_url(),
        casework.base_url(),
        dir.join("sandbox.env").display()
    );

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let mut remint = tokio::time::interval(REMINT_EVERY);
    remint.tick().await;
    let mut watch = tokio::time::interval(Duration::from_millis(500));
    let mut counts = Counts::default();
    let mut reviews_seen = 0;
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = remint.tick() => {
                if let Err(e) = mint_tokens(&issuer, &producer_file, &operator_file) {
                    eprintln!("coordinator-sandbox: warning: {e}");
                }
            }
            _ = watch.tick() => {
                review::print_new_review_requests(&casework, &mut reviews_seen);
                print_the_messages_and_forget(&issuer, &breg, &messaging, &mut counts);
            }
        }
    }
    print_the_messages_and_forget(&issuer, &breg, &messaging, &mut counts);
    println!(
        "coordinator-sandbox: stopping ({} message(s) accepted, {} token(s) issued to connections)",
        counts.messages_accepted, counts.tokens_issued
    );
    Ok(())
}

/// The review desk of reviewed-notice's Casework stand-in: writes the
/// review-completion token (minted by `issuer` for client `casework`) into
/// `DIR/secrets/` and the control token into DIR, starts the control
/// listener (the `review` module) that sends completions to the
/// coordinator on `listener_port`; the listener's base URL.
async fn open_review_desk(
    issuer: &FakeIssuer,
    casework: &FakeCasework,
    dir: &Path,
    listener_port: u16,
) -> Result<String, String> {
    let mut completion = Mint::new(CASEWORK_CLIENT, CASEWORK_CLIENT);
    completion.lifetime_seconds = TOKEN_LIFETIME_SECONDS;
    let completion_token = issuer.mint(&completion);
    write_private(
        &dir.join("secrets/review-completion-token"),
        completion_token.as_bytes(),
    )?;
    let control_token = uuid::Uuid::new_v4().simple().to_string();
    write_private(
        &dir.join(review::CONTROL_TOKEN_FILE),
        control_token.as_bytes(),
    )?;
    review::serve_control(review::ReviewDesk {
        casework: casework.clone(),
        completion_url: format!("http://127.0.0.1:{listener_port}/v1/review-completions"),
        completion_token,
        control_token,
    })
    .await
    .map_err(|e| format!("cannot start the control listener: {e}"))
}

/// Writes `DIR/sandbox.json` (one JSON object) and then `DIR/sandbox.env`
/// (`KEY='value'` lines; its presence means ready).
fn write_settings(dir: &Path, values: &[(&str, String)]) -> Result<(), String> {
    let object: Map<String, Value> = values
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String(v.clone())))
        .collect();
    write_private(
        &dir.join("sandbox.json"),
        format!("{:#}\n", Value::Object(object)).as_bytes(),
    )?;
    let env: String = values
        .iter()
        .map(|(k, v)| format!("{k}={}\n", shell_quote(v)))
        .collect();
    write_private(&dir.join("sandbox.env"), env.as_bytes())
}

/// What the sandbox counted of what it forgot.
#[derive(Default)]
struct Counts {
    /// Messages Messaging accepted (replays not counted).
    messages_accepted: usize,
    /// Access tokens the issuer's token endpoint issued.
    tokens_issued: usize,
}

/// Prints every Messaging submission received since the last call, with
/// its idempotency key and how many times Messaging performed that key's
/// work so far (a replay of a known key is answered from its record), so a
/// restore rehearsal or a soak can check one key per run, each performed
/// once. The sandbox may run for hours: what was printed is then
/// forgotten, and what is never printed (BReg's and the issuer's requests)
/// too, so its memory holds the idempotency records and the tokens issued
/// (a token per call, SPEC §6) only; `counts` keeps how many.
fn print_the_messages_and_forget(
    issuer: &FakeIssuer,
    breg: &FakeBreg,
    messaging: &FakeMessaging,
    counts: &mut Counts,
) {
    breg.fake().take_requests();
    issuer.fake().take_requests();
    counts.tokens_issued += issuer
        .take_token_requests()
        .iter()
        .filter(|r| r.outcome.is_ok())
        .count();
    counts.messages_accepted += messaging.take_messages().len();
    let fake = messaging.fake();
    for r in fake
        .take_requests()
        .iter()
        .filter(|r| r.path == "/v1/messages")
    {
        let key = r.header("idempotency-key").unwrap_or("-");
        println!(
            "messaging: message request, Idempotency-Key {key} (performed {} time(s) for this key): {}",
            fake.effect_count(key),
            r.json()
        );
    }
}

/// Creates DIR (0700) or accepts an existing empty directory; its absolute
/// path.
fn prepare_dir(dir: &Path) -> Result<PathBuf, String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(format!(
                    "{} is not empty; give a new or empty directory",
                    dir.display()
                ));
            }
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot restrict {}: {e}", dir.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    }
    std::fs::canonicalize(dir).map_err(|e| format!("cannot resolve {}: {e}", dir.display()))
}

/// Mints both caller tokens and writes them (owner-only, by rename).
fn mint_tokens(issuer: &FakeIssuer, producer: &Path, operator: &Path) -> Result<(), String> {
    for (client, file) in [(PRODUCER, producer), (OPERATOR, operator)] {
        let mut mint = Mint::new(client, AUDIENCE);
        mint.lifetime_seconds = TOKEN_LIFETIME_SECONDS;
        write_private(file, issuer.mint(&mint).as_bytes())?;
    }
    Ok(())
}

/// Writes `bytes` to `path` with mode 0600: a new file beside it, then a
/// rename, so a reader never sees a partial file.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// A loopback port free right now (the OS picks it).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free loopback port: {e}"))
}

/// `value` in single quotes for a POSIX shell.
fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}
