#!/usr/bin/env bash
# Test PgBouncer (transaction pooling) in front of a scripts/postgres.sh cluster.
#
#   scripts/pgbouncer.sh start|stop|status|env --pg-dir P [--port N] [--dir D]
#                                              [--target-port T]
#   scripts/pgbouncer.sh install
#
# Installs Debian's `pgbouncer` package when /usr/sbin/pgbouncer is missing
# (root only; Debian's own pgbouncer service is kept from starting) and runs
# PgBouncer (Debian 12: 1.18) on 127.0.0.1:N (default 56432) in TRANSACTION
# pooling mode in front of the PostgreSQL cluster whose base directory P was
# made by `scripts/postgres.sh start`. It serves one database, `coordinator`
# (plus PgBouncer's admin console `pgbouncer`, for coordinator_admin), and
# forwards it to 127.0.0.1 at the port in P/data/postmaster.pid (line 4), or
# at --target-port T (e.g. a TCP hop in between).
#
# Exit status: 0 done; 1 it failed (saying why; a refused start leaves no
# directory it made); 2 a command line it cannot read (saying what is
# wrong); 3 `status` of a pooler that does not run.
#
# Clients log in as the three roles of scripts/postgres.sh
# (coordinator_admin, coordinator_migration, coordinator_runtime) with
# scram-sha-256; the auth_file D/userlist.txt (owner-only) holds their
# plaintext passwords from P/credentials, so PgBouncer can also do SCRAM to
# the server. Pools: default_pool_size 10, max_client_conn 500.
#
# Startup parameters: `extra_float_digits` is ignored (accepted); `options`
# is NOT, so a client that sends `options` (e.g. PGOPTIONS='-c ...') is
# refused with "unsupported startup parameter: options". That refusal is
# what tests rely on. (PgBouncer 1.20+ parses `options` and accepts `-c` for
# the parameters it tracks; 1.18 refuses any `options`.)
#
# As root, PgBouncer (which refuses to run as root) runs as the same
# unprivileged OS user as scripts/postgres.sh (COORDINATOR_PG_OS_USER,
# default coordinator-pg; created if missing). Its configuration, auth file,
# log (D/pgbouncer.log), pid file and Unix socket live in D (default
# /tmp/coordinator-pgbouncer-N), owned by that user.
#
# `start` and `env` print shell `export` lines on stdout:
#   COORDINATOR_POOLER_DATABASE_URL   (admin)
#   COORDINATOR_POOLER_MIGRATION_URL
#   COORDINATOR_POOLER_RUNTIME_URL
# all postgres://ROLE:PASSWORD@127.0.0.1:N/coordinator, so
# `eval "$(scripts/pgbouncer.sh start --pg-dir P)"` both starts and exports.
# If COORDINATOR_POOLER_DATABASE_URL is already set, start/stop do nothing and
# env echoes the variables that are set (use an existing pooler).
# `start` on a running pooler rewrites its configuration from P and reloads
# it (SIGHUP), e.g. after the PostgreSQL server moved to another port.
#
# Environment knobs (all optional):
#   COORDINATOR_PG_OS_USER           OS user PgBouncer runs as when invoked as
#                                    root (default coordinator-pg)
#   COORDINATOR_PGBOUNCER_START_TIMEOUT  seconds to wait for it (default 30)
set -euo pipefail

PROG="$(basename "$0")"
DEFAULT_PORT=56432
PGBOUNCER=/usr/sbin/pgbouncer
DEBIAN_PACKAGE=pgbouncer
DB_NAME="coordinator"
ADMIN_ROLE="coordinator_admin"
MIGRATION_ROLE="coordinator_migration"
RUNTIME_ROLE="coordinator_runtime"
OWNER_MARK=".coordinator-pgbouncer"   # marks a directory this script created
URL_VARS=(COORDINATOR_POOLER_DATABASE_URL COORDINATOR_POOLER_MIGRATION_URL COORDINATOR_POOLER_RUNTIME_URL)
START_TIMEOUT="${COORDINATOR_PGBOUNCER_START_TIMEOUT:-30}"
STOP_TIMEOUT=10

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
# A command line this script cannot read: what is wrong, and exit 2.
usage_error() {
  printf '%s: error: %s (%s --help shows the usage)\n' "$PROG" "$*" "$PROG" >&2
  exit 2
}

