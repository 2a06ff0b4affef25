//! `coordinator --runtime-config F [--recovery-only] [--worker-threads N]`, in
//! this order (after a first log line with the package version and source
//! revision, which `coordinator --version` prints too):
//!
//! 1. verifies the runtime file and its pinned packages, reads the keys,
//!    the event sources' and connections' keys, and binds the listeners
//!    (none of this needs the database, so each fault refuses at once);
//! 2. serves at once through a [`coordinator::gate::Gate`]: until the store
//!    is open, `/ready` answers 503 and every API route 503
//!    `service.unavailable` (`/metrics`, when set, only
//!    `coordinator_store_ready 0`);
//! 3. opens the PostgreSQL store and checks the deployment
//!    (`coordinator::startup::open_store`: `Store::open` — server 17+,
//!    schema version, database id, runtime role safety, key custody, pinned
//!    packages == active; never migrates — then the connection bindings of
//!    runs that have not ended, refused as `live-binding-conflict` unless
//!    `--recovery-only`). A database that cannot be reached is waited out,
//!    logging `store-unavailable` at the first failure and then every 30 s;
//! 4. opens this process's audit journal, adopts the store's restore epoch,
//!    hands the gate the API router and starts the in-process workers (on a
//!    `--recovery-only` instance they lease receipt lookups only), and
//!    serves until SIGTERM (or Ctrl-C), then stops within 15 s (also while
//!    still waiting for the database).
//!
//! A restore hold placed after this process started fences it: its next
//! lease is refused, it logs `restore.lease-incompatible` and exits 1
//! (docs/operations.md "Processes that predate the restore").
//!
//! Refusals are logged as one JSON line on stderr with the raw `code`
//! (`deployment.refused`, `state-key-custody`, `live-binding-conflict`) and
//! the process exits 1, whether the check ran at once or once the database
//! answered. Once serving, an unreachable database is waited out: `/ready`
//! answers 503, workers log `store-unavailable` and resume by themselves.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use coordinator::auth::{KeySource, Verifier};
use coordinator::clock_skew::ClockWatch;
use coordinator::events::EventSources;
use coordinator::gate::Gate;
use coordinator::startup::{self, StoreStart, StoreStartup, StoreWait};
use coordinator::{stopping, AppState, Completions};
use coordinator_adapters::token::{check_signing_key, TokenError};
use coordinator_adapters::HttpAdapter;
use coordinator_engine::{Engine, EngineConfig};
use coordinator_ports::{Clock, SystemClock};
use coordinator_runtime::audit::AuditJournal;
use coordinator_runtime::clock::DatabaseAlignedClock;
use coordinator_runtime::config::{Connection, Deployment};
use coordinator_runtime::secrets::{load_keys, DeploymentKeys, SecretError, SecretResolver};
use coordinator_runtime::{check_runtime_file, Mode, RuntimeCheck, RuntimeConfig};
use coordinator_store::{DatabaseError, Store};

/// The process's allocator: mimalloc. Under load glibc's malloc spent about
/// a third of the coordinator's CPU in its free lists (`malloc_consolidate`,
/// `unlink_chunk`) for the many short-lived buffers of HTTP, JSON and rows
/// (docs/service.md "Where the time goes").
#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Jobs one worker lane leases per tick (`coordinator::WORKER_LANES` lanes
/// run at once, sharing a pool of 16 connections).
const JOBS_PER_TICK: usize = 4;

/// The longest an idle worker lane sleeps without being woken
/// (`coordinator::work`): due jobs wake a lane at once, so this only
/// bounds how late a job nothing announced (a lease that ran out after a
/// crash) is found.
const WORKER_SAFETY_POLL: Duration = Duration::from_secs(1);

