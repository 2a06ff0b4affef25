//! The load generator and meter of `scripts/bench.sh`: drives a running
//! `coordinator` (the starter workflow, `follow-up`, served against
//! `coordinator-sandbox`) over HTTP and measures, around each phase, what
//! PostgreSQL and the processes spent:
//!
//! - `throughput`: N runs admitted by C concurrent clients (`sendAfter` in
//!   the past, so the timer is due at once); completed runs per second from
//!   the first admission to the last run seen finished (listing
//!   `state=running` every 100 ms once every run is admitted);
//! - `latency`: one client in a closed loop (start a run, poll
//!   `GET /v1/runs/{id}` every 2 ms until it is finished, next);
//!   admission-to-finished percentiles;
//! - `scale`: many runs waiting on far timers, then a few due each second;
//!   the coordinator's RSS over time and the CPU per second while waiting.
//!
//! Every phase prints transactions per run (`pg_stat_database`
//! `xact_commit + xact_rollback` of the service's database), statements per
//! run (`pg_stat_statements` calls), WAL per run (`pg_stat_wal`), CPU
//! seconds per run of PostgreSQL (the postmaster, its live children and its
//! reaped children, from `/proc`), of the coordinator process(es), of the
//! sandbox and of this client, and the statements by calls per run. Each
//! run is verified `finished` (`message-accepted`), and Messaging's
//! requests (from the sandbox's log) one per idempotency key, none
//! performed twice.
//!
//! Not a test: `cargo bench` builds it (and `cargo test` does not run it);
//! `scripts/bench.sh` builds it with `cargo bench --no-run` and runs it.
//! Without a subcommand (plain `cargo bench`) it says so and exits 0.
//! Nothing here asserts on time: figures are printed, only wrong results
//! (a run not finished, a message missing or sent twice) fail it.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, Row};

/// PostgreSQL flushes a backend's pending `pg_stat_database`/`pg_stat_wal`
/// counters at most every second while busy and at the latest 10 s after it
/// went idle (`PGSTAT_IDLE_INTERVAL`): a phase reads them this long after
/// what ran before it, and this long after its own last request.
const STATS_SETTLE: Duration = Duration::from_secs(11);

#[derive(Parser)]
#[command(
    name = "throughput",
    about = "Load generator and meter of scripts/bench.sh"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Prints N loopback ports that are free now, one a line.
    FreePorts {
        #[arg(default_value_t = 2)]
        n: usize,
    },
    /// Checks the cluster's durability settings and prints them.
    Preflight(Target),
    /// N runs at C concurrent clients; completed runs per second.
    Throughput(ThroughputArgs),
    /// One client in a closed loop; admission-to-finished latency.
    Latency(LatencyArgs),
    /// Many runs waiting on far timers, then a few due each second.
    Scale(ScaleArgs),
}

#[derive(Args, Clone)]
struct Target {
    /// A coordinator's base URL (repeat for several processes; admissions
    /// go round-robin).
    #[arg(long = "base", required = true)]
    bases: Vec<String>,
    #[arg(long)]
    producer_token_file: PathBuf,
    #[arg(long)]
    operator_token_file: PathBuf,
    #[arg(long, default_value = "follow-up")]
    workflow: String,
    #[arg(long)]
    revision: String,
    #[arg(long)]
    application_id: String,
    /// A superuser URL of the cluster (its database is replaced by
    /// `postgres` for the meter's own connection).
    #[arg(long)]
    stats_url: String,
    /// The service's database (`pg_stat_database`, `pg_stat_statements`).
    #[arg(long, default_value = "coordinator")]
    database: String,
    #[arg(long)]
    postmaster_pid: u32,
    #[arg(long = "coordinator-pid", required = true)]
    coordinator_pids: Vec<u32>,
    #[arg(long)]
    sandbox_pid: Option<u32>,
    /// The sandbox's standard output (Messaging's requests).
    #[arg(long)]
    sandbox_log: Option<PathBuf>,
    /// Clock ticks per second of `/proc/*/stat` (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100)]
    clk_tck: u64,
    /// Appends `label.key=value` lines here.
    #[arg(long)]
    results: Option<PathBuf>,
    /// Names this phase in the results file.
    #[arg(long, default_value = "phase")]
    label: String,
    /// Idempotency keys are `<prefix>-<i>` (unique per invocation).
    #[arg(long)]
    key_prefix: String,
    /// How many statements to list by calls per run.
    #[arg(long, default_value_t = 15)]
    top: usize,
}

