//! The soak's scrapers: each `--metrics-url` scraped every
//! `--scrape-every` seconds as Prometheus does (OpenMetrics `Accept`, 10 s
//! timeout); a failure is no answer or not 200, and the durations of the
//! answered scrapes are kept for the rows and the summary.

use super::*;

/// What the scrapers found.
#[derive(Default)]
pub(super) struct Scrapes {
    /// Durations of the scrapes answered since the last row.
    pub(super) interval: Vec<Duration>,
    /// Durations of all the scrapes answered.
    pub(super) all: Vec<Duration>,
    /// Scrapes failed since the last row.
    pub(super) failed_interval: usize,
    /// Scrapes failed in all.
    pub(super) failed: usize,
    /// Why the last failed scrape failed.
    pub(super) last_failure: String,
    /// Scrapes answered without `coordinator_store_ready 1`.
    pub(super) store_not_ready: usize,
}

/// Starts one scraper per URL of `metrics_urls`, each scraping every
/// `scrape_every` seconds (at least 1) until `stop_scraping` is set.
pub(super) fn spawn_one_scraper_per_metrics_url(
    s: &Arc<Soak>,
    metrics_urls: &[String],
    scrape_every: u64,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut scrapers = Vec::new();
    for url in metrics_urls {
        let (s, url, every) = (s.clone(), url.clone(), scrape_every.max(1));
        scrapers.push(tokio::spawn(
            async move { scrape_loop(s, url, every).await },
        ));
    }
    scrapers
}

/// Scrapes `url` every `every` seconds until `stop_scraping` is set:
/// each answered scrape's duration, or the failure, into `s.scrapes`.
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
