#!/usr/bin/env bash
# A benchmark anyone can run: the starter workflow (`coordinatorctl init`,
# `follow-up`, `sendAfter` in the past so its timer is due at once) served by
# the release `coordinator` against `coordinator-sandbox`, on a throw-away
# PostgreSQL 17 with PRODUCTION durability (fsync, synchronous_commit and
# full_page_writes on) and pg_stat_statements loaded. Not a test: never run
# by scripts/test.sh or .ci/run.
#
#   scripts/bench.sh [--runs N] [--concurrency C] [--rounds R]
#                    [--warmup-runs N] [--latency-runs N] [--pgbench-seconds S]
#                    [--flow-rounds R] [--port P] [--keep]
#   scripts/bench.sh --scale N [--port P] [--keep]
#   scripts/bench.sh --soak DURATION [--soak-rate R] [--port P] [--keep]
#
# Without --scale or --soak it measures throughput and latency (below).
# `--scale N` (1,000 to 1,000,000) measures instead how the service's costs
# depend on the number of runs it holds: at 1k, 100k and 1M runs (the
# levels up to N, and N), as many runs waiting on a timer a day ahead and
# as many ended (cancelled), it prints admission p50/p99, a due run's CPU,
# `/metrics` and doctor p50/p99, the run list's first page p50/p99, one
# retention batch, the coordinator's RSS and the database's size, then each
# figure as a ratio to the first level's. `--soak DURATION` (`90m`, `1h`,
# `3600s`, `3600`) runs a day's faults in a few hours: two processes at
# half the throughput a first phase measured (or --soak-rate R runs/s), one
# of them killed (kill -9) and started again every 5 minutes, PostgreSQL
# restarted every 15 minutes, `/metrics` of each scraped every 15 s as
# Prometheus would; every 5 minutes it prints a row of what must not grow
# (scripts/bench-soak.sh), and at the end it checks that every admitted run
# finished or is held, and each message was sent once.
#
# It prints:
#  1. completed runs/s for --runs runs (2000) at --concurrency clients (16)
#     with one coordinator process, then --rounds times (2) with two and
#     with one again (each figure is the mean of its phases, so the order
#     of the phases favours neither setup), each run read back
#     `finished` (message-accepted) and Messaging's requests one per
#     idempotency key, none performed twice (from the sandbox's log);
#  2. p50/p99 admission-to-finished latency of one client in a closed loop
#     (start a run, then one GET with `Prefer: wait=60`, which the service
#     answers when the run ends, next), --latency-runs runs (200);
#  3. transactions and statements per run (pg_stat_database
#     xact_commit + xact_rollback, pg_stat_statements calls), WAL per run,
#     and the statements by calls per run;
#  4. CPU seconds per run of PostgreSQL (postmaster, its children and its
#     reaped children, /proc), of the coordinator process(es), of the
#     sandbox and of the load generator;
#  5. `pgbench -N -c 16 -T 15` tps on the same cluster, as a ratio to our
#     runs/s;
#  6. the cost of flow control and of tracing (scripts/bench-flow.sh),
#     measured after the rounds of 1. (before pgbench), --flow-rounds times
#     (2; 0 skips it): one process on four runtime files in turn, `off`
#     (the deployment's), `limits` (every connection with `limits:
#     {inFlight: 1000, perSecond: 10000}`, a limit no call reaches),
#     `traces` (`telemetry.traces.endpoint` at an OTLP/HTTP sink the load
#     generator runs, which counts the spans) and `both`; each restarted,
#     warmed up with --warmup-runs runs, then --runs runs at --concurrency
#     clients; runs/s of each (the mean of its rounds), each as a change
#     against `off` (the target: within 15%), and the spans per run the
#     sink received with traces on.