#[derive(Parser)]
#[command(
    name = "coordinator",
    about = "Registry Coordinator service",
    version = coordinator::version::VERSION_LINE
)]
struct Args {
    /// The runtime file (CoordinatorRuntimeConfig).
    #[arg(long)]
    runtime_config: PathBuf,
    /// Serve recovery operations only: admit and dispatch nothing.
    #[arg(long)]
    recovery_only: bool,
    /// Threads of the async runtime that serves the API and runs the
    /// worker lanes (1 to 256; default: the available cores). Audit
    /// appends run on the runtime's blocking threads, not on these.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = clap::value_parser!(u16).range(1..=256))]
    worker_threads: Option<u16>,
}

/// The runtime's worker threads when `--worker-threads` is not given:
/// the cores this process may use (`available_parallelism`), 1 when that
/// cannot be read. Measured with the peer benchmark on 2 cores shared with
/// PostgreSQL, the product stand-ins and the load client, a thread per
/// core served 7% more runs per second than one thread, with one process
/// and with two (docs/decisions.md "Sixteen lanes and a thread per core").
fn default_worker_threads() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

fn refuse(code: &str, message: &str) -> ExitCode {
    tracing::error!(code, "{message}");
    ExitCode::from(1)
}

/// A key file that is missing or unsafe is a deployment fault, not an
/// unreachable database: `deployment.refused` with the secret's code as
/// `reason`, never `store-unavailable`.
fn refuse_secret(e: SecretError) -> ExitCode {
    refuse_secret_of("", e)
}

/// [`refuse_secret`] for the secret of `whose` (e.g. "connection
/// `notices`: "), which the message starts with.
fn refuse_secret_of(whose: &str, e: SecretError) -> ExitCode {
    let e = DatabaseError::from(e);
    tracing::error!(code = "deployment.refused", reason = %e.cli_code(), next = %e.next, "{whose}{}", e.message);
    ExitCode::from(1)
}

/// Connections' longest request timeout, in whole seconds (at least 1).
fn longest_timeout_seconds<'a>(connections: impl Iterator<Item = &'a Connection>) -> i64 {
    let ms = connections
        .map(|c| {
            c.request_timeout_milliseconds()
                .unwrap_or(coordinator_adapters::DEFAULT_REQUEST_TIMEOUT_MILLISECONDS)
        })
        .max()
        .unwrap_or(coordinator_adapters::DEFAULT_REQUEST_TIMEOUT_MILLISECONDS);
    i64::try_from(ms.div_ceil(1000)).unwrap_or(300).max(1)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let worker_threads = args
        .worker_threads
        .and_then(|n| NonZeroUsize::new(usize::from(n)))
        .unwrap_or_else(default_worker_threads);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads.get())
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("coordinator: the async runtime cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(serve(args, worker_threads))
}

/// The service, from the runtime file to a stop (the steps in the module
/// documentation), on a runtime of `worker_threads` threads.
async fn serve(args: Args, worker_threads: NonZeroUsize) -> ExitCode {
    init_json_logging();
    tracing::info!(
        version = coordinator::version::PACKAGE_VERSION,
        source_revision = coordinator::version::SOURCE_REVISION,
        "coordinator {}",
        coordinator::version::VERSION_LINE
    );
    serve_checked(args, worker_threads)
        .await
        .unwrap_or_else(|refused| refused)
}

/// Logs one JSON line per event on stderr, at the level `RUST_LOG` sets
/// (`info` when unset or unreadable). sqlx's pool's own lines
/// (`sqlx_core::pool::inner`: one per failed attempt of a new connection
/// and per dropped idle one, dozens a second while PostgreSQL is down
/// behind a pooler) are off whatever `RUST_LOG` says: the store logs when
/// such failures begin and when they end (docs/decisions.md "One line when
/// new database connections begin to fail").
fn init_json_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let filter = match "sqlx_core::pool::inner=off".parse() {
        Ok(quiet) => filter.add_directive(quiet),
        Err(_) => filter,
    };
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
}

