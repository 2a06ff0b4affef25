//! The `scale` phase (scripts/bench.sh --scale N): how the service's costs
//! depend on the number of runs it holds. At each level (1k, 100k and 1M
//! runs, those up to N, and N), the deployment holds as many runs waiting
//! on a timer a day ahead and as many ended (admitted the same way, then
//! cancelled: each row is what admission and the cancel action write), and
//! the phase measures admission, `/metrics`, doctor, the run list's first
//! page, a due run's CPU, one retention batch, the coordinator's RSS and
//! the database's size; at the end, each figure as a ratio to the first
//! level's.

use super::*;

/// Arguments of `scale`.
#[derive(Args)]
pub(crate) struct ScaleArgs {
    #[command(flatten)]
    pub(crate) target: Target,
    /// The largest level: runs waiting and runs ended (1,000 to 1,000,000).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) up_to: usize,
    /// Concurrent clients while loading runs.
    #[arg(long, default_value_t = 32)]
    pub(crate) concurrency: usize,
    /// The coordinator's `/metrics` URL.
    #[arg(long)]
    pub(crate) metrics_url: String,
    /// Requests per measured figure (each sequential, one client).
    #[arg(long, default_value_t = 100)]
    pub(crate) samples: usize,
    /// Runs due per second in the due window.
    #[arg(long, default_value_t = 5)]
    pub(crate) due_per_second: usize,
    /// Length of the due window and of the idle window before it.
    #[arg(long, default_value_t = 30)]
    pub(crate) window_seconds: u64,
}

/// Index ranges of the idempotency keys (`<prefix>-<i>`), one per kind of
/// run, so that no two kinds share a key.
const WAITING: usize = 0;
const ENDED: usize = 10_000_000;
const MEASURED: usize = 20_000_000;
const DUE: usize = 30_000_000;

/// The levels measured: 1k, 100k and 1M up to `up_to`, and `up_to`.
fn levels(up_to: usize) -> Vec<usize> {
    let mut out: Vec<usize> = [1_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|l| *l <= up_to)
        .collect();
    if out.last() != Some(&up_to) {
        out.push(up_to);
    }
    out
}

/// What one level measured.
#[derive(Clone, Debug, Default)]
struct Level {
    runs: usize,
    admission: (Duration, Duration),
    metrics: (Duration, Duration),
    doctor: (Duration, Duration),
    list: (Duration, Duration),
    due_coordinator_ms: f64,
    due_postgres_ms: f64,
    retention: Duration,
    retention_erased: u64,
    rss_mib: f64,
    database_mib: f64,
}

/// p50 and p99 of `samples`.
fn p50_p99(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (percentile(&samples, 0.50), percentile(&samples, 0.99))
}

