//! The store's connections to PostgreSQL: [`Database`], the one way a
//! statement reaches a server, and [`Transaction`], the one way several
//! statements share one.
//!
//! - **Pooling mode** (`database.poolingMode`, docs/operations.md "Through
//!   a connection pooler"). With `session` (the default) a pooled
//!   connection is one server session: a statement run on [`Database`] is
//!   prepared once per connection and kept (its generic plan too). With
//!   `transaction` (PgBouncer in transaction mode hands each transaction to
//!   any server session) a statement run on [`Database`] runs in a
//!   transaction of its own as an unnamed statement, so nothing it leaves
//!   on a server session outlives that transaction and its parse and
//!   execution cannot land on two sessions. Statements of a
//!   [`Transaction`] are unnamed in either mode (they serve startup, the
//!   deployment commands and rare run paths, so nothing is lost keeping
//!   them unprepared).
//! - **Writable servers only** for writers ([`Access::Write`]): every new
//!   pooled connection asks its server ([`servers::writable`]) and one in
//!   recovery or read-only is closed and another opened, so no statement
//!   of the service ever runs on a standby.
//! - **Several servers** (libpq's host list): the pool connects to the
//!   first usable server of the list; when a statement finds the database
//!   gone or read-only, the list is tried again in order in the background
//!   ([`Database::reselect`]) and new connections go to the first usable
//!   server, as libpq does for each new connection.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, PgPoolOptions, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Either, Execute, Executor, PgConnection, PgPool, Postgres};

use coordinator_runtime::config::PoolingMode;

use crate::codes;
use crate::servers::{self, Access, ServerList};
use crate::{db_error, DatabaseError};

/// How long an acquisition from the pool may take (a new connection
/// included) before the statement fails as `store-unavailable`.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest time between two walks of the server list after failures.
const RESELECT_INTERVAL: Duration = Duration::from_secs(1);

/// How long a statement may go unanswered before the server list is walked
/// again (URLs with several servers only).
const SLOW_STATEMENT: Duration = Duration::from_secs(1);

/// Aborts its walk timer when the watched statement completes.
struct SlowStatementWatch(Option<tokio::task::AbortHandle>);

impl Drop for SlowStatementWatch {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// How long one background walk goes on finding no usable server before
/// it gives up (the next failing statement starts another).
const RESELECT_FOR: Duration = Duration::from_secs(120);

/// A pool of connections to the database a URL names, used as a sqlx
/// executor (`query.execute(&database)`); see the module documentation.
/// Clones share the pool.
#[derive(Clone, Debug)]
pub struct Database {
    pool: PgPool,
    pooling: PoolingMode,
    servers: Arc<ServerList>,
    access: Access,
    /// Index in `servers` new connections go to.
    current: Arc<AtomicUsize>,
    /// Set while a walk of the server list runs.
    reselecting: Arc<AtomicBool>,
    /// When the last walk started.
    last_walk: Arc<Mutex<Option<Instant>>>,
}

impl Database {
    /// Opens a pool of at most `max_connections` to the first usable server
    /// of `servers` ([`ServerList::first_usable`]) for `access`; with
    /// [`Access::Write`] every new connection is checked to be writable.
    ///
    /// # Errors
    /// [`ServerList::first_usable`]'s, or `store-unavailable`.
    pub async fn open(
        servers: ServerList,
        pooling: PoolingMode,
        access: Access,
        max_connections: u32,
    ) -> Result<Database, DatabaseError> {
        let first = servers.first_usable(access).await?;
        let servers = Arc::new(servers);
        let options = servers.options(first).cloned().ok_or_else(|| {
            DatabaseError::unavailable(
                codes::COMMAND_STORE_UNAVAILABLE,
                "the database URL names no server",
                "check the database URL",
            )
        })?;
        let check = servers.clone();
        let faults = Arc::new(NewConnectionFaults::default());
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .min_connections(0)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .after_connect(move |connection, _| {
                let (check, faults) = (check.clone(), faults.clone());
                Box::pin(async move { refuse_unusable(connection, &check, access, &faults).await })
            })
            .connect_with(options)
            .await
            .map_err(db_error)?;
        Ok(Database {
            pool,
            pooling,
            servers,
            access,
            current: Arc::new(AtomicUsize::new(first)),
            reselecting: Arc::new(AtomicBool::new(false)),
            last_walk: Arc::new(Mutex::new(None)),
        })
    }