/// [`serve`]'s steps, in order: `Err` is a refusal (logged, exit 1) before
/// serving, `Ok` the exit code of a service that served and stopped.
async fn serve_checked(args: Args, worker_threads: NonZeroUsize) -> Result<ExitCode, ExitCode> {
    let runtime = read_runtime_file(&args.runtime_config)?;
    // The engine's clock follows the database's (docs/decisions.md "One
    // time for every process"), aligned by the clock watch before the
    // first start or lease; the adapter stamps its client assertions
    // with it too.
    let system: Arc<dyn Clock> = Arc::new(SystemClock);
    let aligned = DatabaseAlignedClock::new(system.clone());
    let clock: Arc<dyn Clock> = Arc::new(aligned.clone());
    let traces = start_traces(&runtime.config)?;
    let mut secrets = read_deployment_secrets(&runtime.config, &runtime.deployment)?;
    secrets.adapter = secrets.adapter.with_clock(clock.clone());
    if let Some(t) = &traces {
        secrets.adapter = secrets.adapter.with_tracer(t.tracer());
    }
    let listeners = bind_listeners(&runtime.deployment).await?;
    let servers = serve_gates_while_store_awaited(listeners);
    tracing::info!(bind = %runtime.deployment.listener.bind, worker_threads, "listening; not ready until the store is open and checked");
    let signal = wait_for_signal();
    tokio::pin!(signal);
    let start = StoreStart {
        config: &runtime.config,
        resolver: &secrets.resolver,
        keys: &secrets.keys,
        packages: &runtime.check.packages,
        max_connections: 16,
        recovery_only: args.recovery_only,
        waiting_reason: Some(&servers.waiting_reason),
    };
    let store = match startup::open_store(start, StoreWait::default(), &mut signal).await {
        StoreStartup::Serve(s) => Arc::new(s),
        StoreStartup::Refused => return Err(ExitCode::from(1)),
        StoreStartup::Stopped => {
            let stopping = std::time::Instant::now();
            let exit = stop_before_store_open(servers, stopping::drain_budget(&traces)).await;
            stopping::flush_traces(traces, stopping).await;
            return Ok(exit);
        }
    };
    tracing::info!(namespace = %runtime.config.namespace, "run store: PostgreSQL");
    let engine = build_engine(
        &runtime,
        clock.clone(),
        args.recovery_only,
        &secrets.keys,
        secrets.adapter,
        store.clone(),
    )?;
    let engine = match &traces {
        Some(t) => engine.with_tracer(t.tracer()),
        None => engine,
    };
    let journal = open_audit_journal(&runtime.deployment)?;
    let engine = Arc::new(
        engine
            .with_audit(journal.clone(), secrets.keys.audit.clone())
            .with_flow_control(store.clone()),
    );
    adopt_restore_epoch(&engine, args.recovery_only).await;
    let clock_watch = ClockWatch::new(
        store.clone(),
        system,
        aligned,
        Duration::from_millis(runtime.deployment.clock_skew_bound_milliseconds),
        engine.health.clone(),
    );
    // Measured before the first start is admitted or lease taken.
    clock_watch.measure().await;
    let run_ends = engine.run_ends.clone();
    let state = AppState {
        engine: engine.clone(),
        clock: clock.clone(),
        counts: store.clone(),
        verifier: Arc::new(
            Verifier::new(&runtime.deployment.authentication, secrets.key_source)
                .with_clock(clock.clone()),
        ),
        completions: Arc::new(secrets.completions),
        events: Arc::new(secrets.event_sources),
    };
    servers.api.open(coordinator::router(state));
    servers
        .metrics_gate
        .open(coordinator::metrics::router(engine.clone(), store.clone()));
    tokio::spawn(clock_watch.watch(servers.stop_rx.clone()));
    tokio::spawn(coordinator::run_end_relay::relay(
        store.clone(),
        engine.clone(),
        servers.stop_rx.clone(),
    ));
    // A `--recovery-only` instance runs the worker too: its leases are
    // receipt lookups only (reads, for `reconcile`), never dispatches.
    let mut worker = tokio::spawn(coordinator::work(
        engine,
        WORKER_SAFETY_POLL,
        servers.stop_rx.clone(),
    ));
    tracing::info!(bind = %runtime.deployment.listener.bind, recovery_only = args.recovery_only, "serving");
    stopping::tell_service_manager(sd_notify::NotifyState::Ready);
    let exit = serve_until_stop_or_fence(&mut signal, &mut worker).await;
    let stopping = std::time::Instant::now();
    // Waits for runs' ends answer at once, so the drain is not held up.
    run_ends.close();
    shut_down(servers, worker, &journal, stopping::drain_budget(&traces)).await;
    stopping::flush_traces(traces, stopping).await;
    Ok(exit)
}