/// `n` sequential requests made by `one`, each timed.
async fn timed<F, Fut>(n: usize, mut one: F) -> Result<Vec<Duration>, Failure>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), Failure>>,
{
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        one(i).await?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// How many idempotency keys of the measured and the due ranges the
/// levels so far have used (each level takes fresh ones).
#[derive(Default)]
struct KeysUsed {
    measured: usize,
    due: usize,
}

pub(crate) async fn scale(a: ScaleArgs) -> Result<(), Failure> {
    let t = &a.target;
    let client = Arc::new(Client::new(t)?);
    let m = Meter::new(t).await?;
    let levels = levels(a.up_to.clamp(1_000, 1_000_000));
    println!(
        "== scale: levels {levels:?} runs waiting (a timer a day ahead) and as many ended (cancelled); 1 coordinator process; {} samples per figure",
        a.samples
    );
    if client.any_running().await? {
        return Err("runs of an earlier phase are still running".into());
    }
    let idle_rss = m.rss_kib() as f64 / 1024.0;
    println!("  coordinator RSS before any run is loaded: {idle_rss:.1} MiB");
    let mut measured: Vec<Level> = Vec::new();
    let (mut waiting, mut ended) = (0usize, 0usize);
    let mut keys = KeysUsed::default();
    for level in levels {
        let began = Instant::now();
        load_waiting(&client, &a, waiting, level).await?;
        waiting = level;
        load_ended(&client, &a, ended, level).await?;
        ended = level;
        println!(
            "  level {level}: {level} waiting and {level} ended runs held (loaded in {:.0} s)",
            began.elapsed().as_secs_f64()
        );
        let quiet = m.quiesce().await?;
        let l = measure_level(&client, &m, &a, level, &mut keys).await?;
        print_level(&l, quiet);
        measured.push(l);
    }
    print_table(&measured);
    for l in &measured {
        println!(
            "  RSS at {} + {}: {:.2}x the idle process's {idle_rss:.1} MiB",
            l.runs,
            l.runs,
            l.rss_mib / idle_rss.max(0.001)
        );
    }
    write_ratios(t, &measured)
}

/// Measures one level of `runs` waiting and ended runs, already loaded and
/// quiesced: admission, `/metrics`, doctor and the list (`a.samples`
/// sequential requests each), a due run's CPU, one retention batch, RSS
/// and the database's size.
async fn measure_level(
    client: &Arc<Client>,
    m: &Meter,
    a: &ScaleArgs,
    runs: usize,
    keys: &mut KeysUsed,
) -> Result<Level, Failure> {
    let mut l = Level {
        runs,
        ..Level::default()
    };
    // Admission (each also a waiting run, counted from here on).
    let far = rfc3339(time::OffsetDateTime::now_utc() + time::Duration::days(1));
    let from = MEASURED + keys.measured;
    l.admission = p50_p99(
        timed(a.samples, |i| {
            let (client, far) = (client.clone(), far.clone());
            async move { client.start(from + i, &far).await.map(|_| ()) }
        })
        .await?,
    );
    keys.measured += a.samples;
    l.metrics = p50_p99(
        timed(a.samples, |_| {
            let (client, url) = (client.clone(), a.metrics_url.clone());
            async move { client.scrape(&url).await }
        })
        .await?,
    );
    l.doctor = p50_p99(
        timed(a.samples, |_| {
            let client = client.clone();
            async move { client.get("/v1/doctor").await.map(|_| ()) }
        })
        .await?,
    );
    l.list = p50_p99(
        timed(a.samples, |_| {
            let client = client.clone();
            async move { client.get("/v1/runs?limit=50").await.map(|_| ()) }
        })
        .await?,
    );
    let (dc, dp) = due_run_cpu(client, m, a, DUE + keys.due).await?;
    keys.due += a.due_per_second * a.window_seconds as usize;
    l.due_coordinator_ms = dc * 1000.0;
    l.due_postgres_ms = dp * 1000.0;
    let t0 = Instant::now();
    let before = rfc3339(time::OffsetDateTime::now_utc());
    let erased = client
        .operate(
            "/v1/retention",
            json!({"before": before, "limit": coordinator_api::MAX_RETENTION_LIMIT}),
        )
        .await?;
    l.retention = t0.elapsed();
    l.retention_erased = erased["erased"].as_u64().unwrap_or(0);
    l.rss_mib = m.rss_kib() as f64 / 1024.0;
    l.database_mib = m.database_size().await? as f64 / 1_048_576.0;
    Ok(l)
}

/// One level's figures on one line (`quiet`: seconds it took to quiesce).
fn print_level(l: &Level, quiet: f64) {
    let [admission, metrics, doctor, list] = [l.admission, l.metrics, l.doctor, l.list]
        .map(|(p50, p99)| format!("{}/{}", ms(p50), ms(p99)));
    println!(
        "    admission p50/p99 {admission} ms, /metrics {metrics} ms, doctor {doctor} ms, list {list} ms, due run {:.2} ms coordinator + {:.2} ms postgres CPU, retention batch {} ms ({} erased), RSS {:.1} MiB, database {:.0} MiB (quiesced in {quiet:.0} s)",
        l.due_coordinator_ms,
        l.due_postgres_ms,
        ms(l.retention),
        l.retention_erased,
        l.rss_mib,
        l.database_mib,
    );
}

/// Writes the report: the last level's p99 of `/metrics`, doctor and the
/// list, and its RSS, each over the first level's.
fn write_ratios(t: &Target, measured: &[Level]) -> Result<(), Failure> {
    let mut r = Report::new(t);
    if let (Some(first), Some(last)) = (measured.first(), measured.last()) {
        r.keep(
            "metrics_p99_ratio",
            format!("{:.2}", ratio(last.metrics.1, first.metrics.1)),
        );
        r.keep(
            "doctor_p99_ratio",
            format!("{:.2}", ratio(last.doctor.1, first.doctor.1)),
        );
        r.keep(
            "list_p99_ratio",
            format!("{:.2}", ratio(last.list.1, first.list.1)),
        );
        r.keep(
            "rss_ratio",
            format!("{:.2}", last.rss_mib / first.rss_mib.max(0.001)),
        );
    }
    r.write()
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// The levels as a table, then each figure over the first level's.
fn print_table(levels: &[Level]) {
    println!("  runs waiting + ended | admission p50/p99 ms | /metrics p50/p99 ms | doctor p50/p99 ms | list p50/p99 ms | due run CPU ms (coord + pg) | retention batch ms | RSS MiB | database MiB");
    for l in levels {
        println!(
            "  {:>9} + {:<9} | {:>7} / {:<7} | {:>7} / {:<7} | {:>7} / {:<7} | {:>7} / {:<7} | {:>6.2} + {:<6.2} | {:>8} | {:>7.1} | {:>8.0}",
            l.runs,
            l.runs,
            ms(l.admission.0),
            ms(l.admission.1),
            ms(l.metrics.0),
            ms(l.metrics.1),
            ms(l.doctor.0),
            ms(l.doctor.1),
            ms(l.list.0),
            ms(l.list.1),
            l.due_coordinator_ms,
            l.due_postgres_ms,
            ms(l.retention),
            l.rss_mib,
            l.database_mib
        );
    }
    let Some(first) = levels.first() else { return };
    for l in levels.iter().skip(1) {
        println!(
            "  {} over {}: admission p99 {:.2}x, /metrics p99 {:.2}x, doctor p99 {:.2}x, list p99 {:.2}x, due run CPU {:.2}x, retention {:.2}x, RSS {:.2}x",
            l.runs,
            first.runs,
            ratio(l.admission.1, first.admission.1),
            ratio(l.metrics.1, first.metrics.1),
            ratio(l.doctor.1, first.doctor.1),
            ratio(l.list.1, first.list.1),
            (l.due_coordinator_ms + l.due_postgres_ms)
                / (first.due_coordinator_ms + first.due_postgres_ms).max(1e-9),
            ratio(l.retention, first.retention),
            l.rss_mib / first.rss_mib.max(0.001),
        );
    }
}

/// Admits runs `from..to` waiting a day ahead, printing progress.
async fn load_waiting(
    client: &Arc<Client>,
    a: &ScaleArgs,
    from: usize,
    to: usize,
) -> Result<(), Failure> {
    if to <= from {
        return Ok(());
    }
    let far = rfc3339(time::OffsetDateTime::now_utc() + time::Duration::days(1));
    let progress = Arc::new(AtomicUsize::new(0));
    let ticker = progress_ticker("waiting admitted", progress.clone(), to - from);
    let done = client
        .admit_many(
            WAITING + from,
            WAITING + to,
            a.concurrency,
            move |_| far.clone(),
            Some(progress),
        )
        .await;
    ticker.abort();
    done.map(|_| ())
}

/// Admits runs `from..to` waiting a day ahead and cancels each: ended
/// runs. In chunks, so that the run ids held stay few.
async fn load_ended(
    client: &Arc<Client>,
    a: &ScaleArgs,
    from: usize,
    to: usize,
) -> Result<(), Failure> {
    if to <= from {
        return Ok(());
    }
    let far = rfc3339(time::OffsetDateTime::now_utc() + time::Duration::days(1));
    let progress = Arc::new(AtomicUsize::new(0));
    let ticker = progress_ticker("ended (admitted, cancelled)", progress.clone(), to - from);
    let mut at = from;
    while at < to {
        let until = (at + 10_000).min(to);
        let far = far.clone();
        let runs = client
            .admit_many(
                ENDED + at,
                ENDED + until,
                a.concurrency,
                move |_| far.clone(),
                None,
            )
            .await?;
        let runs: Arc<Vec<String>> = Arc::new(runs.into_iter().map(|(r, _)| r).collect());
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..a.concurrency.max(1) {
            let (client, runs, next, progress) =
                (client.clone(), runs.clone(), next.clone(), progress.clone());
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(run) = runs.get(i) else {
                        return Ok::<(), Failure>(());
                    };
                    let v = client
                        .operate(
                            &format!("/v1/runs/{run}/cancel"),
                            json!({"reason": "bench-scale"}),
                        )
                        .await?;
                    if v["state"] != "cancelled" {
                        return Err(format!("run {run} cancelled is {}", v["state"]));
                    }
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|e| e.to_string())??;
        }
        at = until;
    }
    ticker.abort();
    Ok(())
}

/// Prints `label` progress every 30 s until aborted.
fn progress_ticker(
    label: &'static str,
    progress: Arc<AtomicUsize>,
    total: usize,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let began = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let done = progress.load(Ordering::Relaxed);
            println!(
                "    {label}: {done} of {total} ({:.0}/s)",
                done as f64 / began.elapsed().as_secs_f64()
            );
        }
    })
}

