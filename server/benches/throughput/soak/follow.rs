//! The soak's followers: every `--sample-every`th admitted run is followed
//! to its end (`GET /v1/runs/{id}` on any base that answers), and its
//! admission-to-finished time kept for the rows and the summary.

use super::*;

/// GETs `run` until it leaves `running`; keeps its admission-to-finished
/// time: from the POST's answer to the answer of the first GET that saw
/// it `finished`. The GETs are at t, 2t, 4t, ... after the POST's answer
/// until the gap reaches `poll`, then every `poll`, where t is 2 to 4 ms,
/// spread evenly over the followed runs (on a log scale, by `i`): cheap
/// (log2 of the time in GETs), and a time's overshoot is a factor of 1 to
/// 2 that varies from run to run, so the percentiles move smoothly with
/// the true ones (with one fixed schedule, a median near one of its
/// steps jumps from step to step between intervals).
pub(super) async fn follow_run(s: &Soak, run: &str, answered: Instant, i: usize) {
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