/// The service's traces (`coordinator::telemetry`), `None` when off. A
/// variable that names another protocol or an unusable endpoint refuses
/// startup (`deployment.refused`, reason `coordinator.runtime.telemetry-export`).
fn start_traces(
    config: &RuntimeConfig,
) -> Result<Option<coordinator::telemetry::Traces>, ExitCode> {
    match coordinator::telemetry::start(config, tokio::runtime::Handle::current()) {
        Ok(Some(traces)) => {
            tracing::info!(endpoint = %traces.export.endpoint, source = traces.export.source, "traces: exporting (OTLP/HTTP protobuf)");
            Ok(Some(traces))
        }
        Ok(None) => Ok(None),
        Err((reason, message)) => {
            tracing::error!(code = "deployment.refused", reason, "{message}");
            Err(ExitCode::from(1))
        }
    }
}

/// The runtime file once checked: the check (with its verified pinned
/// packages), the configuration and its `deployment` section.
struct CheckedRuntimeFile {
    check: RuntimeCheck,
    config: RuntimeConfig,
    deployment: Deployment,
}

/// Checks the runtime file and its pinned packages (deployment mode). Any
/// error finding refuses as `deployment.refused`, naming every finding and
/// the first one's code as `reason`; so does a file without `deployment`.
fn read_runtime_file(path: &std::path::Path) -> Result<CheckedRuntimeFile, ExitCode> {
    let display = path.display().to_string();
    let checked = check_runtime_file(path, &display, None, Mode::Deployment);
    let refused: Vec<String> = checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{} {}", d.code, d.message))
        .collect();
    let (Some(config), true) = (checked.config.clone(), refused.is_empty()) else {
        let reason = checked
            .diagnostics
            .iter()
            .find(|d| d.is_error())
            .map(|d| d.code.to_string())
            .unwrap_or_default();
        let next = format!(
            "run `coordinatorctl --runtime-config {display} check` for every finding with its line"
        );
        tracing::error!(
            code = "deployment.refused",
            reason,
            next,
            "{}",
            refused.join("; ")
        );
        return Err(ExitCode::from(1));
    };
    let Some(deployment) = config.deployment.clone() else {
        return Err(refuse(
            "deployment.refused",
            "the runtime file has no deployment",
        ));
    };
    Ok(CheckedRuntimeFile {
        check: checked,
        config,
        deployment,
    })
}

/// Everything read through the runtime file's secret providers before a
/// listener is bound, so a missing or unusable key refuses at once.
struct DeploymentSecrets {
    /// The one reader of secrets (`coordinator_runtime::secrets`).
    resolver: SecretResolver,
    /// The state keyring, admission and audit keys.
    keys: DeploymentKeys,
    /// Each event source's signing key.
    event_sources: EventSources,
    /// The review-completion (binding, token) pairs.
    completions: Completions,
    /// Where the token issuer's keys come from.
    key_source: KeySource,
    /// The product adapter, with the connections' signing keys checked.
    adapter: HttpAdapter,
}

