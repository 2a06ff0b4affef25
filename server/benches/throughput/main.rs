//! The load generator and meter of `scripts/bench.sh`: drives a running
//! `coordinator` (the starter workflow, `follow-up`, served against
//! `coordinator-sandbox`) over HTTP and measures, around each phase, what
//! PostgreSQL and the processes spent:
//!
//! - `throughput`: N runs admitted by C concurrent clients (`sendAfter` in
//!   the past, so the timer is due at once); completed runs per second from
//!   the first admission to the last run seen finished (listing
//!   `state=running` every 100 ms once every run is admitted);
//! - `latency`: one client in a closed loop (start a run, then one
//!   `GET /v1/runs/{id}` with `Prefer: wait=60`, which the service answers
//!   when the run ends, next); admission-to-finished percentiles;
//! - `scale`: many runs waiting on far timers, then a few due each second;
//!   the coordinator's RSS over time and the CPU per second while waiting;
//! - `otlp-sink`: an OTLP/HTTP traces receiver that counts spans, for the
//!   flow phase's tracing setups (otlp_sink.rs).
//!
//! Every phase prints transactions per run (`pg_stat_database`
//! `xact_commit + xact_rollback` of the service's database), statements per
//! run (`pg_stat_statements` calls), WAL per run (`pg_stat_wal`), CPU
//! seconds per run of PostgreSQL (the postmaster, its live children and its
//! reaped children, from `/proc`), of the coordinator process(es), of the
//! sandbox and of this client, and the statements by calls per run. Each
//! run is verified `finished` (`message-accepted`), and Messaging's
//! requests (from the sandbox's log) one per idempotency key, none
//! performed twice.
//!
//! Not a test: `cargo bench` builds it (and `cargo test` does not run it);
//! `scripts/bench.sh` builds it with `cargo bench --no-run` and runs it.
//! Without a subcommand (plain `cargo bench`) it says so and exits 0.
//! Nothing here asserts on time: figures are printed, only wrong results
//! (a run not finished, a message missing or sent twice) fail it.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, Row};

mod client;
mod meter;
mod otlp_sink;
mod scale;
mod soak;

use client::*;
use meter::*;
use scale::*;

/// PostgreSQL flushes a backend's pending `pg_stat_database`/`pg_stat_wal`
/// counters at most every second while busy and at the latest 10 s after it
/// went idle (`PGSTAT_IDLE_INTERVAL`): a phase reads them this long after
/// what ran before it, and this long after its own last request.
const STATS_SETTLE: Duration = Duration::from_secs(11);

#[derive(Parser)]
#[command(
    name = "throughput",
    about = "Load generator and meter of scripts/bench.sh"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Prints N loopback ports that are free now, one a line.
    FreePorts {
        #[arg(default_value_t = 2)]
        n: usize,
    },
    /// Checks the cluster's durability settings and prints them.
    Preflight(Target),
    /// N runs at C concurrent clients; completed runs per second.
    Throughput(ThroughputArgs),
    /// One client in a closed loop; admission-to-finished latency.
    Latency(LatencyArgs),
    /// The service's costs at 1k, 100k and 1M runs held (scale.rs).
    Scale(ScaleArgs),
    /// A steady load for hours with faults injected by bench-soak.sh
    /// (soak.rs).
    Soak(soak::SoakArgs),
    /// Receives OTLP/HTTP traces and counts their spans (otlp_sink.rs).
    OtlpSink(otlp_sink::OtlpSinkArgs),
}

#[derive(Args, Clone)]
struct Target {
    /// A coordinator's base URL (repeat for several processes; admissions
    /// go round-robin).
    #[arg(long = "base", required = true)]
    bases: Vec<String>,
    #[arg(long)]
    producer_token_file: PathBuf,
    #[arg(long)]
    operator_token_file: PathBuf,
    #[arg(long, default_value = "follow-up")]
    workflow: String,
    #[arg(long)]
    revision: String,
    #[arg(long)]
    application_id: String,
    /// A superuser URL of the cluster (its database is replaced by
    /// `postgres` for the meter's own connection).
    #[arg(long)]
    stats_url: String,
    /// The service's database (`pg_stat_database`, `pg_stat_statements`).
    #[arg(long, default_value = "coordinator")]
    database: String,
    #[arg(long)]
    postmaster_pid: u32,
    #[arg(long = "coordinator-pid", required = true)]
    coordinator_pids: Vec<u32>,
    #[arg(long)]
    sandbox_pid: Option<u32>,
    /// The sandbox's standard output (Messaging's requests).
    #[arg(long)]
    sandbox_log: Option<PathBuf>,
    /// Clock ticks per second of `/proc/*/stat` (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100)]
    clk_tck: u64,
    /// Appends `label.key=value` lines here.
    #[arg(long)]
    results: Option<PathBuf>,
    /// Names this phase in the results file.
    #[arg(long, default_value = "phase")]
    label: String,
    /// Idempotency keys are `<prefix>-<i>` (unique per invocation).
    #[arg(long)]
    key_prefix: String,
    /// How many statements to list by calls per run.
    #[arg(long, default_value_t = 15)]
    top: usize,
}

