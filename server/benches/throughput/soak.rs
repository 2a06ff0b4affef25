//! The `soak` phase (scripts/bench.sh --soak, driven by
//! scripts/bench-soak.sh): a steady load for a long time while the faults
//! of a day happen, a row every few minutes of what must not grow, and at
//! the end the check that nothing was lost or sent twice.
//!
//! The split with scripts/bench-soak.sh: the script owns the processes
//! (the second coordinator, `kill -9` of one coordinator and its start
//! again, PostgreSQL's stop and start) and writes what changes to a small
//! file, `--pid-file` (`key=value` lines, replaced whole by a rename at
//! each change):
//!
//! ```text
//! postmaster=PID
//! coordinator=PID      (one line per process, in --base order)
//! kills=N
//! pg_restarts=N
//! ```
//!
//! This generator owns the load and the measuring, and re-reads that file
//! at each row (without it, the pids given as arguments are used and the
//! fault counts are 0):
//!
//! - runs of the starter (`sendAfter` in the past) are started at a steady
//!   `--rate`, round-robin over the `--base`s, each in its own task; a
//!   refused connection, a timeout, a 429 or a 5xx (a killed process, a
//!   PostgreSQL restart) is retried with the SAME idempotency key on the
//!   next base after a short backoff (200 ms doubling to 2 s, for up to
//!   5 minutes), as a client would; a 200 answer to a retry is the run an
//!   earlier attempt admitted. Never a new key for the same run.
//! - every `--sample-every`th run is followed (`GET /v1/runs/{id}` at t,
//!   2t, 4t, ... after the POST's answer, t between 2 and 4 ms and
//!   different from run to run, then every `--poll-ms`, on any base that
//!   answers) until it leaves `running`: its admission-to-finished time,
//!   from the POST's answer to the answer of the first GET that saw it
//!   `finished`. An upper bound: up to twice the true time (about 1.4
//!   times on average) while the GETs double, up to `--poll-ms` more
//!   after; the API's timestamps are whole seconds, so the generator
//!   cannot do better without polling more often.
//! - each `--metrics-url` is scraped every `--scrape-every` seconds as
//!   Prometheus does (OpenMetrics `Accept`, 10 s timeout): a failure is no
//!   answer or not 200; the durations of the answered scrapes are kept.
//! - every `--report-every` seconds, and once when the admissions stop, a
//!   Markdown table row: RSS and open file descriptors of each coordinator
//!   (/proc), the service database's connections, dead tuples and total
//!   size of the namespace's busiest tables, WAL written in the interval
//!   (`pg_current_wal_lsn()` difference: a restart resets `pg_stat_wal`,
//!   not the LSN), admission-to-finished p50/p99 of the sampled runs that
//!   finished in the interval, runs admitted, finished and held (state
//!   `attention`) so far, scrape p99 and failures in the interval, and the
//!   kills and PostgreSQL restarts so far. Each row opens its own database
//!   connection (the last one may not have survived a restart).
//!
//! After `--seconds` it stops admitting, waits (at most `--drain-seconds`)
//! until no run is `running`, then checks: every admitted run exists and
//! is `finished` (outcome `message-accepted`, each its own `messageId`) or
//! held in `attention` (how many of each, and where the held ones stand);
//! and Messaging's requests since the soak began (the sandbox's log): no
//! key performed twice, no earlier key again, and as many keys as finished
//! runs at least and as finished plus held runs at most (a run held on an
//! unknown effect may or may not have reached Messaging; the log's keys
//! are keyed hashes, not run ids, so the check is by count). A lost run,
//! a message sent twice, a run not admitted, or one still running or in
//! another state fails the phase (exit 1) after the summary.

mod checks;
mod database;
mod follow;
mod load;
mod rows;
mod scrape;
mod shared;
mod summary;

use super::*;

use checks::check_every_admitted_run_and_message;
use database::{find_namespace, read_db};
use load::{spawn_the_admissions_at_a_steady_rate, RETRY_FOR};
use rows::{print_the_table_header, Pids, Rows};
use scrape::spawn_one_scraper_per_metrics_url;
use shared::Soak;
use summary::print_the_summary_keep_the_report_and_pass_or_fail;

/// Arguments of `soak`.
#[derive(Args)]
pub(crate) struct SoakArgs {
    #[command(flatten)]
    pub(crate) target: Target,
    /// Seconds of admissions (then the drain and the checks).
    #[arg(long)]
    pub(crate) seconds: u64,
    /// Runs started per second (over all bases).
    #[arg(long)]
    pub(crate) rate: f64,
    /// Each coordinator's `/metrics` URL, in --base order (repeat).
    #[arg(long = "metrics-url", required = true)]
    pub(crate) metrics_urls: Vec<String>,
    /// The current pids and fault counts, written by bench-soak.sh.
    #[arg(long)]
    pub(crate) pid_file: Option<PathBuf>,
    /// The deployment's namespace (schema); without it, the schema that
    /// holds a table named `run_counts`.
    #[arg(long)]
    pub(crate) namespace: Option<String>,
    /// Seconds between rows.
    #[arg(long, default_value_t = 300)]
    pub(crate) report_every: u64,
    /// Seconds between scrapes of each `/metrics`.
    #[arg(long, default_value_t = 15)]
    pub(crate) scrape_every: u64,
    /// Follow every Nth run to its end (admission-to-finished).
    #[arg(long, default_value_t = 5)]
    pub(crate) sample_every: usize,
    /// Milliseconds between the GETs of a followed run (once the first
    /// ones, 2 to 4 ms after its admission and doubling, are this far
    /// apart).
    #[arg(long, default_value_t = 200)]
    pub(crate) poll_ms: u64,
    /// At most this long, after the admissions, for the runs to end.
    #[arg(long, default_value_t = 600)]
    pub(crate) drain_seconds: u64,
    /// Exit when this process (bench.sh) is gone.
    #[arg(long)]
    pub(crate) watch_pid: Option<u32>,
}

