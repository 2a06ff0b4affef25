//! Throughput of the service on PostgreSQL 17: completed runs per second of
//! the `delayed-follow-up` workflow (with `sendAfter` in the past: a timer,
//! a BReg read, a Messaging submission per run) through the built
//! `coordinator` binary against the product fakes, and the p50/p99 latency
//! from admission (the `POST /v1/runs` answer) to the run seen `finished`.
//!
//! ```sh
//! eval "$(scripts/postgres.sh start)"
//! cargo bench -p coordinator --bench throughput            # 1 process
//! COORDINATOR_BENCH_RUNS=1000 COORDINATOR_BENCH_PROCESSES=2 cargo bench -p coordinator --bench throughput
//! ```
//!
//! Not a test and not run in CI. Prints the figures; exits quietly without
//! the database variables. Finishing is observed by listing runs every
//! 20 ms, so latencies are accurate to about that.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{rfc3339, unix_now, urls, Coordinator, Deployment};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every run id listed as finished (operator token, pages of 100).
async fn finished(d: &Deployment, c: &Coordinator) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(k) => format!("/v1/runs?limit=100&cursor={k}"),
            None => "/v1/runs?limit=100".to_owned(),
        };
        let Some(page) = d.get(c, &path).await else {
            return out;
        };
        for r in page["runs"].as_array().cloned().unwrap_or_default() {
            if r["state"] == "finished" {
                out.push(r["run"].as_str().unwrap_or_default().to_owned());
            }
        }
        match page["nextCursor"].as_str() {
            Some(k) => cursor = Some(k.to_owned()),
            None => return out,
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let Some(urls) = urls("throughput benchmark") else {
        return;
    };
    let n = env_usize("COORDINATOR_BENCH_RUNS", 500);
    let processes = env_usize("COORDINATOR_BENCH_PROCESSES", 1).max(1);
    let concurrency = env_usize("COORDINATOR_BENCH_CONCURRENCY", 16).max(1);
    let d = Arc::new(Deployment::new(urls, 5_000).await);
    let mut coordinators = Vec::new();
    for _ in 0..processes {
        coordinators.push(Arc::new(d.spawn().await));
    }
    let past = rfc3339(unix_now() - 60);
    let started = Instant::now();
    let admitted_at: Arc<tokio::sync::Mutex<HashMap<String, Instant>>> = Arc::default();
    let limit = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let (d, c, past, limit, admitted_at) = (
            d.clone(),
            coordinators[i % processes].clone(),
            past.clone(),
            limit.clone(),
            admitted_at.clone(),
        );
        tasks.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            let run = d.start(&c, &format!("bench-{i}"), &past).await;
            admitted_at.lock().await.insert(run, Instant::now());
        });
    }
    let mut finished_at: HashMap<String, Instant> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    while finished_at.len() < n {
        assert!(Instant::now() < deadline, "not finished in 10 minutes");
        for run in finished(&d, &coordinators[0]).await {
            finished_at.entry(run).or_insert_with(Instant::now);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    while tasks.join_next().await.is_some() {}
    let admitted = admitted_at.lock().await;
    let mut latencies: Vec<Duration> = finished_at
        .iter()
        .filter_map(|(run, f)| admitted.get(run).map(|a| f.saturating_duration_since(*a)))
        .collect();
    latencies.sort_unstable();
    let per_key = d.messages_per_key();
    let once = per_key.values().all(|c| *c == 1) && per_key.len() == n;
    println!(
        "delayed-follow-up on PostgreSQL 17, {processes} coordinator process(es), {n} runs, admission concurrency {concurrency}"
    );
    println!(
        "  completed runs per second: {:.1}  ({n} runs in {:.2} s, admission to last finish)",
        n as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!(
        "  admission-to-finish latency: p50 {} ms, p99 {} ms, max {} ms",
        percentile(&latencies, 0.50).as_millis(),
        percentile(&latencies, 0.99).as_millis(),
        latencies.last().copied().unwrap_or_default().as_millis()
    );
    println!("  every message sent exactly once: {once}");
    drop(coordinators);
    d.cleanup().await;
}
