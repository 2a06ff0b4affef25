//! The soak's table: a Markdown row every `--report-every` seconds, and
//! once when the admissions stop, of what must not grow: each
//! coordinator's RSS and open file descriptors (/proc, the pids from
//! bench-soak.sh's file), the database's readings, the followed runs'
//! admission-to-finished, the runs so far, the scrapes and the faults.

use super::database::{read_db, DbReading, TABLES};
use super::shared::Soak;
use super::*;

/// The file bench-soak.sh keeps.
#[derive(Default)]
pub(super) struct Pids {
    /// PostgreSQL's postmaster.
    pub(super) postmaster: Option<u32>,
    /// The coordinator processes, in --base order.
    pub(super) coordinators: Vec<u32>,
    /// Coordinators killed (`kill -9`) so far.
    pub(super) kills: u64,
    /// PostgreSQL's stops and starts so far.
    pub(super) pg_restarts: u64,
}

/// The pid file (or the pids given as arguments).
pub(super) fn read_pids(file: Option<&PathBuf>, initial: &Pids) -> Pids {
    let fallback = || Pids {
        postmaster: initial.postmaster,
        coordinators: initial.coordinators.clone(),
        kills: initial.kills,
        pg_restarts: initial.pg_restarts,
    };
    let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok()) else {
        return fallback();
    };
    let mut p = Pids::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "postmaster" => p.postmaster = v.parse().ok(),
            "coordinator" => p.coordinators.extend(v.parse::<u32>().ok()),
            "kills" => p.kills = v.parse().unwrap_or(0),
            "pg_restarts" => p.pg_restarts = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    if p.coordinators.is_empty() {
        return fallback();
    }
    p
}

/// How many file descriptors process `pid` has open (/proc), if it is
/// there to read.
fn open_fds(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|d| d.count())
}

/// Prints the table's header: its column names and its alignment line.
pub(super) fn print_the_table_header() {
    println!("| min | RSS MiB 1 / 2 | fds 1 / 2 | DB conns | runs dead / MiB | jobs dead / MiB | run_counts dead / MiB | spent_keys dead / MiB | WAL MiB | to finished p50 / p99 ms (n) | admitted | finished | held | scrape p99 ms | scrape fails | kills / PG restarts |");
    println!("|----:|---------------|-----------|---------:|-----------------|-----------------|-----------------------|-----------------------|--------:|------------------------------|---------:|---------:|-----:|--------------:|-------------:|--------------------:|");
}

/// What the rows need besides the shared state.
pub(super) struct Rows {
    /// The deployment's namespace (schema).
    namespace: String,
    /// The database before the soak (runs by state of earlier phases).
    baseline: DbReading,
    /// The pids given as arguments (no faults yet): what a row uses
    /// when the pid file cannot be read.
    pub(super) initial: Pids,
    /// The LSN at the last row (or the start).
    last_lsn: f64,
    /// When the admissions began: a row's minutes count from here.
    began: Instant,
}

impl Rows {
    /// The rows of a soak that began at `began` in `namespace`, the
    /// database as `baseline` read it before, the pids as `initial`.
    pub(super) fn new(
        namespace: String,
        baseline: DbReading,
        initial: Pids,
        began: Instant,
    ) -> Rows {
        Rows {
            namespace,
            last_lsn: baseline.lsn,
            baseline,
            initial,
            began,
        }
    }

    /// Prints a row every `--report-every` seconds (at least 1) after
    /// the start, while those times are before `until`.
    pub(super) async fn print_a_row_every_report_interval_until(
        &mut self,
        a: &SoakArgs,
        s: &Soak,
        until: Instant,
    ) {
        let mut k = 1u64;
        loop {
            let at = self.began + Duration::from_secs(k * a.report_every.max(1));
            if at >= until {
                break;
            }
            tokio::time::sleep_until(at.into()).await;
            let row = self.row(a, s).await;
            println!("{row}");
            k += 1;
        }
    }

    /// Prints the row at the end of the admissions, then the blank line
    /// that closes the table.
    pub(super) async fn print_the_last_row_and_close_the_table(&mut self, a: &SoakArgs, s: &Soak) {
        let row = self.row(a, s).await;
        println!("{row}");
        println!();
    }

    /// One row of the table (see the header).
    async fn row(&mut self, a: &SoakArgs, s: &Soak) -> String {
        let minutes = self.began.elapsed().as_secs_f64() / 60.0;
        let pids = read_pids(a.pid_file.as_ref(), &self.initial);
        let pair = |v: Vec<String>| v.join(" / ");
        let rss = pair(
            pids.coordinators
                .iter()
                .map(|p| {
                    rss_kib(*p).map_or("-".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0))
                })
                .collect(),
        );
        let fds = pair(
            pids.coordinators
                .iter()
                .map(|p| open_fds(*p).map_or("-".to_owned(), |n| n.to_string()))
                .collect(),
        );
        let (p50, p99, n) = {
            let mut l = s.latency.lock().unwrap();
            let mut v = std::mem::take(&mut l.0);
            v.sort_unstable();
            (percentile(&v, 0.5), percentile(&v, 0.99), v.len())
        };
        let (sc_p99, sc_failed) = {
            let mut sc = s.scrapes.lock().unwrap();
            let mut v = std::mem::take(&mut sc.interval);
            v.sort_unstable();
            let failed = std::mem::take(&mut sc.failed_interval);
            (percentile(&v, 0.99), failed)
        };
        let (conns, tables, wal, finished, held) = match read_db(&a.target, &self.namespace).await {
            Ok(d) => {
                let wal = (d.lsn - self.last_lsn) / 1_048_576.0;
                self.last_lsn = d.lsn;
                let count = |state: &str| {
                    d.states.get(state).copied().unwrap_or(0)
                        - self.baseline.states.get(state).copied().unwrap_or(0)
                };
                let tables: Vec<String> = d
                    .tables
                    .iter()
                    .map(|t| match t {
                        Some((dead, bytes)) => {
                            format!("{dead} / {:.2}", *bytes as f64 / 1_048_576.0)
                        }
                        None => "-".to_owned(),
                    })
                    .collect();
                (
                    d.connections.to_string(),
                    tables,
                    format!("{wal:.1}"),
                    count("finished").to_string(),
                    count("attention").to_string(),
                )
            }
            Err(e) => {
                eprintln!(
                    "throughput soak: the row at {minutes:.1} min has no database figures: {e}"
                );
                let dash = || "-".to_owned();
                (dash(), vec![dash(); TABLES.len()], dash(), dash(), dash())
            }
        };
        // Read after the database, so that it is never fewer than the runs
        // the database saw finish.
        let admitted = s.admitted_n.load(Ordering::SeqCst);
        format!(
        "| {minutes:.1} | {rss} | {fds} | {conns} | {} | {wal} | {} / {} ({n}) | {admitted} | {finished} | {held} | {} | {sc_failed} | {} / {} |",
        tables.join(" | "),
        ms(p50),
        ms(p99),
        ms(sc_p99),
        pids.kills,
        pids.pg_restarts
    )
    }
}