/// CPU of one due run: runs due `due_per_second` each second over a
/// window, against an idle window just before (the same runs held); the
/// coordinator's and PostgreSQL's CPU seconds per due run.
async fn due_run_cpu(
    client: &Arc<Client>,
    m: &Meter,
    a: &ScaleArgs,
    first: usize,
) -> Result<(f64, f64), Failure> {
    let window = Duration::from_secs(a.window_seconds);
    let per_second = a.due_per_second.max(1);
    let due = per_second * a.window_seconds as usize;
    let lead = window + Duration::from_secs(10);
    let first_due =
        time::OffsetDateTime::now_utc() + time::Duration::seconds(lead.as_secs() as i64);
    let due_runs = client
        .admit_many(
            first,
            first + due,
            a.concurrency,
            move |i| {
                let k = (i - first) as i64;
                rfc3339(first_due + time::Duration::milliseconds(k * 1000 / per_second as i64))
            },
            None,
        )
        .await?;
    let (c0, p0, _, _) = idle_window(m, window, "      none due", 0, false).await?;
    let wait = first_due - time::OffsetDateTime::now_utc();
    if wait.is_positive() {
        tokio::time::sleep(Duration::from_millis(wait.whole_milliseconds() as u64)).await;
    }
    let (c1, p1, _, _) = idle_window(
        m,
        window,
        &format!("      {per_second} due per second"),
        0,
        false,
    )
    .await?;
    // Every due run finishes (read back after the window).
    let ids: Vec<String> = due_runs.into_iter().map(|(r, _)| r).collect();
    let mut pending = ids.clone();
    let began = Instant::now();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for run in pending {
            let v = client.get(&format!("/v1/runs/{run}")).await?;
            if v["state"] == "running" {
                still.push(run);
            }
        }
        pending = still;
        if began.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "{} due runs still running after 120 s",
                pending.len()
            ));
        }
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    client.verify_finished(&ids).await?;
    Ok(((c1 - c0) / per_second as f64, (p1 - p0) / per_second as f64))
}