    /// The pool (for tests and probes).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The pooling mode the connections were opened for.
    pub fn pooling(&self) -> PoolingMode {
        self.pooling
    }

    /// `HOST:PORT` of the server new connections go to.
    pub fn current_server(&self) -> String {
        self.servers.address(self.current.load(Ordering::Relaxed))
    }

    /// Begins a transaction on one pooled connection.
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn begin(&self) -> Result<Transaction, DatabaseError> {
        let result = self.pool.begin().await;
        self.observe(&result);
        result.map(Transaction).map_err(db_error)
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// With several servers in the URL: a guard that, if the statement it
    /// watches has not completed within [`SLOW_STATEMENT`], walks the list
    /// ([`Database::reselect`]). A connection to a dead server is retried
    /// by the pool until its acquire timeout (10 s) before the statement
    /// fails; the walk finds the promoted standby meanwhile. Dropped when
    /// the statement completes; nothing with one server.
    fn watch(&self) -> SlowStatementWatch {
        if self.servers.len() < 2 {
            return SlowStatementWatch(None);
        }
        let db = self.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(SLOW_STATEMENT).await;
            db.reselect();
        });
        SlowStatementWatch(Some(task.abort_handle()))
    }

    /// Notes the outcome of a statement: when it found the server gone or
    /// read-only and the URL lists several servers, starts a walk of the
    /// list in the background ([`Database::reselect`]).
    fn observe<T>(&self, result: &Result<T, sqlx::Error>) {
        if let Err(e) = result {
            self.note(e);
        }
    }

    /// [`Database::observe`] of a failed statement.
    fn note(&self, e: &sqlx::Error) {
        if self.servers.len() > 1 && server_fault(e) {
            self.reselect();
        }
    }

    /// Walks the server list again, in order, and points new connections
    /// at the first usable server; at most one walk at a time and one a
    /// second. Runs in the background (the caller goes on failing or
    /// retrying as it would).
    pub fn reselect(&self) {
        {
            let Ok(mut last) = self.last_walk.lock() else {
                return;
            };
            if last.is_some_and(|t| t.elapsed() < RESELECT_INTERVAL) {
                return;
            }
            if self.reselecting.swap(true, Ordering::AcqRel) {
                return;
            }
            *last = Some(Instant::now());
        }
        let (pool, servers, current, reselecting, access) = (
            self.pool.clone(),
            self.servers.clone(),
            self.current.clone(),
            self.reselecting.clone(),
            self.access,
        );
        tokio::spawn(async move {
            // Walked again every RESELECT_INTERVAL until a server may be
            // used (a standby being promoted), warning on the first walk
            // only, and for at most RESELECT_FOR.
            let started = Instant::now();
            let mut walk = servers.first_usable(access).await;
            while walk.is_err() && started.elapsed() < RESELECT_FOR {
                tokio::time::sleep(RESELECT_INTERVAL).await;
                walk = servers.first_usable_quietly(access).await;
            }
            if let Ok(found) = walk {
                let before = current.swap(found, Ordering::AcqRel);
                if before != found {
                    if let Some(options) = servers.options(found) {
                        pool.set_connect_options(options.clone());
                    }
                    tracing::warn!(
                        code = "database.server-changed",
                        server = %servers.address(found),
                        "new database connections go to {} (was {})",
                        servers.address(found),
                        servers.address(before)
                    );
                }
            }
            reselecting.store(false, Ordering::Release);
        });
    }