/// How the drain after the admissions went.
struct Drain {
    /// Some run was still `running` when `--drain-seconds` were up.
    still_running: bool,
    /// From the end of the admissions to the first list without a
    /// running run (or to the end of the drain).
    drained_in: Duration,
}

/// The soak phase: the load, a row every `--report-every` seconds, the
/// drain, the checks and the summary. An error if an argument is wrong,
/// the database cannot be read before the soak, or a check failed.
pub(crate) async fn run(a: SoakArgs) -> Result<(), Failure> {
    let t = &a.target;
    if a.rate <= 0.0 || !a.rate.is_finite() {
        return Err(format!("--rate must be positive, got {}", a.rate));
    }
    if a.metrics_urls.len() != t.bases.len() {
        return Err("give one --metrics-url per --base".into());
    }
    if let Some(pid) = a.watch_pid {
        exit_once_the_process_is_gone(pid);
    }
    let s = Arc::new(Soak::new(t, a.poll_ms)?);

    // Before anything: the namespace, the earlier runs' states (the
    // throughput phase's runs are in the same table), the LSN, and where
    // the sandbox's log ends (Messaging's requests from here on are ours).
    let namespace = match &a.namespace {
        Some(n) => n.clone(),
        None => find_namespace(t).await?,
    };
    let baseline = read_db(t, &namespace).await?;
    let log_start = match &t.sandbox_log {
        Some(f) => Some(
            std::fs::metadata(f)
                .map_err(|e| format!("cannot read the sandbox log {}: {e}", f.display()))?
                .len(),
        ),
        None => None,
    };
    let initial = Pids {
        postmaster: Some(t.postmaster_pid),
        coordinators: t.coordinator_pids.clone(),
        kills: 0,
        pg_restarts: 0,
    };

    println!(
        "== soak: {} runs/s for {} s over {} coordinator process(es); every {}th run followed to its end (GETs 2-4 ms after its admission, doubling to every {} ms); /metrics of each scraped every {} s; a row every {} s (namespace {namespace})",
        a.rate,
        a.seconds,
        t.bases.len(),
        a.sample_every,
        a.poll_ms,
        a.scrape_every,
        a.report_every
    );
    println!();
    print_the_table_header();

    let began = Instant::now();
    let until = began + Duration::from_secs(a.seconds);
    let scrapers = spawn_one_scraper_per_metrics_url(&s, &a.metrics_urls, a.scrape_every);
    let admissions =
        spawn_the_admissions_at_a_steady_rate(&s, began, until, a.rate, a.sample_every);
    let mut rows = Rows::new(namespace, baseline, initial, began);
    rows.print_a_row_every_report_interval_until(&a, &s, until)
        .await;
    let started = admissions.await.map_err(|e| e.to_string())?;
    rows.print_the_last_row_and_close_the_table(&a, &s).await;

    let drain = drain(&a, &s).await?;
    for scraper in scrapers {
        scraper.await.map_err(|e| e.to_string())?;
    }
    let checked =
        check_every_admitted_run_and_message(&s, &a, started, drain.still_running, log_start)
            .await?;
    print_the_summary_keep_the_report_and_pass_or_fail(
        &a,
        &s,
        &rows.initial,
        started,
        &drain,
        &checked,
    )
}

/// Exits the generator once process `pid` is gone: bench.sh stops what it
/// started, but the generator is a background job it may not reach
/// (SIGINT is ignored by background jobs). The OTLP sink uses it too.
pub(crate) fn exit_once_the_process_is_gone(pid: u32) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                eprintln!("throughput: process {pid} is gone; stopping");
                std::process::exit(1);
            }
        }
    });
}

/// The drain after the admissions: waits for the admissions still
/// retrying (an error if some are unanswered `--drain-seconds` plus the
/// retry limit later), then, until `--drain-seconds` are up, for a list
/// of running runs that is empty; then stops the followers and the
/// scrapers.
async fn drain(a: &SoakArgs, s: &Soak) -> Result<Drain, Failure> {
    let drain_began = Instant::now();
    let drain_until = drain_began + Duration::from_secs(a.drain_seconds);
    while s.admitting.load(Ordering::SeqCst) > 0 {
        if Instant::now() > drain_until + RETRY_FOR {
            return Err(format!(
                "{} admissions still unanswered after the drain",
                s.admitting.load(Ordering::SeqCst)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut still_running = true;
    while Instant::now() < drain_until {
        match s.get_retrying(0, "/v1/runs?state=running&limit=1").await {
            Ok((200, page)) if page["runs"].as_array().is_some_and(|r| r.is_empty()) => {
                still_running = false;
                break;
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let drained_in = drain_began.elapsed();
    s.stop_following.store(true, Ordering::SeqCst);
    s.stop_scraping.store(true, Ordering::SeqCst);
    while s.following.load(Ordering::SeqCst) > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Drain {
        still_running,
        drained_in,
    })
}
