//! What the soak's tasks share: the client and the one start body, the
//! admitted runs, the counters of the tasks still at work, what the
//! followers and the scrapers measured; and the operator's GETs that ride
//! out an outage.

use std::sync::atomic::AtomicBool;

use super::scrape::Scrapes;
use super::*;

/// What the tasks share.
pub(super) struct Soak {
    /// The HTTP client, the bases and the tokens.
    pub(super) client: Client,
    /// The one start body (the same `sendAfter`, in the past, for every
    /// run and every retry: a retry must send what the first attempt did).
    pub(super) body: String,
    /// The longest gap between the GETs of a followed run (`--poll-ms`,
    /// at least 1 ms).
    pub(super) poll: Duration,
    /// (index, run id) of each admitted run.
    pub(super) admitted: Mutex<Vec<(usize, String)>>,
    /// How many runs are admitted so far.
    pub(super) admitted_n: AtomicUsize,
    /// Runs whose admission was refused (4xx) or given up: the reason.
    pub(super) not_admitted: Mutex<Vec<String>>,
    /// Admission attempts that failed and were retried, by reason.
    pub(super) retries: Mutex<BTreeMap<String, usize>>,
    /// Admissions answered 200: an earlier attempt had admitted the run.
    pub(super) replayed: AtomicUsize,
    /// Admissions not answered yet (still trying or retrying).
    pub(super) admitting: AtomicUsize,
    /// Runs being followed now.
    pub(super) following: AtomicUsize,
    /// Set when the followers are to stop (after the drain).
    pub(super) stop_following: AtomicBool,
    /// Set when the scrapers are to stop (after the drain).
    pub(super) stop_scraping: AtomicBool,
    /// Admission-to-finished of the followed runs: since the last row,
    /// and all of them.
    pub(super) latency: Mutex<(Vec<Duration>, Vec<Duration>)>,
    /// Followed runs that ended in another state than `finished`.
    pub(super) followed_other: Mutex<BTreeMap<String, usize>>,
    /// Answered scrapes' durations since the last row and all; failures
    /// since the last row and all (with the last reason); answers without
    /// `coordinator_store_ready 1` (the store was not answering).
    pub(super) scrapes: Mutex<Scrapes>,
}

impl Soak {
    /// The state before the soak: a client of `t`, the start body (its
    /// `sendAfter` a minute ago), `poll_ms` milliseconds between the GETs
    /// of a followed run, nothing admitted, followed or scraped yet.
    pub(super) fn new(t: &Target, poll_ms: u64) -> Result<Soak, Failure> {
        let client = Client::new(t)?;
        let past = rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(1));
        let body = json!({"workflow": client.workflow, "revision": client.revision,
            "input": {"applicationId": client.application_id, "sendAfter": past}})
        .to_string();
        Ok(Soak {
            client,
            body,
            poll: Duration::from_millis(poll_ms.max(1)),
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
        })
    }

    /// One `GET path` on base `b` as the operator (10 s timeout): the
    /// status and the JSON answer (`Null` if none).
    pub(super) async fn get(&self, b: usize, path: &str) -> Result<(u16, Value), String> {
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
    pub(super) async fn get_retrying(
        &self,
        first: usize,
        path: &str,
    ) -> Result<(u16, Value), Failure> {
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
