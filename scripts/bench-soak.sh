# shellcheck shell=bash
# shellcheck disable=SC2154  # the variables bench.sh sets before sourcing this
# Sourced by scripts/bench.sh --soak DURATION [--soak-rate R] (not run on
# its own), once coordinator 1 serves and `preflight` passed; bench.sh then
# calls `soak_phase SECONDS RATE` (RATE 0: not given) and exits 0. It uses
# bench.sh's variables and functions: start_coordinator, stop_pid,
# coordinator_pids, gen_run, result, pg_script, log, die, $runtime,
# $runtime2, $base1, $base2, $SANDBOX_METRICS_PORT, $metrics2, $pg_dir,
# $postmaster_pid, $work, $logs.
#
# The split with the load generator (server/benches/throughput/soak.rs):
# this script owns the processes, the generator the load and the figures.
#
#  1. It starts coordinator 2; unless --soak-rate R was given, it measures
#     the maximum throughput first (one `throughput` phase over both
#     processes, 2000 runs at 16 clients) and takes half of its runs/s.
#  2. It starts `throughput soak` in the background against both
#     processes and injects the faults while it admits:
#       - every 5 minutes (at 4:00, 9:00, 14:00, ...: a minute before each
#         row) one coordinator is killed with `kill -9`, in turn 1, 2, 1,
#         ..., and started again at once (start_coordinator, the same
#         runtime file, waiting for /ready);
#       - every 15 minutes (at 7:30, 22:30, 37:30, ...: between two kills)
#         PostgreSQL is restarted (`pg_script stop`, then `start`); the
#         coordinators wait the outage out by themselves (/ready 503, then
#         200 again), which it waits for (at most 120 s) and times.
#     The current pids and fault counts go to "$work/soak-pids"
#     (`postmaster=`, one `coordinator=` per process in --base order,
#     `kills=`, `pg_restarts=`; written to a temporary file and renamed),
#     which the generator reads again at each row. A PostgreSQL restart
#     changes `postmaster_pid`, which is updated too.
#  3. After DURATION it injects nothing more; the generator drains (at
#     most 10 minutes), checks every run and every message, and prints its
#     summary; this script then lists the faults with their times. The
#     phase fails (bench.sh exits non-zero) if the generator does.
#
# The generator's rows and summary are its standard output; the faults are
# logged to $logs/soak-faults.log while it runs (so the rows stay one
# Markdown table) and printed after the summary.
#
# For a trial of the machinery in less time, the periods can be shortened
# (seconds): COORDINATOR_SOAK_KILL_EVERY (300), COORDINATOR_SOAK_RESTART_EVERY
# (900), COORDINATOR_SOAK_ROW_EVERY (300).

soak_kill_every="${COORDINATOR_SOAK_KILL_EVERY:-300}"
soak_restart_every="${COORDINATOR_SOAK_RESTART_EVERY:-900}"
soak_row_every="${COORDINATOR_SOAK_ROW_EVERY:-300}"
soak_pid_file="$work/soak-pids"
soak_faults="$logs/soak-faults.log"
soak_pids=()
soak_kills=0
soak_restarts=0
soak_gen=""
soak_t0_ms=0

soak_now_ms() { date +%s%3N; }

soak_mss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }  # soak_mss SECONDS

# soak_elapsed: m:ss since the generator started.
soak_elapsed() { soak_mss $((($(soak_now_ms) - soak_t0_ms) / 1000)); }

soak_fault() {  # soak_fault MESSAGE: one line of the faults' log
  printf '%s  %s\n' "$(soak_elapsed)" "$*" >>"$soak_faults"
}

soak_write_pids() {
  local p
  {
    printf 'postmaster=%s\n' "$postmaster_pid"
    for p in "${soak_pids[@]}"; do
      printf 'coordinator=%s\n' "$p"
    done
    printf 'kills=%s\npg_restarts=%s\n' "$soak_kills" "$soak_restarts"
  } >"$soak_pid_file.tmp"
  mv -f "$soak_pid_file.tmp" "$soak_pid_file"
}

# The generator runs in a background subshell (gen_run is a function):
# stop the generator itself (the subshell's child) before bench.sh's own
# cleanup, whatever ends the script. It also goes by itself once bench.sh
# is gone (--watch-pid).
soak_exit() {
  local rc=$? child
  # Without errexit or the ERR trap: `(exit "$rc")` below hands the
  # status on to bench.sh's cleanup, which reads it as its `$?`.
  set +e
  trap - ERR
  if [ -n "$soak_gen" ]; then
    for child in $(pgrep -P "$soak_gen" 2>/dev/null || true); do
      kill -TERM "$child" 2>/dev/null || true
    done
    stop_pid "$soak_gen"
    soak_gen=""
  fi
  (exit "$rc")
  cleanup
}