/// CPU seconds per second of the coordinator(s) and PostgreSQL, and
/// statements per second, over `window` (and the `top` statements by calls
/// per second).
pub(crate) async fn idle_window(
    m: &Meter,
    window: Duration,
    label: &str,
    top: usize,
    quiesce: bool,
) -> Result<(f64, f64, f64, f64), Failure> {
    let quiet = if quiesce { m.quiesce().await? } else { 0.0 };
    let st0 = m.statements().await?;
    let cpu0 = m.cpu();
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let cpu1 = m.cpu();
    let secs = t0.elapsed().as_secs_f64();
    let statements = statement_delta(&st0, m.statements().await?);
    let tck = m.target.clk_tck as f64;
    let coord = (cpu1.coordinator - cpu0.coordinator) as f64 / tck / secs;
    let pg = (cpu1.postgres - cpu0.postgres) as f64 / tck / secs;
    let stmts = statements.iter().map(|(_, s)| s.calls).sum::<i64>() as f64 / secs;
    let rss = m.rss_kib() as f64 / 1024.0;
    println!(
        "  {label:<44} coordinator {:>6.3} CPU s/s, postgres {:>6.3} CPU s/s, {:>6.1} statements/s, RSS {rss:.1} MiB{}",
        coord,
        pg,
        stmts,
        if quiesce {
            format!("  (quiesced in {quiet:.0} s)")
        } else {
            String::new()
        }
    );
    for (_, s) in statements.iter().take(top) {
        println!(
            "    {:>7.2}/s  {:>7.3} ms  {}",
            s.calls as f64 / secs,
            s.exec_ms / s.calls.max(1) as f64,
            one_line(&s.query, 100)
        );
    }
    Ok((coord, pg, stmts, rss))
}
