//! The HTTP side of the load generator: caller tokens and the client that
//! starts runs, reads them back and drives operator routes.

use super::*;

// ------------------------------------------------------------------ client

/// A caller token read from the sandbox's file, read again every minute
/// (the sandbox re-mints it every 30 minutes).
pub(crate) struct Token {
    pub(crate) file: PathBuf,
    pub(crate) cached: Mutex<(Instant, String)>,
}

impl Token {
    pub(crate) fn new(file: PathBuf) -> Result<Token, Failure> {
        let text = read_token(&file)?;
        Ok(Token {
            file,
            cached: Mutex::new((Instant::now(), text)),
        })
    }

    pub(crate) fn get(&self) -> String {
        let mut c = self.cached.lock().unwrap();
        if c.0.elapsed() > Duration::from_secs(60) {
            if let Ok(t) = read_token(&self.file) {
                *c = (Instant::now(), t);
            }
        }
        c.1.clone()
    }
}

pub(crate) fn read_token(file: &PathBuf) -> Result<String, Failure> {
    std::fs::read_to_string(file)
        .map(|t| t.trim().to_owned())
        .map_err(|e| format!("cannot read the token file {}: {e}", file.display()))
}

/// The HTTP side: one shared connection pool for every task.
pub(crate) struct Client {
    pub(crate) http: reqwest::Client,
    pub(crate) bases: Vec<String>,
    pub(crate) producer: Token,
    pub(crate) operator: Token,
    pub(crate) workflow: String,
    pub(crate) revision: String,
    pub(crate) application_id: String,
    pub(crate) key_prefix: String,
}