    /// Why the pool cannot give a usable connection now: the servers of the
    /// URL tried directly, in order, without a warning per server.
    /// `database.read-only` when the servers that answer may not be used,
    /// else `store-unavailable` (naming each server and why).
    pub async fn diagnose(&self) -> DatabaseError {
        match self.servers.first_usable_quietly(self.access).await {
            Err(e) => e,
            Ok(index) => DatabaseError::unavailable(
                codes::COMMAND_STORE_UNAVAILABLE,
                format!(
                    "PostgreSQL at {} answers, but no pooled connection was had in time",
                    self.servers.address(index)
                ),
                "check the database's load and max_connections",
            ),
        }
    }

    /// Asks the server of one pooled connection whether it may be used
    /// for this pool's access.
    ///
    /// # Errors
    /// `database.read-only` for a server that may not be used;
    /// `store-unavailable`.
    pub async fn check_usable(&self) -> Result<(), DatabaseError> {
        let mut connection = self.pool.acquire().await.map_err(|e| {
            self.note(&e);
            db_error(e)
        })?;
        let found = servers::writable(&mut connection).await.map_err(db_error)?;
        if self.servers.accepts(self.access, &found) {
            return Ok(());
        }
        if self.servers.len() > 1 {
            self.reselect();
        }
        let why = found.map(|w| w.to_string()).unwrap_or_default();
        Err(DatabaseError::unavailable(
            codes::DATABASE_READ_ONLY,
            format!("PostgreSQL at {} {why}", self.current_server()),
            "point the URL at the primary (or list every server with target_session_attrs=read-write)",
        ))
    }
}

/// `after_connect`: closes a new connection whose server may not be used
/// or does not answer (sqlx then opens another, within the acquire
/// timeout), noting it in `faults` (logged once when such refusals begin,
/// once when they end).
async fn refuse_unusable(
    connection: &mut PgConnection,
    servers: &ServerList,
    access: Access,
    faults: &NewConnectionFaults,
) -> Result<(), sqlx::Error> {
    let found = match servers::writable(connection).await {
        Ok(found) => found,
        Err(e) => {
            faults.failed(NewConnectionFault::Unanswered, &e.to_string());
            return Err(e);
        }
    };
    if servers.accepts(access, &found) {
        faults.succeeded();
        return Ok(());
    }
    let why = found.map(|w| w.to_string()).unwrap_or_default();
    faults.failed(NewConnectionFault::ReadOnly, &format!("its server {why}"));
    Err(sqlx::Error::Configuration(
        format!("the server {why}").into(),
    ))
}

/// Why new connections are being closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NewConnectionFault {
    /// The server behind the connection did not answer its first statement
    /// (a pooler such as PgBouncer takes the connection while PostgreSQL
    /// behind it is down: `server_login_retry`).
    Unanswered,
    /// The server may not be used for this access (a standby, read-only).
    ReadOnly,
}

/// Whether the pool's new connections are being closed, logged once when
/// it begins (or its cause changes) and once when it ends. The pool tries
/// a new connection again and again within its acquire timeout (from
/// 10 ms, doubling), for every statement waiting, so a line per attempt
/// would flood the log while PostgreSQL is down behind a pooler, which
/// keeps taking connections; sqlx's own line per attempt is off in the
/// service's log filter (docs/decisions.md "One line when new database
/// connections begin to fail").
#[derive(Debug, Default)]
struct NewConnectionFaults(std::sync::Mutex<Option<NewConnectionFault>>);

impl NewConnectionFaults {
    /// A new connection was closed for `fault` (`why`, in words).
    fn failed(&self, fault: NewConnectionFault, why: &str) {
        let Ok(mut current) = self.0.lock() else {
            return;
        };
        if *current == Some(fault) {
            return;
        }
        *current = Some(fault);
        match fault {
            NewConnectionFault::Unanswered => tracing::warn!(
                code = "store-unavailable",
                "new database connections fail: {why}; retrying (logged again once they succeed)"
            ),
            NewConnectionFault::ReadOnly => tracing::warn!(
                code = "database.read-only",
                "closed a new database connection: {why}; retrying (logged again once one succeeds)"
            ),
        }
    }

    /// A new connection may be used.
    fn succeeded(&self) {
        let Ok(mut current) = self.0.lock() else {
            return;
        };
        if let Some(was) = current.take() {
            let was = match was {
                NewConnectionFault::Unanswered => "store-unavailable",
                NewConnectionFault::ReadOnly => "database.read-only",
            };
            tracing::info!(was, "new database connections succeed again");
        }
    }
}