usage() {
  cat >&2 <<EOF
usage: $PROG start|stop|status|env --pg-dir P [--port N] [--dir D] [--target-port T]
       $PROG install

  install  install Debian's PgBouncer (as root) without starting its service
  start    install PgBouncer (first time), write its configuration and start
           it (or reload a running one); print export lines
  stop     stop it (SIGINT, then SIGTERM); D is kept
  status   say whether it runs (exit 0) or not (exit 3)
  env      print the export lines for a running pooler

  --pg-dir P         base directory of a scripts/postgres.sh cluster
                     (its credentials and port); needed by start
  --port N           TCP port on 127.0.0.1 to listen on (default $DEFAULT_PORT)
  --dir D            directory for configuration, auth file, log, pid and
                     socket (default /tmp/coordinator-pgbouncer-PORT)
  --target-port T    forward to 127.0.0.1:T instead of the cluster's own port
EOF
}

# ---------------------------------------------------------------- arguments

CMD="${1:-}"
[ -n "$CMD" ] || usage_error "no command: give start, stop, status, env or install"
shift
case "$CMD" in
  install|start|stop|status|env) ;;
  -h|--help|help) usage; exit 0 ;;
  *) usage_error "unknown command '$CMD'" ;;
esac

PORT="$DEFAULT_PORT"
BASE=""
PG_DIR=""
TARGET_PORT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --port) [ $# -ge 2 ] || usage_error "--port needs a value"; PORT="$2"; shift 2 ;;
    --port=*) PORT="${1#--port=}"; shift ;;
    --dir) [ $# -ge 2 ] || usage_error "--dir needs a value"; BASE="$2"; shift 2 ;;
    --dir=*) BASE="${1#--dir=}"; shift ;;
    --pg-dir) [ $# -ge 2 ] || usage_error "--pg-dir needs a value"; PG_DIR="$2"; shift 2 ;;
    --pg-dir=*) PG_DIR="${1#--pg-dir=}"; shift ;;
    --target-port) [ $# -ge 2 ] || usage_error "--target-port needs a value"; TARGET_PORT="$2"; shift 2 ;;
    --target-port=*) TARGET_PORT="${1#--target-port=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done

valid_port() {
  [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1024 ] && [ "$1" -le 65535 ]
}
valid_port "$PORT" || usage_error "--port must be a number from 1024 to 65535, got '$PORT'"
[ -z "$TARGET_PORT" ] || valid_port "$TARGET_PORT" \
  || usage_error "--target-port must be a number from 1024 to 65535, got '$TARGET_PORT'"

