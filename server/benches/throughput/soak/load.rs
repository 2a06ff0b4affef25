//! The soak's load: runs of the starter started at a steady rate,
//! round-robin over the bases, each in its own task; an outage (no
//! answer, 429, 5xx) is retried with the same idempotency key on the next
//! base after a short backoff, as a client would.

use super::follow::follow_run;
use super::shared::Soak;
use super::*;

/// How long one admission is retried (same key) before it is given up.
pub(super) const RETRY_FOR: Duration = Duration::from_secs(300);

/// Starts run `i` at `began + i / rate` seconds, each in its own task
/// (see `admit`), until `until`; every `sample_every`th run (at least
/// every run) is followed to its end. The task's answer is how many runs
/// were started.
pub(super) fn spawn_the_admissions_at_a_steady_rate(
    s: &Arc<Soak>,
    began: Instant,
    until: Instant,
    rate: f64,
    sample_every: usize,
) -> tokio::task::JoinHandle<usize> {
    let (s, sample_every) = (s.clone(), sample_every.max(1));
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