/// Reads every secret the service needs, in this order: the deployment's
/// keys, the event sources' signing keys, the completion tokens, the
/// issuer's key source, the connections' signing keys (each checked
/// usable now, not at the first dispatch), then the product adapter.
fn read_deployment_secrets(
    config: &RuntimeConfig,
    deployment: &Deployment,
) -> Result<DeploymentSecrets, ExitCode> {
    // The one reader of secrets (`coordinator_runtime::secrets`): keys,
    // event source keys, completion tokens and connection signing keys
    // alike.
    let resolver = SecretResolver::new(&config.secret_providers);
    let keys = load_keys(&resolver, deployment).map_err(refuse_secret)?;
    let event_sources = read_event_source_keys(config, deployment, &resolver)?;
    let completions = read_completion_tokens(config, &resolver)?;
    let key_source = Verifier::source_for(&deployment.authentication)
        .map_err(|e| refuse("deployment.refused", &e))?;
    check_connection_signing_keys(config, &resolver)?;
    let adapter = HttpAdapter::new(Arc::new(resolver.clone()))
        .map_err(|e| refuse("deployment.refused", &e.to_string()))?;
    Ok(DeploymentSecrets {
        resolver,
        keys,
        event_sources,
        completions,
        key_source,
        adapter,
    })
}

/// Each event source's signing key, read once (SPEC §2.4). A missing,
/// unsafe or short key refuses startup like every key file; an event
/// source whose URI is the token issuer would let a token caller own the
/// runs its events start, so it is refused too.
fn read_event_source_keys(
    config: &RuntimeConfig,
    deployment: &Deployment,
    resolver: &SecretResolver,
) -> Result<EventSources, ExitCode> {
    let mut event_sources = EventSources::default();
    for (name, es) in &config.event_sources {
        if es.source == deployment.authentication.issuer {
            return Err(refuse(
                "deployment.refused",
                &format!("event source `{name}`: its source URI is the token issuer's; runs it starts would belong to a token caller"),
            ));
        }
        let key = resolver
            .resolve(&es.signing_key_ref)
            .map_err(refuse_secret)?;
        if let Err(e) = event_sources.add(name, &es.source, key.bytes().to_vec()) {
            return Err(refuse("deployment.refused", &e.to_string()));
        }
    }
    Ok(event_sources)
}

/// The review-completion credentials: the recipient binding and bearer
/// token of each Casework connection with a `completion` block.
fn read_completion_tokens(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
) -> Result<Completions, ExitCode> {
    let mut completions = Completions::default();
    for (name, c) in &config.connections {
        if let Connection::CaseworkReviewProducer(cw) = c {
            if let Some(done) = &cw.completion {
                match resolver.resolve_completion_token(&done.bearer_token_ref) {
                    Ok(t) => completions.add(&done.recipient_binding, t.bytes().to_vec()),
                    Err(e) => {
                        return Err(refuse_secret_of(
                            &format!("connection `{name}` completion token: "),
                            e,
                        ))
                    }
                }
            }
        }
    }
    Ok(completions)
}

