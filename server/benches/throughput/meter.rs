//! The meter: CPU and RSS from /proc, PostgreSQL's counters, statements,
//! waits and the report of a phase.

use super::*;

/// One `/proc/<pid>/stat`: parent, own CPU ticks (user + system) and the
/// ticks of its reaped children.
pub(crate) fn proc_stat(pid: u32) -> Option<(u32, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    // After the name: state, ppid, ... utime (14), stime, cutime, cstime.
    Some((n(1)? as u32, n(11)? + n(12)?, n(13)? + n(14)?))
}

pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// CPU ticks of PostgreSQL: the postmaster, every live child and every
/// child it reaped (so backends that ended in between still count).
pub(crate) fn postgres_ticks(postmaster: u32) -> u64 {
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
pub(crate) struct Cpu {
    pub(crate) postgres: u64,
    pub(crate) coordinator: u64,
    pub(crate) sandbox: u64,
    pub(crate) client: u64,
    /// Every busy tick of the machine (`/proc/stat`), ours included.
    pub(crate) machine: u64,
}

/// Busy ticks of all CPUs since boot: user, nice, system, irq, softirq
/// and steal of `/proc/stat`'s first line.
pub(crate) fn machine_ticks() -> u64 {
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
pub(crate) struct Statement {
    pub(crate) calls: i64,
    pub(crate) exec_ms: f64,
    pub(crate) query: String,
}

#[derive(Clone, Default)]
pub(crate) struct Counters {
    pub(crate) xacts: i64,
    pub(crate) wal_bytes: f64,
    pub(crate) wal_records: i64,
    pub(crate) wal_syncs: i64,
}

pub(crate) struct Meter {
    pub(crate) target: Target,
    pub(crate) db: tokio::sync::Mutex<PgConnection>,
}

impl Meter {
    pub(crate) async fn new(target: &Target) -> Result<Meter, Failure> {
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

    pub(crate) fn cpu(&self) -> Cpu {
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

    pub(crate) fn rss_kib(&self) -> u64 {
        self.target
            .coordinator_pids
            .iter()
            .filter_map(|p| rss_kib(*p))
            .sum()
    }

    pub(crate) async fn statements(&self) -> Result<HashMap<i64, Statement>, Failure> {
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

    pub(crate) async fn counters(&self) -> Result<Counters, Failure> {
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
    pub(crate) async fn quiesce(&self) -> Result<f64, Failure> {
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

    /// The service's database's size in bytes (`pg_database_size`).
    pub(crate) async fn database_size(&self) -> Result<i64, Failure> {
        let mut db = self.db.lock().await;
        sqlx::query_scalar::<_, i64>("SELECT pg_database_size($1)")
            .bind(&self.target.database)
            .fetch_one(&mut *db)
            .await
            .map_err(|e| e.to_string())
    }

    pub(crate) async fn setting(&self, name: &str) -> Result<String, Failure> {
        let mut db = self.db.lock().await;
        sqlx::query_scalar::<_, String>("SELECT current_setting($1)")
            .bind(name)
            .fetch_one(&mut *db)
            .await
            .map_err(|e| format!("SHOW {name}: {e}"))
    }

    /// Messaging requests in the sandbox's log so far: idempotency key →
    /// (requests, the highest "performed" count printed).
    pub(crate) fn messages(&self) -> Result<Option<Messages>, Failure> {
        let Some(file) = &self.target.sandbox_log else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the sandbox log {}: {e}", file.display()))?;
        let mut out: Messages = HashMap::new();
        for line in text.lines() {
            count_message_line(&mut out, line);
        }
        Ok(Some(out))
    }
}

/// Counts one line of the sandbox's log into `out` if it is a Messaging
/// request (`messaging: message request, Idempotency-Key K (performed N
/// time(s) ...`): one more request for key K, and the highest N printed.
/// Other lines are ignored.
pub(crate) fn count_message_line(out: &mut Messages, line: &str) {
    let Some(rest) = line.strip_prefix("messaging: message request, Idempotency-Key ") else {
        return;
    };
    let (key, rest) = rest.split_once(' ').unwrap_or((rest.trim_end(), ""));
    let performed = rest
        .strip_prefix("(performed ")
        .and_then(|r| r.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0);
    let e = out.entry(key.to_owned()).or_insert((0, 0));
    e.0 += 1;
    e.1 = e.1.max(performed);
}

/// What the samples saw: how many samples, backends per wait, and for
/// lock waits, the waiting statement and what blocked it.
#[derive(Default)]
pub(crate) struct WaitSamples {
    pub(crate) samples: usize,
    pub(crate) waits: BTreeMap<String, usize>,
    pub(crate) blocked: BTreeMap<String, usize>,
}

/// What the service's PostgreSQL backends were doing, sampled from
/// `pg_stat_activity` every 50 ms while a phase runs (on its own
/// connection): per wait (`type:event`, `CPU` for an active backend with
/// none, `in transaction, idle` for a backend waiting for the coordinator
/// inside a transaction) how many backends were seen in it, summed over
/// the samples; for a backend waiting on a lock, its statement and the
/// statement (and state) of the first backend `pg_blocking_pids` names.
pub(crate) struct Waits {
    pub(crate) stop: Arc<tokio::sync::Notify>,
    pub(crate) task: tokio::task::JoinHandle<Result<WaitSamples, Failure>>,
}

impl Waits {
    pub(crate) async fn start(target: &Target) -> Result<Waits, Failure> {
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
    pub(crate) async fn finish(self) -> Result<String, Failure> {
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
pub(crate) fn with_database(url: &str, db: &str) -> String {
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
pub(crate) type Messages = HashMap<String, (usize, usize)>;

/// What one phase cost, between two readings.
pub(crate) struct Costs {
    pub(crate) runs: usize,
    pub(crate) seconds: f64,
    pub(crate) cpu: Cpu,
    /// Less the idle service's transactions after the phase.
    pub(crate) xacts: f64,
    pub(crate) idle_xacts_per_s: f64,
    pub(crate) wal: Counters,
    pub(crate) statements: Vec<(i64, Statement)>,
}

/// The transaction and WAL counters once what ran before (the warm-up's or
/// the previous phase's read-back) has been flushed to them.
pub(crate) async fn settled_counters(m: &Meter) -> Result<Counters, Failure> {
    tokio::time::sleep(STATS_SETTLE).await;
    m.counters().await
}

pub(crate) async fn measure_start(
    m: &Meter,
) -> Result<(Instant, Cpu, HashMap<i64, Statement>), Failure> {
    let statements = m.statements().await?;
    Ok((Instant::now(), m.cpu(), statements))
}

/// Ends a phase begun at `start`: CPU and statements now, then the
/// counters once they have settled. `counters_before` were read before the
/// phase (after a settle).
pub(crate) async fn measure_end(
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
pub(crate) fn statement_delta(
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

pub(crate) fn is_transaction_control(query: &str) -> bool {
    let q = query.trim_start().to_ascii_uppercase();
    ["BEGIN", "COMMIT", "ROLLBACK", "START TRANSACTION", "END"]
        .iter()
        .any(|k| q == *k || q.starts_with(&format!("{k} ")) || q.starts_with(&format!("{k};")))
}

/// `query` on one line, without the deployment's namespace
/// (`coordinator_…` schema prefixes), cut at `width` characters.
pub(crate) fn one_line(query: &str, width: usize) -> String {
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

pub(crate) struct Report<'a> {
    pub(crate) target: &'a Target,
    pub(crate) lines: Vec<(String, String)>,
}

impl<'a> Report<'a> {
    pub(crate) fn new(target: &'a Target) -> Report<'a> {
        Report {
            target,
            lines: Vec::new(),
        }
    }

    /// Keeps `key=value` for the results file.
    pub(crate) fn keep(&mut self, key: &str, value: impl std::fmt::Display) {
        self.lines.push((key.to_owned(), value.to_string()));
    }

    pub(crate) fn write(&self) -> Result<(), Failure> {
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
pub(crate) fn print_costs(c: &Costs, tck: u64, top: usize, r: &mut Report) {
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