# soak_kill N: kill -9 coordinator N, start it again at once.
soak_kill() {
  local n="$1" i=$(($1 - 1)) file base old t0
  if [ "$n" -eq 1 ]; then file="$runtime" base="$base1"; else file="$runtime2" base="$base2"; fi
  old="${soak_pids[$i]}"
  t0="$(soak_now_ms)"
  kill -KILL "$old" 2>/dev/null || true
  wait "$old" 2>/dev/null || true
  start_coordinator "$n" "$file" "$base"
  soak_pids[i]="${coordinator_pids[${#coordinator_pids[@]}-1]}"
  coordinator_pids=("${soak_pids[@]}")
  soak_kills=$((soak_kills + 1))
  soak_write_pids
  soak_fault "kill -9 of coordinator $n (pid $old); started again as pid ${soak_pids[$i]}, /ready $(($(soak_now_ms) - t0)) ms after the kill"
}

# soak_restart_pg: pg_script stop, then start; waits for both /ready.
soak_restart_pg() {
  local t0 down up b ready
  t0="$(soak_now_ms)"
  pg_script stop >>"$logs/postgres.log" 2>&1 || die "PostgreSQL did not stop (see $logs/postgres.log)"
  down="$(soak_now_ms)"
  pg_script start >/dev/null 2>>"$logs/postgres.log" || die "PostgreSQL did not start again (see $logs/postgres.log)"
  up="$(soak_now_ms)"
  postmaster_pid="$(head -n 1 "$pg_dir/data/postmaster.pid")"
  [[ "$postmaster_pid" =~ ^[0-9]+$ ]] || die "no postmaster pid in $pg_dir/data/postmaster.pid after the restart"
  soak_restarts=$((soak_restarts + 1))
  soak_write_pids
  for b in "$base1" "$base2"; do
    ready=0
    for _ in $(seq 1 480); do
      if curl -fsS --max-time 2 "$b/ready" >/dev/null 2>&1; then
        ready=1
        break
      fi
      sleep 0.25
    done
    [ "$ready" -eq 1 ] || die "$b/ready not 200 within 120 s of PostgreSQL's restart"
  done
  soak_fault "PostgreSQL restarted: stopped in $((down - t0)) ms, started in $((up - down)) ms (postmaster pid $postmaster_pid); both /ready 200 again $(( $(soak_now_ms) - t0 )) ms after the stop began"
}

# soak_phase SECONDS RATE
soak_phase() {
  local seconds="$1" rate="$2" namespace now next_kill next_restart victim=1 rc=0 v

  for v in "$soak_kill_every" "$soak_restart_every" "$soak_row_every"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "the COORDINATOR_SOAK_*_EVERY periods are seconds (a positive number), got '$v'"
  done
  next_kill=$((soak_kill_every - soak_kill_every / 5))
  next_restart=$((soak_restart_every - soak_restart_every / 2))

  start_coordinator 2 "$runtime2" "$base2"
  soak_pids=("${coordinator_pids[@]}")
  [ "${#soak_pids[@]}" -eq 2 ] || die "expected two coordinator processes, have ${#soak_pids[@]}"
  if [ "$rate" = 0 ]; then
    log "soak: measuring the maximum throughput of the two processes first"
    gen_run throughput soak-max "$base1" "$base2" -- --runs 2000 --concurrency 16 --top 0
    echo
    rate="$(result soak-max.runs_per_s)"
    [ -n "$rate" ] || die "the throughput phase kept no runs/s"
    rate="$(awk -v r="$rate" 'BEGIN { printf "%.1f", r / 2 }')"
    echo "soak rate: half of the measured maximum: $rate runs/s"
  else
    echo "soak rate: $rate runs/s (--soak-rate)"
  fi
  namespace="$(sed -n 's/^namespace: *//p' "$runtime" | head -n 1)"
  [ -n "$namespace" ] || die "no namespace in $runtime"
  echo "faults: kill -9 of one coordinator every $soak_kill_every s from $(soak_mss "$next_kill") (in turn, started again at once), PostgreSQL restarted every $soak_restart_every s from $(soak_mss "$next_restart"); their list after the summary"
  soak_write_pids
  : >"$soak_faults"

  trap soak_exit EXIT
  soak_t0_ms="$(soak_now_ms)"
  gen_run soak soak "$base1" "$base2" -- --seconds "$seconds" --rate "$rate" \
    --metrics-url "http://127.0.0.1:$SANDBOX_METRICS_PORT/metrics" \
    --metrics-url "http://127.0.0.1:$metrics2/metrics" \
    --pid-file "$soak_pid_file" --namespace "$namespace" \
    --report-every "$soak_row_every" --watch-pid "$$" &
  soak_gen=$!

  while kill -0 "$soak_gen" 2>/dev/null; do
    now=$((($(soak_now_ms) - soak_t0_ms) / 1000))
    [ "$now" -lt "$seconds" ] || break
    if [ "$now" -ge "$next_restart" ]; then
      soak_restart_pg
      next_restart=$((next_restart + soak_restart_every))
    elif [ "$now" -ge "$next_kill" ]; then
      soak_kill "$victim"
      victim=$((3 - victim))
      next_kill=$((next_kill + soak_kill_every))
    fi
    sleep 1
  done

  wait "$soak_gen" || rc=$?
  soak_gen=""
  echo
  echo "faults injected ($soak_kills kill -9, $soak_restarts PostgreSQL restarts; m:ss after the start):"
  sed 's/^/  /' "$soak_faults"
  [ "$rc" -eq 0 ] || die "the soak failed (exit $rc; above)"
}
