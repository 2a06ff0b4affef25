//! The `scale` phase.

use super::*;

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

pub(crate) async fn scale(a: ScaleArgs) -> Result<(), Failure> {
    let t = &a.target;
    let client = Arc::new(Client::new(t)?);
    let m = Arc::new(Meter::new(t).await?);
    println!(
        "== scale: {} runs waiting on a timer a day ahead, then {} due per second for {} s; 1 coordinator process",
        a.runs, a.due_per_second, a.due_seconds
    );
    if client.any_running().await? {
        return Err("runs of an earlier phase are still running".into());
    }
    let window = Duration::from_secs(a.idle_seconds);
    println!(
        "  CPU per second while waiting (windows of {} s, each after VACUUM (ANALYZE), CHECKPOINT and no autovacuum worker running):",
        a.idle_seconds
    );
    let (c0, p0, s0, _) = idle_window(&m, window, "no run waiting", 0, true).await?;

    // Admissions, with RSS and CPU sampled as they go.
    let admitted = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let sampler = {
        let (m, admitted, stop) = (m.clone(), admitted.clone(), stop.clone());
        let every = Duration::from_secs(a.sample_seconds);
        tokio::spawn(async move {
            let start = Instant::now();
            let mut last = (start, m.cpu());
            println!("  while admitting: elapsed s, runs admitted, coordinator RSS MiB, coordinator CPU s/s, postgres CPU s/s");
            loop {
                tokio::select! {
                    _ = stop.notified() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let now = (Instant::now(), m.cpu());
                let secs = now.0.duration_since(last.0).as_secs_f64();
                let tck = m.target.clk_tck as f64;
                println!(
                    "    {:>6.0}  {:>7}  {:>7.1}  {:>6.3}  {:>6.3}",
                    start.elapsed().as_secs_f64(),
                    admitted.load(Ordering::Relaxed),
                    m.rss_kib() as f64 / 1024.0,
                    (now.1.coordinator - last.1.coordinator) as f64 / tck / secs,
                    (now.1.postgres - last.1.postgres) as f64 / tck / secs,
                );
                last = now;
            }
        })
    };
    let far = rfc3339(time::OffsetDateTime::now_utc() + time::Duration::days(1));
    let began = Instant::now();
    let waiting = client
        .admit_many(
            0,
            a.runs,
            a.concurrency,
            move |_| far.clone(),
            Some(admitted.clone()),
        )
        .await?;
    let took = began.elapsed().as_secs_f64();
    stop.notify_one();
    let _ = sampler.await;
    println!(
        "  admitted {} waiting runs in {took:.0} s ({:.0} admissions/s at {} concurrent clients)",
        waiting.len(),
        waiting.len() as f64 / took,
        a.concurrency
    );
    drop(waiting);

    let (c1, p1, s1, _) = idle_window(
        &m,
        window,
        &format!("{} runs waiting, none due", a.runs),
        6,
        true,
    )
    .await?;

    // A few due each second: admitted first (due from 5 s on), measured
    // over the due window.
    let due = a.due_per_second * a.due_seconds as usize;
    let per_second = a.due_per_second.max(1);
    let first = a.runs;
    let messages_before = m.messages()?;
    let quiet = m.quiesce().await?;
    let first_due = time::OffsetDateTime::now_utc() + time::Duration::seconds(5);
    let due_runs = client
        .admit_many(
            a.runs,
            a.runs + due,
            a.concurrency,
            move |i| {
                let k = (i - first) as i64;
                rfc3339(first_due + time::Duration::milliseconds(k * 1000 / per_second as i64))
            },
            None,
        )
        .await?;
    let wait_for_first = first_due - time::OffsetDateTime::now_utc();
    if wait_for_first.is_positive() {
        tokio::time::sleep(Duration::from_millis(
            wait_for_first.whole_milliseconds() as u64
        ))
        .await;
    }
    let (c2, p2, s2, _) = idle_window(
        &m,
        Duration::from_secs(a.due_seconds),
        &format!(
            "{} runs waiting, {} due per second",
            a.runs, a.due_per_second
        ),
        10,
        false,
    )
    .await?;
    let due_ids: Vec<String> = due_runs.into_iter().map(|(r, _)| r).collect();
    // The last due runs finish just after the window; then all are checked.
    let mut pending: Vec<String> = due_ids.clone();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for run in pending {
            let v = client.get(&format!("/v1/runs/{run}")).await?;
            if v["state"] == "running" {
                still.push(run);
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let verified = client.verify_finished(&due_ids).await?;
    let messages = check_messages(&m, &messages_before, due)?;
    println!(
        "  due runs: {verified}; {messages} (quiesced in {quiet:.0} s before they were admitted)"
    );
    let extra_c = (c2 - c1) / a.due_per_second as f64;
    let extra_p = (p2 - p1) / a.due_per_second as f64;
    println!(
        "  waiting itself: coordinator {:+.3} CPU s/s, postgres {:+.3} CPU s/s, {:+.1} statements/s with {} runs waiting than with none",
        c1 - c0,
        p1 - p0,
        s1 - s0,
        a.runs
    );
    println!(
        "  each due run: coordinator {extra_c:.4} CPU s, postgres {extra_p:.4} CPU s, {:.1} statements (the due window over the waiting one, per run due)",
        (s2 - s1) / a.due_per_second as f64
    );
    let mut r = Report::new(t);
    r.keep("idle_coordinator_cpu", format!("{c0:.4}"));
    r.keep("waiting_coordinator_cpu", format!("{c1:.4}"));
    r.keep("due_coordinator_cpu", format!("{c2:.4}"));
    r.write()
}

