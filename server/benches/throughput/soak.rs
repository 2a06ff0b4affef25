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

use std::io::{BufRead, Seek};
use std::sync::atomic::AtomicBool;

use super::*;

/// How long one admission is retried (same key) before it is given up.
const RETRY_FOR: Duration = Duration::from_secs(300);

/// The tables whose dead tuples and size each row shows, in this order.
const TABLES: [&str; 4] = ["runs", "jobs", "run_counts", "spent_keys"];

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

/// What the tasks share.
struct Soak {
    client: Client,
    /// The one start body (the same `sendAfter`, in the past, for every
    /// run and every retry: a retry must send what the first attempt did).
    body: String,
    poll: Duration,
    /// (index, run id) of each admitted run.
    admitted: Mutex<Vec<(usize, String)>>,
    admitted_n: AtomicUsize,
    /// Runs whose admission was refused (4xx) or given up: the reason.
    not_admitted: Mutex<Vec<String>>,
    /// Admission attempts that failed and were retried, by reason.
    retries: Mutex<BTreeMap<String, usize>>,
    /// Admissions answered 200: an earlier attempt had admitted the run.
    replayed: AtomicUsize,
    admitting: AtomicUsize,
    following: AtomicUsize,
    stop_following: AtomicBool,
    stop_scraping: AtomicBool,
    /// Admission-to-finished of the followed runs: since the last row,
    /// and all of them.
    latency: Mutex<(Vec<Duration>, Vec<Duration>)>,
    /// Followed runs that ended in another state than `finished`.
    followed_other: Mutex<BTreeMap<String, usize>>,
    /// Answered scrapes' durations since the last row and all; failures
    /// since the last row and all (with the last reason); answers without
    /// `coordinator_store_ready 1` (the store was not answering).
    scrapes: Mutex<Scrapes>,
}

#[derive(Default)]
struct Scrapes {
    interval: Vec<Duration>,
    all: Vec<Duration>,
    failed_interval: usize,
    failed: usize,
    last_failure: String,
    store_not_ready: usize,
}

/// One reading of the database for a row.
struct DbReading {
    connections: i64,
    /// (dead tuples, total bytes) per table of TABLES (`None` if missing).
    tables: Vec<Option<(i64, i64)>>,
    lsn: f64,
    states: BTreeMap<String, i64>,
}

/// The file bench-soak.sh keeps.
#[derive(Default)]
struct Pids {
    postmaster: Option<u32>,
    coordinators: Vec<u32>,
    kills: u64,
    pg_restarts: u64,
}