/// Every connection's signing key must be readable and usable now, not at
/// the first dispatch.
fn check_connection_signing_keys(
    config: &RuntimeConfig,
    resolver: &SecretResolver,
) -> Result<(), ExitCode> {
    for (name, c) in &config.connections {
        if let Some(auth) = c.authorization() {
            match check_signing_key(resolver, auth) {
                Ok(()) => {}
                Err(TokenError::Secret(e)) => {
                    return Err(refuse_secret_of(
                        &format!("connection `{name}` signing key: "),
                        e,
                    ))
                }
                Err(e) => {
                    return Err(refuse(
                        "deployment.refused",
                        &format!("connection `{name}` ({}): {e}", auth.signing_key_ref.0),
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The API listener and, when `deployment.metricsListener` is set, the
/// metrics listener with its address.
struct BoundListeners {
    api: tokio::net::TcpListener,
    metrics: Option<(tokio::net::TcpListener, String)>,
}

/// Binds the API listener and the metrics listener, if any; a port that
/// cannot be listened on refuses as `deployment.refused`.
async fn bind_listeners(deployment: &Deployment) -> Result<BoundListeners, ExitCode> {
    // Listeners before the store (a taken port refuses at once, and
    // `/ready` answers while the database is awaited), the journal last: a
    // refused start leaves no empty journal file behind.
    let api = match tokio::net::TcpListener::bind(&deployment.listener.bind).await {
        Ok(l) => l,
        Err(e) => {
            return Err(refuse(
                "deployment.refused",
                &format!(
                    "deployment.listener.bind: cannot listen on {}: {e}",
                    deployment.listener.bind
                ),
            ))
        }
    };
    let metrics = match &deployment.metrics_listener {
        Some(m) => match tokio::net::TcpListener::bind(&m.bind).await {
            Ok(l) => Some((l, m.bind.clone())),
            Err(e) => {
                return Err(refuse(
                    "deployment.refused",
                    &format!(
                        "deployment.metricsListener.bind: cannot listen on {}: {e}",
                        m.bind
                    ),
                ))
            }
        },
        None => None,
    };
    Ok(BoundListeners { api, metrics })
}

/// The API and metrics servers, serving through their gates, and the
/// channel that stops them (and the worker).
struct GatedServers {
    stop_tx: tokio::sync::watch::Sender<bool>,
    stop_rx: tokio::sync::watch::Receiver<bool>,
    /// The code `/ready` answers while the store is awaited.
    waiting_reason: coordinator::WaitingReason,
    /// The API's gate: the waiting router until the store is open.
    api: Gate,
    /// The metrics listener's gate (served only when it is configured).
    metrics_gate: Gate,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    metrics: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// Serves at once; the gates hand requests to the real routers once the
/// store is open and checked.
fn serve_gates_while_store_awaited(listeners: BoundListeners) -> GatedServers {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let waiting_reason = coordinator::WaitingReason::default();
    let api = Gate::new(coordinator::waiting_router(waiting_reason.clone()));
    let mut server_stop = stop_rx.clone();
    let server = tokio::spawn(coordinator::gate::serve(
        listeners.api,
        api.clone(),
        async move {
            let _ = server_stop.wait_for(|s| *s).await;
        },
    ));
    let metrics_gate = Gate::new(coordinator::metrics::waiting_router());
    let metrics = listeners.metrics.map(|(listener, bind)| {
        let mut metrics_stop = stop_rx.clone();
        tracing::info!(bind = %bind, "serving metrics");
        tokio::spawn(coordinator::gate::serve(
            listener,
            metrics_gate.clone(),
            async move {
                let _ = metrics_stop.wait_for(|s| *s).await;
            },
        ))
    });
    GatedServers {
        stop_tx,
        stop_rx,
        waiting_reason,
        api,
        metrics_gate,
        server,
        metrics,
    }
}

/// A stop signal while the store was awaited: the API server drains
/// (within the grace) and the process exits 0.
async fn stop_before_store_open(servers: GatedServers, drain: Duration) -> ExitCode {
    tracing::info!("stopping before the store was open");
    let _ = servers.stop_tx.send(true);
    let _ = tokio::time::timeout(drain, servers.server).await;
    ExitCode::SUCCESS
}

/// The engine over the open store: the runtime file's workflows and
/// connections, this process's worker id, and the worker's settings.
fn build_engine(
    runtime: &CheckedRuntimeFile,
    clock: Arc<dyn Clock>,
    recovery_only: bool,
    keys: &DeploymentKeys,
    adapter: HttpAdapter,
    store: Arc<Store>,
) -> Result<Engine, ExitCode> {
    let config = &runtime.config;
    let definitions: Vec<_> = runtime
        .check
        .packages
        .iter()
        .map(|p| p.definition.clone())
        .collect();
    let worker_id = format!("{}-{}", std::process::id(), uuid_like());
    let mut engine_config = EngineConfig::new(&runtime.deployment.database_id, &worker_id)
        .with_request_timeout(longest_timeout_seconds(config.connections.values()));
    engine_config.observation_floor_seconds = config.observation.minimum_interval_seconds;
    engine_config.recovery_only = recovery_only;
    // Each of the worker's lanes leases a few jobs per tick, so the lanes
    // share the due work instead of the first taking it all.
    engine_config.batch = JOBS_PER_TICK;
    Engine::new(
        engine_config,
        store,
        clock,
        Arc::new(adapter),
        keys.admission.clone(),
        config
            .connections
            .clone()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        &definitions,
    )
    .map_err(|e| refuse("deployment.refused", &e.to_string()))
}

/// The audit journal: one file per process beside `deployment.auditFile`
/// (docs/runtime.md); a service that cannot audit does not serve.
fn open_audit_journal(deployment: &Deployment) -> Result<Arc<AuditJournal>, ExitCode> {
    match AuditJournal::open(std::path::Path::new(&deployment.audit_file)) {
        Ok(j) => Ok(Arc::new(j)),
        Err(e) => Err(refuse(
            "deployment.refused",
            &format!("the audit journal cannot be opened: {e}"),
        )),
    }
}

/// The restore epoch this process works under: a restore hold placed from
/// now on fences it (`restore.lease-incompatible`).
async fn adopt_restore_epoch(engine: &Engine, recovery_only: bool) {
    // (Should the store drop away just now, the first lease adopts it.)
    // (A `--recovery-only` instance states no epoch: it never dispatches.)
    if !recovery_only {
        match engine.worker.adopt_restore_epoch().await {
            Ok(epoch) => tracing::info!(restore_epoch = epoch, "restore epoch adopted"),
            Err(e) => tracing::warn!(
                code = "store-unavailable",
                "restore epoch not read yet: {e}"
            ),
        }
    }
}

/// Serves until `signal` (exit 0) or until the worker stops early, which
/// it does only when the engine is fenced (exit 1).
async fn serve_until_stop_or_fence<S>(
    signal: &mut S,
    worker: &mut tokio::task::JoinHandle<()>,
) -> ExitCode
where
    S: std::future::Future<Output = ()> + Unpin,
{
    let mut exit = ExitCode::SUCCESS;
    tokio::select! {
        () = signal => {}
        _ = worker => {
            // The worker stops early only when the engine is fenced: a
            // restore hold was placed after this process started. It must
            // not serve on (the engine logged `restore.lease-incompatible`).
            tracing::error!(code = "restore.lease-incompatible", next = "start a new process once the restore hold is released", "stopping: a restore hold was placed after this process started");
            exit = ExitCode::from(1);
        }
    }
    exit
}

/// Stops the servers and the worker and waits for them for at most
/// `drain` ([`stopping::drain_budget`]); after a full drain, removes this process's
/// audit journal if it holds nothing.
async fn shut_down(
    servers: GatedServers,
    mut worker: tokio::task::JoinHandle<()>,
    journal: &AuditJournal,
    drain: Duration,
) {
    tracing::info!("stopping");
    stopping::tell_service_manager(sd_notify::NotifyState::Stopping);
    let _ = servers.stop_tx.send(true);
    let drained = tokio::time::timeout(drain, async {
        if !worker.is_finished() {
            let _ = (&mut worker).await;
        }
        if let Some(m) = servers.metrics {
            let _ = m.await;
        }
        let _ = servers.server.await;
    })
    .await;
    if drained.is_err() {
        tracing::warn!("shutdown grace elapsed; leaving open requests");
    } else {
        // Nothing is served any more: a process that audited nothing
        // leaves no empty journal file behind (a killed one still does).
        match journal.discard_if_empty() {
            Ok(true) => {
                tracing::info!(path = %journal.path().display(), "removed this process's empty audit journal")
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(path = %journal.path().display(), "the empty audit journal could not be removed: {e}")
            }
        }
    }
}

fn uuid_like() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{t:x}")
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