# What it starts, it stops at exit (also on failure or Ctrl-C): the
# coordinator processes, the sandbox, and the PostgreSQL cluster, which it
# deletes (scripts/postgres.sh destroy; its own port, default 54417, and
# directory /tmp/coordinator-bench-pg17-PORT, never the test server's).
# Each invocation starts from a new cluster and a new work directory, which
# is deleted after a success unless --keep (kept after a failure, for its
# logs). The release build shares the target directory: waiting on cargo's
# lock is normal.
#
# Needs: cargo, curl, pgbench (Debian 12 ships it in postgresql-15; any
# recent version talks to a 17 server), and what
# scripts/postgres.sh needs to install PostgreSQL 17 the first time (npm).
# The load generator is server/benches/throughput/ (main.rs and its modules).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PROG="bench.sh"

die() {
  printf '%s: error: %s\n' "$PROG" "$*" >&2
  exit 1
}
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
# shellcheck source=scripts/sandbox-deployment.sh
. "$root/scripts/sandbox-deployment.sh"

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
}

# ---------------------------------------------------------------- arguments
scale=0
soak=""
soak_rate=0
runs=2000
concurrency=16
latency_runs=200
# Warm-up runs before the first phase and again over both processes before
# the two-process one (not counted): each pooled connection plans each
# group statement five times before PostgreSQL keeps its generic plan
# (docs/service.md), so a process is warm once each of its connections has
# run each statement that often; 1,000 runs do that for either setup.
warmup_runs=1000
# Rounds of (two processes, one process again) after the first
# one-process phase: the shared machine drifts by more than the two
# setups differ (one run's two one-process phases 34% apart), so each
# setup's figure is the mean of several phases taken in turn.
rounds=2
# Rounds of (off, limits, traces, both) of scripts/bench-flow.sh; 0: none.
flow_rounds=2
pgbench_seconds=15
pg_port="${COORDINATOR_BENCH_PG_PORT:-54417}"
keep=0
number() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive number, got '$2'"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --soak)
      [ $# -ge 2 ] || die "--soak needs a duration (90m, 1h, 3600s)"
      [[ "$2" =~ ^([1-9][0-9]{0,5})([hms]?)$ ]] \
        || die "--soak needs a duration (90m, 1h, 3600s), got '$2'"
      case "${BASH_REMATCH[2]}" in
        h) soak=$(( BASH_REMATCH[1] * 3600 )) ;;
        m) soak=$(( BASH_REMATCH[1] * 60 )) ;;
        *) soak="${BASH_REMATCH[1]}" ;;
      esac
      shift 2
      ;;
    --runs|--concurrency|--rounds|--warmup-runs|--latency-runs|--pgbench-seconds|--port|--scale|--soak-rate)
      [ $# -ge 2 ] || die "$1 needs a value"
      number "$1" "$2"
      case "$1" in
        --runs) runs="$2" ;;
        --concurrency) concurrency="$2" ;;
        --rounds) rounds="$2" ;;
        --warmup-runs) warmup_runs="$2" ;;
        --latency-runs) latency_runs="$2" ;;
        --pgbench-seconds) pgbench_seconds="$2" ;;
        --scale) scale="$2" ;;
        --soak-rate) soak_rate="$2" ;;
        --port) pg_port="$2" ;;
      esac
      shift 2
      ;;
    --flow-rounds)
      [ $# -ge 2 ] || die "$1 needs a value"
      [[ "$2" =~ ^(0|[1-9][0-9]*)$ ]] || die "$1 needs a number (0 skips the flow phase), got '$2'"
      flow_rounds="$2"
      shift 2
      ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument '$1'" ;;
  esac
done
[ "$pg_port" -ge 1024 ] && [ "$pg_port" -le 65535 ] || die "--port must be 1024..65535"
[ "$scale" -eq 0 ] || { [ "$scale" -ge 1000 ] && [ "$scale" -le 1000000 ]; } \
  || die "--scale must be 1000 to 1000000, got '$scale'"
[ -z "$soak" ] || [ "$scale" -eq 0 ] || die "--scale and --soak are separate runs"
if [ "$flow_rounds" -gt 0 ] && [ "$scale" -eq 0 ] && [ -z "$soak" ]; then
  # shellcheck source=scripts/bench-flow.sh
  . "$root/scripts/bench-flow.sh"
  flow_check_environment
else
  flow_rounds=0
fi

# ------------------------------------------------------------ prerequisites
for tool in cargo curl getconf; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
pgbench_bin="$(command -v pgbench 2>/dev/null || true)"
if [ -z "$pgbench_bin" ]; then
  for candidate in /usr/lib/postgresql/*/bin/pgbench; do
    [ -x "$candidate" ] && pgbench_bin="$candidate"
  done
fi
[ -n "$pgbench_bin" ] \
  || die "pgbench not found: install it (Debian 12: apt-get install postgresql-15, which ships it)"
[ -r /proc/self/stat ] || die "/proc is needed to measure CPU"
clk_tck="$(getconf CLK_TCK)"

pg_dir="/tmp/coordinator-bench-pg17-$pg_port"
work="$(mktemp -d /tmp/coordinator-bench.XXXXXX)"
logs="$work/logs"
mkdir -m 0700 "$logs"
results="$work/results.txt"
: >"$results"

# The benchmark's cluster, never one named by the test variables.
pg_script() {
  env -u COORDINATOR_TEST_DATABASE_URL -u COORDINATOR_TEST_MIGRATION_URL \
    -u COORDINATOR_TEST_RUNTIME_URL COORDINATOR_PG_PROG="$PROG (postgres.sh)" \
    "$root/scripts/postgres.sh" "$@" --port "$pg_port" --dir "$pg_dir"
}

# ------------------------------------------------------------------ cleanup
coordinator_pids=()
sandbox_pid=""
otlp_sink_pid=""  # scripts/bench-flow.sh's OTLP sink
pg_started=0

stop_pid() {  # stop_pid PID: SIGTERM, up to 20 s, then SIGKILL
  local pid="$1"
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 80); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

stop_coordinators() {
  local pid
  for pid in "${coordinator_pids[@]}"; do
    stop_pid "$pid"
  done
  coordinator_pids=()
}

cleanup() {
  local rc=$?
  trap - ERR INT TERM
  set +e
  stop_coordinators
  stop_pid "$otlp_sink_pid"
  otlp_sink_pid=""
  stop_pid "$sandbox_pid"
  sandbox_pid=""
  if [ "$pg_started" -eq 1 ]; then
    pg_script destroy >>"$logs/postgres.log" 2>&1 || log "warning: could not destroy the cluster in $pg_dir"
  fi
  if [ "$rc" -ne 0 ]; then
    for f in "$logs"/coordinator-*.log "$logs/sandbox.log"; do
      if [ -s "$f" ]; then
        printf '\n--- last 15 lines of %s ---\n' "$f" >&2
        tail -n 15 "$f" >&2
      fi
    done
    printf '\n%s: failed (exit %s); logs kept in %s\n' "$PROG" "$rc" "$logs" >&2
  elif [ "$keep" -eq 1 ]; then
    log "work directory kept: $work"
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'printf "%s: error: line %s: \"%s\" failed\n" "$PROG" "$LINENO" "$BASH_COMMAND" >&2' ERR

# -------------------------------------------------------------------- build
log "building the release binaries and the load generator (cargo may wait for the target directory's lock)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" \
  -p registry-coordinator -p coordinator-fakes
target="$(cd "${CARGO_TARGET_DIR:-$root/target}" && pwd)"
# Copies of the binaries just built: building the bench next links them
# again with the dev-dependencies' features into the same place.
mkdir "$work/bin"
for bin in coordinatorctl coordinator coordinator-sandbox; do
  cp "$target/release/$bin" "$work/bin/$bin" || die "no $target/release/$bin after the build"
done
ctl="$work/bin/coordinatorctl"
coordinator="$work/bin/coordinator"
sandbox="$work/bin/coordinator-sandbox"
gen="$(cargo bench --no-run --quiet --manifest-path "$root/Cargo.toml" -p registry-coordinator \
  --bench throughput --message-format=json-render-diagnostics 2>"$logs/bench-build.log" \
  | sed -n 's/.*"name":"throughput".*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)" \
  || { cat "$logs/bench-build.log" >&2; die "building server/benches/throughput/ failed"; }
[ -n "$gen" ] && [ -x "$gen" ] || die "no executable of the throughput bench in cargo's output ($logs/bench-build.log)"

# ---------------------------------------------------------------- postgres
log "starting PostgreSQL 17 on 127.0.0.1:$pg_port (dir $pg_dir), production durability"
pg_started=1
pg_script destroy >>"$logs/postgres.log" 2>&1 || die "cannot clear $pg_dir (see $logs/postgres.log)"
pg_script start >/dev/null 2>>"$logs/postgres.log" || die "scripts/postgres.sh start failed (see $logs/postgres.log)"
# postgres.sh makes a test server (fsync off); an included file, read after
# its settings, restores production durability and loads pg_stat_statements.
conf="$pg_dir/data/postgresql.conf"
cat >"$pg_dir/data/bench.conf" <<'EOF'
# Written by scripts/bench.sh: production durability, statement statistics.
fsync = on
synchronous_commit = on
full_page_writes = on
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.max = 10000
pg_stat_statements.track = top
pg_stat_statements.track_utility = on
EOF
chown --reference="$conf" "$pg_dir/data/bench.conf"
chmod 0600 "$pg_dir/data/bench.conf"
grep -qx "include 'bench.conf'" "$conf" || printf "\ninclude 'bench.conf'\n" >>"$conf"
pg_script stop >>"$logs/postgres.log" 2>&1 || die "scripts/postgres.sh stop failed (see $logs/postgres.log)"
pg_env="$(pg_script start 2>>"$logs/postgres.log")" || die "scripts/postgres.sh start failed (see $logs/postgres.log)"
eval "$pg_env"
[ -n "${COORDINATOR_TEST_RUNTIME_URL:-}" ] && [ -n "${COORDINATOR_TEST_MIGRATION_URL:-}" ] \
  && [ -n "${COORDINATOR_TEST_DATABASE_URL:-}" ] || die "scripts/postgres.sh start printed no database URLs"
admin_url="$COORDINATOR_TEST_DATABASE_URL"
postmaster_pid="$(head -n 1 "$pg_dir/data/postmaster.pid")"
[[ "$postmaster_pid" =~ ^[0-9]+$ ]] || die "no postmaster pid in $pg_dir/data/postmaster.pid"

# ----------------------------------------------------------------- deploy
cd "$work"
"$ctl" init --directory follow-up >"$logs/init.txt"
"$ctl" package --project follow-up --output follow-up-package >"$logs/package.txt"
digest="$(sandbox_package_digest "$logs/package.txt")"
revision="$(sandbox_package_revision follow-up-package)"

sandbox_start "$sandbox" "$work/sandbox" "$logs/sandbox.log"

sandbox_write_secrets "$work/audit"
suffix="$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
runtime="$work/runtime.yaml"
sandbox_runtime_file follow-up/runtime.yaml "$runtime" "coordinator_bench_$suffix" "bench-$suffix" \
  "$work/follow-up-package" "$digest" "$work/audit"
"$ctl" --runtime-config "$runtime" apply >"$logs/apply.txt" 2>&1 \
  || { cat "$logs/apply.txt" >&2; die "coordinatorctl apply refused (above)"; }

# A second runtime file for the second process: other listener ports.
ports="$("$gen" free-ports 2)"
port2="$(printf '%s\n' "$ports" | sed -n 1p)"
metrics2="$(printf '%s\n' "$ports" | sed -n 2p)"
runtime2="$work/runtime-2.yaml"
sed -e "s|bind: 127.0.0.1:$SANDBOX_LISTENER_PORT\$|bind: 127.0.0.1:$port2|" \
    -e "s|bind: 127.0.0.1:$SANDBOX_METRICS_PORT\$|bind: 127.0.0.1:$metrics2|" \
    "$runtime" >"$runtime2"
grep -q "127.0.0.1:$port2" "$runtime2" || die "could not write the second runtime file ($runtime2)"

base1="http://127.0.0.1:$SANDBOX_LISTENER_PORT"
base2="http://127.0.0.1:$port2"

# start_coordinator N FILE BASE: starts process N, waits for /ready.
start_coordinator() {
  local n="$1" file="$2" base="$3" pid
  RUST_LOG="${RUST_LOG:-info,sqlx=warn}" "$coordinator" --runtime-config "$file" \
    >>"$logs/coordinator-$n.log" 2>&1 &
  pid=$!
  coordinator_pids+=("$pid")
  for _ in $(seq 1 240); do
    kill -0 "$pid" 2>/dev/null || die "coordinator $n exited before it was ready; see $logs/coordinator-$n.log"
    if curl -fsS --max-time 2 "$base/ready" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.25
  done
  die "coordinator $n did not answer /ready within 60 s; see $logs/coordinator-$n.log"
}

# gen_run SUBCOMMAND LABEL BASES... -- ARGS: the load generator against the
# coordinator processes running now.
phase=0
gen_run() {
  local sub="$1" label="$2"
  shift 2
  local bases=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    bases+=(--base "$1")
    shift
  done
  [ $# -gt 0 ] && shift
  local pids=() pid
  for pid in "${coordinator_pids[@]}"; do
    pids+=(--coordinator-pid "$pid")
  done
  phase=$((phase + 1))
  "$gen" "$sub" "${bases[@]}" "${pids[@]}" \
    --producer-token-file "$SANDBOX_PRODUCER_TOKEN_FILE" \
    --operator-token-file "$SANDBOX_OPERATOR_TOKEN_FILE" \
    --revision "$revision" --application-id "$SANDBOX_APPLICATION_ID" \
    --stats-url "$admin_url" --postmaster-pid "$postmaster_pid" \
    --sandbox-pid "$sandbox_pid" --sandbox-log "$logs/sandbox.log" \
    --clk-tck "$clk_tck" --results "$results" --label "$label" \
    --key-prefix "bench-$suffix-$phase" "$@"
}

result() {  # result KEY: a value the load generator kept
  sed -n "s/^$1=//p" "$results" | tail -n 1
}

# ------------------------------------------------------------------ phases
echo "Registry Coordinator benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
if commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null)"; then
  git -C "$root" diff --quiet HEAD 2>/dev/null || commit="$commit with local changes"
else
  commit="none ($root is no git checkout)"
fi
echo "build: release (cargo build --release -p registry-coordinator -p coordinator-fakes), commit $commit"
echo "workflow: starter follow-up (coordinatorctl init), sendAfter in the past; coordinator-sandbox stand-ins (issuer, BReg, Messaging) on this machine"
start_coordinator 1 "$runtime" "$base1"
gen_run preflight preflight "$base1"
"$pgbench_bin" --version | sed 's/^/client tools: /'
echo

if [ "$scale" -gt 0 ]; then
  gen_run scale scale "$base1" -- --up-to "$scale" --concurrency 32 \
    --metrics-url "http://127.0.0.1:$SANDBOX_METRICS_PORT/metrics"
  exit 0
fi
if [ -n "$soak" ]; then
  # shellcheck source=scripts/bench-soak.sh
  . "$root/scripts/bench-soak.sh"
  soak_phase "$soak" "$soak_rate"
  exit 0
fi

log "warm-up: $warmup_runs runs (not counted)"
gen_run throughput warmup "$base1" -- --runs "$warmup_runs" --concurrency "$concurrency" --top 0 >"$logs/warmup.txt"

gen_run throughput one "$base1" -- --runs "$runs" --concurrency "$concurrency"
echo
gen_run latency latency "$base1" -- --runs "$latency_runs"
echo
# Then --rounds times: two processes, and one process again. The tables
# grow from phase to phase and the shared machine drifts (one run measured
# 380 runs/s first and 342 after, another 443 first and 507 after), so
# each setup's figure is the mean of its phases, taken in turn.
for round in $(seq 1 "$rounds"); do
  start_coordinator 2 "$runtime2" "$base2"
  # The second process gets the warm-up the first had (its connections'
  # caches and kept plans), so the phase compares the two setups, not a
  # cold start.
  log "round $round of $rounds: warm-up of the two processes, $warmup_runs runs (not counted)"
  gen_run throughput "warmup2-$round" "$base1" "$base2" -- --runs "$warmup_runs" --concurrency "$concurrency" --top 0 >"$logs/warmup-2-$round.txt"
  gen_run throughput "two-$round" "$base1" "$base2" -- --runs "$runs" --concurrency "$concurrency"
  echo
  stop_pid "${coordinator_pids[1]}"
  coordinator_pids=("${coordinator_pids[0]}")
  echo "(one process again: the second process stopped)"
  gen_run throughput "again-$round" "$base1" -- --runs "$runs" --concurrency "$concurrency"
  echo
done
if [ "$flow_rounds" -gt 0 ]; then
  flow_phase "$flow_rounds"
fi

stop_coordinators
echo "== pgbench -N -c 16 -j 2 -T $pgbench_seconds (scale 10) on the same cluster, coordinators stopped"
pg_host="127.0.0.1"
pg_pass="${admin_url#*://*:}"
pg_pass="${pg_pass%%@*}"
PGPASSWORD="$pg_pass" "$pgbench_bin" -h "$pg_host" -p "$pg_port" -U coordinator_admin \
  -i -s 10 -q postgres >"$logs/pgbench-init.txt" 2>&1 \
  || { tail -n 20 "$logs/pgbench-init.txt" >&2; die "pgbench -i failed"; }
PGPASSWORD="$pg_pass" "$pgbench_bin" -h "$pg_host" -p "$pg_port" -U coordinator_admin \
  -N -c 16 -j 2 -T "$pgbench_seconds" postgres >"$logs/pgbench.txt" 2>&1 \
  || { tail -n 20 "$logs/pgbench.txt" >&2; die "pgbench failed"; }
tps="$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$logs/pgbench.txt" | head -n 1)"
[ -n "$tps" ] || { cat "$logs/pgbench.txt" >&2; die "no tps in pgbench's output"; }
grep -E '^(latency average|tps)' "$logs/pgbench.txt" | sed 's/^/  /'
# means KEY...: the mean of the kept values, and the values.
means() {
  local key values=()
  for key in "$@"; do
    values+=("$(result "$key")")
  done
  printf '%s\n' "${values[@]}" | awk '{ s += $1; n++; l = l (n > 1 ? ", " : "") $1 } END { printf "%.1f|%s", s / n, l }'
}
one_keys=(one.runs_per_s)
two_keys=()
for round in $(seq 1 "$rounds"); do
  one_keys+=("again-$round.runs_per_s")
  two_keys+=("two-$round.runs_per_s")
done
one_all="$(means "${one_keys[@]}")"
two_all="$(means "${two_keys[@]}")"
one="${one_all%%|*}"
two="${two_all%%|*}"
echo
echo "== summary"
awk -v one="$one" -v ones="${one_all#*|}" -v two="$two" -v twos="${two_all#*|}" -v tps="$tps" \
    -v tx="$(result one.transactions_per_run)" -v st="$(result one.statements_per_run)" \
    -v pgc="$(result one.postgres_cpu_s_per_run)" -v cc="$(result one.coordinator_cpu_s_per_run)" \
    -v all="$(result one.all_cpu_s_per_run)" -v cores="$(getconf _NPROCESSORS_ONLN)" \
    -v p50="$(result latency.p50_ms)" -v p99="$(result latency.p99_ms)" 'BEGIN {
  printf "  completed runs/s            1 process %.1f (mean of %s), 2 processes %.1f (mean of %s), 2 / 1 = %.2f\n", one, ones, two, twos, two / one
  printf "  admission to finished       p50 %s ms, p99 %s ms (1 client, closed loop)\n", p50, p99
  printf "  per run (1 process, first)  %s transactions, %s statements, %.1f ms postgres CPU, %.1f ms coordinator CPU\n", tx, st, pgc * 1000, cc * 1000
  printf "  CPU per run, all processes  %.1f ms (postgres, coordinator, sandbox, client): at most %.0f runs/s on %d cores\n", all * 1000, cores / all, cores
  printf "  pgbench -N tps              %.0f = %.1f x our 1-process runs/s, %.1f x our 2-process runs/s\n", tps, tps / one, tps / two
}'
if [ "$flow_rounds" -gt 0 ]; then
  flow_summary
fi