[ -n "$BASE" ] || BASE="/tmp/coordinator-pgbouncer-$PORT"
case "$BASE" in /*) ;; *) BASE="$PWD/$BASE" ;; esac
BASE="${BASE%/}"
[ -n "$BASE" ] && [ "$BASE" != "/" ] || die "--dir must not be /"
# The path goes into pgbouncer.ini unquoted: keep it plain.
[[ "$BASE" =~ ^[A-Za-z0-9._/+-]+$ ]] \
  || die "--dir may hold only letters, digits and . _ / + -, got '$BASE'"

if [ -n "$PG_DIR" ]; then
  case "$PG_DIR" in /*) ;; *) PG_DIR="$PWD/$PG_DIR" ;; esac
  PG_DIR="${PG_DIR%/}"
fi

INI="$BASE/pgbouncer.ini"
AUTH_FILE="$BASE/userlist.txt"
LOGFILE="$BASE/pgbouncer.log"
PIDFILE="$BASE/pgbouncer.pid"

if [ "$(id -u)" -eq 0 ]; then
  IS_ROOT=1
  PG_OS_USER="${COORDINATOR_PG_OS_USER:-coordinator-pg}"
else
  IS_ROOT=0
  PG_OS_USER="$(id -un)"
fi

# ------------------------------------------------------------------ helpers

# Run a command as the unprivileged user (from /, whose cwd it can read),
# without our lock descriptor: a daemon that inherited fd 9 would hold the
# directory lock for as long as it runs.
as_pg() {
  if [ "$IS_ROOT" -eq 1 ]; then
    (cd / && runuser -u "$PG_OS_USER" -- "$@" 9>&-)
  else
    (cd / && "$@" 9>&-)
  fi
}

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

# Is PID a live pgbouncer process?
is_pgbouncer_pid() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(cat "/proc/$1/comm" 2>/dev/null || true)" = "pgbouncer" ]
}

ensure_pgbouncer() {
  if [ ! -x "$PGBOUNCER" ]; then
    [ "$IS_ROOT" -eq 1 ] \
      || die "$PGBOUNCER is missing and this is not root: run 'apt-get install $DEBIAN_PACKAGE' as root (or run this as root)"
    log "PgBouncer is not installed; installing Debian's $DEBIAN_PACKAGE"
    # Keep Debian from starting its own pgbouncer (127.0.0.1:6432) during
    # the install: a policy-rc.d that refuses service starts, only if none
    # is in place.
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [ ! -e "$policy" ]; then
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
    # Should a service have started anyway (a policy-rc.d that allows it),
    # stop the instance of Debian's configuration: it is not ours to keep.
    local distro_pid
    distro_pid="$(cat /run/postgresql/pgbouncer.pid 2>/dev/null || true)"
    if is_pgbouncer_pid "$distro_pid"; then
      log "stopping Debian's pgbouncer service (pid $distro_pid) started by the install"
      if command -v invoke-rc.d >/dev/null 2>&1; then
        invoke-rc.d --force pgbouncer stop >&2 2>&1 || kill -INT "$distro_pid" 2>/dev/null || true
      else
        kill -INT "$distro_pid" 2>/dev/null || true
      fi
    fi
    [ -x "$PGBOUNCER" ] || die "installed $DEBIAN_PACKAGE but $PGBOUNCER is still missing"
  fi
}

pgbouncer_version() {
  "$PGBOUNCER" --version 2>/dev/null | head -n1
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
  require_cmd runuser "runuser (util-linux) is needed to run PgBouncer as $PG_OS_USER"
}

# Make BASE ours (or refuse a directory that is not), owned by the user.
prepare_base() {
  if [ -e "$BASE" ] && [ ! -e "$BASE/$OWNER_MARK" ]; then
    if [ -n "$(ls -A "$BASE" 2>/dev/null)" ]; then
      die "$BASE exists, is not empty and was not made by this script; pick another --dir"
    fi
  fi
  mkdir -p "$BASE" || die "cannot create $BASE"
  touch "$BASE/$OWNER_MARK" "$LOGFILE"
  if [ "$IS_ROOT" -eq 1 ]; then
    chown "$PG_OS_USER:" "$BASE" "$BASE/$OWNER_MARK" "$LOGFILE"
  fi
  # The auth file holds plaintext passwords; only the owner enters D.
  chmod 0700 "$BASE"
  chmod 0640 "$LOGFILE"
  as_pg test -x "$PGBOUNCER" || die "$PG_OS_USER cannot run $PGBOUNCER"
  as_pg test -w "$BASE" \
    || die "$PG_OS_USER cannot write $BASE (is a parent directory private? pick another --dir)"
}

# Passwords of the three roles from P/credentials (scripts/postgres.sh).
load_pg_credentials() {
  local creds="$PG_DIR/credentials"
  [ -e "$creds" ] || die "no credentials in $PG_DIR (run 'scripts/postgres.sh start --dir $PG_DIR' first)"
  [ -r "$creds" ] || die "cannot read $creds (made by another user; run this as that user or root)"
  ADMIN_PASSWORD="$(sed -n 's/^ADMIN_PASSWORD=//p' "$creds")"
  MIGRATION_PASSWORD="$(sed -n 's/^MIGRATION_PASSWORD=//p' "$creds")"
  RUNTIME_PASSWORD="$(sed -n 's/^RUNTIME_PASSWORD=//p' "$creds")"
  [ -n "$ADMIN_PASSWORD" ] && [ -n "$MIGRATION_PASSWORD" ] && [ -n "$RUNTIME_PASSWORD" ] \
    || die "$creds is damaged"
}

# Passwords back from the auth file PgBouncer runs with (for `env`).
auth_file_password() {  # auth_file_password ROLE
  sed -n "s/^\"$1\" \"\\(.*\\)\"\$/\\1/p" "$AUTH_FILE" | sed 's/""/"/g' | head -n1
}

load_auth_file_credentials() {
  [ -r "$AUTH_FILE" ] || die "no auth file $AUTH_FILE (run '$PROG start' first)"
  ADMIN_PASSWORD="$(auth_file_password "$ADMIN_ROLE")"
  MIGRATION_PASSWORD="$(auth_file_password "$MIGRATION_ROLE")"
  RUNTIME_PASSWORD="$(auth_file_password "$RUNTIME_ROLE")"
  [ -n "$ADMIN_PASSWORD" ] && [ -n "$MIGRATION_PASSWORD" ] && [ -n "$RUNTIME_PASSWORD" ] \
    || die "$AUTH_FILE is damaged; run '$PROG start' again"
}

# Port of P's running server: line 4 of its postmaster.pid.
pg_cluster_port() {
  local pidf="$PG_DIR/data/postmaster.pid" p=""
  [ -r "$pidf" ] && p="$(sed -n 4p "$pidf" 2>/dev/null || true)"
  [[ "$p" =~ ^[0-9]+$ ]] \
    || die "no running PostgreSQL in $PG_DIR ($pidf missing): run 'scripts/postgres.sh start --dir $PG_DIR' first, or pass --target-port"
  printf '%s\n' "$p"
}

accepts_tcp() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

running_pid() {
  local pid=""
  [ -r "$PIDFILE" ] && pid="$(head -n1 "$PIDFILE" 2>/dev/null || true)"
  is_pgbouncer_pid "$pid" || return 1
  printf '%s\n' "$pid"
}

# The port in the configuration PgBouncer runs with, else --port.
listen_port() {
  local p=""
  [ -r "$INI" ] && p="$(sed -n 's/^listen_port *= *//p' "$INI" | head -n1)"
  if [[ "$p" =~ ^[0-9]+$ ]]; then printf '%s\n' "$p"; else printf '%s\n' "$PORT"; fi
}