pub(crate) async fn run(a: SoakArgs) -> Result<(), Failure> {
    let t = &a.target;
    if a.rate <= 0.0 || !a.rate.is_finite() {
        return Err(format!("--rate must be positive, got {}", a.rate));
    }
    if a.metrics_urls.len() != t.bases.len() {
        return Err("give one --metrics-url per --base".into());
    }
    if let Some(pid) = a.watch_pid {
        // bench.sh stops what it started; the generator is a background
        // job it may not reach (SIGINT is ignored by background jobs), so
        // it goes once bench.sh is gone.
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    eprintln!("throughput soak: process {pid} is gone; stopping");
                    std::process::exit(1);
                }
            }
        });
    }
    let client = Client::new(t)?;
    let past = rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(1));
    let body = json!({"workflow": client.workflow, "revision": client.revision,
        "input": {"applicationId": client.application_id, "sendAfter": past}})
    .to_string();
    let s = Arc::new(Soak {
        client,
        body,
        poll: Duration::from_millis(a.poll_ms.max(1)),
        admitted: Mutex::new(Vec::new()),
        admitted_n: AtomicUsize::new(0),
        not_admitted: Mutex::new(Vec::new()),
        retries: Mutex::new(BTreeMap::new()),
        replayed: AtomicUsize::new(0),
        admitting: AtomicUsize::new(0),
        following: AtomicUsize::new(0),
        stop_following: AtomicBool::new(false),
        stop_scraping: AtomicBool::new(false),
        latency: Mutex::new((Vec::new(), Vec::new())),
        followed_other: Mutex::new(BTreeMap::new()),
        scrapes: Mutex::new(Scrapes::default()),
    });

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
    println!("| min | RSS MiB 1 / 2 | fds 1 / 2 | DB conns | runs dead / MiB | jobs dead / MiB | run_counts dead / MiB | spent_keys dead / MiB | WAL MiB | to finished p50 / p99 ms (n) | admitted | finished | held | scrape p99 ms | scrape fails | kills / PG restarts |");
    println!("|----:|---------------|-----------|---------:|-----------------|-----------------|-----------------------|-----------------------|--------:|------------------------------|---------:|---------:|-----:|--------------:|-------------:|--------------------:|");

    let began = Instant::now();
    let until = began + Duration::from_secs(a.seconds);

    // The scrapers.
    let mut scrapers = Vec::new();
    for url in &a.metrics_urls {
        let (s, url, every) = (s.clone(), url.clone(), a.scrape_every.max(1));
        scrapers.push(tokio::spawn(
            async move { scrape_loop(s, url, every).await },
        ));
    }

    // The admissions: one task per run at its time.
    let admissions = {
        let (s, rate, sample_every) = (s.clone(), a.rate, a.sample_every.max(1));
        tokio::spawn(async move {
            let mut i = 0usize;
            loop {
                let at = began + Duration::from_secs_f64(i as f64 / rate);
                if at >= until {
                    return i;
                }
                tokio::time::sleep_until(at.into()).await;
                s.admitting.fetch_add(1, Ordering::SeqCst);
                let s2 = s.clone();
                tokio::spawn(async move {
                    admit(&s2, i, i.is_multiple_of(sample_every)).await;
                    s2.admitting.fetch_sub(1, Ordering::SeqCst);
                });
                i += 1;
            }
        })
    };

    // The rows, while admitting.
    let mut rows = Rows {
        namespace: namespace.clone(),
        last_lsn: baseline.lsn,
        baseline,
        initial,
        began,
    };
    let mut k = 1u64;
    loop {
        let at = began + Duration::from_secs(k * a.report_every.max(1));
        if at >= until {
            break;
        }
        tokio::time::sleep_until(at.into()).await;
        let row = rows.row(&a, &s).await;
        println!("{row}");
        k += 1;
    }
    let started = admissions.await.map_err(|e| e.to_string())?;
    let row = rows.row(&a, &s).await;
    println!("{row}");
    println!();

    // The drain: the admissions still retrying, then every run's end.
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
    for scraper in scrapers {
        scraper.await.map_err(|e| e.to_string())?;
    }

    // The checks.
    let mut failures: Vec<String> = Vec::new();
    let admitted: Vec<(usize, String)> = std::mem::take(&mut *s.admitted.lock().unwrap());
    let not_admitted = s.not_admitted.lock().unwrap().clone();
    if !not_admitted.is_empty() {
        failures.push(format!(
            "{} of {started} runs not admitted, e.g. {}",
            not_admitted.len(),
            not_admitted
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if still_running {
        failures.push(format!(
            "runs still running {} s after the admissions stopped",
            a.drain_seconds
        ));
    }
    let v = verify(&s, &admitted).await?;
    failures.extend(v.failures.iter().cloned());
    let finished = v.states.get("finished").copied().unwrap_or(0);
    let held = v.states.get("attention").copied().unwrap_or(0);
    let messages = match (&t.sandbox_log, log_start) {
        (Some(file), Some(from)) => {
            // The sandbox prints Messaging's requests every half second.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let (line, bad) = check_soak_messages(file, from, finished, held)?;
            failures.extend(bad);
            line
        }
        _ => "messages not checked (no --sandbox-log)".to_owned(),
    };

    // The summary.
    let secs = a.seconds as f64;
    let (p50, p99, max, n) = {
        let mut all = s.latency.lock().unwrap().1.clone();
        all.sort_unstable();
        (
            percentile(&all, 0.50),
            percentile(&all, 0.99),
            all.last().copied().unwrap_or_default(),
            all.len(),
        )
    };
    let followed_other = s.followed_other.lock().unwrap().clone();
    let retries = s.retries.lock().unwrap().clone();
    let (sc_p99, sc_max, sc_n, sc_failed, sc_last, sc_not_ready) = {
        let sc = s.scrapes.lock().unwrap();
        let mut all = sc.all.clone();
        all.sort_unstable();
        (
            percentile(&all, 0.99),
            all.last().copied().unwrap_or_default(),
            all.len() + sc.failed,
            sc.failed,
            sc.last_failure.clone(),
            sc.store_not_ready,
        )
    };
    let pids = read_pids(a.pid_file.as_ref(), &rows.initial);
    println!("== soak summary");
    println!(
        "  admitted                   {} runs in {secs:.0} s ({:.1}/s; {started} started at {} runs/s), {} answered 200 to a retry (admitted by an earlier attempt)",
        admitted.len(),
        admitted.len() as f64 / secs,
        a.rate,
        s.replayed.load(Ordering::SeqCst)
    );
    println!(
        "  retried admissions         {}",
        if retries.is_empty() {
            "none".to_owned()
        } else {
            retries
                .iter()
                .map(|(k, n)| format!("{n} x {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    println!(
        "  drain                      {} after the admissions stopped",
        if still_running {
            format!("runs still running after {} s", a.drain_seconds)
        } else {
            format!("no run running {:.0} s", drained_in.as_secs_f64())
        }
    );
    println!("  runs read back             {}", v.line);
    for line in &v.held_where {
        println!("    held: {line}");
    }
    println!("  messages                   {messages}");
    println!(
        "  admission to finished      p50 {} ms, p99 {} ms, max {} ms over {n} followed runs{}",
        ms(p50),
        ms(p99),
        ms(max),
        if followed_other.is_empty() {
            String::new()
        } else {
            format!(
                " (and {} that ended otherwise: {followed_other:?})",
                followed_other.values().sum::<usize>()
            )
        }
    );
    println!(
        "  /metrics scrapes           {sc_n}, {sc_failed} failed{}, {sc_not_ready} answered without the store's series; answered p99 {} ms, max {} ms",
        if sc_failed > 0 {
            format!(" (last: {sc_last})")
        } else {
            String::new()
        },
        ms(sc_p99),
        ms(sc_max)
    );
    println!(
        "  faults                     {} kill -9, {} PostgreSQL restarts",
        pids.kills, pids.pg_restarts
    );
    let mut r = Report::new(t);
    r.keep("rate", a.rate);
    r.keep("admitted", admitted.len());
    r.keep("finished", finished);
    r.keep("attention", held);
    r.keep("p50_ms", ms(p50));
    r.keep("p99_ms", ms(p99));
    r.keep("scrape_failures", sc_failed);
    r.write()?;
    if failures.is_empty() {
        println!("  checks                     passed");
        Ok(())
    } else {
        for f in &failures {
            println!("  FAILED                     {f}");
        }
        Err(format!("the soak's checks failed: {}", failures.join("; ")))
    }
}

/// Starts run `i` (key `<prefix>-<i>`), retrying the same key on the next
/// base until an answer that is not an outage; follows it if `follow`.
async fn admit(s: &Arc<Soak>, i: usize, follow: bool) {
    let c = &s.client;
    let key = format!("{}-{i}", c.key_prefix);
    let n = c.bases.len();
    let mut b = i % n;
    let mut backoff = Duration::from_millis(200);
    let began = Instant::now();
    loop {
        let sent = c
            .http
            .post(format!("{}/v1/runs", c.bases[b]))
            .bearer_auth(c.producer.get())
            .header("idempotency-key", &key)
            .header("content-type", "application/json")
            .body(s.body.clone())
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        let reason = match sent {
            Ok(r) => {
                let status = r.status().as_u16();
                let text = r.text().await.unwrap_or_default();
                match status {
                    200 | 201 => {
                        let run = serde_json::from_str::<Value>(&text)
                            .ok()
                            .and_then(|v| v["run"].as_str().map(str::to_owned));
                        let Some(run) = run else {
                            s.not_admitted
                                .lock()
                                .unwrap()
                                .push(format!("{key}: {status} without a run: {text}"));
                            return;
                        };
                        let answered = Instant::now();
                        if status == 200 {
                            s.replayed.fetch_add(1, Ordering::SeqCst);
                        }
                        s.admitted.lock().unwrap().push((i, run.clone()));
                        s.admitted_n.fetch_add(1, Ordering::SeqCst);
                        if follow {
                            s.following.fetch_add(1, Ordering::SeqCst);
                            let s2 = s.clone();
                            tokio::spawn(async move {
                                follow_run(&s2, &run, answered, i).await;
                                s2.following.fetch_sub(1, Ordering::SeqCst);
                            });
                        }
                        return;
                    }
                    429 | 500..=599 => {
                        let code = serde_json::from_str::<Value>(&text)
                            .ok()
                            .and_then(|v| v["code"].as_str().map(str::to_owned))
                            .unwrap_or_default();
                        format!("{status} {code}").trim_end().to_owned()
                    }
                    _ => {
                        s.not_admitted
                            .lock()
                            .unwrap()
                            .push(format!("{key}: answered {status}: {text}"));
                        return;
                    }
                }
            }
            Err(e) if e.is_connect() => "connection refused".to_owned(),
            Err(e) if e.is_timeout() => "timeout (30 s)".to_owned(),
            Err(_) => "connection lost".to_owned(),
        };
        *s.retries.lock().unwrap().entry(reason.clone()).or_insert(0) += 1;
        if began.elapsed() > RETRY_FOR {
            s.not_admitted.lock().unwrap().push(format!(
                "{key}: given up after {} s (last: {reason})",
                RETRY_FOR.as_secs()
            ));
            return;
        }
        b = (b + 1) % n;
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// GETs `run` until it leaves `running`; keeps its admission-to-finished
/// time: from the POST's answer to the answer of the first GET that saw
/// it `finished`. The GETs are at t, 2t, 4t, ... after the POST's answer
/// until the gap reaches `poll`, then every `poll`, where t is 2 to 4 ms,
/// spread evenly over the followed runs (on a log scale, by `i`): cheap
/// (log2 of the time in GETs), and a time's overshoot is a factor of 1 to
/// 2 that varies from run to run, so the percentiles move smoothly with
/// the true ones (with one fixed schedule, a median near one of its
/// steps jumps from step to step between intervals).
async fn follow_run(s: &Soak, run: &str, answered: Instant, i: usize) {
    let n = s.client.bases.len();
    let mut b = 0usize;
    let path = format!("/v1/runs/{run}");
    // The fractional part of i times the golden ratio: evenly spread.
    let u = (i as f64 * 0.618_033_988_749_895).fract();
    let mut at = Duration::from_secs_f64(0.002 * 2f64.powf(u));
    while !s.stop_following.load(Ordering::SeqCst) {
        tokio::time::sleep_until((answered + at).into()).await;
        at = if at < s.poll { at * 2 } else { at + s.poll };
        let state = match s.get(b, &path).await {
            Ok((200, v)) => v["state"].as_str().unwrap_or("?").to_owned(),
            _ => {
                b = (b + 1) % n;
                continue;
            }
        };
        match state.as_str() {
            "running" => {}
            "finished" => {
                let d = answered.elapsed();
                let mut l = s.latency.lock().unwrap();
                l.0.push(d);
                l.1.push(d);
                return;
            }
            other => {
                *s.followed_other
                    .lock()
                    .unwrap()
                    .entry(other.to_owned())
                    .or_insert(0) += 1;
                return;
            }
        }
    }
}

async fn scrape_loop(s: Arc<Soak>, url: String, every: u64) {
    let mut tick = tokio::time::interval(Duration::from_secs(every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if s.stop_scraping.load(Ordering::SeqCst) {
            return;
        }
        let t0 = Instant::now();
        let answer = s
            .client
            .http
            .get(&url)
            .header(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            )
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let outcome = match answer {
            Ok(r) if r.status().as_u16() == 200 => match r.text().await {
                Ok(text) => Ok(text.contains("coordinator_store_ready 1")),
                Err(e) => Err(format!("{url}: body: {e}")),
            },
            Ok(r) => Err(format!("{url}: answered {}", r.status().as_u16())),
            Err(e) if e.is_timeout() => Err(format!("{url}: no answer within 10 s")),
            Err(e) if e.is_connect() => Err(format!("{url}: connection refused")),
            Err(e) => Err(format!("{url}: {e}")),
        };
        let d = t0.elapsed();
        let mut sc = s.scrapes.lock().unwrap();
        match outcome {
            Ok(ready) => {
                sc.interval.push(d);
                sc.all.push(d);
                if !ready {
                    sc.store_not_ready += 1;
                }
            }
            Err(e) => {
                sc.failed_interval += 1;
                sc.failed += 1;
                sc.last_failure = e;
            }
        }
    }
}

impl Soak {
    /// One `GET path` on base `b` as the operator (10 s timeout): the
    /// status and the JSON answer (`Null` if none).
    async fn get(&self, b: usize, path: &str) -> Result<(u16, Value), String> {
        let c = &self.client;
        let r = c
            .http
            .get(format!("{}{path}", c.bases[b]))
            .bearer_auth(c.operator.get())
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        let text = r.text().await.map_err(|e| e.to_string())?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// `GET path` on base `first` (modulo their number), or on any other
    /// that answers: an outage (no answer, 429, 5xx) is retried on the
    /// next base for up to 2 minutes.
    async fn get_retrying(&self, first: usize, path: &str) -> Result<(u16, Value), Failure> {
        let n = self.client.bases.len();
        let began = Instant::now();
        let mut b = first % n;
        loop {
            let last = match self.get(b, path).await {
                Ok((status, v)) if status != 429 && status < 500 => return Ok((status, v)),
                Ok((status, v)) => format!("{status} {v}"),
                Err(e) => e,
            };
            if began.elapsed() > Duration::from_secs(120) {
                return Err(format!("GET {path}: no answer for 120 s (last: {last})"));
            }
            b = (b + 1) % n;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// What one reading task found: runs by state; the runs in an
/// unexpected state (how many, the first few); the held runs; the
/// finished runs' message ids.
#[derive(Default)]
struct Seen {
    states: BTreeMap<String, usize>,
    odd: BTreeMap<String, (usize, Vec<String>)>,
    held: Vec<String>,
    message_ids: Vec<String>,
}

impl Seen {
    fn odd(&mut self, what: String, run: &str) {
        let e = self.odd.entry(what).or_default();
        e.0 += 1;
        if e.1.len() < 3 {
            e.1.push(run.to_owned());
        }
    }
}

/// What reading every run back found.
struct Verified {
    states: BTreeMap<String, usize>,
    line: String,
    held_where: Vec<String>,
    failures: Vec<String>,
}

/// Reads every admitted run back (32 at a time): it must exist and be
/// `finished` with `message-accepted` and a `messageId` of its own, or in
/// `attention` (where those stand: their steps' effects, from inspect).
async fn verify(s: &Arc<Soak>, admitted: &[(usize, String)]) -> Result<Verified, Failure> {
    let runs: Arc<Vec<String>> = Arc::new(admitted.iter().map(|(_, r)| r.clone()).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (s, runs, next) = (s.clone(), runs.clone(), next.clone());
        tasks.spawn(async move {
            let mut seen = Seen::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(run) = runs.get(i) else {
                    return Ok::<_, Failure>(seen);
                };
                let (status, v) = s.get_retrying(i, &format!("/v1/runs/{run}")).await?;
                let state = match status {
                    200 => v["state"].as_str().unwrap_or("?").to_owned(),
                    404 => "missing".to_owned(),
                    other => format!("answered {other}"),
                };
                let outcome = v["outcome"].as_str().unwrap_or("");
                let message = v["output"]["messageId"].as_str().unwrap_or("");
                *seen.states.entry(state.clone()).or_insert(0) += 1;
                match state.as_str() {
                    "finished" if outcome == "message-accepted" && !message.is_empty() => {
                        seen.message_ids.push(message.to_owned());
                    }
                    "finished" => seen.odd(format!("finished {outcome} without a messageId"), run),
                    "attention" => seen.held.push(run.clone()),
                    _ => seen.odd(state, run),
                }
            }
        });
    }
    let mut all = Seen::default();
    let mut message_ids: HashMap<String, usize> = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        let seen = joined.map_err(|e| e.to_string())??;
        for (k, n) in seen.states {
            *all.states.entry(k).or_insert(0) += n;
        }
        for (k, (n, examples)) in seen.odd {
            let e = all.odd.entry(k).or_default();
            e.0 += n;
            e.1.extend(examples);
        }
        all.held.extend(seen.held);
        for m in seen.message_ids {
            *message_ids.entry(m).or_insert(0) += 1;
        }
    }
    let (states, held) = (all.states, all.held);
    let mut failures = Vec::new();
    for (what, (n, examples)) in &all.odd {
        failures.push(format!(
            "{n} admitted runs {what}{}, e.g. {}",
            if what == "missing" { " (lost)" } else { "" },
            examples
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let shared = message_ids.values().filter(|n| **n > 1).count();
    if shared > 0 {
        failures.push(format!(
            "{shared} Messaging message ids are the outcome of more than one run"
        ));
    }
    // Where the held runs stand: each visited step's effect, from inspect.
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for (i, run) in held.iter().take(200).enumerate() {
        let (_, v) = s
            .get_retrying(i, &format!("/v1/runs/{run}/inspect"))
            .await?;
        let steps: Vec<String> = v["steps"]
            .as_array()
            .map(|steps| {
                steps
                    .iter()
                    .filter_map(|st| {
                        let effect = st["effect"].as_str()?;
                        Some(format!(
                            "{} {effect} ({} attempts)",
                            st["name"].as_str().unwrap_or("?"),
                            st["attempts"].as_u64().unwrap_or(0)
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        *by.entry(steps.join(", ")).or_insert(0) += 1;
    }
    let mut held_where: Vec<String> = by.into_iter().map(|(k, n)| format!("{n} x {k}")).collect();
    if !held.is_empty() {
        held_where.push(format!(
            "e.g. {}",
            held.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let line = format!(
        "{} admitted runs: {}",
        runs.len(),
        states
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Verified {
        states,
        line,
        held_where,
        failures,
    })
}

/// Messaging's requests in the sandbox's log from byte `from` on, against
/// the keys before it: a summary line and the failures.
fn check_soak_messages(
    file: &PathBuf,
    from: u64,
    finished: usize,
    held: usize,
) -> Result<(String, Vec<String>), Failure> {
    let before = message_keys(file, 0, Some(from))?;
    let after = message_keys(file, from, None)?;
    let twice = after.values().filter(|(_, p)| *p > 1).count();
    let replayed = after.values().filter(|(n, p)| *n > 1 && *p <= 1).count();
    let again = after.keys().filter(|k| before.contains_key(*k)).count();
    let keys = after.len();
    let mut failures = Vec::new();
    if twice > 0 {
        failures.push(format!(
            "{twice} Messaging keys performed more than once (a message sent twice)"
        ));
    }
    if again > 0 {
        failures.push(format!(
            "{again} Messaging keys of an earlier phase requested again"
        ));
    }
    if keys < finished {
        failures.push(format!(
            "{keys} Messaging keys for {finished} finished runs: a finished run's message is missing"
        ));
    }
    if keys > finished + held {
        failures.push(format!(
            "{keys} Messaging keys for {finished} finished and {held} held runs: more messages than runs"
        ));
    }
    Ok((
        format!(
            "{keys} Messaging keys for {finished} finished + {held} held runs (between {finished} and {}), none performed twice{}, {replayed} requested again and answered from Messaging's record",
            finished + held,
            if twice > 0 { " NOT TRUE" } else { "" }
        ),
        failures,
    ))
}

/// Messaging's requests by key, from byte `from` to byte `to` (or the
/// end) of the sandbox's log: (requests, the highest "performed" count).
fn message_keys(file: &PathBuf, from: u64, to: Option<u64>) -> Result<Messages, Failure> {
    let mut f = std::fs::File::open(file)
        .map_err(|e| format!("cannot read the sandbox log {}: {e}", file.display()))?;
    f.seek(std::io::SeekFrom::Start(from))
        .map_err(|e| e.to_string())?;
    let mut reader = std::io::BufReader::new(f);
    let mut at = from;
    let mut out: Messages = HashMap::new();
    let mut line = String::new();
    loop {
        if to.is_some_and(|to| at >= to) {
            break;
        }
        line.clear();
        let n = reader.read_line(&mut line).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        at += n as u64;
        let Some(rest) = line.strip_prefix("messaging: message request, Idempotency-Key ") else {
            continue;
        };
        let (key, rest) = rest.split_once(' ').unwrap_or((rest.trim_end(), ""));
        let performed = rest
            .strip_prefix("(performed ")
            .and_then(|r| r.split_once(' '))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or(0);
        let e = out.entry(key.to_owned()).or_insert((0, 0));
        e.0 += 1;
        e.1 = e.1.max(performed);
    }
    Ok(out)
}

/// The pid file (or the pids given as arguments).
fn read_pids(file: Option<&PathBuf>, initial: &Pids) -> Pids {
    let fallback = || Pids {
        postmaster: initial.postmaster,
        coordinators: initial.coordinators.clone(),
        kills: initial.kills,
        pg_restarts: initial.pg_restarts,
    };
    let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok()) else {
        return fallback();
    };
    let mut p = Pids::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "postmaster" => p.postmaster = v.parse().ok(),
            "coordinator" => p.coordinators.extend(v.parse::<u32>().ok()),
            "kills" => p.kills = v.parse().unwrap_or(0),
            "pg_restarts" => p.pg_restarts = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    if p.coordinators.is_empty() {
        return fallback();
    }
    p
}

fn open_fds(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|d| d.count())
}

/// `name` quoted as an SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A new connection to the service's database (a row's connection: the
/// last one may not have survived a PostgreSQL restart), retried for up
/// to 30 s.
async fn connect(t: &Target) -> Result<PgConnection, Failure> {
    let url = with_database(&t.stats_url, &t.database);
    let began = Instant::now();
    loop {
        let tried =
            tokio::time::timeout(Duration::from_secs(10), PgConnection::connect(&url)).await;
        let last = match tried {
            Ok(Ok(db)) => return Ok(db),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 10 s".to_owned(),
        };
        if began.elapsed() > Duration::from_secs(30) {
            return Err(format!("cannot connect to the service's database: {last}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The schema holding a table named `run_counts` (the one deployment).
async fn find_namespace(t: &Target) -> Result<String, Failure> {
    let mut db = connect(t).await?;
    let found: Vec<String> = sqlx::query_scalar(
        "SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relname = 'run_counts' AND c.relkind IN ('r', 'p')",
    )
    .fetch_all(&mut db)
    .await
    .map_err(|e| format!("finding the namespace: {e}"))?;
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("no table run_counts in the service's database: pass --namespace".into()),
        many => Err(format!(
            "several deployments ({many:?}) in the service's database: pass --namespace"
        )),
    }
}

async fn read_db(t: &Target, namespace: &str) -> Result<DbReading, Failure> {
    let mut db = connect(t).await?;
    let e = |what: &'static str| move |err: sqlx::Error| format!("reading {what}: {err}");
    let connections: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_one(&mut db)
    .await
    .map_err(e("pg_stat_activity"))?;
    let rows = sqlx::query(
        "SELECT c.relname::text, coalesce(s.n_dead_tup, 0)::bigint, pg_total_relation_size(c.oid)::bigint
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
          WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname = ANY($2)",
    )
    .bind(namespace)
    .bind(TABLES.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    .fetch_all(&mut db)
    .await
    .map_err(e("pg_stat_user_tables"))?;
    let by: HashMap<String, (i64, i64)> = rows
        .into_iter()
        .map(|r| (r.get::<String, _>(0), (r.get(1), r.get(2))))
        .collect();
    let tables = TABLES.iter().map(|n| by.get(*n).copied()).collect();
    let lsn: f64 = sqlx::query_scalar("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::float8")
        .fetch_one(&mut db)
        .await
        .map_err(e("pg_current_wal_lsn"))?;
    let states = sqlx::query(&format!(
        "SELECT state, count(*) FROM {}.runs GROUP BY state",
        ident(namespace)
    ))
    .fetch_all(&mut db)
    .await
    .map_err(e("runs by state"))?
    .into_iter()
    .map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1)))
    .collect();
    let _ = db.close().await;
    Ok(DbReading {
        connections,
        tables,
        lsn,
        states,
    })
}

/// What the rows need besides the shared state.
struct Rows {
    namespace: String,
    /// The database before the soak (runs by state of earlier phases).
    baseline: DbReading,
    initial: Pids,
    /// The LSN at the last row (or the start).
    last_lsn: f64,
    began: Instant,
}

impl Rows {
    /// One row of the table (see the header).
    async fn row(&mut self, a: &SoakArgs, s: &Soak) -> String {
        let minutes = self.began.elapsed().as_secs_f64() / 60.0;
        let pids = read_pids(a.pid_file.as_ref(), &self.initial);
        let pair = |v: Vec<String>| v.join(" / ");
        let rss = pair(
            pids.coordinators
                .iter()
                .map(|p| {
                    rss_kib(*p).map_or("-".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0))
                })
                .collect(),
        );
        let fds = pair(
            pids.coordinators
                .iter()
                .map(|p| open_fds(*p).map_or("-".to_owned(), |n| n.to_string()))
                .collect(),
        );
        let (p50, p99, n) = {
            let mut l = s.latency.lock().unwrap();
            let mut v = std::mem::take(&mut l.0);
            v.sort_unstable();
            (percentile(&v, 0.5), percentile(&v, 0.99), v.len())
        };
        let (sc_p99, sc_failed) = {
            let mut sc = s.scrapes.lock().unwrap();
            let mut v = std::mem::take(&mut sc.interval);
            v.sort_unstable();
            let failed = std::mem::take(&mut sc.failed_interval);
            (percentile(&v, 0.99), failed)
        };
        let (conns, tables, wal, finished, held) = match read_db(&a.target, &self.namespace).await {
            Ok(d) => {
                let wal = (d.lsn - self.last_lsn) / 1_048_576.0;
                self.last_lsn = d.lsn;
                let count = |state: &str| {
                    d.states.get(state).copied().unwrap_or(0)
                        - self.baseline.states.get(state).copied().unwrap_or(0)
                };
                let tables: Vec<String> = d
                    .tables
                    .iter()
                    .map(|t| match t {
                        Some((dead, bytes)) => {
                            format!("{dead} / {:.2}", *bytes as f64 / 1_048_576.0)
                        }
                        None => "-".to_owned(),
                    })
                    .collect();
                (
                    d.connections.to_string(),
                    tables,
                    format!("{wal:.1}"),
                    count("finished").to_string(),
                    count("attention").to_string(),
                )
            }
            Err(e) => {
                eprintln!(
                    "throughput soak: the row at {minutes:.1} min has no database figures: {e}"
                );
                let dash = || "-".to_owned();
                (dash(), vec![dash(); TABLES.len()], dash(), dash(), dash())
            }
        };
        // Read after the database, so that it is never fewer than the runs
        // the database saw finish.
        let admitted = s.admitted_n.load(Ordering::SeqCst);
        format!(
        "| {minutes:.1} | {rss} | {fds} | {conns} | {} | {wal} | {} / {} ({n}) | {admitted} | {finished} | {held} | {} | {sc_failed} | {} / {} |",
        tables.join(" | "),
        ms(p50),
        ms(p99),
        ms(sc_p99),
        pids.kills,
        pids.pg_restarts
    )
    }
}