impl Client {
    pub(crate) fn new(t: &Target) -> Result<Client, Failure> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Client {
            http,
            bases: t.bases.clone(),
            producer: Token::new(t.producer_token_file.clone())?,
            operator: Token::new(t.operator_token_file.clone())?,
            workflow: t.workflow.clone(),
            revision: t.revision.clone(),
            application_id: t.application_id.clone(),
            key_prefix: t.key_prefix.clone(),
        })
    }

    /// `POST /v1/runs` (run `i`, on process `i % bases`) under key
    /// `<prefix>-<i>`; the run id. A transport failure is retried with the
    /// same key (admission is idempotent); any answer but 201 fails.
    pub(crate) async fn start(&self, i: usize, send_after: &str) -> Result<String, Failure> {
        let base = &self.bases[i % self.bases.len()];
        let key = format!("{}-{i}", self.key_prefix);
        let body = json!({"workflow": self.workflow, "revision": self.revision,
            "input": {"applicationId": self.application_id, "sendAfter": send_after}})
        .to_string();
        let mut last = String::new();
        for attempt in 0..5u64 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            let sent = self
                .http
                .post(format!("{base}/v1/runs"))
                .bearer_auth(self.producer.get())
                .header("idempotency-key", &key)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await;
            let r = match sent {
                Ok(r) => r,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            // 200: an earlier attempt of this key was admitted after all.
            if status == 201 || (status == 200 && attempt > 0) {
                let v: Value = serde_json::from_str(&text)
                    .map_err(|e| format!("POST /v1/runs answered {status} with no JSON: {e}"))?;
                return v["run"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("POST /v1/runs answered {status} without a run: {v}"));
            }
            return Err(format!("POST {base}/v1/runs answered {status}: {text}"));
        }
        Err(format!("POST {base}/v1/runs failed 5 times: {last}"))
    }

    /// `GET path` on process 0 as the operator; the JSON answer (transport
    /// failures retried, any answer but 200 fails).
    pub(crate) async fn get(&self, path: &str) -> Result<Value, Failure> {
        let base = &self.bases[0];
        let mut last = String::new();
        for attempt in 0..5u64 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            let r = match self
                .http
                .get(format!("{base}{path}"))
                .bearer_auth(self.operator.get())
                .send()
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            if status != 200 {
                return Err(format!("GET {base}{path} answered {status}: {text}"));
            }
            return serde_json::from_str(&text)
                .map_err(|e| format!("GET {base}{path}: not JSON: {e}"));
        }
        Err(format!("GET {base}{path} failed 5 times: {last}"))
    }

    /// `GET /v1/runs/{run}` on process 0 with `Prefer: wait=60`: the run
    /// once it has ended (or after 60 s), as the service answers it when
    /// the commit that ends it wakes the request. Fails unless 200 with
    /// `Preference-Applied: wait=60` (the service waited).
    pub(crate) async fn wait_for_end(&self, run: &str) -> Result<Value, Failure> {
        let url = format!("{}/v1/runs/{run}", self.bases[0]);
        let r = self
            .http
            .get(&url)
            .bearer_auth(self.operator.get())
            .header("prefer", "wait=60")
            .timeout(Duration::from_secs(90))
            .send()
            .await
            .map_err(|e| format!("GET {url} (Prefer: wait=60): {e}"))?;
        let status = r.status().as_u16();
        let applied = r
            .headers()
            .get("preference-applied")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = r.text().await.unwrap_or_default();
        if status != 200 || applied.as_deref() != Some("wait=60") {
            return Err(format!(
                "GET {url} (Prefer: wait=60) answered {status}, Preference-Applied {applied:?}: {text}"
            ));
        }
        serde_json::from_str(&text).map_err(|e| format!("GET {url}: not JSON: {e}"))
    }

    /// `POST path` on process 0 as the operator with `body`; the JSON
    /// answer (transport failures retried, any answer but 200 fails).
    pub(crate) async fn operate(&self, path: &str, body: Value) -> Result<Value, Failure> {
        let base = &self.bases[0];
        let mut last = String::new();
        for attempt in 0..5u64 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            let r = match self
                .http
                .post(format!("{base}{path}"))
                .bearer_auth(self.operator.get())
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            if status != 200 {
                return Err(format!("POST {base}{path} answered {status}: {text}"));
            }
            return serde_json::from_str(&text)
                .map_err(|e| format!("POST {base}{path}: not JSON: {e}"));
        }
        Err(format!("POST {base}{path} failed 5 times: {last}"))
    }

    /// `GET url` as Prometheus scrapes (`Accept` of OpenMetrics, 10 s
    /// timeout); fails unless 200 with `coordinator_store_ready 1`.
    pub(crate) async fn scrape(&self, url: &str) -> Result<(), Failure> {
        let r = self
            .http
            .get(url)
            .header(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            )
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        if status != 200 || !text.contains("coordinator_store_ready 1") {
            return Err(format!(
                "GET {url} answered {status} without the store's series"
            ));
        }
        Ok(())
    }

    /// Whether any run of the deployment is still `running`.
    pub(crate) async fn any_running(&self) -> Result<bool, Failure> {
        let page = self.get("/v1/runs?state=running&limit=1").await?;
        Ok(page["runs"].as_array().is_some_and(|r| !r.is_empty()))
    }

    /// Admits runs `from..to` with `send_after` at `concurrency`; each
    /// run id and when its admission was answered, in order.
    pub(crate) async fn admit_many(
        self: &Arc<Self>,
        from: usize,
        to: usize,
        concurrency: usize,
        send_after: impl Fn(usize) -> String + Send + Sync + 'static,
        progress: Option<Arc<AtomicUsize>>,
    ) -> Result<Vec<(String, Instant)>, Failure> {
        let next = Arc::new(AtomicUsize::new(from));
        let send_after = Arc::new(send_after);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..concurrency.max(1) {
            let (c, next, send_after, progress) = (
                self.clone(),
                next.clone(),
                send_after.clone(),
                progress.clone(),
            );
            tasks.spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= to {
                        return Ok::<_, Failure>(mine);
                    }
                    let run = c.start(i, &send_after(i)).await?;
                    mine.push((i, run, Instant::now()));
                    if let Some(p) = &progress {
                        p.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let mut all = Vec::with_capacity(to - from);
        while let Some(joined) = tasks.join_next().await {
            all.extend(joined.map_err(|e| e.to_string())??);
        }
        all.sort_by_key(|(i, _, _)| *i);
        Ok(all.into_iter().map(|(_, r, t)| (r, t)).collect())
    }

    /// Reads every run in `runs` back (16 at a time): each must be
    /// `finished` with outcome `message-accepted`. A summary line.
    pub(crate) async fn verify_finished(
        self: &Arc<Self>,
        runs: &[String],
    ) -> Result<String, Failure> {
        let runs: Arc<Vec<String>> = Arc::new(runs.to_vec());
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let (c, runs, next) = (self.clone(), runs.clone(), next.clone());
            tasks.spawn(async move {
                let mut states: BTreeMap<String, usize> = BTreeMap::new();
                let mut bad = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(run) = runs.get(i) else {
                        return Ok::<_, Failure>((states, bad));
                    };
                    let v = c.get(&format!("/v1/runs/{run}")).await?;
                    let state = v["state"].as_str().unwrap_or("?").to_owned();
                    let outcome = v["outcome"].as_str().unwrap_or("");
                    if state != "finished" || outcome != "message-accepted" {
                        bad.push(format!("{run}: {state} {outcome}"));
                    }
                    *states.entry(state).or_insert(0) += 1;
                }
            });
        }
        let mut states: BTreeMap<String, usize> = BTreeMap::new();
        let mut bad = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (s, b) = joined.map_err(|e| e.to_string())??;
            for (k, n) in s {
                *states.entry(k).or_insert(0) += n;
            }
            bad.extend(b);
        }
        if !bad.is_empty() {
            return Err(format!(
                "{} of {} runs are not finished with message-accepted (states {states:?}), e.g. {}",
                bad.len(),
                runs.len(),
                bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            ));
        }
        Ok(format!(
            "{} runs read back: finished, outcome message-accepted",
            runs.len()
        ))
    }
}

// ------------------------------------------------------------------- meter