# Write FILE (mode 0600, owned by the user) from stdin, atomically.
write_owned() {  # write_owned FILE < content
  local tmp="$1.tmp.$$"
  (umask 077 && cat >"$tmp") || die "cannot write $tmp"
  [ "$IS_ROOT" -eq 0 ] || chown "$PG_OS_USER:" "$tmp"
  chmod 0600 "$tmp"
  mv -f "$tmp" "$1" || die "cannot write $1"
}

auth_line() {  # auth_line ROLE PASSWORD   ("" doubles a quote)
  printf '"%s" "%s"\n' "$1" "${2//\"/\"\"}"
}

write_config() {  # write_config TARGET_PORT
  {
    auth_line "$ADMIN_ROLE" "$ADMIN_PASSWORD"
    auth_line "$MIGRATION_ROLE" "$MIGRATION_PASSWORD"
    auth_line "$RUNTIME_ROLE" "$RUNTIME_PASSWORD"
  } | write_owned "$AUTH_FILE"

  write_owned "$INI" <<EOF
; Written by $PROG for the PostgreSQL cluster in $PG_DIR.
; A throw-away test pooler: regenerated by every '$PROG start'.

[databases]
$DB_NAME = host=127.0.0.1 port=$1 dbname=$DB_NAME

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir = $BASE
logfile = $LOGFILE
pidfile = $PIDFILE

auth_type = scram-sha-256
auth_file = $AUTH_FILE
admin_users = $ADMIN_ROLE

pool_mode = transaction
default_pool_size = 10
max_client_conn = 500

; extra_float_digits is accepted and dropped; \`options\` is deliberately
; NOT listed: a client that sends it must be refused.
ignore_startup_parameters = extra_float_digits
EOF
}

print_env() {
  local port
  port="$(listen_port)"
  load_auth_file_credentials
  local hp="127.0.0.1:$port/$DB_NAME"
  printf "export COORDINATOR_POOLER_DATABASE_URL='postgres://%s:%s@%s'\n" "$ADMIN_ROLE" "$ADMIN_PASSWORD" "$hp"
  printf "export COORDINATOR_POOLER_MIGRATION_URL='postgres://%s:%s@%s'\n" "$MIGRATION_ROLE" "$MIGRATION_PASSWORD" "$hp"
  printf "export COORDINATOR_POOLER_RUNTIME_URL='postgres://%s:%s@%s'\n" "$RUNTIME_ROLE" "$RUNTIME_PASSWORD" "$hp"
}

# Serialise start/stop on one directory.
lock_base() {
  mkdir -p "$(dirname "$BASE")"
  exec 9>"$BASE.lock" || die "cannot create lock file $BASE.lock"
  flock 9
}

# ----------------------------------------------------------------- commands

# The log lines written since this start began (all of it on a reload).
LOG_OFFSET=0
STARTED=0
new_log() {
  tail -c +$((LOG_OFFSET + 1)) "$LOGFILE" 2>/dev/null || true
}

# Print the start's log, stop a pgbouncer this run started, and fail.
fail_start() {  # fail_start MESSAGE
  new_log | tail -n 20 >&2
  local p
  if [ "$STARTED" -eq 1 ] && p="$(running_pid)"; then
    kill -TERM "$p" 2>/dev/null || true
    wait_gone "$p" 5 || true
    rm -f "$PIDFILE"
  fi
  die "$1 (log: $LOGFILE)"
}

cmd_start() {
  if external_configured; then
    log "${URL_VARS[0]} is set: using that pooler, starting nothing"
    print_external_env
    return
  fi
  [ -n "$PG_DIR" ] || usage_error "start needs --pg-dir P (a scripts/postgres.sh cluster)"
  load_pg_credentials
  local target="$TARGET_PORT"
  [ -n "$target" ] || target="$(pg_cluster_port)"
  accepts_tcp "$target" \
    || log "warning: nothing accepts connections on 127.0.0.1:$target yet (the pooler starts anyway)"

  ensure_pgbouncer
  ensure_os_user
  # A start refused before its pooler runs leaves no directory it made.
  local made_base=0 made_lock=0
  [ -e "$BASE" ] || made_base=1
  [ -e "$BASE.lock" ] || made_lock=1
  trap 'rc=$?; if [ "$rc" -ne 0 ] && ! running_pid >/dev/null 2>&1; then
          [ "$made_base" -eq 0 ] || rm -rf "$BASE"; [ "$made_lock" -eq 0 ] || rm -f "$BASE.lock"; fi' EXIT
  lock_base
  prepare_base

  local pid
  if pid="$(running_pid)"; then
    local rp
    rp="$(listen_port)"
    [ "$rp" = "$PORT" ] || die "a pooler from $BASE already runs on port $rp (not $PORT); stop it first"
    write_config "$target"
    kill -HUP "$pid" || die "cannot reload pgbouncer (pid $pid)"
    log "already running (pid $pid): configuration rewritten and reloaded; forwarding to 127.0.0.1:$target"
  else
    if accepts_tcp "$PORT"; then
      die "port $PORT on 127.0.0.1 is taken by another program; use --port"
    fi
    rm -f "$PIDFILE"
    write_config "$target"
    LOG_OFFSET="$(stat -c %s "$LOGFILE" 2>/dev/null || echo 0)"
    STARTED=1
    log "starting $(pgbouncer_version) on 127.0.0.1:$PORT -> 127.0.0.1:$target (dir $BASE)"
    local out
    if ! out="$(as_pg "$PGBOUNCER" -d "$INI" 2>&1)"; then
      [ -z "$out" ] || printf '%s\n' "$out" >&2
      fail_start "pgbouncer failed to start"
    fi
    [ -z "$out" ] || printf '%s\n' "$out" >>"$LOGFILE"
  fi

  local waited=0
  until accepts_tcp "$PORT"; do
    waited=$((waited + 1))
    [ "$waited" -le $((START_TIMEOUT * 5)) ] \
      || fail_start "pgbouncer does not accept connections on 127.0.0.1:$PORT after ${START_TIMEOUT}s"
    # PgBouncer only warns when it cannot bind a listen address (and keeps
    # serving its Unix socket): treat that as the failure it is here.
    if [ "$STARTED" -eq 1 ] && new_log | grep -q "cannot listen on 127.0.0.1:$PORT:"; then
      fail_start "pgbouncer cannot listen on 127.0.0.1:$PORT"
    fi
    # Its pid file appears once it has daemonised; gone again = it died.
    if [ "$waited" -gt 10 ] && ! running_pid >/dev/null; then
      fail_start "pgbouncer exited during start-up"
    fi
    sleep 0.2
  done
  # PgBouncer listens before it writes its pid file (and a daemon's pid
  # file can lag its fork): give the file the same start-up time.
  local pid_waited=0
  until pid="$(running_pid)"; do
    pid_waited=$((pid_waited + 1))
    [ "$pid_waited" -le $((START_TIMEOUT * 5)) ] \
      || fail_start "port $PORT answers but the pgbouncer of $BASE does not run"
    sleep 0.2
  done
  log "ready: $(pgbouncer_version) (pid $pid) on 127.0.0.1:$PORT, transaction pooling, database $DB_NAME -> 127.0.0.1:$target"
  print_env
}

wait_gone() {  # wait_gone PID SECONDS
  local n=0
  while is_pgbouncer_pid "$1"; do
    n=$((n + 1))
    [ "$n" -le $(($2 * 5)) ] || return 1
    sleep 0.2
  done
}

cmd_stop() {
  if external_configured; then
    log "${URL_VARS[0]} is set: not stopping an outside pooler"
    return
  fi
  if [ ! -e "$BASE/$OWNER_MARK" ]; then
    log "nothing to stop in $BASE"
    return
  fi
  lock_base
  local pid
  if ! pid="$(running_pid)"; then
    log "not running (dir $BASE)"
    rm -f "$PIDFILE"
    return
  fi
  # SIGINT: safe shutdown (waits for transactions in progress to end);
  # SIGTERM: immediate shutdown, should a client hold a transaction open.
  kill -INT "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
    log "still running after SIGINT and ${STOP_TIMEOUT}s; sending SIGTERM"
    kill -TERM "$pid" 2>/dev/null || true
    wait_gone "$pid" "$STOP_TIMEOUT" || die "pgbouncer (pid $pid) does not stop (log: $LOGFILE)"
  fi
  rm -f "$PIDFILE"
  log "stopped (pid $pid; dir $BASE kept)"
}

cmd_status() {
  if external_configured; then
    log "${URL_VARS[0]} is set: tests use that pooler"
    return 0
  fi
  local pid
  if pid="$(running_pid)"; then
    log "running: $(pgbouncer_version) on 127.0.0.1:$(listen_port), pid $pid, dir $BASE"
    return 0
  fi
  if [ -e "$BASE/$OWNER_MARK" ]; then
    log "stopped (dir $BASE)"
  else
    log "not set up ($BASE)"
  fi
  return 3
}

cmd_env() {
  if external_configured; then
    print_external_env
    return
  fi
  running_pid >/dev/null \
    || die "no pooler runs from $BASE: run '$PROG start --pg-dir P' first"
  print_env
}

case "$CMD" in
  install) ensure_pgbouncer; log "ready: $(pgbouncer_version)" ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
esac
