//! The soak's readings of the service's database, one fresh connection
//! each (the last one may not have survived a PostgreSQL restart): the
//! namespace of the one deployment, and for each row its connections, the
//! busiest tables' dead tuples and sizes, the WAL position and the runs by
//! state.

use super::*;

/// The tables whose dead tuples and size each row shows, in this order.
pub(super) const TABLES: [&str; 4] = ["runs", "jobs", "run_counts", "spent_keys"];

/// One reading of the database for a row.
pub(super) struct DbReading {
    /// Connections to the service's database, this reading's own left out.
    pub(super) connections: i64,
    /// (dead tuples, total bytes) per table of TABLES (`None` if missing).
    pub(super) tables: Vec<Option<(i64, i64)>>,
    /// The WAL position, bytes since `0/0` (`pg_current_wal_lsn()`).
    pub(super) lsn: f64,
    /// The namespace's runs by state: how many in each.
    pub(super) states: BTreeMap<String, i64>,
}

/// `name` quoted as an SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A new connection to the service's database (a row's connection: the
/// last one may not have survived a PostgreSQL restart), retried for up
/// to 30 s.
async fn connect(t: &Target) -> Result<PgConnection, Failure> {
    let url = with_database(&t.stats_url, &t.database);
    let began = Instant::now();
    loop {
        let tried =
            tokio::time::timeout(Duration::from_secs(10), PgConnection::connect(&url)).await;
        let last = match tried {
            Ok(Ok(db)) => return Ok(db),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 10 s".to_owned(),
        };
        if began.elapsed() > Duration::from_secs(30) {
            return Err(format!("cannot connect to the service's database: {last}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The schema holding a table named `run_counts` (the one deployment).
pub(super) async fn find_namespace(t: &Target) -> Result<String, Failure> {
    let mut db = connect(t).await?;
    let found: Vec<String> = sqlx::query_scalar(
        "SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relname = 'run_counts' AND c.relkind IN ('r', 'p')",
    )
    .fetch_all(&mut db)
    .await
    .map_err(|e| format!("finding the namespace: {e}"))?;
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("no table run_counts in the service's database: pass --namespace".into()),
        many => Err(format!(
            "several deployments ({many:?}) in the service's database: pass --namespace"
        )),
    }
}

/// Reads the database for a row (see DbReading) on a connection of its
/// own, closed after.
pub(super) async fn read_db(t: &Target, namespace: &str) -> Result<DbReading, Failure> {
    let mut db = connect(t).await?;
    let e = |what: &'static str| move |err: sqlx::Error| format!("reading {what}: {err}");
    let connections: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_one(&mut db)
    .await
    .map_err(e("pg_stat_activity"))?;
    let rows = sqlx::query(
        "SELECT c.relname::text, coalesce(s.n_dead_tup, 0)::bigint, pg_total_relation_size(c.oid)::bigint
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
          WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname = ANY($2)",
    )
    .bind(namespace)
    .bind(TABLES.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    .fetch_all(&mut db)
    .await
    .map_err(e("pg_stat_user_tables"))?;
    let by: HashMap<String, (i64, i64)> = rows
        .into_iter()
        .map(|r| (r.get::<String, _>(0), (r.get(1), r.get(2))))
        .collect();
    let tables = TABLES.iter().map(|n| by.get(*n).copied()).collect();
    let lsn: f64 = sqlx::query_scalar("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::float8")
        .fetch_one(&mut db)
        .await
        .map_err(e("pg_current_wal_lsn"))?;
    let states = sqlx::query(&format!(
        "SELECT state, count(*) FROM {}.runs GROUP BY state",
        ident(namespace)
    ))
    .fetch_all(&mut db)
    .await
    .map_err(e("runs by state"))?
    .into_iter()
    .map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1)))
    .collect();
    let _ = db.close().await;
    Ok(DbReading {
        connections,
        tables,
        lsn,
        states,
    })
}
