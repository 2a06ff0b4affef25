//! The state schema: versioned migrations as SQL text, applied only by
//! `apply` with the migration role.
//!
//! Every object lives in the deployment's namespace (`runtime.yaml`
//! `namespace`, written `{ns}` below and substituted after
//! [`coordinator_runtime::config::valid_namespace`] accepted it). State schema version
//! [`SCHEMA_VERSION`] is recorded in `deployment.schema_version`; a namespace
//! recording another version is refused (`deployment.schema-version`): an
//! earlier layout is settled with its matching binary and a fresh namespace.
//!
//! Waits and timers are jobs: a `timer` or `observe` job with a due time.
//! Finding due work reads the index `jobs_due` (by due time) up to `now`,
//! so it costs O(due), not O(runs). The run deadline is the exception: it
//! stays on the run row (`runs.deadline_at`, index `runs_deadline_due`)
//! until it is due, and only then becomes a timer job.

/// The state schema version this binary reads and writes.
/// Seed 000: "State schema version 4 is required, and an earlier layout is
/// refused". Version 4 is unreleased, so its DDL may still change in place.
pub const SCHEMA_VERSION: i32 = 4;

/// The lowest PostgreSQL `server_version_num` accepted (17.0).
pub const MIN_SERVER_VERSION_NUM: i32 = 170_000;

/// Tables of the namespace, in creation order (the no-plaintext test reads
/// every one of them).
pub const TABLES: [&str; 12] = [
    "deployment",
    "definitions",
    "active_workflows",
    "state_key_custody",
    "runs",
    "jobs",
    "spent_keys",
    "run_counts",
    "revision_counts",
    "connection_flow",
    "connection_calls",
    "connection_waits",
];

/// Rows of `run_counts`: each statement that changes runs adds its changes
/// to the row of its server session (`pg_backend_pid() % COUNT_SLOTS`), so
/// concurrent writers rarely wait for one another on a counter, and a
/// reader sums this many rows whatever the number of runs.
pub const COUNT_SLOTS: i32 = 64;

/// Migrations by the version they produce. Version 4 is the first layout
/// this implementation writes: it creates the whole schema in one step. A
/// later version appends `(5, "...")`; `apply` runs every migration above
/// the recorded version in one transaction.
pub const MIGRATIONS: &[(i32, &str)] = &[(4, V4)];