#[derive(Args)]
struct ThroughputArgs {
    #[command(flatten)]
    target: Target,
    #[arg(long, default_value_t = 2000)]
    runs: usize,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

#[derive(Args)]
struct LatencyArgs {
    #[command(flatten)]
    target: Target,
    #[arg(long, default_value_t = 200)]
    runs: usize,
    #[arg(long, default_value_t = 2)]
    poll_ms: u64,
}

#[derive(Args)]
struct ScaleArgs {
    #[command(flatten)]
    target: Target,
    /// Runs admitted to wait on a timer a day ahead.
    #[arg(long, default_value_t = 100_000)]
    runs: usize,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Runs due per second in the due window.
    #[arg(long, default_value_t = 5)]
    due_per_second: usize,
    /// Length of the due window.
    #[arg(long, default_value_t = 60)]
    due_seconds: u64,
    /// Length of each idle window (before and after the admissions).
    #[arg(long, default_value_t = 30)]
    idle_seconds: u64,
    /// RSS and CPU are sampled this often.
    #[arg(long, default_value_t = 10)]
    sample_seconds: u64,
}

type Failure = String;

fn main() -> std::process::ExitCode {
    // `cargo bench` passes `--bench`; the harness is ours.
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let cli = Cli::parse_from(args);
    let Some(command) = cli.command else {
        println!(
            "throughput: the load generator of scripts/bench.sh (which starts PostgreSQL, the sandbox and the service); nothing to do without a subcommand"
        );
        return std::process::ExitCode::SUCCESS;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let done = runtime.block_on(async move {
        match command {
            Command::FreePorts { n } => free_ports(n),
            Command::Preflight(t) => preflight(&t).await,
            Command::Throughput(a) => throughput(a).await,
            Command::Latency(a) => latency(a).await,
            Command::Scale(a) => scale(a).await,
        }
    });
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("throughput: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn free_ports(n: usize) -> Result<(), Failure> {
    // All bound at once, so the n ports differ.
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot bind a loopback port: {e}"))?;
    for l in &listeners {
        println!("{}", l.local_addr().map_err(|e| e.to_string())?.port());
    }
    Ok(())
}

// ------------------------------------------------------------------ client

/// A caller token read from the sandbox's file, read again every minute
/// (the sandbox re-mints it every 30 minutes).
struct Token {
    file: PathBuf,
    cached: Mutex<(Instant, String)>,
}

impl Token {
    fn new(file: PathBuf) -> Result<Token, Failure> {
        let text = read_token(&file)?;
        Ok(Token {
            file,
            cached: Mutex::new((Instant::now(), text)),
        })
    }

    fn get(&self) -> String {
        let mut c = self.cached.lock().unwrap();
        if c.0.elapsed() > Duration::from_secs(60) {
            if let Ok(t) = read_token(&self.file) {
                *c = (Instant::now(), t);
            }
        }
        c.1.clone()
    }
}

fn read_token(file: &PathBuf) -> Result<String, Failure> {
    std::fs::read_to_string(file)
        .map(|t| t.trim().to_owned())
        .map_err(|e| format!("cannot read the token file {}: {e}", file.display()))
}

/// The HTTP side: one shared connection pool for every task.
struct Client {
    http: reqwest::Client,
    bases: Vec<String>,
    producer: Token,
    operator: Token,
    workflow: String,
    revision: String,
    application_id: String,
    key_prefix: String,
}

impl Client {
    fn new(t: &Target) -> Result<Client, Failure> {
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
    async fn start(&self, i: usize, send_after: &str) -> Result<String, Failure> {
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
    async fn get(&self, path: &str) -> Result<Value, Failure> {
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

    /// Whether any run of the deployment is still `running`.
    async fn any_running(&self) -> Result<bool, Failure> {
        let page = self.get("/v1/runs?state=running&limit=1").await?;
        Ok(page["runs"].as_array().is_some_and(|r| !r.is_empty()))
    }

    /// Admits runs `from..to` with `send_after` at `concurrency`; each
    /// run id and when its admission was answered, in order.
    async fn admit_many(
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
    async fn verify_finished(self: &Arc<Self>, runs: &[String]) -> Result<String, Failure> {
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

/// One `/proc/<pid>/stat`: parent, own CPU ticks (user + system) and the
/// ticks of its reaped children.
fn proc_stat(pid: u32) -> Option<(u32, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    // After the name: state, ppid, ... utime (14), stime, cutime, cstime.
    Some((n(1)? as u32, n(11)? + n(12)?, n(13)? + n(14)?))
}

fn rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// CPU ticks of PostgreSQL: the postmaster, every live child and every
/// child it reaped (so backends that ended in between still count).
fn postgres_ticks(postmaster: u32) -> u64 {
    let Some((_, own, reaped)) = proc_stat(postmaster) else {
        return 0;
    };
    let mut total = own + reaped;
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some((ppid, ticks, _)) = proc_stat(pid) {
                if ppid == postmaster {
                    total += ticks;
                }
            }
        }
    }
    total
}

#[derive(Clone, Copy, Default)]
struct Cpu {
    postgres: u64,
    coordinator: u64,
    sandbox: u64,
    client: u64,
    /// Every busy tick of the machine (`/proc/stat`), ours included.
    machine: u64,
}

/// Busy ticks of all CPUs since boot: user, nice, system, irq, softirq
/// and steal of `/proc/stat`'s first line.
fn machine_ticks() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let Some(line) = text.lines().next() else {
        return 0;
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    [0usize, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|i| f.get(*i))
        .sum()
}

#[derive(Clone, Default)]
struct Statement {
    calls: i64,
    exec_ms: f64,
    query: String,
}

#[derive(Clone, Default)]
struct Counters {
    xacts: i64,
    wal_bytes: f64,
    wal_records: i64,
    wal_syncs: i64,
}

struct Meter {
    target: Target,
    db: tokio::sync::Mutex<PgConnection>,
}

impl Meter {
    async fn new(target: &Target) -> Result<Meter, Failure> {
        let url = with_database(&target.stats_url, "postgres");
        let mut db = PgConnection::connect(&url)
            .await
            .map_err(|e| format!("cannot connect to the cluster for its statistics: {e}"))?;
        sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(&mut db)
            .await
            .map_err(|e| format!("CREATE EXTENSION pg_stat_statements: {e}"))?;
        Ok(Meter {
            target: target.clone(),
            db: tokio::sync::Mutex::new(db),
        })
    }

    fn cpu(&self) -> Cpu {
        let t = &self.target;
        Cpu {
            postgres: postgres_ticks(t.postmaster_pid),
            coordinator: t
                .coordinator_pids
                .iter()
                .filter_map(|p| proc_stat(*p))
                .map(|(_, a, b)| a + b)
                .sum(),
            sandbox: t
                .sandbox_pid
                .and_then(proc_stat)
                .map(|(_, a, b)| a + b)
                .unwrap_or(0),
            client: proc_stat(std::process::id())
                .map(|(_, a, _)| a)
                .unwrap_or(0),
            machine: machine_ticks(),
        }
    }

    fn rss_kib(&self) -> u64 {
        self.target
            .coordinator_pids
            .iter()
            .filter_map(|p| rss_kib(*p))
            .sum()
    }

    async fn statements(&self) -> Result<HashMap<i64, Statement>, Failure> {
        let mut db = self.db.lock().await;
        let rows = sqlx::query(
            "SELECT s.queryid, s.calls, s.total_exec_time, s.query
               FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
              WHERE d.datname = $1 AND s.queryid IS NOT NULL",
        )
        .bind(&self.target.database)
        .fetch_all(&mut *db)
        .await
        .map_err(|e| format!("reading pg_stat_statements: {e}"))?;
        let mut out: HashMap<i64, Statement> = HashMap::new();
        for row in rows {
            let e = out.entry(row.get::<i64, _>(0)).or_default();
            e.calls += row.get::<i64, _>(1);
            e.exec_ms += row.get::<f64, _>(2);
            e.query = row.get::<String, _>(3);
        }
        Ok(out)
    }

    async fn counters(&self) -> Result<Counters, Failure> {
        let mut db = self.db.lock().await;
        let row = sqlx::query(
            "SELECT (SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1),
                    w.wal_bytes::float8, w.wal_records::bigint, w.wal_sync::bigint
               FROM pg_stat_wal w",
        )
        .bind(&self.target.database)
        .fetch_one(&mut *db)
        .await
        .map_err(|e| format!("reading pg_stat_database/pg_stat_wal: {e}"))?;
        Ok(Counters {
            xacts: row.get::<Option<i64>, _>(0).unwrap_or(0),
            wal_bytes: row.get(1),
            wal_records: row.get(2),
            wal_syncs: row.get(3),
        })
    }

    /// Takes PostgreSQL's catch-up work out of what follows: `VACUUM
    /// (ANALYZE)` of the service's database and of `postgres` (pgbench's)
    /// and a `CHECKPOINT` now, then waits while an autovacuum worker runs.
    /// The seconds it took.
    async fn quiesce(&self) -> Result<f64, Failure> {
        let began = Instant::now();
        let mut db = PgConnection::connect(&self.target.stats_url)
            .await
            .map_err(|e| format!("cannot connect to the service's database: {e}"))?;
        for sql in ["VACUUM (ANALYZE)", "CHECKPOINT"] {
            sqlx::query(sql)
                .execute(&mut db)
                .await
                .map_err(|e| format!("{sql}: {e}"))?;
        }
        drop(db);
        // And the meter's own database, where pgbench's tables are.
        sqlx::query("VACUUM (ANALYZE)")
            .execute(&mut *self.db.lock().await)
            .await
            .map_err(|e| format!("VACUUM (ANALYZE) of postgres: {e}"))?;
        loop {
            let busy: i64 = {
                let mut db = self.db.lock().await;
                sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'",
                )
                .fetch_one(&mut *db)
                .await
                .map_err(|e| format!("reading pg_stat_activity: {e}"))?
            };
            if busy == 0 {
                return Ok(began.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn setting(&self, name: &str) -> Result<String, Failure> {
        let mut db = self.db.lock().await;
        sqlx::query_scalar::<_, String>("SELECT current_setting($1)")
            .bind(name)
            .fetch_one(&mut *db)
            .await
            .map_err(|e| format!("SHOW {name}: {e}"))
    }

    /// Messaging requests in the sandbox's log so far: idempotency key →
    /// (requests, the highest "performed" count printed).
    fn messages(&self) -> Result<Option<Messages>, Failure> {
        let Some(file) = &self.target.sandbox_log else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the sandbox log {}: {e}", file.display()))?;
        let mut out: Messages = HashMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("messaging: message request, Idempotency-Key ")
            else {
                continue;
            };
            let (key, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let performed = rest
                .strip_prefix("(performed ")
                .and_then(|r| r.split_once(' '))
                .and_then(|(n, _)| n.parse().ok())
                .unwrap_or(0);
            let e = out.entry(key.to_owned()).or_insert((0, 0));
            e.0 += 1;
            e.1 = e.1.max(performed);
        }
        Ok(Some(out))
    }
}

/// What the samples saw: how many samples, backends per wait, and for
/// lock waits, the waiting statement and what blocked it.
#[derive(Default)]
struct WaitSamples {
    samples: usize,
    waits: BTreeMap<String, usize>,
    blocked: BTreeMap<String, usize>,
}

/// What the service's PostgreSQL backends were doing, sampled from
/// `pg_stat_activity` every 50 ms while a phase runs (on its own
/// connection): per wait (`type:event`, `CPU` for an active backend with
/// none, `in transaction, idle` for a backend waiting for the coordinator
/// inside a transaction) how many backends were seen in it, summed over
/// the samples; for a backend waiting on a lock, its statement and the
/// statement (and state) of the first backend `pg_blocking_pids` names.
struct Waits {
    stop: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<Result<WaitSamples, Failure>>,
}

impl Waits {
    async fn start(target: &Target) -> Result<Waits, Failure> {
        let mut db = PgConnection::connect(&with_database(&target.stats_url, "postgres"))
            .await
            .map_err(|e| format!("cannot connect to the cluster to sample waits: {e}"))?;
        let database = target.database.clone();
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut seen = WaitSamples::default();
            loop {
                let rows = sqlx::query(
                    "SELECT a.state, a.wait_event_type, a.wait_event, a.query,
                            CASE WHEN a.wait_event_type = 'Lock' THEN
                              (SELECT b.query || ' [' || b.state || ']' FROM pg_stat_activity b
                                WHERE b.pid = (pg_blocking_pids(a.pid))[1])
                            END
                       FROM pg_stat_activity a
                      WHERE a.datname = $1 AND a.backend_type = 'client backend'
                        AND a.state IN ('active', 'idle in transaction')",
                )
                .bind(&database)
                .fetch_all(&mut db)
                .await
                .map_err(|e| format!("reading pg_stat_activity: {e}"))?;
                seen.samples += 1;
                for row in rows {
                    let state: Option<String> = row.get(0);
                    let kind: Option<String> = row.get(1);
                    let event: Option<String> = row.get(2);
                    let query: Option<String> = row.get(3);
                    let blocker: Option<String> = row.get(4);
                    if kind.as_deref() == Some("Lock") {
                        let key = format!(
                            "{} <- {}",
                            one_line(query.as_deref().unwrap_or("?"), 60),
                            one_line(blocker.as_deref().unwrap_or("?"), 75)
                        );
                        *seen.blocked.entry(key).or_insert(0) += 1;
                    }
                    let key = match (state.as_deref(), kind, event) {
                        (Some("idle in transaction"), _, _) => "in transaction, idle".to_owned(),
                        (_, Some(k), Some(e)) => format!("{k}:{e}"),
                        _ => "CPU".to_owned(),
                    };
                    *seen.waits.entry(key).or_insert(0) += 1;
                }
                tokio::select! {
                    _ = stopped.notified() => return Ok(seen),
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        });
        Ok(Waits { stop, task })
    }

    /// Stops sampling; the busiest waits, then the commonest lock waits
    /// (one a line).
    async fn finish(self) -> Result<String, Failure> {
        self.stop.notify_one();
        let seen = self.task.await.map_err(|e| e.to_string())??;
        let total: usize = seen.waits.values().sum();
        let share = |n: usize| 100.0 * n as f64 / total.max(1) as f64;
        let mut by: Vec<(String, usize)> = seen.waits.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let shares: Vec<String> = by
            .iter()
            .take(8)
            .map(|(k, n)| format!("{k} {:.0}%", share(*n)))
            .collect();
        let mut out = format!(
            "{:.1} busy on average; {}  (pg_stat_activity every 50 ms)",
            total as f64 / seen.samples.max(1) as f64,
            shares.join(", ")
        );
        let mut blocked: Vec<(String, usize)> = seen.blocked.into_iter().collect();
        blocked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (k, n) in blocked.iter().take(5) {
            out.push_str(&format!("\n    lock wait {:>3.0}%  {k}", share(*n)));
        }
        Ok(out)
    }
}

/// `url` with its database (the path) replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let scheme_end = head.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match head[scheme_end..].find('/') {
        Some(i) => &head[..scheme_end + i],
        None => head,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

/// Messaging's requests by idempotency key: (requests, the highest
/// "performed" count printed).
type Messages = HashMap<String, (usize, usize)>;

/// What one phase cost, between two readings.
struct Costs {
    runs: usize,
    seconds: f64,
    cpu: Cpu,
    /// Less the idle service's transactions after the phase.
    xacts: f64,
    idle_xacts_per_s: f64,
    wal: Counters,
    statements: Vec<(i64, Statement)>,
}

/// The transaction and WAL counters once what ran before (the warm-up's or
/// the previous phase's read-back) has been flushed to them.
async fn settled_counters(m: &Meter) -> Result<Counters, Failure> {
    tokio::time::sleep(STATS_SETTLE).await;
    m.counters().await
}

async fn measure_start(m: &Meter) -> Result<(Instant, Cpu, HashMap<i64, Statement>), Failure> {
    let statements = m.statements().await?;
    Ok((Instant::now(), m.cpu(), statements))
}

/// Ends a phase begun at `start`: CPU and statements now, then the
/// counters once they have settled. `counters_before` were read before the
/// phase (after a settle).
async fn measure_end(
    m: &Meter,
    runs: usize,
    start: (Instant, Cpu, HashMap<i64, Statement>),
    end_at: Instant,
    counters_before: &Counters,
) -> Result<Costs, Failure> {
    let (began, cpu0, st0) = start;
    let cpu1 = m.cpu();
    let st1 = m.statements().await?;
    tokio::time::sleep(STATS_SETTLE).await;
    let settled_at = Instant::now();
    let c1 = m.counters().await?;
    // The idle service's own transactions while the counters settled (its
    // lanes' polls): measured over as long again, then subtracted.
    tokio::time::sleep(STATS_SETTLE).await;
    let c2 = m.counters().await?;
    let idle_per_s = (c2.xacts - c1.xacts) as f64 / settled_at.elapsed().as_secs_f64();
    let idle_xacts = idle_per_s * settled_at.duration_since(end_at).as_secs_f64();
    let statements = statement_delta(&st0, st1);
    Ok(Costs {
        runs,
        seconds: end_at.duration_since(began).as_secs_f64(),
        cpu: Cpu {
            postgres: cpu1.postgres - cpu0.postgres,
            coordinator: cpu1.coordinator - cpu0.coordinator,
            sandbox: cpu1.sandbox - cpu0.sandbox,
            client: cpu1.client - cpu0.client,
            machine: cpu1.machine - cpu0.machine,
        },
        xacts: (c1.xacts - counters_before.xacts) as f64 - idle_xacts,
        idle_xacts_per_s: idle_per_s,
        wal: Counters {
            xacts: 0,
            wal_bytes: c1.wal_bytes - counters_before.wal_bytes,
            wal_records: c1.wal_records - counters_before.wal_records,
            wal_syncs: c1.wal_syncs - counters_before.wal_syncs,
        },
        statements,
    })
}

/// The statements run between two readings, most calls first.
fn statement_delta(
    before: &HashMap<i64, Statement>,
    after: HashMap<i64, Statement>,
) -> Vec<(i64, Statement)> {
    let mut out: Vec<(i64, Statement)> = after
        .into_iter()
        .filter_map(|(id, s)| {
            let b = before.get(&id).cloned().unwrap_or_default();
            let calls = s.calls - b.calls;
            if calls <= 0 {
                return None;
            }
            let statement = Statement {
                calls,
                exec_ms: s.exec_ms - b.exec_ms,
                query: s.query,
            };
            Some((id, statement))
        })
        .collect();
    out.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then(a.0.cmp(&b.0)));
    out
}

fn is_transaction_control(query: &str) -> bool {
    let q = query.trim_start().to_ascii_uppercase();
    ["BEGIN", "COMMIT", "ROLLBACK", "START TRANSACTION", "END"]
        .iter()
        .any(|k| q == *k || q.starts_with(&format!("{k} ")) || q.starts_with(&format!("{k};")))
}

/// `query` on one line, without the deployment's namespace
/// (`coordinator_…` schema prefixes), cut at `width` characters.
fn one_line(query: &str, width: usize) -> String {
    let mut bare = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(i) = rest.find("coordinator_") {
        bare.push_str(&rest[..i]);
        let after = &rest[i..];
        let name = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if after[name..].starts_with('.') {
            rest = &after[name + 1..];
        } else {
            bare.push_str(&after[..name]);
            rest = &after[name..];
        }
    }
    bare.push_str(rest);
    let flat: String = bare.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > width {
        let cut: String = flat.chars().take(width - 1).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

struct Report<'a> {
    target: &'a Target,
    lines: Vec<(String, String)>,
}

impl<'a> Report<'a> {
    fn new(target: &'a Target) -> Report<'a> {
        Report {
            target,
            lines: Vec::new(),
        }
    }

    /// Keeps `key=value` for the results file.
    fn keep(&mut self, key: &str, value: impl std::fmt::Display) {
        self.lines.push((key.to_owned(), value.to_string()));
    }

    fn write(&self) -> Result<(), Failure> {
        let Some(file) = &self.target.results else {
            return Ok(());
        };
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .map_err(|e| format!("cannot open {}: {e}", file.display()))?;
        for (k, v) in &self.lines {
            writeln!(f, "{}.{k}={v}", self.target.label).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Prints the per-run costs of a phase (and keeps them for the results).
fn print_costs(c: &Costs, tck: u64, top: usize, r: &mut Report) {
    let per = |v: f64| v / c.runs.max(1) as f64;
    let secs = |ticks: u64| ticks as f64 / tck as f64;
    let calls: i64 = c.statements.iter().map(|(_, s)| s.calls).sum();
    let control: i64 = c
        .statements
        .iter()
        .filter(|(_, s)| is_transaction_control(&s.query))
        .map(|(_, s)| s.calls)
        .sum();
    let exec_ms: f64 = c.statements.iter().map(|(_, s)| s.exec_ms).sum();
    println!(
        "  transactions per run       {:.2}  (pg_stat_database xact_commit + xact_rollback; the idle service's {:.1}/s after the phase subtracted)",
        per(c.xacts),
        c.idle_xacts_per_s
    );
    println!(
        "  statements per run         {:.2}  (pg_stat_statements calls; {:.2} of them BEGIN/COMMIT/ROLLBACK)",
        per(calls as f64),
        per(control as f64)
    );
    println!(
        "  statement time per run     {:.2} ms  (pg_stat_statements total_exec_time)",
        per(exec_ms)
    );
    println!(
        "  WAL per run                {:.1} kB, {:.1} records, {:.2} WAL syncs (pg_stat_wal)",
        per(c.wal.wal_bytes) / 1000.0,
        per(c.wal.wal_records as f64),
        per(c.wal.wal_syncs as f64)
    );
    println!(
        "  CPU seconds per run        postgres {:.4}, coordinator {:.4}, sandbox {:.4}, client {:.4}",
        per(secs(c.cpu.postgres)),
        per(secs(c.cpu.coordinator)),
        per(secs(c.cpu.sandbox)),
        per(secs(c.cpu.client))
    );
    let ours = c.cpu.postgres + c.cpu.coordinator + c.cpu.sandbox + c.cpu.client;
    let pct = |ticks: u64| 100.0 * secs(ticks) / c.seconds;
    println!(
        "  CPU busy over the phase    postgres {:.0}%, coordinator {:.0}%, sandbox {:.0}%, client {:.0}%, other processes {:.0}%  (100% = one core; {} cores)",
        pct(c.cpu.postgres),
        pct(c.cpu.coordinator),
        pct(c.cpu.sandbox),
        pct(c.cpu.client),
        pct(c.cpu.machine.saturating_sub(ours)),
        cores(),
    );
    if top > 0 {
        println!("  statements by calls per run (pg_stat_statements; mean ms per call):");
        for (_, s) in c.statements.iter().take(top) {
            println!(
                "    {:>6.2}  {:>7.3}  {}",
                per(s.calls as f64),
                s.exec_ms / s.calls.max(1) as f64,
                one_line(&s.query, 110)
            );
        }
    }
    r.keep("transactions_per_run", format!("{:.2}", per(c.xacts)));
    r.keep("statements_per_run", format!("{:.2}", per(calls as f64)));
    r.keep(
        "postgres_cpu_s_per_run",
        format!("{:.5}", per(secs(c.cpu.postgres))),
    );
    r.keep(
        "coordinator_cpu_s_per_run",
        format!("{:.5}", per(secs(c.cpu.coordinator))),
    );
    r.keep("all_cpu_s_per_run", format!("{:.5}", per(secs(ours))));
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Checks the new messages (those not in `before`): one request per key,
/// none performed twice, `expected` keys. A summary line.
fn check_messages(
    m: &Meter,
    before: &Option<Messages>,
    expected: usize,
) -> Result<String, Failure> {
    let (Some(after), Some(before)) = (m.messages()?, before) else {
        return Ok("messages not checked (no --sandbox-log)".to_owned());
    };
    let new: Vec<(&String, &(usize, usize))> = after
        .iter()
        .filter(|(k, _)| !before.contains_key(*k))
        .collect();
    // The sandbox prints a request with the key's "performed" count at
    // its next half-second tick, so a request it had recorded but not yet
    // performed shows 0: each key must be requested once and never
    // performed twice (every run's outcome, message-accepted, is
    // Messaging's answer to that one request).
    let repeated = new.iter().filter(|(_, (n, p))| *n != 1 || *p > 1).count();
    let old_again = after
        .iter()
        .filter(|(k, v)| before.get(*k).is_some_and(|b| b != *v))
        .count();
    if new.len() != expected || repeated > 0 || old_again > 0 {
        return Err(format!(
            "Messaging saw {} new idempotency keys for {expected} runs ({repeated} of them requested or performed more than once, {old_again} earlier keys again)",
            new.len()
        ));
    }
    Ok(format!(
        "{expected} messages, one idempotency key per run, each requested once, none performed twice"
    ))
}

fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

// ------------------------------------------------------------------ phases

async fn preflight(t: &Target) -> Result<(), Failure> {
    let m = Meter::new(t).await?;
    let version = m.setting("server_version").await?;
    let mut shown = Vec::new();
    for (name, want) in [
        ("fsync", Some("on")),
        ("synchronous_commit", Some("on")),
        ("full_page_writes", Some("on")),
        ("wal_sync_method", None),
        ("shared_buffers", None),
        ("max_connections", None),
        ("shared_preload_libraries", None),
    ] {
        let value = m.setting(name).await?;
        if let Some(want) = want {
            if value != want {
                return Err(format!(
                    "{name} is {value}, not {want}: not a production-durability cluster"
                ));
            }
        }
        shown.push(format!("{name}={value}"));
    }
    if !m
        .setting("shared_preload_libraries")
        .await?
        .contains("pg_stat_statements")
    {
        return Err("pg_stat_statements is not in shared_preload_libraries".into());
    }
    println!("PostgreSQL {version}: {}", shown.join(", "));
    Ok(())
}

async fn throughput(a: ThroughputArgs) -> Result<(), Failure> {
    let t = &a.target;
    let client = Arc::new(Client::new(t)?);
    let m = Meter::new(t).await?;
    println!(
        "== throughput: {} coordinator process(es), {} runs, {} concurrent clients",
        t.bases.len(),
        a.runs,
        a.concurrency
    );
    if client.any_running().await? {
        return Err("runs of an earlier phase are still running".into());
    }
    let messages_before = m.messages()?;
    let counters_before = settled_counters(&m).await?;
    let waits = Waits::start(t).await?;
    let start = measure_start(&m).await?;
    let past = rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(1));
    let admitted = client
        .admit_many(0, a.runs, a.concurrency, move |_| past.clone(), None)
        .await?;
    let admitted_in = start.0.elapsed();
    // Finishing is observed by listing: once every run is admitted, the
    // list of running runs until it is empty.
    let mut polls = 0usize;
    while client.any_running().await? {
        polls += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let end_at = Instant::now();
    let waits = waits.finish().await?;
    let costs = measure_end(&m, a.runs, start, end_at, &counters_before).await?;
    let runs: Vec<String> = admitted.into_iter().map(|(r, _)| r).collect();
    let verified = client.verify_finished(&runs).await?;
    let messages = check_messages(&m, &messages_before, a.runs)?;
    let rate = a.runs as f64 / costs.seconds;
    println!(
        "  completed runs/s           {rate:.1}  ({} runs in {:.2} s from the first admission to the last seen finished; all admitted after {:.2} s)",
        a.runs,
        costs.seconds,
        admitted_in.as_secs_f64()
    );
    println!("  verified                   {verified}; {messages}");
    println!(
        "  observer                   {} list requests after the admissions ({:.3} per run)",
        polls + 1,
        (polls + 1) as f64 / a.runs as f64
    );
    println!("  service's backends         {waits}");
    let mut r = Report::new(t);
    r.keep("runs_per_s", format!("{rate:.1}"));
    print_costs(&costs, t.clk_tck, t.top, &mut r);
    r.write()
}

async fn latency(a: LatencyArgs) -> Result<(), Failure> {
    let t = &a.target;
    let client = Arc::new(Client::new(t)?);
    let m = Meter::new(t).await?;
    println!(
        "== latency: 1 client in a closed loop, {} runs, GET /v1/runs/{{id}} every {} ms until finished",
        a.runs, a.poll_ms
    );
    if client.any_running().await? {
        return Err("runs of an earlier phase are still running".into());
    }
    let messages_before = m.messages()?;
    let counters_before = settled_counters(&m).await?;
    let waits = Waits::start(t).await?;
    let start = measure_start(&m).await?;
    let mut to_finish = Vec::with_capacity(a.runs);
    let mut to_admit = Vec::with_capacity(a.runs);
    let mut runs = Vec::with_capacity(a.runs);
    let mut polls = 0usize;
    for i in 0..a.runs {
        let past = rfc3339(time::OffsetDateTime::now_utc() - time::Duration::minutes(1));
        let sent = Instant::now();
        let run = client.start(i, &past).await?;
        let admitted = Instant::now();
        loop {
            polls += 1;
            let v = client.get(&format!("/v1/runs/{run}")).await?;
            match v["state"].as_str() {
                Some("finished") => break,
                Some("running") => {}
                other => return Err(format!("run {run} is {other:?}, not finished: {v}")),
            }
            tokio::time::sleep(Duration::from_millis(a.poll_ms)).await;
        }
        to_finish.push(admitted.duration_since(sent) + admitted.elapsed());
        to_admit.push(admitted.duration_since(sent));
        runs.push(run);
    }
    let end_at = Instant::now();
    let waits = waits.finish().await?;
    let costs = measure_end(&m, a.runs, start, end_at, &counters_before).await?;
    let verified = client.verify_finished(&runs).await?;
    let messages = check_messages(&m, &messages_before, a.runs)?;
    let mut finish_only: Vec<Duration> = to_finish
        .iter()
        .zip(&to_admit)
        .map(|(f, a)| f.saturating_sub(*a))
        .collect();
    to_finish.sort_unstable();
    to_admit.sort_unstable();
    finish_only.sort_unstable();
    println!(
        "  admission to finished      p50 {} ms, p99 {} ms, max {} ms  (from the POST's answer to the first GET seeing finished)",
        ms(percentile(&finish_only, 0.50)),
        ms(percentile(&finish_only, 0.99)),
        ms(finish_only.last().copied().unwrap_or_default())
    );
    println!(
        "  POST /v1/runs answered in  p50 {} ms, p99 {} ms",
        ms(percentile(&to_admit, 0.50)),
        ms(percentile(&to_admit, 0.99))
    );
    println!(
        "  request to finished        p50 {} ms, p99 {} ms  (from sending the POST)",
        ms(percentile(&to_finish, 0.50)),
        ms(percentile(&to_finish, 0.99))
    );
    println!(
        "  closed loop                {:.1} runs/s; {verified}; {messages}",
        a.runs as f64 / costs.seconds
    );
    println!(
        "  observer                   {polls} status requests ({:.1} per run; included below)",
        polls as f64 / a.runs as f64
    );
    println!("  service's backends         {waits}");
    let mut r = Report::new(t);
    r.keep("p50_ms", ms(percentile(&finish_only, 0.50)));
    r.keep("p99_ms", ms(percentile(&finish_only, 0.99)));
    print_costs(&costs, t.clk_tck, 0, &mut r);
    r.write()
}

/// CPU seconds per second of the coordinator(s) and PostgreSQL, and
/// statements per second, over `window` (and the `top` statements by calls
/// per second).
async fn idle_window(
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

async fn scale(a: ScaleArgs) -> Result<(), Failure> {
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