#[derive(Args)]
struct ThroughputArgs {
    #[command(flatten)]
    target: Target,
    #[arg(long, default_value_t = 2000)]
    runs: usize,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

#[derive(Args)]
struct LatencyArgs {
    #[command(flatten)]
    target: Target,
    #[arg(long, default_value_t = 200)]
    runs: usize,
}

type Failure = String;

fn main() -> std::process::ExitCode {
    // `cargo bench` passes `--bench`; the harness is ours.
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let cli = Cli::parse_from(args);
    let Some(command) = cli.command else {
        println!(
            "throughput: the load generator of scripts/bench.sh (which starts PostgreSQL, the sandbox and the service); nothing to do without a subcommand"
        );
        return std::process::ExitCode::SUCCESS;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let done = runtime.block_on(async move {
        match command {
            Command::FreePorts { n } => free_ports(n),
            Command::Preflight(t) => preflight(&t).await,
            Command::Throughput(a) => throughput(a).await,
            Command::Latency(a) => latency(a).await,
            Command::Scale(a) => scale(a).await,
            Command::Soak(a) => soak::run(a).await,
            Command::OtlpSink(a) => otlp_sink::run(a).await,
        }
    });
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("throughput: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn free_ports(n: usize) -> Result<(), Failure> {
    // All bound at once, so the n ports differ.
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot bind a loopback port: {e}"))?;
    for l in &listeners {
        println!("{}", l.local_addr().map_err(|e| e.to_string())?.port());
    }
    Ok(())
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Checks the new messages (those not in `before`): one request per key,
/// none performed twice, `expected` keys. A summary line.
fn check_messages(
    m: &Meter,
    before: &Option<Messages>,
    expected: usize,
) -> Result<String, Failure> {
    let (Some(after), Some(before)) = (m.messages()?, before) else {
        return Ok("messages not checked (no --sandbox-log)".to_owned());
    };
    let new: Vec<(&String, &(usize, usize))> = after
        .iter()
        .filter(|(k, _)| !before.contains_key(*k))
        .collect();
    // The sandbox prints a request with the key's "performed" count at
    // its next half-second tick, so a request it had recorded but not yet
    // performed shows 0: each key must be requested once and never
    // performed twice (every run's outcome, message-accepted, is
    // Messaging's answer to that one request).
    let repeated = new.iter().filter(|(_, (n, p))| *n != 1 || *p > 1).count();
    let old_again = after
        .iter()
        .filter(|(k, v)| before.get(*k).is_some_and(|b| b != *v))
        .count();
    if new.len() != expected || repeated > 0 || old_again > 0 {
        return Err(format!(
            "Messaging saw {} new idempotency keys for {expected} runs ({repeated} of them requested or performed more than once, {old_again} earlier keys again)",
            new.len()
        ));
    }
    Ok(format!(
        "{expected} messages, one idempotency key per run, each requested once, none performed twice"
    ))
}

fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

// ------------------------------------------------------------------ phases

async fn preflight(t: &Target) -> Result<(), Failure> {
    let m = Meter::new(t).await?;
    let version = m.setting("server_version").await?;
    let mut shown = Vec::new();
    for (name, want) in [
        ("fsync", Some("on")),
        ("synchronous_commit", Some("on")),
        ("full_page_writes", Some("on")),
        ("wal_sync_method", None),
        ("shared_buffers", None),
        ("max_connections", None),
        ("shared_preload_libraries", None),
    ] {
        let value = m.setting(name).await?;
        if let Some(want) = want {
            if value != want {
                return Err(format!(
                    "{name} is {value}, not {want}: not a production-durability cluster"
                ));
            }
        }
        shown.push(format!("{name}={value}"));
    }
    if !m
        .setting("shared_preload_libraries")
        .await?
        .contains("pg_stat_statements")
    {
        return Err("pg_stat_statements is not in shared_preload_libraries".into());
    }
    println!("PostgreSQL {version}: {}", shown.join(", "));
    Ok(())
}

async fn throughput(a: ThroughputArgs) -> Result<(), Failure> {
    let t = &a.target;
    let client = Arc::new(Client::new(t)?);
    let m = Meter::new(t).await?;
    println!(
        "== throughput: {} coordinator process(es), {} runs, {} concurrent clients",
        t.bases.len(),
        a.runs,
        a.concurrency
    );
    if client.any_running().await? {
        return Err("runs of an earlier phase are still running".into());
    }
    let messages_before = m.messages()?;
    let counters_before = settled_counters(&m).await?;
    let waits = Waits::start(t).await?;
    let start = measure_start(&m).await?;
    let past = rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(1));
    let admitted = client
        .admit_many(0, a.runs, a.concurrency, move |_| past.clone(), None)
        .await?;
    let admitted_in = start.0.elapsed();
    // Finishing is observed by listing: once every run is admitted, the
    // list of running runs until it is empty.
    let mut polls = 0usize;
    while client.any_running().await? {
        polls += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let end_at = Instant::now();
    let waits = waits.finish().await?;
    let costs = measure_end(&m, a.runs, start, end_at, &counters_before).await?;
    let runs: Vec<String> = admitted.into_iter().map(|(r, _)| r).collect();
    let verified = client.verify_finished(&runs).await?;
    let messages = check_messages(&m, &messages_before, a.runs)?;
    let rate = a.runs as f64 / costs.seconds;
    println!(
        "  completed runs/s           {rate:.1}  ({} runs in {:.2} s from the first admission to the last seen finished; all admitted after {:.2} s)",
        a.runs,
        costs.seconds,
        admitted_in.as_secs_f64()
    );
    println!("  verified                   {verified}; {messages}");
    println!(
        "  observer                   {} list requests after the admissions ({:.3} per run)",
        polls + 1,
        (polls + 1) as f64 / a.runs as f64
    );
    println!("  service's backends         {waits}");
    let mut r = Report::new(t);
    r.keep("runs_per_s", format!("{rate:.1}"));
    print_costs(&costs, t.clk_tck, t.top, &mut r);
    r.write()
}

async fn latency(a: LatencyArgs) -> Result<(), Failure> {
    let t = &a.target;
    let client = Arc::new(Client::new(t)?);
    let m = Meter::new(t).await?;
    println!(
        "== latency: 1 client in a closed loop, {} runs, one GET /v1/runs/{{id}} with Prefer: wait=60 each",
        a.runs
    );
    if client.any_running().await? {
        return Err("runs of an earlier phase are still running".into());
    }
    let messages_before = m.messages()?;
    let counters_before = settled_counters(&m).await?;
    let waits = Waits::start(t).await?;
    let start = measure_start(&m).await?;
    let mut to_finish = Vec::with_capacity(a.runs);
    let mut to_admit = Vec::with_capacity(a.runs);
    let mut runs = Vec::with_capacity(a.runs);
    for i in 0..a.runs {
        let past = rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(1));
        let sent = Instant::now();
        let run = client.start(i, &past).await?;
        let admitted = Instant::now();
        let v = client.wait_for_end(&run).await?;
        if v["state"].as_str() != Some("finished") {
            return Err(format!("run {run} is not finished after its wait: {v}"));
        }
        to_finish.push(admitted.duration_since(sent) + admitted.elapsed());
        to_admit.push(admitted.duration_since(sent));
        runs.push(run);
    }
    let end_at = Instant::now();
    let waits = waits.finish().await?;
    let costs = measure_end(&m, a.runs, start, end_at, &counters_before).await?;
    let verified = client.verify_finished(&runs).await?;
    let messages = check_messages(&m, &messages_before, a.runs)?;
    let mut finish_only: Vec<Duration> = to_finish
        .iter()
        .zip(&to_admit)
        .map(|(f, a)| f.saturating_sub(*a))
        .collect();
    to_finish.sort_unstable();
    to_admit.sort_unstable();
    finish_only.sort_unstable();
    println!(
        "  admission to finished      p50 {} ms, p99 {} ms, max {} ms  (from the POST's answer to the waiting GET's answer)",
        ms(percentile(&finish_only, 0.50)),
        ms(percentile(&finish_only, 0.99)),
        ms(finish_only.last().copied().unwrap_or_default())
    );
    println!(
        "  POST /v1/runs answered in  p50 {} ms, p99 {} ms",
        ms(percentile(&to_admit, 0.50)),
        ms(percentile(&to_admit, 0.99))
    );
    println!(
        "  request to finished        p50 {} ms, p99 {} ms  (from sending the POST)",
        ms(percentile(&to_finish, 0.50)),
        ms(percentile(&to_finish, 0.99))
    );
    println!(
        "  closed loop                {:.1} runs/s; {verified}; {messages}",
        a.runs as f64 / costs.seconds
    );
    println!(
        "  observer                   {} status requests with Prefer: wait=60 (1 per run; included below)",
        a.runs
    );
    println!("  service's backends         {waits}");
    let mut r = Report::new(t);
    r.keep("p50_ms", ms(percentile(&finish_only, 0.50)));
    r.keep("p99_ms", ms(percentile(&finish_only, 0.99)));
    print_costs(&costs, t.clk_tck, 0, &mut r);
    r.write()
}