const V4: &str = r#"
CREATE TABLE {ns}.deployment (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    database_id text NOT NULL,
    schema_version integer NOT NULL,
    restore_hold boolean NOT NULL DEFAULT false,
    admission_hold boolean NOT NULL DEFAULT false,
    -- The restore hold's attestation, beside the holds, so every process on
    -- the database reads the same holds (docs/operations.md).
    execution_recovery_completed boolean NOT NULL DEFAULT false,
    -- Moves (+1) each time the restore hold is placed: a process leases
    -- only under the epoch it read when it started, so none that predates
    -- a restore hold dispatches again (restore.lease-incompatible).
    restore_epoch bigint NOT NULL DEFAULT 0 CHECK (restore_epoch >= 0),
    -- The admission key's custody fingerprint (AdmissionKey::fingerprint),
    -- recorded by the first apply: start identities are keyed by it.
    admission_key_fingerprint text CHECK (admission_key_fingerprint ~ '^[0-9a-f]{64}$'),
    -- Bumped by every apply that changes the active packages: a running
    -- service compares it with the value it started with.
    activation_generation bigint NOT NULL DEFAULT 0,
    -- The binding digest of every connection of the runtime file the last
    -- apply used, by name (runtime/src/binding.rs): an admission recording
    -- another binding for a connection is refused (binding.conflict), so a
    -- process started with another runtime file admits nothing.
    connection_bindings jsonb NOT NULL DEFAULT '{}'
        CHECK (jsonb_typeof(connection_bindings) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- Every revision ever applied, kept forever: a run keeps its Program.
CREATE TABLE {ns}.definitions (
    revision text PRIMARY KEY CHECK (revision ~ '^sha256:[0-9a-f]{64}$'),
    workflow text NOT NULL,
    definition bytea NOT NULL,
    package_digest text NOT NULL CHECK (package_digest ~ '^sha256:[0-9a-f]{64}$'),
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- A definition is sealed with the payload state key, bound to the
-- database id and its revision, and `key_version` names the key. (Its own
-- statement, SEALED_DEFINITION_COLUMN: a namespace laid out by an earlier
-- build holds plaintext definitions, NULL here, until `apply` seals them.)
ALTER TABLE {ns}.definitions ADD COLUMN IF NOT EXISTS key_version integer
    CHECK (key_version > 0);

CREATE TABLE {ns}.active_workflows (
    workflow text PRIMARY KEY,
    revision text NOT NULL REFERENCES {ns}.definitions (revision),
    package_digest text NOT NULL CHECK (package_digest ~ '^sha256:[0-9a-f]{64}$'),
    activated_at timestamptz NOT NULL DEFAULT now()
);

-- One keyed fingerprint per state key version ever configured.
CREATE TABLE {ns}.state_key_custody (
    version integer PRIMARY KEY CHECK (version > 0),
    fingerprint text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    recorded_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {ns}.runs (
    run_id text PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    workflow text NOT NULL,
    revision text NOT NULL REFERENCES {ns}.definitions (revision),
    owner_ref text NOT NULL,
    start_identity text NOT NULL UNIQUE,
    request_fingerprint text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'attention', 'cancel-requested',
        'finished', 'failed', 'cancelled', 'cancelled-after-effect', 'expired')),
    attention boolean NOT NULL DEFAULT false,
    ended boolean NOT NULL DEFAULT false,
    version bigint NOT NULL DEFAULT 1,
    deadline_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    ended_at timestamptz,
    -- State key versions: of sealed_state/sealed_output, and of sealed_input.
    key_version integer NOT NULL,
    input_key_version integer NOT NULL,
    sealed_input bytea,
    sealed_state bytea,
    sealed_output bytea,
    -- The starter's `iss` and `sub`, sealed (purpose `owner`), and `owner_ref`
    -- is their keyed reference, for filtering.
    sealed_owner bytea,
    -- Per-step counters for inspection (attempts, observations): no payload.
    ledger jsonb NOT NULL DEFAULT '{}',
    -- The binding digest of each connection the run's Program uses, by
    -- connection name, as admitted (docs/service.md "Connection bindings"):
    -- startup and apply refuse a runtime file that changes one while the
    -- run has not ended. No payload, no secret.
    bindings jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(bindings) = 'object'),
    -- Whether the state holds an `unknown` effect (retention never erases
    -- such a run, and the state itself is sealed).
    effect_unknown boolean NOT NULL DEFAULT false,
    -- Set by retention (the engine's clock): sealed_input, sealed_state and
    -- sealed_output are NULL from then on.
    payload_erased_at timestamptz,
    -- The restore review (docs/operations.md "Restore from a backup"):
    -- `required` when the restore hold held back one of the run's prepared
    -- commands, then how it was reviewed. NULL for runs never held back.
    review text CHECK (review IN ('required', 'reconciled', 'cancelled', 'attested')),
    -- The deadline is kept here, not as a job inserted at admission and
    -- deleted unused when the run ends in time: once `deadline_at` is due
    -- and the run has not ended, a lease statement creates its timer job
    -- and sets this (once per run).
    deadline_job_created boolean NOT NULL DEFAULT false,
    -- The kind of wait the run is in (the VM's wait kind), for the counts
    -- operators read (`run_counts`), NULL outside a wait.
    wait text CHECK (wait IN ('wait-until', 'wait-for')),
    CHECK (payload_erased_at IS NULL OR (ended AND sealed_input IS NULL
        AND sealed_state IS NULL AND sealed_output IS NULL))
);
-- The run's trace context (docs/operations.md "Traces"): the W3C
-- `traceparent` of its admission span, which every later span of the run
-- descends from, whichever process exports it. Identifiers only, NULL for
-- a run admitted with traces off. (Its own statement, TRACE_COLUMN.)
ALTER TABLE {ns}.runs ADD COLUMN IF NOT EXISTS trace_parent text
    CHECK (trace_parent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
-- Newest first without a filter reads the `seq` unique index backwards
-- (no index of its own: each would be written at every insert).
CREATE INDEX runs_owner_newest ON {ns}.runs (owner_ref, seq DESC);
CREATE INDEX runs_workflow_newest ON {ns}.runs (workflow, seq DESC);
CREATE INDEX runs_attention ON {ns}.runs (seq DESC) WHERE attention;
CREATE INDEX runs_review_required ON {ns}.runs (seq) WHERE review = 'required';
CREATE INDEX runs_effect_unknown ON {ns}.runs (seq) WHERE effect_unknown;
CREATE INDEX runs_live_by_workflow ON {ns}.runs (workflow) WHERE NOT ended;
CREATE INDEX runs_key_version ON {ns}.runs (key_version);
CREATE INDEX runs_input_key_version ON {ns}.runs (input_key_version);
-- Deadlines not yet due as jobs, earliest first (the lease statement and
-- the timer's next-due query read it up to `now`: O(due), not O(runs)).
CREATE INDEX runs_deadline_due ON {ns}.runs (deadline_at)
    WHERE NOT ended AND NOT deadline_job_created;
-- Retention's candidates, oldest ended first.
CREATE INDEX runs_retention ON {ns}.runs (ended_at, seq)
    WHERE ended AND payload_erased_at IS NULL;

-- The unit of work. Waits and timers are jobs with a due time. `kind` and
-- `detail` say what to do (operation, connection, attempt, a timer's
-- instant, a review request id: no payload). A dispatch's prepared command
-- is sealed in `sealed_command` (purpose `command`, the job's step). A job
-- is `ready` or `sending` (a dispatch attempt may be out), and the lease is
-- apart from the state, so an expired lease comes back with its state.
-- Completed jobs are deleted.
CREATE TABLE {ns}.jobs (
    job_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL REFERENCES {ns}.runs (run_id),
    kind text NOT NULL CHECK (kind IN ('dispatch', 'lookup-receipt', 'timer', 'observe')),
    step text NOT NULL DEFAULT '',
    state text NOT NULL CHECK (state IN ('ready', 'sending')),
    due_at timestamptz NOT NULL,
    lease_owner text,
    lease_expires_at timestamptz,
    detail jsonb NOT NULL,
    review_request_id text,
    idempotency_key text,
    key_version integer,
    sealed_command bytea,
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    CHECK ((kind = 'dispatch') = (sealed_command IS NOT NULL)),
    CHECK ((sealed_command IS NULL) = (key_version IS NULL))
);
CREATE INDEX jobs_due ON {ns}.jobs (due_at, job_id);
CREATE INDEX jobs_run ON {ns}.jobs (run_id);
CREATE INDEX jobs_review_request ON {ns}.jobs (review_request_id) WHERE review_request_id IS NOT NULL;
CREATE INDEX jobs_key_version ON {ns}.jobs (key_version) WHERE key_version IS NOT NULL;
-- The dispatch jobs, whatever else waits (doctor and /metrics count them
-- by state: O(dispatch jobs), not O(jobs)). On `job_id`, which a lease
-- never changes, so leasing stays a heap-only update.
CREATE INDEX jobs_dispatch ON {ns}.jobs (job_id) WHERE kind = 'dispatch';

-- Spent start identities and command idempotency keys: they outlive the
-- payloads retention erases, so a spent key is never admitted again.
CREATE TABLE {ns}.spent_keys (
    kind text NOT NULL CHECK (kind IN ('start', 'command')),
    identity text NOT NULL,
    run_id text NOT NULL,
    spent_at timestamptz NOT NULL,
    PRIMARY KEY (kind, identity)
);

-- What doctor and /metrics read about runs, kept by the statements that
-- change runs (the triggers of `count_routines`), so reading it costs the
-- same with a million runs as with none. One row per slot (COUNT_SLOTS):
-- a statement adds its changes to its server session's row, the counts
-- are the sums over the rows. Each row is rewritten by every statement
-- that moves a run, in place (heap-only: no index column changes), so
-- autovacuum is asked to come often whatever the table's size.
CREATE TABLE {ns}.run_counts (
    slot smallint PRIMARY KEY CHECK (slot >= 0 AND slot < 64),
    -- Runs that have not ended, by state.
    running bigint NOT NULL DEFAULT 0,
    attention bigint NOT NULL DEFAULT 0,
    cancel_requested bigint NOT NULL DEFAULT 0,
    -- Runs holding an unknown effect, that have not ended and that have.
    unknown_effects bigint NOT NULL DEFAULT 0,
    ended_unknown_effects bigint NOT NULL DEFAULT 0,
    -- Runs that have not ended whose restore review is required.
    review_required bigint NOT NULL DEFAULT 0,
    -- Runs that have not ended, in a wait, by kind.
    wait_until bigint NOT NULL DEFAULT 0,
    wait_for bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 50, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_cost_delay = 0);
INSERT INTO {ns}.run_counts (slot) SELECT s FROM generate_series(0, 63) s;

-- The runs that have not ended by the revision they are on (/metrics'
-- `coordinator_live_runs`: an old revision draining, a moved run counted
-- on its new revision), kept by the same statement triggers as
-- `run_counts` and sharded the same way: a row per revision and session
-- slot, written only by a statement that admits, ends or moves a run (a
-- step of a live run changes no row). A reader sums the rows of each
-- revision: its cost depends on the number of revisions, not of runs.
-- (Its own statement, REVISION_COUNTS_TABLE: a namespace laid out before
-- it gets it from `apply`, `amend_v4_revision_counts`.)
CREATE TABLE {ns}.revision_counts (
    revision text NOT NULL,
    slot smallint NOT NULL CHECK (slot >= 0 AND slot < 64),
    workflow text NOT NULL,
    live bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (revision, slot)
) WITH (fillfactor = 50, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_cost_delay = 0);

-- Flow control of the calls to each connection (runtime file `limits`,
-- a product's Retry-After), shared by every process of the deployment
-- (docs/decisions.md "Flow control is shared through PostgreSQL"). Unlogged:
-- no WAL and no flush at commit, so an ask pays one short round trip. After
-- a PostgreSQL crash or a failover they are empty again, which lets at most
-- one burst through early. Instants are Unix seconds (double precision)
-- from the engine's clock. Kept by `take_call_slot` (`flow_routines`).
CREATE UNLOGGED TABLE {ns}.connection_flow (
    connection text PRIMARY KEY,
    -- The rate's token bucket: tokens left at refilled_at.
    tokens double precision NOT NULL,
    refilled_at double precision NOT NULL,
    -- No call before this (a product's Retry-After).
    retry_after_until double precision
);
-- In-flight slots each holder (one per process) holds, until given back
-- or held_until: its calls in flight and its reserve.
CREATE UNLOGGED TABLE {ns}.connection_calls (
    connection text NOT NULL,
    holder bigint NOT NULL,
    slots integer NOT NULL,
    held_until double precision NOT NULL,
    PRIMARY KEY (connection, holder)
);
-- Calls told to wait, until they go (for /metrics).
CREATE UNLOGGED TABLE {ns}.connection_waits (
    job_id bigint PRIMARY KEY,
    connection text NOT NULL,
    waiting_until double precision NOT NULL
);
CREATE INDEX connection_waits_connection ON {ns}.connection_waits (connection, waiting_until);
"#;

/// The first statement of the flow-control tables in [`V4`] (a namespace
/// laid out before them gets them from here on, [`amend_v4_flow`]).
const FLOW_TABLES_START: &str = "CREATE UNLOGGED TABLE {ns}.connection_flow";

/// A recorded wait still counts as waiting this many seconds past its
/// `wait_until` (its job is leased again a little after it).
pub const WAIT_GRACE_SECONDS: i64 = coordinator_ports::flow::WAIT_GRACE_SECONDS;

/// `{ns}.take_call_slot`, the one statement a process's ask for its
/// share of a connection's limits costs
/// (`coordinator_ports::flow::FlowControl::take_call_slot`, the same
/// decision as the in-memory form): locks the connection's row, then a
/// `Retry-After` still running, then `inFlight` (expired holds dropped
/// first; the holder gets `least(wanted, limit − the others' slots)`,
/// at least `needed`), then the rate's bucket (`least(wanted, whole
/// tokens)`, at least `needed`); on a grant it records the holder's slots
/// and the bucket, otherwise only the job's wait. Returns the limit that
/// holds the call (`NULL` when granted) and until when, and the slots held
/// and tokens taken. Each string is one statement, run whole (the body
/// holds `;`).
pub fn flow_routines(ns: &str) -> Vec<String> {
    vec![format!(
        "CREATE OR REPLACE FUNCTION {ns}.take_call_slot(
             p_connection text, p_holder bigint, p_job bigint,
             p_now double precision, p_held_until double precision,
             p_in_flight integer, p_slots_needed integer, p_slots_wanted integer,
             p_rate double precision, p_capacity double precision,
             p_tokens_needed integer, p_tokens_wanted integer,
             OUT held_by text, OUT wait_until double precision,
             OUT slots_held integer, OUT tokens_taken integer)
         LANGUAGE plpgsql AS $body$
         DECLARE
           f {ns}.connection_flow%ROWTYPE;
           v_available double precision;
           v_others bigint;
         BEGIN
           slots_held := 0;
           tokens_taken := 0;
           INSERT INTO {ns}.connection_flow (connection, tokens, refilled_at)
                VALUES (p_connection, coalesce(p_capacity, 0), p_now)
           ON CONFLICT (connection) DO NOTHING;
           SELECT * INTO f FROM {ns}.connection_flow
            WHERE connection = p_connection FOR UPDATE;
           IF f.retry_after_until > p_now THEN
             held_by := 'retry-after';
             wait_until := f.retry_after_until;
           ELSIF p_in_flight IS NOT NULL THEN
             DELETE FROM {ns}.connection_calls
              WHERE connection = p_connection AND held_until <= p_now;
             SELECT coalesce(sum(c.slots), 0) INTO v_others FROM {ns}.connection_calls c
              WHERE c.connection = p_connection AND c.holder <> p_holder;
             slots_held := greatest(0, least(p_slots_wanted, p_in_flight - v_others));
             IF slots_held < p_slots_needed THEN
               held_by := 'in-flight';
               wait_until := p_now + {slot_wait};
             END IF;
           END IF;
           IF held_by IS NULL AND p_rate IS NOT NULL THEN
             v_available := least(p_capacity,
               f.tokens + p_rate * greatest(0, p_now - f.refilled_at));
             tokens_taken := greatest(0, least(p_tokens_wanted, floor(v_available)))::integer;
             IF tokens_taken < p_tokens_needed THEN
               held_by := 'rate';
               wait_until := p_now + (p_tokens_needed - v_available) / p_rate;
             ELSE
               UPDATE {ns}.connection_flow
                  SET tokens = v_available - tokens_taken,
                      refilled_at = greatest(refilled_at, p_now)
                WHERE connection = p_connection;
             END IF;
           END IF;
           IF held_by IS NULL THEN
             IF p_in_flight IS NOT NULL THEN
               INSERT INTO {ns}.connection_calls AS c (connection, holder, slots, held_until)
                    VALUES (p_connection, p_holder, slots_held, p_held_until)
               ON CONFLICT (connection, holder) DO UPDATE
                  SET slots = excluded.slots,
                      held_until = greatest(c.held_until, excluded.held_until);
             END IF;
             DELETE FROM {ns}.connection_waits WHERE job_id = p_job;
           ELSE
             slots_held := 0;
             tokens_taken := 0;
             DELETE FROM {ns}.connection_waits
              WHERE connection = p_connection AND waiting_until < p_now - {grace};
             INSERT INTO {ns}.connection_waits (job_id, connection, waiting_until)
                  VALUES (p_job, p_connection, wait_until)
             ON CONFLICT (job_id) DO UPDATE SET waiting_until = excluded.waiting_until;
           END IF;
         END $body$",
        slot_wait = coordinator_ports::flow::SLOT_WAIT_SECONDS,
        grace = WAIT_GRACE_SECONDS,
    )]
}

/// What brings a namespace laid out by a build of version 4 without the
/// flow-control tables to this build's layout: the tables of `V4` from
/// `FLOW_TABLES_START` on (`apply` runs it when `connection_flow` is
/// missing, before [`flow_routines`]).
pub fn amend_v4_flow(ns: &str) -> Vec<String> {
    let start = V4.find(FLOW_TABLES_START).unwrap_or(V4.len());
    statements(&V4[start..])
        .map(|s| in_namespace(s, ns))
        .collect()
}

/// The counted measures of `run_counts`, each with the condition (over a
/// row of `runs`) under which a run counts in it.
pub const COUNTED: [(&str, &str); 8] = [
    ("running", "x.state = 'running'"),
    ("attention", "x.state = 'attention'"),
    ("cancel_requested", "x.state = 'cancel-requested'"),
    ("unknown_effects", "NOT x.ended AND x.effect_unknown"),
    ("ended_unknown_effects", "x.ended AND x.effect_unknown"),
    ("review_required", "NOT x.ended AND x.review = 'required'"),
    ("wait_until", "NOT x.ended AND x.wait = 'wait-until'"),
    ("wait_for", "NOT x.ended AND x.wait = 'wait-for'"),
];

/// The trigger functions and statement triggers that keep `run_counts`
/// and `revision_counts` (each string one statement, run whole: the
/// bodies hold `;`; the functions first, then the triggers). After each
/// INSERT, UPDATE or DELETE statement on `runs`, one UPDATE adds the
/// statement's net change of every measure ([`COUNTED`]: the rows after
/// count +1, the rows before −1) to the row of the statement's session,
/// and only when something changed; then the net change of the runs that
/// have not ended on each revision is added to that revision's row of the
/// session (`revision_count_change`); in the statement's transaction,
/// so a rolled-back statement counts nothing.
pub fn count_routines(ns: &str) -> Vec<String> {
    let sums: Vec<String> = COUNTED
        .iter()
        .map(|(name, when)| format!("coalesce(sum(x.sign) FILTER (WHERE {when}), 0) AS {name}"))
        .collect();
    let sets: Vec<String> = COUNTED
        .iter()
        .map(|(name, _)| format!("{name} = c.{name} + d.{name}"))
        .collect();
    let changed: Vec<String> = COUNTED
        .iter()
        .map(|(name, _)| format!("d.{name} <> 0"))
        .collect();
    let columns = "state, ended, effect_unknown, review, wait, workflow, revision";
    let mut functions = Vec::new();
    let mut triggers = Vec::new();
    for (event, rows) in [
        (
            "INSERT",
            format!("SELECT 1 AS sign, {columns} FROM new_rows"),
        ),
        (
            "UPDATE",
            format!(
                "SELECT 1 AS sign, {columns} FROM new_rows
                 UNION ALL SELECT -1, {columns} FROM old_rows"
            ),
        ),
        (
            "DELETE",
            format!("SELECT -1 AS sign, {columns} FROM old_rows"),
        ),
    ] {
        let function = format!("{ns}.count_runs_{}", event.to_ascii_lowercase());
        functions.push(format!(
            "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $body$
             BEGIN
               UPDATE {ns}.run_counts c SET {sets}
                 FROM (SELECT {sums} FROM ({rows}) x) d
                WHERE c.slot = pg_backend_pid() % {slots} AND ({changed});
               {revisions};
               RETURN NULL;
             END $body$",
            sets = sets.join(", "),
            sums = sums.join(", "),
            changed = changed.join(" OR "),
            slots = COUNT_SLOTS,
            revisions = revision_count_change(ns, &rows),
        ));
        let referencing = match event {
            "INSERT" => "NEW TABLE AS new_rows",
            "UPDATE" => "OLD TABLE AS old_rows NEW TABLE AS new_rows",
            _ => "OLD TABLE AS old_rows",
        };
        triggers.push(format!(
            "CREATE TRIGGER count_runs_{lower} AFTER {event} ON {ns}.runs
               REFERENCING {referencing} FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
            lower = event.to_ascii_lowercase(),
        ));
    }
    functions.extend(triggers);
    functions
}

/// The statement of a count trigger that keeps `revision_counts`: the net
/// change of the runs that have not ended, by revision, over `rows` (the
/// statement's rows as `sign` +1 after, −1 before, with `ended`,
/// `workflow` and `revision`), added to each revision's row of the
/// session's slot; no row is written for a revision whose count did not
/// change (a step of a live run on the same revision).
fn revision_count_change(ns: &str, rows: &str) -> String {
    format!(
        "INSERT INTO {ns}.revision_counts AS c (revision, slot, workflow, live)
         SELECT x.revision, pg_backend_pid() % {slots}, min(x.workflow), sum(x.sign)
           FROM ({rows}) x WHERE NOT x.ended
          GROUP BY x.revision HAVING sum(x.sign) <> 0
         ON CONFLICT (revision, slot) DO UPDATE SET live = c.live + excluded.live",
        slots = COUNT_SLOTS,
    )
}

/// The statement that counts the runs as they are into `revision_counts`
/// (slot 0), once, when `apply` creates the table in a namespace that has
/// runs ([`amend_v4`], [`amend_v4_revision_counts`]).
fn seed_revision_counts(ns: &str) -> String {
    format!(
        "INSERT INTO {ns}.revision_counts (revision, slot, workflow, live)
         SELECT revision, 0, min(workflow), count(*) FROM {ns}.runs
          WHERE NOT ended GROUP BY revision"
    )
}

/// The statement of [`V4`] that creates `revision_counts`
/// ([`amend_v4_revision_counts`]).
const REVISION_COUNTS_TABLE: &str = "CREATE TABLE {ns}.revision_counts";

/// What brings a namespace laid out by an earlier build of version 4
/// without `revision_counts` to this build's layout, run by `apply` when
/// that table is missing: the runs locked against writers until `apply`
/// commits (so no run is admitted, ended or moved between the count below
/// and the triggers' new bodies), the table from `V4`, the count routines'
/// functions of this build (which also keep `revision_counts`; the
/// triggers are kept), then one count of the live runs as they are into
/// slot 0.
pub fn amend_v4_revision_counts(ns: &str) -> Vec<String> {
    let mut out = vec![format!("LOCK TABLE {ns}.runs IN SHARE ROW EXCLUSIVE MODE")];
    out.extend(
        statements(V4)
            .filter(|s| s.contains(REVISION_COUNTS_TABLE))
            .map(|s| in_namespace(s, ns)),
    );
    out.extend(
        count_routines(ns)
            .into_iter()
            .filter(|s| s.starts_with("CREATE OR REPLACE FUNCTION")),
    );
    out.push(seed_revision_counts(ns));
    out
}

/// The statement of [`V4`] that adds `runs.trace_parent`, which `apply`
/// also runs on a namespace laid out by an earlier build of version 4
/// ([`amend_v4_trace`]).
const TRACE_COLUMN: &str = "ALTER TABLE {ns}.runs ADD COLUMN IF NOT EXISTS trace_parent";

/// The statement of [`V4`] that adds `definitions.key_version`, which
/// `apply` also runs on a namespace laid out by an earlier build of
/// version 4 ([`amend_v4_sealed_definitions`]).
const SEALED_DEFINITION_COLUMN: &str =
    "ALTER TABLE {ns}.definitions ADD COLUMN IF NOT EXISTS key_version";

/// What brings a namespace laid out by an earlier build of version 4,
/// whose definitions are stored in plaintext, to this build's layout:
/// `V4`'s statement that adds `definitions.key_version` (a no-op where it
/// exists), run by every `apply` of a namespace already laid out; `apply`
/// then seals each definition whose `key_version` is NULL.
pub fn amend_v4_sealed_definitions(ns: &str) -> Vec<String> {
    statements(V4)
        .filter(|s| s.contains(SEALED_DEFINITION_COLUMN))
        .map(|s| in_namespace(s, ns))
        .collect()
}

/// What brings a namespace laid out by an earlier build of version 4
/// without `runs.trace_parent` to this build's layout: `V4`'s statement
/// that adds it (a no-op where it exists), run by every `apply` of a
/// namespace already laid out.
pub fn amend_v4_trace(ns: &str) -> Vec<String> {
    statements(V4)
        .filter(|s| s.contains(TRACE_COLUMN))
        .map(|s| in_namespace(s, ns))
        .collect()
}

/// What brings a namespace laid out by an earlier build of version 4
/// (without `run_counts`) to this build's layout, run by `apply` when
/// `run_counts` is missing: the `wait` column, the dispatch index, the
/// counts tables and their triggers ([`count_routines`], whose creation locks
/// `runs` against writers until `apply` commits), then one count of the
/// runs as they are into slot 0. Runs waiting since before have no `wait`
/// yet, so they count in no wait until their next step.
pub fn amend_v4(ns: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![
        format!(
            "ALTER TABLE {ns}.runs ADD COLUMN IF NOT EXISTS wait text
               CHECK (wait IN ('wait-until', 'wait-for'))"
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS jobs_dispatch ON {ns}.jobs (job_id) WHERE kind = 'dispatch'"
        ),
    ];
    let start = V4.find("CREATE TABLE {ns}.run_counts").unwrap_or(V4.len());
    let end = V4.find(FLOW_TABLES_START).unwrap_or(V4.len()).max(start);
    out.extend(statements(&V4[start..end]).map(|s| in_namespace(s, ns)));
    out.extend(count_routines(ns));
    let counts: Vec<String> = COUNTED
        .iter()
        .map(|(name, when)| format!("{name} = (SELECT count(*) FROM {ns}.runs x WHERE {when})"))
        .collect();
    out.push(format!(
        "UPDATE {ns}.run_counts SET {} WHERE slot = 0",
        counts.join(", ")
    ));
    out.push(seed_revision_counts(ns));
    out
}

/// Storage parameters `apply` sets on every run (`ALTER TABLE … SET`).
/// `runs` leaves 40% of each page free: a run's row is rewritten at every
/// step, and an update that changes no indexed column and finds room on
/// its page is a heap-only tuple (HOT) update, which writes none of the
/// table's thirteen index entries again (measured: 5.6 fewer WAL records
/// and about 6% more runs/s, docs/service.md).
pub const STORAGE_PARAMETERS: [(&str, &str); 1] = [("runs", "fillfactor = 60")];

/// What the runtime role may do on each table: exactly what serving needs.
/// `apply` revokes everything else on every run, so drift is repaired.
pub const RUNTIME_GRANTS: [(&str, &str); 12] = [
    ("deployment", "SELECT, UPDATE"),
    ("definitions", "SELECT"),
    ("active_workflows", "SELECT"),
    ("state_key_custody", "SELECT"),
    ("runs", "SELECT, INSERT, UPDATE, DELETE"),
    ("jobs", "SELECT, INSERT, UPDATE, DELETE"),
    ("spent_keys", "SELECT, INSERT"),
    ("run_counts", "SELECT, UPDATE"),
    ("revision_counts", "SELECT, INSERT, UPDATE"),
    ("connection_flow", "SELECT, INSERT, UPDATE"),
    ("connection_calls", "SELECT, INSERT, UPDATE, DELETE"),
    ("connection_waits", "SELECT, INSERT, UPDATE, DELETE"),
];

/// `sql` with `{ns}` replaced by the (validated) namespace.
pub(crate) fn in_namespace(sql: &str, ns: &str) -> String {
    sql.replace("{ns}", ns)
}

/// Splits migration text into statements (the migrations hold no `;`
/// inside literals or bodies).
pub(crate) fn statements(sql: &str) -> impl Iterator<Item = &str> {
    sql.split(';').map(str::trim).filter(|s| {
        s.lines()
            .any(|l| !l.trim().is_empty() && !l.trim().starts_with("--"))
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_ascending_and_end_at_the_schema_version() {
        let versions: Vec<i32> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(versions.last(), Some(&SCHEMA_VERSION));
        for table in TABLES {
            assert!(
                V4.contains(&format!("CREATE TABLE {{ns}}.{table} ("))
                    || V4.contains(&format!("CREATE UNLOGGED TABLE {{ns}}.{table} (")),
                "{table}"
            );
            assert!(RUNTIME_GRANTS.iter().any(|(t, _)| *t == table));
        }
        assert_eq!(statements(V4).count(), 31);
        assert_eq!(amend_v4_flow("coordinator_x").len(), 4);
        assert_eq!(amend_v4_trace("coordinator_x").len(), 1);
        assert_eq!(amend_v4_sealed_definitions("coordinator_x").len(), 1);
        // The counted measures are exactly the counts table's columns.
        for (name, _) in COUNTED {
            assert!(
                V4.contains(&format!("    {name} bigint NOT NULL DEFAULT 0")),
                "{name}"
            );
        }
        assert_eq!(count_routines("coordinator_x").len(), 6);
        // The amendment: the lock, the table, three functions, the count.
        assert_eq!(amend_v4_revision_counts("coordinator_x").len(), 6);
    }
}
