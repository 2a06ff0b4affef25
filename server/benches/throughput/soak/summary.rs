//! The soak's summary: what was admitted and retried, the drain, the runs
//! and messages read back, the followed runs' admission-to-finished, the
//! scrapes and the faults; the figures kept for the results file; and the
//! checks passed or the phase failed.

use super::checks::Checked;
use super::rows::{read_pids, Pids};
use super::shared::Soak;
use super::*;

/// The followed runs' admission-to-finished over the whole soak.
struct FollowedLatency {
    p50: Duration,
    p99: Duration,
    max: Duration,
    /// How many followed runs finished.
    n: usize,
}

/// The scrapes over the whole soak.
struct ScrapeFigures {
    /// p99 and max of the answered scrapes' durations.
    p99: Duration,
    max: Duration,
    /// Scrapes made: answered and failed.
    n: usize,
    failed: usize,
    /// Why the last failed scrape failed.
    last: String,
    /// Answered scrapes without the store's series.
    not_ready: usize,
}

/// Prints the summary (after the drain and the checks: `started` runs
/// started, `drain` and `checked` what they found; the pid file, or
/// `initial`, for the faults), keeps the soak's figures for the results
/// file, then prints that the checks passed or each that failed: an
/// error if any did.
pub(super) fn print_the_summary_keep_the_report_and_pass_or_fail(
    a: &SoakArgs,
    s: &Soak,
    initial: &Pids,
    started: usize,
    drain: &Drain,
    checked: &Checked,
) -> Result<(), Failure> {
    let latency = latency_of_every_followed_run(s);
    let followed_other = s.followed_other.lock().unwrap().clone();
    let retries = s.retries.lock().unwrap().clone();
    let scrapes = scrapes_over_the_whole_soak(s);
    let pids = read_pids(a.pid_file.as_ref(), initial);
    println!("== soak summary");
    print_the_admissions_and_their_retries(a, s, started, checked.admitted, &retries);
    print_the_drain(a, drain);
    println!("  runs read back             {}", checked.verified.line);
    for line in &checked.verified.held_where {
        println!("    held: {line}");
    }
    let messages = &checked.messages;
    println!("  messages                   {messages}");
    print_the_followed_runs_latency(&latency, &followed_other);
    print_the_scrapes(&scrapes);
    println!(
        "  faults                     {} kill -9, {} PostgreSQL restarts",
        pids.kills, pids.pg_restarts
    );
    keep_the_report(a, checked, &latency, &scrapes)?;
    print_the_checks_and_fail_if_any_failed(&checked.failures)
}

/// p50, p99 and max of every followed run's admission-to-finished.
fn latency_of_every_followed_run(s: &Soak) -> FollowedLatency {
    let mut all = s.latency.lock().unwrap().1.clone();
    all.sort_unstable();
    FollowedLatency {
        p50: percentile(&all, 0.50),
        p99: percentile(&all, 0.99),
        max: all.last().copied().unwrap_or_default(),
        n: all.len(),
    }
}

/// Every scrape of the soak: the answered ones' p99 and max, how many
/// were made and failed, the last failure, the answers without the store.
fn scrapes_over_the_whole_soak(s: &Soak) -> ScrapeFigures {
    let sc = s.scrapes.lock().unwrap();
    let mut all = sc.all.clone();
    all.sort_unstable();
    ScrapeFigures {
        p99: percentile(&all, 0.99),
        max: all.last().copied().unwrap_or_default(),
        n: all.len() + sc.failed,
        failed: sc.failed,
        last: sc.last_failure.clone(),
        not_ready: sc.store_not_ready,
    }
}

/// The summary's lines of the `admitted` runs (of `started`) and of the
/// admission attempts retried, by reason.
fn print_the_admissions_and_their_retries(
    a: &SoakArgs,
    s: &Soak,
    started: usize,
    admitted: usize,
    retries: &BTreeMap<String, usize>,
) {
    let secs = a.seconds as f64;
    println!(
        "  admitted                   {} runs in {secs:.0} s ({:.1}/s; {started} started at {} runs/s), {} answered 200 to a retry (admitted by an earlier attempt)",
        admitted,
        admitted as f64 / secs,
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
}

/// The summary's line of the drain: how long until no run was running,
/// or that some still were.
fn print_the_drain(a: &SoakArgs, drain: &Drain) {
    println!(
        "  drain                      {} after the admissions stopped",
        if drain.still_running {
            format!("runs still running after {} s", a.drain_seconds)
        } else {
            format!("no run running {:.0} s", drain.drained_in.as_secs_f64())
        }
    );
}

/// The summary's line of the followed runs' admission-to-finished, and
/// of those that ended otherwise (by state).
fn print_the_followed_runs_latency(
    latency: &FollowedLatency,
    followed_other: &BTreeMap<String, usize>,
) {
    let FollowedLatency { p50, p99, max, n } = *latency;
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
}

/// The summary's line of the `/metrics` scrapes.
fn print_the_scrapes(scrapes: &ScrapeFigures) {
    let ScrapeFigures {
        p99: sc_p99,
        max: sc_max,
        n: sc_n,
        failed: sc_failed,
        last: sc_last,
        not_ready: sc_not_ready,
    } = scrapes;
    println!(
        "  /metrics scrapes           {sc_n}, {sc_failed} failed{}, {sc_not_ready} answered without the store's series; answered p99 {} ms, max {} ms",
        if *sc_failed > 0 {
            format!(" (last: {sc_last})")
        } else {
            String::new()
        },
        ms(*sc_p99),
        ms(*sc_max)
    );
}

/// Appends the soak's figures to the results file (`rate`, `admitted`,
/// `finished`, `attention`, `p50_ms`, `p99_ms`, `scrape_failures`).
fn keep_the_report(
    a: &SoakArgs,
    checked: &Checked,
    latency: &FollowedLatency,
    scrapes: &ScrapeFigures,
) -> Result<(), Failure> {
    let mut r = Report::new(&a.target);
    r.keep("rate", a.rate);
    r.keep("admitted", checked.admitted);
    r.keep("finished", checked.finished);
    r.keep("attention", checked.held);
    r.keep("p50_ms", ms(latency.p50));
    r.keep("p99_ms", ms(latency.p99));
    r.keep("scrape_failures", scrapes.failed);
    r.write()
}

/// Prints that the checks passed, or each failure: then the phase fails.
fn print_the_checks_and_fail_if_any_failed(failures: &[String]) -> Result<(), Failure> {
    if failures.is_empty() {
        println!("  checks                     passed");
        Ok(())
    } else {
        for f in failures {
            println!("  FAILED                     {f}");
        }
        Err(format!("the soak's checks failed: {}", failures.join("; ")))
    }
}