/// Whether `e` says the server is gone, restarting or read-only (rather
/// than refusing one statement).
fn server_fault(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::Protocol(_)
        | sqlx::Error::Configuration(_) => true,
        sqlx::Error::Database(d) => d.code().is_some_and(|c| {
            // read_only_sql_transaction, admin_shutdown, crash_shutdown,
            // cannot_connect_now, and connection exceptions.
            matches!(c.as_ref(), "25006" | "57P01" | "57P02" | "57P03") || c.starts_with("08")
        }),
        _ => false,
    }
}

/// A statement of a [`Transaction`] (or of a pool in transaction mode):
/// unnamed, never kept on the connection.
struct Unnamed<E>(E);

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Unnamed<E> {
    fn sql(&self) -> &'q str {
        self.0.sql()
    }

    fn statement(&self) -> Option<&PgStatement<'q>> {
        self.0.statement()
    }

    fn take_arguments(&mut self) -> Result<Option<PgArguments>, BoxDynError> {
        self.0.take_arguments()
    }

    fn persistent(&self) -> bool {
        false
    }
}

/// Rows and results collected from one statement (transaction mode runs
/// each to its end inside its transaction before handing them on).
type Collected = Vec<Either<PgQueryResult, PgRow>>;

impl<'c> Executor<'c> for &'c Database {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        match self.pooling {
            PoolingMode::Session => {
                let watch = self.watch();
                Box::pin(self.pool.fetch_many(query).inspect(move |r| {
                    let _watching = &watch;
                    if let Err(e) = r {
                        self.note(e);
                    }
                }))
            }
            PoolingMode::Transaction => {
                let all = async move {
                    let _watch = self.watch();
                    let result = async {
                        let mut tx = self.pool.begin().await?;
                        let all: Collected =
                            (&mut *tx).fetch_many(Unnamed(query)).try_collect().await?;
                        tx.commit().await?;
                        Ok::<_, sqlx::Error>(all)
                    }
                    .await;
                    self.observe(&result);
                    result
                };
                Box::pin(
                    stream::once(all)
                        .map(|result| match result {
                            Ok(all) => stream::iter(all.into_iter().map(Ok)).left_stream(),
                            Err(e) => stream::iter([Err(e)]).right_stream(),
                        })
                        .flatten(),
                )
            }
        }
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        Box::pin(async move {
            let _watch = self.watch();
            let result = match self.pooling {
                PoolingMode::Session => self.pool.fetch_optional(query).await,
                PoolingMode::Transaction => {
                    async {
                        let mut tx = self.pool.begin().await?;
                        let row = (&mut *tx).fetch_optional(Unnamed(query)).await?;
                        tx.commit().await?;
                        Ok(row)
                    }
                    .await
                }
            };
            self.observe(&result);
            result
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        (&self.pool).prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        (&self.pool).describe(sql)
    }
}

/// A transaction on one pooled connection ([`Database::begin`]); its
/// statements run through [`Transaction::on`], unnamed. Dropped without
/// [`Transaction::commit`], it rolls back.
#[derive(Debug)]
pub struct Transaction(sqlx::Transaction<'static, Postgres>);

impl Transaction {
    /// The executor of this transaction's statements.
    pub fn on(&mut self) -> InTransaction<'_> {
        InTransaction(&mut self.0)
    }

    /// Commits.
    ///
    /// # Errors
    /// `store-unavailable`.
    pub async fn commit(self) -> Result<(), DatabaseError> {
        self.0.commit().await.map_err(db_error)
    }
}

/// The executor of a [`Transaction`]'s statements: each unnamed.
#[derive(Debug)]
pub struct InTransaction<'t>(&'t mut PgConnection);

impl<'c> Executor<'c> for InTransaction<'c> {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        self.0.fetch_many(Unnamed(query))
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        self.0.fetch_optional(Unnamed(query))
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.0.prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.0.describe(sql)
    }
}
